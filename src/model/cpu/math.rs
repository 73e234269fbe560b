//! Element-wise and row-wise kernels of the CPU inference path: exp, erf, GELU, softmax and
//! layer normalisation on plain `f32` slices.
//!
//! Why not `f32::exp` / libm's `erff`: they are scalar library calls that the compiler
//! cannot vectorise, and at 512 tokens the softmax alone takes 19 million exponentials per
//! sequence. The versions here are straight-line arithmetic on bit patterns that compile
//! to SIMD; their error (checked in the tests against f64 references) is below 1e-6,
//! far below what separates two models' hidden states.
//!
//! The arithmetic is written once over [`MulAdd`]: fused (one rounding, one instruction)
//! in the builds for CPUs with FMA and in the browser build with relaxed SIMD; a multiply
//! and an add in the other browser builds and on CPUs without FMA, where `f32::mul_add`
//! would be a slow library call.

/// `a * b + c`, fused or not: the kernels below take it as a type parameter so that one
/// body serves both.
pub trait MulAdd {
    fn mul_add(a: f32, b: f32, c: f32) -> f32;
}

/// One fused multiply-add (one rounding): for code compiled with the `fma` target feature.
pub struct Fused;

impl MulAdd for Fused {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

/// A multiply, then an add (two roundings).
pub struct Unfused;

impl MulAdd for Unfused {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// `a * b + c` with one rounding or two, whichever the target runs faster (LLVM's
/// `fmuladd`), for the browser build with relaxed SIMD: there the vectorised loops below
/// become `f32x4.relaxed_madd` (LLVM 22 lowers `fmuladd` to it), which the browser runs as
/// one fused instruction where the CPU has FMA, and scalar tails a multiply and an add.
/// (`f32::mul_add` would demand one rounding everywhere: a library call in wasm.) The
/// other wasm builds have no fused instruction and take [`Unfused`]. Each operation takes
/// one of the two forms the tests below check; the browser tests hold the page's numbers
/// to the CLI's.
#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
pub struct Contracted;

#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
impl MulAdd for Contracted {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        core::intrinsics::fmuladdf32(a, b, c)
    }
}

/// How the kernels below round: the choice of the caller, per encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arithmetic {
    /// Fastest on this target: fused multiply-add where the CPU (or the relaxed-SIMD
    /// browser build) has it. Native and browser results then differ in their last bits.
    Fastest,
    /// A multiply, then an add, on every target, in the same order: the same bits natively
    /// and in every browser build. The int8 path takes it: its activations are rounded to
    /// 7 bits per token before each product, and a last-bit difference that moves a value
    /// across a rounding boundary would otherwise grow into a visible one (0.036 in a
    /// probability, measured) between the page and the CLI.
    Reproducible,
}

/// The form of the kernels' last branch (builds without a run-time FMA check, and CPUs
/// without FMA): [`Contracted`] in the relaxed-SIMD wasm build, [`Unfused`] elsewhere.
#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
type Baseline = Contracted;
#[cfg(not(all(target_arch = "wasm32", target_feature = "relaxed-simd")))]
type Baseline = Unfused;

/// e^x for the range softmax and erf need, relative error < 3e-7 (tested).
///
/// Cody-Waite style: x = n ln2 + r with |r| <= ln2/2, e^r by its Taylor polynomial to
/// degree 7 (remainder r^8/8! < 6e-9), 2^n by writing n into the exponent bits.
/// Inputs below -87 return about 1e-38 instead of 0 (callers add it to sums >= 1).
#[inline(always)]
pub fn exp<M: MulAdd>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in a part exact in f32 and the rest, so n * LN2_HI has no rounding error.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // 1.5 * 2^23: adding it rounds to the nearest integer and leaves that integer in the
    // low mantissa bits (a vectorisable round()).
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let t = M::mul_add(x, LOG2E, ROUND);
    let n = t.to_bits() as i32 - ROUND.to_bits() as i32;
    let nf = t - ROUND;
    let r = M::mul_add(nf, -LN2_LO, M::mul_add(nf, -LN2_HI, x));
    // Horner from the highest degree: 1/5040, then p * r + 1/720, ..., p * r + 1.
    let p = [1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 1.0 / 2.0, 1.0, 1.0]
        .into_iter()
        .fold(1.0 / 5040.0, |p, c| M::mul_add(p, r, c));
    p * f32::from_bits(((n + 127) as u32) << 23)
}

