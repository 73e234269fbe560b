//! Reference-based metrics (with BERTScore when a model is given): the method reads its own
//! single input.

use super::kept::{Encoding, ModelJob, Progress, ProgressEncoder, RunOptions};
use super::quality::ModelQuality;
use super::spec::{between, options_value, reply, JobRequest, JobSpec, LocalFuture, ModelRun, RunViews};
use super::{tables, NamedText, Outcome};
use crate::data::candidates::{parse_candidates, Candidate};
use crate::data::common::first_appearance;
use crate::eval::metrics::combine;
use crate::eval::metrics::{
    score_values_named, BertScoreSection, CandidateScores, Combination, ExtraScore, KappaBins, Metric, MetricsOptions,
    MetricsReport,
};
use crate::model::bertscore::PrfScore;
use crate::model::{CpuEncoder, Encoder, TextModel};
use crate::report::{Fingerprint, Provenance, SingleInputReport};
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct MetricsRequest {
    pub file: NamedText,
    /// The file whose human scores the combination's weights are fitted on (`--combine-fit`):
    /// never the scored file's own rows.
    #[serde(default)]
    pub fit: Option<NamedText>,
    #[serde(default)]
    pub options: crate::eval::metrics::MetricsOptions,
}

pub fn metrics(req: &MetricsRequest) -> Result<Outcome<MetricsReport>> {
    metrics_with(req, &MetricModels::default())
}

/// BERTScore settings: the model and its files' fingerprints come from the front end.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct BertScoreRequest {
    /// Hidden layer (1-based); default: the last.
    #[serde(default)]
    pub layer: Option<usize>,
    #[serde(default)]
    pub idf: bool,
    /// (b_P, b_R, b_F) for the baseline rescale (x - b) / (1 - b).
    #[serde(default)]
    pub baseline: Option<(f64, f64, f64)>,
}

/// The models a metrics run scores with, each with the encoder that runs its weights (its
/// own CPU encoder in the CLI, the GPU's, the page's kept model) and its files' fingerprints.
pub struct MetricModels<'a, E = CpuEncoder> {
    pub bertscore: Option<(&'a TextModel, &'a E, Vec<Fingerprint>, &'a BertScoreRequest)>,
    /// A metric learned from human scores (`medrank train --task score`).
    pub learned: Option<(&'a TextModel, &'a E, Vec<Fingerprint>)>,
}

impl<E> Default for MetricModels<'_, E> {
    fn default() -> Self {
        MetricModels { bertscore: None, learned: None }
    }
}

/// [`metrics_on`] with the models on their own CPU encoders (the CLI).
/// The arithmetic BERTScore ran in is said before its convention (the page's runs say it
/// with the backend, `kept::describe_run`).
pub fn metrics_with(req: &MetricsRequest, models: &MetricModels) -> Result<Outcome<MetricsReport>> {
    let mut outcome = crate::model::run_ready(metrics_on(req, models))?;
    if let Some((model, ..)) = &models.bertscore {
        let conventions = &mut outcome.report.provenance.conventions;
        let at = conventions.iter().position(|(key, _)| key == "bertscore").unwrap_or(conventions.len());
        let precision = crate::model::describe_precision(model.encoder.model.precision);
        conventions.insert(at, ("precision".into(), precision));
    }
    Ok(outcome)
}

