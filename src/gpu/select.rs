//! Choosing the backend: the GPU when an adapter exists, the CPU otherwise, or whichever the
//! user forces. The result says which backend ran and why, for reports and the page.

use super::context::GpuContext;
use super::encoder::GpuEncoder;
use crate::error::{Error, Result};
use crate::model::{CpuEncoder, Encoder, EncoderConfig, HiddenStates, LoadedModel, Readout, TokenBatch};

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendChoice {
    /// A hardware GPU when one is found, the CPU otherwise (a software adapter is slower
    /// than the CPU path, so Auto does not take it).
    Auto,
    Cpu,
    /// The GPU or an error (never a silent CPU run).
    Gpu,
}

/// Which backend runs, on what, and why (shown next to every result).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BackendReport {
    /// "gpu" or "cpu".
    pub backend: String,
    /// The adapter (GPU) or "candle" (CPU).
    pub device: String,
    /// Why the CPU runs when the GPU was not forced: e.g. "no WebGPU/wgpu adapter: ...".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
}

/// Why the CPU ran when an int8 model was not forced onto the GPU.
const INT8_ON_THE_CPU: &str =
    "int8 precision runs on the CPU path (the GPU kernels are f32); choose f32 to use the GPU";
/// The start of the reason Auto gives for leaving a software adapter alone.
const SOFTWARE_ADAPTER: &str = "only a software adapter";
/// The start of the error when the GPU was forced and cannot run.
const GPU_REFUSED: &str = "the GPU backend was requested but cannot run";

/// A model error that is the GPU refusing a forced run, in a clinician's sentence (the page
/// shows it with the error's own words behind a disclosure); None for any other error.
pub fn refusal_in_words(model_error: &str) -> Option<&'static str> {
    let why = model_error.strip_prefix(GPU_REFUSED)?.trim_start_matches(": ");
    Some(if why == INT8_ON_THE_CPU {
        "You chose the GPU, but 8-bit (int8) arithmetic runs on the processor (CPU) only: choose the CPU (or \
         \u{201c}auto\u{201d}) where the model runs, or 32-bit arithmetic."
    } else {
        "You chose the GPU, but no graphics card (GPU) is available to this page: choose \u{201c}auto\u{201d} or \
         the CPU where the model runs (the results are the same, only slower)."
    })
}

impl BackendReport {
    /// Why the CPU ran, in a sentence for a clinician (the page shows it with the technical
    /// reason behind a disclosure): None when nothing fell back.
    pub fn fallback_in_words(&self) -> Option<&'static str> {
        let reason = self.fallback_reason.as_deref()?;
        Some(if reason == INT8_ON_THE_CPU {
            "8-bit (int8) arithmetic runs on the processor (CPU) only, so the model ran there."
        } else if reason.starts_with(SOFTWARE_ADAPTER) {
            "This computer offers only a software stand-in for a graphics card, slower than the processor, so the \
             model ran on the processor (CPU); the results are the same."
        } else {
            "No graphics card (GPU) was available to this page, so the model ran on the processor (CPU); the \
             results are the same, only slower."
        })
    }
}

/// Either backend behind the one [`Encoder`] interface. (One exists per opened model, so the
/// CPU variant's size does not matter.)
#[allow(clippy::large_enum_variant)]
pub enum AnyEncoder {
    Cpu(CpuEncoder),
    Gpu(Box<GpuEncoder>),
}

impl Encoder for AnyEncoder {
    fn config(&self) -> &EncoderConfig {
        match self {
            AnyEncoder::Cpu(e) => e.config(),
            AnyEncoder::Gpu(e) => e.config(),
        }
    }

    async fn encode(&self, batch: &TokenBatch, output_layer: usize) -> Result<HiddenStates> {
        match self {
            AnyEncoder::Cpu(e) => e.encode(batch, output_layer).await,
            AnyEncoder::Gpu(e) => e.encode(batch, output_layer).await,
        }
    }

    fn bytes_read_back(&self) -> Option<u64> {
        match self {
            AnyEncoder::Cpu(e) => e.bytes_read_back(),
            AnyEncoder::Gpu(e) => e.bytes_read_back(),
        }
    }

    async fn read_out(&self, batch: &TokenBatch, readout: Readout) -> Result<Vec<Vec<f32>>> {
        match self {
            AnyEncoder::Cpu(e) => e.read_out(batch, readout).await,
            AnyEncoder::Gpu(e) => e.read_out(batch, readout).await,
        }
    }
}

