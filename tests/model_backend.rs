//! The model evaluation pipeline on any backend (a `jobs::RankWithModel` run on an encoder,
//! or by `run_on_backend`): progress per batch with the right total, cancellation, the
//! backend recorded in the report, and the GPU (lavapipe when present) ranking like the CPU.
//! Uses the real default model (`scripts/setup.sh model`) on two MCQA instances.

mod common;
use medrank::gpu::BackendChoice;
use medrank::jobs::{self, EvaluateRequest, ModelJob, ModelOptions, NamedText};
use medrank::model::evaluate::EmptyOptions;
use medrank::model::{run_ready, Encoder, EncoderConfig, EvaluatorKind, HiddenStates, Readout, TextModel, TokenBatch};
use medrank::Error;
use std::cell::Cell;
use std::path::PathBuf;

fn model() -> TextModel {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
    assert!(dir.join("model.safetensors").exists(), "{} is missing: run `scripts/setup.sh model` first", dir.display());
    TextModel::read_dir(&dir).unwrap()
}

/// The first two MCQA instances of the example bundle (4 systems, 5 options each).
fn request() -> EvaluateRequest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/bundle.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("\"task\": \"mcqa\"")).take(2).collect();
    EvaluateRequest {
        bundle: NamedText::new("small.jsonl", lines.join("\n")),
        predictions: Vec::new(),
        rankings: None,
        corpus: None,
        options: Default::default(),
    }
}

/// Counts the sequences the pipeline really encodes, and the shape of every batch.
struct Counting<'a, E> {
    inner: &'a E,
    sequences: Cell<usize>,
    shapes: std::cell::RefCell<Vec<(usize, usize)>>,
}

impl<E: Encoder> Encoder for Counting<'_, E> {
    fn config(&self) -> &EncoderConfig {
        self.inner.config()
    }
    async fn encode(&self, batch: &TokenBatch, layer: usize) -> medrank::Result<HiddenStates> {
        self.sequences.set(self.sequences.get() + batch.batch);
        self.shapes.borrow_mut().push((batch.batch, batch.seq_len));
        self.inner.encode(batch, layer).await
    }
    async fn read_out(&self, batch: &TokenBatch, readout: Readout) -> medrank::Result<Vec<Vec<f32>>> {
        self.sequences.set(self.sequences.get() + batch.batch);
        self.shapes.borrow_mut().push((batch.batch, batch.seq_len));
        self.inner.read_out(batch, readout).await
    }
}

#[test]
fn progress_counts_every_encoded_sequence_and_its_work_per_batch() {
    let model = model();
    let req = request();
    let counting = Counting { inner: &model.encoder, sequences: Cell::new(0), shapes: Default::default() };
    let mut calls: Vec<jobs::EncodeProgress> = Vec::new();
    let options =
        ModelOptions { controls: jobs::ControlChoice::parse("no_argument,noise"), batch_size: 4, ..Default::default() };
    let mut progress = |p: &jobs::EncodeProgress| {
        calls.push(*p);
        true
    };
    let on = jobs::Encoding { model: &model, encoder: &counting, model_inputs: Vec::new(), progress: &mut progress };
    let (outcome, predictions) =
        run_ready(jobs::RankWithModel { request: &req, options: &options }.run_on(on)).unwrap();
    // Similarity evaluator: (4 systems + 2 controls) contexts + 5 options, per instance.
    let total = 2 * (6 + 5);
    assert_eq!(counting.sequences.get(), total);
    let (bundle, _) = medrank::data::parse_bundle("small.jsonl", &req.bundle.text).unwrap();
    assert_eq!(
        medrank::model::sequences_to_encode(&bundle, EvaluatorKind::Similarity, EmptyOptions::LeaveOut),
        2 * (4 + 5)
    );
    // The start (the count known, nothing planned), then the plan (tokens and work known,
    // before the first batch), then one call per batch of at most 4.
    assert_eq!((calls[0].sequences, calls[0].work, calls[0].sequences_done), (total, 0, 0));
    let plan = calls[1];
    assert_eq!((plan.sequences, plan.sequences_done, plan.work_done), (total, 0, 0));
    // The work by hand: rows x length x (2h + I + length), h = 384 and I = 1536 for MiniLM,
    // over the batch shapes the encoder really saw.
    let shapes = counting.shapes.borrow().clone();
    let by_hand: u64 = shapes.iter().map(|&(rows, len)| (rows * len * (2 * 384 + 1536 + len)) as u64).sum();
    assert_eq!(plan.work, by_hand);
    assert_eq!(calls.len(), 2 + shapes.len());
    let last = calls.last().unwrap();
    assert_eq!((last.sequences_done, last.work_done), (total, plan.work));
    let batches = &calls[1..];
    assert!(
        batches.windows(2).all(|w| w[0].work_done < w[1].work_done && w[1].sequences_done - w[0].sequences_done <= 4),
        "{calls:?}"
    );
    assert_eq!(predictions.len(), 12);
    assert_eq!(outcome.report.evaluators[0].evaluator, "all-MiniLM-L6-v2 (similarity)");
}

