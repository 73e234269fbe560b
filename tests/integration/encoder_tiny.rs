//! Fast tests on tiny random-weight models of the three architectures: save/load round
//! trips with HF key prefixes, missing/unexpected tensor errors, the forward pass against
//! the independent NumPy reference (`tests/reference/minilm_numpy.py --hidden`), heads
//! against plain-loop arithmetic, and the evaluators on a hand-made bundle.

use candle_core::Tensor;
use medrank::data::{Bundle, Instance, Problem};
use medrank::model::config::{Activation, Arch, EncoderConfig, HeadKind};
use medrank::model::evaluate::{evaluate_by_similarity, evaluate_with_head, EmptyOptions};

const LEAVE_OUT: EmptyOptions = EmptyOptions::LeaveOut;
use medrank::model::load::{from_tensors, random_model, read_safetensors, to_named_tensors, write_safetensors};
use medrank::model::{run_ready, CpuEncoder, Encoder, LoadedModel, Pooling, TokenBatch};
use std::collections::HashMap;
use std::path::PathBuf;

fn tiny(arch: Arch, head: HeadKind, labels: &[&str]) -> EncoderConfig {
    EncoderConfig {
        arch,
        vocab_size: 30522, // the MiniLM tokenizer's vocabulary, so real text can be used
        hidden_size: 16,
        num_layers: 2,
        num_heads: 4,
        intermediate_size: 32,
        max_position_embeddings: 64,
        type_vocab_size: if arch == Arch::Bert {
            2
        } else if arch == Arch::Roberta {
            1
        } else {
            0
        },
        layer_norm_eps: 1e-12,
        activation: if arch == Arch::DistilBert { Activation::Relu } else { Activation::Gelu },
        pad_token_id: if arch == Arch::Roberta { 1 } else { 0 },
        position_offset: if arch == Arch::Roberta { 2 } else { 0 },
        head,
        labels: labels.iter().map(|s| s.to_string()).collect(),
        max_seq_length: None,
        score_scale: None,
        score_input: Default::default(),
        head_pooling: medrank::model::config::HeadPooling::Cls,
        dropout: Default::default(),
        options: medrank::model::config::ArchOptions::None,
    }
}

fn round_trip(model: &LoadedModel, prefix: &str) -> medrank::Result<LoadedModel> {
    // Encoder tensors get the model prefix (as in HF checkpoints); head tensors stay bare.
    let named: Vec<(String, Tensor)> = to_named_tensors(model)
        .into_iter()
        .map(|(k, t)| {
            let head = k.starts_with("classifier") || k.starts_with("pre_classifier");
            (if head { k } else { format!("{prefix}{k}") }, t)
        })
        .collect();
    let bytes = write_safetensors(&named)?;
    let back = read_safetensors("tiny.safetensors", &bytes)?;
    let config = EncoderConfig::from_json("config.json", &model.config.to_json())?;
    from_tensors(config, "tiny.safetensors", back)
}

fn hidden_of(model: &LoadedModel, batch: &TokenBatch) -> Vec<f32> {
    run_ready(CpuEncoder::new(model.clone()).encode(batch, model.config.num_layers)).unwrap().data
}

/// Last hidden states from the NumPy reference for a model saved to a temp folder.
fn numpy_hidden(model: &LoadedModel, batch: &TokenBatch) -> Vec<f64> {
    let dir = std::env::temp_dir().join(format!("medrank-tiny-{:?}-{}", model.config.arch, std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), model.config.to_json()).unwrap();
    let bytes = write_safetensors(&to_named_tensors(model)).unwrap();
    std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
    let rows = |v: &[u32]| -> Vec<Vec<u32>> { v.chunks(batch.seq_len).map(|c| c.to_vec()).collect() };
    let req =
        serde_json::json!({"ids": rows(&batch.ids), "type_ids": rows(&batch.type_ids), "mask": rows(&batch.mask)});
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/minilm_numpy.py");
    let mut child = std::process::Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .arg("--hidden")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 with numpy");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(req.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    std::fs::remove_dir_all(&dir).ok();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut flat = Vec::new();
    for row in v.as_array().unwrap() {
        for tok in row.as_array().unwrap() {
            flat.extend(tok.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()));
        }
    }
    flat
}

