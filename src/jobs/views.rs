//! The page's view models of the methods' reports: what the NRP, rubric and agreement tabs
//! draw, computed here so that `www/results.js` only draws (tables, SVG charts) and formats
//! numbers for display; p-values are written by the tables' rule (`report::fmt_p_value`).
//! A job's own report's views live in its file (`evaluate::views`, `grade`).
//!
//! A view copies or joins what the report holds; it never changes a number. Field names
//! are the page's (snake case, as JSON).

use serde::Serialize;
use std::collections::BTreeMap;

use crate::eval::nrp::fusion::Scope;
use crate::eval::nrp::NrpReport;
use crate::eval::rubric::SystemScore;
use crate::eval::rubric_agreement::{PairAgreement, RubricAgreementReport};
use crate::jobs::quality::PeopleAgreement;
use crate::stats::{Interval, Stat};

/// A statistic's value, `None` where it is undefined.
pub fn value(s: &Stat<f64>) -> Option<f64> {
    s.value().copied()
}

/// An interval's bounds as a row of a view has them (`lo`, `hi`), `None` where it is
/// undefined.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Bounds {
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

pub fn bounds(s: &Stat<Interval>) -> Bounds {
    s.value().map_or(Bounds { lo: None, hi: None }, |i| Bounds { lo: Some(i.lo), hi: Some(i.hi) })
}

// ------------------------------------------------------------------ NRP --------------------

/// The NRP tab: the weights' sliders, the per-model bars and table, the rankers'
/// validation, the expert agreement with its pairwise comparisons, the unscored documents.
#[derive(Debug, Serialize)]
pub struct NrpView<'a> {
    pub dimensions: Vec<&'a str>,
    pub weights: BTreeMap<&'a str, f64>,
    pub groups: Vec<NrpGroupRow<'a>>,
    pub rankers: Vec<NrpRankerRow<'a>>,
    pub agreement: Vec<NrpAgreementRow<'a>>,
    /// `better[row][column]`: the probability that the row's ranker agrees better with the
    /// expert than the column's (the report's pairs and their complements).
    pub better: BTreeMap<&'a str, BTreeMap<&'a str, Option<f64>>>,
    pub unscored: &'a crate::eval::nrp::Unscored,
    pub unscored_per_dimension: Vec<NrpUnscoredRow<'a>>,
    pub ranker_names: Vec<&'a str>,
    pub ties: &'a crate::eval::nrp::TiePolicy,
    pub denominator: &'a crate::eval::nrp::Denominator,
}

#[derive(Debug, Serialize)]
pub struct NrpGroupRow<'a> {
    pub system: &'a str,
    pub prompt: &'a str,
    pub mean: Option<f64>,
    #[serde(flatten)]
    pub interval: Bounds,
    pub n: usize,
    pub per_dimension: BTreeMap<&'a str, Option<f64>>,
}

#[derive(Debug, Serialize)]
pub struct NrpRankerRow<'a> {
    pub dimension: &'a str,
    pub ranker: &'a str,
    pub ndcg: Option<f64>,
    pub chosen: bool,
}

#[derive(Debug, Serialize)]
pub struct NrpAgreementRow<'a> {
    pub ranker: &'a str,
    pub mean: &'a Stat<f64>,
    #[serde(flatten)]
    pub interval: Bounds,
    pub queries: usize,
    pub chosen_for: &'a [String],
    pub fusion_scope: Option<&'a crate::eval::nrp::fusion::Scope>,
    /// For a fusion ranker, where its components rank an item, in words.
    pub fusion_scope_words: Option<&'static str>,
}

#[derive(Debug, Serialize)]
pub struct NrpUnscoredRow<'a> {
    pub dimension: &'a str,
    pub ranker: &'a str,
    pub documents: usize,
    pub queries: usize,
}

