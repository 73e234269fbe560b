// out[c] (+)= sum over r of x[r, c]: the gradient of a bias (and of a LayerNorm's gamma and
// beta) is the column sum of the gradient it was added to. One thread per column, rows
// walked in order (neighbouring threads read neighbouring values).

// `p` (binding 0, a `Params` block) and THREADS come from the Rust side (ops/column_sum.rs).

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let c = (wid.y * groups.x + wid.x) * THREADS + lid;
    if (c >= p.cols) {
        return;
    }
    var s = 0.0;
    for (var r = 0u; r < p.rows; r++) {
        s += x[r * p.cols + c];
    }
    if (p.accumulate != 0u) {
        s += out[c];
    }
    out[c] = s;
}