/// Reference-based metrics, plus what `models` compute, plus the combinations the options
/// ask for; every score is compared with the human scores the same way. The one pipeline of
/// both front ends: the CLI runs it on the CPU, the page on the kept model's encoder.
pub async fn metrics_on<E: Encoder>(
    req: &MetricsRequest,
    models: &MetricModels<'_, E>,
) -> Result<Outcome<MetricsReport>> {
    let (candidates, warnings) = parse_candidates(&req.file.name, &req.file.text)?;
    let scores = crate::eval::metrics::score_candidates(&candidates, &req.options);
    let (mut extra, bertscore, model_warnings) = model_scores(&req.file.name, &candidates, models).await?;
    let mut combination = None;
    if req.options.combine {
        let (combinations, made) = combined(req, &candidates, &scores, &extra, models).await?;
        extra.extend(combinations);
        combination = Some(made);
    }
    let mut report = crate::eval::metrics::evaluate_scored(&candidates, scores, &req.options, extra)?.with_input(
        &req.file.name,
        &req.file.text,
        warnings,
    );
    report.warnings.extend(model_warnings);
    if let Some((model, _, fingerprints)) = &models.learned {
        report.provenance.inputs.extend(fingerprints.iter().cloned());
        report.provenance.conventions.push((
            "learned".into(),
            format!(
                "learned:DIMENSION: {}'s prediction of the human score (a regression head trained on human scores), \
                 read from the candidate paired with the question and the first reference; quadratic kappa rounds it \
                 to the nearest whole number of the human scores' range",
                model.name
            ),
        ));
    }
    if let Some((section, model, fingerprints)) = bertscore {
        report.provenance.inputs.extend(fingerprints);
        report.provenance.conventions.push(("bertscore".into(), describe_bertscore(&section, &model.name)));
        report.bertscore = Some(section);
    }
    if let Some(made) = combination {
        if let Some(fit) = &req.fit {
            report.provenance.inputs.push(fit.fingerprint());
        }
        report.provenance.conventions.push(("combined".into(), describe_combination(&made)));
        report.combination = Some(made);
    }
    let tables = tables::metrics(&report);
    Ok(Outcome { report, tables })
}

/// The scores the models give each candidate, as extra score columns (BERTScore's F), and
/// BERTScore's own section (P, R, F per candidate).
#[allow(clippy::type_complexity)]
async fn model_scores<'m, E: Encoder>(
    file: &str,
    candidates: &[Candidate],
    models: &MetricModels<'m, E>,
) -> Result<(Vec<ExtraScore>, Option<(BertScoreSection, &'m TextModel, Vec<Fingerprint>)>, Vec<Warning>)> {
    let mut extra = Vec::new();
    let mut section = None;
    let mut warnings = Vec::new();
    if let Some((model, encoder, _)) = &models.learned {
        let learned = crate::eval::metrics::learned::predict_scores(*encoder, model, candidates).await?;
        for (j, dimension) in learned.dimensions.iter().enumerate() {
            extra.push(ExtraScore {
                name: format!("learned:{dimension}"),
                dimension: Some(dimension.clone()),
                values: learned.scores.iter().map(|row| Some(row[j])).collect(),
                kappa_bins: human_scale_bins(candidates, dimension),
            });
        }
        if let Some(&first) = learned.truncated.first() {
            let c = &candidates[first];
            warnings.push(Warning::new(format!(
                "{} of {} candidate(s) were cut to {}'s limit of {} tokens for the learned metric, which scored \
                 what it read (first: {file}:{}, id `{}`, system `{}`)",
                learned.truncated.len(),
                candidates.len(),
                model.name,
                model.tokenizer.max_tokens,
                c.line,
                c.id,
                c.system
            )));
        }
    }
    if let Some((model, encoder, fingerprints, b)) = &models.bertscore {
        let s = bertscore(file, candidates, model, *encoder, b).await?;
        extra.push(ExtraScore {
            name: "bertscore".into(),
            dimension: None,
            values: s.candidates.iter().map(|p| Some(p.f1)).collect(),
            kappa_bins: None,
        });
        section = Some((s, *model, fingerprints.clone()));
    }
    Ok((extra, section, warnings))
}

/// Bins that round a prediction on the human scale to the nearest whole number of the
/// scale the file's scores span (the study's quadratic kappa on 1..5), for quadratic kappa;
/// none when the file has no such scores or the span is too wide for kappa's label list.
/// Averaged scores that are not whole numbers leave kappa undefined, with that reason.
fn human_scale_bins(candidates: &[Candidate], dimension: &str) -> Option<KappaBins> {
    let scores = candidates.iter().flat_map(|c| &c.human).filter(|(d, _)| d == dimension).map(|(_, v)| *v);
    let (low, high) = scores
        .fold(None, |span: Option<(f64, f64)>, v| Some(span.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v)))))?;
    let (min, max) = (low.floor() as i64, high.ceil() as i64);
    let bins = KappaBins { min, max, cut_points: (min..max).map(|k| k as f64 + 0.5).collect() };
    bins.validate().ok().map(|()| bins)
}

