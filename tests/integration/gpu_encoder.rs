//! The GPU encoder against the CPU encoder (candle), the reference: hidden states and
//! pooled embeddings agree within 1e-3 (max abs diff) for random-weight BERT and RoBERTa
//! configs and for the default MiniLM, on batches of variable-length sequences with
//! padding; similarity rankings come out identical. Runs on lavapipe here.
//! Without an adapter the tests say so loudly and return, unless MEDRANK_REQUIRE_GPU=1.

use medrank::gpu::{GpuContext, GpuEncoder, WeightFormat};
use medrank::model::load::{random_model, Dense, HeadWeights, LoadedModel};
use medrank::model::{embed_texts, CpuEncoder, Encoder, EncoderConfig, HiddenStates, TextModel, TokenBatch};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const TOL: f32 = 1e-3;
/// f16 weights round each weight by up to 2^-11 relative. On MiniLM the normalised
/// embeddings still stay within the issue's 1e-3 (measured 1.0e-4 on lavapipe); raw hidden
/// states (values up to ~10) move more, so they get a looser, stated bound.
const F16_TOL: f32 = 1e-3;
const F16_HIDDEN_TOL: f32 = 2e-2;
/// f16 arithmetic (`WeightFormat::F16Math`: activations rounded to f16 as they are staged,
/// each slice's products summed in f16): lavapipe gave 2.0e-4 on the embeddings (f16
/// weights alone: 1.0e-4) and 4.5e-2 on raw hidden states (7.2e-3): the embeddings stay
/// within the issue's 1e-3, the hidden states get a looser stated bound.
const F16_MATH_TOL: f32 = 1e-3;
const F16_MATH_HIDDEN_TOL: f32 = 1e-1;

use crate::common;
use common::context;

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Sequences of the given lengths with random ids (and random token types when the model
/// has two), right-padded into one batch.
fn random_batch(config: &EncoderConfig, lengths: &[usize], seed: u64) -> TokenBatch {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let seqs: Vec<(Vec<u32>, Vec<u32>)> = lengths
        .iter()
        .map(|&n| {
            let ids = (0..n).map(|_| rng.gen_range(0..config.vocab_size as u32)).collect();
            let types = (0..n).map(|_| rng.gen_range(0..config.type_vocab_size.max(1) as u32)).collect();
            (ids, types)
        })
        .collect();
    let refs: Vec<(&[u32], &[u32])> = seqs.iter().map(|(a, b)| (a.as_slice(), b.as_slice())).collect();
    TokenBatch::from_sequences(&refs, config.pad_token_id)
}

/// `random_model`'s weights (std 0.02) rescaled to std 1/sqrt(fan_in), so activations and
/// logits are of order 1 and a 1e-3 tolerance is a real test, not a consequence of tiny
/// values. Norms, embeddings and biases keep their values.
fn random_model_unit_scale(config: EncoderConfig, seed: u64) -> LoadedModel {
    fn rescale(d: &mut Dense) {
        let fan_in = d.weight.dims2().unwrap().1 as f64;
        d.weight = (&d.weight * (1.0 / (0.02 * fan_in.sqrt()))).unwrap();
    }
    let mut model = random_model(config, seed).unwrap();
    for l in &mut model.weights.layers {
        for d in [&mut l.query, &mut l.key, &mut l.value, &mut l.attn_out, &mut l.ffn_in, &mut l.ffn_out] {
            rescale(d);
        }
    }
    if let Some(p) = &mut model.weights.pooler {
        rescale(p);
    }
    // DeBERTa's relative-position table at std 1 (as the word embeddings' rows are after
    // their norm), so the relative terms move the scores by order 1.
    if let Some(r) = &mut model.weights.relative {
        r.table = (&r.table * 50.0).unwrap();
    }
    match &mut model.head {
        Some(HeadWeights::PooledLinear { classifier }) => rescale(classifier),
        Some(HeadWeights::RobertaClassifier { dense, out_proj }) => {
            rescale(dense);
            rescale(out_proj);
        }
        Some(HeadWeights::DistilClassifier { pre_classifier, classifier })
        | Some(HeadWeights::ContextPooler { dense: pre_classifier, classifier, .. })
        | Some(HeadWeights::ModernBertHead { dense: pre_classifier, classifier, .. }) => {
            rescale(pre_classifier);
            rescale(classifier);
        }
        None => {}
    }
    model
}

fn encode(encoder: &impl Encoder, batch: &TokenBatch, layer: usize) -> HiddenStates {
    pollster::block_on(encoder.encode(batch, layer)).unwrap()
}

fn tiny_config(json: &str) -> EncoderConfig {
    EncoderConfig::from_json("tiny/config.json", json).unwrap()
}

/// Random-weight models of both position conventions and all three activations.
fn tiny_configs() -> Vec<(&'static str, EncoderConfig)> {
    vec![
        (
            "bert",
            tiny_config(
                r#"{"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 3,
                    "num_attention_heads": 4, "intermediate_size": 160, "vocab_size": 500,
                    "max_position_embeddings": 160, "type_vocab_size": 2}"#,
            ),
        ),
        (
            "roberta",
            tiny_config(
                r#"{"model_type": "roberta", "hidden_size": 96, "num_hidden_layers": 2,
                    "num_attention_heads": 6, "intermediate_size": 200, "vocab_size": 700,
                    "max_position_embeddings": 150, "type_vocab_size": 1, "pad_token_id": 1,
                    "layer_norm_eps": 1e-5, "hidden_act": "gelu_new"}"#,
            ),
        ),
        (
            "bert-relu",
            tiny_config(
                r#"{"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1,
                    "num_attention_heads": 2, "intermediate_size": 64, "vocab_size": 100,
                    "max_position_embeddings": 64, "hidden_act": "relu"}"#,
            ),
        ),
    ]
}

