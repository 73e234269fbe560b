// Cross-entropy of each example over its own segment of the logits, times the example's
// weight (its gold class's, for class-weighted training; else 1), and the gradient:
//   loss[e]  = w * (logsumexp(s) - s[gold])               s = logits[start .. start + count]
//   dlogits  = w * (softmax(s) - onehot(gold)) * scale    (scale: 1 / examples in the step)
// A classification example's segment is its row of logits; a multiple-choice example's
// is the single logit of each of its inputs, however many it has. One thread a segment.

// `p` (binding 0, a `Params` block) and THREADS come from the Rust side (ops/cross_entropy.rs).

@group(0) @binding(1) var<storage, read> logits: array<f32>;
// (start, count, gold, bits of the f32 weight) per example
@group(0) @binding(2) var<storage, read> segments: array<u32>;
@group(0) @binding(3) var<storage, read_write> loss: array<f32>;
@group(0) @binding(4) var<storage, read_write> dlogits: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.y * groups.x + wid.x) * THREADS + lid;
    if (e >= p.examples) {
        return;
    }
    let start = segments[4u * e];
    let count = segments[4u * e + 1u];
    let gold = segments[4u * e + 2u];
    let w = bitcast<f32>(segments[4u * e + 3u]);
    var m = -3.4028234663852886e38; // lowest f32
    for (var i = 0u; i < count; i++) {
        m = max(m, logits[start + i]);
    }
    var total = 0.0;
    for (var i = 0u; i < count; i++) {
        total += exp(logits[start + i] - m);
    }
    loss[e] = w * (log(total) + m - logits[start + gold]);
    for (var i = 0u; i < count; i++) {
        let prob = exp(logits[start + i] - m) / total;
        dlogits[start + i] = (prob - select(0.0, 1.0, i == gold)) * (w * p.scale);
    }
}
