//! Task heads on the last layer, with HF's standard layouts:
//! - BERT (sequence classification, multiple choice) and RoBERTa multiple choice:
//!   `classifier(tanh(pooler.dense(h_cls)))`;
//! - RoBERTa sequence classification: `out_proj(tanh(dense(h_cls)))`;
//! - DistilBERT: `classifier(relu(pre_classifier(h_cls)))`;
//! - DeBERTa-v2: `classifier(act(pooler.dense(h_cls)))`, `act` the config's
//!   `pooler_hidden_act` (GELU);
//! - ModernBERT: `classifier(norm(act(head.dense(x))))` where `x` is the first token's
//!   state or the mean of the real tokens' states (`classifier_pooling`).
//!
//! Dropout is an identity at inference; in training [`head_forward_dropping`] multiplies
//! the classifier's input by the step's mask (`train::dropout`). The same function serves
//! inference and training (it is differentiable).

use super::config::{Activation, HeadPooling};
use super::load::{Dense, EncoderWeights, HeadWeights, Norm};
use super::states::HiddenStates;
use crate::error::{Error, Result};
use candle_core::{DType, Device, Module, Tensor};

/// The activation between a head's two maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadActivation {
    Tanh,
    Gelu,
    GeluTanh,
    Relu,
}

impl From<Activation> for HeadActivation {
    fn from(a: Activation) -> Self {
        match a {
            Activation::Gelu => HeadActivation::Gelu,
            Activation::GeluTanh => HeadActivation::GeluTanh,
            Activation::Relu => HeadActivation::Relu,
        }
    }
}

impl HeadActivation {
    fn apply(self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            HeadActivation::Tanh => x.tanh()?,
            HeadActivation::Gelu => x.gelu_erf()?,
            HeadActivation::GeluTanh => x.gelu()?,
            HeadActivation::Relu => x.relu()?,
        })
    }
}

impl HeadWeights {
    /// The head's first map and its activation, and its last map, with the norm between
    /// them that ModernBERT's head has: the shape every head shares (the GPU runs them so).
    pub fn parts<'a>(&'a self, pooler: Option<&'a Dense>) -> Result<HeadParts<'a>> {
        let tanh = HeadActivation::Tanh;
        let of = HeadActivation::from;
        Ok(match self {
            HeadWeights::PooledLinear { classifier } => HeadParts {
                first: pooler.ok_or_else(|| Error::model("this head needs the encoder's pooler"))?,
                activation: tanh,
                norm: None,
                last: classifier,
            },
            HeadWeights::RobertaClassifier { dense, out_proj } => {
                HeadParts { first: dense, activation: tanh, norm: None, last: out_proj }
            }
            HeadWeights::DistilClassifier { pre_classifier, classifier } => {
                HeadParts { first: pre_classifier, activation: of(Activation::Relu), norm: None, last: classifier }
            }
            HeadWeights::ContextPooler { dense, activation, classifier } => {
                HeadParts { first: dense, activation: of(*activation), norm: None, last: classifier }
            }
            HeadWeights::ModernBertHead { dense, activation, norm, classifier, .. } => {
                HeadParts { first: dense, activation: of(*activation), norm: Some(norm), last: classifier }
            }
        })
    }
}

/// Every head as `last(norm(activation(first(x))))` (see [`HeadWeights::parts`]).
pub struct HeadParts<'a> {
    pub first: &'a Dense,
    pub activation: HeadActivation,
    pub norm: Option<&'a Norm>,
    pub last: &'a Dense,
}

fn linear(x: &Tensor, d: &Dense) -> Result<Tensor> {
    Ok(candle_nn::Linear::new(d.weight.clone(), Some(d.bias.clone())).forward(x)?)
}

/// Logits `[b, n_out]` from the head's inputs `input` `[b, hidden]` (the first token's
/// states, or the mean states of a mean-pooling head: [`head_inputs`]).
pub fn head_forward(head: &HeadWeights, pooler: Option<&Dense>, input: &Tensor) -> Result<Tensor> {
    head_forward_dropping(head, pooler, input, None)
}

/// [`head_forward`] with the classifier's input multiplied by `classifier_mask` (training's
/// dropout, `[b, hidden]`): where Hugging Face's heads drop (BERT's after the pooler,
/// RoBERTa's and DistilBERT's before the output map).
pub fn head_forward_dropping(
    head: &HeadWeights,
    pooler: Option<&Dense>,
    input: &Tensor,
    classifier_mask: Option<&Tensor>,
) -> Result<Tensor> {
    let parts = head.parts(pooler)?;
    let mut x = parts.activation.apply(&linear(input, parts.first)?)?;
    if let (Some(n), HeadWeights::ModernBertHead { eps, .. }) = (parts.norm, head) {
        x = candle_nn::ops::layer_norm_slow(&x, &n.weight, &n.bias, *eps as f32)?;
    }
    if let Some(mask) = classifier_mask {
        x = (x * mask)?;
    }
    linear(&x, parts.last)
}

