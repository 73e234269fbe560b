// The gradient of attention, second pass (after attention_backward.wgsl): one workgroup
// per (key token u, head h). For every query t of u's sequence it recomputes
//   P_tu = exp(scale q_t . k_u + mask_u - lse_t),  dS_tu = P_tu (dO_t . v_u - D_t)
// from the first pass's per-(t, h) log-sum-exp lse_t and D_t = sum_j P_tj dP_tj (one query
// a thread, kept in workgroup memory), then sums over the queries, one output dimension
// a thread:
//   dk_u = scale * sum_t dS_tu q_t,   dv_u = sum_t P_tu dO_t
// A padded key has P = 0 for every query, so its gradients are 0. With dropout (training),
// M_tu the mask's multiplier of P_tu (`attention_drop`): dS_tu = P_tu (M_tu dO_t . v_u - D_t)
// and dv_u = sum_t M_tu P_tu dO_t.

// `p` (binding 0, the forward op's `Params` block), THREADS and MAX_KEYS come from the Rust
// side (ops/attention.rs), `scores` (here the kept probabilities M_tu P_tu) and
// `masked_score` from attention_scores.wgsl, `attention_drop_row` and `attention_drop` from
// attention_dropout.wgsl (or attention_keep_all.wgsl).

@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> mask: array<f32>;
@group(0) @binding(3) var<storage, read> dout: array<f32>;
@group(0) @binding(4) var<storage, read> stats: array<f32>;
@group(0) @binding(5) var<storage, read_write> dqkv: array<f32>;

var<workgroup> dscores: array<f32, MAX_KEYS>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let u = wid.x;                  // key token (batch-major)
    let h = wid.y;                  // head
    let first = (u / p.seq_len) * p.seq_len;
    let stride = 3u * p.hidden;
    let k = u * stride + p.hidden + h * p.head_dim;
    let v = k + p.hidden;
    let drop_row = attention_drop_row(u / p.seq_len);

    // 1. P_tu and dS_tu for every query t, one a thread
    for (var i = lid; i < p.seq_len; i += THREADS) {
        let t = first + i;
        let q = t * stride + h * p.head_dim;
        let o = t * p.hidden + h * p.head_dim;
        var s = 0.0;
        var g = 0.0;
        for (var d = 0u; d < p.head_dim; d++) {
            s += qkv[q + d] * qkv[k + d];
            g += dout[o + d] * qkv[v + d];
        }
        let at = 2u * (t * p.heads + h);
        let pt = exp(masked_score(s, u) - stats[at]);
        let m = attention_drop(drop_row, h, i, u - first);
        scores[i] = m * pt;
        dscores[i] = pt * (m * g - stats[at + 1u]);
    }
    workgroupBarrier();

    // 2. dk and dv, one dimension a thread
    for (var d = lid; d < p.head_dim; d += THREADS) {
        var dk = 0.0;
        var dv = 0.0;
        for (var i = 0u; i < p.seq_len; i++) {
            let t = first + i;
            dk += dscores[i] * qkv[t * stride + h * p.head_dim + d];
            dv += scores[i] * dout[t * p.hidden + h * p.head_dim + d];
        }
        dqkv[k + d] = dk * p.scale;
        dqkv[v + d] = dv;
    }
}
