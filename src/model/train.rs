//! Training evaluators with candle's autograd: AdamW, linear warm-up then linear decay,
//! seeded shuffling, gradient accumulation, early stopping on a dev set, and a choice of
//! what to train (the head on a frozen encoder, the top N layers, or everything).
//!
//! Head-only training encodes every input once with the frozen encoder and trains the head
//! (BERT/RoBERTa: pooler + classifier) on the cached first-token states: minutes on two CPU
//! cores. Training layers runs the differentiable forward pass per step (slow on CPU).
//! Dropout is not used (deterministic, and the frozen-feature path could not apply it).
//!
//! Which evaluator a training file makes (methods.md §1): *baseline* = examples without an
//! argument; *expert-trained* = the gold/expert argument; *LLM-trained* = one random LLM
//! argument per instance (seeded). [`examples_from_bundle`] builds each from a bundle;
//! HiTZ CasiMedicos files (argument already appended to the question) are read by
//! [`read_hitz_mcqa`].
//!
//! Measured on CasiMedicos (all-MiniLM-L6-v2, head only, `TrainOptions::default()`; the
//! figures and the command are in the README): dev accuracy 0.586 with the model's 256-token
//! `max_seq_length`, 0.536 with the 512-position limit; the zero-training similarity
//! evaluator reaches 0.582 on the same dev file.

use super::config::{EncoderConfig, HeadKind};
use super::embed::{length_batches, TextModel};
use super::encoder::{forward, CpuEncoder};
use super::evaluate::{classification_parts, mcqa_parts};
use super::heads::head_forward;
use super::load::{random_model, Dense, HeadWeights, LoadedModel};
use super::tokenize::{Encoded, TextTokenizer};
use crate::data::{Bundle, Problem, Task};
use crate::error::{Error, Result};
use candle_core::{Device, IndexOp, Tensor, Var, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// One training example: the encoder inputs and the index of the right one.
/// Multiple choice: one input per option, `gold` = option index. Classification: one
/// input, `gold` = label index.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainExample {
    pub id: String,
    pub inputs: Vec<Encoded>,
    pub gold: usize,
}

