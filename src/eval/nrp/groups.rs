//! Step 4: mean NRP per (system, prompt) with a bootstrap over queries.

use super::{AnswerNrp, GroupNrp, NrpOptions};
use crate::stats::Stat;
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub(super) fn group_means(answers: &[AnswerNrp], n_dimensions: usize, options: &NrpOptions) -> Vec<GroupNrp> {
    // Queries are the bootstrap units; both queries and groups in sorted order.
    let queries: Vec<&str> = answers.iter().map(|a| a.key.qid.as_str()).collect::<BTreeSet<_>>().into_iter().collect();
    let query_index: HashMap<&str, usize> = queries.iter().enumerate().map(|(i, q)| (*q, i)).collect();

    // (group, query) -> sums and counts of the combined NRP and of each dimension's NRP.
    // Sparse: a group holds only the queries it answered.
    #[derive(Clone)]
    struct Cell {
        answers: usize,
        combined: (f64, usize),
        per_dim: Vec<(f64, usize)>,
    }
    let mut cells: BTreeMap<(&str, &str), BTreeMap<usize, Cell>> = BTreeMap::new();
    for a in answers {
        let q = query_index[a.key.qid.as_str()];
        let cell = cells
            .entry((a.key.system.as_str(), a.key.prompt.as_str()))
            .or_default()
            .entry(q)
            .or_insert_with(|| Cell { answers: 0, combined: (0.0, 0), per_dim: vec![(0.0, 0); n_dimensions] });
        cell.answers += 1;
        if let Some(v) = a.combined.value() {
            cell.combined.0 += v;
            cell.combined.1 += 1;
        }
        for (d, value) in a.per_dimension.iter().enumerate() {
            if let Some(v) = value.value() {
                cell.per_dim[d].0 += v;
                cell.per_dim[d].1 += 1;
            }
        }
    }
    let query_mean = |(sum, count): (f64, usize)| (count > 0).then(|| sum / count as f64);
    // Per group: (query, per-query mean combined NRP) where defined.
    let per_query: Vec<Vec<(usize, f64)>> = cells
        .values()
        .map(|by_query| by_query.iter().filter_map(|(&q, c)| query_mean(c.combined).map(|m| (q, m))).collect())
        .collect();

    // Each resample: how often every query was drawn, then a weighted mean per group.
    // Costs O(queries + (group, query) pairs) per resample.
    let weighted_mean = |values: &[(usize, f64)], times: &dyn Fn(usize) -> f64| -> f64 {
        let (mut sum, mut n) = (0.0, 0.0);
        for &(q, v) in values {
            let t = times(q);
            sum += t * v;
            n += t;
        }
        if n == 0.0 {
            f64::NAN
        } else {
            sum / n
        }
    };
    let mut drawn = vec![0u32; queries.len()];
    let boot = options.bootstrap.run(queries.len(), |idx| {
        drawn.iter_mut().for_each(|t| *t = 0);
        for &q in idx {
            drawn[q] += 1;
        }
        per_query.iter().map(|values| weighted_mean(values, &|q| drawn[q] as f64)).collect()
    });

    let once = |_: usize| 1.0;
    let mut groups: Vec<GroupNrp> = cells
        .iter()
        .enumerate()
        .map(|(g, ((system, prompt), by_query))| {
            let per_dimension_mean = (0..n_dimensions)
                .map(|d| {
                    let values: Vec<(usize, f64)> =
                        by_query.iter().filter_map(|(&q, c)| query_mean(c.per_dim[d]).map(|m| (q, m))).collect();
                    to_stat(weighted_mean(&values, &once))
                })
                .collect();
            GroupNrp {
                system: system.to_string(),
                prompt: prompt.to_string(),
                answers: by_query.values().map(|c| c.answers).sum(),
                queries: per_query[g].len(),
                mean: to_stat(weighted_mean(&per_query[g], &once)),
                interval: boot.intervals[g].clone(),
                per_dimension_mean,
            }
        })
        .collect();
    // Best first; undefined means last; ties keep (system, prompt) order.
    let key = |g: &GroupNrp| g.mean.value().copied().unwrap_or(f64::NEG_INFINITY);
    groups.sort_by(|a, b| key(b).total_cmp(&key(a)));
    groups
}

pub(super) fn to_stat(value: f64) -> Stat<f64> {
    if value.is_nan() {
        Stat::undefined("no answer with a defined NRP")
    } else {
        Stat::Defined(value)
    }
}
