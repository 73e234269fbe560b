//! How far to trust a model-made result (issue 47): a trained evaluator's or grader's
//! measured quality, read from its folder's `train_log.json` (`medrank train` and the
//! page's training write it), goes beside every result the model makes (the report's
//! provenance, in the CLI's JSON and the page's tabs), and a model that does no better than
//! what learns nothing, or was measured on too few dev examples, is said to be so in the
//! report's warnings. A model without a log (a published one) has no measured quality here.

use serde::Serialize;

use crate::eval::proxy::HumanAgreement;
use crate::eval::rubric_agreement::{RubricAgreementReport, LONE_MET};
use crate::stats::Stat;
use crate::train::{Baseline, SelectBy};
use crate::{Error, Result, Warning};

/// Fewer dev examples than this and a dev figure says next to nothing: one example more
/// or less right moves accuracy by more than 10 points.
pub const MIN_DEV_EXAMPLES: usize = 10;

/// A trained model's dev figures, the baselines beside them, and whether to trust it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelQuality {
    /// The task it was trained for (`misinformation`, `nli`, `criterion`, `mcqa`), if logged.
    pub task: Option<String>,
    /// The dev metric that picked the epoch, and its value there.
    pub metric: String,
    pub dev_metric: f64,
    /// `None` for a score model (a regression has no accuracy; its log says null).
    pub dev_accuracy: Option<f64>,
    /// What a model that learnt nothing scores in the picking metric (the majority class,
    /// or chance for multiple choice), and which it is.
    pub baseline: Option<f64>,
    pub baseline_kind: Option<String>,
    /// Dev accuracy of a uniform guess, and of always predicting the most frequent label.
    pub chance_accuracy: Option<f64>,
    pub majority_accuracy: Option<f64>,
    pub train_examples: Option<usize>,
    pub dev_examples: Option<usize>,
    /// Why its results are not to be trusted (no better than its baseline, too few dev
    /// examples); `None` when neither holds.
    pub untrusted: Option<String>,
    /// The figures in words, as the page's tabs and the CLI's provenance show them.
    pub text: String,
}

