//! Each report as flat tables, one function per report (a job's own report's tables live
//! in its file: `evaluate`, `grade`, `statements`),
//! used for printing, `--csv` and the page's CSV export, so the three always agree. Numbers
//! keep 4 decimals (p-values 4 significant digits); the JSON report keeps full precision.

use crate::eval::controls::ControlsReport;
use crate::eval::metrics::{Metric, MetricsReport};
use crate::eval::nrp::{NrpReport, Unscored};
use crate::eval::proxy::{HumanAgreement, ProxyReport};
use crate::eval::rubric::RubricReport;
use crate::eval::rubric_agreement::{PairAgreement, RubricAgreementReport};
use crate::report::{fmt_num, fmt_p_value, fmt_stat, PValueDigits, Table};
use crate::stats::{Interval, Stat};

const D: usize = 4;

/// A table of `items`, one row each: the fields `keys` of the item as its JSON has them
/// (text as it is, whole numbers in digits), under `headers`.
pub fn table_of<T: serde::Serialize>(name: &str, title: &str, headers: &[&str], keys: &[&str], items: &[T]) -> Table {
    let mut table = Table::new(name, title, headers);
    for item in items {
        let value = serde_json::to_value(item).unwrap_or_default();
        let cell = |key: &&str| match &value[*key] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => String::new(),
            other => other.to_string(),
        };
        table.push(keys.iter().map(cell).collect());
    }
    table
}

fn interval_cells(i: &Stat<Interval>) -> [String; 2] {
    match i {
        Stat::Defined(iv) => [fmt_num(iv.lo, D), fmt_num(iv.hi, D)],
        Stat::Undefined(r) => [format!("undefined ({r})"), String::new()],
    }
}

fn p_value(p: f64) -> String {
    fmt_p_value(p, PValueDigits::Table)
}

pub fn proxy(report: &ProxyReport) -> Vec<Table> {
    let mut tables = Vec::new();
    for t in &report.tasks {
        let task = t.task.name();
        let metric = t.metric.name();
        let level = (report.confidence * 100.0).round();
        let lo = format!("{level}% lo");
        let hi = format!("{level}% hi");
        let has_binary = t.systems.iter().any(|s| s.binary_f1_entailment.is_some());
        let mut headers = vec!["rank", "system", "kind", metric, lo.as_str(), hi.as_str(), "mean p(correct)", "n"];
        if has_binary {
            headers.push("binary F1 (entailment)");
        }
        let mut ranking = Table::new(
            &format!("ranking_{task}"),
            &format!("Ranking over scoring — {task} ({metric}, ties share the average rank)"),
            &headers,
        );
        for s in &t.systems {
            let [l, h] = interval_cells(&s.interval);
            let mut row = vec![
                fmt_num(s.rank, 1),
                s.system.clone(),
                if s.is_control { "control".into() } else { "primary".into() },
                fmt_stat(&s.score, D),
                l,
                h,
                fmt_stat(&s.mean_p_correct, D),
                s.n.to_string(),
            ];
            if has_binary {
                row.push(s.binary_f1_entailment.as_ref().map(|b| fmt_stat(b, D)).unwrap_or_default());
            }
            ranking.push(row);
        }
        tables.push(ranking);

        let mut adjacent = Table::new(
            &format!("comparisons_{task}"),
            &format!("Adjacent systems — {task}: bootstrap probability that the higher-ranked one scores higher (paired resamples)"),
            &["higher", "lower", "P(higher beats lower)"],
        );
        for a in &t.adjacent {
            adjacent.push(vec![a.upper.clone(), a.lower.clone(), fmt_stat(&a.p_upper_beats_lower, D)]);
        }
        tables.push(adjacent);

        let mut robust = Table::new(
            &format!("robustness_{task}"),
            &format!("Control cases — {task}: every control must rank below every primary system"),
            &["verdict", "control", "control score", "outranks or ties primary", "primary score"],
        );
        let verdict = match &t.robustness.robust {
            Stat::Defined(true) => "robust".to_string(),
            Stat::Defined(false) => "NOT robust".to_string(),
            Stat::Undefined(r) => format!("undefined ({r})"),
        };
        if t.robustness.violations.is_empty() {
            robust.push(vec![verdict.clone(), String::new(), String::new(), String::new(), String::new()]);
        }
        for v in &t.robustness.violations {
            robust.push(vec![
                verdict.clone(),
                v.control.clone(),
                fmt_num(v.control_score, D),
                v.primary.clone(),
                fmt_num(v.primary_score, D),
            ]);
        }
        tables.push(robust);

        if let Some(h) = &t.human {
            tables.extend(human(task, h));
        }
    }
    tables
}

