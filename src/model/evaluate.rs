//! Proxy-task evaluators: per (instance, system) predictions for a [`Bundle`], which the
//! ranking-over-scoring procedure (`crate::eval::proxy`) consumes.
//!
//! Inputs (ranking-over-scoring.md, Table 2; methods.md §1):
//! - MCQA, multiple-choice head: one pass per option over
//!   `question(case+question) argument [SEP] option`, one logit each, softmax over options.
//! - Misinformation / NLI, classification head: `claim [SEP] argument`,
//!   `statement evidence [SEP] argument`; the head's `id2label` names are matched to the
//!   task's labels.
//! - MCQA by similarity (no training, the demo's evaluator with only the default model):
//!   cosine of embed(question + argument) to embed(option), softmax at temperature
//!   [`SIMILARITY_TEMPERATURE`]. A **weak baseline**: a general-domain sentence encoder is
//!   not a medical reader. Measured on CasiMedicos `dev.jsonl` (one LLM argument in each
//!   question text): 0.582 accuracy (163/280; chance 0.20) with all-MiniLM-L6-v2
//!   (`cargo test --test integration encoder_minilm:: -- --ignored --nocapture similarity_casimedicos_dev`).
//!
//! Empty options ([`crate::data::is_empty_option`]; the public Ranking-Over-Scoring files
//! have an empty fifth option in 320 of 595 questions) are not candidates by default
//! ([`EmptyOptions::LeaveOut`]): never encoded, left out of the softmax, probability 0, never
//! predicted, and listed in [`EvalOutput::left_out`]. [`EmptyOptions::Keep`] makes them
//! ordinary candidates (the encoder then sees an empty second segment).
//!
//! Truncation never cuts the option; the case loses its start (the question sits at its
//! end) and the argument its end, longest first. Every cut input is reported with its
//! instance and system. Inputs are batched by length. With full cross-attention the case's
//! hidden states depend on the option, so the shared case is re-encoded per option; the
//! similarity evaluator does share work: each option is embedded once per instance, not
//! once per system.

use super::batching::{length_batches, EncodingPlan};
use super::embed::embed_encoded;
use super::encoder::{Encoder, Readout};
use super::heads::softmax;
use super::pooling::{cosine, Pooling};
use super::tokenize::{Encoded, Part, TextTokenizer};
use crate::data::{Bundle, Prediction, Problem, Task};
use crate::error::{Error, Result};
use serde::Serialize;

/// Softmax temperature of the similarity evaluator (cosines lie in [-1, 1]; 0.05 spreads
/// them over a usable probability range, as in contrastive training of such encoders).
pub const SIMILARITY_TEMPERATURE: f64 = 0.05;

/// An input that was truncated to fit the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TruncatedInput {
    pub instance: String,
    pub system: String,
    /// Option key for MCQA, empty otherwise.
    pub option: String,
    pub tokens_cut: usize,
}

/// Predictions with the truncation record.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct EvalOutput {
    pub predictions: Vec<Prediction>,
    pub truncated: Vec<TruncatedInput>,
    /// The empty options left out of the candidates, once per instance (bundle order).
    pub left_out: Vec<LeftOutOption>,
}

impl EvalOutput {
    /// Records that `encoded` (instance, system and MCQA option, or "") lost tokens to the
    /// model's limit; nothing is recorded when it fit.
    fn note_cut(&mut self, instance: &str, system: &str, option: &str, encoded: &Encoded) {
        if encoded.tokens_cut() > 0 {
            self.truncated.push(TruncatedInput {
                instance: instance.to_string(),
                system: system.to_string(),
                option: option.to_string(),
                tokens_cut: encoded.tokens_cut(),
            });
        }
    }
}

/// Whether empty MCQA options are candidates (FORMATS.md, "Empty options").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EmptyOptions {
    /// Not candidates: left out of the softmax, probability 0 (the convention).
    #[default]
    LeaveOut,
    /// Ordinary candidates (`--keep-empty-options`).
    Keep,
}

