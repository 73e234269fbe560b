//! The GPU trainer checked against candle's autograd on the adapter at hand: for tiny
//! random models of every head the trainer supports, the gradient of each trained tensor
//! after one micro-batch, from [`GpuTrainer`] and from candle, and their relative
//! difference (‖g_gpu − g_candle‖ / ‖g_candle‖). The native tests run it on lavapipe, the
//! bench page (`self_check("gradients")` in the wasm API) on the browser's WebGPU adapter, so a
//! GPU that computes wrong gradients is found before it trains an evaluator.
//!
//! The reference is the CPU engine's computation (`train::cpu`): padded f32 states, the
//! top layers in candle ops (the last for the first token only), the head, each example's
//! cross-entropy over its own segment, summed and divided by the step's example count; and
//! with dropout, the CPU engine's masks (`train::dropout`) at every site, which the GPU
//! trainer's kernels draw themselves.

use candle_core::{Device, IndexOp, Tensor, Var, D};
use half::f16;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::trainer::{Dropping, GpuTrainer, TrainInput};
use crate::error::Result;
use crate::gpu::context::GpuContext;
use crate::gpu::ops::AdamWConfig;
use crate::model::config::{Arch, EncoderConfig, HeadKind};
use crate::model::encoder::{forward_dropping, layers_forward_dropping, DropoutMasks};
use crate::model::heads::head_forward_dropping;
use crate::model::load::{random_model, Dense, HeadWeights, LoadedModel};
use crate::model::tokenize::Encoded;
use crate::model::TokenBatch;
use crate::train::dropout::{Dropout, PassMasks, StepMasks};

/// The largest relative difference a checked tensor may show.
pub const TOLERANCE: f64 = 1e-3;

/// One model the check trains: (architecture, head, labels, examples as (inputs, gold)).
struct Case {
    name: &'static str,
    arch: Arch,
    head: HeadKind,
    labels: &'static [&'static str],
    examples: &'static [(usize, usize)],
}

const CASES: [Case; 4] = [
    // Examples of 3, 2 and 4 candidates (BERT: pooler + classifier).
    Case {
        name: "BERT, multiple choice",
        arch: Arch::Bert,
        head: HeadKind::MultipleChoice,
        labels: &[],
        examples: &[(3, 1), (2, 0), (4, 3)],
    },
    // Three labels, one input each.
    Case {
        name: "BERT, classification",
        arch: Arch::Bert,
        head: HeadKind::SequenceClassification,
        labels: &["a", "b", "c"],
        examples: &[(1, 2), (1, 0), (1, 1), (1, 2)],
    },
    // classifier.dense + tanh + classifier.out_proj.
    Case {
        name: "RoBERTa, classification",
        arch: Arch::Roberta,
        head: HeadKind::SequenceClassification,
        labels: &["p", "q"],
        examples: &[(1, 0), (1, 1), (1, 1)],
    },
    // pre_classifier + ReLU + classifier.
    Case {
        name: "DistilBERT, classification",
        arch: Arch::DistilBert,
        head: HeadKind::SequenceClassification,
        labels: &["x", "y"],
        examples: &[(1, 1), (1, 0), (1, 1)],
    },
];

/// One trained tensor's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct TensorCheck {
    /// The model (architecture and head) and whether the micro-batch ran in parts.
    pub case: String,
    pub tensor: String,
    /// ‖g_gpu − g_candle‖ / ‖g_candle‖; for a tensor without gradient by construction, the
    /// largest absolute value on either side instead.
    pub difference: f64,
    pub reference_norm: f64,
    /// Softmax ignores a shift of all its scores, so the key bias and a multiple-choice
    /// classifier's bias get no gradient: both sides must be rounding-level zeros (< 1e-6).
    pub zero_by_construction: bool,
    pub ok: bool,
}

/// What the trainer starts from in a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trained {
    /// The top 2 of 3 layers, from random states (`--freeze top:2`).
    TopLayers,
    /// Every layer and the embeddings, from random tokens (`--freeze all`).
    Everything,
}

