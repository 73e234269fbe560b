//! Reference-based metrics (ROUGE-1/2/L/Lsum, SMOG, Repscore) for candidate texts, and how
//! well each agrees with human scores (Spearman, quadratic weighted kappa, pairwise-ranking
//! accuracy and Cohen's kappa), as in the BioASQ evaluation study
//! (llm-eval-biomedical-summarisation.md; methods.md §3).
//!
//! Input: JSONL, one candidate per line (`data::candidates`, FORMATS.md section 6). Output: a
//! [`MetricsReport`] with every candidate's scores, per-system means with seeded bootstrap
//! intervals, and the agreement statistics per batch and averaged over batches.
//!
//! ```no_run
//! # use medrank::eval::metrics::{evaluate, MetricsOptions};
//! let text = std::fs::read_to_string("examples/metrics/summaries.jsonl").unwrap();
//! let report = evaluate("summaries.jsonl", &text, &MetricsOptions::default()).unwrap();
//! for table in medrank::jobs::tables::metrics(&report) { println!("{}", table.to_csv()); }
//! ```

pub mod agreement;
pub mod combine;
pub mod learned;
pub mod porter;
pub mod repscore;
pub mod rouge;
pub mod smog;

pub use crate::data::candidates::{parse_candidates, Candidate};
pub use agreement::{KappaBins, PairwiseAgreement};
pub use rouge::{RougeOptions, RougeScore, RougeType, Tokenizer};

use crate::data::common::first_appearance;
use crate::error::{Error, Result, Warning};
use crate::report::{Provenance, SingleInputReport};
use crate::stats::bootstrap::Bootstrap;
use crate::stats::spearman::{spearman, Correlation};
use crate::stats::{describe, Interval, Stat};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The scores this module computes for every candidate.
/// Serialised as rouge1, rouge2, rougeL, rougeLsum, smog, repscore (the names the
/// reference packages use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Metric {
    Rouge1,
    Rouge2,
    RougeL,
    RougeLsum,
    Smog,
    Repscore,
}

impl Metric {
    pub const ALL: [Metric; 6] =
        [Metric::Rouge1, Metric::Rouge2, Metric::RougeL, Metric::RougeLsum, Metric::Smog, Metric::Repscore];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Rouge1 => "rouge1",
            Metric::Rouge2 => "rouge2",
            Metric::RougeL => "rougeL",
            Metric::RougeLsum => "rougeLsum",
            Metric::Smog => "smog",
            Metric::Repscore => "repscore",
        }
    }

    pub fn parse(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// What to compute and how. Deserialisable so the page can send it as JSON. Its default
/// bootstrap is the front ends' (`--seed`, `--resamples`, `--confidence`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetricsOptions {
    pub rouge: RougeOptions,
    /// The bootstrap of the per-system intervals.
    #[serde(flatten)]
    pub bootstrap: Bootstrap,
    /// Quadratic weighted kappa, per metric, only for the metrics binned here (metric
    /// scores are real numbers; how to put them on the human scale is the user's call).
    pub kappa_bins: BTreeMap<Metric, KappaBins>,
    /// Combine scorers into one (`--combine`; the page's "combine scorers").
    pub combine: bool,
    /// The scorers combined (`--combine SCORERS`): names such as `rouge1`, `bertscore`,
    /// `learned:overall`; empty: [`combine::default_scorers`].
    pub combine_scorers: Vec<String>,
}

/// One ROUGE type's score against the best reference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BestRouge {
    pub precision: f64,
    pub recall: f64,
    pub f: f64,
    /// 0-based index of the reference with the highest F (the first one on ties).
    pub reference: usize,
}

/// Every score of one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateScores {
    pub id: String,
    pub system: String,
    pub batch: String,
    /// 1-based line in the input.
    pub line: usize,
    pub rouge1: BestRouge,
    pub rouge2: BestRouge,
    #[serde(rename = "rougeL")]
    pub rouge_l: BestRouge,
    #[serde(rename = "rougeLsum")]
    pub rouge_lsum: BestRouge,
    pub smog: f64,
    /// Undefined for a candidate without words.
    pub repscore: Stat<f64>,
    /// Human scores by dimension.
    pub human: BTreeMap<String, f64>,
}

impl CandidateScores {
    /// The value a metric contributes to means and correlations (ROUGE: its F).
    pub fn metric(&self, metric: Metric) -> Option<f64> {
        match metric {
            Metric::Rouge1 => Some(self.rouge1.f),
            Metric::Rouge2 => Some(self.rouge2.f),
            Metric::RougeL => Some(self.rouge_l.f),
            Metric::RougeLsum => Some(self.rouge_lsum.f),
            Metric::Smog => Some(self.smog),
            Metric::Repscore => self.repscore.value().copied(),
        }
    }
}

/// A mean over a system's candidates with its bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeanScore {
    /// A metric name, or `human:<dimension>`.
    pub score: String,
    /// Candidates with a value.
    pub n: usize,
    pub mean: Stat<f64>,
    pub interval: Stat<Interval>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemMeans {
    pub system: String,
    pub candidates: usize,
    pub scores: Vec<MeanScore>,
}

