//! 8-bit products of the CPU inference path (`--precision int8`): the encoder's linear
//! layers with int8 weights and 7-bit activations, summed exactly in i32.
//!
//! **The scheme** (one for every build, so that every kernel computes the same integers):
//! - weights: symmetric per output channel, `q = round(w / s)`, `s = max|w| / 127`
//!   ([`quantize_weight_rows`]; made once by `medrank quantize` or at load);
//! - activations: per token row at every product, asymmetric over `[min(x, 0), max(x, 0)]`
//!   in 128 levels, `u = round(x / t) + z` in `0..=127` ([`quantize_activations`]);
//! - `y = bias + (t * s) * (sum(u * q) - z * sum(q))` per row and output, the integer sum
//!   exact, the f32 epilogue in one order ([`Int8Linear::forward`]).
//!
//! **Why 7-bit activations:** the fastest 8-bit instructions multiply an unsigned byte by a
//! signed one and add pairs of products in 16 bits: x86's `vpmaddubsw` (saturating) and
//! wasm's relaxed `i32x4.relaxed_dot_i8x16_i7x16_add_s`, which is deterministic only when
//! the second operand's top bit is clear. With activations in 0..=127 and weights in
//! -127..=127 no pair sum can leave i16 (2 x 127 x 127 = 32,258 < 32,767), so the AVX2, the
//! AVX-512 VNNI, the wasm SIMD128 (`i32x4.dot_i16x8_s`), the relaxed wasm and the portable
//! kernels all return the same sums, and the page's int8 equals the CLI's to the last bit of
//! every product. The asymmetric range spends all 128 levels on what a row holds (after
//! GELU, almost nothing below zero), which is why 7 bits measure as well as symmetric 8 bits
//! would on this model (BENCHMARKS.md). ONNX Runtime's U8S8 dynamic quantization is the
//! same idea (unsigned activations with a zero point, signed weights, reduced range where
//! `vpmaddubsw` could saturate).
//!
//! **Layout:** the weights are packed once in panels of `NR` outputs: per group of four
//! inputs (a "quad"), the four weights of each output of the panel in turn, so that one
//! 32-bit broadcast of four activations meets `NR` outputs' quads in one or two vectors. The
//! depth is padded to a multiple of four with zero weights (and zero activations). wasm's
//! SIMD128 kernel multiplies 16-bit lanes: its weights are packed widened, in pairs of
//! inputs instead of quads, and each product widens its activations once.

use super::matmul::tiles;
pub use crate::model::quant::{dequantize_rows, quantize_weight_rows};
use rayon::prelude::*;

/// Activations take `0..=ACTIVATION_MAX` (7 bits).
pub const ACTIVATION_MAX: i32 = 127;
/// The widest panel of any kernel (two AVX-512 vectors of sixteen i32 sums).
const MAX_PANEL: usize = 32;
/// The most rows of any microkernel.
const MAX_ROWS: usize = 8;
/// One microkernel call's sums: `[row][output of the panel]`.
type BlockSums = [[i32; MAX_PANEL]; MAX_ROWS];
/// Rows of A per pass over the panels (kept in L2 while the panels stream past).
const MC: usize = 256;
/// Quads (four inputs each) per pass over a panel: 96 x 4 x 32 outputs = 12 KiB of the
/// widest panel stays in L1 while every row block passes over it.
const MAX_QUADS: usize = 96;

/// Round to the nearest integer, ties to even, for |v| < 2^22: adding and subtracting
/// 1.5 x 2^23 leaves no fraction bits. Plain f32 adds give the same result in every build
/// (f32::round is a library call in wasm and would be the slowest step here).
#[inline(always)]
fn round_small(v: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (v + MAGIC) - MAGIC
}

/// Token rows quantized for a product: `rows x depth` bytes in 0..=127, each row's scale
/// `t` and zero point `z` (`x ≈ t * (u - z)`).
#[derive(Debug, Default, Clone)]
pub struct QuantizedRows {
    pub values: Vec<u8>,
    /// The same values widened to 16 bits, for the kernels that read them so
    /// ([`Int8Kernel::wide`]); empty otherwise.
    pub wide: Vec<u16>,
    pub scales: Vec<f32>,
    pub zeros: Vec<i32>,
    pub depth: usize,
}

