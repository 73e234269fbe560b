//! `medrank train`: proxy-task evaluators with candle's autograd.

use super::commands::*;
use super::output::{OutputArgs, Outputs};
use crate::{Error, Result};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The base model folder (e.g. models/all-MiniLM-L6-v2).
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Training data: a HiTZ MCQA file ({"question", "options", "correct_option"}, the
    /// argument already in the question) or an argument bundle (then see --task, --arguments).
    #[arg(long, value_name = "FILE")]
    pub train: PathBuf,
    /// Development data in the same format; the epoch with the best dev accuracy is kept.
    #[arg(long, value_name = "FILE")]
    pub dev: PathBuf,
    /// Output folder: config.json, model.safetensors, tokenizer.json, train_log.json.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// With a bundle: the proxy task to train (its instances are used).
    #[arg(long, default_value = "mcqa", value_parser = ["mcqa", "misinformation", "nli"])]
    pub task: String,
    /// With a bundle: the argument each training instance carries. `none` = the baseline
    /// evaluator; `system:NAME` = one system's arguments (e.g. system:expert, the
    /// expert-trained evaluator); `random:A,B,C` = one random system per instance among
    /// these, seeded (the LLM-trained evaluator).
    #[arg(long, default_value = "none", value_name = "SOURCE")]
    pub arguments: String,
    /// What is trained: head (frozen encoder, features computed once), top:N (head + top N
    /// layers; the lower layers run once through the fast inference path), all.
    #[arg(long, default_value = "head")]
    pub freeze: String,
    #[arg(long, default_value_t = 20)]
    pub epochs: usize,
    #[arg(long, default_value_t = 16)]
    pub batch_size: usize,
    /// Micro-batches per optimiser step.
    #[arg(long, default_value_t = 1)]
    pub grad_accum: usize,
    /// Peak learning rate of the head (a new head needs a large one).
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Peak learning rate of the trained encoder layers (--freeze top:N or all): pretrained
    /// weights take a small one.
    #[arg(long, default_value_t = crate::model::train::DEFAULT_LAYER_LR)]
    pub layer_lr: f64,
    #[arg(long, default_value_t = 0.01)]
    pub weight_decay: f64,
    /// Fraction of the steps spent warming up.
    #[arg(long, default_value_t = 0.1)]
    pub warmup: f64,
    /// Stop after this many epochs without a better dev accuracy.
    #[arg(long, default_value_t = 4)]
    pub patience: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Keep empty MCQA options as candidates (by default, as in evaluation, an empty option
    /// is no candidate: the example has no input for it).
    #[arg(long)]
    pub keep_empty_options: bool,
    /// Keep misinformation instances labelled not_enough_evidence (by default, as in
    /// evaluation, they are dropped; the head keeps the label, never as a target).
    #[arg(long)]
    pub keep_not_enough_evidence: bool,
    /// Where the trained layers run with --freeze top:N: cpu (candle's autograd, the
    /// reference) or gpu (the WGSL forward and backward kernels and AdamW through wgpu; an
    /// error when there is no adapter). The lower layers run once on the CPU either way.
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "gpu"])]
    pub backend: String,
}