async fn bertscore<E: Encoder>(
    file: &str,
    candidates: &[Candidate],
    model: &TextModel,
    encoder: &E,
    b: &BertScoreRequest,
) -> Result<BertScoreSection> {
    let texts: Vec<&str> = candidates.iter().map(|c| c.candidate.as_str()).collect();
    let references: Vec<Vec<&str>> =
        candidates.iter().map(|c| c.references.iter().map(String::as_str).collect()).collect();
    let layer = b.layer.unwrap_or(model.encoder.model.config.num_layers);
    let options = crate::model::bertscore::BertScoreOptions { layer, idf: b.idf, baseline: b.baseline };
    let scores = crate::model::bertscore::bertscore(encoder, &model.tokenizer, &texts, &references, &options)
        .await
        .map_err(|e| {
            e.naming_input(&model.name, |i| {
                let c = &candidates[i];
                format!("{file}:{}: the candidate of system `{}` for `{}` or its references", c.line, c.system, c.id)
            })
        })?;
    let mut systems: Vec<&str> = Vec::new();
    for c in candidates {
        if !systems.contains(&c.system.as_str()) {
            systems.push(&c.system);
        }
    }
    let system_means = systems
        .iter()
        .map(|sys| {
            let mine: Vec<&PrfScore> =
                candidates.iter().zip(&scores).filter(|(c, _)| c.system == *sys).map(|(_, s)| s).collect();
            let n = mine.len().max(1) as f64;
            let mean = |f: fn(&PrfScore) -> f64| mine.iter().map(|s| f(s)).sum::<f64>() / n;
            (sys.to_string(), mean(|s| s.precision), mean(|s| s.recall), mean(|s| s.f1))
        })
        .collect();
    Ok(BertScoreSection {
        model: model.name.clone(),
        layer,
        idf: b.idf,
        baseline: b.baseline,
        candidates: scores,
        system_means,
    })
}

fn describe_bertscore(b: &BertScoreSection, model: &str) -> String {
    format!(
        "greedy max-cosine token matching on hidden layer {} of {model}; special tokens excluded; {}; best F over references{}",
        b.layer,
        if b.idf { "idf weights log((M+1)/(df+1)) from the references" } else { "uniform weights" },
        if b.baseline.is_some() { "; baseline rescale (x-b)/(1-b) on P, R, F separately (may be negative)" } else { "" }
    )
}

