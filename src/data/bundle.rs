//! Argument bundles: JSONL, one proxy-task instance per line with the argument of each
//! system. The format is documented in `FORMATS.md` (section "Argument bundle").

use crate::data::common::{check_line_ends, content_lines, nothing_to_read, Tally};
use crate::data::json::{parse_record, Record};
use crate::data::{Bundle, Instance, Problem, Task};
use crate::error::{Result, Warning};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Fields every instance may carry, whatever its task.
const COMMON_FIELDS: [&str; 4] = ["id", "task", "arguments", "controls"];

fn task_fields(task: Task) -> &'static [&'static str] {
    match task {
        Task::Mcqa => &["question", "options", "answer"],
        Task::Misinformation => &["claim", "label"],
        Task::Nli => &["statement", "evidence", "label"],
    }
}

/// Parses an argument bundle. Blank lines are skipped; every other line must be one
/// instance. Returns the bundle and the warnings that do not stop a run (see
/// [`bundle_warnings`]) plus one for unknown extra fields.
pub fn parse_bundle(name: &str, text: &str) -> Result<(Bundle, Vec<Warning>)> {
    let mut instances: Vec<Instance> = Vec::new();
    let mut first_line_of_id: HashMap<String, usize> = HashMap::new();
    let mut unknown = Tally::new(name);
    let mut seen: Vec<(String, bool, usize)> = Vec::new();
    check_line_ends(name, text)?;

    for (line, text) in content_lines(text) {
        let record = parse_record(name, line, text)?;
        let instance = parse_instance(&record)?;
        check_controls(&record, &instance, &mut seen)?;
        if let Some(first) = first_line_of_id.insert(instance.id.clone(), line) {
            return Err(record.error("id", format!("duplicate id `{}` (also on line {first})", instance.id)));
        }
        let task = instance.problem.task();
        for field in record.unknown_fields(&COMMON_FIELDS) {
            if !task_fields(task).contains(&field) {
                unknown.add(format!("ignored unknown field `{field}`"), instance.id.clone());
            }
        }
        instances.push(instance);
    }
    if instances.is_empty() {
        return Err(nothing_to_read(name, text, "the bundle has no instances"));
    }

    let bundle = Bundle {
        name: name.to_owned(),
        systems: systems_in_order(&instances),
        instances,
        controls: seen.into_iter().filter(|(_, c, _)| *c).map(|(s, _, _)| s).collect(),
    };
    let mut warnings = bundle_warnings(&bundle);
    warnings.extend(unknown.into_warnings());
    Ok((bundle, warnings))
}

fn parse_instance(record: &Record) -> Result<Instance> {
    let id = record.string("id")?;
    if id.trim().is_empty() {
        return Err(record.error("id", "`id` is empty"));
    }
    let task_name = record.string("task")?;
    let task = Task::parse(task_name).ok_or_else(|| {
        record.error("task", format!("unknown task `{task_name}` (expected mcqa, misinformation or nli)"))
    })?;
    let problem = match task {
        Task::Mcqa => {
            let question = non_empty_text(record, "question")?;
            let options = record.string_map("options")?;
            if options.is_empty() {
                return Err(record.error("options", "the option set is empty"));
            }
            if let Some((key, _)) = options.iter().find(|(k, _)| k.trim().is_empty()) {
                return Err(record.error("options", format!("empty option key `{key}`")));
            }
            let answer = record.label("answer")?;
            if !options.iter().any(|(k, _)| *k == answer) {
                let keys: Vec<&str> = options.iter().map(|(k, _)| k.as_str()).collect();
                return Err(record
                    .error("answer", format!("answer `{answer}` is not an option key (keys: {})", keys.join(", "))));
            }
            Problem::Mcqa { question, options, answer }
        }
        Task::Misinformation => Problem::Misinformation {
            claim: non_empty_text(record, "claim")?,
            label: label_in_set(record, Task::Misinformation.labels())?,
        },
        Task::Nli => Problem::Nli {
            statement: non_empty_text(record, "statement")?,
            evidence: non_empty_text(record, "evidence")?,
            label: label_in_set(record, Task::Nli.labels())?,
        },
    };
    let arguments = record.string_map("arguments")?;
    if let Some((system, _)) = arguments.iter().find(|(s, _)| s.trim().is_empty()) {
        return Err(record.error("arguments", format!("empty system name `{system}`")));
    }
    Ok(Instance { id: id.to_owned(), problem, arguments, line: record.line })
}

