//! `medrank quantize`: an int8 copy of a model folder (FORMATS.md §8) and the measured cost
//! of it, so that nobody has to assume the 8-bit encoder is as good as the f32 one:
//! - the cosine of each text's int8 embedding with its f32 embedding (the example texts);
//! - the evaluate accuracy of both on a dev file (the CasiMedicos dev bundle);
//! - the order of the systems of argument bundles (the examples) under both.
//!
//! The figures are printed and kept in the folder's `quantization.json`.

use super::evaluate::{evaluate_with_model, EvaluateRequest, ModelOptions};
use super::workload::{workload_accuracy, workload_bundle};
use super::{model_fingerprints, NamedText};
use crate::eval::proxy::ProxyOptions;
use crate::model::load::{int8_tensor_names, to_named_tensors, write_raw_safetensors, RawTensor};
use crate::model::{ModelFiles, Precision, TextModel};
use crate::report::Provenance;
use crate::{Error, Result, Warning};
use serde::Serialize;

/// What to quantize and what to measure it on.
pub struct QuantizeRequest<'a> {
    pub model: &'a ModelFiles,
    /// Texts whose embeddings are compared (one per line of each file).
    pub texts: Vec<NamedText>,
    /// A dev file in the HiTZ MCQA format (CasiMedicos), evaluated with both precisions.
    pub dev: Option<NamedText>,
    /// Argument bundles whose system order is compared.
    pub bundles: Vec<NamedText>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QuantizeReport {
    pub provenance: Provenance,
    /// "medrank-int8/1": the format of FORMATS.md §8.
    pub format: String,
    pub weights: String,
    pub activations: String,
    /// Tensors stored as int8 (with a `.weight_scale` beside each).
    pub int8_tensors: Vec<String>,
    pub f32_bytes: usize,
    pub int8_bytes: usize,
    pub embeddings: Option<EmbeddingCheck>,
    pub dev: Option<DevCheck>,
    pub system_order: Vec<OrderCheck>,
    pub warnings: Vec<Warning>,
}

/// int8 against f32 embeddings of the same texts.
#[derive(Debug, Clone, Serialize)]
pub struct EmbeddingCheck {
    pub texts: usize,
    pub worst_cosine: f64,
    pub mean_cosine: f64,
    /// The text with the worst cosine (file and line).
    pub worst_text: String,
}

/// The dev file's accuracy under both precisions.
#[derive(Debug, Clone, Serialize)]
pub struct DevCheck {
    pub file: String,
    pub instances: usize,
    pub f32_accuracy: f64,
    pub int8_accuracy: f64,
}

/// One task of one bundle: its systems best first under each precision (ties by name),
/// and how the two orders differ: pairs one precision ranks strictly and the other the
/// opposite way (`reversed`), and pairs tied in one precision and not in the other.
#[derive(Debug, Clone, Serialize)]
pub struct OrderCheck {
    pub bundle: String,
    pub task: String,
    pub f32_order: Vec<String>,
    pub int8_order: Vec<String>,
    /// The same ranks, ties included.
    pub same: bool,
    pub reversed: Vec<(String, String)>,
    /// Tied under f32, apart under int8.
    pub f32_ties_broken: Vec<(String, String)>,
    /// Apart under f32, tied under int8.
    pub int8_ties_made: Vec<(String, String)>,
}

/// Compares two rankings of the same systems, given as (system, rank).
fn compare_orders(a: &[(String, f64)], b: &[(String, f64)]) -> (bool, [Vec<(String, String)>; 3]) {
    let rank_b = |name: &str| b.iter().find(|(s, _)| s == name).map(|(_, r)| *r);
    let (mut reversed, mut broken, mut made) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (x, rx)) in a.iter().enumerate() {
        for (y, ry) in &a[i + 1..] {
            let (Some(bx), Some(by)) = (rank_b(x), rank_b(y)) else { continue };
            let pair = (x.clone(), y.clone());
            match (rx.total_cmp(ry), bx.total_cmp(&by)) {
                (std::cmp::Ordering::Equal, std::cmp::Ordering::Equal) => {}
                (std::cmp::Ordering::Equal, _) => broken.push(pair),
                (_, std::cmp::Ordering::Equal) => made.push(pair),
                (p, q) if p != q => reversed.push(pair),
                _ => {}
            }
        }
    }
    let same = reversed.is_empty() && broken.is_empty() && made.is_empty() && a.len() == b.len();
    (same, [reversed, broken, made])
}

