//! Choosing the backend: the GPU when an adapter exists, the CPU otherwise, or whichever the
//! user forces. The result says which backend ran and why, for reports and the page.

use super::context::GpuContext;
use super::encoder::GpuEncoder;
use crate::error::{Error, Result};
pub use crate::error::{GpuNotUsed, GpuUnavailable};
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
    /// Why the CPU runs when the GPU was not forced (written as its technical reason, e.g.
    /// "no WebGPU/wgpu adapter: ...").
    #[serde(rename = "fallback_reason", skip_serializing_if = "Option::is_none", serialize_with = "reason_only")]
    pub fallback: Option<GpuNotUsed>,
}

fn reason_only<S: serde::Serializer>(not_used: &Option<GpuNotUsed>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match not_used {
        Some(n) => s.serialize_str(&n.reason),
        None => s.serialize_none(),
    }
}

/// Why the CPU ran when an int8 model was not forced onto the GPU.
const INT8_ON_THE_CPU: &str =
    "int8 precision runs on the CPU path (the GPU kernels are f32); choose f32 to use the GPU";

impl GpuNotUsed {
    /// Why the CPU ran, in a sentence for a clinician.
    pub fn fallback_in_words(&self) -> &'static str {
        match self.why {
            GpuUnavailable::Int8 => "8-bit (int8) arithmetic runs on the processor (CPU) only, so the model ran there.",
            GpuUnavailable::SoftwareAdapter => {
                "This computer offers only a software stand-in for a graphics card, slower than the processor, so the \
                 model ran on the processor (CPU); the results are the same."
            }
            GpuUnavailable::NoAdapter => {
                "No graphics card (GPU) was available to this page, so the model ran on the processor (CPU); the \
                 results are the same, only slower."
            }
            GpuUnavailable::Setup => {
                "The model could not be set up on this computer's graphics card (GPU), so it ran on the processor \
                 (CPU); the results are the same, only slower."
            }
        }
    }

    /// The GPU refusing a forced run, in a clinician's sentence; None where only the
    /// technical reason says what happened (the model could not be set up on the GPU).
    pub fn refusal_in_words(&self) -> Option<&'static str> {
        match self.why {
            GpuUnavailable::Int8 => Some(
                "You chose the GPU, but 8-bit (int8) arithmetic runs on the processor (CPU) only: choose the CPU (or \
                 \u{201c}auto\u{201d}) where the model runs, or 32-bit arithmetic.",
            ),
            GpuUnavailable::NoAdapter => Some(
                "You chose the GPU, but no graphics card (GPU) is available to this page: choose \u{201c}auto\u{201d} \
                 or the CPU where the model runs (the results are the same, only slower).",
            ),
            // A forced GPU takes a software adapter; a setup error is the engine's to say.
            GpuUnavailable::SoftwareAdapter | GpuUnavailable::Setup => None,
        }
    }
}

impl BackendReport {
    /// Why the CPU ran, in a sentence for a clinician (the page shows it with the technical
    /// reason behind a disclosure): None when nothing fell back.
    pub fn fallback_in_words(&self) -> Option<&'static str> {
        self.fallback.as_ref().map(GpuNotUsed::fallback_in_words)
    }

    /// The technical reason the CPU ran, when it was a fallback.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_ref().map(|n| n.reason.as_str())
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
    let cpu = |model: LoadedModel, fallback: Option<GpuNotUsed>| {
        let report = BackendReport { backend: "cpu".into(), device: "candle".into(), fallback };
        (AnyEncoder::Cpu(CpuEncoder::new(model)), report)
    };
    // The GPU cannot run: a forced GPU is an error, Auto runs on the CPU and says why.
    let not_used = |model: LoadedModel, why: GpuUnavailable, reason: String| match choice {
        BackendChoice::Gpu => Err(Error::GpuRefused(GpuNotUsed { why, reason })),
        _ => Ok(cpu(model, Some(GpuNotUsed { why, reason }))),
    };
    if choice == BackendChoice::Cpu {
        return Ok(cpu(model, None));
    }
    // The int8 products are CPU kernels (wasm SIMD, AVX2, VNNI); the GPU path is f32 only.
    if model.precision == crate::model::Precision::Int8 {
        return not_used(model, GpuUnavailable::Int8, INT8_ON_THE_CPU.into());
    }
    let context = match gpu() {
        Ok(context) => context,
        Err(e) => return not_used(model, GpuUnavailable::NoAdapter, e.to_string()),
    };
    // Auto means "faster": a software adapter (lavapipe, SwiftShader) is correct but far
    // slower than the CPU path, so Auto only takes a hardware adapter; Gpu takes any.
    if choice == BackendChoice::Auto && context.adapter.is_fallback {
        let reason = format!(
            "only a software adapter ({}), slower than the CPU path; choose the GPU explicitly to use it anyway",
            context.adapter
        );
        return not_used(model, GpuUnavailable::SoftwareAdapter, reason);
    }
    match GpuEncoder::with_context(context, &model) {
        Ok(encoder) => {
            let report =
                BackendReport { backend: "gpu".into(), device: encoder.context().adapter.to_string(), fallback: None };
            Ok((AnyEncoder::Gpu(Box::new(encoder)), report))
        }
        Err(e) => not_used(model, GpuUnavailable::Setup, e.to_string()),
    }
}

