//! The CPU engine: candle's autograd over the trained part, one shard of each micro-batch
//! per core (candle runs most ops on one thread), each shard's forward and backward pass on
//! its own thread and the gradients summed; candle's AdamW, one for the head and one for the
//! layers (a new head needs a large learning rate, pretrained layers a small one).

use super::dropout::StepMasks;
use super::engine::{Batches, Engine, Pending};
use super::examples::TrainExample;
use super::export::detached;
use super::frozen::{Frozen, Prepared};
use super::options::{trained_layers, Freeze, TrainOptions};
use crate::error::{Error, Result};
use crate::model::config::HeadPooling;
use crate::model::encoder::{forward_dropping, layers_forward_dropping, DropoutMasks};
use crate::model::heads::{head_forward_dropping, pool_for_head};
use crate::model::load::{Dense, HeadWeights, LoadedModel, Norm};
use crate::model::tokenize::{Encoded, TextTokenizer};
use candle_core::backprop::GradStore;
use candle_core::{Device, IndexOp, Tensor, Var, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rayon::prelude::*;

/// candle's autograd on the model's variables.
pub(super) struct CpuEngine {
    /// The head's (and pooler's) variables, and the trained layers' (and embeddings').
    head_vars: Vec<Var>,
    layer_vars: Vec<Var>,
    threads: usize,
    /// AdamW of the head, and of the layers when they train; made before the first epoch,
    /// they keep their moments across epochs.
    optimisers: Option<(AdamW, Option<AdamW>)>,
    /// The variables' values at the best epoch so far.
    best: Vec<Tensor>,
}

impl CpuEngine {
    /// Replaces the tensors of `model` that `freeze` trains with variables; the steps run on
    /// `threads` threads.
    pub fn new(model: &mut LoadedModel, freeze: Freeze, threads: usize) -> Result<Self> {
        let (head_vars, layer_vars) = make_trainable(model, freeze)?;
        Ok(CpuEngine { head_vars, layer_vars, threads, optimisers: None, best: Vec::new() })
    }

    /// The head's and the trained layers' variables, in that order.
    fn vars(&self) -> Vec<Var> {
        self.head_vars.iter().chain(&self.layer_vars).cloned().collect()
    }

    /// [`Engine::step`]: the loss of each shard is scaled so the summed gradient is the
    /// mean over the whole step.
    fn step_now(&mut self, train: Batches, chunk: &[usize], lr: f64, layer_lr: f64) -> Result<f64> {
        let Batches { model, tokenizer: tok, set: train_set, prepared: train_p, lower, multiple_choice, .. } = train;
        let (weights, threads, dropout) = (train.class_weights, self.threads, train.dropout);
        let score_scale = train.score_scale;
        let vars = self.vars();
        let mut loss_sum = 0.0;
        let mut acc: Option<GradStore> = None;
        for micro in chunk.chunks(train.batch_size) {
            let parts = shards(train_set, micro, threads);
            let results = parts
                .par_iter()
                .map(|part| -> Result<(GradStore, f64)> {
                    let logits = logits_of(model, tok, train_set, train_p, part, lower, dropout)?;
                    let exs: Vec<&TrainExample> = part.iter().map(|&i| &train_set[i]).collect();
                    let loss = match score_scale {
                        Some(scale) => super::scores::loss(&exs, &logits, scale)?,
                        None => loss_and_predictions(&exs, &logits, multiple_choice, weights)?.0,
                    };
                    let value = loss.to_scalar::<f32>()? as f64;
                    Ok(((loss / chunk.len() as f64)?.backward()?, value))
                })
                .collect::<Vec<_>>();
            for r in results {
                let (grads, value) = r?;
                loss_sum += value;
                acc = Some(match acc {
                    None => grads,
                    Some(mut a) => {
                        for v in &vars {
                            if let Some(g) = grads.get(v.as_tensor()) {
                                let sum = match a.get(v.as_tensor()) {
                                    Some(prev) => (prev + g)?,
                                    None => g.clone(),
                                };
                                a.insert(v.as_tensor(), sum);
                            }
                        }
                        a
                    }
                });
            }
        }
        let grads = acc.expect("non-empty chunk");
        let (head_opt, layer_opt) = self.optimisers.as_mut().expect("made by start");
        head_opt.set_learning_rate(lr);
        head_opt.step(&grads)?;
        if let Some(o) = layer_opt.as_mut() {
            o.set_learning_rate(layer_lr);
            o.step(&grads)?;
        }
        Ok(loss_sum)
    }

    /// [`Engine::best_model`]: the variables set back to the best epoch's values, then
    /// `model` detached (the saved model holds plain tensors, not variables).
    fn restore_best(&self, model: &LoadedModel) -> Result<LoadedModel> {
        for (v, t) in self.head_vars.iter().chain(&self.layer_vars).zip(&self.best) {
            v.set(t)?;
        }
        detached(model)
    }

    /// [`Engine::start`]: the optimisers, made once (they keep their moments across epochs).
    fn make_optimisers(&mut self, opts: &TrainOptions) -> Result<()> {
        if self.optimisers.is_none() {
            let params = |lr: f64| ParamsAdamW { lr, weight_decay: opts.weight_decay, ..Default::default() };
            let head = AdamW::new(self.head_vars.clone(), params(opts.learning_rate))?;
            let layers = if self.layer_vars.is_empty() {
                None
            } else {
                Some(AdamW::new(self.layer_vars.clone(), params(opts.layer_learning_rate)))
            }
            .transpose()?;
            self.optimisers = Some((head, layers));
        }
        Ok(())
    }

    /// [`Engine::dev`], shards in parallel.
    fn dev_now(&self, dev: Batches) -> Result<(Vec<usize>, f64)> {
        // The borrowed fields, not `self`, go to the threads.
        let Batches { model, tokenizer: tok, set: dev_set, prepared: dev_p, lower, multiple_choice, .. } = dev;
        let weights = dev.class_weights;
        let dev_idx: Vec<usize> = (0..dev_set.len()).collect();
        let dev_parts = shards(dev_set, &dev_idx, dev_set.len().div_ceil(dev.batch_size.max(1)));
        let parts = dev_parts
            .par_iter()
            .map(|part| -> Result<(Vec<usize>, f64)> {
                let logits = logits_of(model, tok, dev_set, dev_p, part, lower, None)?.detach();
                let exs: Vec<&TrainExample> = part.iter().map(|&i| &dev_set[i]).collect();
                let (loss, predicted) = loss_and_predictions(&exs, &logits, multiple_choice, weights)?;
                Ok((predicted, loss.to_scalar::<f32>()? as f64))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut predicted = vec![0; dev_set.len()];
        let mut loss = 0.0;
        for (part, (p, l)) in dev_parts.iter().zip(parts) {
            for (&i, p) in part.iter().zip(p) {
                predicted[i] = p;
            }
            loss += l;
        }
        Ok((predicted, loss))
    }
}

impl CpuEngine {
    /// [`Engine::dev_outputs`], shards in parallel.
    fn dev_outputs_now(&self, dev: Batches) -> Result<Vec<Vec<f32>>> {
        let Batches { model, tokenizer: tok, set: dev_set, prepared: dev_p, lower, .. } = dev;
        let dev_idx: Vec<usize> = (0..dev_set.len()).collect();
        let dev_parts = shards(dev_set, &dev_idx, dev_set.len().div_ceil(dev.batch_size.max(1)));
        let parts = dev_parts
            .par_iter()
            .map(|part| -> Result<Vec<Vec<f32>>> {
                Ok(logits_of(model, tok, dev_set, dev_p, part, lower, None)?.detach().to_vec2()?)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut outputs = vec![Vec::new(); dev_set.len()];
        for (part, rows) in dev_parts.iter().zip(parts) {
            for (&i, row) in part.iter().zip(rows) {
                outputs[i] = row;
            }
        }
        Ok(outputs)
    }
}

impl Engine for CpuEngine {
    fn start<'a>(&'a mut self, _model: &'a LoadedModel, _lower: usize, opts: &'a TrainOptions) -> Pending<'a, ()> {
        Box::pin(std::future::ready(self.make_optimisers(opts)))
    }

    fn step<'a>(&'a mut self, train: Batches<'a>, chunk: &'a [usize], lr: f64, layer_lr: f64) -> Pending<'a, f64> {
        let loss = self.step_now(train, chunk, lr, layer_lr);
        Box::pin(std::future::ready(loss))
    }

    fn dev<'a>(&'a self, dev: Batches<'a>) -> Pending<'a, (Vec<usize>, f64)> {
        Box::pin(std::future::ready(self.dev_now(dev)))
    }

    fn dev_outputs<'a>(&'a self, dev: Batches<'a>) -> Pending<'a, Vec<Vec<f32>>> {
        Box::pin(std::future::ready(self.dev_outputs_now(dev)))
    }

    fn keep_best(&mut self) -> Result<()> {
        self.best = self.vars().iter().map(|v| v.as_tensor().copy()).collect::<candle_core::Result<Vec<_>>>()?;
        Ok(())
    }

    fn best_model<'a>(&'a mut self, model: &'a LoadedModel) -> Pending<'a, LoadedModel> {
        Box::pin(std::future::ready(self.restore_best(model)))
    }

    fn threads(&self) -> usize {
        self.threads
    }
}

/// Replace the trainable tensors with variables; returns them for the optimisers:
/// (head and pooler, encoder layers and embeddings). A family's absent biases (the zeros
/// ModernBERT's maps and norms hold) stay constants: they are not part of the model.
/// The top layers train with ModernBERT's final norm (it reads their output); DeBERTa's
/// relative-position table, which every layer reads, trains only with everything.
fn make_trainable(model: &mut LoadedModel, freeze: Freeze) -> Result<(Vec<Var>, Vec<Var>)> {
    fn var(vars: &mut Vec<Var>, t: &mut Tensor) -> Result<()> {
        let v = Var::from_tensor(t)?;
        *t = v.as_tensor().clone();
        vars.push(v);
        Ok(())
    }
    fn dense(vars: &mut Vec<Var>, d: &mut Dense, bias: bool) -> Result<()> {
        var(vars, &mut d.weight)?;
        if bias {
            var(vars, &mut d.bias)?;
        }
        Ok(())
    }
    fn norm(vars: &mut Vec<Var>, n: &mut Norm, bias: bool) -> Result<()> {
        var(vars, &mut n.weight)?;
        if bias {
            var(vars, &mut n.bias)?;
        }
        Ok(())
    }
    let cfg = model.config.clone();
    let (bias, mlp_bias, norm_bias) = (cfg.linear_bias(), cfg.mlp_bias(), cfg.norm_bias());
    let mut vars = Vec::new();
    match model.head.as_mut().ok_or_else(|| Error::invalid("no head to train"))? {
        HeadWeights::PooledLinear { classifier } => {
            dense(&mut vars, classifier, true)?;
            if let Some(p) = model.weights.pooler.as_mut() {
                dense(&mut vars, p, true)?;
            }
        }
        HeadWeights::RobertaClassifier { dense: d, out_proj } => {
            dense(&mut vars, d, true)?;
            dense(&mut vars, out_proj, true)?;
        }
        HeadWeights::DistilClassifier { pre_classifier, classifier } => {
            dense(&mut vars, pre_classifier, true)?;
            dense(&mut vars, classifier, true)?;
        }
        HeadWeights::ContextPooler { dense: d, classifier, .. } => {
            dense(&mut vars, d, true)?;
            dense(&mut vars, classifier, true)?;
        }
        HeadWeights::ModernBertHead { dense: d, norm: n, classifier, .. } => {
            dense(&mut vars, d, cfg.modernbert().is_some_and(|m| m.classifier_bias))?;
            norm(&mut vars, n, norm_bias)?;
            dense(&mut vars, classifier, true)?;
        }
    }
    let head_vars = std::mem::take(&mut vars);
    let n_layers = model.weights.layers.len();
    let top = trained_layers(freeze, n_layers);
    for layer in model.weights.layers.iter_mut().skip(n_layers - top) {
        for d in [&mut layer.query, &mut layer.key, &mut layer.value, &mut layer.attn_out] {
            dense(&mut vars, d, bias)?;
        }
        for d in [&mut layer.ffn_in, &mut layer.ffn_out] {
            dense(&mut vars, d, mlp_bias)?;
        }
        if let Some(n) = layer.attn_norm.as_mut() {
            norm(&mut vars, n, norm_bias)?;
        }
        norm(&mut vars, &mut layer.ffn_norm, norm_bias)?;
    }
    if top > 0 {
        if let Some(n) = model.weights.final_norm.as_mut() {
            norm(&mut vars, n, norm_bias)?;
        }
    }
    if freeze == Freeze::All {
        let w = &mut model.weights;
        var(&mut vars, &mut w.word_embeddings)?;
        if let Some(t) = w.position_embeddings.as_mut() {
            var(&mut vars, t)?;
        }
        if let Some(t) = w.token_type_embeddings.as_mut() {
            var(&mut vars, t)?;
        }
        norm(&mut vars, &mut w.embedding_norm, norm_bias)?;
        if let Some(r) = w.relative.as_mut() {
            var(&mut vars, &mut r.table)?;
            if let Some(n) = r.norm.as_mut() {
                norm(&mut vars, n, true)?;
            }
        }
    }
    Ok((head_vars, vars))
}

/// Logits `[n_inputs, n_out]` of the inputs of examples `idx` (in that order), through the
/// trainable part of `model`: the head alone, or the top layers then the head; with
/// `dropout` (a training step's), its masks at every site of the trained part.
fn logits_of(
    model: &LoadedModel,
    tok: &TextTokenizer,
    set: &[TrainExample],
    p: &Prepared,
    idx: &[usize],
    lower: usize,
    dropout: Option<StepMasks>,
) -> Result<Tensor> {
    let flat = p.rows(set, idx);
    // Masks keyed by each input's place in the set, whatever shard or padding it is in.
    let masks = dropout.map(|d| d.over(&flat));
    let layer_masks = masks.as_ref().map(|m| m as &dyn DropoutMasks);
    let cfg = &model.config;
    let pooling = model.config.head_pooling;
    let input = match &p.frozen {
        Frozen::FirstTokens(f) => {
            let rows: Vec<u32> = flat.iter().map(|&r| r as u32).collect();
            f.index_select(&Tensor::new(rows.as_slice(), &Device::Cpu)?, 0)?
        }
        Frozen::Lower(states) => {
            let h = cfg.hidden_size;
            let s = flat.iter().map(|&r| states[r].len() / h).max().unwrap_or(0);
            let mut x = vec![0f32; flat.len() * s * h];
            let mut mask = vec![0u32; flat.len() * s];
            for (k, &r) in flat.iter().enumerate() {
                let len = states[r].len() / h;
                for (dst, src) in x[k * s * h..].iter_mut().zip(&states[r]) {
                    *dst = src.to_f32();
                }
                mask[k * s..k * s + len].fill(1);
            }
            let x = Tensor::from_vec(x, (flat.len(), s, h), &Device::Cpu)?;
            let first_only = pooling == HeadPooling::Cls;
            let top =
                layers_forward_dropping(cfg, &model.weights, lower..cfg.num_layers, x, &mask, first_only, layer_masks)?;
            pool_for_head(pooling, &top, &mask)?
        }
        Frozen::Nothing => {
            let items: Vec<&Encoded> = idx.iter().flat_map(|&i| set[i].inputs.iter()).collect();
            let batch = tok.batch(&items);
            let h = forward_dropping(cfg, &model.weights, &batch, cfg.num_layers, layer_masks)?;
            pool_for_head(pooling, &h, &batch.mask)?
        }
    };
    let (head, pooler) = (model.head.as_ref().expect("head"), model.weights.pooler.as_ref());
    // The classifier reads the head's first map's output (the hidden size in every family).
    let width = head.parts(pooler)?.first.weight.dim(0)?;
    let classifier = masks.as_ref().map(|m| m.classifier(width)).transpose()?.flatten();
    head_forward_dropping(head, pooler, &input, classifier.as_ref())
}

/// Summed cross-entropy, each example's term times its gold class's weight (`weights`:
/// one per label; empty = all 1, as for multiple choice), and the predicted index of each of
/// `examples`, given logits of their inputs (in example order, inputs concatenated). A
/// multiple-choice example's softmax runs over its own inputs, however many it has; the
/// first of equal scores is the prediction.
fn loss_and_predictions(
    examples: &[&TrainExample],
    logits: &Tensor,
    multiple_choice: bool,
    weights: &[f64],
) -> Result<(Tensor, Vec<usize>)> {
    let mut losses = Vec::new();
    let mut predicted = Vec::with_capacity(examples.len());
    let mut row = 0;
    let values: Vec<Vec<f32>> = logits.to_vec2()?;
    for ex in examples {
        let (scores, v) = if multiple_choice {
            let n = ex.inputs.len();
            let s = logits.narrow(0, row, n)?.flatten_all()?;
            let v: Vec<f32> = values[row..row + n].iter().map(|r| r[0]).collect();
            row += n;
            (s, v)
        } else {
            let s = logits.i(row)?;
            let v = values[row].clone();
            row += 1;
            (s, v)
        };
        let logp = candle_nn::ops::log_softmax(&scores, D::Minus1)?;
        let term = logp.i(ex.gold)?.neg()?;
        losses.push(match weights.get(ex.gold) {
            Some(&w) if w != 1.0 => (term * w)?,
            _ => term,
        });
        predicted.push(v.iter().enumerate().fold(0, |b, (i, x)| if *x > v[b] { i } else { b }));
    }
    Ok((Tensor::stack(&losses, 0)?.sum_all()?, predicted))
}

/// Contiguous shards of `idx` (sorted by input length first, so a shard pads little), at
/// most `n` of them, sizes differing by at most one.
fn shards(set: &[TrainExample], idx: &[usize], n: usize) -> Vec<Vec<usize>> {
    let mut sorted = idx.to_vec();
    sorted.sort_by_key(|&i| set[i].inputs.iter().map(Encoded::len).max().unwrap_or(0));
    let n = n.clamp(1, sorted.len().max(1));
    let (q, r) = (sorted.len() / n, sorted.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for k in 0..n {
        let take = q + usize::from(k < r);
        out.push(sorted[at..at + take].to_vec());
        at += take;
    }
    out.retain(|s| !s.is_empty());
    out
}
