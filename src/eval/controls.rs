//! Control cases (ranking-over-scoring.md §3.2.2, methods.md §1): adversarial "arguments"
//! that a robust evaluator must rank below every real argument. Each one becomes one more
//! system of the bundle, named by [`Control::system_name`], so the evaluator and the
//! ranking step treat it exactly like a real system.
//!
//! - `no_argument`: the empty text.
//! - `label_only`: the correct answer in one sentence, no reasoning ([`label_only_text`]).
//! - `noise`: the argument of a *different* instance of the same task, from the bundle's
//!   first primary system (first system in file order that is not a control). The donor of
//!   each instance is a seeded uniform random derangement (no instance keeps its own
//!   argument), drawn separately within each task so that a misinformation claim never
//!   gets an MCQA explanation, which would be too easy to spot.
//! - `ir_passages`: the paper retrieves with dense embeddings and reranks with ColBERTv2; we
//!   do both stages with BM25 ([`crate::eval::bm25`]): the top 5 corpus documents for the
//!   instance text ([`Problem::query_text`]), split into chunks of at most 300 characters
//!   ([`chunk_text`]), rescored, and the 3 best chunks joined with newlines.

use crate::data::{Bundle, Document, Problem, Task};
use crate::eval::bm25::{Bm25Index, Bm25Params};
use crate::report::Provenance;
use crate::{Error, Result, Warning};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;

/// Documents retrieved per instance in the first stage.
pub const IR_DOCUMENTS: usize = 5;
/// Longest chunk, in characters (Unicode scalar values, not bytes).
pub const IR_CHUNK_CHARS: usize = 300;
/// Chunks kept per instance.
pub const IR_PASSAGES: usize = 3;

/// The kinds of control case are a vocabulary of system names the readers know too
/// (`data::controls`); this module makes their texts.
pub use crate::data::controls::Control;

/// The label-only sentence for an instance: the gold label in words, no reasoning.
/// MCQA: "The correct answer is 3." (as in the public HiTZ label-only files);
/// misinformation: "The claim is supported." / "... refuted." / "... not supported by
/// enough evidence."; NLI: "The statement is an entailment of the evidence." /
/// "The statement is a contradiction of the evidence.".
pub fn label_only_text(problem: &Problem) -> String {
    match problem {
        Problem::Mcqa { answer, .. } => format!("The correct answer is {answer}."),
        Problem::Misinformation { label, .. } => {
            let words = match label.as_str() {
                "not_enough_evidence" => "not supported by enough evidence",
                other => other,
            };
            format!("The claim is {words}.")
        }
        Problem::Nli { label, .. } => {
            let phrase = match label.as_str() {
                "entailment" => "an entailment",
                "contradiction" => "a contradiction",
                other => other,
            };
            format!("The statement is {phrase} of the evidence.")
        }
    }
}

/// A seeded uniform random derangement of `0..n`: `p[i] != i` for every i. Rejection
/// sampling of Fisher–Yates shuffles (about e ≈ 2.7 shuffles on average), which is uniform
/// over all derangements. Indices are drawn as u64 so that wasm32 (32-bit usize) and 64-bit
/// machines draw the same permutation for the same seed. n = 1 has no derangement: error.
pub fn derangement(n: usize, rng: &mut ChaCha8Rng) -> Result<Vec<usize>> {
    if n == 1 {
        return Err(Error::invalid(
            "a derangement of one item does not exist: the noise control needs at least two \
             instances of a task",
        ));
    }
    loop {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = rng.gen_range(0..=i as u64) as usize;
            p.swap(i, j);
        }
        if p.iter().enumerate().all(|(i, &v)| i != v) {
            return Ok(p);
        }
    }
}

/// Split `text` into chunks of at most `max_chars` characters. A chunk ends at the last
/// whitespace inside the window when there is one (words stay whole); a single word longer
/// than the window is cut at exactly `max_chars` characters. Chunks are trimmed of
/// surrounding whitespace, and whitespace-only pieces are dropped; nothing else is lost.
pub fn chunk_text(text: &str, max_chars: usize) -> Vec<String> {
    assert!(max_chars > 0, "chunk size must be positive");
    let mut chunks = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        // Byte offset just past the first `max_chars` characters (or the end).
        let window_end = rest.char_indices().nth(max_chars).map_or(rest.len(), |(i, _)| i);
        let cut = if window_end == rest.len() {
            rest.len()
        } else if rest[window_end..].starts_with(char::is_whitespace) {
            // The window ends exactly at a word boundary.
            window_end
        } else {
            match rest[..window_end].rfind(char::is_whitespace) {
                Some(space) if space > 0 => space,
                _ => window_end, // one word longer than the window
            }
        };
        let chunk = rest[..cut].trim_end();
        if !chunk.is_empty() {
            chunks.push(chunk.to_string());
        }
        rest = rest[cut..].trim_start();
    }
    chunks
}

