// Scaled dot-product attention with the padding mask:
//   out[t, h*D..] = softmax_j(q_t . k_j * scale + mask_j) . v_j     over the keys j of t's sequence
//
// `qkv` holds the three projections side by side per token, [tokens, 3 * hidden]
// (q | k | v), as produced by one matmul with the concatenated weights. Sequences are
// padded to `seq_len`; `mask` is 1 for real tokens and 0 for padding. A padded key gets
// -1e9 added to its score rather than being skipped, like the CPU path, so the two agree
// even on a row that is all padding.
//
// One workgroup per (block of QUERIES queries of one sequence, head), one thread per query
// (flash attention's order of work): the sequence's keys and values for the head are walked
// in blocks of KEY_BLOCK, staged in workgroup memory once for all the block's queries, and
// each thread keeps its query, its running maximum, the softmax's running sum and the
// weighted sum of values in registers (the online softmax: the sums are rescaled when a
// later key raises the maximum). No length x length buffer exists, and a key is read from
// global memory once per QUERIES queries rather than once per query.
//
// Two families add to the scores: a local layer (ModernBERT, `p.window` > 0) masks the keys
// more than `window` positions from the query like padding, and only the key blocks some
// query of the workgroup can see are walked; DeBERTa-v2's relative positions add
// `relative(...)`, the content-to-position and position-to-content terms (from
// attention_relative.wgsl; the plain kernel's `relative` is zero, attention_plain.wgsl).
//
// In training with dropout each probability is multiplied by its mask's multiplier
// (`attention_drop`, from attention_dropout.wgsl; attention_keep_all.wgsl's is 1) before the
// weighted sum of the values, while the softmax's sum `total` takes the probabilities before
// dropout: out = dropout(softmax(scores)) . v, as the CPU trainer computes it.
//
// A head of D <= 64 values is held as HEAD_MATS 4 x 4 matrices (16 values each, zero past
// D): the query in q0..q3 and the output row in a0..a3, named variables rather than an
// array indexed in a loop, which drivers may keep in slow thread-local memory. Keys are
// taken four at a time, their scores one vec4.

// `p` (binding 0, a `Params` block), QUERIES, KEY_BLOCK (a multiple of 4) and HEAD_MATS
// (1 to 4) come from the Rust side (ops/attention.rs).

@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> mask: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const MASKED: f32 = -1e9;
const LOWEST: f32 = -3.4028234663852886e38;
// vec4s per staged key (or value).
const VECS: u32 = 4u * HEAD_MATS;

var<workgroup> keys: array<vec4<f32>, KEY_BLOCK * VECS>;
var<workgroup> values: array<vec4<f32>, KEY_BLOCK * VECS>;
// The padding penalty of each staged key; LOWEST past the sequence (weight exactly 0).
var<workgroup> penalty: array<f32, KEY_BLOCK>;

@compute @workgroup_size(QUERIES)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let blocks = (p.seq_len + QUERIES - 1u) / QUERIES; // query blocks per sequence
    let first = (wid.x / blocks) * p.seq_len;          // first token of the sequence
    let query = (wid.x % blocks) * QUERIES + lid;      // this thread's position in it
    let is_query = query < p.seq_len;
    let stride = 3u * p.hidden;
    let head = wid.y * p.head_dim;
    let drop_row = attention_drop_row(wid.x / blocks); // this sequence's dropout key

    // The query, scaled; rows past the sequence compute on zeros and store nothing.
    let at_q = min(first + query, first + p.seq_len - 1u) * stride + head;
    let q0 = load_mat(at_q, 0u) * p.scale;
    let q1 = load_mat(at_q, 1u) * p.scale;
    let q2 = load_mat(at_q, 2u) * p.scale;
    let q3 = load_mat(at_q, 3u) * p.scale;
    var a0 = mat4x4<f32>();
    var a1 = mat4x4<f32>();
    var a2 = mat4x4<f32>();
    var a3 = mat4x4<f32>();
    var running_max = LOWEST;
    var total = 0.0;
    // The keys the block's queries can see: all, or (a local layer) those within the window
    // of the block's first to last query. The same for every thread (the barriers need it).
    let block_first = (wid.x % blocks) * QUERIES;
    var keys_from = 0u;
    var keys_to = p.seq_len;
    if (p.window > 0u) {
        keys_from = select(0u, block_first - p.window, block_first > p.window);
        keys_to = min(p.seq_len, block_first + QUERIES + p.window);
    }
    for (var k0 = keys_from; k0 < keys_to; k0 += KEY_BLOCK) {
        let n = min(KEY_BLOCK, keys_to - k0); // keys in this block
        // Stage the block's keys and values (zeros past the head or the sequence).
        for (var e = lid; e < KEY_BLOCK * VECS; e += QUERIES) {
            let j = e / VECS;
            var kv = vec4<f32>(0.0);
            var vv = vec4<f32>(0.0);
            if (j < n) {
                let at = (first + k0 + j) * stride + head;
                kv = load4(at + p.hidden, e % VECS);
                vv = load4(at + 2u * p.hidden, e % VECS);
            }
            keys[e] = kv;
            values[e] = vv;
        }
        for (var j = lid; j < KEY_BLOCK; j += QUERIES) {
            var pen = LOWEST;
            if (j < n) {
                pen = select(0.0, MASKED, mask[first + k0 + j] == 0.0);
            }
            penalty[j] = pen;
        }
        workgroupBarrier();

        for (var j = 0u; j < n; j += 4u) {
            let s = vec4<f32>(score(q0, q1, q2, q3, j), score(q0, q1, q2, q3, j + 1u),
                              score(q0, q1, q2, q3, j + 2u), score(q0, q1, q2, q3, j + 3u))
                  + vec4<f32>(penalty[j], penalty[j + 1u], penalty[j + 2u], penalty[j + 3u])
                  + vec4<f32>(extra(q0, q1, q2, q3, query, head, k0, j, n),
                              extra(q0, q1, q2, q3, query, head, k0, j + 1u, n),
                              extra(q0, q1, q2, q3, query, head, k0, j + 2u, n),
                              extra(q0, q1, q2, q3, query, head, k0, j + 3u, n));
            let chunk_max = max(max(s.x, s.y), max(s.z, s.w));
            if (chunk_max > running_max) {
                // A new maximum: rescale what was summed under the old one (0 at first).
                let r = exp(running_max - chunk_max);
                total *= r;
                a0 *= r;
                a1 *= r;
                a2 *= r;
                a3 *= r;
                running_max = chunk_max;
            }
            let e = exp(s - vec4<f32>(running_max));
            total += e.x + e.y + e.z + e.w;
            let key = k0 + j;
            let w = e * vec4<f32>(attention_drop(drop_row, wid.y, query, key),
                                  attention_drop(drop_row, wid.y, query, key + 1u),
                                  attention_drop(drop_row, wid.y, query, key + 2u),
                                  attention_drop(drop_row, wid.y, query, key + 3u));
            let at = j * VECS;
            a0 = add_values(a0, w, at);
            if (HEAD_MATS > 1u) {
                a1 = add_values(a1, w, at + 4u);
            }
            if (HEAD_MATS > 2u) {
                a2 = add_values(a2, w, at + 8u);
            }
            if (HEAD_MATS > 3u) {
                a3 = add_values(a3, w, at + 12u);
            }
        }
        workgroupBarrier();
    }

    if (is_query) {
        let at = (first + query) * p.hidden + head;
        let inv = 1.0 / total;
        store_mat(at, 0u, a0 * inv);
        store_mat(at, 1u, a1 * inv);
        store_mat(at, 2u, a2 * inv);
        store_mat(at, 3u, a3 * inv);
    }
}

