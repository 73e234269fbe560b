//! The bounds of the size-like options: how many of something a run takes (sequences per
//! batch, epochs, window words, bench cells...). Each is checked before any work, by the
//! CLI's flag parser (the bound is stated in the flag's `--help` and in its error) and by
//! the library where the page sends the same option, so a value beyond it is refused
//! rather than left to exhaust the memory, overflow a size or run for years.
//! (The bootstrap's resamples are bounded in `stats::bootstrap`.)

/// Sequences per forward pass (`evaluate`, `embed`) and examples per training micro-batch:
/// 1,024 sequences of 512 tokens already hold 1.6 GB per hidden state of a BERT-base.
pub const MAX_BATCH: usize = 1024;
/// Training epochs (and `--patience`, counted in epochs).
pub const MAX_EPOCHS: usize = 10_000;
/// Micro-batches per optimiser step.
pub const MAX_GRAD_ACCUM: usize = 1024;
/// Optimiser steps a training trace records (`--trace-steps`; `all` records every one).
pub const MAX_TRACE_STEPS: usize = 1_000_000;
/// Words of a ranker's window over a long text (`nrp --window WORDS,STRIDE`); the stride
/// goes from 1 to the window's words (a larger stride would skip text between windows).
pub const MAX_WINDOW_WORDS: usize = 10_000;
/// Sequence lengths of the encoder benchmark: the BERT family's longest input.
pub const MAX_BENCH_LENGTH: usize = 512;
/// Timed passes per benchmark cell.
pub const MAX_REPEATS: usize = 1000;
/// A BERTScore hidden layer (1-based; the model's own layer count is checked once loaded).
pub const MAX_LAYER: usize = 1000;
/// A dimension's weight in the combined NRP (weights are normalised to sum 1).
pub const MAX_WEIGHT: f64 = 1e6;
/// Label steps of a kappa binning scale (`--kappa-bins METRIC=MIN..MAX`): MAX - MIN.
pub const MAX_KAPPA_STEPS: i64 = 100;

/// `value` of `flag` from `min` to `max`, or the message that says so ("--epochs 0:
/// expected a whole number from 1 to 10000").
pub fn check_count(flag: &str, value: usize, min: usize, max: usize) -> Result<(), String> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(format!("{flag} {value}: expected a whole number from {min} to {max}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_bounded_on_both_sides_and_the_message_names_the_flag() {
        assert!(check_count("--epochs", 1, 1, MAX_EPOCHS).is_ok());
        assert!(check_count("--epochs", MAX_EPOCHS, 1, MAX_EPOCHS).is_ok());
        assert_eq!(
            check_count("--epochs", 0, 1, MAX_EPOCHS).unwrap_err(),
            "--epochs 0: expected a whole number from 1 to 10000"
        );
        assert_eq!(
            check_count("--batch-size", usize::MAX, 1, MAX_BATCH).unwrap_err(),
            format!("--batch-size {}: expected a whole number from 1 to 1024", usize::MAX)
        );
    }
}