#[test]
fn random_bert_and_roberta_match_the_cpu_encoder_at_every_layer() {
    let Some(ctx) = context() else { return };
    let mut ctx = Some(ctx);
    for (name, config) in tiny_configs() {
        let model = random_model_unit_scale(config.clone(), 7);
        let cpu = CpuEncoder::new(model.clone());
        let gpu = GpuEncoder::with_context(ctx.take().unwrap_or_else(|| GpuContext::new_blocking().unwrap()), &model)
            .unwrap();
        // Variable lengths incl. one of a single token and one beyond 128 (the attention
        // kernel's thread count), so rows are padded by very different amounts.
        let max = config.max_tokens().min(140);
        let batch = random_batch(&config, &[max, 3, 1, max / 2 + 7, max - 1], 11);
        for layer in 0..=config.num_layers {
            let (c, g) = (encode(&cpu, &batch, layer), encode(&gpu, &batch, layer));
            assert_eq!((g.batch, g.seq_len, g.hidden), (c.batch, c.seq_len, c.hidden));
            let diff = max_abs_diff(&g.data, &c.data);
            eprintln!("{name} layer {layer}: max abs diff {diff:e}");
            assert!(diff <= TOL, "{name} layer {layer}: max abs diff {diff}");
        }
    }
}

#[test]
fn classification_logits_match_the_cpu_encoder() {
    let Some(ctx) = context() else { return };
    let mut ctx = Some(ctx);
    // The three head layouts: BERT pooler + classifier, RoBERTa dense + tanh + out_proj,
    // BERT multiple choice (one logit per option row).
    let configs = [
        r#"{"model_type": "bert", "architectures": ["BertForSequenceClassification"],
            "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 64,
            "id2label": {"0": "entailment", "1": "neutral", "2": "contradiction"}}"#,
        r#"{"model_type": "roberta", "architectures": ["RobertaForSequenceClassification"],
            "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 3,
            "intermediate_size": 96, "vocab_size": 300, "max_position_embeddings": 66,
            "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5,
            "id2label": {"0": "refuted", "1": "supported"}}"#,
        r#"{"model_type": "bert", "architectures": ["BertForMultipleChoice"],
            "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 64, "vocab_size": 200, "max_position_embeddings": 64}"#,
    ];
    for json in configs {
        let config = tiny_config(json);
        let model = random_model_unit_scale(config.clone(), 9);
        let head = model.head.as_ref().expect("a head");
        let cpu = CpuEncoder::new(model.clone());
        let gpu = GpuEncoder::with_context(ctx.take().unwrap_or_else(|| GpuContext::new_blocking().unwrap()), &model)
            .unwrap();
        let batch = random_batch(&config, &[40, 9, 64, 2, 17], 13);
        let layers = config.num_layers;
        let logits = |h: &HiddenStates| {
            medrank::model::heads::logits(head, model.config.head_pooling, &model.weights, h, &batch.mask).unwrap()
        };
        let (c, g) = (logits(&encode(&cpu, &batch, layers)), logits(&encode(&gpu, &batch, layers)));
        let diff = max_abs_diff(&g.concat(), &c.concat());
        let scale = c.concat().iter().fold(0f32, |m, v| m.max(v.abs()));
        eprintln!("{:?} {:?}: logits up to {scale:.2}, max abs diff {diff:e}", config.arch, config.head);
        assert!(scale > 0.1, "logits too small to make the comparison meaningful");
        assert!(diff <= TOL, "{:?}: logits max abs diff {diff}", config.arch);
        // Same predicted label per row.
        let argmax = |rows: &Vec<Vec<f32>>| -> Vec<usize> {
            rows.iter().map(|r| (0..r.len()).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap()).collect()
        };
        assert_eq!(argmax(&g), argmax(&c));
    }
}