/// erf(x), absolute error < 1e-6 (tested; 5.5e-7 at worst): Abramowitz & Stegun, Handbook
/// of Mathematical Functions, formula 7.1.26 (error 1.5e-7 in exact arithmetic; f32 adds
/// the rest where `1 - poly * exp` cancels near 0) with the [`exp`] above.
#[inline(always)]
pub fn erf<M: MulAdd>(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [0.254_829_6, -0.284_496_74, 1.421_413_7, -1.453_152, 1.061_405_4];
    let ax = x.abs();
    let t = 1.0 / M::mul_add(P, ax, 1.0);
    let poly = t * [A[3], A[2], A[1], A[0]].into_iter().fold(A[4], |p, a| M::mul_add(p, t, a));
    let y = M::mul_add(-poly, exp::<M>(-ax * ax), 1.0);
    y.copysign(x)
}

/// Define a kernel compiled three times — for AVX-512, for AVX2 with FMA and for the
/// baseline — and pick the widest the CPU has at run time (the check is a cached flag).
/// The body is plain scalar Rust over the [`MulAdd`] named in `<...>`: for
/// [`Arithmetic::Fastest`] fused in the first two and [`Baseline`] in the last, for
/// [`Arithmetic::Reproducible`] [`Unfused`] in all three. The compiler vectorises it for
/// each target; element-wise steps and sums in a fixed number of lanes round the same at
/// any vector width, so only the multiply-add form changes the bits.
macro_rules! multiversion {
    ($(#[$meta:meta])* pub fn $name:ident<$m:ident>($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        pub fn $name(arithmetic: Arithmetic, $($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body<$m: MulAdd>($($arg: $ty),*) $(-> $ret)? $body
            let reproducible = arithmetic == Arithmetic::Reproducible;
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,fma")]
                fn v4<$m: MulAdd>($($arg: $ty),*) $(-> $ret)? { body::<$m>($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                fn v3<$m: MulAdd>($($arg: $ty),*) $(-> $ret)? { body::<$m>($($arg),*) }
                if std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has the features v4 was compiled for.
                    return unsafe {
                        if reproducible { v4::<Unfused>($($arg),*) } else { v4::<Fused>($($arg),*) }
                    };
                }
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: as above, for v3.
                    return unsafe {
                        if reproducible { v3::<Unfused>($($arg),*) } else { v3::<Fused>($($arg),*) }
                    };
                }
            }
            if reproducible { body::<Unfused>($($arg),*) } else { body::<Baseline>($($arg),*) }
        }
    };
}

/// Lanes of the partial sums in reductions. Floating-point addition is not associative,
/// so the compiler keeps a single running sum unless the code itself splits it.
const LANES: usize = 16;

/// Sum of `f(x)` over `xs` in `LANES` partial sums (vectorisable).
#[inline(always)]
fn sum_of(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    for chunk in chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a += f(x);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `x = f(x)` for every element, returning the sum of the new values in `LANES` partial sums
/// (one pass where a map and [`sum_of`] would read the slice twice).
#[inline(always)]
fn map_and_sum(xs: &mut [f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut chunks = xs.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (a, x) in acc.iter_mut().zip(chunk) {
            *x = f(*x);
            *a += *x;
        }
    }
    let tail = chunks.into_remainder().iter_mut().fold(0.0, |sum, x| {
        *x = f(*x);
        sum + *x
    });
    acc.iter().sum::<f32>() + tail
}

/// Largest element (vectorisable; `-inf` for an empty slice).
#[inline(always)]
fn max_of(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder().iter().fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    for chunk in chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a = if x > *a { x } else { *a };
        }
    }
    acc.iter().fold(tail, |m, &x| if x > m { x } else { m })
}