/// Read a HiTZ CasiMedicos MCQA file (`{"question", "options": {"1": ..}, "correct_option"}`
/// per line; the argument is already appended to the question) into examples. The file is
/// parsed by the same reader as the Ranking-Over-Scoring importer (`data::parse_hitz`).
pub fn read_hitz_mcqa(file: &str, text: &str, tokenizer: &TextTokenizer) -> Result<Vec<TrainExample>> {
    let (items, _warnings) = crate::data::parse_hitz(file, text)?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let gold = item.options.iter().position(|(k, _)| *k == item.correct_option).ok_or_else(|| {
            Error::input(file, item.line, "correct_option", format!("`{}` is not an option key", item.correct_option))
        })?;
        let inputs = item
            .options
            .iter()
            .map(|(_, t)| {
                let (first, second) = mcqa_parts(&item.question, "", t);
                tokenizer
                    .encode_parts(&first, &second)
                    .map_err(|e| Error::input(file, item.line, "options", e.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        out.push(TrainExample { id: format!("{file}:{}", item.line), inputs, gold });
    }
    Ok(out)
}

/// Which argument each training instance carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentSource {
    /// No argument: the baseline evaluator.
    None,
    /// One named system's argument (e.g. the expert/gold one): the expert-trained evaluator.
    System(String),
    /// One random system per instance among these (seeded): the LLM-trained evaluator.
    RandomOf(Vec<String>),
}

/// Training examples from a bundle (instances lacking the chosen system are an error).
pub fn examples_from_bundle(
    bundle: &Bundle,
    source: &ArgumentSource,
    labels: &[String],
    tokenizer: &TextTokenizer,
    seed: u64,
) -> Result<Vec<TrainExample>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    for inst in &bundle.instances {
        let argument: &str = match source {
            ArgumentSource::None => "",
            ArgumentSource::System(s) => inst.argument(s).ok_or_else(|| {
                Error::input(&bundle.name, inst.line, "arguments", format!("no argument of system `{s}`"))
            })?,
            ArgumentSource::RandomOf(systems) => {
                let present: Vec<&str> = systems.iter().filter_map(|s| inst.argument(s)).collect();
                present.choose(&mut rng).copied().ok_or_else(|| {
                    Error::input(&bundle.name, inst.line, "arguments", format!("none of {systems:?}"))
                })?
            }
        };
        let at = |e: Error| Error::input(&bundle.name, inst.line, "text", e.to_string());
        match &inst.problem {
            Problem::Mcqa { question, options, answer } => {
                let inputs = options
                    .iter()
                    .map(|(_, t)| {
                        let (f, s) = mcqa_parts(question, argument, t);
                        tokenizer.encode_parts(&f, &s).map_err(at)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let gold = options.iter().position(|(k, _)| k == answer).ok_or_else(|| {
                    Error::input(&bundle.name, inst.line, "answer", "not an option key")
                })?;
                out.push(TrainExample { id: inst.id.clone(), inputs, gold });
            }
            problem => {
                let (f, s) = classification_parts(problem, argument)?;
                let gold = labels.iter().position(|l| l == problem.gold()).ok_or_else(|| {
                    Error::input(&bundle.name, inst.line, "label", format!("`{}` not in {labels:?}", problem.gold()))
                })?;
                out.push(TrainExample { id: inst.id.clone(), inputs: vec![tokenizer.encode_parts(&f, &s).map_err(at)?], gold });
            }
        }
    }
    Ok(out)
}

/// What is trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Freeze {
    /// Only the head (and the pooler it reads): the encoder is frozen.
    HeadOnly,
    /// The head and the top N transformer layers.
    TopLayers(usize),
    /// Everything, embeddings included.
    All,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrainOptions {
    pub freeze: Freeze,
    pub epochs: usize,
    /// Examples per micro-batch.
    pub batch_size: usize,
    /// Micro-batches per optimiser step.
    pub grad_accum: usize,
    pub learning_rate: f64,
    pub weight_decay: f64,
    /// Fraction of all steps spent warming up linearly from 0.
    pub warmup_ratio: f64,
    /// Stop after this many epochs without a better dev accuracy.
    pub patience: usize,
    pub seed: u64,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            freeze: Freeze::HeadOnly,
            epochs: 20,
            batch_size: 16,
            grad_accum: 1,
            learning_rate: 1e-3,
            weight_decay: 0.01,
            warmup_ratio: 0.1,
            patience: 4,
            seed: 42,
        }
    }
}

/// One point of the training curve (after each epoch).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EpochLog {
    pub epoch: usize,
    pub steps: usize,
    pub train_loss: f64,
    pub dev_accuracy: f64,
    pub learning_rate: f64,
}

#[derive(Debug, Clone)]
pub struct TrainResult {
    /// The encoder with the trained head, weights of the best dev epoch.
    pub model: LoadedModel,
    pub curve: Vec<EpochLog>,
    pub best_epoch: usize,
    pub best_dev_accuracy: f64,
    /// Examples with at least one cut input (train, dev).
    pub truncated: (usize, usize),
}

/// Learning rate at optimiser step `step` (0-based) of `total`: linear warm-up over
/// `warmup` steps, then linear decay to 0.
pub fn scheduled_lr(base: f64, step: usize, warmup: usize, total: usize) -> f64 {
    if step < warmup {
        base * (step + 1) as f64 / warmup as f64
    } else {
        base * (total.saturating_sub(step)) as f64 / (total - warmup).max(1) as f64
    }
}

