//! Importer for the public Ranking-Over-Scoring MCQA files (HiTZ format, methods.md §1):
//! one JSON object per line, `{"question", "options", "correct_option"}`, where a source
//! file's question is the bare question of the No-Argument file followed by the argument.
//! Importing a no-argument file and several source files gives an argument bundle.

use crate::data::bundle::{bundle_warnings, systems_in_order};
use crate::data::common::{check_line_ends, content_lines, excerpt, nothing_to_read, Tally};
use crate::data::json::parse_record;
use crate::data::{is_empty_option, Bundle, Instance, Problem};
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
    check_line_ends(name, text)?;
    for (line, row) in content_lines(text) {
        let record = parse_record(name, line, row)?;
        let question = record.string("question")?.to_owned();
        let options = record.string_map("options")?;
        if options.is_empty() {
            return Err(record.error("options", "the option set is empty"));
        }
        let correct_option = record.label("correct_option")?;
        if !options.iter().any(|(k, _)| *k == correct_option) {
            return Err(
                record.error("correct_option", format!("correct_option `{correct_option}` is not an option key"))
            );
        }
        for field in record.unknown_fields(&["question", "options", "correct_option"]) {
            tally.add(format!("ignored unknown field `{field}` on lines"), line.to_string());
        }
        items.push(HitzItem { line, question, options, correct_option });
    }
    if items.is_empty() {
        return Err(nothing_to_read(name, text, "the file has no lines"));
    }
    Ok((items, tally.into_warnings()))
}

/// Imports Ranking-Over-Scoring files into a bundle.
///
/// `no_argument` is (file name, text) of the No-Argument file; each source is (system,
/// file name, text). Records are matched by their order in the files. For every source
/// record, the question (trimmed) must start with the no-argument question (trimmed); the
/// rest, trimmed, is that system's argument. Options must be the same texts (in any order,
/// see below) with the same correct text.
/// Control-case files (label-only, noise, IR passages) are imported as sources too.
///
/// Instance ids are the 1-based line numbers of the records in the no-argument file, as
/// text ("1", "2", ...): the files have no ids, and a question repeated with its options
/// rotated is a separate instance.
///
/// Any mismatch refuses the import: the error lists every mismatch (file, line, field and
/// a short excerpt of where the texts part) up to [`MAX_LISTED_MISMATCHES`], then counts
/// the rest; differing record counts are reported too.
///
/// The published files list the same five option texts in each file's own order (the
/// `correct_option` index follows the shuffle), so options are aligned by text: a source
/// record whose option texts (trimmed) are the same multiset as the no-argument record's,
/// and whose correct option has the same text, is imported in the no-argument file's order
/// and counted in [`Imported::reordered`]. Another option set, or another correct text,
/// is a mismatch.
pub fn import_ranking_over_scoring(
    no_argument: (&str, &str),
    sources: &[(&str, &str, &str)],
) -> Result<(Bundle, Vec<Warning>)> {
    import_aligned(no_argument, sources).map(|i| (i.bundle, i.warnings))
}

/// What an import gives: the bundle, the readers' warnings, and per source (system, file)
/// how many records listed their options in another order than the no-argument file.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub bundle: Bundle,
    pub warnings: Vec<Warning>,
    pub reordered: Vec<(String, usize)>,
    /// Per source (system, reordered records whose argument names an option by its number,
    /// "The correct answer is 4.", rewritten to the no-argument order: [`relabel`]).
    pub relabelled: Vec<(String, usize)>,
    /// Per source (system, records with an empty option text, see
    /// [`crate::data::is_empty_option`]), in the order of the sources.
    pub empty_options: Vec<(String, usize)>,
    /// Records of the no-argument file with an empty option text.
    pub base_empty_options: usize,
}

/// How a source record's options relate to the no-argument record's.
#[derive(Debug, PartialEq)]
enum Options {
    Same,
    /// The same texts in another order, the correct option's text the same.
    Reordered,
    /// Another set of option texts.
    OtherSet,
    /// The same texts, but the correct option is another one.
    OtherCorrect,
}