/// A chunk chosen for an instance's IR passages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Passage {
    pub docno: String,
    /// 0-based position of the chunk within its document.
    pub chunk: usize,
    pub score: f64,
}

/// What the IR control retrieved for one instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retrieval {
    pub instance: String,
    /// First stage: the documents retrieved, best first (at most [`IR_DOCUMENTS`]).
    pub documents: Vec<String>,
    /// Second stage: the chunks kept, best first (at most [`IR_PASSAGES`]).
    pub passages: Vec<Passage>,
}

/// Everything needed to reproduce the control cases of a bundle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlsReport {
    pub provenance: Provenance,
    pub added: Vec<Control>,
    /// The system whose arguments the noise control reuses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_source: Option<String>,
    /// (instance, donor instance) for the noise control, in bundle order.
    pub derangement: Vec<(String, String)>,
    /// Per instance, what the IR control retrieved (bundle order).
    pub retrievals: Vec<Retrieval>,
    pub warnings: Vec<Warning>,
}

/// Add the control cases `which` to every instance of `bundle`, as new systems appended in
/// the order given. `corpus` is required for [`Control::IrPassages`]. All randomness (the
/// noise derangement) comes from `seed`. Fails, leaving the bundle unchanged, when a
/// control's system name is already in the bundle, a task has a single instance (noise),
/// the noise source system has no argument for an instance, or the corpus is missing/empty.
pub fn add_controls(
    bundle: &mut Bundle,
    which: &[Control],
    corpus: Option<&[Document]>,
    seed: u64,
) -> Result<ControlsReport> {
    let mut wanted: Vec<Control> = Vec::new();
    for &control in which {
        if !wanted.contains(&control) {
            wanted.push(control);
        }
    }
    for control in &wanted {
        if bundle.systems.iter().any(|s| s == control.system_name()) {
            return Err(name_clash(bundle, *control));
        }
    }

    let mut report = ControlsReport {
        provenance: Provenance::new(seed),
        added: wanted.clone(),
        noise_source: None,
        derangement: Vec::new(),
        retrievals: Vec::new(),
        warnings: Vec::new(),
    };
    let mut provenance = Provenance::new(seed);
    if wanted.contains(&Control::LabelOnly) {
        provenance = provenance.convention(
            "label_only",
            "MCQA \"The correct answer is {key}.\"; misinformation \"The claim is {label in \
             words}.\"; NLI \"The statement is an entailment/a contradiction of the evidence.\"",
        );
    }

    // Compute every control's text first, so that an error leaves the bundle untouched.
    let mut texts: Vec<(Control, Vec<String>)> = Vec::new();
    for &control in &wanted {
        let per_instance = match control {
            Control::NoArgument => vec![String::new(); bundle.instances.len()],
            Control::LabelOnly => bundle.instances.iter().map(|inst| label_only_text(&inst.problem)).collect(),
            Control::Noise => {
                let Noise { texts, source, pairs } = noise_arguments(bundle, seed)?;
                provenance = provenance.convention(
                    "noise",
                    format!(
                        "argument of system `{source}` from another instance of the same task; \
                         seeded uniform derangement within each task (ChaCha8, seed {seed})"
                    ),
                );
                report.noise_source = Some(source);
                report.derangement = pairs;
                texts
            }
            Control::IrPassages => {
                let corpus =
                    corpus.ok_or_else(|| Error::invalid("the ir_passages control needs a corpus of documents"))?;
                let params = Bm25Params::default();
                provenance = provenance.convention(
                    "ir_passages",
                    format!(
                        "top {IR_DOCUMENTS} documents by {}; chunks of at most {IR_CHUNK_CHARS} \
                         characters cut at whitespace; chunks rescored by BM25 with statistics \
                         from all chunks of the corpus; best {IR_PASSAGES} joined by newlines",
                        params.describe()
                    ),
                );
                let (texts, retrievals, warnings) = ir_passages(bundle, corpus, params)?;
                report.retrievals = retrievals;
                report.warnings.extend(warnings);
                texts
            }
        };
        texts.push((control, per_instance));
    }

    for (control, per_instance) in texts {
        for (instance, text) in bundle.instances.iter_mut().zip(per_instance) {
            instance.arguments.push((control.system_name().to_string(), text));
        }
        bundle.systems.push(control.system_name().to_string());
    }
    report.provenance = provenance;
    Ok(report)
}