#[test]
fn three_architectures_match_numpy_and_round_trip() {
    for (arch, prefix, head, labels) in [
        (Arch::Bert, "bert.", HeadKind::SequenceClassification, vec!["supported", "refuted", "not_enough_evidence"]),
        (Arch::Roberta, "roberta.", HeadKind::SequenceClassification, vec!["entailment", "contradiction"]),
        (Arch::DistilBert, "distilbert.", HeadKind::MultipleChoice, vec![]),
    ] {
        let model = random_model(tiny(arch, head, &labels), 7).unwrap();
        let tok = crate::common::minilm_tokenizer(&model.config);
        let a = tok.encode("chest pain and fever").unwrap();
        let b = tok
            .encode_parts(&[medrank::model::Part::cut_end("cough")], &[medrank::model::Part::keep("asthma")])
            .unwrap();
        let mut batch = tok.batch(&[&a, &b]); // b is padded
        if arch != Arch::Bert {
            // The BERT tokenizer marks the pair's second segment with type 1; RoBERTa's own
            // tokenizer gives 0 everywhere (one token type), DistilBERT ignores types.
            let e = run_ready(CpuEncoder::new(model.clone()).encode(&batch, 2));
            if arch == Arch::Roberta {
                assert!(e.unwrap_err().to_string().contains("token type 1"));
            }
            batch.type_ids.iter_mut().for_each(|t| *t = 0);
        }
        let ours = hidden_of(&model, &batch);
        // Loading back from prefixed safetensors gives the identical forward pass.
        let back = round_trip(&model, prefix).unwrap();
        assert!(back.warnings.is_empty());
        assert_eq!(hidden_of(&back, &batch), ours, "{arch:?} round trip");
        // Independent reference, real tokens only (padded rows are don't-care).
        let reference = numpy_hidden(&model, &batch);
        let h = model.config.hidden_size;
        let mut max_diff = 0f64;
        for r in 0..batch.batch {
            for t in 0..batch.len_of(r) {
                for k in 0..h {
                    let i = (r * batch.seq_len + t) * h + k;
                    max_diff = max_diff.max((ours[i] as f64 - reference[i]).abs());
                }
            }
        }
        assert!(max_diff < 1e-4, "{arch:?}: max abs diff to numpy {max_diff}");
    }
}

/// The CPU inference path (src/model/cpu: gemm, fused QKV, fast exp/erf) against the
/// candle forward pass that training uses: every layer, all three activations, a batch with right padding and one with a gap in its mask, and
/// 70 tokens so the attention splits query rows into two blocks.
#[test]
fn cpu_inference_path_matches_the_candle_forward_pass() {
    use medrank::model::encoder::forward;
    for activation in [Activation::Gelu, Activation::GeluTanh, Activation::Relu] {
        let mut cfg = tiny(Arch::Bert, HeadKind::SequenceClassification, &["a", "b"]);
        cfg.activation = activation;
        cfg.max_position_embeddings = 80;
        let model = random_model(cfg, 11).unwrap();
        let seq =
            |n: usize, seed: u32| -> Vec<u32> { (0..n as u32).map(|i| 1000 + (i * 7919 + seed) % 20000).collect() };
        let (a, b) = (seq(70, 1), seq(33, 2));
        let types_a: Vec<u32> = (0..70).map(|i| (i >= 40) as u32).collect();
        let mut batch = TokenBatch::from_sequences(&[(&a, &types_a), (&b, &[0; 33])], 0);
        batch.mask[10] = 0; // a gap: key 10 of the first sequence is masked
        let enc = CpuEncoder::new(model.clone());
        for layer in 0..=model.config.num_layers {
            let fast = enc.hidden_states(&batch, layer).unwrap().data;
            let slow: Vec<f32> = forward(&model.config, &model.weights, &batch, layer)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let worst = fast.iter().zip(&slow).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-4, "{activation:?} layer {layer}: max abs diff {worst}");
        }
        // A batch of empty sequences gives empty states, not a panic.
        let empty = TokenBatch::from_sequences(&[(&[], &[]), (&[], &[]), (&[], &[])], 0);
        let states = enc.hidden_states(&empty, 2).unwrap();
        assert_eq!((states.batch, states.seq_len, states.data.len()), (3, 0, 0));
    }
}

