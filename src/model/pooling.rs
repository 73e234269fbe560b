//! Sentence-transformers pooling (`1_Pooling/config.json`) and normalisation
//! (`modules.json` lists a `Normalize` module), on backend-neutral hidden states.

use super::states::{HiddenStates, TokenBatch};
use crate::error::{Error, Result};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolingMode {
    /// Mean over real tokens (special tokens included, as sentence-transformers does).
    Mean,
    /// The first token's hidden state.
    Cls,
    /// Element-wise max over real tokens.
    Max,
}

/// How token states become one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pooling {
    pub mode: PoolingMode,
    /// Scale to unit length (sentence-transformers' `Normalize` module).
    pub normalize: bool,
}

impl Default for Pooling {
    /// Mean pooling without normalisation: the usual choice for a bare encoder.
    fn default() -> Self {
        Pooling { mode: PoolingMode::Mean, normalize: false }
    }
}

impl Pooling {
    /// From the sentence-transformers files; either may be absent (then mean, no norm).
    pub fn from_files(pooling_json: Option<&[u8]>, modules_json: Option<&[u8]>) -> Result<Self> {
        let mut p = Pooling::default();
        if let Some(bytes) = pooling_json {
            let v: Value = serde_json::from_slice(bytes).map_err(|e| {
                Error::input("1_Pooling/config.json", e.line(), "pooling", format!("not valid JSON: {e}"))
            })?;
            let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
            let modes: Vec<PoolingMode> = [
                ("pooling_mode_mean_tokens", PoolingMode::Mean),
                ("pooling_mode_cls_token", PoolingMode::Cls),
                ("pooling_mode_max_tokens", PoolingMode::Max),
            ]
            .iter()
            .filter(|(k, _)| flag(k))
            .map(|(_, m)| *m)
            .collect();
            if flag("pooling_mode_mean_sqrt_len_tokens") || modes.len() > 1 {
                return Err(Error::in_file(
                    "1_Pooling/config.json",
                    "only one of mean, cls or max pooling is supported (not concatenations or \
                     mean_sqrt_len)",
                ));
            }
            if let Some(m) = modes.first() {
                p.mode = *m;
            }
        }
        if let Some(bytes) = modules_json {
            let v: Value = serde_json::from_slice(bytes)
                .map_err(|e| Error::input("modules.json", e.line(), "modules", format!("not valid JSON: {e}")))?;
            p.normalize = v.as_array().is_some_and(|mods| {
                mods.iter()
                    .any(|m| m.get("type").and_then(Value::as_str) == Some("sentence_transformers.models.Normalize"))
            });
        }
        Ok(p)
    }

    /// One vector per row of the batch.
    pub fn pool(&self, hidden: &HiddenStates, batch: &TokenBatch) -> Vec<Vec<f32>> {
        (0..hidden.batch)
            .map(|b| {
                let real: Vec<usize> =
                    (0..hidden.seq_len).filter(|&t| batch.mask[b * batch.seq_len + t] != 0).collect();
                let mut v = match self.mode {
                    PoolingMode::Cls => hidden.token(b, 0).to_vec(),
                    PoolingMode::Mean => {
                        let mut acc = vec![0f32; hidden.hidden];
                        for &t in &real {
                            for (a, x) in acc.iter_mut().zip(hidden.token(b, t)) {
                                *a += x;
                            }
                        }
                        let n = real.len().max(1) as f32;
                        acc.iter_mut().for_each(|a| *a /= n);
                        acc
                    }
                    PoolingMode::Max => {
                        let mut acc = vec![f32::NEG_INFINITY; hidden.hidden];
                        for &t in &real {
                            for (a, x) in acc.iter_mut().zip(hidden.token(b, t)) {
                                *a = a.max(*x);
                            }
                        }
                        acc
                    }
                };
                if self.normalize {
                    normalize(&mut v);
                }
                v
            })
            .collect()
    }
}

/// Scale to unit length (a zero vector stays zero; sentence-transformers clamps the norm
/// at 1e-12 the same way).
pub fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
}

/// Cosine similarity; 0 when either vector is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_respects_the_mask() {
        // 2 rows, 3 tokens, hidden 2; row 1 has one padded token holding junk (100).
        let hidden = HiddenStates {
            batch: 2,
            seq_len: 3,
            hidden: 2,
            data: vec![1., 2., 3., 4., 5., 6., 1., -1., 3., 1., 100., 100.],
        };
        let batch =
            TokenBatch { batch: 2, seq_len: 3, ids: vec![0; 6], type_ids: vec![0; 6], mask: vec![1, 1, 1, 1, 1, 0] };
        let mean = Pooling { mode: PoolingMode::Mean, normalize: false }.pool(&hidden, &batch);
        assert_eq!(mean, vec![vec![3., 4.], vec![2., 0.]]);
        let max = Pooling { mode: PoolingMode::Max, normalize: false }.pool(&hidden, &batch);
        assert_eq!(max, vec![vec![5., 6.], vec![3., 1.]]);
        let cls = Pooling { mode: PoolingMode::Cls, normalize: true }.pool(&hidden, &batch);
        assert!((cls[0][0] - 1.0 / 5f32.sqrt()).abs() < 1e-7);
        assert!((cosine(&[1., 0.], &[1., 1.]) - 0.5f32.sqrt()).abs() < 1e-7);
    }

    #[test]
    fn reads_sentence_transformers_files() {
        let pooling = br#"{"word_embedding_dimension":384,"pooling_mode_cls_token":false,
            "pooling_mode_mean_tokens":true,"pooling_mode_max_tokens":false,
            "pooling_mode_mean_sqrt_len_tokens":false}"#;
        let modules = br#"[{"idx":0,"type":"sentence_transformers.models.Transformer"},
            {"idx":2,"type":"sentence_transformers.models.Normalize"}]"#;
        let p = Pooling::from_files(Some(pooling), Some(modules)).unwrap();
        assert_eq!(p, Pooling { mode: PoolingMode::Mean, normalize: true });
        let cls = br#"{"pooling_mode_cls_token":true}"#;
        assert_eq!(Pooling::from_files(Some(cls), None).unwrap().mode, PoolingMode::Cls);
    }
}
