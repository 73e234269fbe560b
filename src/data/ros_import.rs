//! Importer for the public Ranking-Over-Scoring MCQA files (HiTZ format, methods.md §1):
//! one JSON object per line, `{"question", "options", "correct_option"}`, where a source
//! file's question is the bare question of the No-Argument file followed by the argument.
//! Importing a no-argument file and several source files gives an argument bundle.

use crate::data::bundle::{bundle_warnings, systems_in_order};
use crate::data::common::{content_lines, excerpt, Tally};
use crate::data::json::parse_record;
use crate::data::{Bundle, Instance, Problem};
use crate::error::{Error, Location, Result, Warning};

/// How many mismatches an import error lists before it only counts the rest.
pub const MAX_LISTED_MISMATCHES: usize = 20;

/// One line of a HiTZ file.
#[derive(Debug, Clone, PartialEq)]
pub struct HitzItem {
    /// 1-based line in the file.
    pub line: usize,
    pub question: String,
    /// (key, text) in file order.
    pub options: Vec<(String, String)>,
    /// The key of the correct option (the files store a number; kept as its text).
    pub correct_option: String,
}

/// Parses a HiTZ file. Blank lines are skipped. Errors: invalid JSON, a missing or
/// ill-typed field, an empty option set, a `correct_option` that is not an option key.
pub fn parse_hitz(name: &str, text: &str) -> Result<(Vec<HitzItem>, Vec<Warning>)> {
    let mut items = Vec::new();
    let mut tally = Tally::new(name);
    for (line, row) in content_lines(text) {
        let record = parse_record(name, line, row)?;
        let question = record.string("question")?.to_owned();
        let options = record.string_map("options")?;
        if options.is_empty() {
            return Err(record.error("options", "the option set is empty"));
        }
        let correct_option = record.label("correct_option")?;
        if !options.iter().any(|(k, _)| *k == correct_option) {
            return Err(record.error(
                "correct_option",
                format!("correct_option `{correct_option}` is not an option key"),
            ));
        }
        for field in record.unknown_fields(&["question", "options", "correct_option"]) {
            tally.add(
                format!("ignored unknown field `{field}` on lines"),
                line.to_string(),
            );
        }
        items.push(HitzItem {
            line,
            question,
            options,
            correct_option,
        });
    }
    if items.is_empty() {
        return Err(Error::in_file(name, "the file has no lines"));
    }
    Ok((items, tally.into_warnings()))
}