/// A generated control whose name a system of the bundle already has (typically the
/// paper's control file imported under that name): both can be used, under distinct names.
fn name_clash(bundle: &Bundle, control: Control) -> Error {
    let name = control.system_name();
    let what = if bundle.controls.iter().any(|c| c == name) { "a control case from a file" } else { "a system" };
    let others: Vec<&str> = Control::ALL
        .iter()
        .map(|c| c.system_name())
        .filter(|n| *n != name && !bundle.systems.iter().any(|s| s == n))
        .collect();
    let drop =
        if others.is_empty() { "leave out --controls".to_string() } else { format!("--controls {}", others.join(",")) };
    Error::invalid(format!(
        "{}: the bundle already has {what} named `{name}`, and the generated {name} control \
         would take the same name. To keep both, import the file under another name \
         (`medrank import ranking-over-scoring --control-source {name}_file=FILE`; in the \
         page, rename its system to `{name}_file`); to keep only the file's, do not generate \
         {name} ({drop}; in the page, remove it from Options > Controls)",
        bundle.name
    ))
}

/// The first system in bundle order that is not a control case (generated, by name, or
/// marked in the bundle).
pub fn first_primary_system(bundle: &Bundle) -> Option<&str> {
    bundle
        .systems
        .iter()
        .map(String::as_str)
        .find(|s| !Control::is_control_name(s) && !bundle.controls.iter().any(|c| c == s))
}

/// The noise control of a bundle: the text per instance (bundle order), the source system,
/// and the (instance, donor instance) pairs.
struct Noise {
    texts: Vec<String>,
    source: String,
    pairs: Vec<(String, String)>,
}

fn noise_arguments(bundle: &Bundle, seed: u64) -> Result<Noise> {
    let source = first_primary_system(bundle)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{}: the noise control needs a primary system to take arguments from; the \
                 bundle has none",
                bundle.name
            ))
        })?
        .to_string();
    // Group instance positions by task; BTreeMap gives a fixed task order for the RNG.
    let mut by_task: BTreeMap<Task, Vec<usize>> = BTreeMap::new();
    for (i, instance) in bundle.instances.iter().enumerate() {
        by_task.entry(instance.problem.task()).or_default().push(i);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut donor_of = vec![0usize; bundle.instances.len()];
    for (task, members) in &by_task {
        let p = derangement(members.len(), &mut rng).map_err(|_| {
            Error::invalid(format!(
                "{}: the noise control needs at least two {} instances (an instance must get \
                 the argument of a different one); instance `{}` is the only one",
                bundle.name,
                task.name(),
                bundle.instances[members[0]].id
            ))
        })?;
        for (k, &i) in members.iter().enumerate() {
            donor_of[i] = members[p[k]];
        }
    }
    let mut texts = Vec::with_capacity(bundle.instances.len());
    let mut pairs = Vec::with_capacity(bundle.instances.len());
    for (i, instance) in bundle.instances.iter().enumerate() {
        let donor = &bundle.instances[donor_of[i]];
        let text = donor.argument(&source).ok_or_else(|| {
            Error::input(
                &bundle.name,
                donor.line,
                "arguments",
                format!(
                    "instance `{}` has no argument from system `{source}`, which the noise \
                     control reuses for instance `{}`",
                    donor.id, instance.id
                ),
            )
        })?;
        texts.push(text.to_string());
        pairs.push((instance.id.clone(), donor.id.clone()));
    }
    Ok(Noise { texts, source, pairs })
}

