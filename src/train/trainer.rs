//! The one training loop, for both engines and both front ends: a new head on the base
//! model, the frozen pass, then epochs of seeded shuffling, micro-batches summed into
//! optimiser steps, warm-up then linear decay, the dev figures after each epoch, the epoch
//! with the best dev metric kept, and early stopping.

use super::baseline::{chance_baseline, majority_baseline, Baseline};
use super::cpu::CpuEngine;
use super::dropout::StepMasks;
use super::engine::{Batches, Engine};
use super::examples::TrainExample;
use super::export::{detached, model_files};
use super::frozen::FrozenPass;
use super::gpu::GpuEngine;
use super::options::{
    check_options, schedule, scheduled_lr, trained_layers, ClassWeights, Freeze, SelectBy, TrainOptions,
};
use super::result::{EpochLog, StepRecord, TrainEvent, TrainResult};
use super::scores::{self, ScoreFigures};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::model::config::{EncoderConfig, HeadKind, HeadPooling};
#[cfg(not(target_arch = "wasm32"))]
use crate::model::embed::run_ready;
use crate::model::embed::TextModel;
use crate::model::encoder::Encoder;
use crate::model::load::{random_model, LoadedModel};
use crate::model::tokenize::TextTokenizer;
use crate::stats::classes::{ClassScores, Confusion};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// One epoch's dev figures (see [`EpochLog`]).
struct DevScores {
    accuracy: f64,
    macro_f1: Option<f64>,
    classes: Option<Vec<ClassScores>>,
    confusion: Option<Vec<Vec<u64>>>,
    loss: f64,
    metric: f64,
    /// The score task's agreement with the human scores.
    scores: Option<ScoreFigures>,
}

/// Start from `base` (a plain encoder or one with a head) and add a fresh seeded head of
/// the given kind when it has none.
pub fn with_new_head(base: &LoadedModel, kind: HeadKind, labels: &[String], seed: u64) -> Result<LoadedModel> {
    if kind == HeadKind::None {
        return Err(Error::invalid("choose a head kind to train"));
    }
    let mut m = base.clone();
    if m.head.is_some() && m.config.head == kind && m.config.labels == labels {
        return Ok(m);
    }
    let cfg = EncoderConfig { head: kind, labels: labels.to_vec(), ..m.config.clone() };
    let fresh = random_model(EncoderConfig { num_layers: 0, ..cfg.clone() }, seed)?;
    m.head = fresh.head;
    if m.weights.pooler.is_none() {
        m.weights.pooler = fresh.weights.pooler;
    }
    m.config = cfg;
    Ok(m)
}

/// Seconds on a monotonic clock, natively (the page passes the browser's clock instead:
/// `std::time::Instant` does not exist in wasm).
#[cfg(not(target_arch = "wasm32"))]
pub fn native_clock() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
}

/// Train a head (and optionally layers) on `train`, pick the epoch with the best dev metric
/// ([`TrainOptions::select_by`]) on `dev`. `kind`: `MultipleChoice` for MCQA, `SequenceClassification` with `labels`
/// otherwise. `progress` sees each epoch's log line.
#[cfg(not(target_arch = "wasm32"))]
pub fn train(
    base: &TextModel,
    kind: HeadKind,
    labels: &[String],
    train_set: &[TrainExample],
    dev_set: &[TrainExample],
    opts: &TrainOptions,
    progress: &mut dyn FnMut(&EpochLog),
) -> Result<TrainResult> {
    train_with_events(base, kind, labels, train_set, dev_set, opts, None, &mut |e| {
        if let TrainEvent::Epoch(log) = e {
            progress(log)
        }
    })
}