pub fn nrp_view(report: &NrpReport) -> NrpView<'_> {
    let dimensions: Vec<&str> = report.dimensions.iter().map(|d| d.dimension.as_str()).collect();
    let mut better: BTreeMap<&str, BTreeMap<&str, Option<f64>>> = BTreeMap::new();
    for c in &report.agreement_comparisons {
        let p = value(&c.probability_better);
        better.entry(&c.ranker).or_default().insert(&c.other, p);
        better.entry(&c.other).or_default().insert(&c.ranker, p.map(|p| 1.0 - p));
    }
    NrpView {
        weights: report.dimensions.iter().map(|d| (d.dimension.as_str(), d.weight)).collect(),
        groups: report
            .groups
            .iter()
            .map(|g| {
                let interval = bounds(&g.interval);
                NrpGroupRow {
                    system: &g.system,
                    prompt: &g.prompt,
                    mean: value(&g.mean),
                    interval,
                    n: g.answers,
                    per_dimension: dimensions.iter().copied().zip(g.per_dimension_mean.iter().map(value)).collect(),
                }
            })
            .collect(),
        rankers: report
            .dimensions
            .iter()
            .flat_map(|d| {
                d.validation.iter().map(move |v| NrpRankerRow {
                    dimension: &d.dimension,
                    ranker: &v.ranker,
                    ndcg: value(&v.mean_ndcg_at_10),
                    chosen: v.ranker == d.ranker,
                })
            })
            .collect(),
        agreement: report
            .expert_agreement
            .iter()
            .map(|a| {
                let interval = bounds(&a.interval);
                NrpAgreementRow {
                    ranker: &a.ranker,
                    mean: &a.mean_tau,
                    interval,
                    queries: a.per_query.len(),
                    chosen_for: &a.chosen_for,
                    fusion_scope: a.fusion_scope.as_ref(),
                    fusion_scope_words: a.fusion_scope.map(|scope| match scope {
                        Scope::Items => "among the items the expert ranked for the query (items scope)",
                        Scope::Pool => "among the query\u{2019}s documents, an answer alone among them (pool scope)",
                    }),
                }
            })
            .collect(),
        better,
        unscored: &report.unscored,
        unscored_per_dimension: report
            .dimensions
            .iter()
            .map(|d| NrpUnscoredRow {
                dimension: &d.dimension,
                ranker: &d.ranker,
                documents: d.unscored_documents,
                queries: d.unscored_queries,
            })
            .collect(),
        ranker_names: report
            .dimensions
            .first()
            .map(|d| d.validation.iter().map(|v| v.ranker.as_str()).collect())
            .unwrap_or_default(),
        ties: &report.ties,
        denominator: &report.denominator,
        dimensions,
    }
}

// ------------------------------------------------------------------ rubric -----------------

/// The rubric's Scores tab (`medrank rubric`, and `medrank grade` with the grader's expected
/// means): for each score (overall, then each tag as the report lists them) every system's
/// mean, interval and count; the chart draws the overall row.
#[derive(Debug, Serialize)]
pub struct RubricView<'a> {
    pub confidence: f64,
    /// A model graded: the expected means (met drawn from P(met)) are there.
    pub graded_by_model: bool,
    pub scores: Vec<RubricScoreView<'a>>,
}

/// One score ("overall" or a tag) over the systems.
#[derive(Debug, Serialize)]
pub struct RubricScoreView<'a> {
    pub score: &'a str,
    pub systems: Vec<RubricSystemRow<'a>>,
}

#[derive(Debug, Serialize)]
pub struct RubricSystemRow<'a> {
    pub system: &'a str,
    /// Responses contributing a value to this score.
    pub n: usize,
    /// Clipped to [0, 1], as HealthBench reports it.
    pub mean: Option<f64>,
    pub unclipped_mean: Option<f64>,
    /// With a model grader only.
    pub expected_mean: Option<f64>,
    #[serde(flatten)]
    pub interval: Bounds,
    /// Why the mean or the interval is undefined, when one is.
    pub undefined: Option<&'a str>,
}