/// IR passages per instance, what was retrieved, and warnings for instances nothing matched.
fn ir_passages(
    bundle: &Bundle,
    corpus: &[Document],
    params: Bm25Params,
) -> Result<(Vec<String>, Vec<Retrieval>, Vec<Warning>)> {
    if corpus.is_empty() {
        return Err(Error::invalid("the ir_passages control needs a non-empty corpus"));
    }
    let docs: Vec<(&str, &str)> = corpus.iter().map(|d| (d.docno.as_str(), d.text.as_str())).collect();
    let doc_index = Bm25Index::new(&docs, params.clone());

    // Chunk every document once; the chunk index's statistics come from all chunks, so a
    // chunk's score does not depend on which other documents a query happened to retrieve.
    let mut chunk_texts: Vec<String> = Vec::new();
    let mut chunk_origin: Vec<(usize, usize)> = Vec::new(); // (document, chunk position)
    let mut chunks_of_doc: Vec<std::ops::Range<usize>> = Vec::with_capacity(corpus.len());
    for (d, doc) in corpus.iter().enumerate() {
        let start = chunk_texts.len();
        for (c, chunk) in chunk_text(&doc.text, IR_CHUNK_CHARS).into_iter().enumerate() {
            chunk_texts.push(chunk);
            chunk_origin.push((d, c));
        }
        chunks_of_doc.push(start..chunk_texts.len());
    }
    let chunk_docs: Vec<(&str, &str)> = chunk_origin
        .iter()
        .zip(&chunk_texts)
        .map(|(&(d, _), text)| (corpus[d].docno.as_str(), text.as_str()))
        .collect();
    let chunk_index = Bm25Index::new(&chunk_docs, params);

    let mut texts = Vec::with_capacity(bundle.instances.len());
    let mut retrievals = Vec::with_capacity(bundle.instances.len());
    let mut warnings = Vec::new();
    for instance in &bundle.instances {
        let query = instance.problem.query_text();
        let top_docs = doc_index.top_k(&query, IR_DOCUMENTS);
        if top_docs.is_empty() {
            warnings.push(Warning::new(format!(
                "ir_passages: no corpus document shares a word with instance `{}`; its \
                 ir_passages argument is empty",
                instance.id
            )));
        }
        let candidates: Vec<usize> = top_docs.iter().flat_map(|hit| chunks_of_doc[hit.index].clone()).collect();
        // Scoring all chunks costs only the postings of the query's terms.
        let chunk_scores = chunk_index.score(&query);
        // Best first; equal scores keep candidate order (document rank, then position).
        let mut ranked: Vec<(usize, f64)> = candidates.iter().map(|&c| (c, chunk_scores[c])).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        ranked.truncate(IR_PASSAGES);
        texts.push(ranked.iter().map(|&(c, _)| chunk_texts[c].as_str()).collect::<Vec<_>>().join("\n"));
        retrievals.push(Retrieval {
            instance: instance.id.clone(),
            documents: top_docs.iter().map(|h| corpus[h.index].docno.clone()).collect(),
            passages: ranked
                .iter()
                .map(|&(c, score)| Passage {
                    docno: corpus[chunk_origin[c].0].docno.clone(),
                    chunk: chunk_origin[c].1,
                    score,
                })
                .collect(),
        });
    }
    Ok((texts, retrievals, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Instance;

    fn mcqa(id: &str, question: &str, answer: &str, argument: &str) -> Instance {
        Instance {
            id: id.into(),
            problem: Problem::Mcqa {
                question: question.into(),
                options: (1..=5).map(|k| (k.to_string(), format!("option {k}"))).collect(),
                answer: answer.into(),
            },
            arguments: vec![("expert".into(), argument.into()), ("gpt-4o".into(), format!("gpt says {argument}"))],
            line: 0,
        }
    }

    fn bundle(instances: Vec<Instance>) -> Bundle {
        let mut instances = instances;
        for (i, inst) in instances.iter_mut().enumerate() {
            inst.line = i + 1;
        }
        Bundle {
            name: "bundle.jsonl".into(),
            instances,
            systems: vec!["expert".into(), "gpt-4o".into()],
            controls: Vec::new(),
        }
    }

    #[test]
    fn derangements_have_no_fixed_point_and_depend_only_on_the_seed() {
        for n in [0usize, 2, 3, 4, 7, 50] {
            for seed in 0..300u64 {
                let p = derangement(n, &mut ChaCha8Rng::seed_from_u64(seed)).unwrap();
                let mut sorted = p.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "not a permutation");
                assert!(p.iter().enumerate().all(|(i, &v)| i != v), "fixed point, seed {seed}");
                let again = derangement(n, &mut ChaCha8Rng::seed_from_u64(seed)).unwrap();
                assert_eq!(p, again);
            }
        }
        assert!(derangement(1, &mut ChaCha8Rng::seed_from_u64(0)).is_err());
    }

    #[test]
    fn derangements_of_three_are_uniform() {
        // Exactly two derangements of 3 items exist: (1 2 0) and (2 0 1). Uniform sampling
        // gives each about half of 4000 draws (binomial sd ≈ 32, so ±200 is > 6 sd).
        let mut first = 0;
        for seed in 0..4000u64 {
            if derangement(3, &mut ChaCha8Rng::seed_from_u64(seed)).unwrap() == [1, 2, 0] {
                first += 1;
            }
        }
        assert!((1800..=2200).contains(&first), "{first} of 4000");
    }

    #[test]
    fn label_only_sentences_per_task() {
        let p = Problem::Mcqa { question: "q".into(), options: vec![], answer: "3".into() };
        assert_eq!(label_only_text(&p), "The correct answer is 3.");
        let p = Problem::Misinformation { claim: "c".into(), label: "refuted".into() };
        assert_eq!(label_only_text(&p), "The claim is refuted.");
        let p = Problem::Misinformation { claim: "c".into(), label: "not_enough_evidence".into() };
        assert_eq!(label_only_text(&p), "The claim is not supported by enough evidence.");
        let p = Problem::Nli { statement: "s".into(), evidence: "e".into(), label: "entailment".into() };
        assert_eq!(label_only_text(&p), "The statement is an entailment of the evidence.");
        let p = Problem::Nli { statement: "s".into(), evidence: "e".into(), label: "contradiction".into() };
        assert_eq!(label_only_text(&p), "The statement is a contradiction of the evidence.");
    }

    #[test]
    fn chunks_break_at_whitespace_and_count_characters_not_bytes() {
        assert_eq!(chunk_text("aaa bbb ccc", 7), ["aaa bbb", "ccc"]);
        assert_eq!(chunk_text("aaa bbb ccc", 8), ["aaa bbb", "ccc"]);
        assert_eq!(chunk_text("  aaa   bbb  ", 5), ["aaa", "bbb"]);
        // A word longer than the window is cut hard.
        assert_eq!(chunk_text("abcdefghij xy", 4), ["abcd", "efgh", "ij", "xy"]);
        // "ßßß" is 3 characters but 6 bytes: it fits a 3-character window.
        assert_eq!(chunk_text("ßßß ööö", 3), ["ßßß", "ööö"]);
        assert!(chunk_text("   ", 3).is_empty());
        // Nothing but whitespace is lost.
        let text = "Sjögren syndrome is an autoimmune disease. ".repeat(30);
        let chunks = chunk_text(&text, IR_CHUNK_CHARS);
        assert!(chunks.iter().all(|c| c.chars().count() <= IR_CHUNK_CHARS));
        let joined: String = chunks.join(" ");
        assert_eq!(joined.split_whitespace().collect::<Vec<_>>(), text.split_whitespace().collect::<Vec<_>>());
    }

    fn corpus() -> Vec<Document> {
        let doc = |docno: &str, text: &str| Document { docno: docno.into(), text: text.into() };
        vec![
            doc("cardio", "Beta blockers reduce mortality after myocardial infarction."),
            doc("diabetes", "Metformin is the first line drug for type 2 diabetes."),
            doc(
                "long-diabetes",
                // Two chunks: the first about insulin pumps, the second about metformin.
                &format!(
                    "{} {}",
                    "Insulin pumps deliver basal insulin continuously. ".repeat(6),
                    "Metformin lowers hepatic glucose output in diabetes."
                ),
            ),
            doc("eyes", "Sjögren syndrome causes dry eyes and a dry mouth."),
        ]
    }

    #[test]
    fn ir_passages_keep_the_best_chunks_of_the_top_documents() {
        let mut b = bundle(vec![
            mcqa("q1", "Which drug is first line in type 2 diabetes: metformin?", "2", "arg one"),
            mcqa("q2", "A patient with dry eyes and dry mouth has which syndrome?", "4", "arg two"),
            mcqa("q3", "zzz", "1", "arg three"),
        ]);
        let report = add_controls(&mut b, &[Control::IrPassages], Some(&corpus()), 7).unwrap();
        let r1 = &report.retrievals[0];
        // Only the two diabetes documents share a word with q1; the short one ranks first.
        assert_eq!(r1.documents, ["diabetes", "long-diabetes"]);
        assert_eq!(r1.passages[0].docno, "diabetes");
        // The long document's metformin chunk (chunk 1) beats its insulin-pump chunk (0),
        // which shares no word with q1 and still fills the third place (score 0).
        let long: Vec<&Passage> = r1.passages.iter().filter(|p| p.docno == "long-diabetes").collect();
        assert_eq!(long[0].chunk, 1);
        assert_eq!(long[1].chunk, 0);
        assert_eq!(long[1].score, 0.0);
        assert_eq!(r1.passages.len(), IR_PASSAGES);
        assert_eq!(report.retrievals[1].documents[0], "eyes");
        assert_eq!(
            b.instances[1].argument("ir_passages").unwrap().lines().next().unwrap(),
            "Sjögren syndrome causes dry eyes and a dry mouth."
        );
        // Nothing matches q3: empty argument, and a warning says so.
        assert_eq!(b.instances[2].argument("ir_passages"), Some(""));
        assert_eq!(report.warnings.len(), 1);
        assert!(report.warnings[0].message.contains("`q3`"));
        assert!(add_controls(&mut b.clone(), &[Control::IrPassages], None, 7).is_err());
    }

    #[test]
    fn add_controls_appends_systems_and_records_the_derangement() {
        let mut b = bundle((1..=6).map(|i| mcqa(&format!("q{i}"), "case", "3", &format!("argument {i}"))).collect());
        let report =
            add_controls(&mut b, &[Control::NoArgument, Control::LabelOnly, Control::Noise], None, 11).unwrap();
        assert_eq!(b.systems, ["expert", "gpt-4o", "no_argument", "label_only", "noise"]);
        assert_eq!(report.noise_source.as_deref(), Some("expert"));
        assert_eq!(report.derangement.len(), 6);
        for (inst, (id, donor)) in b.instances.iter().zip(&report.derangement) {
            assert_eq!(&inst.id, id);
            assert_ne!(id, donor);
            let donor_arg = format!("argument {}", &donor[1..]);
            assert_eq!(inst.argument("noise"), Some(donor_arg.as_str()));
            assert_eq!(inst.argument("no_argument"), Some(""));
            assert_eq!(inst.argument("label_only"), Some("The correct answer is 3."));
        }
        // Same seed, same derangement; the report records the seed.
        let mut b2 = bundle((1..=6).map(|i| mcqa(&format!("q{i}"), "case", "3", &format!("argument {i}"))).collect());
        let again = add_controls(&mut b2, &[Control::Noise], None, 11).unwrap();
        assert_eq!(again.derangement, report.derangement);
        assert_eq!(again.provenance.seed, 11);
        // Adding a control twice is refused and leaves the bundle as it was.
        let before = b.clone();
        assert!(add_controls(&mut b, &[Control::Noise], None, 1).is_err());
        assert_eq!(b, before);
    }

    #[test]
    fn noise_needs_two_instances_per_task_and_an_argument_from_the_source() {
        let mut b = bundle(vec![
            mcqa("q1", "case", "1", "a"),
            mcqa("q2", "case", "1", "b"),
            Instance {
                id: "claim-1".into(),
                problem: Problem::Misinformation { claim: "c".into(), label: "refuted".into() },
                arguments: vec![("expert".into(), "e".into())],
                line: 0,
            },
        ]);
        let before = b.clone();
        let err = add_controls(&mut b, &[Control::LabelOnly, Control::Noise], None, 3).unwrap_err();
        assert!(err.to_string().contains("misinformation"), "{err}");
        assert!(err.to_string().contains("claim-1"), "{err}");
        assert_eq!(b, before);

        let mut b = bundle(vec![mcqa("q1", "case", "1", "a"), mcqa("q2", "case", "1", "b")]);
        b.instances[1].arguments.retain(|(s, _)| s != "expert");
        let err = add_controls(&mut b, &[Control::Noise], None, 3).unwrap_err();
        // q1's donor is q2 (the only derangement of two), which lacks `expert`: line 2.
        assert_eq!(err.location().unwrap().line, Some(2));
        assert!(err.to_string().contains("`q2`"), "{err}");
    }
}