/// [`train`], reporting the cache, progress inside epochs (with examples/s) and epochs:
/// the [`Trainer`]'s steps run to the end, on the CPU (the trained part with candle's
/// autograd) or, given `gpu`, on that GPU: the frozen pass on the GPU encoder and the
/// trained part on [`Trainer::train_on_gpu`].
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
pub fn train_with_events(
    base: &TextModel,
    kind: HeadKind,
    labels: &[String],
    train_set: &[TrainExample],
    dev_set: &[TrainExample],
    opts: &TrainOptions,
    gpu: Option<GpuContext>,
    progress: &mut dyn FnMut(TrainEvent),
) -> Result<TrainResult> {
    let mut trainer =
        Trainer::new(base, kind, labels, train_set.to_vec(), dev_set.to_vec(), opts.clone(), native_clock)?;
    trainer.frozen_pass_blocking(base, gpu.as_ref())?;
    if trainer.has_frozen_pass() {
        progress(TrainEvent::Cached { inputs: trainer.inputs().1, seconds: trainer.cache_seconds() });
    }
    if let Some(ctx) = gpu {
        trainer.train_on_gpu(ctx)?;
    }
    while pollster::block_on(trainer.run_epoch(progress))?.is_some() {}
    pollster::block_on(trainer.finish())
}

/// Training in steps, so a front end can report progress and stop between them (the page's
/// worker must return to its message loop): [`Trainer::encode_batches`] until the frozen
/// part is computed for every input, then [`Trainer::run_epoch`] until it returns `None`
/// (the epochs are done, or the dev metric stopped improving), then [`Trainer::finish`].
/// [`train`] runs the same steps in one call.
pub struct Trainer {
    multiple_choice: bool,
    opts: TrainOptions,
    /// The head's labels (empty for multiple choice) and their loss weights.
    labels: Vec<String>,
    class_weights: Vec<f64>,
    /// Steps to record for a trace, and those recorded.
    trace_steps: usize,
    step_log: Vec<StepRecord>,
    /// The base model with the new head; its trained tensors are candle variables.
    model: LoadedModel,
    tokenizer: TextTokenizer,
    train_set: Vec<TrainExample>,
    dev_set: Vec<TrainExample>,
    /// Layers that stay frozen (computed once).
    lower: usize,
    frozen: FrozenPass,
    clock: fn() -> f64,
    rng: ChaCha8Rng,
    order: Vec<usize>,
    curve: Vec<EpochLog>,
    /// The best dev metric so far and its epoch (the engine keeps its weights).
    best: Option<(f64, usize)>,
    /// The score task: each dev example's predicted scores (human scale, the head's label
    /// order) at the best epoch so far; empty for the other tasks.
    best_dev_predictions: Vec<Vec<f64>>,
    step: usize,
    since_best: usize,
    stopped: bool,
    /// Candle's autograd, or the GPU ([`Trainer::train_on_gpu`]).
    engine: Box<dyn Engine>,
}

