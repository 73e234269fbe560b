// The gradient of attention, second pass (after attention_backward.wgsl, which stored P and
// dS per (query t, head h, key j)): one workgroup per (key token u, head h), one output
// dimension per thread, summing over the queries t of u's sequence:
//   dk_u = scale * sum_t dS_tu q_t,   dv_u = sum_t P_tu dO_t
// A padded key has P = 0 and dS = 0 for every query, so its gradients are 0.

// `Params` (the forward op's) and THREADS come from the Rust side (ops/attention_backward.rs).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> dout: array<f32>;
@group(0) @binding(3) var<storage, read> probs: array<f32>;
@group(0) @binding(4) var<storage, read> dscores: array<f32>;
@group(0) @binding(5) var<storage, read_write> dqkv: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let u = wid.x;                  // key token (batch-major)
    let h = wid.y;                  // head
    let first = (u / p.seq_len) * p.seq_len;
    let j = u - first;              // u's position in its sequence
    let stride = 3u * p.hidden;
    for (var d = lid; d < p.head_dim; d += THREADS) {
        var dk = 0.0;
        var dv = 0.0;
        for (var i = 0u; i < p.seq_len; i++) {
            let t = first + i;
            let at = (t * p.heads + h) * p.seq_len + j;
            dk += dscores[at] * qkv[t * stride + h * p.head_dim + d];
            dv += probs[at] * dout[t * p.hidden + h * p.head_dim + d];
        }
        dqkv[u * stride + p.hidden + h * p.head_dim + d] = dk * p.scale;
        dqkv[u * stride + 2u * p.hidden + h * p.head_dim + d] = dv;
    }
}
