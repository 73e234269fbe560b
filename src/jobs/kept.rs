//! What the jobs that run a model's encoder share (ranking with a model as the evaluator,
//! grading rubric criteria, checking statements): the backend opened for it (the CLI's
//! `--backend`, or the encoder the page keeps across jobs) and its description in the
//! report, the work counted after every batch with the caller's cancel, and the page's
//! progress: a share of the work, the stage in words, the time left from the kept model's
//! last speed. A job says only what it encodes ([`ModelJob`]); [`run_on_backend`] (the
//! CLI) and [`KeptModel::run_for_page`] (the page) are the one runner each front end uses.

use std::future::Future;

use serde::{Deserialize, Serialize};

use super::quality::ModelQuality;
use crate::gpu::{AnyEncoder, BackendChoice, BackendReport};
use crate::model::{Encoder, Precision, TextModel};
use crate::report::{Fingerprint, Provenance};
use crate::{Error, Result, Warning};

/// A job that runs a model's encoder over its inputs.
pub trait ModelJob {
    /// What the job gives back: its report (with its tables) and what else the front ends
    /// write (the graded file, the model's predictions).
    type Output;

    /// The page's name for the encoding stage ("Grading with the model").
    const STAGE: &'static str;

    /// The stage before the work is known (the inputs being split into tokens), when it
    /// says more than the sequences' count: "46 (response, criterion) pairs".
    fn planning(_sequences: usize) -> Option<String> {
        None
    }

    /// The job on an encoder (the CPU's, the GPU's, a test's): its progress sees the work
    /// before the first batch and after each; its `false` cancels ([`Error::Cancelled`]).
    fn run_on<E: Encoder>(&self, on: Encoding<'_, E>) -> impl Future<Output = Result<Self::Output>>;

    /// The provenance of the output's report: where the backend and the precision that ran
    /// are written.
    fn provenance(output: &mut Self::Output) -> &mut Provenance;

    /// The report's place for the model's measured quality, and its warnings (where a
    /// model not to be trusted is said).
    fn trust(output: &mut Self::Output) -> (&mut Option<ModelQuality>, &mut Vec<Warning>);
}

/// Where a model job runs: the model, the encoder that runs it, the model's files'
/// fingerprints (for the report), and the progress after every batch (`false` cancels).
pub struct Encoding<'a, E> {
    pub model: &'a TextModel,
    pub encoder: &'a E,
    pub model_inputs: Vec<Fingerprint>,
    pub progress: &'a mut dyn FnMut(&EncodeProgress) -> bool,
}

/// Checks that the model has a sequence-classification head (the encoder reads it out,
/// `Readout::Logits`), or an error naming the model and what the job `needs` (a grader, an
/// NLI model).
pub fn check_classification_head(model: &TextModel, needs: &str) -> Result<()> {
    let loaded = &model.encoder.model;
    match (&loaded.head, loaded.config.head) {
        (Some(_), crate::model::HeadKind::SequenceClassification) => Ok(()),
        _ => Err(Error::invalid(format!("{} has no sequence-classification head: {needs}", model.name))),
    }
}

/// The backend and the precision that ran, in a report's provenance; the model's measured
/// quality (a model medrank trained) beside the output, and a warning when it is not to be
/// trusted: the one place every model job's report gets them.
fn describe_run<J: ModelJob>(
    output: &mut J::Output,
    model: &TextModel,
    backend: &BackendReport,
    quality: Option<&ModelQuality>,
) {
    let provenance = J::provenance(output);
    provenance.conventions.push(("backend".into(), describe_backend(backend)));
    provenance.conventions.push(("precision".into(), describe_precision(model, backend)));
    if let Some(q) = quality {
        provenance.conventions.push(quality_convention(q));
        let (place, warnings) = J::trust(output);
        record_quality(place, warnings, q);
    }
}

/// The report's provenance line of a model's measured quality.
pub fn quality_convention(q: &ModelQuality) -> (String, String) {
    ("model quality".into(), q.text.clone())
}

