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
// enough to fill the GPU with such tiles). A thread's rows are GROUPS (1 or 2) runs of 4:
// run g is rows g * 64 + 4 * lid.y .. + 3 of the tile, and likewise its columns with lid.x.
//
// k is walked in slices of SLICE values (the next slice is read from global memory while
// the current one is multiplied); the slices of x and w are staged in workgroup
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
//
// F16_MATH (with f16 weights, chosen by the encoder's weight format): the staged slices are
// f16 (x rounded to f16 as it is staged), the products of one slice are summed in f16 (16
// products with the 64-tile, 8 with the 128-tile), and those partial sums are added to the
// f32 accumulators once per slice. Why it should pay, unmeasured on a GPU so far (see
// BENCHMARKS.md): GPUs without tensor cores in WGSL's reach run packed f16 FMA at twice the
// f32 rate (NVIDIA since Pascal's GP100 and Ampere, AMD since Vega, Apple, Intel Xe), and
// the staged tiles take half the workgroup memory and its bandwidth; the f32 sum across
// slices bounds the error to one slice's f16 rounding (the tolerance is measured in
// tests/integration/gpu_ops.rs and tests/integration/gpu_encoder.rs). Otherwise `Stage` is vec4<f32>, `Part`
// mat4x4<f32>, and only the f32 branch runs (F16_MATH is a constant: the other compiles away).
// `Scalar`, `Stage`, `Part` and F16_MATH come from the Rust side.

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

var<workgroup> x_tile: array<Stage, SLICE * ROW>;
var<workgroup> w_tile: array<Stage, SLICE * ROW>;

@compute @workgroup_size(THREADS_X, THREADS_X)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;
    let thread = lid.y * THREADS_X + lid.x;
    let trans_x = (p.flags & FLAG_TRANS_X) != 0u;
    let trans_w = (p.flags & FLAG_TRANS_W) != 0u;

    // The thread's block of y as 4 x 4 blocks held in named matrices (row i of a block is
    // its column i here), never an array indexed in a loop: drivers may keep such an array
    // in slow thread-local memory instead of registers. accRC: row run R, column run C;
    // the small tile uses acc00 alone (GROUPS is a constant, the rest compiles away).
    var acc00 = mat4x4<f32>();
    var acc01 = mat4x4<f32>();
    var acc10 = mat4x4<f32>();
    var acc11 = mat4x4<f32>();
    // Each thread stages four values of each operand per slice (TILE * SLICE = 4 *
    // THREADS for both tiles). The next slice's are loaded from global memory before the
    // current slice's products, so their latency hides behind the arithmetic.
    var x_next = load_x_slice(row0, 0u, thread, trans_x);
    var w_next = load_w_slice(col0, 0u, thread, trans_w);
    for (var k0 = 0u; k0 < p.k; k0 += SLICE) {
        stage_x(thread, trans_x, x_next);
        stage_w(thread, trans_w, w_next);
        workgroupBarrier();
        if (k0 + SLICE < p.k) {
            x_next = load_x_slice(row0, k0 + SLICE, thread, trans_x);
            w_next = load_w_slice(col0, k0 + SLICE, thread, trans_w);
        }

        if (F16_MATH) {
            // One slice's products summed in f16, then added to the f32 accumulators.
            var part00 = Part();
            var part01 = Part();
            var part10 = Part();
            var part11 = Part();
            for (var kk = 0u; kk < SLICE; kk++) {
                let x0 = x_tile[kk * ROW + lid.y];
                let w0 = w_tile[kk * ROW + lid.x];
                part00 = accumulate_part(part00, x0, w0);
                if (GROUPS == 2u) {
                    let x1 = x_tile[kk * ROW + THREADS_X + lid.y];
                    let w1 = w_tile[kk * ROW + THREADS_X + lid.x];
                    part01 = accumulate_part(part01, x0, w1);
                    part10 = accumulate_part(part10, x1, w0);
                    part11 = accumulate_part(part11, x1, w1);
                }
            }
            acc00 += widen(part00);
            if (GROUPS == 2u) {
                acc01 += widen(part01);
                acc10 += widen(part10);
                acc11 += widen(part11);
            }
        } else {
            for (var kk = 0u; kk < SLICE; kk++) {
                let x0 = vec4<f32>(x_tile[kk * ROW + lid.y]);
                let w0 = vec4<f32>(w_tile[kk * ROW + lid.x]);
                acc00 = accumulate(acc00, x0, w0);
                if (GROUPS == 2u) {
                    let x1 = vec4<f32>(x_tile[kk * ROW + THREADS_X + lid.y]);
                    let w1 = vec4<f32>(w_tile[kk * ROW + THREADS_X + lid.x]);
                    acc01 = accumulate(acc01, x0, w1);
                    acc10 = accumulate(acc10, x1, w0);
                    acc11 = accumulate(acc11, x1, w1);
                }
            }
        }
        workgroupBarrier();
    }

    let r0 = row0 + 4u * lid.y;
    let c0 = col0 + 4u * lid.x;
    store_block(r0, c0, acc00);
    if (GROUPS == 2u) {
        let run = 4u * THREADS_X; // rows (columns) between a thread's two runs
        store_block(r0, c0 + run, acc01);
        store_block(r0 + run, c0, acc10);
        store_block(r0 + run, c0 + run, acc11);
    }
}