/// The humans' average ranks and the agreement statistics; `scope` names the task (or
/// "all") in table names and titles.
pub fn human(scope: &str, h: &HumanAgreement) -> Vec<Table> {
    let mut ranks = Table::new(
        &format!("human_ranks_{scope}"),
        &format!("Human rankings — {scope}: average rank per system (1 = best)"),
        &["system", "average human rank", "n"],
    );
    for s in &h.systems {
        ranks.push(vec![s.system.clone(), fmt_num(s.average_rank, D), s.n.to_string()]);
    }
    let mut agree = Table::new(
        &format!("human_agreement_{scope}"),
        &format!("Agreement with humans — {scope}"),
        &["statistic", "value", "p-value", "detail"],
    );
    let kendall = "Kendall tau-b (evaluator vs. average human rank)";
    match &h.kendall_tau_b {
        Stat::Defined(k) => {
            agree.push(vec![kendall.into(), fmt_num(k.tau, D), p_value(k.p_value), format!("n = {} systems", k.n)])
        }
        Stat::Undefined(r) => {
            agree.push(vec![kendall.into(), format!("undefined ({r})"), String::new(), String::new()])
        }
    }
    let friedman = "Friedman chi-square over human ranks";
    match &h.friedman {
        Stat::Defined(f) => agree.push(vec![
            friedman.into(),
            fmt_num(f.statistic, D),
            p_value(f.p_value),
            format!(
                "df = {}, {} complete blocks, {} incomplete excluded",
                f.df, h.friedman_blocks, h.friedman_incomplete_blocks
            ),
        ]),
        Stat::Undefined(r) => {
            agree.push(vec![friedman.into(), format!("undefined ({r})"), String::new(), String::new()])
        }
    }
    agree.push(vec![
        "Krippendorff's alpha (ordinal) between annotators".into(),
        fmt_stat(&h.krippendorff_alpha_ordinal, D),
        String::new(),
        String::new(),
    ]);
    vec![ranks, agree]
}

pub fn controls(report: &ControlsReport) -> Vec<Table> {
    let mut t = Table::new("controls", "Control cases added", &["instance", "control", "detail"]);
    for (instance, donor) in &report.derangement {
        t.push(vec![instance.clone(), "noise".into(), format!("argument of instance {donor}")]);
    }
    for r in &report.retrievals {
        let passages: Vec<String> =
            r.passages.iter().map(|p| format!("{}#{} ({})", p.docno, p.chunk, fmt_num(p.score, 3))).collect();
        t.push(vec![
            r.instance.clone(),
            "ir_passages".into(),
            format!("documents {}; passages {}", r.documents.join(" "), passages.join(" ")),
        ]);
    }
    let mut summary = Table::new("controls_summary", "Control cases", &["control", "system name"]);
    for c in &report.added {
        summary.push(vec![format!("{c:?}"), c.system_name().into()]);
    }
    vec![summary, t]
}

