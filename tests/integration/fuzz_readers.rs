//! Every reader against hostile input: many seeded random mutations of the example files
//! (byte flips, truncation, duplicated, deleted and swapped lines, huge and odd numbers,
//! deep nesting, stray bytes). Each mutated text must be read without a panic, and either
//! accepted or refused with an error that names the file and a line (so it can be shown
//! next to it). And the property that makes a reader trustworthy: a benign change (spaces
//! at the start or end of lines where the format allows them, a byte-order mark, CRLF line
//! ends, the keys of each JSONL object in another order) gives exactly the result of the
//! unchanged file (compared whole, warnings included, through `Debug`).
//!
//! Seeded (ChaCha8), so a failure is reproducible: the message gives the reader, the case
//! number and the mutated text's start. Small enough for CI: a few hundred cases per reader,
//! well under a second each in a debug build.

use medrank::data;
use medrank::eval::rubric;
use medrank::Error;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Mutated texts per reader.
const CASES: u64 = 300;

/// Benign changes per reader.
const BENIGN_CASES: u64 = 60;

/// Numbers that break naive readers: overflow, underflow, not finite, beyond u32/i64.
const ODD_NUMBERS: [&str; 10] = [
    "1e308",
    "-1e308",
    "1e309",
    "99999999999999999999999999",
    "-9223372036854775809",
    "4294967296",
    "1e-320",
    "NaN",
    "inf",
    "-0",
];

/// Text spliced in by the "stray bytes" mutation.
const STRAY: [&str; 9] = ["\"", ",", "\t", "\0", "\u{feff}", "\r", "\\", "}", "<"];

/// One random change to `text`.
fn mutate_once(rng: &mut ChaCha8Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let at_line = |rng: &mut ChaCha8Rng, n: usize| rng.gen_range(0..n.max(1));
    match rng.gen_range(0..8) {
        0 => {
            // Flip one bit of one byte; the result may not be UTF-8 (readers take text: the
            // CLI refuses such a file before them, the page decodes it lossily, like here).
            let mut bytes = text.as_bytes().to_vec();
            if !bytes.is_empty() {
                let i = rng.gen_range(0..bytes.len());
                bytes[i] ^= 1 << rng.gen_range(0..8);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
        1 => {
            let cut = rng.gen_range(0..=text.len());
            String::from_utf8_lossy(&text.as_bytes()[..cut]).into_owned()
        }
        2 => {
            let i = at_line(rng, lines.len());
            let line = lines[i].clone();
            lines.insert(i, line);
            lines.join("\n")
        }
        3 => {
            let i = at_line(rng, lines.len());
            lines.remove(i);
            lines.join("\n")
        }
        4 => {
            let (i, j) = (at_line(rng, lines.len()), at_line(rng, lines.len()));
            lines.swap(i, j);
            lines.join("\n")
        }
        5 => {
            // Replace a run of digits (a rank, a grade, a score, a probability's decimals).
            let starts: Vec<usize> = text
                .char_indices()
                .filter(|&(i, c)| c.is_ascii_digit() && !text[..i].ends_with(|p: char| p.is_ascii_digit()))
                .map(|(i, _)| i)
                .collect();
            let number = ODD_NUMBERS[rng.gen_range(0..ODD_NUMBERS.len())];
            match starts.get(at_line(rng, starts.len())) {
                Some(&start) => {
                    let end =
                        text[start..].find(|c: char| !c.is_ascii_digit() && c != '.').map_or(text.len(), |e| start + e);
                    format!("{}{number}{}", &text[..start], &text[end..])
                }
                None => format!("{text}{number}"),
            }
        }
        6 => {
            // Deep nesting, JSON or XML, somewhere in a line.
            let depth = [200, 20_000][rng.gen_range(0..2)];
            let nest = match rng.gen_range(0..3) {
                0 => format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
                1 => format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth)),
                _ => format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth)),
            };
            let i = at_line(rng, lines.len());
            let cut = floor_char_boundary(&lines[i], rng.gen_range(0..=lines[i].len()));
            lines[i].insert_str(cut, &nest);
            lines.join("\n")
        }
        _ => {
            let i = at_line(rng, lines.len());
            let cut = floor_char_boundary(&lines[i], rng.gen_range(0..=lines[i].len()));
            lines[i].insert_str(cut, STRAY[rng.gen_range(0..STRAY.len())]);
            lines.join("\n")
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Feeds `CASES` mutations (one to three changes each) of every example to `read`, which
/// gets the file name and the text. Panics (the test fails) on a reader panic or on an
/// error that does not name the file and a line. Then [`benign`] changes.
fn fuzz<T: std::fmt::Debug>(
    reader: &str,
    seed: u64,
    examples: &[(&str, &str)],
    read: impl Fn(&str, &str) -> Result<T, Error>,
) {
    benign(reader, seed, examples, &read);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut accepted, mut refused) = (0, 0);
    for case in 0..CASES {
        let (name, original) = examples[case as usize % examples.len()];
        let mut text = original.to_owned();
        for _ in 0..rng.gen_range(1..=3) {
            text = mutate_once(&mut rng, &text);
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(name, &text)));
        let head: String = text.chars().take(200).collect();
        match outcome {
            Err(_) => panic!("{reader}: case {case} (seed {seed}) panicked on a mutation of {name}: {head:?}"),
            Ok(Ok(_)) => accepted += 1,
            Ok(Err(e)) => {
                let located = e.location().is_some_and(|l| l.file == name && l.line.is_some());
                assert!(
                    located,
                    "{reader}: case {case} (seed {seed}): the error does not name {name} and a line: {e}\ninput: {head:?}"
                );
                refused += 1;
            }
        }
    }
    // The corpus must exercise both paths, or it tests nothing.
    assert!(refused > 0, "{reader}: no mutation was refused");
    assert!(accepted + refused == CASES);
}

