//! Prompts to draft rubrics for (`medrank rubric-draft --prompts`, FORMATS.md §12): JSONL,
//! one prompt per line, with what the drafted file should carry (the responses to grade)
//! and, optionally, experts' key statements to measure the draft against (K-QA's
//! `Must_have` and `Nice_to_have`).

use crate::data::common::{check_line_ends, content_lines, nothing_to_read, Tally};
use crate::data::graded::{prompt, tag_list, unknown_field_warnings, Prompt};
use crate::data::json::parse_record;
use crate::data::statements::{check_no_repeats, statement_list};
use crate::error::{Result, Warning};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DraftPrompt {
    pub id: String,
    /// The question, or the conversation so far.
    pub prompt: Prompt,
    /// Response-level tags the drafted file carries.
    pub tags: Vec<String>,
    /// Expert statements a complete answer entails (K-QA's `Must_have`).
    pub must_have: Vec<String>,
    /// Expert statements an answer may entail (K-QA's `Nice_to_have`).
    pub nice_to_have: Vec<String>,
    /// Responses to grade with the drafted rubric: (system, text), in file order.
    pub responses: Vec<(String, String)>,
    /// 1-based line in the input.
    pub line: usize,
}

impl DraftPrompt {
    /// What retrieval searches with: the prompt's text, or the user's turns of a
    /// conversation (every turn when no role is `user`), one per line.
    pub fn query(&self) -> String {
        match &self.prompt {
            Prompt::Text(t) => t.clone(),
            Prompt::Messages(ms) => {
                let user: Vec<&str> = ms
                    .iter()
                    .filter(|m| m.role.trim().eq_ignore_ascii_case("user"))
                    .map(|m| m.content.as_str())
                    .collect();
                if user.is_empty() {
                    ms.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n")
                } else {
                    user.join("\n")
                }
            }
        }
    }

    /// Every expert statement with whether it is a must-have, must-haves first.
    pub fn statements(&self) -> impl Iterator<Item = (&str, bool)> {
        let must = self.must_have.iter().map(|s| (s.as_str(), true));
        must.chain(self.nice_to_have.iter().map(|s| (s.as_str(), false)))
    }
}

const KNOWN_FIELDS: [&str; 6] = ["id", "prompt", "tags", "must_have", "nice_to_have", "responses"];

/// Parses prompts. Errors name file, line and field (`responses.model-a`, `must_have[2]`:
/// empty, or a statement listed twice as `data::statements` refuses it);
/// an id twice is an error naming both lines; unknown fields give one warning per name; an
/// empty response is kept and warned about.
pub fn parse_draft_prompts(name: &str, text: &str) -> Result<(Vec<DraftPrompt>, Vec<Warning>)> {
    check_line_ends(name, text)?;
    let mut prompts = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut unknown: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut tally = Tally::new(name);
    for (line, row) in content_lines(text) {
        let record = parse_record(name, line, row)?;
        let id = record.non_empty_label("id")?;
        if let Some(first) = seen.insert(id.clone(), line) {
            return Err(record.error("id", format!("prompt `{id}` is also on line {first}")));
        }
        record.require("prompt")?;
        let prompt = prompt(&record, &mut unknown)?.expect("required above");
        let blank = match &prompt {
            Prompt::Text(t) => t.trim().is_empty(),
            Prompt::Messages(ms) => ms.iter().all(|m| m.content.trim().is_empty()),
        };
        if blank {
            return Err(record.error("prompt", "the prompt has no text: retrieval needs something to search with"));
        }
        let responses = match record.get("responses") {
            None => Vec::new(),
            Some(_) => {
                let responses = record.string_map("responses")?;
                for (system, response) in &responses {
                    if system.trim().is_empty() {
                        return Err(record.error("responses", "a response's system name is empty"));
                    }
                    if response.trim().is_empty() {
                        tally.add(
                            "empty responses (kept; a grader will find no criterion met)",
                            format!("{id}@{system}"),
                        );
                    }
                }
                responses
            }
        };
        // As statement checks read them (§11): non-empty, none listed twice.
        let must_have = statement_list(&record, "must_have")?;
        let nice_to_have = statement_list(&record, "nice_to_have")?;
        check_no_repeats(&record, &must_have, &nice_to_have)?;
        for key in record.unknown_fields(&KNOWN_FIELDS) {
            unknown.entry(key.to_string()).or_insert((line, 0)).1 += 1;
        }
        prompts.push(DraftPrompt { id, prompt, tags: tag_list(&record)?, must_have, nice_to_have, responses, line });
    }
    if prompts.is_empty() {
        return Err(nothing_to_read(name, text, "no prompts (the file has no non-blank line)"));
    }
    let mut warnings = unknown_field_warnings(name, unknown);
    warnings.extend(tally.into_warnings());
    Ok((prompts, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse_draft_prompts("p.jsonl", text).unwrap_err().to_string()
    }

    #[test]
    fn prompts_read_with_their_statements_and_responses() {
        let text = r#"{"id": 7, "prompt": "Can diabetics eat sweets?\n", "must_have": [" Sweets raise blood sugar"], "responses": {"doctor": "In moderation.", "bot": " "}, "Sources": "x"}
{"id": "c", "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "My ear hurts."}, {"role": "assistant", "content": "Since when?"}, {"role": "User", "content": "Two days."}]}"#;
        let (prompts, warnings) = parse_draft_prompts("p.jsonl", text).unwrap();
        assert_eq!(prompts[0].id, "7");
        assert_eq!(prompts[0].query(), "Can diabetics eat sweets?\n");
        assert_eq!(prompts[0].statements().collect::<Vec<_>>(), [(" Sweets raise blood sugar", true)]);
        assert_eq!(prompts[0].responses[1], ("bot".to_string(), " ".to_string()));
        assert_eq!(prompts[1].query(), "My ear hurts.\nTwo days.");
        let shown: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            shown,
            [
                "p.jsonl:1: field `Sources`: ignored unknown field `Sources` on 1 line(s)",
                "p.jsonl: empty responses (kept; a grader will find no criterion met): 1 (7@bot)",
            ]
        );
    }

    #[test]
    fn bad_lines_name_their_field() {
        assert_eq!(err(r#"{"id": "a"}"#), "p.jsonl:1: field `prompt`: missing field `prompt`");
        assert_eq!(
            err(r#"{"id": "a", "prompt": " "}"#),
            "p.jsonl:1: field `prompt`: the prompt has no text: retrieval needs something to search with"
        );
        assert_eq!(
            err(r#"{"id": "a", "prompt": "q", "responses": {"m": 3}}"#),
            "p.jsonl:1: field `responses.m`: expected a string, found a number"
        );
        assert_eq!(
            err(r#"{"id": "a", "prompt": "q", "nice_to_have": ["x", "x "]}"#),
            "p.jsonl:1: field `nice_to_have[1]`: repeats nice_to_have[0]: a statement is listed once (it would be \
             judged and counted twice)"
        );
        assert_eq!(
            err("{\"id\": \"a\", \"prompt\": \"q\"}\n\n{\"id\": \"a\", \"prompt\": \"r\"}"),
            "p.jsonl:3: field `id`: prompt `a` is also on line 1"
        );
        assert_eq!(err("\n"), "p.jsonl:2: no prompts (the file has no non-blank line)");
    }
}