/// Quantize `x` (`rows x cols`, row-major) per row into `out` (its memory reused), the
/// depth padded with zeros to a multiple of four.
pub fn quantize_activations(x: &[f32], rows: usize, cols: usize, out: &mut QuantizedRows) {
    assert_eq!(x.len(), rows * cols, "activation shape");
    let depth = cols.next_multiple_of(4);
    out.depth = depth;
    out.values.clear();
    out.values.resize(rows * depth, 0);
    out.scales.clear();
    out.zeros.clear();
    for (row, dst) in x.chunks_exact(cols.max(1)).take(rows).zip(out.values.chunks_exact_mut(depth)) {
        let (lo, hi) = row.iter().fold((0.0f32, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let range = hi - lo;
        let levels = ACTIVATION_MAX as f32;
        let (scale, inverse) = if range > 0.0 { (range / levels, levels / range) } else { (1.0, 0.0) };
        let zero = round_small(-lo * inverse);
        for (d, &v) in dst.iter_mut().zip(row) {
            *d = (round_small(v * inverse) + zero).clamp(0.0, levels) as u8;
        }
        out.scales.push(scale);
        out.zeros.push(zero as i32);
    }
}

/// Which 8-bit kernel this machine runs; every packed weight is laid out for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int8Kernel {
    /// Plain loops (the reference of the tests; CPUs without a kernel of their own).
    Portable,
    /// x86-64 AVX2: `vpmaddubsw` + `vpmaddwd`, 16-output panels.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 AVX-512 VNNI (with VL, on 256-bit vectors): `vpdpbusd`, 16-output panels.
    #[cfg(target_arch = "x86_64")]
    Vnni,
    /// AVX-512 VNNI on 512-bit vectors: `vpdpbusd`, 32-output panels, 8 rows.
    #[cfg(target_arch = "x86_64")]
    Vnni512,
    /// wasm SIMD128: bytes widened to i16, `i32x4.dot_i16x8_s`, 8-output panels.
    #[cfg(target_arch = "wasm32")]
    WasmDot16,
    /// wasm relaxed SIMD: `i32x4.relaxed_dot_i8x16_i7x16_add_s`, 8-output panels.
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    WasmRelaxedDot,
}

impl Int8Kernel {
    /// The fastest kernel this CPU (or this wasm build) has. Natively
    /// `MEDRANK_INT8_KERNEL=portable|avx2|vnni` picks another that the CPU has, for the
    /// benchmarks.
    pub fn this_machine() -> Int8Kernel {
        #[cfg(target_arch = "wasm32")]
        {
            #[cfg(target_feature = "relaxed-simd")]
            return Int8Kernel::WasmRelaxedDot;
            #[cfg(not(target_feature = "relaxed-simd"))]
            return Int8Kernel::WasmDot16;
        }
        #[cfg(target_arch = "x86_64")]
        {
            static CHOICE: std::sync::OnceLock<Int8Kernel> = std::sync::OnceLock::new();
            *CHOICE.get_or_init(|| {
                let available = Self::available();
                let default = *available.last().expect("portable is always there");
                match std::env::var("MEDRANK_INT8_KERNEL").as_deref() {
                    Err(_) => default,
                    Ok(asked) => available.iter().copied().find(|k| k.name() == asked).unwrap_or_else(|| {
                        eprintln!(
                            "medrank: MEDRANK_INT8_KERNEL={asked:?} is not available here ({}): using {}",
                            available.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
                            default.name()
                        );
                        default
                    }),
                }
            })
        }
        #[cfg(not(any(target_arch = "wasm32", target_arch = "x86_64")))]
        Int8Kernel::Portable
    }

    /// Every kernel this CPU can run, slowest first (the tests run them all).
    pub fn available() -> Vec<Int8Kernel> {
        #[allow(unused_mut)]
        let mut all = vec![Int8Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                all.push(Int8Kernel::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512vnni") && std::arch::is_x86_feature_detected!("avx512vl") {
                all.push(Int8Kernel::Vnni);
                all.push(Int8Kernel::Vnni512);
            }
        }
        #[cfg(target_arch = "wasm32")]
        all.push(Int8Kernel::WasmDot16);
        #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
        all.push(Int8Kernel::WasmRelaxedDot);
        all
    }

    /// How the benchmarks and reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Int8Kernel::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Vnni => "vnni",
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Vnni512 => "vnni512",
            #[cfg(target_arch = "wasm32")]
            Int8Kernel::WasmDot16 => "wasm-simd128-dot",
            #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
            Int8Kernel::WasmRelaxedDot => "wasm-relaxed-dot",
        }
    }

    /// Whether this kernel reads weights and activations widened to 16 bits (wasm's
    /// SIMD128 dot multiplies i16: widened once at load and once per product, the inner
    /// loop has no widening left), in pairs of inputs rather than quads.
    fn wide(self) -> bool {
        #[cfg(target_arch = "wasm32")]
        if self == Int8Kernel::WasmDot16 {
            return true;
        }
        false
    }

    /// Outputs per packed panel.
    fn panel(self) -> usize {
        match self {
            Int8Kernel::Portable => 8,
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Avx2 | Int8Kernel::Vnni => 16,
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Vnni512 => 32,
            #[cfg(target_arch = "wasm32")]
            Int8Kernel::WasmDot16 => 8,
            #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
            Int8Kernel::WasmRelaxedDot => 8,
        }
    }

    /// Rows per microkernel call (the accumulators that fit the vector registers).
    fn rows(self) -> usize {
        match self {
            Int8Kernel::Portable => 4,
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Avx2 => 4,
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Vnni => 6,
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Vnni512 => 8,
            #[cfg(target_arch = "wasm32")]
            Int8Kernel::WasmDot16 => 4,
            #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
            Int8Kernel::WasmRelaxedDot => 4,
        }
    }

    /// The integer sums of `m` (at most [`Self::rows`]) activation rows (`u`, `stride`
    /// bytes apart) over `quads` groups of four inputs with one packed panel (from that
    /// depth on), into `acc[r][j]` for the panel's output `j`.
    ///
    /// # Safety
    /// `u` readable for `m` rows of `4 * quads` bytes; `panel` for `4 * quads * self.panel()`;
    /// the CPU has the kernel's instructions (it came from [`Self::available`]).
    unsafe fn block(
        self,
        m: usize,
        u: *const u8,
        (stride, quads): (usize, usize),
        panel: *const i8,
        acc: &mut BlockSums,
    ) {
        macro_rules! rows {
            ($f:ident, $max:expr) => {
                match m {
                    1 => kernels::$f::<1>(u, stride, quads, panel, acc),
                    2 => kernels::$f::<2>(u, stride, quads, panel, acc),
                    3 if $max >= 3 => kernels::$f::<3>(u, stride, quads, panel, acc),
                    4 if $max >= 4 => kernels::$f::<4>(u, stride, quads, panel, acc),
                    5 if $max >= 5 => kernels::$f::<5>(u, stride, quads, panel, acc),
                    6 if $max >= 6 => kernels::$f::<6>(u, stride, quads, panel, acc),
                    7 if $max >= 7 => kernels::$f::<7>(u, stride, quads, panel, acc),
                    8 if $max >= 8 => kernels::$f::<8>(u, stride, quads, panel, acc),
                    _ => unreachable!("block of {m} rows"),
                }
            };
        }
        match self {
            Int8Kernel::Portable => kernels::portable(m, u, stride, quads, panel, self.panel(), acc),
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Avx2 => rows!(avx2, 4),
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Vnni => rows!(vnni, 6),
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Vnni512 => rows!(vnni512, 8),
            #[cfg(target_arch = "wasm32")]
            Int8Kernel::WasmDot16 => rows!(wasm_dot16, 4),
            #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
            Int8Kernel::WasmRelaxedDot => rows!(wasm_relaxed, 4),
        }
    }
}

