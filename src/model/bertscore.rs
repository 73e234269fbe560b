//! BERTScore (Zhang et al. 2020) with medrank's encoder (methods.md §3):
//! greedy matching by maximum cosine per token, on the hidden states of a chosen layer;
//! special tokens ([CLS]/[SEP], <s>/</s>: the first and last real token) weigh 0;
//! optional idf weights from the references, `idf(w) = ln((M + 1) / (df(w) + 1))` over M
//! references; optional baseline rescaling `(x - b) / (1 - b)` applied to P, R and F
//! separately (values may go negative); several references: the one with the highest F.
//!
//! Note: the original package picks a layer per model (e.g. layer 17 of roberta-large)
//! and ships baselines per model and layer; for other encoders the user supplies both.

use super::encoder::Encoder;
use super::tokenize::{Encoded, TextTokenizer};
use crate::error::{Error, Result};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PrfScore {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BertScoreOptions {
    /// Hidden layer to use (1..=num_layers).
    pub layer: usize,
    pub idf: bool,
    /// Baseline (b_P, b_R, b_F) for rescaling, if any.
    pub baseline: Option<(f64, f64, f64)>,
}

/// Token vectors (special tokens removed) and their ids.
struct TokenVectors {
    ids: Vec<u32>,
    vecs: Vec<Vec<f32>>,
}

/// P, R, F from token vectors and weights, greedy max-cosine matching. Weights need not be
/// normalised; F = 0 when P + R = 0.
pub fn greedy_prf(cand: &[Vec<f32>], cand_w: &[f64], refs: &[Vec<f32>], ref_w: &[f64]) -> PrfScore {
    let unit = |v: &Vec<f32>| {
        let n = v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt().max(1e-12);
        v.iter().map(|x| *x as f64 / n).collect::<Vec<f64>>()
    };
    let c: Vec<Vec<f64>> = cand.iter().map(unit).collect();
    let r: Vec<Vec<f64>> = refs.iter().map(unit).collect();
    let sim = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let weighted_best = |xs: &[Vec<f64>], ws: &[f64], ys: &[Vec<f64>]| -> f64 {
        let total: f64 = ws.iter().sum();
        if total == 0.0 || ys.is_empty() {
            return 0.0;
        }
        xs.iter().zip(ws).map(|(x, w)| w * ys.iter().map(|y| sim(x, y)).fold(f64::NEG_INFINITY, f64::max)).sum::<f64>()
            / total
    };
    let precision = weighted_best(&c, cand_w, &r);
    let recall = weighted_best(&r, ref_w, &c);
    let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
    PrfScore { precision, recall, f1 }
}

/// `(x - b) / (1 - b)` for each of P, R, F.
pub fn rescale(s: PrfScore, baseline: (f64, f64, f64)) -> PrfScore {
    let f = |x: f64, b: f64| (x - b) / (1.0 - b);
    PrfScore { precision: f(s.precision, baseline.0), recall: f(s.recall, baseline.1), f1: f(s.f1, baseline.2) }
}

/// idf over reference token-id sets: ln((M + 1) / (df + 1)).
pub fn idf_table(references: &[Vec<u32>]) -> HashMap<u32, f64> {
    let m = references.len() as f64;
    let mut df: HashMap<u32, usize> = HashMap::new();
    for r in references {
        for id in r.iter().collect::<HashSet<_>>() {
            *df.entry(*id).or_default() += 1;
        }
    }
    df.into_iter().map(|(id, n)| (id, ((m + 1.0) / (n as f64 + 1.0)).ln())).collect()
}

async fn token_vectors<E: Encoder>(
    encoder: &E,
    tok: &TextTokenizer,
    texts: &[&str],
    layer: usize,
) -> Result<Vec<TokenVectors>> {
    let mut out = Vec::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let e: Encoded = tok.encode(t)?;
        let batch = tok.batch(&[&e]);
        let hidden = encoder.encode(&batch, layer).await?;
        let states: Vec<Vec<f32>> = (0..e.len()).map(|t| hidden.token(0, t).to_vec()).collect();
        super::finite::vectors("token vectors", &states).map_err(|err| err.reindexing(|_| i))?;
        let n = e.len();
        // Drop the first and last token: the special tokens around a single sequence.
        let inner = if n >= 2 { 1..n - 1 } else { 0..0 };
        out.push(TokenVectors {
            ids: e.ids[inner.clone()].to_vec(),
            vecs: inner.map(|i| hidden.token(0, i).to_vec()).collect(),
        });
    }
    Ok(out)
}