/// The model's measured quality in its place in a report, and the warning when it is not
/// to be trusted (both front ends, every model job).
pub fn record_quality(place: &mut Option<ModelQuality>, warnings: &mut Vec<Warning>, q: &ModelQuality) {
    *place = Some(q.clone());
    if let Some(w) = q.warning() {
        warnings.push(Warning::new(w));
    }
}

/// The measured quality a model folder's `train_log.json` records, if it has one.
pub fn model_quality(files: &crate::model::ModelFiles) -> Result<Option<ModelQuality>> {
    let name = format!("{}/train_log.json", files.name.trim_end_matches('/'));
    files.train_log_json.as_deref().map(|log| ModelQuality::from_train_log(&name, log)).transpose()
}

/// `job` on the backend `choice` asks for (`gpu::open_encoder`: Auto takes a hardware GPU
/// adapter when one exists, else the CPU): the CLI's `--backend`. The report's provenance
/// says which backend ran; the [`BackendReport`] comes back for the front end to show.
pub async fn run_on_backend<J: ModelJob>(
    job: &J,
    model: &TextModel,
    choice: BackendChoice,
    model_inputs: Vec<Fingerprint>,
    quality: Option<&ModelQuality>,
    progress: &mut dyn FnMut(&EncodeProgress) -> bool,
) -> Result<(J::Output, BackendReport)> {
    // LoadedModel holds candle tensors (reference counted): the clone shares the weights.
    let (encoder, backend) = crate::gpu::open_encoder(model.encoder.model.clone(), choice).await?;
    let mut output = job.run_on(Encoding { model, encoder: &encoder, model_inputs, progress }).await?;
    describe_run::<J>(&mut output, model, &backend, quality);
    Ok((output, backend))
}

/// The page's progress report: `(stage, done, total)`; `Err(Cancelled)` once the user
/// cancelled.
pub type Progress<'a> = &'a mut dyn FnMut(&str, usize, usize) -> Result<()>;

/// Where a kept-model job runs the encoder and in which arithmetic, named as `--backend` and
/// `--precision` (the page's Model section sends the same names).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct RunOptions {
    /// `auto` (a hardware GPU when there is one), `cpu` or `gpu` (an error without one).
    pub backend: String,
    /// `f32` or `int8`; empty: the model folder's own (int8 for a folder written by
    /// `medrank quantize`, else f32).
    pub precision: String,
}

impl Default for RunOptions {
    /// The CLI's: the CPU path, the reference the GPU is tested against, and the folder's
    /// own precision.
    fn default() -> Self {
        RunOptions { backend: "cpu".into(), precision: String::new() }
    }
}

impl RunOptions {
    /// The page's: the browser's GPU (WebGPU) when it has one, else the CPU. The only
    /// default the two front ends do not share: a page runs where the browser runs fastest.
    pub fn page() -> Self {
        RunOptions { backend: "auto".into(), ..RunOptions::default() }
    }

    /// The precision asked for (`None`: the folder's own) and the backend.
    pub fn read(&self) -> Result<(Option<Precision>, BackendChoice)> {
        let precision = match self.precision.trim() {
            "" => None,
            name => Some(Precision::parse(name)?),
        };
        Ok((precision, parse_backend(&self.backend)?))
    }
}

/// A model loaded once and kept across jobs (the page's worker holds one until the user
/// picks another): the text model, its files' fingerprints, and the encoder last opened for
/// it — so a second job neither parses the weights again nor rebuilds the CPU layers or
/// re-uploads them to the GPU.
pub struct KeptModel {
    pub model: TextModel,
    pub fingerprints: Vec<Fingerprint>,
    /// The model's tokenizer.json: a folder trained on it holds a copy.
    pub tokenizer_json: Vec<u8>,
    /// Work per second of this model's last run, and the backend choice it ran under: the
    /// next run's first time estimate ([`TimeEstimate`]).
    pub last_rate: Option<(BackendChoice, f64)>,
    /// The precision the model's folder holds (int8 weights or not): a run that asks for
    /// none, and a training, run in it.
    pub folder_precision: Precision,
    /// Its measured quality, when medrank trained it (its folder's `train_log.json`).
    pub quality: Option<ModelQuality>,
    opened: Option<(BackendChoice, AnyEncoder, BackendReport)>,
}