/// The dropout of the checks that drop: hidden and attention probabilities apart, so a site
/// given the other's masks shows.
const CHECK_DROPOUT: Dropout = Dropout { hidden: 0.1, attention: 0.2 };

/// Every case, each micro-batch whole and split into one part per example (as one too large
/// for the adapter's bindings runs), training the top layers and then everything; then
/// BERT multiple choice and RoBERTa classification again with dropout ([`CHECK_DROPOUT`]).
/// The losses are checked too, as the tensor `losses`.
pub async fn gradient_check(ctx: &GpuContext) -> Result<Vec<TensorCheck>> {
    let mut out = Vec::new();
    for dropout in [None, Some(CHECK_DROPOUT)] {
        for trained in [Trained::TopLayers, Trained::Everything] {
            for (c, case) in CASES.iter().enumerate() {
                if dropout.is_none() || matches!(c, 0 | 2) {
                    out.extend(check_case(ctx, case, c as u64, trained, dropout).await?);
                }
            }
        }
    }
    Ok(out)
}

async fn check_case(
    ctx: &GpuContext,
    case: &Case,
    c: u64,
    trained: Trained,
    dropout: Option<Dropout>,
) -> Result<Vec<TensorCheck>> {
    let mut out = Vec::new();
    {
        let m = jittered_model(EncoderConfig::tiny(case.arch, 3, case.head, case.labels), 20 + c)?;
        // The top 2 of 3 layers (the gradient also flows from layer to layer), or all.
        let first = if trained == Trained::TopLayers { 1 } else { 0 };
        let h = m.config.hidden_size;
        let n_inputs: usize = case.examples.iter().map(|e| e.0).sum();
        // Lengths with padding in every batch, and a 1-token input.
        let lens: Vec<usize> = (0..n_inputs).map(|i| [7, 12, 1, 9, 5][i % 5]).collect();
        let states = random_states(&lens, h, 30 + c);
        let tokens = random_tokens(&lens, &m.config, 50 + c);
        let step_examples = case.examples.len() + 2; // a micro-batch of a larger step
                                                     // The inputs' places in a training set (not 0, 1, ...: the masks are keyed by them),
                                                     // and a step's masks over them.
        let rows: Vec<usize> = (0..n_inputs).map(|i| 5 + 3 * i).collect();
        let step = dropout.map(|dropout| StepMasks { seed: 7 + c, step: 3, dropout, positions: m.config.max_tokens() });
        let masks = step.map(|s| s.over(&rows));

        let mut reference = m.clone();
        let vars = make_vars(&mut reference, first)?;
        // Each example weighs as class-weighted training would weigh it (1, 1.5, 2, ... by
        // gold), so the weighted loss and its gradient are checked too.
        let examples: Vec<(usize, usize, f32)> =
            case.examples.iter().map(|&(count, gold)| (count, gold, 1.0 + 0.5 * gold as f32)).collect();
        let first_tokens = match trained {
            Trained::TopLayers => first_tokens_from_states(&reference, first, &states, masks.as_ref())?,
            Trained::Everything => first_tokens_from_tokens(&reference, &tokens, masks.as_ref())?,
        };
        let (loss, losses) = candle_loss(&reference, &first_tokens, &examples, step_examples, masks.as_ref())?;
        let grads = loss.backward()?;
        let inputs: Vec<TrainInput> = match trained {
            Trained::TopLayers => states.iter().map(|s| TrainInput::States(s)).collect(),
            Trained::Everything => tokens.iter().map(TrainInput::Tokens).collect(),
        };
        for split in [false, true] {
            let everything = trained == Trained::Everything;
            let (head, layers) = (AdamWConfig::default(), AdamWConfig::default());
            let mut trainer = GpuTrainer::new(ctx.clone(), &m, first, everything, head, layers).await?;
            if split {
                trainer.set_max_pass_bytes(1);
            }
            let name = format!(
                "{}{}{}{}",
                case.name,
                if everything { ", every layer" } else { "" },
                if dropout.is_some() { ", dropout" } else { "" },
                if split { ", in parts" } else { "" }
            );
            let dropping = step.map(|step| Dropping { step, inputs: &rows });
            let got_losses = trainer.accumulate(&inputs, &examples, step_examples, dropping).await?;
            let (r, norm) = relative(&got_losses, &losses);
            out.push(TensorCheck {
                case: name.clone(),
                tensor: "losses".into(),
                difference: r,
                reference_norm: norm,
                zero_by_construction: false,
                ok: r <= TOLERANCE,
            });
            let got = trainer.gradients().await?;
            for (tensor, v) in &vars {
                let want: Vec<f32> = match grads.get(v.as_tensor()) {
                    Some(g) => g.flatten_all()?.to_vec1()?,
                    None => vec![0.0; v.as_tensor().elem_count()],
                };
                let g = got.iter().find(|(n, _)| n == tensor).map(|(_, g)| g.as_slice()).unwrap_or(&[]);
                let zero = tensor.ends_with("key.bias")
                    || (case.head == HeadKind::MultipleChoice && tensor == "classifier.bias");
                let check = if g.len() != want.len() {
                    // A tensor the GPU trainer did not report (or of another size): a failure.
                    TensorCheck {
                        case: name.clone(),
                        tensor: tensor.clone(),
                        difference: f64::INFINITY,
                        reference_norm: 0.0,
                        zero_by_construction: zero,
                        ok: false,
                    }
                } else if zero {
                    let largest = g.iter().chain(&want).fold(0f32, |a, v| a.max(v.abs())) as f64;
                    TensorCheck {
                        case: name.clone(),
                        tensor: tensor.clone(),
                        difference: largest,
                        reference_norm: 0.0,
                        zero_by_construction: true,
                        ok: largest < 1e-6,
                    }
                } else {
                    let (r, norm) = relative(g, &want);
                    // A zero reference would make the ratio meaningless: nothing is tested.
                    TensorCheck {
                        case: name.clone(),
                        tensor: tensor.clone(),
                        difference: r,
                        reference_norm: norm,
                        zero_by_construction: false,
                        ok: norm > 1e-7 && r <= TOLERANCE,
                    }
                };
                out.push(check);
            }
        }
    }
    Ok(out)
}