/// A score of every candidate beside the built-in metrics: BERTScore's F, a learned
/// metric's prediction for one dimension, a combination of scorers. It enters the means per
/// system and the agreement tables exactly as a built-in metric does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtraScore {
    /// Its name in the tables: `bertscore`, `learned:<dimension>`, `combined:mean-rank`, ...
    pub name: String,
    /// Compared only with this human dimension (a score predicted for one dimension);
    /// `None`: with every dimension, as the built-in metrics.
    pub dimension: Option<String>,
    /// One value per candidate, in the input's order (`None`: no value for that one).
    pub values: Vec<Option<f64>>,
    /// Bins onto the human label scale for quadratic weighted kappa, when it has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kappa_bins: Option<KappaBins>,
}

/// Agreement of one metric with one human dimension within one batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    pub batch: String,
    /// A built-in metric's name or an [`ExtraScore`]'s.
    pub metric: String,
    pub dimension: String,
    /// Candidates with both a metric value and a human score.
    pub n: usize,
    pub spearman: Stat<Correlation>,
    /// Only when `kappa_bins` has this metric.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quadratic_kappa: Option<Stat<f64>>,
    pub pairwise: PairwiseAgreement,
}

/// The mean of a per-batch statistic over the batches where it is defined.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchMean {
    pub mean: Stat<f64>,
    /// Batches where the statistic was defined (and entered the mean).
    pub batches: usize,
}

/// Per-batch agreement averaged over batches (the BioASQ paper reports this average).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgreementMean {
    pub metric: String,
    pub dimension: String,
    pub spearman: BatchMean,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quadratic_kappa: Option<BatchMean>,
    pub pairwise_accuracy: BatchMean,
    pub pairwise_kappa: BatchMean,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricsReport {
    pub provenance: Provenance,
    pub metrics: Vec<Metric>,
    /// Human score dimensions, in order of first appearance.
    pub dimensions: Vec<String>,
    pub batches: Vec<String>,
    pub systems: Vec<String>,
    pub candidates: Vec<CandidateScores>,
    /// Scores beside the built-in metrics (BERTScore, learned, combined), in table order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_scores: Vec<ExtraScore>,
    pub system_means: Vec<SystemMeans>,
    pub agreement: Vec<Agreement>,
    /// BERTScore with an encoder, when a model was given (computed by `crate::jobs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bertscore: Option<BertScoreSection>,
    pub agreement_means: Vec<AgreementMean>,
    /// Each extra score against the best built-in (token-based) metric of each dimension.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<Comparison>,
    /// How the combined scores were made, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub combination: Option<Combination>,
    pub warnings: Vec<Warning>,
}

/// An extra score's mean Spearman (over batches) minus the best built-in metric's for the
/// same dimension, with a bootstrap interval of the difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub score: String,
    pub dimension: String,
    /// The built-in metric with the highest mean Spearman on this dimension.
    pub versus: String,
    pub score_spearman: Stat<f64>,
    pub versus_spearman: Stat<f64>,
    /// `score_spearman - versus_spearman` over the batches where both are defined.
    pub difference: Stat<f64>,
    /// Percentile interval of the difference over resampled items (batch, id), the
    /// per-batch Spearman recomputed on each resample.
    pub interval: Stat<Interval>,
}

/// What `--combine` did: the scorers, and the weights fitted on the separate fit file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Combination {
    pub scorers: Vec<String>,
    /// The file the weights were fitted on, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit_file: Option<String>,
    pub fitted: Vec<combine::FittedWeights>,
}

/// Parses the JSONL `text` of the file `name` and evaluates it.
pub fn evaluate(name: &str, text: &str, options: &MetricsOptions) -> Result<MetricsReport> {
    let (candidates, warnings) = parse_candidates(name, text)?;
    Ok(evaluate_candidates(&candidates, options)?.with_input(name, text, warnings))
}

impl SingleInputReport for MetricsReport {
    fn provenance_mut(&mut self) -> &mut Provenance {
        &mut self.provenance
    }
    fn warnings_mut(&mut self) -> &mut Vec<Warning> {
        &mut self.warnings
    }
}

/// Scores parsed candidates (the provenance lists no input: [`evaluate`] adds it).
pub fn evaluate_candidates(candidates: &[Candidate], options: &MetricsOptions) -> Result<MetricsReport> {
    evaluate_with_extra_scores(candidates, options, Vec::new())
}

/// [`evaluate_candidates`] with scores computed elsewhere (an encoder's), one value per
/// candidate each, compared with the human scores as the built-in metrics are.
pub fn evaluate_with_extra_scores(
    candidates: &[Candidate],
    options: &MetricsOptions,
    extra_scores: Vec<ExtraScore>,
) -> Result<MetricsReport> {
    evaluate_scored(candidates, score_candidates(candidates, options), options, extra_scores)
}

/// The built-in metrics of every candidate (what a combination of scorers reads before the
/// report is made).
pub fn score_candidates(candidates: &[Candidate], options: &MetricsOptions) -> Vec<CandidateScores> {
    candidates.iter().map(|c| score_candidate(c, options.rouge)).collect()
}

