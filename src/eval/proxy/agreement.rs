//! Agreement with human rankings: among the annotators (Friedman, Krippendorff's alpha)
//! and between the annotators' mean ranks and an evaluator's scores (Kendall's tau-b).
//! `jobs::agreement` uses it on its own, without an evaluator.

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HumanSystemRank {
    pub system: String,
    /// Mean rank over instances and annotators (1 = best).
    pub average_rank: f64,
    /// Number of (instance, annotator) ranks averaged.
    pub n: usize,
}

/// Agreement of the evaluator with human rankings, and among the humans.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HumanAgreement {
    /// Systems the humans ranked, best average rank first.
    pub systems: Vec<HumanSystemRank>,
    /// Kendall tau-b between evaluator scores and negated average human ranks, over the
    /// systems both ranked (positive = agreement).
    pub kendall_tau_b: Stat<Kendall>,
    /// Friedman test over the human ranks; blocks = (instance, annotator) that ranked every
    /// system in `systems`.
    pub friedman: Stat<Friedman>,
    pub friedman_blocks: usize,
    /// (instance, annotator) blocks left out because they missed a system.
    pub friedman_incomplete_blocks: usize,
    /// Krippendorff's alpha (ordinal) between annotators; units = (instance, system).
    pub krippendorff_alpha_ordinal: Stat<f64>,
    /// Human ranking rows for instances this task does not evaluate (e.g. dropped
    /// not_enough_evidence or incomplete instances).
    pub rows_excluded: usize,
}

/// Agreement of the annotators among themselves, and with an evaluator's system scores
/// when given (`(systems, scores)`; without them Kendall's tau is undefined). Rows of
/// instances outside `all_ids` are ignored; rows of instances in `all_ids` but not in
/// `evaluated` are counted as excluded. `None` when no row is left.
pub fn human_agreement(
    rankings: &HumanRankings,
    all_ids: &HashSet<&str>,
    evaluated: &HashSet<&str>,
    evaluator: Option<(&[String], &[f64])>,
) -> Option<HumanAgreement> {
    let rows: Vec<_> = rankings.rows.iter().filter(|r| all_ids.contains(r.instance.as_str())).collect();
    if rows.is_empty() {
        return None;
    }
    let (rows, excluded): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| evaluated.contains(r.instance.as_str()));

    // Systems the humans ranked here, in the rankings file's order.
    let ranked: HashSet<&str> = rows.iter().map(|r| r.system.as_str()).collect();
    let human_systems: Vec<&str> = rankings.systems.iter().map(String::as_str).filter(|s| ranked.contains(s)).collect();
    let position: HashMap<&str, usize> = human_systems.iter().enumerate().map(|(i, s)| (*s, i)).collect();

    let mut sums = vec![0.0; human_systems.len()];
    let mut counts = vec![0usize; human_systems.len()];
    // (instance, annotator) -> ranks per system; the order of first appearance is kept.
    let mut blocks: Vec<Vec<Option<f64>>> = Vec::new();
    let mut block_of: HashMap<(&str, &str), usize> = HashMap::new();
    for r in &rows {
        let s = position[r.system.as_str()];
        sums[s] += r.rank;
        counts[s] += 1;
        let b = *block_of.entry((r.instance.as_str(), r.annotator.as_str())).or_insert_with(|| {
            blocks.push(vec![None; human_systems.len()]);
            blocks.len() - 1
        });
        blocks[b][s] = Some(r.rank);
    }
    let averages: Vec<f64> = sums.iter().zip(&counts).map(|(s, &c)| s / c as f64).collect();

    // Kendall over systems that both the evaluator and the humans ranked.
    let kendall_tau_b = match evaluator {
        Some((systems, scores)) => {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            for (s, system) in human_systems.iter().enumerate() {
                if let Some(e) = systems.iter().position(|t| t == system) {
                    x.push(scores[e]);
                    y.push(-averages[s]);
                }
            }
            tau_b(&x, &y)
        }
        None => Stat::undefined("no evaluator scores to compare with"),
    };

    let complete: Vec<Vec<f64>> = blocks
        .iter()
        .filter(|b| b.iter().all(Option::is_some))
        .map(|b| b.iter().map(|v| v.unwrap()).collect())
        .collect();
    let friedman_incomplete_blocks = blocks.len() - complete.len();
    let friedman_blocks = complete.len();
    let friedman = friedman_named(&complete, &human_systems);

    // Krippendorff: coders = annotators, units = (instance, system).
    let annotators: Vec<&str> = {
        let present: HashSet<&str> = rows.iter().map(|r| r.annotator.as_str()).collect();
        rankings.annotators.iter().map(String::as_str).filter(|a| present.contains(a)).collect()
    };
    let coder: HashMap<&str, usize> = annotators.iter().enumerate().map(|(i, a)| (*a, i)).collect();
    let mut unit_of: HashMap<(&str, &str), usize> = HashMap::new();
    for r in &rows {
        let next = unit_of.len();
        unit_of.entry((r.instance.as_str(), r.system.as_str())).or_insert(next);
    }
    let mut reliability = vec![vec![None; unit_of.len()]; annotators.len()];
    for r in &rows {
        let u = unit_of[&(r.instance.as_str(), r.system.as_str())];
        reliability[coder[r.annotator.as_str()]][u] = Some(r.rank);
    }
    let krippendorff_alpha_ordinal = alpha(&reliability, Level::Ordinal);

    let mut systems: Vec<HumanSystemRank> = human_systems
        .iter()
        .enumerate()
        .map(|(s, name)| HumanSystemRank { system: name.to_string(), average_rank: averages[s], n: counts[s] })
        .collect();
    systems.sort_by(|a, b| a.average_rank.total_cmp(&b.average_rank));
    Some(HumanAgreement {
        systems,
        kendall_tau_b,
        friedman,
        friedman_blocks,
        friedman_incomplete_blocks,
        krippendorff_alpha_ordinal,
        rows_excluded: excluded.len(),
    })
}
