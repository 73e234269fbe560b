//! The facts of the DeBERTa-v2/v3 and ModernBERT families beyond the sizes every encoder
//! shares: read from `config.json` (each value checked against its meaning, as the shared
//! ones are), written back by [`EncoderConfig::to_json`](super::EncoderConfig::to_json), and
//! the position arithmetic both families define (DeBERTa's relative-position buckets,
//! ModernBERT's rotary frequencies), computed in one place for every path.
//!
//! What these families can have but medrank does not run is refused here, naming the
//! field: DeBERTa-v2's convolution layer (`conv_kernel_size`), separate position
//! projections (`share_att_key: false`), an embedding size other than the hidden size;
//! ModernBERT's rotary scaling (a `rope_type` other than `default`).

use super::{Activation, Fields, SizeRange};
use crate::data::json::Json;
use crate::error::Result;
use serde::Serialize;
use serde_json::Value;

/// What the family adds to the shared [`super::EncoderConfig`] sizes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArchOptions {
    /// BERT, RoBERTa, DistilBERT: nothing more.
    None,
    DebertaV2(Deberta),
    ModernBert(ModernBert),
}

/// DeBERTa-v2/v3 (`model_type` `deberta-v2`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deberta {
    /// Disentangled attention (`relative_attention`); `None` when the config turns it off.
    pub relative: Option<Relative>,
    /// Absolute position embeddings added to the word embeddings (`position_biased_input`;
    /// false in DeBERTa-v3, whose positions are relative only).
    pub absolute_positions: bool,
    /// The activation of the classification heads' pooler (`pooler_hidden_act`).
    pub pooler_activation: Activation,
}

/// DeBERTa's relative positions: `rel_embeddings` has `2 * span` rows; the attention score
/// of query i and key j adds `q_i . pos_k[r] + k_j . pos_q[r]` (content to position and
/// position to content, each when `pos_att_type` names it) with `r` the bucket of `i - j`
/// ([`Relative::index`]), all divided by `sqrt(head_dim * (1 + c2p + p2c))`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Relative {
    /// `position_buckets` (0: plain distances up to `max_relative_positions`).
    pub buckets: usize,
    /// `max_relative_positions` as HF resolves it (`max_position_embeddings` when below 1).
    pub max_relative_positions: usize,
    /// `pos_att_type` has `c2p` / `p2c`.
    pub c2p: bool,
    pub p2c: bool,
    /// `norm_rel_ebd` has `layer_norm`: the table is layer-normed (the encoder's
    /// `LayerNorm`) before every use.
    pub norm: bool,
}

impl Relative {
    /// Half the rows of the relative-position table (HF's `pos_ebd_size`).
    pub fn span(&self) -> usize {
        if self.buckets > 0 {
            self.buckets
        } else {
            self.max_relative_positions
        }
    }

    /// The divisor's factor: 1 plus one for each of c2p and p2c.
    pub fn scale_factor(&self) -> usize {
        1 + usize::from(self.c2p) + usize::from(self.p2c)
    }

    /// The row of the position table that query i and key j read, for `delta = i - j`:
    /// HF's `build_relative_position` (`make_log_bucket_position` with buckets) then
    /// `clamp(bucket + span, 0, 2 span - 1)`. The bucket is odd in `delta`, so the
    /// position-to-content term, which HF gathers at `-bucket(j - i)`, reads the same row.
    /// The logarithm is taken in f32 as torch takes it (`torch.log` of a float32 tensor),
    /// so the rounding that `ceil` sees is torch's.
    pub fn index(&self, delta: i64) -> usize {
        let span = self.span() as i64;
        let bucket = if self.buckets > 0 && self.max_relative_positions > 0 {
            log_bucket(delta, self.buckets as i64, self.max_relative_positions as i64)
        } else {
            delta
        };
        (bucket + span).clamp(0, 2 * span - 1) as usize
    }

    /// [`Relative::index`] of every `delta` from `-(len - 1)` to `len - 1`, at
    /// `delta + len - 1`: the table the CPU and GPU paths read.
    pub fn index_table(&self, len: usize) -> Vec<u32> {
        let len = len.max(1) as i64;
        (-(len - 1)..len).map(|d| self.index(d) as u32).collect()
    }
}

