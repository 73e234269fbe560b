// DeBERTa-v2's relative positions, prepended to attention.wgsl for a model that has them:
// the score of query i and key j adds
//   C2P * q_i . pos_k[r]  +  P2C * k_j . pos_q[r] * scale
// (q_i arrives scaled), r = rel_index[i - j + max_len - 1] the row of the distance's bucket,
// pos_q and pos_k the relative-position table through the layer's query and key maps
// ([rows, hidden], computed once at upload). C2P and P2C (0 or 1) come from the Rust side.

@group(0) @binding(4) var<storage, read> pos_q: array<f32>;
@group(0) @binding(5) var<storage, read> pos_k: array<f32>;
@group(0) @binding(6) var<storage, read> rel_index: array<u32>;

fn relative(q0: mat4x4<f32>, q1: mat4x4<f32>, q2: mat4x4<f32>, q3: mat4x4<f32>,
            query: u32, key: u32, head: u32, at: u32) -> f32 {
    let row = rel_index[query + p.max_len - 1u - key] * p.hidden + head;
    var c2p = dot_pos_k(q0, row, 0u);
    if (HEAD_MATS > 1u) {
        c2p += dot_pos_k(q1, row, 1u);
    }
    if (HEAD_MATS > 2u) {
        c2p += dot_pos_k(q2, row, 2u);
    }
    if (HEAD_MATS > 3u) {
        c2p += dot_pos_k(q3, row, 3u);
    }
    // The staged key (VECS vec4s from `at`) against pos_q's row.
    var p2c = vec4<f32>(0.0);
    for (var v = 0u; v < VECS; v++) {
        p2c += keys[at + v] * table4(row, v, false);
    }
    return f32(C2P) * c2p + f32(P2C) * (p2c.x + p2c.y + p2c.z + p2c.w) * p.scale;
}

// q's matrix m (values 16 m .. 16 m + 15 of the head) against the same values of pos_k's row.
fn dot_pos_k(q: mat4x4<f32>, row: u32, m: u32) -> f32 {
    let s = q[0] * table4(row, 4u * m, true) + q[1] * table4(row, 4u * m + 1u, true)
          + q[2] * table4(row, 4u * m + 2u, true) + q[3] * table4(row, 4u * m + 3u, true);
    return s.x + s.y + s.z + s.w;
}

// Values 4 v .. 4 v + 3 of the head's part of a table row (zero past D): pos_k's or pos_q's.
fn table4(row: u32, v: u32, key_table: bool) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let d = 4u * v + i;
        if (d < p.head_dim) {
            x[i] = select(pos_q[row + d], pos_k[row + d], key_table);
        }
    }
    return x;
}