impl KeptModel {
    pub fn from_files(files: &crate::model::ModelFiles) -> Result<KeptModel> {
        let model = TextModel::from_files(files)?;
        Ok(KeptModel {
            quality: model_quality(files)?,
            folder_precision: model.encoder.model.precision,
            model,
            fingerprints: super::model_fingerprints(files),
            tokenizer_json: files.tokenizer_json.clone(),
            last_rate: None,
            opened: None,
        })
    }

    /// The encoder for `choice`, opened on first use and kept while the choice stays the
    /// same (another choice drops the old one first, freeing its GPU buffers).
    pub async fn encoder(&mut self, choice: BackendChoice) -> Result<(&AnyEncoder, &BackendReport)> {
        if !matches!(&self.opened, Some((kept, _, _)) if *kept == choice) {
            self.opened = None;
            let (encoder, report) = crate::gpu::open_encoder(self.model.encoder.model.clone(), choice).await?;
            self.opened = Some((choice, encoder, report));
        }
        let (_, encoder, report) = self.opened.as_ref().expect("opened above");
        Ok((encoder, report))
    }

    /// Run the kept model in `precision` from now on (the page's Options, the CLI's
    /// `--precision`): the encoder is opened again at the next job.
    pub fn set_precision(&mut self, precision: Precision) {
        if self.model.encoder.model.precision != precision {
            self.opened = None;
            self.model.set_precision(precision);
        }
    }

    /// [`run_on_backend`] on the kept encoder.
    pub async fn run<J: ModelJob>(
        &mut self,
        job: &J,
        choice: BackendChoice,
        progress: &mut dyn FnMut(&EncodeProgress) -> bool,
    ) -> Result<(J::Output, BackendReport)> {
        self.encoder(choice).await?;
        let (_, encoder, backend) = self.opened.as_ref().expect("opened above");
        let on = Encoding { model: &self.model, encoder, model_inputs: self.fingerprints.clone(), progress };
        let mut output = job.run_on(on).await?;
        describe_run::<J>(&mut output, &self.model, backend, self.quality.as_ref());
        Ok((output, backend.clone()))
    }

    /// [`crate::model::encoder_outputs`] of `inputs` on the kept encoder for `choice`, with
    /// the backend that ran: what the page's parity tests compare with transformers.
    pub async fn encoder_outputs(
        &mut self,
        inputs: &[(String, Option<String>)],
        layer: usize,
        choice: BackendChoice,
    ) -> Result<(Vec<crate::model::EncoderOutputs>, BackendReport)> {
        self.encoder(choice).await?;
        let (_, encoder, backend) = self.opened.as_ref().expect("opened above");
        Ok((crate::model::encoder_outputs(&self.model, encoder, inputs, layer).await?, backend.clone()))
    }

    /// `job` as the page runs it: in `precision` (the folder's own when `None`), on
    /// `choice`, its progress as the page
    /// shows it (a share of the work, [`progress_parts`]; the stage in words with the
    /// sequences, tokens and time left, measured once 2 % is done and before that at this
    /// model's last speed), and this run's speed kept for the next run's first estimate.
    pub async fn run_for_page<J: ModelJob>(
        &mut self,
        job: &J,
        precision: Option<Precision>,
        choice: BackendChoice,
        now: &dyn Fn() -> f64,
        progress: Progress<'_>,
    ) -> Result<(J::Output, BackendReport)> {
        let precision = precision.unwrap_or(self.folder_precision);
        if self.model.encoder.model.precision != precision {
            self.last_rate = None; // that speed was another arithmetic's
        }
        self.set_precision(precision);
        let prior_rate = self.last_rate.filter(|(kept, _)| *kept == choice).map(|(_, rate)| rate);
        let mut estimate = TimeEstimate::new(now(), prior_rate);
        let mut on_batch = |p: &EncodeProgress| {
            let (done, total) = progress_parts(p);
            progress(&stage::<J>(p, &mut estimate, now()), done, total).is_ok()
        };
        let out = self.run(job, choice, &mut on_batch).await?;
        if let Some(rate) = estimate.rate() {
            self.last_rate = Some((choice, rate));
        }
        Ok(out)
    }
}

