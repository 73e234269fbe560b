//! The checkpoint names of every family's tensors: one table for reading (`load`), writing
//! (`load::to_named_tensors`: trained and random models), `medrank quantize`'s int8 list
//! and the check of `config.json` against the weights file.
//!
//! Names are the canonical ones: the model prefix (`bert.`, `roberta.`, `distilbert.`,
//! `deberta.`, `model.`) dropped, see [`canonical_name`]; head tensors sit outside it.

use super::config::{Arch, EncoderConfig};

/// The model prefix a family's checkpoints put before the encoder's tensors.
pub fn model_prefix(arch: Arch) -> &'static str {
    match arch {
        Arch::Bert => "bert.",
        Arch::Roberta => "roberta.",
        Arch::DistilBert => "distilbert.",
        Arch::DebertaV2 => "deberta.",
        Arch::ModernBert => "model.",
    }
}

/// A checkpoint's tensor name as medrank names it: the model prefix dropped, old
/// TF-converted checkpoints' `LayerNorm.gamma` / `.beta` read as `.weight` / `.bias`. Head
/// tensors (`classifier.*`, `pre_classifier.*`, `pooler.*` of DeBERTa, `head.*` of
/// ModernBERT) keep their names: they sit outside the model prefix in HF checkpoints.
pub fn canonical_name(arch: Arch, name: &str) -> String {
    let k = name.strip_prefix(model_prefix(arch)).unwrap_or(name);
    if k.ends_with("LayerNorm.gamma") {
        k.replace("LayerNorm.gamma", "LayerNorm.weight")
    } else if k.ends_with("LayerNorm.beta") {
        k.replace("LayerNorm.beta", "LayerNorm.bias")
    } else {
        k.to_string()
    }
}

/// The name [`crate::model::load::to_named_tensors`] writes for a canonical one: bare for
/// BERT, RoBERTa and DistilBERT (as sentence-transformers writes them; HF's loaders accept
/// both), under the model prefix for DeBERTa-v2 and ModernBERT (as their checkpoints
/// have them), head tensors outside it.
pub fn written(arch: Arch, canonical: &str) -> String {
    let head = ["classifier", "pooler.", "head."].iter().any(|p| canonical.starts_with(p));
    if matches!(arch, Arch::DebertaV2 | Arch::ModernBert) && !head {
        format!("{}{canonical}", model_prefix(arch))
    } else {
        canonical.to_string()
    }
}

/// Where a layer's query, key and value live: three maps, or ModernBERT's one `Wqkv`
/// whose rows are query, key and value in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Qkv {
    Separate([String; 3]),
    Fused(String),
}

/// The names (without `.weight` / `.bias`) of one layer's tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerNames {
    pub qkv: Qkv,
    pub attn_out: String,
    /// BERT's norm after attention, ModernBERT's before it (none in its first layer).
    pub attn_norm: Option<String>,
    pub ffn_in: String,
    pub ffn_out: String,
    /// BERT's norm after the feed-forward, ModernBERT's before it.
    pub ffn_norm: String,
}

/// The prefix of the layers (then `.{i}.`).
pub fn layer_prefix(arch: Arch) -> &'static str {
    match arch {
        Arch::Bert | Arch::Roberta | Arch::DebertaV2 => "encoder.layer",
        Arch::DistilBert => "transformer.layer",
        Arch::ModernBert => "layers",
    }
}

/// The names of layer `i`'s tensors.
pub fn layer(arch: Arch, i: usize) -> LayerNames {
    let n = |name: &str| format!("{}.{i}.{name}", layer_prefix(arch));
    let separate = |q: &str, k: &str, v: &str| Qkv::Separate([n(q), n(k), n(v)]);
    match arch {
        Arch::Bert | Arch::Roberta | Arch::DebertaV2 => LayerNames {
            qkv: if arch == Arch::DebertaV2 {
                separate("attention.self.query_proj", "attention.self.key_proj", "attention.self.value_proj")
            } else {
                separate("attention.self.query", "attention.self.key", "attention.self.value")
            },
            attn_out: n("attention.output.dense"),
            attn_norm: Some(n("attention.output.LayerNorm")),
            ffn_in: n("intermediate.dense"),
            ffn_out: n("output.dense"),
            ffn_norm: n("output.LayerNorm"),
        },
        Arch::DistilBert => LayerNames {
            qkv: separate("attention.q_lin", "attention.k_lin", "attention.v_lin"),
            attn_out: n("attention.out_lin"),
            attn_norm: Some(n("sa_layer_norm")),
            ffn_in: n("ffn.lin1"),
            ffn_out: n("ffn.lin2"),
            ffn_norm: n("output_layer_norm"),
        },
        Arch::ModernBert => LayerNames {
            qkv: Qkv::Fused(n("attn.Wqkv")),
            attn_out: n("attn.Wo"),
            attn_norm: (i > 0).then(|| n("attn_norm")),
            ffn_in: n("mlp.Wi"),
            ffn_out: n("mlp.Wo"),
            ffn_norm: n("mlp_norm"),
        },
    }
}

