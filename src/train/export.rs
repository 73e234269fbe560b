//! The trained evaluator's folder: `config.json`, `model.safetensors` (plain tensors, no
//! candle variables) and `train_log.json` (options, curve, picked epoch, warnings).

use super::options::TrainOptions;
use super::result::TrainResult;
use crate::error::Result;
use crate::model::load::{
    to_safetensors, Dense, EncoderWeights, HeadWeights, LayerWeights, LoadedModel, Norm, RelativeTable,
};
use candle_core::Tensor;

/// `model` with every tensor copied out of the autograd graph: what is saved holds plain
/// tensors, not the trainer's variables.
pub(super) fn detached(model: &LoadedModel) -> Result<LoadedModel> {
    let mut model = model.clone();
    model.weights = detach_weights(&model.weights)?;
    if let Some(h) = model.head.as_mut() {
        *h = detach_head(h)?;
    }
    Ok(model)
}

/// A model's own files: `config.json` and `model.safetensors`.
pub(super) fn model_files(model: &LoadedModel) -> Result<Vec<(String, Vec<u8>)>> {
    Ok(vec![
        ("config.json".into(), model.config.to_json().into_bytes()),
        ("model.safetensors".into(), to_safetensors(model)?),
    ])
}

fn detach_dense(d: &Dense) -> Result<Dense> {
    Ok(Dense { weight: d.weight.copy()?.detach(), bias: d.bias.copy()?.detach() })
}

fn detach_head(h: &HeadWeights) -> Result<HeadWeights> {
    let norm =
        |n: &Norm| -> Result<Norm> { Ok(Norm { weight: n.weight.copy()?.detach(), bias: n.bias.copy()?.detach() }) };
    Ok(match h {
        HeadWeights::PooledLinear { classifier } => HeadWeights::PooledLinear { classifier: detach_dense(classifier)? },
        HeadWeights::RobertaClassifier { dense, out_proj } => {
            HeadWeights::RobertaClassifier { dense: detach_dense(dense)?, out_proj: detach_dense(out_proj)? }
        }
        HeadWeights::DistilClassifier { pre_classifier, classifier } => HeadWeights::DistilClassifier {
            pre_classifier: detach_dense(pre_classifier)?,
            classifier: detach_dense(classifier)?,
        },
        HeadWeights::ContextPooler { dense, activation, classifier } => HeadWeights::ContextPooler {
            dense: detach_dense(dense)?,
            activation: *activation,
            classifier: detach_dense(classifier)?,
        },
        HeadWeights::ModernBertHead { dense, activation, norm: n, eps, classifier } => HeadWeights::ModernBertHead {
            dense: detach_dense(dense)?,
            activation: *activation,
            norm: norm(n)?,
            eps: *eps,
            classifier: detach_dense(classifier)?,
        },
    })
}

fn detach_weights(w: &EncoderWeights) -> Result<EncoderWeights> {
    let t = |x: &Tensor| -> Result<Tensor> { Ok(x.copy()?.detach()) };
    let n = |x: &Norm| -> Result<Norm> { Ok(Norm { weight: t(&x.weight)?, bias: t(&x.bias)? }) };
    Ok(EncoderWeights {
        word_embeddings: t(&w.word_embeddings)?,
        position_embeddings: w.position_embeddings.as_ref().map(t).transpose()?,
        token_type_embeddings: w.token_type_embeddings.as_ref().map(t).transpose()?,
        embedding_norm: n(&w.embedding_norm)?,
        layers: w
            .layers
            .iter()
            .map(|l| {
                Ok(LayerWeights {
                    query: detach_dense(&l.query)?,
                    key: detach_dense(&l.key)?,
                    value: detach_dense(&l.value)?,
                    attn_out: detach_dense(&l.attn_out)?,
                    attn_norm: l.attn_norm.as_ref().map(n).transpose()?,
                    ffn_in: detach_dense(&l.ffn_in)?,
                    ffn_out: detach_dense(&l.ffn_out)?,
                    ffn_norm: n(&l.ffn_norm)?,
                })
            })
            .collect::<Result<_>>()?,
        pooler: w.pooler.as_ref().map(detach_dense).transpose()?,
        relative: w
            .relative
            .as_ref()
            .map(|r| -> Result<RelativeTable> {
                Ok(RelativeTable { table: t(&r.table)?, norm: r.norm.as_ref().map(n).transpose()? })
            })
            .transpose()?,
        final_norm: w.final_norm.as_ref().map(n).transpose()?,
    })
}

/// The files a trained evaluator folder holds (the CLI writes them next to a copy of the
/// base model's `tokenizer.json`): `config.json`, `model.safetensors`, `train_log.json`.
pub fn trained_files(result: &TrainResult, options: &TrainOptions) -> Result<Vec<(String, Vec<u8>)>> {
    trained_files_with(result, options, serde_json::json!({}))
}

/// [`trained_files`] with more entries in the log after the options (`jobs::train` adds
/// the task, the argument source, the dev split and the inputs' fingerprints).
pub fn trained_files_with(
    result: &TrainResult,
    options: &TrainOptions,
    extra: serde_json::Value,
) -> Result<Vec<(String, Vec<u8>)>> {
    let mut log = serde_json::json!({ "options": options });
    if let (Some(log), serde_json::Value::Object(extra)) = (log.as_object_mut(), extra) {
        log.extend(extra);
    }
    let rest = serde_json::json!({
        "best_epoch": result.best_epoch,
        "select_by": result.select_by,
        "best_dev_metric": result.best_dev_metric,
        "best_dev_accuracy": result.best_dev_accuracy,
        "dev_majority_rate": result.dev_majority_rate,
        "dev_baseline": result.dev_baseline,
        "dev_chance_accuracy": result.dev_chance_accuracy,
        "class_weights": result.class_weights,
        "warnings": result.warnings,
        "truncated_examples": {"train": result.truncated.0, "dev": result.truncated.1},
        "data": result.data.as_ref().map(|(t, d)| serde_json::json!({"train": t, "dev": d})),
        "threads": result.threads,
        "cache_seconds": result.cache_seconds,
        "curve": result.curve,
    });
    if let (Some(log), serde_json::Value::Object(rest)) = (log.as_object_mut(), rest) {
        log.extend(rest);
    }
    let mut files = model_files(&result.model)?;
    files.push(("train_log.json".into(), serde_json::to_vec_pretty(&log).expect("serialisable")));
    Ok(files)
}