/// Why a statistic is undefined, when it is.
pub fn reason<T>(s: &Stat<T>) -> Option<&str> {
    match s {
        Stat::Defined(_) => None,
        Stat::Undefined(r) => Some(r),
    }
}

/// The Scores tab of a rubric's system scores; `confidence` is the bootstrap's.
pub fn rubric_view(system_scores: &[SystemScore], confidence: f64) -> RubricView<'_> {
    // The score names in the order the systems list them (overall first), each once.
    let mut names: Vec<&str> = Vec::new();
    for m in system_scores.iter().flat_map(|s| &s.scores) {
        if !names.contains(&m.score.as_str()) {
            names.push(&m.score);
        }
    }
    let scores = names
        .into_iter()
        .map(|score| RubricScoreView {
            score,
            systems: system_scores
                .iter()
                .filter_map(|s| s.scores.iter().find(|m| m.score == score).map(|m| (s, m)))
                .map(|(s, m)| {
                    let interval = bounds(&m.interval);
                    RubricSystemRow {
                        system: &s.system,
                        n: m.n,
                        mean: value(&m.mean),
                        unclipped_mean: value(&m.unclipped_mean),
                        expected_mean: m.expected_mean.as_ref().and_then(value),
                        interval,
                        undefined: reason(&m.mean).or_else(|| reason(&m.interval)),
                    }
                })
                .collect(),
        })
        .collect();
    let graded_by_model = system_scores.iter().flat_map(|s| &s.scores).any(|m| m.expected_mean.is_some());
    RubricView { confidence, graded_by_model, scores }
}

// ------------------------------------------------------------------ rubric agreement -------

/// The Agreement tab (`medrank rubric-agreement`): per group (all first, then the tags, as
/// the report lists them) the grader against the people and each person against the
/// others, with the people's mean. The figures are the report's own `Stat`s: a value, or
/// `{"undefined": reason}`, drawn as such.
#[derive(Debug, Serialize)]
pub struct RubricAgreementView<'a> {
    /// A grader's file was given: the grader's columns are there.
    pub has_grader: bool,
    /// The people who judged, in order of first appearance.
    pub people: &'a [String],
    pub items: usize,
    /// Criteria nobody judged (left out).
    pub unjudged_criteria: usize,
    pub groups: Vec<RubricAgreementGroupView<'a>>,
    /// The grader against the people over every judged criterion, in words, marked when no
    /// better than chance (with a grader's file; Grade's Criteria tab shows it too).
    pub grader_overall: Option<PeopleAgreement>,
}

#[derive(Debug, Serialize)]
pub struct RubricAgreementGroupView<'a> {
    /// `all`, or a tag (`theme:...`, `axis:...`, `cluster:...`).
    pub group: &'a str,
    pub items: usize,
    pub grader: Option<RaterView<'a>>,
    /// Each person against the others.
    pub people: Vec<RaterView<'a>>,
    pub human_mean_macro_f1: &'a Stat<f64>,
    pub human_mean_kappa: &'a Stat<f64>,
    /// The grader's macro-F1 beside the people's mean, when both are defined: `at_or_above`
    /// (agrees with them as well as a typical colleague does, or better) or `below`.
    pub grader_against_people: Option<&'static str>,
}

/// One rater (the grader, or a person) against the others, over their pairs of labels: the
/// report's own figures (pairs, F1s, macro-F1, kappa, confusion), named.
#[derive(Debug, Serialize)]
pub struct RaterView<'a> {
    pub rater: &'a str,
    #[serde(flatten)]
    pub agreement: &'a PairAgreement,
}

