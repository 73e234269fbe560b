//! Drafting rubrics from the user's own evidence (`medrank rubric-draft`), for a clinician
//! to review and then grade with: **extractive** drafting. Every criterion is a statement
//! cut from the evidence's own text (`eval::draft::text`: a sentence, a clause or a list
//! item with its lead-in, whitespace collapsed); no generative model runs, so nothing is
//! paraphrased, merged or invented. Models only choose: per prompt,
//!
//! 1. **retrieval**: BM25 (`eval::bm25`) over the evidence's passages takes the
//!    `candidates` best; with a dense ranker or a cross-encoder (`model::rankers`, NRP's
//!    rankers) each scores them too, and the passages are ordered by reciprocal rank
//!    fusion of BM25 and the rankers (`eval::nrp::fusion`, k = 60); the first `passages`
//!    are kept;
//! 2. **statements** of those passages are ranked the same way: BM25 (the statement scored
//!    against the collection, `Bm25Index::score_external`) and each ranker on (prompt,
//!    statement), fused with the rank of the statement's passage;
//! 3. **near-duplicates** are dropped in that order, keeping the first: with an NLI model,
//!    a statement that entails a kept one and is entailed by it; else with a dense ranker,
//!    cosine of their embeddings at or above `duplicate_cosine`; else one whose words are
//!    all among a kept one's (`eval::draft::lexical_duplicate`). The first `criteria`
//!    statements left are the criteria, each with `points` and `tags`;
//! 4. with an NLI model, each criterion the conversation **contradicts** (premise: the
//!    conversation; hypothesis: the criterion) is flagged, for the reviewer;
//! 5. with an NLI model and experts' key statements (K-QA's must-have and nice-to-have),
//!    the draft's **recall** and **precision** against them (`eval::draft::coverage`).
//!
//! The models are given as [`DraftModels`]: small traits with boxed futures, so the same
//! job runs on any encoder backend and a test can inject an entailment rule.

use super::kept::Progress;
use super::spec::{defaults_of, reply, JobRequest, JobSpec, View};
use super::{NamedText, Outcome};
use crate::data::draft_prompts::{parse_draft_prompts, DraftPrompt};
use crate::data::evidence::{read_evidence, EvidenceDocument, EvidenceFormat};
use crate::data::graded::{write_rubric_jsonl, CriterionSource, RubricCriterion, RubricResponse};
use crate::eval::bm25::{Bm25Index, Bm25Params};
use crate::eval::draft::coverage::{coverage, prompt_coverage, Coverage};
use crate::eval::draft::lexical_duplicate;
use crate::eval::draft::text::{char_offset, passages, statements, LeftOut, Span};
use crate::eval::nrp::fusion::{fuse_among, Method};
use crate::model::grade::{conversation_text, encode_pair, head_logits, NliJudgement, NliLabels};
use crate::model::{Encoder, TextModel};
use crate::report::{fmt_num, fmt_stat, Fingerprint, Provenance, Table};
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::pin::Pin;

/// Criteria drafted per prompt, by default.
pub const DEFAULT_CRITERIA: usize = 8;
/// Passages kept per prompt after retrieval.
pub const DEFAULT_PASSAGES: usize = 5;
/// Passages BM25 retrieves per prompt for the rankers to order.
pub const DEFAULT_CANDIDATES: usize = 20;
/// Words a passage holds at most.
pub const DEFAULT_PASSAGE_WORDS: usize = 150;
/// Words a statement needs (shorter ones, "Fever", are no criterion on their own).
pub const DEFAULT_MIN_WORDS: usize = 4;
/// Points of a drafted criterion.
pub const DEFAULT_POINTS: f64 = 5.0;
/// Tags of a drafted criterion: it checks that a response covers a fact of the evidence.
pub const DEFAULT_TAGS: [&str; 1] = ["axis:completeness"];
/// Cosine at or above which two statements are near-duplicates (with a dense ranker).
pub const DEFAULT_DUPLICATE_COSINE: f64 = 0.9;
/// The `system` of a drafted line for a prompt that came without responses.
pub const DRAFT_SYSTEM: &str = "draft";

/// The most criteria per prompt.
pub const MAX_CRITERIA: usize = 100;
/// The most passages kept per prompt.
pub const MAX_PASSAGES: usize = 100;
/// The most passages retrieved per prompt.
pub const MAX_CANDIDATES: usize = 1000;
/// The most words a passage may hold (the rankers' window bound).
pub const MAX_PASSAGE_WORDS: usize = crate::bounds::MAX_WINDOW_WORDS;
/// The most words a statement may be required to have.
pub const MAX_MIN_WORDS: usize = 100;
/// The most points a drafted criterion may be given.
pub const MAX_DRAFT_POINTS: f64 = 100.0;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct DraftOptions {
    /// Criteria per prompt (1 to [`MAX_CRITERIA`]).
    pub criteria: usize,
    /// Passages kept per prompt (1 to [`MAX_PASSAGES`]).
    pub passages: usize,
    /// Passages BM25 retrieves for the rankers to order (1 to [`MAX_CANDIDATES`]; fewer
    /// than `passages` counts as `passages`).
    pub candidates: usize,
    /// Words per passage at most (10 to [`MAX_PASSAGE_WORDS`]).
    pub passage_words: usize,
    /// Words a statement needs (1 to [`MAX_MIN_WORDS`]).
    pub min_words: usize,
    /// Points of each criterion (above 0, at most [`MAX_DRAFT_POINTS`]).
    pub points: f64,
    /// Tags of each criterion (distinct, not empty).
    pub tags: Vec<String>,
    /// Cosine of near-duplicates with a dense ranker (0 to 1).
    pub duplicate_cosine: f64,
    /// Sequences per forward pass (1 to `bounds::MAX_BATCH`).
    pub batch_size: usize,
}

impl Default for DraftOptions {
    fn default() -> Self {
        DraftOptions {
            criteria: DEFAULT_CRITERIA,
            passages: DEFAULT_PASSAGES,
            candidates: DEFAULT_CANDIDATES,
            passage_words: DEFAULT_PASSAGE_WORDS,
            min_words: DEFAULT_MIN_WORDS,
            points: DEFAULT_POINTS,
            tags: DEFAULT_TAGS.iter().map(|t| t.to_string()).collect(),
            duplicate_cosine: DEFAULT_DUPLICATE_COSINE,
            batch_size: crate::model::embed::DEFAULT_BATCH,
        }
    }
}

/// `--points`: above 0, at most [`MAX_DRAFT_POINTS`] (the CLI's parser and the job's check).
pub fn check_points(points: f64) -> std::result::Result<f64, String> {
    if points > 0.0 && points <= MAX_DRAFT_POINTS {
        Ok(points)
    } else {
        Err(format!("--points {points}: expected a number above 0 and at most {MAX_DRAFT_POINTS}"))
    }
}

/// `--duplicate-cosine`: from 0 to 1.
pub fn check_duplicate_cosine(c: f64) -> std::result::Result<f64, String> {
    if (0.0..=1.0).contains(&c) {
        Ok(c)
    } else {
        Err(format!("--duplicate-cosine {c}: expected a number from 0 to 1"))
    }
}

/// A drafted criterion's tag (`--tag`): not empty.
pub fn check_tag(tag: &str) -> std::result::Result<String, String> {
    if tag.trim().is_empty() {
        Err("--tag: a tag cannot be empty".into())
    } else {
        Ok(tag.to_owned())
    }
}

impl DraftOptions {
    /// Every option in its range (the CLI's parsers check the same at parse time).
    pub fn check(&self) -> Result<()> {
        use crate::bounds::check_count;
        check_count("--criteria", self.criteria, 1, MAX_CRITERIA).map_err(Error::invalid)?;
        check_count("--passages", self.passages, 1, MAX_PASSAGES).map_err(Error::invalid)?;
        check_count("--candidates", self.candidates, 1, MAX_CANDIDATES).map_err(Error::invalid)?;
        check_count("--passage-words", self.passage_words, 10, MAX_PASSAGE_WORDS).map_err(Error::invalid)?;
        check_count("--min-words", self.min_words, 1, MAX_MIN_WORDS).map_err(Error::invalid)?;
        check_count("--batch-size", self.batch_size, 1, crate::bounds::MAX_BATCH).map_err(Error::invalid)?;
        check_points(self.points).map_err(Error::invalid)?;
        check_duplicate_cosine(self.duplicate_cosine).map_err(Error::invalid)?;
        for (i, tag) in self.tags.iter().enumerate() {
            check_tag(tag).map_err(Error::invalid)?;
            if self.tags[..i].contains(tag) {
                return Err(Error::invalid(format!("--tag {tag}: given twice")));
            }
        }
        Ok(())
    }
}

