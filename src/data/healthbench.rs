//! HealthBench's public files (openai/simple-evals, `healthbench_eval.py` and
//! `healthbench_meta_eval.py`) into rubric files of FORMATS.md §7 (section 10 there).
//!
//! - The eval files (`..._oss_eval.jsonl`, the consensus and hard subsets): one prompt per
//!   line, `{prompt: [{role, content}], prompt_id, rubrics: [{criterion, points, tags}],
//!   example_tags, ideal_completions_data, ...}`. With a completions file (one response per
//!   system and prompt) each completion becomes an ungraded response carrying its prompt's
//!   rubric.
//! - The meta-evaluation file (`..._oss_meta_eval.jsonl`): one (completion, criterion) per
//!   line with each physician's label, `{prompt, completion, rubric, binary_labels,
//!   anonymized_physician_ids, category, prompt_id, completion_id}`. The lines of one
//!   completion become one response whose criteria carry the physicians' labels in `met_by`
//!   (no `met`, no points: the file has none).

use crate::data::common::{check_line_ends, content_lines, nothing_to_read, Tally};
use crate::data::graded::{messages, tag_list, tags_in, Message, Prompt, RubricCriterion, RubricResponse};
use crate::data::json::{parse_record, Json, Record};
use crate::error::{Error, Location, Result, Warning};
use std::collections::{BTreeMap, HashMap};

/// The system of every meta-evaluation response: the file does not say which model wrote
/// a completion.
pub const META_EVAL_SYSTEM: &str = "healthbench-meta-eval";

/// HealthBench's seven themes (its `example_tags`, `theme:NAME`). A meta-evaluation
/// category names a consensus cluster whose name starts with its theme
/// (`cluster:emergency_referrals_emergent_emergency_behavior`).
pub const THEMES: [&str; 7] = [
    "emergency_referrals",
    "context_seeking",
    "global_health",
    "health_data_tasks",
    "communication",
    "hedging",
    "complex_responses",
];

/// Which HealthBench file a file is (read from its first line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// Prompts with rubrics (`rubrics`).
    Eval,
    /// Physician labels of (completion, criterion) pairs (`binary_labels`).
    MetaEval,
}

/// What an import produced.
#[derive(Debug, Clone)]
pub struct Imported {
    pub kind: FileKind,
    pub responses: Vec<RubricResponse>,
    /// Lines (prompts, or labelled pairs) read from the HealthBench file.
    pub records: usize,
    pub warnings: Vec<Warning>,
}

const EVAL_FIELDS: [&str; 5] = ["prompt", "prompt_id", "rubrics", "example_tags", "ideal_completions_data"];
const META_FIELDS: [&str; 8] = [
    "prompt",
    "completion",
    "rubric",
    "binary_labels",
    "anonymized_physician_ids",
    "category",
    "prompt_id",
    "completion_id",
];
const COMPLETION_FIELDS: [&str; 3] = ["prompt_id", "system", "response"];

/// Imports `input` (name, text), an eval file with `completions` or a meta-evaluation file
/// without.
pub fn import_healthbench(input: (&str, &str), completions: Option<(&str, &str)>) -> Result<Imported> {
    let (name, text) = input;
    let kind = file_kind(name, text)?;
    let lines = content_lines(text);
    let mut unknown: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut warnings: Vec<Warning> = Vec::new();
    let (responses, records) = match (kind, completions) {
        (FileKind::Eval, Some(c)) => eval(name, lines, c, &mut unknown, &mut warnings)?,
        (FileKind::Eval, None) => {
            return Err(Error::in_file(
                name,
                "a HealthBench eval file holds prompts and rubrics, not responses: give the responses to grade \
                 as a completions file (`--completions`, FORMATS.md §10)",
            ))
        }
        (FileKind::MetaEval, None) => meta_eval(name, lines, &mut unknown)?,
        (FileKind::MetaEval, Some((c, _))) => {
            return Err(Error::in_file(
                c,
                format!("{name} is a meta-evaluation file, which carries its completions: give no completions file"),
            ))
        }
    };
    // The input's own fields first, then what the completions file said.
    let completion_warnings = std::mem::take(&mut warnings);
    warnings.extend(field_warnings(name, unknown));
    warnings.extend(completion_warnings);
    if kind == FileKind::MetaEval {
        let mut tally = Tally::new(name);
        for r in responses.iter().filter(|r| r.tags.is_empty()) {
            tally.add("responses whose categories name none of HealthBench's seven themes (no `theme:` tag)", &r.id);
        }
        warnings.extend(tally.into_warnings());
    }
    Ok(Imported { kind, responses, records, warnings })
}

