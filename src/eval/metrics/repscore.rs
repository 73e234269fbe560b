//! Repscore (BioASQ evaluation paper, §4.2.4): unique words / words, a cheap signal of
//! repetition (1 = no word repeated; lower = more repetition).
//!
//! Words are the tokens of the Unicode ROUGE tokenizer without stemming
//! ([`super::rouge::Tokenizer::Unicode`]): lowercased runs of letters and digits of any
//! script, each CJK ideograph on its own. So "Fever" and "fever" are one word, "fevers" is
//! another, punctuation is ignored and numbers count as words.

use super::rouge::{tokenize, RougeOptions, Tokenizer};
use crate::stats::Stat;

/// Unique words / words of `text`; undefined for a text without words.
pub fn repscore(text: &str) -> Stat<f64> {
    let words = tokenize(text, RougeOptions { tokenizer: Tokenizer::Unicode, stem: false });
    if words.is_empty() {
        return Stat::undefined("the text has no words");
    }
    let unique: std::collections::HashSet<&String> = words.iter().collect();
    Stat::Defined(unique.len() as f64 / words.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_over_total_words() {
        // Hand count: "the fever and the cough and the fever" -> 8 words, 4 unique.
        assert_eq!(repscore("The fever, and the cough; and THE fever!").unwrap(), 0.5);
        assert_eq!(repscore("Fiebre alta, náuseas y vómitos.").unwrap(), 1.0);
        // Numbers are words: "take 2 tablets 2 times" -> 5 words, 4 unique.
        assert_eq!(repscore("take 2 tablets 2 times").unwrap(), 0.8);
        // Inflections are different words (no stemming): "fever fevers".
        assert_eq!(repscore("fever fevers").unwrap(), 1.0);
    }

    #[test]
    fn no_words_is_undefined() {
        assert!(!repscore("").is_defined());
        assert!(!repscore(" ... !? ").is_defined());
    }
}