/// Random token ids (never the pad id, as a tokenizer's real tokens) and, for models with
/// token types, a second segment of type 1 from the middle on.
fn random_tokens(lens: &[usize], config: &EncoderConfig, seed: u64) -> Vec<Encoded> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let pad = config.pad_token_id;
    let typed = config.arch != Arch::DistilBert && config.type_vocab_size > 1;
    lens.iter()
        .map(|&n| {
            let ids = (0..n)
                .map(|_| loop {
                    let id = rng.gen_range(0..config.vocab_size as u32);
                    if id != pad {
                        break id;
                    }
                })
                .collect();
            let type_ids = (0..n).map(|k| u32::from(typed && k >= n.div_ceil(2))).collect();
            Encoded { ids, type_ids, cut_per_part: Vec::new() }
        })
        .collect()
}

/// A random model whose layer weights are scaled up from random_model's 0.02 (attention is
/// then far from uniform) and whose norms are not the identity: gradients worth comparing.
pub fn jittered_model(config: EncoderConfig, seed: u64) -> Result<LoadedModel> {
    let mut m = random_model(config, seed)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed + 1);
    let mut jitter = |t: &Tensor, base: f32, spread: f32| -> Result<Tensor> {
        let v: Vec<f32> = (0..t.elem_count()).map(|_| base + rng.gen_range(-spread..spread)).collect();
        Ok(Tensor::from_vec(v, t.dims(), &Device::Cpu)?)
    };
    for l in &mut m.weights.layers {
        for d in [&mut l.query, &mut l.key, &mut l.value, &mut l.attn_out, &mut l.ffn_in, &mut l.ffn_out] {
            d.weight = (&d.weight * 10.0)?;
        }
        for n in l.attn_norm.iter_mut().chain([&mut l.ffn_norm]) {
            n.weight = jitter(&n.weight, 1.0, 0.3)?;
            n.bias = jitter(&n.bias, 0.0, 0.3)?;
        }
    }
    Ok(m)
}

