// One AdamW step on a parameter tensor, the formula of candle-nn's AdamW (optim.rs):
//   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
//   theta = theta (1 - lr wd) - lr (m scale_m) / (sqrt(v scale_v) + eps)
// with the bias corrections scale_m = 1 / (1 - beta1^t), scale_v = 1 / (1 - beta2^t) and
// the decay (1 - lr wd) worked out on the Rust side for step t (in f64, as candle does).
// One parameter block serves every tensor of an optimiser (its length is the binding's).

// `p` (binding 0, a `Params` block) and THREADS come from the Rust side (ops/adamw.rs).

@group(0) @binding(1) var<storage, read_write> theta: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * groups.x + wid.x) * THREADS + lid;
    if (i >= arrayLength(&theta)) {
        return;
    }
    let g = grad[i];
    let next_m = m[i] * p.beta1 + g * p.one_minus_beta1;
    let next_v = v[i] * p.beta2 + g * g * p.one_minus_beta2;
    m[i] = next_m;
    v[i] = next_v;
    let adjusted = (next_m * p.scale_m) / (sqrt(next_v * p.scale_v) + p.eps);
    theta[i] = theta[i] * p.decay - adjusted * p.lr;
}
