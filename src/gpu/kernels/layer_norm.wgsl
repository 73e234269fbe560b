// out[r, :] = (v - mean(v)) / sqrt(var(v) + eps) * gamma + beta,  v = x[r, :] (+ residual[r, :])
//
// One workgroup per row. The residual add that precedes every LayerNorm inside a BERT
// layer is fused here, so the sum never makes a round trip through memory.

// `p` (binding 0, a `Params` block) and THREADS come from the Rust side (ops/layer_norm.rs),
// the reduction from reduce.wgsl; bindings 1-3 (x, residual, gamma), `value` and
// `row_stats` from layer_norm_stats.wgsl.

@group(0) @binding(4) var<storage, read> beta: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.y * groups.x + wid.x;
    // Uniform per workgroup, so returning before the barriers is allowed.
    if (row >= p.rows) {
        return;
    }
    let base = row * p.cols;
    let stats = row_stats(lid, base);
    let mean = stats.x;
    let inv_std = stats.y;

    for (var c = lid; c < p.cols; c += THREADS) {
        out[base + c] = (value(base + c) - mean) * inv_std * gamma[c] + beta[c];
    }
}