/// DeBERTa-v3 (relative positions only, log buckets, c2p and p2c, the table normed),
/// DeBERTa-v2 (absolute positions too, token types, clamped distances, GELU-tanh) and
/// ModernBERT (rotary, alternating global and 16-token local layers, GeGLU, final norm,
/// mean-pooling head): every layer's states and the logits of the GPU path against the CPU
/// path, which tests/integration/families.rs holds to transformers within 1e-4.
#[test]
fn deberta_and_modernbert_match_the_cpu_encoder_at_every_layer_and_in_logits() {
    let Some(ctx) = context() else { return };
    let mut ctx = Some(ctx);
    let configs = [
        (
            "deberta-v3",
            r#"{"model_type": "deberta-v2", "architectures": ["DebertaV2ForSequenceClassification"],
                "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 160,
                "relative_attention": true, "pos_att_type": ["p2c", "c2p"], "position_buckets": 16,
                "max_relative_positions": 64, "norm_rel_ebd": "layer_norm", "share_att_key": true,
                "position_biased_input": false, "type_vocab_size": 0, "layer_norm_eps": 1e-7,
                "id2label": {"0": "entailment", "1": "neutral", "2": "contradiction"}}"#,
        ),
        (
            "deberta-v2",
            r#"{"model_type": "deberta-v2", "architectures": ["DebertaV2ForMultipleChoice"],
                "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 3,
                "intermediate_size": 80, "vocab_size": 300, "max_position_embeddings": 160,
                "relative_attention": true, "pos_att_type": "c2p|p2c", "position_buckets": -1,
                "max_relative_positions": 24, "norm_rel_ebd": "none", "share_att_key": true,
                "position_biased_input": true, "type_vocab_size": 2, "hidden_act": "gelu_new",
                "layer_norm_eps": 1e-7}"#,
        ),
        (
            "modernbert",
            r#"{"model_type": "modernbert", "architectures": ["ModernBertForSequenceClassification"],
                "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
                "intermediate_size": 96, "vocab_size": 300, "max_position_embeddings": 256,
                "global_attn_every_n_layers": 3, "local_attention": 16, "pad_token_id": 0,
                "classifier_pooling": "mean", "id2label": {"0": "a", "1": "b"}}"#,
        ),
    ];
    for (name, json) in configs {
        let config = tiny_config(json);
        let model = random_model_unit_scale(config.clone(), 7);
        let head = model.head.as_ref().expect("a head");
        let cpu = CpuEncoder::new(model.clone());
        let gpu = GpuEncoder::with_context(ctx.take().unwrap_or_else(|| GpuContext::new_blocking().unwrap()), &model)
            .unwrap();
        // Lengths past the windows and buckets, one of a single token, heavy padding.
        let batch = random_batch(&config, &[140, 3, 1, 77, 139], 11);
        // The real tokens' rows: a padded query of a local layer sees no real key in its
        // window, and what each path leaves in such a row (read by nothing) differs.
        let real = |h: &HiddenStates| -> Vec<f32> {
            let w = h.hidden;
            h.data.chunks_exact(w).zip(&batch.mask).filter(|(_, &m)| m != 0).flat_map(|(row, _)| row.to_vec()).collect()
        };
        for layer in 0..=config.num_layers {
            let (c, g) = (encode(&cpu, &batch, layer), encode(&gpu, &batch, layer));
            let diff = max_abs_diff(&real(&g), &real(&c));
            eprintln!("{name} layer {layer}: max abs diff {diff:e}");
            assert!(diff <= TOL, "{name} layer {layer}: max abs diff {diff}");
        }
        let logits = |h: &HiddenStates| {
            medrank::model::heads::logits(head, model.config.head_pooling, &model.weights, h, &batch.mask).unwrap()
        };
        let layers = config.num_layers;
        let (c, g) = (logits(&encode(&cpu, &batch, layers)), logits(&encode(&gpu, &batch, layers)));
        let on_device = pollster::block_on(gpu.read_out(&batch, medrank::model::Readout::Logits)).unwrap();
        let scale = c.concat().iter().fold(0f32, |m, v| m.max(v.abs()));
        let (diff, device_diff) =
            (max_abs_diff(&g.concat(), &c.concat()), max_abs_diff(&on_device.concat(), &c.concat()));
        eprintln!("{name}: logits up to {scale:.2}, max abs diff {diff:e}, the head on the device {device_diff:e}");
        assert!(scale > 0.1, "{name}: logits too small to make the comparison meaningful");
        assert!(diff <= TOL && device_diff <= TOL, "{name}: logits max abs diff {diff}, {device_diff}");
    }
}

#[test]
fn bad_batches_are_refused_with_a_reason() {
    let Some(ctx) = context() else { return };
    let (_, config) = tiny_configs().remove(0);
    let gpu = GpuEncoder::with_context(ctx, &random_model(config.clone(), 1).unwrap()).unwrap();
    let mut batch = random_batch(&config, &[4, 2], 3);
    let err = pollster::block_on(gpu.encode(&batch, config.num_layers + 1)).unwrap_err();
    assert!(err.to_string().contains("layer 4 requested from a 3-layer encoder"), "{err}");
    batch.ids[1] = 500;
    let err = pollster::block_on(gpu.encode(&batch, 1)).unwrap_err();
    assert!(err.to_string().contains("token id 500 is outside the vocabulary of 500"), "{err}");
    let long = random_batch(&config, &[161], 3);
    let err = pollster::block_on(gpu.encode(&long, 1)).unwrap_err();
    assert!(err.to_string().contains("exceeds the model's limit of 160"), "{err}");
}

