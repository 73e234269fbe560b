//! Training examples: the encoder inputs of each instance and the index of the right one,
//! read from a HiTZ MCQA file or an argument bundle (with the argument source that makes
//! the baseline, expert-trained or LLM-trained evaluator), and what the readers leave out.

use crate::data::candidates::Candidate;
use crate::data::graded::parse_rubric;
use crate::data::{Bundle, Problem, Task};
use crate::error::{Error, Result};
use crate::model::evaluate::{classification_parts, mcqa_parts};
use crate::model::grade::{conversation_text, encode_pair, CRITERION_LABELS};
use crate::model::score::score_input;
use crate::model::tokenize::{Encoded, TextTokenizer};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// One training example: the encoder inputs and the index of the right one.
/// Multiple choice: one input per candidate option (empty options are left out unless
/// kept, so the count varies), `gold` = index among the inputs. Classification: one
/// input, `gold` = label index. Scores (task `score`): one input, the human scores in
/// `scores` (`gold` is 0 and unused).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainExample {
    pub id: String,
    pub inputs: Vec<Encoded>,
    pub gold: usize,
    /// A score example's targets; `None` for the other tasks.
    pub scores: Option<ScoreTargets>,
}

/// A score example's targets (task `score`): each dimension's human score in the head's
/// label order, `None` where its line has none (its loss term is masked, never taken as 0),
/// and the batch its per-batch correlations group it in.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreTargets {
    pub batch: String,
    pub scores: Vec<Option<f64>>,
}

/// What the example readers leave out (the conventions evaluation follows too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExampleOptions {
    /// Keep empty MCQA options as candidates (default: not candidates, as in evaluation).
    pub keep_empty_options: bool,
    /// Keep misinformation instances labelled `not_enough_evidence` (default: dropped, as
    /// evaluation drops them).
    pub keep_not_enough_evidence: bool,
}

/// Examples and what was left out of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainData {
    pub examples: Vec<TrainExample>,
    pub counts: DataCounts,
}

/// What a reader left out, with ids, for the log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DataCounts {
    pub examples: usize,
    /// Empty MCQA options that are no candidate (no input).
    pub empty_options_left_out: usize,
    /// Misinformation instances labelled `not_enough_evidence`, dropped (their ids).
    pub not_enough_evidence_dropped: Vec<String>,
    /// Rubric criteria nobody judged (no `met`, no `met_by`): not examples.
    #[serde(skip_serializing_if = "is_zero")]
    pub criteria_unjudged: usize,
    /// Rubric criteria whose people split evenly (`met_by`), left out (their ids).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub criteria_tied: Vec<String>,
    /// Score task: lines without a human score of any of the head's dimensions, left out
    /// (their ids).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unscored: Vec<String>,
    /// Score task: human score dimensions of the file that the head does not have (a dev
    /// file's dimension the training file lacks), not used.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_dimensions: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Inputs of one MCQA item: one per candidate option, the gold index among them, and how
/// many empty options were left out. An empty gold option is an error.
fn mcqa_inputs(
    question: &str,
    argument: &str,
    options: &[(String, String)],
    answer: &str,
    keep_empty: bool,
    tokenizer: &TextTokenizer,
    at: &dyn Fn(&str, String) -> Error,
) -> Result<(Vec<Encoded>, usize, usize)> {
    let gold_key = options
        .iter()
        .position(|(k, _)| k == answer)
        .ok_or_else(|| at("answer", format!("`{answer}` is not an option key")))?;
    let (mut inputs, mut gold, mut left_out) = (Vec::new(), None, 0);
    for (i, (key, text)) in options.iter().enumerate() {
        if !keep_empty && crate::data::is_empty_option(text) {
            if i == gold_key {
                return Err(at(
                    "options",
                    format!("the correct option `{key}` is empty (--keep-empty-options keeps empty options)"),
                ));
            }
            left_out += 1;
            continue;
        }
        if i == gold_key {
            gold = Some(inputs.len());
        }
        let (first, second) = mcqa_parts(question, argument, text);
        inputs.push(tokenizer.encode_parts(&first, &second).map_err(|e| at("options", e.to_string()))?);
    }
    Ok((inputs, gold.expect("the gold option is kept"), left_out))
}