fn compare_options(base: &HitzItem, item: &HitzItem) -> Options {
    if item.options == base.options {
        return if item.correct_option == base.correct_option { Options::Same } else { Options::OtherCorrect };
    }
    if sorted_texts(item) != sorted_texts(base) {
        return Options::OtherSet;
    }
    if correct_text(item) == correct_text(base) {
        Options::Reordered
    } else {
        Options::OtherCorrect
    }
}

fn sorted_texts(item: &HitzItem) -> Vec<&str> {
    let mut texts: Vec<&str> = item.options.iter().map(|(_, t)| t.trim()).collect();
    texts.sort_unstable();
    texts
}

fn correct_text(item: &HitzItem) -> Option<&str> {
    item.options.iter().find(|(k, _)| *k == item.correct_option).map(|(_, t)| t.trim())
}

/// [`import_ranking_over_scoring`] with the count of reordered records per source.
pub fn import_aligned(no_argument: (&str, &str), sources: &[(&str, &str, &str)]) -> Result<Imported> {
    let (base_name, base_text) = no_argument;
    let (base, mut warnings) = parse_hitz(base_name, base_text)?;
    if let Some(item) = base.iter().find(|i| i.question.trim().is_empty()) {
        return Err(Error::input(base_name, item.line, "question", "the no-argument question is empty"));
    }
    if sources.is_empty() {
        return Err(Error::invalid("no source files to import (give at least one system's file)"));
    }
    for (i, (system, file, _)) in sources.iter().enumerate() {
        if system.trim().is_empty() {
            return Err(Error::invalid(format!("source file `{file}` has an empty system name")));
        }
        if sources[..i].iter().any(|(s, _, _)| s == system) {
            return Err(Error::invalid(format!("system `{system}` is given for two source files")));
        }
    }

    let mut mismatches: Vec<(Location, String)> = Vec::new();
    let mut arguments: Vec<Vec<(String, String)>> = vec![Vec::new(); base.len()];
    let mut reordered = Vec::new();
    let mut relabelled = Vec::new();
    let mut empty_options = Vec::new();
    let with_empty =
        |items: &[HitzItem]| items.iter().filter(|i| i.options.iter().any(|(_, t)| is_empty_option(t))).count();
    let base_empty_options = with_empty(&base);
    for (system, file, text) in sources {
        let (mut reordered_here, mut relabelled_here) = (0, 0);
        let (items, source_warnings) = parse_hitz(file, text)?;
        warnings.extend(source_warnings);
        if items.len() != base.len() {
            mismatches.push((
                Location::file(*file),
                format!("has {} records but the no-argument file `{base_name}` has {}", items.len(), base.len()),
            ));
        }
        for (index, (item, base_item)) in items.iter().zip(&base).enumerate() {
            let at = |field: &str| Location::at(*file, item.line, field);
            let base_question = base_item.question.trim();
            let question = item.question.trim();
            let mut argument = match question.strip_prefix(base_question) {
                Some(argument) => Some(argument.trim().to_owned()),
                None => {
                    mismatches.push((
                        at("question"),
                        format!(
                            "does not start with the question on line {} of `{base_name}`: {}",
                            base_item.line,
                            where_texts_part(base_question, question)
                        ),
                    ));
                    None
                }
            };
            match compare_options(base_item, item) {
                Options::Same => {}
                Options::Reordered => {
                    reordered_here += 1;
                    // An argument that names an option by its number names it in this
                    // record's order: renumbered to the no-argument order, or refused.
                    if let Some(text) = &mut argument {
                        match relabel(text, base_item, item) {
                            Ok(Some(renamed)) => {
                                *text = renamed;
                                relabelled_here += 1;
                            }
                            Ok(None) => {}
                            Err(why) => mismatches.push((at("question"), why)),
                        }
                    }
                }
                Options::OtherSet => mismatches
                    .push((at("options"), options_difference(&base_item.options, &item.options, base_item.line))),
                Options::OtherCorrect => mismatches.push((
                    at("correct_option"),
                    format!(
                        "is {} but {} on line {} of `{base_name}`",
                        item.correct_option, base_item.correct_option, base_item.line
                    ),
                )),
            }
            if let Some(argument) = argument {
                arguments[index].push((system.to_string(), argument));
            }
        }
        if reordered_here > 0 {
            warnings.push(Warning::new(format!(
                "{file} (system `{system}`): {reordered_here} of {} records list the options in another order than `{base_name}`; \
                 imported in its order (same option texts, same correct text)",
                items.len()
            )));
        }
        if relabelled_here > 0 {
            warnings.push(Warning::new(format!(
                "{file} (system `{system}`): {relabelled_here} of these records name the correct option by its number (\"The correct answer is 4.\"); the number was rewritten to the option's number in `{base_name}`"
            )));
        }
        reordered.push((system.to_string(), reordered_here));
        relabelled.push((system.to_string(), relabelled_here));
        empty_options.push((system.to_string(), with_empty(&items)));
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
            message.push_str(&format!("\n  ... and {} more", mismatches.len() - MAX_LISTED_MISMATCHES));
        }
        return Err(Error::Input { location: first.clone(), message });
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
    let bundle =
        Bundle { name: base_name.to_owned(), systems: systems_in_order(&instances), instances, controls: Vec::new() };
    warnings.extend(bundle_warnings(&bundle));
    Ok(Imported { bundle, warnings, reordered, relabelled, empty_options, base_empty_options })
}

