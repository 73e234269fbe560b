//! The score task's head (`medrank train --task score`): a metric learned from human
//! scores, one regression output per score dimension.
//!
//! **Regression, not an ordinal head.** Human scores here are the mean of several raters'
//! numbers (SQuALITY: three raters' 0-100 scores, so 33.3 and 66.7 occur; BioASQ: 1-5
//! averaged over experts), so the targets are not a small set of ordered classes: an
//! ordinal head over 1..K would have to round those means away, and over 0-100 would have
//! 100 thresholds to learn from a few hundred answers. What the metric is judged by is
//! rank agreement with the experts (Spearman per batch), which any monotone output serves;
//! a regression output is the one that keeps every difference between two answers'
//! scores, and it is what Hugging Face's `problem_type: "regression"` trains, so the folder
//! loads in transformers as it is. Its cost: it assumes the distances of the scale are
//! meaningful (that 20 -> 40 is as far as 60 -> 80), which an ordinal head would not.
//!
//! Targets are standardised per dimension with the training set's mean and population
//! standard deviation ([`scale_of`]; kept in the model's `config.json` as
//! `medrank_score_scale`, `model::config::ScoreScale`), so every dimension weighs the same
//! in the loss whatever its scale, and predictions are read back on the human scale. The
//! loss of an example is the mean squared error over the dimensions its line has (a
//! missing one is masked out, never taken as 0); a step's loss is the mean over its
//! examples: with every dimension present that is `torch.nn.MSELoss` over the batch, as
//! transformers computes it.
//!
//! The dev metric that picks the epoch ([`ScoreFigures`]) is the BioASQ study's: per
//! dimension, Spearman's rho between predictions and the human scores computed within each
//! batch and averaged over the batches where it is defined, then the mean over dimensions.
//! Quadratic weighted kappa is reported beside it, per batch and averaged the same way,
//! with both sides rounded to whole numbers and the predictions clipped to the whole-number
//! range the human scores span in the set.
//!
//! **No baseline.** The classification tasks compare the dev metric with what learns
//! nothing (the majority class, chance); for regression that would be a constant
//! prediction (the training mean), whose Spearman is undefined (one side is constant), so
//! there is no line of that kind to beat; a score model's dev Spearman is reported as it
//! is (0 would be no agreement at all).

use super::examples::TrainExample;
use crate::error::{Error, Result};
use crate::model::config::ScoreScale;
use crate::stats::kappa::{cohen, Weights};
use crate::stats::spearman::spearman;
use candle_core::{Device, Tensor};
use serde::Serialize;

/// The scores of example `e` (a score example's; a refusal for another kind).
fn targets(e: &TrainExample) -> Result<&[Option<f64>]> {
    e.scores
        .as_ref()
        .map(|s| s.scores.as_slice())
        .ok_or_else(|| Error::invalid(format!("example {} has no human scores", e.id)))
}

/// Each dimension's mean and population standard deviation over the training examples
/// that have it (`labels`: the dimensions, in the head's order). A dimension no training
/// example has, or whose scores are all the same, is refused: there is nothing to learn
/// of it.
pub(super) fn scale_of(train: &[TrainExample], labels: &[String]) -> Result<ScoreScale> {
    let mut scale = ScoreScale { mean: Vec::new(), std: Vec::new() };
    for (j, label) in labels.iter().enumerate() {
        let values: Vec<f64> = train
            .iter()
            .map(|e| targets(e).map(|t| t.get(j).copied().flatten()))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        if values.is_empty() {
            return Err(Error::invalid(format!("no training example has a human score of `{label}`")));
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        if std == 0.0 {
            return Err(Error::invalid(format!(
                "every training score of `{label}` is {mean}: a metric learns nothing from one value"
            )));
        }
        scale.mean.push(mean);
        scale.std.push(std);
    }
    Ok(scale)
}

/// Each output's loss weight and standardised target of example `e`: weight `1 / k` for
/// each of the `k` dimensions its line has, 0 (target 0) for a missing one. The example's
/// loss is `sum_j weight_j * (output_j - target_j)^2`: the mean squared error over the
/// dimensions it has.
pub(crate) fn weights_and_targets(e: &TrainExample, scale: &ScoreScale) -> Result<(Vec<f32>, Vec<f32>)> {
    let t = targets(e)?;
    let k = t.iter().flatten().count().max(1) as f64;
    let weights = t.iter().map(|v| if v.is_some() { (1.0 / k) as f32 } else { 0.0 }).collect();
    let z = t.iter().enumerate().map(|(j, v)| v.map_or(0.0, |v| scale.standardised(j, v)) as f32).collect();
    Ok((weights, z))
}

/// The summed loss of `examples` given their outputs `[examples, dimensions]` (candle's
/// autograd differentiates it: the CPU engine's step).
pub(super) fn loss(examples: &[&TrainExample], outputs: &Tensor, scale: &ScoreScale) -> Result<Tensor> {
    let (mut w, mut z) = (Vec::new(), Vec::new());
    for e in examples {
        let (we, ze) = weights_and_targets(e, scale)?;
        w.extend(we);
        z.extend(ze);
    }
    let shape = outputs.dims2()?;
    let w = Tensor::from_vec(w, shape, &Device::Cpu)?;
    let z = Tensor::from_vec(z, shape, &Device::Cpu)?;
    Ok(((outputs - z)?.sqr()? * w)?.sum_all()?)
}

/// The summed loss of `examples` from their read-back outputs, in f64 (the dev loss of both
/// engines).
pub(super) fn loss_of_outputs(examples: &[TrainExample], outputs: &[Vec<f32>], scale: &ScoreScale) -> Result<f64> {
    let mut sum = 0.0;
    for (e, o) in examples.iter().zip(outputs) {
        let (w, z) = weights_and_targets(e, scale)?;
        sum += w.iter().zip(&z).zip(o).map(|((&w, &z), &o)| w as f64 * (o as f64 - z as f64).powi(2)).sum::<f64>();
    }
    Ok(sum)
}

/// One dimension's dev agreement with the human scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DimensionFigures {
    pub dimension: String,
    /// Spearman's rho per batch, averaged over the batches where it is defined; `None`
    /// when it is defined in none (fewer than 3 scored examples, or one side constant).
    pub spearman: Option<f64>,
    /// Quadratic weighted kappa per batch (whole numbers), averaged likewise.
    pub kappa: Option<f64>,
    /// Batches where Spearman is defined, of those with a score of this dimension.
    pub batches: (usize, usize),
}