/// Read a HiTZ CasiMedicos MCQA file (`{"question", "options": {"1": ..}, "correct_option"}`
/// per line; the argument is already appended to the question) into examples. The file is
/// parsed by the same reader as the Ranking-Over-Scoring importer (`data::parse_hitz`).
pub fn read_hitz_mcqa(
    file: &str,
    text: &str,
    tokenizer: &TextTokenizer,
    options: &ExampleOptions,
) -> Result<TrainData> {
    let (items, _warnings) = crate::data::parse_hitz(file, text)?;
    let mut out = TrainData::default();
    for item in items {
        let at = |field: &str, msg: String| Error::input(file, item.line, field, msg);
        let (inputs, gold, left_out) = mcqa_inputs(
            &item.question,
            "",
            &item.options,
            &item.correct_option,
            options.keep_empty_options,
            tokenizer,
            &at,
        )?;
        out.counts.empty_options_left_out += left_out;
        out.examples.push(TrainExample { id: format!("{file}:{}", item.line), inputs, gold, scores: None });
    }
    out.counts.examples = out.examples.len();
    Ok(out)
}

/// Which argument each training instance carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentSource {
    /// No argument: the baseline evaluator.
    None,
    /// One named system's argument (e.g. the expert/gold one): the expert-trained evaluator.
    System(String),
    /// One random system per instance among these (seeded): the LLM-trained evaluator.
    RandomOf(Vec<String>),
}

/// Training examples from a bundle (instances lacking the chosen system are an error).
pub fn examples_from_bundle(
    bundle: &Bundle,
    source: &ArgumentSource,
    labels: &[String],
    tokenizer: &TextTokenizer,
    seed: u64,
    options: &ExampleOptions,
) -> Result<TrainData> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = TrainData::default();
    for inst in &bundle.instances {
        let argument: &str = match source {
            ArgumentSource::None => "",
            ArgumentSource::System(s) => inst.argument(s).ok_or_else(|| {
                Error::input(&bundle.name, inst.line, "arguments", format!("no argument of system `{s}`"))
            })?,
            ArgumentSource::RandomOf(systems) => {
                let present: Vec<&str> = systems.iter().filter_map(|s| inst.argument(s)).collect();
                present
                    .choose(&mut rng)
                    .copied()
                    .ok_or_else(|| Error::input(&bundle.name, inst.line, "arguments", format!("none of {systems:?}")))?
            }
        };
        let at = |field: &str, msg: String| Error::input(&bundle.name, inst.line, field, msg);
        match &inst.problem {
            Problem::Mcqa { question, options: opts, answer } => {
                let (inputs, gold, left_out) =
                    mcqa_inputs(question, argument, opts, answer, options.keep_empty_options, tokenizer, &at)?;
                out.counts.empty_options_left_out += left_out;
                out.examples.push(TrainExample { id: inst.id.clone(), inputs, gold, scores: None });
            }
            problem => {
                if !options.keep_not_enough_evidence
                    && matches!(problem, Problem::Misinformation { .. })
                    && problem.gold() == "not_enough_evidence"
                {
                    out.counts.not_enough_evidence_dropped.push(inst.id.clone());
                    continue;
                }
                let (f, s) = classification_parts(problem, argument)?;
                let gold = labels
                    .iter()
                    .position(|l| l == problem.gold())
                    .ok_or_else(|| at("label", format!("`{}` not in {labels:?}", problem.gold())))?;
                let encoded = tokenizer.encode_parts(&f, &s).map_err(|e| at("text", e.to_string()))?;
                out.examples.push(TrainExample { id: inst.id.clone(), inputs: vec![encoded], gold, scores: None });
            }
        }
    }
    out.counts.examples = out.examples.len();
    Ok(out)
}

