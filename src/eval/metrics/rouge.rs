//! ROUGE-N, ROUGE-L and ROUGE-Lsum, computed as Google's `rouge_score` package (0.1.2)
//! computes them, so published numbers can be reproduced.
//!
//! Tokenisation ([`Tokenizer::RougeScore`], the default) is rouge_score's:
//! 1. lowercase (full Unicode lowercasing, like Python's `str.lower`);
//! 2. replace every run of characters outside `[a-z0-9]` by a space;
//! 3. split on spaces; with stemming on, Porter-stem (NLTK's variant, see [`super::porter`])
//!    every token longer than 3 characters.
//!
//! **Step 2 deletes every non-ASCII letter.** "fiebre alta" keeps both words, but
//! "náusea" becomes the two tokens "n" and "usea", "Schädel" becomes "sch" "del", and Greek,
//! Cyrillic, Arabic or Chinese text has *no tokens at all* (every score is 0). This is what
//! the reference package does, so it is the default for reproducing English results;
//! for any other language use [`Tokenizer::Unicode`], which keeps letters and digits of
//! every script (see [`tokenize`]).
//!
//! Scores: precision = matches / candidate units, recall = matches / reference units,
//! F = 2PR / (P + R), and F = 0 when P + R = 0 (also for an empty candidate or reference).
//! ROUGE-L uses the longest common subsequence of the whole token sequences; ROUGE-Lsum
//! splits both texts into sentences *on newlines* (rouge_score's default; put one sentence
//! per line) and uses the union LCS of each reference sentence against all candidate
//! sentences, counting each token at most as often as it occurs on both sides.
//! With several references, each ROUGE type independently takes the reference with the
//! highest F (the first one on ties): rouge_score's `score_multi`.

use super::porter;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How text is split into tokens before matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    /// rouge_score's tokenizer: only `[a-z0-9]` survive; non-ASCII letters vanish.
    #[default]
    RougeScore,
    /// Letters and digits of any script (`char::is_alphanumeric`, plus combining accents
    /// U+0300..U+036F inside a word), lowercased; each CJK ideograph is a token of its own
    /// (those scripts do not separate words by spaces). Only all-ASCII tokens are stemmed.
    /// Text is not Unicode-normalised: write accents precomposed (NFC) on both sides.
    Unicode,
}

impl Tokenizer {
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::RougeScore => "rouge_score",
            Tokenizer::Unicode => "unicode",
        }
    }
}

/// The ROUGE variants this module computes.
/// Serialised as rouge1, rouge2, rougeL, rougeLsum (rouge-score's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RougeType {
    Rouge1,
    Rouge2,
    RougeL,
    RougeLsum,
}

impl RougeType {
    pub const ALL: [RougeType; 4] = [RougeType::Rouge1, RougeType::Rouge2, RougeType::RougeL, RougeType::RougeLsum];

    /// rouge_score's name for the type.
    pub fn name(self) -> &'static str {
        match self {
            RougeType::Rouge1 => "rouge1",
            RougeType::Rouge2 => "rouge2",
            RougeType::RougeL => "rougeL",
            RougeType::RougeLsum => "rougeLsum",
        }
    }
}

/// Options shared by every ROUGE computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RougeOptions {
    pub tokenizer: Tokenizer,
    /// Porter-stem tokens longer than 3 characters (rouge_score's `use_stemmer=True`).
    pub stem: bool,
}

impl Default for RougeOptions {
    /// rouge_score with `use_stemmer=True`, the setting most papers report.
    fn default() -> Self {
        RougeOptions { tokenizer: Tokenizer::RougeScore, stem: true }
    }
}

/// Precision, recall and F-measure of one candidate against one reference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RougeScore {
    pub precision: f64,
    pub recall: f64,
    pub f: f64,
}

impl RougeScore {
    const ZERO: RougeScore = RougeScore { precision: 0.0, recall: 0.0, f: 0.0 };