multiversion! {
    /// GELU with the exact (erf) form, in place: x * (1 + erf(x / sqrt 2)) / 2.
    pub fn gelu_erf<M>(xs: &mut [f32]) {
        for x in xs {
            *x = 0.5 * *x * (1.0 + erf::<M>(*x * std::f32::consts::FRAC_1_SQRT_2));
        }
    }
}

multiversion! {
    /// GELU with the tanh approximation (`gelu_new`, `gelu_pytorch_tanh`), in place.
    pub fn gelu_tanh<M>(xs: &mut [f32]) {
        const C: f32 = 0.797_884_6; // sqrt(2 / pi)
        for x in xs {
            let u = C * (*x + 0.044_715 * *x * *x * *x);
            // tanh(u) = 1 - 2 / (e^{2u} + 1), stable at both ends with the clamped exp.
            let tanh = 1.0 - 2.0 / (exp::<M>(2.0 * u) + 1.0);
            *x = 0.5 * *x * (1.0 + tanh);
        }
    }
}

/// ReLU in place.
pub fn relu(xs: &mut [f32]) {
    for x in xs {
        *x = x.max(0.0);
    }
}

multiversion! {
    /// Softmax of one row without its last step: the row becomes `e^(x - max)` and the
    /// inverse of its sum is returned, so the row times that inverse is the softmax. The
    /// attention multiplies its `d`-wide output row instead of the `keys`-wide scores.
    /// `keep[j] == false` entries become 0 (masked keys); if every entry is masked the row
    /// becomes ones and the inverse is 1 / len: uniform, as an additive -1e9 mask gives.
    pub fn softmax_unnormalised<M>(row: &mut [f32], keep: Option<&[bool]>) -> f32 {
        let max = match keep {
            None => max_of(row),
            Some(keep) => row.iter().zip(keep).filter(|(_, &k)| k).fold(f32::NEG_INFINITY, |m, (&x, _)| m.max(x)),
        };
        if max == f32::NEG_INFINITY {
            row.iter_mut().for_each(|x| *x = 1.0);
            return 1.0 / row.len() as f32;
        }
        let sum = match keep {
            // The usual case (no padding gap): exponentials and their sum in one pass.
            None => map_and_sum(row, |x| exp::<M>(x - max)),
            Some(keep) => {
                for x in row.iter_mut() {
                    *x = exp::<M>(*x - max);
                }
                // Masked keys may exceed the max; exp clamps, so zero them after, branch-free above.
                row.iter_mut().zip(keep).filter(|(_, &k)| !k).for_each(|(x, _)| *x = 0.0);
                sum_of(row, |x| x)
            }
        };
        1.0 / sum
    }
}