// What the family adds to the score of the query at `query` (its head's values from column
// `head`) and staged key j (key k0 + j, when j < n): the window's mask and the relative
// positions' terms.
fn extra(q0: mat4x4<f32>, q1: mat4x4<f32>, q2: mat4x4<f32>, q3: mat4x4<f32>,
         query: u32, head: u32, k0: u32, j: u32, n: u32) -> f32 {
    if (j >= n || query >= p.seq_len) {
        return 0.0;
    }
    let key = k0 + j;
    let far = p.window > 0u && max(query, key) - min(query, key) > p.window;
    return select(0.0, MASKED, far) + relative(q0, q1, q2, q3, query, key, head, j * VECS);
}

// The query's (scaled) dot product with staged key j.
fn score(q0: mat4x4<f32>, q1: mat4x4<f32>, q2: mat4x4<f32>, q3: mat4x4<f32>, j: u32) -> f32 {
    let at = j * VECS;
    var d = dot_key(q0, at);
    if (HEAD_MATS > 1u) {
        d += dot_key(q1, at + 4u);
    }
    if (HEAD_MATS > 2u) {
        d += dot_key(q2, at + 8u);
    }
    if (HEAD_MATS > 3u) {
        d += dot_key(q3, at + 12u);
    }
    return d.x + d.y + d.z + d.w;
}

// Partial sums of 16 values of q . k, from the staged key vec4s at..at+3.
fn dot_key(q: mat4x4<f32>, at: u32) -> vec4<f32> {
    return fma(q[0], keys[at], fma(q[1], keys[at + 1u], fma(q[2], keys[at + 2u], q[3] * keys[at + 3u])));
}

// acc + the four keys' values (staged from `at` on, VECS apart) weighted by w.
fn add_values(acc: mat4x4<f32>, w: vec4<f32>, at: u32) -> mat4x4<f32> {
    return mat4x4<f32>(weighted(acc[0], w, at), weighted(acc[1], w, at + 1u),
                       weighted(acc[2], w, at + 2u), weighted(acc[3], w, at + 3u));
}

fn weighted(acc: vec4<f32>, w: vec4<f32>, at: u32) -> vec4<f32> {
    return fma(vec4<f32>(w.x), values[at], fma(vec4<f32>(w.y), values[at + VECS],
           fma(vec4<f32>(w.z), values[at + 2u * VECS], fma(vec4<f32>(w.w), values[at + 3u * VECS], acc))));
}

// Values d = 4 * v .. 4 * v + 3 of the head starting at `at` in qkv (zero past D).
fn load4(at: u32, v: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let d = 4u * v + i;
        if (d < p.head_dim) {
            x[i] = qkv[at + d];
        }
    }
    return x;
}

// Matrix m of the head starting at `at`: its values 16 m .. 16 m + 15, one vec4 a column.
fn load_mat(at: u32, m: u32) -> mat4x4<f32> {
    if (m >= HEAD_MATS) {
        return mat4x4<f32>();
    }
    return mat4x4<f32>(load4(at, 4u * m), load4(at, 4u * m + 1u), load4(at, 4u * m + 2u), load4(at, 4u * m + 3u));
}

// Stores values 16 m .. 16 m + 15 of the output row at `at` (those below D).
fn store_mat(at: u32, m: u32, v: mat4x4<f32>) {
    if (m >= HEAD_MATS) {
        return;
    }
    store4(at, 4u * m, v[0]);
    store4(at, 4u * m + 1u, v[1]);
    store4(at, 4u * m + 2u, v[2]);
    store4(at, 4u * m + 3u, v[3]);
}

fn store4(at: u32, v: u32, x: vec4<f32>) {
    for (var i = 0u; i < 4u; i++) {
        let d = 4u * v + i;
        if (d < p.head_dim) {
            out[at + d] = x[i];
        }
    }
}
