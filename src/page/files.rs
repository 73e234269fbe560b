//! The kinds of input file, in one place: what each kind is called, which parameters it
//! takes (the system of a HiTZ file, the dimension of a qrels file, ...), a first guess of a
//! file's kind from its name and first lines, and the check of one file on its own. Which
//! kinds a job reads is the job's (`jobs::JobSpec::inputs`). The page learns all of it from
//! the engine (`page::describe`, `wasm::describe_file`, `wasm::check_file`), so it keeps no
//! copy of its own.
//!
//! The guess only picks a reader; the user can change it, and the reader validates the
//! file for real.

use crate::data::controls::Control;
use crate::data::{self, NotJudgeable};
use crate::jobs::InputFile;
use crate::{Error, Result, Warning};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A parameter a kind of file takes, and where its default comes from.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KindParam {
    pub key: &'static str,
    pub label: &'static str,
    #[serde(skip)]
    default: ParamDefault,
}

/// How a parameter's default is made from the file name.
#[derive(Debug, Clone, Copy)]
enum ParamDefault {
    /// The name without folder and extension ("gpt4.jsonl" -> "gpt4").
    Stem,
    /// A Ranking-Over-Scoring file's system: the stem less the published files' prefix
    /// ("en.test_casimedicos_GPT4" -> "GPT4"); the no-argument file's as medrank writes it
    /// ("No_Argument" -> "no_argument", the import's base).
    RosSystem,
    /// The word after "qrels" in the name ("qrels.credibility.txt" -> "credibility"), else
    /// "relevance".
    QrelsDimension,
    /// "system__prompt.csv": the part before "__" (the whole stem without one).
    AnswerSystem,
    /// "system__prompt.csv": the part after "__" ("default" without one).
    AnswerPrompt,
}

/// One kind of input file.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FileKind {
    pub key: &'static str,
    pub label: &'static str,
    /// What the page shows where the kind takes no parameter.
    pub hint: &'static str,
    pub params: &'static [KindParam],
    /// A file the page imports into a file of another kind, as `medrank import` does (its
    /// check carries the imported file, which the page lists beside it); no job reads it as
    /// it is.
    pub imported: bool,
    /// The kinds of the other files its import reads (a HealthBench eval file's completions):
    /// the page sends them with its check, and checks it again when one changes.
    pub reads_with: &'static [&'static str],
}

const fn param(key: &'static str, label: &'static str, default: ParamDefault) -> KindParam {
    KindParam { key, label, default }
}

const fn kind(key: &'static str, label: &'static str, hint: &'static str, params: &'static [KindParam]) -> FileKind {
    FileKind { key, label, hint, params, imported: false, reads_with: &[] }
}

/// A kind the page imports (see [`FileKind::imported`]), with the kinds it reads with.
const fn imported(
    key: &'static str,
    label: &'static str,
    hint: &'static str,
    reads_with: &'static [&'static str],
) -> FileKind {
    FileKind { key, label, hint, params: &[], imported: true, reads_with }
}

use ParamDefault::*;

/// Every kind, in the order the page lists them.
pub const FILE_KINDS: &[FileKind] = &[
    kind("bundle", "Argument bundle", "instances with each system’s argument", &[]),
    kind(
        "predictions",
        "Evaluator predictions",
        "one evaluator; the file name names it",
        &[param("evaluator", "evaluator", Stem)],
    ),
    kind("rankings", "Human rankings", "instance, annotator, system, rank", &[]),
    kind("corpus", "Corpus (IR passages)", "passages for the IR-passages control", &[]),
    kind(
        "ros",
        "Ranking-Over-Scoring file (HiTZ)",
        "the no-argument file or one system’s file",
        &[param("system", "system", RosSystem)],
    ),
    kind("topics", "NRP topics", "queries", &[]),
    kind("qrels", "NRP judgements (qrels)", "", &[param("dimension", "dimension", QrelsDimension)]),
    kind("qrels_combined", "NRP judgements, all dimensions", "header qid docno dim1 dim2 …", &[]),
    kind("documents", "NRP documents", "judged documents", &[]),
    kind(
        "answers",
        "Generated answers",
        "",
        &[param("system", "system", AnswerSystem), param("prompt", "prompt", AnswerPrompt)],
    ),
    kind("answers_jsonl", "Generated answers (JSONL)", "qid, system, prompt, sample, text", &[]),
    kind("run", "Ranker run file (TREC)", "precomputed document scores", &[param("ranker", "ranker", Stem)]),
    kind("answer_scores", "Answer scores", "precomputed ranker scores of answers", &[param("ranker", "ranker", Stem)]),
    kind("expert_rankings", "Expert rankings (NRP)", "instance = query, system = item", &[]),
    kind("metrics", "Candidates with references (metrics)", "candidate, references, human scores", &[]),
    kind(
        "metrics_fit",
        "Human scores to fit on (metrics)",
        "other candidates with human scores (a dev split): Metrics fits the combination’s weights on them",
        &[],
    ),
    kind("rubric", "Graded rubric responses", "criteria with points, met or not", &[]),
    kind(
        "rubric_judged",
        "Rubric judged by people",
        "criteria with several people’s judgements (met_by); Agreement compares them",
        &[],
    ),
    kind(
        "rubric_grader",
        "A grader’s graded rubric",
        "the same responses and criteria with the grader’s met; Agreement sets it against the people",
        &[],
    ),
    kind(
        "rubric_responses",
        "Rubric responses to grade",
        "response texts and criteria with points; the model grades them",
        &[],
    ),
    kind(
        "statement_answers",
        "Answers with expert statements",
        "answer texts with must-have and nice-to-have statements; an NLI model checks them",
        &[],
    ),
    kind(
        "draft_prompts",
        "Prompts to draft rubrics for",
        "id and prompt; responses to grade and experts’ statements optional",
        &[],
    ),
    kind("evidence", "Evidence to draft from", "Markdown or text, one document a file; or documents, one a line", &[]),
    // HealthBench's public files, imported as `medrank import healthbench` does: the
    // meta-evaluation file into a rubric judged by people (Agreement, training a grader),
    // an eval file with its completions into responses to grade.
    imported(
        "healthbench",
        "HealthBench file (imported)",
        "an eval or meta-evaluation file of openai/simple-evals; the page imports it as medrank import healthbench does",
        &["healthbench_completions"],
    ),
    imported(
        "healthbench_completions",
        "HealthBench completions",
        "prompt_id, system, response: the responses to a HealthBench eval file’s prompts",
        &[],
    ),
];