/// The optional field `controls`: the systems of this line's `arguments` that are control
/// cases. A system is a control on every line where it has an argument, or on none.
/// `seen` holds (system, is a control, first line) for every system met so far.
fn check_controls(record: &Record, instance: &Instance, seen: &mut Vec<(String, bool, usize)>) -> Result<()> {
    let marked = if record.get("controls").is_some() { record.string_array("controls")? } else { Vec::new() };
    for (i, system) in marked.iter().enumerate() {
        if instance.argument(system).is_none() {
            return Err(record
                .error(&format!("controls[{i}]"), format!("`{system}` is not a system of this line's `arguments`")));
        }
        if marked[..i].contains(system) {
            return Err(record.error(&format!("controls[{i}]"), format!("`{system}` is listed twice")));
        }
    }
    for (system, _) in &instance.arguments {
        let here = marked.contains(system);
        match seen.iter().find(|(s, _, _)| s == system) {
            Some((_, control, first)) if *control != here => {
                let (was, is) =
                    if *control { ("a control case", "not listed in") } else { ("not a control case", "listed in") };
                return Err(record.error(
                    "controls",
                    format!("system `{system}` is {was} on line {first} but {is} `controls` here (a control system is listed on every line where it has an argument)"),
                ));
            }
            Some(_) => {}
            None => seen.push((system.clone(), here, record.line)),
        }
    }
    Ok(())
}

fn non_empty_text(record: &Record, field: &str) -> Result<String> {
    let text = record.string(field)?;
    if text.trim().is_empty() {
        return Err(record.error(field, format!("`{field}` is empty")));
    }
    Ok(text.to_owned())
}

fn label_in_set(record: &Record, labels: &[&str]) -> Result<String> {
    let label = record.string("label")?;
    if !labels.contains(&label) {
        return Err(record.error("label", format!("label `{label}` is not one of {}", labels.join(", "))));
    }
    Ok(label.to_owned())
}

/// Every system that has an argument somewhere, in order of first appearance.
pub(crate) fn systems_in_order(instances: &[Instance]) -> Vec<String> {
    let mut systems: Vec<String> = Vec::new();
    for instance in instances {
        for (system, _) in &instance.arguments {
            if !systems.contains(system) {
                systems.push(system.clone());
            }
        }
    }
    systems
}

impl Bundle {
    /// (instance id, system) for every system of the bundle that an instance has no
    /// argument from. Ranking must either skip these pairs or treat them explicitly.
    pub fn missing_arguments(&self) -> Vec<(&str, &str)> {
        let mut missing = Vec::new();
        for instance in &self.instances {
            for system in &self.systems {
                if instance.argument(system).is_none() {
                    missing.push((instance.id.as_str(), system.as_str()));
                }
            }
        }
        missing
    }

    /// The instance with this id.
    pub fn instance(&self, id: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.id == id)
    }

    /// The control cases of a run: `named` (recognised by name, as the generated ones are)
    /// followed by the control files this bundle marks that `named` lacks.
    pub fn controls_with(&self, named: &[String]) -> Vec<String> {
        let mut all = named.to_vec();
        all.extend(self.controls.iter().filter(|c| !named.contains(c)).cloned());
        all
    }
}

/// The start of the warning of a bundle's empty MCQA option texts (the page says it in
/// words of its own before a ranking: `jobs::evaluate::job::check_notes`).
pub const EMPTY_OPTION_TEXTS: &str = "empty option texts";