// acc + the outer product of four rows' x values and four columns' w values at one k.
fn accumulate(acc: mat4x4<f32>, x4: vec4<f32>, w4: vec4<f32>) -> mat4x4<f32> {
    return mat4x4<f32>(
        fma(vec4<f32>(x4.x), w4, acc[0]),
        fma(vec4<f32>(x4.y), w4, acc[1]),
        fma(vec4<f32>(x4.z), w4, acc[2]),
        fma(vec4<f32>(x4.w), w4, acc[3]),
    );
}

// The same in the staged precision (F16_MATH: f16).
fn accumulate_part(acc: Part, x4: Stage, w4: Stage) -> Part {
    return Part(
        fma(Stage(x4.x), w4, acc[0]),
        fma(Stage(x4.y), w4, acc[1]),
        fma(Stage(x4.z), w4, acc[2]),
        fma(Stage(x4.w), w4, acc[3]),
    );
}

// A partial block in f32, column by column (vector conversions are what every WGSL
// compiler supports).
fn widen(part: Part) -> mat4x4<f32> {
    return mat4x4<f32>(vec4<f32>(part[0]), vec4<f32>(part[1]), vec4<f32>(part[2]), vec4<f32>(part[3]));
}

// Stores a thread's 4 x 4 block whose first element is y(r0, c0).
fn store_block(r0: u32, c0: u32, block: mat4x4<f32>) {
    store_columns(r0, c0, block[0]);
    store_columns(r0 + 1u, c0, block[1]);
    store_columns(r0 + 2u, c0, block[2]);
    store_columns(r0 + 3u, c0, block[3]);
}

// Staged element e of a slice: its row (or column) r in the tile and its k in the slice.
// Consecutive e take consecutive addresses of the stored layout, so the loads coalesce.
fn slice_row(e: u32, transposed: bool) -> u32 {
    return select(e / SLICE, e % TILE, transposed);
}

fn slice_k(e: u32, transposed: bool) -> u32 {
    return select(e % SLICE, e / TILE, transposed);
}

// The four values of x that `thread` stages for the slice at k0 (zeros outside x).
fn load_x_slice(row0: u32, k0: u32, thread: u32, transposed: bool) -> vec4<f32> {
    return vec4<f32>(x_value(row0, k0, thread, transposed), x_value(row0, k0, thread + THREADS, transposed),
                     x_value(row0, k0, thread + 2u * THREADS, transposed),
                     x_value(row0, k0, thread + 3u * THREADS, transposed));
}

fn x_value(row0: u32, k0: u32, e: u32, transposed: bool) -> f32 {
    let r = row0 + slice_row(e, transposed);
    let kk = k0 + slice_k(e, transposed);
    if (r < p.m && kk < p.k) {
        return x[x_index(r, kk)];
    }
    return 0.0;
}

fn load_w_slice(col0: u32, k0: u32, thread: u32, transposed: bool) -> vec4<f32> {
    return vec4<f32>(w_value(col0, k0, thread, transposed), w_value(col0, k0, thread + THREADS, transposed),
                     w_value(col0, k0, thread + 2u * THREADS, transposed),
                     w_value(col0, k0, thread + 3u * THREADS, transposed));
}

fn w_value(col0: u32, k0: u32, e: u32, transposed: bool) -> f32 {
    let c = col0 + slice_row(e, transposed);
    let kk = k0 + slice_k(e, transposed);
    if (c < p.n && kk < p.k) {
        return weight(w_index(c, kk));
    }
    return 0.0;
}

// Puts a thread's four loaded values into the staged tile, k-major.
fn stage_x(thread: u32, transposed: bool, v: vec4<f32>) {
    put_x(thread, transposed, v.x);
    put_x(thread + THREADS, transposed, v.y);
    put_x(thread + 2u * THREADS, transposed, v.z);
    put_x(thread + 3u * THREADS, transposed, v.w);
}

fn put_x(e: u32, transposed: bool, v: f32) {
    let r = slice_row(e, transposed);
    x_tile[slice_k(e, transposed) * ROW + r / 4u][r % 4u] = Scalar(v);
}

fn stage_w(thread: u32, transposed: bool, v: vec4<f32>) {
    put_w(thread, transposed, v.x);
    put_w(thread + THREADS, transposed, v.y);
    put_w(thread + 2u * THREADS, transposed, v.z);
    put_w(thread + 3u * THREADS, transposed, v.w);
}

fn put_w(e: u32, transposed: bool, v: f32) {
    let c = slice_row(e, transposed);
    w_tile[slice_k(e, transposed) * ROW + c / 4u][c % 4u] = Scalar(v);
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