/// How an example's lines may change without changing what it says.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// One JSON object per line: spaces anywhere between tokens, keys in any order.
    Jsonl,
    /// CSV with cells trimmed: spaces at the end of a line, and at its start unless it
    /// starts with a quoted cell (a quote opens one only as a cell's first character).
    Csv,
    /// Whitespace-separated or tab-separated cells, trimmed: spaces at both ends.
    Cells,
    /// XML: spaces at both ends of a line, except before the declaration on line 1.
    Xml,
}

fn layout_of(name: &str, text: &str) -> Layout {
    match name.rsplit('.').next() {
        Some("jsonl") => Layout::Jsonl,
        Some("csv") => Layout::Csv,
        Some("xml") => Layout::Xml,
        _ if text.trim_start().starts_with('{') => Layout::Jsonl,
        _ => Layout::Cells,
    }
}

/// One to four benign changes of `text`: keys shuffled (JSONL), spaces at line ends, CRLF,
/// a byte-order mark.
fn benign_change(rng: &mut ChaCha8Rng, name: &str, text: &str) -> String {
    let layout = layout_of(name, text);
    let which: u8 = rng.gen_range(1..16);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if which & 1 != 0 && layout == Layout::Jsonl {
        for line in lines.iter_mut().filter(|l| !l.trim().is_empty()) {
            let serde_json::Value::Object(map) = serde_json::from_str(line).unwrap() else { panic!("{name}: {line}") };
            let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
            entries.shuffle(rng);
            *line = serde_json::Value::Object(entries.into_iter().collect()).to_string();
        }
    }
    if which & 2 != 0 {
        let spaces = |rng: &mut ChaCha8Rng| " ".repeat(rng.gen_range(1..4));
        for (i, line) in lines.iter_mut().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let lead = match layout {
                Layout::Xml => i > 0,
                Layout::Csv => !line.starts_with('"'),
                Layout::Jsonl | Layout::Cells => true,
            };
            if lead && rng.gen_bool(0.5) {
                line.insert_str(0, &spaces(rng));
            }
            if rng.gen_bool(0.5) {
                line.push_str(&spaces(rng));
            }
        }
    }
    let ending = if which & 4 != 0 { "\r\n" } else { "\n" };
    let mut out = lines.join(ending);
    if text.ends_with('\n') {
        out.push_str(ending);
    }
    if which & 8 != 0 {
        out.insert(0, '\u{feff}');
    }
    out
}

