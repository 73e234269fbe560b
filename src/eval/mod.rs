//! Evaluation methods: control cases, ranking over scoring (proxy tasks), NRP, the BM25
//! ranker, reference-based metrics, rubric grading and rubric drafting (the text rules and
//! the coverage figures). Each method takes typed inputs from
//! `data` and returns a serialisable report; `stats` does the statistics.

pub mod bm25;
pub mod controls;
pub mod draft;
pub mod metrics;
pub mod nrp;
pub mod proxy;
pub mod rubric;
pub mod rubric_agreement;
pub mod statements;
