//! The page's front end, beside the CLI's (`src/cli/`): plain Rust, built and tested
//! natively, that `src/wasm.rs` only wraps for JavaScript. The jobs themselves (their
//! options, the page's request read into theirs, their runs, tables and views) are the job
//! layer's, each described once (`jobs::JOBS`); here is what only the page has:
//!
//! - [`describe`]: what the page learns when the engine is ready (the kinds of input file,
//!   every job, the training form's defaults), so `www/` keeps no list and no default;
//! - [`run`], [`run_on_model`], [`check`]: a job by its name on the page's request (JSON
//!   text, as the worker sends it);
//! - `files`: the kinds of input file, the first guess and the check of one file;
//! - `training`: the training form and a training kept between the worker's steps;
//! - `bench`: the benchmark page's encoder grid, with the clock passed in;
//! - `hub`: a model by its Hub id, downloaded by the worker through the CLI's own steps.

pub mod bench;
pub mod files;
pub mod hub;
pub mod training;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::jobs::{self, JobRequest, KeptModel, NamedText};
pub use jobs::Progress;

/// What the page learns when the engine is ready.
#[derive(Serialize)]
struct Engine {
    version: &'static str,
    /// This build: threaded or not, its threads, its SIMD.
    build: bench::Build,
    /// The kinds of input file, in the order the page lists them.
    kinds: &'static [files::FileKind],
    /// Every job, in the order of the Run buttons.
    jobs: Vec<jobs::JobDescription>,
    /// The training form: its defaults, the tasks it trains and the arguments every file
    /// offers.
    training: training::FormDescription,
    /// The Hub: its URL, the hosts a download reaches, the suggested checkpoints.
    hub: hub::HubDescription,
}

/// [`Engine`] as JSON text.
pub fn describe() -> Result<String> {
    let engine = Engine {
        version: crate::VERSION,
        build: bench::Build::this(),
        kinds: files::FILE_KINDS,
        jobs: jobs::JOBS.iter().map(|j| j.description()).collect::<Result<_>>()?,
        training: training::FormDescription::new()?,
        hub: hub::description(),
    };
    jobs::json(&engine)
}

/// The job `name` without a model, on the page's `request` (JSON text): its reply, as JSON.
pub fn run(name: &str, request: &str, progress: Progress) -> Result<String> {
    let job = jobs::job(name)?;
    let run = job.run.ok_or_else(|| Error::invalid(job.needs_model))?;
    run(&JobRequest::from_json(request)?, progress)
}

/// The job `name` on the kept model; `now` is the page's clock in seconds.
pub async fn run_on_model(
    kept: &mut KeptModel,
    name: &str,
    request: &str,
    now: &dyn Fn() -> f64,
    progress: Progress<'_>,
) -> Result<String> {
    let job = jobs::job(name)?;
    let run = job.run_on_model.ok_or_else(|| Error::invalid(format!("{} runs no model", job.label)))?;
    let request = JobRequest::from_json(request)?;
    run(jobs::ModelRun { kept, request: &request, now, progress }).await
}

/// The page's request for its encoder's outputs ([`encoder_outputs`]).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EncodeRequest {
    /// Texts, and pairs of texts (`[text, pair]`, the pair `null` for a single text).
    inputs: Vec<(String, Option<String>)>,
    /// The layer whose states come back beside the last one's.
    layer: usize,
    /// The backend and the precision, named as the Model section names them.
    #[serde(default = "jobs::RunOptions::page")]
    options: jobs::RunOptions,
}

/// The kept model's encoder outputs on the page's request (JSON text: `{inputs, layer,
/// options}`), as JSON `{backend, precision, rows}` (rows: `model::EncoderOutputs`): the
/// engine's own states and logits, which the page's parity tests compare with
/// transformers' and with the CLI's on the same folder (tests/browser/families.test.mjs).
pub async fn encoder_outputs(kept: &mut KeptModel, request: &str) -> Result<String> {
    let r: EncodeRequest = serde_json::from_str(request)
        .map_err(|e| Error::invalid(format!("bad request for the encoder's outputs: {e}")))?;
    let (precision, choice) = r.options.read()?;
    kept.set_precision(precision.unwrap_or(kept.folder_precision));
    let (rows, backend) = kept.encoder_outputs(&r.inputs, r.layer, choice).await?;
    let precision = kept.model.encoder.model.precision.name();
    jobs::json(&serde_json::json!({ "backend": backend, "precision": precision, "rows": rows }))
}

