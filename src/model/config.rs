//! Hugging Face `config.json` -> the architecture facts the encoder needs.
//!
//! One struct for the three BERT-family shapes so the CPU encoder, the GPU encoder and the
//! loader share a single description. DistilBERT's config uses other key names (`dim`,
//! `n_layers`, ...); they are mapped here and nowhere else.

use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::Value;

/// The encoder shapes medrank runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// BERT and MiniLM (incl. sentence-transformers' all-MiniLM-L6-v2).
    Bert,
    /// RoBERTa and XLM-R (and RoBERTa-shaped models such as EriBERTa).
    Roberta,
    /// DistilBERT: no token types, no pooler, its own tensor names.
    DistilBert,
}

/// The feed-forward activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// Exact GELU with erf (HF "gelu").
    Gelu,
    /// The tanh approximation (HF "gelu_new", "gelu_pytorch_tanh", "gelu_fast").
    GeluTanh,
    Relu,
}

/// What the task head on top of the encoder is, when the config names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadKind {
    /// Plain encoder (`BertModel`, sentence-transformers): embeddings only.
    None,
    /// `*ForSequenceClassification`: one logit per label (one label = a cross-encoder score).
    SequenceClassification,
    /// `*ForMultipleChoice`: one logit per (context, option) pair, softmax over options.
    MultipleChoice,
}

/// Everything about the architecture the forward pass and the loader need.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EncoderConfig {
    pub arch: Arch,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    /// 0 for DistilBERT (no token-type embedding), 1 for RoBERTa, 2 for BERT.
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub activation: Activation,
    pub pad_token_id: u32,
    /// Position id of the first token. RoBERTa counts positions from `padding_idx + 1`
    /// (so 2 with pad id 1); BERT and DistilBERT from 0.
    pub position_offset: usize,
    pub head: HeadKind,
    /// Label names in id order (`id2label`); empty when the config has none.
    pub labels: Vec<String>,
}