    /// From counts: matches / candidate units and matches / reference units (a zero
    /// denominator gives 0, as rouge_score's `max(count, 1)`).
    fn from_counts(matches: usize, candidate_units: usize, reference_units: usize) -> Self {
        let precision = matches as f64 / candidate_units.max(1) as f64;
        let recall = matches as f64 / reference_units.max(1) as f64;
        RougeScore { precision, recall, f: f_measure(precision, recall) }
    }
}

/// Harmonic mean of precision and recall; 0 when both are 0.
pub fn f_measure(precision: f64, recall: f64) -> f64 {
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

/// Split `text` into tokens as the options say (see the module and [`Tokenizer`] docs).
pub fn tokenize(text: &str, options: RougeOptions) -> Vec<String> {
    let lower = text.to_lowercase();
    let raw: Vec<String> = match options.tokenizer {
        Tokenizer::RougeScore => lower
            .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
        Tokenizer::Unicode => unicode_words(&lower),
    };
    raw.into_iter()
        .map(|t| {
            // rouge_score stems tokens of more than 3 characters; the Unicode tokenizer
            // leaves words with non-ASCII letters alone (the stemmer is English-only).
            if options.stem && t.chars().count() > 3 && t.is_ascii() {
                porter::stem(&t)
            } else {
                t
            }
        })
        .collect()
}

/// CJK ideographs, which [`Tokenizer::Unicode`] makes one token each (the ranges BERT's
/// basic tokenizer uses for the same purpose).
fn is_cjk_ideograph(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

fn unicode_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if is_cjk_ideograph(c) {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            words.push(c.to_string());
        } else if c.is_alphanumeric() || (!current.is_empty() && ('\u{300}'..='\u{36f}').contains(&c)) {
            current.push(c);
        } else if !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// A text tokenised once for every ROUGE type: the tokens of each non-empty line (for
/// ROUGE-Lsum) and of the whole text. Newlines always separate tokens, so the whole-text
/// tokens are exactly the lines' tokens in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tokenized {
    pub tokens: Vec<String>,
    pub sentences: Vec<Vec<String>>,
}

impl Tokenized {
    pub fn new(text: &str, options: RougeOptions) -> Self {
        let sentences: Vec<Vec<String>> =
            text.split('\n').filter(|s| !s.is_empty()).map(|s| tokenize(s, options)).collect();
        Tokenized { tokens: sentences.concat(), sentences }
    }
}

/// One ROUGE type of `candidate` against one `reference`.
pub fn score(kind: RougeType, reference: &str, candidate: &str, options: RougeOptions) -> RougeScore {
    score_tokenized(kind, &Tokenized::new(reference, options), &Tokenized::new(candidate, options))
}

/// One ROUGE type from texts tokenised beforehand.
pub fn score_tokenized(kind: RougeType, reference: &Tokenized, candidate: &Tokenized) -> RougeScore {
    match kind {
        RougeType::Rouge1 => rouge_n(1, &reference.tokens, &candidate.tokens),
        RougeType::Rouge2 => rouge_n(2, &reference.tokens, &candidate.tokens),
        RougeType::RougeL => rouge_l(&reference.tokens, &candidate.tokens),
        RougeType::RougeLsum => rouge_lsum(&reference.sentences, &candidate.sentences),
    }
}

/// The best score over several references (highest F, first on ties) and the index of
/// that reference: rouge_score's `score_multi`. `None` when there are no references.
pub fn score_multi(
    kind: RougeType,
    references: &[&str],
    candidate: &str,
    options: RougeOptions,
) -> Option<(RougeScore, usize)> {
    let references: Vec<Tokenized> = references.iter().map(|r| Tokenized::new(r, options)).collect();
    best_reference(kind, &references, &Tokenized::new(candidate, options))
}

/// [`score_multi`] on tokenised texts (tokenise once, score every type).
pub fn best_reference(kind: RougeType, references: &[Tokenized], candidate: &Tokenized) -> Option<(RougeScore, usize)> {
    let mut best: Option<(RougeScore, usize)> = None;
    for (i, reference) in references.iter().enumerate() {
        let s = score_tokenized(kind, reference, candidate);
        if best.is_none_or(|(b, _)| s.f > b.f) {
            best = Some((s, i));
        }
    }
    best
}

/// ROUGE-N from token lists: clipped n-gram matches (each n-gram counts at most as often
/// as it occurs in the reference).
pub fn rouge_n(n: usize, reference: &[String], candidate: &[String]) -> RougeScore {
    let reference_ngrams = ngram_counts(reference, n);
    let candidate_ngrams = ngram_counts(candidate, n);
    let matches: usize =
        reference_ngrams.iter().map(|(gram, &count)| count.min(candidate_ngrams.get(gram).copied().unwrap_or(0))).sum();
    RougeScore::from_counts(matches, candidate_ngrams.values().sum(), reference_ngrams.values().sum())
}

fn ngram_counts(tokens: &[String], n: usize) -> HashMap<&[String], usize> {
    let mut counts = HashMap::new();
    if n > 0 && tokens.len() >= n {
        for gram in tokens.windows(n) {
            *counts.entry(gram).or_insert(0) += 1;
        }
    }
    counts
}

/// ROUGE-L from token lists: LCS length over candidate and reference lengths.
pub fn rouge_l(reference: &[String], candidate: &[String]) -> RougeScore {
    if reference.is_empty() || candidate.is_empty() {
        return RougeScore::ZERO;
    }
    let mut ids = TokenIds::default();
    let (reference_ids, candidate_ids) = (ids.of(reference), ids.of(candidate));
    RougeScore::from_counts(lcs_length(&reference_ids, &candidate_ids), candidate.len(), reference.len())
}

/// Tokens as small integers, so that the LCS tables (n x m cells) compare integers, not
/// strings: equal tokens get equal ids.
#[derive(Default)]
struct TokenIds<'a> {
    ids: HashMap<&'a str, u32>,
}