/// [`evaluate_with_extra_scores`] on candidates already scored by [`score_candidates`].
pub fn evaluate_scored(
    candidates: &[Candidate],
    scores: Vec<CandidateScores>,
    options: &MetricsOptions,
    extra_scores: Vec<ExtraScore>,
) -> Result<MetricsReport> {
    check_options(options)?;
    for extra in &extra_scores {
        assert_eq!(extra.values.len(), candidates.len(), "one value of `{}` per candidate", extra.name);
    }
    let systems = first_appearance(candidates.iter().map(|c| c.system.clone()));
    let batches = first_appearance(candidates.iter().map(|c| c.batch.clone()));
    let dimensions = first_appearance(candidates.iter().flat_map(|c| c.human.iter().map(|(d, _)| d.clone())));

    let mut warnings = text_warnings(candidates, &scores, options.rouge);
    warnings.extend(missing_dimension_warnings(candidates, &dimensions));

    let columns = columns(&scores, &extra_scores, options);
    let system_means = system_means(&scores, &columns, &systems, &dimensions, options);
    let agreement = agreement_per_batch(&scores, &columns, &systems, &batches, &dimensions);
    let agreement_means = agreement_means(&agreement, &columns, &dimensions);
    let comparisons = comparisons(&scores, &columns, &agreement_means, &dimensions, options);

    Ok(MetricsReport {
        provenance: provenance(options),
        metrics: Metric::ALL.to_vec(),
        dimensions,
        batches,
        systems,
        candidates: scores,
        extra_scores,
        system_means,
        agreement,
        agreement_means,
        comparisons,
        combination: None,
        bertscore: None,
        warnings,
    })
}

/// BERTScore of every candidate (best F over its references), and the mean per system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BertScoreSection {
    pub model: String,
    /// Hidden layer used (1-based).
    pub layer: usize,
    pub idf: bool,
    /// (b_P, b_R, b_F) subtracted and rescaled by, when given: (x - b) / (1 - b).
    pub baseline: Option<(f64, f64, f64)>,
    /// In the order of `MetricsReport::candidates`.
    pub candidates: Vec<crate::model::bertscore::PrfScore>,
    /// (system, mean P, mean R, mean F) in `MetricsReport::systems` order.
    pub system_means: Vec<(String, f64, f64, f64)>,
}

fn check_options(options: &MetricsOptions) -> Result<()> {
    crate::stats::bootstrap::check_settings(options.bootstrap.resamples, options.bootstrap.confidence)
        .map_err(Error::invalid)?;
    for (metric, bins) in &options.kappa_bins {
        bins.validate().map_err(|m| Error::invalid(format!("kappa bins for {}: {m}", metric.name())))?;
    }
    Ok(())
}

fn score_candidate(c: &Candidate, rouge_options: RougeOptions) -> CandidateScores {
    // Tokenise (and stem) each text once for all four ROUGE types.
    let references: Vec<rouge::Tokenized> =
        c.references.iter().map(|r| rouge::Tokenized::new(r, rouge_options)).collect();
    let candidate = rouge::Tokenized::new(&c.candidate, rouge_options);
    let best = |kind: RougeType| {
        let (s, reference) =
            rouge::best_reference(kind, &references, &candidate).expect("the reader guarantees at least one reference");
        BestRouge { precision: s.precision, recall: s.recall, f: s.f, reference }
    };
    CandidateScores {
        id: c.id.clone(),
        system: c.system.clone(),
        batch: c.batch.clone(),
        line: c.line,
        rouge1: best(RougeType::Rouge1),
        rouge2: best(RougeType::Rouge2),
        rouge_l: best(RougeType::RougeL),
        rouge_lsum: best(RougeType::RougeLsum),
        smog: smog::smog(&c.candidate),
        repscore: repscore::repscore(&c.candidate),
        human: c.human.iter().cloned().collect(),
    }
}

/// Warnings about texts the metrics cannot see: letters that the rouge_score tokenizer
/// deletes (non-ASCII scripts), and candidates without words.
fn text_warnings(candidates: &[Candidate], scores: &[CandidateScores], rouge_options: RougeOptions) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if rouge_options.tokenizer == Tokenizer::RougeScore {
        let lossy: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| std::iter::once(&c.candidate).chain(&c.references).any(|t| has_non_ascii_letter(t)))
            .collect();
        if let Some(first) = lossy.first() {
            warnings.push(Warning::new(format!(
                "{} candidate(s) or their references contain non-ASCII letters, which the rouge_score \
                     tokenizer deletes (\"náusea\" -> \"n usea\"; Cyrillic, Greek or Chinese text has no \
                     tokens at all); use the unicode tokenizer for non-English text (first: id `{}`, line {})",
                lossy.len(),
                first.id,
                first.line
            )));
        }
    }
    let wordless: Vec<&CandidateScores> = scores.iter().filter(|s| !s.repscore.is_defined()).collect();
    if let Some(first) = wordless.first() {
        warnings.push(Warning::new(format!(
            "{} candidate(s) have no words: ROUGE and SMOG are 0 and Repscore is undefined for them \
             (first: id `{}`, system `{}`, line {})",
            wordless.len(),
            first.id,
            first.system,
            first.line
        )));
    }
    warnings
}

fn has_non_ascii_letter(text: &str) -> bool {
    text.chars().any(|c| c.is_alphabetic() && !c.is_ascii())
}

