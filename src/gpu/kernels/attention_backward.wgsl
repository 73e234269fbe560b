// The gradient of attention (attention.wgsl), first of two passes: one workgroup per
// (query token t, head h). With P the softmax row of t (recomputed here as the forward
// pass computes it, padded keys masked with -1e9) and dO the gradient of t's output:
//   dP_j = dO . v_j,   dS_j = P_j (dP_j - sum_i P_i dP_i),   dq_t = scale * sum_j dS_j k_j
// Per (t, h) it stores two numbers for the second pass (attention_backward_kv.wgsl): the
// log of the softmax's denominator (max + log sum) and sum_i P_i dP_i, from which that
// pass recomputes any P_tj and dS_tj without keeping the [tokens, heads, seq_len] matrices
// (too large for one binding at long lengths). With dropout (training), the output is
// sum_j M_j P_j v_j, M_j the mask's multiplier (`attention_drop`), so dP_j = M_j (dO . v_j);
// the rest is unchanged.

// `p` (binding 0, the forward op's `Params` block), THREADS and MAX_KEYS come from the Rust
// side (ops/attention.rs), the reduction from reduce.wgsl, `scores`, `masked_score`
// and `exponentiate_scores` from attention_scores.wgsl, `attention_drop_row` and
// `attention_drop` from attention_dropout.wgsl (or attention_keep_all.wgsl).

@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> mask: array<f32>;
@group(0) @binding(3) var<storage, read> dout: array<f32>;
// (log-sum-exp, sum_i P_i dP_i) per (t, h)
@group(0) @binding(4) var<storage, read_write> stats: array<f32>;
@group(0) @binding(5) var<storage, read_write> dqkv: array<f32>;

var<workgroup> dp: array<f32, MAX_KEYS>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = wid.x;                  // query token (batch-major)
    let h = wid.y;                  // head
    let first = (t / p.seq_len) * p.seq_len; // first token of t's sequence
    let stride = 3u * p.hidden;
    let q = t * stride + h * p.head_dim;
    let o = t * p.hidden + h * p.head_dim;
    let drop_row = attention_drop_row(t / p.seq_len);

    // 1. scores and dP over the keys of the same sequence
    var local_max = -3.4028234663852886e38; // lowest f32
    for (var j = lid; j < p.seq_len; j += THREADS) {
        let k = (first + j) * stride + p.hidden + h * p.head_dim;
        let v = k + p.hidden;
        var s = 0.0;
        var g = 0.0;
        for (var d = 0u; d < p.head_dim; d++) {
            s += qkv[q + d] * qkv[k + d];
            g += dout[o + d] * qkv[v + d];
        }
        s = masked_score(s, first + j);
        scores[j] = s;
        dp[j] = g * attention_drop(drop_row, h, t - first, j);
        local_max = max(local_max, s);
    }
    let m = workgroup_reduce(lid, local_max, true);

    // 2. softmax
    let total = exponentiate_scores(lid, m);

    // 3. P, sum_j P_j dP_j, dS
    var local_dot = 0.0;
    for (var j = lid; j < p.seq_len; j += THREADS) {
        let pj = scores[j] / total;
        scores[j] = pj;
        local_dot += pj * dp[j];
    }
    let dot = workgroup_reduce(lid, local_dot, false);
    for (var j = lid; j < p.seq_len; j += THREADS) {
        dp[j] = scores[j] * (dp[j] - dot);
    }
    if (lid == 0u) {
        stats[2u * (t * p.heads + h)] = m + log(total);
        stats[2u * (t * p.heads + h) + 1u] = dot;
    }
    workgroupBarrier();

    // 4. dq, one dimension per thread
    for (var d = lid; d < p.head_dim; d += THREADS) {
        var acc = 0.0;
        for (var j = 0u; j < p.seq_len; j++) {
            acc += dp[j] * qkv[(first + j) * stride + p.hidden + h * p.head_dim + d];
        }
        dqkv[q + d] = acc * p.scale;
    }
}
