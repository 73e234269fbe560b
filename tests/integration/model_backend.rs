//! The model evaluation pipeline on any backend (a `jobs::RankWithModel` run on an encoder,
//! or by `run_on_backend`): progress per batch with the right total, cancellation, the
//! backend recorded in the report, and the GPU (lavapipe when present) ranking like the CPU.
//! Uses the real default model (`scripts/setup.sh model`) on two MCQA instances.

use crate::common;
use medrank::gpu::BackendChoice;
use medrank::jobs::{self, EvaluateRequest, ModelJob, ModelOptions, NamedText};
use medrank::model::evaluate::EmptyOptions;
use medrank::model::{run_ready, Encoder, EncoderConfig, EvaluatorKind, HiddenStates, Readout, TokenBatch};
use medrank::Error;
use std::cell::Cell;
use std::path::PathBuf;

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
    let model = crate::common::minilm();
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
fn the_time_left_comes_from_the_recent_work_or_the_last_runs_rate() {
    let p = |work_done, work| jobs::EncodeProgress { work_done, work, ..Default::default() };
    let mut fresh = jobs::TimeEstimate::new(0.0, None);
    // Nothing measured and no earlier run: no estimate. The tokenizing (the plan's report at
    // 10 s, nothing done) is not the encoding's time.
    assert_eq!(fresh.observe(&p(0, 1000), 10.0), None);
    assert_eq!(fresh.observe(&p(10, 1000), 11.0), None, "1 % done is not yet measured");
    // By hand: at 100 of 1000 units the window is the later quarter of the work done, from
    // the last batch at or before 75 units (10 units at 11 s): 90 units in 4 s, 22.5 a
    // second; 900 left take 40 s (the run's average since 10 s, 20 a second, says 45 s).
    assert_eq!(fresh.observe(&p(100, 1000), 15.0), Some(40.0));
    // 200 units at 19 s: from 100 units at 15 s, 100 in 4 s: 800 left take 32 s.
    assert_eq!(fresh.observe(&p(200, 1000), 19.0), Some(32.0));
    // A slower stretch, 300 units at 24 s: from 200 units at 19 s, 100 in 5 s, 700 left take
    // 35 s, within 25 % above the 32 s shown (40 s): the estimate stays at 32 s, never rising
    // on a steady machine's noise.
    assert_eq!(fresh.observe(&p(300, 1000), 24.0), Some(32.0));
    // Much slower, 400 units at 45 s: from 300 units at 24 s, 100 in 21 s, 600 left take
    // 126 s, more than 25 % above 32 s: the machine slowed, the rise is said.
    assert_eq!(fresh.observe(&p(400, 1000), 45.0), Some(126.0));
    // The whole run's rate, for the next run: 1000 units from 10 s to 60 s, 20 a second.
    assert_eq!(fresh.observe(&p(1000, 1000), 60.0), Some(0.0));
    assert_eq!(fresh.rate(), Some(20.0));
    // An earlier run at 50 per second: 1000 units take 20 s before anything is done here.
    let mut known = jobs::TimeEstimate::new(10.0, Some(50.0));
    assert_eq!(known.observe(&p(0, 1000), 10.0), Some(20.0));
    let to_ns = |s: Option<f64>| s.map(|s| (s * 1e9).round() / 1e9);
    assert_eq!(to_ns(known.observe(&p(10, 1000), 10.2)), Some(19.8), "1 % done: still the earlier rate");
    // This run's rate wins once measured (below the last estimate, so at once): 100 units at
    // 12 s, 90 since 10.2 s in 1.8 s, 50 a second: 900 left take 18 s.
    assert_eq!(to_ns(known.observe(&p(100, 1000), 12.0)), Some(18.0));
}

/// A run's progress after each batch: (seconds since the encoding began, work done).
type Marks = Vec<(f64, u64)>;

/// A recorded run of the page (tests/browser/bench-estimate.mjs writes them: each batch's
/// time since the encoding began, and the work done in parts per million).
fn recording(path: &std::path::Path) -> Marks {
    let recording: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let marks = recording["marks"].as_array().unwrap();
    marks.iter().map(|m| (m[0].as_f64().unwrap(), m[1].as_u64().unwrap())).collect()
}

