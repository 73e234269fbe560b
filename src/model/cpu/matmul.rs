//! Matrix products of the CPU inference path: natively through the `gemm` crate (the same
//! kernels candle calls, AVX-512 included where the CPU has it; see Cargo.toml), in the
//! browser through [`super::wasm_kernel`] (weights packed once at load).
//!
//! Each call is single-threaded; the callers split the work into tasks (tiles of a
//! linear layer, heads of the attention), which measured faster here than gemm's own
//! threading at these sizes. Calling `gemm` directly instead of through candle tensors
//! lets the attention read q, k and v as strided views of one fused QKV buffer (no
//! transposes, no copies) and lets a linear layer start from its bias (no separate add).

#[cfg(not(target_arch = "wasm32"))]
use gemm::Parallelism;
use rayon::prelude::*;

/// A strided, read-only `rows x cols` f32 matrix view: element (i, j) is at
/// `data[offset + i * row_stride + j * col_stride]`.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub data: &'a [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> View<'a> {
    /// A dense row-major matrix.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Self {
        View { data, offset: 0, rows, cols, row_stride: cols, col_stride: 1 }
    }

    /// Index of the last element plus one: every access stays below it.
    fn extent(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            return self.offset;
        }
        self.offset + (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride + 1
    }
}

/// The strided destination of a product, addressed like [`View`].
pub struct ViewMut<'a> {
    pub data: &'a mut [f32],
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
}

/// `dst = (accumulate ? dst : 0) + scale * a @ b`. Panics if shapes or bounds disagree
/// (a programming error, not an input error: callers derive all shapes from one config).
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
    unsafe { matmul_raw(dst.data.as_mut_ptr().add(dst.offset), dst.row_stride, accumulate, a, b, scale) }
}

/// [`matmul`] into a raw row-major destination with row stride `dst_row_stride`, for
/// threads that each write a disjoint block of one buffer (attention heads).
///
/// # Safety
/// `dst` must be valid for writes of `a.rows` rows of `b.cols` elements at that stride,
/// and no other thread may access those elements during the call. `a` and `b` must be
/// in bounds (checked) and must not overlap the destination.
pub unsafe fn matmul_raw(dst: *mut f32, dst_row_stride: usize, accumulate: bool, a: View, b: View, scale: f32) {
    assert_eq!(a.cols, b.rows, "inner dimensions");
    assert!(a.extent() <= a.data.len() && b.extent() <= b.data.len(), "operand out of bounds");
    #[cfg(target_arch = "wasm32")]
    {
        use super::wasm_kernel::{gemm_packed, pack_b, Simd};
        // The attention's operands change at every call: pack B into this thread's buffer.
        thread_local! { static PACKED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) }; }
        PACKED.with(|buf| {
            let mut buf = buf.borrow_mut();
            pack_b(b, &mut buf);
            let a_ptr = a.data.as_ptr().add(a.offset);
            gemm_packed::<Simd>(
                a.rows,
                b.cols,
                a.cols,
                a_ptr,
                a.row_stride,
                a.col_stride,
                buf.as_ptr(),
                dst,
                dst_row_stride,
                accumulate,
                scale,
            );
        });
    }
    #[cfg(not(target_arch = "wasm32"))]
    gemm::gemm(
        a.rows,
        b.cols,
        a.cols,
        dst,
        1,
        dst_row_stride as isize,
        accumulate,
        a.data.as_ptr().add(a.offset),
        a.col_stride as isize,
        a.row_stride as isize,
        b.data.as_ptr().add(b.offset),
        b.col_stride as isize,
        b.row_stride as isize,
        1.0,
        scale,
        false,
        false,
        false,
        // Threads come from the callers (tiles, attention tasks), not from gemm.
        Parallelism::None,
    );
}

/// Columns per strip of a native weight matrix (see [`Linear`]): one `gemm` microkernel's
/// height of output features (4 AVX-512 registers of f32).
const STRIP: usize = 64;

/// Token rows per native `gemm` call within a strip. From about 48 rows on, `gemm` copies
/// the strip into its packed layout at every call; at 32 it reads the contiguous strip in
/// place, and the strip stays in the core's cache for the next 32 rows. Measured here (one
/// thread, the six layers' products): 64 rows 90 -> 103 GFLOP/s, 128 rows 101 -> 108, 256
/// rows 106 -> 109 (BENCHMARKS.md, 2026-11-24 evening). The wasm kernel blocks rows itself.
#[cfg(not(target_arch = "wasm32"))]
const ROW_CHUNK: usize = 32;