#[test]
fn missing_and_unexpected_tensors_are_named() {
    let model = random_model(tiny(Arch::Bert, HeadKind::None, &[]), 1).unwrap();
    let named: HashMap<String, Tensor> = to_named_tensors(&model).into_iter().collect();
    let cfg = model.config.clone();

    let mut missing = named.clone();
    missing.remove("encoder.layer.1.attention.self.key.bias");
    let e = from_tensors(cfg.clone(), "m.safetensors", missing).unwrap_err().to_string();
    assert!(e.contains("missing tensor `encoder.layer.1.attention.self.key.bias`"), "{e}");

    let mut unexpected = named.clone();
    unexpected.insert(
        "encoder.layer.9.foo.weight".into(),
        Tensor::zeros(2, candle_core::DType::F32, &candle_core::Device::Cpu).unwrap(),
    );
    let e = from_tensors(cfg.clone(), "u.safetensors", unexpected).unwrap_err().to_string();
    assert!(e.contains("unexpected tensor `encoder.layer.9.foo.weight`"), "{e}");

    // A pre-training head is known: skipped with a warning that names it.
    let mut mlm = named.clone();
    mlm.insert(
        "cls.predictions.bias".into(),
        Tensor::zeros(2, candle_core::DType::F32, &candle_core::Device::Cpu).unwrap(),
    );
    let ok = from_tensors(cfg.clone(), "p.safetensors", mlm).unwrap();
    assert!(ok.warnings.iter().any(|w| w.message.contains("cls.predictions.bias")));

    // Wrong shape is named too.
    let mut bad = named;
    bad.insert(
        "pooler.dense.bias".into(),
        Tensor::zeros(3, candle_core::DType::F32, &candle_core::Device::Cpu).unwrap(),
    );
    let e = from_tensors(cfg.clone(), "s.safetensors", bad).unwrap_err().to_string();
    assert!(e.contains("pooler.dense.bias") && e.contains("[3]"), "{e}");

    // A classification config needs its head.
    let mut with_head = cfg;
    with_head.head = HeadKind::SequenceClassification;
    with_head.labels = vec!["a".into(), "b".into()];
    let e = from_tensors(with_head, "h.safetensors", to_named_tensors(&model).into_iter().collect())
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing tensor `classifier.weight`"), "{e}");
}

fn mcqa_bundle() -> Bundle {
    let inst = |id: &str, line: usize| Instance {
        id: id.into(),
        problem: Problem::Mcqa {
            question: "A 60-year-old smoker with multiple brain metastases. Most probable origin?".into(),
            options: vec![("1".into(), "Lung".into()), ("2".into(), "Prostate".into()), ("3".into(), "Colon".into())],
            answer: "1".into(),
        },
        arguments: vec![
            ("gold".into(), "Lung cancer is the most common source of brain metastases in smokers.".into()),
            ("no_argument".into(), "".into()),
        ],
        line,
    };
    Bundle {
        name: "b.jsonl".into(),
        instances: vec![inst("q1", 1), inst("q2", 2)],
        systems: vec!["gold".into(), "no_argument".into()],
        controls: Vec::new(),
    }
}