pub fn nrp(report: &NrpReport) -> Vec<Table> {
    let mut tables = Vec::new();
    let mut validation = Table::new(
        "nrp_rankers",
        "Ranker validation: mean nDCG@10 per quality dimension (the chosen ranker is marked)",
        &[
            "dimension",
            "ranker",
            "mean nDCG@10",
            "queries",
            "queries undefined",
            "unscored judged docs",
            "chosen",
            "weight",
        ],
    );
    for d in &report.dimensions {
        for v in &d.validation {
            let chosen = if v.ranker == d.ranker {
                if d.forced {
                    "forced"
                } else {
                    "best"
                }
            } else {
                ""
            };
            validation.push(vec![
                d.dimension.clone(),
                v.ranker.clone(),
                fmt_stat(&v.mean_ndcg_at_10, D),
                v.queries.to_string(),
                v.queries_undefined.to_string(),
                v.unscored_judged_documents.to_string(),
                chosen.into(),
                fmt_num(d.weight, D),
            ]);
        }
    }
    tables.push(validation);

    let mut headers: Vec<String> =
        ["system", "prompt", "mean NRP", "lo", "hi", "queries", "answers"].iter().map(|s| s.to_string()).collect();
    headers.extend(report.dimensions.iter().map(|d| format!("NRP {}", d.dimension)));
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut groups =
        Table::new("nrp_models", "Mean NRP per model and prompt (weighted over dimensions; best first)", &header_refs);
    for g in &report.groups {
        let [l, h] = interval_cells(&g.interval);
        let mut row = vec![
            g.system.clone(),
            g.prompt.clone(),
            fmt_stat(&g.mean, D),
            l,
            h,
            g.queries.to_string(),
            g.answers.to_string(),
        ];
        row.extend(g.per_dimension_mean.iter().map(|m| fmt_stat(m, D)));
        groups.push(row);
    }
    tables.push(groups);

    let mut headers: Vec<String> = ["qid", "system", "prompt", "sample", "NRP"].iter().map(|s| s.to_string()).collect();
    headers.extend(report.dimensions.iter().map(|d| format!("NRP {}", d.dimension)));
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut answers = Table::new("nrp_answers", "NRP per answer", &header_refs);
    for a in &report.answers {
        let mut row = vec![
            a.key.qid.clone(),
            a.key.system.clone(),
            a.key.prompt.clone(),
            a.key.sample.to_string(),
            fmt_stat(&a.combined, D),
        ];
        row.extend(a.per_dimension.iter().map(|m| fmt_stat(m, D)));
        answers.push(row);
    }
    tables.push(answers);

    let mut ties = Table::new(
        "nrp_ties",
        "Ties between answers and judged documents",
        &["dimension", "answers with ties", "tied pairs", "answers undefined"],
    );
    for d in &report.dimensions {
        ties.push(vec![
            d.dimension.clone(),
            d.answers_with_ties.to_string(),
            d.tied_pairs.to_string(),
            d.undefined_answers.to_string(),
        ]);
    }
    tables.push(ties);

    let treatment = match report.unscored {
        Unscored::RankBelow => "ranked below every scored item",
        Unscored::Drop => "dropped from D_q and nDCG@10",
    };
    let mut unscored = Table::new(
        "nrp_unscored",
        "Judged documents the chosen ranker did not score, and what was done with them",
        &["dimension", "ranker", "unscored judged docs", "queries with any", "treatment"],
    );
    for d in &report.dimensions {
        unscored.push(vec![
            d.dimension.clone(),
            d.ranker.clone(),
            d.unscored_documents.to_string(),
            d.unscored_queries.to_string(),
            treatment.into(),
        ]);
    }
    tables.push(unscored);

    if !report.expert_agreement.is_empty() {
        let mut agree = Table::new(
            "nrp_expert_agreement",
            "Expert agreement per ranker: mean Kendall tau-b per query between the expert's and the ranker's ranking",
            &["ranker", "mean tau-b", "lo", "hi", "queries undefined", "unscored items", "chosen for"],
        );
        for e in &report.expert_agreement {
            let [l, h] = interval_cells(&e.interval);
            agree.push(vec![
                e.ranker.clone(),
                fmt_stat(&e.mean_tau, D),
                l,
                h,
                e.queries_undefined.to_string(),
                e.unscored_items.to_string(),
                e.chosen_for.join(" "),
            ]);
        }
        tables.push(agree);
    }
    if !report.agreement_comparisons.is_empty() {
        let mut pairs = Table::new(
            "nrp_agreement_pairs",
            "Which ranker agrees better with the expert: paired bootstrap over queries",
            &["ranker", "other", "P(ranker agrees better)"],
        );
        for c in &report.agreement_comparisons {
            pairs.push(vec![c.ranker.clone(), c.other.clone(), fmt_stat(&c.probability_better, D)]);
        }
        tables.push(pairs);
    }
    tables
}

