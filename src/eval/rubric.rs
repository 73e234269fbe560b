//! Rubric grading as HealthBench scores it (methods.md §4; automated-rubrics-medical-
//! dialogue.md): each response is judged against criteria worth points (negative points
//! are penalties), and a grader (human or model) has already said which criteria it meets.
//!
//! - Response score = Σ points of the criteria met (penalties included) / Σ positive
//!   points. Undefined when the response has no positive criterion. **Not clipped**: a
//!   response that triggers penalties can score below 0.
//! - Tag score (e.g. `axis:accuracy`): the same formula over the criteria carrying the tag;
//!   a response contributes to a tag only when it has a positive criterion with that tag.
//!   Response-level `tags` (HealthBench's example tags, e.g. `theme:emergency`) get the
//!   response score.
//! - System score = mean over its responses, **clipped to [0, 1]** (the unclipped mean is
//!   reported too), with a seeded percentile bootstrap interval of the clipped mean. Like
//!   HealthBench, each (system, score) is resampled on its own, over the prompts
//!   (`prompt_id`, else `id`) where that score is defined, so a rare tag still gets an
//!   interval; several responses to one prompt are resampled together.
//!
//! Input: JSONL, one graded response per line, read by `data::graded` (FORMATS.md section
//! 7, and `examples/rubric/README.md`); example in `examples/rubric/graded.jsonl`.
//!
//! **A model grader's uncertainty** ([`grade_with_probabilities`], `medrank grade`): each
//! criterion comes with P(met). `met` is P(met) >= 0.5, so the means are what `medrank
//! rubric` gives on the graded file the grader writes; the interval's bootstrap resamples
//! prompts as above and, in every resample, draws each drawn response's `met` from its
//! P(met) (independently per criterion), so a grader that is unsure widens the interval.
//! `expected_mean` is the clipped mean of the responses' expected scores
//! (Σ points·P(met) / Σ positive points): the centre of the drawn scores.

pub use crate::data::graded::{parse_graded, Criterion, GradedResponse, FORMAT};
// The HealthBench formula lives with the graded records it sums (the reader checks that
// every sum is finite with it).
use crate::data::graded::{score_criteria, PointsScore};
use crate::error::{Error, Result, Warning};
use crate::report::{Provenance, SingleInputReport};
use crate::stats::bootstrap::Bootstrap;
use crate::stats::{describe, Interval, Stat};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RubricOptions {
    /// The bootstrap of the per-system intervals.
    #[serde(flatten)]
    pub bootstrap: Bootstrap,
}

impl Default for RubricOptions {
    /// The bootstrap's defaults (the front ends' `--seed`, `--resamples`, `--confidence`).
    fn default() -> Self {
        RubricOptions { bootstrap: Bootstrap::default() }
    }
}

/// Scores of one response.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponseScore {
    pub id: String,
    pub system: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_id: Option<String>,
    pub line: usize,
    pub overall: PointsScore,
    /// Per criterion tag: the score over the criteria carrying it (only tags this
    /// response's criteria carry).
    pub criterion_tags: BTreeMap<String, PointsScore>,
    /// Response-level tags (they take the overall score).
    pub response_tags: Vec<String>,
}

impl ResponseScore {
    /// The value this response contributes to a score name ("overall" or a tag): none
    /// when undefined or when the tag does not apply.
    pub fn value(&self, score: &str) -> Option<f64> {
        if score == OVERALL {
            return self.overall.score.value().copied();
        }
        if self.response_tags.iter().any(|t| t == score) {
            return self.overall.score.value().copied();
        }
        self.criterion_tags.get(score).and_then(|s| s.score.value().copied())
    }
}

/// The name of the overall score in [`SystemScore`].
pub const OVERALL: &str = "overall";

