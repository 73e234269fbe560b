// y[m, n] = activate(x[m, k] . w[n, k]^T + bias[n])      (y += ... with FLAG_ACCUMULATE)
//
// `w` keeps PyTorch's Linear layout (out_features x in_features), so checkpoints upload
// as they are. The backward passes reuse this kernel on other views of their operands:
// x and w may each be read transposed (FLAG_TRANS_X, FLAG_TRANS_W), every operand has its
// own row stride (ldx, ldw, ldy: a view of every L-th row, as the first tokens are), the
// bias may be a whole [m, n] matrix added instead of a row vector (a residual's gradient),
// or absent, and the result may be added to y (gradients summed over micro-batches). Each workgroup computes a 64 x 64 tile of y; each of its 16 x 16 threads a
// 4 x 4 block. The k dimension is walked in slices of 16: the matching 64 x 16 slices of
// x and w are staged in workgroup memory (2 x 4 KiB) and every staged value is used 64
// times before the next slice is loaded.
//
// Binding 2, the weights, is declared by the Rust side (ops/matmul.rs) in front of this
// file, with an accessor `weight(i) -> f32`: f32 storage, or f16 storage (half the memory
// and bandwidth) on adapters with `shader-f16`. Accumulation is f32 either way.

// `p` (binding 0, a `Params` block), TILE, SLICE, PER_THREAD, the FLAG_* bits and BIAS_*
// modes come from the Rust side (ops/matmul.rs), and `activate` with the activation codes
// from activations.wgsl.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>; // see p.bias_mode
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const THREADS_X: u32 = TILE / PER_THREAD; // 16 x 16 threads
const THREADS: u32 = THREADS_X * THREADS_X;

var<workgroup> x_tile: array<f32, TILE * SLICE>; // [TILE rows][SLICE]
var<workgroup> w_tile: array<f32, TILE * SLICE>; // [TILE columns][SLICE]

@compute @workgroup_size(THREADS_X, THREADS_X)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;
    let thread = lid.y * THREADS_X + lid.x;

    // acc_i holds row (4 * lid.y + i), columns 4 * lid.x .. 4 * lid.x + 3 of the block.
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var k0 = 0u; k0 < p.k; k0 += SLICE) {
        // Stage the slices: TILE * SLICE values each, 4 per thread; zeros outside the matrices.
        for (var i = 0u; i < TILE * SLICE / THREADS; i++) {
            let e = thread + i * THREADS;
            let r = e / SLICE;
            let kk = k0 + e % SLICE;
            var xv = 0.0;
            if (row0 + r < p.m && kk < p.k) {
                xv = x[x_index(row0 + r, kk)];
            }
            x_tile[e] = xv;
            var wv = 0.0;
            if (col0 + r < p.n && kk < p.k) {
                wv = weight(w_index(col0 + r, kk));
            }
            w_tile[e] = wv;
        }
        workgroupBarrier();

        let xr = lid.y * PER_THREAD * SLICE; // this thread's first row in x_tile
        let wc = lid.x * PER_THREAD * SLICE; // this thread's first column in w_tile
        for (var kk = 0u; kk < SLICE; kk++) {
            let ws = vec4<f32>(w_tile[wc + kk], w_tile[wc + SLICE + kk],
                               w_tile[wc + 2u * SLICE + kk], w_tile[wc + 3u * SLICE + kk]);
            acc0 += x_tile[xr + kk] * ws;
            acc1 += x_tile[xr + SLICE + kk] * ws;
            acc2 += x_tile[xr + 2u * SLICE + kk] * ws;
            acc3 += x_tile[xr + 3u * SLICE + kk] * ws;
        }
        workgroupBarrier();
    }

    let r = row0 + lid.y * PER_THREAD;
    let c0 = col0 + lid.x * PER_THREAD;
    store_row(r, c0, acc0);
    store_row(r + 1u, c0, acc1);
    store_row(r + 2u, c0, acc2);
    store_row(r + 3u, c0, acc3);
}

// Where X(r, kk) and W(c, kk) are stored, for either layout.
fn x_index(r: u32, kk: u32) -> u32 {
    if ((p.flags & FLAG_TRANS_X) != 0u) {
        return kk * p.ldx + r;
    }
    return r * p.ldx + kk;
}

fn w_index(c: u32, kk: u32) -> u32 {
    if ((p.flags & FLAG_TRANS_W) != 0u) {
        return kk * p.ldw + c;
    }
    return c * p.ldw + kk;
}

// Adds the bias, applies the activation and stores the 4 columns c0..c0+3 of row r that
// a thread owns (skipping those outside y).
fn store_row(r: u32, c0: u32, acc: vec4<f32>) {
    if (r >= p.m) {
        return;
    }
    for (var j = 0u; j < PER_THREAD; j++) {
        let c = c0 + j;
        if (c < p.n) {
            var v = acc[j];
            if (p.bias_mode == BIAS_ROW) {
                v += bias[c];
            } else if (p.bias_mode == BIAS_MATRIX) {
                v += bias[r * p.n + c];
            }
            v = activate(v, p.activation);
            let at = r * p.ldy + c;
            if ((p.flags & FLAG_ACCUMULATE) != 0u) {
                v += y[at];
            }
            y[at] = v;
        }
    }
}
