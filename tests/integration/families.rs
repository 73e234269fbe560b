//! DeBERTa-v2/v3 and ModernBERT against Hugging Face transformers (PyTorch), the reference
//! of both families: random-weight models written by transformers itself
//! (`tests/reference/families_reference.py make`: small configs of each family's shapes, and
//! one base-size config each), loaded by medrank's loader, run by the CPU path on 200 inputs
//! (single texts, pairs, and for ModernBERT texts of more than 512 tokens); transformers runs
//! the same token ids (`families_reference.py run`). The last layer's states of every real
//! token, one intermediate layer's, and the head's logits must agree within 1e-4. The
//! DeBERTa folders hold `spm.model` and no `tokenizer.json`: the loader's conversion runs.
//!
//! The SentencePiece conversion is checked against transformers' own (`DebertaV2Converter`)
//! on 1,000 texts (`tests/reference/deberta_tokenizer.py`): the ids from that converter's
//! `tokenizer.json` and from `spm.model` equal the `tokenizers` library's (the fast
//! tokenizer's).
//!
//! The tests need PyTorch and transformers (`scripts/setup.sh reference`); where they are
//! missing the tests say so and pass, unless MEDRANK_REQUIRE_REFERENCE=1.

use crate::common;
use common::cli::{root, s, tmp};
use common::families::{make, python, DEBERTA_TOKENIZER, MODERNBERT_TOKENIZER, MODERNBERT_VOCAB, SPM, SPM_PIECES};
use common::reference_available;
use medrank::model::{encoder_outputs, run_ready, Encoder, Part, Readout, TextModel, TextTokenizer};
use std::path::Path;

const TOLERANCE: f32 = 1e-4;

/// A folder's tokenizer files: (from, to), as `common::families::make` copies them.
type Tokenizer<'a> = &'a [(&'a str, &'a str)];

/// The `field` of the first `n` lines of a vendored JSONL file.
fn field(file: &str, key: &str, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    text.lines()
        .take(n)
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()[key].as_str().unwrap().to_string())
        .collect()
}

/// 200 inputs (text, pair text): 110 clinical questions (CasiMedicos), 60 NLI pairs
/// (e-SNLI: statement, evidence), 20 claims (SciFact), and 10 texts of several questions
/// joined, over 512 tokens (cut where a model's limit says).
fn inputs() -> Vec<(String, Option<String>)> {
    let questions = field("data/casimedicos/train.jsonl", "question", 150);
    let mut out: Vec<(String, Option<String>)> = questions[..110].iter().map(|q| (q.clone(), None)).collect();
    let statements = field("data/esnli-mini/train.jsonl", "statement", 60);
    let evidence = field("data/esnli-mini/train.jsonl", "evidence", 60);
    out.extend(statements.into_iter().zip(evidence).map(|(a, b)| (a, Some(b))));
    out.extend(field("data/scifact-mini/train.jsonl", "claim", 20).into_iter().map(|c| (c, None)));
    for k in 0..10 {
        out.push((questions[110 + 4 * k..110 + 4 * (k + 1)].join(" "), None));
    }
    assert_eq!(out.len(), 200);
    out
}

