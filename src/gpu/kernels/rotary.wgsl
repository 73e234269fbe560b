// Rotary position embeddings (ModernBERT), in place on the fused projection:
//   for the query and the key of token t, head h, and c < D/2 (HF's `rotate_half` pairs
//   value c with value c + D/2):
//     x[c]       = x[c] cos(a) - x[c + D/2] sin(a)
//     x[c + D/2] = x[c + D/2] cos(a) + x[c] sin(a)
//   with a the angle of t's position (t mod seq_len) and frequency c, read from the tables
//   `cos_t` and `sin_t` ([positions, D/2], computed on the host as transformers computes them).
//
// `qkv` is [tokens, 3 * hidden] (q | k | v); one thread per rotated pair.

// `p` (binding 0, a `Params` block) and THREADS come from the Rust side (ops/rotary.rs).

@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> cos_t: array<f32>;
@group(0) @binding(3) var<storage, read> sin_t: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * groups.x + wid.x) * THREADS + lid;
    let half = p.head_dim / 2u;
    let per_part = p.heads * half;       // pairs of q (or of k) per token
    if (i >= p.tokens * 2u * per_part) {
        return;
    }
    let t = i / (2u * per_part);
    let rest = i % (2u * per_part);
    let part = rest / per_part;          // 0: query, 1: key
    let head = (rest % per_part) / half;
    let c = rest % half;
    let at = t * 3u * p.hidden + part * p.hidden + head * p.head_dim + c;
    let angle = (t % p.seq_len) * half + c;
    let a = qkv[at];
    let b = qkv[at + half];
    qkv[at] = a * cos_t[angle] - b * sin_t[angle];
    qkv[at + half] = b * cos_t[angle] + a * sin_t[angle];
}