impl Trainer {
    /// A new head of `kind` on `base` (with `labels` for classification) and the trainable
    /// variables `opts.freeze` asks for; nothing is computed yet. `clock` gives seconds (for
    /// the examples/s figures only).
    pub fn new(
        base: &TextModel,
        kind: HeadKind,
        labels: &[String],
        train_set: Vec<TrainExample>,
        dev_set: Vec<TrainExample>,
        opts: TrainOptions,
        clock: fn() -> f64,
    ) -> Result<Trainer> {
        if train_set.is_empty() || dev_set.is_empty() {
            return Err(Error::invalid("training needs non-empty train and dev sets"));
        }
        if let Some(e) = train_set.iter().chain(&dev_set).find(|e| e.inputs.is_empty()) {
            return Err(Error::invalid(format!("example {} has no input", e.id)));
        }
        // Examples with human scores train a regression head (the score task), one output
        // per label (dimension); the others a classification or multiple-choice head.
        let regression = train_set[0].scores.is_some();
        let malformed = |e: &&TrainExample| match &e.scores {
            Some(s) => !regression || s.scores.len() != labels.len() || e.inputs.len() != 1,
            None => regression,
        };
        if let Some(e) = train_set.iter().chain(&dev_set).find(malformed) {
            return Err(Error::invalid(format!(
                "example {} does not fit the head: score examples have one input and one score (or none) per \
                 label ({}), and are not mixed with examples of other tasks",
                e.id,
                labels.len()
            )));
        }
        if regression && kind != HeadKind::SequenceClassification {
            return Err(Error::invalid("score examples train a sequence-classification head (regression)"));
        }
        let mut opts = opts;
        // Dropout left to the model: its config's (0.1 where it says none), checked as --dropout.
        opts.dropout.get_or_insert_with(|| super::options::model_dropout(&base.encoder.model.config));
        check_options(&opts)?;
        let multiple_choice = kind == HeadKind::MultipleChoice;
        let select_by =
            *opts.select_by.get_or_insert(if regression { SelectBy::Spearman } else { SelectBy::for_head(kind) });
        if regression != (select_by == SelectBy::Spearman) && select_by != SelectBy::Loss {
            return Err(Error::invalid(if regression {
                "a score model has no classes: use --select-by spearman or loss"
            } else {
                "Spearman picks the epoch of a score model (--task score): use --select-by accuracy, macro-f1 or loss"
            }));
        }
        let weighting = *opts.class_weights.get_or_insert(if multiple_choice || regression {
            ClassWeights::Equal
        } else {
            ClassWeights::Balanced
        });
        if multiple_choice && (select_by == SelectBy::MacroF1 || weighting == ClassWeights::Balanced) {
            return Err(Error::invalid(
                "multiple choice has no classes (the options differ per question): use --select-by accuracy or loss and --class-weights none",
            ));
        }
        if regression && weighting == ClassWeights::Balanced {
            return Err(Error::invalid("a score model has no classes to weigh: use --class-weights none"));
        }
        let class_weights = if multiple_choice || regression {
            Vec::new()
        } else {
            weighting.weights(labels.len(), train_set.iter().map(|e| e.gold))
        };
        let mut model = with_new_head(&base.encoder.model, kind, labels, opts.seed)?;
        // A score model reads the mean of the answer's tokens by default: dev picked it on
        // SQuALITY, and with the default input it agreed with the raters better than the first
        // token's state on every test dimension (README, "A learned metric").
        model.config.head_pooling = *opts.head_pooling.get_or_insert(if regression {
            HeadPooling::Mean
        } else {
            base.encoder.model.config.head_pooling
        });
        // The score task's targets are standardised with the training set's scale, which
        // the saved config keeps (its predictions are read back with it).
        model.config.score_scale = regression.then(|| scores::scale_of(&train_set, labels)).transpose()?;
        // ... and what it read of each candidate, so that predictions read the same.
        model.config.score_input = opts.score_input;
        // The trained model is run with the limit it was trained with: recorded in its
        // config.json when it is below the position table's (all-MiniLM-L6-v2's
        // sentence_bert_config.json says 256 of 512; the trained folder has no such file,
        // and `grade` used to cut its inputs at 512).
        let limit = base.tokenizer.max_tokens;
        model.config.max_seq_length = (limit < model.config.max_tokens()).then_some(limit);
        let n_layers = model.config.num_layers;
        if let Freeze::TopLayers(n) = opts.freeze {
            if n == 0 || n > n_layers {
                return Err(Error::invalid(format!(
                    "--freeze top:{n}: this model has {n_layers} layers (top:1 to top:{n_layers}; head or all otherwise)"
                )));
            }
        }
        let lower = n_layers - trained_layers(opts.freeze, n_layers);
        let threads = crate::model::cpu::worker_threads().max(1);
        let engine = CpuEngine::new(&mut model, opts.freeze, threads)?;
        let frozen = FrozenPass::new(&train_set, &dev_set, lower, &model.config);
        let order = (0..train_set.len()).collect();
        Ok(Trainer {
            multiple_choice,
            rng: ChaCha8Rng::seed_from_u64(opts.seed),
            opts,
            labels: labels.to_vec(),
            class_weights,
            trace_steps: 0,
            step_log: Vec::new(),
            model,
            tokenizer: base.tokenizer.clone(),
            train_set,
            dev_set,
            lower,
            frozen,
            clock,
            order,
            curve: Vec::new(),
            best: None,
            best_dev_predictions: Vec::new(),
            step: 0,
            since_best: 0,
            stopped: false,
            engine: Box::new(engine),
        })
    }

    /// Inputs whose frozen part is computed, of all (train and dev).
    pub fn inputs(&self) -> (usize, usize) {
        self.frozen.inputs()
    }

    /// Seconds the frozen pass took.
    pub fn cache_seconds(&self) -> f64 {
        self.frozen.seconds()
    }

