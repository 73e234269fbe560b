//! The reference-based metrics' input: JSONL, one candidate per line (FORMATS.md, section 6).

use crate::data::common::{check_line_ends, content_lines, nothing_to_read};
use crate::data::json::{parse_record, Json, Record};
use crate::error::{Result, Warning};
use std::collections::{BTreeMap, HashMap, HashSet};

/// One candidate text (a system's summary or answer for one item) with its references.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The item (question) the candidate answers; candidates of different systems for the
    /// same item share it, and pairwise agreement compares exactly those.
    pub id: String,
    pub system: String,
    /// Correlations are computed per batch (BioASQ reports them per test batch); "all" when
    /// the line has no `batch`.
    pub batch: String,
    pub candidate: String,
    pub references: Vec<String>,
    /// The question (query) the candidate answers, when the line gives it: a learned metric
    /// reads (question, candidate, reference) triples.
    pub question: Option<String>,
    /// Human scores by dimension, in file order: the mean of the annotators' scores where
    /// the line gives one score per annotator.
    pub human: Vec<(String, f64)>,
    /// How many annotators' scores each `human` value averages (1 for a single number), in
    /// the order of `human`.
    pub raters: Vec<usize>,
    /// 1-based line in the input.
    pub line: usize,
}

/// The batch of lines that carry none.
pub const DEFAULT_BATCH: &str = "all";

const KNOWN_FIELDS: [&str; 7] = ["id", "system", "candidate", "references", "question", "human", "batch"];

/// Parses the JSONL text of file `name`. Blank lines are skipped. Errors name the file,
/// line and field (a key twice in one object is one); unknown fields become one warning
/// each (with the first line).
pub fn parse_candidates(name: &str, text: &str) -> Result<(Vec<Candidate>, Vec<Warning>)> {
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut seen: HashMap<(String, String, String), usize> = HashMap::new();
    let mut unknown: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut dimensions: HashSet<String> = HashSet::new();
    check_line_ends(name, text)?;
    for (line, row) in content_lines(text) {
        let record = parse_record(name, line, row)?;
        let (human, raters) = human(&record, &mut dimensions)?;
        let candidate = Candidate {
            id: record.non_empty_label("id")?,
            system: record.non_empty_label("system")?,
            batch: match record.get("batch") {
                Some(_) => record.non_empty_label("batch")?,
                None => DEFAULT_BATCH.to_string(),
            },
            candidate: record.string("candidate")?.to_string(),
            references: references(&record)?,
            question: match record.get("question") {
                Some(_) => Some(record.string("question")?.to_string()),
                None => None,
            },
            human,
            raters,
            line,
        };
        let key = (candidate.batch.clone(), candidate.id.clone(), candidate.system.clone());
        if let Some(first) = seen.insert(key, line) {
            return Err(record.error(
                "system",
                format!(
                    "system `{}` already has a candidate for id `{}` (line {first})",
                    candidate.system, candidate.id
                ),
            ));
        }
        for key in record.unknown_fields(&KNOWN_FIELDS) {
            unknown.entry(key.to_string()).or_insert((line, 0)).1 += 1;
        }
        candidates.push(candidate);
    }
    if candidates.is_empty() {
        return Err(nothing_to_read(name, text, "no candidates (the file has no non-blank line)"));
    }
    let warnings = unknown
        .into_iter()
        .map(|(key, (first, count))| {
            Warning::at(
                crate::Location::at(name, first, key.as_str()),
                format!("ignored unknown field `{key}` on {count} line(s); known fields: {}", KNOWN_FIELDS.join(", ")),
            )
        })
        .collect();
    Ok((candidates, warnings))
}

/// `references`: a non-empty array of strings.
fn references(record: &Record) -> Result<Vec<String>> {
    let references = record.string_array("references")?;
    if references.is_empty() {
        return Err(record.error("references", "needs at least one reference text"));
    }
    Ok(references)
}

/// A line's human scores by dimension, and how many annotators each averages.
type HumanScores = (Vec<(String, f64)>, Vec<usize>);

/// Most human score dimensions a file may have. Each dimension is compared with every
/// metric in every batch, with bootstrap intervals (milliseconds each): a hostile line with
/// a million dimensions would run for hours. Real files have a handful.
pub const MAX_HUMAN_DIMENSIONS: usize = 64;

