//! Hugging Face `config.json` -> the architecture facts the encoder needs.
//!
//! One struct for every family medrank runs (BERT, RoBERTa, DistilBERT, DeBERTa-v2/v3,
//! ModernBERT) so the CPU encoder, the GPU encoder and the loader share a single
//! description: the sizes they all have here, what a family adds in [`family`].
//! DistilBERT's and ModernBERT's configs use other key names (`dim`, `n_layers`,
//! `norm_eps`, ...); they are mapped here and nowhere else.

pub mod family;
pub use family::{ArchOptions, Deberta, HeadPooling, ModernBert, Relative};

use crate::data::json::Json;
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
    /// DeBERTa-v2 and v3 (`deberta-v2`): disentangled attention over relative positions
    /// ([`family::Deberta`]).
    DebertaV2,
    /// ModernBERT: pre-norm layers, rotary positions, global and sliding-window attention,
    /// GeGLU, no biases ([`family::ModernBert`]).
    ModernBert,
}

impl Arch {
    /// The family's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Bert => "BERT",
            Arch::Roberta => "RoBERTa",
            Arch::DistilBert => "DistilBERT",
            Arch::DebertaV2 => "DeBERTa-v2",
            Arch::ModernBert => "ModernBERT",
        }
    }
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
    /// 0 for DistilBERT, DeBERTa-v3 and ModernBERT (no token-type embedding), 1 for
    /// RoBERTa, 2 for BERT.
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
    /// The input limit (tokens) the model was trained with, when it is below the position
    /// table's: `medrank train` records its base model's limit here (the `max_seq_length`
    /// key of the `config.json` it writes; 256 from all-MiniLM-L6-v2's
    /// `sentence_bert_config.json`), so that every run of the trained model cuts inputs
    /// where training cut them.
    pub max_seq_length: Option<usize>,
    /// A score model's outputs (`problem_type: "regression"`): one per label (a human score
    /// dimension) and how to read them as scores ([`ScoreScale`]); `None` for a classifier.
    pub score_scale: Option<ScoreScale>,
    /// What a score model reads beside the candidate ([`SCORE_INPUT_KEY`]; no meaning for
    /// other models).
    pub score_input: ScoreInput,
    /// How a classification head reads the last layer: the first token's state (Hugging
    /// Face's heads) or the mean of the real tokens' states. ModernBERT says it with its own
    /// `classifier_pooling`; the other families with [`HEAD_POOLING_KEY`], which
    /// `medrank train --head-pooling mean` writes (transformers ignores it).
    pub head_pooling: HeadPooling,
    /// The dropout probabilities the model was made with, where its config says them
    /// (training only: inference never drops anything).
    pub dropout: ConfigDropout,
    /// What the family adds (DeBERTa's relative attention, ModernBERT's layer pattern).
    pub options: ArchOptions,
}

/// How a score model's outputs are read as scores: output `j` was trained on dimension
/// `j`'s scores standardised with the training data's mean and (population) standard
/// deviation, so its score is `output * std[j] + mean[j]`. `medrank train --task score`
/// writes them into `config.json` as [`SCORE_SCALE_KEY`] (`{"overall": {"mean": 41.2,
/// "std": 35.0}, ...}`, by label) beside `problem_type: "regression"`; a regression model
/// without them (trained elsewhere) is read as predicting the scores themselves (mean 0,
/// standard deviation 1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreScale {
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
}

impl ScoreScale {
    /// Outputs read as they are (a regression model that records no scale).
    pub fn identity(outputs: usize) -> ScoreScale {
        ScoreScale { mean: vec![0.0; outputs], std: vec![1.0; outputs] }
    }

    /// Dimension `j`'s score of the model's output `output`.
    pub fn score(&self, j: usize, output: f64) -> f64 {
        output * self.std[j] + self.mean[j]
    }

    /// The output a model should give for dimension `j`'s score `score` (its training target).
    pub fn standardised(&self, j: usize, score: f64) -> f64 {
        (score - self.mean[j]) / self.std[j]
    }
}

/// The `config.json` key of a score model's [`ScoreScale`].
pub const SCORE_SCALE_KEY: &str = "medrank_score_scale";

/// What a score model reads beside the candidate (`model::score::score_input` builds it). On SQuALITY's human scores (the vendored
/// `data/squality-scores`, 150 answers), the candidate alone trains a metric well above
/// ROUGE while the reference beside it halves the candidate's share of the tokens and
/// slows learning (README, "Metrics learned from experts' scores").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum ScoreInput {
    /// The candidate alone.
    #[serde(rename = "candidate")]
    Candidate,
    /// The candidate, then the question.
    #[default]
    #[serde(rename = "candidate+question")]
    WithQuestion,
    /// The candidate, then the question and the first reference (what score models read
    /// before the choice existed: a config.json without the key reads so).
    #[serde(rename = "candidate+question+reference")]
    WithReference,
}

impl ScoreInput {
    pub const NAMES: [&'static str; 3] = ["candidate", "candidate+question", "candidate+question+reference"];

    pub fn name(self) -> &'static str {
        match self {
            ScoreInput::Candidate => Self::NAMES[0],
            ScoreInput::WithQuestion => Self::NAMES[1],
            ScoreInput::WithReference => Self::NAMES[2],
        }
    }

    /// `--score-input`'s value, or None.
    pub fn parse(s: &str) -> Option<ScoreInput> {
        [ScoreInput::Candidate, ScoreInput::WithQuestion, ScoreInput::WithReference]
            .into_iter()
            .find(|i| i.name() == s.trim())
    }
}

/// The `config.json` key of what a score model reads beside the candidate
/// (`model::score::ScoreInput`'s names); a score model without it was trained before the
/// choice existed and reads the question and the first reference.
pub const SCORE_INPUT_KEY: &str = "medrank_score_input";

/// The `config.json` key of a mean-pooled head on a family whose Hugging Face heads read
/// the first token (BERT, RoBERTa, DistilBERT, DeBERTa-v2): `"mean"` or `"cls"`, absent
/// meaning `"cls"`. ModernBERT has its own key, `classifier_pooling`.
pub const HEAD_POOLING_KEY: &str = "medrank_head_pooling";