/// Start from `base` (a plain encoder or one with a head) and add a fresh seeded head of
/// the given kind when it has none.
pub fn with_new_head(base: &LoadedModel, kind: HeadKind, labels: &[String], seed: u64) -> Result<LoadedModel> {
    if kind == HeadKind::None {
        return Err(Error::invalid("choose a head kind to train"));
    }
    let mut m = base.clone();
    if m.head.is_some() && m.config.head == kind && m.config.labels == labels {
        return Ok(m);
    }
    let cfg = EncoderConfig { head: kind, labels: labels.to_vec(), ..m.config.clone() };
    let fresh = random_model(EncoderConfig { num_layers: 0, ..cfg.clone() }, seed)?;
    m.head = fresh.head;
    if m.weights.pooler.is_none() {
        m.weights.pooler = fresh.weights.pooler;
    }
    m.config = cfg;
    Ok(m)
}

/// Replace the trainable tensors with variables; returns them for the optimiser.
fn make_trainable(model: &mut LoadedModel, freeze: Freeze) -> Result<Vec<Var>> {
    let mut vars = Vec::new();
    let mut var = |t: &mut Tensor| -> Result<()> {
        let v = Var::from_tensor(t)?;
        *t = v.as_tensor().clone();
        vars.push(v);
        Ok(())
    };
    let dense = |d: &mut Dense, var: &mut dyn FnMut(&mut Tensor) -> Result<()>| -> Result<()> {
        var(&mut d.weight)?;
        var(&mut d.bias)
    };
    match model.head.as_mut().ok_or_else(|| Error::invalid("no head to train"))? {
        HeadWeights::PooledLinear { classifier } => {
            dense(classifier, &mut var)?;
            if let Some(p) = model.weights.pooler.as_mut() {
                dense(p, &mut var)?;
            }
        }
        HeadWeights::RobertaClassifier { dense: d, out_proj } => {
            dense(d, &mut var)?;
            dense(out_proj, &mut var)?;
        }
        HeadWeights::DistilClassifier { pre_classifier, classifier } => {
            dense(pre_classifier, &mut var)?;
            dense(classifier, &mut var)?;
        }
    }
    let n_layers = model.weights.layers.len();
    let top = match freeze {
        Freeze::HeadOnly => 0,
        Freeze::TopLayers(n) => n.min(n_layers),
        Freeze::All => n_layers,
    };
    for layer in model.weights.layers.iter_mut().skip(n_layers - top) {
        for d in [
            &mut layer.query,
            &mut layer.key,
            &mut layer.value,
            &mut layer.attn_out,
            &mut layer.ffn_in,
            &mut layer.ffn_out,
        ] {
            dense(d, &mut var)?;
        }
        for n in [&mut layer.attn_norm, &mut layer.ffn_norm] {
            var(&mut n.weight)?;
            var(&mut n.bias)?;
        }
    }
    if freeze == Freeze::All {
        let w = &mut model.weights;
        var(&mut w.word_embeddings)?;
        var(&mut w.position_embeddings)?;
        if let Some(t) = w.token_type_embeddings.as_mut() {
            var(t)?;
        }
        var(&mut w.embedding_norm.weight)?;
        var(&mut w.embedding_norm.bias)?;
    }
    Ok(vars)
}

/// First-token states `[n_inputs, hidden]` of the given inputs. Without gradients they
/// come from the CPU inference path (the same numbers as candle's ops, tested, several
/// times faster) in length-sorted batches; with gradients from candle in one batch (the
/// graph must stay whole).
fn first_token_states(model: &LoadedModel, tokenizer: &TextTokenizer, inputs: &[&Encoded], differentiable: bool) -> Result<Tensor> {
    if !differentiable {
        // Built per call: between calls training may have changed the weights.
        let encoder = CpuEncoder::new(model.clone());
        let h = model.config.hidden_size;
        let lens: Vec<usize> = inputs.iter().map(|e| e.len()).collect();
        let mut rows = vec![0f32; inputs.len() * h];
        for group in length_batches(&lens, 32) {
            let items: Vec<&Encoded> = group.iter().map(|&i| inputs[i]).collect();
            let states = encoder.hidden_states(&tokenizer.batch(&items), model.config.num_layers)?;
            for (k, &i) in group.iter().enumerate() {
                rows[i * h..(i + 1) * h].copy_from_slice(states.token(k, 0));
            }
        }
        return Ok(Tensor::from_vec(rows, (inputs.len(), h), &Device::Cpu)?);
    }
    let h = forward(&model.config, &model.weights, &tokenizer.batch(inputs), model.config.num_layers)?;
    Ok(h.i((.., 0, ..))?.contiguous()?)
}

