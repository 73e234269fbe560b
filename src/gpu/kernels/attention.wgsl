// Scaled dot-product attention with the padding mask, one workgroup per (query token, head):
//   out[t, h*D..] = softmax_j(q_t . k_j * scale + mask_j) . v_j     over the keys j of t's sequence
//
// `qkv` holds the three projections side by side per token, [tokens, 3 * hidden]
// (q | k | v), as produced by one matmul with the concatenated weights. Sequences are
// padded to `seq_len`; `mask` is 1 for real tokens and 0 for padding (a padded key is
// penalised, not skipped: attention_scores.wgsl).

// `p` (binding 0, a `Params` block), THREADS and MAX_KEYS come from the Rust side
// (ops/attention.rs), the reduction from reduce.wgsl, `scores`, `masked_score` and
// `exponentiate_scores` from attention_scores.wgsl.

@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> mask: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = wid.x;                  // query token (batch-major)
    let h = wid.y;                  // head
    let first = (t / p.seq_len) * p.seq_len; // first token of t's sequence
    let stride = 3u * p.hidden;
    let q = t * stride + h * p.head_dim;

    // 1. scores over the keys of the same sequence
    var local_max = -3.4028234663852886e38; // lowest f32
    for (var j = lid; j < p.seq_len; j += THREADS) {
        let k = (first + j) * stride + p.hidden + h * p.head_dim;
        var s = 0.0;
        for (var d = 0u; d < p.head_dim; d++) {
            s += qkv[q + d] * qkv[k + d];
        }
        s = masked_score(s, first + j);
        scores[j] = s;
        local_max = max(local_max, s);
    }
    let m = workgroup_reduce(lid, local_max, true);

    // 2. softmax numerators and their sum
    let total = exponentiate_scores(lid, m);

    // 3. weighted sum of the values, one output dimension per thread
    for (var d = lid; d < p.head_dim; d += THREADS) {
        var acc = 0.0;
        for (var j = 0u; j < p.seq_len; j++) {
            acc += scores[j] * qkv[(first + j) * stride + 2u * p.hidden + h * p.head_dim + d];
        }
        out[t * p.hidden + h * p.head_dim + d] = acc / total;
    }
}