/// The words after which a HiTZ argument names an option by its number: the label-only
/// files' sentence "The correct answer is 4." (matched without regard to case, anywhere in
/// the argument).
const LABEL_PHRASE: &str = "correct answer is ";

/// Longest argument (in words) that [`relabel`] takes for a label sentence in other words
/// ("La respuesta correcta es 4."): a short argument ending in an option key.
const SHORT_LABEL_WORDS: usize = 8;

/// A reordered record's argument with every option number it names (after
/// [`LABEL_PHRASE`]) renumbered from `item`'s order to `base`'s, by the option's text:
/// `Ok(None)` when it names none (or every number stays), `Err` when a number cannot be
/// renumbered for sure: it is no key of `item`, its text is the text of several options,
/// or a short argument ends in an option key in other words than the phrase (a label
/// sentence in another language, which may or may not mean the option).
fn relabel(argument: &str, base: &HitzItem, item: &HitzItem) -> std::result::Result<Option<String>, String> {
    let keys = |o: &[(String, String)]| o.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ");
    let renumber = |key: &str| -> std::result::Result<String, String> {
        let text = item.options.iter().find(|(k, _)| k == key).map(|(_, t)| t.trim()).ok_or_else(|| {
            format!(
                "the argument names option {key} (\"{}\"), which this record does not have (keys: {}); its options are in another order than the no-argument file's, so the number cannot be renumbered",
                excerpt(argument, 60),
                keys(&item.options)
            )
        })?;
        let same: Vec<&str> = base.options.iter().filter(|(_, t)| t.trim() == text).map(|(k, _)| k.as_str()).collect();
        match same[..] {
            [only] => Ok(only.to_owned()),
            _ => Err(format!(
                "the argument names option {key} (\"{}\"), whose text is that of options {} of the no-argument order: which one it means cannot be told",
                excerpt(text, 40),
                same.join(" and ")
            )),
        }
    };
    let lower = argument.to_lowercase();
    let mut out = String::with_capacity(argument.len());
    let mut copied = 0;
    let mut named = false;
    // `to_lowercase` keeps byte offsets for ASCII only: search the original text when it
    // is not, so offsets always index `argument`.
    let haystack = if lower.len() == argument.len() { lower.as_str() } else { argument };
    for (at, _) in haystack.match_indices(LABEL_PHRASE) {
        let start = at + LABEL_PHRASE.len();
        let key: String = argument[start..].chars().take_while(|c| c.is_alphanumeric()).collect();
        if key.is_empty() {
            continue;
        }
        named = true;
        out.push_str(&argument[copied..start]);
        out.push_str(&renumber(&key)?);
        copied = start + key.len();
    }
    if !named {
        // A short argument ending in an option key: a label sentence in other words.
        let words: Vec<&str> = argument.split_whitespace().collect();
        let last = words.last().map(|w| w.trim_end_matches(|c: char| !c.is_alphanumeric())).unwrap_or("");
        if words.len() <= SHORT_LABEL_WORDS && item.options.iter().any(|(k, _)| k == last) && renumber(last)? != last {
            return Err(format!(
                "the argument \"{}\" ends in option key {last}, and this record lists its options in another order than the no-argument file: if it names option {last}, it names another option there; give the file with the no-argument file's option order",
                excerpt(argument, 60)
            ));
        }
        return Ok(None);
    }
    out.push_str(&argument[copied..]);
    Ok((out != argument).then_some(out))
}

