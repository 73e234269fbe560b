//! The f32 matrix product of the browser build: B packed in panels of [`NR`] columns, a
//! [`MR`] x [`NR`] register-blocked microkernel over 128-bit vectors, and fused
//! multiply-add in the build with relaxed SIMD (`f32x4_relaxed_madd`: the site's
//! `pkg-threads-relaxed/`, 1.0-1.3x the plain threaded build, BENCHMARKS.md): one
//! instruction per multiply-add instead of two halves what the microkernel issues per
//! step, and at 4 lanes it is bound by issue, not by the multipliers. The plain build keeps
//! the multiply and the add (browsers without relaxed SIMD).
//!
//! Why not `gemm` in the browser: its simd128 kernel packs the weights again at every
//! call. Here a linear layer's weights are
//! packed once at load ([`super::matmul::Linear`]), and only the attention's small operands
//! are packed per call. Natively `gemm` stays (AVX-512).
//!
//! The kernel is written over [`Lanes`], four f32 lanes: [`Simd`] on wasm32, [`Portable`]
//! (plain arrays) elsewhere, so the packing and blocking logic is tested natively; the
//! browser tests run the wasm build against the native numbers.

use super::matmul::View;

/// Columns of a packed panel (two vectors).
pub const NR: usize = 8;
/// Rows of the microkernel: 2 x MR accumulators plus B's two vectors and one broadcast fit
/// the 16 vector registers the browser's compiler has on x86-64 and arm64.
pub const MR: usize = 4;
/// Depth of one pass over a panel: 256 x 8 f32 = 8 KiB of B stays in L1 while every row
/// block of A passes over it.
const KC: usize = 256;
/// Rows of A per pass over all panels: MC x KC f32 = 256 KiB stays in L2 while the panels
/// stream past it. Without it a tall product (a whole batch on one thread: 16,384 rows at
/// 512 x 32) read all of A from memory once per panel, 2.5x slower per row (BENCHMARKS.md).
const MC: usize = 256;

/// Four f32 lanes.
pub trait Lanes: Copy {
    fn splat(x: f32) -> Self;
    /// # Safety
    /// `p` must be valid for reading 4 f32 (no alignment needed).
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// `p` must be valid for writing 4 f32 (no alignment needed).
    unsafe fn store(self, p: *mut f32);
    /// `a * b + c`, rounded once where the target fuses it.
    fn madd(a: Self, b: Self, c: Self) -> Self;
}

/// Plain arrays: the reference implementation of [`Lanes`] (native tests).
#[derive(Clone, Copy)]
pub struct Portable([f32; 4]);

impl Lanes for Portable {
    fn splat(x: f32) -> Self {
        Portable([x; 4])
    }
    unsafe fn load(p: *const f32) -> Self {
        Portable(std::ptr::read_unaligned(p as *const [f32; 4]))
    }
    unsafe fn store(self, p: *mut f32) {
        std::ptr::write_unaligned(p as *mut [f32; 4], self.0)
    }
    fn madd(a: Self, b: Self, c: Self) -> Self {
        Portable(std::array::from_fn(|i| a.0[i] * b.0[i] + c.0[i]))
    }
}

/// wasm simd128 (`v128`), with relaxed-SIMD fused multiply-add when compiled with
/// `target_feature = "relaxed-simd"`.
#[cfg(target_arch = "wasm32")]
#[derive(Clone, Copy)]
pub struct Simd(core::arch::wasm32::v128);

#[cfg(target_arch = "wasm32")]
impl Lanes for Simd {
    #[inline(always)]
    fn splat(x: f32) -> Self {
        Simd(core::arch::wasm32::f32x4_splat(x))
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Simd(core::arch::wasm32::v128_load(p as *const core::arch::wasm32::v128))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        core::arch::wasm32::v128_store(p as *mut core::arch::wasm32::v128, self.0)
    }
    #[inline(always)]
    fn madd(a: Self, b: Self, c: Self) -> Self {
        use core::arch::wasm32::*;
        #[cfg(target_feature = "relaxed-simd")]
        {
            Simd(f32x4_relaxed_madd(a.0, b.0, c.0))
        }
        #[cfg(not(target_feature = "relaxed-simd"))]
        {
            Simd(f32x4_add(f32x4_mul(a.0, b.0), c.0))
        }
    }
}