/// `human`: optional object of dimension -> score, in file order, where a score is a
/// number or the annotators' scores: an array with one number per annotator, or an object
/// annotator -> number (public sets such as SQuALITY's keep each rater's score, by rater);
/// `null` where an annotator gave none. Annotators' scores become the mean of their
/// numbers; scores that are all null only leave the dimension out of this line
/// (counted by the metrics' missing-dimension warning). Returns the scores and how many
/// annotators each averages. `dimensions` collects the distinct dimension names of the file
/// so far (at most [`MAX_HUMAN_DIMENSIONS`]).
fn human(record: &Record, dimensions: &mut HashSet<String>) -> Result<HumanScores> {
    if record.get("human").is_none() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut scores = Vec::new();
    let mut raters = Vec::new();
    for (dimension, value) in record.object("human")? {
        let field = format!("human.{dimension}");
        if dimension.trim().is_empty() {
            return Err(record.error(&field, "empty dimension name"));
        }
        let given: Vec<f64> = match value {
            Json::Number(n) => vec![n.as_f64().expect("finite")],
            Json::Array(items) => {
                let named = items.iter().enumerate().map(|(i, item)| (format!("{field}[{i}]"), item));
                annotators_scores(record, named)?
            }
            Json::Object(entries) => {
                record.reject_duplicates(entries, Some(&field))?;
                let named = entries.iter().map(|(rater, item)| (format!("{field}.{rater}"), item));
                annotators_scores(record, named)?
            }
            other => {
                return Err(record.error(
                    &field,
                    format!(
                        "expected a number, or annotators' scores (an array, or an object by annotator), found {}",
                        other.kind()
                    ),
                ))
            }
        };
        if !dimensions.contains(dimension) {
            if dimensions.len() == MAX_HUMAN_DIMENSIONS {
                return Err(record
                    .error(&field, format!("more than {MAX_HUMAN_DIMENSIONS} human score dimensions in the file")));
            }
            dimensions.insert(dimension.clone());
        }
        if given.is_empty() {
            continue;
        }
        scores.push((dimension.clone(), given.iter().sum::<f64>() / given.len() as f64));
        raters.push(given.len());
    }
    Ok((scores, raters))
}