#[test]
fn minilm_embeddings_and_rankings_match_the_cpu_encoder() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
    if !dir.join("model.safetensors").exists() {
        common::skip_or_fail(&format!("{} is missing (run scripts/setup.sh model)", dir.display()));
        return;
    }
    let Some(ctx) = context() else { return };
    let model = TextModel::read_dir(&dir).unwrap();
    let gpu = GpuEncoder::with_context(ctx, &model.encoder.model).unwrap();
    let texts = [
        "A 54-year-old man presents with crushing chest pain radiating to the left arm.",
        "Acute myocardial infarction: give aspirin and arrange urgent reperfusion.",
        "The patient has a fever, productive cough and consolidation on the chest X-ray, consistent with community-acquired pneumonia treated with amoxicillin.",
        "Hypoglycaemia.",
        "Tension pneumothorax needs immediate needle decompression.",
        "Metformin is first-line therapy for type 2 diabetes unless contraindicated.",
    ];
    // Batch size 4: two batches with padding, sorted by length inside embed_texts.
    let (cpu_vecs, _) =
        pollster::block_on(embed_texts(&model.encoder, &model.tokenizer, &model.pooling, &texts, 4)).unwrap();
    let (gpu_vecs, _) = pollster::block_on(embed_texts(&gpu, &model.tokenizer, &model.pooling, &texts, 4)).unwrap();
    for (i, (c, g)) in cpu_vecs.iter().zip(&gpu_vecs).enumerate() {
        let diff = max_abs_diff(c, g);
        eprintln!("minilm text {i}: max abs diff {diff:e}");
        assert!(diff <= TOL, "text {i}: max abs diff {diff}");
    }
    // Hidden states of the last layer too (all tokens, padding included).
    let encoded: Vec<_> = texts.iter().map(|t| model.tokenizer.encode(t).unwrap()).collect();
    let batch = model.tokenizer.batch(&encoded.iter().collect::<Vec<_>>());
    let layers = model.encoder.model.config.num_layers;
    let diff = max_abs_diff(&encode(&gpu, &batch, layers).data, &encode(&model.encoder, &batch, layers).data);
    eprintln!("minilm hidden states: max abs diff {diff:e}");
    assert!(diff <= TOL, "hidden states: max abs diff {diff}");
    // Ranking the other texts by cosine similarity to the first: same order on both.
    let rank = |v: &[Vec<f32>]| {
        let mut order: Vec<usize> = (1..v.len()).collect();
        let sim = |j: usize| medrank::model::pooling::cosine(&v[0], &v[j]);
        order.sort_by(|&a, &b| sim(b).total_cmp(&sim(a)));
        order
    };
    assert_eq!(rank(&gpu_vecs), rank(&cpu_vecs));

    // f16 weights (adapters with shader-f16): a looser bound, the same ranking.
    let ctx = gpu.context();
    if !ctx.adapter.shader_f16 {
        eprintln!("\n!!!!! f16 part SKIPPED: {} has no shader-f16 !!!!!\n", ctx.adapter.name);
        return;
    }
    drop(gpu);
    let gpu16 =
        GpuEncoder::with_weight_format(GpuContext::new_blocking().unwrap(), &model.encoder.model, WeightFormat::F16)
            .unwrap();
    let (f16_vecs, _) = pollster::block_on(embed_texts(&gpu16, &model.tokenizer, &model.pooling, &texts, 4)).unwrap();
    let diff = f16_vecs.iter().zip(&cpu_vecs).map(|(a, b)| max_abs_diff(a, b)).fold(0.0, f32::max);
    eprintln!("minilm f16 weights: max abs diff {diff:e}");
    assert!(diff <= F16_TOL, "f16 weights: max abs diff {diff}");
    assert_eq!(rank(&f16_vecs), rank(&cpu_vecs));
    let diff = max_abs_diff(&encode(&gpu16, &batch, layers).data, &encode(&model.encoder, &batch, layers).data);
    eprintln!("minilm f16 weights, hidden states: max abs diff {diff:e}");
    assert!(diff <= F16_HIDDEN_TOL, "f16 weights, hidden states: max abs diff {diff}");

    // f16 arithmetic too (each slice's products summed in f16): looser, the same ranking.
    drop(gpu16);
    let math = GpuEncoder::with_weight_format(
        GpuContext::new_blocking().unwrap(),
        &model.encoder.model,
        WeightFormat::F16Math,
    )
    .unwrap();
    let (math_vecs, _) = pollster::block_on(embed_texts(&math, &model.tokenizer, &model.pooling, &texts, 4)).unwrap();
    let diff = math_vecs.iter().zip(&cpu_vecs).map(|(a, b)| max_abs_diff(a, b)).fold(0.0, f32::max);
    eprintln!("minilm f16 arithmetic: max abs diff {diff:e}");
    assert!(diff <= F16_MATH_TOL, "f16 arithmetic: max abs diff {diff}");
    assert_eq!(rank(&math_vecs), rank(&cpu_vecs));
    let diff = max_abs_diff(&encode(&math, &batch, layers).data, &encode(&model.encoder, &batch, layers).data);
    eprintln!("minilm f16 arithmetic, hidden states: max abs diff {diff:e}");
    assert!(diff <= F16_MATH_HIDDEN_TOL, "f16 arithmetic, hidden states: max abs diff {diff}");
}