/// f32 values of a little-endian file.
fn floats(path: &Path) -> Vec<f32> {
    std::fs::read(path).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// The CPU path's and transformers' outputs of the folder `dir` on every input, compared:
/// (last layer's max difference, layer `layer`'s, logits', the longest input in tokens).
fn compare(dir: &Path, layer: usize, inputs: &[(String, Option<String>)]) -> (f32, f32, f32, usize) {
    let model = TextModel::read_dir(dir).unwrap();
    let outputs = run_ready(encoder_outputs(&model, &model.encoder, inputs, layer)).unwrap();
    let hidden: Vec<f32> = outputs.iter().flat_map(|o| o.hidden.iter().copied()).collect();
    let at_layer: Vec<f32> = outputs.iter().flat_map(|o| o.layer.iter().copied()).collect();
    let logits: Vec<f32> = outputs.iter().flat_map(|o| o.logits.iter().copied()).collect();
    let ids = serde_json::json!({
        "ids": outputs.iter().map(|o| &o.ids).collect::<Vec<_>>(),
        "type_ids": outputs.iter().map(|o| &o.type_ids).collect::<Vec<_>>(),
    });
    let ids_file = dir.join("inputs.json");
    std::fs::write(&ids_file, ids.to_string()).unwrap();
    let prefix = dir.join("reference");
    let layer_arg = layer.to_string();
    python(&[
        "tests/reference/families_reference.py",
        "run",
        "--model",
        s(dir),
        "--inputs",
        s(&ids_file),
        "--out",
        s(&prefix),
        "--layer",
        &layer_arg,
    ]);
    let reference = |ext: &str| floats(&prefix.with_extension(ext));
    let logits_diff = if logits.is_empty() { 0.0 } else { max_abs_diff(&logits, &reference("logits")) };
    let longest = outputs.iter().map(|o| o.ids.len()).max().unwrap();
    (max_abs_diff(&hidden, &reference("hidden")), max_abs_diff(&at_layer, &reference("layer")), logits_diff, longest)
}

/// Every small config of both families, with each head kind.
#[test]
fn small_models_of_both_families_match_transformers_on_200_inputs() {
    if !reference_available() {
        return;
    }
    let inputs = inputs();
    let (spm, wordpiece) = (&DEBERTA_TOKENIZER, &MODERNBERT_TOKENIZER);
    let nli = "entailment,neutral,contradiction";
    let cases: [(&str, &str, &str, &str, usize, Tokenizer); 5] = [
        ("small-v3", "seq", nli, "DeBERTa-v3, NLI head", SPM_PIECES, spm),
        (
            "small-v2",
            "mc",
            "",
            "DeBERTa-v2 (absolute positions, types, clamped distances), multiple choice",
            SPM_PIECES,
            spm,
        ),
        ("small-v3", "none", "", "DeBERTa-v3, no head", SPM_PIECES, spm),
        ("small-modernbert", "seq", "yes,no", "ModernBERT (cls pooling)", MODERNBERT_VOCAB, wordpiece),
        ("small-modernbert-mean", "seq", "a,b,c", "ModernBERT (mean pooling, biases)", MODERNBERT_VOCAB, wordpiece),
    ];
    for (i, (config, head, labels, what, vocab, tokenizer)) in cases.into_iter().enumerate() {
        let dir = make(&format!("{config}-{head}-{i}"), config, head, labels, vocab, tokenizer);
        let (hidden, layer, logits, longest) = compare(&dir, 1, &inputs);
        eprintln!("{what}: max |medrank - transformers| hidden {hidden:.2e}, layer 1 {layer:.2e}, logits {logits:.2e}; longest input {longest} tokens");
        assert!(hidden <= TOLERANCE && layer <= TOLERANCE && logits <= TOLERANCE, "{what}: {hidden} {layer} {logits}");
        if config.contains("modernbert") {
            assert!(longest > 512, "{what}: the inputs reach past 512 tokens ({longest})");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// One base-size config of each family (DeBERTa-v3-base's and ModernBERT-base's shapes,
/// the DeBERTa vocabulary the vendored one's, ModernBERT's inputs up to 8,192 tokens), on
/// the same 200 inputs. The folders (about 350 and 600 MB) are removed afterwards.
// Left out of the test command: on the 2-core machines the ModernBERT-base case (PyTorch and
// medrank on 200 inputs at base size) had not finished after 22 minutes, which CI's
// 90-minute budget cannot carry. Run it by hand: `cargo test --test integration families:: -- --ignored`
// (the DeBERTa-v3-base case passed that way, within 5.7e-6).
#[test]
#[ignore = "base-size parity is run by hand: cargo test --test integration families:: -- --ignored"]
fn base_size_models_match_transformers() {
    if !reference_available() {
        return;
    }
    let inputs = inputs();
    let cases: [(&str, &str, usize, Tokenizer); 2] = [
        ("base-v3", "entailment,neutral,contradiction", SPM_PIECES, &DEBERTA_TOKENIZER),
        ("base-modernbert", "a,b", MODERNBERT_VOCAB, &MODERNBERT_TOKENIZER),
    ];
    for (config, labels, vocab, tokenizer) in cases {
        let dir = make(config, config, "seq", labels, vocab, tokenizer);
        let (hidden, layer, logits, longest) = compare(&dir, 6, &inputs);
        std::fs::remove_dir_all(&dir).unwrap();
        eprintln!("{config}: max |medrank - transformers| hidden {hidden:.2e}, layer 6 {layer:.2e}, logits {logits:.2e}; longest input {longest} tokens");
        assert!(
            hidden <= TOLERANCE && layer <= TOLERANCE && logits <= TOLERANCE,
            "{config}: {hidden} {layer} {logits}"
        );
    }
}

/// 1,000 texts: clinical questions, options and claims of the vendored data (medical terms),
/// NLI pairs, and texts made to stress a tokenizer: accents and other scripts, emoji,
/// characters NFKC changes (ligatures, fractions, full-width letters), odd whitespace, and
/// lines of more than 5,000 characters.
fn tokenizer_texts() -> Vec<(String, Option<String>)> {
    let questions = field("data/casimedicos/train.jsonl", "question", 500);
    let mut out: Vec<(String, Option<String>)> = questions[..400].iter().map(|q| (q.clone(), None)).collect();
    let statements = field("data/esnli-mini/train.jsonl", "statement", 200);
    let evidence = field("data/esnli-mini/train.jsonl", "evidence", 200);
    out.extend(statements.into_iter().zip(evidence).map(|(a, b)| (a, Some(b))));
    out.extend(field("data/scifact-mini/train.jsonl", "claim", 200).into_iter().map(|c| (c, None)));
    let odd = [
        "Síndrome de Guillain-Barré tras vacunación: ¿causa o coincidencia?",
        "Naïve café patients in Zürich, Ærøskøbing and Kraków; résumé of the São Paulo cohort.",
        "Fiebre 39,5 °C, taquicardia 120 lpm, SpO₂ 91 % — ¿sepsis?",
        "The patient 😷 reported 💊 non-adherence 🩺😀👍🏽👨‍👩‍👧 and 🇪🇸 travel.",
        "ﬁbrosis, ﬂutter, ½ tablet, ¾ dose, Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ, ℃, №5, ⅰⅱⅲ, ﬀ ﬃ",
        "tab\tseparated\ttext\nwith newlines\r\nand  double   spaces\u{a0}nbsp\u{200b}zero-width",
        "Ελληνικά ιατρικά, русский текст, 中文医学文本, 日本語のテキスト, العربية, हिन्दी",
        "[CLS] inside text [SEP] and [PAD] and [UNK] tokens",
        "   leading and trailing spaces   ",
        "MAYÚSCULAS Y minúsculas, ÀÉÎÕÜ àéîõü ñÑ çÇ ßẞ",
    ];
    let mut k = 0;
    while out.len() < 990 {
        let a = odd[k % odd.len()];
        let b = &questions[400 + k % 100];
        out.push(match k % 3 {
            0 => (a.to_string(), None),
            1 => (format!("{a} {b}"), None),
            _ => (b.clone(), Some(a.to_string())),
        });
        k += 1;
    }
    for i in 0..10 {
        let line: String = questions[i * 10..].iter().take(10).cloned().collect::<Vec<_>>().join(" ") + odd[i];
        let line = line.repeat(5001 / line.len() + 1);
        assert!(line.chars().count() > 5000);
        out.push((line, None));
    }
    out
}

/// medrank's ids of every text, special tokens included and nothing cut.
fn medrank_ids(tokenizer: &TextTokenizer, texts: &[(String, Option<String>)]) -> Vec<Vec<u32>> {
    texts
        .iter()
        .map(|(a, b)| {
            let second = b.as_deref().map(|b| vec![Part::keep(b)]).unwrap_or_default();
            tokenizer.encode_parts(&[Part::keep(a)], &second).unwrap().ids
        })
        .collect()
}

#[test]
fn the_sentencepiece_conversion_gives_transformers_ids_on_1000_texts() {
    if !reference_available() {
        return;
    }
    let texts = tokenizer_texts();
    assert_eq!(texts.len(), 1000);
    let dir = tmp("tokenizer");
    std::fs::create_dir_all(&dir).unwrap();
    let texts_file = dir.join("texts.json");
    let json: Vec<serde_json::Value> = texts.iter().map(|(a, b)| serde_json::json!([a, b])).collect();
    std::fs::write(&texts_file, serde_json::Value::Array(json).to_string()).unwrap();
    let (tokenizer_json, ids_file) = (dir.join("tokenizer.json"), dir.join("ids.json"));
    python(&[
        "tests/reference/deberta_tokenizer.py",
        "--spm",
        SPM,
        "--texts",
        s(&texts_file),
        "--tokenizer-json",
        s(&tokenizer_json),
        "--ids",
        s(&ids_file),
    ]);
    let reference: serde_json::Value = serde_json::from_slice(&std::fs::read(&ids_file).unwrap()).unwrap();
    let expected: Vec<Vec<u32>> = serde_json::from_value(reference["ids"].clone()).unwrap();
    // What the reference script found of transformers 5's AutoTokenizer and of SentencePiece
    // (the converter's tokenizer differs from SentencePiece's own encoder on some texts of
    // odd whitespace; the fast tokenizer, not SentencePiece, is the reference here).
    eprintln!("reference: {}", reference["notes"]);
    let limit = usize::MAX / 2;
    let from_json =
        TextTokenizer::from_bytes("tokenizer.json", &std::fs::read(&tokenizer_json).unwrap(), limit, 0).unwrap();
    let (converted, _) =
        medrank::model::ModelFiles::tokenizer_from_spm(SPM, &std::fs::read(root().join(SPM)).unwrap(), None).unwrap();
    let from_spm = TextTokenizer::from_bytes("spm.model", &converted, limit, 0).unwrap();
    for (name, tokenizer) in [("tokenizer.json", &from_json), ("spm.model", &from_spm)] {
        let ids = medrank_ids(tokenizer, &texts);
        let differ: Vec<usize> = (0..texts.len()).filter(|&i| ids[i] != expected[i]).collect();
        assert!(
            differ.is_empty(),
            "from {name}: {} of 1000 texts differ, first {:?}: {:?} vs {:?}",
            differ.len(),
            texts[differ[0]],
            ids[differ[0]],
            expected[differ[0]]
        );
    }
    let long = texts.iter().filter(|(a, _)| a.chars().count() > 5000).count();
    eprintln!("1000 texts ({long} over 5,000 characters): the same ids from tokenizer.json and from spm.model");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// int8 (`medrank quantize`'s weights file, read back as a user loads it) on DeBERTa-v3 and
/// ModernBERT: the linear maps stored int8 (ModernBERT's fused `Wqkv` as one), the model
/// run in int8, its mean-pooled states within the cosine `medrank quantize` holds MiniLM to
/// (0.99, tests/integration/quantize.rs) of the f32 model's and its logits within 0.05 of them (the
/// f32 path is held to transformers by the tests above). Random weights, no Python needed.
#[test]
fn int8_runs_both_families_within_the_int8_tolerance() {
    use medrank::model::config::{Arch, EncoderConfig, HeadKind};
    use medrank::model::load::{int8_tensor_names, load_model, random_model};
    use medrank::model::{CpuEncoder, Precision, TokenBatch};
    use rand::{Rng, SeedableRng};
    for (arch, fused) in [
        (Arch::DebertaV2, "deberta.encoder.layer.1.attention.self.query_proj.weight"),
        (Arch::ModernBert, "model.layers.1.attn.Wqkv.weight"),
    ] {
        let mut config = EncoderConfig::tiny(arch, 2, HeadKind::SequenceClassification, &["a", "b", "c"]);
        config.vocab_size = 500;
        config.max_position_embeddings = 128;
        let f32_model = random_model(config.clone(), 3).unwrap();
        let names = int8_tensor_names(&config);
        assert!(names.iter().any(|n| n == fused), "{arch:?}: {names:?}");
        let bytes = medrank::jobs::int8_safetensors(&f32_model).unwrap();
        let int8_model = load_model(config.clone(), "int8/model.safetensors", &bytes).unwrap();
        assert_eq!(int8_model.precision, Precision::Int8);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let seqs: Vec<Vec<u32>> =
            [100, 37, 5, 64].iter().map(|&n| (0..n).map(|_| rng.gen_range(1..500)).collect()).collect();
        let zeros: Vec<Vec<u32>> = seqs.iter().map(|s| vec![0; s.len()]).collect();
        let refs: Vec<(&[u32], &[u32])> = seqs.iter().zip(&zeros).map(|(a, b)| (a.as_slice(), b.as_slice())).collect();
        let batch = TokenBatch::from_sequences(&refs, config.pad_token_id);
        let (f, q) = (CpuEncoder::new(f32_model), CpuEncoder::new(int8_model));
        let (hf, hq) = (f.hidden_states(&batch, 2).unwrap(), q.hidden_states(&batch, 2).unwrap());
        let mean = |h: &medrank::model::HiddenStates, row: usize, len: usize| -> Vec<f32> {
            let mut m = vec![0f32; h.hidden];
            for t in 0..len {
                m.iter_mut().zip(h.token(row, t)).for_each(|(a, x)| *a += x / len as f32);
            }
            m
        };
        for (row, s) in seqs.iter().enumerate() {
            let (a, b) = (mean(&hf, row, s.len()), mean(&hq, row, s.len()));
            let dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
            let cosine = dot / (norm(&a) * norm(&b));
            eprintln!("{arch:?} row {row}: cosine int8 / f32 {cosine:.5}");
            assert!(cosine >= 0.99, "{arch:?} row {row}: cosine {cosine}");
        }
        let logits = |e: &CpuEncoder| run_ready(e.read_out(&batch, Readout::Logits)).unwrap().concat();
        let diff = max_abs_diff(&logits(&f), &logits(&q));
        eprintln!("{arch:?}: logits max |int8 - f32| {diff:.2e}");
        assert!(diff <= 0.05, "{arch:?}: logits differ by {diff}");
    }
}

/// `grade` and `statements` zero-shot with a DeBERTa-v3 NLI model as a user has one: a
/// folder written by transformers with `id2label` entailment / neutral / contradiction and
/// only `spm.model` for a tokenizer (converted at load).
#[test]
fn grade_and_statements_run_zero_shot_with_a_deberta_v3_nli_model() {
    if !reference_available() {
        return;
    }
    use common::cli::{json, ok};
    let nli = "entailment,neutral,contradiction";
    let dir = make("deberta-nli", "small-v3", "seq", nli, SPM_PIECES, &DEBERTA_TOKENIZER);
    assert!(!dir.join("tokenizer.json").exists());
    let graded = tmp("deberta-grade.json");
    ok(&["grade", "--rubric", "examples/rubric/conversations.jsonl", "--grader", s(&dir), "--json", s(&graded), "-q"]);
    let report = json(&graded);
    assert_eq!(report["grader"]["kind"], "zero_shot_nli");
    assert_eq!(
        (report["grader"]["entailment"].as_u64(), report["grader"]["contradiction"].as_u64()),
        (Some(0), Some(2))
    );
    let statements = tmp("deberta-statements.json");
    ok(&[
        "statements",
        "--input",
        "examples/statements/answers.jsonl",
        "--nli",
        s(&dir),
        "--json",
        s(&statements),
        "-q",
    ]);
    let report = json(&statements);
    // 3 prompts x 2 systems; statements 4, 3, 2 per prompt (tests/integration/cli_grade.rs).
    let judgements = report["judgements"].as_array().unwrap();
    assert_eq!(judgements.len(), 18);
    for j in judgements {
        let (pe, pc) = (j["p_entailment"].as_f64().unwrap(), j["p_contradiction"].as_f64().unwrap());
        assert!(pe > 0.0 && pc > 0.0 && pe + pc < 1.0, "{j}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What these families can have but medrank does not run is refused at load with a
/// sentence naming the field, never run wrongly.
#[test]
fn unsupported_family_options_are_refused_naming_the_field() {
    use medrank::model::EncoderConfig;
    let deberta = r#""model_type": "deberta-v2", "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "vocab_size": 100, "relative_attention": true,
        "pos_att_type": ["p2c", "c2p"], "position_buckets": 8, "max_relative_positions": 32"#;
    let modernbert = r#""model_type": "modernbert", "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "vocab_size": 100"#;
    let cases = [
        (deberta, r#""share_att_key": true, "conv_kernel_size": 3"#, "conv_kernel_size", "convolution layer"),
        (deberta, r#""share_att_key": false"#, "share_att_key", "separate position projections"),
        (deberta, r#""share_att_key": true, "embedding_size": 16"#, "embedding_size", "other than hidden_size"),
        (deberta, r#""share_att_key": true, "norm_rel_ebd": "batch_norm""#, "norm_rel_ebd", "unsupported `batch_norm`"),
        (
            modernbert,
            r#""rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 160000}}"#,
            "rope_type",
            "rotary scaling `yarn` is not supported",
        ),
    ];
    for (base, extra, field, words) in cases {
        let json = format!("{{{base}, {extra}}}");
        let err = EncoderConfig::from_json("m/config.json", &json).unwrap_err().to_string();
        assert!(err.contains("m/config.json") && err.contains(field) && err.contains(words), "{extra}: {err}");
    }
    // The same configs without the option load.
    for base in [format!("{{{deberta}, \"share_att_key\": true}}"), format!("{{{modernbert}}}")] {
        EncoderConfig::from_json("m/config.json", &base).unwrap();
    }
}
