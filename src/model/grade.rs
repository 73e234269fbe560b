//! The rubric criterion grader: P(met) for each (response, criterion) pair from a
//! sequence-classification model folder (issue 27; FORMATS.md §7 for the rubric files).
//!
//! Input pair, the same for grading and for training a grader (`crate::train`):
//! first segment = the conversation before the response (`role: content` lines) and the
//! response; second segment = the criterion, never cut. An NLI model reads this as
//! (premise, hypothesis). When the pair is too long, the conversation loses its start
//! (the earliest turns) before the response loses anything; only a response that does
//! not fit beside the criterion on its own loses its end. Every cut is reported.
//!
//! Which class means "met" comes from the head's `id2label` ([`GraderKind::of_labels`]):
//! - a grader trained by medrank (`medrank train --task criterion`): labels `met`,
//!   `not_met`; P(met) = softmax over the two;
//! - zero-shot, any NLI model whose labels name `entailment`: P(met) = softmax over
//!   (entailment, contradiction) taken apart from `neutral`, as Hugging Face's zero-shot
//!   classification pipeline scores one label with `multi_label=True`; without a
//!   contradiction label, the entailment share of the softmax over every label.

use super::batching::{length_batches, EncodingPlan};
use super::encoder::{Encoder, Readout};
use super::heads::softmax;
use super::tokenize::{Encoded, Part, TextTokenizer};
use crate::data::graded::Prompt;
use crate::error::{Error, Result};
use serde::Serialize;

/// The labels of a grader trained by medrank, in head order.
pub const CRITERION_LABELS: &[&str] = crate::data::tasks::CRITERION.labels;

/// How a head's logits become P(met).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GraderKind {
    /// Trained on criteria: the logits of `met` and `not_met`.
    Criterion { met: usize, not_met: usize },
    /// An NLI model used zero-shot: the logits of `entailment` and, when the model has
    /// one, `contradiction`.
    ZeroShotNli { entailment: usize, contradiction: Option<usize> },
}

impl GraderKind {
    /// The grader a head's labels make; an error names the labels when they make none.
    /// (Labels that make two, `met` beside `entailment`, are refused as the config is read.)
    pub fn of_labels(labels: &[String]) -> Result<GraderKind> {
        let norm = |s: &str| s.trim().to_lowercase().replace([' ', '-'], "_");
        let find = |name: &str| labels.iter().position(|l| norm(l) == name);
        if let (Some(met), Some(not_met)) = (find("met"), find("not_met")) {
            return Ok(GraderKind::Criterion { met, not_met });
        }
        if let Some(entailment) = find("entailment") {
            return Ok(GraderKind::ZeroShotNli { entailment, contradiction: find("contradiction") });
        }
        Err(Error::invalid(format!(
            "the model's labels {labels:?} name neither `met` and `not_met` (a grader trained with \
             `medrank train --task criterion`) nor `entailment` (an NLI model, used zero-shot); \
             a model without a classification head cannot grade"
        )))
    }

    /// P(met) from one pair's logits.
    pub fn p_met(&self, logits: &[f32]) -> f64 {
        match *self {
            GraderKind::Criterion { met, not_met } => softmax(&[logits[met], logits[not_met]], 1.0)[0],
            GraderKind::ZeroShotNli { entailment, contradiction: Some(c) } => {
                softmax(&[logits[entailment], logits[c]], 1.0)[0]
            }
            GraderKind::ZeroShotNli { entailment, contradiction: None } => softmax(logits, 1.0)[entailment],
        }
    }

    /// One sentence for reports.
    pub fn describe(&self) -> &'static str {
        match self {
            GraderKind::Criterion { .. } => {
                "a trained criterion grader: P(met) = softmax over its met / not_met logits"
            }
            GraderKind::ZeroShotNli { contradiction: Some(_), .. } => {
                "an NLI model, zero-shot: premise = conversation and response, hypothesis = criterion; \
                 P(met) = softmax over the entailment and contradiction logits (neutral left out, as \
                 Hugging Face's zero-shot pipeline with multi_label)"
            }
            GraderKind::ZeroShotNli { contradiction: None, .. } => {
                "an NLI model, zero-shot: premise = conversation and response, hypothesis = criterion; \
                 P(met) = the entailment probability of the softmax over all labels (the model has no \
                 contradiction label)"
            }
        }
    }
}