/// A linear layer with int8 weights for one [`Int8Kernel`], and what its epilogue needs.
#[derive(Debug, Clone)]
pub struct Int8Linear {
    /// Panels of `kernel.panel()` outputs (see the module doc), as bytes: i8 in quads, or
    /// for a [wide](Int8Kernel::wide) kernel little-endian i16 in pairs.
    packed: Vec<u8>,
    /// Per output: the weight scale and the sum of its quantized weights (for the zero point).
    scales: Vec<f32>,
    sums: Vec<i32>,
    pub bias: Vec<f32>,
    pub inputs: usize,
    pub outputs: usize,
    kernel: Int8Kernel,
}

impl Int8Linear {
    /// From PyTorch's `[out, in]` f32 layout, quantized here; several layers may be stacked
    /// along the outputs (the fused QKV projection), each output keeping its own scale.
    pub fn from_torch(parts: &[(&[f32], &[f32])], inputs: usize) -> Int8Linear {
        Self::from_torch_for(Int8Kernel::this_machine(), parts, inputs)
    }

    /// [`Self::from_torch`] for a given kernel (the tests run each one the CPU has).
    pub fn from_torch_for(kernel: Int8Kernel, parts: &[(&[f32], &[f32])], inputs: usize) -> Int8Linear {
        let mut q = Vec::new();
        let mut scales = Vec::new();
        let mut bias = Vec::new();
        for (w, b) in parts {
            assert_eq!(w.len(), b.len() * inputs, "weight shape");
            let (pq, ps) = quantize_weight_rows(w, inputs);
            q.extend(pq);
            scales.extend(ps);
            bias.extend_from_slice(b);
        }
        Self::from_quantized(kernel, &q, scales, bias, inputs)
    }