/// An evidence file and, when not read from its name, its format (`corpus`, `text`,
/// `markdown`: [`EvidenceFormat::parse`]).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct EvidenceFile {
    pub file: NamedText,
    #[serde(default)]
    pub format: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct DraftRequest {
    /// Prompts (FORMATS.md §12).
    pub prompts: NamedText,
    /// Evidence files (FORMATS.md §13).
    pub evidence: Vec<EvidenceFile>,
    #[serde(default)]
    pub options: DraftOptions,
}

/// A boxed future (the models' answers; dyn-compatible, not `Send`, as in the page).
pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + 'a>>;

/// Texts' scores from a ranker, and how many texts it cut to its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub scores: Vec<f64>,
    pub cut: usize,
}

/// A model that scores texts' relevance to a query, higher = more relevant.
pub trait RelevanceModel {
    /// "minilm: dense bi-encoder (cosine)", for the report.
    fn describe(&self) -> String;
    fn scores<'a>(&'a self, query: &'a str, texts: &'a [&'a str]) -> Boxed<'a, Scored>;
}

/// A model that embeds texts (for the cosine of near-duplicates).
pub trait SentenceEncoder {
    fn describe(&self) -> String;
    fn embed<'a>(&'a self, texts: &'a [&'a str]) -> Boxed<'a, Vec<Vec<f32>>>;
}

/// One NLI question: does `premise` entail (or contradict) `hypothesis`?
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NliPair<'a> {
    pub premise: &'a str,
    pub hypothesis: &'a str,
}

/// An NLI answer, and the premise's tokens cut to the model's limit (the hypothesis is
/// never cut).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NliVerdict {
    pub judgement: NliJudgement,
    pub premise_tokens_cut: usize,
}

/// A model that judges entailment.
pub trait NliModel {
    /// Its name, as reports give it (the model folder or Hub id).
    fn name(&self) -> String;
    fn judge<'a>(&'a self, pairs: &'a [NliPair<'a>]) -> Boxed<'a, Vec<NliVerdict>>;
}

/// A model folder's model on an encoder backend.
pub struct OnEncoder<'a, E> {
    pub model: &'a TextModel,
    pub encoder: &'a E,
    pub batch_size: usize,
}

/// NRP's dense bi-encoder (`model::rankers::dense_scores`); its embeddings also tell
/// near-duplicates apart.
pub struct DenseRanker<'a, E>(pub OnEncoder<'a, E>);

/// NRP's cross-encoder (`model::rankers::cross_encoder_scores`): a one-logit head (or two:
/// P(relevant)) over `query [SEP] text`.
pub struct CrossEncoderRanker<'a, E>(OnEncoder<'a, E>);

impl<'a, E> CrossEncoderRanker<'a, E> {
    /// Refuses a model without a classification head.
    pub fn new(on: OnEncoder<'a, E>) -> Result<Self> {
        if on.model.encoder.model.head.is_none() {
            return Err(Error::model(format!(
                "{}: a cross-encoder needs a classification head (one logit); this model has none",
                on.model.name
            )));
        }
        Ok(CrossEncoderRanker(on))
    }
}

fn rank_query<'a>(query: &'a str, texts: &'a [&'a str], batch_size: usize) -> crate::model::rankers::RankQuery<'a> {
    crate::model::rankers::RankQuery { query, docs: texts, window: None, batch_size }
}

impl<E: Encoder> RelevanceModel for DenseRanker<'_, E> {
    fn describe(&self) -> String {
        format!("{}: dense bi-encoder (cosine)", self.0.model.name)
    }
    fn scores<'a>(&'a self, query: &'a str, texts: &'a [&'a str]) -> Boxed<'a, Scored> {
        Box::pin(async move {
            let m = self.0.model;
            let q = rank_query(query, texts, self.0.batch_size);
            let s = crate::model::rankers::dense_scores(self.0.encoder, &m.tokenizer, &m.pooling, &q).await?;
            Ok(Scored { scores: s.scores, cut: s.cut_inputs })
        })
    }
}

impl<E: Encoder> SentenceEncoder for DenseRanker<'_, E> {
    fn describe(&self) -> String {
        format!("{}: cosine of pooled embeddings", self.0.model.name)
    }
    fn embed<'a>(&'a self, texts: &'a [&'a str]) -> Boxed<'a, Vec<Vec<f32>>> {
        Box::pin(async move {
            let m = self.0.model;
            let (vectors, _) =
                crate::model::embed_texts(self.0.encoder, &m.tokenizer, &m.pooling, texts, self.0.batch_size).await?;
            Ok(vectors)
        })
    }
}

impl<E: Encoder> RelevanceModel for CrossEncoderRanker<'_, E> {
    fn describe(&self) -> String {
        format!("{}: cross-encoder (logit)", self.0.model.name)
    }
    fn scores<'a>(&'a self, query: &'a str, texts: &'a [&'a str]) -> Boxed<'a, Scored> {
        Box::pin(async move {
            let q = rank_query(query, texts, self.0.batch_size);
            let s = crate::model::rankers::cross_encoder_scores(self.0.encoder, &self.0.model.tokenizer, &q).await?;
            Ok(Scored { scores: s.scores, cut: s.cut_inputs })
        })
    }
}

/// An NLI model folder (labels naming `entailment` and `contradiction`), as
/// `medrank statements` reads it: the label with the largest logit.
pub struct NliHead<'a, E> {
    on: OnEncoder<'a, E>,
    labels: NliLabels,
}

impl<'a, E> NliHead<'a, E> {
    /// Refuses a model without a classification head or without NLI labels.
    pub fn new(on: OnEncoder<'a, E>) -> Result<Self> {
        let loaded = &on.model.encoder.model;
        if loaded.head.is_none() || loaded.config.head != crate::model::HeadKind::SequenceClassification {
            return Err(Error::invalid(format!(
                "{} has no sequence-classification head: --nli needs an NLI model",
                on.model.name
            )));
        }
        let labels = NliLabels::of_labels(&loaded.config.labels)?;
        Ok(NliHead { on, labels })
    }
}

impl<E: Encoder> NliModel for NliHead<'_, E> {
    fn name(&self) -> String {
        self.on.model.name.clone()
    }
    fn judge<'a>(&'a self, pairs: &'a [NliPair<'a>]) -> Boxed<'a, Vec<NliVerdict>> {
        Box::pin(async move {
            let tokenizer = &self.on.model.tokenizer;
            // The premise in the response's place: it loses its end only when it does not
            // fit beside the hypothesis, which is never cut.
            let inputs = pairs
                .iter()
                .map(|p| encode_pair(tokenizer, "", p.premise, p.hypothesis))
                .collect::<Result<Vec<_>>>()?;
            let encoded: Vec<&crate::model::Encoded> = inputs.iter().map(|i| &i.encoded).collect();
            let logits = head_logits(self.on.encoder, tokenizer, &encoded, self.on.batch_size).await?;
            Ok(logits
                .iter()
                .zip(&inputs)
                .map(|(l, i)| NliVerdict { judgement: self.labels.judge(l), premise_tokens_cut: i.response_cut })
                .collect())
        })
    }
}

/// The models a draft uses, each optional; none: BM25 and the word rule alone.
#[derive(Default)]
pub struct DraftModels<'a> {
    /// Dense rankers and cross-encoders, fused with BM25.
    pub rankers: Vec<&'a dyn RelevanceModel>,
    /// Embeddings for near-duplicates (a dense ranker's).
    pub encoder: Option<&'a dyn SentenceEncoder>,
    /// Near-duplicates by entailment both ways, contradiction flags, recall and precision.
    pub nli: Option<&'a dyn NliModel>,
    /// The models' files, for the report's provenance.
    pub fingerprints: Vec<Fingerprint>,
}

/// One retrieved passage of a prompt, as the report gives it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievedPassage {
    /// 1-based, after fusion.
    pub rank: usize,
    pub document: String,
    /// The passage's number in its document (1-based).
    pub passage: usize,
    /// Character offsets in the document's text.
    pub start: usize,
    pub end: usize,
    pub bm25: f64,
    /// The reciprocal-rank-fusion score with rankers; BM25's without.
    pub score: f64,
}

