//! Rankers made of rankers: reciprocal rank fusion and the sum of per-query z-scores.
//!
//! As everywhere in NRP, an answer is placed *alone* among its query's documents: in each
//! component ranker, its rank (or z-score) is the one it would have among that ranker's
//! scored documents of the query, so answers never change each other's fused scores.
//!
//! - **RRF** (Cormack, Clarke & Büttcher 2009, k = 60): `sum over components of
//!   1 / (k + rank)`, rank = 1 + the number of the component's documents of the query that
//!   score strictly higher (tied items share a rank).
//! - **z-sum**: `sum over components of (score - mean) / sd`, mean and population standard
//!   deviation (ddof = 0, as `scipy.stats.zscore`) of the component's scores of the query's
//!   documents; an sd of 0 divides by 1.
//!
//! A component that did not score an item adds nothing to that item's fused score; an item
//! no component scored stays unscored.

use super::{AnswerKey, RankerScores};
use crate::{Error, Result};
use std::collections::HashMap;

/// The k of reciprocal rank fusion, as in the paper that proposed it.
pub const RRF_K: f64 = 60.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Reciprocal rank fusion, k = [`RRF_K`].
    Rrf,
    /// Sum of per-query z-scores.
    ZSum,
}

impl Method {
    pub fn describe(self) -> &'static str {
        match self {
            Method::Rrf => "reciprocal rank fusion (k = 60)",
            Method::ZSum => "sum of per-query z-scores (population sd)",
        }
    }
}

/// A fusion the user asked for: `[NAME=]rrf:A,B[,...]` or `[NAME=]zsum:A,B[,...]`; the name
/// defaults to `rrf(A+B)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FusionSpec {
    pub name: String,
    pub method: Method,
    pub rankers: Vec<String>,
}

impl FusionSpec {
    pub fn parse(spec: &str) -> Result<FusionSpec> {
        let usage = || {
            Error::invalid(format!(
                "fusion `{spec}`: expected [NAME=]rrf:RANKER,RANKER[,...] or [NAME=]zsum:RANKER,RANKER[,...]"
            ))
        };
        let (name, rest) = match spec.split_once('=') {
            Some((n, r)) => (Some(n.trim()), r),
            None => (None, spec),
        };
        let (method, list) = rest.split_once(':').ok_or_else(usage)?;
        let method = match method.trim() {
            "rrf" => Method::Rrf,
            "zsum" => Method::ZSum,
            _ => return Err(usage()),
        };
        let rankers: Vec<String> = list.split(',').map(|r| r.trim().to_string()).collect();
        if rankers.len() < 2 || rankers.iter().any(String::is_empty) || name == Some("") {
            return Err(usage());
        }
        for (i, r) in rankers.iter().enumerate() {
            if rankers[..i].contains(r) {
                return Err(Error::invalid(format!("fusion `{spec}`: ranker `{r}` is named twice")));
            }
        }
        let name = match name {
            Some(n) => n.to_string(),
            None => format!("{}({})", if method == Method::Rrf { "rrf" } else { "zsum" }, rankers.join("+")),
        };
        Ok(FusionSpec { name, method, rankers })
    }

    /// The fused ranker over `available` rankers (looked up by name).
    pub fn fuse(&self, available: &[RankerScores]) -> Result<RankerScores> {
        let components = self
            .rankers
            .iter()
            .map(|n| {
                available.iter().find(|r| &r.name == n).ok_or_else(|| {
                    Error::invalid(format!(
                        "fusion `{}`: no ranker named `{n}` (rankers: {})",
                        self.name,
                        available.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(fuse(&self.name, self.method, &components))
    }
}

/// One component's view of a query: its document scores, sorted descending, and mean/sd.
struct QueryScores {
    descending: Vec<f64>,
    mean: f64,
    sd: f64,
}

impl QueryScores {
    fn new(scores: &HashMap<String, f64>) -> QueryScores {
        let mut descending: Vec<f64> = scores.values().copied().collect();
        descending.sort_by(|a, b| b.total_cmp(a));
        let n = descending.len() as f64;
        let mean = descending.iter().sum::<f64>() / n;
        let var = descending.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / n;
        QueryScores { descending, mean, sd: var.sqrt() }
    }

    fn contribution(&self, method: Method, score: f64) -> f64 {
        match method {
            Method::Rrf => {
                let higher = self.descending.partition_point(|&s| s > score);
                1.0 / (RRF_K + (higher + 1) as f64)
            }
            Method::ZSum => (score - self.mean) / if self.sd > 0.0 { self.sd } else { 1.0 },
        }
    }
}

/// The fused scores of `components` (see the module doc).
pub fn fuse(name: &str, method: Method, components: &[&RankerScores]) -> RankerScores {
    let views: Vec<HashMap<&str, QueryScores>> = components
        .iter()
        .map(|c| {
            c.documents.iter().filter(|(_, d)| !d.is_empty()).map(|(q, d)| (q.as_str(), QueryScores::new(d))).collect()
        })
        .collect();
    let mut documents: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for (c, view) in components.iter().zip(&views) {
        for (qid, docs) in &c.documents {
            let Some(q) = view.get(qid.as_str()) else {
                continue;
            };
            let fused = documents.entry(qid.clone()).or_default();
            for (docno, &score) in docs {
                *fused.entry(docno.clone()).or_insert(0.0) += q.contribution(method, score);
            }
        }
    }
    let mut answers: HashMap<AnswerKey, f64> = HashMap::new();
    for (c, view) in components.iter().zip(&views) {
        for (key, &score) in &c.answers {
            // Without scored documents for its query, the component adds nothing (the answer
            // keeps a score: its NRP is then undefined or above only unscored documents).
            let add = view.get(key.qid.as_str()).map_or(0.0, |q| q.contribution(method, score));
            *answers.entry(key.clone()).or_insert(0.0) += add;
        }
    }
    RankerScores { name: name.into(), documents, answers }
}