impl ModelQuality {
    /// The quality a `train_log.json` records; `name` (the file) names it in errors.
    pub fn from_train_log(name: &str, bytes: &[u8]) -> Result<ModelQuality> {
        let log: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| Error::in_file(name, format!("not JSON ({e})")))?;
        let number = |key: &str| log.get(key).and_then(serde_json::Value::as_f64);
        let field = |key: &str| Error::in_file(name, format!("field `{key}`: missing or not a number"));
        let metric = match log.get("select_by").and_then(serde_json::Value::as_str) {
            Some(name) => SelectBy::parse(name).map_err(|_| field("select_by"))?,
            None => return Err(field("select_by")),
        };
        let dev_metric = number("best_dev_metric").ok_or_else(|| field("best_dev_metric"))?;
        let dev_accuracy = match number("best_dev_accuracy") {
            None if metric != SelectBy::Spearman => return Err(field("best_dev_accuracy")),
            accuracy => accuracy,
        };
        let majority_accuracy = number("dev_majority_rate");
        let logged = log.get("dev_baseline").filter(|b| !b.is_null());
        let (baseline, baseline_kind) = match logged {
            Some(b) => (
                b.get("metric").and_then(serde_json::Value::as_f64),
                b.get("kind").and_then(serde_json::Value::as_str).map(str::to_string),
            ),
            // A log from before the baseline was written: accuracy's majority baseline is
            // the majority rate it does record.
            None if metric == SelectBy::Accuracy => (majority_accuracy, majority_accuracy.map(|_| "majority".into())),
            None => (None, None),
        };
        let examples = |split: &str| {
            log.pointer(&format!("/data/{split}/examples")).and_then(serde_json::Value::as_u64).map(|n| n as usize)
        };
        let (train_examples, dev_examples) = (examples("train"), examples("dev"));
        let below = baseline.zip(baseline_kind.as_deref()).and_then(|(b, kind)| {
            let line = Baseline { kind: "", label: None, metric: b, accuracy: f64::NAN };
            line.not_beaten_by(metric, dev_metric).then(|| {
                format!("its dev {} {dev_metric:.3} is no better than {} ({b:.3})", metric.name(), baseline_words(kind))
            })
        });
        let few = dev_examples.filter(|&n| n < MIN_DEV_EXAMPLES).map(|n| {
            format!("it was measured on {n} dev examples (fewer than {MIN_DEV_EXAMPLES} say next to nothing)")
        });
        let untrusted = match (below, few) {
            (Some(a), Some(b)) => Some(format!("{a}, and {b}")),
            (a, b) => a.or(b),
        };
        let mut quality = ModelQuality {
            task: log.get("task").and_then(serde_json::Value::as_str).map(str::to_string),
            metric: metric.name().to_string(),
            dev_metric,
            dev_accuracy,
            baseline,
            baseline_kind,
            chance_accuracy: number("dev_chance_accuracy"),
            majority_accuracy,
            train_examples,
            dev_examples,
            untrusted,
            text: String::new(),
        };
        quality.text = quality.describe();
        Ok(quality)
    }

    /// "dev macro-F1 0.709 (the majority-class baseline 0.333; dev accuracy 0.720, chance
    /// accuracy 0.333, majority-class accuracy 0.500) on 60 dev examples, trained on 240".
    fn describe(&self) -> String {
        let mut beside = Vec::new();
        if let (Some(b), Some(kind)) = (self.baseline, &self.baseline_kind) {
            beside.push(format!("{} {b:.3}", baseline_words(kind)));
        }
        // Accuracy beside, with what a guess and the majority class score in it.
        let mut accuracy = Vec::new();
        if let Some(a) = self.dev_accuracy.filter(|_| self.metric != SelectBy::Accuracy.name()) {
            accuracy.push(format!("dev accuracy {a:.3}"));
        }
        if let Some(c) = self.chance_accuracy {
            accuracy.push(format!("chance accuracy {c:.3}"));
        }
        if let Some(m) = self.majority_accuracy {
            accuracy.push(format!("majority-class accuracy {m:.3}"));
        }
        if !accuracy.is_empty() {
            beside.push(accuracy.join(", "));
        }
        let mut text = format!("dev {} {:.3}", self.metric, self.dev_metric);
        if !beside.is_empty() {
            text += &format!(" ({})", beside.join("; "));
        }
        match (self.dev_examples, self.train_examples) {
            (Some(d), Some(t)) => text += &format!(" on {d} dev examples, trained on {t}"),
            (Some(d), None) => text += &format!(" on {d} dev examples"),
            (None, Some(t)) => text += &format!(", trained on {t} examples"),
            (None, None) => {}
        }
        text
    }

    /// The warning a report carries for an untrusted model (the same words in both front
    /// ends, which name a model differently).
    pub fn warning(&self) -> Option<String> {
        self.untrusted.as_ref().map(|why| {
            format!(
                "the model's results are not to be trusted: {why} ({}); train it on more data or use another model",
                self.text
            )
        })
    }
}

/// How a model-made result agrees with people's labels beside it in the input (issue 47,
/// item 1): a grader's verdicts against people's `met_by`, an evaluator's ranking against
/// people's rankings. The figure is chance-corrected (Cohen's kappa, Kendall's tau-b), so 0
/// is what labels or an order drawn at random reach; at or below it (within half a point,
/// as a dev figure against its baseline: `train::BASELINE_TOLERANCE`) the result is marked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeopleAgreement {
    /// The figures in words, with chance and how many labels they rest on.
    pub text: String,
    /// Why the result is not to be trusted (no better than chance); `None` otherwise, or
    /// when the figure is undefined.
    pub untrusted: Option<String>,
}

/// A chance-corrected figure (0 = chance) that says the rater is no better than chance.
fn no_better_than_chance(figure: f64) -> bool {
    figure <= crate::train::BASELINE_TOLERANCE
}