fn missing_dimension_warnings(candidates: &[Candidate], dimensions: &[String]) -> Vec<Warning> {
    // Each candidate's dimensions as a set: a line may carry very many of them, and a
    // linear search per dimension would be quadratic in the length of that line.
    let has: Vec<std::collections::HashSet<&str>> =
        candidates.iter().map(|c| c.human.iter().map(|(k, _)| k.as_str()).collect()).collect();
    dimensions
        .iter()
        .filter_map(|d| {
            let missing: Vec<&Candidate> =
                candidates.iter().zip(&has).filter(|(_, has)| !has.contains(d.as_str())).map(|(c, _)| c).collect();
            missing.first().map(|first| {
                Warning::new(format!(
                    "human score `{d}` is missing for {} of {} candidate(s); they are left out of its \
                     agreement statistics (first: id `{}`, system `{}`, line {})",
                    missing.len(),
                    candidates.len(),
                    first.id,
                    first.system,
                    first.line
                ))
            })
        })
        .collect()
}

/// One score of every candidate as the agreement and the means see it: a built-in metric
/// or an [`ExtraScore`].
struct Column<'a> {
    name: String,
    /// Compared only with this dimension; `None`: with all.
    dimension: Option<&'a str>,
    /// One value per candidate.
    values: Vec<Option<f64>>,
    kappa_bins: Option<&'a KappaBins>,
}

impl Column<'_> {
    fn compares_with(&self, dimension: &str) -> bool {
        self.dimension.is_none_or(|d| d == dimension)
    }
}

/// The built-in metrics, then the extra scores.
fn columns<'a>(scores: &[CandidateScores], extra: &'a [ExtraScore], options: &'a MetricsOptions) -> Vec<Column<'a>> {
    let builtin = Metric::ALL.iter().map(|&m| Column {
        name: m.name().to_string(),
        dimension: None,
        values: scores.iter().map(|c| c.metric(m)).collect(),
        kappa_bins: options.kappa_bins.get(&m),
    });
    let extra = extra.iter().map(|e| Column {
        name: e.name.clone(),
        dimension: e.dimension.as_deref(),
        values: e.values.clone(),
        kappa_bins: e.kappa_bins.as_ref(),
    });
    builtin.chain(extra).collect()
}

/// The score names of the per-system table: every column, then `human:<dimension>`.
fn score_names(columns: &[Column], dimensions: &[String]) -> Vec<String> {
    columns.iter().map(|c| c.name.clone()).chain(dimensions.iter().map(|d| format!("human:{d}"))).collect()
}

/// Candidate `i`'s values in [`score_names`]' order.
fn score_values(i: usize, c: &CandidateScores, columns: &[Column], dimensions: &[String]) -> Vec<Option<f64>> {
    columns.iter().map(|col| col.values[i]).chain(dimensions.iter().map(|d| c.human.get(d).copied())).collect()
}

/// Per-system means with a percentile bootstrap that resamples *items* (batch, id), the
/// same resamples for every system and score, so the intervals are paired across systems.
fn system_means(
    scores: &[CandidateScores],
    columns: &[Column],
    systems: &[String],
    dimensions: &[String],
    options: &MetricsOptions,
) -> Vec<SystemMeans> {
    let names = score_names(columns, dimensions);
    let items = first_appearance_pairs(scores);
    let item_index: HashMap<(&str, &str), usize> =
        items.iter().enumerate().map(|(i, (b, id))| ((b.as_str(), id.as_str()), i)).collect();
    let system_index: HashMap<&str, usize> = systems.iter().enumerate().map(|(i, s)| (s.as_str(), i)).collect();
    // values[item][system][score]: at most one candidate per (item, system).
    let mut values = vec![vec![vec![None; names.len()]; systems.len()]; items.len()];
    for (i, c) in scores.iter().enumerate() {
        let item = item_index[&(c.batch.as_str(), c.id.as_str())];
        values[item][system_index[c.system.as_str()]] = score_values(i, c, columns, dimensions);
    }
    let bootstrap = options.bootstrap;
    // One replicate: the mean of every (system, score), system-major, over the drawn items
    // (NaN where a system has no value among them).
    let width = systems.len() * names.len();
    let result = bootstrap.run(items.len(), |drawn| {
        let (mut sum, mut count) = (vec![0.0; width], vec![0usize; width]);
        for &item in drawn {
            for (k, v) in values[item].iter().flatten().enumerate() {
                if let Some(v) = v {
                    sum[k] += v;
                    count[k] += 1;
                }
            }
        }
        sum.iter().zip(&count).map(|(s, &n)| if n == 0 { f64::NAN } else { s / n as f64 }).collect()
    });
    let all: Vec<usize> = (0..items.len()).collect();
    systems
        .iter()
        .enumerate()
        .map(|(s, system)| SystemMeans {
            system: system.clone(),
            candidates: scores.iter().filter(|c| &c.system == system).count(),
            scores: names
                .iter()
                .enumerate()
                .map(|(k, name)| {
                    let vals: Vec<f64> = all.iter().filter_map(|&i| values[i][s][k]).collect();
                    let interval = match result.intervals.get(s * names.len() + k) {
                        _ if vals.is_empty() => Stat::undefined("no values"),
                        Some(Stat::Undefined(reason)) => Stat::undefined(format!(
                            "{reason} (a resample drew none of this system's items with a value)"
                        )),
                        Some(i) => i.clone(),
                        None => Stat::undefined("no items to resample"),
                    };
                    MeanScore { score: name.clone(), n: vals.len(), mean: describe::mean(&vals), interval }
                })
                .collect(),
        })
        .collect()
}

fn first_appearance_pairs(scores: &[CandidateScores]) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    scores
        .iter()
        .filter(|c| seen.insert((c.batch.clone(), c.id.clone())))
        .map(|c| (c.batch.clone(), c.id.clone()))
        .collect()
}

