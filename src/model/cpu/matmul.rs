//! Matrix products of the CPU inference path, by one of two kernels chosen once per
//! machine ([`Kernel`]):
//! - the `gemm` crate (the same kernels candle calls) over strided views and weights in
//!   column strips: natively on CPUs with AVX-512, and off x86-64;
//! - [`super::panel_kernel`], weights packed in panels once at load: in the browser (wasm
//!   SIMD) and natively on x86-64 CPUs with AVX2 but not AVX-512, where it measured 15-25%
//!   faster than `gemm` (see that module).
//!
//! Each call is single-threaded; the callers split the work into tasks (tiles of a
//! linear layer, query rows of the attention), which measured faster here than gemm's own
//! threading at these sizes. Calling the kernels directly instead of through candle tensors
//! lets the attention read q, k and v as strided views of one fused QKV buffer (no
//! transposes) and lets a linear layer start from its bias (no separate add).

use super::view::{View, ViewMut};
#[cfg(not(target_arch = "wasm32"))]
use gemm::Parallelism;
use rayon::prelude::*;

/// Which product kernel this machine's CPU path runs. Every weight matrix is laid out for
/// it at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// `gemm` over column strips of [`STRIP`] outputs.
    #[cfg(not(target_arch = "wasm32"))]
    GemmStrips,
    /// The panel kernel over AVX2 vectors (16-column panels, 6-row blocks).
    #[cfg(target_arch = "x86_64")]
    Avx2Panels,
    /// The panel kernel over wasm SIMD (8-column panels, 4-row blocks).
    #[cfg(target_arch = "wasm32")]
    WasmPanels,
    /// The panel kernel over plain lanes, a multiply then an add: the same bits on every
    /// target (see [`super::math::Arithmetic::Reproducible`]), never the fastest.
    Reproducible,
}

impl Kernel {
    /// The kernel for this CPU: the panels in the browser and on x86-64 with AVX2 and FMA
    /// but without AVX-512, `gemm` elsewhere. Natively `MEDRANK_CPU_KERNEL=gemm` (or
    /// `avx2`, where the CPU has it) overrides the choice, so that both can be benchmarked
    /// on one machine.
    pub fn this_machine() -> Kernel {
        #[cfg(target_arch = "wasm32")]
        return Kernel::WasmPanels;
        #[cfg(target_arch = "x86_64")]
        {
            static CHOICE: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
            *CHOICE.get_or_init(|| {
                let avx2 = super::panel_kernel::has_avx2();
                let default = if avx2 && !std::arch::is_x86_feature_detected!("avx512f") {
                    Kernel::Avx2Panels
                } else {
                    Kernel::GemmStrips
                };
                match std::env::var("MEDRANK_CPU_KERNEL").as_deref() {
                    Err(_) => default,
                    Ok("gemm") => Kernel::GemmStrips,
                    Ok("avx2") if avx2 => Kernel::Avx2Panels,
                    Ok(asked) => {
                        // A benchmark must not silently measure another kernel than asked.
                        eprintln!(
                            "medrank: MEDRANK_CPU_KERNEL={asked:?} is not available here (gemm, or \
                             avx2 on a CPU with AVX2 and FMA): using {}",
                            default.name()
                        );
                        default
                    }
                }
            })
        }
        #[cfg(not(any(target_arch = "wasm32", target_arch = "x86_64")))]
        Kernel::GemmStrips
    }

    /// The kernel for products in this arithmetic.
    pub fn for_arithmetic(arithmetic: super::math::Arithmetic) -> Kernel {
        match arithmetic {
            super::math::Arithmetic::Fastest => Kernel::this_machine(),
            super::math::Arithmetic::Reproducible => Kernel::Reproducible,
        }
    }

