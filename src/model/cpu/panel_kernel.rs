//! The f32 matrix product over a right-hand operand packed in panels of two vectors' width:
//! B in panels of `2 * V::WIDTH` columns, an `MR` x (two vectors) register-blocked
//! microkernel, weights packed once at load ([`super::matmul::Linear`]).
//!
//! Two places run it:
//! - **the browser**, over 128-bit wasm SIMD ([`Simd`], 4 x 8 blocks), with fused
//!   multiply-add in the build with relaxed SIMD (`f32x4_relaxed_madd`: the site's
//!   `pkg-threads-relaxed/`, 1.0-1.3x the plain threaded build, BENCHMARKS.md): one
//!   instruction per multiply-add instead of two halves what the microkernel issues per
//!   step. The plain build keeps the multiply and the add (browsers without relaxed SIMD).
//!   `gemm`'s simd128 kernel would pack the weights again at every call.
//! - **natively on x86-64 CPUs with AVX2 and FMA but not AVX-512** ([`Avx2`], 6 x 16
//!   blocks): a panel of one weight matrix (`inputs` x 16, 24 KiB at 384 inputs) stays in
//!   L1 while every block of token rows passes over it, where `gemm` streams its whole
//!   strip from L2 for each block of 6 rows: 82 against 66-70 GFLOP/s per thread on the
//!   six layers' products of all-MiniLM-L6-v2 at 128 and 256 rows (BENCHMARKS.md,
//!   2026-11-24, AMD EPYC Zen 3). With AVX-512 `gemm` stays (98-110 of 117 GFLOP/s there).
//!
//! The kernel is written over [`Lanes`], one SIMD vector of f32; [`Portable`] (plain
//! arrays) runs the same packing and blocking in the native tests, and the browser tests run
//! the wasm build against the native numbers.

use super::view::View;

/// Rows of A per pass over all panels: MC rows x at most 384 deep, 384 KiB of f32, stay in
/// L2 while the panels stream past them. Without it a tall product (a whole batch on one
/// thread: 16,384 rows at 512 x 32) read all of A from memory once per panel, 2.5x slower
/// per row (BENCHMARKS.md).
const MC: usize = 256;
/// The widest panel any [`Lanes`] makes (two [`Reproducible`] vectors natively): the size of
/// the edge buffer.
const MAX_PANEL: usize = 32;

/// One SIMD vector of `WIDTH` f32 lanes.
pub trait Lanes: Copy {
    const WIDTH: usize;
    /// Columns of a packed panel: two vectors.
    const PANEL: usize = 2 * Self::WIDTH;
    /// Deepest pass over a panel: that many rows of it stay in L1 while every row block of A
    /// passes over it. A deeper product is cut into the fewest passes of (nearly) equal depth
    /// (1,536 = 4 x 384; 1,000 = 334 + 334 + 332), each adding to what the previous stored.
    const MAX_DEPTH: usize;
    fn splat(x: f32) -> Self;
    /// # Safety
    /// `p` must be valid for reading `WIDTH` f32 (no alignment needed).
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// `p` must be valid for writing `WIDTH` f32 (no alignment needed).
    unsafe fn store(self, p: *mut f32);
    /// `a * b + c`, rounded once where the target fuses it.
    fn madd(a: Self, b: Self, c: Self) -> Self;
}

/// Plain arrays: the reference implementation of [`Lanes`] (native tests), at any width.
#[derive(Clone, Copy)]
pub struct Portable<const W: usize>([f32; W]);