/// Mean cross-entropy and correct count for `examples` given logits of their inputs
/// (in example order, inputs concatenated).
fn loss_and_correct(examples: &[&TrainExample], logits: &Tensor, multiple_choice: bool) -> Result<(Tensor, usize)> {
    let mut losses = Vec::new();
    let mut correct = 0;
    let mut row = 0;
    for ex in examples {
        let scores = if multiple_choice {
            let s = logits.narrow(0, row, ex.inputs.len())?.flatten_all()?;
            row += ex.inputs.len();
            s
        } else {
            let s = logits.i(row)?;
            row += 1;
            s
        };
        let logp = candle_nn::ops::log_softmax(&scores, D::Minus1)?;
        losses.push(logp.i(ex.gold)?.neg()?);
        let v: Vec<f32> = scores.to_vec1()?;
        let best = v.iter().enumerate().fold(0, |b, (i, x)| if *x > v[b] { i } else { b });
        correct += usize::from(best == ex.gold);
    }
    let loss = (Tensor::stack(&losses, 0)?.sum_all()? / examples.len() as f64)?;
    Ok((loss, correct))
}

/// Train a head (and optionally layers) on `train`, pick the epoch with the best accuracy
/// on `dev`. `kind`: `MultipleChoice` for MCQA, `SequenceClassification` with `labels`
/// otherwise. `progress` sees each epoch's log line.
pub fn train(
    base: &TextModel,
    kind: HeadKind,
    labels: &[String],
    train_set: &[TrainExample],
    dev_set: &[TrainExample],
    opts: &TrainOptions,
    progress: &mut dyn FnMut(&EpochLog),
) -> Result<TrainResult> {
    if train_set.is_empty() || dev_set.is_empty() {
        return Err(Error::invalid("training needs non-empty train and dev sets"));
    }
    let multiple_choice = kind == HeadKind::MultipleChoice;
    let mut model = with_new_head(&base.encoder.model, kind, labels, opts.seed)?;
    let vars = make_trainable(&mut model, opts.freeze)?;
    let tok = &base.tokenizer;
    let head_only = opts.freeze == Freeze::HeadOnly;

    // Frozen features, once (head-only): row offsets per example into one big matrix.
    let features = |set: &[TrainExample]| -> Result<(Tensor, Vec<usize>)> {
        let inputs: Vec<&Encoded> = set.iter().flat_map(|e| e.inputs.iter()).collect();
        let mut starts = Vec::with_capacity(set.len());
        let mut at = 0;
        for e in set {
            starts.push(at);
            at += e.inputs.len();
        }
        Ok((first_token_states(&model, tok, &inputs, false)?.detach(), starts))
    };
    let (train_feats, dev_feats) = if head_only { (Some(features(train_set)?), Some(features(dev_set)?)) } else { (None, None) };

    let logits_of = |model: &LoadedModel, set: &[TrainExample], idx: &[usize], feats: &Option<(Tensor, Vec<usize>)>, differentiable: bool| -> Result<Tensor> {
        let cls = match feats {
            Some((f, starts)) => {
                let rows: Vec<u32> = idx
                    .iter()
                    .flat_map(|&i| (starts[i]..starts[i] + set[i].inputs.len()).map(|r| r as u32))
                    .collect();
                f.index_select(&Tensor::new(rows.as_slice(), &Device::Cpu)?, 0)?
            }
            None => {
                let inputs: Vec<&Encoded> = idx.iter().flat_map(|&i| set[i].inputs.iter()).collect();
                first_token_states(model, tok, &inputs, differentiable)?
            }
        };
        head_forward(model.head.as_ref().expect("head"), model.weights.pooler.as_ref(), &cls)
    };

    let per_step = opts.batch_size.max(1) * opts.grad_accum.max(1);
    let steps_per_epoch = train_set.len().div_ceil(per_step);
    let total = steps_per_epoch * opts.epochs.max(1);
    let warmup = ((total as f64) * opts.warmup_ratio).round() as usize;
    let mut optimizer = AdamW::new(
        vars.clone(),
        ParamsAdamW { lr: opts.learning_rate, weight_decay: opts.weight_decay, ..Default::default() },
    )?;
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let mut order: Vec<usize> = (0..train_set.len()).collect();
    let mut curve = Vec::new();
    let mut best: Option<(f64, usize, Vec<Tensor>)> = None;
    let mut step = 0;
    let mut since_best = 0;
    for epoch in 1..=opts.epochs.max(1) {
        order.shuffle(&mut rng);
        let mut loss_sum = 0.0;
        let mut lr = opts.learning_rate;
        for chunk in order.chunks(per_step) {
            let mut acc: Option<candle_core::backprop::GradStore> = None;
            for micro in chunk.chunks(opts.batch_size.max(1)) {
                let logits = logits_of(&model, train_set, micro, &train_feats, true)?;
                let exs: Vec<&TrainExample> = micro.iter().map(|&i| &train_set[i]).collect();
                let (loss, _) = loss_and_correct(&exs, &logits, multiple_choice)?;
                // Scale so the accumulated gradient is the mean over the whole step.
                let scaled = (&loss * (micro.len() as f64 / chunk.len() as f64))?;
                loss_sum += loss.to_scalar::<f32>()? as f64 * micro.len() as f64;
                let grads = scaled.backward()?;
                acc = Some(match acc {
                    None => grads,
                    Some(mut a) => {
                        for v in &vars {
                            if let Some(g) = grads.get(v.as_tensor()) {
                                let sum = match a.get(v.as_tensor()) {
                                    Some(prev) => (prev + g)?,
                                    None => g.clone(),
                                };
                                a.insert(v.as_tensor(), sum);
                            }
                        }
                        a
                    }
                });
            }
            lr = scheduled_lr(opts.learning_rate, step, warmup, total);
            optimizer.set_learning_rate(lr);
            optimizer.step(&acc.expect("non-empty chunk"))?;
            step += 1;
        }
        // Dev accuracy with the current weights.
        let mut correct = 0;
        let dev_idx: Vec<usize> = (0..dev_set.len()).collect();
        for part in dev_idx.chunks(32) {
            let logits = logits_of(&model, dev_set, part, &dev_feats, false)?.detach();
            let exs: Vec<&TrainExample> = part.iter().map(|&i| &dev_set[i]).collect();
            correct += loss_and_correct(&exs, &logits, multiple_choice)?.1;
        }
        let dev_accuracy = correct as f64 / dev_set.len() as f64;
        let log = EpochLog { epoch, steps: step, train_loss: loss_sum / train_set.len() as f64, dev_accuracy, learning_rate: lr };
        progress(&log);
        curve.push(log);
        if best.as_ref().is_none_or(|(acc, _, _)| dev_accuracy > *acc) {
            let snapshot = vars.iter().map(|v| v.as_tensor().copy()).collect::<candle_core::Result<Vec<_>>>()?;
            best = Some((dev_accuracy, epoch, snapshot));
            since_best = 0;
        } else {
            since_best += 1;
            if since_best >= opts.patience.max(1) {
                break;
            }
        }
    }
    let (best_dev_accuracy, best_epoch, snapshot) = best.expect("at least one epoch");
    for (v, t) in vars.iter().zip(snapshot) {
        v.set(&t)?;
    }
    // Detach: the saved model holds plain tensors, not variables.
    let mut model = model;
    model.weights = detach_weights(&model.weights)?;
    if let Some(h) = model.head.as_mut() {
        *h = detach_head(h)?;
    }
    let cut = |set: &[TrainExample]| set.iter().filter(|e| e.inputs.iter().any(|i| i.tokens_cut() > 0)).count();
    Ok(TrainResult { model, curve, best_epoch, best_dev_accuracy, truncated: (cut(train_set), cut(dev_set)) })
}

