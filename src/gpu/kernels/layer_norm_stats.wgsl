// What LayerNorm's forward and backward kernels share: their first inputs (bindings 1-3:
// x, the residual, gamma), a row's value `value(i)` (x, plus the residual when there is
// one: `p.has_residual` = 0 makes `residual` a placeholder that is not read), and the
// row's statistics `row_stats`: mean(v) and 1 / sqrt(var(v) + eps) over the p.cols values
// of the row starting at `base`. Two passes over the row: more accurate than
// E[v^2] - E[v]^2. Every thread of the workgroup calls it (it reduces with
// workgroup_reduce from reduce.wgsl).

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> residual: array<f32>;
@group(0) @binding(3) var<storage, read> gamma: array<f32>;

fn value(i: u32) -> f32 {
    if (p.has_residual != 0u) {
        return x[i] + residual[i];
    }
    return x[i];
}

fn row_stats(lid: u32, base: u32) -> vec2<f32> {
    let n = f32(p.cols);
    var s = 0.0;
    for (var c = lid; c < p.cols; c += THREADS) {
        s += value(base + c);
    }
    let mean = workgroup_reduce(lid, s, false) / n;
    var sq = 0.0;
    for (var c = lid; c < p.cols; c += THREADS) {
        let d = value(base + c) - mean;
        sq += d * d;
    }
    return vec2<f32>(mean, inverseSqrt(workgroup_reduce(lid, sq, false) / n + p.eps));
}
