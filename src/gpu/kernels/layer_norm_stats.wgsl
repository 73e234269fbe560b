// The statistics of one row that LayerNorm's forward and backward kernels both need:
// mean(v) and 1 / sqrt(var(v) + eps) over the p.cols values of the row starting at `base`,
// read through the kernel's own `value(i)` (x, plus the residual when there is one). Two
// passes over the row: more accurate than E[v^2] - E[v]^2. Every thread of the workgroup
// calls it (it reduces with workgroup_reduce from reduce.wgsl).

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