/// The int8 `model.safetensors` of a loaded model: the tensors of [`int8_tensor_names`]
/// quantized per row with their scales, every other tensor as f32.
pub fn int8_safetensors(model: &crate::model::LoadedModel) -> Result<Vec<u8>> {
    let int8 = int8_tensor_names(&model.config);
    let mut raw = Vec::new();
    for (name, tensor) in to_named_tensors(model) {
        let dims = tensor.dims().to_vec();
        let values: Vec<f32> = tensor.to_dtype(candle_core::DType::F32)?.flatten_all()?.to_vec1()?;
        if int8.contains(&name) && dims.len() == 2 {
            let (q, scales) = crate::model::quant::quantize_weight_rows(&values, dims[1]);
            let stem = name.strip_suffix(".weight").expect("int8 names are weights");
            raw.push(RawTensor::f32(
                format!("{stem}{}", crate::model::load::INT8_SCALE_SUFFIX),
                vec![dims[0]],
                &scales,
            ));
            raw.push(RawTensor::i8(name, dims, &q));
        } else {
            raw.push(RawTensor::f32(name, dims, &values));
        }
    }
    write_raw_safetensors(raw)
}

/// A folder's files: (name inside the folder, bytes).
pub type FolderFiles = Vec<(String, Vec<u8>)>;

/// Each task of a bundle with its systems, best first.
type TaskOrders = Vec<(String, Vec<(String, f64)>)>;

/// Quantize the folder's model and measure the int8 encoder against the f32 one. Returns
/// the files of the int8 folder (the f32 folder's other files unchanged, `model.safetensors`
/// int8, `quantization.json` the report) and the report.
pub fn quantize_model(req: &QuantizeRequest) -> Result<(FolderFiles, QuantizeReport)> {
    // A texts file asked for compares something, or says why it cannot (an empty one was
    // reported as "not compared (no --texts)").
    if let Some(empty) = req.texts.iter().find(|t| t.text.lines().all(|l| l.trim().is_empty())) {
        return Err(Error::in_file(&empty.name, "no text to compare: the file has no non-blank line"));
    }
    let f32_model = TextModel::from_files(req.model)?;
    if f32_model.encoder.model.precision == Precision::Int8 {
        return Err(Error::invalid(format!(
            "{}: this folder is already int8 (its model.safetensors holds int8 weights); quantize the f32 folder it came from",
            req.model.name
        )));
    }
    let weights = int8_safetensors(&f32_model.encoder.model)?;
    // The int8 model as a user will load it: from the bytes written, not from memory.
    let int8_files = ModelFiles { weights: weights.clone(), weights_source: None, ..req.model.clone() };
    let int8_model = TextModel::from_files(&int8_files)?;
    assert_eq!(int8_model.encoder.model.precision, Precision::Int8, "int8 weights load as int8");

    let mut provenance = Provenance::new(0);
    for fp in model_fingerprints(req.model) {
        provenance = provenance.input(fp);
    }
    for t in req.texts.iter().chain(&req.dev).chain(&req.bundles) {
        provenance = provenance.input(t.fingerprint());
    }
    provenance = provenance.convention("precision", crate::model::describe_precision(Precision::Int8));
    let embeddings = embedding_check(&f32_model, &int8_model, &req.texts)?;
    let dev = req.dev.as_ref().map(|dev| dev_check(&f32_model, &int8_model, dev)).transpose()?;
    let mut system_order = Vec::new();
    let mut warnings = Vec::new();
    for bundle in &req.bundles {
        let (orders, w) = order_check(&f32_model, &int8_model, bundle)?;
        system_order.extend(orders);
        warnings.extend(w);
    }
    let report = QuantizeReport {
        provenance,
        format: "medrank-int8/1".into(),
        weights: "int8, symmetric per output channel (row of the [out, in] weight), scale = max|w| / 127".into(),
        activations: "quantized at run time: per token row, 7-bit asymmetric over [min(x, 0), max(x, 0)], i32 sums"
            .into(),
        int8_tensors: int8_tensor_names(&f32_model.encoder.model.config),
        f32_bytes: req.model.weights.len(),
        int8_bytes: weights.len(),
        embeddings,
        dev,
        system_order,
        warnings,
    };
    let mut files = vec![
        ("config.json".to_string(), req.model.config_json.clone()),
        ("tokenizer.json".to_string(), req.model.tokenizer_json.clone()),
        ("model.safetensors".to_string(), weights),
    ];
    let optional = [
        ("1_Pooling/config.json", &req.model.pooling_json),
        ("modules.json", &req.model.modules_json),
        ("sentence_bert_config.json", &req.model.sentence_config_json),
    ];
    for (name, bytes) in optional {
        if let Some(b) = bytes {
            files.push((name.to_string(), b.clone()));
        }
    }
    files.push(("quantization.json".into(), serde_json::to_vec_pretty(&report).expect("serialisable")));
    Ok((files, report))
}