#[test]
fn heads_match_plain_arithmetic_and_evaluators_run() {
    // RoBERTa classification head: out_proj(tanh(dense(h_cls))) computed with loops.
    let model =
        random_model(tiny(Arch::Roberta, HeadKind::SequenceClassification, &["entailment", "contradiction"]), 3)
            .unwrap();
    let enc = CpuEncoder::new(model.clone());
    let tok = crate::common::minilm_tokenizer(&model.config);
    let e = tok.encode("statement about a trial").unwrap();
    let batch = tok.batch(&[&e]);
    let hidden = run_ready(enc.encode(&batch, 2)).unwrap();
    let head = model.head.as_ref().unwrap();
    let got =
        medrank::model::heads::logits(head, model.config.head_pooling, &model.weights, &hidden, &batch.mask).unwrap();
    let medrank::model::HeadWeights::RobertaClassifier { dense, out_proj } = head else { panic!() };
    let mat = |t: &Tensor| t.to_vec2::<f32>().unwrap();
    let vec = |t: &Tensor| t.to_vec1::<f32>().unwrap();
    let cls = hidden.token(0, 0);
    let (dw, db, ow, ob) = (mat(&dense.weight), vec(&dense.bias), mat(&out_proj.weight), vec(&out_proj.bias));
    let mid: Vec<f32> = (0..16).map(|o| (db[o] + (0..16).map(|i| dw[o][i] * cls[i]).sum::<f32>()).tanh()).collect();
    for o in 0..2 {
        let want = ob[o] + (0..16).map(|i| ow[o][i] * mid[i]).sum::<f32>();
        assert!((got[0][o] - want).abs() < 1e-6);
    }

    // Multiple-choice evaluator (BERT head on the pooler): one prediction per
    // (instance, system), probabilities over the options, same result for any batch size.
    let mc = random_model(tiny(Arch::Bert, HeadKind::MultipleChoice, &[]), 5).unwrap();
    let mc_enc = CpuEncoder::new(mc.clone());
    let bundle = mcqa_bundle();
    let run = |bs: usize| run_ready(evaluate_with_head(&mc_enc, &[], &tok, &bundle, bs, LEAVE_OUT)).unwrap();
    let out = run(8);
    assert_eq!(out.predictions.len(), 4);
    assert!(out.truncated.is_empty());
    for p in &out.predictions {
        let sum: f64 = p.probs.iter().map(|(_, x)| x).sum();
        assert!((sum - 1.0).abs() < 1e-9);
        assert_eq!(p.p_correct, p.probs[0].1);
        assert_eq!(p.probs.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), vec!["1", "2", "3"]);
    }
    // Same instance text twice -> identical predictions; batch size does not matter.
    assert_eq!(out.predictions[0].probs, out.predictions[2].probs);
    let single = run(1);
    for (a, b) in out.predictions.iter().zip(&single.predictions) {
        for ((_, x), (_, y)) in a.probs.iter().zip(&b.probs) {
            assert!((x - y).abs() < 1e-6);
        }
    }

    // A long argument is cut (never the option) and reported with instance and system.
    let mut long = mcqa_bundle();
    long.instances[0].arguments[0].1 = "smoking ".repeat(100);
    let out = run_ready(evaluate_with_head(&mc_enc, &[], &tok, &long, 8, LEAVE_OUT)).unwrap();
    assert_eq!(out.truncated.len(), 3); // three options of q1/gold
    assert!(out.truncated.iter().all(|t| t.instance == "q1" && t.system == "gold" && t.tokens_cut > 0));

    // Similarity evaluator runs on any pooled encoder.
    let sim =
        run_ready(evaluate_by_similarity(&mc_enc, &tok, &Pooling::default(), &bundle, 0.05, 4, LEAVE_OUT)).unwrap();
    assert_eq!(sim.predictions.len(), 4);
}