    /// From quantized `[out, in]` weights and their per-output scales.
    pub fn from_quantized(kernel: Int8Kernel, q: &[i8], scales: Vec<f32>, bias: Vec<f32>, inputs: usize) -> Int8Linear {
        let outputs = bias.len();
        assert_eq!(q.len(), outputs * inputs, "weight shape");
        assert_eq!(scales.len(), outputs, "one scale per output");
        let (nr, depth) = (kernel.panel(), inputs.next_multiple_of(4));
        let mut packed = vec![0u8; outputs.div_ceil(nr) * nr * depth * if kernel.wide() { 2 } else { 1 }];
        for o in 0..outputs {
            let panel = o / nr * nr * depth;
            for (i, &v) in q[o * inputs..][..inputs].iter().enumerate() {
                if kernel.wide() {
                    // Pairs: per two inputs, the two weights of each output of the panel.
                    let at = 2 * (panel + i / 2 * nr * 2 + (o % nr) * 2 + i % 2);
                    packed[at..at + 2].copy_from_slice(&(v as i16).to_le_bytes());
                } else {
                    packed[panel + i / 4 * nr * 4 + (o % nr) * 4 + i % 4] = v as u8;
                }
            }
        }
        let sums = q.chunks_exact(inputs.max(1)).map(|row| row.iter().map(|&v| v as i32).sum()).collect();
        Int8Linear { packed, scales, sums, bias, inputs, outputs, kernel }
    }

    /// `out[rows, outputs] = x[rows, inputs] @ W + b`, the activations quantized per row;
    /// the work split into tiles for `threads` tasks (as the f32 [`super::matmul::Linear`]).
    pub fn forward(&self, x: &[f32], rows: usize, out: &mut [f32], threads: usize) {
        assert_eq!(x.len(), rows * self.inputs, "input shape");
        assert_eq!(out.len(), rows * self.outputs, "output shape");
        if rows == 0 || self.outputs == 0 {
            return;
        }
        let mut quantized = QuantizedRows::default();
        quantize_activations(x, rows, self.inputs, &mut quantized);
        if self.kernel.wide() {
            quantized.wide = quantized.values.iter().map(|&v| v as u16).collect();
        }
        let tiles = tiles(rows, self.outputs, threads);
        let dst = SharedOut(out.as_mut_ptr());
        let tile = |&(r0, r1, c0, c1): &(usize, usize, usize, usize)| {
            // SAFETY: tiles are disjoint blocks of `out` inside its asserted shape, each
            // written by one task only.
            unsafe { self.tile(&quantized, (r0, r1), (c0, c1), dst) }
        };
        if tiles.len() == 1 {
            tile(&tiles[0]);
        } else {
            tiles.par_iter().for_each(tile);
        }
    }

