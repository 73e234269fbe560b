// Dropout of a hidden-state tensor: out = x * m, m = scale where the element is kept and 0
// where it is dropped, the CPU trainer's multiplier (train/dropout.rs `hidden_mask`) for the
// same site key, input and element. The same op is its own backward pass: the gradient is
// multiplied by the same mask.
//
// `x` and `out` are [rows, width], `rows_per_input` rows a training input (its padded
// tokens, or 1 where a tensor holds each input's first token only): row r is token
// r % rows_per_input of input inputs[r / rows_per_input], and its element f has the index
// token * width + f (`hash::hidden_index`), whatever the padding.

// `p` (binding 0, a `Params` block), THREADS and the hash's constants come from the Rust
// side (ops/dropout.rs), `drop_row_key` and `drop_keeps` from dropout_hash.wgsl.

@group(0) @binding(1) var<storage, read> x: array<f32>;
// Each input's index among the training set's inputs (the mask's input coordinate).
@group(0) @binding(2) var<storage, read> inputs: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.y * groups.x + wid.x) * THREADS + lid;
    if (e >= p.len) {
        return;
    }
    let row = e / p.width;
    let token = row % p.rows_per_input;
    let row_key = drop_row_key(p.key, inputs[row / p.rows_per_input]);
    let index = token * p.width + e % p.width;
    out[e] = x[e] * select(0.0, p.scale, drop_keeps(row_key, index, p.threshold));
}