/// The numbers among one dimension's annotators' scores (`null`s skipped); anything else
/// is an error at its own field.
fn annotators_scores<'v>(record: &Record, scores: impl Iterator<Item = (String, &'v Json)>) -> Result<Vec<f64>> {
    let mut given = Vec::new();
    for (field, score) in scores {
        match score {
            Json::Number(n) => given.push(n.as_f64().expect("finite")),
            Json::Null => {}
            other => {
                return Err(record.error(
                    &field,
                    format!("expected a number (one annotator's score) or null, found {}", other.kind()),
                ))
            }
        }
    }
    Ok(given)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse_candidates("s.jsonl", text).unwrap_err().to_string()
    }

    #[test]
    fn parses_lines_with_and_without_optional_fields() {
        let text = "\u{feff}{\"id\": 1, \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"y\"]}\n\n\
                    {\"id\": \"1\", \"system\": \"b\", \"candidate\": \"\", \"references\": [\"y\", \"z\"], \"human\": {\"recall\": 4, \"precision\": 2.5}, \"batch\": \"b1\", \"note\": 1}\n";
        let (c, warnings) = parse_candidates("s.jsonl", text).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].id.as_str(), c[0].batch.as_str(), c[0].line), ("1", DEFAULT_BATCH, 1));
        assert_eq!(c[1].human, vec![("recall".to_string(), 4.0), ("precision".to_string(), 2.5)]);
        assert_eq!((c[1].batch.as_str(), c[1].line), ("b1", 3));
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            warnings[0].to_string(),
            "s.jsonl:3: field `note`: ignored unknown field `note` on 1 line(s); known fields: id, system, candidate, references, question, human, batch"
        );
    }

    #[test]
    fn errors_name_file_line_and_field() {
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\"}"),
            "s.jsonl:1: field `references`: missing field `references`"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": []}"),
            "s.jsonl:1: field `references`: needs at least one reference text"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\", 3]}"),
            "s.jsonl:1: field `references[1]`: expected a string, found a number"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\"], \"human\": {\"recall\": \"4\"}}"),
            "s.jsonl:1: field `human.recall`: expected a number, or annotators' scores (an array, or an object by annotator), found a string"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"\", \"candidate\": \"x\", \"references\": [\"r\"]}"),
            "s.jsonl:1: field `system`: `system` is empty"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\"]}\n\
                 {\"id\": \"q\", \"system\": \"a\", \"candidate\": \"y\", \"references\": [\"r\"]}"),
            "s.jsonl:2: field `system`: system `a` already has a candidate for id `q` (line 1)"
        );
        assert_eq!(err("[1, 2]"), "s.jsonl:1: expected a JSON object on this line, found an array");
        assert!(err("{\"id\": ").starts_with("s.jsonl:1: invalid JSON at column"));
        // At the line after the last, where the first candidate was expected.
        assert_eq!(err("\n \n"), "s.jsonl:3: no candidates (the file has no non-blank line)");
    }

    #[test]
    fn a_key_twice_in_one_object_is_an_error() {
        // serde_json's Value would keep the second `system` and lose `a` without a word.
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\"]}\n\
                 {\"id\": \"q\", \"system\": \"a\", \"system\": \"b\", \"candidate\": \"x\", \"references\": [\"r\"]}"),
            "s.jsonl:2: field `system`: duplicate key `system`"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\"], \"human\": {\"recall\": 4, \"recall\": 2}}"),
            "s.jsonl:1: field `human.recall`: duplicate key `recall`"
        );
    }

    #[test]
    fn annotators_scores_are_averaged_and_the_question_kept() {
        // SQuALITY's human evaluation gives three raters' scores per response; one rater
        // may give none (null). Means: correctness (10 + 60 + 40) / 3 = 36.666..,
        // overall (5 + 45) / 2 = 25; `selection` has no score at all and is left out.
        let text = "{\"id\": \"q\", \"system\": \"bart\", \"question\": \"What is the plot?\", \"candidate\": \"x\", \"references\": [\"y\"], \"human\": {\"correctness\": [10, 60, 40], \"overall\": {\"2\": null, \"3\": 5, \"6\": 45}, \"selection\": [null], \"length\": 3}}";
        let (c, warnings) = parse_candidates("s.jsonl", text).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(c[0].question.as_deref(), Some("What is the plot?"));
        assert_eq!(
            c[0].human,
            vec![("correctness".into(), 110.0 / 3.0), ("overall".into(), 25.0), ("length".into(), 3.0)]
        );
        assert_eq!(c[0].raters, vec![3, 2, 1]);
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\"], \"human\": {\"recall\": [4, \"5\"]}}"),
            "s.jsonl:1: field `human.recall[1]`: expected a number (one annotator's score) or null, found a string"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\"], \"human\": {\"recall\": true}}"),
            "s.jsonl:1: field `human.recall`: expected a number, or annotators' scores (an array, or an object by annotator), found a boolean"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\"], \"human\": {\"recall\": {\"r1\": 4, \"r2\": \"x\"}}}"),
            "s.jsonl:1: field `human.recall.r2`: expected a number (one annotator's score) or null, found a string"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\"], \"human\": {\"recall\": {\"r1\": 4, \"r1\": 5}}}"),
            "s.jsonl:1: field `human.recall.r1`: duplicate key `r1`"
        );
        assert_eq!(
            err("{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"r\"], \"question\": 7}"),
            "s.jsonl:1: field `question`: expected a string, found a number"
        );
    }

    /// One line of `n` human dimensions `d0 .. d{n-1}` (and `keys` unknown fields).
    fn wide_line(id: usize, n: usize, keys: usize) -> String {
        let human: Vec<String> = (0..n).map(|i| format!("\"d{i}\": 1")).collect();
        let unknown: String = (0..keys).map(|i| format!(", \"k{i}\": 0")).collect();
        format!("{{\"id\": \"{id}\", \"system\": \"s\", \"candidate\": \"a\", \"references\": [\"a\"], \"human\": {{{}}}{unknown}}}", human.join(", "))
    }

    #[test]
    fn at_most_64_human_dimensions_per_file() {
        let (c, _) = parse_candidates("s.jsonl", &wide_line(1, 64, 0)).unwrap();
        assert_eq!(c[0].human.len(), 64);
        // The 65th distinct name, d64 on line 2, is refused (d0..d63 are known by then).
        let text = format!("{}\n{}", wide_line(1, 64, 0), wide_line(2, 65, 0));
        assert_eq!(err(&text), "s.jsonl:2: field `human.d64`: more than 64 human score dimensions in the file");
    }

    #[test]
    fn a_line_with_a_million_keys_is_read_in_linear_time() {
        // 200,000 unknown fields on one line (2.7 MB): duplicate keys used to be found by
        // comparing every key with all before it, 2e10 comparisons; now by a hash set.
        let line = wide_line(1, 3, 200_000);
        let (c, warnings) = parse_candidates("s.jsonl", &line).unwrap();
        assert_eq!(c[0].human.len(), 3);
        assert_eq!(warnings.len(), 200_000, "one warning per unknown field name");
        // A duplicate at the very end is still found.
        let twice = format!("{}, \"k5\": 1}}", &line[..line.len() - 1]);
        assert_eq!(err(&twice), "s.jsonl:1: field `k5`: duplicate key `k5`");
    }
}
