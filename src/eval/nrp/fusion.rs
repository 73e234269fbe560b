//! Rankers made of rankers: reciprocal rank fusion and the sum of z-scores.
//!
//! Each component ranker's score of an item is turned into the item's standing among a
//! *reference set* of that component's scores, and the standings are summed:
//!
//! - **RRF** (Cormack, Clarke & Büttcher 2009, k = 60): `sum over components of
//!   1 / (k + rank)`, rank = 1 + the number of the reference set's scores strictly higher
//!   (tied items share a rank).
//! - **z-sum**: `sum over components of (score - mean) / sd`, mean and population standard
//!   deviation (ddof = 0, as `scipy.stats.zscore`) of the reference set; an sd of 0 divides
//!   by 1.
//!
//! The reference set is the [`Scope`]:
//!
//! - **pool**: the component's scores of the query's documents. An answer is placed *alone*
//!   among them, as everywhere in NRP, so answers never change each other's fused scores and
//!   every fused score is comparable with every judged document's: NRP and the ranker
//!   validation always fuse this way ([`fuse`] builds the fused ranker's scores).
//! - **items**: the component's scores of the items being compared, i.e. the answers and
//!   documents one expert ranked for the query, the item itself included ([`item_scores`]).
//!   This compares the items the way the expert saw them (side by side); the expert
//!   agreement fuses this way unless told otherwise ([`Scope::default`]).
//!
//! Both scopes compute a standing with the same [`Standing`]. A component that did not
//! score an item adds nothing to that item's fused score; an item no component scored stays
//! unscored.

use super::{RankedItem, RankerScores};
use crate::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;

/// The k of reciprocal rank fusion, as in the paper that proposed it.
pub const RRF_K: f64 = 60.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Reciprocal rank fusion, k = [`RRF_K`].
    Rrf,
    /// Sum of z-scores.
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

/// Among which scores a component's score is ranked (or z-scored) before the sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The query's documents scored by the component (an answer placed alone among them).
    /// What NRP needs; NRP and the ranker validation always use it.
    Pool,
    /// The items being compared: the answers and documents one expert ranked for the query.
    /// The expert agreement's default.
    #[default]
    Items,
}