/// The encoding's work done and in all as the page's progress takes them: parts per
/// million of the work, since the work itself passes 2^32 (usize on wasm32) on a large run
/// (8,605 sequences of ~250 tokens with MiniLM: ~5.5e9).
pub fn progress_parts(p: &EncodeProgress) -> (usize, usize) {
    const PARTS: u64 = 1_000_000;
    match p.work {
        0 => (0, 0),
        work => ((p.work_done.min(work) as u128 * PARTS as u128 / work as u128) as usize, PARTS as usize),
    }
}

/// "Grading with the model: 12 of 46 sequences (5.1 k tokens) · about 3 s left": what the
/// run encodes and how long it may take, from before its first batch.
fn stage<J: ModelJob>(p: &EncodeProgress, estimate: &mut TimeEstimate, now: f64) -> String {
    if p.work == 0 {
        if let Some(planning) = J::planning(p.sequences) {
            return format!("{}: {planning}", J::STAGE);
        }
    }
    let left = match estimate.observe(p, now) {
        Some(s) if p.work_done == 0 => {
            format!(" · about {} at this model's last speed", crate::report::fmt_duration(s))
        }
        Some(s) => format!(" · about {} left", crate::report::fmt_duration(s)),
        None => " · timing the first batches to estimate the time".into(),
    };
    format!("{}: {}{left}", J::STAGE, p.describe())
}

/// The backend names the CLI's `--backend` and the page's select use.
pub fn parse_backend(name: &str) -> Result<BackendChoice> {
    use BackendChoice;
    match name.trim().to_ascii_lowercase().as_str() {
        "auto" | "" => Ok(BackendChoice::Auto),
        "cpu" => Ok(BackendChoice::Cpu),
        "gpu" | "webgpu" => Ok(BackendChoice::Gpu),
        other => Err(Error::invalid(format!("unknown backend `{other}` (known: auto, cpu, gpu)"))),
    }
}

/// The arithmetic that ran: the model's precision on the CPU, f32 on the GPU.
pub fn describe_precision(model: &TextModel, backend: &BackendReport) -> String {
    match backend.backend.as_str() {
        "gpu" => crate::model::describe_precision(crate::model::Precision::F32),
        _ => crate::model::describe_precision(model.encoder.model.precision),
    }
}

/// "cpu (candle)", "gpu (adapter name)", plus why the CPU ran when it was a fallback.
pub fn describe_backend(backend: &BackendReport) -> String {
    // A browser may give an adapter no name (SwiftShader): the summary then starts blank.
    let device = backend.device.trim();
    match backend.fallback_reason() {
        Some(why) => format!("{} ({device}); the GPU was not used: {why}", backend.backend),
        None => format!("{} ({device})", backend.backend),
    }
}

/// How far a model evaluation has got, after each batch: sequences and tokens for people,
/// work ([`EncodingPlan::batch_work`], proportional to the arithmetic) for time estimates,
/// since batches run from shortest to longest and a share of sequences done is not a share
/// of the time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EncodeProgress {
    pub sequences_done: usize,
    pub sequences: usize,
    /// Tokens of every input, padding not counted.
    pub tokens: usize,
    pub work_done: u64,
    pub work: u64,
}

impl EncodeProgress {
    /// "1,234 of 8,605 sequences (1.9 M tokens)".
    pub fn describe(&self) -> String {
        format!(
            "{} of {} sequences ({} tokens)",
            crate::report::thousands(self.sequences_done),
            crate::report::thousands(self.sequences),
            crate::report::compact(self.tokens as f64)
        )
    }
}

