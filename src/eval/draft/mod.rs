//! Drafting a rubric from the user's own evidence (`medrank rubric-draft`), extractively:
//! every criterion is a statement cut from the evidence's text ([`text`]); models only
//! retrieve, rank, de-duplicate and check (the job, `jobs::draft`). How far a draft
//! reaches experts' key statements: [`coverage`].

pub mod coverage;
pub mod text;

use crate::eval::bm25::Tokenizer;
use std::collections::BTreeSet;

/// The model-free near-duplicate rule (used when no encoder or NLI model is given): a
/// `candidate` duplicates a statement already `kept` when every term of the candidate
/// (BM25's tokenizer: lower case, split on non-alphanumerics) is among the kept one's,
/// so it adds no word. One way only: a candidate with a word more ("not") is kept.
pub fn lexical_duplicate(candidate: &str, kept: &str) -> bool {
    let terms = |s: &str| Tokenizer::default().tokenize(s).into_iter().collect::<BTreeSet<String>>();
    terms(candidate).is_subset(&terms(kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_whose_words_the_other_has_is_a_duplicate() {
        assert!(lexical_duplicate("Scabies is contagious.", "scabies is  very contagious"));
        assert!(lexical_duplicate("Rest.", "rest"));
        assert!(!lexical_duplicate("Scabies is not contagious between pets", "Scabies is contagious."));
    }
}