/// Imports Ranking-Over-Scoring files into a bundle.
///
/// `no_argument` is (file name, text) of the No-Argument file; each source is (system,
/// file name, text). Records are matched by their order in the files. For every source
/// record, the question (trimmed) must start with the no-argument question (trimmed); the
/// rest, trimmed, is that system's argument. Options and correct_option must be equal.
/// Control-case files (label-only, noise, IR passages) are imported as sources too.
///
/// Instance ids are the 1-based line numbers of the records in the no-argument file, as
/// text ("1", "2", ...): the files have no ids, and a question repeated with its options
/// rotated is a separate instance.
///
/// Any mismatch refuses the import: the error lists every mismatch (file, line, field and
/// a short excerpt of where the texts part) up to [`MAX_LISTED_MISMATCHES`], then counts
/// the rest; differing record counts are reported too.
pub fn import_ranking_over_scoring(
    no_argument: (&str, &str),
    sources: &[(&str, &str, &str)],
) -> Result<(Bundle, Vec<Warning>)> {
    let (base_name, base_text) = no_argument;
    let (base, mut warnings) = parse_hitz(base_name, base_text)?;
    if let Some(item) = base.iter().find(|i| i.question.trim().is_empty()) {
        return Err(Error::input(
            base_name,
            item.line,
            "question",
            "the no-argument question is empty",
        ));
    }
    if sources.is_empty() {
        return Err(Error::invalid(
            "no source files to import (give at least one system's file)",
        ));
    }
    for (i, (system, file, _)) in sources.iter().enumerate() {
        if system.trim().is_empty() {
            return Err(Error::invalid(format!(
                "source file `{file}` has an empty system name"
            )));
        }
        if sources[..i].iter().any(|(s, _, _)| s == system) {
            return Err(Error::invalid(format!(
                "system `{system}` is given for two source files"
            )));
        }
    }

    let mut mismatches: Vec<(Location, String)> = Vec::new();
    let mut arguments: Vec<Vec<(String, String)>> = vec![Vec::new(); base.len()];
    for (system, file, text) in sources {
        let (items, source_warnings) = parse_hitz(file, text)?;
        warnings.extend(source_warnings);
        if items.len() != base.len() {
            mismatches.push((
                Location::file(*file),
                format!(
                    "has {} records but the no-argument file `{base_name}` has {}",
                    items.len(),
                    base.len()
                ),
            ));
        }
        for (index, (item, base_item)) in items.iter().zip(&base).enumerate() {
            let at = |field: &str| Location::at(*file, item.line, field);
            let base_question = base_item.question.trim();
            let question = item.question.trim();
            match question.strip_prefix(base_question) {
                Some(argument) => {
                    arguments[index].push((system.to_string(), argument.trim().to_owned()))
                }
                None => mismatches.push((
                    at("question"),
                    format!(
                        "does not start with the question on line {} of `{base_name}`: {}",
                        base_item.line,
                        where_texts_part(base_question, question)
                    ),
                )),
            }
            if item.options != base_item.options {
                mismatches.push((
                    at("options"),
                    options_difference(&base_item.options, &item.options, base_item.line),
                ));
            }
            if item.correct_option != base_item.correct_option {
                mismatches.push((
                    at("correct_option"),
                    format!(
                        "is {} but {} on line {} of `{base_name}`",
                        item.correct_option, base_item.correct_option, base_item.line
                    ),
                ));
            }
        }
    }
    if let Some((first, _)) = mismatches.first() {
        let mut message = format!(
            "import refused: {} mismatch(es) between the source files and the no-argument file `{base_name}`:",
            mismatches.len()
        );
        for (location, text) in mismatches.iter().take(MAX_LISTED_MISMATCHES) {
            message.push_str(&format!("\n  {location}: {text}"));
        }
        if mismatches.len() > MAX_LISTED_MISMATCHES {
            message.push_str(&format!(
                "\n  ... and {} more",
                mismatches.len() - MAX_LISTED_MISMATCHES
            ));
        }
        return Err(Error::Input {
            location: first.clone(),
            message,
        });
    }

    let instances: Vec<Instance> = base
        .into_iter()
        .zip(arguments)
        .map(|(item, arguments)| Instance {
            id: item.line.to_string(),
            problem: Problem::Mcqa {
                question: item.question.trim().to_owned(),
                options: item.options,
                answer: item.correct_option,
            },
            arguments,
            line: item.line,
        })
        .collect();
    let bundle = Bundle {
        name: base_name.to_owned(),
        systems: systems_in_order(&instances),
        instances,
    };
    warnings.extend(bundle_warnings(&bundle));
    Ok((bundle, warnings))
}