/// A system's mean of one score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreMean {
    /// "overall" or a tag.
    pub score: String,
    /// Responses contributing a value.
    pub n: usize,
    /// Mean clipped to [0, 1] (HealthBench's reported number).
    pub mean: Stat<f64>,
    /// The mean before clipping (may be below 0 or above 1).
    pub unclipped_mean: Stat<f64>,
    /// Percentile bootstrap interval of the clipped mean (with a model grader: of the
    /// clipped mean with `met` drawn from P(met)).
    pub interval: Stat<Interval>,
    /// With a model grader only: the mean of the responses' expected scores, clipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_mean: Option<Stat<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemScore {
    pub system: String,
    pub responses: usize,
    pub scores: Vec<ScoreMean>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RubricReport {
    pub provenance: Provenance,
    pub systems: Vec<String>,
    /// Every tag (criterion and response level), sorted.
    pub tags: Vec<String>,
    pub responses: Vec<ResponseScore>,
    pub system_scores: Vec<SystemScore>,
    pub warnings: Vec<Warning>,
}

/// Parses the JSONL `text` of file `name` and grades it.
pub fn grade(name: &str, text: &str, options: &RubricOptions) -> Result<RubricReport> {
    let (responses, warnings) = parse_graded(name, text)?;
    Ok(grade_responses(&responses, options)?.with_input(name, text, warnings))
}

impl SingleInputReport for RubricReport {
    fn provenance_mut(&mut self) -> &mut Provenance {
        &mut self.provenance
    }
    fn warnings_mut(&mut self) -> &mut Vec<Warning> {
        &mut self.warnings
    }
}

/// Grades parsed responses (the provenance lists no input: [`grade`] adds it).
pub fn grade_responses(responses: &[GradedResponse], options: &RubricOptions) -> Result<RubricReport> {
    score_all(responses, None, options)
}

/// Grades responses whose `met` a model decided, with its P(met) per criterion
/// (`p_met[response][criterion]`, in [0, 1]): the means of [`grade_responses`], intervals
/// that also draw `met` from P(met), and the expected means (see the module doc).
pub fn grade_with_probabilities(
    responses: &[GradedResponse],
    p_met: &[Vec<f64>],
    options: &RubricOptions,
) -> Result<RubricReport> {
    let shapes_match = responses.len() == p_met.len()
        && responses.iter().zip(p_met).all(|(r, p)| r.criteria.len() == p.len())
        && p_met.iter().flatten().all(|p| (0.0..=1.0).contains(p));
    if !shapes_match {
        return Err(Error::invalid("one P(met) in [0, 1] is needed per criterion of every response"));
    }
    score_all(responses, Some(p_met), options)
}

fn score_all(
    responses: &[GradedResponse],
    p_met: Option<&[Vec<f64>]>,
    options: &RubricOptions,
) -> Result<RubricReport> {
    crate::stats::bootstrap::check_settings(options.bootstrap.resamples, options.bootstrap.confidence)
        .map_err(Error::invalid)?;
    let systems = crate::data::common::first_appearance(responses.iter().map(|r| r.system.clone()));
    let scored: Vec<ResponseScore> = responses.iter().map(score_response).collect();
    let mut tags: Vec<String> =
        scored.iter().flat_map(|r| r.criterion_tags.keys().chain(&r.response_tags).cloned()).collect();
    tags.sort();
    tags.dedup();

    let mut warnings = Vec::new();
    let undefined: Vec<&ResponseScore> = scored.iter().filter(|r| !r.overall.score.is_defined()).collect();
    if let Some(first) = undefined.first() {
        warnings.push(Warning::new(format!(
            "{} response(s) have no criterion with positive points: their score is undefined and \
             they are left out of the means (first: id `{}`, system `{}`, line {})",
            undefined.len(),
            first.id,
            first.system,
            first.line
        )));
    }

    let system_scores = system_scores(responses, &scored, p_met, &systems, &tags, options);
    let drawn = if p_met.is_some() { ", met drawn from the grader's P(met) in every resample" } else { "" };
    let mut provenance = Provenance::new(options.bootstrap.seed);
    if p_met.is_some() {
        provenance = provenance.convention("met", "the grader's P(met) >= 0.5").convention(
            "expected mean",
            "mean over responses of Σ points·P(met) / Σ positive points, clipped to [0, 1]",
        );
    }
    Ok(RubricReport {
        provenance: provenance
            .convention("response score", "Σ points met (penalties included) / Σ positive points; not clipped; undefined without positive points")
            .convention("tag score", "the same over the criteria carrying the tag; response-level tags take the response score")
            .convention("system score", "mean over responses with a defined score, clipped to [0, 1]")
            .convention(
                "interval",
                format!(
                    "percentile bootstrap of the clipped mean per system and score, over the prompts (prompt_id, else id) with a defined value{drawn}, {} resamples, {}% confidence",
                    options.bootstrap.resamples,
                    options.bootstrap.confidence * 100.0
                ),
            ),
        systems,
        tags,
        responses: scored,
        system_scores,
        warnings,
    })
}