impl Scope {
    /// The user's spelling: `items` or `pool`.
    pub fn parse(s: &str) -> Result<Scope> {
        match s {
            "items" => Ok(Scope::Items),
            "pool" => Ok(Scope::Pool),
            _ => Err(Error::invalid(format!(
                "unknown fusion scope `{s}` for the expert agreement (--fuse-scope): expected items or pool"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scope::Pool => "pool",
            Scope::Items => "items",
        }
    }

    /// The scope in words, for the provenance.
    pub fn describe(self) -> &'static str {
        match self {
            Scope::Pool => {
                "pool: each component's rank or z-score among its scores of the query's documents (an answer placed alone among them)"
            }
            Scope::Items => {
                "items: each component's rank or z-score among its scores of the items the expert ranked for the query"
            }
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

/// How a fusion ranker was made: its method and (copies of) the rankers it fuses, so its
/// scores can be fused again over another reference set ([`item_scores`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Fusion {
    pub method: Method,
    pub components: Vec<RankerScores>,
}

/// One component's reference set (see the module doc): its scores sorted descending, their
/// mean and population sd. The one place a score becomes a rank or a z-score, in both scopes.
struct Standing {
    descending: Vec<f64>,
    mean: f64,
    sd: f64,
}

impl Standing {
    /// `None` for an empty set.
    fn new(scores: impl IntoIterator<Item = f64>) -> Option<Standing> {
        let mut descending: Vec<f64> = scores.into_iter().collect();
        if descending.is_empty() {
            return None;
        }
        descending.sort_by(|a, b| b.total_cmp(a));
        let n = descending.len() as f64;
        let mean = descending.iter().sum::<f64>() / n;
        let var = descending.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / n;
        Some(Standing { descending, mean, sd: var.sqrt() })
    }

    /// What a component's `score` adds to an item's fused score.
    fn of(&self, method: Method, score: f64) -> f64 {
        match method {
            Method::Rrf => {
                let higher = self.descending.partition_point(|&s| s > score);
                1.0 / (RRF_K + (higher + 1) as f64)
            }
            Method::ZSum => (score - self.mean) / if self.sd > 0.0 { self.sd } else { 1.0 },
        }
    }
}

/// The fused ranker of `components` in the pool scope (see the module doc): every document
/// among its query's documents, every answer alone among them. It keeps its recipe, for
/// [`item_scores`].
pub fn fuse(name: &str, method: Method, components: &[&RankerScores]) -> RankerScores {
    let pools: Vec<HashMap<&str, Standing>> = components
        .iter()
        .map(|c| {
            c.documents.iter().filter_map(|(q, d)| Some((q.as_str(), Standing::new(d.values().copied())?))).collect()
        })
        .collect();
    let mut documents: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for (c, pool) in components.iter().zip(&pools) {
        for (qid, docs) in &c.documents {
            let Some(q) = pool.get(qid.as_str()) else {
                continue;
            };
            let fused = documents.entry(qid.clone()).or_default();
            for (docno, &score) in docs {
                *fused.entry(docno.clone()).or_insert(0.0) += q.of(method, score);
            }
        }
    }
    let mut answers = HashMap::new();
    for (c, pool) in components.iter().zip(&pools) {
        for (key, &score) in &c.answers {
            // Without scored documents for its query, the component adds nothing (the answer
            // keeps a score: its NRP is then undefined or above only unscored documents).
            let add = pool.get(key.qid.as_str()).map_or(0.0, |q| q.of(method, score));
            *answers.entry(key.clone()).or_insert(0.0) += add;
        }
    }
    let fusion = Fusion { method, components: components.iter().map(|&c| c.clone()).collect() };
    RankerScores { name: name.into(), documents, answers, fusion: Some(fusion) }
}

/// The items scope's sum: `per_component[c][i]` is component c's score of item i (`None`:
/// not scored by it); each component's scores are ranked (or z-scored) among its scores of
/// these items only. `None` for an item no component scored.
pub fn fuse_among(method: Method, per_component: &[Vec<Option<f64>>]) -> Vec<Option<f64>> {
    let items = per_component.iter().map(Vec::len).max().unwrap_or(0);
    let mut fused: Vec<Option<f64>> = vec![None; items];
    for scores in per_component {
        let Some(standing) = Standing::new(scores.iter().flatten().copied()) else {
            continue;
        };
        for (f, s) in fused.iter_mut().zip(scores) {
            if let Some(s) = s {
                *f = Some(f.unwrap_or(0.0) + standing.of(method, *s));
            }
        }
    }
    fused
}

/// A ranker's scores of `items` (the items one expert ranked for one query), to compare them
/// with one another: a fusion ranker's fused in `scope` (items: [`fuse_among`] over its
/// components' scores of the same items, themselves fused among the items when they are
/// fusions; pool: its own scores, [`fuse`]'s), any other ranker's own scores.
pub fn item_scores(ranker: &RankerScores, items: &[RankedItem], scope: Scope) -> Vec<Option<f64>> {
    match (&ranker.fusion, scope) {
        (Some(f), Scope::Items) => {
            let per_component: Vec<Vec<Option<f64>>> =
                f.components.iter().map(|c| item_scores(c, items, scope)).collect();
            fuse_among(f.method, &per_component)
        }
        _ => items.iter().map(|i| ranker.score_of(i)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::nrp::AnswerKey;

    fn near(got: Option<f64>, want: f64) {
        let got = got.expect("scored");
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }

    /// One query, q. Component A scores the documents d1 3, d2 2, d3 1 and the answers
    /// a1 2 (tied with d2), a2 0.5; component B scores d1 1, d2 9, d3 5, a1 9.5, a2 6.
    /// The expert ranked a1, a2 and d2.
    fn components() -> (RankerScores, RankerScores, [AnswerKey; 2]) {
        let keys = [AnswerKey::new("q", "s", "p", 1), AnswerKey::new("q", "s", "p", 2)];
        let ranker = |name: &str, docs: [f64; 3], answers: [f64; 2]| {
            let docs = ["d1", "d2", "d3"].iter().zip(docs).map(|(d, s)| (d.to_string(), s)).collect();
            let answers = keys.iter().cloned().zip(answers).collect();
            RankerScores::new(name, HashMap::from([("q".to_string(), docs)]), answers)
        };
        let a = ranker("A", [3.0, 2.0, 1.0], [2.0, 0.5]);
        let b = ranker("B", [1.0, 9.0, 5.0], [9.5, 6.0]);
        (a, b, keys)
    }

    fn expert_items(keys: &[AnswerKey; 2]) -> [RankedItem<'_>; 3] {
        [
            RankedItem { qid: "q", id: "s/p/1", answer: Some(&keys[0]) },
            RankedItem { qid: "q", id: "s/p/2", answer: Some(&keys[1]) },
            RankedItem { qid: "q", id: "d2", answer: None },
        ]
    }

    /// RRF, pool: ranks among each component's documents, an answer alone among them.
    ///   A: a1 (2) has 3 above: rank 2; a2 (0.5) has 3, 2, 1 above: rank 4; d2 (2): rank 2.
    ///   B: a1 (9.5): rank 1; a2 (6) has 9 above: rank 2; d2 (9): rank 1.
    ///   a1 = 1/62 + 1/61, a2 = 1/64 + 1/62, d2 = 1/62 + 1/61: a1 ties d2.
    /// RRF, items: ranks among the three items only.
    ///   A: a1 2, a2 0.5, d2 2: a1 and d2 share rank 1, a2 has both above: rank 3.
    ///   B: a1 9.5, a2 6, d2 9: ranks 1, 3, 2.
    ///   a1 = 1/61 + 1/61, a2 = 1/63 + 1/63, d2 = 1/61 + 1/62: a1 above d2 now.
    #[test]
    fn rrf_in_both_scopes_by_hand() {
        let (a, b, keys) = components();
        let fused = fuse("rrf", Method::Rrf, &[&a, &b]);
        let items = expert_items(&keys);
        let pool = item_scores(&fused, &items, Scope::Pool);
        near(pool[0], 1.0 / 62.0 + 1.0 / 61.0);
        near(pool[1], 1.0 / 64.0 + 1.0 / 62.0);
        near(pool[2], 1.0 / 62.0 + 1.0 / 61.0);
        assert_eq!(pool[0], pool[2], "a1 and d2 tie exactly in the pool");
        // The pool scores are the fused ranker's own (what NRP places).
        assert_eq!(pool[0], Some(fused.answers[&keys[0]]));
        assert_eq!(pool[2], Some(fused.documents["q"]["d2"]));

        let among = item_scores(&fused, &items, Scope::Items);
        near(among[0], 1.0 / 61.0 + 1.0 / 61.0);
        near(among[1], 1.0 / 63.0 + 1.0 / 63.0);
        near(among[2], 1.0 / 61.0 + 1.0 / 62.0);

        // A fusion of a fusion fuses among the items at every level: the inner rrf's item
        // scores (2/61, 2/63, 1/61 + 1/62) rank 1, 3, 2, A's 1, 3, 1, so
        // a1 = 1/61 + 1/61, a2 = 1/63 + 1/63, d2 = 1/62 + 1/61.
        let outer = fuse("outer", Method::Rrf, &[&fused, &a]);
        let nested = item_scores(&outer, &items, Scope::Items);
        near(nested[0], 2.0 / 61.0);
        near(nested[1], 2.0 / 63.0);
        near(nested[2], 1.0 / 62.0 + 1.0 / 61.0);
        // A ranker that is not a fusion gives its own scores in either scope.
        assert_eq!(item_scores(&a, &items, Scope::Items), [Some(2.0), Some(0.5), Some(2.0)]);
    }

    /// z-sum, pool: A's documents 3, 2, 1 have mean 2 and population sd sqrt(2/3); B's
    /// 1, 9, 5 mean 5 and sd sqrt(32/3) (squares 16 + 16 + 0 over 3).
    ///   a1 = (2 - 2)/sqrt(2/3) + (9.5 - 5)/sqrt(32/3) = 0 + 4.5/sqrt(32/3)
    ///   a2 = (0.5 - 2)/sqrt(2/3) + (6 - 5)/sqrt(32/3)
    ///   d2 = (2 - 2)/sqrt(2/3) + (9 - 5)/sqrt(32/3)
    /// z-sum, items: A's items 2, 0.5, 2 have mean 1.5 and sd sqrt((0.25 + 1 + 0.25)/3) =
    /// sqrt(1/2); B's 9.5, 6, 9 mean 49/6 and deviations 4/3, -13/6, 5/6, squares
    /// 64/36 + 169/36 + 25/36 = 43/6, sd sqrt(43/18).
    ///   a1 = 0.5/sqrt(1/2) + (4/3)/sqrt(43/18)
    ///   a2 = -1/sqrt(1/2) - (13/6)/sqrt(43/18)
    ///   d2 = 0.5/sqrt(1/2) + (5/6)/sqrt(43/18)
    #[test]
    fn zsum_in_both_scopes_by_hand() {
        let (a, b, keys) = components();
        let fused = fuse("z", Method::ZSum, &[&a, &b]);
        let items = expert_items(&keys);
        let (sd_a, sd_b) = ((2.0f64 / 3.0).sqrt(), (32.0f64 / 3.0).sqrt());
        let pool = item_scores(&fused, &items, Scope::Pool);
        near(pool[0], 4.5 / sd_b);
        near(pool[1], -1.5 / sd_a + 1.0 / sd_b);
        near(pool[2], 4.0 / sd_b);

        let (sd_a, sd_b) = (0.5f64.sqrt(), (43.0f64 / 18.0).sqrt());
        let among = item_scores(&fused, &items, Scope::Items);
        near(among[0], 0.5 / sd_a + (4.0 / 3.0) / sd_b);
        near(among[1], -1.0 / sd_a - (13.0 / 6.0) / sd_b);
        near(among[2], 0.5 / sd_a + (5.0 / 6.0) / sd_b);
    }

    /// Items a component did not score: it adds nothing to them, and ranks the others among
    /// its scored ones only. The first component ranks items 0 and 1 (scores 1, 3) 2 and 1,
    /// the second scores item 1 alone (rank 1); item 2 has no score: 1/62, 1/61 + 1/61, none.
    /// z-sum: the first's scores 1, 3 have mean 2 and sd 1 (-1, 1); the second's single score
    /// has sd 0, divided by 1 (0); equal scores (4, 4) z-score to 0, 0 the same way.
    #[test]
    fn items_scope_with_unscored_items_and_zero_sd() {
        let scores = [vec![Some(1.0), Some(3.0), None], vec![None, Some(2.0), None]];
        let rrf = fuse_among(Method::Rrf, &scores);
        near(rrf[0], 1.0 / 62.0);
        near(rrf[1], 2.0 / 61.0);
        assert_eq!(rrf[2], None);
        let z = fuse_among(Method::ZSum, &scores);
        assert_eq!(z, [Some(-1.0), Some(1.0), None]);
        assert_eq!(fuse_among(Method::ZSum, &[vec![Some(4.0), Some(4.0)]]), [Some(0.0), Some(0.0)]);
    }

    #[test]
    fn the_scope_is_read_by_name_and_an_unknown_one_names_the_option() {
        assert_eq!(Scope::parse("items").unwrap(), Scope::Items);
        assert_eq!(Scope::parse("pool").unwrap(), Scope::Pool);
        assert_eq!(Scope::default(), Scope::Items);
        let err = Scope::parse("docs").unwrap_err().to_string();
        assert!(err.contains("unknown fusion scope `docs`") && err.contains("--fuse-scope"), "{err}");
        assert!(err.contains("items or pool"), "{err}");
    }
}