fn agreement_per_batch(
    scores: &[CandidateScores],
    columns: &[Column],
    systems: &[String],
    batches: &[String],
    dimensions: &[String],
) -> Vec<Agreement> {
    let system_index: HashMap<&str, usize> = systems.iter().enumerate().map(|(i, s)| (s.as_str(), i)).collect();
    let mut out = Vec::new();
    for batch in batches {
        for column in columns {
            for dimension in dimensions.iter().filter(|d| column.compares_with(d)) {
                let paired: Vec<(&CandidateScores, f64, f64)> = scores
                    .iter()
                    .zip(&column.values)
                    .filter(|(c, _)| &c.batch == batch)
                    .filter_map(|(c, value)| Some((c, (*value)?, *c.human.get(dimension)?)))
                    .collect();
                out.push(agreement_of(&paired, &system_index, column, batch, dimension));
            }
        }
    }
    out
}

/// One column's agreement with one dimension over (candidate, metric value, human score)
/// triples of one batch.
fn agreement_of(
    paired: &[(&CandidateScores, f64, f64)],
    system_index: &HashMap<&str, usize>,
    column: &Column,
    batch: &str,
    dimension: &str,
) -> Agreement {
    let metric_values: Vec<f64> = paired.iter().map(|p| p.1).collect();
    let human_values: Vec<f64> = paired.iter().map(|p| p.2).collect();
    let scored: Vec<agreement::Scored> = paired
        .iter()
        .map(|(c, m, h)| agreement::Scored {
            item: c.id.as_str(),
            system: system_index[c.system.as_str()],
            metric: *m,
            human: *h,
        })
        .collect();
    Agreement {
        batch: batch.to_string(),
        metric: column.name.clone(),
        dimension: dimension.to_string(),
        n: paired.len(),
        spearman: spearman(&metric_values, &human_values),
        quadratic_kappa: column.kappa_bins.map(|bins| agreement::quadratic_kappa(&metric_values, &human_values, bins)),
        pairwise: agreement::pairwise(&scored),
    }
}

fn batch_mean<'a>(values: impl Iterator<Item = &'a Stat<f64>>) -> BatchMean {
    let defined: Vec<f64> = values.filter_map(|s| s.value().copied()).collect();
    BatchMean {
        batches: defined.len(),
        mean: if defined.is_empty() { Stat::undefined("undefined in every batch") } else { describe::mean(&defined) },
    }
}

fn agreement_means(agreement: &[Agreement], columns: &[Column], dimensions: &[String]) -> Vec<AgreementMean> {
    let mut out = Vec::new();
    for column in columns {
        for dimension in dimensions.iter().filter(|d| column.compares_with(d)) {
            let rows: Vec<&Agreement> =
                agreement.iter().filter(|a| a.metric == column.name && &a.dimension == dimension).collect();
            let rhos: Vec<Stat<f64>> = rows.iter().map(|a| a.spearman.clone().map(|c| c.r)).collect();
            out.push(AgreementMean {
                metric: column.name.clone(),
                dimension: dimension.clone(),
                spearman: batch_mean(rhos.iter()),
                quadratic_kappa: column
                    .kappa_bins
                    .is_some()
                    .then(|| batch_mean(rows.iter().filter_map(|a| a.quadratic_kappa.as_ref()))),
                pairwise_accuracy: batch_mean(rows.iter().map(|a| &a.pairwise.accuracy)),
                pairwise_kappa: batch_mean(rows.iter().map(|a| &a.pairwise.kappa)),
            });
        }
    }
    out
}

/// A score's values by name, built-in or extra, in candidate order.
pub fn score_values_named(scores: &[CandidateScores], extra: &[ExtraScore], name: &str) -> Option<Vec<Option<f64>>> {
    match Metric::parse(name) {
        Some(m) => Some(scores.iter().map(|c| c.metric(m)).collect()),
        None => extra.iter().find(|e| e.name == name).map(|e| e.values.clone()),
    }
}