    /// How the benchmarks name it.
    pub fn name(self) -> &'static str {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            Kernel::GemmStrips => "gemm",
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Panels => "AVX2 panels",
            #[cfg(target_arch = "wasm32")]
            Kernel::WasmPanels => "wasm SIMD panels",
            Kernel::Reproducible => "reproducible panels",
        }
    }

    /// Copy the `k x n` view `b` into this kernel's layout of a right-hand operand: dense
    /// row-major for `gemm` (which reads it in place), panels for the panel kernels.
    fn lay_out(self, b: View, out: &mut Vec<f32>) {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            Kernel::GemmStrips => {
                out.clear();
                for i in 0..b.rows {
                    let row = b.offset + i * b.row_stride;
                    if b.col_stride == 1 {
                        out.extend_from_slice(&b.data[row..row + b.cols]);
                    } else {
                        out.extend((0..b.cols).map(|j| b.data[row + j * b.col_stride]));
                    }
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Panels => super::panel_kernel::pack_b::<super::panel_kernel::Avx2>(b, out),
            #[cfg(target_arch = "wasm32")]
            Kernel::WasmPanels => super::panel_kernel::pack_b::<super::panel_kernel::Simd>(b, out),
            Kernel::Reproducible => super::panel_kernel::pack_b::<super::panel_kernel::Reproducible>(b, out),
        }
    }

    /// `dst = (accumulate ? dst : 0) + scale * a @ b`, `b` (`k x n`) either laid out by
    /// [`Self::lay_out`] (`b`: the first panel used; the strides are ignored) or, for
    /// `gemm`, any strided matrix.
    ///
    /// # Safety
    /// `a` readable at every (i, p) of `m x k` with strides `a_rs`, `a_cs`; `b` at every
    /// (p, j) of `k x n` with strides `b_rs`, `b_cs`, or holding what `lay_out` wrote for
    /// it; `dst` writable at every (i, j) of `m x n` with row stride `dst_rs`, overlapping
    /// neither and touched by no other thread during the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn product(
        self,
        (m, n, k): (usize, usize, usize),
        a: *const f32,
        (a_rs, a_cs): (usize, usize),
        b: *const f32,
        (b_rs, b_cs): (usize, usize),
        dst: *mut f32,
        dst_rs: usize,
        accumulate: bool,
        scale: f32,
    ) {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            Kernel::GemmStrips => gemm::gemm(
                m,
                n,
                k,
                dst,
                1,
                dst_rs as isize,
                accumulate,
                a,
                a_cs as isize,
                a_rs as isize,
                b,
                b_cs as isize,
                b_rs as isize,
                1.0,
                scale,
                false,
                false,
                false,
                // Threads come from the callers (tiles, attention tasks), not from gemm.
                Parallelism::None,
            ),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Panels => {
                let _ = (b_rs, b_cs); // panels have their own layout
                super::panel_kernel::gemm_avx2(m, n, k, a, a_rs, a_cs, b, dst, dst_rs, accumulate, scale)
            }
            #[cfg(target_arch = "wasm32")]
            Kernel::WasmPanels => {
                let _ = (b_rs, b_cs);
                use super::panel_kernel::{gemm_packed, Simd, SIMD_ROWS};
                // SIMD128 is on for the whole wasm build: no target-feature wrapper needed.
                gemm_packed::<Simd, SIMD_ROWS>(m, n, k, a, a_rs, a_cs, b, dst, dst_rs, accumulate, scale)
            }
            Kernel::Reproducible => {
                let _ = (b_rs, b_cs);
                super::panel_kernel::gemm_reproducible(m, n, k, a, a_rs, a_cs, b, dst, dst_rs, accumulate, scale)
            }
        }
    }

    /// Columns of one panel (`None`: `gemm`, whose strips are [`STRIP`] wide).
    fn panel(self) -> Option<usize> {
        use super::panel_kernel::Lanes;
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            Kernel::GemmStrips => None,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2Panels => Some(super::panel_kernel::Avx2::PANEL),
            #[cfg(target_arch = "wasm32")]
            Kernel::WasmPanels => Some(super::panel_kernel::Simd::PANEL),
            Kernel::Reproducible => Some(super::panel_kernel::Reproducible::PANEL),
        }
    }
}

