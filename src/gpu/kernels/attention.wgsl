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
// weighted sum of values in registers, rescaling them when a later block raises the
// maximum (the online softmax). No length x length buffer exists, and a key is read from
// global memory once per QUERIES queries rather than once per query. Head dimensions are
// held as D4 = ceil(D / 4) vec4s (zero beyond D), so any head size works.

// `p` (binding 0, a `Params` block), QUERIES, KEY_BLOCK and D4 come from the Rust side
// (ops/attention.rs).

@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> mask: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const MASKED: f32 = -1e9;
const LOWEST: f32 = -3.4028234663852886e38;

var<workgroup> keys: array<vec4<f32>, KEY_BLOCK * D4>;
var<workgroup> values: array<vec4<f32>, KEY_BLOCK * D4>;
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

    var q: array<vec4<f32>, D4>;
    var acc: array<vec4<f32>, D4>;
    if (is_query) {
        for (var d4 = 0u; d4 < D4; d4++) {
            q[d4] = load4((first + query) * stride + head, d4) * p.scale;
        }
    }
    var running_max = LOWEST;
    var total = 0.0;
    for (var k0 = 0u; k0 < p.seq_len; k0 += KEY_BLOCK) {
        let n = min(KEY_BLOCK, p.seq_len - k0); // keys in this block
        // Stage the block's keys and values (zeros past the sequence) and padding penalties.
        for (var e = lid; e < KEY_BLOCK * D4; e += QUERIES) {
            let j = e / D4;
            var kv = vec4<f32>(0.0);
            var vv = vec4<f32>(0.0);
            if (j < n) {
                let at = (first + k0 + j) * stride + head;
                kv = load4(at + p.hidden, e % D4);
                vv = load4(at + 2u * p.hidden, e % D4);
            }
            keys[e] = kv;
            values[e] = vv;
        }
        for (var j = lid; j < KEY_BLOCK; j += QUERIES) {
            penalty[j] = select(0.0, MASKED, j < n && mask[first + k0 + j] == 0.0);
        }
        workgroupBarrier();

        // The block's scores, then one rescale of the running sums for the whole block.
        // The loops run over the whole block (a constant count, so the compiler can keep
        // `s`, `q` and `acc` in registers) and leave out the keys past the sequence.
        var s: array<f32, KEY_BLOCK>;
        var block_max = LOWEST;
        for (var j = 0u; j < KEY_BLOCK; j++) {
            var dot4 = vec4<f32>(0.0);
            for (var d4 = 0u; d4 < D4; d4++) {
                dot4 = fma(q[d4], keys[j * D4 + d4], dot4);
            }
            s[j] = dot4.x + dot4.y + dot4.z + dot4.w + penalty[j];
            if (j < n) {
                block_max = max(block_max, s[j]);
            }
        }
        let new_max = max(running_max, block_max);
        let rescale = exp(running_max - new_max); // 0 before the first block
        total *= rescale;
        for (var d4 = 0u; d4 < D4; d4++) {
            acc[d4] *= rescale;
        }
        for (var j = 0u; j < KEY_BLOCK; j++) {
            let e = select(0.0, exp(s[j] - new_max), j < n);
            total += e;
            for (var d4 = 0u; d4 < D4; d4++) {
                acc[d4] = fma(vec4<f32>(e), values[j * D4 + d4], acc[d4]);
            }
        }
        running_max = new_max;
        workgroupBarrier();
    }

    if (is_query) {
        let at = (first + query) * p.hidden + head;
        for (var d4 = 0u; d4 < D4; d4++) {
            let v = acc[d4] / total;
            for (var i = 0u; i < 4u; i++) {
                let d = 4u * d4 + i;
                if (d < p.head_dim) {
                    out[at + d] = v[i];
                }
            }
        }
    }
}

// Values d = 4 * d4 .. 4 * d4 + 3 of the head starting at `at` in qkv (zero past D).
fn load4(at: u32, d4: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let d = 4u * d4 + i;
        if (d < p.head_dim) {
            v[i] = qkv[at + d];
        }
    }
    return v;
}