impl LayerNames {
    /// The first name of the query (what tells how many layers a file holds).
    pub fn query(&self) -> &str {
        match &self.qkv {
            Qkv::Separate([q, _, _]) => q,
            Qkv::Fused(qkv) => qkv,
        }
    }

    /// The linear maps of the layer, in order (what `medrank quantize` stores as int8).
    pub fn linear(&self) -> Vec<&str> {
        let mut out: Vec<&str> = match &self.qkv {
            Qkv::Separate(parts) => parts.iter().map(String::as_str).collect(),
            Qkv::Fused(qkv) => vec![qkv],
        };
        out.extend([self.attn_out.as_str(), self.ffn_in.as_str(), self.ffn_out.as_str()]);
        out
    }
}

/// The word-embedding table.
pub fn word_embeddings(arch: Arch) -> &'static str {
    match arch {
        Arch::ModernBert => "embeddings.tok_embeddings.weight",
        _ => "embeddings.word_embeddings.weight",
    }
}

pub const POSITION_EMBEDDINGS: &str = "embeddings.position_embeddings.weight";
pub const TOKEN_TYPE_EMBEDDINGS: &str = "embeddings.token_type_embeddings.weight";
/// DeBERTa-v2's relative-position table and its norm.
pub const RELATIVE_EMBEDDINGS: &str = "encoder.rel_embeddings.weight";
pub const RELATIVE_NORM: &str = "encoder.LayerNorm";
/// ModernBERT's norm after the last layer.
pub const FINAL_NORM: &str = "final_norm";

/// The embeddings' norm.
pub fn embedding_norm(arch: Arch) -> &'static str {
    match arch {
        Arch::ModernBert => "embeddings.norm",
        _ => "embeddings.LayerNorm",
    }
}

/// Tensors of parts medrank does not run that a family's checkpoints carry (pre-training
/// heads, buffers, a pooler no head reads): skipped with a warning rather than refused.
pub fn known_unused(config: &EncoderConfig, name: &str) -> bool {
    let common = name.starts_with("cls.")
        || name.starts_with("lm_head.")
        || name.ends_with("position_ids")
        || name.ends_with("token_type_ids");
    common
        || match config.arch {
            Arch::Bert | Arch::Roberta => name.starts_with("pooler."),
            Arch::DistilBert => name.starts_with("vocab_"),
            // The masked-LM heads; a pooler without a classifier; a position table a
            // relative-only model does not read (HF ignores it too).
            Arch::DebertaV2 => {
                name.starts_with("lm_predictions.")
                    || name.starts_with("mask_predictions.")
                    || name.starts_with("pooler.")
                    || (name == POSITION_EMBEDDINGS && !config.absolute_positions())
            }
            // The masked-LM head (`head.*` then `decoder.*`) of a model without a classifier.
            Arch::ModernBert => {
                name.starts_with("decoder.")
                    || (name.starts_with("head.") && config.head == super::config::HeadKind::None)
            }
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_name_their_tensors_as_transformers_does() {
        // transformers 5.24: `[n for n, _ in DebertaV2Model(cfg).named_parameters()]` etc.
        let d = layer(Arch::DebertaV2, 3);
        assert_eq!(d.query(), "encoder.layer.3.attention.self.query_proj");
        let m0 = layer(Arch::ModernBert, 0);
        assert_eq!(m0.qkv, Qkv::Fused("layers.0.attn.Wqkv".into()));
        assert_eq!(m0.attn_norm, None);
        assert_eq!(layer(Arch::ModernBert, 2).attn_norm.as_deref(), Some("layers.2.attn_norm"));
        assert_eq!(m0.linear(), ["layers.0.attn.Wqkv", "layers.0.attn.Wo", "layers.0.mlp.Wi", "layers.0.mlp.Wo"]);
        assert_eq!(
            canonical_name(Arch::ModernBert, "model.embeddings.tok_embeddings.weight"),
            word_embeddings(Arch::ModernBert)
        );
        assert_eq!(canonical_name(Arch::DebertaV2, "deberta.encoder.rel_embeddings.weight"), RELATIVE_EMBEDDINGS);
    }
}
