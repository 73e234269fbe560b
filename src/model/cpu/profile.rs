//! Where the CPU path's time goes, step by step: the benchmarks (`medrank bench` and the
//! bench page, through the same `gpu::bench::bench_encoder`) switch it on around their timed
//! passes and report the seconds of each step. Comparing the page's steps with the native
//! ones shows which kernel holds the page back, which a whole-pass figure cannot.
//!
//! Off (one relaxed atomic load per step) unless a benchmark turns it on. Seconds are summed
//! over the threads that ran the step, so with N threads they add up to about N times the
//! wall-clock time of the layers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The steps of one encoder pass on the CPU path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Word + position + type embeddings and their LayerNorm (candle ops).
    Embeddings,
    /// The fused q, k, v projection.
    Qkv,
    /// Scores, softmax and the weighted sum of values.
    Attention,
    /// The attention output projection.
    AttentionOutput,
    /// Both residual additions with their LayerNorm.
    AddNorm,
    /// The feed-forward input projection.
    FeedForwardIn,
    /// GELU (or the model's activation).
    Activation,
    /// The feed-forward output projection.
    FeedForwardOut,
}

impl Step {
    pub const ALL: [Step; 8] = [
        Step::Embeddings,
        Step::Qkv,
        Step::Attention,
        Step::AttentionOutput,
        Step::AddNorm,
        Step::FeedForwardIn,
        Step::Activation,
        Step::FeedForwardOut,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::Embeddings => "embeddings",
            Step::Qkv => "qkv projection",
            Step::Attention => "attention",
            Step::AttentionOutput => "attention output",
            Step::AddNorm => "add + layer norm",
            Step::FeedForwardIn => "feed-forward in",
            Step::Activation => "activation",
            Step::FeedForwardOut => "feed-forward out",
        }
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static NANOS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

/// Seconds since an arbitrary origin, on any thread: `Instant` natively, the worker's
/// `performance.now()` in the page (`Instant` is not implemented on wasm32).
#[cfg(not(target_arch = "wasm32"))]
fn now() -> f64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

#[cfg(target_arch = "wasm32")]
fn now() -> f64 {
    performance_now() / 1000.0
}

/// Run `f` as `step` on this thread, adding its time when profiling is on.
#[inline]
pub fn time<R>(step: Step, f: impl FnOnce() -> R) -> R {
    time_on(step, 1, f)
}

/// Run `f` as `step` that keeps `threads` threads busy (a product split over the pool):
/// its wall-clock time counts `threads` times.
#[inline]
pub fn time_on<R>(step: Step, threads: usize, f: impl FnOnce() -> R) -> R {
    if !ON.load(Ordering::Relaxed) {
        return f();
    }
    let start = now();
    let out = f();
    NANOS[step as usize].fetch_add(((now() - start) * 1e9 * threads as f64) as u64, Ordering::Relaxed);
    out
}

/// Clear the counters and start (or stop) adding to them.
pub fn start(on: bool) {
    for n in &NANOS {
        n.store(0, Ordering::Relaxed);
    }
    ON.store(on, Ordering::Relaxed);
}

/// Stop profiling and return the seconds of each step since [`start`] (every step, in
/// [`Step::ALL`] order, zeros included).
pub fn stop() -> Vec<(Step, f64)> {
    ON.store(false, Ordering::Relaxed);
    Step::ALL.iter().map(|&s| (s, NANOS[s as usize].load(Ordering::Relaxed) as f64 / 1e9)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_adds_nothing_and_on_adds_the_time_of_the_step() {
        // Other tests may run the CPU path meanwhile: they can only add to the counters
        // while this one has them on, so only lower bounds hold for the steps.
        start(false);
        time(Step::Qkv, || std::thread::sleep(std::time::Duration::from_millis(5)));
        assert!(stop().iter().all(|&(_, s)| s == 0.0));
        start(true);
        time(Step::Attention, || std::thread::sleep(std::time::Duration::from_millis(20)));
        let steps = stop();
        let attention = steps.iter().find(|(s, _)| *s == Step::Attention).unwrap().1;
        assert!(attention >= 0.020, "slept 20 ms, counted {attention}");
        assert_eq!(steps.len(), Step::ALL.len());
        // Stopped: the counters stay as they are.
        time(Step::Attention, || ());
        assert_eq!(stop().iter().find(|(s, _)| *s == Step::Attention).unwrap().1, attention);
    }
}
