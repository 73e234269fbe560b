//! Symmetric per-row int8 quantization of weight matrices: what `medrank quantize` stores
//! (FORMATS.md §8), what the loader widens back, and what the int8 products run
//! (`cpu::int8`). A leaf: it imports nothing of the model.

/// The largest weight magnitude (symmetric; -128 is never used).
pub const WEIGHT_LEVELS: f32 = 127.0;

/// Quantize a `[rows, cols]` matrix (PyTorch's `[out, in]` weight) row by row, symmetric:
/// `(q, scales)` with `w ≈ q * scale` per row. A row of zeros gets scale 1 and zeros.
pub fn quantize_weight_rows(w: &[f32], cols: usize) -> (Vec<i8>, Vec<f32>) {
    assert!(cols > 0 && w.len().is_multiple_of(cols), "weight shape");
    let mut q = Vec::with_capacity(w.len());
    let mut scales = Vec::with_capacity(w.len() / cols);
    for row in w.chunks_exact(cols) {
        let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let scale = if max > 0.0 { max / WEIGHT_LEVELS } else { 1.0 };
        q.extend(row.iter().map(|v| (v / scale).round().clamp(-WEIGHT_LEVELS, WEIGHT_LEVELS) as i8));
        scales.push(scale);
    }
    (q, scales)
}

/// `q * scale` per row: the f32 weights an int8 matrix stands for.
pub fn dequantize_rows(q: &[i8], scales: &[f32]) -> Vec<f32> {
    assert!(!scales.is_empty() && q.len().is_multiple_of(scales.len()), "scales per row");
    let cols = q.len() / scales.len();
    q.chunks_exact(cols).zip(scales).flat_map(|(row, &s)| row.iter().map(move |&v| v as f32 * s)).collect()
}
