//! BM25: the model-free ranker. It retrieves passages for the IR control case and is the
//! ranker NRP falls back on when the user brings no run file.
//!
//! Conventions (each one is a choice other tools make differently; the report says which):
//! - **Score** (Lucene >= 8, "Lucene (accurate)" in Kamphuis et al., ECIR 2020):
//!   `score(q, d) = Σ_{t in q} idf(t) · tf / (tf + k1 · (1 - b + b · |d| / avgdl))`.
//!   The textbook form multiplies each term by `(k1 + 1)`; that constant changes no ranking,
//!   and leaving it out makes our numbers equal to Lucene's and to `bm25s` (method "lucene").
//!   Lucene stores document lengths in a lossy one-byte form, so its scores can differ from
//!   ours in the third digit; we use exact lengths.
//! - **idf** (Lucene): `ln(1 + (N - df + 0.5) / (df + 0.5))`, never negative, unlike the
//!   Robertson–Spärck Jones idf of `rank_bm25`'s BM25Okapi, which goes negative for terms in
//!   more than half of the documents.
//! - **Query terms** count once per occurrence (a term written twice in the query adds its
//!   contribution twice), as a Lucene query of term clauses does.
//! - **Parameters**: default k1 = 0.9, b = 0.4 (Anserini/Pyserini's defaults, the usual
//!   baseline in IR papers); `Bm25Params::robertson()` gives k1 = 1.2, b = 0.75 (Robertson's
//!   recommendation and Lucene's own default). Both are plain fields, so any value works.
//! - **Tokenizer**: see [`Tokenizer`]: Unicode-aware, lowercase, split on every character
//!   that is not alphanumeric, no stemming; English stopwords optional and off by default
//!   (the stop list contains "no" and "not", which carry meaning in medical text).

use serde::Serialize;
use std::collections::HashMap;

/// How text becomes terms.
///
/// Splits on every `char` for which `char::is_alphanumeric()` is false (so "β-blocker" gives
/// "β" and "blocker", "Sjögren's" gives "sjögren" and "s"), then lowercases each piece with
/// Unicode's full lowercase mapping. Text is not Unicode-normalised: a letter written as base
/// + combining accent (NFD) splits at the accent, so give NFC text (what editors write).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tokenizer {
    /// Drop Lucene's English stop words ([`ENGLISH_STOPWORDS`]). Off by default.
    pub remove_stopwords: bool,
}

/// Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET` (33 words), sorted for binary search.
pub const ENGLISH_STOPWORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
];

impl Tokenizer {
    /// The terms of `text`, in order, duplicates kept.
    pub fn tokenize(&self, text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|piece| !piece.is_empty())
            .map(|piece| piece.to_lowercase())
            .filter(|term| !(self.remove_stopwords && ENGLISH_STOPWORDS.binary_search(&term.as_str()).is_ok()))
            .collect()
    }
}

/// BM25's free parameters and the tokenizer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f64,
    /// Length normalisation (0 = none, 1 = full).
    pub b: f64,
    pub tokenizer: Tokenizer,
}

impl Default for Bm25Params {
    /// Anserini's defaults, k1 = 0.9, b = 0.4.
    fn default() -> Self {
        Bm25Params::anserini()
    }
}

impl Bm25Params {
    /// k1 = 0.9, b = 0.4 (Anserini / Pyserini defaults).
    pub fn anserini() -> Self {
        Bm25Params { k1: 0.9, b: 0.4, tokenizer: Tokenizer::default() }
    }
    /// k1 = 1.2, b = 0.75 (Robertson et al.; Lucene's `BM25Similarity` default).
    pub fn robertson() -> Self {
        Bm25Params { k1: 1.2, b: 0.75, tokenizer: Tokenizer::default() }
    }
    /// One line for a report's conventions.
    pub fn describe(&self) -> String {
        format!(
            "BM25 (Lucene variant: idf = ln(1 + (N - df + 0.5)/(df + 0.5)), no (k1+1) factor), \
             k1 = {}, b = {}, tokenizer: lowercase, split on non-alphanumeric, no stemming, \
             stopwords {}",
            self.k1,
            self.b,
            if self.tokenizer.remove_stopwords { "removed (Lucene English list)" } else { "kept" }
        )
    }
}

