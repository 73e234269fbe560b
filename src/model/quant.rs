//! Symmetric per-row int8 quantization of weight matrices: what `medrank quantize` stores
//! (FORMATS.md §8), what the loader widens back, and what the int8 products run
//! (`cpu::int8`). A leaf: it imports nothing of the model.

/// The largest weight magnitude (symmetric; -128 is never used).
pub const WEIGHT_LEVELS: f32 = 127.0;

/// The smallest scale stored: the smallest normal f32. A row whose largest weight is
/// below `MIN_SCALE * 127` (subnormal weights, 1e-44) would get a scale that rounds to 0
/// or to a subnormal, which the loader rightly refuses (`q * 0` loses the row, `w / 0` is
/// NaN); with the floor such a row quantizes to zeros, which is what its weights are to
/// f32 arithmetic anyway.
pub const MIN_SCALE: f32 = f32::MIN_POSITIVE;

/// Quantize a `[rows, cols]` matrix (PyTorch's `[out, in]` weight) row by row, symmetric:
/// `(q, scales)` with `w ≈ q * scale` per row. A row of zeros gets scale 1 and zeros; a
/// row of tiny weights the scale [`MIN_SCALE`].
pub fn quantize_weight_rows(w: &[f32], cols: usize) -> (Vec<i8>, Vec<f32>) {
    assert!(cols > 0 && w.len().is_multiple_of(cols), "weight shape");
    let mut q = Vec::with_capacity(w.len());
    let mut scales = Vec::with_capacity(w.len() / cols);
    for row in w.chunks_exact(cols) {
        let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let scale = if max > 0.0 { (max / WEIGHT_LEVELS).max(MIN_SCALE) } else { 1.0 };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_tiny_weights_quantize_with_a_positive_normal_scale() {
        // Row maxima 1e-44 (subnormal) and 1e-37 (normal, but / 127 is subnormal): the
        // scale was 0 (1e-44 / 127 rounds to 0) and the folder was refused at load. With
        // the floor both scales are f32::MIN_POSITIVE and the rows dequantize to what f32
        // makes of them: 1e-44 / 1.1755e-38 rounds to 0; 1e-37 / 1.1755e-38 = 8.507 -> 9.
        let (q, scales) = quantize_weight_rows(&[1e-44, -1e-44, 1e-37, 0.0, 0.0, 0.0], 2);
        assert_eq!(scales, [MIN_SCALE, MIN_SCALE, 1.0]);
        assert!(scales.iter().all(|s| s.is_normal() && *s > 0.0));
        assert_eq!(q, [0, 0, 9, 0, 0, 0]);
        assert_eq!(dequantize_rows(&q, &scales)[2], 9.0 * f32::MIN_POSITIVE);
        // An ordinary row keeps max / 127.
        let (q, scales) = quantize_weight_rows(&[127.0, -63.5], 2);
        assert_eq!((q, scales), (vec![127, -64], vec![1.0]));
    }
}
