// out[t, :] += table[ids[t] - row_start, :]   for the tokens whose id lies in this chunk
//
// The embedding sum (word + position + token type) is built from zero with one pass per
// table; a word table larger than one storage binding is uploaded in row blocks and
// gathered with one pass per block, each pass adding only the ids that fall inside it.

// `p` (binding 0, a `Params` block) and THREADS come from the Rust side (ops/gather_add.rs).

@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> table: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * groups.x + wid.x) * THREADS + lid;
    if (i >= p.tokens * p.cols) {
        return;
    }
    let t = i / p.cols;
    let c = i % p.cols;
    let id = ids[t];
    if (id >= p.row_start && id < p.row_start + p.row_count) {
        out[i] += table[(id - p.row_start) * p.cols + c];
    }
}