/// An empty option that was not a candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeftOutOption {
    pub instance: String,
    /// The option's key.
    pub option: String,
}

/// Which options of an MCQA instance are candidates, recording the left-out ones. An
/// instance whose every option is empty has nothing to choose from: an error.
fn candidates(
    inst: &crate::data::Instance,
    options: &[(String, String)],
    empty: EmptyOptions,
    left_out: &mut Vec<LeftOutOption>,
) -> Result<Vec<bool>> {
    let keep: Vec<bool> =
        options.iter().map(|(_, t)| empty == EmptyOptions::Keep || !crate::data::is_empty_option(t)).collect();
    if !keep.contains(&true) {
        return Err(Error::invalid(format!(
            "instance {} (line {}): every option text is empty, so no option is a candidate; give option texts or keep empty options (--keep-empty-options)",
            inst.id, inst.line
        )));
    }
    for ((key, _), kept) in options.iter().zip(&keep) {
        if !kept {
            left_out.push(LeftOutOption { instance: inst.id.clone(), option: key.clone() });
        }
    }
    Ok(keep)
}

/// Softmax over the candidates only; the others get probability 0.
fn softmax_over(logits: &[f32], keep: &[bool], temperature: f64) -> Vec<f64> {
    let kept: Vec<f32> = logits.iter().zip(keep).filter(|(_, k)| **k).map(|(l, _)| *l).collect();
    let mut probs = softmax(&kept, temperature).into_iter();
    keep.iter().map(|k| if *k { probs.next().expect("one per candidate") } else { 0.0 }).collect()
}

/// The text pair for a classification task: (first segment, second segment).
pub fn classification_parts<'a>(problem: &'a Problem, argument: &'a str) -> Result<(Vec<Part<'a>>, Vec<Part<'a>>)> {
    let arg: Vec<Part> = if argument.trim().is_empty() { vec![] } else { vec![Part::cut_end(argument)] };
    match problem {
        Problem::Misinformation { claim, .. } => Ok((vec![Part::cut_end(claim)], arg)),
        Problem::Nli { statement, evidence, .. } => Ok((vec![Part::cut_end(statement), Part::cut_end(evidence)], arg)),
        Problem::Mcqa { .. } => Err(Error::invalid("MCQA uses the multiple-choice input, not a classification pair")),
    }
}

/// The MCQA input for one option: case+question, argument | option (never cut).
pub fn mcqa_parts<'a>(question: &'a str, argument: &'a str, option: &'a str) -> (Vec<Part<'a>>, Vec<Part<'a>>) {
    let mut first = vec![Part::cut_start(question)];
    if !argument.trim().is_empty() {
        first.push(Part::cut_end(argument));
    }
    (first, vec![Part::keep(option)])
}

/// For each task label (in `Task` order), the index of the head's logit. Names are matched
/// case-insensitively; generic names (`LABEL_0`, ...) are taken in the task's order when
/// their count matches.
pub fn label_mapping(head_labels: &[String], task: Task) -> Result<Vec<usize>> {
    let want = task.labels();
    if want.is_empty() {
        return Err(Error::invalid(format!("{} has no label head", task.facts().label)));
    }
    let norm = |s: &str| s.to_lowercase().replace([' ', '-'], "_");
    let found: Option<Vec<usize>> = want.iter().map(|w| head_labels.iter().position(|h| norm(h) == *w)).collect();
    if let Some(m) = found {
        return Ok(m);
    }
    if head_labels.len() == want.len() && head_labels.iter().all(|h| h.starts_with("LABEL_")) {
        return Ok((0..want.len()).collect());
    }
    Err(Error::invalid(format!("the model's labels {head_labels:?} do not name the {} labels {want:?}", task.name())))
}

