// grad[row - row_start, c] += sum over the tokens listed for `row` of dy[token, c]
//
// The gradient of an embedding lookup: each token's output gradient goes to its id's row,
// and tokens that share an id add up. WGSL has no float atomics, so tokens cannot each add
// their own share; the host lists, for every distinct id of the batch, the tokens that
// carry it (`ids`, `starts`, `tokens`: compressed rows, ops/embedding_backward.rs), and
// one thread sums one (id, column) over its tokens in order: no two threads write the same
// value, and the sum's order is fixed (the same gradient on every run). A table larger than
// one storage binding is passed block by block, each pass writing only its own ids.

// `p` (binding 0, a `Params` block) and THREADS come from the Rust side.

@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> starts: array<u32>;
@group(0) @binding(3) var<storage, read> tokens: array<u32>;
@group(0) @binding(4) var<storage, read> dy: array<f32>;
@group(0) @binding(5) var<storage, read_write> grad: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * groups.x + wid.x) * THREADS + lid;
    if (i >= p.distinct_ids * p.cols) {
        return;
    }
    let u = i / p.cols;
    let c = i % p.cols;
    let id = ids[u];
    if (id < p.row_start || id >= p.row_start + p.row_count) {
        return;
    }
    var s = 0.0;
    for (var k = starts[u]; k < starts[u + 1u]; k++) {
        s += dy[tokens[k] * p.cols + c];
    }
    let at = (id - p.row_start) * p.cols + c;
    grad[at] += s;
}
