//! Task heads on the first token's hidden state, with HF's standard layouts:
//! - BERT (sequence classification, multiple choice) and RoBERTa multiple choice:
//!   `classifier(tanh(pooler.dense(h_cls)))`;
//! - RoBERTa sequence classification: `out_proj(tanh(dense(h_cls)))`;
//! - DistilBERT: `classifier(relu(pre_classifier(h_cls)))`.
//!
//! Dropout is an identity at inference and is left out of training as well (stated in
//! `train.rs`). The same function serves inference and training (it is differentiable).

use super::load::{Dense, EncoderWeights, HeadWeights};
use super::states::HiddenStates;
use crate::error::{Error, Result};
use candle_core::{Device, Module, Tensor};

fn linear(x: &Tensor, d: &Dense) -> Result<Tensor> {
    Ok(candle_nn::Linear::new(d.weight.clone(), Some(d.bias.clone())).forward(x)?)
}

/// Logits `[b, n_out]` from first-token states `cls` `[b, hidden]`.
pub fn head_forward(head: &HeadWeights, pooler: Option<&Dense>, cls: &Tensor) -> Result<Tensor> {
    match head {
        HeadWeights::PooledLinear { classifier } => {
            let pooler = pooler.ok_or_else(|| Error::model("this head needs the encoder's pooler"))?;
            linear(&linear(cls, pooler)?.tanh()?, classifier)
        }
        HeadWeights::RobertaClassifier { dense, out_proj } => linear(&linear(cls, dense)?.tanh()?, out_proj),
        HeadWeights::DistilClassifier { pre_classifier, classifier } => {
            linear(&linear(cls, pre_classifier)?.relu()?, classifier)
        }
    }
}

/// The first-token rows of hidden states as a `[b, hidden]` tensor.
pub fn first_tokens(hidden: &HiddenStates) -> Result<Tensor> {
    let mut v = Vec::with_capacity(hidden.batch * hidden.hidden);
    for b in 0..hidden.batch {
        v.extend_from_slice(hidden.token(b, 0));
    }
    Ok(Tensor::from_vec(v, (hidden.batch, hidden.hidden), &Device::Cpu)?)
}

/// Logits per row, from hidden states produced by any backend.
pub fn logits(head: &HeadWeights, weights: &EncoderWeights, hidden: &HiddenStates) -> Result<Vec<Vec<f32>>> {
    Ok(head_forward(head, weights.pooler.as_ref(), &first_tokens(hidden)?)?.to_vec2()?)
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