fn prediction(instance: &str, system: &str, labels: &[String], probs: Vec<f64>, gold: &str) -> Prediction {
    let best = probs.iter().enumerate().fold(0, |b, (i, p)| if *p > probs[b] { i } else { b });
    let p_correct = labels.iter().position(|l| l == gold).map(|i| probs[i]).unwrap_or(0.0);
    Prediction {
        instance: instance.to_string(),
        system: system.to_string(),
        predicted: labels[best].clone(),
        p_correct,
        probs: labels.iter().cloned().zip(probs).collect(),
    }
}

/// One encoder input and where its logit goes.
struct Job {
    pair: usize, // index into the (instance, system) list
    slot: usize, // option index (MCQA) or 0
    encoded: Encoded,
}

/// Evaluate every (instance, system) of a bundle with a trained head (multiple choice for
/// MCQA, classification otherwise), on any backend; empty options treated as `empty` says.
#[allow(clippy::too_many_arguments)]
pub async fn evaluate_with_head<E: Encoder>(
    encoder: &E,
    head_labels: &[String],
    tokenizer: &TextTokenizer,
    bundle: &Bundle,
    batch_size: usize,
    empty: EmptyOptions,
) -> Result<EvalOutput> {
    let mut keep: Vec<Vec<bool>> = Vec::with_capacity(bundle.instances.len());
    let mut left_out = Vec::new();
    for inst in &bundle.instances {
        keep.push(match &inst.problem {
            Problem::Mcqa { options, .. } => candidates(inst, options, empty, &mut left_out)?,
            _ => Vec::new(),
        });
    }
    let pairs: Vec<(usize, usize)> = bundle
        .instances
        .iter()
        .enumerate()
        .flat_map(|(i, inst)| (0..inst.arguments.len()).map(move |s| (i, s)))
        .collect();
    let mut jobs = Vec::new();
    let mut out = EvalOutput { left_out, ..EvalOutput::default() };
    for (p, &(i, s)) in pairs.iter().enumerate() {
        let inst = &bundle.instances[i];
        let (system, argument) = &inst.arguments[s];
        let context =
            |e: Error| Error::invalid(format!("instance {} (line {}), system {system}: {e}", inst.id, inst.line));
        match &inst.problem {
            Problem::Mcqa { question, options, .. } => {
                for (slot, (key, text)) in options.iter().enumerate() {
                    if !keep[i][slot] {
                        continue;
                    }
                    let (first, second) = mcqa_parts(question, argument, text);
                    let encoded = tokenizer.encode_parts(&first, &second).map_err(context)?;
                    out.note_cut(&inst.id, system, key, &encoded);
                    jobs.push(Job { pair: p, slot, encoded });
                }
            }
            problem => {
                let (first, second) = classification_parts(problem, argument)?;
                let encoded = tokenizer.encode_parts(&first, &second).map_err(context)?;
                out.note_cut(&inst.id, system, "", &encoded);
                jobs.push(Job { pair: p, slot: 0, encoded });
            }
        }
    }
    // Logits per job, computed in length-sorted batches.
    let lens: Vec<usize> = jobs.iter().map(|j| j.encoded.len()).collect();
    let mut plan = EncodingPlan::default();
    plan.add(&lens, batch_size);
    encoder.plan(&plan);
    let mut job_logits: Vec<Vec<f32>> = vec![Vec::new(); jobs.len()];
    for group in length_batches(&lens, batch_size) {
        let items: Vec<&Encoded> = group.iter().map(|&j| &jobs[j].encoded).collect();
        let batch = tokenizer.batch(&items);
        for (l, &j) in encoder.read_out(&batch, Readout::Logits).await?.into_iter().zip(&group) {
            job_logits[j] = l;
        }
    }
    super::finite::logits(&job_logits).map_err(|e| {
        e.describing_input(|j| {
            let (i, s) = pairs[jobs[j].pair];
            let inst = &bundle.instances[i];
            let option = match &inst.problem {
                Problem::Mcqa { options, .. } => format!(", option `{}`", options[jobs[j].slot].0),
                _ => String::new(),
            };
            format!("instance `{}` (line {}), system `{}`{option}", inst.id, inst.line, inst.arguments[s].0)
        })
    })?;
    // Gather per pair.
    let mut per_pair: Vec<Vec<(usize, Vec<f32>)>> = vec![Vec::new(); pairs.len()];
    for (job, l) in jobs.iter().zip(job_logits) {
        per_pair[job.pair].push((job.slot, l));
    }
    for (p, &(i, s)) in pairs.iter().enumerate() {
        let inst = &bundle.instances[i];
        let system = &inst.arguments[s].0;
        let labels = inst.problem.label_set();
        let probs = match &inst.problem {
            Problem::Mcqa { .. } => {
                let mut option_logits = vec![0f32; labels.len()];
                for (slot, l) in &per_pair[p] {
                    option_logits[*slot] = l[0];
                }
                softmax_over(&option_logits, &keep[i], 1.0)
            }
            problem => {
                let map = label_mapping(head_labels, problem.task())?;
                let l = &per_pair[p][0].1;
                softmax(&map.iter().map(|&k| l[k]).collect::<Vec<_>>(), 1.0)
            }
        };
        out.predictions.push(prediction(&inst.id, system, &labels, probs, inst.problem.gold()));
    }
    Ok(out)
}