fn embedding_check(
    f32_model: &TextModel,
    int8_model: &TextModel,
    texts: &[NamedText],
) -> Result<Option<EmbeddingCheck>> {
    let lines: Vec<(String, &str)> = texts
        .iter()
        .flat_map(|t| {
            t.text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| (format!("{}:{}", t.name, i + 1), l))
        })
        .collect();
    if lines.is_empty() {
        return Ok(None);
    }
    let texts: Vec<&str> = lines.iter().map(|(_, l)| *l).collect();
    let line = |i: usize| lines[i].0.clone();
    let a = crate::model::embed_lines(f32_model, &texts).map_err(|e| e.naming_input(&f32_model.name, line))?;
    let int8_name = format!("{} quantized to int8", int8_model.name);
    let b = crate::model::embed_lines(int8_model, &texts).map_err(|e| e.naming_input(&int8_name, line))?;
    let cos: Vec<f64> = a.iter().zip(&b).map(|(x, y)| crate::model::pooling::cosine(x, y) as f64).collect();
    crate::model::finite::scores("cosine of its int8 and f32 embeddings", &cos)
        .map_err(|e| e.naming_input(&f32_model.name, line))?;
    let (worst, worst_cosine) =
        cos.iter().enumerate().fold((0, f64::INFINITY), |(wi, w), (i, &c)| if c < w { (i, c) } else { (wi, w) });
    Ok(Some(EmbeddingCheck {
        texts: cos.len(),
        worst_cosine,
        mean_cosine: cos.iter().sum::<f64>() / cos.len() as f64,
        worst_text: lines[worst].0.clone(),
    }))
}

fn dev_check(f32_model: &TextModel, int8_model: &TextModel, dev: &NamedText) -> Result<DevCheck> {
    let req =
        EvaluateRequest::of_bundle(workload_bundle(dev)?, ProxyOptions { controls: Vec::new(), ..Default::default() });
    let accuracy = |model: &TextModel| -> Result<(f64, usize)> {
        let (outcome, _) = evaluate_with_model(&req, model, Vec::new(), &ModelOptions::default())?;
        let instances = outcome.report.evaluators.first().and_then(|e| e.report.tasks.first()).map(|t| t.n_instances);
        match (workload_accuracy(&outcome.report), instances) {
            (Some(x), Some(n)) => Ok((x, n)),
            _ => Err(Error::invalid(format!("{}: no accuracy came out of the dev file", dev.name))),
        }
    };
    let (f32_accuracy, instances) = accuracy(f32_model)?;
    let (int8_accuracy, _) = accuracy(int8_model)?;
    Ok(DevCheck { file: dev.name.clone(), instances, f32_accuracy, int8_accuracy })
}