pub(super) fn train(a: TrainArgs) -> Result<()> {
    use crate::model::train::{self as t, ArgumentSource, Freeze, TrainOptions};
    use crate::model::HeadKind;
    let mut outputs = Outputs::plan(&[&a.model, &a.train, &a.dev], &OutputArgs::default(), &[], &[&a.out])?;
    let model = crate::model::TextModel::read_dir(&a.model)?;
    let freeze = match a.freeze.as_str() {
        "head" => Freeze::HeadOnly,
        "all" => Freeze::All,
        other => match other.strip_prefix("top:").and_then(|n| n.parse().ok()) {
            Some(n) => Freeze::TopLayers(n),
            None => return Err(Error::invalid(format!("--freeze {other}: expected head, top:N or all"))),
        },
    };
    let options = TrainOptions {
        freeze,
        epochs: a.epochs,
        batch_size: a.batch_size.max(1),
        grad_accum: a.grad_accum.max(1),
        learning_rate: a.lr,
        layer_learning_rate: a.layer_lr,
        weight_decay: a.weight_decay,
        warmup_ratio: a.warmup,
        patience: a.patience,
        seed: a.seed,
    };
    let task = crate::data::Task::parse(&a.task).expect("clap checked the value");
    let source = match a.arguments.as_str() {
        "none" => ArgumentSource::None,
        s => match (s.strip_prefix("system:"), s.strip_prefix("random:")) {
            (Some(name), _) => ArgumentSource::System(name.to_string()),
            (_, Some(list)) => ArgumentSource::RandomOf(list.split(',').map(|x| x.trim().to_string()).collect()),
            _ => return Err(Error::invalid(format!("--arguments {s}: expected none, system:NAME or random:A,B,..."))),
        },
    };
    let labels = t::task_labels(task);
    let conventions = t::ExampleOptions {
        keep_empty_options: a.keep_empty_options,
        keep_not_enough_evidence: a.keep_not_enough_evidence,
    };
    let read = |path: &Path| -> Result<t::TrainData> {
        let file = named(path)?;
        let is_bundle = file.text.lines().find(|l| !l.trim().is_empty()).is_some_and(|l| l.contains("\"task\""));
        if is_bundle {
            let (mut bundle, warnings) = crate::data::parse_bundle(&file.name, &file.text)?;
            warn_all(&warnings, false);
            let before = bundle.instances.len();
            bundle.instances.retain(|i| i.problem.task() == task);
            if bundle.instances.is_empty() {
                return Err(Error::in_file(&file.name, format!("no {} instance to train on", task.name())));
            }
            if bundle.instances.len() < before {
                eprintln!(
                    "note: {}: {} instances of other tasks are not used for --task {}",
                    file.name,
                    before - bundle.instances.len(),
                    task.name()
                );
            }
            t::examples_from_bundle(&bundle, &source, &labels, &model.tokenizer, a.seed, &conventions)
        } else {
            if task != crate::data::Task::Mcqa || source != ArgumentSource::None {
                return Err(Error::in_file(&file.name, "a HiTZ file is MCQA with its arguments already in the question: --task and --arguments apply to bundles only"));
            }
            t::read_hitz_mcqa(&file.name, &file.text, &model.tokenizer, &conventions)
        }
    };
    let (train_data, dev_data) = (read(&a.train)?, read(&a.dev)?);
    for (what, d) in [("training", &train_data), ("dev", &dev_data)] {
        let c = &d.counts;
        if c.empty_options_left_out > 0 {
            eprintln!(
                "note: {what} data: {} empty options are no candidate (--keep-empty-options keeps them)",
                c.empty_options_left_out
            );
        }
        if !c.not_enough_evidence_dropped.is_empty() {
            eprintln!(
                "note: {what} data: {} not_enough_evidence instances dropped, as evaluation drops them (--keep-not-enough-evidence keeps them): {}",
                c.not_enough_evidence_dropped.len(),
                c.not_enough_evidence_dropped.join(", ")
            );
        }
        if d.examples.is_empty() {
            return Err(Error::invalid(format!("no {what} example is left to train on")));
        }
    }
    let (train_set, dev_set) = (&train_data.examples, &dev_data.examples);
    let kind =
        if task == crate::data::Task::Mcqa { HeadKind::MultipleChoice } else { HeadKind::SequenceClassification };
    eprintln!(
        "training on {} examples, picking on {} dev examples ({:?})",
        train_set.len(),
        dev_set.len(),
        options.freeze
    );
    let mut report = |event: t::TrainEvent| match event {
        t::TrainEvent::Cached { inputs, seconds } => {
            eprintln!("  frozen layers computed once for {inputs} inputs in {seconds:.0} s")
        }
        t::TrainEvent::Step { epoch, examples, of, examples_per_second } => {
            eprintln!("  epoch {epoch:>2}  {examples}/{of} examples  {examples_per_second:.1} examples/s")
        }
        t::TrainEvent::Epoch(log) => eprintln!(
            "  epoch {:>2}  steps {:>5}  train loss {:.4}  dev accuracy {:.4}  lr {:.2e}  {:.1} examples/s",
            log.epoch, log.steps, log.train_loss, log.dev_accuracy, log.learning_rate, log.examples_per_second
        ),
    };
    let mut result = if a.backend == "gpu" {
        if !matches!(freeze, Freeze::TopLayers(n) if n > 0) {
            return Err(Error::invalid("--backend gpu trains the top layers: use it with --freeze top:N"));
        }
        let (result, adapter) = crate::gpu::train::train_top_layers_blocking(
            &model,
            kind,
            &labels,
            train_set,
            dev_set,
            &options,
            &mut report,
        )?;
        eprintln!("  the trained layers ran on {adapter}");
        result
    } else {
        t::train_with_events(&model, kind, &labels, train_set, dev_set, &options, &mut report)?
    };
    result.data = Some((train_data.counts.clone(), dev_data.counts.clone()));
    let (cut_train, cut_dev) = result.truncated;
    if cut_train + cut_dev > 0 {
        let what = match task {
            crate::data::Task::Mcqa => "the case or argument, never the option",
            crate::data::Task::Nli => "the longest of statement, evidence and argument first",
            crate::data::Task::Misinformation => "the longer of claim and argument first",
        };
        eprintln!("warning: {cut_train} training and {cut_dev} dev examples had inputs cut to the model's token limit ({what}); train_log.json records the counts");
    }
    let mut files = t::trained_files(&result, &options)?;
    files.push((
        "tokenizer.json".into(),
        std::fs::read(a.model.join("tokenizer.json")).map_err(|e| Error::io(a.model.display().to_string(), e))?,
    ));
    for (name, bytes) in files {
        outputs.file(&a.out.join(name), &bytes)?;
    }
    outputs.commit()?;
    println!(
        "best epoch {} with dev accuracy {:.4} ({} dev examples); the evaluator is in {} (use: medrank evaluate --model {})",
        result.best_epoch,
        result.best_dev_accuracy,
        dev_set.len(),
        a.out.display(),
        a.out.display()
    );
    Ok(())
}