/// One drafted criterion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DraftedCriterion {
    /// 1-based rank among the prompt's criteria.
    pub rank: usize,
    pub criterion: String,
    pub document: String,
    /// Character offsets of the statement in the document's text (from its lead-in's
    /// start, for a list item with one).
    pub start: usize,
    pub end: usize,
    /// The rank of the passage it was cut from.
    pub passage_rank: usize,
    /// The fused score that ranked it among the prompt's statements.
    pub score: f64,
    /// Whether the conversation contradicts it (with an NLI model).
    pub contradicted: Option<bool>,
    pub p_contradiction: Option<f64>,
}

/// A statement left out as a near-duplicate of a criterion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DroppedDuplicate {
    pub prompt: String,
    pub statement: String,
    pub document: String,
    pub start: usize,
    pub end: usize,
    /// The rank of the criterion it duplicates.
    pub duplicate_of: usize,
    /// Why: "entailment both ways", "cosine 0.93", "no word of its own".
    pub rule: String,
}

/// One prompt's draft.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DraftedPrompt {
    pub id: String,
    pub line: usize,
    /// What retrieval searched with.
    pub query: String,
    pub passages: Vec<RetrievedPassage>,
    /// Statements cut from the passages kept (criteria drawn from them).
    pub statements: usize,
    /// What the cutting left out (questions, statements under the word minimum).
    pub left_out: LeftOut,
    pub criteria: Vec<DraftedCriterion>,
}

/// One (criterion, expert statement) NLI judgement behind recall and precision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageJudgement {
    pub prompt: String,
    /// The criterion's rank.
    pub criterion: usize,
    pub statement: String,
    pub must_have: bool,
    pub p_entailment: f64,
    pub entailed: bool,
}

/// Recall and precision against the experts' statements, with the NLI model that judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageReport {
    pub nli_model: String,
    #[serde(flatten)]
    pub figures: Coverage,
    pub judgements: Vec<CoverageJudgement>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DraftReport {
    pub provenance: Provenance,
    /// What drafting is here, in a sentence: extractive.
    pub drafting: String,
    pub options: DraftOptions,
    /// The rankers fused with BM25, the near-duplicate rule, the NLI model (or none).
    pub rankers: Vec<String>,
    pub duplicates_rule: String,
    pub nli_model: Option<String>,
    pub documents: usize,
    pub passages: usize,
    pub prompts: Vec<DraftedPrompt>,
    pub duplicates: Vec<DroppedDuplicate>,
    pub coverage: Option<CoverageReport>,
    pub warnings: Vec<Warning>,
}

/// The report and tables, and the drafted rubric (FORMATS.md §7) to review and grade.
#[derive(Debug, Clone)]
pub struct Drafted {
    pub outcome: Outcome<DraftReport>,
    pub rubric_jsonl: String,
    /// The evidence as read (the page shows each criterion in its passage).
    pub documents: Vec<EvidenceDocument>,
}

/// The sentence every draft report carries.
pub const EXTRACTIVE: &str = "extractive: every criterion is a statement cut from the evidence's own text (a \
    sentence, a clause, or a list item after its lead-in; whitespace collapsed), never paraphrased; no generative \
    model runs. Models only retrieve and rank passages and statements, drop near-duplicates and flag criteria the \
    conversation contradicts; a clinician reviews the draft before it grades anything";

/// A statement drawn for a prompt, before ranking.
struct Candidate {
    text: String,
    document: usize,
    span: Span,
    passage_rank: usize,
}

/// Counts behind the run's warnings.
#[derive(Default)]
struct Cuts {
    passage_texts: usize,
    statement_texts: usize,
    nli_premises: usize,
}