#[test]
fn bench_measures_cpu_and_gpu_with_the_same_function() {
    let Some(ctx) = context() else { return };
    let (_, config) = tiny_configs().remove(0);
    let model = random_model(config, 5).unwrap();
    let device = ctx.adapter.name.clone();
    let gpu = GpuEncoder::with_context(ctx, &model).unwrap();
    let cpu = CpuEncoder::new(model);
    let mut seen = 0;
    // 200 exceeds the tiny model's 160 positions and is skipped.
    let rows =
        medrank::gpu::bench::bench_grid_blocking(&gpu, "gpu", &device, &[16, 200], &[1, 3], None, 0.0, |_| seen += 1)
            .unwrap();
    assert_eq!(seen, 2);
    assert_eq!(rows.iter().map(|r| (r.seq_len, r.batch)).collect::<Vec<_>>(), vec![(16, 1), (16, 3)]);
    let cpu_rows =
        medrank::gpu::bench::bench_grid_blocking(&cpu, "cpu", "cpu", &[16], &[3], None, 0.0, |_| {}).unwrap();
    for r in rows.iter().chain(&cpu_rows) {
        assert!(r.repeats >= 1 && r.seconds_per_pass > 0.0, "{r:?}");
        // tokens/s is sequences/s times the length of every (unpadded) sequence.
        assert!((r.tokens_per_s - r.sequences_per_s * r.seq_len as f64).abs() < 1e-6 * r.tokens_per_s);
    }
    // The CPU path reports the time of every step it ran (the page's profile table).
    let steps: Vec<(&str, f64)> = cpu_rows[0].steps.iter().map(|s| (s.step, s.seconds)).collect();
    let names: Vec<&str> = steps.iter().map(|s| s.0).collect();
    assert_eq!(
        names,
        [
            "embeddings",
            "qkv projection",
            "attention",
            "attention output",
            "add + layer norm",
            "feed-forward in",
            "activation",
            "feed-forward out"
        ]
    );
    assert!(steps.iter().all(|&(_, seconds)| seconds > 0.0), "{steps:?}");
}

#[test]
fn backend_selection_falls_back_to_the_cpu_only_when_allowed() {
    use medrank::gpu::{select_encoder, AnyEncoder, BackendChoice};
    let (_, config) = tiny_configs().remove(2);
    let model = random_model(config.clone(), 3).unwrap();
    let no_adapter = || Err(medrank::Error::model("no WebGPU/wgpu adapter: none found"));
    // No adapter: Auto runs on the CPU and says why; a forced GPU is an error.
    let (enc, report) = select_encoder(model.clone(), BackendChoice::Auto, no_adapter).unwrap();
    assert!(matches!(enc, AnyEncoder::Cpu(_)));
    assert_eq!(report.backend, "cpu");
    assert!(report.fallback_reason().unwrap().contains("no WebGPU/wgpu adapter"));
    let err = select_encoder(model.clone(), BackendChoice::Gpu, no_adapter).err().unwrap();
    assert!(err.to_string().contains("GPU backend was requested"), "{err}");
    // Forced CPU never opens the GPU.
    let (enc, report) = select_encoder(model.clone(), BackendChoice::Cpu, || panic!("opened")).unwrap();
    assert!(matches!(enc, AnyEncoder::Cpu(_)) && report.fallback_reason().is_none());
    // With an adapter: Auto takes a hardware GPU but not a software one (slower than the
    // CPU path; it says so); Gpu takes any; both backends give the same states.
    let Some(ctx) = context() else { return };
    if ctx.adapter.is_fallback {
        let (auto, report) = select_encoder(model.clone(), BackendChoice::Auto, || Ok(ctx)).unwrap();
        assert!(matches!(auto, AnyEncoder::Cpu(_)));
        assert!(report.fallback_reason().unwrap().contains("only a software adapter"));
    } else {
        let (auto, _) = select_encoder(model.clone(), BackendChoice::Auto, || Ok(ctx)).unwrap();
        assert!(matches!(auto, AnyEncoder::Gpu(_)));
    }
    let Some(ctx) = context() else { return };
    let name = ctx.adapter.to_string();
    let (gpu, report) = select_encoder(model.clone(), BackendChoice::Gpu, || Ok(ctx)).unwrap();
    assert!(matches!(gpu, AnyEncoder::Gpu(_)));
    assert_eq!((report.backend.as_str(), report.device), ("gpu", name));
    let batch = random_batch(&config, &[10, 4], 1);
    let diff = max_abs_diff(&encode(&gpu, &batch, 1).data, &encode(&enc, &batch, 1).data);
    assert!(diff <= TOL, "{diff}");
}

/// A small binding limit (as on a constrained adapter) forces both splits the encoder has:
/// the word-embedding table into several bindings, and the batch into several passes.
#[test]
fn small_binding_limit_splits_vocabulary_and_batch_without_changing_results() {
    let Some(mut ctx) = context() else { return };
    // 64 KiB: the 500 x 64 word table (125 KiB) takes 2 bindings; a token's widest
    // activation (qkv, 192 floats) allows 85 tokens a pass: 2 rows of 40 -> 3 passes of 2
    // rows for 5, the last with a row of padding alone (every pass reuses one plan).
    ctx.limits.max_storage_buffer_binding_size = 64 * 1024;
    let (_, config) = tiny_configs().remove(0);
    let model = random_model_unit_scale(EncoderConfig { max_position_embeddings: 40, ..config.clone() }, 17);
    let cpu = CpuEncoder::new(model.clone());
    let gpu = GpuEncoder::with_context(ctx, &model).unwrap();
    assert_eq!(gpu.word_embedding_bindings(), 2);
    assert_eq!(gpu.rows_per_pass(40).unwrap(), 2);
    let batch = random_batch(&model.config, &[40, 12, 33, 1, 39], 19);
    let layers = model.config.num_layers;
    let diff = max_abs_diff(&encode(&gpu, &batch, layers).data, &encode(&cpu, &batch, layers).data);
    eprintln!("split vocabulary and batch: max abs diff {diff:e}");
    assert!(diff <= TOL, "{diff}");
}