impl PeopleAgreement {
    /// A rubric grader against the people who judged the same criteria, over every judged
    /// criterion (the report's `all` group); `None` without a grader.
    pub fn of_grader(report: &RubricAgreementReport) -> Option<PeopleAgreement> {
        let all = report.groups.first()?;
        let grader = all.grader.as_ref()?;
        let who = match &report.human_graders[..] {
            [one] if one == LONE_MET => "the file's `met`".to_string(),
            [one] => one.clone(),
            many => format!("{} people ({})", many.len(), many.join(", ")),
        };
        let colleagues = match all.human_mean_macro_f1.value() {
            Some(m) => format!("; the people with each other: macro-F1 {m:.3}"),
            None => String::new(),
        };
        let text = format!(
            "Cohen's \u{3ba} {} (0 = chance, 1 = full agreement) and macro-F1 {} against {who} on the {} criteria \
             judged, over {} pairs of labels{colleagues}",
            stat_words(&grader.kappa),
            stat_words(&grader.macro_f1),
            all.items,
            grader.pairs,
        );
        let untrusted = grader.kappa.value().filter(|&&k| no_better_than_chance(k)).map(|k| {
            format!(
                "its Cohen's \u{3ba} {k:.3} is no better than chance (0): it agrees with people's judgements no more \
                 than labels drawn at random would"
            )
        });
        Some(PeopleAgreement { text, untrusted })
    }

    /// An evaluator's ranking of one task against people's rankings of the same systems;
    /// `None` without them.
    pub fn of_ranking(human: Option<&HumanAgreement>) -> Option<PeopleAgreement> {
        let tau = &human?.kendall_tau_b;
        let text = match tau {
            Stat::Defined(k) => format!(
                "Kendall's \u{3c4}-b {:.3} between its scores and the people's mean ranks (0 = chance, 1 = the same \
                 order; p = {}) over {} systems",
                k.tau,
                crate::report::fmt_p_value(k.p_value, crate::report::PValueDigits::Page),
                k.n
            ),
            Stat::Undefined(why) => format!("Kendall's \u{3c4}-b undefined ({why})"),
        };
        let untrusted = tau.value().filter(|k| no_better_than_chance(k.tau)).map(|k| {
            format!(
                "its Kendall's \u{3c4}-b {:.3} is no better than chance (0): it orders the systems no more like the \
                 people than a random order would",
                k.tau
            )
        });
        Some(PeopleAgreement { text, untrusted })
    }

    /// The warning a report carries when the result agrees with people no better than
    /// chance; `what_is` names the result with its verb ("the grader's verdicts are").
    pub fn warning(&self, what_is: &str) -> Option<Warning> {
        self.untrusted.as_ref().map(|why| Warning::new(format!("{what_is} not to be trusted: {why} ({})", self.text)))
    }
}

/// A figure to 3 decimals, or "undefined (reason)".
fn stat_words(s: &Stat<f64>) -> String {
    match s {
        Stat::Defined(v) => format!("{v:.3}"),
        Stat::Undefined(why) => format!("undefined ({why})"),
    }
}