    /// Whether the frozen layers run at all (not with `Freeze::All`).
    pub fn has_frozen_pass(&self) -> bool {
        self.lower > 0
    }

    /// Runs up to `max_batches` batches of the frozen pass on `encoder` (the base model's:
    /// the CPU path, or the GPU); true once every input is done.
    pub async fn encode_batches<E: Encoder>(&mut self, encoder: &E, max_batches: usize) -> Result<bool> {
        let sets = [self.train_set.as_slice(), self.dev_set.as_slice()];
        self.frozen.run(encoder, &self.tokenizer, sets, self.clock, max_batches).await
    }

    /// The whole frozen pass, natively: on the GPU of `gpu` when the trained part runs
    /// there (a GPU encoder over `base`), on `base`'s CPU encoder otherwise.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn frozen_pass_blocking(&mut self, base: &TextModel, gpu: Option<&GpuContext>) -> Result<()> {
        match gpu {
            // Without frozen layers there is nothing to encode on the GPU (and no reason to
            // upload the base model there too).
            Some(ctx) if self.has_frozen_pass() => {
                let encoder = crate::gpu::GpuEncoder::with_context(ctx.clone(), &base.encoder.model)?;
                pollster::block_on(self.encode_batches(&encoder, usize::MAX))?;
            }
            _ => {
                run_ready(self.encode_batches(&base.encoder, usize::MAX))?;
            }
        }
        Ok(())
    }

    /// The epochs logged so far.
    pub fn curve(&self) -> &[EpochLog] {
        &self.curve
    }

    /// Training examples and dev examples.
    pub fn sizes(&self) -> (usize, usize) {
        (self.train_set.len(), self.dev_set.len())
    }

    /// Runs the trained layers and the head on the GPU ([`super::gpu::GpuTrainer`]: WGSL
    /// forward and backward kernels, AdamW on the device) instead of candle's autograd:
    /// `top:N` (the lower layers from this trainer's frozen pass) or `all` (every layer and
    /// the embeddings, from the tokens); before the first epoch.
    pub fn train_on_gpu(&mut self, ctx: GpuContext) -> Result<()> {
        if self.opts.freeze == Freeze::HeadOnly {
            return Err(Error::invalid(
                "the GPU trainer trains encoder layers: a head alone trains on the CPU (the placement rule, jobs::TrainingJob::place)",
            ));
        }
        super::gpu::supports(&self.model.config)?;
        if !self.curve.is_empty() {
            return Err(Error::invalid("the GPU engine is chosen before the first epoch"));
        }
        // Its kernels draw the CPU engine's dropout masks (the same hash, train::dropout).
        self.engine = Box::new(GpuEngine::Ready(Box::new(ctx)));
        Ok(())
    }

    /// What training on the GPU holds there ([`super::gpu::GpuMemory`]): the trained
    /// tensors with their optimiser's state, and the largest micro-batch's activations
    /// (`batch_size` examples of the most inputs, all of the longest input's length).
    pub fn gpu_memory(&self) -> super::gpu::GpuMemory {
        let sets = || self.train_set.iter().chain(&self.dev_set);
        let per_example = sets().map(|e| e.inputs.len()).max().unwrap_or(1);
        let longest = sets().flat_map(|e| e.inputs.iter().map(|i| i.len())).max().unwrap_or(1);
        let n_out = if self.multiple_choice { 1 } else { self.labels.len() };
        super::gpu::GpuMemory::estimate(
            &self.model.config,
            n_out,
            self.lower,
            self.opts.freeze == Freeze::All,
            self.opts.batch_size * per_example,
            longest,
            self.opts.dropout.unwrap_or_default(),
        )
    }

    /// One epoch: the optimiser steps over the shuffled training set, then the dev
    /// figures (accuracy, loss; macro-F1, per-class scores and the confusion matrix for
    /// classification). `None` once training is over (all epochs run, or `patience` epochs without
    /// a better dev metric); an error before the frozen pass is complete. Async only for
    /// the GPU engine's read-backs; on the CPU it never waits.
    pub async fn run_epoch(&mut self, progress: &mut dyn FnMut(TrainEvent<'_>)) -> Result<Option<EpochLog>> {
        if self.is_over() {
            return Ok(None);
        }
        if self.frozen.prepared().is_none() {
            return Err(Error::invalid("the frozen layers are not computed yet for every input"));
        }
        let opts = self.opts.clone();
        let per_step = opts.batch_size * opts.grad_accum;
        let (total, warmup) = schedule(self.train_set.len(), &opts);
        self.engine.start(&self.model, self.lower, &opts).await?;
        let epoch = self.curve.len() + 1;
        self.order.shuffle(&mut self.rng);
        let order = self.order.clone();
        let mut loss_sum = 0.0;
        let mut lr = opts.learning_rate;
        let clock = self.clock;
        let started = clock();
        let mut last_report = started;
        let mut done = 0;
        for chunk in order.chunks(per_step) {
            lr = scheduled_lr(opts.learning_rate, self.step, warmup, total);
            let layer_lr = scheduled_lr(opts.layer_learning_rate, self.step, warmup, total);
            let step_loss = {
                // The engine's borrow of the sets ends with the step.
                let (engine, train) = self.engine_and_batches(false)?;
                engine.step(train, chunk, lr, layer_lr).await?
            };
            if !step_loss.is_finite() {
                // A NaN loss would train on (and write) NaN weights: the one check of the
                // losses of both engines.
                let ids: Vec<&str> = chunk.iter().take(5).map(|&i| self.train_set[i].id.as_str()).collect();
                let more = if chunk.len() > ids.len() { ", ..." } else { "" };
                let input =
                    format!("training step {} of epoch {epoch} (examples {}{more})", self.step + 1, ids.join(", "));
                return Err(crate::model::finite::named("loss", chunk[0], input));
            }
            loss_sum += step_loss;
            if self.step_log.len() < self.trace_steps {
                self.step_log.push(StepRecord {
                    step: self.step,
                    epoch,
                    examples: chunk.to_vec(),
                    lr,
                    layer_lr,
                    loss: step_loss / chunk.len() as f64,
                });
            }
            self.step += 1;
            done += chunk.len();
            if clock() - last_report >= 10.0 {
                last_report = clock();
                let rate = done as f64 / (last_report - started).max(1e-9);
                progress(TrainEvent::Step {
                    epoch,
                    examples: done,
                    of: self.train_set.len(),
                    examples_per_second: rate,
                });
            }
        }
        let train_seconds = clock() - started;
        progress(TrainEvent::Dev { epoch });
        let (dev, dev_predictions) = match self.model.config.score_scale.clone() {
            Some(scale) => {
                let outputs = {
                    let (engine, dev) = self.engine_and_batches(true)?;
                    engine.dev_outputs(dev).await?
                };
                let dev_loss = scores::loss_of_outputs(&self.dev_set, &outputs, &scale)?;
                self.check_dev_loss(dev_loss, epoch)?;
                let predicted: Vec<Vec<f64>> = outputs
                    .iter()
                    .map(|o| o.iter().enumerate().map(|(j, &v)| scale.score(j, v as f64)).collect())
                    .collect();
                (self.dev_agreement(&predicted, dev_loss)?, predicted)
            }
            None => {
                let (predicted, dev_loss) = {
                    let (engine, dev) = self.engine_and_batches(true)?;
                    engine.dev(dev).await?
                };
                self.check_dev_loss(dev_loss, epoch)?;
                (self.dev_scores(&predicted, dev_loss), Vec::new())
            }
        };
        let log = EpochLog {
            epoch,
            steps: self.step,
            train_loss: loss_sum / self.train_set.len() as f64,
            dev_accuracy: dev.accuracy,
            dev_macro_f1: dev.macro_f1,
            dev_loss: dev.loss,
            dev_metric: dev.metric,
            dev_classes: dev.classes,
            dev_confusion: dev.confusion,
            dev_scores: dev.scores,
            learning_rate: lr,
            train_seconds,
            examples_per_second: self.train_set.len() as f64 / train_seconds.max(1e-9),
        };
        progress(TrainEvent::Epoch(&log));
        self.curve.push(log.clone());
        let select_by = self.select_by();
        if self.best.is_none_or(|(best, _)| select_by.better(log.dev_metric, best)) {
            self.engine.keep_best()?;
            self.best = Some((log.dev_metric, epoch));
            self.best_dev_predictions = dev_predictions;
            self.since_best = 0;
        } else {
            self.since_best += 1;
            if self.since_best >= self.opts.patience {
                self.stopped = true;
            }
        }
        Ok(Some(log))
    }

    /// The engine, mutable, beside a set it reads (disjoint fields of `self`).
    fn engine_and_batches(&mut self, dev: bool) -> Result<(&mut dyn Engine, Batches<'_>)> {
        let [train_p, dev_p] = self
            .frozen
            .prepared()
            .ok_or_else(|| Error::invalid("the frozen layers are not computed yet for every input"))?;
        let batches = Batches {
            model: &self.model,
            tokenizer: &self.tokenizer,
            set: if dev { &self.dev_set } else { &self.train_set },
            prepared: if dev { dev_p } else { train_p },
            lower: self.lower,
            multiple_choice: self.multiple_choice,
            class_weights: &self.class_weights,
            score_scale: self.model.config.score_scale.as_ref(),
            batch_size: self.opts.batch_size,
            // Training steps drop with the step's masks; dev passes never do.
            dropout: self.opts.dropout.filter(|d| !dev && d.is_active()).map(|dropout| StepMasks {
                seed: self.opts.seed,
                step: self.step as u32,
                dropout,
                positions: self.model.config.max_tokens(),
            }),
        };
        Ok((self.engine.as_mut(), batches))
    }

    /// An epoch's dev figures from each dev example's predicted index and the summed loss:
    /// (accuracy, macro-F1, per-class scores, confusion matrix, mean loss, selecting metric).
    fn dev_scores(&self, predicted: &[usize], loss_sum: f64) -> DevScores {
        let n = self.dev_set.len();
        let correct = self.dev_set.iter().zip(predicted).filter(|(e, &p)| e.gold == p).count();
        let accuracy = correct as f64 / n as f64;
        let loss = loss_sum / n as f64;
        let confusion = (!self.multiple_choice)
            .then(|| Confusion::of(self.labels.len(), self.dev_set.iter().zip(predicted).map(|(e, &p)| (e.gold, p))));
        let macro_f1 = confusion.as_ref().map(Confusion::macro_f1);
        let metric = match self.select_by() {
            SelectBy::Accuracy => accuracy,
            SelectBy::MacroF1 => macro_f1.unwrap_or(f64::NAN),
            SelectBy::Loss => loss,
            SelectBy::Spearman => f64::NAN,
        };
        DevScores {
            accuracy,
            macro_f1,
            classes: confusion.as_ref().map(|c| c.per_class(&self.labels)),
            confusion: confusion.as_ref().map(Confusion::rows),
            loss,
            metric,
            scores: None,
        }
    }

    /// The score task's dev figures from each dev example's predicted scores (human scale)
    /// and the summed loss: Spearman and kappa per batch ([`scores::score_figures`]); no
    /// accuracy (NaN: a regression has none).
    fn dev_agreement(&self, predicted: &[Vec<f64>], loss_sum: f64) -> Result<DevScores> {
        let figures = scores::score_figures(&self.dev_set, predicted, &self.labels)?;
        let loss = loss_sum / self.dev_set.len() as f64;
        let metric = match self.select_by() {
            SelectBy::Loss => loss,
            _ => figures.spearman.unwrap_or(f64::NAN),
        };
        Ok(DevScores {
            accuracy: f64::NAN,
            macro_f1: None,
            classes: None,
            confusion: None,
            loss,
            metric,
            scores: Some(figures),
        })
    }

    /// A dev loss that is not a number stops training, naming the epoch.
    fn check_dev_loss(&self, dev_loss: f64, epoch: usize) -> Result<()> {
        if dev_loss.is_finite() {
            return Ok(());
        }
        let input = format!("the {} dev examples of epoch {epoch}", self.dev_set.len());
        Err(crate::model::finite::named("loss", 0, input))
    }

    /// Whether this trainer trains a score model (a regression head, task `score`).
    pub fn is_score_model(&self) -> bool {
        self.model.config.score_scale.is_some()
    }

    /// What a model that learnt nothing scores on dev with the selecting metric
    /// ([`super::baseline`]): the majority class for classification, chance for multiple
    /// choice.
    pub fn dev_baseline(&self) -> Option<Baseline> {
        if self.is_score_model() {
            // A constant prediction has no Spearman (`super::scores`: no baseline).
            None
        } else if self.multiple_choice {
            let options: Vec<usize> = self.dev_set.iter().map(|e| e.inputs.len()).collect();
            chance_baseline(&options, self.select_by())
        } else {
            let golds: Vec<usize> = self.dev_set.iter().map(|e| e.gold).collect();
            majority_baseline(&self.labels, &golds, self.select_by())
        }
    }

    /// Whether training is over: every epoch ran, or early stopping ended it
    /// ([`Trainer::run_epoch`] returns `None`).
    pub fn is_over(&self) -> bool {
        self.stopped || self.curve.len() >= self.opts.epochs
    }

    /// Epochs since the best dev metric (early stopping comes at `patience`).
    pub fn since_best(&self) -> usize {
        self.since_best
    }

    /// Encoder layers that train (the top ones) and all of them.
    pub fn layers(&self) -> (usize, usize) {
        let n = self.model.config.num_layers;
        (n - self.lower, n)
    }

    /// The metric that picks the best epoch (resolved in [`Trainer::new`]).
    pub fn select_by(&self) -> SelectBy {
        self.opts.select_by.expect("resolved in Trainer::new")
    }

    /// The options as training uses them (defaults resolved for the task).
    pub fn options(&self) -> &TrainOptions {
        &self.opts
    }

    /// One weight per label (empty for multiple choice).
    pub fn class_weights(&self) -> &[f64] {
        &self.class_weights
    }

    /// Records the first `steps` optimiser steps (examples, learning rates, loss) for a
    /// trace that a reference implementation replays (`medrank train --trace`).
    pub fn trace_steps(&mut self, steps: usize) {
        self.trace_steps = steps;
    }

    /// The training and dev examples (token ids and gold), as the trainer holds them.
    pub fn examples(&self) -> (&[TrainExample], &[TrainExample]) {
        (&self.train_set, &self.dev_set)
    }

    /// The model's files with the weights it holds now (before the first epoch: the
    /// starting point, new head included): `config.json` and `model.safetensors`.
    pub fn current_files(&self) -> Result<Vec<(String, Vec<u8>)>> {
        model_files(&detached(&self.model)?)
    }

    /// The best epoch's weights as a plain model (no variables), with the curve.
    pub async fn finish(self) -> Result<TrainResult> {
        let select_by = self.select_by();
        let (best_dev_metric, best_epoch) = self.best.ok_or_else(|| Error::invalid("no epoch was trained"))?;
        let picked = &self.curve[best_epoch - 1];
        let best_dev_accuracy = picked.dev_accuracy;
        let confusion = picked.dev_confusion.as_ref().map(|rows| Confusion::of(rows.len(), rows_to_pairs(rows)));
        // The majority-class rate: the accuracy of the classification baseline.
        let golds: Vec<usize> = self.dev_set.iter().map(|e| e.gold).collect();
        let dev_majority_rate = (!self.multiple_choice && !self.is_score_model())
            .then(|| majority_baseline(&self.labels, &golds, SelectBy::Accuracy))
            .flatten()
            .map(|b| b.accuracy);
        let mut warnings = self.one_class_warnings();
        if let Some(k) = confusion.as_ref().and_then(Confusion::single_predicted_class) {
            let rate = dev_majority_rate.unwrap_or(f64::NAN);
            warnings.push(one_predicted_class(
                best_epoch,
                &self.labels[k],
                self.dev_set.len(),
                best_dev_accuracy,
                rate,
            ));
        }
        let dev_baseline = self.dev_baseline();
        let dev_chance_accuracy = if self.is_score_model() {
            None
        } else if self.multiple_choice {
            let options: Vec<usize> = self.dev_set.iter().map(|e| e.inputs.len()).collect();
            chance_baseline(&options, SelectBy::Accuracy).map(|b| b.accuracy)
        } else {
            (!self.labels.is_empty()).then(|| 1.0 / self.labels.len() as f64)
        };
        let steps = self.step_log;
        let dev_predictions = self.best_dev_predictions;
        let mut engine = self.engine;
        let model = engine.best_model(&self.model).await?;
        let threads = engine.threads();
        let cut = |set: &[TrainExample]| set.iter().filter(|e| e.inputs.iter().any(|i| i.tokens_cut() > 0)).count();
        Ok(TrainResult {
            model,
            curve: self.curve,
            best_epoch,
            best_dev_accuracy,
            select_by,
            best_dev_metric,
            dev_majority_rate,
            dev_baseline,
            dev_chance_accuracy,
            warnings,
            steps,
            class_weights: self.class_weights,
            trained_layers: self.model.config.num_layers - self.lower,
            truncated: (cut(&self.train_set), cut(&self.dev_set)),
            cache_seconds: self.frozen.seconds(),
            threads,
            data: None,
            dev_predictions,
        })
    }
}