fn score_response(r: &GradedResponse) -> ResponseScore {
    let mut by_tag: BTreeMap<&str, Vec<&Criterion>> = BTreeMap::new();
    for c in &r.criteria {
        for t in &c.tags {
            by_tag.entry(t.as_str()).or_default().push(c);
        }
    }
    ResponseScore {
        id: r.id.clone(),
        system: r.system.clone(),
        prompt_id: r.prompt_id.clone(),
        line: r.line,
        overall: score_criteria(&r.criteria),
        criterion_tags: by_tag.into_iter().map(|(t, cs)| (t.to_string(), score_criteria(cs))).collect(),
        response_tags: r.tags.clone(),
    }
}

fn clip01(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

/// The criteria a score sums for one response: all of them for the overall score and
/// response-level tags, those carrying the tag for a criterion tag.
fn counts_for(r: &GradedResponse, c: &Criterion, score: &str) -> bool {
    score == OVERALL || r.tags.iter().any(|t| t == score) || c.tags.iter().any(|t| t == score)
}

/// One response's criteria for one score as a model grader judged them: (points, P(met))
/// each, and the positive points (the denominator does not depend on `met`).
struct Uncertain {
    items: Vec<(f64, f64)>,
    possible: f64,
}

fn system_scores(
    responses: &[GradedResponse],
    scored: &[ResponseScore],
    p_met: Option<&[Vec<f64>]>,
    systems: &[String],
    tags: &[String],
    options: &RubricOptions,
) -> Vec<SystemScore> {
    let names: Vec<&str> = std::iter::once(OVERALL).chain(tags.iter().map(String::as_str)).collect();
    let bootstrap = options.bootstrap;
    systems
        .iter()
        .enumerate()
        .map(|(system_index, system)| SystemScore {
            system: system.clone(),
            responses: scored.iter().filter(|r| &r.system == system).count(),
            scores: names
                .iter()
                .enumerate()
                .filter_map(|(score_index, score)| {
                    let clusters = prompt_clusters(responses, scored, system, score);
                    if clusters.is_empty() && *score != OVERALL {
                        return None; // the tag never applies to this system
                    }
                    let value = |r: usize| scored[r].value(score).expect("clusters hold defined values");
                    let values: Vec<f64> = clusters.iter().flatten().map(|&r| value(r)).collect();
                    let unclipped = describe::mean(&values);
                    let weighted: Option<Vec<Uncertain>> = p_met.map(|p| {
                        (0..responses.len())
                            .map(|r| {
                                let items: Vec<(f64, f64)> = responses[r]
                                    .criteria
                                    .iter()
                                    .zip(&p[r])
                                    .filter(|(c, _)| counts_for(&responses[r], c, score))
                                    .map(|(c, p)| (c.points, *p))
                                    .collect();
                                let possible = items.iter().filter(|(pts, _)| *pts > 0.0).map(|(pts, _)| pts).sum();
                                Uncertain { items, possible }
                            })
                            .collect()
                    });
                    let interval = if clusters.is_empty() {
                        Stat::undefined("no response with a defined score")
                    } else {
                        // The draws of (system, score) pair k come from stream k of the seed:
                        // the same on every platform, independent of the resampling's.
                        let mut rng = ChaCha8Rng::seed_from_u64(bootstrap.seed);
                        rng.set_stream((system_index * names.len() + score_index) as u64);
                        let result = bootstrap.run(clusters.len(), |drawn| {
                            let (mut sum, mut n) = (0.0, 0usize);
                            for &r in drawn.iter().flat_map(|&c| &clusters[c]) {
                                sum += match &weighted {
                                    None => value(r),
                                    Some(w) => {
                                        let Uncertain { items, possible } = &w[r];
                                        let achieved: f64 = items
                                            .iter()
                                            .filter(|(_, p)| rng.gen::<f64>() < *p)
                                            .map(|(pts, _)| pts)
                                            .sum();
                                        achieved / possible
                                    }
                                };
                                n += 1;
                            }
                            vec![clip01(sum / n as f64)]
                        });
                        result.intervals.into_iter().next().expect("one statistic")
                    };
                    let expected_mean = weighted.as_ref().map(|w| {
                        let expected: Vec<f64> = clusters
                            .iter()
                            .flatten()
                            .map(|&r| {
                                let Uncertain { items, possible } = &w[r];
                                items.iter().map(|(pts, p)| pts * p).sum::<f64>() / possible
                            })
                            .collect();
                        describe::mean(&expected).map(clip01)
                    });
                    Some(ScoreMean {
                        score: score.to_string(),
                        n: values.len(),
                        mean: unclipped.clone().map(clip01),
                        unclipped_mean: unclipped,
                        interval,
                        expected_mean,
                    })
                })
                .collect(),
        })
        .collect()
}

/// The responses (indices) with a value of one score for one system, grouped by prompt (in
/// order of appearance; prompts without a value left out): the units the bootstrap
/// resamples. With one response per prompt this is HealthBench's bootstrap over responses;
/// repeated responses to a prompt stay together.
fn prompt_clusters(
    responses: &[GradedResponse],
    scored: &[ResponseScore],
    system: &str,
    score: &str,
) -> Vec<Vec<usize>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    for (i, (r, s)) in responses.iter().zip(scored).enumerate() {
        if s.system != system || s.value(score).is_none() {
            continue;
        }
        let next = clusters.len();
        let c = *index.entry(r.unit()).or_insert(next);
        if c == clusters.len() {
            clusters.push(Vec::new());
        }
        clusters[c].push(i);
    }
    clusters
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../examples/rubric/graded.jsonl");

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn c(points: f64, met: bool, tags: &[&str]) -> Criterion {
        Criterion { criterion: "x".into(), points, tags: tags.iter().map(|t| t.to_string()).collect(), met }
    }

    #[test]
    fn healthbench_formula_with_penalties() {
        // HealthBench's own unit test (simple-evals healthbench_eval_test.py): points 7, 5,
        // 10, -6 with met = T, F, T, T -> (7 + 10 - 6) / (7 + 5 + 10) = 11/22 = 0.5.
        let s = score_criteria(&[c(7.0, true, &[]), c(5.0, false, &[]), c(10.0, true, &[]), c(-6.0, true, &[])]);
        assert_eq!((s.achieved, s.possible), (11.0, 22.0));
        assert!(close(s.score.unwrap(), 0.5));
        // Penalties can take a response below 0 and it is not clipped: (-8) / 15.
        let s = score_criteria(&[c(10.0, false, &[]), c(5.0, false, &[]), c(-8.0, true, &[])]);
        assert!(close(s.score.unwrap(), -8.0 / 15.0));
        // Only penalties: undefined, not 0.
        assert!(!score_criteria(&[c(-3.0, false, &[])]).score.is_defined());
    }

    #[test]
    fn example_scores_by_hand() {
        let r = grade("graded.jsonl", EXAMPLE, &RubricOptions::default()).unwrap();
        // Hand-worked: achieved / possible per response.
        let expected = [
            ("p1-a", 15.0, 15.0),
            ("p1-b", -8.0, 15.0),
            ("p2-a", 9.0, 17.0),
            ("p2-b", 5.0, 17.0),
            ("p3-a", 10.0, 12.0),
            ("p3-b", 7.0, 12.0),
            ("p4-a", 9.0, 13.0),
            ("p4-b", -5.0, 13.0),
        ];
        for (resp, (id, achieved, possible)) in r.responses.iter().zip(expected) {
            assert_eq!((resp.id.as_str(), resp.overall.achieved, resp.overall.possible), (id, achieved, possible));
        }
        let mean = |system: &str, score: &str| -> ScoreMean {
            let s = r.system_scores.iter().find(|s| s.system == system).unwrap();
            s.scores.iter().find(|m| m.score == score).unwrap().clone()
        };
        // model-a overall: (1 + 9/17 + 10/12 + 9/13) / 4 = 0.763763197586727.
        let a = mean("model-a", OVERALL);
        assert_eq!(a.n, 4);
        assert!(close(a.mean.clone().unwrap(), 0.763763197586727));
        assert_eq!(a.mean, a.unclipped_mean);
        // model-b overall: (-8/15 + 5/17 + 7/12 - 5/13) / 4 = -0.010124434389140263, clipped
        // to 0.
        let b = mean("model-b", OVERALL);
        assert!(close(b.unclipped_mean.clone().unwrap(), -0.010124434389140263));
        assert_eq!(b.mean.clone().unwrap(), 0.0);
        // axis:accuracy for model-b: p1 -8/10, p2 (8-6)/8, p3 7/7, p4 -9/9 -> mean -0.1375 -> 0.
        let acc = mean("model-b", "axis:accuracy");
        assert!(close(acc.unclipped_mean.clone().unwrap(), -0.1375));
        assert_eq!(acc.mean.clone().unwrap(), 0.0);
        // axis:communication_quality for model-a: p2-a 3/3; p3-a carries only a penalty with
        // that tag (no positive points), so it does not count: n = 1, mean 1.
        let comm = mean("model-a", "axis:communication_quality");
        assert_eq!(comm.n, 1);
        assert!(close(comm.mean.clone().unwrap(), 1.0));
        // Response-level tag: theme:medication for model-b = p4-b's score -5/13, clipped to 0.
        let med = mean("model-b", "theme:medication");
        assert_eq!(med.n, 1);
        assert!(close(med.unclipped_mean.clone().unwrap(), -5.0 / 13.0));
        assert_eq!(
            r.tags,
            [
                "axis:accuracy",
                "axis:communication_quality",
                "axis:completeness",
                "axis:context_awareness",
                "theme:emergency",
                "theme:medication"
            ]
        );
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn clipped_bootstrap_intervals_are_seeded() {
        let r = grade("graded.jsonl", EXAMPLE, &RubricOptions::default()).unwrap();
        let overall = |r: &RubricReport, system: &str| {
            let s = r.system_scores.iter().find(|s| s.system == system).unwrap();
            s.scores[0].interval.clone().unwrap()
        };
        let a = overall(&r, "model-a");
        assert!(a.lo <= 0.763763197586727 && 0.763763197586727 <= a.hi && a.lo < a.hi, "{a:?}");
        // The interval is of the clipped mean, so it never leaves [0, 1].
        let b = overall(&r, "model-b");
        assert!(b.lo >= 0.0 && b.hi <= 1.0, "{b:?}");
        assert_eq!(r, grade("graded.jsonl", EXAMPLE, &RubricOptions::default()).unwrap());
        let other =
            grade("graded.jsonl", EXAMPLE, &RubricOptions { bootstrap: Bootstrap { seed: 1, ..Bootstrap::default() } })
                .unwrap();
        assert_ne!(overall(&other, "model-a"), a);
    }

    #[test]
    fn undefined_responses_are_warned_and_left_out() {
        let text = r#"{"id": "r1", "system": "s", "criteria": [{"criterion": "penalty only", "points": -5, "met": true}]}
{"id": "r2", "system": "s", "criteria": [{"criterion": "good", "points": 4, "met": true}]}"#;
        let r = grade("g.jsonl", text, &RubricOptions::default()).unwrap();
        assert!(!r.responses[0].overall.score.is_defined());
        let overall = &r.system_scores[0].scores[0];
        assert_eq!((overall.n, overall.mean.clone().unwrap()), (1, 1.0));
        assert!(r.warnings[0].message.starts_with("1 response(s) have no criterion with positive points"));
    }

    #[test]
    fn input_errors_name_line_and_field() {
        let err = |text: &str| parse_graded("g.jsonl", text).unwrap_err().to_string();
        assert_eq!(
            err(
                r#"{"id": "r", "system": "s", "criteria": [{"criterion": "a", "points": 1, "met": true}, {"criterion": "b", "points": 2}]}"#
            ),
            "g.jsonl:1: field `criteria[1].met`: missing field `met` (was the criterion graded?)"
        );
        assert_eq!(
            err(r#"{"id": "r", "system": "s", "criteria": [{"criterion": "a", "points": "3", "met": true}]}"#),
            "g.jsonl:1: field `criteria[0].points`: expected a number, found a string"
        );
        assert_eq!(
            err(r#"{"id": "r", "system": "s", "criteria": [{"criterion": "a", "points": 3, "met": "yes"}]}"#),
            "g.jsonl:1: field `criteria[0].met`: expected true or false, found a string"
        );
        assert_eq!(
            err(
                r#"{"id": "r", "system": "s", "criteria": [{"criterion": "a", "points": 3, "met": true, "tags": ["x", "x"]}]}"#
            ),
            "g.jsonl:1: field `criteria[0].tags[1]`: tag `x` is listed twice"
        );
        assert_eq!(
            err(r#"{"id": "r", "system": "s", "criteria": []}"#),
            "g.jsonl:1: field `criteria`: needs at least one criterion"
        );
        assert_eq!(
            err("{\"id\": \"r\", \"system\": \"s\", \"criteria\": [{\"criterion\": \"a\", \"points\": 1, \"met\": true}]}\n\n{\"id\": \"r\", \"system\": \"s\", \"criteria\": [{\"criterion\": \"a\", \"points\": 1, \"met\": true}]}"),
            "g.jsonl:3: field `id`: system `s` already has a response `r` (line 1)"
        );
        let (_, warnings) = parse_graded(
            "g.jsonl",
            r#"{"id": "r", "system": "s", "grader": "gpt", "criteria": [{"criterion": "a", "points": 1, "met": true, "why": "..."}]}"#,
        )
        .unwrap();
        let messages: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            messages,
            [
                "g.jsonl:1: field `criteria[].why`: ignored unknown field `criteria[].why` on 1 line(s)",
                "g.jsonl:1: field `grader`: ignored unknown field `grader` on 1 line(s)"
            ]
        );
    }

    #[test]
    fn points_beyond_their_bound_or_sums_that_overflow_are_refused_at_their_line() {
        // 1e308 + 1e308 = inf in f64: the score was inf / inf = NaN, shown as `"score": null`,
        // and an ungraded file (what `medrank grade` reads) took such points too.
        let good = r#"{"id": "r0", "system": "s", "criteria": [{"criterion": "a", "points": 1, "met": true}]}"#;
        let huge = r#"{"id": "r1", "system": "s", "criteria": [{"criterion": "a", "points": 1e308, "met": true}, {"criterion": "b", "points": 1e308, "met": false}]}"#;
        let err = parse_graded("g.jsonl", &format!("{good}\n{huge}")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "g.jsonl:2: field `criteria[0].points`: 1e308 is beyond the points a criterion may have (from -1e6 to 1e6)"
        );
        let ungraded = huge.replace(", \"met\": true", "").replace(", \"met\": false", "");
        let err = crate::data::graded::parse_rubric("u.jsonl", &ungraded).unwrap_err();
        assert!(err.to_string().starts_with("u.jsonl:1: field `criteria[0].points`: 1e308 is beyond"), "{err}");
        // Within the bound, a sum can still leave f64: 1e-320 possible (subnormal), a met
        // penalty of -5 gives the score -5e320 = -inf.
        let tagged = r#"{"id": "r1", "system": "s", "criteria": [{"criterion": "a", "points": 1e-320, "met": true, "tags": ["t"]}, {"criterion": "b", "points": -5, "met": true, "tags": ["t"]}, {"criterion": "c", "points": 5, "met": true}]}"#;
        let err = parse_graded("g.jsonl", tagged).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("g.jsonl:1: field `criteria`: the points of tag `t` do not add up to a finite score"),
            "{err}"
        );
    }

    #[test]
    fn a_key_twice_in_one_object_is_an_error() {
        // serde_json's Value would keep the last `met` and grade the criterion as met.
        let err = |text: &str| parse_graded("g.jsonl", text).unwrap_err().to_string();
        assert_eq!(
            err(
                "{\"id\": \"r0\", \"system\": \"s\", \"criteria\": [{\"criterion\": \"a\", \"points\": 1, \"met\": true}]}\n\
                 {\"id\": \"r\", \"system\": \"s\", \"criteria\": [{\"criterion\": \"a\", \"points\": 1, \"met\": true}, {\"criterion\": \"b\", \"points\": 2, \"met\": false, \"met\": true}]}"
            ),
            "g.jsonl:2: field `criteria[1].met`: duplicate key `met`"
        );
        assert_eq!(
            err(
                r#"{"id": "r", "system": "s", "id": "r2", "criteria": [{"criterion": "a", "points": 1, "met": true}]}"#
            ),
            "g.jsonl:1: field `id`: duplicate key `id`"
        );
    }

    #[test]
    fn prompts_responses_and_human_judgements_leave_the_scores_as_they_were() {
        // The example with the §7 fields of issue 27 on every line (a conversation, the
        // response, each criterion's people in `met_by`, judging against `met`): the same
        // responses, tags and system means, to the bit, as the hand-worked figures above.
        let with_fields: String = EXAMPLE
            .lines()
            .map(|l| {
                l.replacen(
                    r#""criteria": ["#,
                    r#""prompt": [{"role": "user", "content": "¿Qué hago?"}], "response": "…", "criteria": ["#,
                    1,
                )
                .replace(r#""met": true"#, r#""met": true, "met_by": {"dr-a": false, "dr-b": true}"#)
                .replace(r#""met": false"#, r#""met": false, "met_by": {"dr-a": true}"#)
                    + "\n"
            })
            .collect();
        assert_ne!(with_fields, EXAMPLE);
        let plain = grade("graded.jsonl", EXAMPLE, &RubricOptions::default()).unwrap();
        let rich = grade("graded.jsonl", &with_fields, &RubricOptions::default()).unwrap();
        assert_eq!(rich.responses, plain.responses);
        assert_eq!(rich.system_scores, plain.system_scores);
        assert_eq!(rich.tags, plain.tags);
        assert!(rich.warnings.is_empty(), "{:?}", rich.warnings);
    }

    #[test]
    fn tables_and_options() {
        let r = grade("graded.jsonl", EXAMPLE, &RubricOptions::default()).unwrap();
        let t = crate::jobs::tables::rubric(&r);
        assert_eq!(t[0].rows.len(), 8);
        // model-a: overall + 6 tags; model-b: overall + 6 tags.
        assert_eq!(t[1].rows.len(), 14);
        serde_json::to_string(&r).unwrap();
        let parsed: RubricOptions = serde_json::from_str(r#"{"seed": 9}"#).unwrap();
        assert_eq!((parsed.bootstrap.seed, parsed.bootstrap.resamples), (9, 1000));
        assert!(grade(
            "graded.jsonl",
            EXAMPLE,
            &RubricOptions { bootstrap: Bootstrap { confidence: 0.0, ..Bootstrap::default() } }
        )
        .is_err());
    }

    #[test]
    fn certain_probabilities_give_the_graded_intervals() {
        // P(met) of exactly 1 or 0 draws `met` as it is (a draw u in [0, 1) is < 1, never
        // < 0): the intervals are those of the graded file, and the expected mean is the mean.
        let (responses, _) = parse_graded("graded.jsonl", EXAMPLE).unwrap();
        let p: Vec<Vec<f64>> =
            responses.iter().map(|r| r.criteria.iter().map(|c| if c.met { 1.0 } else { 0.0 }).collect()).collect();
        let plain = grade_responses(&responses, &RubricOptions::default()).unwrap();
        let drawn = grade_with_probabilities(&responses, &p, &RubricOptions::default()).unwrap();
        assert_eq!(drawn.responses, plain.responses);
        for (a, b) in drawn.system_scores.iter().zip(&plain.system_scores) {
            for (x, y) in a.scores.iter().zip(&b.scores) {
                assert_eq!((&x.mean, &x.interval), (&y.mean, &y.interval), "{} {}", a.system, x.score);
                let expected = x.expected_mean.as_ref().unwrap().value().copied().unwrap();
                assert!((expected - y.mean.value().copied().unwrap()).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn uncertain_grader_by_hand() {
        // One system, two prompts. r1: points 10 (P 0.8), -5 (P 0.4); r2: 4 (P 0.5), 6 (P 0.3).
        // met = P >= 0.5: r1 10/10 = 1, r2 4/10 = 0.4; mean 0.7.
        // Expected: r1 (8 - 2) / 10 = 0.6, r2 (2 + 1.8) / 10 = 0.38; mean 0.49.
        let c = |points: f64, met: bool| Criterion { criterion: "x".into(), points, tags: vec![], met };
        let r = |id: &str, criteria| GradedResponse {
            id: id.into(),
            system: "s".into(),
            prompt_id: None,
            tags: vec![],
            criteria,
            line: 1,
        };
        let responses = [r("r1", vec![c(10.0, true), c(-5.0, false)]), r("r2", vec![c(4.0, true), c(6.0, false)])];
        let p = [vec![0.8, 0.4], vec![0.5, 0.3]];
        let report = grade_with_probabilities(&responses, &p, &RubricOptions::default()).unwrap();
        let overall = &report.system_scores[0].scores[0];
        assert!(close(*overall.mean.value().unwrap(), 0.7));
        assert!(close(*overall.expected_mean.as_ref().unwrap().value().unwrap(), 0.49));
        // Draws widen the interval beyond the two responses' values (0.4 and 1 without them):
        // r1 can score 10/10 - 5/10 = 0.5 or -0.5, r2 0 to 1.
        let Stat::Defined(i) = &overall.interval else { panic!("{:?}", overall.interval) };
        assert!(i.lo < 0.4 && i.lo >= 0.0 && i.hi <= 1.0, "{i:?}");
        // A probability outside [0, 1] or a missing one is refused.
        assert!(
            grade_with_probabilities(&responses, &[vec![0.8, 1.5], vec![0.5, 0.3]], &RubricOptions::default()).is_err()
        );
        assert!(grade_with_probabilities(&responses, &[vec![0.8]], &RubricOptions::default()).is_err());
    }
}