/// The checks the job `name` makes before any model loads (`with_model`: a model will run
/// it), as JSON; run whenever the page's files or options change.
pub fn check(name: &str, request: &str, with_model: bool) -> Result<String> {
    let job = jobs::job(name)?;
    let check = job.check.ok_or_else(|| Error::invalid(format!("{} has no check before a run", job.label)))?;
    check(&JobRequest::from_json(request)?, with_model)
}

/// An error as the page shows it: `{message, location?, cancelled, option?}`, the message
/// without the location (the page points at the file, line and field) and, for a refused
/// option, without the CLI's flag: `option` names it, and the page says it after its own
/// form's field ("Epochs: 0: expected ...").
pub fn error_reply(e: &Error) -> serde_json::Value {
    let message = match e {
        Error::Input { message, .. } | Error::Option { message, .. } => message.clone(),
        other => other.to_string(),
    };
    let option = match e {
        Error::Option { option, .. } => Some(*option),
        _ => None,
    };
    let cancelled = matches!(e, Error::Cancelled);
    // An error a clinician may meet on an ordinary machine (a GPU chosen where there is none)
    // is said in their words; the engine's own words go in `detail`, behind a disclosure.
    let in_words = match e {
        Error::GpuRefused(not_used) => not_used.refusal_in_words(),
        _ => None,
    };
    let (message, detail) = match in_words {
        Some(words) => (words.to_string(), Some(message)),
        None => (sentence_case(&message), None),
    };
    serde_json::json!({"message": message, "detail": detail, "location": e.location(), "cancelled": cancelled, "option": option})
}

/// A message as the page writes it, a sentence: the CLI's `error: the import needs ...`
/// becomes "The import needs ...". Only a first word of lower-case letters changes, so a
/// message that starts with a file name (`gpt-4o.jsonl: ...`) or code keeps it.
pub fn sentence_case(message: &str) -> String {
    let first_word = message.split(' ').next().unwrap_or("");
    if message.contains(' ') && !first_word.is_empty() && first_word.chars().all(|c| c.is_ascii_lowercase()) {
        let mut chars = message.chars();
        let first = chars.next().map(|c| c.to_ascii_uppercase()).into_iter();
        first.chain(chars).collect()
    } else {
        message.to_string()
    }
}