fn detach_dense(d: &Dense) -> Result<Dense> {
    Ok(Dense { weight: d.weight.copy()?.detach(), bias: d.bias.copy()?.detach() })
}

fn detach_head(h: &HeadWeights) -> Result<HeadWeights> {
    Ok(match h {
        HeadWeights::PooledLinear { classifier } => HeadWeights::PooledLinear { classifier: detach_dense(classifier)? },
        HeadWeights::RobertaClassifier { dense, out_proj } => {
            HeadWeights::RobertaClassifier { dense: detach_dense(dense)?, out_proj: detach_dense(out_proj)? }
        }
        HeadWeights::DistilClassifier { pre_classifier, classifier } => HeadWeights::DistilClassifier {
            pre_classifier: detach_dense(pre_classifier)?,
            classifier: detach_dense(classifier)?,
        },
    })
}

fn detach_weights(w: &super::load::EncoderWeights) -> Result<super::load::EncoderWeights> {
    let t = |x: &Tensor| -> Result<Tensor> { Ok(x.copy()?.detach()) };
    let n = |x: &super::load::Norm| -> Result<super::load::Norm> { Ok(super::load::Norm { weight: t(&x.weight)?, bias: t(&x.bias)? }) };
    Ok(super::load::EncoderWeights {
        word_embeddings: t(&w.word_embeddings)?,
        position_embeddings: t(&w.position_embeddings)?,
        token_type_embeddings: w.token_type_embeddings.as_ref().map(t).transpose()?,
        embedding_norm: n(&w.embedding_norm)?,
        layers: w
            .layers
            .iter()
            .map(|l| {
                Ok(super::load::LayerWeights {
                    query: detach_dense(&l.query)?,
                    key: detach_dense(&l.key)?,
                    value: detach_dense(&l.value)?,
                    attn_out: detach_dense(&l.attn_out)?,
                    attn_norm: n(&l.attn_norm)?,
                    ffn_in: detach_dense(&l.ffn_in)?,
                    ffn_out: detach_dense(&l.ffn_out)?,
                    ffn_norm: n(&l.ffn_norm)?,
                })
            })
            .collect::<Result<_>>()?,
        pooler: w.pooler.as_ref().map(detach_dense).transpose()?,
    })
}