/// Length of `b` packed by [`pack_b`]: whole panels of `NR` columns.
pub fn packed_len(rows: usize, cols: usize) -> usize {
    cols.div_ceil(NR) * NR * rows
}

/// Pack the `k x n` view `b` into panels of [`NR`] columns: element (p, j) goes to
/// `(j / NR) * k * NR + p * NR + j % NR`; the last panel's missing columns are 0.
pub fn pack_b(b: View, out: &mut Vec<f32>) {
    let (k, n) = (b.rows, b.cols);
    out.clear();
    out.resize(packed_len(k, n), 0.0);
    for (panel, chunk) in out.chunks_exact_mut((k * NR).max(1)).enumerate().take(n.div_ceil(NR)) {
        let j0 = panel * NR;
        let cols = NR.min(n - j0);
        for p in 0..k {
            let src = b.offset + p * b.row_stride + j0 * b.col_stride;
            let row = &mut chunk[p * NR..p * NR + cols];
            if b.col_stride == 1 {
                row.copy_from_slice(&b.data[src..src + cols]);
            } else {
                for (c, v) in row.iter_mut().enumerate() {
                    *v = b.data[src + c * b.col_stride];
                }
            }
        }
    }
}

/// `dst = (accumulate ? dst : 0) + scale * a @ b` for an `m x k` `a` (strides `a_rs`,
/// `a_cs`) and an `k x n` `b` packed by [`pack_b`] (`bp`: its first panel), into a
/// row-major `dst` with row stride `dst_rs`.
///
/// # Safety
/// `a` must be readable at every (i, p) of the `m x k` shape, `bp` for `n.div_ceil(NR)`
/// panels of `k * NR`, `dst` writable at every (i, j) of `m x n`, and `dst` must not overlap
/// `a` or `bp` nor be accessed by another thread during the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_packed<V: Lanes>(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    a_rs: usize,
    a_cs: usize,
    bp: *const f32,
    dst: *mut f32,
    dst_rs: usize,
    accumulate: bool,
    scale: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                std::ptr::write_bytes(dst.add(i * dst_rs), 0, n);
            }
        }
        return;
    }
    let mut k0 = 0;
    while k0 < k {
        let kc = KC.min(k - k0);
        // Later depth blocks add to what the first wrote.
        let acc = accumulate || k0 > 0;
        for ic in (0..m).step_by(MC) {
            let block_end = (ic + MC).min(m);
            for panel in 0..n.div_ceil(NR) {
                let j0 = panel * NR;
                let cols = NR.min(n - j0);
                let b = bp.add(panel * k * NR + k0 * NR);
                let mut i0 = ic;
                while i0 < block_end {
                    let rows = MR.min(block_end - i0);
                    micro::<V>(
                        kc,
                        a.add(i0 * a_rs + k0 * a_cs),
                        a_rs,
                        a_cs,
                        b,
                        rows,
                        cols,
                        dst.add(i0 * dst_rs + j0),
                        dst_rs,
                        acc,
                        scale,
                    );
                    i0 += MR;
                }
            }
        }
        k0 += kc;
    }
}