/// The estimate after each batch of `marks`, as both front ends compute it.
fn replay(marks: &Marks) -> Vec<Option<f64>> {
    let work = marks.last().unwrap().1;
    let mut estimate = jobs::TimeEstimate::new(0.0, None);
    let p = |done| jobs::EncodeProgress { work_done: done, work, ..Default::default() };
    marks.iter().map(|&(t, done)| estimate.observe(&p(done), t)).collect()
}

/// At 10 %, 30 % and 60 % of the work: (share done, seconds said, seconds it then took).
fn checkpoints(marks: &Marks, shown: &[Option<f64>]) -> Vec<(f64, f64, f64)> {
    let (end, work) = *marks.last().unwrap();
    [0.1, 0.3, 0.6]
        .iter()
        .map(|share| {
            let i = marks.iter().position(|&(_, done)| done as f64 >= share * work as f64).unwrap();
            (marks[i].1 as f64 / work as f64, shown[i].unwrap(), end - marks[i].0)
        })
        .collect()
}

/// Real runs of the page on two machines of this project's kind (tests/fixtures/time_left,
/// each file says its machine) replayed through the estimate: from 10 % of the work on it is
/// within 25 % of the time the run then took, checked at 10, 30 and 60 %. `devmachine-*`
/// are four of six runs recorded on 2026-11-27 on a shared Zen 5; the other two, while
/// other builds loaded the 2-core machine (load average 6-9), missed by 31-39 % at 10 % (the
/// old rule by 41-42 %): the rule holds on a steady machine, which a shared one is not
/// always. `zen4-*` are all four runs of 2026-11-28 on an idle Zen 4, each within 10 %
/// (BENCHMARKS.md).
#[test]
fn the_time_left_is_within_a_quarter_on_recorded_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/time_left");
    let mut runs = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let marks = recording(&path);
        for (share, said, took) in checkpoints(&marks, &replay(&marks)) {
            assert!(
                (said - took).abs() <= 0.25 * took,
                "{} at {:.1} %: said {said:.1} s, took {took:.1} s",
                path.display(),
                100.0 * share
            );
        }
        runs += 1;
    }
    assert!(runs >= 1, "no recording in {}", dir.display());
}

/// A steady machine, made from a recorded run's batches (their work as recorded): 60 s per
/// million parts of work with a ±10 % wobble from batch to batch, and 5 s of start-up in
/// the first batch. The estimate leaves the start-up out (within 25 % at 10, 30 and 60 %;
/// the run's average since its start, the rule before issue 47, says 80 % too much at 10 %)
/// and never rises once it is measured.
#[test]
fn on_a_steady_machine_the_time_left_leaves_the_start_up_out_and_never_rises() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/time_left");
    let path = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let recorded = recording(&path);
    let mut marks: Marks = vec![(0.0, 0)];
    let (mut t, mut done) = (0.0, 0u64);
    for (k, pair) in recorded.windows(2).enumerate() {
        let batch = pair[1].1 - pair[0].1;
        let wobble = 1.0 + 0.1 * (1.7 * k as f64).sin();
        t += batch as f64 * 60e-6 * wobble + if k == 0 { 5.0 } else { 0.0 };
        done += batch;
        marks.push((t, done));
    }
    let shown = replay(&marks);
    let work = done;
    for (share, said, took) in checkpoints(&marks, &shown) {
        assert!((said - took).abs() <= 0.25 * took, "at {:.1} %: said {said:.1} s, took {took:.1} s", 100.0 * share);
    }
    // The old rule on the same batches, by hand: 10 % is far off.
    let i = marks.iter().position(|&(_, d)| d as f64 >= 0.1 * work as f64).unwrap();
    let (at, d) = marks[i];
    let average = (work - d) as f64 * at / d as f64;
    assert!(average > 1.5 * (t - at), "the average since the start said {average:.1} s for {:.1} s", t - at);
    let from = marks.iter().position(|&(_, d)| d as f64 >= 0.02 * work as f64).unwrap();
    for (k, pair) in shown[from..].windows(2).enumerate() {
        let (a, b) = (pair[0].unwrap(), pair[1].unwrap());
        assert!(b <= a, "the estimate rose from {a:.2} s to {b:.2} s after batch {}", from + k);
    }
}

#[test]
fn the_progress_callback_cancels() {
    let model = crate::common::minilm();
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
    let model = crate::common::minilm();
    let req = request();
    let options = ModelOptions::default();
    let job = jobs::RankWithModel { request: &req, options: &options };
    let run = |choice| pollster::block_on(jobs::run_on_backend(&job, &model, choice, Vec::new(), None, &mut |_| true));
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