/// How the head reads the last layer: ModernBERT's `classifier_pooling`, the other
/// families' [`HEAD_POOLING_KEY`] (refused on ModernBERT, whose own key says it).
fn head_pooling(v: &Fields, arch: Arch) -> Result<HeadPooling> {
    let key = if arch == Arch::ModernBert {
        if v.get(HEAD_POOLING_KEY).is_some() {
            return Err(
                v.error(HEAD_POOLING_KEY, "a ModernBERT config says its head's pooling with `classifier_pooling`")
            );
        }
        "classifier_pooling"
    } else {
        HEAD_POOLING_KEY
    };
    match v.string(key)? {
        None => Ok(HeadPooling::Cls),
        Some(name) => {
            HeadPooling::parse(name).ok_or_else(|| v.error(key, format!("expected `cls` or `mean`, found `{name}`")))
        }
    }
}

/// A score model's [`SCORE_INPUT_KEY`], which no other model has.
fn score_input(v: &Fields, regression: bool) -> Result<ScoreInput> {
    match (v.string(SCORE_INPUT_KEY)?, regression) {
        (None, _) => Ok(ScoreInput::WithReference),
        (Some(_), false) => {
            Err(v.error(SCORE_INPUT_KEY, "only a regression model (problem_type \"regression\") has a score input"))
        }
        (Some(name), true) => ScoreInput::parse(name)
            .ok_or_else(|| v.error(SCORE_INPUT_KEY, format!("`{name}`: expected {}", ScoreInput::NAMES.join(", ")))),
    }
}

/// `hidden_dropout_prob` and `attention_probs_dropout_prob` (DistilBERT: `dropout` and
/// `attention_dropout`) of a `config.json`, each a probability from 0 to 1 when present.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct ConfigDropout {
    pub hidden: Option<f64>,
    pub attention: Option<f64>,
}

/// The `config.json` key of [`EncoderConfig::max_seq_length`] (sentence-transformers' name
/// for the same limit).
pub const MAX_SEQ_LENGTH_KEY: &str = "max_seq_length";

/// The largest `layer_norm_eps` taken (Hugging Face's models use 1e-12 to 1e-5).
pub const MAX_LAYER_NORM_EPS: f64 = 0.01;

/// The range a size of `config.json` must lie in. The bounds are far above the BERT-family
/// models in use (24 layers, hidden 1,024, 250,002 words for XLM-R, 514 positions), and
/// each size must also be backed by the weights file's tensors
/// (`load::check_config_backed`) before anything is allocated: a config that says 10^9
/// layers used to abort the loader allocating 128 GB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeRange {
    pub min: usize,
    pub max: usize,
    /// What the value is, for the message ("a whole number", "an id of the vocabulary").
    pub what: &'static str,
}

impl SizeRange {
    pub const LAYERS: SizeRange = SizeRange { min: 1, max: 256, what: "a whole number" };
    pub const HIDDEN: SizeRange = SizeRange { min: 1, max: 16_384, what: "a whole number" };
    pub const INTERMEDIATE: SizeRange = SizeRange { min: 1, max: 65_536, what: "a whole number" };
    pub const VOCAB: SizeRange = SizeRange { min: 1, max: 2_097_152, what: "a whole number" };
    pub const POSITIONS: SizeRange = SizeRange { min: 1, max: 65_536, what: "a whole number" };
    pub const TYPE_VOCAB: SizeRange = SizeRange { min: 1, max: 1_024, what: "a whole number" };
}

/// The top-level fields of a JSON object, for messages naming `file` and the field.
struct Fields<'a> {
    file: &'a str,
    entries: &'a [(String, Json)],
    /// The object's own field name and a dot (for nested objects), or "".
    path: &'a str,
}

impl<'a> Fields<'a> {
    /// The object's fields; a key given twice is an error naming it.
    fn new(file: &'a str, entries: &'a [(String, Json)], path: &'a str) -> Result<Self> {
        let fields = Fields { file, entries, path };
        let mut seen = std::collections::HashSet::with_capacity(entries.len());
        if let Some((key, _)) = entries.iter().find(|(k, _)| !seen.insert(k.as_str())) {
            return Err(fields.error(key, format!("duplicate key `{key}`: which value is meant is not known")));
        }
        Ok(fields)
    }

    fn error(&self, field: &str, message: impl Into<String>) -> Error {
        Error::field(self.file, &format!("{}{field}", self.path), message)
    }

    /// A value; `null` counts as absent (Hugging Face writes `"pad_token_id": null`).
    fn get(&self, key: &str) -> Option<&'a Json> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v).filter(|v| **v != Json::Null)
    }

    /// A boolean; absent: `default`.
    fn boolean(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(Json::Bool(b)) => Ok(*b),
            Some(other) => Err(self.error(key, format!("expected true or false, found {}", other.kind()))),
        }
    }

    fn string(&self, key: &str) -> Result<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Json::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.error(key, format!("expected a string, found {}", other.kind()))),
        }
    }

    /// A number (whole or not); a string or anything else is an error.
    fn number(&self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(Json::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(self.error(key, format!("expected a number, found {}", other.kind()))),
        }
    }

    /// A whole number in `range`; absent: `default`, or an error when there is none.
    fn size(&self, key: &str, range: SizeRange, default: Option<usize>) -> Result<usize> {
        let expected = format!("expected {} from {} to {}", range.what, range.min, range.max);
        match self.get(key) {
            None => default.ok_or_else(|| self.error(key, "missing (required for this architecture)")),
            Some(Json::Number(n)) => match n.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) if (range.min..=range.max).contains(&n) => Ok(n),
                _ => Err(self.error(key, format!("{expected}, found {n}"))),
            },
            Some(other) => Err(self.error(key, format!("{expected}, found {}", other.kind()))),
        }
    }
}

