//! `medrank bench --parts train`: whole-encoder fine-tuning throughput
//! (`crate::train::bench`) on the CPU trainer and the GPU trainer, beside PyTorch's on CUDA
//! (tests/reference/torch_train_peer.py) where it runs: the issue-25 goals' figures.

use crate::report::Table;
use crate::train::bench::{train_throughput, TrainThroughput};
use crate::Result;
use serde::Serialize;
use std::path::Path;

/// Options per question: CasiMedicos's five.
const OPTIONS: usize = 5;

#[derive(Debug, Clone, Serialize)]
pub struct TrainBench {
    pub rows: Vec<TrainThroughput>,
    /// Why the GPU trainer did not run, or ran a cut grid (a software adapter).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub peer: Option<TorchTrainPeer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_skipped: Option<String>,
}

/// PyTorch's median seconds per step, per length.
#[derive(Debug, Clone, Serialize)]
pub struct TorchTrainPeer {
    pub device: String,
    pub torch: String,
    /// (length, questions/s)
    pub cells: Vec<(usize, f64)>,
}

/// Which trainers [`train_bench`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trainers {
    pub cpu: bool,
    /// The GPU trainer where there is an adapter, with PyTorch on CUDA beside it.
    pub gpu: bool,
}

/// The CPU trainer and (where there is an adapter) the GPU trainer at each of `lengths`,
/// `questions` questions of five options per step; `trainers` says which run.
pub fn train_bench(
    model_dir: &Path,
    peers_dir: &Path,
    lengths: &[usize],
    questions: usize,
    trainers: Trainers,
) -> Result<TrainBench> {
    let base = crate::model::TextModel::read_dir(model_dir)?;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let report = |r: &TrainThroughput| {
        eprintln!(
            "  {} len {} x {} questions of {OPTIONS}: {:.2} questions/s ({:.2} s a step)",
            r.backend, r.seq_len, r.questions_per_step, r.questions_per_s, r.seconds_per_step
        )
    };
    for &len in lengths.iter().filter(|_| trainers.cpu) {
        let r = train_throughput(&base, None, questions, OPTIONS, len)?;
        report(&r);
        rows.push(r);
    }
    let mut hardware_gpu = false;
    let context = match trainers.gpu {
        true => crate::gpu::context::GpuContext::new_blocking(),
        false => Err(crate::Error::model("not asked for (--train-backends)")),
    };
    match context {
        Err(e) => notes.push(format!("no GPU trainer: {e}")),
        Ok(ctx) if ctx.adapter.is_fallback => {
            // A CPU emulation of a GPU: one small shape shows it runs, its speed means nothing.
            notes.push(format!(
                "{} is a software adapter: the GPU trainer ran 2 questions at length 64 only, and its figure is CPU emulation",
                ctx.adapter.name
            ));
            let r = train_throughput(&base, Some(ctx), 2, OPTIONS, 64)?;
            report(&r);
            rows.push(r);
        }
        Ok(ctx) => {
            hardware_gpu = true;
            for &len in lengths {
                let r = train_throughput(&base, Some(ctx.clone()), questions, OPTIONS, len)?;
                report(&r);
                rows.push(r);
            }
        }
    }
    let (peer, peer_skipped) = if hardware_gpu {
        match torch_train_peer(&peers_dir.join("torch_train_peer.py"), model_dir, lengths, questions) {
            Ok(p) => (Some(p), None),
            Err(why) => (None, Some(why)),
        }
    } else {
        (None, Some("no hardware GPU: PyTorch on CUDA is not run".to_string()))
    };
    if let Some(why) = &peer_skipped {
        eprintln!("  PyTorch training peer skipped: {why}");
    }
    Ok(TrainBench { rows, notes, peer, peer_skipped })
}