/// `dst = (accumulate ? dst : 0) + scale * a @ b` through `gemm`, for any strides. Panics if
/// shapes or bounds disagree (a programming error, not an input error: callers derive all
/// shapes from one config).
#[cfg(not(target_arch = "wasm32"))]
pub fn matmul(dst: ViewMut, accumulate: bool, a: View, b: View, scale: f32) {
    assert_eq!(a.cols, b.rows, "inner dimensions");
    assert_eq!((dst.rows, dst.cols), (a.rows, b.cols), "output shape");
    assert!(a.extent() <= a.data.len() && b.extent() <= b.data.len(), "operand out of bounds");
    if dst.rows == 0 || dst.cols == 0 {
        return;
    }
    assert!(dst.cols <= dst.row_stride, "output rows overlap");
    assert!(dst.offset + (dst.rows - 1) * dst.row_stride + dst.cols <= dst.data.len(), "output out of bounds");
    // SAFETY: the asserts above keep every element gemm touches inside the three slices;
    // `dst` is borrowed mutably, so it cannot alias `a` or `b`.
    unsafe {
        Kernel::GemmStrips.product(
            (a.rows, b.cols, a.cols),
            a.data.as_ptr().add(a.offset),
            (a.row_stride, a.col_stride),
            b.data.as_ptr().add(b.offset),
            (b.row_stride, b.col_stride),
            dst.data.as_mut_ptr().add(dst.offset),
            dst.row_stride,
            accumulate,
            scale,
        )
    }
}

/// A right-hand operand copied once into the layout this machine's [`Kernel`] reads
/// fastest, for an operand that several products share (one attention head's keys and
/// values, read by every block of query rows): strided operands would otherwise be
/// gathered again by every product.
pub struct PackedRhs {
    data: Vec<f32>,
    rows: usize,
    cols: usize,
    kernel: Kernel,
}

impl Default for PackedRhs {
    fn default() -> Self {
        PackedRhs { data: Vec::new(), rows: 0, cols: 0, kernel: Kernel::this_machine() }
    }
}

impl PackedRhs {
    /// An empty operand for `kernel`'s layout.
    pub fn for_kernel(kernel: Kernel) -> Self {
        PackedRhs { kernel, ..PackedRhs::default() }
    }

    /// Copy `b` in, reusing this buffer's memory.
    pub fn pack(&mut self, b: View) {
        assert!(b.extent() <= b.data.len(), "operand out of bounds");
        (self.rows, self.cols) = (b.rows, b.cols);
        self.kernel.lay_out(b, &mut self.data);
    }
}

/// `dst = (accumulate ? dst : 0) + scale * a @ b` with a packed right-hand operand.
pub fn matmul_packed(dst: ViewMut, accumulate: bool, a: View, b: &PackedRhs, scale: f32) {
    assert_eq!(a.cols, b.rows, "inner dimensions");
    assert_eq!((dst.rows, dst.cols), (a.rows, b.cols), "output shape");
    assert!(a.extent() <= a.data.len(), "operand out of bounds");
    if dst.rows == 0 || dst.cols == 0 {
        return;
    }
    assert!(dst.cols <= dst.row_stride, "output rows overlap");
    assert!(dst.offset + (dst.rows - 1) * dst.row_stride + dst.cols <= dst.data.len(), "output out of bounds");
    // SAFETY: the asserts keep every access inside `a`, `dst` and the layout `pack` made
    // for `rows x cols`; `dst` is borrowed mutably, so it aliases neither.
    unsafe {
        b.kernel.product(
            (a.rows, b.cols, a.cols),
            a.data.as_ptr().add(a.offset),
            (a.row_stride, a.col_stride),
            b.data.as_ptr(),
            (b.cols, 1),
            dst.data.as_mut_ptr().add(dst.offset),
            dst.row_stride,
            accumulate,
            scale,
        )
    }
}

/// Columns per strip of a native weight matrix (see [`Linear`]): one `gemm` microkernel's
/// height of output features (4 AVX-512 registers of f32).
const STRIP: usize = 64;