/// The zero-training MCQA evaluator (a weak baseline; see the module doc); empty options
/// treated as `empty` says.
pub async fn evaluate_by_similarity<E: Encoder>(
    encoder: &E,
    tokenizer: &TextTokenizer,
    pooling: &Pooling,
    bundle: &Bundle,
    temperature: f64,
    batch_size: usize,
    empty: EmptyOptions,
) -> Result<EvalOutput> {
    let mut out = EvalOutput::default();
    let mut keep = Vec::with_capacity(bundle.instances.len());
    let mut contexts = Vec::new(); // (instance, system) -> encoded question+argument
    let mut options = Vec::new(); // every option of every instance, once
    let mut option_start = Vec::new();
    for inst in &bundle.instances {
        let Problem::Mcqa { question, options: opts, .. } = &inst.problem else {
            return Err(Error::invalid(format!(
                "instance {} (line {}): the similarity evaluator only does MCQA; {} needs a trained head",
                inst.id,
                inst.line,
                inst.problem.task().name()
            )));
        };
        option_start.push(options.len());
        let kept = candidates(inst, opts, empty, &mut out.left_out)?;
        // Only candidates are embedded; a left-out option has no vector.
        for ((_, text), _) in opts.iter().zip(&kept).filter(|(_, k)| **k) {
            options.push(tokenizer.encode(text)?);
        }
        keep.push(kept);
        for (system, argument) in &inst.arguments {
            let mut parts = vec![Part::cut_start(question)];
            if !argument.trim().is_empty() {
                parts.push(Part::cut_end(argument));
            }
            let e = tokenizer.encode_parts(&parts, &[])?;
            out.note_cut(&inst.id, system, "", &e);
            contexts.push(e);
        }
    }
    let mut plan = EncodingPlan::default();
    for inputs in [&contexts, &options] {
        plan.add(&inputs.iter().map(Encoded::len).collect::<Vec<_>>(), batch_size);
    }
    encoder.plan(&plan);
    // Where a context (instance x system) or an option came from, for a message.
    let context_of = |c: usize| {
        let (mut i, mut c) = (0, c);
        while c >= bundle.instances[i].arguments.len() {
            c -= bundle.instances[i].arguments.len();
            i += 1;
        }
        let inst = &bundle.instances[i];
        format!("instance `{}` (line {}), system `{}`", inst.id, inst.line, inst.arguments[c].0)
    };
    let option_of = |o: usize| {
        let i = option_start.iter().rposition(|&start| start <= o).unwrap_or(0);
        format!("an option of instance `{}` (line {})", bundle.instances[i].id, bundle.instances[i].line)
    };
    let ctx_vecs = embed_encoded(encoder, tokenizer, pooling, &contexts, batch_size)
        .await
        .map_err(|e| e.describing_input(context_of))?;
    let opt_vecs = embed_encoded(encoder, tokenizer, pooling, &options, batch_size)
        .await
        .map_err(|e| e.describing_input(option_of))?;
    let mut c = 0;
    for (n, inst) in bundle.instances.iter().enumerate() {
        let labels = inst.problem.label_set();
        for (system, _) in &inst.arguments {
            // Candidates' cosines in option order; left-out options get a placeholder that
            // softmax_over skips.
            let mut next = option_start[n];
            let sims: Vec<f32> = keep[n]
                .iter()
                .map(|&k| {
                    if !k {
                        return 0.0;
                    }
                    next += 1;
                    cosine(&ctx_vecs[c], &opt_vecs[next - 1])
                })
                .collect();
            super::finite::scores("similarity", &sims.iter().map(|&x| x as f64).collect::<Vec<_>>())
                .map_err(|e| e.describing_input(|_| context_of(c)))?;
            let probs = softmax_over(&sims, &keep[n], temperature);
            out.predictions.push(prediction(&inst.id, system, &labels, probs, inst.problem.gold()));
            c += 1;
        }
    }
    Ok(out)
}