/// The report as tables: per-candidate scores, per-system means, agreement per batch
/// and averaged over batches (what the CLI prints and `--csv` writes).
pub fn metrics(report: &MetricsReport) -> Vec<Table> {
    let mut candidates = {
        let mut headers = vec!["id", "system", "batch", "line"];
        headers.extend(Metric::ALL.iter().map(|m| m.name()));
        headers.extend(report.extra_scores.iter().map(|e| e.name.as_str()));
        let human: Vec<String> = report.dimensions.iter().map(|d| format!("human:{d}")).collect();
        headers.extend(human.iter().map(String::as_str));
        Table::new("metrics_candidates", "Scores per candidate (ROUGE: F against the best reference)", &headers)
    };
    for (i, c) in report.candidates.iter().enumerate() {
        let mut row = vec![c.id.clone(), c.system.clone(), c.batch.clone(), c.line.to_string()];
        row.extend(Metric::ALL.iter().map(|&m| match m {
            Metric::Repscore => fmt_stat(&c.repscore, 4),
            _ => fmt_num(c.metric(m).expect("defined"), 4),
        }));
        row.extend(
            report.extra_scores.iter().map(|e| e.values[i].map_or_else(|| "no value".into(), |v| fmt_num(v, 4))),
        );
        row.extend(report.dimensions.iter().map(|d| c.human.get(d).map_or(String::new(), |v| v.to_string())));
        candidates.push(row);
    }

    let mut tables_bertscore = Vec::new();
    if let Some(b) = &report.bertscore {
        let title = format!(
            "BERTScore ({}, layer {}, {}{})",
            b.model,
            b.layer,
            if b.idf { "idf-weighted" } else { "no idf" },
            if b.baseline.is_some() { ", baseline-rescaled" } else { "" }
        );
        let mut t = Table::new("metrics_bertscore", &title, &["id", "system", "line", "precision", "recall", "F1"]);
        for (c, p) in report.candidates.iter().zip(&b.candidates) {
            t.push(vec![
                c.id.clone(),
                c.system.clone(),
                c.line.to_string(),
                fmt_num(p.precision, 4),
                fmt_num(p.recall, 4),
                fmt_num(p.f1, 4),
            ]);
        }
        let mut m = Table::new(
            "metrics_bertscore_systems",
            "BERTScore: mean per system",
            &["system", "precision", "recall", "F1"],
        );
        for (sys, p, r, f) in &b.system_means {
            m.push(vec![sys.clone(), fmt_num(*p, 4), fmt_num(*r, 4), fmt_num(*f, 4)]);
        }
        tables_bertscore.push(t);
        tables_bertscore.push(m);
    }
    let mut systems = Table::new(
        "metrics_systems",
        "Mean per system with bootstrap interval",
        &["system", "score", "n", "mean", "low", "high"],
    );
    for s in &report.system_means {
        for m in &s.scores {
            let (low, high) = match &m.interval {
                Stat::Defined(i) => (fmt_num(i.lo, 4), fmt_num(i.hi, 4)),
                Stat::Undefined(r) => (format!("undefined ({r})"), String::new()),
            };
            systems.push(vec![s.system.clone(), m.score.clone(), m.n.to_string(), fmt_stat(&m.mean, 4), low, high]);
        }
    }

    let mut per_batch = Table::new(
        "metrics_agreement",
        "Agreement with human scores per batch",
        &[
            "batch",
            "metric",
            "dimension",
            "n",
            "spearman",
            "p",
            "quadratic_kappa",
            "pairs_compared",
            "human_ties",
            "metric_ties",
            "pairwise_accuracy",
            "pairwise_kappa",
        ],
    );
    for a in &report.agreement {
        let (rho, p) = match &a.spearman {
            Stat::Defined(c) => (fmt_num(c.r, 4), fmt_num(c.p_value, 4)),
            Stat::Undefined(r) => (format!("undefined ({r})"), String::new()),
        };
        per_batch.push(vec![
            a.batch.clone(),
            a.metric.clone(),
            a.dimension.clone(),
            a.n.to_string(),
            rho,
            p,
            a.quadratic_kappa.as_ref().map_or("not binned".into(), |k| fmt_stat(k, 4)),
            a.pairwise.compared.to_string(),
            a.pairwise.human_ties.to_string(),
            a.pairwise.metric_ties.to_string(),
            fmt_stat(&a.pairwise.accuracy, 4),
            fmt_stat(&a.pairwise.kappa, 4),
        ]);
    }

    let mut means = Table::new(
        "metrics_agreement_mean",
        "Agreement averaged over batches (batches where defined)",
        &["metric", "dimension", "spearman", "quadratic_kappa", "pairwise_accuracy", "pairwise_kappa", "batches"],
    );
    for m in &report.agreement_means {
        means.push(vec![
            m.metric.clone(),
            m.dimension.clone(),
            fmt_stat(&m.spearman.mean, 4),
            m.quadratic_kappa.as_ref().map_or("not binned".into(), |k| fmt_stat(&k.mean, 4)),
            fmt_stat(&m.pairwise_accuracy.mean, 4),
            fmt_stat(&m.pairwise_kappa.mean, 4),
            format!("{} of {}", m.spearman.batches, report.batches.len()),
        ]);
    }
    let mut out = vec![candidates, systems, per_batch, means];
    out.extend(tables_bertscore);
    if !report.comparisons.is_empty() {
        let mut t = Table::new(
            "metrics_comparisons",
            "Each added score against the best token-based metric (mean Spearman over batches; bootstrap interval of the difference)",
            &["score", "dimension", "spearman", "best_token_metric", "its_spearman", "difference", "low", "high"],
        );
        for c in &report.comparisons {
            let (low, high) = match &c.interval {
                Stat::Defined(i) => (fmt_num(i.lo, 4), fmt_num(i.hi, 4)),
                Stat::Undefined(r) => (format!("undefined ({r})"), String::new()),
            };
            t.push(vec![
                c.score.clone(),
                c.dimension.clone(),
                fmt_stat(&c.score_spearman, 4),
                c.versus.clone(),
                fmt_stat(&c.versus_spearman, 4),
                fmt_stat(&c.difference, 4),
                low,
                high,
            ]);
        }
        out.push(t);
    }
    if let Some(c) = report.combination.as_ref().filter(|c| !c.fitted.is_empty()) {
        let mut headers = vec!["dimension", "rows"];
        headers.extend(c.scorers.iter().map(String::as_str));
        let title = format!("Combination weights fitted on {}", c.fit_file.as_deref().unwrap_or("the fit file"));
        let mut t = Table::new("metrics_combination_weights", &title, &headers);
        for f in &c.fitted {
            let mut row = vec![f.dimension.clone(), f.rows.to_string()];
            row.extend(f.weights.iter().map(|w| fmt_num(*w, 4)));
            t.push(row);
        }
        out.push(t);
    }
    out
}