/// The head's label names in id order from `id2label` (an object `{"0": "entailment", ...}`
/// with the ids 0..n-1), checked against `label2id` when the config has both. A label
/// named twice (in any case), a list instead of an object, or a `label2id` that says
/// another id for a label are refused naming the field: each would make a verdict read
/// from the wrong class (statements' argmax, the grader's P(met)).
fn label_map(v: &Fields) -> Result<Vec<String>> {
    let entries = match v.get("id2label") {
        None => return Ok(Vec::new()),
        Some(Json::Object(entries)) => entries,
        Some(other) => {
            return Err(v.error(
                "id2label",
                format!(
                    "expected an object of label names by id ({{\"0\": \"entailment\", ...}}), found {}",
                    other.kind()
                ),
            ))
        }
    };
    let map = Fields::new(v.file, entries, "id2label.")?;
    let mut labels: Vec<(usize, String)> = Vec::with_capacity(entries.len());
    for (k, name) in entries {
        let id = k.parse::<usize>().map_err(|_| map.error(k, format!("label id `{k}` is not a whole number")))?;
        let name = match name {
            Json::String(s) if !s.trim().is_empty() => s.clone(),
            Json::String(_) => return Err(map.error(k, "empty label name")),
            other => return Err(map.error(k, format!("expected a label name, found {}", other.kind()))),
        };
        labels.push((id, name));
    }
    labels.sort();
    if let Some(i) = labels.iter().enumerate().position(|(i, (id, _))| *id != i) {
        return Err(v.error(
            "id2label",
            format!("label ids must be 0..{} without gaps; id {i} is missing", labels.len().saturating_sub(1)),
        ));
    }
    let norm = |s: &str| s.trim().to_lowercase().replace([' ', '-'], "_");
    // A criterion grader's classes beside an NLI model's: which reading gives P(met) is
    // not known (the grader's took precedence silently).
    let named = |names: &[&str]| labels.iter().map(|(_, l)| l).find(|l| names.contains(&norm(l).as_str()));
    if let (Some(grader), Some(nli)) = (named(&["met", "not_met"]), named(&["entailment", "contradiction"])) {
        return Err(v.error(
            "id2label",
            format!(
                "the labels name both a criterion grader's class (`{grader}`) and an NLI class (`{nli}`): which \
                 class means met is not known"
            ),
        ));
    }
    for (i, (_, a)) in labels.iter().enumerate() {
        if let Some((j, _)) = labels[..i].iter().find(|(_, b)| norm(b) == norm(a)) {
            return Err(v.error(
                "id2label",
                format!("label `{a}` names both class {j} and class {i}: which class it means is not known"),
            ));
        }
    }
    match v.get("label2id") {
        None => {}
        Some(Json::Object(inverse)) => {
            let inverse_fields = Fields::new(v.file, inverse, "label2id.")?;
            for (name, id) in inverse {
                let id = match id {
                    Json::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
                    _ => None,
                };
                let Some(id) = id else {
                    return Err(inverse_fields.error(name, "expected a class id (a whole number)"));
                };
                // Names compared as the duplicates are (a case difference is no contradiction).
                if labels.get(id).map(|(_, l)| norm(l)) != Some(norm(name)) {
                    let says = match labels.iter().find(|(_, l)| norm(l) == norm(name)) {
                        Some((i, _)) => format!("id2label gives it id {i}"),
                        None => "id2label has no such label".to_string(),
                    };
                    return Err(inverse_fields.error(
                        name,
                        format!("says id {id} for label `{name}`, but {says}: the two maps contradict each other"),
                    ));
                }
            }
            if inverse.len() != labels.len() {
                return Err(v.error(
                    "label2id",
                    format!(
                        "has {} labels, id2label {}: the two maps contradict each other",
                        inverse.len(),
                        labels.len()
                    ),
                ));
            }
        }
        Some(other) => {
            return Err(
                v.error("label2id", format!("expected an object of class ids by label name, found {}", other.kind()))
            )
        }
    }
    Ok(labels.into_iter().map(|(_, n)| n).collect())
}