/// The files a trained evaluator folder holds (the CLI writes them next to a copy of the
/// base model's `tokenizer.json`): `config.json`, `model.safetensors`, `train_log.json`.
pub fn trained_files(result: &TrainResult, options: &TrainOptions) -> Result<Vec<(String, Vec<u8>)>> {
    let log = serde_json::json!({
        "options": options,
        "best_epoch": result.best_epoch,
        "best_dev_accuracy": result.best_dev_accuracy,
        "truncated_examples": {"train": result.truncated.0, "dev": result.truncated.1},
        "curve": result.curve,
    });
    Ok(vec![
        ("config.json".into(), result.model.config.to_json().into_bytes()),
        ("model.safetensors".into(), super::load::to_safetensors(&result.model)?),
        ("train_log.json".into(), serde_json::to_vec_pretty(&log).expect("serialisable")),
    ])
}

/// The label list a task's classification head uses.
pub fn task_labels(task: Task) -> Vec<String> {
    match task {
        Task::Mcqa => Vec::new(),
        Task::Misinformation => Task::MISINFORMATION_LABELS.iter().map(|s| s.to_string()).collect(),
        Task::Nli => Task::NLI_LABELS.iter().map(|s| s.to_string()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays_linearly() {
        // 10 steps, 2 warm-up: 0.5, 1.0, then (10-s)/8: 1.0, 0.875, ..., 0.125.
        let lrs: Vec<f64> = (0..10).map(|s| scheduled_lr(1.0, s, 2, 10)).collect();
        assert_eq!(lrs[0], 0.5);
        assert_eq!(lrs[1], 1.0);
        assert_eq!(lrs[2], 1.0);
        assert_eq!(lrs[3], 0.875);
        assert_eq!(lrs[9], 0.125);
    }
}