    /// One tile: rows `r0..r1`, outputs `c0..c1` (`c0` on a panel boundary).
    ///
    /// # Safety
    /// `dst` is `out` of [`Self::forward`]; no other task writes this tile.
    unsafe fn tile(&self, a: &QuantizedRows, (r0, r1): (usize, usize), (c0, c1): (usize, usize), dst: SharedOut) {
        let (nr, mr, depth, n) = (self.kernel.panel(), self.kernel.rows(), a.depth, self.outputs);
        assert!(c0 % nr == 0, "tiles start on a panel");
        // A deep product passes over each panel in (nearly) equal slices of at most
        // MAX_QUADS quads, the slice of the panel staying in L1 while every row block meets
        // it (1,536 inputs: four passes of 384), the sums kept per row in `partial`.
        let quads = depth / 4;
        let passes = quads.div_ceil(MAX_QUADS).max(1);
        let per_pass = quads.div_ceil(passes);
        let mut partial = vec![0i32; if passes > 1 { MC.min(r1 - r0) * nr } else { 0 }];
        let mut acc: BlockSums = [[0i32; MAX_PANEL]; MAX_ROWS];
        // Element offsets are the same in both layouts (a quad of inputs is two pairs); a
        // wide kernel's elements are two bytes.
        let bytes = if self.kernel.wide() { 2 } else { 1 };
        let activations = if bytes == 2 { a.wide.as_ptr() as *const u8 } else { a.values.as_ptr() };
        let act = |row: usize, q0: usize| activations.add(bytes * (row * depth + 4 * q0));
        for m0 in (r0..r1).step_by(MC) {
            let m1 = (m0 + MC).min(r1);
            for p0 in (c0..c1).step_by(nr) {
                let panel = self.packed.as_ptr().add(bytes * (p0 / nr * nr * depth)) as *const i8;
                let width = nr.min(c1 - p0);
                let finish = |row: usize, sums: &[i32]| {
                    let (bias, scales, weight_sums) =
                        (&self.bias[p0..p0 + width], &self.scales[p0..p0 + width], &self.sums[p0..p0 + width]);
                    let (t, z) = (a.scales[row], a.zeros[row]);
                    let out = std::slice::from_raw_parts_mut(dst.at(row * n + p0), width);
                    // The one epilogue of every kernel: exact integers, then f32 roundings in
                    // a fixed order (no fused multiply-add: Rust never contracts). Slices of
                    // one width, so the loop vectorises.
                    for ((((o, &acc), &b), &s), &w) in
                        out.iter_mut().zip(&sums[..width]).zip(bias).zip(scales).zip(weight_sums)
                    {
                        *o = b + (t * s) * (acc - z * w) as f32;
                    }
                };
                if passes == 1 {
                    for b0 in (m0..m1).step_by(mr) {
                        let m = mr.min(m1 - b0);
                        self.kernel.block(m, act(b0, 0), (bytes * depth, quads), panel, &mut acc);
                        for (r, sums) in acc.iter().take(m).enumerate() {
                            finish(b0 + r, sums);
                        }
                    }
                    continue;
                }
                for (pass, q0) in (0..quads).step_by(per_pass).enumerate() {
                    let count = per_pass.min(quads - q0);
                    let slice = panel.add(bytes * q0 * 4 * nr);
                    for b0 in (m0..m1).step_by(mr) {
                        let m = mr.min(m1 - b0);
                        self.kernel.block(m, act(b0, q0), (bytes * depth, count), slice, &mut acc);
                        for (r, sums) in acc.iter().take(m).enumerate() {
                            let kept = &mut partial[(b0 - m0 + r) * nr..][..nr];
                            if pass == 0 {
                                kept.copy_from_slice(&sums[..nr]);
                            } else {
                                kept.iter_mut().zip(sums).for_each(|(k, s)| *k += s);
                            }
                        }
                    }
                }
                for row in m0..m1 {
                    finish(row, &partial[(row - m0) * nr..][..nr]);
                }
            }
        }
    }
}

