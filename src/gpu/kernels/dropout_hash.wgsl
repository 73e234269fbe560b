// The counter-based hash dropout masks are drawn with, the twin of `hash::pcg_hash` and
// `hash::keeps` in ops/dropout.rs (the CPU trainer's masks call those): PCG's RXS-M-XS
// output permutation used as a hash of one u32, in wrapping u32 arithmetic. Its constants
// (PCG_*) come from the Rust side, which defines them once.

fn pcg_hash(v: u32) -> u32 {
    let state = v * PCG_MULTIPLIER + PCG_INCREMENT;
    let word = ((state >> ((state >> PCG_SELECT_SHIFT) + PCG_BASE_SHIFT)) ^ state) * PCG_OUTPUT_MULTIPLIER;
    return (word >> PCG_OUTPUT_SHIFT) ^ word;
}

// The key of one input's mask at a site: the site's key (the host hashes seed, step, layer
// and site into it) with the input's index in the training set.
fn drop_row_key(site_key: u32, input: u32) -> u32 {
    return pcg_hash(site_key ^ input);
}

// Whether element `index` of the input whose key is `row_key` is kept: its hash at or above
// `threshold` (p * 2^32), so it is dropped with probability p.
fn drop_keeps(row_key: u32, index: u32, threshold: u32) -> bool {
    return pcg_hash(row_key ^ pcg_hash(index)) >= threshold;
}
