//! Answers with expert statements (FORMATS.md §11), for statement checks (K-QA's metrics,
//! Manes et al. 2024: an answer should entail the *must-have* statements and contradict
//! none): JSONL, one answer per line.

use crate::data::common::{check_line_ends, content_lines, nothing_to_read};
use crate::data::graded::{prompt, unknown_field_warnings, Prompt};
use crate::data::json::{parse_record, Record};
use crate::error::{Result, Warning};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One answer and the expert statements it is checked against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatementAnswer {
    pub id: String,
    pub system: String,
    pub prompt_id: Option<String>,
    /// The question (or conversation) the answer replies to, when given.
    pub prompt: Option<Prompt>,
    pub response: String,
    /// Statements a complete answer must entail (K-QA's `Must_have`).
    pub must_have: Vec<String>,
    /// Statements an answer may entail (K-QA's `Nice_to_have`): checked for contradiction only.
    pub nice_to_have: Vec<String>,
    /// 1-based line in the input.
    pub line: usize,
}

impl StatementAnswer {
    /// The bootstrap unit: the prompt, or the answer id when no prompt is given.
    pub fn unit(&self) -> &str {
        self.prompt_id.as_deref().unwrap_or(&self.id)
    }

    /// Every statement with whether it is a must-have, must-haves first.
    pub fn statements(&self) -> impl Iterator<Item = (&str, bool)> {
        let must = self.must_have.iter().map(|s| (s.as_str(), true));
        must.chain(self.nice_to_have.iter().map(|s| (s.as_str(), false)))
    }
}

const KNOWN_FIELDS: [&str; 7] = ["id", "system", "prompt_id", "prompt", "response", "must_have", "nice_to_have"];

/// Parses answers with statements. Errors name file, line and field (`must_have[2]`); an
/// answer needs a `response` and at least one statement; unknown fields give one warning
/// per name.
pub fn parse_statements(name: &str, text: &str) -> Result<(Vec<StatementAnswer>, Vec<Warning>)> {
    check_line_ends(name, text)?;
    let mut answers = Vec::new();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut unknown: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (line, row) in content_lines(text) {
        let record = parse_record(name, line, row)?;
        let id = record.non_empty_label("id")?;
        let system = record.non_empty_label("system")?;
        if let Some(first) = seen.insert((system.clone(), id.clone()), line) {
            return Err(record.error("id", format!("system `{system}` already has an answer `{id}` (line {first})")));
        }
        let response = record.string("response")?.to_string();
        let must_have = statement_list(&record, "must_have")?;
        let nice_to_have = statement_list(&record, "nice_to_have")?;
        if must_have.is_empty() && nice_to_have.is_empty() {
            return Err(record.error("must_have", "no statement to check (must_have and nice_to_have are both empty)"));
        }
        check_no_repeats(&record, &must_have, &nice_to_have)?;
        let prompt = prompt(&record, &mut unknown)?;
        for key in record.unknown_fields(&KNOWN_FIELDS) {
            unknown.entry(key.to_string()).or_insert((line, 0)).1 += 1;
        }
        answers.push(StatementAnswer {
            id,
            system,
            prompt_id: match record.get("prompt_id") {
                Some(_) => Some(record.non_empty_label("prompt_id")?),
                None => None,
            },
            prompt,
            response,
            must_have,
            nice_to_have,
            line,
        });
    }
    if answers.is_empty() {
        return Err(nothing_to_read(name, text, "no answers (the file has no non-blank line)"));
    }
    let mut warnings = unknown_field_warnings(name, unknown);
    warnings.extend(comparability_warnings(name, &answers));
    Ok((answers, warnings))
}

/// A statement listed twice in one answer (in `must_have`, in `nice_to_have`, or in both)
/// would be judged and counted twice: comprehensiveness and hallucination would be wrong.
/// Refused at the repeat's field (statements compared without surrounding spaces).
pub(crate) fn check_no_repeats(record: &Record, must_have: &[String], nice_to_have: &[String]) -> Result<()> {
    let mut first: HashMap<&str, String> = HashMap::new();
    let fields = must_have.iter().enumerate().map(|(i, s)| (format!("must_have[{i}]"), s));
    let fields = fields.chain(nice_to_have.iter().enumerate().map(|(i, s)| (format!("nice_to_have[{i}]"), s)));
    for (field, statement) in fields {
        if let Some(earlier) = first.get(statement.trim()) {
            let why = if earlier.starts_with("must") != field.starts_with("must") {
                "a statement is must-have or nice-to-have, not both"
            } else {
                "a statement is listed once"
            };
            return Err(
                record.error(&field, format!("repeats {earlier}: {why} (it would be judged and counted twice)"))
            );
        }
        first.insert(statement.trim(), field);
    }
    Ok(())
}