fn random_states(lens: &[usize], h: usize, seed: u64) -> Vec<Vec<f16>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    lens.iter().map(|&n| (0..n * h).map(|_| f16::from_f32(rng.gen_range(-2.0f32..2.0))).collect()).collect()
}

/// Replaces the trained tensors of `m` (the layers from `first`, the head) by variables,
/// named as [`GpuTrainer::gradients`] names them.
fn make_vars(m: &mut LoadedModel, first: usize) -> Result<Vec<(String, Var)>> {
    let mut vars = Vec::new();
    let mut var = |name: String, t: &mut Tensor| -> Result<()> {
        let v = Var::from_tensor(t)?;
        *t = v.as_tensor().clone();
        vars.push((name, v));
        Ok(())
    };
    if first == 0 {
        let w = &mut m.weights;
        var("word_embeddings".into(), &mut w.word_embeddings)?;
        if let Some(p) = w.position_embeddings.as_mut() {
            var("position_embeddings".into(), p)?;
        }
        if let (Some(t), false) = (w.token_type_embeddings.as_mut(), m.config.arch == Arch::DistilBert) {
            var("token_type_embeddings".into(), t)?;
        }
        var("embedding_norm.weight".into(), &mut w.embedding_norm.weight)?;
        var("embedding_norm.bias".into(), &mut w.embedding_norm.bias)?;
    }
    for (i, l) in m.weights.layers.iter_mut().enumerate().skip(first) {
        let dense: [(&str, &mut Dense); 6] = [
            ("query", &mut l.query),
            ("key", &mut l.key),
            ("value", &mut l.value),
            ("attn_out", &mut l.attn_out),
            ("ffn_in", &mut l.ffn_in),
            ("ffn_out", &mut l.ffn_out),
        ];
        for (n, d) in dense {
            var(format!("layer{i}.{n}.weight"), &mut d.weight)?;
            var(format!("layer{i}.{n}.bias"), &mut d.bias)?;
        }
        let norms = l.attn_norm.iter_mut().map(|n| ("attn_norm", n)).chain([("ffn_norm", &mut l.ffn_norm)]);
        for (n, d) in norms {
            var(format!("layer{i}.{n}.weight"), &mut d.weight)?;
            var(format!("layer{i}.{n}.bias"), &mut d.bias)?;
        }
    }
    let mut dense = |name: &str, d: &mut Dense| -> Result<()> {
        var(format!("{name}.weight"), &mut d.weight)?;
        var(format!("{name}.bias"), &mut d.bias)
    };
    match m.head.as_mut() {
        Some(HeadWeights::PooledLinear { classifier }) => {
            let pooler = m.weights.pooler.as_mut().ok_or_else(|| crate::Error::model("a BERT head needs a pooler"))?;
            dense("pooler", pooler)?;
            dense("classifier", classifier)?;
        }
        Some(HeadWeights::RobertaClassifier { dense: d, out_proj }) => {
            dense("classifier.dense", d)?;
            dense("classifier.out_proj", out_proj)?;
        }
        Some(HeadWeights::DistilClassifier { pre_classifier, classifier }) => {
            dense("pre_classifier", pre_classifier)?;
            dense("classifier", classifier)?;
        }
        Some(HeadWeights::ContextPooler { .. } | HeadWeights::ModernBertHead { .. }) => {
            return Err(crate::Error::model("the GPU trainer runs BERT, RoBERTa and DistilBERT heads only"))
        }
        None => return Err(crate::Error::model("the checked model has no head")),
    }
    Ok(vars)
}