/// Warnings for a bundle that is valid but uneven: instances missing a system that others
/// have, empty argument texts, and empty MCQA option texts (the public CasiMedicos files
/// have some). Used by both the bundle reader and the Ranking-Over-Scoring importer.
pub fn bundle_warnings(bundle: &Bundle) -> Vec<Warning> {
    let mut tally = Tally::new(&bundle.name);
    for (id, system) in bundle.missing_arguments() {
        tally.add(format!("instances without an argument from system `{system}`"), id);
    }
    for instance in &bundle.instances {
        for (system, text) in &instance.arguments {
            if text.trim().is_empty() {
                tally.add(format!("empty argument text from system `{system}`"), instance.id.clone());
            }
        }
        if let Problem::Mcqa { options, .. } = &instance.problem {
            for (key, text) in options {
                if text.trim().is_empty() {
                    tally.add(EMPTY_OPTION_TEXTS, format!("instance {} option {key}", instance.id));
                }
            }
        }
    }
    tally.into_warnings()
}

/// Writes a bundle as JSONL in the reader's format, one instance per line, keys in the
/// documented order, non-ASCII text as UTF-8. `parse_bundle` reads it back unchanged.
pub fn write_bundle_jsonl(bundle: &Bundle) -> String {
    let mut out = String::new();
    for instance in &bundle.instances {
        let mut object = Map::new();
        object.insert("id".into(), instance.id.clone().into());
        object.insert("task".into(), instance.problem.task().name().into());
        match &instance.problem {
            Problem::Mcqa { question, options, answer } => {
                object.insert("question".into(), question.clone().into());
                object.insert("options".into(), ordered_object(options));
                object.insert("answer".into(), answer.clone().into());
            }
            Problem::Misinformation { claim, label } => {
                object.insert("claim".into(), claim.clone().into());
                object.insert("label".into(), label.clone().into());
            }
            Problem::Nli { statement, evidence, label } => {
                object.insert("statement".into(), statement.clone().into());
                object.insert("evidence".into(), evidence.clone().into());
                object.insert("label".into(), label.clone().into());
            }
        }
        object.insert("arguments".into(), ordered_object(&instance.arguments));
        let controls: Vec<Value> = instance
            .arguments
            .iter()
            .filter(|(s, _)| bundle.controls.contains(s))
            .map(|(s, _)| Value::String(s.clone()))
            .collect();
        if !controls.is_empty() {
            object.insert("controls".into(), Value::Array(controls));
        }
        out.push_str(&Value::Object(object).to_string());
        out.push('\n');
    }
    out
}