/// The Agreement tab of a rubric-agreement report.
pub fn rubric_agreement_view(report: &RubricAgreementReport) -> RubricAgreementView<'_> {
    let groups = report
        .groups
        .iter()
        .map(|g| {
            let grader_against_people =
                match (g.grader.as_ref().and_then(|a| a.macro_f1.value()), g.human_mean_macro_f1.value()) {
                    (Some(grader), Some(people)) if grader >= people => Some("at_or_above"),
                    (Some(_), Some(_)) => Some("below"),
                    _ => None,
                };
            RubricAgreementGroupView {
                group: &g.group,
                items: g.items,
                grader: g.grader.as_ref().map(|agreement| RaterView { rater: "grader", agreement }),
                people: g.humans.iter().map(|h| RaterView { rater: &h.grader, agreement: &h.agreement }).collect(),
                human_mean_macro_f1: &g.human_mean_macro_f1,
                human_mean_kappa: &g.human_mean_kappa,
                grader_against_people,
            }
        })
        .collect();
    RubricAgreementView {
        has_grader: report.groups.iter().any(|g| g.grader.is_some()),
        people: &report.human_graders,
        items: report.items,
        unjudged_criteria: report.unjudged_criteria,
        groups,
        grader_overall: PeopleAgreement::of_grader(report),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nrp_example() -> crate::jobs::Outcome<NrpReport> {
        use crate::jobs::{InputFile, JobRequest};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/nrp");
        let file = |path: &str, kind: &str, params: &[(&str, &str)]| InputFile {
            name: path.rsplit('/').next().unwrap().to_string(),
            text: std::fs::read_to_string(dir.join(path)).unwrap(),
            kind: kind.into(),
            params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        };
        let mut files = vec![
            file("topics.xml", "topics", &[]),
            file("docs.tsv", "documents", &[]),
            file("run.bm25.txt", "run", &[("ranker", "published")]),
            file("answer_scores.csv", "answer_scores", &[("ranker", "published")]),
            file("expert_rankings.csv", "expert_rankings", &[]),
        ];
        for d in ["relevance", "credibility", "readability"] {
            files.push(file(&format!("qrels.{d}.txt"), "qrels", &[("dimension", d)]));
        }
        for (system, prompt) in
            ["gpt-3.5-turbo", "llama-2-13b"].iter().flat_map(|s| [(*s, "multimedqa"), (*s, "no_prompt")])
        {
            let name = format!("answers/{system}__{prompt}.csv");
            files.push(file(&name, "answers", &[("system", system), ("prompt", prompt)]));
        }
        let request = JobRequest { files, options: serde_json::json!({"resamples": 50}) };
        crate::jobs::nrp(&crate::jobs::nrp::nrp_request(&request).unwrap()).unwrap()
    }

    #[test]
    fn the_nrp_view_copies_the_report_and_completes_the_pairwise_probabilities() {
        let outcome = nrp_example();
        let r = &outcome.report;
        let v = nrp_view(r);
        assert_eq!(v.dimensions, ["relevance", "credibility", "readability"]);
        assert_eq!(v.groups.len(), r.groups.len());
        for (row, g) in v.groups.iter().zip(&r.groups) {
            assert_eq!(
                (row.system, row.prompt, row.mean, row.n),
                (g.system.as_str(), g.prompt.as_str(), value(&g.mean), g.answers)
            );
            assert_eq!(row.per_dimension.len(), 3);
        }
        // Two rankers (the published one and BM25 from the documents): one comparison in the
        // report, both directions in the view, adding up to 1.
        assert_eq!(v.ranker_names, ["published", "bm25"]);
        assert_eq!(r.agreement_comparisons.len(), 1);
        let c = &r.agreement_comparisons[0];
        let p = value(&c.probability_better).unwrap();
        assert_eq!(v.better[c.ranker.as_str()][c.other.as_str()], Some(p));
        assert_eq!(v.better[c.other.as_str()][c.ranker.as_str()], Some(1.0 - p));
        assert_eq!(
            v.agreement.iter().map(|a| a.queries).collect::<Vec<_>>(),
            r.expert_agreement.iter().map(|a| a.per_query.len()).collect::<Vec<_>>()
        );
        assert_eq!(v.rankers.iter().filter(|x| x.chosen).count(), 3, "one chosen ranker per dimension");
    }
}