#[test]
fn the_time_left_comes_from_the_work_done_or_the_last_runs_rate() {
    let p = |work_done, work| jobs::EncodeProgress { work_done, work, ..Default::default() };
    let fresh = jobs::TimeEstimate { started: 10.0, prior_rate: None };
    // Nothing measured and no earlier run: no estimate.
    assert_eq!(fresh.seconds_left(&p(0, 1000), 10.0), None);
    assert_eq!(fresh.seconds_left(&p(10, 1000), 11.0), None, "1 % done is not yet measured");
    // 100 of 1000 units in 5 s: 900 left at 20 per second is 45 s.
    assert_eq!(fresh.seconds_left(&p(100, 1000), 15.0), Some(45.0));
    assert_eq!(fresh.rate(&p(1000, 1000), 60.0), Some(20.0));
    // An earlier run at 50 per second: 1000 units take 20 s before anything is done here.
    let known = jobs::TimeEstimate { started: 10.0, prior_rate: Some(50.0) };
    assert_eq!(known.seconds_left(&p(0, 1000), 10.0), Some(20.0));
    assert_eq!(known.seconds_left(&p(100, 1000), 15.0), Some(45.0), "this run's rate wins once measured");
}

#[test]
fn the_progress_callback_cancels() {
    let model = model();
    let mut calls = 0;
    let mut progress = |_: &jobs::EncodeProgress| {
        calls += 1;
        calls < 2 // the start is acknowledged, the first batch cancels
    };
    let (req, options) = (request(), ModelOptions::default());
    let on =
        jobs::Encoding { model: &model, encoder: &model.encoder, model_inputs: Vec::new(), progress: &mut progress };
    let result = run_ready(jobs::RankWithModel { request: &req, options: &options }.run_on(on));
    assert!(matches!(result, Err(Error::Cancelled)), "{:?}", result.err());
    assert_eq!(calls, 2);
}

#[test]
fn the_report_says_which_backend_ran_and_the_gpu_ranks_like_the_cpu() {
    let model = model();
    let req = request();
    let options = ModelOptions::default();
    let job = jobs::RankWithModel { request: &req, options: &options };
    let run = |choice| pollster::block_on(jobs::run_on_backend(&job, &model, choice, Vec::new(), &mut |_| true));
    let ((cpu, cpu_predictions), cpu_backend) = run(BackendChoice::Cpu).unwrap();
    assert_eq!(cpu_backend.backend, "cpu");
    let backend_of = |o: &jobs::Outcome<jobs::EvaluateReport>| {
        o.report.provenance.conventions.iter().find(|(k, _)| k == "backend").map(|(_, v)| v.clone())
    };
    assert_eq!(backend_of(&cpu).as_deref(), Some("cpu (candle)"));
    // The synchronous CPU entry point is the same pipeline (the backend line aside).
    let (sync, sync_predictions) =
        jobs::evaluate_with_model(&req, &model, Vec::new(), &ModelOptions::default()).unwrap();
    assert_eq!(sync_predictions, cpu_predictions);
    assert_eq!(sync.report.evaluators[0].report.tasks.len(), cpu.report.evaluators[0].report.tasks.len());

    match run(BackendChoice::Gpu) {
        Err(e) => {
            assert!(e.to_string().contains("GPU backend was requested but cannot run"), "{e}");
            common::skip_or_fail(&format!("the GPU half has no adapter ({e})"));
        }
        Ok(((gpu, gpu_predictions), gpu_backend)) => {
            assert_eq!(gpu_backend.backend, "gpu");
            assert!(backend_of(&gpu).unwrap().starts_with("gpu ("));
            let systems = |o: &jobs::Outcome<jobs::EvaluateReport>| {
                o.report.evaluators[0].report.tasks[0]
                    .systems
                    .iter()
                    .map(|s| (s.system.clone(), s.rank))
                    .collect::<Vec<_>>()
            };
            assert_eq!(systems(&gpu), systems(&cpu));
            for (g, c) in gpu_predictions.iter().zip(&cpu_predictions) {
                assert_eq!((&g.instance, &g.system, &g.predicted), (&c.instance, &c.system, &c.predicted));
                for ((gl, gp), (cl, cp)) in g.probs.iter().zip(&c.probs) {
                    assert_eq!(gl, cl);
                    assert!((gp - cp).abs() <= 1e-3, "{} {} {gl}: gpu {gp} vs cpu {cp}", g.instance, g.system);
                }
            }
        }
    }
}