/// What makes the systems' figures incomparable without making any of them wrong, said
/// with the ids: one prompt whose answers carry different statements (the systems are
/// checked against different experts' lists), systems that answer different prompts (their
/// means are over different questions), empty responses (they entail nothing).
fn comparability_warnings(name: &str, answers: &[StatementAnswer]) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let list = |ids: &[String]| {
        let shown: Vec<&str> = ids.iter().take(10).map(String::as_str).collect();
        let more = ids.len().saturating_sub(shown.len());
        format!("{}{}", shown.join(", "), if more > 0 { format!(" and {more} more") } else { String::new() })
    };
    // One prompt, several statement lists.
    let mut lists: BTreeMap<&str, (&StatementAnswer, Vec<usize>)> = BTreeMap::new();
    for a in answers.iter().filter(|a| a.prompt_id.is_some()) {
        let (first, differing) = lists.entry(a.unit()).or_insert((a, Vec::new()));
        if (&first.must_have, &first.nice_to_have) != (&a.must_have, &a.nice_to_have) {
            differing.push(a.line);
        }
    }
    let differing: Vec<String> = lists
        .iter()
        .filter(|(_, (_, lines))| !lines.is_empty())
        .map(|(prompt, (first, lines))| {
            let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
            format!("`{prompt}` (line {} against line {})", first.line, lines.join(", "))
        })
        .collect();
    if !differing.is_empty() {
        warnings.push(Warning::new(format!(
            "{name}: {} prompts carry different statements in different answers, so their systems are checked \
             against different lists: {}",
            differing.len(),
            list(&differing)
        )));
    }
    // Systems that answer different prompts.
    let mut prompts_of: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for a in answers {
        prompts_of.entry(a.system.as_str()).or_default().insert(a.unit());
    }
    let all: std::collections::BTreeSet<&str> = answers.iter().map(StatementAnswer::unit).collect();
    let missing: Vec<String> = prompts_of
        .iter()
        .filter(|(_, mine)| mine.len() < all.len())
        .map(|(system, mine)| {
            let lacks: Vec<String> = all.difference(mine).map(|p| format!("`{p}`")).collect();
            format!("`{system}` lacks {}", list(&lacks))
        })
        .collect();
    if !missing.is_empty() {
        warnings.push(Warning::new(format!(
            "{name}: the systems answer different prompts (prompt_id, else id), so their means are over different \
             questions: {}",
            missing.join("; ")
        )));
    }
    let empty: Vec<String> = answers
        .iter()
        .filter(|a| a.response.trim().is_empty())
        .map(|a| format!("{} of `{}`", a.id, a.system))
        .collect();
    if !empty.is_empty() {
        warnings.push(Warning::new(format!(
            "{name}: {} responses are empty (they entail no statement and contradict none): {}",
            empty.len(),
            list(&empty)
        )));
    }
    warnings
}

/// An optional array of non-empty statements.
pub(crate) fn statement_list(record: &Record, field: &str) -> Result<Vec<String>> {
    if record.get(field).is_none() {
        return Ok(Vec::new());
    }
    let list = record.string_array(field)?;
    if let Some(i) = list.iter().position(|s| s.trim().is_empty()) {
        return Err(record.error(&format!("{field}[{i}]"), "empty statement"));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse_statements("s.jsonl", text).unwrap_err().to_string()
    }

    #[test]
    fn statements_counted_twice_are_refused_and_incomparable_answers_warned_of() {
        // Both must-have and nice-to-have, or twice in one list: judged and counted twice.
        let both = r#"{"id": "q", "system": "a", "response": "r", "must_have": ["x"], "nice_to_have": [" x"]}"#;
        assert_eq!(
            err(both),
            "s.jsonl:1: field `nice_to_have[0]`: repeats must_have[0]: a statement is must-have or nice-to-have, not both (it would be judged and counted twice)"
        );
        let twice = r#"{"id": "q", "system": "a", "response": "r", "must_have": ["x", "y", "x"]}"#;
        assert_eq!(
            err(twice),
            "s.jsonl:1: field `must_have[2]`: repeats must_have[0]: a statement is listed once (it would be judged and counted twice)"
        );
        // One prompt with two statement lists, a system without prompt p2, an empty response:
        // each a warning with the ids.
        let text = r#"{"id": "1", "prompt_id": "p1", "system": "a", "response": "r", "must_have": ["x"]}
{"id": "2", "prompt_id": "p1", "system": "b", "response": " ", "must_have": ["y"]}
{"id": "3", "prompt_id": "p2", "system": "a", "response": "r", "must_have": ["z"]}"#;
        let (_, warnings) = parse_statements("s.jsonl", text).unwrap();
        let warnings: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                "s.jsonl: 1 prompts carry different statements in different answers, so their systems are checked against different lists: `p1` (line 1 against line 2)",
                "s.jsonl: the systems answer different prompts (prompt_id, else id), so their means are over different questions: `b` lacks `p2`",
                "s.jsonl: 1 responses are empty (they entail no statement and contradict none): 2 of `b`",
            ]
        );
    }

    #[test]
    fn reads_answers_and_refuses_broken_lines_at_their_field() {
        let text = r#"{"id": "q1", "system": "a", "prompt": "Is it contagious?", "response": "Yes, for a week.", "must_have": ["It is contagious"], "nice_to_have": ["Wash hands"], "extra": 1}
{"id": "q1", "system": "b", "response": "No.", "must_have": ["It is contagious"]}"#;
        let (answers, warnings) = parse_statements("s.jsonl", text).unwrap();
        assert_eq!(answers.len(), 2);
        assert_eq!(answers[0].statements().collect::<Vec<_>>(), [("It is contagious", true), ("Wash hands", false)]);
        assert_eq!(answers[1].unit(), "q1");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].to_string().contains("ignored unknown field `extra` on 1 line(s)"));
        assert!(err(r#"{"id": "q", "system": "a", "must_have": ["x"]}"#).contains("s.jsonl:1: field `response`"));
        assert!(err(r#"{"id": "q", "system": "a", "response": "r", "must_have": ["x", " "]}"#)
            .contains("s.jsonl:1: field `must_have[1]`: empty statement"));
        assert!(err(r#"{"id": "q", "system": "a", "response": "r", "must_have": []}"#)
            .contains("field `must_have`: no statement to check"));
        let twice = r#"{"id": "q", "system": "a", "response": "r", "must_have": ["x"]}
{"id": "q", "system": "a", "response": "r", "must_have": ["x"]}"#;
        assert!(err(twice).contains("s.jsonl:2: field `id`: system `a` already has an answer `q` (line 1)"));
    }
}