impl<const W: usize> Lanes for Portable<W> {
    const WIDTH: usize = W;
    const MAX_DEPTH: usize = 384;
    fn splat(x: f32) -> Self {
        Portable([x; W])
    }
    unsafe fn load(p: *const f32) -> Self {
        Portable(std::ptr::read_unaligned(p as *const [f32; W]))
    }
    unsafe fn store(self, p: *mut f32) {
        std::ptr::write_unaligned(p as *mut [f32; W], self.0)
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
    const WIDTH: usize = 4;
    /// 256 x 8 f32 = 8 KiB. 384 (one pass for the 384-deep products, as natively) measured
    /// within noise in Chromium on Zen 5: 0.98-1.07x tokens/s by cell, median 1.01x, five
    /// rounds each (BENCHMARKS.md, 2026-11-25, Zen 5), so the page keeps the depth all its
    /// other figures were measured with.
    const MAX_DEPTH: usize = 256;
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

/// Rows of the wasm microkernel. LLVM orders a step's multiply-adds by B's vector, so all
/// the rows' broadcasts stay live: 2 x 4 accumulators, B's two vectors and 4 broadcasts
/// are 14 values, which fit the 16 vector registers of x86-64. 5 rows need 17 and 6 rows
/// 20: the browser spills, and both measured about half as fast (BENCHMARKS.md, the two
/// 2026-11-25 Zen 5 entries). arm64 has 32 vector registers, where more rows might pay;
/// no arm64 machine has measured it.
#[cfg(target_arch = "wasm32")]
pub const SIMD_ROWS: usize = 4;

/// AVX2 (`__m256`, 8 lanes) with fused multiply-add. Only used inside functions compiled
/// with `avx2,fma` enabled ([`gemm_avx2`]); the methods are inlined into them.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub struct Avx2(std::arch::x86_64::__m256);

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx2 {
    const WIDTH: usize = 8;
    /// 384 x 16 f32 = 24 KiB. 384 is the depth of all but one of a MiniLM layer's products,
    /// which then run in one pass: their block sums stay in registers to the end instead of
    /// being stored after 256 and loaded again, 7-10 % more GFLOP/s on those products at 64
    /// to 512 rows, 7-8 % more tokens/s at 128 x 8 and 256 x 1 (BENCHMARKS.md, 2026-11-25
    /// (later)).
    const MAX_DEPTH: usize = 384;
    #[inline(always)]
    fn splat(x: f32) -> Self {
        // SAFETY (all four): only reached from `gemm_avx2`, which runs on CPUs with AVX2
        // and FMA (checked by `has_avx2`).
        Avx2(unsafe { std::arch::x86_64::_mm256_set1_ps(x) })
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx2(std::arch::x86_64::_mm256_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        std::arch::x86_64::_mm256_storeu_ps(p, self.0)
    }
    #[inline(always)]
    fn madd(a: Self, b: Self, c: Self) -> Self {
        Avx2(unsafe { std::arch::x86_64::_mm256_fmadd_ps(a.0, b.0, c.0) })
    }
}

/// Rows of the AVX2 microkernel: 6 x 2 accumulators plus B's two vectors and one broadcast
/// are 15 of the 16 ymm registers.
#[cfg(target_arch = "x86_64")]
pub const AVX2_ROWS: usize = 6;

/// Whether this CPU runs [`gemm_avx2`].
#[cfg(target_arch = "x86_64")]
pub fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// The product with AVX2 and FMA, B packed by [`pack_b::<Avx2>`](pack_b).
///
/// # Safety
/// As [`gemm_packed`], and the CPU must have AVX2 and FMA ([`has_avx2`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_avx2(
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
    gemm_packed::<Avx2, AVX2_ROWS>(m, n, k, a, a_rs, a_cs, bp, dst, dst_rs, accumulate, scale)
}

/// The lanes of the reproducible product ([`gemm_reproducible`]): plain arrays, a multiply
/// then an add (Rust never fuses them), so each output is the same sum in the same order,
/// rounded the same way, on every target and at every vector width: the depth passes
/// (`MAX_DEPTH`, one constant everywhere) are the only split of a sum. Four lanes in the
/// browser (one SIMD128 vector); natively sixteen (one AVX-512 vector, or two AVX2 ones),
/// which won back half of what giving up fused multiply-add cost the int8 path's attention.
#[cfg(target_arch = "wasm32")]
pub type Reproducible = Portable<4>;
#[cfg(not(target_arch = "wasm32"))]
pub type Reproducible = Portable<16>;

/// The product over [`Reproducible`] lanes, B packed by [`pack_b::<Reproducible>`](pack_b):
/// the same bits natively and in every browser build (the int8 path's attention). The rows
/// per block change nothing but the speed: 4 in the browser (as [`SIMD_ROWS`]), natively 8
/// with AVX-512 (16 accumulators of its 32 registers) and 3 with AVX2 (12 of 16).
///
/// # Safety
/// As [`gemm_packed`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_reproducible(
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
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn avx512(
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
            gemm_packed::<Reproducible, 8>(m, n, k, a, a_rs, a_cs, bp, dst, dst_rs, accumulate, scale)
        }
        #[target_feature(enable = "avx2")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn avx2(
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
            gemm_packed::<Reproducible, 3>(m, n, k, a, a_rs, a_cs, bp, dst, dst_rs, accumulate, scale)
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            return avx512(m, n, k, a, a_rs, a_cs, bp, dst, dst_rs, accumulate, scale);
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return avx2(m, n, k, a, a_rs, a_cs, bp, dst, dst_rs, accumulate, scale);
        }
    }
    #[cfg(target_arch = "wasm32")]
    gemm_packed::<Reproducible, SIMD_ROWS>(m, n, k, a, a_rs, a_cs, bp, dst, dst_rs, accumulate, scale);
    #[cfg(not(target_arch = "wasm32"))]
    gemm_packed::<Reproducible, 4>(m, n, k, a, a_rs, a_cs, bp, dst, dst_rs, accumulate, scale);
}