/// One `rows x cols` (at most `MR x NR`) block of the product over depth `k`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn micro<V: Lanes>(
    k: usize,
    a: *const f32,
    a_rs: usize,
    a_cs: usize,
    b: *const f32,
    rows: usize,
    cols: usize,
    dst: *mut f32,
    dst_rs: usize,
    accumulate: bool,
    scale: f32,
) {
    let zero = V::splat(0.0);
    let mut c = [[zero; 2]; MR];
    // A short block reads its last row again (in bounds) and drops the copies at the store.
    let mut ap: [*const f32; MR] = std::array::from_fn(|i| a.add(i.min(rows - 1) * a_rs));
    let mut bp = b;
    for _ in 0..k {
        let b0 = V::load(bp);
        let b1 = V::load(bp.add(4));
        for i in 0..MR {
            let ai = V::splat(*ap[i]);
            c[i][0] = V::madd(ai, b0, c[i][0]);
            c[i][1] = V::madd(ai, b1, c[i][1]);
            ap[i] = ap[i].add(a_cs);
        }
        bp = bp.add(NR);
    }
    let s = V::splat(scale);
    if rows == MR && cols == NR {
        for (i, ci) in c.iter().enumerate() {
            let d = dst.add(i * dst_rs);
            for (h, &v) in ci.iter().enumerate() {
                let base = if accumulate { V::load(d.add(4 * h)) } else { zero };
                V::madd(v, s, base).store(d.add(4 * h));
            }
        }
    } else {
        let mut tmp = [0.0f32; MR * NR];
        for (i, ci) in c.iter().enumerate() {
            ci[0].store(tmp.as_mut_ptr().add(i * NR));
            ci[1].store(tmp.as_mut_ptr().add(i * NR + 4));
        }
        for i in 0..rows {
            for j in 0..cols {
                let d = dst.add(i * dst_rs + j);
                let base = if accumulate { *d } else { 0.0 };
                *d = tmp[i * NR + j] * scale + base;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_by_hand() {
        // b = 2 x 10, b[p][j] = 10 p + j, read transposed from a 10 x 2 buffer (col stride 2):
        // panel 0 holds columns 0..8 of both rows, panel 1 columns 8, 9 and six zeros.
        let t: Vec<f32> = (0..10).flat_map(|j| [j as f32, 10.0 + j as f32]).collect();
        let b = View { data: &t, offset: 0, rows: 2, cols: 10, row_stride: 1, col_stride: 2 };
        let mut out = Vec::new();
        pack_b(b, &mut out);
        let mut want: Vec<f32> = (0..8).map(|j| j as f32).chain((0..8).map(|j| 10.0 + j as f32)).collect();
        want.extend([8.0, 9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 18.0, 19.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(out, want);
    }

    /// The product in f64 by its definition.
    fn naive(
        m: usize,
        n: usize,
        k: usize,
        a: impl Fn(usize, usize) -> f32,
        b: impl Fn(usize, usize) -> f32,
    ) -> Vec<f64> {
        (0..m * n).map(|ij| (0..k).map(|p| a(ij / n, p) as f64 * b(p, ij % n) as f64).sum()).collect()
    }

    #[test]
    fn blocked_product_equals_the_definition_on_ragged_shapes() {
        // Edges in every direction (rows not a multiple of MR, columns not of NR, depth
        // over KC), strided A, accumulate and scale, and a column offset into the panels.
        for &(m, n, k, a_transposed, accumulate, scale) in &[
            (1, 1, 1, false, false, 1.0),
            (7, 13, 5, true, true, 0.5),
            (9, 24, 300, false, true, 1.0),
            (64, 40, 600, false, false, 0.125),
            (MC + 7, 9, 300, true, true, 1.0),
            (4, 8, 0, false, false, 1.0),
        ] {
            let av: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
            let bv: Vec<f32> = (0..k * (n + 16)).map(|i| ((i * 53 % 97) as f32 - 48.0) / 24.0).collect();
            let (a_rs, a_cs) = if a_transposed { (1, m) } else { (k, 1) };
            let a = |i: usize, p: usize| av[i * a_rs + p * a_cs];
            // B is the last n columns of a k x (n + 16) matrix: start at panel 2.
            let mut packed = Vec::new();
            pack_b(View::row_major(&bv, k, n + 16), &mut packed);
            let b = |p: usize, j: usize| bv[p * (n + 16) + 16 + j];
            let dst_rs = n + 3;
            let mut dst: Vec<f32> = (0..m * dst_rs).map(|i| i as f32).collect();
            let before = dst.clone();
            // SAFETY: shapes as stated; `packed` holds the panels from column 16 on.
            unsafe {
                gemm_packed::<Portable>(
                    m,
                    n,
                    k,
                    av.as_ptr(),
                    a_rs,
                    a_cs,
                    packed.as_ptr().add(2 * k * NR),
                    dst.as_mut_ptr(),
                    dst_rs,
                    accumulate,
                    scale,
                )
            };
            let want = naive(m, n, k, a, b);
            for i in 0..m {
                for j in 0..dst_rs {
                    let got = dst[i * dst_rs + j] as f64;
                    let old = before[i * dst_rs + j] as f64;
                    let expect =
                        if j < n { want[i * n + j] * scale as f64 + if accumulate { old } else { 0.0 } } else { old };
                    assert!(
                        (got - expect).abs() < 1e-4 * (1.0 + expect.abs()),
                        "{m}x{n}x{k} at ({i}, {j}): {got} vs {expect}"
                    );
                }
            }
        }
    }
}
