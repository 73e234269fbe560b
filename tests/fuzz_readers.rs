//! Every reader against hostile input: many seeded random mutations of the example files
//! (byte flips, truncation, duplicated, deleted and swapped lines, huge and odd numbers,
//! deep nesting, stray bytes). Each mutated text must be read without a panic, and either
//! accepted or refused with an error that names the file (and so can be shown next to it).
//!
//! Seeded (ChaCha8), so a failure is reproducible: the message gives the reader, the case
//! number and the mutated text's start. Small enough for CI: a few hundred cases per reader,
//! well under a second each in a debug build.

use medrank::data;
use medrank::eval::rubric;
use medrank::Error;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Mutated texts per reader.
const CASES: u64 = 300;

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
/// error that does not name the file.
fn fuzz(reader: &str, seed: u64, examples: &[(&str, &str)], read: impl Fn(&str, &str) -> Result<(), Error>) {
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
            Ok(Ok(())) => accepted += 1,
            Ok(Err(e)) => {
                let names_file = e.location().is_some_and(|l| l.file == name);
                assert!(
                    names_file,
                    "{reader}: case {case} (seed {seed}): the error does not name {name}: {e}\ninput: {head:?}"
                );
                refused += 1;
            }
        }
    }
    // The corpus must exercise both paths, or it tests nothing.
    assert!(refused > 0, "{reader}: no mutation was refused");
    assert!(accepted + refused == CASES);
}

macro_rules! example {
    ($path:literal) => {
        ($path, include_str!(concat!("../examples/", $path)))
    };
}

#[test]
fn fuzz_bundle() {
    fuzz("parse_bundle", 1, &[example!("bundle.jsonl")], |n, t| data::parse_bundle(n, t).map(drop));
}

#[test]
fn fuzz_rankings() {
    fuzz("parse_rankings", 2, &[example!("rankings.csv"), example!("nrp/expert_rankings.csv")], |n, t| {
        data::parse_rankings(n, t).map(drop)
    });
}

#[test]
fn fuzz_predictions() {
    fuzz("parse_predictions", 3, &[example!("predictions.csv")], |n, t| data::parse_predictions(n, t).map(drop));
}

#[test]
fn fuzz_topics() {
    fuzz("parse_topics", 4, &[example!("nrp/topics.xml"), example!("nrp/topics.jsonl")], |n, t| {
        data::parse_topics(n, t).map(drop)
    });
}

#[test]
fn fuzz_qrels() {
    let examples = [
        example!("nrp/qrels.relevance.txt"),
        example!("nrp/qrels.credibility.txt"),
        example!("nrp/qrels.combined.txt"),
    ];
    let nj = data::NotJudgeable::clef_ehealth_2021();
    fuzz("parse_qrels_any", 5, &examples, |n, t| data::parse_qrels_any(n, t, "relevance", &nj).map(drop));
    fuzz("parse_qrels_dimension", 6, &examples, |n, t| data::parse_qrels_dimension(n, t, "credibility", &nj).map(drop));
}

#[test]
fn fuzz_run() {
    fuzz("parse_run", 7, &[example!("nrp/run.bm25.txt")], |n, t| data::parse_run(n, t).map(drop));
}

#[test]
fn fuzz_documents() {
    fuzz("parse_documents", 8, &[example!("nrp/docs.tsv"), example!("corpus.jsonl")], |n, t| {
        data::parse_documents(n, t).map(drop)
    });
}

#[test]
fn fuzz_answers() {
    fuzz("parse_answers_jsonl", 9, &[example!("nrp/answers.jsonl")], |n, t| data::parse_answers_jsonl(n, t).map(drop));
    fuzz("parse_answers_csv", 10, &[example!("nrp/answers/gpt-3.5-turbo__multimedqa.csv")], |n, t| {
        data::parse_answers_csv(n, t, "gpt-3.5-turbo", "multimedqa").map(drop)
    });
    fuzz("parse_answer_scores", 11, &[example!("nrp/answer_scores.csv")], |n, t| {
        data::parse_answer_scores(n, t).map(drop)
    });
}

#[test]
fn fuzz_hitz() {
    fuzz("parse_hitz", 12, &[example!("ros/no_argument.jsonl"), example!("ros/gpt-4o.jsonl")], |n, t| {
        data::parse_hitz(n, t).map(drop)
    });
}

#[test]
fn fuzz_metrics_input() {
    fuzz("parse_candidates", 13, &[example!("metrics/summaries.jsonl")], |n, t| {
        medrank::data::candidates::parse_candidates(n, t).map(drop)
    });
}

#[test]
fn fuzz_rubric() {
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
        Ok(())
    });
}