/// The encoder keeps the plan of the last batch shape (buffers, uniforms, bind groups) and
/// pads lengths to a multiple of `LENGTH_BUCKET`: a batch of another length in the same
/// bucket reuses the plan with new contents, and must give exactly what a fresh encoder
/// gives (nothing left over from the previous batch, e.g. in the embedding sum), and the
/// padding must not change the real tokens' states at all.
#[test]
fn a_kept_plan_gives_the_same_states_as_a_fresh_encoder() {
    let Some(ctx) = context() else { return };
    let (name, config) = tiny_configs().remove(0);
    let model = random_model_unit_scale(config.clone(), 5);
    let kept = GpuEncoder::with_context(ctx, &model).unwrap();
    let layers = config.num_layers;
    assert_eq!(medrank::gpu::encoder::LENGTH_BUCKET, 16);
    // 20 and 29 tokens both run as 32 (the same plan); 33 runs as 48 (a new one).
    let first = random_batch(&config, &[20, 7, 12], 1);
    let second = random_batch(&config, &[29, 29, 3], 2);
    let third = random_batch(&config, &[33, 1, 30], 3);
    for batch in [&first, &second, &third, &first] {
        let again = encode(&kept, batch, layers);
        let fresh = GpuEncoder::with_context(GpuContext::new_blocking().unwrap(), &model).unwrap();
        let once = encode(&fresh, batch, layers);
        assert_eq!(again.data, once.data, "{name}: a kept plan changed the result");
        // One row at a time runs at other padded lengths: the same states to the bit.
        for row in 0..batch.batch {
            let s = batch.seq_len;
            let single = TokenBatch {
                batch: 1,
                seq_len: s,
                ids: batch.ids[row * s..(row + 1) * s].to_vec(),
                type_ids: batch.type_ids[row * s..(row + 1) * s].to_vec(),
                mask: batch.mask[row * s..(row + 1) * s].to_vec(),
            };
            let alone = encode(&fresh, &single, layers);
            let h = config.hidden_size;
            assert_eq!(alone.data, once.data[row * s * h..(row + 1) * s * h], "{name}: row {row}");
        }
    }
}

/// A second encoder on the same device compiles no kernel again: the device keeps every
/// pipeline by its source (on SwiftShader, compiling them again took most of the browser's
/// GPU gradient check, 169 s of it against 22 s). Its states are the first encoder's.
#[test]
fn a_second_encoder_on_one_device_compiles_no_kernel_again() {
    let Some(ctx) = context() else { return };
    let (name, config) = tiny_configs().remove(0);
    let model = random_model_unit_scale(config.clone(), 5);
    assert_eq!(ctx.compiled_kernels(), 0, "a new device has compiled nothing");
    let first = GpuEncoder::with_context(ctx.clone(), &model).unwrap();
    let batch = random_batch(&config, &[20, 7, 12], 1);
    let once = encode(&first, &batch, config.num_layers);
    let compiled = ctx.compiled_kernels();
    assert!(compiled > 0);
    let second = GpuEncoder::with_context(ctx.clone(), &model).unwrap();
    assert_eq!(ctx.compiled_kernels(), compiled, "{name}: the second encoder compiled again");
    assert_eq!(encode(&second, &batch, config.num_layers).data, once.data, "{name}");
}

/// Encoders opened for jobs (`open_encoder`, as the page's worker and the CLI open them)
/// share this thread's device: a second model compiles no kernel again, and its states are
/// those of an encoder on a device of its own.
#[test]
fn encoders_opened_for_jobs_share_one_device_and_its_kernels() {
    use medrank::gpu::{open_encoder, AnyEncoder, BackendChoice};
    let Some(ctx) = context() else { return };
    let (name, config) = tiny_configs().remove(0);
    let gpu_of = |e: &AnyEncoder| match e {
        AnyEncoder::Gpu(g) => g.context().clone(),
        AnyEncoder::Cpu(_) => panic!("{name}: the GPU was asked for"),
    };
    let batch = random_batch(&config, &[20, 7, 12], 1);
    let (first, _) =
        pollster::block_on(open_encoder(random_model_unit_scale(config.clone(), 5), BackendChoice::Gpu)).unwrap();
    encode(&first, &batch, config.num_layers);
    let compiled = gpu_of(&first).compiled_kernels();
    let other = random_model_unit_scale(config.clone(), 6);
    let (second, _) = pollster::block_on(open_encoder(other.clone(), BackendChoice::Gpu)).unwrap();
    assert_eq!(gpu_of(&second).compiled_kernels(), compiled, "{name}: the second model's encoder compiled again");
    let alone = GpuEncoder::with_context(ctx, &other).unwrap();
    assert_eq!(
        encode(&second, &batch, config.num_layers).data,
        encode(&alone, &batch, config.num_layers).data,
        "{name}"
    );
}