/// [`select_encoder`] on this thread's GPU device (awaits the adapter; never blocks).
pub async fn open_encoder(model: LoadedModel, choice: BackendChoice) -> Result<(AnyEncoder, BackendReport)> {
    // int8 never runs on the GPU (select_encoder refuses or falls back): no adapter to open.
    let wanted = choice != BackendChoice::Cpu && model.precision != crate::model::Precision::Int8;
    let gpu = if wanted { Some(kept_context().await) } else { None };
    select_encoder(model, choice, move || gpu.unwrap_or_else(|| Err(Error::model("not requested"))))
}

thread_local! {
    /// The device the encoders of this thread (the page's worker: one per job and model)
    /// open on, kept with the kernels it compiled: a device per encoder compiled every
    /// kernel again (seconds on a software adapter). Opened again once lost.
    static KEPT_CONTEXT: std::cell::RefCell<Option<GpuContext>> = const { std::cell::RefCell::new(None) };
}

/// This thread's GPU device, opened on first use (an adapter that is missing is asked for
/// again next time).
async fn kept_context() -> Result<GpuContext> {
    if let Some(ctx) = KEPT_CONTEXT.with(|k| k.borrow().clone()).filter(|c| !c.is_lost()) {
        return Ok(ctx);
    }
    let ctx = GpuContext::new().await?;
    KEPT_CONTEXT.with(|k| *k.borrow_mut() = Some(ctx.clone()));
    Ok(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fell_back(why: GpuUnavailable) -> BackendReport {
        let fallback = Some(GpuNotUsed { why, reason: "the technical reason".into() });
        BackendReport { backend: "cpu".into(), device: "candle".into(), fallback }
    }

    #[test]
    fn why_the_cpu_ran_is_said_in_words_without_the_adapters_jargon() {
        use GpuUnavailable::*;
        let words = |why| fell_back(why).fallback_in_words().unwrap();
        assert_eq!(words(Int8), "8-bit (int8) arithmetic runs on the processor (CPU) only, so the model ran there.");
        assert!(words(NoAdapter).starts_with("No graphics card (GPU) was available to this page"));
        assert!(words(SoftwareAdapter).starts_with("This computer offers only a software stand-in"));
        assert!(words(Setup).starts_with("The model could not be set up on this computer's graphics card"));
        for why in [Int8, NoAdapter, SoftwareAdapter, Setup] {
            let sentence = words(why);
            assert!(!sentence.contains("wgpu") && !sentence.contains("choose f32"), "{sentence}");
        }
        // The report writes the technical reason, as before the kind was kept beside it.
        let json = serde_json::to_value(fell_back(Int8)).unwrap();
        assert_eq!(json["fallback_reason"], "the technical reason");
        // A forced GPU that cannot run: the sentence the page shows, or none where only the
        // engine's words say what failed.
        let refused = |why| GpuNotUsed { why, reason: String::new() }.refusal_in_words();
        assert!(refused(Int8)
            .unwrap()
            .starts_with("You chose the GPU, but 8-bit (int8) arithmetic runs on the processor"));
        assert!(refused(NoAdapter).unwrap().starts_with("You chose the GPU, but no graphics card (GPU) is available"));
        assert_eq!(refused(Setup), None);
        let ran_on_gpu = BackendReport { backend: "gpu".into(), device: "a GPU".into(), fallback: None };
        assert_eq!((ran_on_gpu.fallback_in_words(), ran_on_gpu.fallback_reason()), (None, None));
        assert!(serde_json::to_value(ran_on_gpu).unwrap().get("fallback_reason").is_none());
    }
}