impl Trainer {
    /// Training or dev examples whose labels are all of one class (classification, every
    /// task, the criterion grader's too): nothing in training tells the classes apart, or
    /// the dev figures measure one class only (macro-F1 1.0 from always predicting it).
    fn one_class_warnings(&self) -> Vec<String> {
        if self.multiple_choice || self.is_score_model() {
            return Vec::new();
        }
        let mut warnings = Vec::new();
        for (what, set, consequence) in [
            ("training", &self.train_set, "the model learns nothing that tells the classes apart"),
            ("dev", &self.dev_set, "the dev figures measure that one class only and pick the epoch blindly"),
        ] {
            let first = set[0].gold;
            if set.iter().all(|e| e.gold == first) {
                warnings.push(format!(
                    "all {} {what} examples have the label `{}`: {consequence}; give examples of every label ({})",
                    set.len(),
                    self.labels[first],
                    self.labels.join(", ")
                ));
            }
        }
        warnings
    }
}

/// The warning for a picked epoch that predicts `label` for all `n` dev examples. Always
/// predicting a class is right on the dev examples of that class: its accuracy is that
/// class's share, which is the majority-class rate only when it is the majority class (the
/// warning said "dev accuracy 0.3333 = the majority-class rate 0.6667").
fn one_predicted_class(epoch: usize, label: &str, n: usize, accuracy: f64, majority_rate: f64) -> String {
    let share = if accuracy == majority_rate {
        format!("dev accuracy {accuracy:.4} = the majority-class rate")
    } else {
        format!(
            "dev accuracy {accuracy:.4}, the share of `{label}` among the dev labels; the majority-class rate is {majority_rate:.4}"
        )
    };
    format!(
        "the picked epoch {epoch} predicts `{label}` for every one of the {n} dev examples ({share}): this evaluator cannot tell the classes apart, so every system and control would tie. Try --freeze top:N, more epochs or more training data"
    )
}

/// The (gold, predicted) pairs a confusion matrix counts, one per example.
fn rows_to_pairs(rows: &[Vec<u64>]) -> impl Iterator<Item = (usize, usize)> + '_ {
    rows.iter()
        .enumerate()
        .flat_map(|(g, row)| row.iter().enumerate().flat_map(move |(p, &c)| std::iter::repeat_n((g, p), c as usize)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_one_class_warning_says_the_share_it_equals() {
        // Majority class predicted: 4 of 6 dev examples right, the majority rate 4/6.
        let w = super::one_predicted_class(2, "refuted", 6, 4.0 / 6.0, 4.0 / 6.0);
        assert!(w.contains("predicts `refuted` for every one of the 6 dev examples (dev accuracy 0.6667 = the majority-class rate)"), "{w}");
        // Minority class predicted: 2 of 6 right, the majority rate is still 4/6.
        let w = super::one_predicted_class(2, "supported", 6, 2.0 / 6.0, 4.0 / 6.0);
        assert!(
            w.contains("(dev accuracy 0.3333, the share of `supported` among the dev labels; the majority-class rate is 0.6667)"),
            "{w}"
        );
    }
}