/// Every extra score against the built-in metric that agrees best with the same dimension.
fn comparisons(
    scores: &[CandidateScores],
    columns: &[Column],
    means: &[AgreementMean],
    dimensions: &[String],
    options: &MetricsOptions,
) -> Vec<Comparison> {
    let builtin = Metric::ALL.len();
    let mean_rho = |name: &str, dimension: &str| {
        means
            .iter()
            .find(|m| m.metric == name && m.dimension == dimension)
            .and_then(|m| m.spearman.mean.value().copied())
    };
    // (extra column, best built-in column, dimension)
    let mut pairs = Vec::new();
    for (e, extra) in columns.iter().enumerate().skip(builtin) {
        for (d, dimension) in dimensions.iter().enumerate().filter(|(_, d)| extra.compares_with(d)) {
            let best = (0..builtin)
                .filter_map(|b| Some((b, mean_rho(&columns[b].name, dimension)?)))
                .max_by(|x, y| x.1.total_cmp(&y.1));
            if let Some((b, _)) = best {
                pairs.push((e, b, d));
            }
        }
    }
    if pairs.is_empty() {
        return Vec::new();
    }
    let items = first_appearance_pairs(scores);
    let item_index: HashMap<(&str, &str), usize> =
        items.iter().enumerate().map(|(i, (b, id))| ((b.as_str(), id.as_str()), i)).collect();
    let members: Vec<Vec<usize>> = {
        let mut m = vec![Vec::new(); items.len()];
        for (i, c) in scores.iter().enumerate() {
            m[item_index[&(c.batch.as_str(), c.id.as_str())]].push(i);
        }
        m
    };
    // The mean over batches of the difference in Spearman, over the candidates `drawn`
    // (with repeats); batches where either is undefined are left out.
    let difference = |drawn: &[usize], e: usize, b: usize, d: usize| -> Option<f64> {
        let mut by_batch: Vec<(&str, Vec<usize>)> = Vec::new();
        for &item in drawn {
            let batch = items[item].0.as_str();
            match by_batch.iter_mut().find(|(name, _)| *name == batch) {
                Some((_, list)) => list.extend(&members[item]),
                None => by_batch.push((batch, members[item].clone())),
            }
        }
        let rho = |column: &Column, list: &[usize]| {
            let paired: Vec<(f64, f64)> =
                list.iter().filter_map(|&i| Some((column.values[i]?, *scores[i].human.get(&dimensions[d])?))).collect();
            let (x, y): (Vec<f64>, Vec<f64>) = paired.into_iter().unzip();
            spearman(&x, &y).value().map(|c| c.r)
        };
        let differences: Vec<f64> =
            by_batch.iter().filter_map(|(_, list)| Some(rho(&columns[e], list)? - rho(&columns[b], list)?)).collect();
        (!differences.is_empty()).then(|| differences.iter().sum::<f64>() / differences.len() as f64)
    };
    let result = options.bootstrap.run(items.len(), |drawn| {
        pairs.iter().map(|&(e, b, d)| difference(drawn, e, b, d).unwrap_or(f64::NAN)).collect()
    });
    let all: Vec<usize> = (0..items.len()).collect();
    pairs
        .iter()
        .enumerate()
        .map(|(k, &(e, b, d))| Comparison {
            score: columns[e].name.clone(),
            dimension: dimensions[d].clone(),
            versus: columns[b].name.clone(),
            score_spearman: mean_rho(&columns[e].name, &dimensions[d])
                .map_or_else(|| Stat::undefined("undefined in every batch"), Stat::Defined),
            versus_spearman: Stat::Defined(mean_rho(&columns[b].name, &dimensions[d]).expect("chosen as defined")),
            difference: difference(&all, e, b, d)
                .map_or_else(|| Stat::undefined("no batch where both are defined"), Stat::Defined),
            interval: result.intervals.get(k).cloned().unwrap_or_else(|| Stat::undefined("no items to resample")),
        })
        .collect()
}