/// Token rows per native `gemm` call within a strip. From about 48 rows on, `gemm` copies
/// the strip into its packed layout at every call; at 32 it reads the contiguous strip in
/// place, and the strip stays in the core's cache for the next 32 rows. Measured here (one
/// thread, the six layers' products): 64 rows 90 -> 103 GFLOP/s, 128 rows 101 -> 108, 256
/// rows 106 -> 109 (BENCHMARKS.md, 2026-11-24 evening). The panel kernels block rows
/// themselves.
const ROW_CHUNK: usize = 32;

/// A dense layer and its bias, the weight laid out once at load for this machine's
/// [`Kernel`]: for `gemm` in column strips of [`STRIP`] outputs, each strip `[in, STRIP]`
/// row-major and contiguous, `gemm` called per strip on [`ROW_CHUNK`] token rows at a
/// time; for the panel kernels in their panels.
///
/// Why strips: `gemm` reads an unpacked weight in place, and in one `[in, out]` matrix
/// consecutive inputs of a column lie a whole row (`out` floats) apart, so with few token
/// rows (batch 1, or a thread's share of one sequence) the weights stream from memory
/// through hundreds of pages per call. In strips each call reads one contiguous block.
/// Measured here (all six layers' products, weights beyond the caches, one thread):
/// 16 rows 43 -> 83 GFLOP/s, 64 rows 81 -> 92, 256 rows 100 -> 105 (BENCHMARKS.md).
#[derive(Debug, Clone)]
pub struct Linear {
    weight: Vec<f32>,
    pub bias: Vec<f32>,
    pub inputs: usize,
    pub outputs: usize,
    kernel: Kernel,
}

impl Linear {
    /// From PyTorch's `[out, in]` layout, for this machine's kernel. Several layers may be
    /// stacked along the outputs (the fused QKV projection).
    pub fn from_torch(parts: &[(&[f32], &[f32])], inputs: usize) -> Linear {
        Self::from_torch_for(Kernel::this_machine(), parts, inputs)
    }

    /// [`Self::from_torch`] for a given kernel (the tests run each one the CPU has).
    pub fn from_torch_for(kernel: Kernel, parts: &[(&[f32], &[f32])], inputs: usize) -> Linear {
        let outputs: usize = parts.iter().map(|(_, b)| b.len()).sum();
        let mut weight = vec![0.0; inputs * outputs];
        let mut bias = Vec::with_capacity(outputs);
        let mut col = 0;
        for (w, b) in parts {
            assert_eq!(w.len(), b.len() * inputs, "weight shape");
            for (o, row) in w.chunks_exact(inputs).enumerate() {
                for (i, &v) in row.iter().enumerate() {
                    weight[i * outputs + col + o] = v;
                }
            }
            bias.extend_from_slice(b);
            col += b.len();
        }
        let mut laid_out = Vec::new();
        if kernel.panel().is_some() {
            kernel.lay_out(View::row_major(&weight, inputs, outputs), &mut laid_out);
        } else {
            for c0 in (0..outputs).step_by(STRIP) {
                let width = STRIP.min(outputs - c0);
                for row in weight.chunks_exact(outputs) {
                    laid_out.extend_from_slice(&row[c0..c0 + width]);
                }
            }
        }
        Linear { weight: laid_out, bias, inputs, outputs, kernel }
    }