#[test]
fn training_learns_a_separable_task_and_saves_a_loadable_evaluator() {
    use medrank::model::Part;
    use medrank::train::{train, trained_files, Freeze, TrainExample, TrainOptions};
    let base_model = random_model(tiny(Arch::Bert, HeadKind::None, &[]), 11).unwrap();
    let tok = crate::common::minilm_tokenizer(&base_model.config);
    let base = crate::common::tiny_text_model(base_model, tok.clone());
    // The right option is always "lung", at a varying position: learnable from the
    // option tokens alone, so a head on frozen random features can reach 100%.
    let words = ["fever", "cough", "pain", "rash", "edema", "syncope", "dyspnea", "nausea"];
    let make = |n: usize, offset: usize| -> Vec<TrainExample> {
        (0..n)
            .map(|i| {
                let q = words[(i + offset) % words.len()];
                let gold = (i + offset) % 3;
                let opts: Vec<&str> = (0..3)
                    .map(|k| {
                        if k == gold {
                            "lung"
                        } else if k == (gold + 1) % 3 {
                            "colon"
                        } else {
                            "skin"
                        }
                    })
                    .collect();
                let inputs =
                    opts.iter().map(|o| tok.encode_parts(&[Part::cut_start(q)], &[Part::keep(o)]).unwrap()).collect();
                TrainExample { id: format!("e{i}"), inputs, gold, scores: None }
            })
            .collect()
    };
    let (train_set, dev_set) = (make(24, 0), make(12, 5));
    let opts = TrainOptions {
        epochs: 30,
        batch_size: 4,
        grad_accum: 2,
        learning_rate: 0.05,
        patience: 30,
        ..Default::default()
    };
    let mut lines = 0;
    let result = train(&base, HeadKind::MultipleChoice, &[], &train_set, &dev_set, &opts, &mut |_| lines += 1).unwrap();
    assert_eq!(lines, result.curve.len());
    assert_eq!(result.best_dev_accuracy, 1.0, "curve: {:?}", result.curve);
    let first = result.curve.first().unwrap().train_loss;
    let last = result.curve.last().unwrap().train_loss;
    assert!(last < first * 0.5, "loss {first} -> {last}");
    // Same seed, same curve (seeded shuffling and init).
    let again = train(&base, HeadKind::MultipleChoice, &[], &train_set, &dev_set, &opts, &mut |_| {}).unwrap();
    assert_eq!(again.curve, result.curve);
    // The saved folder loads back as an evaluator with the same head.
    let files = trained_files(&result, &opts).unwrap();
    let get = |n: &str| files.iter().find(|(k, _)| k == n).unwrap().1.clone();
    let cfg = EncoderConfig::from_json("config.json", std::str::from_utf8(&get("config.json")).unwrap()).unwrap();
    assert_eq!(cfg.head, HeadKind::MultipleChoice);
    let loaded = medrank::model::load::load_model(cfg, "model.safetensors", &get("model.safetensors")).unwrap();
    let batch = tok.batch(&[&dev_set[0].inputs[0]]);
    let h1 = run_ready(CpuEncoder::new(loaded.clone()).encode(&batch, 2)).unwrap();
    let h2 = run_ready(CpuEncoder::new(result.model.clone()).encode(&batch, 2)).unwrap();
    let l1 = medrank::model::heads::logits(
        loaded.head.as_ref().unwrap(),
        loaded.config.head_pooling,
        &loaded.weights,
        &h1,
        &batch.mask,
    )
    .unwrap();
    let l2 = medrank::model::heads::logits(
        result.model.head.as_ref().unwrap(),
        result.model.config.head_pooling,
        &result.model.weights,
        &h2,
        &batch.mask,
    )
    .unwrap();
    assert_eq!(l1, l2);
    // Training the top layer too (differentiable forward) runs and changes that layer.
    let top = TrainOptions { freeze: Freeze::TopLayers(1), epochs: 2, ..opts };
    let r = train(&base, HeadKind::MultipleChoice, &[], &train_set, &dev_set, &top, &mut |_| {}).unwrap();
    let before = base.encoder.model.weights.layers[1].query.weight.to_vec2::<f32>().unwrap();
    let after = r.model.weights.layers[1].query.weight.to_vec2::<f32>().unwrap();
    assert_ne!(before, after);
    let bottom_before = base.encoder.model.weights.layers[0].query.weight.to_vec2::<f32>().unwrap();
    assert_eq!(bottom_before, r.model.weights.layers[0].query.weight.to_vec2::<f32>().unwrap());
}