/// HF's `make_log_bucket_position` for one distance: distances below `bucket_size / 2`
/// stay, longer ones are binned logarithmically up to `max_position`.
fn log_bucket(delta: i64, bucket_size: i64, max_position: i64) -> i64 {
    let mid = bucket_size / 2;
    let abs = if delta < mid && delta > -mid { mid - 1 } else { delta.abs() };
    if abs <= mid {
        return delta;
    }
    // torch: ceil(log(abs / mid) / log(tensor((max_position - 1) / mid)) * (mid - 1)) + mid, in f32.
    let ratio = (abs as f32 / mid as f32).ln() / (((max_position - 1) as f64 / mid as f64) as f32).ln();
    let log_pos = (ratio * (mid - 1) as f32).ceil() + mid as f32;
    log_pos as i64 * delta.signum()
}

/// How a classification head reads the last layer ([`super::EncoderConfig::head_pooling`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadPooling {
    /// The first token's state.
    Cls,
    /// The mean of the real tokens' states.
    Mean,
}

impl HeadPooling {
    pub const NAMES: [&'static str; 2] = ["cls", "mean"];

    /// The name in `config.json` and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            HeadPooling::Cls => Self::NAMES[0],
            HeadPooling::Mean => Self::NAMES[1],
        }
    }

    pub fn parse(name: &str) -> Option<HeadPooling> {
        [HeadPooling::Cls, HeadPooling::Mean].into_iter().find(|p| p.name() == name)
    }
}

/// ModernBERT (`model_type` `modernbert`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModernBert {
    /// Per layer: sliding-window attention (`sliding_attention`) or global.
    pub local_layers: Vec<bool>,
    /// `local_attention`: a local layer's token sees the keys at most `local_attention / 2`
    /// positions away.
    pub local_attention: usize,
    /// Rotary base of the global and of the local layers.
    pub global_theta: f64,
    pub local_theta: f64,
    /// Which linear layers and norms carry biases (none in the released checkpoints).
    pub norm_bias: bool,
    pub attention_bias: bool,
    pub mlp_bias: bool,
    pub classifier_bias: bool,
    pub classifier_activation: Activation,
}

impl ModernBert {
    /// How far a local layer looks on each side.
    pub fn half_window(&self) -> usize {
        self.local_attention / 2
    }

    /// Layer `layer`'s window on each side, `None` for a global layer.
    pub fn window(&self, layer: usize) -> Option<usize> {
        self.local_layers.get(layer).copied().unwrap_or(false).then(|| self.half_window())
    }

    /// Layer `layer`'s rotary base.
    pub fn theta(&self, layer: usize) -> f64 {
        if self.window(layer).is_some() {
            self.local_theta
        } else {
            self.global_theta
        }
    }
}

/// Rotary embeddings of heads of `head_dim` values with base `theta`: `(cos, sin)`, each
/// `[positions, head_dim / 2]` (HF concatenates the half with itself: value `c` and
/// `c + head_dim / 2` of a head turn by the same angle). As transformers computes them, in
/// f32: `inv_freq = 1 / theta ^ (2c / head_dim)`, angle `= position * inv_freq`.
pub fn rotary_tables(theta: f64, head_dim: usize, positions: usize) -> (Vec<f32>, Vec<f32>) {
    let half = head_dim / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|c| {
            // The power in f64 rounded to f32, then the f32 reciprocal: bit for bit torch's
            // `1.0 / (theta ** (arange(0, d, 2).float() / d))` for the bases and head sizes
            // checked (10,000 and 160,000; 16, 32, 64), where an f32 `powf` differs in the
            // last bit for some, which an angle of 8,000 positions magnifies.
            let exponent = (2 * c) as f32 / head_dim as f32;
            1.0 / theta.powf(exponent as f64) as f32
        })
        .collect();
    let mut cos = Vec::with_capacity(positions * half);
    let mut sin = Vec::with_capacity(positions * half);
    for p in 0..positions {
        for &f in &inv_freq {
            let angle = p as f32 * f;
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    (cos, sin)
}

/// An activation named by a head's config key (`pooler_hidden_act`, `classifier_activation`).
fn head_activation(v: &Fields, key: &str) -> Result<Activation> {
    match v.string(key)?.unwrap_or("gelu") {
        "gelu" => Ok(Activation::Gelu),
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Activation::GeluTanh),
        "relu" => Ok(Activation::Relu),
        other => Err(v.error(key, format!("unsupported activation `{other}` (gelu, gelu_new, relu)"))),
    }
}