fn provenance(options: &MetricsOptions) -> Provenance {
    let rouge_options = options.rouge;
    let mut p = Provenance::new(options.bootstrap.seed)
        .convention(
            "rouge tokenizer",
            match rouge_options.tokenizer {
                Tokenizer::RougeScore => {
                    "rouge_score 0.1.2: lowercase, [^a-z0-9]+ -> space (non-ASCII letters are deleted)"
                }
                Tokenizer::Unicode => "unicode: lowercase letters/digits of any script, CJK ideographs one token each",
            },
        )
        .convention(
            "rouge stemming",
            if rouge_options.stem {
                "NLTK Porter stemmer on tokens longer than 3 characters (ASCII only)"
            } else {
                "none"
            },
        )
        .convention("rouge score", "F-measure (F = 0 when P + R = 0); several references: highest F per ROUGE type (rouge_score score_multi)")
        .convention("rougeLsum sentences", "split on newlines")
        .convention("smog", "1.043*sqrt(30*polysyllables/sentences)+3.1291; vowel-group syllable heuristic; sentences end at .!? before whitespace; empty text = 0")
        .convention("repscore", "unique / total words, unicode tokenizer without stemming; no words = undefined")
        .convention("agreement", "per batch, then the mean over batches where defined")
        .convention("pairwise", "pairs of candidates for the same id, oriented by system order; human ties left out; metric ties count as disagreement")
        .convention(
            "system intervals",
            format!(
                "percentile bootstrap over items (batch, id), {} resamples, {}% confidence, paired across systems",
                options.bootstrap.resamples,
                options.bootstrap.confidence * 100.0
            ),
        );
    for (metric, bins) in &options.kappa_bins {
        p = p.convention(
            &format!("kappa bins {}", metric.name()),
            format!("labels {}..{}, cut points {:?}", bins.min, bins.max, bins.cut_points),
        );
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_are_the_reference_packages_names() {
        let names = serde_json::to_string(&Metric::ALL).unwrap();
        assert_eq!(names, r#"["rouge1","rouge2","rougeL","rougeLsum","smog","repscore"]"#);
        let rouge = [RougeType::Rouge1, RougeType::Rouge2, RougeType::RougeL, RougeType::RougeLsum];
        assert_eq!(serde_json::to_string(&rouge).unwrap(), r#"["rouge1","rouge2","rougeL","rougeLsum"]"#);
    }

    const EXAMPLE: &str = include_str!("../../../examples/metrics/summaries.jsonl");

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn agreement<'a>(r: &'a MetricsReport, batch: &str, metric: Metric, dimension: &str) -> &'a Agreement {
        r.agreement.iter().find(|a| a.batch == batch && a.metric == metric.name() && a.dimension == dimension).unwrap()
    }

    #[test]
    fn example_rouge_matches_rouge_score_multi() {
        // rouge_score 0.1.2: RougeScorer([...], use_stemmer=True).score_multi(references,
        // candidate)[type].fmeasure for each line of examples/metrics/summaries.jsonl.
        let expected: [[f64; 4]; 12] = [
            [0.6285714285714286, 0.4242424242424242, 0.6285714285714286, 0.6285714285714286],
            [0.6470588235294118, 0.5, 0.5294117647058824, 0.5294117647058824],
            [0.17647058823529413, 0.0, 0.11764705882352941, 0.11764705882352941],
            [0.6, 0.33333333333333326, 0.6, 0.6],
            [0.22222222222222224, 0.0, 0.22222222222222224, 0.22222222222222224],
            [0.4210526315789474, 0.11764705882352941, 0.3157894736842105, 0.4210526315789474],
            [0.5714285714285714, 0.3076923076923077, 0.5714285714285714, 0.5714285714285714],
            [0.5384615384615384, 0.33333333333333337, 0.4615384615384615, 0.4615384615384615],
            [0.1, 0.0, 0.1, 0.1],
            [0.6666666666666666, 0.5161290322580646, 0.6666666666666666, 0.6666666666666666],
            [0.8387096774193549, 0.6206896551724138, 0.7741935483870969, 0.7741935483870969],
            [0.3478260869565218, 0.09523809523809523, 0.26086956521739135, 0.26086956521739135],
        ];
        let r = evaluate("summaries.jsonl", EXAMPLE, &MetricsOptions::default()).unwrap();
        assert_eq!(r.candidates.len(), 12);
        for (c, e) in r.candidates.iter().zip(expected) {
            let got = [Metric::Rouge1, Metric::Rouge2, Metric::RougeL, Metric::RougeLsum].map(|m| c.metric(m).unwrap());
            for (g, x) in got.iter().zip(e) {
                assert!(close(*g, x), "{} {}: {got:?} vs {e:?}", c.id, c.system);
            }
        }
        // q2 has two references; llm-a's rouge1 is best against the first.
        assert_eq!(r.candidates[4].rouge1.reference, 0);
        assert_eq!(r.systems, ["gold-like", "llm-a", "llm-b"]);
        assert_eq!(r.batches, ["b1", "b2"]);
        assert_eq!(r.dimensions, ["precision", "recall", "readability", "repetition"]);
    }

    #[test]
    fn example_agreement_matches_scipy_and_sklearn() {
        let mut options = MetricsOptions::default();
        options.kappa_bins.insert(Metric::Rouge1, KappaBins { min: 1, max: 5, cut_points: vec![0.2, 0.4, 0.6, 0.8] });
        let r = evaluate("summaries.jsonl", EXAMPLE, &options).unwrap();

        // scipy 1.17.1: spearmanr(rouge1 F, human precision) over batch b1 ->
        // (0.8804062740424288, 0.02059873477492037).
        let a = agreement(&r, "b1", Metric::Rouge1, "precision");
        let rho = a.spearman.value().unwrap();
        assert!(close(rho.r, 0.8804062740424288) && (rho.p_value - 0.02059873477492037).abs() < 1e-9, "{rho:?}");
        // Pairwise (same convention in Python): 6 pairs, 1 human tie, 5 compared, 4 agree;
        // sklearn cohen_kappa_score(metric_prefs, human_prefs, labels=[-1,0,1]) -> 0.0
        // (gold-like is always preferred by the humans, so their labels are constant).
        let p = &a.pairwise;
        assert_eq!((p.pairs, p.human_ties, p.compared, p.agreements), (6, 1, 5, 4));
        assert!(close(p.accuracy.clone().unwrap(), 0.8));
        assert!(close(p.kappa.clone().unwrap(), 0.0));
        // Binned rouge1 [4,4,1,4,2,3] vs precision [5,5,1,5,4,2]: sklearn
        // cohen_kappa_score(.., labels=[1..5], weights="quadratic") -> 0.6923076923076923
        assert!(close(a.quadratic_kappa.clone().unwrap().unwrap(), 0.6923076923076923));

        // Batch b2, rouge2 vs recall: rho 0.7171371656006363; pairs 6 compared, accuracy
        // 0.8333333333333334, kappa 0.5714285714285714.
        let a = agreement(&r, "b2", Metric::Rouge2, "recall");
        assert!(close(a.spearman.value().unwrap().r, 0.7171371656006363));
        assert_eq!(a.pairwise.compared, 6);
        assert!(close(a.pairwise.accuracy.clone().unwrap(), 0.8333333333333334));
        assert!(close(a.pairwise.kappa.clone().unwrap(), 0.5714285714285714));
        assert!(agreement(&r, "b2", Metric::Rouge2, "recall").quadratic_kappa.is_none());

        // Means over batches: (0.8804062740424288 + 0.8196885999705371) / 2 for rho, and
        // (0.6923076923076923 + 0.7857142857142857) / 2 for the binned kappa.
        let m = r.agreement_means.iter().find(|m| m.metric == "rouge1" && m.dimension == "precision").unwrap();
        assert!(close(m.spearman.mean.clone().unwrap(), (0.8804062740424288 + 0.8196885999705371) / 2.0));
        assert_eq!(m.spearman.batches, 2);
        let k = m.quadratic_kappa.as_ref().unwrap();
        assert!(close(k.mean.clone().unwrap(), (0.6923076923076923 + 0.7857142857142857) / 2.0));
    }

    #[test]
    fn system_means_and_seeded_intervals() {
        let r = evaluate("summaries.jsonl", EXAMPLE, &MetricsOptions::default()).unwrap();
        // numpy: mean of the rouge1 F values above per system; human recall by hand.
        let expect = [("gold-like", 0.6166666666666667, 4.0), ("llm-b", 0.26133732669269083, 1.25)];
        for (system, rouge1, recall) in expect {
            let s = r.system_means.iter().find(|s| s.system == system).unwrap();
            assert_eq!(s.candidates, 4);
            let get = |name: &str| s.scores.iter().find(|m| m.score == name).unwrap();
            assert!(close(get("rouge1").mean.clone().unwrap(), rouge1));
            assert!(close(get("human:recall").mean.clone().unwrap(), recall));
            let interval = get("rouge1").interval.clone().unwrap();
            assert!(interval.lo <= rouge1 && rouge1 <= interval.hi && interval.lo < interval.hi, "{interval:?}");
        }
        // Same seed: identical report; another seed: other resamples.
        let again = evaluate("summaries.jsonl", EXAMPLE, &MetricsOptions::default()).unwrap();
        assert_eq!(r, again);
        let other = evaluate(
            "summaries.jsonl",
            EXAMPLE,
            &MetricsOptions { bootstrap: Bootstrap { seed: 7, ..Bootstrap::default() }, ..MetricsOptions::default() },
        )
        .unwrap();
        assert_ne!(r.system_means, other.system_means);
        assert_eq!(r.provenance.inputs[0].name, "summaries.jsonl");
        assert_eq!(r.provenance.inputs[0].bytes, EXAMPLE.len() as u64);
    }

    #[test]
    fn warns_about_non_ascii_text_and_wordless_candidates() {
        let r = evaluate("summaries.jsonl", EXAMPLE, &MetricsOptions::default()).unwrap();
        assert!(r.warnings.iter().any(|w| w.message.contains("non-ASCII letters")), "{:?}", r.warnings);
        let unicode = MetricsOptions {
            rouge: RougeOptions { tokenizer: Tokenizer::Unicode, stem: true },
            ..MetricsOptions::default()
        };
        let r = evaluate("summaries.jsonl", EXAMPLE, &unicode).unwrap();
        assert!(!r.warnings.iter().any(|w| w.message.contains("non-ASCII")));

        let text = "{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"...\", \"references\": [\"Fever.\"], \"human\": {\"overall\": 2}}\n\
                    {\"id\": \"q\", \"system\": \"b\", \"candidate\": \"Fever.\", \"references\": [\"Fever.\"]}";
        let r = evaluate("t.jsonl", text, &MetricsOptions::default()).unwrap();
        assert!(!r.candidates[0].repscore.is_defined());
        assert_eq!(r.candidates[0].smog, 0.0);
        let messages: Vec<&str> = r.warnings.iter().map(|w| w.message.as_str()).collect();
        assert!(messages.iter().any(|m| m.starts_with("1 candidate(s) have no words")), "{messages:?}");
        assert!(messages.iter().any(|m| m.starts_with("human score `overall` is missing for 1 of 2")), "{messages:?}");
        // Spearman on one candidate is undefined, with the reason, not 0.
        assert!(!r.agreement[0].spearman.is_defined());
    }

    #[test]
    fn bad_options_are_rejected() {
        let mut options = MetricsOptions::default();
        options.kappa_bins.insert(Metric::Smog, KappaBins { min: 1, max: 5, cut_points: vec![8.0] });
        let err = evaluate("summaries.jsonl", EXAMPLE, &options).unwrap_err().to_string();
        assert_eq!(err, "kappa bins for smog: 5 labels (1..5) need 4 cut points, got 1");
        let options = MetricsOptions {
            bootstrap: Bootstrap { confidence: 1.5, ..Bootstrap::default() },
            ..MetricsOptions::default()
        };
        assert!(evaluate("summaries.jsonl", EXAMPLE, &options).is_err());
        // Options arrive from the page as JSON.
        let json = r#"{"rouge": {"tokenizer": "unicode", "stem": false}, "seed": 3, "kappa_bins": {"rougeL": {"min": 1, "max": 3, "cut_points": [0.3, 0.6]}}}"#;
        let parsed: MetricsOptions = serde_json::from_str(json).unwrap();
        assert_eq!(parsed.rouge.tokenizer, Tokenizer::Unicode);
        assert_eq!(parsed.bootstrap.resamples, 1000);
        assert!(parsed.kappa_bins.contains_key(&Metric::RougeL));
    }

    #[test]
    fn tables_have_one_row_per_thing() {
        let r = evaluate("summaries.jsonl", EXAMPLE, &MetricsOptions::default()).unwrap();
        let t = crate::jobs::tables::metrics(&r);
        assert_eq!(t.len(), 4);
        assert_eq!(t[0].rows.len(), 12);
        assert_eq!(t[1].rows.len(), 3 * (6 + 4));
        assert_eq!(t[2].rows.len(), 2 * 6 * 4);
        assert_eq!(t[3].rows.len(), 6 * 4);
        assert_eq!(t[0].headers[4], "rouge1");
        serde_json::to_string(&r).unwrap();
    }
}