    /// `out[rows, outputs] = x[rows, inputs] @ W + b`.
    /// The work is split into tiles for `threads` tasks.
    pub fn forward(&self, x: &[f32], rows: usize, out: &mut [f32], threads: usize) {
        assert_eq!(x.len(), rows * self.inputs, "input shape");
        assert_eq!(out.len(), rows * self.outputs, "output shape");
        for row in out.chunks_exact_mut(self.outputs) {
            row.copy_from_slice(&self.bias);
        }
        let tiles = tiles(rows, self.outputs, threads);
        let dst = SharedMut(out.as_mut_ptr());
        let (k, n) = (self.inputs, self.outputs);
        let tile = |&(r0, r1, c0, c1): &(usize, usize, usize, usize)| {
            assert!(c0 % STRIP == 0, "column tiles start on a strip");
            // SAFETY (both products): tiles are disjoint blocks of `out` (rows r0..r1,
            // columns c0..c1, inside its asserted shape), each written by one task only;
            // `out` does not overlap `x`; the weights hold `k` rows of every strip or
            // panel from column c0 on.
            let a = |row: usize| unsafe { x.as_ptr().add(row * k) };
            match self.kernel.panel() {
                Some(panel) => unsafe {
                    let b = self.weight.as_ptr().add(c0 / panel * k * panel);
                    let dst = dst.at(r0 * n + c0);
                    self.kernel.product((r1 - r0, c1 - c0, k), a(r0), (k, 1), b, (panel, 1), dst, n, true, 1.0)
                },
                None => {
                    for s0 in (c0..c1).step_by(STRIP) {
                        // Every strip before this one is full: it starts at s0 * k.
                        let width = STRIP.min(n - s0);
                        let b = self.weight[s0 * k..].as_ptr();
                        for q0 in (r0..r1).step_by(ROW_CHUNK) {
                            let rows = ROW_CHUNK.min(r1 - q0);
                            let dst = dst.at(q0 * n + s0);
                            unsafe {
                                self.kernel.product((rows, width, k), a(q0), (k, 1), b, (width, 1), dst, n, true, 1.0)
                            };
                        }
                    }
                }
            }
        };
        if tiles.len() == 1 {
            tile(&tiles[0]);
        } else {
            tiles.par_iter().for_each(tile);
        }
    }
}

/// Split a `rows x cols` product into about one tile per thread, as
/// `(row_start, row_end, col_start, col_end)`. Columns are split first, on whole weight
/// strips, so each thread streams only its share of the weights (measured here: 5-15%
/// faster than gemm's own threading at 128 rows); rows too once the column tiles would
/// drop below 64.
pub fn tiles(rows: usize, cols: usize, threads: usize) -> Vec<(usize, usize, usize, usize)> {
    let col_parts = threads.clamp(1, (cols / 64).max(1));
    let row_parts = (threads / col_parts).clamp(1, (rows / 64).max(1));
    // Column boundaries on whole strips (multiples of the wasm kernel's panels too).
    let bounds = |n: usize, parts: usize, align: usize| -> Vec<usize> {
        let mut b: Vec<usize> = (0..parts).map(|i| (n * i / parts) / align * align).collect();
        b.push(n);
        b.dedup();
        b
    };
    let (rb, cb) = (bounds(rows, row_parts, 1), bounds(cols, col_parts, STRIP));
    let mut out = Vec::new();
    for r in rb.windows(2) {
        for c in cb.windows(2) {
            out.push((r[0], r[1], c[0], c[1]));
        }
    }
    if out.is_empty() {
        out.push((0, rows, 0, cols));
    }
    out
}

/// Raw pointer to an output buffer shared by tasks that write disjoint tiles of it.
#[derive(Clone, Copy)]
struct SharedMut(*mut f32);
// SAFETY: every user writes disjoint elements (stated at each use).
unsafe impl Send for SharedMut {}
unsafe impl Sync for SharedMut {}