/// The combined scores: the mean of the scorers' rank- and z-normalised values, and, with a
/// fit file, one fitted combination per human dimension of that file.
async fn combined<E: Encoder>(
    req: &MetricsRequest,
    candidates: &[Candidate],
    scores: &[CandidateScores],
    extra: &[ExtraScore],
    models: &MetricModels<'_, E>,
) -> Result<(Vec<ExtraScore>, Combination)> {
    let available: Vec<String> =
        Metric::ALL.iter().map(|m| m.name().to_string()).chain(extra.iter().map(|e| e.name.clone())).collect();
    let named = &req.options.combine_scorers;
    let scorers = if named.is_empty() { combine::default_scorers(&available) } else { named.clone() };
    if let Some(unknown) = scorers.iter().find(|s| !available.contains(s)) {
        return Err(Error::option(
            "combine",
            format!("{unknown}: no such score in this run; its scores: {}", available.join(", ")),
        ));
    }
    if scorers.len() < 2 {
        return Err(Error::option(
            "combine",
            format!("{}: a combination needs at least two scorers, got {}", scorers.join(","), scorers.len()),
        ));
    }
    // The scored file's columns by name: its built-in metrics and extra scores.
    let columns: Vec<Vec<Option<f64>>> =
        scorers.iter().map(|s| score_values_named(scores, extra, s).expect("checked above")).collect();
    let column_refs: Vec<&[Option<f64>]> = columns.iter().map(Vec::as_slice).collect();
    let batches: Vec<&str> = candidates.iter().map(|c| c.batch.as_str()).collect();
    let mut out: Vec<ExtraScore> = combine::Normalisation::ALL
        .iter()
        .map(|&how| ExtraScore {
            name: format!("combined:mean-{}", how.name()),
            dimension: None,
            values: combine::mean_of(&column_refs, &batches, how),
            kappa_bins: None,
        })
        .collect();
    let mut fitted = Vec::new();
    if let Some(fit) = &req.fit {
        let (fit_candidates, _) = parse_candidates(&fit.name, &fit.text)?;
        refuse_shared_rows(&req.file.name, candidates, &fit.name, &fit_candidates)?;
        let fit_scores = crate::eval::metrics::score_candidates(&fit_candidates, &req.options);
        let (fit_extra, _, _) = model_scores(&fit.name, &fit_candidates, models).await?;
        let fit_columns: Vec<Vec<Option<f64>>> = scorers
            .iter()
            .map(|s| score_values_named(&fit_scores, &fit_extra, s).expect("the same models score both files"))
            .collect();
        let fit_refs: Vec<&[Option<f64>]> = fit_columns.iter().map(Vec::as_slice).collect();
        let fit_batches: Vec<&str> = fit_candidates.iter().map(|c| c.batch.as_str()).collect();
        let dimensions = first_appearance(fit_candidates.iter().flat_map(|c| c.human.iter().map(|(d, _)| d.clone())));
        for dimension in &dimensions {
            let human: Vec<Option<f64>> = fit_scores.iter().map(|c| c.human.get(dimension).copied()).collect();
            let Some(weights) = combine::fit(dimension, &fit_refs, &human, &fit_batches) else { continue };
            out.push(ExtraScore {
                name: format!("fitted:{dimension}"),
                dimension: Some(dimension.clone()),
                values: combine::apply(&weights, &column_refs, &batches),
                kappa_bins: None,
            });
            fitted.push(weights);
        }
    }
    Ok((out, Combination { scorers, fit_file: req.fit.as_ref().map(|f| f.name.clone()), fitted }))
}

/// The weights must never see the scored rows: a fit file that shares a candidate (same id,
/// system and text) with the scored file is refused, naming both lines.
fn refuse_shared_rows(file: &str, candidates: &[Candidate], fit_file: &str, fit: &[Candidate]) -> Result<()> {
    let keys: std::collections::HashMap<(&str, &str, &str), usize> =
        candidates.iter().map(|c| ((c.id.as_str(), c.system.as_str(), c.candidate.as_str()), c.line)).collect();
    for c in fit {
        if let Some(line) = keys.get(&(c.id.as_str(), c.system.as_str(), c.candidate.as_str())) {
            return Err(Error::option(
                "combine_fit",
                format!(
                    "{fit_file}: its line {} holds the candidate of system `{}` for `{}` that {file}:{line} scores; \
                     the weights must be fitted on other rows than those they score (a dev split)",
                    c.line, c.system, c.id
                ),
            ));
        }
    }
    Ok(())
}

fn describe_combination(c: &Combination) -> String {
    let mut text = format!(
        "combined:mean-rank and combined:mean-z: the mean of {}'s values, each ranked (scaled 0..1) or z-scored within its batch",
        c.scorers.join(", ")
    );
    if let Some(fit) = &c.fit_file {
        text.push_str(&format!(
            "; fitted:DIMENSION: non-negative least squares of the z-scored scorers on the z-scored human scores of {fit}, no intercept, applied to this file's z-scored scorers"
        ));
    }
    text
}