/// A dense layer and its bias, the weight laid out once at load for the product kernel:
/// natively in column strips of [`STRIP`] outputs, each strip `[in, STRIP]` row-major and
/// contiguous, `gemm` called per strip on [`ROW_CHUNK`] token rows at a time; in the
/// browser packed in the wasm kernel's panels.
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
}

impl Linear {
    /// From PyTorch's `[out, in]` layout. Several layers may be stacked along the outputs
    /// (the fused QKV projection).
    pub fn from_torch(parts: &[(&[f32], &[f32])], inputs: usize) -> Linear {
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
        #[cfg(target_arch = "wasm32")]
        super::wasm_kernel::pack_b(View::row_major(&weight, inputs, outputs), &mut laid_out);
        #[cfg(not(target_arch = "wasm32"))]
        for c0 in (0..outputs).step_by(STRIP) {
            let width = STRIP.min(outputs - c0);
            for row in weight.chunks_exact(outputs) {
                laid_out.extend_from_slice(&row[c0..c0 + width]);
            }
        }
        Linear { weight: laid_out, bias, inputs, outputs }
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
        #[cfg(target_arch = "wasm32")]
        let tile = |&(r0, r1, c0, c1): &(usize, usize, usize, usize)| {
            use super::wasm_kernel::{gemm_packed, Simd, NR};
            assert!(c0 % NR == 0, "column tiles start on a panel");
            // SAFETY: as below; the panels from column c0 on hold `inputs` rows each.
            unsafe {
                let b = self.weight.as_ptr().add(c0 / NR * self.inputs * NR);
                let a = x.as_ptr().add(r0 * self.inputs);
                gemm_packed::<Simd>(
                    r1 - r0,
                    c1 - c0,
                    self.inputs,
                    a,
                    self.inputs,
                    1,
                    b,
                    dst.at(r0 * self.outputs + c0),
                    self.outputs,
                    true,
                    1.0,
                )
            };
        };
        #[cfg(not(target_arch = "wasm32"))]
        let tile = |&(r0, r1, c0, c1): &(usize, usize, usize, usize)| {
            let a = View {
                data: x,
                offset: r0 * self.inputs,
                rows: r1 - r0,
                cols: self.inputs,
                row_stride: self.inputs,
                col_stride: 1,
            };
            assert!(c0 % STRIP == 0, "column tiles start on a strip");
            for s0 in (c0..c1).step_by(STRIP) {
                // Every strip before this one is full: it starts at s0 * inputs.
                let width = STRIP.min(self.outputs - s0);
                let b = View::row_major(&self.weight[s0 * self.inputs..], self.inputs, width);
                for q0 in (r0..r1).step_by(ROW_CHUNK) {
                    let a = View { offset: q0 * self.inputs, rows: ROW_CHUNK.min(r1 - q0), ..a };
                    // SAFETY: tiles are disjoint blocks of `out` (rows r0..r1, columns
                    // c0..c1, inside its asserted shape), each written by one task only;
                    // `out` does not overlap `x`.
                    unsafe { matmul_raw(dst.at(q0 * self.outputs + s0), self.outputs, true, a, b, 1.0) };
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

    #[test]
    fn linear_stacks_torch_layers_and_adds_bias() {
        // Two layers of 1 and 2 outputs over 2 inputs, torch layout [out, in].
        let lin = Linear::from_torch(&[(&[1.0, 2.0], &[0.5]), (&[0.0, 1.0, -1.0, 0.0], &[0.0, 10.0])], 2);
        let mut out = [0.0; 3];
        lin.forward(&[3.0, 4.0], 1, &mut out, 1);
        assert_eq!(out, [11.5, 4.0, 7.0]);
    }

    #[test]
    fn tiled_linear_equals_the_plain_sum() {
        // 130 rows x 200 outputs in 3 column strips x 1 row block, ragged edges.
        let (rows, inputs, outputs) = (130, 7, 200);
        let w: Vec<f32> = (0..outputs * inputs).map(|i| (i % 13) as f32 - 6.0).collect();
        let b: Vec<f32> = (0..outputs).map(|i| i as f32).collect();
        let lin = Linear::from_torch(&[(&w, &b)], inputs);
        let x: Vec<f32> = (0..rows * inputs).map(|i| (i % 5) as f32).collect();
        let mut out = vec![0.0; rows * outputs];
        lin.forward(&x, rows, &mut out, 4);
        for r in 0..rows {
            for o in 0..outputs {
                let want: f32 = b[o] + (0..inputs).map(|i| x[r * inputs + i] * w[o * inputs + i]).sum::<f32>();
                assert_eq!(out[r * outputs + o], want, "row {r} output {o}");
            }
        }
    }
}