/// Raw pointer to an output buffer shared by tasks that write disjoint tiles of it.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);
// SAFETY: every user writes disjoint elements (stated at each use).
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    fn at(&self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

/// The microkernels: `M` rows of 7-bit activations against one panel, every quad of the
/// depth, into exact i32 sums.
mod kernels {
    use super::BlockSums;

    /// Plain loops over the packed layout (any panel width).
    pub(super) unsafe fn portable(
        m: usize,
        u: *const u8,
        stride: usize,
        quads: usize,
        panel: *const i8,
        nr: usize,
        acc: &mut BlockSums,
    ) {
        for (r, sums) in acc.iter_mut().take(m).enumerate() {
            let row = std::slice::from_raw_parts(u.add(r * stride), 4 * quads);
            for (j, sum) in sums.iter_mut().take(nr).enumerate() {
                let mut s = 0i32;
                for q in 0..quads {
                    for t in 0..4 {
                        s += row[4 * q + t] as i32 * *panel.add(q * nr * 4 + j * 4 + t) as i32;
                    }
                }
                *sum = s;
            }
        }
    }

    /// AVX2: per quad, the 16 outputs' bytes in two vectors; `vpmaddubsw` multiplies the
    /// broadcast unsigned activations by the signed weights and adds pairs in i16 (no
    /// saturation in this scheme's ranges), `vpmaddwd` by ones adds the pairs into i32.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn avx2<const M: usize>(
        u: *const u8,
        stride: usize,
        quads: usize,
        panel: *const i8,
        acc: &mut BlockSums,
    ) {
        use std::arch::x86_64::*;
        let ones = _mm256_set1_epi16(1);
        let mut sums = [[_mm256_setzero_si256(); 2]; M];
        for q in 0..quads {
            let b0 = _mm256_loadu_si256(panel.add(q * 64) as *const __m256i);
            let b1 = _mm256_loadu_si256(panel.add(q * 64 + 32) as *const __m256i);
            for (r, s) in sums.iter_mut().enumerate() {
                let a = _mm256_set1_epi32((u.add(r * stride + 4 * q) as *const i32).read_unaligned());
                s[0] = _mm256_add_epi32(s[0], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b0), ones));
                s[1] = _mm256_add_epi32(s[1], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b1), ones));
            }
        }
        for (r, s) in sums.iter().enumerate() {
            _mm256_storeu_si256(acc[r].as_mut_ptr() as *mut __m256i, s[0]);
            _mm256_storeu_si256(acc[r].as_mut_ptr().add(8) as *mut __m256i, s[1]);
        }
    }

    /// AVX-512 VNNI on 256-bit vectors: `vpdpbusd` does AVX2's three steps in one, into
    /// i32 without an i16 stage.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    pub(super) unsafe fn vnni<const M: usize>(
        u: *const u8,
        stride: usize,
        quads: usize,
        panel: *const i8,
        acc: &mut BlockSums,
    ) {
        use std::arch::x86_64::*;
        let mut sums = [[_mm256_setzero_si256(); 2]; M];
        for q in 0..quads {
            let b0 = _mm256_loadu_si256(panel.add(q * 64) as *const __m256i);
            let b1 = _mm256_loadu_si256(panel.add(q * 64 + 32) as *const __m256i);
            for (r, s) in sums.iter_mut().enumerate() {
                let a = _mm256_set1_epi32((u.add(r * stride + 4 * q) as *const i32).read_unaligned());
                s[0] = _mm256_dpbusd_epi32(s[0], a, b0);
                s[1] = _mm256_dpbusd_epi32(s[1], a, b1);
            }
        }
        for (r, s) in sums.iter().enumerate() {
            _mm256_storeu_si256(acc[r].as_mut_ptr() as *mut __m256i, s[0]);
            _mm256_storeu_si256(acc[r].as_mut_ptr().add(8) as *mut __m256i, s[1]);
        }
    }

    /// AVX-512 VNNI on 512-bit vectors: a panel quad is 128 bytes, two vectors of sixteen
    /// outputs; 8 rows x 2 accumulators, the two weight vectors and a broadcast are 19 of
    /// the 32 registers.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn vnni512<const M: usize>(
        u: *const u8,
        stride: usize,
        quads: usize,
        panel: *const i8,
        acc: &mut BlockSums,
    ) {
        use std::arch::x86_64::*;
        let mut sums = [[_mm512_setzero_si512(); 2]; M];
        for q in 0..quads {
            let b0 = _mm512_loadu_si512(panel.add(q * 128) as *const __m512i);
            let b1 = _mm512_loadu_si512(panel.add(q * 128 + 64) as *const __m512i);
            for (r, s) in sums.iter_mut().enumerate() {
                let a = _mm512_set1_epi32((u.add(r * stride + 4 * q) as *const i32).read_unaligned());
                s[0] = _mm512_dpbusd_epi32(s[0], a, b0);
                s[1] = _mm512_dpbusd_epi32(s[1], a, b1);
            }
        }
        for (r, s) in sums.iter().enumerate() {
            _mm512_storeu_si512(acc[r].as_mut_ptr() as *mut __m512i, s[0]);
            _mm512_storeu_si512(acc[r].as_mut_ptr().add(16) as *mut __m512i, s[1]);
        }
    }

    /// wasm SIMD128 on the wide layout: per pair of inputs, the eight outputs' two i16
    /// weights in two vectors, and the row's two activations broadcast as one 32-bit lane;
    /// `i32x4.dot_i16x8_s` multiplies and adds each output's pair into its own lane (no
    /// widening or horizontal sum in the loop). 4 rows x 2 accumulators, two weight vectors
    /// and a broadcast: 11 of x86-64's 16 vector registers.
    #[cfg(target_arch = "wasm32")]
    pub(super) unsafe fn wasm_dot16<const M: usize>(
        u: *const u8,
        stride: usize,
        quads: usize,
        panel: *const i8,
        acc: &mut BlockSums,
    ) {
        use core::arch::wasm32::*;
        let mut sums = [[i32x4_splat(0); 2]; M];
        for p in 0..2 * quads {
            // 8 outputs x 2 inputs x 2 bytes per pair.
            let b0 = v128_load(panel.add(p * 32) as *const v128);
            let b1 = v128_load(panel.add(p * 32 + 16) as *const v128);
            for (r, s) in sums.iter_mut().enumerate() {
                let a = v128_load32_splat(u.add(r * stride + 4 * p) as *const u32);
                s[0] = i32x4_add(s[0], i32x4_dot_i16x8(b0, a));
                s[1] = i32x4_add(s[1], i32x4_dot_i16x8(b1, a));
            }
        }
        for (r, s) in sums.iter().enumerate() {
            v128_store(acc[r].as_mut_ptr() as *mut v128, s[0]);
            v128_store(acc[r].as_mut_ptr().add(4) as *mut v128, s[1]);
        }
    }

    /// wasm relaxed SIMD: `i32x4.relaxed_dot_i8x16_i7x16_add_s` adds four products per lane
    /// (one output's quad) in one instruction; the activations are its 7-bit operand.
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    pub(super) unsafe fn wasm_relaxed<const M: usize>(
        u: *const u8,
        stride: usize,
        quads: usize,
        panel: *const i8,
        acc: &mut BlockSums,
    ) {
        use core::arch::wasm32::*;
        let mut sums = [[i32x4_splat(0); 2]; M];
        for q in 0..quads {
            let b0 = v128_load(panel.add(q * 32) as *const v128);
            let b1 = v128_load(panel.add(q * 32 + 16) as *const v128);
            for (r, s) in sums.iter_mut().enumerate() {
                let a = v128_load32_splat(u.add(r * stride + 4 * q) as *const u32);
                s[0] = i32x4_relaxed_dot_i8x16_i7x16_add(b0, a, s[0]);
                s[1] = i32x4_relaxed_dot_i8x16_i7x16_add(b1, a, s[1]);
            }
        }
        for (r, s) in sums.iter().enumerate() {
            v128_store(acc[r].as_mut_ptr() as *mut v128, s[0]);
            v128_store(acc[r].as_mut_ptr().add(4) as *mut v128, s[1]);
        }
    }
}