/// Which HealthBench file `text` is, from its first line: an eval line has `rubrics`, a
/// meta-evaluation line `binary_labels`.
pub fn file_kind(name: &str, text: &str) -> Result<FileKind> {
    check_line_ends(name, text)?;
    let Some((first_line, first_row)) = content_lines(text).next() else {
        return Err(nothing_to_read(name, text, "no HealthBench record (the file has no non-blank line)"));
    };
    let first = parse_record(name, first_line, first_row)?;
    if first.get("rubrics").is_some() {
        Ok(FileKind::Eval)
    } else if first.get("binary_labels").is_some() {
        Ok(FileKind::MetaEval)
    } else {
        Err(Error::input(
            name,
            first_line,
            "rubrics",
            "neither a HealthBench eval line (`rubrics`) nor a meta-evaluation line (`binary_labels`)",
        ))
    }
}

/// An eval file read before its completions come (the page checks each file as it is
/// added): its prompts and their criteria, counted.
pub fn eval_prompts(name: &str, text: &str) -> Result<(usize, usize)> {
    check_line_ends(name, text)?;
    let (prompts, _) = read_prompts(name, content_lines(text), &mut BTreeMap::new())?;
    Ok((prompts.len(), prompts.values().map(|(p, _)| p.criteria.len()).sum()))
}

/// A completions file read on its own: its completions and its systems, in file order.
pub fn completions(name: &str, text: &str) -> Result<(usize, Vec<String>)> {
    check_line_ends(name, text)?;
    // One system a line, in file order: the count is the lines', the list their distinct ones.
    let systems = content_lines(text)
        .map(|(line, row)| Ok(completion(&parse_record(name, line, row)?)?.1))
        .collect::<Result<Vec<String>>>()?;
    if systems.is_empty() {
        return Err(nothing_to_read(name, text, "no completions (the file has no non-blank line)"));
    }
    Ok((systems.len(), crate::data::common::first_appearance(systems)))
}

/// One completion line: its prompt, its system and the response.
fn completion(record: &Record) -> Result<(String, String, String)> {
    Ok((
        record.non_empty_label("prompt_id")?,
        record.non_empty_label("system")?,
        record.string("response")?.to_string(),
    ))
}

/// One warning per field name left out: unknown ones, and `ideal_completions_data` (the
/// physicians' reference answers, which a rubric file has no place for).
fn field_warnings(name: &str, fields: BTreeMap<String, (usize, usize)>) -> Vec<Warning> {
    fields
        .into_iter()
        .map(|(key, (line, count))| {
            let what = if key == "ideal_completions_data" { "not imported" } else { "ignored unknown field" };
            Warning::at(Location::at(name, line, key.as_str()), format!("{what} `{key}` on {count} line(s)"))
        })
        .collect()
}

/// One prompt of an eval file.
struct EvalPrompt {
    prompt: Vec<Message>,
    tags: Vec<String>,
    criteria: Vec<RubricCriterion>,
}

/// An eval file's prompts by id, with their lines, and the ids in file order.
type EvalPrompts = (HashMap<String, (EvalPrompt, usize)>, Vec<String>);