/// The baseline's kind in words.
fn baseline_words(kind: &str) -> &'static str {
    match kind {
        "majority" => "the majority-class baseline",
        _ => "chance",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grader: trained in the page on HealthBench's meta-evaluation example,
    /// 9 training and 2 dev examples, dev macro-F1 0.3333 against a majority baseline of 1.
    fn grader_log() -> serde_json::Value {
        serde_json::json!({
            "task": "criterion", "select_by": "macro_f1", "best_dev_metric": 1.0 / 3.0,
            "best_dev_accuracy": 0.5, "dev_majority_rate": 1.0,
            "dev_baseline": {"kind": "majority", "label": "met", "metric": 1.0, "accuracy": 1.0},
            "dev_chance_accuracy": 0.5,
            "data": {"train": {"examples": 9}, "dev": {"examples": 2}}
        })
    }

    #[test]
    fn a_model_at_its_baseline_on_two_dev_examples_is_untrusted_on_both_counts() {
        let q = ModelQuality::from_train_log("train_log.json", grader_log().to_string().as_bytes()).unwrap();
        assert_eq!(
            q.text,
            "dev macro-F1 0.333 (the majority-class baseline 1.000; dev accuracy 0.500, chance accuracy 0.500, majority-class accuracy 1.000) on 2 dev examples, trained on 9"
        );
        assert_eq!(
            q.untrusted.as_deref(),
            Some("its dev macro-F1 0.333 is no better than the majority-class baseline (1.000), and it was measured on 2 dev examples (fewer than 10 say next to nothing)")
        );
    }

    #[test]
    fn a_model_above_its_baseline_on_enough_dev_examples_is_trusted() {
        let mut log = grader_log();
        log["best_dev_metric"] = 0.709.into();
        log["dev_baseline"]["metric"] = 0.333.into();
        log["data"]["dev"]["examples"] = 60.into();
        let q = ModelQuality::from_train_log("train_log.json", log.to_string().as_bytes()).unwrap();
        assert_eq!(q.untrusted, None);
        assert_eq!(q.warning(), None);
        // Within half a point of the baseline counts as no better (train::BASELINE_TOLERANCE).
        log["best_dev_metric"] = 0.337.into();
        let q = ModelQuality::from_train_log("train_log.json", log.to_string().as_bytes()).unwrap();
        assert!(q.untrusted.unwrap().starts_with("its dev macro-F1 0.337 is no better than"));
    }

    #[test]
    fn an_older_log_without_the_baseline_falls_back_to_the_majority_rate_for_accuracy() {
        let log = serde_json::json!({"select_by": "accuracy", "best_dev_metric": 0.6, "best_dev_accuracy": 0.6,
            "dev_majority_rate": 0.625, "data": {"train": {"examples": 80}, "dev": {"examples": 40}}});
        let q = ModelQuality::from_train_log("train_log.json", log.to_string().as_bytes()).unwrap();
        assert_eq!(q.baseline, Some(0.625));
        assert_eq!(
            q.text,
            "dev accuracy 0.600 (the majority-class baseline 0.625; majority-class accuracy 0.625) on 40 dev examples, trained on 80"
        );
        assert!(q.untrusted.is_some());
        let bad = ModelQuality::from_train_log("dir/train_log.json", b"{\"select_by\": \"accuracy\"}").unwrap_err();
        assert_eq!(bad.to_string(), "dir/train_log.json: field `best_dev_metric`: missing or not a number");
    }

    /// examples/rubric's judged.jsonl (three people's `met_by`) against the grader's file
    /// `grader`.
    fn grader_against_people(grader: &str) -> RubricAgreementReport {
        let judged = include_str!("../../examples/rubric/judged.jsonl");
        crate::eval::rubric_agreement::agreement(("judged.jsonl", judged), Some(("grader.jsonl", grader))).unwrap()
    }

    #[test]
    fn a_graders_agreement_with_people_is_said_with_chance_and_marked_at_chance() {
        // The figures are eval::rubric_agreement's (its test checks them against
        // scikit-learn): kappa 0.2222, macro-F1 0.6099 over 54 pairs on 23 criteria, the
        // three people's mean macro-F1 0.7213.
        let r = grader_against_people(include_str!("../../examples/rubric/grader.jsonl"));
        let a = PeopleAgreement::of_grader(&r).unwrap();
        assert_eq!(
            a.text,
            "Cohen's \u{3ba} 0.222 (0 = chance, 1 = full agreement) and macro-F1 0.610 against 3 people (p1, p2, p3) on \
             the 23 criteria judged, over 54 pairs of labels; the people with each other: macro-F1 0.721"
        );
        assert_eq!(a.untrusted, None);
        assert_eq!(a.warning("the grader's verdicts are"), None);
        // A grader that never says met: kappa 0 (by hand: it agrees on the 27 pairs the
        // people said not met, p_o = 0.5, and chance p_e = 0.5 * 1 + 0.5 * 0 = 0.5).
        let never = include_str!("../../examples/rubric/grader.jsonl").replace("\"met\": true", "\"met\": false");
        let a = PeopleAgreement::of_grader(&grader_against_people(&never)).unwrap();
        assert!(a.text.starts_with("Cohen's \u{3ba} 0.000 (0 = chance, 1 = full agreement) and macro-F1 undefined (the rater judged no criterion met here) against 3 people"), "{}", a.text);
        let why = "its Cohen's \u{3ba} 0.000 is no better than chance (0): it agrees with people's judgements no more than labels drawn at random would";
        assert_eq!(a.untrusted.as_deref(), Some(why));
        assert_eq!(
            a.warning("the grader's verdicts are").unwrap().to_string(),
            format!("the grader's verdicts are not to be trusted: {why} ({})", a.text)
        );
        // The job says it in the report's warnings (the CLI's and the page's).
        let req = crate::jobs::rubric_agreement::RubricAgreementRequest {
            file: crate::jobs::NamedText::new("judged.jsonl", include_str!("../../examples/rubric/judged.jsonl")),
            grader_file: Some(crate::jobs::NamedText::new("never.jsonl", &never)),
        };
        let warnings = crate::jobs::rubric_agreement::rubric_agreement(&req).unwrap().report.warnings;
        assert!(warnings.iter().any(|w| w.message.contains(why)), "{warnings:?}");
        // Without a grader there is nothing to say.
        let people = crate::eval::rubric_agreement::agreement(
            ("judged.jsonl", include_str!("../../examples/rubric/judged.jsonl")),
            None,
        )
        .unwrap();
        assert_eq!(PeopleAgreement::of_grader(&people), None);
    }

    #[test]
    fn a_rankings_agreement_with_people_is_marked_at_or_below_chance() {
        use crate::stats::kendall::{Kendall, PValueMethod};
        let human = |tau: Stat<Kendall>| HumanAgreement {
            systems: Vec::new(),
            kendall_tau_b: tau,
            friedman: Stat::undefined("not needed here"),
            friedman_blocks: 0,
            friedman_incomplete_blocks: 0,
            krippendorff_alpha_ordinal: Stat::undefined("not needed here"),
            rows_excluded: 0,
        };
        let kendall = |tau| Stat::Defined(Kendall { tau, p_value: 0.2333, n: 5, method: PValueMethod::Exact });
        assert_eq!(PeopleAgreement::of_ranking(None), None);
        let a = PeopleAgreement::of_ranking(Some(&human(kendall(0.6)))).unwrap();
        assert_eq!(
            a.text,
            "Kendall's \u{3c4}-b 0.600 between its scores and the people's mean ranks (0 = chance, 1 = the same order; \
             p = 0.2333) over 5 systems"
        );
        assert_eq!(a.untrusted, None);
        // At or below 0, within half a point as a dev figure against its baseline.
        for tau in [-0.2, 0.0, 0.004] {
            let a = PeopleAgreement::of_ranking(Some(&human(kendall(tau)))).unwrap();
            assert!(
                a.untrusted.as_deref().unwrap().contains("is no better than chance (0): it orders the systems"),
                "{tau}"
            );
        }
        let a = PeopleAgreement::of_ranking(Some(&human(Stat::undefined("every score is tied")))).unwrap();
        assert_eq!((a.text.as_str(), a.untrusted), ("Kendall's \u{3c4}-b undefined (every score is tied)", None));
    }

    #[test]
    fn a_score_models_log_has_no_accuracy_and_no_baseline() {
        // `medrank train --task score` writes null for both (a regression has no accuracy,
        // a constant prediction no Spearman).
        let log = serde_json::json!({"task": "score", "select_by": "spearman", "best_dev_metric": 0.4483,
            "best_dev_accuracy": null, "dev_baseline": null, "dev_majority_rate": null, "dev_chance_accuracy": null,
            "data": {"train": {"examples": 150}, "dev": {"examples": 60}}});
        let q = ModelQuality::from_train_log("train_log.json", log.to_string().as_bytes()).unwrap();
        assert_eq!((q.dev_accuracy, q.baseline, q.untrusted.as_deref()), (None, None, None));
        assert_eq!(q.text, "dev Spearman 0.448 on 60 dev examples, trained on 150");
        // Another task's log still needs its accuracy.
        let mut other = log.clone();
        other["select_by"] = "macro_f1".into();
        let e = ModelQuality::from_train_log("train_log.json", other.to_string().as_bytes()).unwrap_err();
        assert_eq!(e.to_string(), "train_log.json: field `best_dev_accuracy`: missing or not a number");
    }
}