/// Examples of the `criterion` task from a rubric file (FORMATS.md §7) whose criteria
/// are judged: the grader's input pair (`model::grade::encode_pair`: conversation and
/// response, then the criterion) and its label, `met` or `not_met` ([`CRITERION_LABELS`]
/// order). The label is the criterion's `met`, else the majority of its `met_by`; an even
/// split is left out (listed), and so is a criterion nobody judged (counted). Each
/// response needs its text. Example ids: `ID@SYSTEM#criteria[i]`.
pub fn examples_from_rubric(file: &str, text: &str, tokenizer: &TextTokenizer) -> Result<TrainData> {
    let (responses, _warnings) = parse_rubric(file, text)?;
    let mut out = TrainData::default();
    for r in &responses {
        let Some(response) = r.response.as_deref() else {
            return Err(Error::input(
                file,
                r.line,
                "response",
                "missing field `response`: the grader reads the response's text",
            ));
        };
        let conversation = conversation_text(r.prompt.as_ref());
        for (i, c) in r.criteria.iter().enumerate() {
            let id = format!("{}@{}#criteria[{i}]", r.id, r.system);
            let met = match c.met {
                Some(met) => met,
                None if c.met_by.is_empty() => {
                    out.counts.criteria_unjudged += 1;
                    continue;
                }
                None => {
                    let yes = c.met_by.iter().filter(|(_, m)| *m).count();
                    let no = c.met_by.len() - yes;
                    if yes == no {
                        out.counts.criteria_tied.push(id);
                        continue;
                    }
                    yes > no
                }
            };
            let input = encode_pair(tokenizer, &conversation, response, &c.criterion)
                .map_err(|e| Error::input(file, r.line, &format!("criteria[{i}].criterion"), e.to_string()))?;
            let label = if met { "met" } else { "not_met" };
            let gold = CRITERION_LABELS.iter().position(|l| *l == label).expect("a criterion label");
            out.examples.push(TrainExample { id, inputs: vec![input.encoded], gold, scores: None });
        }
    }
    out.counts.examples = out.examples.len();
    Ok(out)
}

/// How many responses a rubric file holds (the training form's count; it is read with
/// the reader [`examples_from_rubric`] uses).
pub fn examples_from_rubric_count(file: &str, text: &str) -> Result<usize> {
    Ok(parse_rubric(file, text)?.0.len())
}

/// The human score dimensions of a metrics JSONL file's candidates in order of first
/// appearance: the outputs of a score head trained on it.
pub fn score_dimensions(candidates: &[Candidate]) -> Vec<String> {
    crate::data::common::first_appearance(candidates.iter().flat_map(|c| c.human.iter().map(|(d, _)| d.clone())))
}

/// Examples of the `score` task from the candidates of metrics JSONL file `file`
/// (FORMATS.md section 6): one per line with a human score of at least one of
/// `dimensions` (the head's outputs), its input the score pair
/// (`model::score::score_input`: the candidate, then what `input` adds). Lines without such a score are left out (listed), and so are dimensions
/// the head does not have (named). Example ids: `ID@SYSTEM`.
pub fn examples_from_candidates(
    file: &str,
    candidates: &[Candidate],
    dimensions: &[String],
    tokenizer: &TextTokenizer,
    input: crate::model::score::ScoreInput,
) -> Result<TrainData> {
    let mut out = TrainData::default();
    for c in candidates {
        let id = format!("{}@{}", c.id, c.system);
        for (d, _) in &c.human {
            if !dimensions.contains(d) && !out.counts.other_dimensions.contains(d) {
                out.counts.other_dimensions.push(d.clone());
            }
        }
        let scores: Vec<Option<f64>> =
            dimensions.iter().map(|d| c.human.iter().find(|(h, _)| h == d).map(|(_, v)| *v)).collect();
        if scores.iter().all(Option::is_none) {
            out.counts.unscored.push(id);
            continue;
        }
        let encoded = score_input(tokenizer, file, c, input)?;
        let scores = Some(ScoreTargets { batch: c.batch.clone(), scores });
        out.examples.push(TrainExample { id, inputs: vec![encoded], gold: 0, scores });
    }
    out.counts.examples = out.examples.len();
    Ok(out)
}

/// The label list a task's classification head uses.
pub fn task_labels(task: Task) -> Vec<String> {
    task.labels().iter().map(|s| s.to_string()).collect()
}