/// "expected "…rotated text" but found "…other text"", starting a little before the first
/// character where the two texts differ, so the user sees the difference at once.
fn where_texts_part(expected: &str, found: &str) -> String {
    let common = expected
        .chars()
        .zip(found.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let start = common.saturating_sub(15);
    let tail = |s: &str| {
        let rest: String = s.chars().skip(start).collect();
        let prefix = if start > 0 { "…" } else { "" };
        format!("{prefix}{}", excerpt(&rest, 50))
    };
    format!(
        "expected \"{}\", found \"{}\" (they differ at character {})",
        tail(expected),
        tail(found),
        common + 1
    )
}

fn options_difference(
    expected: &[(String, String)],
    found: &[(String, String)],
    base_line: usize,
) -> String {
    let keys = |o: &[(String, String)]| {
        o.iter()
            .map(|(k, _)| k.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if keys(expected) != keys(found) {
        return format!(
            "keys are {} but {} on line {base_line}",
            keys(found),
            keys(expected)
        );
    }
    let (key, text_expected, text_found) = expected
        .iter()
        .zip(found)
        .find(|(a, b)| a != b)
        .map(|((k, a), (_, b))| (k, a, b))
        .expect("options differ somewhere");
    format!(
        "option {key} differs from line {base_line}: expected \"{}\", found \"{}\"",
        excerpt(text_expected, 50),
        excerpt(text_found, 50)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_ARGUMENT: &str = include_str!("../../examples/ros/no_argument.jsonl");
    const GPT4O: &str = include_str!("../../examples/ros/gpt-4o.jsonl");
    const LLAMA: &str = include_str!("../../examples/ros/llama-3-70b.jsonl");
    const LABEL_ONLY: &str = include_str!("../../examples/ros/label_only.jsonl");

    fn sources() -> Vec<(&'static str, &'static str, &'static str)> {
        vec![
            ("gpt-4o", "ros/gpt-4o.jsonl", GPT4O),
            ("llama-3-70b", "ros/llama-3-70b.jsonl", LLAMA),
            ("label_only", "ros/label_only.jsonl", LABEL_ONLY),
        ]
    }

    #[test]
    fn example_files_import_into_a_bundle() {
        let (bundle, warnings) =
            import_ranking_over_scoring(("ros/no_argument.jsonl", NO_ARGUMENT), &sources())
                .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(bundle.systems, ["gpt-4o", "llama-3-70b", "label_only"]);
        let ids: Vec<&str> = bundle.instances.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "3", "4", "5", "6"]);
        // Line 6 is line 1's question with the correct answer rotated from 2 to 4.
        let (first, rotated) = (&bundle.instances[0], &bundle.instances[5]);
        assert_eq!(first.problem.query_text(), rotated.problem.query_text());
        assert_eq!((first.problem.gold(), rotated.problem.gold()), ("2", "4"));
        assert_eq!(
            rotated.argument("label_only"),
            Some("The correct answer is 4.")
        );
        let gpt = first.argument("gpt-4o").unwrap();
        assert!(
            gpt.starts_with("The combination of dry eyes") && gpt.ends_with("viral parotitis.")
        );
        assert!(first
            .problem
            .query_text()
            .ends_with("What is the most likely diagnosis?"));
        // The imported bundle survives the bundle writer and reader unchanged.
        let (again, _) =
            crate::data::parse_bundle(&bundle.name, &crate::data::write_bundle_jsonl(&bundle))
                .unwrap();
        assert_eq!(again, bundle);
    }

    #[test]
    fn every_mismatch_is_reported_and_the_import_refused() {
        // Line 2: the question text differs; line 3: an option differs; line 4: the correct
        // option differs; and the file has one line fewer.
        let broken: Vec<String> = GPT4O
            .lines()
            .take(5)
            .enumerate()
            .map(|(i, l)| match i {
                1 => l.replacen("67-year-old", "76-year-old", 1),
                2 => l.replacen("Alport syndrome.", "Alport's syndrome.", 1),
                3 => l.replacen("\"correct_option\": 1", "\"correct_option\": 2", 1),
                _ => l.to_owned(),
            })
            .collect();
        let broken = broken.join("\n");
        let err = import_ranking_over_scoring(
            ("no_argument.jsonl", NO_ARGUMENT),
            &[
                ("gpt-4o", "gpt-4o.jsonl", &broken),
                ("label_only", "label_only.jsonl", LABEL_ONLY),
            ],
        )
        .unwrap_err();
        let loc = err.location().unwrap();
        assert_eq!(
            (loc.file.as_str(), loc.line, loc.field.as_deref()),
            ("gpt-4o.jsonl", None, None)
        );
        let message = err.to_string();
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines[0], "gpt-4o.jsonl: import refused: 4 mismatch(es) between the source files and the no-argument file `no_argument.jsonl`:");
        assert_eq!(
            lines[1],
            "  gpt-4o.jsonl: has 5 records but the no-argument file `no_argument.jsonl` has 6"
        );
        assert_eq!(
            lines[2],
            "  gpt-4o.jsonl:2: field `question`: does not start with the question on line 2 of `no_argument.jsonl`: expected \"A 67-year-old man with stable exertional angina al…\", found \"A 76-year-old man with stable exertional angina al…\" (they differ at character 3)"
        );
        assert_eq!(
            lines[3],
            "  gpt-4o.jsonl:3: field `options`: option 4 differs from line 3: expected \"Alport syndrome.\", found \"Alport's syndrome.\""
        );
        assert_eq!(
            lines[4],
            "  gpt-4o.jsonl:4: field `correct_option`: is 2 but 1 on line 4 of `no_argument.jsonl`"
        );
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn long_mismatch_lists_are_capped_with_a_count() {
        let shifted: String = NO_ARGUMENT
            .lines()
            .map(|l| l.replacen("\"question\": \"", "\"question\": \"X ", 1) + "\n")
            .collect();
        let many: Vec<(String, String)> = (0..5)
            .map(|i| (format!("s{i}"), format!("s{i}.jsonl")))
            .collect();
        let sources: Vec<(&str, &str, &str)> = many
            .iter()
            .map(|(s, f)| (s.as_str(), f.as_str(), shifted.as_str()))
            .collect();
        let err = import_ranking_over_scoring(("n.jsonl", NO_ARGUMENT), &sources).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("import refused: 30 mismatch(es)"));
        assert!(message.ends_with("\n  ... and 10 more"), "{message}");
        assert_eq!(message.lines().count(), 1 + MAX_LISTED_MISMATCHES + 1);
        let loc = err.location().unwrap();
        assert_eq!(
            (loc.file.as_str(), loc.line, loc.field.as_deref()),
            ("s0.jsonl", Some(1), Some("question"))
        );
    }

    #[test]
    fn hitz_line_errors() {
        let err = parse_hitz(
            "h.jsonl",
            "{\"question\": \"q\", \"options\": {\"1\": \"a\"}, \"correct_option\": 2}",
        )
        .unwrap_err();
        let loc = err.location().unwrap();
        assert_eq!(
            (loc.line, loc.field.as_deref()),
            (Some(1), Some("correct_option"))
        );
        let err = parse_hitz(
            "h.jsonl",
            "\n{\"question\": \"q\", \"options\": {}, \"correct_option\": 1}",
        )
        .unwrap_err();
        let loc = err.location().unwrap();
        assert_eq!((loc.line, loc.field.as_deref()), (Some(2), Some("options")));
        let err = import_ranking_over_scoring(
            (
                "n",
                "{\"question\": \" \", \"options\": {\"1\": \"a\"}, \"correct_option\": 1}",
            ),
            &[("s", "s", "")],
        )
        .unwrap_err();
        assert_eq!(err.location().unwrap().field.as_deref(), Some("question"));
        let err = import_ranking_over_scoring(
            ("n", NO_ARGUMENT),
            &[("s", "a", GPT4O), ("s", "b", LLAMA)],
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "system `s` is given for two source files");
    }

    /// The real public file (Apache-2.0, HiTZ; vendored in data/casimedicos) read through
    /// the same line parser.
    #[test]
    fn real_casimedicos_dev_file_parses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/casimedicos/dev.jsonl");
        let text = std::fs::read_to_string(path).unwrap();
        let (items, warnings) = parse_hitz("dev.jsonl", &text).unwrap();
        assert!(warnings.is_empty());
        // Python 3: json.loads per line -> 280 records, correct_option 1..5 56 times each,
        // keys always 1..5, 165 records with an empty option text, and 259225 code points
        // in all questions together.
        assert_eq!(items.len(), 280);
        for key in ["1", "2", "3", "4", "5"] {
            assert_eq!(items.iter().filter(|i| i.correct_option == key).count(), 56);
        }
        assert!(items.iter().all(|i| i
            .options
            .iter()
            .map(|(k, _)| k.as_str())
            .eq(["1", "2", "3", "4", "5"])));
        assert_eq!(
            items
                .iter()
                .filter(|i| i.options.iter().any(|(_, t)| t.trim().is_empty()))
                .count(),
            165
        );
        assert_eq!(
            items
                .iter()
                .map(|i| i.question.chars().count())
                .sum::<usize>(),
            259225
        );
    }
}
