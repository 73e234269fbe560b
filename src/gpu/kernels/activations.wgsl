// Activation functions, prepended to the kernels that apply them (matmul.wgsl).
// WGSL has no erf: Abramowitz & Stegun 7.1.26 has absolute error <= 1.5e-7, well inside
// the f32 parity budget.

fn erf_approx(x: f32) -> f32 {
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
             + t * (-1.453152027 + t * 1.061405429))));
    let r = 1.0 - poly * exp(-a * a);
    return select(r, -r, x < 0.0);
}

fn gelu(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476));
}

// tanh without overflow for large |x| (WGSL's tanh may return NaN there on some drivers).
fn tanh_safe(x: f32) -> f32 {
    let e = exp(-2.0 * abs(x));
    let r = (1.0 - e) / (1.0 + e);
    return select(r, -r, x < 0.0);
}

// GELU's tanh approximation (HF "gelu_new", "gelu_pytorch_tanh").
fn gelu_tanh(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh_safe(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// The ACT_* codes are constants from the Rust enum `Activation` (ops/matmul.rs).
fn activate(x: f32, kind: u32) -> f32 {
    switch kind {
        case ACT_GELU: { return gelu(x); }
        case ACT_TANH: { return tanh_safe(x); }
        case ACT_GELU_TANH: { return gelu_tanh(x); }
        case ACT_RELU: { return max(x, 0.0); }
        default: { return x; }
    }
}