/// The benchmark page's workload (`jobs::run_workload`, as `medrank bench --parts
/// workload`): `evaluate` on the bundle made from the CasiMedicos dev file's text.
pub async fn workload(
    kept: &mut KeptModel,
    dev_text: String,
    backend: &str,
    now: &dyn Fn() -> f64,
    progress: Progress<'_>,
) -> Result<String> {
    // "cpu-int8": the CPU in int8; any other backend in f32 (the bench grid may have left
    // the kept model in int8), as `medrank bench --parts workload --precision f32,int8`.
    let (name, precision) = match backend.strip_suffix("-int8") {
        Some(name) => (name, crate::model::Precision::Int8),
        None => (backend, crate::model::Precision::F32),
    };
    let choice = jobs::parse_backend(name)?;
    kept.set_precision(precision);
    let dev = NamedText::new("data/casimedicos/dev.jsonl", dev_text);
    let stage = format!("workload on {backend}");
    let mut on_batch = |done: usize, total: usize| progress(&stage, done, total).is_ok();
    let mut result = jobs::run_workload(kept, &dev, choice, now, &mut on_batch).await?;
    if result.backend == "cpu" {
        result.device = bench::cpu_kernels(result.threads);
    }
    jobs::json(&result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::{InputFile, JobRequest};

    /// A request as the worker sends it: JSON text.
    fn text(request: &JobRequest) -> String {
        serde_json::to_string(request).unwrap()
    }

    fn check_rank(request: &JobRequest, with_model: bool) -> Result<jobs::RankCheck> {
        // The page's `check` gives the same as JSON.
        let reply: serde_json::Value =
            serde_json::from_str(&check("rank_systems", &text(request), with_model)?).unwrap();
        let check = jobs::rank_check(request, with_model)?;
        assert_eq!(reply, serde_json::to_value(&check).unwrap());
        Ok(check)
    }

    #[test]
    fn the_pages_progress_is_a_share_of_the_work_that_fits_32_bits() {
        let p = |work_done, work| jobs::EncodeProgress { work_done, work, ..Default::default() };
        let progress_parts = jobs::progress_parts;
        assert_eq!(progress_parts(&p(0, 0)), (0, 0));
        // 5.5e9 units, more than u32 holds: a quarter done is 250,000 parts of a million.
        assert_eq!(progress_parts(&p(1_375_000_000, 5_500_000_000)), (250_000, 1_000_000));
        assert_eq!(progress_parts(&p(5_500_000_000, 5_500_000_000)), (1_000_000, 1_000_000));
    }

    #[test]
    fn a_refused_option_is_worded_by_each_front_end() {
        let e = Error::option("epochs", "0: expected a whole number from 1 to 10000");
        // The CLI names its flag; the page gets the option's key to name its own field.
        assert_eq!(e.to_string(), "--epochs 0: expected a whole number from 1 to 10000");
        let page = error_reply(&e);
        assert_eq!(page["message"], "0: expected a whole number from 1 to 10000");
        assert_eq!(page["option"], "epochs");
        assert_eq!(error_reply(&Error::option("dev_split", "x"))["option"], "dev_split");
        assert!(error_reply(&Error::invalid("add a training file"))["option"].is_null());
        assert_eq!(error_reply(&Error::invalid("add a training file"))["message"], "Add a training file");
    }

    #[test]
    fn a_gpu_chosen_where_none_runs_is_refused_in_words_with_the_engines_reason_as_detail() {
        use crate::gpu::{select_encoder, BackendChoice};
        use crate::model::config::{Arch, EncoderConfig, HeadKind};
        let config = EncoderConfig::tiny(Arch::Bert, 1, HeadKind::SequenceClassification, &["a", "b"]);
        let model = crate::model::load::random_model(config, 1).unwrap();
        // wgpu's own words where a build has no backend (the page's issue).
        let no_adapter = || Err(Error::model("no WebGPU/wgpu adapter: vulkan support not compiled in"));
        let Err(e) = select_encoder(model, BackendChoice::Gpu, no_adapter) else { panic!("a forced GPU ran") };
        let page = error_reply(&e);
        assert_eq!(
            page["message"],
            "You chose the GPU, but no graphics card (GPU) is available to this page: choose \u{201c}auto\u{201d} or \
             the CPU where the model runs (the results are the same, only slower)."
        );
        assert_eq!(page["detail"], e.to_string());
        assert!(error_reply(&Error::model("the model has no config.json"))["detail"].is_null());
    }

    #[test]
    fn messages_read_as_sentences_unless_they_start_with_a_name() {
        assert_eq!(sentence_case("the import needs the file"), "The import needs the file");
        assert_eq!(sentence_case("gpt-4o.jsonl: line 3"), "gpt-4o.jsonl: line 3");
        assert_eq!(sentence_case("`x` is unknown"), "`x` is unknown");
        assert_eq!(sentence_case("Already a sentence"), "Already a sentence");
        assert_eq!(sentence_case("cancelled"), "cancelled", "a bare word is a code, not a sentence");
    }

    fn ros_file(name: &str, system: &str, control: bool) -> InputFile {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/ros_published/{name}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let mut params = std::collections::BTreeMap::from([("system".to_string(), system.to_string())]);
        if control {
            params.insert("control".into(), "true".into());
        }
        InputFile {
            name: format!("en.test_casimedicos_{name}.jsonl"),
            text,
            kind: "ros".into(),
            params,
            ..Default::default()
        }
    }

    #[test]
    fn the_check_before_a_model_run_sees_the_control_files_and_counts_the_sequences() {
        // The published files as the page names them by default: the controls in their own
        // spelling and ticked, the no-argument file in any case.
        let files = vec![
            ros_file("no_argument", "No_Argument", false),
            ros_file("gpt-4o", "gpt-4o", false),
            ros_file("llama-3-70b", "llama-3-70b", false),
            ros_file("label_only", "Label_Only", true),
            ros_file("noise", "Noise", true),
        ];
        // Every control the inputs allow (`--controls` without a list).
        let request = JobRequest { files, options: serde_json::json!({"controls": "all"}) };
        let check = check_rank(&request, true).unwrap();
        let import = check.import.unwrap();
        assert_eq!(import.instances, 6);
        let run = check.model_run.unwrap();
        // Only no_argument is generated: the files are label_only and noise, and there is no
        // corpus for ir_passages; both left out are said.
        assert_eq!(run.generated, [crate::data::controls::Control::NoArgument]);
        let said: Vec<String> = run.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            said.iter().any(|w| w.contains("label_only control was not generated") && w.contains("`Label_Only`")),
            "{said:?}"
        );
        assert!(said.iter().any(|w| w.contains("noise control was not generated")), "{said:?}");
        assert!(said.iter().any(|w| w.contains("ir_passages control was not added")), "{said:?}");
        // By hand: 6 questions, 4 systems + no_argument = 5 arguments each; option 5 is empty
        // on 3 questions (make.py), so 4 or 5 candidates. Similarity: 5 contexts + the
        // candidates per question = 6*5 + (3*4 + 3*5) = 57; a head: 5 * 27 = 135.
        assert_eq!((run.sequences_similarity, run.sequences_head), (Some(57), 135));
        assert!(run.controls.contains(&"Label_Only".to_string()) && run.controls.contains(&"no_argument".to_string()));
        // The notes name the user's files, never the bundle imported from them (issue 47,
        // item 9): the empty options in words, at the no-argument file's lines (make.py:
        // option 5 of questions 1, 3 and 5), the engine's message folded as detail.
        let empty = check.notes.last().unwrap();
        assert_eq!(empty.location, Some(crate::Location::file("en.test_casimedicos_no_argument.jsonl")));
        assert_eq!(
            empty.message,
            "3 questions have an empty answer option (line 1, option 5; line 3, option 5; line 5, option 5): the \
             model leaves an empty option out of the answers it chooses from, so it is never picked (Options \u{2192} \
             \u{201c}keep empty options\u{201d} keeps it as a choice)"
        );
        assert_eq!(
            empty.detail.as_deref(),
            Some(
                "empty option texts: 3 (instance 1 option 5, instance 3 option 5, instance 5 option 5) (the questions \
                 imported from en.test_casimedicos_no_argument.jsonl, each instance id its line there)"
            )
        );
        assert_eq!(check.notes.len(), run.warnings.len(), "one note per warning");
        let json = serde_json::to_string(&check.notes).unwrap();
        assert!(!json.contains("imported_bundle"), "{json}");
        // Kept as choices, the note says so.
        let kept = JobRequest { options: serde_json::json!({"keep_empty_options": true}), ..request };
        let note = check_rank(&kept, true).unwrap().notes.pop().unwrap().message;
        assert!(note.ends_with("the model keeps an empty option as a choice, as Options \u{2192} \u{201c}keep empty options\u{201d} asks"), "{note}");
    }

    #[test]
    fn without_the_no_argument_file_the_check_names_the_files_it_has() {
        let request = JobRequest {
            files: vec![ros_file("gpt-4o", "gpt-4o", false), ros_file("noise", "noise", true)],
            options: Default::default(),
        };
        let e = sentence_case(&check_rank(&request, true).err().unwrap().to_string());
        assert!(e.starts_with("The Ranking-Over-Scoring import needs the no-argument file"), "{e}");
        assert!(
            e.contains(
                "none of en.test_casimedicos_gpt-4o.jsonl, en.test_casimedicos_noise.jsonl has the system no_argument"
            ),
            "{e}"
        );
    }

    // ------------------------------------------------------------------ grade ----------------

    /// A kept 2-layer random BERT (64 positions: the example's pairs get cut) with the
    /// MiniLM tokenizer and a head of `labels` (none when empty).
    fn tiny_grader(labels: &[&str]) -> KeptModel {
        tiny_model(crate::model::config::Arch::Bert, labels)
    }

    /// [`tiny_grader`] of the family `arch`.
    fn tiny_model(arch: crate::model::config::Arch, labels: &[&str]) -> KeptModel {
        use crate::model::config::{EncoderConfig, HeadKind};
        let head = if labels.is_empty() { HeadKind::None } else { HeadKind::SequenceClassification };
        let config = EncoderConfig { vocab_size: 30522, ..EncoderConfig::tiny(arch, 2, head, labels) };
        let model = crate::model::load::random_model(config, 11).unwrap();
        let files = crate::model::ModelFiles::for_tests("tiny-grader", &model);
        KeptModel::from_files(&files).unwrap()
    }

    /// The page's encoder outputs: per input its ids, every real token's states (last layer
    /// and the layer asked for) and the head's logits; an input's numbers do not depend on
    /// the batch it ran in (the padding is masked), for each family; a bad request is refused.
    #[test]
    fn the_pages_encoder_outputs_give_each_inputs_states_and_logits() {
        use crate::model::config::Arch;
        for arch in [Arch::Bert, Arch::DebertaV2, Arch::ModernBert] {
            let mut kept = tiny_model(arch, &["entailment", "neutral", "contradiction"]);
            let hidden = kept.model.encoder.model.config.hidden_size;
            let request = serde_json::json!({
                "inputs": [["A patient with fever.", null], ["The drug works.", "It was tested on mice."]],
                "layer": 1,
                "options": {"backend": "cpu"},
            });
            let reply: serde_json::Value =
                serde_json::from_str(&pollster::block_on(encoder_outputs(&mut kept, &request.to_string())).unwrap())
                    .unwrap();
            assert_eq!(reply["backend"]["backend"], "cpu");
            let rows: Vec<crate::model::EncoderOutputs> = serde_json::from_value(reply["rows"].clone()).unwrap();
            assert_eq!(rows.len(), 2);
            for row in &rows {
                assert_eq!(row.hidden.len(), row.ids.len() * hidden, "{arch:?}");
                assert_eq!(row.layer.len(), row.hidden.len());
                assert_eq!(row.logits.len(), 3);
                assert_ne!(row.hidden, row.layer, "{arch:?}: the last layer is not layer 1");
            }
            assert!(rows[1].ids.len() > rows[0].ids.len(), "the first input is padded in the batch");
            // The short input alone: the same numbers as beside the longer one.
            let alone = serde_json::json!({"inputs": [["A patient with fever.", null]], "layer": 1, "options": {"backend": "cpu"}});
            let reply: serde_json::Value =
                serde_json::from_str(&pollster::block_on(encoder_outputs(&mut kept, &alone.to_string())).unwrap())
                    .unwrap();
            let single: crate::model::EncoderOutputs = serde_json::from_value(reply["rows"][0].clone()).unwrap();
            let worst = single.hidden.iter().zip(&rows[0].hidden).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(worst <= 1e-5, "{arch:?}: padding changed the states by {worst}");
        }
        let mut kept = tiny_grader(&[]);
        let err = pollster::block_on(encoder_outputs(&mut kept, r#"{"inputs": [], "layers": 1}"#)).unwrap_err();
        assert!(err.to_string().contains("bad request for the encoder's outputs"), "{err}");
    }

    /// The example rubric to grade, as the page sends it, with `options`.
    fn grade_request(options: serde_json::Value) -> JobRequest {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(root.join("examples/rubric/conversations.jsonl")).unwrap();
        let graded = std::fs::read_to_string(root.join("examples/rubric/graded.jsonl")).unwrap();
        let file = |name: &str, text: String, kind: &str| InputFile {
            name: name.into(),
            text,
            kind: kind.into(),
            ..Default::default()
        };
        JobRequest {
            // The graded example beside it is the Rubric job's: Grade reads only its own kind.
            files: vec![file("graded.jsonl", graded, "rubric"), file("conversations.jsonl", text, "rubric_responses")],
            options,
        }
    }

    /// The page's Grade on `kept`: the reply as JSON and the stages it reported.
    fn page_grade(kept: &mut KeptModel, request: &JobRequest) -> Result<(serde_json::Value, Vec<String>)> {
        let mut stages = Vec::new();
        let mut progress = |stage: &str, _: usize, _: usize| {
            stages.push(stage.to_string());
            Ok(())
        };
        let reply = pollster::block_on(run_on_model(kept, "grade", &text(request), &|| 0.0, &mut progress))?;
        Ok((serde_json::from_str(&reply).unwrap(), stages))
    }

    #[test]
    fn the_pages_grade_is_the_jobs_grade_with_its_views_and_the_graded_file() {
        let mut kept = tiny_grader(&["contradiction", "neutral", "entailment"]);
        let request = grade_request(serde_json::json!({"seed": 3, "resamples": 40, "backend": "cpu"}));
        let (reply, stages) = page_grade(&mut kept, &request).unwrap();

        // The job as the CLI runs it (`run_on_backend`, the same request and backend).
        let options: jobs::GradeJobOptions = request.options().unwrap();
        let rubric = request.required("rubric_responses", "the file to grade").unwrap().named();
        let req = jobs::GradeRequest { rubric, options: options.grade.clone() };
        let (_, choice) = options.run.read().unwrap();
        let mut all_right = |_: &jobs::EncodeProgress| true;
        let (cli, _) = pollster::block_on(jobs::run_on_backend(
            &req,
            &kept.model,
            choice,
            kept.fingerprints.clone(),
            kept.quality.as_ref(),
            &mut all_right,
        ))
        .unwrap();
        // Both through JSON text (serde_json reads some floats back one bit apart).
        let cli_report: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&cli.outcome.report).unwrap()).unwrap();
        assert_eq!(reply["report"], cli_report, "the same report");
        let csv: Vec<&str> = reply["tables"].as_array().unwrap().iter().map(|t| t["csv"].as_str().unwrap()).collect();
        assert_eq!(csv, cli.outcome.tables.iter().map(|t| t.to_csv()).collect::<Vec<_>>(), "the same CSV");
        let view = &reply["grade_view"];
        assert_eq!(view["graded_jsonl"], cli.graded_jsonl.as_str(), "the graded file is the CLI's --out");
        assert_eq!(view["graded_name"], "conversations.graded.jsonl");
        assert_eq!(view["grader"]["kind"], "zero_shot_nli");
        assert!(view["grader"]["description"].as_str().unwrap().starts_with("an NLI model, zero-shot"));

        // Every criterion once, under its response, in file order; each response's score.
        let responses = view["responses"].as_array().unwrap();
        assert_eq!(responses.len(), 12);
        let flat: Vec<&serde_json::Value> =
            responses.iter().flat_map(|r| r["criteria"].as_array().unwrap().iter()).collect();
        assert_eq!(flat, cli_report["criteria"].as_array().unwrap().iter().collect::<Vec<_>>());
        for (v, r) in responses.iter().zip(cli_report["responses"].as_array().unwrap()) {
            assert_eq!((&v["id"], &v["line"]), (&r["id"], &r["line"]));
            assert_eq!(v["score"], r["overall"]["score"]);
        }
        let report = &cli.outcome.report;
        // 64 positions: the conversations are cut, and the view says so in a sentence.
        assert!(!report.truncated.is_empty());
        let note = view["truncation"].as_str().unwrap();
        assert!(
            note.starts_with(&format!(
                "{} of {} (response, criterion) pairs",
                report.truncated.len(),
                report.criteria.len()
            )),
            "{note}"
        );
        assert!(note.contains("64-token limit"), "{note}");

        // The Scores tab: overall first, every system's mean, expected mean and interval.
        let scores = reply["rubric_view"]["scores"].as_array().unwrap();
        assert_eq!(reply["rubric_view"]["graded_by_model"], true);
        assert_eq!(scores[0]["score"], "overall");
        for s in cli_report["system_scores"].as_array().unwrap() {
            for m in s["scores"].as_array().unwrap() {
                let score = scores.iter().find(|v| v["score"] == m["score"]).unwrap();
                let row = score["systems"].as_array().unwrap().iter().find(|r| r["system"] == s["system"]).unwrap();
                assert_eq!(
                    (&row["mean"], &row["expected_mean"], &row["n"]),
                    (&m["mean"], &m["expected_mean"], &m["n"])
                );
                assert_eq!((&row["lo"], &row["hi"]), (&m["interval"]["lo"], &m["interval"]["hi"]));
            }
        }
        assert_eq!(reply["backend"]["backend"], "cpu");
        assert_eq!(reply["precision"], "f32");

        // The conversations carry a physician's `met_by`: the reply sets the grader against
        // them, as `medrank rubric-agreement --input conversations.jsonl --grader-file
        // conversations.graded.jsonl` does on the graded file it carries.
        let agreement = jobs::rubric_agreement(&jobs::RubricAgreementRequest {
            file: req.rubric.clone(),
            grader_file: Some(NamedText::new("conversations.graded.jsonl", cli.graded_jsonl.clone())),
        })
        .unwrap();
        let got = &reply["grader_agreement"];
        assert_eq!(got["report"], json_of(&agreement.report));
        let csv: Vec<&str> = got["tables"].as_array().unwrap().iter().map(|t| t["csv"].as_str().unwrap()).collect();
        assert_eq!(csv, agreement.tables.iter().map(|t| t.to_csv()).collect::<Vec<_>>());
        assert_eq!(got["rubric_agreement_view"]["has_grader"], true);
        assert_eq!(got["rubric_agreement_view"]["groups"][0]["group"], "all");

        // Progress: the pairs first, then the work, then the scores.
        assert_eq!(stages.first().unwrap(), "Grading with the model: 46 (response, criterion) pairs");
        assert!(stages.iter().any(|s| s.starts_with("Grading with the model: 46 of 46 sequences")), "{stages:?}");
        assert_eq!(stages.last().unwrap(), "Scoring the graded responses");
    }

    #[test]
    fn grade_sets_the_grader_against_people_only_where_they_judged() {
        // The example without its physicians' `met_by`: nobody to compare with, nothing added.
        let mut request = grade_request(serde_json::json!({"backend": "cpu", "resamples": 10}));
        let to_grade = request.files.iter_mut().find(|f| f.kind == "rubric_responses").unwrap();
        to_grade.text = to_grade
            .text
            .lines()
            .map(|line| {
                let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
                for c in v["criteria"].as_array_mut().unwrap() {
                    c.as_object_mut().unwrap().remove("met_by");
                }
                v.to_string()
            })
            .collect::<Vec<_>>()
            .join("\n");
        let (reply, _) = page_grade(&mut tiny_grader(&["met", "not_met"]), &request).unwrap();
        assert!(reply.get("grader_agreement").is_none());
        assert!(reply["grade_view"]["responses"].as_array().is_some_and(|r| r.len() == 12));
    }

    #[test]
    fn grading_stops_when_the_user_cancels() {
        let mut kept = tiny_grader(&["met", "not_met"]);
        let request = grade_request(serde_json::json!({"backend": "cpu", "resamples": 10}));
        let mut calls = 0;
        let mut progress = |_: &str, _: usize, _: usize| {
            calls += 1;
            if calls > 2 {
                Err(crate::Error::Cancelled)
            } else {
                Ok(())
            }
        };
        let e =
            pollster::block_on(run_on_model(&mut kept, "grade", &text(&request), &|| 0.0, &mut progress)).unwrap_err();
        assert!(matches!(e, crate::Error::Cancelled), "{e}");
    }

    #[test]
    fn a_model_that_cannot_grade_is_refused_in_a_sentence_that_says_what_can() {
        let request = grade_request(serde_json::json!({"backend": "cpu"}));
        let no_head = page_grade(&mut tiny_grader(&[]), &request).unwrap_err().to_string();
        assert!(no_head.starts_with("tiny-grader has no sequence-classification head: a grader is"), "{no_head}");
        let other = page_grade(&mut tiny_grader(&["LABEL_0", "LABEL_1"]), &request).unwrap_err().to_string();
        assert!(other.contains("name neither `met` and `not_met`"), "{other}");
        // No file to grade: the request says what to add.
        let mut request = request;
        request.files.retain(|f| f.kind != "rubric_responses");
        let missing = page_grade(&mut tiny_grader(&["met", "not_met"]), &request).unwrap_err().to_string();
        assert_eq!(missing, "add a rubric file with the responses\u{2019} text to grade");
    }

    /// Agreement on the example's people (judged.jsonl) and, when `with_grader`, its grader
    /// (grader.jsonl), as the page sends them: the reply as JSON.
    fn page_agreement(with_grader: bool) -> serde_json::Value {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rubric");
        let file = |name: &str, kind: &str| InputFile {
            name: name.into(),
            text: std::fs::read_to_string(root.join(name)).unwrap(),
            kind: kind.into(),
            ..Default::default()
        };
        let mut files = vec![file("graded.jsonl", "rubric"), file("judged.jsonl", "rubric_judged")];
        if with_grader {
            files.push(file("grader.jsonl", "rubric_grader"));
        }
        let request = JobRequest { files, options: Default::default() };
        let mut progress = |_: &str, _: usize, _: usize| Ok(());
        serde_json::from_str(&run("rubric_agreement", &text(&request), &mut progress).unwrap()).unwrap()
    }

    /// A value as the page reads it: through JSON text (serde_json's own parser may round a
    /// last digit, the same way for both sides).
    fn json_of<T: Serialize>(value: &T) -> serde_json::Value {
        serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap()
    }

    #[test]
    fn the_agreement_reply_is_the_jobs_report_tables_and_view() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rubric");
        let named = |name: &str| NamedText::new(name, std::fs::read_to_string(root.join(name)).unwrap());
        let outcome = jobs::rubric_agreement(&jobs::RubricAgreementRequest {
            file: named("judged.jsonl"),
            grader_file: Some(named("grader.jsonl")),
        })
        .unwrap();
        let reply = page_agreement(true);
        // The report and the CSVs are the job's: what `--json` and `--csv` write.
        assert_eq!(reply["report"], json_of(&outcome.report));
        let csvs: Vec<&str> = reply["tables"].as_array().unwrap().iter().map(|t| t["csv"].as_str().unwrap()).collect();
        assert_eq!(csvs, outcome.tables.iter().map(|t| t.to_csv()).collect::<Vec<_>>());
        // The view: every group in the report's order, the grader's and each person's figures.
        let view = &reply["rubric_agreement_view"];
        assert_eq!(view["has_grader"], true);
        let groups = view["groups"].as_array().unwrap();
        assert_eq!(groups.len(), outcome.report.groups.len());
        assert_eq!(groups[0]["group"], "all");
        for (v, g) in groups.iter().zip(&outcome.report.groups) {
            let grader = g.grader.as_ref().unwrap();
            assert_eq!(v["grader"]["macro_f1"], json_of(&grader.macro_f1), "{}", g.group);
            assert_eq!(v["grader"]["kappa"], json_of(&grader.kappa), "{}", g.group);
            assert_eq!(v["people"].as_array().unwrap().len(), g.humans.len());
            for (p, h) in v["people"].as_array().unwrap().iter().zip(&g.humans) {
                assert_eq!(p["rater"], h.grader.as_str());
                assert_eq!(p["macro_f1"], json_of(&h.agreement.macro_f1));
            }
            let against = match (grader.macro_f1.value(), g.human_mean_macro_f1.value()) {
                (Some(a), Some(m)) => serde_json::json!(if a >= m { "at_or_above" } else { "below" }),
                _ => serde_json::Value::Null,
            };
            assert_eq!(v["grader_against_people"], against, "{}", g.group);
        }
        // An undefined figure stays undefined, with its reason (never 0).
        let undefined = groups
            .iter()
            .flat_map(|g| g["people"].as_array().unwrap().iter().chain(g.get("grader")))
            .any(|r| r["macro_f1"].get("undefined").is_some());
        assert!(undefined, "the example has a group where a figure is undefined");
        // The people alone: no grader columns, the same people's figures.
        let humans = page_agreement(false);
        assert_eq!(humans["rubric_agreement_view"]["has_grader"], false);
        assert!(humans["rubric_agreement_view"]["groups"][0]["grader"].is_null());
        assert_eq!(humans["rubric_agreement_view"]["groups"][0]["people"], groups[0]["people"]);
    }

    #[test]
    fn the_rubric_reply_has_the_scores_view_of_its_report() {
        let request = grade_request(serde_json::json!({"resamples": 20, "confidence": 0.9}));
        let mut progress = |_: &str, _: usize, _: usize| Ok(());
        let reply: serde_json::Value =
            serde_json::from_str(&run("rubric", &text(&request), &mut progress).unwrap()).unwrap();
        let view = &reply["rubric_view"];
        assert_eq!((view["confidence"].as_f64(), &view["graded_by_model"]), (Some(0.9), &serde_json::json!(false)));
        let overall = &view["scores"][0];
        assert_eq!(overall["score"], "overall");
        let systems = &reply["report"]["system_scores"];
        assert_eq!(overall["systems"][1]["system"], systems[1]["system"]);
        assert_eq!(overall["systems"][1]["mean"], systems[1]["scores"][0]["mean"]);
        assert_eq!(overall["systems"][1]["lo"], systems[1]["scores"][0]["interval"]["lo"]);
        assert!(overall["systems"][1]["expected_mean"].is_null(), "people graded: no expected mean");
    }
}