/// Drafts a rubric for every prompt of `req` from its evidence with `models`. `progress`
/// hears (prompts done, prompts) and cancels with `false`.
pub async fn draft_rubric(
    req: &DraftRequest,
    models: &DraftModels<'_>,
    progress: &mut dyn FnMut(usize, usize) -> bool,
) -> Result<Drafted> {
    let o = &req.options;
    o.check()?;
    let (prompts, mut warnings) = parse_draft_prompts(&req.prompts.name, &req.prompts.text)?;
    let mut files = Vec::new();
    for e in &req.evidence {
        let format = match &e.format {
            Some(f) => EvidenceFormat::parse(f)?,
            None => EvidenceFormat::of_file_name(&e.file.name)?,
        };
        files.push((e.file.name.as_str(), e.file.text.as_str(), format));
    }
    if files.is_empty() {
        return Err(Error::invalid("no evidence file: drafting cuts criteria from the evidence (--evidence)"));
    }
    let (documents, w) = read_evidence(&files)?;
    warnings.extend(w);

    // Passages, and the text each is retrieved by (its heading above it).
    let mut passage_list: Vec<(usize, usize, Span, Span)> = Vec::new(); // (document, number, span, block)
    let mut indexed: Vec<String> = Vec::new();
    let mut cut_sentences = 0;
    for (d, doc) in documents.iter().enumerate() {
        let (found, cut) = passages(doc, o.passage_words);
        cut_sentences += cut;
        for (n, p) in found.into_iter().enumerate() {
            let text = p.span.of(&doc.text);
            indexed.push(match &p.heading {
                Some(h) => format!("{h}\n{text}"),
                None => text.to_owned(),
            });
            passage_list.push((d, n + 1, p.span, p.block));
        }
    }
    if passage_list.is_empty() {
        return Err(Error::invalid("the evidence files hold no text to draft from"));
    }
    if cut_sentences > 0 {
        warnings.push(Warning::new(format!(
            "{cut_sentences} sentence(s) longer than --passage-words ({}) were cut between words into passages; \
             their statements are cut there too",
            o.passage_words
        )));
    }
    let ids: Vec<String> = passage_list.iter().map(|(d, n, _, _)| format!("{}#{n}", documents[*d].id)).collect();
    let index = Bm25Index::new(
        &ids.iter().zip(&indexed).map(|(i, t)| (i.as_str(), t.as_str())).collect::<Vec<_>>(),
        Bm25Params::default(),
    );

    let mut cuts = Cuts::default();
    let mut drafted = Vec::new();
    let mut duplicates = Vec::new();
    let mut coverage_rows = Vec::new();
    let mut judgements = Vec::new();
    let with_statements = prompts.iter().filter(|p| p.statements().next().is_some()).count();
    for (done, prompt) in prompts.iter().enumerate() {
        if !progress(done, prompts.len()) {
            return Err(Error::Cancelled);
        }
        let query = prompt.query();
        let retrieved = retrieve(&query, &index, &indexed, models, o, &mut cuts).await?;
        let mut candidates = Vec::new();
        let mut left_out = LeftOut::default();
        for (rank, &(p, _, _)) in retrieved.iter().enumerate() {
            let (d, _, span, block) = passage_list[p];
            let (found, lost) = statements(&documents[d].text, block, span, o.min_words);
            left_out.add(lost);
            candidates.extend(found.into_iter().map(|s| Candidate {
                text: s.text,
                document: d,
                span: s.span,
                passage_rank: rank + 1,
            }));
        }
        let order = rank_statements(&query, &candidates, &index, models, &mut cuts).await?;
        let (kept, dropped) = distinct(&order, &candidates, o, models, &mut cuts).await?;
        let mut criteria: Vec<DraftedCriterion> = kept
            .iter()
            .enumerate()
            .map(|(r, &(c, score))| {
                let cand = &candidates[c];
                let text = &documents[cand.document].text;
                DraftedCriterion {
                    rank: r + 1,
                    criterion: cand.text.clone(),
                    document: documents[cand.document].id.clone(),
                    start: char_offset(text, cand.span.start),
                    end: char_offset(text, cand.span.end),
                    passage_rank: cand.passage_rank,
                    score,
                    contradicted: None,
                    p_contradiction: None,
                }
            })
            .collect();
        for (c, of, rule) in dropped {
            let cand = &candidates[c];
            let text = &documents[cand.document].text;
            duplicates.push(DroppedDuplicate {
                prompt: prompt.id.clone(),
                statement: cand.text.clone(),
                document: documents[cand.document].id.clone(),
                start: char_offset(text, cand.span.start),
                end: char_offset(text, cand.span.end),
                duplicate_of: of + 1,
                rule,
            });
        }
        if let Some(nli) = models.nli {
            flag_contradictions(prompt, &mut criteria, nli, &mut cuts).await?;
            if prompt.statements().next().is_some() {
                let (row, js) = judge_coverage(prompt, &criteria, nli, &mut cuts).await?;
                coverage_rows.push(row);
                judgements.extend(js);
            }
        }
        drafted.push(DraftedPrompt {
            id: prompt.id.clone(),
            line: prompt.line,
            query,
            passages: retrieved
                .iter()
                .enumerate()
                .map(|(r, &(p, bm25, score))| {
                    let (d, n, span, _) = passage_list[p];
                    let text = &documents[d].text;
                    RetrievedPassage {
                        rank: r + 1,
                        document: documents[d].id.clone(),
                        passage: n,
                        start: char_offset(text, span.start),
                        end: char_offset(text, span.end),
                        bm25,
                        score,
                    }
                })
                .collect(),
            statements: candidates.len(),
            left_out,
            criteria,
        });
    }
    if !progress(prompts.len(), prompts.len()) {
        return Err(Error::Cancelled);
    }

    let empty: Vec<&str> = drafted.iter().filter(|p| p.criteria.is_empty()).map(|p| p.id.as_str()).collect();
    if empty.len() == drafted.len() {
        return Err(Error::in_file(
            &req.prompts.name,
            "no prompt got a criterion: no evidence passage shares a word with any prompt, or every statement was \
             left out (see --min-words); nothing to draft",
        ));
    }
    if !empty.is_empty() {
        warnings.push(Warning::at(
            crate::Location::file(&req.prompts.name),
            format!(
                "{} prompt(s) got no criterion (no evidence passage shares a word with them, or every statement was \
                 left out) and are not in the drafted file: {}",
                empty.len(),
                empty.join(", ")
            ),
        ));
    }
    if cuts.passage_texts + cuts.statement_texts > 0 {
        warnings.push(Warning::new(format!(
            "the rankers cut {} passage(s) and {} statement(s) longer than their model's limit (each scored by its \
             start); a lower --passage-words keeps passages whole",
            cuts.passage_texts, cuts.statement_texts
        )));
    }
    if cuts.nli_premises > 0 {
        warnings.push(Warning::new(format!(
            "{} NLI premise(s) (a conversation or a criterion) were longer than the NLI model's limit and lost their \
             end (the hypothesis is never cut)",
            cuts.nli_premises
        )));
    }
    let coverage = match models.nli {
        Some(nli) if !coverage_rows.is_empty() => {
            if coverage_rows.len() < prompts.len() {
                warnings.push(Warning::new(format!(
                    "recall and precision cover the {} of {} prompts that have expert statements (must_have, \
                     nice_to_have)",
                    coverage_rows.len(),
                    prompts.len()
                )));
            }
            Some(CoverageReport { nli_model: nli.name(), figures: coverage(coverage_rows), judgements })
        }
        _ => None,
    };
    if models.nli.is_none() && with_statements > 0 {
        warnings.push(Warning::new(format!(
            "{with_statements} prompt(s) have expert statements, but recall and precision need an NLI model (--nli): \
             not computed"
        )));
    }

    let rankers: Vec<String> = models.rankers.iter().map(|r| r.describe()).collect();
    let duplicates_rule = match (models.nli, models.encoder) {
        (Some(nli), _) => format!("{}: a statement that entails a kept one and is entailed by it", nli.name()),
        (None, Some(e)) => format!("{} at or above {}", e.describe(), o.duplicate_cosine),
        (None, None) => "no model: a statement whose words are all among a kept one's".to_owned(),
    };
    let mut provenance = Provenance::new(0)
        .convention("drafting", EXTRACTIVE)
        .convention(
            "passages",
            format!(
                "FORMATS.md §13: blocks between blank lines (Markdown: and headings; fenced code left out), a list \
                 after a block ending with `:` joined to it, at most {} words (cut between sentences, a longer \
                 sentence between words); a passage is retrieved by its heading and text",
                o.passage_words
            ),
        )
        .convention("retrieval", retrieval_rule(&rankers, o))
        .convention("statements", statements_rule(o.min_words))
        .convention(
            "statement ranking",
            if rankers.is_empty() {
                "reciprocal rank fusion (k = 60) of BM25 (the statement scored against the collection) and the rank of \
                 its passage"
                    .to_owned()
            } else {
                format!(
                    "reciprocal rank fusion (k = 60) of BM25, {} on (prompt, statement), and the rank of its passage",
                    rankers.join(", ")
                )
            },
        )
        .convention("near-duplicates", format!("dropped in rank order, keeping the first: {duplicates_rule}"))
        .convention(
            "criteria",
            format!(
                "the first {} statements left per prompt; points {} and tags [{}] each, for the reviewer to change",
                o.criteria,
                o.points,
                o.tags.join(", ")
            ),
        )
        .convention(
            "contradicted",
            match models.nli {
                Some(nli) => format!(
                    "{}: the conversation (`role: content` lines) as premise, the criterion as hypothesis; the label \
                     with the largest logit is contradiction",
                    nli.name()
                ),
                None => "not checked (no NLI model)".to_owned(),
            },
        );
    if coverage.is_some() {
        provenance = provenance.convention(
            "recall and precision",
            "NLI with the criterion as premise and the expert statement as hypothesis (the label with the largest logit \
             is entailment): recall = statements some criterion entails / statements; precision = criteria that \
             entail some statement / criteria; pooled over the prompts with statements",
        );
    }
    provenance.inputs.push(req.prompts.fingerprint());
    provenance.inputs.extend(req.evidence.iter().map(|e| e.file.fingerprint()));
    provenance.inputs.extend(models.fingerprints.iter().cloned());

    let rubric_jsonl = drafted_rubric(&prompts, &drafted, o);
    let report = DraftReport {
        provenance,
        drafting: EXTRACTIVE.to_owned(),
        options: o.clone(),
        rankers,
        duplicates_rule,
        nli_model: models.nli.map(|n| n.name()),
        documents: documents.len(),
        passages: passage_list.len(),
        prompts: drafted,
        duplicates,
        coverage,
        warnings,
    };
    let tables = draft_tables(&report);
    Ok(Drafted { outcome: Outcome { report, tables }, rubric_jsonl, documents })
}

fn retrieval_rule(rankers: &[String], o: &DraftOptions) -> String {
    let bm25 = Bm25Params::default().describe();
    if rankers.is_empty() {
        format!("{bm25}; the {} best passages", o.passages)
    } else {
        format!(
            "{bm25} takes the {} best passages; {} score them too; reciprocal rank fusion (k = 60) of all orders them \
             and the {} best are kept",
            o.candidates,
            rankers.join(", "),
            o.passages
        )
    }
}

fn statements_rule(min_words: usize) -> String {
    format!(
        "cut at list items and hard breaks, sentence ends (abbreviations, decimals and doses kept whole), `;` and \
         clause conjunctions; a list item after a lead-in without a full stop reads `lead-in item`; questions and \
         statements under {min_words} words left out, counted (FORMATS.md §13)"
    )
}

/// The passages kept for a prompt: (passage index, BM25 score, fused score), best first.
async fn retrieve(
    query: &str,
    index: &Bm25Index,
    indexed: &[String],
    models: &DraftModels<'_>,
    o: &DraftOptions,
    cuts: &mut Cuts,
) -> Result<Vec<(usize, f64, f64)>> {
    // Without a ranker BM25's order is final; with one, it orders BM25's candidates (at
    // least as many as are kept).
    let width = if models.rankers.is_empty() { o.passages } else { o.candidates.max(o.passages) };
    let hits = index.top_k(query, width);
    let bm25: Vec<f64> = hits.iter().map(|h| h.score).collect();
    let mut components = vec![bm25.iter().map(|&s| Some(s)).collect::<Vec<_>>()];
    let texts: Vec<&str> = hits.iter().map(|h| indexed[h.index].as_str()).collect();
    for ranker in &models.rankers {
        if texts.is_empty() {
            break;
        }
        let scored = ranker.scores(query, &texts).await?;
        cuts.passage_texts += scored.cut;
        components.push(scored.scores.into_iter().map(Some).collect());
    }
    let fused: Vec<f64> = if models.rankers.is_empty() {
        bm25.clone()
    } else {
        fuse_among(Method::Rrf, &components).into_iter().map(|s| s.unwrap_or(0.0)).collect()
    };
    let mut order: Vec<usize> = (0..hits.len()).collect();
    // Stable: ties keep BM25's order.
    order.sort_by(|&a, &b| fused[b].total_cmp(&fused[a]));
    order.truncate(o.passages);
    Ok(order.into_iter().map(|i| (hits[i].index, bm25[i], fused[i])).collect())
}