/// Per-response and per-system tables (CLI printing, `--csv`, the page's export).
pub fn rubric(report: &RubricReport) -> Vec<Table> {
    rubric_scores(&report.responses, &report.system_scores)
}

/// [`rubric`]'s tables from the scores alone (a model grader's report has them too).
pub fn rubric_scores(
    responses: &[crate::eval::rubric::ResponseScore],
    system_scores: &[crate::eval::rubric::SystemScore],
) -> Vec<Table> {
    let mut per_response = Table::new(
        "rubric_responses",
        "Score per response (unclipped)",
        &["id", "system", "prompt_id", "line", "achieved", "possible", "score"],
    );
    for r in responses {
        per_response.push(vec![
            r.id.clone(),
            r.system.clone(),
            r.prompt_id.clone().unwrap_or_default(),
            r.line.to_string(),
            fmt_num(r.overall.achieved, 2),
            fmt_num(r.overall.possible, 2),
            fmt_stat(&r.overall.score, 4),
        ]);
    }
    // A model grader's report has the expected means (met drawn from P(met)) too.
    let graded_by_model = system_scores.iter().flat_map(|s| &s.scores).any(|m| m.expected_mean.is_some());
    let mut headers = vec!["system", "score", "n", "mean", "unclipped_mean"];
    if graded_by_model {
        headers.push("expected_mean");
    }
    headers.extend(["low", "high"]);
    let mut systems = Table::new(
        "rubric_systems",
        if graded_by_model {
            "Mean per system, clipped to [0, 1] (met = P(met) >= 0.5), the expected mean, and the bootstrap interval with met drawn from P(met)"
        } else {
            "Mean per system, clipped to [0, 1], with bootstrap interval"
        },
        &headers,
    );
    for s in system_scores {
        for m in &s.scores {
            let (low, high) = match &m.interval {
                Stat::Defined(i) => (fmt_num(i.lo, 4), fmt_num(i.hi, 4)),
                Stat::Undefined(r) => (format!("undefined ({r})"), String::new()),
            };
            let mut row = vec![
                s.system.clone(),
                m.score.clone(),
                m.n.to_string(),
                fmt_stat(&m.mean, 4),
                fmt_stat(&m.unclipped_mean, 4),
            ];
            if graded_by_model {
                row.push(m.expected_mean.as_ref().map(|e| fmt_stat(e, 4)).unwrap_or_default());
            }
            row.extend([low, high]);
            systems.push(row);
        }
    }
    vec![per_response, systems]
}