impl EncoderConfig {
    /// A tiny encoder of `arch` (hidden 32, 4 heads, GELU, a 64-word vocabulary, 64
    /// positions) with `head`: the random models of the unit tests, the gradient checks and
    /// the CLI tests, fast on any machine or adapter. Callers that tokenize real text widen
    /// `vocab_size` to their tokenizer's.
    pub fn tiny(arch: Arch, layers: usize, head: HeadKind, labels: &[&str]) -> Self {
        EncoderConfig {
            arch,
            vocab_size: 64,
            hidden_size: 32,
            num_layers: layers,
            num_heads: 4,
            intermediate_size: 64,
            max_position_embeddings: 64,
            type_vocab_size: if arch == Arch::DistilBert { 0 } else { 2 },
            layer_norm_eps: 1e-12,
            activation: Activation::Gelu,
            // RoBERTa's pad id and first position as in its checkpoints.
            pad_token_id: if arch == Arch::Roberta { 1 } else { 0 },
            position_offset: if arch == Arch::Roberta { 2 } else { 0 },
            head,
            labels: labels.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Parse a `config.json`. `file` names it in error messages.
    pub fn from_json(file: &str, text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::input(file, e.line(), "config", format!("not valid JSON: {e}")))?;
        let model_type = v.get("model_type").and_then(Value::as_str).unwrap_or("");
        let architectures: Vec<&str> = v
            .get("architectures")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let first_arch = architectures.first().copied().unwrap_or("");
        let arch = match model_type {
            "bert" => Arch::Bert,
            "roberta" | "xlm-roberta" | "camembert" => Arch::Roberta,
            "distilbert" => Arch::DistilBert,
            "" if first_arch.starts_with("Bert") => Arch::Bert,
            "" if first_arch.starts_with("Roberta") || first_arch.starts_with("XLMRoberta") => Arch::Roberta,
            "" if first_arch.starts_with("DistilBert") => Arch::DistilBert,
            other => {
                return Err(Error::in_file(
                    file,
                    format!(
                        "unsupported model_type `{other}` (architectures {architectures:?}): \
                         medrank runs BERT/MiniLM, RoBERTa/XLM-R and DistilBERT encoders"
                    ),
                ))
            }
        };
        let get = |keys: &[&str]| -> Option<&Value> { keys.iter().find_map(|k| v.get(*k)) };
        let usize_of =
            |keys: &[&str], default: Option<usize>| -> Result<usize> {
                match get(keys) {
                    Some(x) => x.as_u64().map(|n| n as usize).ok_or_else(|| {
                        Error::input(file, 1, keys[0], format!("expected a non-negative integer, got {x}"))
                    }),
                    None => default
                        .ok_or_else(|| Error::input(file, 1, keys[0], "missing (required for this architecture)")),
                }
            };
        let distil = arch == Arch::DistilBert;
        let hidden_size = usize_of(if distil { &["dim"] } else { &["hidden_size"] }, None)?;
        let num_layers = usize_of(if distil { &["n_layers"] } else { &["num_hidden_layers"] }, None)?;
        let num_heads = usize_of(if distil { &["n_heads"] } else { &["num_attention_heads"] }, None)?;
        let intermediate_size = usize_of(if distil { &["hidden_dim"] } else { &["intermediate_size"] }, None)?;
        if num_heads == 0 || hidden_size % num_heads != 0 {
            return Err(Error::in_file(
                file,
                format!("hidden size {hidden_size} is not divisible by {num_heads} attention heads"),
            ));
        }
        let vocab_size = usize_of(&["vocab_size"], None)?;
        let max_position_embeddings = usize_of(&["max_position_embeddings"], Some(512))?;
        let type_vocab_size = if distil { 0 } else { usize_of(&["type_vocab_size"], Some(2))? };
        let pad_token_id = usize_of(&["pad_token_id"], Some(if arch == Arch::Roberta { 1 } else { 0 }))?;
        let layer_norm_eps = if distil {
            1e-12 // fixed in HF's DistilBERT code, not in its config
        } else {
            get(&["layer_norm_eps"]).and_then(Value::as_f64).unwrap_or(1e-12)
        };
        let act_name =
            get(if distil { &["activation"] } else { &["hidden_act"] }).and_then(Value::as_str).unwrap_or("gelu");
        let activation = match act_name {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            other => {
                return Err(Error::input(
                    file,
                    1,
                    if distil { "activation" } else { "hidden_act" },
                    format!("unsupported activation `{other}` (gelu, gelu_new, relu)"),
                ))
            }
        };
        let position_offset = if arch == Arch::Roberta { pad_token_id + 1 } else { 0 };
        let head = if first_arch.ends_with("ForSequenceClassification") {
            HeadKind::SequenceClassification
        } else if first_arch.ends_with("ForMultipleChoice") {
            HeadKind::MultipleChoice
        } else {
            HeadKind::None
        };
        let mut labels: Vec<(usize, String)> = match v.get("id2label").and_then(Value::as_object) {
            Some(map) => map
                .iter()
                .map(|(k, name)| {
                    let id = k
                        .parse::<usize>()
                        .map_err(|_| Error::input(file, 1, "id2label", format!("label id `{k}` is not an integer")))?;
                    Ok((id, name.as_str().unwrap_or_default().to_string()))
                })
                .collect::<Result<_>>()?,
            None => Vec::new(),
        };
        labels.sort();
        if labels.iter().enumerate().any(|(i, (id, _))| *id != i) {
            return Err(Error::input(file, 1, "id2label", "label ids must be 0..n-1"));
        }
        Ok(EncoderConfig {
            arch,
            vocab_size,
            hidden_size,
            num_layers,
            num_heads,
            intermediate_size,
            max_position_embeddings,
            type_vocab_size,
            layer_norm_eps,
            activation,
            pad_token_id: pad_token_id as u32,
            position_offset,
            head,
            labels: labels.into_iter().map(|(_, n)| n).collect(),
        })
    }

    /// The longest input (in tokens, special tokens included) the position table allows.
    pub fn max_tokens(&self) -> usize {
        self.max_position_embeddings.saturating_sub(self.position_offset)
    }

    /// Each token's position id in `rows` right-padded rows of `seq_len` tokens: counted
    /// from the offset (2 for RoBERTa) in every row; padding sits at the end, masked out.
    pub fn position_ids(&self, rows: usize, seq_len: usize) -> Vec<u32> {
        (0..rows * seq_len).map(|t| (t % seq_len.max(1) + self.position_offset) as u32).collect()
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    /// The `config.json` text HF (and medrank) can load back: written by training and by the
    /// tiny random-weight test models.
    pub fn to_json(&self) -> String {
        let arch_prefix = match self.arch {
            Arch::Bert => "Bert",
            Arch::Roberta => "Roberta",
            Arch::DistilBert => "DistilBert",
        };
        let suffix = match self.head {
            HeadKind::None => "Model",
            HeadKind::SequenceClassification => "ForSequenceClassification",
            HeadKind::MultipleChoice => "ForMultipleChoice",
        };
        let act = match self.activation {
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_new",
            Activation::Relu => "relu",
        };
        let id2label: serde_json::Map<String, Value> =
            self.labels.iter().enumerate().map(|(i, l)| (i.to_string(), Value::String(l.clone()))).collect();
        let mut v = serde_json::json!({
            "architectures": [format!("{arch_prefix}{suffix}")],
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "pad_token_id": self.pad_token_id,
        });
        let o = v.as_object_mut().expect("object literal");
        if self.arch == Arch::DistilBert {
            o.insert("model_type".into(), "distilbert".into());
            o.insert("dim".into(), self.hidden_size.into());
            o.insert("n_layers".into(), self.num_layers.into());
            o.insert("n_heads".into(), self.num_heads.into());
            o.insert("hidden_dim".into(), self.intermediate_size.into());
            o.insert("activation".into(), act.into());
        } else {
            let mt = if self.arch == Arch::Bert { "bert" } else { "roberta" };
            o.insert("model_type".into(), mt.into());
            o.insert("hidden_size".into(), self.hidden_size.into());
            o.insert("num_hidden_layers".into(), self.num_layers.into());
            o.insert("num_attention_heads".into(), self.num_heads.into());
            o.insert("intermediate_size".into(), self.intermediate_size.into());
            o.insert("hidden_act".into(), act.into());
            o.insert("type_vocab_size".into(), self.type_vocab_size.into());
            o.insert("layer_norm_eps".into(), self.layer_norm_eps.into());
        }
        if !self.labels.is_empty() {
            o.insert("id2label".into(), Value::Object(id2label));
        }
        serde_json::to_string_pretty(&v).expect("serialisable")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minilm_config_parses() {
        // The shipped all-MiniLM-L6-v2 config.json (fields that matter).
        let text = r#"{"architectures":["BertModel"],"hidden_act":"gelu","hidden_size":384,
            "intermediate_size":1536,"layer_norm_eps":1e-12,"max_position_embeddings":512,
            "model_type":"bert","num_attention_heads":12,"num_hidden_layers":6,
            "pad_token_id":0,"type_vocab_size":2,"vocab_size":30522}"#;
        let c = EncoderConfig::from_json("config.json", text).unwrap();
        assert_eq!(c.arch, Arch::Bert);
        assert_eq!((c.hidden_size, c.num_layers, c.num_heads, c.head_dim()), (384, 6, 12, 32));
        assert_eq!(c.position_offset, 0);
        assert_eq!(c.head, HeadKind::None);
        assert_eq!(c.max_tokens(), 512);
    }

    #[test]
    fn roberta_offset_and_labels() {
        let text = r#"{"architectures":["XLMRobertaForSequenceClassification"],
            "model_type":"xlm-roberta","hidden_size":8,"num_hidden_layers":1,
            "num_attention_heads":2,"intermediate_size":16,"vocab_size":10,
            "max_position_embeddings":514,"type_vocab_size":1,"pad_token_id":1,
            "id2label":{"1":"contradiction","0":"entailment"}}"#;
        let c = EncoderConfig::from_json("c.json", text).unwrap();
        assert_eq!(c.arch, Arch::Roberta);
        assert_eq!(c.position_offset, 2);
        assert_eq!(c.max_tokens(), 512);
        assert_eq!(c.head, HeadKind::SequenceClassification);
        assert_eq!(c.labels, vec!["entailment", "contradiction"]);
        // Round trip through to_json.
        let back = EncoderConfig::from_json("c.json", &c.to_json()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn distilbert_keys_and_errors() {
        let text = r#"{"model_type":"distilbert","dim":8,"n_layers":2,"n_heads":2,
            "hidden_dim":16,"vocab_size":10,"activation":"gelu"}"#;
        let c = EncoderConfig::from_json("d.json", text).unwrap();
        assert_eq!((c.arch, c.type_vocab_size, c.num_layers), (Arch::DistilBert, 0, 2));
        assert_eq!(EncoderConfig::from_json("d.json", &c.to_json()).unwrap(), c);
        let bad = r#"{"model_type":"bert","hidden_size":8,"num_attention_heads":3,
            "num_hidden_layers":1,"intermediate_size":4,"vocab_size":5}"#;
        let e = EncoderConfig::from_json("b.json", bad).unwrap_err().to_string();
        assert!(e.contains("not divisible"), "{e}");
        let missing = r#"{"model_type":"bert","hidden_size":8}"#;
        let e = EncoderConfig::from_json("m.json", missing).unwrap_err().to_string();
        assert!(e.contains("num_hidden_layers"), "{e}");
        let gpt = r#"{"model_type":"gpt2"}"#;
        assert!(EncoderConfig::from_json("g.json", gpt).unwrap_err().to_string().contains("gpt2"));
    }
}