/// Which evaluator produced the predictions (reports say so).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvaluatorKind {
    /// A trained multiple-choice or classification head.
    Head,
    /// Zero-training similarity MCQA (weak baseline).
    Similarity,
}

/// The model's head when it has one, else the similarity evaluator (MCQA only), with the
/// model's weights and tokenizer but on any backend `encoder` (CPU or GPU); empty options
/// treated as `empty` says.
pub async fn evaluate_bundle_on<E: Encoder>(
    model: &super::embed::TextModel,
    encoder: &E,
    bundle: &Bundle,
    batch_size: usize,
    empty: EmptyOptions,
) -> Result<(EvalOutput, EvaluatorKind)> {
    let m = &model.encoder.model;
    match &m.head {
        Some(_) => evaluate_with_head(encoder, &m.config.labels, &model.tokenizer, bundle, batch_size, empty)
            .await
            .map(|o| (o, EvaluatorKind::Head)),
        None => evaluate_by_similarity(
            encoder,
            &model.tokenizer,
            &model.pooling,
            bundle,
            SIMILARITY_TEMPERATURE,
            batch_size,
            empty,
        )
        .await
        .map(|o| (o, EvaluatorKind::Similarity)),
    }
}

/// How many sequences [`evaluate_bundle_on`] encodes for `bundle` (progress totals): one
/// per candidate option per argument for MCQA with a head, one per argument for the other
/// tasks; the similarity evaluator encodes each argument once and each candidate option
/// once per instance; empty options counted as `empty` says.
pub fn sequences_to_encode(bundle: &Bundle, kind: EvaluatorKind, empty: EmptyOptions) -> usize {
    bundle
        .instances
        .iter()
        .map(|inst| {
            let systems = inst.arguments.len();
            let options = match &inst.problem {
                Problem::Mcqa { options, .. } => options
                    .iter()
                    .filter(|(_, t)| empty == EmptyOptions::Keep || !crate::data::is_empty_option(t))
                    .count(),
                _ => 0,
            };
            match (&inst.problem, kind) {
                (Problem::Mcqa { .. }, EvaluatorKind::Head) => systems * options,
                (Problem::Mcqa { .. }, EvaluatorKind::Similarity) => systems + options,
                _ => systems,
            }
        })
        .sum()
}

/// CPU convenience for the CLI: [`evaluate_bundle_on`] with the model's own CPU encoder,
/// empty options left out.
pub fn evaluate_bundle(
    model: &super::embed::TextModel,
    bundle: &Bundle,
    batch_size: usize,
) -> Result<(EvalOutput, EvaluatorKind)> {
    super::embed::run_ready(evaluate_bundle_on(model, &model.encoder, bundle, batch_size, EmptyOptions::LeaveOut))
}