/// The first-token rows of hidden states as a `[b, hidden]` tensor.
pub fn first_tokens(hidden: &HiddenStates) -> Result<Tensor> {
    let mut v = Vec::with_capacity(hidden.batch * hidden.hidden);
    for b in 0..hidden.batch {
        v.extend_from_slice(hidden.token(b, 0));
    }
    Ok(Tensor::from_vec(v, (hidden.batch, hidden.hidden), &Device::Cpu)?)
}

/// What a head reads of each row, `[b, hidden]`: the first token's state, or (a mean
/// head) the mean of the real tokens' states, `mask` `[b * seq_len]` saying which are real
/// (HF's `(h * mask).sum(1) / mask.sum(1)`).
pub fn head_inputs(pooling: HeadPooling, hidden: &HiddenStates, mask: &[u32]) -> Result<Tensor> {
    match pooling {
        HeadPooling::Cls => first_tokens(hidden),
        HeadPooling::Mean => {
            let (s, h) = (hidden.seq_len, hidden.hidden);
            let mut v = vec![0f32; hidden.batch * h];
            for (b, row) in v.chunks_mut(h).enumerate() {
                let real: Vec<usize> = (0..s).filter(|&t| mask[b * s + t] != 0).collect();
                for &t in &real {
                    row.iter_mut().zip(hidden.token(b, t)).for_each(|(a, x)| *a += x);
                }
                let n = real.len().max(1) as f32;
                row.iter_mut().for_each(|a| *a /= n);
            }
            Ok(Tensor::from_vec(v, (hidden.batch, h), &Device::Cpu)?)
        }
    }
}

/// [`head_inputs`] on a differentiable `[b, s, hidden]` tensor (training). With
/// `HeadPooling::Cls` only the first row of each sequence is read (`s` may be 1).
pub fn pool_for_head(pooling: HeadPooling, x: &Tensor, mask: &[u32]) -> Result<Tensor> {
    use candle_core::IndexOp;
    let (b, s, _) = x.dims3()?;
    match pooling {
        HeadPooling::Cls => Ok(x.i((.., 0, ..))?.contiguous()?),
        HeadPooling::Mean => {
            let m: Vec<f32> = mask.iter().map(|&v| if v != 0 { 1.0 } else { 0.0 }).collect();
            let m = Tensor::from_vec(m, (b, s, 1), &Device::Cpu)?.to_dtype(DType::F32)?;
            let counts = m.sum(1)?.clamp(1f32, f32::MAX)?;
            Ok(x.broadcast_mul(&m)?.sum(1)?.broadcast_div(&counts)?)
        }
    }
}

/// Logits per row, from hidden states produced by any backend (`mask` `[b * seq_len]`),
/// the head reading them as the config says (`EncoderConfig::head_pooling`).
pub fn logits(
    head: &HeadWeights,
    pooling: HeadPooling,
    weights: &EncoderWeights,
    hidden: &HiddenStates,
    mask: &[u32],
) -> Result<Vec<Vec<f32>>> {
    let input = head_inputs(pooling, hidden, mask)?;
    Ok(head_forward(head, weights.pooler.as_ref(), &input)?.to_vec2()?)
}

/// Softmax of a slice (max-subtracted for stability); `temperature` divides the logits.
pub fn softmax(logits: &[f32], temperature: f64) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let exps: Vec<f64> = logits.iter().map(|&l| ((l as f64 - max) / temperature).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.iter().map(|e| e / sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_known_values() {
        // numpy: e = np.exp([1,2,3]); e / e.sum() -> [0.09003057, 0.24472847, 0.66524096]
        let p = softmax(&[1.0, 2.0, 3.0], 1.0);
        for (a, b) in p.iter().zip([0.09003057, 0.24472847, 0.66524096]) {
            assert!((a - b).abs() < 1e-8);
        }
        // Temperature 0.5 doubles the logits: softmax([2,4,6]) -> [0.01587624, 0.11731043, 0.86681333]
        let p = softmax(&[1.0, 2.0, 3.0], 0.5);
        assert!((p[2] - 0.86681333).abs() < 1e-8);
    }
}