multiversion! {
    /// `x = LayerNorm(x + residual)` for one row, in place (the post-norm residual of BERT).
    pub fn add_layer_norm_row<M>(x: &mut [f32], residual: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
        let n = x.len() as f32;
        for (a, &r) in x.iter_mut().zip(residual) {
            *a += r;
        }
        let mean = sum_of(x, |a| a) / n;
        let var = sum_of(x, |a| (a - mean) * (a - mean)) / n;
        let rstd = 1.0 / (var + eps).sqrt();
        for ((a, &g), &b) in x.iter_mut().zip(gamma).zip(beta) {
            *a = M::mul_add((*a - mean) * rstd, g, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_f64_within_3e_7_relative() {
        fn worst<M: MulAdd>() -> f64 {
            let mut worst = 0f64;
            let mut x = -87.0f32;
            while x < 88.0 {
                let want = (x as f64).exp();
                worst = worst.max(((exp::<M>(x) as f64 - want) / want).abs());
                x += 0.001_37;
            }
            worst
        }
        for (form, worst) in [("fused", worst::<Fused>()), ("unfused", worst::<Unfused>())] {
            assert!(worst < 3e-7, "{form}: worst relative error {worst}");
        }
        assert_eq!(exp::<Fused>(0.0), 1.0);
        assert_eq!(exp::<Unfused>(0.0), 1.0);
    }

    #[test]
    fn erf_matches_statrs_within_1e_6() {
        fn worst<M: MulAdd>() -> f64 {
            let mut worst = 0f64;
            let mut x = -6.0f32;
            while x < 6.0 {
                let want = statrs::function::erf::erf(x as f64);
                worst = worst.max((erf::<M>(x) as f64 - want).abs());
                x += 0.000_71;
            }
            worst
        }
        for (form, worst) in [("fused", worst::<Fused>()), ("unfused", worst::<Unfused>())] {
            assert!(worst < 1e-6, "{form}: worst absolute error {worst}");
        }
        // Odd by construction (A&S 7.1.26 is for x >= 0; the sign is copied).
        assert_eq!(erf::<Fused>(-0.3), -erf::<Fused>(0.3));
    }

    #[test]
    fn gelu_forms_match_their_definitions() {
        let xs: Vec<f32> = (-80..=80).map(|i| i as f32 * 0.1).collect();
        for arithmetic in [Arithmetic::Fastest, Arithmetic::Reproducible] {
            let mut a = xs.clone();
            gelu_erf(arithmetic, &mut a);
            let mut b = xs.clone();
            gelu_tanh(arithmetic, &mut b);
            for ((&x, &ge), &gt) in xs.iter().zip(&a).zip(&b) {
                let x64 = x as f64;
                let want_erf = 0.5 * x64 * (1.0 + statrs::function::erf::erf(x64 / 2f64.sqrt()));
                let u = (2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044715 * x64.powi(3));
                let want_tanh = 0.5 * x64 * (1.0 + u.tanh());
                assert!((ge as f64 - want_erf).abs() < 2e-6, "gelu_erf({x})");
                assert!((gt as f64 - want_tanh).abs() < 2e-6, "gelu_tanh({x})");
            }
        }
    }

    #[test]
    fn softmax_masks_and_normalises() {
        // exp(0), exp(1), exp(2) over their sum; the masked third key gets exactly 0.
        let z = 1.0 + 1f64.exp() + 2f64.exp();
        let want = [1.0 / z, 1f64.exp() / z, 0.0, 2f64.exp() / z];
        let mut row = vec![0.0, 1.0, 5.0, 2.0];
        let inv = softmax_unnormalised(Arithmetic::Fastest, &mut row, Some(&[true, true, false, true]));
        for (g, w) in row.iter().zip(want) {
            assert!((*g as f64 * inv as f64 - w).abs() < 1e-7, "{row:?} times {inv}");
        }
        assert_eq!(row[2], 0.0);
        let mut all_masked = vec![3.0, 4.0];
        assert_eq!(softmax_unnormalised(Arithmetic::Fastest, &mut all_masked, Some(&[false, false])), 0.5);
        assert_eq!(all_masked, vec![1.0, 1.0]);
        // Without a mask, on a row longer than the lanes of the one-pass sum (16) and not a
        // multiple of them: the values 0, 0.1, ..., 3.6 against the f64 softmax.
        let xs: Vec<f32> = (0..37).map(|i| i as f32 * 0.1).collect();
        let z: f64 = xs.iter().map(|&x| (x as f64).exp()).sum();
        let mut row = xs.clone();
        let inv = softmax_unnormalised(Arithmetic::Fastest, &mut row, None);
        for (&x, &g) in xs.iter().zip(&row) {
            let want = (x as f64).exp() / z;
            assert!((g as f64 * inv as f64 - want).abs() < 1e-6 * want, "{x}");
        }
    }

    #[test]
    fn add_layer_norm_by_hand() {
        // x + r = [1, 2, 3, 6]: mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5.
        let mut x = vec![0.0, 1.0, 1.0, 3.0];
        add_layer_norm_row(
            Arithmetic::Fastest,
            &mut x,
            &[1.0, 1.0, 2.0, 3.0],
            &[1.0, 2.0, 1.0, 1.0],
            &[0.0, 0.0, 0.5, 0.0],
            0.0,
        );
        let s = 3.5f64.sqrt();
        // Row: (x - 3) / sqrt(3.5) * gamma + beta.
        let want = [-2.0 / s, -2.0 / s, 0.5, 3.0 / s];
        for (g, w) in x.iter().zip(want) {
            assert!((*g as f64 - w).abs() < 1e-6, "{x:?}");
        }
    }
}