impl<'a> TokenIds<'a> {
    fn of(&mut self, tokens: &'a [String]) -> Vec<u32> {
        tokens
            .iter()
            .map(|t| {
                let next = self.ids.len() as u32;
                *self.ids.entry(t.as_str()).or_insert(next)
            })
            .collect()
    }
}

/// The LCS length by the usual table, keeping only two rows of the shorter text's length:
/// memory O(min(n, m)) (a full table of a million-token candidate against a 200-token
/// reference took 1.6 GB).
fn lcs_length<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    let (outer, inner) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    let mut previous = vec![0usize; inner.len() + 1];
    let mut current = vec![0usize; inner.len() + 1];
    for x in outer {
        for (j, y) in inner.iter().enumerate() {
            current[j + 1] = if x == y { previous[j] + 1 } else { previous[j + 1].max(current[j]) };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[inner.len()]
}

/// Positions in `reference` of one LCS with `candidate`, chosen exactly as rouge_score's
/// `_backtrack_norec` does (the union LCS, hence ROUGE-Lsum, depends on that choice):
/// from the end, a match steps diagonally, else the step goes left when
/// `table[i][j-1] > table[i-1][j]` and up otherwise. Only that one bit per cell is kept
/// (the table itself two rows at a time): 1/64 of the memory of the full table.
fn lcs_positions<T: PartialEq>(reference: &[T], candidate: &[T]) -> Vec<usize> {
    let (rows, columns) = (reference.len(), candidate.len());
    let mut left = vec![0u64; (rows * columns).div_ceil(64)];
    let bit = |i: usize, j: usize| (i - 1) * columns + (j - 1);
    let mut previous = vec![0usize; columns + 1];
    let mut current = vec![0usize; columns + 1];
    for i in 1..=rows {
        for j in 1..=columns {
            current[j] = if reference[i - 1] == candidate[j - 1] {
                previous[j - 1] + 1
            } else {
                if current[j - 1] > previous[j] {
                    let k = bit(i, j);
                    left[k / 64] |= 1 << (k % 64);
                }
                previous[j].max(current[j - 1])
            };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    backtrack(reference, candidate, |i, j| left[bit(i, j) / 64] >> (bit(i, j) % 64) & 1 == 1)
}

/// rouge_score's backtrack from the end of both texts: a match steps diagonally (and is
/// part of the LCS), else `go_left(i, j)` says whether to drop the candidate's token j.
fn backtrack<T: PartialEq>(reference: &[T], candidate: &[T], go_left: impl Fn(usize, usize) -> bool) -> Vec<usize> {
    let (mut i, mut j) = (reference.len(), candidate.len());
    let mut positions = Vec::new();
    while i > 0 && j > 0 {
        if reference[i - 1] == candidate[j - 1] {
            positions.push(i - 1);
            i -= 1;
            j -= 1;
        } else if go_left(i, j) {
            j -= 1;
        } else {
            i -= 1;
        }
    }
    positions.reverse();
    positions
}

/// Summary-level ROUGE-L (Lin 2004, §3.2) as rouge_score / ROUGE-1.5.5: for each reference
/// sentence, the union of its LCS positions against every candidate sentence; each token
/// of that union is a hit only while both texts still have an unused occurrence of it.
pub fn rouge_lsum(reference: &[Vec<String>], candidate: &[Vec<String>]) -> RougeScore {
    let reference_len: usize = reference.iter().map(Vec::len).sum();
    let candidate_len: usize = candidate.iter().map(Vec::len).sum();
    if reference_len == 0 || candidate_len == 0 {
        return RougeScore::ZERO;
    }
    let mut reference_left = token_counts(reference);
    let mut candidate_left = token_counts(candidate);
    let mut ids = TokenIds::default();
    let candidate_ids: Vec<Vec<u32>> = candidate.iter().map(|c| ids.of(c)).collect();
    let mut hits = 0;
    for sentence in reference {
        let sentence_ids = ids.of(sentence);
        let mut union: Vec<usize> = candidate_ids.iter().flat_map(|c| lcs_positions(&sentence_ids, c)).collect();
        union.sort_unstable();
        union.dedup();
        for position in union {
            let token = sentence[position].as_str();
            let (r, c) = (reference_left.get_mut(token), candidate_left.get_mut(token));
            if let (Some(r), Some(c)) = (r, c) {
                if *r > 0 && *c > 0 {
                    hits += 1;
                    *r -= 1;
                    *c -= 1;
                }
            }
        }
    }
    RougeScore::from_counts(hits, candidate_len, reference_len)
}

fn token_counts(sentences: &[Vec<String>]) -> HashMap<&str, usize> {
    let mut counts = HashMap::new();
    for token in sentences.iter().flatten() {
        *counts.entry(token.as_str()).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full-table LCS this module used before keeping only two rows and one bit per
    /// cell: the reference the compact versions must equal.
    fn full_table_lcs(reference: &[String], candidate: &[String]) -> (usize, Vec<usize>) {
        let mut table = vec![vec![0usize; candidate.len() + 1]; reference.len() + 1];
        for i in 1..=reference.len() {
            for j in 1..=candidate.len() {
                table[i][j] = if reference[i - 1] == candidate[j - 1] {
                    table[i - 1][j - 1] + 1
                } else {
                    table[i - 1][j].max(table[i][j - 1])
                };
            }
        }
        let positions = backtrack(reference, candidate, |i, j| table[i][j - 1] > table[i - 1][j]);
        (table[reference.len()][candidate.len()], positions)
    }

    #[test]
    fn compact_lcs_equals_the_full_table_on_random_texts() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        for _ in 0..500 {
            // Few distinct words, so that there are many ties for the backtrack to break.
            let text = |rng: &mut rand_chacha::ChaCha8Rng, n: usize| {
                (0..n).map(|_| ["a", "b", "c", "d"][rng.gen_range(0..4)].to_string()).collect::<Vec<_>>()
            };
            let (n, m) = (rng.gen_range(0..40), rng.gen_range(0..70));
            let (r, c) = (text(&mut rng, n), text(&mut rng, m));
            let (length, positions) = full_table_lcs(&r, &c);
            assert_eq!(lcs_length(&r, &c), length);
            assert_eq!(lcs_length(&c, &r), length);
            assert_eq!(lcs_positions(&r, &c), positions, "{r:?} / {c:?}");
        }
    }

    #[test]
    fn a_long_candidate_needs_memory_for_one_row_only() {
        // 502,500 candidate tokens against 200 reference tokens: the full table had 100
        // million cells (800 MB); two rows of 201 now. LCS by hand: the reference is
        // "w0 .. w199", the candidate repeats "x w0 .. w199" 2,500 times: the whole
        // reference is a subsequence, so the LCS is 200 and recall is 1.
        let reference: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
        let mut candidate = Vec::with_capacity(502_500);
        for _ in 0..2_500 {
            candidate.push("x".to_string());
            candidate.extend(reference.iter().cloned());
        }
        assert_eq!(lcs_length(&reference, &candidate), 200);
        let score = rouge_l(&reference, &candidate);
        assert_eq!(score.recall, 1.0);
        assert_eq!(score.precision, 200.0 / 502_500.0);
    }

    fn assert_close(got: RougeScore, expected: [f64; 3], what: &str) {
        let got_arr = [got.precision, got.recall, got.f];
        for (g, e) in got_arr.iter().zip(expected) {
            assert!((g - e).abs() < 1e-12, "{what}: got {got_arr:?}, rouge_score {expected:?}");
        }
    }

    /// (reference, candidate, use_stemmer, [[P, R, F] for rouge1, rouge2, rougeL, rougeLsum])
    /// from rouge_score 0.1.2 (nltk 3.10.4): RougeScorer(['rouge1','rouge2','rougeL',
    /// 'rougeLsum'], use_stemmer=..).score(reference, candidate).
    const ROUGE_SCORE_CASES: &[(&str, &str, bool, [[f64; 3]; 4])] = &[
        ("The patient presented with acute chest pain and dyspnea.", "Patient presents with acute chest pains and shortness of breath.", true, [[0.7, 0.7777777777777778, 0.7368421052631577], [0.6666666666666666, 0.75, 0.7058823529411765], [0.7, 0.7777777777777778, 0.7368421052631577], [0.7, 0.7777777777777778, 0.7368421052631577]]),
        ("Metformin is the first-line treatment for type 2 diabetes.", "First-line therapy for type 2 diabetes is metformin, combined with lifestyle changes.", true, [[0.6153846153846154, 0.8, 0.6956521739130435], [0.3333333333333333, 0.4444444444444444, 0.380952380952381], [0.46153846153846156, 0.6, 0.5217391304347826], [0.46153846153846156, 0.6, 0.5217391304347826]]),
        ("the cat the cat the cat", "the the cat cat", true, [[1.0, 0.6666666666666666, 0.8], [0.3333333333333333, 0.2, 0.25], [1.0, 0.6666666666666666, 0.8], [1.0, 0.6666666666666666, 0.8]]),
        ("Administer 500 mg of amoxicillin every 8 hours for 7 days.", "Amoxicillin 500mg q8h for 7 days.", true, [[0.6666666666666666, 0.36363636363636365, 0.4705882352941177], [0.4, 0.2, 0.26666666666666666], [0.6666666666666666, 0.36363636363636365, 0.4705882352941177], [0.6666666666666666, 0.36363636363636365, 0.4705882352941177]]),
        ("", "Some candidate text.", true, [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
        ("Reference only text.", "", true, [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
        ("La paciente presenta náusea y fiebre alta.", "El paciente tiene náuseas y fiebre.", true, [[0.7142857142857143, 0.625, 0.6666666666666666], [0.5, 0.42857142857142855, 0.4615384615384615], [0.7142857142857143, 0.625, 0.6666666666666666], [0.7142857142857143, 0.625, 0.6666666666666666]]),
        ("Пациент жалуется на боль в груди.", "Пациент жалуется на боль.", true, [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
        ("Hypertension increases the risk of stroke.\nControl blood pressure with ACE inhibitors.\nMonitor renal function.", "ACE inhibitors control blood pressure.\nHypertension raises stroke risk.\nCheck kidney function regularly.", true, [[0.6923076923076923, 0.6, 0.6428571428571429], [0.25, 0.21428571428571427, 0.23076923076923075], [0.3076923076923077, 0.26666666666666666, 0.28571428571428575], [0.46153846153846156, 0.4, 0.42857142857142855]]),
        ("a b c d e\nb c a d\ne a", "a b d\nc a b e d\na e c", true, [[1.0, 1.0, 1.0], [0.2, 0.2, 0.20000000000000004], [0.6363636363636364, 0.6363636363636364, 0.6363636363636364], [0.9090909090909091, 0.9090909090909091, 0.9090909090909091]]),
        ("The generalization of the hospitalizations was running smoothly", "generalizing hospitalized runs smooth", true, [[0.75, 0.375, 0.5], [0.0, 0.0, 0.0], [0.75, 0.375, 0.5], [0.75, 0.375, 0.5]]),
        ("Schädel-Hirn-Trauma with Bewusstlosigkeit", "Schädel Trauma, Bewusstlosigkeit!", true, [[1.0, 0.6666666666666666, 0.8], [0.3333333333333333, 0.2, 0.25], [1.0, 0.6666666666666666, 0.8], [1.0, 0.6666666666666666, 0.8]]),
        ("The patient presented with acute chest pain and dyspnea.", "Patient presents with acute chest pains and shortness of breath.", false, [[0.5, 0.5555555555555556, 0.5263157894736842], [0.2222222222222222, 0.25, 0.23529411764705882], [0.5, 0.5555555555555556, 0.5263157894736842], [0.5, 0.5555555555555556, 0.5263157894736842]]),
        ("Metformin is the first-line treatment for type 2 diabetes.", "First-line therapy for type 2 diabetes is metformin, combined with lifestyle changes.", false, [[0.6153846153846154, 0.8, 0.6956521739130435], [0.3333333333333333, 0.4444444444444444, 0.380952380952381], [0.46153846153846156, 0.6, 0.5217391304347826], [0.46153846153846156, 0.6, 0.5217391304347826]]),
        ("the cat the cat the cat", "the the cat cat", false, [[1.0, 0.6666666666666666, 0.8], [0.3333333333333333, 0.2, 0.25], [1.0, 0.6666666666666666, 0.8], [1.0, 0.6666666666666666, 0.8]]),
        ("Administer 500 mg of amoxicillin every 8 hours for 7 days.", "Amoxicillin 500mg q8h for 7 days.", false, [[0.6666666666666666, 0.36363636363636365, 0.4705882352941177], [0.4, 0.2, 0.26666666666666666], [0.6666666666666666, 0.36363636363636365, 0.4705882352941177], [0.6666666666666666, 0.36363636363636365, 0.4705882352941177]]),
        ("La paciente presenta náusea y fiebre alta.", "El paciente tiene náuseas y fiebre.", false, [[0.5714285714285714, 0.5, 0.5333333333333333], [0.16666666666666666, 0.14285714285714285, 0.15384615384615383], [0.5714285714285714, 0.5, 0.5333333333333333], [0.5714285714285714, 0.5, 0.5333333333333333]]),
        ("Hypertension increases the risk of stroke.\nControl blood pressure with ACE inhibitors.\nMonitor renal function.", "ACE inhibitors control blood pressure.\nHypertension raises stroke risk.\nCheck kidney function regularly.", false, [[0.6923076923076923, 0.6, 0.6428571428571429], [0.25, 0.21428571428571427, 0.23076923076923075], [0.3076923076923077, 0.26666666666666666, 0.28571428571428575], [0.46153846153846156, 0.4, 0.42857142857142855]]),
        ("a b c d e\nb c a d\ne a", "a b d\nc a b e d\na e c", false, [[1.0, 1.0, 1.0], [0.2, 0.2, 0.20000000000000004], [0.6363636363636364, 0.6363636363636364, 0.6363636363636364], [0.9090909090909091, 0.9090909090909091, 0.9090909090909091]]),
        ("The generalization of the hospitalizations was running smoothly", "generalizing hospitalized runs smooth", false, [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
        ("Schädel-Hirn-Trauma with Bewusstlosigkeit", "Schädel Trauma, Bewusstlosigkeit!", false, [[1.0, 0.6666666666666666, 0.8], [0.3333333333333333, 0.2, 0.25], [1.0, 0.6666666666666666, 0.8], [1.0, 0.6666666666666666, 0.8]]),
    ];

    #[test]
    fn matches_rouge_score_on_varied_pairs() {
        for (reference, candidate, stem, expected) in ROUGE_SCORE_CASES {
            let options = RougeOptions { tokenizer: Tokenizer::RougeScore, stem: *stem };
            for (kind, e) in RougeType::ALL.iter().zip(expected) {
                let got = score(*kind, reference, candidate, options);
                assert_close(got, *e, &format!("{} stem={stem} {reference:?} / {candidate:?}", kind.name()));
            }
        }
    }

    #[test]
    fn score_multi_picks_the_best_reference_per_type() {
        // rouge_score 0.1.2, use_stemmer=True: score_multi(refs, cand). rouge2 takes the
        // first reference (F 0.4 vs 0.3636), the others the second (F 0.7692, 0.6154).
        let refs = ["stroke risk rises with blood pressure", "blood pressure raises the risk of stroke", "risk"];
        let cand = "high blood pressure raises stroke risk";
        let options = RougeOptions::default();
        let expected = [
            (RougeType::Rouge1, [0.8333333333333334, 0.7142857142857143, 0.7692307692307692], 1),
            (RougeType::Rouge2, [0.4, 0.4, 0.4000000000000001], 0),
            (RougeType::RougeL, [0.6666666666666666, 0.5714285714285714, 0.6153846153846153], 1),
            (RougeType::RougeLsum, [0.6666666666666666, 0.5714285714285714, 0.6153846153846153], 1),
        ];
        for (kind, e, best) in expected {
            let (got, index) = score_multi(kind, &refs, cand, options).unwrap();
            assert_close(got, e, kind.name());
            assert_eq!(index, best, "{}", kind.name());
        }
        assert!(score_multi(RougeType::Rouge1, &[], cand, options).is_none());
    }

    #[test]
    fn rouge_score_tokenizer_drops_non_ascii_letters() {
        // rouge_score 0.1.2: DefaultTokenizer(use_stemmer=True).tokenize(..)
        let options = RougeOptions::default();
        assert_eq!(
            tokenize("La paciente presenta náusea y fiebre alta.", options),
            ["la", "pacient", "presenta", "n", "usea", "y", "fiebr", "alta"]
        );
        assert!(tokenize("Пациент жалуется на боль в груди.", options).is_empty());
    }

    #[test]
    fn unicode_tokenizer_keeps_every_script() {
        let options = RougeOptions { tokenizer: Tokenizer::Unicode, stem: true };
        // Non-ASCII words are kept whole and not stemmed; ASCII words are stemmed.
        assert_eq!(
            tokenize("La paciente presenta NÁUSEAS y fiebre; Schädel-Hirn-Trauma", options),
            ["la", "pacient", "presenta", "náuseas", "y", "fiebr", "schädel", "hirn", "trauma"]
        );
        assert_eq!(tokenize("Боль в груди", options), ["боль", "в", "груди"]);
        // Each CJK ideograph is a token; digits stay in words.
        assert_eq!(tokenize("胸痛2天", options), ["胸", "痛", "2", "天"]);
        // A decomposed accent (e + U+0301) stays inside its word.
        assert_eq!(tokenize("cafe\u{301} noir", options), ["cafe\u{301}", "noir"]);

        // Hand-worked: reference "Пациент жалуется на боль в груди" (6 tokens), candidate
        // "Пациент жалуется на боль" (4 tokens): 4 unigram matches -> P = 1, R = 4/6,
        // F = 2·(2/3)/(5/3) = 0.8; bigrams 3 of 3 and 3 of 5 -> F = 2·0.6/1.6 = 0.75.
        let r1 = score(RougeType::Rouge1, "Пациент жалуется на боль в груди.", "Пациент жалуется на боль.", options);
        assert_close(r1, [1.0, 4.0 / 6.0, 0.8], "unicode rouge1");
        let r2 = score(RougeType::Rouge2, "Пациент жалуется на боль в груди.", "Пациент жалуется на боль.", options);
        assert_close(r2, [1.0, 0.6, 0.75], "unicode rouge2");
    }
}