/// The candidates' order for a prompt: (candidate, fused score), best first.
async fn rank_statements(
    query: &str,
    candidates: &[Candidate],
    index: &Bm25Index,
    models: &DraftModels<'_>,
    cuts: &mut Cuts,
) -> Result<Vec<(usize, f64)>> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let texts: Vec<&str> = candidates.iter().map(|c| c.text.as_str()).collect();
    let mut components: Vec<Vec<Option<f64>>> =
        vec![texts.iter().map(|t| Some(index.score_external(query, t))).collect()];
    for ranker in &models.rankers {
        let scored = ranker.scores(query, &texts).await?;
        cuts.statement_texts += scored.cut;
        components.push(scored.scores.into_iter().map(Some).collect());
    }
    // The passage's standing: a better-ranked passage scores higher.
    components.push(candidates.iter().map(|c| Some(-(c.passage_rank as f64))).collect());
    let fused: Vec<f64> = fuse_among(Method::Rrf, &components).into_iter().map(|s| s.unwrap_or(0.0)).collect();
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    // Stable: ties keep the passages' order and the statements' order within them.
    order.sort_by(|&a, &b| fused[b].total_cmp(&fused[a]));
    Ok(order.into_iter().map(|c| (c, fused[c])).collect())
}

/// The first `criteria` candidates of `order` that duplicate no earlier kept one:
/// (kept as (candidate, score), dropped as (candidate, index of the kept one, rule)).
#[allow(clippy::type_complexity)]
async fn distinct(
    order: &[(usize, f64)],
    candidates: &[Candidate],
    o: &DraftOptions,
    models: &DraftModels<'_>,
    cuts: &mut Cuts,
) -> Result<(Vec<(usize, f64)>, Vec<(usize, usize, String)>)> {
    let mut kept: Vec<(usize, f64)> = Vec::new();
    let mut dropped = Vec::new();
    let embeddings = match (models.nli, models.encoder) {
        (None, Some(e)) if !order.is_empty() => {
            let texts: Vec<&str> = candidates.iter().map(|c| c.text.as_str()).collect();
            Some(e.embed(&texts).await?)
        }
        _ => None,
    };
    for &(c, score) in order {
        if kept.len() == o.criteria {
            break;
        }
        let text = candidates[c].text.as_str();
        let duplicate: Option<(usize, String)> = if let Some(nli) = models.nli {
            let pairs: Vec<NliPair> = kept
                .iter()
                .flat_map(|&(k, _)| {
                    let other = candidates[k].text.as_str();
                    [NliPair { premise: text, hypothesis: other }, NliPair { premise: other, hypothesis: text }]
                })
                .collect();
            let verdicts = if pairs.is_empty() { Vec::new() } else { nli.judge(&pairs).await? };
            cuts.nli_premises += verdicts.iter().filter(|v| v.premise_tokens_cut > 0).count();
            verdicts
                .chunks(2)
                .position(|both| both.iter().all(|v| v.judgement.entailed))
                .map(|k| (k, "entailment both ways".to_owned()))
        } else if let Some(vectors) = &embeddings {
            kept.iter().enumerate().find_map(|(k, &(other, _))| {
                let cos = crate::model::pooling::cosine(&vectors[c], &vectors[other]) as f64;
                (cos >= o.duplicate_cosine).then(|| (k, format!("cosine {}", fmt_num(cos, 4))))
            })
        } else {
            kept.iter()
                .position(|&(other, _)| lexical_duplicate(text, &candidates[other].text))
                .map(|k| (k, "no word of its own".to_owned()))
        };
        match duplicate {
            Some((k, rule)) => dropped.push((c, k, rule)),
            None => kept.push((c, score)),
        }
    }
    Ok((kept, dropped))
}

/// Flags the criteria the prompt's conversation contradicts.
async fn flag_contradictions(
    prompt: &DraftPrompt,
    criteria: &mut [DraftedCriterion],
    nli: &dyn NliModel,
    cuts: &mut Cuts,
) -> Result<()> {
    if criteria.is_empty() {
        return Ok(());
    }
    let conversation = conversation_text(Some(&prompt.prompt));
    let pairs: Vec<NliPair> =
        criteria.iter().map(|c| NliPair { premise: &conversation, hypothesis: &c.criterion }).collect();
    let verdicts = nli.judge(&pairs).await?;
    for (c, v) in criteria.iter_mut().zip(verdicts) {
        cuts.nli_premises += usize::from(v.premise_tokens_cut > 0);
        c.contradicted = Some(v.judgement.contradicted);
        c.p_contradiction = Some(v.judgement.p_contradiction);
    }
    Ok(())
}

/// Each criterion against each expert statement of the prompt: the prompt's figures and
/// the judgements.
async fn judge_coverage(
    prompt: &DraftPrompt,
    criteria: &[DraftedCriterion],
    nli: &dyn NliModel,
    cuts: &mut Cuts,
) -> Result<(crate::eval::draft::coverage::PromptCoverage, Vec<CoverageJudgement>)> {
    let statements: Vec<(&str, bool)> = prompt.statements().collect();
    let pairs: Vec<NliPair> = criteria
        .iter()
        .flat_map(|c| statements.iter().map(|&(s, _)| NliPair { premise: &c.criterion, hypothesis: s }))
        .collect();
    let verdicts = if pairs.is_empty() { Vec::new() } else { nli.judge(&pairs).await? };
    cuts.nli_premises += verdicts.iter().filter(|v| v.premise_tokens_cut > 0).count();
    let mut entails = Vec::new();
    let mut judgements = Vec::new();
    for (c, row) in criteria.iter().zip(verdicts.chunks(statements.len().max(1))) {
        entails.push(row.iter().map(|v| v.judgement.entailed).collect::<Vec<bool>>());
        for (v, &(s, must)) in row.iter().zip(&statements) {
            judgements.push(CoverageJudgement {
                prompt: prompt.id.clone(),
                criterion: c.rank,
                statement: s.to_owned(),
                must_have: must,
                p_entailment: v.judgement.p_entailment,
                entailed: v.judgement.entailed,
            });
        }
    }
    let must: Vec<bool> = statements.iter().map(|&(_, m)| m).collect();
    Ok((prompt_coverage(&prompt.id, &must, &entails), judgements))
}

/// The drafted rubric as FORMATS.md §7 lines: per prompt with criteria, one line per
/// response (or one `draft` line without a response), every criterion with its source.
fn drafted_rubric(prompts: &[DraftPrompt], drafted: &[DraftedPrompt], o: &DraftOptions) -> String {
    let mut lines = Vec::new();
    for (p, d) in prompts.iter().zip(drafted) {
        if d.criteria.is_empty() {
            continue;
        }
        let criteria: Vec<RubricCriterion> = d
            .criteria
            .iter()
            .map(|c| RubricCriterion {
                criterion: c.criterion.clone(),
                points: Some(o.points),
                tags: o.tags.clone(),
                met: None,
                met_by: Vec::new(),
                p_met: None,
                source: Some(CriterionSource {
                    document: c.document.clone(),
                    start: c.start as u32,
                    end: c.end as u32,
                    contradicted: c.contradicted,
                }),
            })
            .collect();
        let line = |system: &str, response: Option<&str>| RubricResponse {
            id: p.id.clone(),
            system: system.to_owned(),
            prompt_id: Some(p.id.clone()),
            tags: p.tags.clone(),
            prompt: Some(p.prompt.clone()),
            response: response.map(str::to_owned),
            criteria: criteria.clone(),
            line: p.line,
        };
        if p.responses.is_empty() {
            lines.push(line(DRAFT_SYSTEM, None));
        }
        for (system, response) in &p.responses {
            lines.push(line(system, Some(response)));
        }
    }
    write_rubric_jsonl(&lines)
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_owned()
}