/// Runs the PyTorch training peer; `Err` says why it could not.
fn torch_train_peer(
    script: &Path,
    model_dir: &Path,
    lengths: &[usize],
    questions: usize,
) -> std::result::Result<TorchTrainPeer, String> {
    let lengths_arg: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
    let (questions_arg, options_arg) = (questions.to_string(), OPTIONS.to_string());
    let args = ["--lengths", &lengths_arg.join(","), "--questions", &questions_arg, "--options", &options_arg];
    let v =
        super::peers::run_peer_script(script, model_dir, &[&args[..], &["--repeats", "3", "--warmup", "1"]].concat())?;
    let cells = v["cells"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| {
                    let len = c["seq_len"].as_u64()? as usize;
                    let mut seconds: Vec<f64> = c["seconds"].as_array()?.iter().filter_map(|x| x.as_f64()).collect();
                    if seconds.is_empty() {
                        return None;
                    }
                    Some((len, questions as f64 / crate::model::bench::median(&mut seconds)))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(TorchTrainPeer {
        device: v["device"].as_str().unwrap_or("?").to_string(),
        torch: v["torch"].as_str().unwrap_or("?").to_string(),
        cells,
    })
}

impl TrainBench {
    pub fn table(&self) -> Table {
        let mut headers = vec!["trainer", "length", "questions a step", "questions/s", "s a step", "GPU / CPU"];
        if self.peer.is_some() {
            headers.extend(["PyTorch fp32 questions/s", "medrank / PyTorch"]);
        }
        let mut t = Table::new(
            "bench_train",
            "Fine-tuning every layer (--freeze all), multiple choice of 5 options, fp32",
            &headers,
        );
        for r in &self.rows {
            let cpu = self.rows.iter().find(|c| c.backend == "cpu" && c.seq_len == r.seq_len);
            let ratio = match cpu {
                Some(c) if r.backend != "cpu" && c.questions_per_step == r.questions_per_step => {
                    format!("{:.1}", r.questions_per_s / c.questions_per_s)
                }
                _ => String::new(),
            };
            let mut row = vec![
                r.backend.clone(),
                r.seq_len.to_string(),
                r.questions_per_step.to_string(),
                format!("{:.2}", r.questions_per_s),
                format!("{:.2}", r.seconds_per_step),
                ratio,
            ];
            if let Some(p) = &self.peer {
                let peer = p.cells.iter().find(|c| c.0 == r.seq_len).map(|c| c.1);
                row.push(peer.map_or("n/a".into(), |q| format!("{q:.1}")));
                row.push(match (peer, r.backend.as_str()) {
                    (Some(q), b) if b != "cpu" => format!("{:.2}", r.questions_per_s / q),
                    _ => String::new(),
                });
            }
            t.push(row);
        }
        let mut notes = self.notes.clone();
        match (&self.peer, &self.peer_skipped) {
            (Some(p), _) => notes.push(format!(
                "PyTorch {} on {}: AutoModelForMultipleChoice of the same folder, AdamW on every parameter, TF32 and dropout off; median of 3 steps after 1 warm-up",
                p.torch, p.device
            )),
            (None, Some(why)) => notes.push(format!("no GPU peer: {why}")),
            (None, None) => {}
        }
        notes.push(format!("the CPU trainer ran on {} threads", crate::model::cpu::worker_threads().max(1)));
        t.title = format!("{}. {}", t.title, notes.join("; "));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a CUDA device (or PyTorch) the training peer says why it did not run; with
    /// one it measures the asked length.
    #[test]
    fn the_torch_training_peer_says_why_it_cannot_run() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/torch_train_peer.py");
        match torch_train_peer(&script, Path::new("models/all-MiniLM-L6-v2"), &[16], 1) {
            Err(why) => assert!(why.starts_with("PyTorch peer"), "{why}"),
            Ok(peer) => assert_eq!(peer.cells[0].0, 16),
        }
    }

    /// The synthetic questions have the asked shape and never hold the pad id.
    #[test]
    fn synthetic_questions_have_the_asked_shape() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
        let base = crate::model::TextModel::read_dir(&dir).expect("run scripts/setup.sh model");
        let qs = crate::train::bench::synthetic_questions(&base, 3, OPTIONS, 17, 1);
        assert_eq!(qs.len(), 3);
        for q in &qs {
            assert_eq!(q.inputs.len(), OPTIONS);
            assert!(q.gold < OPTIONS);
            assert!(q.inputs.iter().all(|e| e.ids.len() == 17 && e.type_ids == vec![0; 17] && !e.ids.contains(&0)));
        }
    }
}