/// The GPU profile times every dispatch of a pass on the GPU (timestamp queries) and sums
/// them by step: each step appears with as many dispatches as the pass has of it, and a
/// profiled pass leaves the encoder's results as they were. On an adapter without
/// timestamps it refuses with the reason instead of estimating.
#[test]
fn the_profile_times_every_dispatch_of_the_pass_by_step() {
    let Some(ctx) = context() else { return };
    let (name, config) = tiny_configs().remove(0);
    let model = random_model_unit_scale(config.clone(), 5);
    let gpu = GpuEncoder::with_context(ctx, &model).unwrap();
    let batch = random_batch(&config, &[20, 7, 12], 1);
    let layers = config.num_layers;
    let before = encode(&gpu, &batch, layers);
    let origin = std::time::Instant::now();
    let now = move || origin.elapsed().as_secs_f64();
    let result = pollster::block_on(gpu.profile(&batch, layers, None, &now));
    if !gpu.context().adapter.timestamps {
        let err = result.unwrap_err().to_string();
        assert!(err.contains("no timestamp-query feature"), "{err}");
        eprintln!("\n!!!!! {} has no timestamp-query: only the refusal was tested !!!!!\n", gpu.context().adapter);
        return;
    }
    let profile = result.unwrap();
    let gathers = 2 + usize::from(model.weights.token_type_embeddings.is_some());
    let counts: Vec<(&str, usize)> = profile.steps.iter().map(|s| (s.step, s.dispatches)).collect();
    assert_eq!(
        counts,
        [
            ("embedding gather", gathers),
            ("layer norm (+ residual)", 1 + 2 * layers),
            ("QKV product", layers),
            ("attention", layers),
            ("attention output product", layers),
            ("feed-forward in product (+ activation)", layers),
            ("feed-forward out product", layers),
        ],
        "{name}"
    );
    assert!(profile.steps.iter().all(|s| s.seconds.is_finite() && s.seconds >= 0.0), "{profile:?}");
    assert!(profile.gpu_seconds() > 0.0 && profile.wall_seconds >= profile.readback_seconds, "{profile:?}");
    assert_eq!(encode(&gpu, &batch, layers).data, before.data, "{name}: a profiled pass changed the results");
    assert_eq!(profile.readback_bytes, (batch.batch * 32 * config.hidden_size * 4) as u64, "states of 32 positions");
    // With a readout, the pass ends with its step and reads back only its vectors.
    let pooled = medrank::model::Readout::Pooled(medrank::model::Pooling::default());
    let profile = pollster::block_on(gpu.profile(&batch, layers, Some(pooled), &now)).unwrap();
    let last = profile.steps.last().unwrap();
    assert_eq!((last.step, last.dispatches), ("pooling", 1));
    assert_eq!(profile.readback_bytes, (batch.batch * config.hidden_size * 4) as u64);
}

/// The readouts computed on the device (issue 45: pooling and the heads after the last
/// layer, only their result read back) against the CPU path's (`read_out_on_host`, pooling
/// and `model::heads` on the host): every pooling mode with and without normalisation on
/// the three tiny architectures, and the logits of the three head layouts (BERT pooler +
/// classifier, RoBERTa dense + out_proj, DistilBERT pre-classifier + ReLU). The bytes read
/// back are the readout's alone: rows x hidden (pooled) or rows x labels (logits) floats.
#[test]
fn pooled_vectors_and_logits_read_out_on_the_device_match_the_cpu_path() {
    use medrank::model::{Pooling, PoolingMode, Readout};
    let Some(ctx) = context() else { return };
    let mut ctx = Some(ctx);
    let mut next_context = || ctx.take().unwrap_or_else(|| GpuContext::new_blocking().unwrap());
    let lengths = [40, 9, 1, 17, 33];
    for (name, config) in tiny_configs() {
        let model = random_model_unit_scale(config.clone(), 23);
        let cpu = CpuEncoder::new(model.clone());
        let gpu = GpuEncoder::with_context(next_context(), &model).unwrap();
        let batch = random_batch(&config, &lengths, 29);
        for mode in [PoolingMode::Mean, PoolingMode::Max, PoolingMode::Cls] {
            for normalize in [false, true] {
                let readout = Readout::Pooled(Pooling { mode, normalize });
                let before = gpu.bytes_read_back().unwrap();
                let g = pollster::block_on(gpu.read_out(&batch, readout)).unwrap();
                let read = gpu.bytes_read_back().unwrap() - before;
                let c = pollster::block_on(cpu.read_out(&batch, readout)).unwrap();
                let diff = max_abs_diff(&g.concat(), &c.concat());
                eprintln!("{name} {mode:?} normalize={normalize}: max abs diff {diff:e}");
                assert!(diff <= TOL, "{name} {mode:?} normalize={normalize}: max abs diff {diff}");
                assert_eq!(read, (lengths.len() * config.hidden_size * 4) as u64, "{name}: bytes read back");
            }
        }
        // No head: the same refusal as the CPU path's.
        let err = pollster::block_on(gpu.read_out(&batch, Readout::Logits)).unwrap_err();
        assert!(err.to_string().contains("this model has no classification head"), "{err}");
    }
    let heads = [
        r#"{"model_type": "bert", "architectures": ["BertForSequenceClassification"],
            "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 64,
            "id2label": {"0": "entailment", "1": "neutral", "2": "contradiction"}}"#,
        r#"{"model_type": "roberta", "architectures": ["RobertaForSequenceClassification"],
            "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 3,
            "intermediate_size": 96, "vocab_size": 300, "max_position_embeddings": 66,
            "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5,
            "id2label": {"0": "refuted", "1": "supported"}}"#,
        r#"{"model_type": "distilbert", "architectures": ["DistilBertForSequenceClassification"],
            "dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64, "vocab_size": 200,
            "max_position_embeddings": 64, "id2label": {"0": "no", "1": "yes"}}"#,
        r#"{"model_type": "bert", "architectures": ["BertForMultipleChoice"],
            "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 64, "vocab_size": 200, "max_position_embeddings": 64}"#,
    ];
    for json in heads {
        let config = tiny_config(json);
        let model = random_model_unit_scale(config.clone(), 31);
        let labels = model.config.labels.len().max(1);
        let cpu = CpuEncoder::new(model.clone());
        let gpu = GpuEncoder::with_context(next_context(), &model).unwrap();
        let batch = random_batch(&config, &lengths, 37);
        let before = gpu.bytes_read_back().unwrap();
        let g = pollster::block_on(gpu.read_out(&batch, Readout::Logits)).unwrap();
        let read = gpu.bytes_read_back().unwrap() - before;
        let c = pollster::block_on(cpu.read_out(&batch, Readout::Logits)).unwrap();
        let diff = max_abs_diff(&g.concat(), &c.concat());
        let scale = c.concat().iter().fold(0f32, |m, v| m.max(v.abs()));
        eprintln!("{:?} {:?}: logits up to {scale:.2}, max abs diff {diff:e}", config.arch, config.head);
        assert!(scale > 0.1, "logits too small to make the comparison meaningful");
        assert!(diff <= TOL, "{:?}: logits max abs diff {diff}", config.arch);
        assert_eq!(g.iter().map(Vec::len).collect::<Vec<_>>(), vec![labels; lengths.len()]);
        assert_eq!(read, (lengths.len() * labels * 4) as u64, "{:?}: bytes read back", config.arch);
    }
}