/// The criteria, the passages, the dropped duplicates and, with experts' statements and
/// an NLI model, recall and precision with their judgements.
pub fn draft_tables(report: &DraftReport) -> Vec<Table> {
    let mut criteria = Table::new(
        "draft_criteria",
        "Drafted criteria (extractive: the evidence's own statements), best first, with their source",
        &[
            "prompt",
            "rank",
            "criterion",
            "document",
            "start",
            "end",
            "passage",
            "score",
            "contradicted",
            "P(contradiction)",
        ],
    );
    let mut passages = Table::new(
        "draft_passages",
        "Passages retrieved per prompt (character offsets in the document)",
        &["prompt", "rank", "document", "passage", "start", "end", "bm25", "score"],
    );
    for p in &report.prompts {
        for c in &p.criteria {
            criteria.push(vec![
                p.id.clone(),
                c.rank.to_string(),
                c.criterion.clone(),
                c.document.clone(),
                c.start.to_string(),
                c.end.to_string(),
                c.passage_rank.to_string(),
                fmt_num(c.score, 4),
                c.contradicted.map(yes_no).unwrap_or_else(|| "not checked".into()),
                c.p_contradiction.map(|x| fmt_num(x, 4)).unwrap_or_default(),
            ]);
        }
        for r in &p.passages {
            passages.push(vec![
                p.id.clone(),
                r.rank.to_string(),
                r.document.clone(),
                r.passage.to_string(),
                r.start.to_string(),
                r.end.to_string(),
                fmt_num(r.bm25, 4),
                fmt_num(r.score, 4),
            ]);
        }
    }
    let mut out = vec![criteria, passages];
    if !report.duplicates.is_empty() {
        let mut dup = Table::new(
            "draft_duplicates",
            "Statements left out as near-duplicates of a criterion",
            &["prompt", "statement", "document", "start", "end", "duplicate of", "rule"],
        );
        for d in &report.duplicates {
            dup.push(vec![
                d.prompt.clone(),
                d.statement.clone(),
                d.document.clone(),
                d.start.to_string(),
                d.end.to_string(),
                d.duplicate_of.to_string(),
                d.rule.clone(),
            ]);
        }
        out.push(dup);
    }
    if let Some(c) = &report.coverage {
        let mut figures = Table::new(
            "draft_coverage",
            &format!(
                "The draft against the experts' statements (NLI model {}): recall = statements some criterion entails, \
                 precision = criteria that entail some statement",
                c.nli_model
            ),
            &[
                "prompt",
                "criteria",
                "statements",
                "must_have",
                "entailed",
                "must_have entailed",
                "criteria entailing",
                "recall",
                "must-have recall",
                "precision",
            ],
        );
        for p in c.figures.prompts.iter().chain([&c.figures.pooled]) {
            figures.push(vec![
                p.prompt.clone(),
                p.criteria.to_string(),
                p.statements.to_string(),
                p.must_have.to_string(),
                p.statements_entailed.to_string(),
                p.must_have_entailed.to_string(),
                p.criteria_entailing.to_string(),
                fmt_stat(&p.recall, 4),
                fmt_stat(&p.must_have_recall, 4),
                fmt_stat(&p.precision, 4),
            ]);
        }
        let dash = String::new();
        figures.push(vec![
            "mean over prompts".into(),
            dash.clone(),
            dash.clone(),
            dash.clone(),
            dash.clone(),
            dash.clone(),
            dash,
            fmt_stat(&c.figures.mean_recall, 4),
            fmt_stat(&c.figures.mean_must_have_recall, 4),
            fmt_stat(&c.figures.mean_precision, 4),
        ]);
        let mut judged = Table::new(
            "draft_coverage_judgements",
            "Each (criterion, expert statement): does the criterion entail the statement?",
            &["prompt", "criterion", "statement", "must_have", "P(entailment)", "entailed"],
        );
        for j in &c.judgements {
            judged.push(vec![
                j.prompt.clone(),
                j.criterion.to_string(),
                j.statement.clone(),
                yes_no(j.must_have),
                fmt_num(j.p_entailment, 4),
                yes_no(j.entailed),
            ]);
        }
        out.push(figures);
        out.push(judged);
    }
    out
}

// ------------------------------------------------------------------ the page's job ---------

/// The page's Draft job: prompts and evidence in, the draft to review (accept, edit,
/// delete, add criteria; points and tags), to grade and to download as the §7 file. The
/// page drafts without models: BM25 and the word rule, `medrank rubric-draft` without
/// `--dense-ranker`, `--cross-encoder` and `--nli`.
pub const JOB: JobSpec =
    JobSpec::new("draft", "Draft", "rubric drafted from the evidence (extractive)", "rubric-draft")
        .reads(
            &["draft_prompts", "evidence", "corpus", "documents"],
            &[&["draft_prompts"], &["evidence", "corpus", "documents"]],
        )
        .views(&[View::tab("draft_view", "Draft")])
        .defaults(defaults_of::<DraftOptions>)
        .runs(run);

/// The page's request read as `medrank rubric-draft`'s: the prompts, and every evidence
/// file (a corpus or NRP's documents read as documents, one per line, whatever its name).
pub fn draft_request(request: &JobRequest) -> Result<DraftRequest> {
    let prompts = request.required("draft_prompts", "a file of prompts to draft rubrics for")?.named();
    let evidence = request
        .files
        .iter()
        .filter_map(|f| {
            let format = match f.kind.as_str() {
                "evidence" => None,
                "corpus" | "documents" => Some(EvidenceFormat::Corpus.name().to_owned()),
                _ => return None,
            };
            Some(EvidenceFile { file: f.named(), format })
        })
        .collect();
    Ok(DraftRequest { prompts, evidence, options: request.options()? })
}

/// The Draft tab: each prompt's criteria to review, each in the passage it was cut from,
/// and the drafted file's lines, into which the page puts each prompt's reviewed criteria
/// to write the rubric it grades and downloads.
#[derive(Debug, Serialize)]
struct DraftView<'a> {
    /// The file `--out` writes, and its name.
    rubric_name: String,
    rubric_jsonl: &'a str,
    /// Its lines as JSON objects (§7's fields in the writer's order).
    lines: Vec<serde_json::Value>,
    /// Every line has a response (a prompt without responses drafts a line that waits for
    /// them; Grade asks for one).
    gradable: bool,
    /// The job that grades the reviewed rubric.
    grade_job: &'static str,
    prompts: Vec<PromptView<'a>>,
}

#[derive(Debug, Serialize)]
struct PromptView<'a> {
    id: &'a str,
    /// What retrieval searched with.
    query: &'a str,
    criteria: Vec<CriterionView<'a>>,
}

#[derive(Debug, Serialize)]
struct CriterionView<'a> {
    /// The criterion as the drafted lines hold it (`criterion`, `points`, `tags`, `source`).
    drafted: serde_json::Value,
    /// Whether the conversation contradicts it (with an NLI model; never in the page).
    contradicted: Option<bool>,
    /// Its source: the document, and the passage it was cut from in three parts, the
    /// statement's span the middle one.
    document: &'a str,
    before: &'a str,
    statement: &'a str,
    after: &'a str,
}

/// `text` cut at the character offsets `start <= mid_start <= mid_end <= end`: the part
/// before the middle, the middle, the part after.
fn cut_at_chars(text: &str, [start, mid_start, mid_end, end]: [usize; 4]) -> Result<[&str; 3]> {
    let byte = |c: usize| {
        text.char_indices().map(|(b, _)| b).chain([text.len()]).nth(c).ok_or_else(|| {
            Error::invalid(format!("a source offset ({c}) beyond its document's {} characters", text.chars().count()))
        })
    };
    let [a, b, c, d] = [byte(start)?, byte(mid_start)?, byte(mid_end)?, byte(end)?];
    Ok([&text[a..b], &text[b..c], &text[c..d]])
}

fn draft_view<'a>(prompts_name: &str, drafted: &'a Drafted) -> Result<DraftView<'a>> {
    let lines: Vec<serde_json::Value> = drafted
        .rubric_jsonl
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| Error::invalid(format!("the drafted file: {e}"))))
        .collect::<Result<_>>()?;
    let mut prompts = Vec::new();
    for p in drafted.outcome.report.prompts.iter().filter(|p| !p.criteria.is_empty()) {
        // The prompt's first line (`id` = the prompt's id) holds its criteria, as every line does.
        let line = lines
            .iter()
            .find(|l| l["id"].as_str() == Some(p.id.as_str()))
            .ok_or_else(|| Error::invalid(format!("the drafted file has no line of prompt {}", p.id)))?;
        let mut criteria = Vec::new();
        for (c, drafted_criterion) in p.criteria.iter().zip(line["criteria"].as_array().into_iter().flatten()) {
            let doc = drafted
                .documents
                .iter()
                .find(|d| d.id == c.document)
                .ok_or_else(|| Error::invalid(format!("no evidence document {}", c.document)))?;
            let passage = &p.passages[c.passage_rank - 1];
            // A list item's span starts at its lead-in, which may sit before its passage.
            let [before, statement, after] =
                cut_at_chars(&doc.text, [passage.start.min(c.start), c.start, c.end, passage.end.max(c.end)])?;
            criteria.push(CriterionView {
                drafted: drafted_criterion.clone(),
                contradicted: c.contradicted,
                document: &c.document,
                before,
                statement,
                after,
            });
        }
        prompts.push(PromptView { id: &p.id, query: &p.query, criteria });
    }
    Ok(DraftView {
        rubric_name: format!("{}.draft.jsonl", super::file_stem(prompts_name)),
        rubric_jsonl: &drafted.rubric_jsonl,
        gradable: lines.iter().all(|l| l.get("response").is_some()),
        lines,
        grade_job: super::grade::JOB.name,
        prompts,
    })
}

