//! Model outputs that are not numbers, refused where a job receives them: a model whose
//! weights or config make it compute NaN or infinity (weights near 1e18 overflow f32; a
//! layer norm's eps <= 0 divides by zero) must not have its output taken for a verdict.
//! One check per kind of output, backend-neutral (it reads what the CPU or the GPU
//! encoder returned): logits ([`logits`]), pooled and token vectors ([`vectors`]),
//! similarities and scores ([`scores`]), losses (the trainer, `train::trainer`). Each
//! gives an [`Error::NonFinite`] with the first input affected; the job names the model
//! and the input ([`Error::naming_input`]).

use crate::error::{Error, NonFinite, Result};

fn non_finite(output: &'static str, index: usize) -> Error {
    Error::NonFinite(NonFinite { output, index, model: None, input: None })
}

/// Rows of numbers, one per input (`output` says what they are).
pub fn rows(output: &'static str, rows: &[Vec<f32>]) -> Result<()> {
    match rows.iter().position(|r| r.iter().any(|x| !x.is_finite())) {
        Some(i) => Err(non_finite(output, i)),
        None => Ok(()),
    }
}

/// A head's logits, one row per input.
pub fn logits(rows_of_logits: &[Vec<f32>]) -> Result<()> {
    rows("logits", rows_of_logits)
}

/// Pooled embeddings (or one input's token vectors), one row per input.
pub fn vectors(output: &'static str, vectors: &[Vec<f32>]) -> Result<()> {
    rows(output, vectors)
}

/// One score per input (a similarity, a relevance score, a BERTScore).
pub fn scores(output: &'static str, scores: &[f64]) -> Result<()> {
    match scores.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(non_finite(output, i)),
        None => Ok(()),
    }
}

/// An error for the input at `index` whose `output` is not finite, already named (a
/// function that knows its inputs, such as an evaluator, names them itself).
pub fn named(output: &'static str, index: usize, input: String) -> Error {
    Error::NonFinite(NonFinite { output, index, model: None, input: Some(input) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_input_with_a_nan_or_an_infinity_is_found_and_named() {
        assert!(logits(&[vec![0.5, -1.0], vec![f32::MAX, f32::MIN]]).is_ok());
        let err = logits(&[vec![0.5, 1.0], vec![0.0, f32::NAN], vec![f32::INFINITY, 0.0]]).unwrap_err();
        assert!(matches!(&err, Error::NonFinite(n) if n.output == "logits" && n.index == 1 && n.input.is_none()));
        let named = err.naming_input("models/broken", |i| format!("response `r{i}`"));
        assert_eq!(
            named.to_string(),
            "model models/broken computed NaN or infinite logits for response `r1`: numbers that are not \
             numbers are no verdict, so nothing is reported. Its weights or config.json make it so (weights of \
             extreme size overflow f32; check the folder, or train it again)"
        );
        assert!(matches!(
            scores("similarity", &[0.1, f64::NEG_INFINITY]),
            Err(Error::NonFinite(NonFinite { index: 1, .. }))
        ));
        // Other errors pass through unchanged.
        assert_eq!(Error::invalid("x").naming_input("m", |_| unreachable!()).to_string(), "x");
    }
}
