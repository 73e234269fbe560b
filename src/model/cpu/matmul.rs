//! Matrix products of the CPU inference path, through the `gemm` crate (the same kernels
//! candle calls, AVX-512 included where the CPU has it; see Cargo.toml).
//!
//! Calling `gemm` directly instead of through candle tensors lets the attention read
//! q, k and v as strided views of one fused QKV buffer (no transposes, no copies) and
//! lets a linear layer start from its bias (no separate add).

use gemm::Parallelism;

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

/// How a product may use threads: a whole-matrix product uses the pool; products inside
/// an already parallel loop (attention per head) stay on their thread.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Threads {
    Pool,
    Single,
}

fn parallelism(threads: Threads) -> Parallelism {
    match threads {
        // wasm32 has no threads here: the pool would only add bookkeeping.
        Threads::Pool if !cfg!(target_arch = "wasm32") => Parallelism::Rayon(rayon::current_num_threads()),
        _ => Parallelism::None,
    }
}

/// `dst = (accumulate ? dst : 0) + scale * a @ b`. Panics if shapes or bounds disagree
/// (a programming error, not an input error: callers derive all shapes from one config).
pub fn matmul(dst: ViewMut, accumulate: bool, a: View, b: View, scale: f32, threads: Threads) {
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
    unsafe { matmul_raw(dst.data.as_mut_ptr().add(dst.offset), dst.row_stride, accumulate, a, b, scale, threads) }
}

/// [`matmul`] into a raw row-major destination with row stride `dst_row_stride`, for
/// threads that each write a disjoint block of one buffer (attention heads).
///
/// # Safety
/// `dst` must be valid for writes of `a.rows` rows of `b.cols` elements at that stride,
/// and no other thread may access those elements during the call. `a` and `b` must be
/// in bounds (checked) and must not overlap the destination.
pub unsafe fn matmul_raw(dst: *mut f32, dst_row_stride: usize, accumulate: bool, a: View, b: View, scale: f32, threads: Threads) {
    assert_eq!(a.cols, b.rows, "inner dimensions");
    assert!(a.extent() <= a.data.len() && b.extent() <= b.data.len(), "operand out of bounds");
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
        parallelism(threads),
    );
}

/// A dense layer with its weight stored `[in, out]` row-major (transposed once at load, the
/// layout `gemm` streams fastest) and its bias.
#[derive(Debug, Clone)]
pub struct Linear {
    pub weight: Vec<f32>,
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
        Linear { weight, bias, inputs, outputs }
    }

    /// `out[rows, outputs] = x[rows, inputs] @ W + b`.
    pub fn forward(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        assert_eq!(x.len(), rows * self.inputs, "input shape");
        assert_eq!(out.len(), rows * self.outputs, "output shape");
        for row in out.chunks_exact_mut(self.outputs) {
            row.copy_from_slice(&self.bias);
        }
        matmul(
            ViewMut { data: out, offset: 0, rows, cols: self.outputs, row_stride: self.outputs },
            true,
            View::row_major(x, rows, self.inputs),
            View::row_major(&self.weight, self.inputs, self.outputs),
            1.0,
            Threads::Pool,
        );
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
        matmul(ViewMut { data: &mut out, offset: 1, rows: 2, cols: 1, row_stride: 2 }, true, a, b, 2.0, Threads::Single);
        assert_eq!(out, [1.0, 35.0, 1.0, 79.0]);
    }

    #[test]
    fn linear_stacks_torch_layers_and_adds_bias() {
        // Two layers of 1 and 2 outputs over 2 inputs, torch layout [out, in].
        let lin = Linear::from_torch(&[(&[1.0, 2.0], &[0.5]), (&[0.0, 1.0, -1.0, 0.0], &[0.0, 10.0])], 2);
        let mut out = [0.0; 3];
        lin.forward(&[3.0, 4.0], 1, &mut out);
        assert_eq!(out, [11.5, 4.0, 7.0]);
    }
}
