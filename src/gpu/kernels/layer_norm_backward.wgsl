// The gradient of out = LayerNorm(v) * gamma + beta, v = x (+ residual), per row:
//   xhat = (v - mean(v)) * inv_std,  g = dy * gamma
//   dv   = inv_std * (g - mean(g) - xhat * mean(g * xhat))
// and per element dy * xhat, whose column sums (ops/column_sum.rs) are gamma's gradient
// (beta's is the column sum of dy). dv is the gradient of both x and the residual. The
// statistics are recomputed from x and the residual, as the forward kernel
// (layer_norm.wgsl) computes them: two passes over the row.

// `p` (binding 0, the forward op's `Params` block) and THREADS come from the Rust side
// (ops/layer_norm.rs), the reduction from reduce.wgsl; bindings 1-3 (x, residual, gamma),
// `value` and `row_stats` (the forward kernel's statistics) from layer_norm_stats.wgsl.

@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;
@group(0) @binding(6) var<storage, read_write> dy_xhat: array<f32>;

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
    let n = f32(p.cols);
    let stats = row_stats(lid, base);
    let mean = stats.x;
    let inv_std = stats.y;

    var sg = 0.0;
    var sgx = 0.0;
    for (var c = lid; c < p.cols; c += THREADS) {
        let xhat = (value(base + c) - mean) * inv_std;
        let g = dy[base + c] * gamma[c];
        sg += g;
        sgx += g * xhat;
    }
    let mean_g = workgroup_reduce(lid, sg, false) / n;
    let mean_gx = workgroup_reduce(lid, sgx, false) / n;

    for (var c = lid; c < p.cols; c += THREADS) {
        let xhat = (value(base + c) - mean) * inv_std;
        let g = dy[base + c] * gamma[c];
        dx[base + c] = inv_std * (g - mean_g - xhat * mean_gx);
        dy_xhat[base + c] = dy[base + c] * xhat;
    }
}