pub fn file_kind(key: &str) -> Option<&'static FileKind> {
    FILE_KINDS.iter().find(|k| k.key == key)
}

/// The default parameters of `kind` for a file called `name`.
pub fn default_params(kind: &str, name: &str) -> BTreeMap<String, String> {
    let stem = crate::jobs::file_stem(name);
    let stem = stem.as_str();
    let mut answer_parts = stem.splitn(2, "__");
    let (answer_system, answer_prompt) = (answer_parts.next().unwrap_or(""), answer_parts.next().unwrap_or(""));
    let value = |d: ParamDefault| match d {
        Stem => stem.to_string(),
        RosSystem => ros_system(stem),
        QrelsDimension => qrels_dimension(stem),
        AnswerSystem if answer_system.is_empty() => stem.to_string(),
        AnswerSystem => answer_system.to_string(),
        AnswerPrompt if answer_prompt.is_empty() => "default".to_string(),
        AnswerPrompt => answer_prompt.to_string(),
    };
    let params = file_kind(kind).map(|k| k.params).unwrap_or(&[]);
    let mut out: BTreeMap<String, String> = params.iter().map(|p| (p.key.to_string(), value(p.default))).collect();
    // The published control files (Label_Only, Noise, IR_Passages) are control cases, as
    // `medrank import --control-source` marks them.
    if kind == "ros" && Control::of_name(&ros_system(stem)).is_some_and(|c| c != Control::NoArgument) {
        out.insert("control".into(), "true".into());
    }
    out
}

/// The system of a Ranking-Over-Scoring file called `stem` (see [`ParamDefault::RosSystem`]).
/// The published files are named `{language}.{split}_{dataset}_{system}`.
fn ros_system(stem: &str) -> String {
    let unprefixed = match stem.split_once('.') {
        Some((language, rest))
            if (2..=3).contains(&language.len()) && language.chars().all(|c| c.is_ascii_alphabetic()) =>
        {
            let mut parts = rest.splitn(3, '_');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(split), Some(_dataset), Some(system))
                    if ["train", "dev", "test", "val", "validation"].contains(&split.to_lowercase().as_str())
                        && !system.is_empty() =>
                {
                    system
                }
                _ => stem,
            }
        }
        _ => stem,
    };
    // The no-argument file is the import's base, found by its system: written as medrank
    // writes it. The control files keep their own spelling (the tables show `Label_Only`).
    match Control::of_name(unprefixed) {
        Some(Control::NoArgument) => Control::NoArgument.system_name().to_string(),
        _ => unprefixed.to_string(),
    }
}

/// "qrels.credibility" -> "credibility"; "relevance" when no word follows "qrels".
fn qrels_dimension(stem: &str) -> String {
    let lower = stem.to_lowercase();
    let word = lower.find("qrels").map(|at| {
        let rest = lower[at + "qrels".len()..].trim_start_matches(['.', '_', '-']);
        rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>()
    });
    match word {
        Some(w) if !w.is_empty() => w,
        _ => "relevance".to_string(),
    }
}

/// A first guess of a file's kind and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Guess {
    /// None when nothing in the name or the first lines gives the kind away.
    pub kind: Option<&'static str>,
    pub params: BTreeMap<String, String>,
}

/// What the page shows for a file added or re-kinded: with the user's `kind`, that kind's
/// default parameters; without, the first guess from the name and first lines.
pub fn describe(name: &str, text: &str, kind: Option<&str>) -> Guess {
    match kind.and_then(file_kind) {
        Some(k) => Guess { kind: Some(k.key), params: default_params(k.key, name) },
        None => guess_kind(name, text),
    }
}

/// Guesses a file's kind from its name and its first three non-empty lines.
pub fn guess_kind(name: &str, text: &str) -> Guess {
    let kind = guess(&name.to_lowercase(), text);
    Guess { kind, params: kind.map(|k| default_params(k, name)).unwrap_or_default() }
}