/// A JSON object that keeps the pairs' order (serde_json's `preserve_order` feature).
fn ordered_object(pairs: &[(String, String)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../examples/bundle.jsonl");

    fn error_at(text: &str) -> (usize, Option<String>, String) {
        let err = parse_bundle("b.jsonl", text).unwrap_err();
        let loc = err.location().expect("an input error has a location").clone();
        assert_eq!(loc.file, "b.jsonl");
        (loc.line.unwrap(), loc.field, err.to_string())
    }

    const MCQA: &str = r#"{"id": "q1", "task": "mcqa", "question": "Q?", "options": {"1": "a", "2": "b"}, "answer": "2", "arguments": {"s1": "because", "s2": "since"}}"#;

    #[test]
    fn example_bundle_parses_with_all_tasks_and_systems() {
        let (bundle, warnings) = parse_bundle("bundle.jsonl", EXAMPLE).unwrap();
        assert_eq!(bundle.systems, ["expert", "gpt-4o", "llama-3-70b", "openbiollm-70b"]);
        let count = |t: Task| bundle.instances.iter().filter(|i| i.problem.task() == t).count();
        assert_eq!((count(Task::Mcqa), count(Task::Misinformation), count(Task::Nli)), (12, 4, 4));
        assert!(warnings.is_empty(), "{warnings:?}");
        for instance in &bundle.instances {
            if let Problem::Mcqa { options, .. } = &instance.problem {
                assert_eq!(options.len(), 5, "{}", instance.id);
            }
        }
        assert!(EXAMPLE.contains("Sjögren") && EXAMPLE.contains("β-blocker"));
    }

    #[test]
    fn option_keys_keep_file_order() {
        let text = r#"{"id": "a", "task": "mcqa", "question": "Q", "options": {"10": "x", "2": "y", "1": "z"}, "answer": "10", "arguments": {}}"#;
        let (bundle, _) = parse_bundle("b", text).unwrap();
        assert_eq!(bundle.instances[0].problem.label_set(), ["10", "2", "1"]);
    }

    #[test]
    fn blank_lines_are_skipped_and_lines_counted() {
        let text = format!("\n{MCQA}\n   \n{}\n", MCQA.replace("\"q1\"", "\"q2\""));
        let (bundle, _) = parse_bundle("b", &text).unwrap();
        let lines: Vec<usize> = bundle.instances.iter().map(|i| i.line).collect();
        assert_eq!(lines, [2, 4]);
    }

    #[test]
    fn invalid_json_names_line_and_column() {
        let text = format!("{MCQA}\n{{\"id\": \"q2\" \"task\": \"mcqa\"}}\n");
        let (line, field, message) = error_at(&text);
        assert_eq!((line, field), (2, None));
        // Column 13 is the quote that starts "task"; Python 3 agrees: json.loads('{"id": "q2"
        // "task": "mcqa"}') -> "Expecting ',' delimiter: line 1 column 13".
        assert_eq!(message, "b.jsonl:2: invalid JSON at column 13: expected `,` or `}`");
    }

    #[test]
    fn missing_field_is_an_error_naming_it() {
        let (line, field, message) = error_at(&MCQA.replace(r#""question": "Q?", "#, ""));
        assert_eq!((line, field.as_deref()), (1, Some("question")));
        assert_eq!(message, "b.jsonl:1: field `question`: missing field `question`");
    }

    #[test]
    fn ill_typed_field_is_an_error() {
        let (line, field, message) = error_at(&MCQA.replace(r#""answer": "2""#, r#""answer": [2]"#));
        assert_eq!((line, field.as_deref()), (1, Some("answer")));
        assert!(message.ends_with("expected a string or a whole number, found an array"), "{message}");
        let (_, field, _) = error_at(&MCQA.replace(r#""s2": "since""#, r#""s2": 5"#));
        assert_eq!(field.as_deref(), Some("arguments.s2"));
    }

    #[test]
    fn unknown_task_is_an_error() {
        let (line, field, message) = error_at(&MCQA.replace("\"mcqa\"", "\"summarisation\""));
        assert_eq!((line, field.as_deref()), (1, Some("task")));
        assert!(message.contains("unknown task `summarisation`"));
    }

    #[test]
    fn label_outside_the_task_set_is_an_error() {
        let text = r#"{"id": "m", "task": "misinformation", "claim": "C", "label": "true", "arguments": {}}"#;
        let (line, field, message) = error_at(text);
        assert_eq!((line, field.as_deref()), (1, Some("label")));
        assert!(message.ends_with("label `true` is not one of supported, refuted, not_enough_evidence"));
        let text =
            r#"{"id": "n", "task": "nli", "statement": "S", "evidence": "E", "label": "neutral", "arguments": {}}"#;
        assert_eq!(error_at(text).1.as_deref(), Some("label"));
    }

    #[test]
    fn answer_must_be_an_option_key() {
        let (line, field, message) = error_at(&MCQA.replace(r#""answer": "2""#, r#""answer": 3"#));
        assert_eq!((line, field.as_deref()), (1, Some("answer")));
        assert!(message.ends_with("answer `3` is not an option key (keys: 1, 2)"), "{message}");
    }

    #[test]
    fn duplicate_id_names_both_lines() {
        let text = format!("{MCQA}\n\n{MCQA}\n");
        let (line, field, message) = error_at(&text);
        assert_eq!((line, field.as_deref()), (3, Some("id")));
        assert!(message.ends_with("duplicate id `q1` (also on line 1)"));
    }

    #[test]
    fn empty_option_set_is_an_error() {
        let (line, field, message) =
            error_at(&MCQA.replace(r#"{"1": "a", "2": "b"}"#, "{}").replace(r#""answer": "2""#, r#""answer": "1""#));
        assert_eq!((line, field.as_deref()), (1, Some("options")));
        assert!(message.ends_with("the option set is empty"));
    }

    #[test]
    fn uneven_bundles_give_counted_warnings_and_record_missing_pairs() {
        let second =
            MCQA.replace("\"q1\"", "\"q2\"").replace(r#", "s2": "since""#, "").replace("\"because\"", "\"  \"");
        let third = MCQA.replace("\"q1\"", "\"q3\"").replace("\"task\"", "\"note\": 1, \"task\"");
        let text = format!("{MCQA}\n{second}\n{third}\n");
        let (bundle, warnings) = parse_bundle("b.jsonl", &text).unwrap();
        assert_eq!(bundle.missing_arguments(), [("q2", "s2")]);
        let messages: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            messages,
            [
                "b.jsonl: instances without an argument from system `s2`: 1 (q2)",
                "b.jsonl: empty argument text from system `s1`: 1 (q2)",
                "b.jsonl: ignored unknown field `note`: 1 (q3)",
            ]
        );
    }

    #[test]
    fn control_systems_are_marked_per_line_and_survive_the_writer() {
        let line = |id: &str, controls: &str| {
            MCQA.replace("\"q1\"", &format!("\"{id}\"")).replace("}}", &format!("}}{controls}}}"))
        };
        let text = format!("{}\n{}\n", line("q1", r#", "controls": ["s2"]"#), line("q2", r#", "controls": ["s2"]"#));
        let (bundle, warnings) = parse_bundle("b.jsonl", &text).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(bundle.controls, ["s2"]);
        let written = write_bundle_jsonl(&bundle);
        assert!(written.lines().all(|l| l.ends_with(r#""controls":["s2"]}"#)), "{written}");
        assert_eq!(parse_bundle("b.jsonl", &written).unwrap().0, bundle);
        // Without the field: no control (files written before the field existed).
        assert!(parse_bundle("b.jsonl", MCQA).unwrap().0.controls.is_empty());

        // A control on one line must be one on every line where it has an argument.
        let (line_no, field, message) =
            error_at(&format!("{}\n{}\n", line("q1", r#", "controls": ["s2"]"#), line("q2", "")));
        assert_eq!((line_no, field.as_deref()), (2, Some("controls")));
        assert!(message.ends_with("system `s2` is a control case on line 1 but not listed in `controls` here (a control system is listed on every line where it has an argument)"), "{message}");
        let (line_no, _, message) =
            error_at(&format!("{}\n{}\n", line("q1", ""), line("q2", r#", "controls": ["s1"]"#)));
        assert_eq!(line_no, 2);
        assert!(
            message.contains("system `s1` is not a control case on line 1 but listed in `controls` here"),
            "{message}"
        );
        let (_, field, message) = error_at(&line("q1", r#", "controls": ["s2", "gpt"]"#));
        assert_eq!(field.as_deref(), Some("controls[1]"));
        assert!(message.ends_with("`gpt` is not a system of this line's `arguments`"), "{message}");
        let (_, field, _) = error_at(&line("q1", r#", "controls": "s2""#));
        assert_eq!(field.as_deref(), Some("controls"));
    }

    #[test]
    fn writer_round_trips_the_example() {
        let (bundle, _) = parse_bundle("bundle.jsonl", EXAMPLE).unwrap();
        let written = write_bundle_jsonl(&bundle);
        let (again, _) = parse_bundle("bundle.jsonl", &written).unwrap();
        assert_eq!(again, bundle);
        // The writer is the canonical form: writing twice gives the same bytes.
        assert_eq!(write_bundle_jsonl(&again), written);
        assert!(written.contains("Sjögren"), "non-ASCII is written as UTF-8, not escaped");
    }
}