/// Builds the encoder `choice` asks for, given the outcome of opening the GPU (`gpu` is
/// only looked at when the choice allows the GPU). Separate from [`open_encoder`] so the
/// fallback is testable on a machine that has an adapter.
pub fn select_encoder(
    model: LoadedModel,
    choice: BackendChoice,
    gpu: impl FnOnce() -> Result<GpuContext>,
) -> Result<(AnyEncoder, BackendReport)> {
    let cpu = |model: LoadedModel, reason: Option<String>| {
        let report = BackendReport { backend: "cpu".into(), device: "candle".into(), fallback_reason: reason };
        (AnyEncoder::Cpu(CpuEncoder::new(model)), report)
    };
    if choice == BackendChoice::Cpu {
        return Ok(cpu(model, None));
    }
    // The int8 products are CPU kernels (wasm SIMD, AVX2, VNNI); the GPU path is f32 only.
    if model.precision == crate::model::Precision::Int8 {
        let why = INT8_ON_THE_CPU;
        return match choice {
            BackendChoice::Gpu => Err(Error::model(format!("{GPU_REFUSED}: {why}"))),
            _ => Ok(cpu(model, Some(why.into()))),
        };
    }
    // Auto means "faster": a software adapter (lavapipe, SwiftShader) is correct but far
    // slower than the CPU path, so Auto only takes a hardware adapter; Gpu takes any.
    let opened = gpu().and_then(|ctx| {
        if choice == BackendChoice::Auto && ctx.adapter.is_fallback {
            return Err(Error::model(format!(
                "{SOFTWARE_ADAPTER} ({}), slower than the CPU path; choose the GPU explicitly to use it anyway",
                ctx.adapter
            )));
        }
        GpuEncoder::with_context(ctx, &model)
    });
    match (opened, choice) {
        (Ok(encoder), _) => {
            let report = BackendReport {
                backend: "gpu".into(),
                device: encoder.context().adapter.to_string(),
                fallback_reason: None,
            };
            Ok((AnyEncoder::Gpu(Box::new(encoder)), report))
        }
        (Err(e), BackendChoice::Gpu) => Err(Error::model(format!("{GPU_REFUSED}: {e}"))),
        (Err(e), _) => Ok(cpu(model, Some(e.to_string()))),
    }
}

/// [`select_encoder`] opening the GPU itself (awaits the adapter; never blocks).
pub async fn open_encoder(model: LoadedModel, choice: BackendChoice) -> Result<(AnyEncoder, BackendReport)> {
    // int8 never runs on the GPU (select_encoder refuses or falls back): no adapter to open.
    let wanted = choice != BackendChoice::Cpu && model.precision != crate::model::Precision::Int8;
    let gpu = if wanted { Some(GpuContext::new().await) } else { None };
    select_encoder(model, choice, move || gpu.unwrap_or_else(|| Err(Error::model("not requested"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fell_back(reason: &str) -> BackendReport {
        BackendReport { backend: "cpu".into(), device: "candle".into(), fallback_reason: Some(reason.into()) }
    }

    #[test]
    fn why_the_cpu_ran_is_said_in_words_without_the_adapters_jargon() {
        let words = |reason: &str| fell_back(reason).fallback_in_words().unwrap();
        assert_eq!(
            words(INT8_ON_THE_CPU),
            "8-bit (int8) arithmetic runs on the processor (CPU) only, so the model ran there."
        );
        // wgpu's own error on a machine without an adapter (the words).
        let none = words("no WebGPU/wgpu adapter: noop support not compiled in, vulkan support not compiled in");
        assert!(none.starts_with("No graphics card (GPU) was available to this page"), "{none}");
        let software = words("only a software adapter (llvmpipe), slower than the CPU path; choose the GPU explicitly");
        assert!(software.starts_with("This computer offers only a software stand-in"), "{software}");
        for sentence in [none, software, words(INT8_ON_THE_CPU)] {
            assert!(!sentence.contains("wgpu") && !sentence.contains("choose f32"), "{sentence}");
        }
        // A forced GPU that cannot run: the error's words, and the sentence the page shows.
        let int8 = refusal_in_words(&format!("{GPU_REFUSED}: {INT8_ON_THE_CPU}")).unwrap();
        assert!(int8.starts_with("You chose the GPU, but 8-bit (int8) arithmetic runs on the processor"), "{int8}");
        let none =
            refusal_in_words(&format!("{GPU_REFUSED}: model: no WebGPU/wgpu adapter: noop support not compiled in"));
        assert!(none.unwrap().starts_with("You chose the GPU, but no graphics card (GPU) is available"));
        assert_eq!(refusal_in_words("the model has no config.json"), None);
        let ran_on_gpu = BackendReport { backend: "gpu".into(), device: "a GPU".into(), fallback_reason: None };
        assert_eq!(ran_on_gpu.fallback_in_words(), None);
    }
}