/// The time left of a model evaluation, the one rule both front ends show (the CLI's
/// stderr, the page's progress): fed the progress after every batch ([`observe`]), it
/// estimates from this run's recent speed, or before enough is done to measure, from a rate
/// measured on an earlier run of the same model and backend.
///
/// Why not the run's average speed since its start: the first batch pays for starting the
/// thread pool or uploading to the GPU, and the speed per unit of work changes along a run
/// (batches run from shortest to longest sequences, with fewer rows each, so each batch's
/// fixed costs weigh differently; which way depends on the machine), so the average lags
/// and its estimate stays off (the page once said "about 2 min 41 s left" at 10 % of a run
/// that took 134 s more, issue 47). The rate is the work per second of the later quarter
/// of the work done so far ([`TimeEstimate::RECENT`]): it drops the start-up once past it
/// and follows the batches of now. And an estimate that rises while the machine is steady
/// reads as wrong: a new one above the last one shown is taken only when it is more than
/// [`TimeEstimate::RISE`] above it (the machine slowed down), else the last one stays.
///
/// [`observe`]: TimeEstimate::observe
#[derive(Debug, Clone)]
pub struct TimeEstimate {
    /// Work per second of an earlier run, if any.
    prior_rate: Option<f64>,
    /// (seconds on the caller's clock, work done): when the encoding began (the last
    /// progress with nothing done, after the inputs are tokenized) and after each batch.
    marks: Vec<(f64, u64)>,
    /// The last estimate given, in seconds left.
    shown: Option<f64>,
}

impl TimeEstimate {
    /// Work done before the run's own rate is trusted: the first batches are the shortest
    /// and pay for starting the thread pool or uploading to the GPU.
    pub const MEASURED_FROM: f64 = 0.02;
    /// The later share of the work done whose speed is the rate.
    pub const RECENT: f64 = 0.25;
    /// How far above the last estimate a new one must be to be shown: less is the noise
    /// of a steady machine (or a slower stretch of batches), more a machine that slowed.
    pub const RISE: f64 = 0.25;

    /// An estimate for a run starting at `started` (seconds on the caller's clock), with
    /// the work per second of an earlier run of the same model and backend, if any.
    pub fn new(started: f64, prior_rate: Option<f64>) -> Self {
        TimeEstimate { prior_rate, marks: vec![(started, 0)], shown: None }
    }

    /// Takes the progress `p` at `now` (call it after every batch: the rate comes from the
    /// batches between) and gives the seconds left, or `None` while nothing allows an
    /// estimate.
    pub fn observe(&mut self, p: &EncodeProgress, now: f64) -> Option<f64> {
        if p.work == 0 {
            return None;
        }
        if p.work_done == 0 {
            // Not begun: the encoding's time starts at the latest such report.
            self.marks = vec![(now, 0)];
        } else if self.marks.last().is_none_or(|&(_, done)| p.work_done > done) {
            self.marks.push((now, p.work_done));
        }
        let raw = self.raw_seconds_left(p, now)?;
        let shown = match self.shown {
            Some(last) if raw <= last * (1.0 + Self::RISE) => raw.min(last),
            _ => raw,
        };
        self.shown = Some(shown);
        Some(shown)
    }

    /// The estimate before smoothing: the work left at the recent rate.
    fn raw_seconds_left(&self, p: &EncodeProgress, now: f64) -> Option<f64> {
        let left = p.work.saturating_sub(p.work_done) as f64;
        if p.work_done as f64 >= Self::MEASURED_FROM * p.work as f64 {
            // The window starts at the last mark at or before the recent share's start.
            let start = (p.work_done as f64 * (1.0 - Self::RECENT)) as u64;
            let from = self.marks.partition_point(|&(_, done)| done <= start).saturating_sub(1);
            let (t0, w0) = self.marks[from];
            let (seconds, work) = (now - t0, p.work_done.saturating_sub(w0));
            if seconds > 0.0 && work > 0 {
                return Some(left * seconds / work as f64);
            }
        }
        self.prior_rate.filter(|r| *r > 0.0).map(|rate| left / rate)
    }