/// The metrics report of a run on the page's model: the metrics' own, with the model's
/// measured quality beside it when medrank trained it (the job layer's, which the metrics
/// below it do not know).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricsOnModel {
    #[serde(flatten)]
    pub metrics: MetricsReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_quality: Option<ModelQuality>,
}

impl MetricsOnModel {
    /// The metrics with the measured quality of the learned metric's model beside them
    /// (`medrank metrics --learned DIR`: the folder's `train_log.json`), as the page's
    /// Metrics job reports it.
    pub fn with_quality(mut metrics: MetricsReport, quality: Option<&ModelQuality>) -> MetricsOnModel {
        let mut model_quality = None;
        if let Some(q) = quality {
            metrics.provenance.conventions.push(super::kept::quality_convention(q));
            super::kept::record_quality(&mut model_quality, &mut metrics.warnings, q);
        }
        MetricsOnModel { metrics, model_quality }
    }
}

/// What the page's model adds to the metrics: a score model (`medrank train --task score`)
/// its `learned:DIM` predictions (`--learned`), any other encoder BERTScore with the CLI's
/// defaults (`--bertscore`).
impl ModelJob for MetricsRequest {
    type Output = Outcome<MetricsOnModel>;
    const STAGE: &'static str = "Scoring candidates with the model";

    async fn run_on<E: Encoder>(&self, on: Encoding<'_, E>) -> Result<Outcome<MetricsOnModel>> {
        let Encoding { model, encoder, model_inputs, progress } = on;
        let candidates = self.file.text.lines().filter(|l| !l.trim().is_empty()).count();
        let counted = ProgressEncoder::start(encoder, candidates, progress)?;
        let settings = BertScoreRequest::default();
        let models = if model.encoder.model.config.score_scale.is_some() {
            MetricModels { learned: Some((model, &counted, model_inputs)), bertscore: None }
        } else {
            MetricModels { bertscore: Some((model, &counted, model_inputs, &settings)), learned: None }
        };
        let Outcome { report, tables } = metrics_on(self, &models).await?;
        Ok(Outcome { report: MetricsOnModel { metrics: report, model_quality: None }, tables })
    }

    fn provenance(output: &mut Outcome<MetricsOnModel>) -> &mut Provenance {
        &mut output.report.metrics.provenance
    }

    fn trust(output: &mut Outcome<MetricsOnModel>) -> (&mut Option<ModelQuality>, &mut Vec<Warning>) {
        (&mut output.report.model_quality, &mut output.report.metrics.warnings)
    }
}

/// The Metrics job's options: the metrics' (`medrank metrics`' flags) and, with a model,
/// where it runs (`--backend`, `--precision`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct MetricsJobOptions {
    #[serde(flatten)]
    pub metrics: MetricsOptions,
    #[serde(flatten)]
    pub run: RunOptions,
}

/// The job: reference-based metrics over one candidates file; with the page's model also
/// the learned metric or BERTScore.
pub const JOB: JobSpec = JobSpec::new("metrics", "Metrics", "reference-based metrics", "metrics")
    .reads(&["metrics", "metrics_fit"], &[&["metrics"]])
    .defaults(|| options_value(&MetricsJobOptions { run: RunOptions::page(), ..Default::default() }))
    .runs(run)
    .runs_on_model(run_on_model, &[], "");

fn request(request: &JobRequest, options: MetricsOptions) -> Result<MetricsRequest> {
    Ok(MetricsRequest {
        file: request.required("metrics", "a candidates file (JSONL with candidate and references)")?.named(),
        fit: request.optional("metrics_fit", "human scores to fit the combination on")?,
        options,
    })
}

/// Reference-based metrics over one candidates file without a model (`medrank metrics`).
fn run(job: &JobRequest, progress: Progress) -> Result<String> {
    let options: MetricsJobOptions = job.options()?;
    let req = request(job, options.metrics)?;
    between(progress, "Scoring candidates", || reply(&metrics(&req)?, ()))
}