/// A number that must be positive and finite (a rotary base).
fn positive(v: &Fields, key: &str, default: f64) -> Result<f64> {
    match v.number(key)? {
        None => Ok(default),
        Some(x) if x.is_finite() && x > 1.0 => Ok(x),
        Some(x) => Err(v.error(key, format!("expected a rotary base above 1, found {x}"))),
    }
}

/// DeBERTa-v2's options, from a config whose shared sizes are already read.
pub(super) fn deberta(v: &Fields, hidden_size: usize, num_heads: usize, max_positions: usize) -> Result<Deberta> {
    let refuse = |key: &str, why: String| Err(v.error(key, why));
    if v.size("conv_kernel_size", SizeRange { min: 0, max: 65_536, what: "a whole number" }, Some(0))? > 0 {
        return refuse(
            "conv_kernel_size",
            "DeBERTa-v2's convolution layer after the first layer (conv_kernel_size above 0, as in \
             deberta-v2-xlarge) is not supported; DeBERTa-v3 models have none"
                .into(),
        );
    }
    let embedding_size = v.size("embedding_size", SizeRange::HIDDEN, Some(hidden_size))?;
    if embedding_size != hidden_size {
        return refuse(
            "embedding_size",
            format!("an embedding size ({embedding_size}) other than hidden_size ({hidden_size}) is not supported"),
        );
    }
    let head_size = v.size("attention_head_size", SizeRange::HIDDEN, Some(hidden_size / num_heads))?;
    if head_size * num_heads != hidden_size {
        return refuse(
            "attention_head_size",
            format!("heads of {head_size} values times {num_heads} heads must make hidden_size {hidden_size}"),
        );
    }
    let pooler_size = v.size("pooler_hidden_size", SizeRange::HIDDEN, Some(hidden_size))?;
    if pooler_size != hidden_size {
        return refuse(
            "pooler_hidden_size",
            format!("must equal hidden_size {hidden_size} (HF's classifier reads hidden_size values)"),
        );
    }
    let relative = if v.boolean("relative_attention", false)? {
        if !v.boolean("share_att_key", false)? {
            return refuse(
                "share_att_key",
                "DeBERTa-v2 with separate position projections (share_att_key false) is not supported; \
                 DeBERTa-v3 models share them (true)"
                    .into(),
            );
        }
        let (mut c2p, mut p2c) = (false, false);
        for kind in list_of_names(v, "pos_att_type")? {
            match kind.as_str() {
                "c2p" => c2p = true,
                "p2c" => p2c = true,
                other => return refuse("pos_att_type", format!("unsupported position attention `{other}` (c2p, p2c)")),
            }
        }
        let max_relative = match v.get("max_relative_positions") {
            None => max_positions,
            Some(Json::Number(n)) if n.as_i64().is_some_and(|x| x < 1) => max_positions,
            Some(_) => v.size("max_relative_positions", SizeRange::POSITIONS, None)?,
        };
        let buckets = match v.get("position_buckets") {
            Some(Json::Number(n)) if n.as_i64().is_some_and(|x| x < 1) => 0,
            None => 0,
            Some(_) => v.size("position_buckets", SizeRange::POSITIONS, None)?,
        };
        if buckets > 0 && (buckets < 4 || max_relative < 2) {
            return refuse(
                "position_buckets",
                format!("{buckets} buckets over {max_relative} positions leave no logarithmic range (at least 4 buckets, 2 positions)"),
            );
        }
        let parts: Vec<&str> = v.string("norm_rel_ebd")?.unwrap_or("none").split('|').map(str::trim).collect();
        if let Some(bad) = parts.iter().find(|p| !matches!(p.to_lowercase().as_str(), "none" | "layer_norm")) {
            return refuse("norm_rel_ebd", format!("unsupported `{bad}` (none, layer_norm)"));
        }
        let norm = parts.iter().any(|p| p.eq_ignore_ascii_case("layer_norm"));
        Some(Relative { buckets, max_relative_positions: max_relative, c2p, p2c, norm })
    } else {
        None
    };
    Ok(Deberta {
        relative,
        absolute_positions: v.boolean("position_biased_input", true)?,
        pooler_activation: head_activation(v, "pooler_hidden_act")?,
    })
}