#[test]
fn rankers_and_bertscore_run_on_any_encoder() {
    use medrank::model::bertscore::{bertscore, BertScoreOptions};
    use medrank::model::rankers::{cross_encoder_scores, dense_scores, RankQuery, Window};
    let model = random_model(tiny(Arch::Bert, HeadKind::SequenceClassification, &["score"]), 13).unwrap();
    let enc = CpuEncoder::new(model.clone());
    let tok = crate::common::minilm_tokenizer(&model.config);
    let docs = ["aspirin reduces fever", "the weather is nice today", &"long document words ".repeat(40)];
    let query = "does aspirin reduce fever";
    fn rank<'a>(docs: &'a [&'a str], window: Option<Window>, batch_size: usize) -> RankQuery<'a> {
        RankQuery { query: "does aspirin reduce fever", docs, window, batch_size }
    }
    // Dense: the query itself as a document scores cosine 1 (same text, same vector).
    let s = run_ready(dense_scores(&enc, &tok, &Pooling::default(), &rank(&[query, docs[0]], None, 4))).unwrap();
    assert!((s.scores[0] - 1.0).abs() < 1e-5);
    assert!(s.scores[1] < 1.0);
    // Windows: the max over windows; a long document is cut without them and counted.
    let plain = run_ready(dense_scores(&enc, &tok, &Pooling::default(), &rank(&docs, None, 4))).unwrap();
    assert_eq!(plain.cut_inputs, 1);
    let win = Some(Window { words: 20, stride: 10 });
    let windowed = run_ready(dense_scores(&enc, &tok, &Pooling::default(), &rank(&docs, win, 4))).unwrap();
    assert_eq!(windowed.cut_inputs, 0);
    assert_eq!(windowed.scores[0], plain.scores[0]);
    // Cross-encoder with one output: the logit; batch size does not change it.
    let a = run_ready(cross_encoder_scores(&enc, &tok, &rank(&docs, None, 8))).unwrap();
    let b = run_ready(cross_encoder_scores(&enc, &tok, &rank(&docs, None, 1))).unwrap();
    for (x, y) in a.scores.iter().zip(&b.scores) {
        assert!((x - y).abs() < 1e-5);
    }
    // BERTScore: a text against itself is 1 (P = R = F), any layer, idf or not.
    for (layer, idf) in [(1, false), (2, true)] {
        let opts = BertScoreOptions { layer, idf, baseline: None };
        let s = run_ready(bertscore(
            &enc,
            &tok,
            &["aspirin reduces fever", "fever"],
            &[vec!["aspirin reduces fever"], vec!["high fever", "fever", "rash"]],
            &opts,
        ))
        .unwrap();
        assert!((s[0].f1 - 1.0).abs() < 1e-5 && (s[0].precision - 1.0).abs() < 1e-5);
        // Several references: the best F wins, here the identical one.
        assert!((s[1].f1 - 1.0).abs() < 1e-5, "{layer} {idf} {s:?}");
    }
    let bad = BertScoreOptions { layer: 3, idf: false, baseline: None };
    assert!(run_ready(bertscore(&enc, &tok, &["a"], &[vec!["b"]], &bad)).is_err());
}

#[test]
fn monot5_scores_p_true_with_a_tiny_t5() {
    use candle_core::{DType, Device};
    use medrank::model::monot5::MonoT5;
    let vocab = [
        "<pad>",
        "</s>",
        "<unk>",
        "▁true",
        "▁false",
        "▁Query:",
        "▁Document:",
        "▁Relevant:",
        "▁aspirin",
        "▁fever",
        "▁rain",
    ];
    let vocab_json: serde_json::Map<String, serde_json::Value> =
        vocab.iter().enumerate().map(|(i, t)| (t.to_string(), serde_json::json!(i))).collect();
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab_json, "unk_token": "<unk>"}
    });
    let config = serde_json::json!({"vocab_size": 11, "d_model": 8, "d_kv": 4, "d_ff": 16, "num_layers": 1,
        "num_heads": 2, "relative_attention_num_buckets": 8, "dropout_rate": 0.0, "layer_norm_epsilon": 1e-6,
        "initializer_factor": 1.0, "feed_forward_proj": "relu", "is_encoder_decoder": true,
        "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0});
    let varmap = candle_nn::VarMap::new();
    let cfg: candle_transformers::models::t5::Config = serde_json::from_value(config.clone()).unwrap();
    let vb = candle_nn::VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let mut reference = candle_transformers::models::t5::T5ForConditionalGeneration::load(vb, &cfg).unwrap();
    let path = std::env::temp_dir().join(format!("medrank-t5-{}.safetensors", std::process::id()));
    varmap.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let mut mono = MonoT5::from_bytes(config.to_string().as_bytes(), tokenizer.to_string().as_bytes(), bytes).unwrap();
    let s = mono.score("aspirin", &["aspirin fever", "rain"]).unwrap();
    assert_eq!(s.cut_inputs, 0);
    // The same weights run by hand: ids of "▁Query: ▁aspirin ▁Document: ▁aspirin ▁fever ▁Relevant: </s>",
    // decoder start <pad>, softmax over the logits of ▁true (3) and ▁false (4).
    let ids = Tensor::new(&[[5u32, 8, 6, 8, 9, 7, 1]], &Device::Cpu).unwrap();
    let start = Tensor::new(&[[0u32]], &Device::Cpu).unwrap();
    let l: Vec<f32> = reference.forward(&ids, &start).unwrap().squeeze(0).unwrap().to_vec1().unwrap();
    let want = 1.0 / (1.0 + ((l[4] - l[3]) as f64).exp());
    assert!((s.scores[0] - want).abs() < 1e-6, "{} vs {want}", s.scores[0]);
    assert!(s.scores.iter().all(|p| *p > 0.0 && *p < 1.0));
    // Deterministic (the kv cache is cleared between documents).
    assert_eq!(mono.score("aspirin", &["aspirin fever", "rain"]).unwrap().scores, s.scores);
}