/// Only the device's own limits split a batch: the attention kernel takes blocks of 64
/// queries along one grid dimension, so 65,535 workgroups hold 65,535 rows of up to 64
/// tokens (before issue 45 one workgroup per token: 511 rows of 128 tokens, 127 of 512).
/// A batch of 4,100 rows of 16 tokens (65,600 tokens, more than the old per-token grid)
/// runs as one pass and gives the CPU path's vectors.
#[test]
fn large_batches_run_as_one_pass_within_the_adapters_limits() {
    use medrank::model::{Pooling, Readout};
    let Some(ctx) = context() else { return };
    let (_, config) = tiny_configs().remove(2);
    let model = random_model_unit_scale(config.clone(), 41);
    let gpu = GpuEncoder::with_context(ctx, &model).unwrap();
    let grid = gpu.context().limits.max_compute_workgroups_per_dimension as usize;
    let by_memory = |len: usize| {
        let widest = (3 * config.hidden_size).max(config.intermediate_size);
        (gpu.context().max_binding_bytes() / (widest as u64 * 4)) as usize / len
    };
    for len in [16, 64, 128] {
        assert_eq!(gpu.rows_per_pass(len).unwrap(), by_memory(len).min(grid / len.div_ceil(64)), "length {len}");
    }
    assert!(gpu.fits_one_pass(16, 4100).unwrap(), "4,100 rows of 16 tokens in one pass");
    let batch = random_batch(&config, &vec![16; 4100], 43);
    let readout = Readout::Pooled(Pooling::default());
    let before = gpu.bytes_read_back().unwrap();
    let g = pollster::block_on(gpu.read_out(&batch, readout)).unwrap();
    assert_eq!(gpu.bytes_read_back().unwrap() - before, (4100 * config.hidden_size * 4) as u64);
    let c = pollster::block_on(CpuEncoder::new(model).read_out(&batch, readout)).unwrap();
    let diff = max_abs_diff(&g.concat(), &c.concat());
    assert!(diff <= TOL, "max abs diff {diff}");
}

/// Plans are kept per shape and readout (up to `KEPT_PLANS`), over activation buffers of a
/// size class: alternating shapes and readouts gives exactly what a fresh encoder gives for
/// each, and a shape larger than every earlier one (a new class) changes nothing either.
#[test]
fn kept_plans_of_several_shapes_and_readouts_give_a_fresh_encoders_results() {
    use medrank::model::{Pooling, PoolingMode, Readout};
    let Some(ctx) = context() else { return };
    let (name, config) = tiny_configs().remove(0);
    let model = random_model_unit_scale(config.clone(), 47);
    let kept = GpuEncoder::with_context(ctx, &model).unwrap();
    let layers = config.num_layers;
    let small = random_batch(&config, &[20, 7, 12], 1);
    let other = random_batch(&config, &[33, 1], 2);
    let large = random_batch(&config, &[150, 140, 3, 99, 64, 120, 2, 77, 150], 3);
    let mean = Readout::Pooled(Pooling { mode: PoolingMode::Mean, normalize: true });
    let cls = Readout::Pooled(Pooling { mode: PoolingMode::Cls, normalize: false });
    let fresh = || GpuEncoder::with_context(GpuContext::new_blocking().unwrap(), &model).unwrap();
    for (batch, readout) in [
        (&small, None),
        (&other, Some(mean)),
        (&small, Some(cls)),
        (&large, Some(mean)),
        (&small, None),
        (&other, Some(mean)),
    ] {
        let (again, once) = match readout {
            None => (encode(&kept, batch, layers).data, encode(&fresh(), batch, layers).data),
            Some(r) => (
                pollster::block_on(kept.read_out(batch, r)).unwrap().concat(),
                pollster::block_on(fresh().read_out(batch, r)).unwrap().concat(),
            ),
        };
        assert_eq!(again, once, "{name}: a kept plan changed the result ({readout:?})");
    }
}