fn guess(lower: &str, text: &str) -> Option<&'static str> {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if lower.ends_with(".xml") || first.starts_with('<') {
        return Some("topics");
    }
    if let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(first) {
        let has = |keys: &[&str]| keys.iter().all(|k| obj.contains_key(*k));
        let kind = if has(&["prompt_id", "rubrics"]) || has(&["binary_labels", "rubric"]) {
            "healthbench"
        } else if has(&["prompt_id", "system", "response"])
            && !has(&["criteria"])
            && !has(&["must_have"])
            && !has(&["nice_to_have"])
        {
            "healthbench_completions"
        } else if has(&["arguments"]) {
            "bundle"
        } else if has(&["correct_option"]) {
            "ros"
        } else if has(&["id", "prompt"]) && !has(&["response"]) && !has(&["criteria"]) {
            // A prompt without an answer or criteria: one to draft a rubric for (its
            // experts' statements, if any, measure the draft).
            "draft_prompts"
        } else if has(&["must_have"]) || has(&["nice_to_have"]) {
            "statement_answers"
        } else if has(&["criteria"]) {
            rubric_kind(lower, &obj)
        } else if has(&["candidate"]) {
            "metrics"
        } else if has(&["instance", "predicted"]) {
            "predictions"
        } else if has(&["qid", "text", "system"]) {
            "answers_jsonl"
        } else if has(&["qid", "score"]) {
            "answer_scores"
        } else if has(&["docno"]) {
            if lower.contains("corpus") || lower.contains("passage") {
                "corpus"
            } else {
                "documents"
            }
        } else if has(&["qid", "query"]) {
            "topics"
        } else {
            return None;
        };
        return Some(kind);
    }
    let lowered = first.to_lowercase();
    let header: Vec<&str> = lowered.split([',', '\t', ' ']).map(str::trim).collect();
    let has_cols = |cols: &[&str]| cols.iter().all(|c| header.contains(c));
    if has_cols(&["instance", "annotator", "system", "rank"]) {
        return Some(if lower.contains("expert") { "expert_rankings" } else { "rankings" });
    }
    if has_cols(&["instance", "system", "predicted"]) {
        return Some("predictions");
    }
    if has_cols(&["qid", "system", "prompt", "score"]) {
        return Some("answer_scores");
    }
    if has_cols(&["qid", "query"]) && header.iter().any(|h| h.starts_with("answer")) {
        return Some("answers");
    }
    if has_cols(&["qid", "docno"]) {
        return Some("qrels_combined");
    }
    if lower.ends_with(".tsv") {
        return Some(if lower.contains("corpus") { "corpus" } else { "documents" });
    }
    let fields: Vec<&str> = first.split_whitespace().collect();
    if fields.len() == 6 && fields[1].eq_ignore_ascii_case("q0") {
        return Some("run");
    }
    let integer = |s: &str| {
        let digits = s.strip_prefix('-').unwrap_or(s);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    if fields.len() == 4 && integer(fields[3]) {
        return Some("qrels");
    }
    // Prose: what no reader above took, by the extensions drafting reads as one document.
    let extension = lower.rsplit_once('.').map_or("", |(_, e)| e);
    if ["md", "markdown", "txt", "text"].contains(&extension) {
        return Some("evidence");
    }
    None
}

/// Which kind of rubric file (FORMATS.md §7) a first line is, by its criteria:
/// - no `met`, people's `met_by`, and nothing Grade could score (no response text, or no
///   `points`, as in HealthBench's imported meta-evaluation): judged by people
///   (`rubric_judged`), which Agreement reads (Rubric would refuse it: nothing has `met`);
/// - no `met` and the responses' text: a file to grade (`rubric_responses`; people's
///   `met_by` may ride along);
/// - `met` and a name saying "grader", or a model grader's `p_met` (what Grade writes): a
///   grader's graded file (`rubric_grader`), which Agreement sets against the people and
///   Rubric still scores;
/// - otherwise graded (`rubric`).
fn rubric_kind(lower_name: &str, obj: &serde_json::Map<String, serde_json::Value>) -> &'static str {
    let criteria: Vec<&serde_json::Map<String, serde_json::Value>> = obj
        .get("criteria")
        .and_then(|c| c.as_array())
        .map(|c| c.iter().filter_map(|c| c.as_object()).collect())
        .unwrap_or_default();
    let given = |c: &serde_json::Map<String, serde_json::Value>, key: &str| c.get(key).is_some_and(|v| !v.is_null());
    let first = criteria.first().copied();
    let has = |key: &str| first.is_some_and(|c| given(c, key));
    // People may have judged some criteria of a response only (HealthBench): any will do.
    let judged_by_people = criteria.iter().any(|c| given(c, "met_by"));
    let file_name = lower_name.rsplit(['/', '\\']).next().unwrap_or(lower_name);
    let gradable = obj.contains_key("response") && has("points");
    if first.is_none() {
        "rubric"
    } else if !has("met") && judged_by_people && !gradable {
        "rubric_judged"
    } else if !has("met") && obj.contains_key("response") {
        "rubric_responses"
    } else if has("met") && (has("p_met") || file_name.contains("grader")) {
        "rubric_grader"
    } else {
        "rubric"
    }
}

/// What checking one file found.
#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    /// One line, e.g. "20 instances, 4 systems".
    pub summary: String,
    pub warnings: Vec<Warning>,
    /// What the page imported from it (an imported kind's file): the file it lists beside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported: Option<crate::jobs::NamedText>,
}

