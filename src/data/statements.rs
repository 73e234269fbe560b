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
    Ok((answers, unknown_field_warnings(name, unknown)))
}

/// An optional array of non-empty statements.
fn statement_list(record: &Record, field: &str) -> Result<Vec<String>> {
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
