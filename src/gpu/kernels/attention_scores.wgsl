// What the attention kernel and its two backward passes share: the padding penalty, one
// row of scores in workgroup memory, a query's scaled and masked score against a key, and
// the softmax's numerators. The including kernel binds `mask` ([tokens], 1 = real token);
// MAX_KEYS and THREADS come from the Rust side (ops/attention.rs), `workgroup_reduce` from
// reduce.wgsl.

// A padded key gets -1e9 added rather than being skipped, like the CPU path, so the two
// agree even on a row that is all padding (no NaN there).
const MASKED: f32 = -1e9;

var<workgroup> scores: array<f32, MAX_KEYS>;

// The raw dot product q . k scaled by 1/sqrt(D), plus the padding penalty of key token `key`.
fn masked_score(dot: f32, key: u32) -> f32 {
    var s = dot * p.scale;
    if (mask[key] == 0.0) {
        s += MASKED;
    }
    return s;
}

// scores[j] = exp(scores[j] - m) over the p.seq_len keys; returns their sum.
fn exponentiate_scores(lid: u32, m: f32) -> f32 {
    var local_sum = 0.0;
    for (var j = lid; j < p.seq_len; j += THREADS) {
        let e = exp(scores[j] - m);
        scores[j] = e;
        local_sum += e;
    }
    return workgroup_reduce(lid, local_sum, false);
}