fn plural(n: usize, what: &str) -> String {
    match (n, what.strip_suffix('y')) {
        (1, _) => format!("1 {what}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        _ => format!("{n} {what}s"),
    }
}

fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> usize {
    items.collect::<BTreeSet<_>>().len()
}

/// Parses one file with the reader for its kind; the summary says what was found.
pub fn check_file(f: &InputFile) -> Result<FileSummary> {
    let (name, text) = (f.name.as_str(), f.text.as_str());
    let (summary, warnings) = match f.kind.as_str() {
        "healthbench" => return import_healthbench(f),
        "healthbench_completions" => {
            let (completions, systems) = data::healthbench::completions(name, text)?;
            let summary = format!(
                "{} from {} ({}); the page imports them with the HealthBench eval file they answer",
                plural(completions, "completion"),
                plural(systems.len(), "system"),
                systems.join(", ")
            );
            (summary, vec![])
        }
        "bundle" => {
            let (bundle, warnings) = data::parse_bundle(name, text)?;
            let tasks = data::common::first_appearance(bundle.instances.iter().map(|i| i.problem.task().name()));
            let summary = format!(
                "{}, {} ({})",
                plural(bundle.instances.len(), "instance"),
                plural(bundle.systems.len(), "system"),
                tasks.join(", ")
            );
            (summary, warnings)
        }
        "predictions" => {
            let (file, warnings) = data::parse_predictions(name, text)?;
            let systems = distinct(file.predictions.iter().map(|p| p.system.as_str()));
            (format!("{}, {}", plural(file.predictions.len(), "prediction"), plural(systems, "system")), warnings)
        }
        "rankings" | "expert_rankings" => {
            let (r, warnings) = data::parse_rankings(name, text)?;
            let summary = format!(
                "{}, {}, {}",
                plural(r.instances.len(), "instance"),
                plural(r.annotators.len(), "annotator"),
                plural(r.systems.len(), "system")
            );
            (summary, warnings)
        }
        "topics" => {
            let (topics, warnings) = data::parse_topics(name, text)?;
            (plural(topics.len(), "topic"), warnings)
        }
        "qrels" | "qrels_combined" => {
            // A preview: the run uses the page's not-judgeable option. A file given for one
            // dimension is read as the job reads it (its grades stay that dimension's).
            let not_judgeable = NotJudgeable::clef_ehealth_2021();
            let (judgments, warnings) = match (f.kind.as_str(), f.params.get("dimension")) {
                ("qrels", Some(dimension)) if !dimension.trim().is_empty() => {
                    let (j, w) = data::parse_qrels_dimension(name, text, dimension, &not_judgeable)?;
                    (vec![j], w)
                }
                _ => data::parse_qrels_any(name, text, "relevance", &not_judgeable)?,
            };
            let parts: Vec<String> = judgments
                .iter()
                .map(|j| {
                    let n: usize = j.grades.values().map(|d| d.len()).sum();
                    format!("{}: {} judged, {} not judgeable", j.dimension, n, j.missing.len())
                })
                .collect();
            (parts.join("; "), warnings)
        }
        "corpus" | "documents" => {
            let (docs, warnings) = data::parse_documents(name, text)?;
            (plural(docs.len(), "document"), warnings)
        }
        "answers" => {
            let (answers, queries, warnings) =
                data::parse_answers_csv(name, text, f.param("system")?, f.param("prompt")?)?;
            (format!("{} to {}", plural(answers.len(), "answer"), plural(queries.len(), "query")), warnings)
        }
        "answers_jsonl" => {
            let (answers, warnings) = data::parse_answers_jsonl(name, text)?;
            (plural(answers.len(), "answer"), warnings)
        }
        "answer_scores" => {
            let (scores, warnings) = data::parse_answer_scores(name, text)?;
            (plural(scores.len(), "answer score"), warnings)
        }
        "metrics" | "metrics_fit" => {
            let (candidates, warnings) = crate::eval::metrics::parse_candidates(name, text)?;
            let systems = distinct(candidates.iter().map(|c| c.system.as_str()));
            (format!("{}, {}", plural(candidates.len(), "candidate"), plural(systems, "system")), warnings)
        }
        "rubric" => {
            let (responses, warnings) = data::graded::parse_graded(name, text)?;
            let systems = distinct(responses.iter().map(|r| r.system.as_str()));
            (format!("{}, {}", plural(responses.len(), "graded response"), plural(systems, "system")), warnings)
        }
        "rubric_judged" => {
            // Read as Agreement reads it: a criterion's `met_by`, or a lone `met`.
            let (responses, warnings) = data::graded::parse_rubric(name, text)?;
            let criteria = responses.iter().flat_map(|r| &r.criteria);
            let judged = criteria.clone().filter(|c| !c.met_by.is_empty() || c.met.is_some()).count();
            let people = distinct(criteria.flat_map(|c| c.met_by.iter().map(|(p, _)| p.as_str())));
            let summary = format!(
                "{}, {} judged by {}",
                plural(responses.len(), "response"),
                match judged {
                    1 => "1 criterion".to_string(),
                    n => format!("{n} criteria"),
                },
                if people == 1 { "1 person".to_string() } else { format!("{people} people") }
            );
            (summary, warnings)
        }
        "rubric_grader" => {
            // Read as Agreement reads it (`points` may be left out); Agreement matches it to
            // the people's file when it runs. The reader refuses a file that mixes graded and
            // ungraded criteria, so the first criterion tells whether it is graded.
            let (responses, warnings) = data::graded::parse_rubric(name, text)?;
            if let Some(r) = responses.iter().find(|r| r.criteria.first().is_some_and(|c| c.met.is_none())) {
                return Err(Error::input(
                    name,
                    r.line,
                    "criteria[0].met",
                    "a grader\u{2019}s file needs the grader\u{2019}s `met` on every criterion",
                ));
            }
            let criteria: usize = responses.iter().map(|r| r.criteria.len()).sum();
            let systems = distinct(responses.iter().map(|r| r.system.as_str()));
            let summary = format!(
                "{} ({} criteria) with the grader\u{2019}s met, {}",
                plural(responses.len(), "response"),
                criteria,
                plural(systems, "system")
            );
            (summary, warnings)
        }
        "rubric_responses" => {
            let mut warnings = Vec::new();
            let responses = crate::jobs::read_rubric(&crate::jobs::NamedText::new(name, text), &mut warnings)?;
            let systems = distinct(responses.iter().map(|r| r.system.as_str()));
            let criteria = match responses.iter().map(|r| r.criteria.len()).sum::<usize>() {
                1 => "1 criterion".to_string(),
                n => format!("{n} criteria"),
            };
            (
                format!("{} to grade ({criteria}), {}", plural(responses.len(), "response"), plural(systems, "system")),
                warnings,
            )
        }
        "statement_answers" => {
            let (answers, warnings) = data::statements::parse_statements(name, text)?;
            let systems = distinct(answers.iter().map(|a| a.system.as_str()));
            let statements: usize = answers.iter().map(|a| a.must_have.len() + a.nice_to_have.len()).sum();
            (
                format!(
                    "{} ({}), {}",
                    plural(answers.len(), "answer"),
                    plural(statements, "statement"),
                    plural(systems, "system")
                ),
                warnings,
            )
        }
        "draft_prompts" => {
            let (prompts, warnings) = data::draft_prompts::parse_draft_prompts(name, text)?;
            let responses: usize = prompts.iter().map(|p| p.responses.len()).sum();
            let statements: usize = prompts.iter().map(|p| p.statements().count()).sum();
            let summary = format!(
                "{}, {} to grade, {} of experts",
                plural(prompts.len(), "prompt"),
                plural(responses, "response"),
                plural(statements, "statement")
            );
            (summary, warnings)
        }
        "evidence" => {
            let format = data::evidence::EvidenceFormat::of_file_name(name)?;
            let (documents, warnings) = data::evidence::read_evidence(&[(name, text, format)])?;
            (format!("{} ({})", plural(documents.len(), "document"), format.name()), warnings)
        }
        "ros" => {
            let (items, warnings) = data::parse_hitz(name, text)?;
            let system = f.param("system")?;
            (format!("{} in the HiTZ format; system `{system}`", plural(items.len(), "question")), warnings)
        }
        "run" => {
            let (entries, warnings) = data::parse_run(name, text)?;
            let queries = distinct(entries.iter().map(|e| e.qid.as_str()));
            (format!("{} for {}", plural(entries.len(), "scored document"), plural(queries, "query")), warnings)
        }
        other => return Err(Error::in_file(name, format!("this build cannot read “{other}” files yet"))),
    };
    Ok(FileSummary { summary, warnings, imported: None })
}

/// A HealthBench file imported as `medrank import healthbench --input FILE [--completions
/// FILE]` imports it (the same function): the meta-evaluation file on its own, an eval file
/// with the completions file among its companions. The imported rubric file is named after
/// the input (`meta_eval.jsonl` -> `meta_eval.imported.jsonl`).
fn import_healthbench(f: &InputFile) -> Result<FileSummary> {
    use data::healthbench::FileKind::{Eval, MetaEval};
    let kind = data::healthbench::file_kind(&f.name, &f.text)?;
    let completions = match (kind, f.companions.as_slice()) {
        (MetaEval, _) => None,
        (Eval, []) => {
            let (prompts, criteria) = data::healthbench::eval_prompts(&f.name, &f.text)?;
            let summary = format!(
                "HealthBench eval file: {} with rubrics ({criteria} criteria); add its completions file \
                 (prompt_id, system, response: the responses to grade) and the page imports both",
                plural(prompts, "prompt")
            );
            return Ok(FileSummary { summary, warnings: vec![], imported: None });
        }
        (Eval, [one]) => Some(one.clone()),
        (Eval, [first, second, ..]) => {
            return Err(Error::in_file(
                &f.name,
                format!("give one completions file for it, not several ({} and {})", first.name, second.name),
            ))
        }
    };
    let outcome = crate::jobs::import_healthbench(&crate::jobs::HealthBenchImportRequest {
        input: f.named(),
        completions: completions.clone(),
    })?;
    let r = &outcome.report;
    let imported = crate::jobs::NamedText::new(
        format!("{}.imported.jsonl", crate::jobs::file_stem(&f.name)),
        outcome.rubric_jsonl.clone(),
    );
    let summary = match (kind, &completions) {
        (MetaEval, _) => format!(
            "HealthBench meta-evaluation file: {} imported as {} ({}, {} criteria, {} physicians\u{2019} labels)",
            plural(r.records, "labelled pair"),
            imported.name,
            plural(r.responses, "response"),
            r.criteria,
            r.human_judgements
        ),
        (Eval, c) => format!(
            "HealthBench eval file: {} with {} imported as {} ({} to grade, {} criteria)",
            plural(r.records, "prompt"),
            c.as_ref().map_or("", |c| c.name.as_str()),
            imported.name,
            plural(r.responses, "response"),
            r.criteria
        ),
    };
    Ok(FileSummary { summary, warnings: r.warnings.clone(), imported: Some(imported) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinded(name: &str, text: &str, kind: &str) -> InputFile {
        InputFile { name: name.into(), text: text.into(), kind: kind.into(), ..Default::default() }
    }

    #[test]
    fn every_kind_a_job_names_exists_and_every_kind_is_read_by_some_job() {
        for job in crate::jobs::JOBS {
            let inputs = &job.inputs;
            let named = inputs.accepts.iter().chain(inputs.required.iter().flat_map(|g| g.iter()));
            for k in named.chain(inputs.model_replaces) {
                assert!(file_kind(k).is_some(), "{}: unknown kind {k}", job.name);
            }
            for group in inputs.required {
                assert!(group.iter().all(|k| inputs.accepts.contains(k)), "{}: required kind not accepted", job.name);
            }
        }
        for k in FILE_KINDS {
            let read = crate::jobs::JOBS.iter().any(|j| j.inputs.accepts.contains(&k.key));
            // An imported kind is read by the page's import, never by a job as it is.
            assert_eq!(read, !k.imported, "{}: read by a job {read}, imported {}", k.key, k.imported);
            for companion in k.reads_with {
                assert!(file_kind(companion).is_some_and(|c| c.imported), "{}: {companion}", k.key);
            }
        }
    }

    #[test]
    fn guesses_each_kind_from_the_first_line_or_the_name() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("topics.xml", "<topics>", Some("topics")),
            ("b.jsonl", r#"{"id": "1", "task": "mcqa", "arguments": {}}"#, Some("bundle")),
            ("gpt4.jsonl", r#"{"question": "q", "options": {}, "correct_option": 1}"#, Some("ros")),
            ("r.jsonl", r#"{"criteria": []}"#, Some("rubric")),
            ("g.jsonl", r#"{"response": "t", "criteria": [{"criterion": "c", "met": true}]}"#, Some("rubric")),
            (
                "u.jsonl",
                r#"{"response": "t", "criteria": [{"criterion": "c", "points": 1}]}"#,
                Some("rubric_responses"),
            ),
            // People's judgements without the response's text: nothing for a model to read,
            // a file for Agreement; on any criterion of the line, as HealthBench labels some.
            ("j.jsonl", r#"{"criteria": [{"criterion": "c", "met_by": {"p": true}}]}"#, Some("rubric_judged")),
            (
                "j.jsonl",
                r#"{"criteria": [{"criterion": "c", "points": 1}, {"criterion": "d", "met_by": {"p": true}}]}"#,
                Some("rubric_judged"),
            ),
            // With the text and points it is a file to grade (people's labels ride along);
            // without points (HealthBench's imported meta-evaluation) Grade cannot score it.
            (
                "c.jsonl",
                r#"{"response": "t", "criteria": [{"criterion": "c", "points": 2, "met_by": {"p": true}}]}"#,
                Some("rubric_responses"),
            ),
            (
                "physicians.jsonl",
                r#"{"response": "t", "criteria": [{"criterion": "c", "met_by": {"p": true}}]}"#,
                Some("rubric_judged"),
            ),
            // Graded as well as judged: Rubric scores it as before.
            ("j.jsonl", r#"{"criteria": [{"criterion": "c", "met": true, "met_by": {"p": true}}]}"#, Some("rubric")),
            // A grader's file: named so, or with a model grader's P(met) (what Grade writes).
            ("my-grader.jsonl", r#"{"criteria": [{"criterion": "c", "met": true}]}"#, Some("rubric_grader")),
            (
                "x.graded.jsonl",
                r#"{"criteria": [{"criterion": "c", "met": true, "p_met": 0.9}]}"#,
                Some("rubric_grader"),
            ),
            ("grader/graded.jsonl", r#"{"criteria": [{"criterion": "c", "met": true}]}"#, Some("rubric")),
            (
                "grader.jsonl",
                r#"{"criteria": [{"criterion": "c", "met": null, "met_by": {"p": true}}]}"#,
                Some("rubric_judged"),
            ),
            ("m.jsonl", r#"{"candidate": "c"}"#, Some("metrics")),
            ("p.jsonl", r#"{"instance": "1", "predicted": "A"}"#, Some("predictions")),
            ("a.jsonl", r#"{"qid": "1", "text": "t", "system": "s"}"#, Some("answers_jsonl")),
            ("s.jsonl", r#"{"qid": "1", "score": 1.5}"#, Some("answer_scores")),
            ("passages.jsonl", r#"{"docno": "d"}"#, Some("corpus")),
            ("docs.jsonl", r#"{"docno": "d"}"#, Some("documents")),
            ("t.jsonl", r#"{"qid": "1", "query": "q"}"#, Some("topics")),
            ("x.jsonl", r#"{"other": 1}"#, None),
            ("expert.csv", "instance,annotator,system,rank", Some("expert_rankings")),
            ("human.csv", "instance,annotator,system,rank", Some("rankings")),
            ("p.csv", "instance,system,predicted", Some("predictions")),
            ("s.csv", "qid,system,prompt,score", Some("answer_scores")),
            ("a.csv", "qid,query,answer", Some("answers")),
            ("q.tsv", "qid\tdocno\trelevance\tcredibility", Some("qrels_combined")),
            ("corpus.tsv", "d1\tsome text", Some("corpus")),
            ("run.bm25", "1 Q0 d1 1 12.5 bm25", Some("run")),
            ("qrels.txt", "1 0 d1 2", Some("qrels")),
            ("notes.txt", "hello", Some("evidence")),
            ("guide.md", "# Otitis media", Some("evidence")),
            ("x.jsonl", r#"{"id": "a", "prompt": "q", "must_have": ["s"]}"#, Some("draft_prompts")),
            (
                "x.jsonl",
                r#"{"id": "a", "prompt": "q", "response": "r", "must_have": ["s"]}"#,
                Some("statement_answers"),
            ),
            ("notes.csv", "hello", None),
        ];
        for (name, first, want) in cases {
            assert_eq!(guess_kind(name, &format!("\n{first}\nmore")).kind, *want, "{name}: {first}");
        }
    }

    #[test]
    fn the_example_rubric_files_are_told_apart_graded_to_grade_judged_and_a_graders() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rubric");
        for (name, kind, summary) in [
            ("graded.jsonl", "rubric", "8 graded responses, 2 systems"),
            ("conversations.jsonl", "rubric_responses", "12 responses to grade (46 criteria), 2 systems"),
            ("../statements/answers.jsonl", "statement_answers", "6 answers (18 statements), 2 systems"),
            // People's judgements and a grader's file on the same criteria: Agreement's pair.
            ("judged.jsonl", "rubric_judged", "6 responses, 23 criteria judged by 3 people"),
            ("grader.jsonl", "rubric_grader", "6 responses (24 criteria) with the grader\u{2019}s met, 2 systems"),
            (
                "healthbench/meta_eval_grader.jsonl",
                "rubric_grader",
                "6 responses (14 criteria) with the grader\u{2019}s met, 1 system",
            ),
        ] {
            let text = std::fs::read_to_string(root.join(name)).unwrap();
            assert_eq!(guess_kind(name, &text).kind, Some(kind), "{name}");
            let file = kinded(name, &text, kind);
            assert_eq!(check_file(&file).unwrap().summary, summary);
        }
        // A file without the responses' text cannot be graded: the check says which line and field.
        let text = r#"{"id": "r1", "system": "s", "criteria": [{"criterion": "c", "points": 1}]}"#;
        let file = kinded("u.jsonl", text, "rubric_responses");
        let e = check_file(&file).unwrap_err();
        assert_eq!(e.location().map(|l| (l.line, l.field.clone())), Some((Some(1), Some("response".to_string()))));
        // An ungraded file given as a grader's: the check names the line and field.
        let file = kinded("u.jsonl", text, "rubric_grader");
        let e = check_file(&file).unwrap_err();
        assert_eq!(
            e.location().map(|l| (l.line, l.field.clone())),
            Some((Some(1), Some("criteria[0].met".to_string())))
        );
    }

    #[test]
    fn healthbench_files_are_recognised_and_imported_as_the_cli_imports_them() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rubric/healthbench");
        let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap();
        for (name, kind) in [
            ("meta_eval.jsonl", "healthbench"),
            ("eval.jsonl", "healthbench"),
            ("completions.jsonl", "healthbench_completions"),
        ] {
            assert_eq!(guess_kind(name, &read(name)).kind, Some(kind), "{name}");
        }
        // What `medrank import healthbench` writes (the same function), listed as the kind
        // the jobs read: people's judgements for Agreement, responses for Grade.
        let cli = |input: &str, completions: Option<&str>| {
            let named = |n: &str| crate::jobs::NamedText::new(n, read(n));
            crate::jobs::import_healthbench(&crate::jobs::HealthBenchImportRequest {
                input: named(input),
                completions: completions.map(named),
            })
            .unwrap()
            .rubric_jsonl
        };
        let meta = check_file(&kinded("meta_eval.jsonl", &read("meta_eval.jsonl"), "healthbench")).unwrap();
        let imported = meta.imported.unwrap();
        assert_eq!(imported.name, "meta_eval.imported.jsonl");
        assert_eq!(imported.text, cli("meta_eval.jsonl", None));
        assert_eq!(guess_kind(&imported.name, &imported.text).kind, Some("rubric_judged"));
        assert_eq!(
            meta.summary,
            "HealthBench meta-evaluation file: 14 labelled pairs imported as meta_eval.imported.jsonl \
             (6 responses, 14 criteria, 32 physicians\u{2019} labels)"
        );
        // An eval file alone says what it needs; with its completions it is imported.
        let mut eval = kinded("eval.jsonl", &read("eval.jsonl"), "healthbench");
        let alone = check_file(&eval).unwrap();
        assert!(alone.imported.is_none());
        assert_eq!(
            alone.summary,
            "HealthBench eval file: 3 prompts with rubrics (10 criteria); add its completions file \
             (prompt_id, system, response: the responses to grade) and the page imports both"
        );
        eval.companions = vec![crate::jobs::NamedText::new("completions.jsonl", read("completions.jsonl"))];
        let both = check_file(&eval).unwrap();
        let imported = both.imported.unwrap();
        assert_eq!(imported.text, cli("eval.jsonl", Some("completions.jsonl")));
        assert_eq!(guess_kind(&imported.name, &imported.text).kind, Some("rubric_responses"));
        assert_eq!(
            both.summary,
            "HealthBench eval file: 3 prompts with completions.jsonl imported as eval.imported.jsonl \
             (5 responses to grade, 17 criteria)"
        );
        let completions =
            check_file(&kinded("completions.jsonl", &read("completions.jsonl"), "healthbench_completions"));
        assert_eq!(
            completions.unwrap().summary,
            "5 completions from 2 systems (model-a, model-b); the page imports them with the HealthBench eval file they answer"
        );
        // Two completions files: which one is meant is not guessed.
        eval.companions.push(crate::jobs::NamedText::new("more.jsonl", read("completions.jsonl")));
        let e = check_file(&eval).unwrap_err().to_string();
        assert_eq!(e, "eval.jsonl: give one completions file for it, not several (completions.jsonl and more.jsonl)");
    }

    #[test]
    fn the_draft_examples_are_told_apart_and_a_drafted_rubric_is_what_its_grade_job_reads() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/draft");
        let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap();
        for (name, kind, summary) in [
            ("prompts.jsonl", "draft_prompts", "2 prompts, 3 responses to grade, 3 statements of experts"),
            ("guideline.md", "evidence", "1 document (markdown)"),
            // A .tsv of documents is NRP's documents first; the Draft job reads them as evidence.
            ("formulary.tsv", "documents", "3 documents"),
        ] {
            assert_eq!(guess_kind(name, &read(name)).kind, Some(kind), "{name}");
            assert_eq!(check_file(&kinded(name, &read(name), kind)).unwrap().summary, summary, "{name}");
        }
        // The rubric the page's Draft job writes is the kind its view's grade job requires.
        let request = crate::jobs::spec::JobRequest {
            files: vec![
                kinded("prompts.jsonl", &read("prompts.jsonl"), "draft_prompts"),
                kinded("guideline.md", &read("guideline.md"), "evidence"),
            ],
            options: serde_json::json!({}),
        };
        let reply = (crate::jobs::job("draft").unwrap().run.unwrap())(&request, &mut |_, _, _| Ok(())).unwrap();
        let view: serde_json::Value = serde_json::from_str::<serde_json::Value>(&reply).unwrap()["draft_view"].clone();
        let grade = crate::jobs::job(view["grade_job"].as_str().unwrap()).unwrap();
        let kind = guess_kind("prompts.draft.jsonl", view["rubric_jsonl"].as_str().unwrap()).kind.unwrap();
        assert!(grade.inputs.required.iter().all(|group| group.contains(&kind)), "{kind}");
        // An evidence file of another extension is refused, naming it.
        let e = check_file(&kinded("notes.rtf", "text", "evidence")).unwrap_err().to_string();
        assert!(e.starts_with("notes.rtf: the evidence format is read from the file's extension"), "{e}");
    }

    #[test]
    fn parameters_default_from_the_file_name() {
        let p = |kind, name| default_params(kind, name).into_iter().collect::<Vec<_>>();
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        // The published Ranking-Over-Scoring names: the prefix goes, the controls are
        // recognised in any case, the no-argument file is the import's base.
        assert_eq!(p("ros", "data/en.test_casimedicos_GPT4.jsonl"), [kv("system", "GPT4")]);
        assert_eq!(p("ros", "en.test_casimedicos_No_Argument.jsonl"), [kv("system", "no_argument")]);
        assert_eq!(p("ros", "No_Argument.jsonl"), [kv("system", "no_argument")]);
        assert_eq!(p("ros", "NO-ARGUMENT.JSONL"), [kv("system", "no_argument")]);
        assert_eq!(
            p("ros", "en.dev_casimedicos_Label_Only.jsonl"),
            [kv("control", "true"), kv("system", "Label_Only")]
        );
        assert_eq!(p("ros", "IR_Passages.jsonl"), [kv("control", "true"), kv("system", "IR_Passages")]);
        assert_eq!(p("ros", "gpt-4o.jsonl"), [kv("system", "gpt-4o")]);
        assert_eq!(p("ros", "v1.2_final_model.jsonl"), [kv("system", "v1.2_final_model")]);
        assert_eq!(p("qrels", "qrels.credibility.txt"), [kv("dimension", "credibility")]);
        assert_eq!(p("qrels", "judgements.txt"), [kv("dimension", "relevance")]);
        assert_eq!(p("answers", "chatgpt__expert.csv"), [kv("prompt", "expert"), kv("system", "chatgpt")]);
        assert_eq!(p("answers", "chatgpt.csv"), [kv("prompt", "default"), kv("system", "chatgpt")]);
        assert_eq!(p("run", "run.bm25"), [kv("ranker", "run")]);
        assert!(p("bundle", "b.jsonl").is_empty());
    }

    #[test]
    fn plural_forms() {
        assert_eq!(plural(1, "query"), "1 query");
        assert_eq!(plural(3, "query"), "3 queries");
        assert_eq!(plural(2, "system"), "2 systems");
    }
}