/// "expected "…rotated text" but found "…other text"", starting a little before the first
/// character where the two texts differ, so the user sees the difference at once.
fn where_texts_part(expected: &str, found: &str) -> String {
    let common = expected.chars().zip(found.chars()).take_while(|(a, b)| a == b).count();
    let start = common.saturating_sub(15);
    let tail = |s: &str| {
        let rest: String = s.chars().skip(start).collect();
        let prefix = if start > 0 { "…" } else { "" };
        format!("{prefix}{}", excerpt(&rest, 50))
    };
    format!("expected \"{}\", found \"{}\" (they differ at character {})", tail(expected), tail(found), common + 1)
}

fn options_difference(expected: &[(String, String)], found: &[(String, String)], base_line: usize) -> String {
    let keys = |o: &[(String, String)]| o.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>().join(", ");
    if keys(expected) != keys(found) {
        return format!("keys are {} but {} on line {base_line}", keys(found), keys(expected));
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
            import_ranking_over_scoring(("ros/no_argument.jsonl", NO_ARGUMENT), &sources()).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(bundle.systems, ["gpt-4o", "llama-3-70b", "label_only"]);
        let ids: Vec<&str> = bundle.instances.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "3", "4", "5", "6"]);
        // Line 6 is line 1's question with the correct answer rotated from 2 to 4.
        let (first, rotated) = (&bundle.instances[0], &bundle.instances[5]);
        assert_eq!(first.problem.query_text(), rotated.problem.query_text());
        assert_eq!((first.problem.gold(), rotated.problem.gold()), ("2", "4"));
        assert_eq!(rotated.argument("label_only"), Some("The correct answer is 4."));
        let gpt = first.argument("gpt-4o").unwrap();
        assert!(gpt.starts_with("The combination of dry eyes") && gpt.ends_with("viral parotitis."));
        assert!(first.problem.query_text().ends_with("What is the most likely diagnosis?"));
        // The imported bundle survives the bundle writer and reader unchanged.
        let (again, _) = crate::data::parse_bundle(&bundle.name, &crate::data::write_bundle_jsonl(&bundle)).unwrap();
        assert_eq!(again, bundle);
    }

    /// Rewrites one HiTZ line with its options in the order `order` (indices into the
    /// line's options), moving `correct_option` with its text: what the published source
    /// files do to the no-argument file's order.
    fn shuffled(line: &str, order: &[usize]) -> String {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let options: Vec<(String, String)> = v["options"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, t)| (k.clone(), t.as_str().unwrap().to_owned()))
            .collect();
        let correct = v["correct_option"].to_string();
        let mut new_options = serde_json::Map::new();
        let mut new_correct = 0;
        for (slot, &from) in order.iter().enumerate() {
            new_options.insert((slot + 1).to_string(), serde_json::Value::String(options[from].1.clone()));
            if options[from].0 == correct {
                new_correct = slot + 1;
            }
        }
        v["options"] = serde_json::Value::Object(new_options);
        v["correct_option"] = serde_json::json!(new_correct);
        v.to_string()
    }

    #[test]
    fn sources_that_list_the_options_in_their_own_order_import_in_the_no_argument_order() {
        // gpt-4o's lines 1 and 3 shuffled (5 options each; an extra space too), the rest
        // untouched: the bundle is the one of the untouched files, and 2 records are counted.
        let gpt: Vec<String> = GPT4O
            .lines()
            .enumerate()
            .map(|(i, l)| match i {
                0 => shuffled(l, &[4, 2, 0, 1, 3]),
                2 => shuffled(l, &[1, 0, 4, 3, 2]).replacen("\"1\": \"", "\"1\": \" ", 1),
                _ => l.to_owned(),
            })
            .collect();
        let gpt = gpt.join("\n");
        let mut shuffled_sources = sources();
        shuffled_sources[0].2 = &gpt;
        let imported = import_aligned(("ros/no_argument.jsonl", NO_ARGUMENT), &shuffled_sources).unwrap();
        let (expected, _) = import_ranking_over_scoring(("ros/no_argument.jsonl", NO_ARGUMENT), &sources()).unwrap();
        assert_eq!(imported.bundle, expected);
        assert_eq!(
            imported.reordered,
            [("gpt-4o".to_string(), 2), ("llama-3-70b".to_string(), 0), ("label_only".to_string(), 0)]
        );
        assert_eq!(imported.warnings.len(), 1);
        assert_eq!(
            imported.warnings[0].message,
            "ros/gpt-4o.jsonl (system `gpt-4o`): 2 of 6 records list the options in another order than `ros/no_argument.jsonl`; imported in its order (same option texts, same correct text)"
        );

        // A real mismatch stays an error at its line: the same texts with another correct
        // option (line 2), and another option set (line 4, one text changed).
        let bad: Vec<String> = GPT4O
            .lines()
            .enumerate()
            .map(|(i, l)| match i {
                1 => {
                    let mut v: serde_json::Value = serde_json::from_str(&shuffled(l, &[4, 3, 2, 1, 0])).unwrap();
                    let c = v["correct_option"].as_u64().unwrap();
                    v["correct_option"] = serde_json::json!(c % 5 + 1);
                    v.to_string()
                }
                3 => {
                    let mut v: serde_json::Value = serde_json::from_str(&shuffled(l, &[1, 2, 3, 4, 0])).unwrap();
                    let text = format!("{} (changed)", v["options"]["1"].as_str().unwrap());
                    v["options"]["1"] = serde_json::json!(text);
                    v.to_string()
                }
                _ => l.to_owned(),
            })
            .collect();
        let bad = bad.join("\n");
        let err = import_aligned(("no_argument.jsonl", NO_ARGUMENT), &[("gpt-4o", "gpt-4o.jsonl", &bad)]).unwrap_err();
        let message = err.to_string();
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines.len(), 3, "{message}");
        assert!(lines[1].starts_with("  gpt-4o.jsonl:2: field `correct_option`: is "), "{message}");
        assert!(lines[2].starts_with("  gpt-4o.jsonl:4: field `options`: option "), "{message}");
    }

    #[test]
    fn a_label_only_file_in_another_option_order_names_the_option_in_the_no_argument_order() {
        // Line 1 of the label-only file with its options shuffled, the sentence following
        // its own order as a published file has it: the correct text, option 2 in the
        // no-argument file, is option 4 here, and the sentence says 4. The options were
        // put back in the no-argument order but "The correct answer is 4." stayed, naming
        // Systemic lupus erythematosus instead of Sjögren's syndrome.
        let with_sentence = |order: &[usize], sentence: &str| -> String {
            let mut lines: Vec<String> = LABEL_ONLY.lines().map(str::to_owned).collect();
            lines[0] = shuffled(&lines[0], order).replace("The correct answer is 2.", sentence);
            lines.join("\n")
        };
        let label = with_sentence(&[4, 2, 0, 1, 3], "The correct answer is 4.");
        assert!(label.contains("\"correct_option\":4") && label.contains("The correct answer is 4."), "{label}");
        let mut shuffled_sources = sources();
        shuffled_sources[2].2 = &label;
        let imported = import_aligned(("ros/no_argument.jsonl", NO_ARGUMENT), &shuffled_sources).unwrap();
        let (expected, _) = import_ranking_over_scoring(("ros/no_argument.jsonl", NO_ARGUMENT), &sources()).unwrap();
        assert_eq!(imported.bundle.instances[0].argument("label_only"), Some("The correct answer is 2."));
        assert_eq!(imported.bundle, expected);
        let counts = |system: &str, n: usize| (system.to_string(), n);
        assert_eq!(imported.relabelled, [counts("gpt-4o", 0), counts("llama-3-70b", 0), counts("label_only", 1)]);
        assert_eq!(imported.reordered, [counts("gpt-4o", 0), counts("llama-3-70b", 0), counts("label_only", 1)]);
        assert_eq!(
            imported.warnings[1].message,
            "ros/label_only.jsonl (system `label_only`): 1 of these records name the correct option by its number (\"The correct answer is 4.\"); the number was rewritten to the option's number in `ros/no_argument.jsonl`"
        );

        // What cannot be renumbered for sure is refused at its line: a number that is no
        // option of the record, and a short sentence in other words ending in a key.
        let refused = |sentence: &str| {
            let label = with_sentence(&[4, 2, 0, 1, 3], sentence);
            let mut bad = sources();
            bad[2].2 = &label;
            import_aligned(("ros/no_argument.jsonl", NO_ARGUMENT), &bad).unwrap_err().to_string()
        };
        let message = refused("The correct answer is 9.");
        assert!(message.contains("\n  ros/label_only.jsonl:1: field `question`: the argument names option 9 (\"The correct answer is 9.\"), which this record does not have (keys: 1, 2, 3, 4, 5)"), "{message}");
        let message = refused("La respuesta correcta es 4.");
        assert!(message.contains("\n  ros/label_only.jsonl:1: field `question`: the argument \"La respuesta correcta es 4.\" ends in option key 4, and this record lists its options in another order"), "{message}");
        // In the no-argument order, nothing is renumbered.
        let (same, _) = import_ranking_over_scoring(("n.jsonl", NO_ARGUMENT), &sources()).unwrap();
        assert_eq!(same.instances[5].argument("label_only"), Some("The correct answer is 4."));
    }

    #[test]
    fn records_with_an_empty_option_are_counted_per_file() {
        // Option 5 emptied on lines 1 and 3 of every file (never the correct one there), and
        // gpt-4o's line 3 shuffled so that the empty text moves to key 1: the same multiset.
        let empty5 = |text: &str| -> String {
            text.lines()
                .enumerate()
                .map(|(i, l)| {
                    let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                    if i == 0 || i == 2 {
                        v["options"]["5"] = serde_json::json!("");
                    }
                    v.to_string() + "\n"
                })
                .collect()
        };
        let base = empty5(NO_ARGUMENT);
        let gpt: String = empty5(GPT4O)
            .lines()
            .enumerate()
            .map(|(i, l)| if i == 2 { shuffled(l, &[4, 0, 1, 2, 3]) } else { l.to_owned() } + "\n")
            .collect();
        let label = empty5(LABEL_ONLY);
        let imported =
            import_aligned(("n.jsonl", &base), &[("gpt-4o", "g.jsonl", &gpt), ("label_only", "l.jsonl", &label)])
                .unwrap();
        assert_eq!(imported.base_empty_options, 2);
        assert_eq!(imported.empty_options, [("gpt-4o".to_string(), 2), ("label_only".to_string(), 2)]);
        assert_eq!(imported.reordered, [("gpt-4o".to_string(), 1), ("label_only".to_string(), 0)]);
        let Problem::Mcqa { options, .. } = &imported.bundle.instances[2].problem else { panic!() };
        assert_eq!((options[4].0.as_str(), options[4].1.as_str()), ("5", ""));
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
            &[("gpt-4o", "gpt-4o.jsonl", &broken), ("label_only", "label_only.jsonl", LABEL_ONLY)],
        )
        .unwrap_err();
        let loc = err.location().unwrap();
        assert_eq!((loc.file.as_str(), loc.line, loc.field.as_deref()), ("gpt-4o.jsonl", None, None));
        let message = err.to_string();
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines[0], "gpt-4o.jsonl: import refused: 4 mismatch(es) between the source files and the no-argument file `no_argument.jsonl`:");
        assert_eq!(lines[1], "  gpt-4o.jsonl: has 5 records but the no-argument file `no_argument.jsonl` has 6");
        assert_eq!(
            lines[2],
            "  gpt-4o.jsonl:2: field `question`: does not start with the question on line 2 of `no_argument.jsonl`: expected \"A 67-year-old man with stable exertional angina al…\", found \"A 76-year-old man with stable exertional angina al…\" (they differ at character 3)"
        );
        assert_eq!(
            lines[3],
            "  gpt-4o.jsonl:3: field `options`: option 4 differs from line 3: expected \"Alport syndrome.\", found \"Alport's syndrome.\""
        );
        assert_eq!(lines[4], "  gpt-4o.jsonl:4: field `correct_option`: is 2 but 1 on line 4 of `no_argument.jsonl`");
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn long_mismatch_lists_are_capped_with_a_count() {
        let shifted: String =
            NO_ARGUMENT.lines().map(|l| l.replacen("\"question\": \"", "\"question\": \"X ", 1) + "\n").collect();
        let many: Vec<(String, String)> = (0..5).map(|i| (format!("s{i}"), format!("s{i}.jsonl"))).collect();
        let sources: Vec<(&str, &str, &str)> =
            many.iter().map(|(s, f)| (s.as_str(), f.as_str(), shifted.as_str())).collect();
        let err = import_ranking_over_scoring(("n.jsonl", NO_ARGUMENT), &sources).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("import refused: 30 mismatch(es)"));
        assert!(message.ends_with("\n  ... and 10 more"), "{message}");
        assert_eq!(message.lines().count(), 1 + MAX_LISTED_MISMATCHES + 1);
        let loc = err.location().unwrap();
        assert_eq!((loc.file.as_str(), loc.line, loc.field.as_deref()), ("s0.jsonl", Some(1), Some("question")));
    }

    #[test]
    fn hitz_line_errors() {
        let err = parse_hitz("h.jsonl", "{\"question\": \"q\", \"options\": {\"1\": \"a\"}, \"correct_option\": 2}")
            .unwrap_err();
        let loc = err.location().unwrap();
        assert_eq!((loc.line, loc.field.as_deref()), (Some(1), Some("correct_option")));
        let err = parse_hitz("h.jsonl", "\n{\"question\": \"q\", \"options\": {}, \"correct_option\": 1}").unwrap_err();
        let loc = err.location().unwrap();
        assert_eq!((loc.line, loc.field.as_deref()), (Some(2), Some("options")));
        let err = import_ranking_over_scoring(
            ("n", "{\"question\": \" \", \"options\": {\"1\": \"a\"}, \"correct_option\": 1}"),
            &[("s", "s", "")],
        )
        .unwrap_err();
        assert_eq!(err.location().unwrap().field.as_deref(), Some("question"));
        let err = import_ranking_over_scoring(("n", NO_ARGUMENT), &[("s", "a", GPT4O), ("s", "b", LLAMA)]).unwrap_err();
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
        assert!(items.iter().all(|i| i.options.iter().map(|(k, _)| k.as_str()).eq(["1", "2", "3", "4", "5"])));
        assert_eq!(items.iter().filter(|i| i.options.iter().any(|(_, t)| t.trim().is_empty())).count(), 165);
        assert_eq!(items.iter().map(|i| i.question.chars().count()).sum::<usize>(), 259225);
    }
}
