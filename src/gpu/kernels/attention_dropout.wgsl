// Dropout of the attention probabilities in training, for attention.wgsl and its two
// backward passes: the multiplier of the probability of query i and key j (positions in
// their sequence) of head `head`, the CPU trainer's (train/dropout.rs `attention_mask`) for
// the same site key and input. The element's index is (head * positions + i) * positions +
// j in wrapping u32 arithmetic (`hash::attention_index`), `positions` the model's position
// limit, the same for every batch.

// The Rust side (ops/attention.rs, ops/dropout.rs) declares `drop_inputs` (each sequence's
// input index) at the kernel's next free binding and sets `p.drop_key`,
// `p.drop_threshold`, `p.drop_scale` and `p.drop_positions`; `drop_row_key` and
// `drop_keeps` come from dropout_hash.wgsl.

// The key of sequence `seq`'s masks.
fn attention_drop_row(seq: u32) -> u32 {
    return drop_row_key(p.drop_key, drop_inputs[seq]);
}

// The multiplier of probability (i, j) of head `head` of the sequence whose key is `row`.
fn attention_drop(row: u32, head: u32, i: u32, j: u32) -> f32 {
    let index = (head * p.drop_positions + i) * p.drop_positions + j;
    return select(0.0, p.drop_scale, drop_keeps(row, index, p.drop_threshold));
}