/// Length of `b` packed by [`pack_b`]: whole panels of `V::PANEL` columns.
pub fn packed_len<V: Lanes>(rows: usize, cols: usize) -> usize {
    cols.div_ceil(V::PANEL) * V::PANEL * rows
}

/// Pack the `k x n` view `b` into panels of `NR = V::PANEL` columns: element (p, j) goes
/// to `(j / NR) * k * NR + p * NR + j % NR`; the last panel's missing columns are 0.
pub fn pack_b<V: Lanes>(b: View, out: &mut Vec<f32>) {
    const { assert!(V::PANEL <= MAX_PANEL) };
    let (k, n) = (b.rows, b.cols);
    let nr = V::PANEL;
    out.clear();
    out.resize(packed_len::<V>(k, n), 0.0);
    for (panel, chunk) in out.chunks_exact_mut((k * nr).max(1)).enumerate().take(n.div_ceil(nr)) {
        let j0 = panel * nr;
        let cols = nr.min(n - j0);
        for p in 0..k {
            let src = b.offset + p * b.row_stride + j0 * b.col_stride;
            let row = &mut chunk[p * nr..p * nr + cols];
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
/// `a_cs`) and an `k x n` `b` packed by [`pack_b::<V>`](pack_b) (`bp`: its first panel),
/// into a row-major `dst` with row stride `dst_rs`, in blocks of `MR` rows.
///
/// # Safety
/// `a` must be readable at every (i, p) of the `m x k` shape, `bp` for `n.div_ceil(NR)`
/// panels of `k * NR`, `dst` writable at every (i, j) of `m x n`, and `dst` must not overlap
/// `a` or `bp` nor be accessed by another thread during the call.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_packed<V: Lanes, const MR: usize>(
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
    let nr = V::PANEL;
    let depth = k.div_ceil(k.div_ceil(V::MAX_DEPTH));
    let mut k0 = 0;
    while k0 < k {
        let kc = depth.min(k - k0);
        // Later depth blocks add to what the first wrote.
        let acc = accumulate || k0 > 0;
        for ic in (0..m).step_by(MC) {
            let block_end = (ic + MC).min(m);
            for panel in 0..n.div_ceil(nr) {
                let j0 = panel * nr;
                let cols = nr.min(n - j0);
                let b = bp.add(panel * k * nr + k0 * nr);
                let mut i0 = ic;
                while i0 < block_end {
                    let rows = MR.min(block_end - i0);
                    micro::<V, MR>(
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
unsafe fn micro<V: Lanes, const MR: usize>(
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
    let nr = V::PANEL;
    let w = V::WIDTH;
    let zero = V::splat(0.0);
    let mut c = [[zero; 2]; MR];
    // A short block reads its last row again (in bounds) and drops the copies at the store.
    let mut ap: [*const f32; MR] = std::array::from_fn(|i| a.add(i.min(rows - 1) * a_rs));
    let mut bp = b;
    for _ in 0..k {
        let b0 = V::load(bp);
        let b1 = V::load(bp.add(w));
        for i in 0..MR {
            let ai = V::splat(*ap[i]);
            c[i][0] = V::madd(ai, b0, c[i][0]);
            c[i][1] = V::madd(ai, b1, c[i][1]);
            ap[i] = ap[i].add(a_cs);
        }
        bp = bp.add(nr);
    }
    let s = V::splat(scale);
    if rows == MR && cols == nr {
        for (i, ci) in c.iter().enumerate() {
            let d = dst.add(i * dst_rs);
            for (h, &v) in ci.iter().enumerate() {
                let base = if accumulate { V::load(d.add(w * h)) } else { zero };
                V::madd(v, s, base).store(d.add(w * h));
            }
        }
    } else {
        let mut tmp = [[0.0f32; MAX_PANEL]; MR];
        for (t, ci) in tmp.iter_mut().zip(&c) {
            ci[0].store(t.as_mut_ptr());
            ci[1].store(t.as_mut_ptr().add(w));
        }
        for (i, t) in tmp.iter().enumerate().take(rows) {
            for (j, &v) in t.iter().enumerate().take(cols) {
                let d = dst.add(i * dst_rs + j);
                let base = if accumulate { *d } else { 0.0 };
                *d = v * scale + base;
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
        pack_b::<Portable<4>>(b, &mut out);
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

    /// `gemm` as a function of the kernel, for [`check_ragged_shapes`].
    type Product = unsafe fn(usize, usize, usize, *const f32, usize, usize, *const f32, *mut f32, usize, bool, f32);

    /// The product against its definition on ragged shapes: edges in every direction (rows
    /// not a multiple of the block's, columns not of the panel's, depth over MAX_DEPTH in
    /// equal and unequal passes), strided A, accumulate and scale, and a column offset of
    /// two panels into the packing.
    fn check_ragged_shapes<V: Lanes>(product: Product) {
        let nr = V::PANEL;
        for &(m, n, k, a_transposed, accumulate, scale) in &[
            (1, 1, 1, false, false, 1.0),
            (7, 13, 5, true, true, 0.5),
            (9, 24, 1000, false, true, 1.0),
            (13, 35, 17, false, false, 1.0),
            (64, 40, 600, false, false, 0.125),
            (MC + 7, 9, 300, true, true, 1.0),
            (4, 8, 0, false, false, 1.0),
        ] {
            let av: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
            let wide = n + 2 * nr;
            let bv: Vec<f32> = (0..k * wide).map(|i| ((i * 53 % 97) as f32 - 48.0) / 24.0).collect();
            let (a_rs, a_cs) = if a_transposed { (1, m) } else { (k, 1) };
            let a = |i: usize, p: usize| av[i * a_rs + p * a_cs];
            // B is the last n columns of a k x (n + 2 panels) matrix: start at panel 2.
            let mut packed = Vec::new();
            pack_b::<V>(View::row_major(&bv, k, wide), &mut packed);
            let b = |p: usize, j: usize| bv[p * wide + 2 * nr + j];
            let dst_rs = n + 3;
            let mut dst: Vec<f32> = (0..m * dst_rs).map(|i| i as f32).collect();
            let before = dst.clone();
            // SAFETY: shapes as stated; `packed` holds the panels from column 2 nr on.
            unsafe {
                product(
                    m,
                    n,
                    k,
                    av.as_ptr(),
                    a_rs,
                    a_cs,
                    packed.as_ptr().add(2 * k * nr),
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

    #[test]
    fn blocked_product_equals_the_definition_on_ragged_shapes() {
        // The wasm kernel's shape (4 lanes, blocks of 4 rows) and the AVX2 kernel's (8
        // lanes, blocks of 6), over plain arrays.
        check_ragged_shapes::<Portable<4>>(gemm_packed::<Portable<4>, 4>);
        check_ragged_shapes::<Portable<8>>(gemm_packed::<Portable<8>, 6>);
    }

    #[test]
    fn reproducible_product_gives_the_browsers_bits() {
        // The browser's reproducible product (4 lanes, blocks of 4 rows) and this machine's
        // (8 lanes, AVX2 where present, blocks of 6) on the ragged shapes, bit for bit:
        // each output is one sum in one order whatever the width and the blocking.
        check_ragged_shapes::<Reproducible>(gemm_reproducible);
        let (m, n, k) = (13, 35, 1000);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.3).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 24.7).collect();
        let product = |wide: bool| {
            let mut packed = Vec::new();
            let mut dst: Vec<f32> = (0..m * n).map(|i| i as f32 * 0.01).collect();
            let b = View::row_major(&b, k, n);
            // SAFETY: shapes as stated.
            unsafe {
                if wide {
                    pack_b::<Reproducible>(b, &mut packed);
                    gemm_reproducible(m, n, k, a.as_ptr(), k, 1, packed.as_ptr(), dst.as_mut_ptr(), n, true, 0.7);
                } else {
                    pack_b::<Portable<4>>(b, &mut packed);
                    gemm_packed::<Portable<4>, 4>(
                        m,
                        n,
                        k,
                        a.as_ptr(),
                        k,
                        1,
                        packed.as_ptr(),
                        dst.as_mut_ptr(),
                        n,
                        true,
                        0.7,
                    );
                }
            }
            dst.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        };
        assert_eq!(product(true), product(false));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_product_equals_the_definition_on_ragged_shapes() {
        // Every x86-64 machine this project builds on has AVX2 (Zen 3, Zen 4); elsewhere
        // the kernel is never chosen, so there is nothing to test.
        if has_avx2() {
            check_ragged_shapes::<Avx2>(gemm_avx2);
        } else {
            eprintln!("no AVX2 + FMA on this CPU: the AVX2 kernel is not used here");
        }
    }
}