/// A score model's dev figures: per dimension, and the means over the dimensions where
/// each is defined.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreFigures {
    pub dimensions: Vec<DimensionFigures>,
    /// The selecting metric: the mean of the dimensions' per-batch-averaged Spearman.
    pub spearman: Option<f64>,
    pub kappa: Option<f64>,
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The agreement of `predicted` (one row of scores per example, on the human scale) with
/// the human scores of `examples`, dimension by dimension (`labels`), batch by batch.
pub fn score_figures(examples: &[TrainExample], predicted: &[Vec<f64>], labels: &[String]) -> Result<ScoreFigures> {
    let mut batches: Vec<&str> = Vec::new();
    for e in examples {
        let b = e.scores.as_ref().map_or("", |s| s.batch.as_str());
        if !batches.contains(&b) {
            batches.push(b);
        }
    }
    let mut dimensions = Vec::with_capacity(labels.len());
    for (j, label) in labels.iter().enumerate() {
        // (batch, human, predicted) of every example scored on this dimension.
        let mut rows: Vec<(&str, f64, f64)> = Vec::new();
        for (e, p) in examples.iter().zip(predicted) {
            if let Some(h) = targets(e)?.get(j).copied().flatten() {
                rows.push((e.scores.as_ref().map_or("", |s| s.batch.as_str()), h, p[j]));
            }
        }
        // The whole numbers the human scores span (kappa's scale).
        let low = rows.iter().map(|r| r.1.round()).fold(f64::INFINITY, f64::min);
        let high = rows.iter().map(|r| r.1.round()).fold(f64::NEG_INFINITY, f64::max);
        let scale: Vec<i64> = if rows.is_empty() { Vec::new() } else { (low as i64..=high as i64).collect() };
        let (mut rhos, mut kappas, mut scored) = (Vec::new(), Vec::new(), 0);
        for b in &batches {
            let in_batch: Vec<&(&str, f64, f64)> = rows.iter().filter(|r| r.0 == *b).collect();
            if in_batch.is_empty() {
                continue;
            }
            scored += 1;
            let human: Vec<f64> = in_batch.iter().map(|r| r.1).collect();
            let model: Vec<f64> = in_batch.iter().map(|r| r.2).collect();
            if let Some(c) = spearman(&model, &human).value() {
                rhos.push(c.r);
            }
            let whole = |v: f64| v.round().clamp(low, high) as i64;
            let human_whole: Vec<i64> = human.iter().map(|&v| whole(v)).collect();
            let model_whole: Vec<i64> = model.iter().map(|&v| whole(v)).collect();
            if let Some(&k) = cohen(&human_whole, &model_whole, &scale, Weights::Quadratic).value() {
                kappas.push(k);
            }
        }
        dimensions.push(DimensionFigures {
            dimension: label.clone(),
            spearman: mean(&rhos),
            kappa: mean(&kappas),
            batches: (rhos.len(), scored),
        });
    }
    let defined = |f: fn(&DimensionFigures) -> Option<f64>| dimensions.iter().filter_map(f).collect::<Vec<_>>();
    Ok(ScoreFigures { spearman: mean(&defined(|d| d.spearman)), kappa: mean(&defined(|d| d.kappa)), dimensions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::examples::ScoreTargets;

    fn example(batch: &str, scores: &[Option<f64>]) -> TrainExample {
        let scores = Some(ScoreTargets { batch: batch.into(), scores: scores.to_vec() });
        TrainExample { id: "e".into(), inputs: Vec::new(), gold: 0, scores }
    }

    #[test]
    fn the_scale_is_each_dimensions_mean_and_population_deviation_over_the_lines_that_have_it() {
        // a: 10, 20, 30 -> mean 20, variance (100 + 0 + 100) / 3; b: 1, 3 (one line has none)
        // -> mean 2, deviation 1.
        let set = [
            example("x", &[Some(10.0), Some(1.0)]),
            example("x", &[Some(20.0), None]),
            example("y", &[Some(30.0), Some(3.0)]),
        ];
        let labels = ["a".to_string(), "b".to_string()];
        let s = scale_of(&set, &labels).unwrap();
        assert_eq!(s.mean, vec![20.0, 2.0]);
        assert_eq!(s.std, vec![(200.0f64 / 3.0).sqrt(), 1.0]);
        let flat = [example("x", &[Some(5.0)]), example("x", &[Some(5.0)])];
        let e = scale_of(&flat, &labels[..1]).unwrap_err().to_string();
        assert!(e.contains("every training score of `a` is 5"), "{e}");
    }

    #[test]
    fn a_missing_dimension_is_masked_and_the_rest_averaged() {
        // Scale mean 0, std 2: targets z = score / 2. Line 1 has both (z = 1, 2), outputs
        // (0, 0): (1 + 4) / 2 = 2.5. Line 2 has only b (z = -1), output b = 1: (1 - -1)^2 = 4;
        // its a output (100) counts for nothing.
        let scale = ScoreScale { mean: vec![0.0, 0.0], std: vec![2.0, 2.0] };
        let set = [example("x", &[Some(2.0), Some(4.0)]), example("x", &[None, Some(-2.0)])];
        let outputs = vec![vec![0.0, 0.0], vec![100.0, 1.0]];
        assert_eq!(loss_of_outputs(&set, &outputs, &scale).unwrap(), 6.5);
        let t = Tensor::new(&[[0f32, 0.0], [100.0, 1.0]], &Device::Cpu).unwrap();
        let refs: Vec<&TrainExample> = set.iter().collect();
        assert_eq!(loss(&refs, &t, &scale).unwrap().to_scalar::<f32>().unwrap(), 6.5);
    }

    #[test]
    fn spearman_and_kappa_are_per_batch_then_averaged() {
        // Quadratic kappa = 1 - sum(w O) / sum(w E), w = (i - j)^2 over the scale 1..3 the
        // human scores span, O the confusion matrix, E = row x column totals / n.
        // Batch x: human 1, 2, 3, predictions 1.2, 1.9, 3.4: rho 1; rounded 1, 2, 3 = the
        //   human's: kappa 1.
        // Batch y: human 1, 2, 3, predictions 3, 2, 1: rho -1; O the anti-diagonal, sum w O
        //   = 4 + 0 + 4 = 8; E = 1/3 in every cell, sum w E = 12 / 3 = 4: kappa -1.
        // Batch z: human 1, 3, predictions 2, 2: rho undefined (2 lines, one side constant),
        //   left out of its mean; O (1,2), (3,2): sum w O = 2; E (1,2) = (3,2) = 1 * 2 / 2:
        //   sum w E = 2: kappa 0.
        // Means: rho (1 - 1) / 2 = 0 over 2 of 3 batches; kappa (1 - 1 + 0) / 3 = 0.
        let set: Vec<TrainExample> =
            [("x", 1.0), ("x", 2.0), ("x", 3.0), ("y", 1.0), ("y", 2.0), ("y", 3.0), ("z", 1.0), ("z", 3.0)]
                .iter()
                .map(|&(b, h)| example(b, &[Some(h)]))
                .collect();
        let predicted: Vec<Vec<f64>> = [1.2, 1.9, 3.4, 3.0, 2.0, 1.0, 2.0, 2.0].iter().map(|&p| vec![p]).collect();
        let f = score_figures(&set, &predicted, &["overall".to_string()]).unwrap();
        let d = &f.dimensions[0];
        assert_eq!((d.spearman, d.batches), (Some(0.0), (2, 3)));
        assert!(d.kappa.unwrap().abs() < 1e-12, "{:?}", d.kappa);
        // A prediction outside the human range is clipped to it before kappa: 9 reads as 3.
        let predicted: Vec<Vec<f64>> = [1.0, 2.0, 9.0, 1.0, 2.0, 3.0, 1.0, 3.0].iter().map(|&p| vec![p]).collect();
        let f = score_figures(&set, &predicted, &["overall".to_string()]).unwrap();
        assert_eq!((f.dimensions[0].kappa, f.kappa), (Some(1.0), Some(1.0)));
    }
}