/// `pos_att_type`: a list of names, or one string of names joined by `|` (older configs).
fn list_of_names(v: &Fields, key: &str) -> Result<Vec<String>> {
    match v.get(key) {
        None => Ok(Vec::new()),
        Some(Json::String(s)) => Ok(s.split('|').map(|p| p.trim().to_lowercase()).filter(|p| !p.is_empty()).collect()),
        Some(Json::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Json::String(s) => Ok(s.trim().to_lowercase()),
                other => Err(v.error(&format!("{key}[{i}]"), format!("expected a string, found {}", other.kind()))),
            })
            .collect(),
        Some(other) => Err(v.error(key, format!("expected a list of names, found {}", other.kind()))),
    }
}

/// ModernBERT's options: the layer pattern from `layer_types` (transformers 5) or
/// `global_attn_every_n_layers` (earlier configs), the rotary bases from `rope_parameters`
/// or `global_rope_theta` / `local_rope_theta`.
pub(super) fn modernbert(v: &Fields, num_layers: usize) -> Result<ModernBert> {
    let local_layers = match v.get("layer_types") {
        Some(Json::Array(items)) => {
            if items.len() != num_layers {
                return Err(v.error(
                    "layer_types",
                    format!("names {} layers, num_hidden_layers says {num_layers}", items.len()),
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Json::String(s) if s == "sliding_attention" => Ok(true),
                    Json::String(s) if s == "full_attention" => Ok(false),
                    other => Err(v.error(
                        &format!("layer_types[{i}]"),
                        format!("expected `full_attention` or `sliding_attention`, found {}", describe(other)),
                    )),
                })
                .collect::<Result<Vec<bool>>>()?
        }
        Some(other) => return Err(v.error("layer_types", format!("expected a list, found {}", other.kind()))),
        None => {
            let every = v.size("global_attn_every_n_layers", SizeRange::LAYERS, Some(3))?;
            (0..num_layers).map(|i| i % every != 0).collect()
        }
    };
    let local_attention =
        v.size("local_attention", SizeRange { min: 2, max: 65_536, what: "a whole number" }, Some(128))?;
    let (mut global_theta, mut local_theta) =
        (positive(v, "global_rope_theta", 160_000.0)?, positive(v, "local_rope_theta", 10_000.0)?);
    match v.get("rope_parameters") {
        None => {}
        Some(Json::Object(entries)) => {
            let rope = Fields::new(v.file, entries, "rope_parameters.")?;
            for (kind, theta) in [("full_attention", &mut global_theta), ("sliding_attention", &mut local_theta)] {
                match rope.get(kind) {
                    None => {}
                    Some(Json::Object(params)) => {
                        let path = format!("rope_parameters.{kind}.");
                        let p = Fields::new(v.file, params, &path)?;
                        if let Some(t) = p.string("rope_type")? {
                            if t != "default" {
                                return Err(
                                    p.error("rope_type", format!("rotary scaling `{t}` is not supported (default)"))
                                );
                            }
                        }
                        *theta = positive(&p, "rope_theta", *theta)?;
                    }
                    Some(other) => return Err(rope.error(kind, format!("expected an object, found {}", other.kind()))),
                }
            }
        }
        Some(other) => return Err(v.error("rope_parameters", format!("expected an object, found {}", other.kind()))),
    }
    Ok(ModernBert {
        local_layers,
        local_attention,
        global_theta,
        local_theta,
        norm_bias: v.boolean("norm_bias", false)?,
        attention_bias: v.boolean("attention_bias", false)?,
        mlp_bias: v.boolean("mlp_bias", false)?,
        classifier_bias: v.boolean("classifier_bias", false)?,
        classifier_activation: head_activation(v, "classifier_activation")?,
    })
}

fn describe(j: &Json) -> String {
    match j {
        Json::String(s) => format!("`{s}`"),
        other => other.kind().to_string(),
    }
}

fn activation_name(a: Activation) -> &'static str {
    match a {
        Activation::Gelu => "gelu",
        Activation::GeluTanh => "gelu_new",
        Activation::Relu => "relu",
    }
}

