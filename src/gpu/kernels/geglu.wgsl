// ModernBERT's gated feed-forward (GeGLU): out[r, c] = act(x[r, c]) * x[r, I + c]
// for c < I, where x = [input | gate] is the first product's output ([rows, 2 I]).

// `p` (binding 0, a `Params` block), THREADS and `activate` (activations.wgsl) come from the
// Rust side (ops/geglu.rs).

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * groups.x + wid.x) * THREADS + lid;
    if (i >= p.rows * p.inner) {
        return;
    }
    let r = i / p.inner;
    let c = i % p.inner;
    let at = r * 2u * p.inner + c;
    out[i] = activate(x[at], p.activation) * x[at + p.inner];
}