/// `BENIGN_CASES` benign changes of the examples must give what the examples give, whole.
fn benign<T: std::fmt::Debug>(
    reader: &str,
    seed: u64,
    examples: &[(&str, &str)],
    read: &impl Fn(&str, &str) -> Result<T, Error>,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xbe9e);
    let expected: Vec<String> = examples
        .iter()
        .map(|(name, text)| match read(name, text) {
            Ok(value) => format!("{value:?}"),
            Err(e) => panic!("{reader}: the example {name} is refused: {e}"),
        })
        .collect();
    for case in 0..BENIGN_CASES {
        let k = case as usize % examples.len();
        let (name, original) = examples[k];
        let text = benign_change(&mut rng, name, original);
        let head: String = text.chars().take(200).collect();
        match read(name, &text) {
            Ok(value) => assert!(
                format!("{value:?}") == expected[k],
                "{reader}: benign case {case} (seed {seed}) of {name} reads differently: {head:?}"
            ),
            Err(e) => panic!("{reader}: benign case {case} (seed {seed}) of {name} is refused: {e}\ninput: {head:?}"),
        }
    }
}

macro_rules! example {
    ($path:literal) => {
        ($path, include_str!(concat!("../../examples/", $path)))
    };
}

#[test]
fn fuzz_bundle() {
    fuzz("parse_bundle", 1, &[example!("bundle.jsonl")], data::parse_bundle);
}

#[test]
fn fuzz_rankings() {
    fuzz("parse_rankings", 2, &[example!("rankings.csv"), example!("nrp/expert_rankings.csv")], data::parse_rankings);
}

#[test]
fn fuzz_predictions() {
    // The CSV example, and the same predictions as JSONL (what an evaluator may write).
    let csv = example!("predictions.csv");
    let (file, _) = data::parse_predictions(csv.0, csv.1).unwrap();
    let jsonl: String = file
        .predictions
        .iter()
        .map(|p| {
            let probs: serde_json::Map<String, serde_json::Value> =
                p.probs.iter().map(|(l, v)| (l.clone(), serde_json::json!(v))).collect();
            let row = serde_json::json!({"instance": p.instance, "system": p.system, "predicted": p.predicted,
                "p_correct": p.p_correct, "probs": probs});
            format!("{row}\n")
        })
        .collect();
    fuzz("parse_predictions", 3, &[csv, ("predictions.jsonl", &jsonl)], data::parse_predictions);
}

#[test]
fn fuzz_topics() {
    fuzz("parse_topics", 4, &[example!("nrp/topics.xml"), example!("nrp/topics.jsonl")], data::parse_topics);
}

#[test]
fn fuzz_qrels() {
    let examples = [
        example!("nrp/qrels.relevance.txt"),
        example!("nrp/qrels.credibility.txt"),
        example!("nrp/qrels.readability.txt"),
        example!("nrp/qrels.combined.txt"),
    ];
    let nj = data::NotJudgeable::clef_ehealth_2021();
    fuzz("parse_qrels_any", 5, &examples, |n, t| data::parse_qrels_any(n, t, "relevance", &nj));
    // Given for one dimension, a combined file is refused (and so no example for it).
    fuzz("parse_qrels_dimension", 6, &examples[..3], |n, t| data::parse_qrels_dimension(n, t, "credibility", &nj));
    fuzz("parse_qrels_combined", 15, &examples[3..], |n, t| data::parse_qrels_combined(n, t, &nj));
}

#[test]
fn fuzz_run() {
    fuzz("parse_run", 7, &[example!("nrp/run.bm25.txt")], data::parse_run);
}

#[test]
fn fuzz_documents() {
    fuzz("parse_documents", 8, &[example!("nrp/docs.tsv"), example!("corpus.jsonl")], data::parse_documents);
}

#[test]
fn fuzz_answers() {
    fuzz("parse_answers_jsonl", 9, &[example!("nrp/answers.jsonl")], data::parse_answers_jsonl);
    let csvs = [
        example!("nrp/answers/gpt-3.5-turbo__multimedqa.csv"),
        example!("nrp/answers/gpt-3.5-turbo__no_prompt.csv"),
        example!("nrp/answers/llama-2-13b__multimedqa.csv"),
        example!("nrp/answers/llama-2-13b__no_prompt.csv"),
    ];
    fuzz("parse_answers_csv", 10, &csvs, |n, t| {
        let (system, prompt) = data::system_prompt_from_file_name(n).unwrap();
        data::parse_answers_csv(n, t, &system, &prompt)
    });
    fuzz("parse_answer_scores", 11, &[example!("nrp/answer_scores.csv")], data::parse_answer_scores);
}