/// The family's keys for `config.json` (what [`deberta`] and [`modernbert`] read back).
pub(super) fn write_keys(options: &ArchOptions, o: &mut serde_json::Map<String, Value>) {
    match options {
        ArchOptions::None => {}
        ArchOptions::DebertaV2(d) => {
            o.insert("position_biased_input".into(), d.absolute_positions.into());
            o.insert("pooler_hidden_act".into(), activation_name(d.pooler_activation).into());
            o.insert("relative_attention".into(), d.relative.is_some().into());
            if let Some(r) = &d.relative {
                let kinds: Vec<Value> =
                    [(r.p2c, "p2c"), (r.c2p, "c2p")].iter().filter(|(on, _)| *on).map(|(_, k)| (*k).into()).collect();
                o.insert("pos_att_type".into(), Value::Array(kinds));
                o.insert("position_buckets".into(), r.buckets.into());
                o.insert("max_relative_positions".into(), r.max_relative_positions.into());
                o.insert("share_att_key".into(), true.into());
                o.insert("norm_rel_ebd".into(), if r.norm { "layer_norm" } else { "none" }.into());
            }
        }
        ArchOptions::ModernBert(m) => {
            let types: Vec<Value> = m
                .local_layers
                .iter()
                .map(|&local| if local { "sliding_attention" } else { "full_attention" }.into())
                .collect();
            o.insert("layer_types".into(), Value::Array(types));
            o.insert("local_attention".into(), m.local_attention.into());
            o.insert(
                "rope_parameters".into(),
                serde_json::json!({
                    "full_attention": {"rope_type": "default", "rope_theta": m.global_theta},
                    "sliding_attention": {"rope_type": "default", "rope_theta": m.local_theta},
                }),
            );
            o.insert("global_rope_theta".into(), m.global_theta.into());
            o.insert("local_rope_theta".into(), m.local_theta.into());
            o.insert("norm_bias".into(), m.norm_bias.into());
            o.insert("attention_bias".into(), m.attention_bias.into());
            o.insert("mlp_bias".into(), m.mlp_bias.into());
            o.insert("classifier_bias".into(), m.classifier_bias.into());
            o.insert("classifier_activation".into(), activation_name(m.classifier_activation).into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_buckets_match_transformers() {
        // transformers 5.24: `make_log_bucket_position(d, buckets, max_position)` for these
        // distances (DeBERTa-v3's 256 buckets over 512 positions), then clamp(x + span):
        //   make_log_bucket_position(torch.tensor([0, 1, ...]), 256, 512)
        let r = |buckets, max| Relative { buckets, max_relative_positions: max, c2p: true, p2c: true, norm: true };
        let v3 = r(256, 512);
        let expected: [(i64, i64); 14] = [
            (0, 0),
            (1, 1),
            (-1, -1),
            (127, 127),
            (128, 128),
            (129, 129),
            (130, 130),
            (200, 169),
            (300, 207),
            (-300, -207),
            (511, 255),
            (4000, 444),
            (8191, 510),
            (-8191, -510),
        ];
        for (delta, bucket) in expected {
            assert_eq!(v3.index(delta) as i64, (bucket + 256).clamp(0, 511), "delta {delta}");
        }
        // Every distance of an 8,192-token input: sum over d = -8191..8191 of index(d) and of
        // index(d) * (d + 8192), from torch the same way:
        //   idx = clamp(make_log_bucket_position(arange(-8191, 8192), b, m) + b, 0, 2b - 1)
        for ((buckets, max), (plain, weighted)) in [
            ((256, 512), (4_186_368u64, 51_427_015_802u64)),
            ((64, 128), (1_040_448, 12_784_060_946)),
            ((32, 64), (516_128, 6_341_769_836)),
        ] {
            let table = r(buckets, max).index_table(8192);
            let sum: u64 = table.iter().map(|&i| i as u64).sum();
            let weighted_sum: u64 = table.iter().enumerate().map(|(k, &i)| i as u64 * (k as u64 + 1)).sum();
            assert_eq!((sum, weighted_sum), (plain, weighted), "{buckets} buckets over {max}");
        }
    }
}
