// y[m, n] = activate(x[m, k] . w[n, k]^T + bias[n])      (y += ... with FLAG_ACCUMULATE)
//
// `w` keeps PyTorch's Linear layout (out_features x in_features), so checkpoints upload
// as they are. The backward passes reuse this kernel on other views of their operands:
// x and w may each be read transposed (FLAG_TRANS_X, FLAG_TRANS_W), every operand has its
// own row stride (ldx, ldw, ldy: a view of every L-th row, as the first tokens are), the
// bias may be a whole [m, n] matrix added instead of a row vector (a residual's gradient),
// or absent, and the result may be added to y (gradients summed over micro-batches).
//
// Each workgroup of 16 x 16 threads computes a TILE x TILE block of y, each thread a
// PER_THREAD x PER_THREAD part of it: 4 x 4 of a 64-tile, or 8 x 8 of a 128-tile (every
// staged value is then used twice as often; the Rust side takes it for products large
// enough to fill the GPU with such tiles). A thread's rows are GROUPS runs of 4: run g is
// rows g * 64 + 4 * lid.y .. + 3 of the tile, and likewise its columns with lid.x.
//
// k is walked in slices of SLICE values; the slices of x and w are staged in workgroup
// memory k-major, four rows (columns) per vec4: at one k, a thread's four rows are one
// 16-byte load, the 16 threads that share lid.y read the same vec4 of x (a broadcast) and
// consecutive lid.x read consecutive vec4s of w, so no two threads of a warp contend for a
// memory bank (the row-major layout this replaces put 16 threads on one bank). A padding
// vec4 at the end of each k row spreads the staging stores over the banks too, and the
// staging reads walk whichever dimension is contiguous in global memory.
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

const THREADS_X: u32 = 16u;
const THREADS: u32 = THREADS_X * THREADS_X;
// Runs of 4 rows (columns) per thread.
const GROUPS: u32 = PER_THREAD / 4u;
// vec4s per staged k row: TILE / 4 and one of padding.
const ROW: u32 = TILE / 4u + 1u;

var<workgroup> x_tile: array<vec4<f32>, SLICE * ROW>;
var<workgroup> w_tile: array<vec4<f32>, SLICE * ROW>;

@compute @workgroup_size(THREADS_X, THREADS_X)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;
    let thread = lid.y * THREADS_X + lid.x;
    let trans_x = (p.flags & FLAG_TRANS_X) != 0u;
    let trans_w = (p.flags & FLAG_TRANS_W) != 0u;

    // acc[(4 * gr + i) * GROUPS + gc]: row i of run gr, the four columns of run gc.
    var acc: array<vec4<f32>, PER_THREAD * GROUPS>;
    for (var k0 = 0u; k0 < p.k; k0 += SLICE) {
        // Stage TILE * SLICE values of each operand, TILE * SLICE / THREADS per thread;
        // zeros outside the matrices.
        for (var i = 0u; i < TILE * SLICE / THREADS; i++) {
            let e = thread + i * THREADS;
            // Consecutive threads take consecutive addresses of the stored layout.
            let r = select(e / SLICE, e % TILE, trans_x);
            let kx = select(e % SLICE, e / TILE, trans_x);
            var xv = 0.0;
            if (row0 + r < p.m && k0 + kx < p.k) {
                xv = x[x_index(row0 + r, k0 + kx)];
            }
            x_tile[kx * ROW + r / 4u][r % 4u] = xv;
            let c = select(e / SLICE, e % TILE, trans_w);
            let kw = select(e % SLICE, e / TILE, trans_w);
            var wv = 0.0;
            if (col0 + c < p.n && k0 + kw < p.k) {
                wv = weight(w_index(col0 + c, k0 + kw));
            }
            w_tile[kw * ROW + c / 4u][c % 4u] = wv;
        }
        workgroupBarrier();

        for (var kk = 0u; kk < SLICE; kk++) {
            var xs: array<vec4<f32>, GROUPS>;
            var ws: array<vec4<f32>, GROUPS>;
            for (var g = 0u; g < GROUPS; g++) {
                xs[g] = x_tile[kk * ROW + g * THREADS_X + lid.y];
                ws[g] = w_tile[kk * ROW + g * THREADS_X + lid.x];
            }
            for (var gr = 0u; gr < GROUPS; gr++) {
                for (var i = 0u; i < 4u; i++) {
                    let xv = xs[gr][i];
                    for (var gc = 0u; gc < GROUPS; gc++) {
                        let a = (4u * gr + i) * GROUPS + gc;
                        acc[a] = fma(vec4<f32>(xv), ws[gc], acc[a]);
                    }
                }
            }
        }
        workgroupBarrier();
    }

    for (var gr = 0u; gr < GROUPS; gr++) {
        for (var i = 0u; i < 4u; i++) {
            let r = row0 + gr * 4u * THREADS_X + 4u * lid.y + i;
            for (var gc = 0u; gc < GROUPS; gc++) {
                let c0 = col0 + gc * 4u * THREADS_X + 4u * lid.x;
                store_columns(r, c0, acc[(4u * gr + i) * GROUPS + gc]);
            }
        }
    }
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
fn store_columns(r: u32, c0: u32, acc: vec4<f32>) {
    if (r >= p.m) {
        return;
    }
    for (var j = 0u; j < 4u; j++) {
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