impl SharedMut {
    // A method, so closures capture the Sync wrapper, not the raw pointer field.
    fn at(&self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_product_by_hand() {
        // a = [[1, 2], [3, 4]] read transposed from row-major [[1, 3], [2, 4]];
        // b = [[5], [6]]; a @ b = [[17], [39]]; written into column 1 of a 2x2 buffer
        // that already holds 1s, accumulating with scale 2: [1, 35], [1, 79].
        let a_t = [1.0, 3.0, 2.0, 4.0];
        let a = View { data: &a_t, offset: 0, rows: 2, cols: 2, row_stride: 1, col_stride: 2 };
        let b = View::row_major(&[5.0, 6.0], 2, 1);
        let mut out = [1.0; 4];
        matmul(ViewMut { data: &mut out, offset: 1, rows: 2, cols: 1, row_stride: 2 }, true, a, b, 2.0);
        assert_eq!(out, [1.0, 35.0, 1.0, 79.0]);
    }

    #[test]
    fn tiles_cover_the_product_once() {
        for (rows, cols, threads) in
            [(128, 384, 2), (1, 1536, 2), (4096, 384, 16), (5, 3, 8), (0, 384, 2), (128, 384, 1)]
        {
            let t = tiles(rows, cols, threads);
            let mut seen = vec![0u8; rows * cols];
            for &(r0, r1, c0, c1) in &t {
                assert!(c0 % STRIP == 0, "{t:?}");
                for r in r0..r1 {
                    for c in c0..c1 {
                        seen[r * cols + c] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{rows}x{cols} on {threads}: {t:?}");
            assert!(t.len() <= threads.max(1), "{t:?}");
        }
        assert_eq!(tiles(128, 384, 2), vec![(0, 128, 0, 192), (0, 128, 192, 384)]);
    }

    /// Every kernel this CPU can run (the machine's own choice is one of them).
    fn kernels() -> Vec<Kernel> {
        let mut all = vec![Kernel::GemmStrips, Kernel::Reproducible];
        #[cfg(target_arch = "x86_64")]
        if super::super::panel_kernel::has_avx2() {
            all.push(Kernel::Avx2Panels);
        }
        all
    }

    #[test]
    fn linear_stacks_torch_layers_and_adds_bias() {
        // Two layers of 1 and 2 outputs over 2 inputs, torch layout [out, in].
        for kernel in kernels() {
            let lin =
                Linear::from_torch_for(kernel, &[(&[1.0, 2.0], &[0.5]), (&[0.0, 1.0, -1.0, 0.0], &[0.0, 10.0])], 2);
            let mut out = [0.0; 3];
            lin.forward(&[3.0, 4.0], 1, &mut out, 1);
            assert_eq!(out, [11.5, 4.0, 7.0], "{kernel:?}");
        }
    }

    #[test]
    fn tiled_linear_equals_the_plain_sum() {
        // 130 rows x 200 outputs in 3 column strips x 1 row block, ragged edges. Small
        // integers: every sum is exact in f32, whatever the order.
        let (rows, inputs, outputs) = (130, 7, 200);
        let w: Vec<f32> = (0..outputs * inputs).map(|i| (i % 13) as f32 - 6.0).collect();
        let b: Vec<f32> = (0..outputs).map(|i| i as f32).collect();
        let x: Vec<f32> = (0..rows * inputs).map(|i| (i % 5) as f32).collect();
        for kernel in kernels() {
            let lin = Linear::from_torch_for(kernel, &[(&w, &b)], inputs);
            let mut out = vec![0.0; rows * outputs];
            lin.forward(&x, rows, &mut out, 4);
            for r in 0..rows {
                for o in 0..outputs {
                    let want: f32 = b[o] + (0..inputs).map(|i| x[r * inputs + i] * w[o * inputs + i]).sum::<f32>();
                    assert_eq!(out[r * outputs + o], want, "{kernel:?}: row {r} output {o}");
                }
            }
        }
    }

    #[test]
    fn packed_product_equals_the_strided_one() {
        // A strided, transposed B (the attention's k^T), packed by each kernel, against
        // gemm reading it in place; accumulate with a scale into a wider buffer.
        let (m, n, k) = (37, 45, 19);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 31 % 17) as f32 - 8.0) / 4.0).collect();
        let bt: Vec<f32> = (0..n * 3 * k).map(|i| ((i * 7 % 23) as f32 - 11.0) / 8.0).collect();
        let b = View { data: &bt, offset: k, rows: k, cols: n, row_stride: 1, col_stride: 3 * k };
        let a = View::row_major(&a, m, k);
        let start: Vec<f32> = (0..m * (n + 2)).map(|i| i as f32 / 10.0).collect();
        let mut want = start.clone();
        matmul(ViewMut { data: &mut want, offset: 1, rows: m, cols: n, row_stride: n + 2 }, true, a, b, 0.5);
        for kernel in kernels() {
            let mut packed = PackedRhs { kernel, ..PackedRhs::default() };
            packed.pack(b);
            let mut got = start.clone();
            matmul_packed(
                ViewMut { data: &mut got, offset: 1, rows: m, cols: n, row_stride: n + 2 },
                true,
                a,
                &packed,
                0.5,
            );
            let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-5, "{kernel:?}: max abs difference {worst}");
        }
    }
}