/// A draft of the page's prompts and evidence (`medrank rubric-draft --prompts --evidence
/// --out`, without models).
fn run(request: &JobRequest, progress: Progress) -> Result<String> {
    #[derive(Serialize)]
    struct Views<'a> {
        draft_view: DraftView<'a>,
    }
    let req = draft_request(request)?;
    let stage = "Drafting criteria";
    let mut cancelled = None;
    // Without models every step is ready at once: no executor is needed.
    let drafted = crate::model::run_ready(draft_rubric(&req, &DraftModels::default(), &mut |done, total| {
        progress(stage, done, total).map_err(|e| cancelled = Some(e)).is_ok()
    }));
    let drafted = match (drafted, cancelled) {
        (Err(_), Some(why)) => return Err(why),
        (drafted, _) => drafted?,
    };
    reply(&drafted.outcome, Views { draft_view: draft_view(&req.prompts.name, &drafted)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &Stat) -> f64 {
        *s.value().expect("defined")
    }
    use crate::stats::Stat;
    use std::collections::BTreeSet;

    /// An entailment rule standing in for an NLI model, so the figures below can be worked
    /// out by hand: the premise entails the hypothesis when every word of the hypothesis
    /// (lower case, letters and digits) is among the premise's; it contradicts it when the
    /// premise says "cannot take X" and the hypothesis names X; otherwise neither.
    struct WordRule;

    fn words(s: &str) -> BTreeSet<String> {
        s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
    }

    impl NliModel for WordRule {
        fn name(&self) -> String {
            "word-rule".into()
        }
        fn judge<'a>(&'a self, pairs: &'a [NliPair<'a>]) -> Boxed<'a, Vec<NliVerdict>> {
            Box::pin(async move {
                Ok(pairs
                    .iter()
                    .map(|p| {
                        let entailed = words(p.hypothesis).is_subset(&words(p.premise));
                        let premise = p.premise.to_lowercase();
                        let cannot = premise.split("cannot take ").nth(1).and_then(|r| r.split_whitespace().next());
                        let contradicted = !entailed
                            && cannot.is_some_and(|x| {
                                words(p.hypothesis).contains(x.trim_matches(|c: char| !c.is_alphanumeric()))
                            });
                        let judgement = NliJudgement {
                            p_entailment: if entailed { 0.9 } else { 0.05 },
                            p_contradiction: if contradicted { 0.9 } else { 0.05 },
                            entailed,
                            contradicted,
                        };
                        NliVerdict { judgement, premise_tokens_cut: 0 }
                    })
                    .collect())
            })
        }
    }

    const GUIDE: &str = "# Scabies\n\nScabies is an itchy rash caused by a mite. Permethrin cream is the first \
        treatment for scabies. Ivermectin tablets are an oral treatment for scabies. Scabies is an itchy rash.\n";
    const CORPUS: &str =
        "d2\tPermethrin cream is the first treatment for scabies.\nd3\tWash bedding in hot water to kill mites.\n";
    const PROMPTS: &str = r#"{"id": "p1", "prompt": [{"role": "user", "content": "What treats scabies? I cannot take ivermectin."}], "must_have": ["Permethrin cream is the first treatment", "Ivermectin tablets are an oral treatment"], "nice_to_have": ["Scabies is caused by a mite", "Scabies spreads by sex"], "responses": {"a": "Permethrin cream."}}
{"id": "p2", "prompt": "How do I wash bedding?", "must_have": ["Wash bedding in hot water"]}
{"id": "p3", "prompt": "Zzz unrelated?"}
"#;

    fn request() -> DraftRequest {
        DraftRequest {
            prompts: NamedText::new("prompts.jsonl", PROMPTS),
            evidence: vec![
                EvidenceFile { file: NamedText::new("guide.md", GUIDE), format: None },
                EvidenceFile { file: NamedText::new("corpus.tsv", CORPUS), format: None },
            ],
            options: DraftOptions { criteria: 10, ..DraftOptions::default() },
        }
    }

    #[test]
    fn a_hand_worked_draft_with_an_injected_entailment_rule() {
        let rule = WordRule;
        let models = DraftModels { nli: Some(&rule), ..DraftModels::default() };
        let drafted = crate::model::run_ready(draft_rubric(&request(), &models, &mut |_, _| true)).unwrap();
        let report = &drafted.outcome.report;
        // p1 retrieves guide.md's one passage and d2 (they share "scabies"); d3 shares no
        // word with it. Five statements: guide's four and d2's copy of the second, which
        // entails it both ways and is dropped. "Scabies is an itchy rash." is entailed by
        // the first statement but does not entail it: kept.
        let p1 = &report.prompts[0];
        assert_eq!(p1.statements, 5);
        let kept: BTreeSet<&str> = p1.criteria.iter().map(|c| c.criterion.as_str()).collect();
        assert_eq!(
            kept,
            BTreeSet::from([
                "Scabies is an itchy rash caused by a mite.",
                "Permethrin cream is the first treatment for scabies.",
                "Ivermectin tablets are an oral treatment for scabies.",
                "Scabies is an itchy rash.",
            ])
        );
        assert_eq!(report.duplicates.len(), 1);
        assert_eq!(report.duplicates[0].statement, "Permethrin cream is the first treatment for scabies.");
        assert_eq!(report.duplicates[0].rule, "entailment both ways");
        // Sources: character offsets in guide.md (worked out: "# Scabies\n\n" is 11
        // characters; the sentences follow one space apart).
        let spans: BTreeSet<(&str, &str, usize, usize)> =
            p1.criteria.iter().map(|c| (c.criterion.as_str(), c.document.as_str(), c.start, c.end)).collect();
        assert!(spans.contains(&("Scabies is an itchy rash caused by a mite.", "guide.md", 11, 53)));
        assert!(spans.contains(&("Ivermectin tablets are an oral treatment for scabies.", "guide.md", 107, 160)));
        assert!(spans.contains(&("Scabies is an itchy rash.", "guide.md", 161, 186)));
        // The conversation says "cannot take ivermectin": the ivermectin criterion alone is
        // flagged.
        for c in &p1.criteria {
            assert_eq!(c.contradicted, Some(c.criterion.starts_with("Ivermectin")), "{}", c.criterion);
        }
        // p2 draws d3's one statement; p3 shares no word with any passage: no criterion.
        assert_eq!(report.prompts[1].criteria.len(), 1);
        assert!(report.prompts[2].criteria.is_empty());

        // Recall and precision, by hand. p1: must-have "Permethrin cream is the first
        // treatment" (entailed by the permethrin criterion), "Ivermectin tablets are an
        // oral treatment" (by the ivermectin one); nice-to-have "Scabies is caused by a
        // mite" (by the first), "Scabies spreads by sex" (by none): recall 3/4, must-have
        // 2/2; criteria entailing some statement: 3 of 4 ("Scabies is an itchy rash." lacks
        // "caused" and "mite"): precision 3/4. p2: 1/1, 1/1, 1/1. p3 has no statements.
        let coverage = report.coverage.as_ref().unwrap();
        assert_eq!(coverage.nli_model, "word-rule");
        let f = &coverage.figures;
        let p1 = &f.prompts[0];
        assert_eq!((v(&p1.recall), v(&p1.must_have_recall), v(&p1.precision)), (0.75, 1.0, 0.75));
        let p2 = &f.prompts[1];
        assert_eq!((v(&p2.recall), v(&p2.must_have_recall), v(&p2.precision)), (1.0, 1.0, 1.0));
        // Pooled: 4 of 5 statements, 3 of 3 must-haves, 4 of 5 criteria; means over the two.
        assert_eq!((v(&f.pooled.recall), v(&f.pooled.must_have_recall), v(&f.pooled.precision)), (0.8, 1.0, 0.8));
        assert_eq!((v(&f.mean_recall), v(&f.mean_precision)), (0.875, 0.875));
        assert_eq!(coverage.judgements.len(), 4 * 4 + 1);

        // The drafted file: p1 once per response, p2 as a `draft` line, p3 left out (warned).
        let (lines, warnings) = crate::data::graded::parse_rubric("draft.jsonl", &drafted.rubric_jsonl).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let who: Vec<(&str, &str, bool)> =
            lines.iter().map(|l| (l.id.as_str(), l.system.as_str(), l.response.is_some())).collect();
        assert_eq!(who, [("p1", "a", true), ("p2", DRAFT_SYSTEM, false)]);
        let c = &lines[0].criteria[0];
        assert_eq!(
            (c.points, c.tags.as_slice(), c.met),
            (Some(DEFAULT_POINTS), &["axis:completeness".to_string()][..], None)
        );
        let ivermectin = lines[0].criteria.iter().find(|c| c.criterion.starts_with("Ivermectin")).unwrap();
        assert_eq!(
            ivermectin.source,
            Some(CriterionSource { document: "guide.md".into(), start: 107, end: 160, contradicted: Some(true) })
        );
        assert!(report
            .warnings
            .iter()
            .any(|w| w.to_string().contains("1 prompt(s) got no criterion") && w.to_string().ends_with(": p3")));
        assert!(report.warnings.iter().any(|w| w.to_string().contains("cover the 2 of 3 prompts")));
        assert!(report.provenance.conventions.iter().any(|(k, v)| k == "drafting" && v.starts_with("extractive")));
    }

    #[test]
    fn without_models_bm25_and_the_word_rule_draft_and_nothing_is_judged() {
        let drafted =
            crate::model::run_ready(draft_rubric(&request(), &DraftModels::default(), &mut |_, _| true)).unwrap();
        let report = &drafted.outcome.report;
        assert!(report.coverage.is_none() && report.nli_model.is_none());
        assert!(report.prompts[0].criteria.iter().all(|c| c.contradicted.is_none()));
        // d2's copy of a guide sentence adds no word: dropped by the word rule.
        assert!(report
            .duplicates
            .iter()
            .any(|d| d.rule == "no word of its own"
                && d.statement == "Permethrin cream is the first treatment for scabies."));
        assert!(report.warnings.iter().any(|w| w.to_string().contains("recall and precision need an NLI model")));
        // Cancelling stops the run.
        let cancelled = crate::model::run_ready(draft_rubric(&request(), &DraftModels::default(), &mut |_, _| false));
        assert!(matches!(cancelled, Err(Error::Cancelled)));
    }

    #[test]
    fn options_out_of_range_are_refused_naming_the_flag() {
        let with = |f: fn(&mut DraftOptions)| {
            let mut o = DraftOptions::default();
            f(&mut o);
            o.check().unwrap_err().to_string()
        };
        assert_eq!(with(|o| o.criteria = 0), "--criteria 0: expected a whole number from 1 to 100");
        assert_eq!(with(|o| o.points = f64::NAN), "--points NaN: expected a number above 0 and at most 100");
        assert_eq!(with(|o| o.duplicate_cosine = 1.5), "--duplicate-cosine 1.5: expected a number from 0 to 1");
        assert_eq!(with(|o| o.tags = vec!["a".into(), "a".into()]), "--tag a: given twice");
        assert_eq!(with(|o| o.tags = vec![" ".into()]), "--tag: a tag cannot be empty");
    }

    #[test]
    fn the_pages_draft_job_is_medrank_rubric_draft_with_each_criterion_in_its_passage() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/draft");
        let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap();
        let file = |name: &str, kind: &str| crate::jobs::spec::InputFile {
            name: name.into(),
            text: read(name),
            kind: kind.into(),
            ..Default::default()
        };
        // The page's files: the prompts, the guideline as evidence and the formulary as the
        // page first takes a .tsv (NRP's documents); a file of another kind is not evidence.
        let request = JobRequest {
            files: vec![
                file("prompts.jsonl", "draft_prompts"),
                file("guideline.md", "evidence"),
                file("formulary.tsv", "documents"),
                file("prompts.jsonl", "rubric"),
            ],
            options: serde_json::json!({"criteria": 3, "seed": 7}),
        };
        let mut stages = Vec::new();
        let reply = run(&request, &mut |stage, done, total| {
            stages.push((stage.to_string(), done, total));
            Ok(())
        })
        .unwrap();
        let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
        let cli = crate::model::run_ready(draft_rubric(
            &DraftRequest {
                prompts: NamedText::new("prompts.jsonl", read("prompts.jsonl")),
                evidence: vec![
                    EvidenceFile { file: NamedText::new("guideline.md", read("guideline.md")), format: None },
                    EvidenceFile { file: NamedText::new("formulary.tsv", read("formulary.tsv")), format: None },
                ],
                options: DraftOptions { criteria: 3, ..DraftOptions::default() },
            },
            &DraftModels::default(),
            &mut |_, _| true,
        ))
        .unwrap();
        // The CLI's --json and --csv, and its --out as the file to review.
        let cli_report: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&cli.outcome.report).unwrap()).unwrap();
        assert_eq!(reply["report"], cli_report);
        let csv: Vec<&str> = reply["tables"].as_array().unwrap().iter().map(|t| t["csv"].as_str().unwrap()).collect();
        assert_eq!(csv, cli.outcome.tables.iter().map(|t| t.to_csv()).collect::<Vec<_>>());
        let view = &reply["draft_view"];
        assert_eq!(view["rubric_jsonl"], cli.rubric_jsonl.as_str());
        assert_eq!(view["rubric_name"], "prompts.draft.jsonl");
        let lines: Vec<serde_json::Value> =
            cli.rubric_jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(view["lines"], serde_json::Value::Array(lines.clone()));
        // aom-1 has two responses, aom-2 one: three lines, each with its response.
        assert_eq!(lines.len(), 3);
        assert_eq!(view["gradable"], true);
        assert_eq!(view["grade_job"], "grade");
        assert_eq!(stages.first(), Some(&("Drafting criteria".to_string(), 0, 2)));
        assert_eq!(stages.last(), Some(&("Drafting criteria".to_string(), 2, 2)));
        // Each criterion: the drafted line's criterion, and its passage cut around its
        // statement, the statement being the document's characters start..end (counted in
        // characters: the guideline's "°" is two bytes).
        let prompts = view["prompts"].as_array().unwrap();
        assert_eq!(prompts.len(), 2);
        let mut checked = 0;
        for (p, drafted) in prompts.iter().zip(&cli.outcome.report.prompts) {
            assert_eq!(p["id"], drafted.id.as_str());
            let line = lines.iter().find(|l| l["id"] == p["id"]).unwrap();
            for (i, (c, d)) in p["criteria"].as_array().unwrap().iter().zip(&drafted.criteria).enumerate() {
                assert_eq!(c["drafted"], line["criteria"][i]);
                assert_eq!(c["document"], d.document.as_str());
                let text = &cli.documents.iter().find(|doc| doc.id == d.document).unwrap().text;
                let chars = |a: usize, b: usize| text.chars().skip(a).take(b - a).collect::<String>();
                assert_eq!(c["statement"], chars(d.start, d.end).as_str());
                let passage = &drafted.passages[d.passage_rank - 1];
                let whole = format!(
                    "{}{}{}",
                    c["before"].as_str().unwrap(),
                    c["statement"].as_str().unwrap(),
                    c["after"].as_str().unwrap()
                );
                assert_eq!(whole, chars(passage.start.min(d.start), passage.end.max(d.end)));
                checked += 1;
            }
        }
        assert_eq!(checked, 6);
        // A statement with "°" before it in its document: offsets counted in characters.
        let degrees = prompts
            .iter()
            .flat_map(|p| p["criteria"].as_array().unwrap())
            .find(|c| c["before"].as_str().unwrap().contains('°') || c["statement"].as_str().unwrap().contains('°'));
        assert!(degrees.is_some(), "{view:#}");
        // Without prompts the Draft job says what to add; the kinds it reads are the page's.
        let request = JobRequest { files: vec![file("guideline.md", "evidence")], options: serde_json::json!({}) };
        let e = run(&request, &mut |_, _, _| Ok(())).unwrap_err().to_string();
        assert!(e.contains("add a file of prompts to draft rubrics for"), "{e}");
        // A cancel between prompts is the page's cancel.
        let request = JobRequest {
            files: vec![file("prompts.jsonl", "draft_prompts"), file("guideline.md", "evidence")],
            options: serde_json::json!({}),
        };
        let e = run(&request, &mut |_, done, _| if done == 1 { Err(Error::Cancelled) } else { Ok(()) }).unwrap_err();
        assert!(matches!(e, Error::Cancelled), "{e}");
    }
}