/// A score model's [`ScoreScale`] (`problem_type: "regression"`), `None` for any other
/// `problem_type` of Hugging Face's (`single_label_classification`,
/// `multi_label_classification`) or none. A regression model names its outputs in
/// `id2label` (one per score dimension) and has a sequence-classification head; its
/// [`SCORE_SCALE_KEY`], when present, gives every label a finite mean and a standard
/// deviation above 0, and no other name.
fn score_scale(v: &Fields, head: HeadKind, labels: &[String]) -> Result<Option<ScoreScale>> {
    match v.string("problem_type")? {
        None | Some("single_label_classification" | "multi_label_classification") => {
            if v.get(SCORE_SCALE_KEY).is_some() {
                return Err(v.error(
                    SCORE_SCALE_KEY,
                    "only a regression model (problem_type \"regression\") has a score scale",
                ));
            }
            return Ok(None);
        }
        Some("regression") => {}
        Some(other) => {
            return Err(v.error(
                "problem_type",
                format!("`{other}`: expected regression, single_label_classification or multi_label_classification"),
            ))
        }
    }
    if head != HeadKind::SequenceClassification || labels.is_empty() {
        return Err(v.error(
            "problem_type",
            "a regression model is a *ForSequenceClassification model whose id2label names its outputs (one per score dimension)",
        ));
    }
    let entries = match v.get(SCORE_SCALE_KEY) {
        None => return Ok(Some(ScoreScale::identity(labels.len()))),
        Some(Json::Object(entries)) => entries,
        Some(other) => {
            return Err(v.error(
                SCORE_SCALE_KEY,
                format!("expected an object of {{\"mean\", \"std\"}} by label, found {}", other.kind()),
            ))
        }
    };
    let path = format!("{SCORE_SCALE_KEY}.");
    let by_label = Fields::new(v.file, entries, &path)?;
    if let Some((name, _)) = entries.iter().find(|(name, _)| !labels.contains(name)) {
        return Err(by_label.error(name, format!("`{name}` is not a label of id2label ({})", labels.join(", "))));
    }
    let mut scale = ScoreScale { mean: Vec::new(), std: Vec::new() };
    for label in labels {
        let Some(Json::Object(pair)) = by_label.get(label) else {
            return Err(by_label.error(label, "missing, or not an object {\"mean\", \"std\"}"));
        };
        let inner = format!("{path}{label}.");
        let fields = Fields::new(v.file, pair, &inner)?;
        let mean = fields.number("mean")?.filter(|m| m.is_finite());
        let std = fields.number("std")?.filter(|s| s.is_finite() && *s > 0.0);
        scale.mean.push(mean.ok_or_else(|| fields.error("mean", "expected a finite number"))?);
        scale.std.push(std.ok_or_else(|| fields.error("std", "expected a finite number above 0"))?);
    }
    Ok(Some(scale))
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
            type_vocab_size: match arch {
                Arch::DistilBert | Arch::ModernBert => 0,
                _ => 2,
            },
            layer_norm_eps: 1e-12,
            activation: Activation::Gelu,
            // RoBERTa's pad id and first position as in its checkpoints.
            pad_token_id: if arch == Arch::Roberta { 1 } else { 0 },
            position_offset: if arch == Arch::Roberta { 2 } else { 0 },
            head,
            labels: labels.iter().map(|s| s.to_string()).collect(),
            max_seq_length: None,
            score_scale: None,
            score_input: ScoreInput::default(),
            head_pooling: HeadPooling::Cls,
            dropout: ConfigDropout::default(),
            options: match arch {
                // DeBERTa-v3's shape: relative positions only, 8 buckets over 32 distances.
                Arch::DebertaV2 => ArchOptions::DebertaV2(Deberta {
                    relative: Some(Relative {
                        buckets: 8,
                        max_relative_positions: 32,
                        c2p: true,
                        p2c: true,
                        norm: true,
                    }),
                    absolute_positions: false,
                    pooler_activation: Activation::Gelu,
                }),
                // Every other layer local, with a window of 8 tokens each side.
                Arch::ModernBert => ArchOptions::ModernBert(ModernBert {
                    local_layers: (0..layers).map(|i| i % 2 == 1).collect(),
                    local_attention: 16,
                    global_theta: 160_000.0,
                    local_theta: 10_000.0,
                    norm_bias: false,
                    attention_bias: false,
                    mlp_bias: false,
                    classifier_bias: false,
                    classifier_activation: Activation::Gelu,
                }),
                _ => ArchOptions::None,
            },
        }
    }

    /// DeBERTa-v2's options, when this is a DeBERTa-v2 model.
    pub fn deberta(&self) -> Option<&Deberta> {
        match &self.options {
            ArchOptions::DebertaV2(d) => Some(d),
            _ => None,
        }
    }

    /// DeBERTa-v2's relative attention, when the model has it.
    pub fn relative(&self) -> Option<&Relative> {
        self.deberta().and_then(|d| d.relative.as_ref())
    }

    /// ModernBERT's options, when this is a ModernBERT model.
    pub fn modernbert(&self) -> Option<&ModernBert> {
        match &self.options {
            ArchOptions::ModernBert(m) => Some(m),
            _ => None,
        }
    }

    /// Whether the embeddings add a table of absolute positions (BERT, RoBERTa,
    /// DistilBERT; DeBERTa-v2 when `position_biased_input`; never ModernBERT).
    pub fn absolute_positions(&self) -> bool {
        match &self.options {
            ArchOptions::None => true,
            ArchOptions::DebertaV2(d) => d.absolute_positions,
            ArchOptions::ModernBert(_) => false,
        }
    }

    /// Whether the layers are pre-norm with a residual sum (ModernBERT) rather than
    /// post-norm (BERT's `LayerNorm(x + branch)`).
    pub fn pre_norm(&self) -> bool {
        self.arch == Arch::ModernBert
    }

    /// Whether the layers' linear maps carry biases (ModernBERT's flags; everyone else's do).
    pub fn linear_bias(&self) -> bool {
        self.modernbert().is_none_or(|m| m.attention_bias)
    }

    /// Whether the feed-forward maps carry biases.
    pub fn mlp_bias(&self) -> bool {
        self.modernbert().is_none_or(|m| m.mlp_bias)
    }

    /// Whether the layer norms carry biases.
    pub fn norm_bias(&self) -> bool {
        self.modernbert().is_none_or(|m| m.norm_bias)
    }

    /// The feed-forward's first map's outputs: twice the inner size for ModernBERT's GeGLU
    /// (the activated half times the gate half), the inner size otherwise.
    pub fn ffn_in_size(&self) -> usize {
        if self.arch == Arch::ModernBert {
            2 * self.intermediate_size
        } else {
            self.intermediate_size
        }
    }

    /// Parse a `config.json`. `file` names it in error messages. Every value is checked
    /// against its meaning before anything is allocated: each size lies in its range
    /// ([`SizeRange`]), `layer_norm_eps` is a positive number no larger than
    /// [`MAX_LAYER_NORM_EPS`], `pad_token_id` is an id of the vocabulary, the label map is
    /// unambiguous; a value of the wrong type is refused, never replaced by a default
    /// (only an absent value takes Hugging Face's default). Keys are read with the
    /// project's JSON reader: a key given twice is refused (serde_json keeps the last one
    /// silently); a UTF-8 byte-order mark, as some Windows editors write, is skipped.
    pub fn from_json(file: &str, text: &str) -> Result<Self> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let tree: Json = serde_json::from_str(text)
            .map_err(|e| Error::input(file, e.line(), "config", format!("not valid JSON: {e}")))?;
        let Json::Object(entries) = tree else {
            return Err(Error::in_file(file, format!("expected a JSON object, found {}", tree.kind())));
        };
        let v = Fields::new(file, &entries, "")?;
        let model_type = v.string("model_type")?.unwrap_or("");
        let architectures: Vec<&str> = match v.get("architectures") {
            None => Vec::new(),
            Some(Json::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, a)| match a {
                    Json::String(s) => Ok(s.as_str()),
                    other => Err(
                        v.error(&format!("architectures[{i}]"), format!("expected a string, found {}", other.kind()))
                    ),
                })
                .collect::<Result<_>>()?,
            Some(other) => {
                return Err(v.error("architectures", format!("expected an array of names, found {}", other.kind())))
            }
        };
        let first_arch = architectures.first().copied().unwrap_or("");
        let arch = match model_type {
            "bert" => Arch::Bert,
            "roberta" | "xlm-roberta" | "camembert" => Arch::Roberta,
            "distilbert" => Arch::DistilBert,
            "deberta-v2" => Arch::DebertaV2,
            "modernbert" => Arch::ModernBert,
            "" if first_arch.starts_with("Bert") => Arch::Bert,
            "" if first_arch.starts_with("Roberta") || first_arch.starts_with("XLMRoberta") => Arch::Roberta,
            "" if first_arch.starts_with("DistilBert") => Arch::DistilBert,
            "" if first_arch.starts_with("DebertaV2") => Arch::DebertaV2,
            "" if first_arch.starts_with("ModernBert") => Arch::ModernBert,
            other => {
                return Err(Error::in_file(
                    file,
                    format!(
                        "unsupported model_type `{other}` (architectures {architectures:?}): \
                         medrank runs BERT/MiniLM, RoBERTa/XLM-R, DistilBERT, DeBERTa-v2/v3 and ModernBERT encoders"
                    ),
                ))
            }
        };
        let distil = arch == Arch::DistilBert;
        let modern = arch == Arch::ModernBert;
        let key = |bert: &'static str, distilbert: &'static str| if distil { distilbert } else { bert };
        let hidden_size = v.size(key("hidden_size", "dim"), SizeRange::HIDDEN, None)?;
        let num_layers = v.size(key("num_hidden_layers", "n_layers"), SizeRange::LAYERS, None)?;
        let heads_key = key("num_attention_heads", "n_heads");
        let num_heads = v.size(heads_key, SizeRange::HIDDEN, None)?;
        if hidden_size % num_heads != 0 {
            return Err(v.error(
                heads_key,
                format!("hidden size {hidden_size} is not divisible by {num_heads} attention heads"),
            ));
        }
        let intermediate_size = v.size(key("intermediate_size", "hidden_dim"), SizeRange::INTERMEDIATE, None)?;
        let vocab_size = v.size("vocab_size", SizeRange::VOCAB, None)?;
        let default_positions = if modern { 8192 } else { 512 };
        let max_position_embeddings =
            v.size("max_position_embeddings", SizeRange::POSITIONS, Some(default_positions))?;
        let type_vocab_size = match arch {
            Arch::DistilBert | Arch::ModernBert => 0,
            // DeBERTa-v2 reads no table when it says 0 (DeBERTa-v3 does).
            Arch::DebertaV2 => v.size("type_vocab_size", SizeRange { min: 0, ..SizeRange::TYPE_VOCAB }, Some(0))?,
            _ => v.size("type_vocab_size", SizeRange::TYPE_VOCAB, Some(2))?,
        };
        let default_pad = match arch {
            Arch::Roberta => 1,
            // ModernBERT's released tokenizer pads with id 50283.
            Arch::ModernBert => 50283.min(vocab_size - 1),
            _ => 0,
        };
        let pad_range = SizeRange { min: 0, max: vocab_size - 1, what: "an id of the vocabulary (below vocab_size)" };
        let pad_token_id = v.size("pad_token_id", pad_range, Some(default_pad))?;
        // RoBERTa counts positions from `padding_idx + 1`: at least one must remain.
        let position_offset = if arch == Arch::Roberta { pad_token_id + 1 } else { 0 };
        if position_offset >= max_position_embeddings {
            return Err(v.error(
                "pad_token_id",
                format!(
                    "RoBERTa counts positions from pad_token_id + 1 = {position_offset}, which leaves none of the \
                     {max_position_embeddings} position embeddings (max_position_embeddings) for a token"
                ),
            ));
        }
        let eps_key = if modern { "norm_eps" } else { "layer_norm_eps" };
        let layer_norm_eps = if distil {
            1e-12 // fixed in HF's DistilBERT code, not in its config
        } else {
            let default_eps = match arch {
                Arch::DebertaV2 => 1e-7,
                Arch::ModernBert => 1e-5,
                _ => 1e-12,
            };
            match v.number(eps_key)? {
                None => default_eps,
                Some(eps) if eps > 0.0 && eps <= MAX_LAYER_NORM_EPS => eps,
                Some(eps) => {
                    return Err(v.error(
                        eps_key,
                        format!(
                            "expected a number above 0 and at most {MAX_LAYER_NORM_EPS}, found {eps}: layer norm \
                             divides by sqrt(variance + eps), so eps <= 0 makes NaN of a constant row and a huge \
                             eps erases every difference"
                        ),
                    ))
                }
            }
        };
        let act_key = if modern { "hidden_activation" } else { key("hidden_act", "activation") };
        let activation = match v.string(act_key)?.unwrap_or("gelu") {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            other => return Err(v.error(act_key, format!("unsupported activation `{other}` (gelu, gelu_new, relu)"))),
        };
        let head = if first_arch.ends_with("ForSequenceClassification") {
            HeadKind::SequenceClassification
        } else if first_arch.ends_with("ForMultipleChoice") {
            HeadKind::MultipleChoice
        } else {
            HeadKind::None
        };
        let labels = label_map(&v)?;
        let score_scale = score_scale(&v, head, &labels)?;
        let score_input = score_input(&v, score_scale.is_some())?;
        let head_pooling = head_pooling(&v, arch)?;
        let positions = max_position_embeddings - position_offset;
        let limit_range = SizeRange { min: 2, max: positions.max(2), what: "a whole number of tokens" };
        let max_seq_length = match v.get(MAX_SEQ_LENGTH_KEY) {
            None => None,
            Some(_) => Some(v.size(MAX_SEQ_LENGTH_KEY, limit_range, None)?),
        };
        let probability = |key: &str| -> Result<Option<f64>> {
            match v.number(key)? {
                Some(p) if !(0.0..=1.0).contains(&p) => {
                    Err(v.error(key, format!("expected a probability from 0 to 1, found {p}")))
                }
                p => Ok(p),
            }
        };
        let dropout = ConfigDropout {
            hidden: probability(key("hidden_dropout_prob", "dropout"))?,
            attention: probability(key("attention_probs_dropout_prob", "attention_dropout"))?,
        };
        let options = match arch {
            Arch::DebertaV2 => {
                ArchOptions::DebertaV2(family::deberta(&v, hidden_size, num_heads, max_position_embeddings)?)
            }
            Arch::ModernBert => ArchOptions::ModernBert(family::modernbert(&v, num_layers)?),
            _ => ArchOptions::None,
        };
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
            labels,
            max_seq_length,
            score_scale,
            score_input,
            head_pooling,
            dropout,
            options,
        })
    }

    /// The longest input a run of this model takes, in tokens (special tokens included):
    /// the position table's limit, or the limit the model was trained with when its
    /// config records one ([`EncoderConfig::max_seq_length`]).
    pub fn input_limit(&self) -> usize {
        self.max_seq_length.map_or(self.max_tokens(), |n| n.min(self.max_tokens()))
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
            Arch::DebertaV2 => "DebertaV2",
            Arch::ModernBert => "ModernBert",
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
            let mt = match self.arch {
                Arch::Bert => "bert",
                Arch::DebertaV2 => "deberta-v2",
                Arch::ModernBert => "modernbert",
                _ => "roberta",
            };
            let modern = self.arch == Arch::ModernBert;
            o.insert("model_type".into(), mt.into());
            o.insert("hidden_size".into(), self.hidden_size.into());
            o.insert("num_hidden_layers".into(), self.num_layers.into());
            o.insert("num_attention_heads".into(), self.num_heads.into());
            o.insert("intermediate_size".into(), self.intermediate_size.into());
            o.insert(if modern { "hidden_activation" } else { "hidden_act" }.into(), act.into());
            if !modern {
                o.insert("type_vocab_size".into(), self.type_vocab_size.into());
            }
            o.insert(if modern { "norm_eps" } else { "layer_norm_eps" }.into(), self.layer_norm_eps.into());
            family::write_keys(&self.options, o);
            if modern {
                o.insert("classifier_pooling".into(), self.head_pooling.name().into());
            } else if self.head_pooling != HeadPooling::Cls {
                o.insert(HEAD_POOLING_KEY.into(), self.head_pooling.name().into());
            }
        }
        if !self.labels.is_empty() {
            o.insert("id2label".into(), Value::Object(id2label));
        }
        if let Some(n) = self.max_seq_length {
            o.insert(MAX_SEQ_LENGTH_KEY.into(), n.into());
        }
        if let Some(scale) = &self.score_scale {
            // Hugging Face's name for a regression head: transformers then trains and reads
            // it with mean squared error over `num_labels` outputs.
            o.insert("problem_type".into(), "regression".into());
            o.insert("num_labels".into(), self.labels.len().into());
            let by_label: serde_json::Map<String, Value> = self
                .labels
                .iter()
                .enumerate()
                .map(|(j, l)| (l.clone(), serde_json::json!({"mean": scale.mean[j], "std": scale.std[j]})))
                .collect();
            o.insert(SCORE_SCALE_KEY.into(), Value::Object(by_label));
            o.insert(SCORE_INPUT_KEY.into(), self.score_input.name().into());
        }
        let distil = self.arch == Arch::DistilBert;
        for (bert, distilbert, p) in [
            ("hidden_dropout_prob", "dropout", self.dropout.hidden),
            ("attention_probs_dropout_prob", "attention_dropout", self.dropout.attention),
        ] {
            if let Some(p) = p {
                o.insert(if distil { distilbert } else { bert }.into(), p.into());
            }
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
        assert_eq!(c.dropout, ConfigDropout::default(), "absent: the trainer's fallback decides");
        // The shipped file's dropout fields, read (and written back) for training.
        let with = text.replace(
            "\"vocab_size\":30522",
            "\"vocab_size\":30522,\"hidden_dropout_prob\":0.1,\"attention_probs_dropout_prob\":0.05",
        );
        let c = EncoderConfig::from_json("config.json", &with).unwrap();
        assert_eq!(c.dropout, ConfigDropout { hidden: Some(0.1), attention: Some(0.05) });
        assert_eq!(EncoderConfig::from_json("config.json", &c.to_json()).unwrap().dropout, c.dropout);
        let bad = text.replace("\"vocab_size\":30522", "\"vocab_size\":30522,\"hidden_dropout_prob\":1.5");
        let e = EncoderConfig::from_json("config.json", &bad).unwrap_err().to_string();
        assert!(
            e.contains("hidden_dropout_prob") && e.contains("expected a probability from 0 to 1, found 1.5"),
            "{e}"
        );
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

    /// A small valid BERT config with `key` set to the JSON `value` (or removed).
    fn with(key: &str, value: Option<&str>) -> String {
        let mut fields = vec![
            ("architectures", r#"["BertForSequenceClassification"]"#.to_string()),
            ("model_type", r#""bert""#.to_string()),
            ("hidden_size", "32".to_string()),
            ("num_hidden_layers", "2".to_string()),
            ("num_attention_heads", "4".to_string()),
            ("intermediate_size", "64".to_string()),
            ("vocab_size", "100".to_string()),
            ("max_position_embeddings", "64".to_string()),
            ("layer_norm_eps", "1e-12".to_string()),
            ("id2label", r#"{"0": "contradiction", "1": "neutral", "2": "entailment"}"#.to_string()),
        ];
        fields.retain(|(k, _)| *k != key);
        if let Some(v) = value {
            fields.push((key, v.to_string()));
        }
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
        format!("{{{}}}", body.join(", "))
    }

    #[test]
    fn a_score_models_scale_is_written_read_back_and_checked() {
        let mut c = EncoderConfig::tiny(Arch::Bert, 1, HeadKind::SequenceClassification, &["overall", "recall"]);
        c.score_scale = Some(ScoreScale { mean: vec![46.5, 3.0], std: vec![35.25, 0.5] });
        c.score_input = ScoreInput::Candidate;
        let text = c.to_json();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((v["problem_type"].as_str(), v["num_labels"].as_u64()), (Some("regression"), Some(2)));
        assert_eq!(v[SCORE_SCALE_KEY]["recall"], serde_json::json!({"mean": 3.0, "std": 0.5}));
        let back = EncoderConfig::from_json("m/config.json", &text).unwrap();
        assert_eq!(back, c);
        assert_eq!(c.score_scale.as_ref().unwrap().score(0, -1.0), 46.5 - 35.25);
        // A regression model trained elsewhere, without the scale: outputs read as scores.
        let mut plain = v.clone();
        plain.as_object_mut().unwrap().remove(SCORE_SCALE_KEY);
        let read = EncoderConfig::from_json("m/config.json", &plain.to_string()).unwrap();
        assert_eq!(read.score_scale, Some(ScoreScale::identity(2)));
        assert_eq!(v[SCORE_INPUT_KEY], "candidate");
        // A score model from before the choice: it reads the question and the first reference.
        let mut older = v.clone();
        older.as_object_mut().unwrap().remove(SCORE_INPUT_KEY);
        let read = EncoderConfig::from_json("m/config.json", &older.to_string()).unwrap();
        assert_eq!(read.score_input, ScoreInput::WithReference);
        let refused = |edit: &dyn Fn(&mut Value)| {
            let mut bad = v.clone();
            edit(&mut bad);
            EncoderConfig::from_json("m/config.json", &bad.to_string()).unwrap_err().to_string()
        };
        assert_eq!(
            refused(&|b| b[SCORE_SCALE_KEY]["recall"]["std"] = 0.0.into()),
            "m/config.json: field `medrank_score_scale.recall.std`: expected a finite number above 0"
        );
        assert_eq!(
            refused(&|b| {
                b[SCORE_SCALE_KEY].as_object_mut().unwrap().remove("recall");
            }),
            "m/config.json: field `medrank_score_scale.recall`: missing, or not an object {\"mean\", \"std\"}"
        );
        assert!(refused(&|b| b[SCORE_SCALE_KEY]["fluency"] = serde_json::json!({"mean": 1, "std": 1}))
            .contains("`fluency` is not a label of id2label (overall, recall)"));
        assert!(refused(&|b| b["problem_type"] = "single_label_classification".into())
            .contains("only a regression model (problem_type \"regression\") has a score scale"));
        assert!(
            refused(&|b| b["problem_type"] = "ordinal".into()).contains("field `problem_type`: `ordinal`: expected")
        );
        assert!(refused(&|b| b["architectures"] = serde_json::json!(["BertModel"]))
            .contains("a regression model is a *ForSequenceClassification model"));
        assert_eq!(
            refused(&|b| b[SCORE_INPUT_KEY] = "answer".into()),
            "m/config.json: field `medrank_score_input`: `answer`: expected candidate, candidate+question, \
             candidate+question+reference"
        );
    }

    fn refused(key: &str, value: &str) -> String {
        EncoderConfig::from_json("m/config.json", &with(key, Some(value))).unwrap_err().to_string()
    }

    /// A mean-pooled head: BERT's in medrank's key (written only when it is not the first
    /// token, so every other folder is written as before), ModernBERT's in its own
    /// `classifier_pooling`; each read back, and a wrong name or key refused.
    #[test]
    fn a_heads_pooling_is_written_read_back_and_checked() {
        let mut c = EncoderConfig::tiny(Arch::Bert, 1, HeadKind::SequenceClassification, &["a", "b"]);
        let v: Value = serde_json::from_str(&c.to_json()).unwrap();
        assert!(v.get(HEAD_POOLING_KEY).is_none(), "a first-token head writes no key: {v}");
        c.head_pooling = HeadPooling::Mean;
        let text = c.to_json();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v[HEAD_POOLING_KEY], "mean");
        assert_eq!(EncoderConfig::from_json("m/config.json", &text).unwrap().head_pooling, HeadPooling::Mean);
        assert_eq!(
            refused(HEAD_POOLING_KEY, "\"max\""),
            "m/config.json: field `medrank_head_pooling`: expected `cls` or `mean`, found `max`"
        );
        let mut m = EncoderConfig::tiny(Arch::ModernBert, 2, HeadKind::SequenceClassification, &["a", "b"]);
        m.head_pooling = HeadPooling::Mean;
        let text = m.to_json();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((v["classifier_pooling"].as_str(), v.get(HEAD_POOLING_KEY)), (Some("mean"), None));
        assert_eq!(EncoderConfig::from_json("m/config.json", &text).unwrap().head_pooling, HeadPooling::Mean);
        let mut both = v.clone();
        both[HEAD_POOLING_KEY] = "mean".into();
        let e = EncoderConfig::from_json("m/config.json", &both.to_string()).unwrap_err().to_string();
        assert!(e.contains("a ModernBERT config says its head's pooling with `classifier_pooling`"), "{e}");
    }

    #[test]
    fn every_size_is_bounded_and_a_number_where_a_number_belongs() {
        assert!(EncoderConfig::from_json("m/config.json", &with("", None)).is_ok());
        // num_hidden_layers 1e9 aborted the loader allocating 128 GB; u64::MAX overflowed a
        // capacity. A float, a string, a negative number or 0 is no size either.
        for (key, value, expected) in [
            ("num_hidden_layers", "1e9", "expected a whole number from 1 to 256, found 1000000000.0"),
            (
                "num_hidden_layers",
                "18446744073709551615",
                "expected a whole number from 1 to 256, found 18446744073709551615",
            ),
            ("num_hidden_layers", "0", "expected a whole number from 1 to 256, found 0"),
            ("hidden_size", "-32", "expected a whole number from 1 to 16384, found -32"),
            ("intermediate_size", r#""64""#, "expected a whole number from 1 to 65536, found a string"),
            ("vocab_size", "1e18", "expected a whole number from 1 to 2097152, found 1e+18"),
            ("max_position_embeddings", "1000000", "expected a whole number from 1 to 65536, found 1000000"),
            ("type_vocab_size", "0", "expected a whole number from 1 to 1024, found 0"),
            ("num_attention_heads", "5", "hidden size 32 is not divisible by 5 attention heads"),
            ("hidden_act", "3", "expected a string, found a number"),
            ("hidden_act", r#""swish""#, "unsupported activation `swish` (gelu, gelu_new, relu)"),
        ] {
            assert_eq!(refused(key, value), format!("m/config.json: field `{key}`: {expected}"), "{key} {value}");
        }
    }

    #[test]
    fn values_outside_their_meaning_are_refused_not_replaced_by_a_default() {
        // layer_norm_eps -1 made NaN of every output; 1e300 erases every difference; a string
        // used to become the default 1e-12 without a word.
        for eps in ["-1", "0", "1e300"] {
            let e = refused("layer_norm_eps", eps);
            assert!(
                e.starts_with("m/config.json: field `layer_norm_eps`: expected a number above 0 and at most 0.01"),
                "{e}"
            );
        }
        assert_eq!(
            refused("layer_norm_eps", r#""1e-12""#),
            "m/config.json: field `layer_norm_eps`: expected a number, found a string"
        );
        // pad_token_id beyond u32 used to wrap (and u64::MAX + 1 panicked for RoBERTa); it
        // must be an id of the vocabulary.
        for pad in ["4294967296", "18446744073709551615", "100"] {
            assert_eq!(
                refused("pad_token_id", pad),
                format!("m/config.json: field `pad_token_id`: expected an id of the vocabulary (below vocab_size) from 0 to 99, found {pad}")
            );
        }
        let roberta = with("pad_token_id", Some("63")).replace(r#""model_type": "bert""#, r#""model_type": "roberta""#);
        let e = EncoderConfig::from_json("r.json", &roberta).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("r.json: field `pad_token_id`: RoBERTa counts positions from pad_token_id + 1 = 64"),
            "{e}"
        );
        // `null` is absent (Hugging Face writes it): the default.
        assert_eq!(EncoderConfig::from_json("m", &with("pad_token_id", Some("null"))).unwrap().pad_token_id, 0);
        // NaN is no JSON (Python's json.dump writes it): refused where it stands.
        let e = EncoderConfig::from_json("m/config.json", &with("layer_norm_eps", Some("NaN"))).unwrap_err();
        assert!(e.to_string().starts_with("m/config.json:1: field `config`: not valid JSON"), "{e}");
    }

    #[test]
    fn a_byte_order_mark_is_read_and_a_key_given_twice_is_refused() {
        let bom = format!("\u{feff}{}", with("", None));
        assert_eq!(EncoderConfig::from_json("m", &bom).unwrap().hidden_size, 32);
        // serde_json kept the last hidden_size silently.
        let twice = with("", None).replace(r#""hidden_size": 32"#, r#""hidden_size": 32, "hidden_size": 64"#);
        assert_eq!(
            EncoderConfig::from_json("m/config.json", &twice).unwrap_err().to_string(),
            "m/config.json: field `hidden_size`: duplicate key `hidden_size`: which value is meant is not known"
        );
    }

    #[test]
    fn label_maps_that_are_ambiguous_or_contradict_each_other_are_refused() {
        let labels = |id2label: &str| refused("id2label", id2label);
        assert_eq!(
            labels(r#"["contradiction", "neutral", "entailment"]"#),
            r#"m/config.json: field `id2label`: expected an object of label names by id ({"0": "entailment", ...}), found an array"#
        );
        assert_eq!(
            labels(r#"{"0": "entailment", "1": "Entailment", "2": "contradiction"}"#),
            "m/config.json: field `id2label`: label `Entailment` names both class 0 and class 1: which class it means is not known"
        );
        assert!(labels(r#"{"0": "met", "1": "met", "2": "not_met"}"#)
            .contains("label `met` names both class 0 and class 1"));
        assert_eq!(
            labels(r#"{"0": "met", "1": "not_met", "2": "entailment"}"#),
            "m/config.json: field `id2label`: the labels name both a criterion grader's class (`met`) and an NLI class (`entailment`): which class means met is not known"
        );
        assert_eq!(
            labels(r#"{"0": "a", "2": "b"}"#),
            "m/config.json: field `id2label`: label ids must be 0..1 without gaps; id 1 is missing"
        );
        assert_eq!(
            labels(r#"{"0": "a", "0": "b"}"#),
            "m/config.json: field `id2label.0`: duplicate key `0`: which value is meant is not known"
        );
        assert_eq!(labels(r#"{"0": 1}"#), "m/config.json: field `id2label.0`: expected a label name, found a number");
        // label2id must be id2label read the other way.
        let both = |label2id: &str| {
            EncoderConfig::from_json("m/config.json", &with("label2id", Some(label2id))).map_err(|e| e.to_string())
        };
        assert!(both(r#"{"contradiction": 0, "neutral": 1, "entailment": 2}"#).is_ok());
        assert!(both(r#"{"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}"#).is_ok());
        assert_eq!(
            both(r#"{"contradiction": 2, "neutral": 1, "entailment": 0}"#).unwrap_err(),
            "m/config.json: field `label2id.contradiction`: says id 2 for label `contradiction`, but id2label gives it id 0: the two maps contradict each other"
        );
        assert_eq!(
            both(r#"{"contradiction": 0, "neutral": 1}"#).unwrap_err(),
            "m/config.json: field `label2id`: has 2 labels, id2label 3: the two maps contradict each other"
        );
    }

    #[test]
    fn the_limit_a_model_was_trained_with_is_read_and_written() {
        let c = EncoderConfig::from_json("m", &with("max_seq_length", Some("40"))).unwrap();
        assert_eq!((c.max_seq_length, c.input_limit(), c.max_tokens()), (Some(40), 40, 64));
        assert_eq!(EncoderConfig::from_json("m", &c.to_json()).unwrap(), c);
        assert!(EncoderConfig::from_json("m", &with("max_seq_length", Some("65"))).is_err());
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