#[test]
fn fuzz_hitz() {
    let files = [
        example!("ros/no_argument.jsonl"),
        example!("ros/gpt-4o.jsonl"),
        example!("ros/llama-3-70b.jsonl"),
        example!("ros/label_only.jsonl"),
    ];
    fuzz("parse_hitz", 12, &files, data::parse_hitz);
}

#[test]
fn fuzz_metrics_input() {
    fuzz("parse_candidates", 13, &[example!("metrics/summaries.jsonl")], medrank::data::candidates::parse_candidates);
}

#[test]
fn fuzz_rubric_files_and_healthbench() {
    // Graded, ungraded and judged files through the one reader of §7.
    let files = [
        example!("rubric/graded.jsonl"),
        example!("rubric/judged.jsonl"),
        example!("rubric/grader.jsonl"),
        example!("rubric/conversations.jsonl"),
    ];
    fuzz("parse_rubric", 17, &files, medrank::data::graded::parse_rubric);
    // Answers with expert statements (statement checks).
    fuzz("parse_statements", 19, &[example!("statements/answers.jsonl")], medrank::data::statements::parse_statements);
    // HealthBench's meta-evaluation file (it carries its completions; the eval file's
    // errors may be at its completions file's lines, so it is not fuzzed alone).
    fuzz("import_healthbench", 18, &[example!("rubric/healthbench/meta_eval.jsonl")], |n, t| {
        data::healthbench::import_healthbench((n, t), None)
    });
}

#[test]
fn fuzz_drafting_inputs() {
    let kqa = ("kqa-mini/prompts.jsonl", include_str!("../../data/kqa-mini/prompts.jsonl"));
    fuzz("parse_draft_prompts", 20, &[example!("draft/prompts.jsonl"), kqa], data::draft_prompts::parse_draft_prompts);
    // Evidence as the draft reads it: documents, passages, statements. What must not change
    // with a benign change is the statements' text (their offsets move with CRLF).
    use data::evidence::{read_evidence, EvidenceFormat};
    use medrank::eval::draft::text::{passages, statements};
    let read = |format: EvidenceFormat| {
        move |name: &str, text: &str| -> Result<Vec<Vec<String>>, Error> {
            let (documents, _) = read_evidence(&[(name, text, format)])?;
            Ok(documents
                .iter()
                .map(|d| {
                    passages(d, 20)
                        .0
                        .iter()
                        .flat_map(|p| statements(&d.text, p.block, p.span, 1).0)
                        .map(|s| s.text)
                        .collect()
                })
                .collect())
        }
    };
    fuzz("read_evidence (markdown)", 21, &[example!("draft/guideline.md")], read(EvidenceFormat::Markdown));
    fuzz("read_evidence (text)", 22, &[example!("draft/guideline.md")], read(EvidenceFormat::Text));
    fuzz("read_evidence (corpus)", 23, &[example!("draft/formulary.tsv")], read(EvidenceFormat::Corpus));
}

#[test]
fn fuzz_rubric() {
    fuzz("parse_graded", 16, &[example!("rubric/graded.jsonl")], medrank::data::graded::parse_graded);
    // Reading and scoring: overflowing points must be refused, not reported as null.
    let mut options = rubric::RubricOptions::default();
    options.bootstrap.resamples = 20;
    fuzz("rubric::grade", 14, &[example!("rubric/graded.jsonl")], |n, t| {
        let report = rubric::grade(n, t, &options)?;
        let finite = |s: &medrank::stats::Stat<f64>| s.value().is_none_or(|v| v.is_finite());
        for r in &report.responses {
            let scores = std::iter::once(&r.overall).chain(r.criterion_tags.values());
            for p in scores {
                assert!(
                    p.achieved.is_finite() && p.possible.is_finite() && finite(&p.score),
                    "response {} on line {}: {p:?}",
                    r.id,
                    r.line
                );
            }
        }
        for s in report.system_scores.iter().flat_map(|s| &s.scores) {
            assert!(finite(&s.mean) && finite(&s.unclipped_mean), "{s:?}");
        }
        // The report holds its provenance (fingerprints of the text as given, which a
        // benign change changes): compare what was scored.
        Ok(format!("{:?}", (&report.responses, &report.system_scores)))
    });
}