    /// The work per second of the whole run so far (from its first batch's start): the
    /// next run's first estimate, which covers a whole run again.
    pub fn rate(&self) -> Option<f64> {
        let (&(t0, _), &(t, done)) = (self.marks.first()?, self.marks.last()?);
        (done > 0 && t > t0).then(|| done as f64 / (t - t0))
    }
}

/// Counts what an encoder has encoded and reports it after every batch; the callback's
/// `false` stops the evaluation with [`Error::Cancelled`]. The evaluator's plan (told
/// before its first batch) gives the totals.
pub(super) struct ProgressEncoder<'a, E> {
    inner: &'a E,
    state: std::cell::Cell<EncodeProgress>,
    cancelled: std::cell::Cell<bool>,
    progress: std::cell::RefCell<&'a mut dyn FnMut(&EncodeProgress) -> bool>,
}

impl<'a, E> ProgressEncoder<'a, E> {
    /// Reports the `sequences` to encode before the evaluator's plan (its `false` cancels at
    /// once), then wraps `inner`.
    pub(super) fn start(
        inner: &'a E,
        sequences: usize,
        progress: &'a mut dyn FnMut(&EncodeProgress) -> bool,
    ) -> Result<Self> {
        let start = EncodeProgress { sequences, ..EncodeProgress::default() };
        if !progress(&start) {
            return Err(Error::Cancelled);
        }
        Ok(ProgressEncoder::new(inner, start, progress))
    }

    /// Wraps `inner`; `start` is what is known before the evaluator's plan.
    pub(super) fn new(
        inner: &'a E,
        start: EncodeProgress,
        progress: &'a mut dyn FnMut(&EncodeProgress) -> bool,
    ) -> Self {
        ProgressEncoder {
            inner,
            state: std::cell::Cell::new(start),
            cancelled: std::cell::Cell::new(false),
            progress: std::cell::RefCell::new(progress),
        }
    }
}

impl<E: crate::model::Encoder> crate::model::Encoder for ProgressEncoder<'_, E> {
    fn config(&self) -> &crate::model::EncoderConfig {
        self.inner.config()
    }

    /// The totals are known: reported at once, so a front end can say what the run will
    /// encode and how long it may take before the first batch ends.
    fn plan(&self, plan: &crate::model::EncodingPlan) {
        let state = EncodeProgress {
            sequences: plan.sequences,
            tokens: plan.tokens,
            work: plan.work(self.config()),
            ..EncodeProgress::default()
        };
        self.state.set(state);
        if !(self.progress.borrow_mut())(&state) {
            self.cancelled.set(true);
        }
    }

    async fn encode(
        &self,
        batch: &crate::model::TokenBatch,
        output_layer: usize,
    ) -> Result<crate::model::HiddenStates> {
        self.check_cancelled()?;
        let hidden = self.inner.encode(batch, output_layer).await?;
        self.count(batch).map(|()| hidden)
    }

    async fn read_out(
        &self,
        batch: &crate::model::TokenBatch,
        readout: crate::model::Readout,
    ) -> Result<Vec<Vec<f32>>> {
        self.check_cancelled()?;
        let rows = self.inner.read_out(batch, readout).await?;
        self.count(batch).map(|()| rows)
    }
}

impl<E: crate::model::Encoder> ProgressEncoder<'_, E> {
    fn check_cancelled(&self) -> Result<()> {
        if self.cancelled.get() {
            return Err(Error::Cancelled);
        }
        Ok(())
    }

    /// Adds a finished batch to the counts and reports them; the callback's `false` cancels.
    fn count(&self, batch: &crate::model::TokenBatch) -> Result<()> {
        let mut state = self.state.get();
        state.sequences_done = (state.sequences_done + batch.batch).min(state.sequences);
        let work =
            crate::model::EncodingPlan::batch_work(batch.batch, batch.seq_len, crate::model::Encoder::config(self));
        state.work_done = (state.work_done + work).min(state.work);
        self.state.set(state);
        if (self.progress.borrow_mut())(&state) {
            Ok(())
        } else {
            self.cancelled.set(true);
            Err(Error::Cancelled)
        }
    }
}