/// Checks every kernel of this build against plain integer arithmetic on odd shapes (one
/// row, 17 rows, depths that are not multiples of 16 or even of 4, ragged last panels) and
/// the whole layer against the formula: `Ok(kernels checked)` or the first difference. The
/// native tests call it, and the browser tests call it in every wasm build (the page's
/// `self_check("int8")`), so the wasm kernels are checked where they run.
pub fn self_check() -> Result<Vec<&'static str>, String> {
    let shapes = [(1, 5, 3), (17, 37, 45), (4, 16, 16), (7, 384, 33), (130, 1536, 70), (3, 1, 9), (2, 21, 1)];
    let mut checked = Vec::new();
    for kernel in Int8Kernel::available() {
        for &(rows, inputs, outputs) in &shapes {
            check_shape(kernel, rows, inputs, outputs)
                .map_err(|e| format!("int8 kernel {} at {rows} x {inputs} x {outputs}: {e}", kernel.name()))?;
        }
        checked.push(kernel.name());
    }
    Ok(checked)
}

/// One shape: weights and inputs from a fixed integer sequence (extremes included), the
/// layer's output against the scheme's formula computed here in plain code.
fn check_shape(kernel: Int8Kernel, rows: usize, inputs: usize, outputs: usize) -> Result<(), String> {
    let w: Vec<f32> = (0..outputs * inputs).map(|i| ((i * 37 + 11) % 255) as f32 / 127.0 - 1.0).collect();
    let x: Vec<f32> = (0..rows * inputs).map(|i| ((i * 53 + 7) % 211) as f32 / 50.0 - 1.3).collect();
    let bias: Vec<f32> = (0..outputs).map(|o| o as f32 / 8.0 - 2.0).collect();
    let lin = Int8Linear::from_torch_for(kernel, &[(&w, &bias)], inputs);
    for threads in [1, 3] {
        let mut got = vec![f32::NAN; rows * outputs];
        lin.forward(&x, rows, &mut got, threads);
        let (q, scales) = quantize_weight_rows(&w, inputs);
        let mut a = QuantizedRows::default();
        quantize_activations(&x, rows, inputs, &mut a);
        for r in 0..rows {
            for o in 0..outputs {
                let dot: i32 =
                    (0..inputs).map(|i| a.values[r * a.depth + i] as i32 * q[o * inputs + i] as i32).sum::<i32>();
                let sum: i32 = q[o * inputs..][..inputs].iter().map(|&v| v as i32).sum();
                let want = bias[o] + (a.scales[r] * scales[o]) * (dot - a.zeros[r] * sum) as f32;
                let have = got[r * outputs + o];
                if have.to_bits() != want.to_bits() {
                    return Err(format!(
                        "{threads} threads, row {r} output {o}: {have} where the formula gives {want}"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_of_this_cpu_equals_the_formula_on_odd_shapes() {
        let checked = self_check().unwrap();
        assert!(checked.contains(&"portable"));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            assert!(checked.contains(&"avx2"), "{checked:?}");
        }
    }

    #[test]
    fn weights_quantize_symmetrically_per_row() {
        // Row 1: max 2.54 -> scale 0.02; 1.0 / 0.02 = 50, -2.54 -> -127, 0.011 -> 0.55 -> 1.
        // Row 2: zeros -> scale 1, zeros.
        let (q, s) = quantize_weight_rows(&[1.0, -2.54, 0.011, 0.0, 0.0, 0.0], 3);
        assert_eq!(q, [50, -127, 1, 0, 0, 0]);
        assert!((s[0] - 0.02).abs() < 1e-8 && s[1] == 1.0, "{s:?}");
        assert_eq!(dequantize_rows(&[2, -1], &[0.5]), [1.0, -0.5]);
    }

    #[test]
    fn activations_take_128_levels_over_the_row_and_zero() {
        // Row [-1, 0, 3]: range 4, t = 4/127; z = round(127/4) = round(31.75) = 32;
        // -1 -> round(-31.75) + 32 = 0; 0 -> 32; 3 -> round(95.25) + 32 = 127.
        // Row [0.5, 1.0, 0.25]: lo = 0 (zero is always in range), t = 1/127, z = 0;
        // 0.5 -> round(63.5) = 64 (ties to even), 1 -> 127, 0.25 -> round(31.75) = 32.
        // Row of zeros: t = 1, z = 0. Depth 3 -> 4, padded with 0.
        let mut out = QuantizedRows::default();
        quantize_activations(&[-1.0, 0.0, 3.0, 0.5, 1.0, 0.25, 0.0, 0.0, 0.0], 3, 3, &mut out);
        assert_eq!(out.depth, 4);
        assert_eq!(out.values, [0, 32, 127, 0, 64, 127, 32, 0, 0, 0, 0, 0]);
        assert_eq!(out.zeros, [32, 0, 0]);
        assert_eq!(out.scales[2], 1.0);
        assert!((out.scales[0] - 4.0 / 127.0).abs() < 1e-9);
    }

    #[test]
    fn a_product_stays_within_the_rounding_bound_of_the_f32_one() {
        // |sum(x w) - sum(x^ w^)| <= sum |x| |w - w^| + sum |w^| |x - x^|
        //                          <= k (max|x| s / 2 + max|w^| t / 2) per row and output,
        // s the weight row's scale and t the activation row's: the scheme's worst case.
        let (rows, k, n) = (64, 384, 96);
        let w: Vec<f32> = (0..n * k).map(|i| ((i as f32) * 0.37).sin() * 0.1).collect();
        let x: Vec<f32> = (0..rows * k).map(|i| ((i as f32) * 0.11).cos()).collect();
        let b = vec![0.0; n];
        let lin = Int8Linear::from_torch(&[(&w, &b)], k);
        let mut got = vec![0.0; rows * n];
        lin.forward(&x, rows, &mut got, 2);
        let (_, s) = quantize_weight_rows(&w, k);
        let mut a = QuantizedRows::default();
        quantize_activations(&x, rows, k, &mut a);
        for r in 0..rows {
            let x_max = x[r * k..][..k].iter().fold(0.0f32, |m, v| m.max(v.abs()));
            for o in 0..n {
                let want: f32 = (0..k).map(|j| x[r * k + j] * w[o * k + j]).sum();
                let w_max = w[o * k..][..k].iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let bound = k as f32 * (x_max * s[o] / 2.0 + w_max * a.scales[r] / 2.0);
                let error = (got[r * n + o] - want).abs();
                assert!(error <= bound, "row {r} output {o}: error {error} over the bound {bound}");
            }
        }
    }
}