/// The conversation before a response as the grader reads it: one `role: content` line
/// per message, or the prompt's text; empty without a prompt.
pub fn conversation_text(prompt: Option<&Prompt>) -> String {
    match prompt {
        None => String::new(),
        Some(Prompt::Text(t)) => t.clone(),
        Some(Prompt::Messages(ms)) => {
            ms.iter().map(|m| format!("{}: {}", m.role, m.content)).collect::<Vec<_>>().join("\n")
        }
    }
}

/// One encoded (response, criterion) pair and what it lost to the model's limit.
#[derive(Debug, Clone, PartialEq)]
pub struct GradeInput {
    pub encoded: Encoded,
    /// Tokens of the conversation left out (its start first).
    pub conversation_cut: usize,
    /// Tokens of the response left out (its end), only when it alone did not fit.
    pub response_cut: usize,
}

/// Encodes a pair (see the module doc for the order of cuts). An error when the
/// criterion alone takes the whole length.
pub fn encode_pair(
    tokenizer: &TextTokenizer,
    conversation: &str,
    response: &str,
    criterion: &str,
) -> Result<GradeInput> {
    let criterion_part = [Part::keep(criterion)];
    let conversation = conversation.trim();
    if !conversation.is_empty() {
        // The response kept whole: only the conversation may lose tokens.
        if let Ok(encoded) =
            tokenizer.encode_parts(&[Part::cut_start(conversation), Part::keep(response)], &criterion_part)
        {
            let conversation_cut = encoded.cut_per_part[0];
            return Ok(GradeInput { encoded, conversation_cut, response_cut: 0 });
        }
    }
    // No conversation, or the response and the criterion alone are too long: the response
    // loses its end and the conversation is left out whole.
    let encoded = tokenizer.encode_parts(&[Part::cut_end(response)], &criterion_part).map_err(|_| {
        Error::invalid(format!(
            "longer than the model's {}-token limit on its own: it is judged whole, never cut",
            tokenizer.max_tokens
        ))
    })?;
    let conversation_cut = if conversation.is_empty() { 0 } else { tokenizer.raw_ids(conversation)?.len() };
    let response_cut = encoded.cut_per_part[0];
    Ok(GradeInput { encoded, conversation_cut, response_cut })
}

/// P(met) of every input, computed in length-sorted batches on any backend.
pub async fn grade_inputs<E: Encoder>(
    encoder: &E,
    kind: GraderKind,
    tokenizer: &TextTokenizer,
    inputs: &[&Encoded],
    batch_size: usize,
) -> Result<Vec<f64>> {
    let logits = head_logits(encoder, tokenizer, inputs, batch_size).await?;
    Ok(logits.iter().map(|l| kind.p_met(l)).collect())
}

/// The model's head's logits of every input, computed in length-sorted batches on any backend.
pub async fn head_logits<E: Encoder>(
    encoder: &E,
    tokenizer: &TextTokenizer,
    inputs: &[&Encoded],
    batch_size: usize,
) -> Result<Vec<Vec<f32>>> {
    let lens: Vec<usize> = inputs.iter().map(|e| e.len()).collect();
    let mut plan = EncodingPlan::default();
    plan.add(&lens, batch_size);
    encoder.plan(&plan);
    let mut out = vec![Vec::new(); inputs.len()];
    for group in length_batches(&lens, batch_size) {
        let items: Vec<&Encoded> = group.iter().map(|&i| inputs[i]).collect();
        let batch = tokenizer.batch(&items);
        for (l, &i) in encoder.read_out(&batch, Readout::Logits).await?.into_iter().zip(&group) {
            out[i] = l;
        }
    }
    super::finite::logits(&out)?;
    Ok(out)
}

/// The three-way reading of an NLI head for statement checks: which logit is entailment
/// and which contradiction (the others, e.g. neutral, are neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NliLabels {
    pub entailment: usize,
    pub contradiction: usize,
}

/// What an NLI head says of one (answer, statement) pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NliJudgement {
    /// Softmax over every label.
    pub p_entailment: f64,
    pub p_contradiction: f64,
    /// The label with the largest logit (the first on a tie) is entailment / contradiction.
    pub entailed: bool,
    pub contradicted: bool,
}

impl NliLabels {
    /// An NLI head's entailment and contradiction labels; an error names the labels when
    /// one of the two is missing.
    pub fn of_labels(labels: &[String]) -> Result<NliLabels> {
        let norm = |s: &str| s.trim().to_lowercase();
        let find = |name: &str| labels.iter().position(|l| norm(l) == name);
        match (find("entailment"), find("contradiction")) {
            (Some(entailment), Some(contradiction)) => Ok(NliLabels { entailment, contradiction }),
            _ => Err(Error::invalid(format!(
                "the model's labels {labels:?} do not name both `entailment` and `contradiction`: statement \
                 checks need an NLI model (e.g. one trained on MNLI)"
            ))),
        }
    }

