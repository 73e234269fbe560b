// The activations elementwise where a product cannot fuse them: ModernBERT's gated
// feed-forward in inference, and the activations forward and backward for training:
//   FORWARD:          out[i] = activate(x[i])                      (x: the pre-activation)
//   GATED (GeGLU):    out[r, c] = activate(x[r, c]) * x[r, I + c]  (x = [input | gate], [rows, 2 I])
//   GELU (erf form):  out[i] = grad[i] * gelu'(x[i])               (x: the pre-activation)
//   TANH:             out[i] = grad[i] * (1 - x[i]^2)              (x: tanh's output)
//   RELU:             out[i] = grad[i] * (x[i] > 0)                (x: relu's output)
// gelu'(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi), the formula candle's
// autograd uses (backprop.rs, GeluErf).

// `p` (binding 0, a `Params` block), THREADS and the MODE_* codes come from the Rust side
// (ops/activation.rs), `activate` and `erf_approx` from activations.wgsl. In FORWARD and
// GATED modes `grad` is a placeholder and is not read.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * groups.x + wid.x) * THREADS + lid;
    if (i >= p.len) {
        return;
    }
    if (p.mode == MODE_GATED) {
        let at = (i / p.inner) * 2u * p.inner + i % p.inner;
        out[i] = activate(x[at], p.activation) * x[at + p.inner];
        return;
    }
    let v = x[i];
    switch p.mode {
        case MODE_FORWARD: {
            out[i] = activate(v, p.activation);
        }
        case MODE_GELU: {
            let d = 0.5 * (1.0 + erf_approx(v * 0.7071067811865476)) + v * exp(-0.5 * v * v) * 0.3989422804014327;
            out[i] = grad[i] * d;
        }
        case MODE_TANH: {
            out[i] = grad[i] * (1.0 - v * v);
        }
        default: { // MODE_RELU
            out[i] = select(0.0, grad[i], v > 0.0);
        }
    }
}