fn order_check(
    f32_model: &TextModel,
    int8_model: &TextModel,
    bundle: &NamedText,
) -> Result<(Vec<OrderCheck>, Vec<Warning>)> {
    let req = EvaluateRequest {
        bundle: bundle.clone(),
        predictions: Vec::new(),
        rankings: None,
        corpus: None,
        options: ProxyOptions::default(),
    };
    let order = |model: &TextModel| -> Result<(TaskOrders, Vec<Warning>)> {
        let (outcome, _) = evaluate_with_model(&req, model, Vec::new(), &ModelOptions::default())?;
        let tasks = outcome
            .report
            .evaluators
            .iter()
            .flat_map(|e| &e.report.tasks)
            .map(|t| {
                let mut systems: Vec<&crate::eval::proxy::SystemScore> = t.systems.iter().collect();
                systems.sort_by(|a, b| a.rank.total_cmp(&b.rank).then_with(|| a.system.cmp(&b.system)));
                (t.task.name().to_string(), systems.iter().map(|s| (s.system.clone(), s.rank)).collect())
            })
            .collect();
        Ok((tasks, outcome.report.warnings))
    };
    let (a, warnings) = order(f32_model)?;
    let (b, _) = order(int8_model)?;
    let checks = a
        .into_iter()
        .zip(b)
        .map(|((task, f32_ranks), (_, int8_ranks))| {
            let (same, [reversed, f32_ties_broken, int8_ties_made]) = compare_orders(&f32_ranks, &int8_ranks);
            let names = |ranks: Vec<(String, f64)>| ranks.into_iter().map(|(s, _)| s).collect();
            OrderCheck {
                bundle: bundle.name.clone(),
                task,
                f32_order: names(f32_ranks),
                int8_order: names(int8_ranks),
                same,
                reversed,
                f32_ties_broken,
                int8_ties_made,
            }
        })
        .collect();
    Ok((checks, warnings))
}

#[cfg(test)]
mod tests {
    use super::compare_orders;

    #[test]
    fn a_texts_file_without_text_is_refused_naming_it() {
        // It was reported as "not compared (no --texts)", as if none had been given.
        let model = crate::model::ModelFiles::default();
        for empty in ["", "\n  \n\t\n"] {
            let req = super::QuantizeRequest {
                model: &model,
                texts: vec![super::NamedText::new("empty.txt", empty)],
                dev: None,
                bundles: Vec::new(),
            };
            let e = super::quantize_model(&req).err().unwrap().to_string();
            assert_eq!(e, "empty.txt: no text to compare: the file has no non-blank line");
        }
    }

    #[test]
    fn orders_differ_by_reversed_pairs_and_ties() {
        let r = |v: &[(&str, f64)]| v.iter().map(|(s, r)| (s.to_string(), *r)).collect::<Vec<_>>();
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        // f32: a 1, b 2, c 3.5, d 3.5; int8: a 1, b 3, c 2, d 4 -> (b, c) reversed,
        // (c, d) tie broken, nothing tied by int8.
        let (same, [reversed, broken, made]) = compare_orders(
            &r(&[("a", 1.0), ("b", 2.0), ("c", 3.5), ("d", 3.5)]),
            &r(&[("a", 1.0), ("c", 2.0), ("b", 3.0), ("d", 4.0)]),
        );
        assert!(!same);
        assert_eq!(reversed, [pair("b", "c")]);
        assert_eq!(broken, [pair("c", "d")]);
        assert!(made.is_empty());
        let (same, lists) = compare_orders(&r(&[("a", 1.5), ("b", 1.5)]), &r(&[("b", 1.5), ("a", 1.5)]));
        assert!(same && lists.iter().all(Vec::is_empty));
        let (same, [_, _, made]) = compare_orders(&r(&[("a", 1.0), ("b", 2.0)]), &r(&[("a", 1.5), ("b", 1.5)]));
        assert!(!same);
        assert_eq!(made, [pair("a", "b")]);
    }
}