/// BERTScore of each candidate against its references (`references[i]` for
/// `candidates[i]`; the best F over references is kept). idf, when on, is computed over all
/// references given.
pub async fn bertscore<E: Encoder>(
    encoder: &E,
    tokenizer: &TextTokenizer,
    candidates: &[&str],
    references: &[Vec<&str>],
    opts: &BertScoreOptions,
) -> Result<Vec<PrfScore>> {
    if candidates.len() != references.len() {
        return Err(Error::invalid(format!(
            "{} candidates but {} reference lists",
            candidates.len(),
            references.len()
        )));
    }
    if opts.layer == 0 || opts.layer > encoder.config().num_layers {
        return Err(Error::invalid(format!(
            "BERTScore layer {} of a {}-layer encoder",
            opts.layer,
            encoder.config().num_layers
        )));
    }
    let all_refs: Vec<&str> = references.iter().flatten().copied().collect();
    // A reference's position among all of them -> its candidate's (errors name candidates).
    let candidate_of_reference = |r: usize| {
        let mut seen = 0;
        references.iter().position(|refs| {
            seen += refs.len();
            r < seen
        })
    };
    let ref_vecs = token_vectors(encoder, tokenizer, &all_refs, opts.layer)
        .await
        .map_err(|e| e.reindexing(|r| candidate_of_reference(r).unwrap_or(0)))?;
    let idf =
        if opts.idf { Some(idf_table(&ref_vecs.iter().map(|r| r.ids.clone()).collect::<Vec<_>>())) } else { None };
    let weights = |ids: &[u32]| -> Vec<f64> {
        match &idf {
            // Tokens never seen in a reference get the maximum idf ln(M + 1).
            Some(t) => ids.iter().map(|id| *t.get(id).unwrap_or(&((all_refs.len() as f64) + 1.0).ln())).collect(),
            None => vec![1.0; ids.len()],
        }
    };
    let cand_vecs = token_vectors(encoder, tokenizer, candidates, opts.layer).await?;
    let mut out = Vec::with_capacity(candidates.len());
    let mut r_at = 0;
    for (c, refs) in cand_vecs.iter().zip(references) {
        if refs.is_empty() {
            return Err(Error::invalid("a candidate without references"));
        }
        let mut best: Option<PrfScore> = None;
        for r in &ref_vecs[r_at..r_at + refs.len()] {
            let s = greedy_prf(&c.vecs, &weights(&c.ids), &r.vecs, &weights(&r.ids));
            if best.is_none_or(|b| s.f1 > b.f1) {
                best = Some(s);
            }
        }
        r_at += refs.len();
        let s = best.expect("at least one reference");
        out.push(match opts.baseline {
            Some(b) => rescale(s, b),
            None => s,
        });
    }
    let f1s: Vec<f64> = out.iter().flat_map(|s| [s.precision, s.recall, s.f1]).collect();
    super::finite::scores("BERTScore", &f1s).map_err(|e| e.reindexing(|i| i / 3))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_matching_by_hand() {
        // Candidate tokens: x=(1,0), y=(0,1); reference tokens: x=(1,0), z=(1,1)/√2.
        // P: x->max(1, .7071)=1, y->max(0, .7071)=.7071 => P = (1+.7071)/2 = .853553
        // R: x->1, z->max(.7071,.7071)=.7071 => R = .853553; F = .853553.
        let c = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        let r = vec![vec![1.0, 0.0], vec![1.0, 1.0]];
        let s = greedy_prf(&c, &[1.0, 1.0], &r, &[1.0, 1.0]);
        let h = (1.0 + 0.5f64.sqrt()) / 2.0;
        assert!((s.precision - h).abs() < 1e-7 && (s.recall - h).abs() < 1e-7 && (s.f1 - h).abs() < 1e-7);
        // Weight 3 on y: P = (1 + 3*.7071)/4 = .780330; F = 2PR/(P+R).
        let s = greedy_prf(&c, &[1.0, 3.0], &r, &[1.0, 1.0]);
        let p = (1.0 + 3.0 * 0.5f64.sqrt()) / 4.0;
        assert!((s.precision - p).abs() < 1e-7);
        assert!((s.f1 - 2.0 * p * h / (p + h)).abs() < 1e-7);
        // Rescale with b = 0.9 -> (x - .9)/.1, may go negative.
        let r = rescale(s, (0.9, 0.9, 0.9));
        assert!((r.precision - (p - 0.9) / 0.1).abs() < 1e-9 && r.precision < 0.0);
    }

    #[test]
    fn idf_from_references() {
        // 2 references: token 5 in both (df 2), token 7 in one (df 1, counted once).
        let t = idf_table(&[vec![5, 7, 7], vec![5]]);
        assert!((t[&5] - (3f64 / 3.0).ln()).abs() < 1e-12);
        assert!((t[&7] - (3f64 / 2.0).ln()).abs() < 1e-12);
    }
}