/// The last layer's first tokens `[inputs, hidden]` from the lower layers' states, as the
/// CPU trainer computes them under `top:N` (with `masks`, dropping).
fn first_tokens_from_states(
    m: &LoadedModel,
    first: usize,
    states: &[Vec<f16>],
    masks: Option<&PassMasks>,
) -> Result<Tensor> {
    let h = m.config.hidden_size;
    let s = states.iter().map(|v| v.len() / h).max().unwrap_or(0);
    let mut x = vec![0f32; states.len() * s * h];
    let mut mask = vec![0u32; states.len() * s];
    for (k, st) in states.iter().enumerate() {
        for (dst, src) in x[k * s * h..].iter_mut().zip(st) {
            *dst = src.to_f32();
        }
        mask[k * s..k * s + st.len() / h].fill(1);
    }
    let x = Tensor::from_vec(x, (states.len(), s, h), &Device::Cpu)?;
    let masks = masks.map(|m| m as &dyn DropoutMasks);
    let top = layers_forward_dropping(&m.config, &m.weights, first..m.config.num_layers, x, &mask, true, masks)?;
    Ok(top.i((.., 0, ..))?.contiguous()?)
}

/// The last layer's first tokens from tokens, as the CPU trainer computes them under
/// `--freeze all` (with `masks`, dropping).
fn first_tokens_from_tokens(m: &LoadedModel, tokens: &[Encoded], masks: Option<&PassMasks>) -> Result<Tensor> {
    let seqs: Vec<(&[u32], &[u32])> = tokens.iter().map(|e| (e.ids.as_slice(), e.type_ids.as_slice())).collect();
    let batch = TokenBatch::from_sequences(&seqs, m.config.pad_token_id);
    let masks = masks.map(|m| m as &dyn DropoutMasks);
    let top = forward_dropping(&m.config, &m.weights, &batch, m.config.num_layers, masks)?;
    Ok(top.i((.., 0, ..))?.contiguous()?)
}

/// The CPU trainer's loss for one micro-batch from its inputs' first tokens, and each
/// example's loss (with `masks`, the classifier's input dropped).
fn candle_loss(
    m: &LoadedModel,
    cls: &Tensor,
    examples: &[(usize, usize, f32)],
    step_examples: usize,
    masks: Option<&PassMasks>,
) -> Result<(Tensor, Vec<f32>)> {
    let head = m.head.as_ref().ok_or_else(|| crate::Error::model("the checked model has no head"))?;
    // The classifier reads the head's first map's output, as the CPU trainer drops it.
    let width = head.parts(m.weights.pooler.as_ref())?.first.weight.dim(0)?;
    let classifier = masks.map(|pass| pass.classifier(width)).transpose()?.flatten();
    let logits = head_forward_dropping(head, m.weights.pooler.as_ref(), cls, classifier.as_ref())?;
    let flat = logits.flatten_all()?;
    let n_out = logits.dims2()?.1;
    let (mut at, mut losses) = (0, Vec::new());
    for &(count, gold, weight) in examples {
        let seg = flat.narrow(0, at, count * n_out)?;
        let logp = candle_nn::ops::log_softmax(&seg, D::Minus1)?;
        losses.push((logp.get(gold)?.neg()? * weight as f64)?);
        at += count * n_out;
    }
    let losses = Tensor::stack(&losses, 0)?;
    let values = losses.to_vec1::<f32>()?;
    Ok(((losses.sum_all()? / step_examples as f64)?, values))
}

/// (‖got − want‖ / ‖want‖, ‖want‖): the relative difference of two tensors' values.
pub fn relative(got: &[f32], want: &[f32]) -> (f64, f64) {
    let diff: f64 = got.iter().zip(want).map(|(g, w)| (*g as f64 - *w as f64).powi(2)).sum::<f64>().sqrt();
    let norm: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum::<f64>().sqrt();
    (diff / norm, norm)
}