/// One retrieved document: its position in the collection and its score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Hit {
    pub index: usize,
    pub score: f64,
}

/// An inverted index over a fixed collection. Scoring a query touches only the postings of
/// its terms, so it costs O(matching postings), not O(documents × query terms).
#[derive(Debug, Clone)]
pub struct Bm25Index {
    params: Bm25Params,
    ids: Vec<String>,
    /// Document length in terms.
    lengths: Vec<u32>,
    avg_length: f64,
    /// term -> postings (document index, term frequency), document indices ascending.
    postings: HashMap<String, Vec<(u32, u32)>>,
}

impl Bm25Index {
    /// Index `docs` as (id, text). Ids are not required to be unique; results refer to
    /// documents by position, and [`Bm25Index::id`] gives the id back.
    pub fn new(docs: &[(&str, &str)], params: Bm25Params) -> Self {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(docs.len());
        let mut ids = Vec::with_capacity(docs.len());
        for (index, (id, text)) in docs.iter().enumerate() {
            let terms = params.tokenizer.tokenize(text);
            lengths.push(terms.len() as u32);
            ids.push(id.to_string());
            for (term, tf) in term_counts(terms) {
                postings.entry(term).or_default().push((index as u32, tf));
            }
        }
        let total: u64 = lengths.iter().map(|&l| l as u64).sum();
        let avg_length = if docs.is_empty() { 0.0 } else { total as f64 / docs.len() as f64 };
        Bm25Index { params, ids, lengths, avg_length, postings }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    pub fn id(&self, index: usize) -> &str {
        &self.ids[index]
    }
    pub fn params(&self) -> &Bm25Params {
        &self.params
    }
    pub fn avg_length(&self) -> f64 {
        self.avg_length
    }

    /// Number of documents containing `term` (already tokenized form).
    pub fn document_frequency(&self, term: &str) -> usize {
        self.postings.get(term).map_or(0, Vec::len)
    }

    /// Lucene's idf, from the collection's statistics.
    pub fn idf(&self, term: &str) -> f64 {
        let n = self.ids.len() as f64;
        let df = self.document_frequency(term) as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// The saturated term-frequency part for a text of `length` terms.
    fn tf_part(&self, tf: u32, length: u32) -> f64 {
        // A collection without a single term has no average length to normalise by:
        // length normalisation is then switched off (ratio 1).
        let ratio = if self.avg_length > 0.0 { length as f64 / self.avg_length } else { 1.0 };
        let tf = tf as f64;
        tf / (tf + self.params.k1 * (1.0 - self.params.b + self.params.b * ratio))
    }

    /// The BM25 score of `query` for every document, in collection order (0 where no query
    /// term occurs).
    pub fn score(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.ids.len()];
        for term in self.params.tokenizer.tokenize(query) {
            let Some(list) = self.postings.get(&term) else {
                continue;
            };
            let idf = self.idf(&term);
            for &(doc, tf) in list {
                scores[doc as usize] += idf * self.tf_part(tf, self.lengths[doc as usize]);
            }
        }
        scores
    }

    /// The documents that contain at least one query term, with their scores, in collection
    /// order (every other document scores 0). Costs O(matching postings), independent of the
    /// collection size, which matters when many queries meet a large collection.
    pub fn matching(&self, query: &str) -> Vec<Hit> {
        let mut scores: HashMap<u32, f64> = HashMap::new();
        for term in self.params.tokenizer.tokenize(query) {
            let Some(list) = self.postings.get(&term) else {
                continue;
            };
            let idf = self.idf(&term);
            for &(doc, tf) in list {
                *scores.entry(doc).or_insert(0.0) += idf * self.tf_part(tf, self.lengths[doc as usize]);
            }
        }
        let mut hits: Vec<Hit> = scores.into_iter().map(|(doc, score)| Hit { index: doc as usize, score }).collect();
        hits.sort_by_key(|h| h.index);
        hits
    }

    /// The `k` best documents for `query`, best first. Only documents that contain at least
    /// one query term are returned (a search engine's behaviour), so there may be fewer
    /// than `k`. Equal scores keep collection order, so the result is deterministic.
    pub fn top_k(&self, query: &str, k: usize) -> Vec<Hit> {
        let mut hits = self.matching(query);
        // Stable sort: ties stay in collection order.
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(k);
        hits
    }

    /// Score a text that is *not* in the collection (a generated answer) for `query`, as if
    /// it were one more document. The collection statistics (N, df, avgdl) come from the
    /// indexed documents only: the answer's score is then comparable with the documents'
    /// scores from [`Bm25Index::score`], it does not change them, and it does not depend on
    /// which other answers are scored (ten answers of one system would otherwise raise the
    /// df of their own words and lower each other's scores).
    pub fn score_external(&self, query: &str, text: &str) -> f64 {
        let counts = term_counts(self.params.tokenizer.tokenize(text));
        let length: u32 = counts.values().sum();
        let mut score = 0.0;
        for term in self.params.tokenizer.tokenize(query) {
            if let Some(&tf) = counts.get(&term) {
                score += self.idf(&term) * self.tf_part(tf, length);
            }
        }
        score
    }
}

fn term_counts(terms: Vec<String>) -> HashMap<String, u32> {
    let mut counts: HashMap<String, u32> = HashMap::new();
    for term in terms {
        *counts.entry(term).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn stopword_list_is_sorted_for_binary_search() {
        assert!(ENGLISH_STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn tokenizer_is_unicode_aware_and_keeps_stopwords_by_default() {
        let t = Tokenizer::default();
        assert_eq!(t.tokenize("Sjögren's: β-blocker, NOT 2.5mg!"), ["sjögren", "s", "β", "blocker", "not", "2", "5mg"]);
        let t = Tokenizer { remove_stopwords: true };
        assert_eq!(t.tokenize("The pain is not in the ÉPAULE"), ["pain", "épaule"]);
        assert!(t.tokenize(" -- ").is_empty());
    }

    /// Three documents, N = 3, lengths 3, 5, 4, avgdl = 4; query "aspirin fever",
    /// k1 = 1.2, b = 0.75. Both terms have df = 2, so
    /// idf = ln(1 + (3 - 2 + 0.5)/(2 + 0.5)) = ln 1.6 = 0.47000362924573563.
    /// d1 (tf 1 + 1, |d| = 3): norm = 1.2·(0.25 + 0.75·3/4) = 0.975,
    ///    score = 2 · ln1.6 · 1/(1 + 0.975) = 0.4759530422741626
    /// d2 (fever tf 1, |d| = 5): norm = 1.2·(0.25 + 0.75·5/4) = 1.425,
    ///    score = ln1.6 · 1/2.425 = 0.19381592958587038
    /// d3 (aspirin tf 2, |d| = 4): norm = 1.2, score = ln1.6 · 2/3.2 = 0.29375226827858475
    /// (the same numbers from bm25s 0.3.16, method="lucene": [0.47595304, 0.19381593,
    /// 0.29375228] in float32).
    fn hand_example() -> Bm25Index {
        let docs = [
            ("d1", "Aspirin reduces fever"),
            ("d2", "fever and cough in children"),
            ("d3", "aspirin, ASPIRIN for pain"),
        ];
        Bm25Index::new(&docs, Bm25Params::robertson())
    }

    #[test]
    fn scores_match_the_hand_calculation() {
        let index = hand_example();
        assert_relative_eq!(index.idf("aspirin"), 0.47000362924573563, max_relative = 1e-14);
        let scores = index.score("aspirin fever");
        let expected = [0.4759530422741626, 0.19381592958587038, 0.29375226827858475];
        for (got, want) in scores.iter().zip(expected) {
            assert_relative_eq!(*got, want, max_relative = 1e-12);
        }
        // A query term seen twice counts twice.
        assert_relative_eq!(index.score("fever fever")[1], 2.0 * expected[1], max_relative = 1e-12);
        // Unknown terms add nothing.
        assert_eq!(index.score("zebra"), vec![0.0; 3]);
        // The sparse form gives the same numbers for the matching documents only.
        let hits = index.matching("cough fever");
        assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [0, 1]);
        let dense = index.score("cough fever");
        assert!(hits.iter().all(|h| h.score == dense[h.index]));
    }

    #[test]
    fn top_k_orders_by_score_and_breaks_ties_by_collection_order() {
        let index = hand_example();
        let hits = index.top_k("aspirin fever", 2);
        assert_eq!(hits.iter().map(|h| index.id(h.index)).collect::<Vec<_>>(), ["d1", "d3"]);
        // Only matching documents come back.
        assert_eq!(index.top_k("cough", 10).len(), 1);
        // Identical documents tie: collection order decides.
        let docs = [("x", "a b"), ("y", "c"), ("z", "a b"), ("w", "a b")];
        let index = Bm25Index::new(&docs, Bm25Params::default());
        let order: Vec<&str> = index.top_k("a", 10).iter().map(|h| index.id(h.index)).collect();
        assert_eq!(order, ["x", "z", "w"]);
    }

    #[test]
    fn an_external_text_scores_like_an_identical_document_without_changing_statistics() {
        let index = hand_example();
        // Same terms and length as d1, so the same score; df and N stay those of the 3 docs.
        let answer = index.score_external("aspirin fever", "aspirin lowers fever");
        assert_relative_eq!(answer, 0.4759530422741626, max_relative = 1e-12);
        assert_eq!(index.document_frequency("aspirin"), 2);
        // A term absent from the collection has df = 0: idf = ln(1 + 3.5/0.5) = ln 8.
        // Answer "zebra" (|a| = 1): norm = 1.2·(0.25 + 0.75/4) = 0.525 -> ln 8 / 1.525.
        let unseen = index.score_external("zebra", "zebra");
        assert_relative_eq!(unseen, 8f64.ln() / 1.525, max_relative = 1e-12);
        assert_eq!(index.score_external("aspirin", ""), 0.0);
    }

    /// Reference: bm25s 0.3.16, `bm25s.BM25(method="lucene", k1=.., b=..)`, indexed with the
    /// same token lists, `get_scores(query_tokens)` (float32, hence the tolerance).
    /// rank_bm25's BM25Okapi is not used: its idf is ln((N - df + 0.5)/(df + 0.5)) with an
    /// epsilon floor, a different formula from Lucene's.
    #[test]
    fn scores_match_bm25s_lucene_on_a_small_corpus() {
        let corpus = [
            "Metformin is the first line drug for type 2 diabetes mellitus",
            "Insulin therapy in type 1 diabetes requires careful glucose monitoring",
            "Beta blockers reduce mortality after myocardial infarction",
            "Aspirin is given after myocardial infarction to prevent thrombosis",
            "Hypoglycaemia is a side effect of insulin and sulfonylureas in diabetes",
            "Statins lower cholesterol and reduce cardiovascular events",
            "Sjögren syndrome causes dry eyes and dry mouth",
            "diabetes diabetes diabetes glucose",
        ];
        let docs: Vec<(String, &str)> = corpus.iter().enumerate().map(|(i, t)| (format!("d{i}"), *t)).collect();
        let docs: Vec<(&str, &str)> = docs.iter().map(|(i, t)| (i.as_str(), *t)).collect();
        let cases: [(Bm25Params, &str, [f64; 8]); 4] = [
            (
                Bm25Params::anserini(),
                "insulin diabetes glucose",
                [0.3443635106086731, 1.6524170637130737, 0.0, 0.0, 0.9807462096214294, 0.0, 0.0, 1.3084385395050049],
            ),
            (
                Bm25Params::anserini(),
                "myocardial infarction aspirin",
                [0.0, 0.0, 1.3916420936584473, 2.259434700012207, 0.0, 0.0, 0.0, 0.0],
            ),
            (
                Bm25Params::robertson(),
                "insulin diabetes glucose",
                [0.2792595326900482, 1.3707479238510132, 0.0, 0.0, 0.795330286026001, 0.0, 0.0, 1.2980014085769653],
            ),
            (Bm25Params::robertson(), "dry eyes", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.9637651443481445, 0.0]),
        ];
        for (params, query, expected) in cases {
            let index = Bm25Index::new(&docs, params);
            for (got, want) in index.score(query).iter().zip(expected) {
                assert_relative_eq!(*got, want, max_relative = 1e-6);
            }
        }
    }
}