/// The grader beside the people, per group; and each person against the others, per group.
pub fn rubric_agreement(report: &RubricAgreementReport) -> Vec<Table> {
    let mut groups = Table::new(
        "rubric_agreement",
        "Agreement with human judgements per group: the grader against every person, each person against the others (mean)",
        &[
            "group",
            "items",
            "grader pairs",
            "grader macro-F1",
            "grader kappa",
            "people",
            "human mean macro-F1",
            "human mean kappa",
        ],
    );
    let mut people = Table::new(
        "rubric_agreement_humans",
        "Each person against the others, per group",
        &["group", "person", "pairs", "F1 met", "F1 not met", "macro-F1", "kappa"],
    );
    let cells = |a: &PairAgreement| {
        [
            a.pairs.to_string(),
            fmt_stat(&a.f1_met, D),
            fmt_stat(&a.f1_not_met, D),
            fmt_stat(&a.macro_f1, D),
            fmt_stat(&a.kappa, D),
        ]
    };
    for g in &report.groups {
        let (pairs, f1, kappa) = match &g.grader {
            Some(a) => (a.pairs.to_string(), fmt_stat(&a.macro_f1, D), fmt_stat(&a.kappa, D)),
            None => ("-".into(), "- (no grader file)".into(), "-".into()),
        };
        groups.push(vec![
            g.group.clone(),
            g.items.to_string(),
            pairs,
            f1,
            kappa,
            g.humans.len().to_string(),
            fmt_stat(&g.human_mean_macro_f1, D),
            fmt_stat(&g.human_mean_kappa, D),
        ]);
        for h in &g.humans {
            let mut row = vec![g.group.clone(), h.grader.clone()];
            row.extend(cells(&h.agreement));
            people.push(row);
        }
    }
    vec![groups, people]
}