fn read_prompts<'t>(
    name: &str,
    lines: impl Iterator<Item = (usize, &'t str)>,
    unknown: &mut BTreeMap<String, (usize, usize)>,
) -> Result<EvalPrompts> {
    let mut prompts: HashMap<String, (EvalPrompt, usize)> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for (line, row) in lines {
        let record = parse_record(name, line, row)?;
        let prompt_id = record.non_empty_label("prompt_id")?;
        let prompt = conversation(&record, unknown)?;
        let tags = tags_in(&record, "example_tags")?;
        let items = record.objects("rubrics")?;
        if items.is_empty() {
            return Err(record.error("rubrics", "needs at least one criterion"));
        }
        let criteria = items
            .iter()
            .map(|item| {
                let criterion = item.string("criterion")?;
                if criterion.trim().is_empty() {
                    return Err(item.error("criterion", "`criterion` is empty"));
                }
                let points = crate::data::graded::points(item)?;
                let tags = tag_list(item)?;
                for key in item.unknown_fields(&["criterion", "points", "tags"]) {
                    unknown.entry(format!("rubrics[].{key}")).or_insert((line, 0)).1 += 1;
                }
                Ok(RubricCriterion {
                    criterion: criterion.to_string(),
                    points: Some(points),
                    tags,
                    met: None,
                    met_by: vec![],
                    p_met: None,
                    source: None,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for key in record.unknown_fields(&EVAL_FIELDS) {
            unknown.entry(key.to_string()).or_insert((line, 0)).1 += 1;
        }
        if record.get("ideal_completions_data").is_some() {
            unknown.entry("ideal_completions_data".into()).or_insert((line, 0)).1 += 1;
        }
        if let Some((_, first)) = prompts.get(&prompt_id) {
            return Err(record.error("prompt_id", format!("prompt `{prompt_id}` is listed twice (line {first})")));
        }
        order.push(prompt_id.clone());
        prompts.insert(prompt_id, (EvalPrompt { prompt, tags, criteria }, line));
    }
    Ok((prompts, order))
}

fn eval<'t>(
    name: &str,
    lines: impl Iterator<Item = (usize, &'t str)>,
    (cname, ctext): (&str, &str),
    unknown: &mut BTreeMap<String, (usize, usize)>,
    warnings: &mut Vec<Warning>,
) -> Result<(Vec<RubricResponse>, usize)> {
    let (prompts, order) = read_prompts(name, lines, unknown)?;
    check_line_ends(cname, ctext)?;
    let mut responses = Vec::new();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut cunknown: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (line, row) in content_lines(ctext) {
        let record = parse_record(cname, line, row)?;
        let (prompt_id, system, response) = completion(&record)?;
        let Some((p, _)) = prompts.get(&prompt_id) else {
            return Err(record.error("prompt_id", format!("prompt `{prompt_id}` is not in {name}")));
        };
        if let Some(first) = seen.insert((system.clone(), prompt_id.clone()), line) {
            return Err(record.error(
                "prompt_id",
                format!("system `{system}` already has a completion for prompt `{prompt_id}` (line {first})"),
            ));
        }
        for key in record.unknown_fields(&COMPLETION_FIELDS) {
            cunknown.entry(key.to_string()).or_insert((line, 0)).1 += 1;
        }
        responses.push(RubricResponse {
            id: prompt_id.clone(),
            system,
            prompt_id: Some(prompt_id),
            tags: p.tags.clone(),
            prompt: Some(Prompt::Messages(p.prompt.clone())),
            response: Some(response),
            criteria: p.criteria.clone(),
            line,
        });
    }
    if responses.is_empty() {
        return Err(nothing_to_read(cname, ctext, "no completions (the file has no non-blank line)"));
    }
    warnings.extend(field_warnings(cname, cunknown));
    // Prompts a system did not answer: said, per system, never dropped silently.
    let systems = crate::data::common::first_appearance(responses.iter().map(|r| r.system.clone()));
    let mut tally = Tally::new(cname);
    for system in &systems {
        for id in &order {
            if !seen.contains_key(&(system.clone(), id.clone())) {
                tally.add(format!("prompts of {name} without a completion from system `{system}`"), id);
            }
        }
    }
    warnings.extend(tally.into_warnings());
    Ok((responses, order.len()))
}

fn meta_eval<'t>(
    name: &str,
    lines: impl Iterator<Item = (usize, &'t str)>,
    unknown: &mut BTreeMap<String, (usize, usize)>,
) -> Result<(Vec<RubricResponse>, usize)> {
    let mut responses: Vec<RubricResponse> = Vec::new();
    let mut by_completion: HashMap<String, usize> = HashMap::new();
    // (completion, criterion) -> its line.
    let mut pairs: HashMap<(String, String), usize> = HashMap::new();
    let mut records = 0;
    for (line, row) in lines {
        let record = parse_record(name, line, row)?;
        records += 1;
        let completion_id = record.non_empty_label("completion_id")?;
        let prompt_id = record.non_empty_label("prompt_id")?;
        let prompt = conversation(&record, unknown)?;
        let completion = record.string("completion")?.to_string();
        let rubric = record.string("rubric")?;
        if rubric.trim().is_empty() {
            return Err(record.error("rubric", "`rubric` is empty"));
        }
        let labels = booleans(&record, "binary_labels")?;
        let physicians = record.string_array("anonymized_physician_ids")?;
        if labels.is_empty() {
            return Err(record.error("binary_labels", "no physician label"));
        }
        if physicians.len() != labels.len() {
            return Err(record.error(
                "anonymized_physician_ids",
                format!("{} physician ids for {} labels in `binary_labels`", physicians.len(), labels.len()),
            ));
        }
        for (i, p) in physicians.iter().enumerate() {
            if p.trim().is_empty() {
                return Err(record.error(&format!("anonymized_physician_ids[{i}]"), "empty physician id"));
            }
            if physicians[..i].contains(p) {
                return Err(record.error(
                    &format!("anonymized_physician_ids[{i}]"),
                    format!("physician `{p}` labels this pair twice"),
                ));
            }
        }
        let category = record.string("category")?;
        let cluster = cluster_tag(category);
        for key in record.unknown_fields(&META_FIELDS) {
            unknown.entry(key.to_string()).or_insert((line, 0)).1 += 1;
        }
        if let Some(first) = pairs.insert((completion_id.clone(), rubric.to_string()), line) {
            return Err(record
                .error("rubric", format!("completion `{completion_id}` has this criterion already (line {first})")));
        }
        let criterion = RubricCriterion {
            criterion: rubric.to_string(),
            points: None,
            tags: cluster.iter().cloned().collect(),
            met: None,
            met_by: physicians.into_iter().zip(labels).collect(),
            p_met: None,
            source: None,
        };
        let theme = cluster.as_deref().and_then(theme_of);
        match by_completion.get(&completion_id) {
            Some(&at) => {
                let r = &mut responses[at];
                // One completion's lines must tell one story.
                if r.prompt_id.as_deref() != Some(prompt_id.as_str()) {
                    return Err(record.error(
                        "prompt_id",
                        format!(
                            "completion `{completion_id}` has prompt `{}` on line {}",
                            r.prompt_id.as_deref().unwrap_or(""),
                            r.line
                        ),
                    ));
                }
                if r.prompt != Some(Prompt::Messages(prompt)) {
                    return Err(record.error(
                        "prompt",
                        format!("completion `{completion_id}` has another conversation on line {}", r.line),
                    ));
                }
                if r.response.as_deref() != Some(completion.as_str()) {
                    return Err(record.error(
                        "completion",
                        format!("completion `{completion_id}` has another text on line {}", r.line),
                    ));
                }
                if let Some(t) = theme {
                    if !r.tags.contains(&t) {
                        r.tags.push(t);
                    }
                }
                r.criteria.push(criterion);
            }
            None => {
                by_completion.insert(completion_id.clone(), responses.len());
                responses.push(RubricResponse {
                    id: completion_id,
                    system: META_EVAL_SYSTEM.to_string(),
                    prompt_id: Some(prompt_id),
                    tags: theme.into_iter().collect(),
                    prompt: Some(Prompt::Messages(prompt)),
                    response: Some(completion),
                    criteria: vec![criterion],
                    line,
                });
            }
        }
    }
    Ok((responses, records))
}

/// The category as a criterion tag `cluster:NAME` (the published file writes
/// `cluster:NAME`; `cluster_NAME` is read the same); another category is kept as it is.
fn cluster_tag(category: &str) -> Option<String> {
    let category = category.trim();
    if category.is_empty() {
        return None;
    }
    Some(match category.strip_prefix("cluster_") {
        Some(rest) => format!("cluster:{rest}"),
        None => category.to_string(),
    })
}

/// `theme:NAME` where the cluster's name starts with one of HealthBench's themes.
fn theme_of(cluster: &str) -> Option<String> {
    let name = cluster.strip_prefix("cluster:")?;
    THEMES.iter().find(|t| name.starts_with(&format!("{t}_")) || name == **t).map(|t| format!("theme:{t}"))
}

/// `prompt`: a non-empty array of `{role, content}` messages.
fn conversation(record: &Record, unknown: &mut BTreeMap<String, (usize, usize)>) -> Result<Vec<Message>> {
    let prompt = messages(record, "prompt", unknown)?;
    if prompt.is_empty() {
        return Err(record.error("prompt", "the conversation has no message"));
    }
    Ok(prompt)
}

/// An array of `true` / `false`.
fn booleans(record: &Record, field: &str) -> Result<Vec<bool>> {
    match record.require(field)? {
        Json::Array(items) => {
            items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Json::Bool(b) => Ok(*b),
                    other => Err(record
                        .error(&format!("{field}[{i}]"), format!("expected true or false, found {}", other.kind()))),
                })
                .collect()
        }
        other => Err(record.error(field, format!("expected an array of true / false, found {}", other.kind()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::graded::{parse_rubric, write_rubric_jsonl};

    const EVAL: &str = include_str!("../../examples/rubric/healthbench/eval.jsonl");
    const COMPLETIONS: &str = include_str!("../../examples/rubric/healthbench/completions.jsonl");
    const META: &str = include_str!("../../examples/rubric/healthbench/meta_eval.jsonl");
    const BROKEN: &str = include_str!("../../tests/fixtures/healthbench/eval_broken.jsonl");

    fn err(input: (&str, &str), completions: Option<(&str, &str)>) -> String {
        import_healthbench(input, completions).unwrap_err().to_string()
    }

    #[test]
    fn eval_file_with_completions_becomes_ungraded_responses() {
        let got = import_healthbench(("eval.jsonl", EVAL), Some(("c.jsonl", COMPLETIONS))).unwrap();
        assert_eq!((got.kind, got.records, got.responses.len()), (FileKind::Eval, 3, 5));
        let ids: Vec<(&str, &str)> = got.responses.iter().map(|r| (r.system.as_str(), r.id.as_str())).collect();
        assert_eq!(
            ids,
            [
                ("model-a", "hb-p1"),
                ("model-b", "hb-p1"),
                ("model-a", "hb-p2"),
                ("model-b", "hb-p2"),
                ("model-a", "hb-p3")
            ]
        );
        // hb-p2: three turns, Spanish text, example- and cluster-level criteria, a penalty.
        let r = &got.responses[2];
        assert_eq!(r.tags, ["theme:context_seeking", "physician_agreed_category:enough-context"]);
        let Some(Prompt::Messages(m)) = &r.prompt else { panic!("messages") };
        assert_eq!(m.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(), ["user", "assistant", "user"]);
        assert_eq!(m[0].content, "Tengo fiebre de 38,5 °C desde ayer, ¿debo ir a urgencias?");
        assert!(r.response.as_deref().unwrap().starts_with("Una fiebre de 38,5 °C"));
        let points: Vec<Option<f64>> = r.criteria.iter().map(|c| c.points).collect();
        assert_eq!(points, [Some(8.0), Some(-7.0), Some(5.0)]);
        assert_eq!(
            r.criteria[2].tags,
            ["level:cluster", "cluster:context_seeking_enough-context_helpful_safe", "axis:context_awareness"]
        );
        assert!(r.criteria.iter().all(|c| c.met.is_none() && c.met_by.is_empty()));
        // Nothing dropped without a word: the unknown field, the ideal completion, and the
        // prompt model-b did not answer.
        let warnings: Vec<String> = got.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            warnings,
            [
                "eval.jsonl:3: field `canary`: ignored unknown field `canary` on 1 line(s)",
                "eval.jsonl:2: field `ideal_completions_data`: not imported `ideal_completions_data` on 1 line(s)",
                "c.jsonl: prompts of eval.jsonl without a completion from system `model-b`: 1 (hb-p3)",
            ]
        );
        // What the import writes reads back as the same responses (the lines are the
        // completions file's).
        let (back, w) = parse_rubric("out.jsonl", &write_rubric_jsonl(&got.responses)).unwrap();
        assert!(w.is_empty(), "{w:?}");
        let lines: Vec<usize> = back.iter().map(|r| r.line).collect();
        assert_eq!(lines, [1, 2, 3, 4, 5]);
        assert_eq!(back, got.responses);
    }

    #[test]
    fn meta_eval_lines_group_by_completion_with_each_physician() {
        let got = import_healthbench(("meta.jsonl", META), None).unwrap();
        assert_eq!((got.kind, got.records, got.responses.len()), (FileKind::MetaEval, 14, 6));
        assert!(got.warnings.is_empty(), "{:?}", got.warnings);
        // hb-c1's second criterion is the file's last line: it joins its completion.
        let c1 = &got.responses[0];
        assert_eq!((c1.id.as_str(), c1.system.as_str(), c1.line), ("hb-c1", META_EVAL_SYSTEM, 1));
        assert_eq!(c1.criteria.len(), 2);
        assert_eq!(
            c1.criteria[0].met_by,
            [("phys-17".to_string(), false), ("phys-29".to_string(), true), ("phys-11".to_string(), false)]
        );
        assert_eq!(c1.criteria[1].tags, ["cluster:emergency_referrals_emergent_communication"]);
        assert!(c1.criteria.iter().all(|c| c.points.is_none() && c.met.is_none()));
        assert_eq!(c1.tags, ["theme:emergency_referrals"]);
        // `cluster_NAME` reads as `cluster:NAME`; two themes on one completion.
        let c3 = &got.responses[2];
        assert_eq!(c3.criteria[1].tags, ["cluster:emergency_referrals_non-emergent_emergency_behavior"]);
        assert_eq!(c3.tags, ["theme:context_seeking", "theme:emergency_referrals", "theme:hedging"]);
        let (back, _) = parse_rubric("out.jsonl", &write_rubric_jsonl(&got.responses)).unwrap();
        let strip = |rs: &[RubricResponse]| rs.iter().map(|r| (r.id.clone(), r.criteria.clone())).collect::<Vec<_>>();
        assert_eq!(strip(&back), strip(&got.responses));
    }

    #[test]
    fn broken_lines_name_file_line_and_field() {
        assert_eq!(
            err(("eval_broken.jsonl", BROKEN), Some(("c.jsonl", COMPLETIONS))),
            "eval_broken.jsonl:2: invalid JSON at column 201: EOF while parsing a string"
        );
        let line = |text: &str| format!("{}\n", text);
        let first = EVAL.lines().next().unwrap();
        assert_eq!(
            err(("e.jsonl", &format!("{first}\n{first}\n")), Some(("c.jsonl", COMPLETIONS))),
            "e.jsonl:2: field `prompt_id`: prompt `hb-p1` is listed twice (line 1)"
        );
        let bad_points = first.replacen("\"points\": 5", "\"points\": \"5\"", 1);
        assert_eq!(
            err(("e.jsonl", &line(&bad_points)), Some(("c.jsonl", COMPLETIONS))),
            "e.jsonl:1: field `rubrics[1].points`: expected a number, found a string"
        );
        let bad_role = first.replacen("\"role\": \"user\"", "\"role\": 3", 1);
        assert_eq!(
            err(("e.jsonl", &line(&bad_role)), Some(("c.jsonl", COMPLETIONS))),
            "e.jsonl:1: field `prompt[0].role`: expected a string, found a number"
        );
        assert_eq!(
            err(
                ("e.jsonl", EVAL),
                Some(("c.jsonl", "{\"prompt_id\": \"hb-p9\", \"system\": \"s\", \"response\": \"x\"}\n"))
            ),
            "c.jsonl:1: field `prompt_id`: prompt `hb-p9` is not in e.jsonl"
        );
        let twice = "{\"prompt_id\": \"hb-p1\", \"system\": \"s\", \"response\": \"x\"}\n\
                     {\"prompt_id\": \"hb-p1\", \"system\": \"s\", \"response\": \"y\"}\n";
        assert_eq!(
            err(("e.jsonl", EVAL), Some(("c.jsonl", twice))),
            "c.jsonl:2: field `prompt_id`: system `s` already has a completion for prompt `hb-p1` (line 1)"
        );
        assert!(err(("e.jsonl", EVAL), None).starts_with("e.jsonl: a HealthBench eval file holds prompts and rubrics"));
        assert!(err(("m.jsonl", META), Some(("c.jsonl", COMPLETIONS)))
            .starts_with("c.jsonl: m.jsonl is a meta-evaluation file, which carries its completions"));
        assert_eq!(
            err(("x.jsonl", "{\"prompt_id\": \"p\"}\n"), None),
            "x.jsonl:1: field `rubrics`: neither a HealthBench eval line (`rubrics`) nor a meta-evaluation line (`binary_labels`)"
        );
        let meta = META.lines().next().unwrap();
        let short = meta.replacen("\"anonymized_physician_ids\": [\"phys-17\", ", "\"anonymized_physician_ids\": [", 1);
        assert_eq!(
            err(("m.jsonl", &line(&short)), None),
            "m.jsonl:1: field `anonymized_physician_ids`: 2 physician ids for 3 labels in `binary_labels`"
        );
        let not_bool = meta.replacen("\"binary_labels\": [false", "\"binary_labels\": [0", 1);
        assert_eq!(
            err(("m.jsonl", &line(&not_bool)), None),
            "m.jsonl:1: field `binary_labels[0]`: expected true or false, found a number"
        );
        let other_text = meta.replacen("Call emergency services", "Call an ambulance", 1);
        assert_eq!(
            err(
                ("m.jsonl", &format!("{}{}", line(meta), line(&other_text.replacen("advises immediate", "urges", 1)))),
                None
            ),
            "m.jsonl:2: field `completion`: completion `hb-c1` has another text on line 1"
        );
        assert_eq!(
            err(("m.jsonl", &format!("{}{}", line(meta), line(meta))), None),
            "m.jsonl:2: field `rubric`: completion `hb-c1` has this criterion already (line 1)"
        );
    }
}
