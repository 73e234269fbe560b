// out[r, :] = pool(x[r * seq_len .. (r + 1) * seq_len, :]) over the row's real tokens,
// optionally scaled to unit length: sentence-transformers' pooling (model/pooling.rs, the
// reference) on the device, so the host reads back one vector per sequence instead of
// every token's state.
//
// One workgroup per row; thread `lid` takes columns lid, lid + THREADS, ... Each column is
// summed over the tokens in order, as the CPU path does, so mean pooling gives its numbers
// to the last bit; only the norm's sum of squares is a tree here (a rounding apart).

// `p` (binding 0, a `Params` block), THREADS and the MODE_* codes come from the Rust side
// (ops/pool.rs), the reduction from reduce.wgsl.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> mask: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.y * groups.x + wid.x;
    // Uniform per workgroup, so returning before the barriers is allowed.
    if (row >= p.rows) {
        return;
    }
    let first = row * p.seq_len;
    var real = 0u;
    for (var t = 0u; t < p.seq_len; t++) {
        real += u32(mask[first + t] != 0.0);
    }
    var squares = 0.0;
    for (var c = lid; c < p.hidden; c += THREADS) {
        var v: f32;
        if (p.mode == MODE_CLS) {
            v = x[first * p.hidden + c];
        } else if (p.mode == MODE_MAX) {
            // The lowest finite f32 (WGSL has no infinity literal, and a literal beyond the
            // f32 range is a shader-creation error in browsers): a row without real tokens,
            // a padding row the encoder drops, keeps it where the CPU keeps -inf.
            v = -bitcast<f32>(0x7f7fffffu);
            for (var t = 0u; t < p.seq_len; t++) {
                if (mask[first + t] != 0.0) {
                    v = max(v, x[(first + t) * p.hidden + c]);
                }
            }
        } else {
            v = 0.0;
            for (var t = 0u; t < p.seq_len; t++) {
                if (mask[first + t] != 0.0) {
                    v += x[(first + t) * p.hidden + c];
                }
            }
            v /= f32(max(real, 1u));
        }
        out[row * p.hidden + c] = v;
        squares += v * v;
    }
    if (p.normalize == 0u) {
        return;
    }
    // sentence-transformers clamps the norm at 1e-12 (a zero vector stays zero).
    let norm = max(sqrt(workgroup_reduce(lid, squares, false)), 1e-12);
    for (var c = lid; c < p.hidden; c += THREADS) {
        out[row * p.hidden + c] /= norm;
    }
}