/// The metrics with the kept model (`medrank metrics --learned DIR` for a score model, else
/// `--bertscore DIR`, with `--backend --precision`): on WebGPU when the options allow it.
fn run_on_model(model: ModelRun<'_>) -> LocalFuture<'_, Result<String>> {
    Box::pin(async move {
        let options: MetricsJobOptions = model.request.options()?;
        let req = request(model.request, options.metrics)?;
        let (outcome, backend, kept) = model.run(&req, &options.run, "Scoring candidates").await?;
        reply(&outcome, RunViews::of(kept, &backend))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two items of two systems in one batch. Against the reference "a b c d" the candidates
    /// score by hand: rouge1 F 1, 0.25, 0.5, 0 ("a a a a" shares one `a`; "a b x x" two of
    /// four words); Repscore (unique / all words) 1, 0.25, 0.75, 1.
    fn file(batch: &str, prefix: &str, human: [f64; 4]) -> String {
        let texts = [("q1", "A", "a b c d"), ("q1", "B", "a a a a"), ("q2", "A", "a b x x"), ("q2", "B", "x y z w")];
        texts
            .iter()
            .zip(human)
            .map(|((id, system, text), h)| {
                format!(
                    "{{\"id\": \"{prefix}{id}\", \"system\": \"{system}\", \"batch\": \"{batch}\", \"candidate\": \"{text}\", \"references\": [\"a b c d\"], \"human\": {{\"overall\": {h}}}}}\n"
                )
            })
            .collect()
    }

    fn request(text: String, fit: Option<String>, scorers: &str) -> MetricsRequest {
        let mut options = MetricsOptions::default();
        let scorers = scorers.split(',').filter(|s| !s.is_empty()).map(String::from).collect();
        options.combine = true;
        options.combine_scorers = scorers;
        MetricsRequest {
            file: NamedText::new("test.jsonl", text),
            fit: fit.map(|f| NamedText::new("dev.jsonl", f)),
            options,
        }
    }

    fn column(report: &MetricsReport, name: &str) -> Vec<f64> {
        score_values_named(&report.candidates, &report.extra_scores, name)
            .unwrap()
            .into_iter()
            .map(Option::unwrap)
            .collect()
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12) && a.len() == b.len()
    }

    #[test]
    fn combined_means_by_hand() {
        let r = metrics(&request(file("b1", "", [5.0, 1.0, 3.0, 2.0]), None, "rouge1,repscore")).unwrap().report;
        assert!(close(&column(&r, "rouge1"), &[1.0, 0.25, 0.5, 0.0]));
        assert!(close(&column(&r, "repscore"), &[1.0, 0.25, 0.75, 1.0]));
        // Ranks within the batch scaled (r - 1) / 3: rouge1 1, 1/3, 2/3, 0; Repscore (the two
        // 1s share rank 3.5) 5/6, 0, 1/3, 5/6. Means: 11/12, 1/6, 1/2, 5/12.
        assert!(close(&column(&r, "combined:mean-rank"), &[11.0 / 12.0, 1.0 / 6.0, 0.5, 5.0 / 12.0]));
        // numpy 2.4.6: z = lambda a: (a - a.mean()) / a.std();
        // ((z(rouge1) + z(repscore)) / 2).tolist()
        let mean_z = [1.168887119719528, -1.070042857346281, 0.08451542547285165, -0.18335968784609852];
        assert!(close(&column(&r, "combined:mean-z"), &mean_z));
        let c = r.combination.as_ref().unwrap();
        assert_eq!(
            (c.scorers.as_slice(), c.fit_file.as_deref(), c.fitted.len()),
            (&["rouge1".into(), "repscore".into()][..], None, 0)
        );
        // Each combination is compared with the best token metric on the dimension.
        let names: Vec<&str> = r.comparisons.iter().map(|c| c.score.as_str()).collect();
        assert_eq!(names, ["combined:mean-rank", "combined:mean-z"]);
    }

    #[test]
    fn fitted_weights_never_see_the_scored_rows() {
        let dev = file("f1", "f-", [5.0, 1.0, 3.0, 2.0]);
        let r = metrics(&request(file("b1", "", [4.0, 2.0, 1.0, 3.0]), Some(dev.clone()), "rouge1,repscore"))
            .unwrap()
            .report;
        // scipy 1.17.1: scipy.optimize.nnls(np.stack([z(rouge1), z(repscore)], 1), z(human))
        // over the fit file -> [0.7525773195876289, 0.4823344837465116]; the scored file has
        // the same texts, so its fitted values are X @ w:
        let f = &r.combination.as_ref().unwrap().fitted[0];
        assert_eq!((f.dimension.as_str(), f.rows), ("overall", 4));
        assert!(close(&f.weights, &[0.7525773195876289, 0.4823344837465116]), "{:?}", f.weights);
        let expected = [1.5387035194335674, -1.1692752678821334, 0.1272087847323334, -0.4966370362837673];
        assert!(close(&column(&r, "fitted:overall"), &expected));
        assert_eq!(
            r.extra_scores.iter().find(|e| e.name == "fitted:overall").unwrap().dimension.as_deref(),
            Some("overall")
        );
        // The scored rows' human scores shuffled: the same weights and fitted values; only the
        // agreement with them changes.
        let shuffled =
            metrics(&request(file("b1", "", [1.0, 3.0, 4.0, 2.0]), Some(dev), "rouge1,repscore")).unwrap().report;
        assert_eq!(shuffled.combination, r.combination);
        assert_eq!(column(&shuffled, "fitted:overall"), column(&r, "fitted:overall"));
        assert_ne!(shuffled.agreement_means, r.agreement_means);
    }

    #[test]
    fn combination_refusals_name_the_option() {
        let text = file("b1", "", [5.0, 1.0, 3.0, 2.0]);
        let err = |req: MetricsRequest| metrics(&req).unwrap_err().to_string();
        assert_eq!(
            err(request(text.clone(), None, "rouge1,bleu")),
            "--combine bleu: no such score in this run; its scores: rouge1, rouge2, rougeL, rougeLsum, smog, repscore"
        );
        assert_eq!(
            err(request(text.clone(), None, "rouge1")),
            "--combine rouge1: a combination needs at least two scorers, got 1"
        );
        assert_eq!(
            err(request(text.clone(), Some(text.clone()), "rouge1,repscore")),
            "--combine-fit dev.jsonl: its line 1 holds the candidate of system `A` for `q1` that test.jsonl:1 scores; \
             the weights must be fitted on other rows than those they score (a dev split)"
        );
        // No scorer named: every built-in metric but SMOG.
        let r = metrics(&request(text, None, "")).unwrap().report;
        assert_eq!(r.combination.unwrap().scorers, ["rouge1", "rouge2", "rougeL", "rougeLsum", "repscore"]);
    }

    /// The files of a random tiny score model (one output, `overall`, on a scale of mean 3
    /// and deviation 1) or, with `score: false`, the same encoder with no head.
    fn tiny_model_files(score: bool) -> crate::model::ModelFiles {
        use crate::model::config::{Arch, EncoderConfig, HeadKind, ScoreScale};
        let (head, labels): (_, &[&str]) =
            if score { (HeadKind::SequenceClassification, &["overall"]) } else { (HeadKind::None, &[]) };
        let config = EncoderConfig {
            vocab_size: 30522,
            score_scale: score.then(|| ScoreScale { mean: vec![3.0], std: vec![1.0] }),
            ..EncoderConfig::tiny(Arch::Bert, 2, head, labels)
        };
        let model = crate::model::load::random_model(config, 5).unwrap();
        crate::model::ModelFiles::for_tests("tiny-score", &model)
    }

    /// The report the page's Metrics job gives on the kept model (CPU), and the stages it
    /// showed; `cancel` answers the first progress with a cancel.
    fn page_run(
        files: &crate::model::ModelFiles,
        req: &MetricsRequest,
        cancel: bool,
    ) -> (Result<MetricsReport>, Vec<String>) {
        let mut kept = super::super::kept::KeptModel::from_files(files).unwrap();
        let mut stages = Vec::new();
        let mut progress = |stage: &str, _: usize, _: usize| {
            stages.push(stage.to_string());
            if cancel {
                Err(Error::Cancelled)
            } else {
                Ok(())
            }
        };
        let run = kept.run_for_page(req, None, crate::gpu::BackendChoice::Cpu, &|| 0.0, &mut progress);
        let report = crate::model::run_ready(run).map(|(outcome, _)| outcome.report.metrics);
        (report, stages)
    }

    /// The CLI's report: `medrank metrics` with the model as `--learned` (`learned: true`) or
    /// `--bertscore` (default layer, idf and baseline).
    fn cli_run(files: &crate::model::ModelFiles, req: &MetricsRequest, learned: bool) -> MetricsReport {
        let model = TextModel::from_files(files).unwrap();
        let fingerprints = super::super::model_fingerprints(files);
        let settings = BertScoreRequest::default();
        let models = if learned {
            MetricModels { learned: Some((&model, &model.encoder, fingerprints)), bertscore: None }
        } else {
            MetricModels { bertscore: Some((&model, &model.encoder, fingerprints, &settings)), learned: None }
        };
        metrics_with(req, &models).unwrap().report
    }

    /// The page's Metrics job on a kept score model gives the CLI's `--learned` numbers, the
    /// fit file scored by the same model (the fitted combination reads the learned column);
    /// its progress is the encoder's, and a cancel stops it.
    #[test]
    fn the_page_scores_with_a_kept_score_model_as_the_cli_does() {
        let files = tiny_model_files(true);
        let dev = file("f1", "f-", [5.0, 1.0, 3.0, 2.0]);
        let req = request(file("b1", "", [4.0, 2.0, 1.0, 3.0]), Some(dev), "rouge1,learned:overall");
        let cli = cli_run(&files, &req, true);
        let (page, stages) = page_run(&files, &req, false);
        let page = page.unwrap();
        let learned = page.extra_scores.iter().find(|e| e.name == "learned:overall").expect("a learned column");
        assert!(learned.values.iter().all(|v| v.is_some_and(f64::is_finite)), "{:?}", learned.values);
        assert_eq!(page.extra_scores, cli.extra_scores);
        assert_eq!(page.agreement_means, cli.agreement_means);
        assert_eq!(page.combination, cli.combination);
        assert_eq!(page.combination.as_ref().unwrap().fitted.len(), 1);
        assert!(page.bertscore.is_none());
        assert!(stages.iter().any(|s| s.starts_with("Scoring candidates with the model")), "{stages:?}");
        let (cancelled, _) = page_run(&files, &req, true);
        assert!(matches!(cancelled, Err(Error::Cancelled)), "{cancelled:?}");
    }

    /// Any other kept model gives BERTScore with the CLI's defaults (the last layer, no idf,
    /// no baseline), the same numbers as `--bertscore`.
    #[test]
    fn the_page_scores_bertscore_with_another_kept_model_as_the_cli_does() {
        let files = tiny_model_files(false);
        let req = request(file("b1", "", [4.0, 2.0, 1.0, 3.0]), None, "rouge1,bertscore");
        let cli = cli_run(&files, &req, false);
        let page = page_run(&files, &req, false).0.unwrap();
        let section = page.bertscore.as_ref().expect("a BERTScore section");
        assert_eq!((section.layer, section.idf, section.baseline), (2, false, None));
        assert_eq!(page.bertscore, cli.bertscore);
        assert_eq!(page.extra_scores, cli.extra_scores);
        assert!(page.extra_scores.iter().all(|e| !e.name.starts_with("learned:")));
    }
}