    pub fn judge(&self, logits: &[f32]) -> NliJudgement {
        let p = softmax(logits, 1.0);
        let best = logits.iter().enumerate().fold(0, |b, (i, l)| if *l > logits[b] { i } else { b });
        NliJudgement {
            p_entailment: p[self.entailment],
            p_contradiction: p[self.contradiction],
            entailed: best == self.entailment,
            contradicted: best == self.contradiction,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn kinds_from_labels() {
        assert_eq!(
            GraderKind::of_labels(&labels(&["not_met", "met"])).unwrap(),
            GraderKind::Criterion { met: 1, not_met: 0 }
        );
        // MNLI heads: contradiction, neutral, entailment (roberta-large-mnli's order) or
        // upper case (cross-encoder/nli-*: CONTRADICTION, ENTAILMENT, NEUTRAL).
        assert_eq!(
            GraderKind::of_labels(&labels(&["CONTRADICTION", "ENTAILMENT", "NEUTRAL"])).unwrap(),
            GraderKind::ZeroShotNli { entailment: 1, contradiction: Some(0) }
        );
        assert_eq!(
            GraderKind::of_labels(&labels(&["entailment", "not_entailment"])).unwrap(),
            GraderKind::ZeroShotNli { entailment: 0, contradiction: None }
        );
        let err = GraderKind::of_labels(&labels(&["LABEL_0", "LABEL_1"])).unwrap_err().to_string();
        assert!(err.contains("name neither `met` and `not_met`"), "{err}");
    }

    #[test]
    fn p_met_by_hand() {
        // Criterion grader: logits met 2, not_met 0 -> e^2 / (e^2 + 1) = 0.8807970779778823.
        let k = GraderKind::Criterion { met: 1, not_met: 0 };
        assert!((k.p_met(&[0.0, 2.0]) - 0.8807970779778823).abs() < 1e-12);
        // NLI with contradiction: neutral's logit (5) plays no part: the same 0.8808 for
        // entailment 2 against contradiction 0.
        let k = GraderKind::ZeroShotNli { entailment: 2, contradiction: Some(0) };
        assert!((k.p_met(&[0.0, 5.0, 2.0]) - 0.8807970779778823).abs() < 1e-12);
        // Without contradiction: softmax over all, [0, 0, ln 2] -> 2 / 4 = 0.5.
        let k = GraderKind::ZeroShotNli { entailment: 2, contradiction: None };
        assert!((k.p_met(&[0.0, 0.0, std::f32::consts::LN_2]) - 0.5).abs() < 1e-7);
    }

    #[test]
    fn nli_three_way_by_hand() {
        // roberta-large-mnli's order: contradiction, neutral, entailment.
        let nli = NliLabels::of_labels(&labels(&["CONTRADICTION", "NEUTRAL", "ENTAILMENT"])).unwrap();
        assert_eq!(nli, NliLabels { entailment: 2, contradiction: 0 });
        // logits [0, ln 2, ln 5]: softmax [1/8, 2/8, 5/8]; entailment wins.
        let j = nli.judge(&[0.0, std::f32::consts::LN_2, 5f32.ln()]);
        assert!((j.p_entailment - 0.625).abs() < 1e-7 && (j.p_contradiction - 0.125).abs() < 1e-7);
        assert!(j.entailed && !j.contradicted);
        // Neutral largest: neither.
        let j = nli.judge(&[0.0, 3.0, 1.0]);
        assert!(!j.entailed && !j.contradicted);
        assert!(NliLabels::of_labels(&labels(&["entailment", "not_entailment"])).is_err());
    }

    #[test]
    fn conversation_lines() {
        use crate::data::graded::Message;
        let m = |r: &str, c: &str| Message { role: r.into(), content: c.into() };
        let p = Prompt::Messages(vec![m("user", "My chest hurts"), m("assistant", "Since when?"), m("user", "1 h")]);
        assert_eq!(conversation_text(Some(&p)), "user: My chest hurts\nassistant: Since when?\nuser: 1 h");
        assert_eq!(conversation_text(Some(&Prompt::Text("q".into()))), "q");
        assert_eq!(conversation_text(None), "");
    }
}
