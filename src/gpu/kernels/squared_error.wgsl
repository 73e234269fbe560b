// The score task's loss: each example's squared error over its outputs, each output's term
// times its weight (1 / the dimensions the example has a score of; 0 for a missing one,
// which is masked out), and the gradient:
//   loss[e]  = sum_j w[e, j] * (x[e, j] - t[e, j])^2
//   dlogits  = 2 * w[e, j] * (x[e, j] - t[e, j]) * scale   (scale: 1 / examples in the step)
// One thread an example.

// `p` (binding 0, a `Params` block) and THREADS come from the Rust side (ops/squared_error.rs).

@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<f32>;
@group(0) @binding(3) var<storage, read> weights: array<f32>;
@group(0) @binding(4) var<storage, read_write> loss: array<f32>;
@group(0) @binding(5) var<storage, read_write> dlogits: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.y * groups.x + wid.x) * THREADS + lid;
    if (e >= p.examples) {
        return;
    }
    var total = 0.0;
    for (var j = 0u; j < p.outputs; j++) {
        let i = e * p.outputs + j;
        let diff = logits[i] - targets[i];
        total += weights[i] * diff * diff;
        dlogits[i] = 2.0 * weights[i] * diff * p.scale;
    }
    loss[e] = total;
}
