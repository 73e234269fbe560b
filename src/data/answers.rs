//! The rest of the NRP inputs: documents, generated answers, precomputed answer scores,
//! and the cross-checks that tell a user which parts of the inputs do not fit together.

use crate::data::common::{
    check_line_ends, content_lines, csv_reader, first_content_char, non_empty, nothing_to_read, open_csv, parse_number,
    parse_unsigned, Tally,
};
use crate::data::json::{line_error, parse_record};
use crate::data::{Answer, AnswerScore, Document, HumanRankings, Judgments, RunEntry, Topic};
use crate::error::{Error, Result, Warning};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

impl Answer {
    /// The id that expert rankings use for an answer: `system/prompt/sample`.
    pub fn id(&self) -> String {
        answer_id(&self.system, &self.prompt, self.sample)
    }
}

impl AnswerScore {
    /// The [`Answer::id`] of the answer this score belongs to.
    pub fn answer_id(&self) -> String {
        answer_id(&self.system, &self.prompt, self.sample)
    }
}

fn answer_id(system: &str, prompt: &str, sample: u32) -> String {
    format!("{system}/{prompt}/{sample}")
}

// ---------------------------------------------------------------------------------------
// Documents

/// Parses documents: JSONL `{"docno", "text"}` when the first non-blank character is `{`,
/// otherwise TSV `docno<TAB>text` (split at the first tab; later tabs belong to the text; an
/// optional header line `docno<TAB>text` is skipped). A docno twice is an error; an empty
/// text is kept and warned about.
pub fn parse_documents(name: &str, text: &str) -> Result<(Vec<Document>, Vec<Warning>)> {
    check_line_ends(name, text)?;
    let jsonl = first_content_char(text) == Some('{');
    let mut documents = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    let mut tally = Tally::new(name);
    for (line, row) in content_lines(text) {
        let document = if jsonl {
            let record = parse_record(name, line, row)?;
            for field in record.unknown_fields(&["docno", "text"]) {
                tally.add(format!("ignored unknown field `{field}` on documents"), line.to_string());
            }
            Document { docno: record.label("docno")?, text: record.string("text")?.to_owned() }
        } else {
            let (docno, text) = row
                .split_once('\t')
                .ok_or_else(|| line_error(name, line, "expected `docno<TAB>text` (no tab on this line)"))?;
            if documents.is_empty() && docno.trim() == "docno" && text.trim() == "text" {
                continue;
            }
            Document { docno: docno.trim().to_owned(), text: text.trim().to_owned() }
        };
        if document.docno.is_empty() {
            return Err(Error::input(name, line, "docno", "`docno` is empty"));
        }
        if let Some(first) = first_line.insert(document.docno.clone(), line) {
            return Err(Error::input(
                name,
                line,
                "docno",
                format!("duplicate docno `{}` (also on line {first})", document.docno),
            ));
        }
        if document.text.trim().is_empty() {
            tally.add("documents with an empty text", document.docno.clone());
        }
        documents.push(document);
    }
    if documents.is_empty() {
        return Err(nothing_to_read(name, text, "no documents in the file"));
    }
    Ok((documents, tally.into_warnings()))
}

// ---------------------------------------------------------------------------------------
// Generated answers

/// (system, prompt) from a file named `<system>__<prompt>.csv` (directories and the
/// extension are dropped), the naming used for answer CSVs in `examples/nrp/answers/`.
pub fn system_prompt_from_file_name(name: &str) -> Option<(String, String)> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let stem = base.rsplit_once('.').map(|(s, _)| s).unwrap_or(base);
    let (system, prompt) = stem.split_once("__")?;
    (!system.is_empty() && !prompt.is_empty()).then(|| (system.to_owned(), prompt.to_owned()))
}

/// Parses the answers of one (system, prompt) from CSV `qid,query,answer1,...,answerN`:
/// column `answerK` is sample K-1. Returns the answers and the queries of the `query` column
/// (to compare with the topics). An empty answer cell is kept as an empty answer (a model
/// can produce nothing) and warned about.
pub fn parse_answers_csv(
    name: &str,
    text: &str,
    system: &str,
    prompt: &str,
) -> Result<(Vec<Answer>, Vec<Topic>, Vec<Warning>)> {
    let (mut reader, header, mut lines) = open_csv(name, text)?;
    let qid_col = header.require(name, "qid")?;
    let query_col = header.require(name, "query")?;
    let mut answer_cols: Vec<(usize, u32)> = Vec::new();
    for k in 1.. {
        match header.position(&format!("answer{k}")) {
            Some(col) => answer_cols.push((col, k - 1)),
            None => break,
        }
    }
    if answer_cols.is_empty() {
        return Err(Error::input(name, 1, "answer1", "missing column `answer1` (answers are `answer1`..`answerN`)"));
    }
    let is_known = |c: &str| c == "qid" || c == "query" || answer_cols.iter().any(|(col, _)| header.names[*col] == c);
    let mut warnings: Vec<Warning> = header.unknown_columns(name, is_known).into_iter().collect();

    let mut answers = Vec::new();
    let mut queries = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    let mut tally = Tally::new(name);
    for record in reader.records() {
        let record = record.map_err(|e| lines.error(name, e))?;
        let line = lines.of(&record);
        let qid = non_empty(name, line, "qid", &record, qid_col)?.to_owned();
        let query = non_empty(name, line, "query", &record, query_col)?.to_owned();
        if let Some(first) = first_line.insert(qid.clone(), line) {
            return Err(Error::input(name, line, "qid", format!("duplicate qid `{qid}` (also on line {first})")));
        }
        for (col, sample) in &answer_cols {
            let text = record.get(*col).unwrap_or("").to_owned();
            if text.is_empty() {
                tally.add(format!("empty answers (kept) in column `{}`", header.names[*col]), qid.clone());
            }
            answers.push(Answer {
                qid: qid.clone(),
                system: system.to_owned(),
                prompt: prompt.to_owned(),
                sample: *sample,
                text,
            });
        }
        queries.push(Topic { qid, query });
    }
    if answers.is_empty() {
        return Err(nothing_to_read(name, text, "the answers file has a header but no rows"));
    }
    warnings.extend(tally.into_warnings());
    Ok((answers, queries, warnings))
}

/// Parses answers from JSONL `{"qid", "system", "prompt", "sample", "text"}` (sample is a
/// 0-based whole number). The same answer id twice is an error naming both lines.
pub fn parse_answers_jsonl(name: &str, text: &str) -> Result<(Vec<Answer>, Vec<Warning>)> {
    let mut answers = Vec::new();
    let mut first_line: HashMap<(String, String), usize> = HashMap::new();
    let mut tally = Tally::new(name);
    check_line_ends(name, text)?;
    for (line, row) in content_lines(text) {
        let record = parse_record(name, line, row)?;
        let answer = Answer {
            qid: record.non_empty_label("qid")?,
            system: non_empty_string(&record, "system")?,
            prompt: non_empty_string(&record, "prompt")?,
            sample: record.unsigned("sample")?,
            text: record.string("text")?.to_owned(),
        };
        for field in record.unknown_fields(&["qid", "system", "prompt", "sample", "text"]) {
            tally.add(format!("ignored unknown field `{field}` on answers"), answer.id());
        }
        if answer.text.trim().is_empty() {
            tally.add("empty answers (kept)", format!("{}:{}", answer.qid, answer.id()));
        }
        if let Some(first) = first_line.insert((answer.qid.clone(), answer.id()), line) {
            return Err(record.error(
                "sample",
                format!("answer `{}` to query `{}` appears twice (also on line {first})", answer.id(), answer.qid),
            ));
        }
        answers.push(answer);
    }
    if answers.is_empty() {
        return Err(nothing_to_read(name, text, "no answers in the file"));
    }
    Ok((answers, tally.into_warnings()))
}

/// A string field that is not empty or blank (a system or prompt name: a blank one would
/// be reported as a nameless system).
fn non_empty_string(record: &crate::data::json::Record, field: &str) -> Result<String> {
    let value = record.string(field)?;
    if value.trim().is_empty() {
        return Err(record.error(field, format!("`{field}` is empty")));
    }
    Ok(value.to_owned())
}

// ---------------------------------------------------------------------------------------
// Precomputed answer scores

const SCORE_FIELDS: [&str; 5] = ["qid", "system", "prompt", "sample", "score"];

/// Parses a ranker's scores for generated answers: CSV `qid,system,prompt,sample,score` or
/// JSONL with the same keys (detected by content). The same answer twice is an error.
pub fn parse_answer_scores(name: &str, text: &str) -> Result<(Vec<AnswerScore>, Vec<Warning>)> {
    let mut scores = Vec::new();
    let mut lines = Vec::new();
    let mut warnings = Vec::new();
    let mut unknown = Tally::new(name);
    if first_content_char(text) == Some('{') {
        check_line_ends(name, text)?;
        for (line, row) in content_lines(text) {
            let record = parse_record(name, line, row)?;
            for field in record.unknown_fields(&SCORE_FIELDS) {
                unknown.add(format!("ignored unknown field `{field}` on lines"), line.to_string());
            }
            scores.push(AnswerScore {
                qid: record.non_empty_label("qid")?,
                system: non_empty_string(&record, "system")?,
                prompt: non_empty_string(&record, "prompt")?,
                sample: record.unsigned("sample")?,
                score: record.number("score")?,
            });
            lines.push(line);
        }
    } else {
        let (mut reader, header, mut csv_lines) = open_csv(name, text)?;
        let cols = header.require_all(name, &SCORE_FIELDS)?;
        warnings.extend(header.unknown_columns(name, |c| SCORE_FIELDS.contains(&c)));
        for record in reader.records() {
            let record = record.map_err(|e| csv_lines.error(name, e))?;
            let line = csv_lines.of(&record);
            let field = |i: usize| non_empty(name, line, SCORE_FIELDS[i], &record, cols[i]);
            scores.push(AnswerScore {
                qid: field(0)?.to_owned(),
                system: field(1)?.to_owned(),
                prompt: field(2)?.to_owned(),
                sample: parse_unsigned(name, line, "sample", field(3)?)?,
                score: parse_number(name, line, "score", field(4)?)?,
            });
            lines.push(line);
        }
    }
    if scores.is_empty() {
        return Err(nothing_to_read(name, text, "no answer scores in the file"));
    }
    warnings.extend(unknown.into_warnings());
    let mut first_line: HashMap<(String, String), usize> = HashMap::new();
    for (score, line) in scores.iter().zip(&lines) {
        if let Some(first) = first_line.insert((score.qid.clone(), score.answer_id()), *line) {
            return Err(Error::input(
                name,
                *line,
                "sample",
                format!(
                    "answer `{}` to query `{}` is scored twice (also on line {first})",
                    score.answer_id(),
                    score.qid
                ),
            ));
        }
    }
    Ok((scores, warnings))
}

// ---------------------------------------------------------------------------------------
// Cross-checks

/// Everything NRP reads, for [`check_nrp_inputs`]. Optional parts are checked when given.
#[derive(Debug, Clone, Copy)]
pub struct NrpInputs<'a> {
    pub topics: &'a [Topic],
    pub judgments: &'a [Judgments],
    pub answers: &'a [Answer],
    pub documents: Option<&'a [Document]>,
    pub run: Option<&'a [RunEntry]>,
    pub answer_scores: Option<&'a [AnswerScore]>,
    pub expert_rankings: Option<&'a HumanRankings>,
}

/// Checks that the NRP inputs fit together. Errors: the same answer twice (e.g. two files
/// for the same system and prompt), and expert-ranking rows for an unknown query or item
/// (item = a docno judged for that query, a document, or an answer id `system/prompt/sample`
/// of that query). Warnings, each with a count and ids: judgements for queries that are not
/// topics; topics without judged documents in a dimension (their NRP is undefined) or
/// without answers; (system, prompt) pairs with different numbers of samples per query;
/// judged documents missing from the documents or from the run; scores without an answer.
/// Answers for a query that is not a topic, and answers a ranker did not score, are errors
/// located in their files: [`check_answers_have_topics`], [`check_answers_scored`].
pub fn check_nrp_inputs(inputs: &NrpInputs) -> Result<Vec<Warning>> {
    let topics: BTreeSet<&str> = inputs.topics.iter().map(|t| t.qid.as_str()).collect();
    let mut tally = Tally::new("NRP inputs");

    let mut answer_ids: HashSet<(&str, String)> = HashSet::new();
    for a in inputs.answers {
        if !answer_ids.insert((a.qid.as_str(), a.id())) {
            return Err(Error::invalid(format!(
                "answer `{}` to query `{}` is given twice (two answer files for the same system and prompt?)",
                a.id(),
                a.qid
            )));
        }
    }

    for j in inputs.judgments {
        for qid in j.grades.keys().filter(|q| !topics.contains(q.as_str())) {
            tally.add(format!("queries with {} judgements but no topic", j.dimension), qid.clone());
        }
        for qid in &topics {
            if j.grades.get(*qid).is_none_or(|docs| docs.is_empty()) {
                tally.add(
                    format!("topics without a judged document in {} (NRP undefined there)", j.dimension),
                    qid.to_string(),
                );
            }
        }
    }

    let mut samples: BTreeMap<(&str, &str), BTreeMap<&str, usize>> = BTreeMap::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for a in inputs.answers {
        answered.insert(a.qid.as_str());
        *samples.entry((&a.system, &a.prompt)).or_default().entry(&a.qid).or_default() += 1;
    }
    for qid in topics.iter().filter(|q| !answered.contains(*q)) {
        tally.add("topics without any answer", qid.to_string());
    }
    for ((system, prompt), per_query) in &samples {
        let counts: BTreeSet<usize> = per_query.values().copied().collect();
        let missing_queries = topics.iter().filter(|q| !per_query.contains_key(*q)).count();
        if counts.len() > 1 || missing_queries > 0 {
            let counts: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
            tally.add(
                format!("system/prompt pairs with an uneven number of samples per query ({} samples; {missing_queries} topics unanswered)", counts.join(" or ")),
                format!("{system}/{prompt}"),
            );
        }
    }

    let judged: BTreeSet<(&str, &str)> = inputs
        .judgments
        .iter()
        .flat_map(|j| j.grades.iter().flat_map(|(q, docs)| docs.keys().map(move |d| (q.as_str(), d.as_str()))))
        .collect();
    if let Some(documents) = inputs.documents {
        let docnos: HashSet<&str> = documents.iter().map(|d| d.docno.as_str()).collect();
        for (qid, docno) in &judged {
            if !docnos.contains(docno) {
                tally.add("judged documents without a text in the documents file", format!("{qid}:{docno}"));
            }
        }
    }
    if let Some(run) = inputs.run {
        let scored: HashSet<(&str, &str)> = run.iter().map(|r| (r.qid.as_str(), r.docno.as_str())).collect();
        for (qid, docno) in &judged {
            if !scored.contains(&(*qid, *docno)) {
                tally.add("judged documents without a score in the run", format!("{qid}:{docno}"));
            }
        }
    }
    if let Some(scores) = inputs.answer_scores {
        for s in scores {
            if !answer_ids.contains(&(s.qid.as_str(), s.answer_id())) {
                tally.add("scores for answers that are not in the answers", format!("{}:{}", s.qid, s.answer_id()));
            }
        }
    }

    if let Some(expert) = inputs.expert_rankings {
        check_expert_items(expert, inputs, &topics, &judged, &answer_ids)?;
    }
    Ok(tally.into_warnings())
}

fn check_expert_items(
    expert: &HumanRankings,
    inputs: &NrpInputs,
    topics: &BTreeSet<&str>,
    judged: &BTreeSet<(&str, &str)>,
    answer_ids: &HashSet<(&str, String)>,
) -> Result<()> {
    let documents: HashSet<&str> = inputs.documents.unwrap_or(&[]).iter().map(|d| d.docno.as_str()).collect();
    for row in &expert.rows {
        if !topics.contains(row.instance.as_str()) {
            return Err(Error::input(
                &expert.name,
                row.line,
                "instance",
                format!("query `{}` is not a topic", row.instance),
            ));
        }
        let item = row.system.as_str();
        let known = judged.contains(&(row.instance.as_str(), item))
            || documents.contains(item)
            || answer_ids.contains(&(row.instance.as_str(), item.to_owned()));
        if !known {
            return Err(Error::input(
                &expert.name,
                row.line,
                "system",
                format!(
                    "`{item}` is neither a document judged for query `{}` nor an answer id `system/prompt/sample` of it",
                    row.instance
                ),
            ));
        }
    }
    Ok(())
}

/// Every answer of a file must be for a topic: the first that is not is an error at its
/// line (`text` is the file's text, searched again only to name that line).
pub fn check_answers_have_topics(file: &str, text: &str, answers: &[Answer], topics: &[Topic]) -> Result<()> {
    let qids: HashSet<&str> = topics.iter().map(|t| t.qid.as_str()).collect();
    let Some(answer) = answers.iter().find(|a| !qids.contains(a.qid.as_str())) else {
        return Ok(());
    };
    let others = answers.iter().filter(|a| !qids.contains(a.qid.as_str())).count() - 1;
    let message = format!(
        "answer `{}` is for query `{}`, which is not a topic{}",
        answer.id(),
        answer.qid,
        if others > 0 {
            format!(" ({others} more answers in this file are for queries that are not topics)")
        } else {
            String::new()
        }
    );
    Err(match line_of_qid(text, &answer.qid) {
        Some(line) => Error::input(file, line, "qid", message),
        None => Error::in_file(file, message),
    })
}

/// The line of the first record (JSONL line or CSV row) whose `qid` is `qid`.
fn line_of_qid(text: &str, qid: &str) -> Option<usize> {
    if first_content_char(text) == Some('{') {
        return content_lines(text).find_map(|(line, row)| {
            let record = parse_record("", line, row).ok()?;
            (record.label("qid").ok()? == qid).then_some(line)
        });
    }
    let mut reader = csv_reader(text);
    let column = reader.headers().ok()?.iter().position(|h| h == "qid")?;
    let mut lines = crate::data::common::CsvLines::new(text);
    reader.records().flatten().find(|r| r.get(column) == Some(qid)).map(|r| lines.of(&r))
}

/// A precomputed ranker must score every answer: NRP places each answer by its score, so
/// one without is an error naming the scores file, the answer and how many more lack one.
pub fn check_answers_scored(scores_file: &str, scores: &[AnswerScore], answers: &[Answer]) -> Result<()> {
    let scored: HashSet<(&str, String)> = scores.iter().map(|s| (s.qid.as_str(), s.answer_id())).collect();
    let unscored: Vec<&Answer> = answers.iter().filter(|a| !scored.contains(&(a.qid.as_str(), a.id()))).collect();
    match unscored.first() {
        None => Ok(()),
        Some(a) => Err(Error::in_file(
            scores_file,
            format!(
                "no score for answer `{}` of query `{}`{}; a ranker must score every answer",
                a.id(),
                a.qid,
                match unscored.len() - 1 {
                    0 => String::new(),
                    n => format!(" ({n} more answers have none)"),
                }
            ),
        )),
    }
}

/// Warnings where the `query` column of an answers CSV differs from the topic's query
/// (after collapsing whitespace): the answers may belong to other topics.
pub fn check_answer_queries(file: &str, queries: &[Topic], topics: &[Topic]) -> Vec<Warning> {
    let by_qid: HashMap<&str, &str> = topics.iter().map(|t| (t.qid.as_str(), t.query.as_str())).collect();
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut tally = Tally::new(file);
    for q in queries {
        if let Some(topic_query) = by_qid.get(q.qid.as_str()) {
            if flat(topic_query) != flat(&q.query) {
                tally.add("queries whose text differs from the topic's query", q.qid.clone());
            }
        }
    }
    tally.into_warnings()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{parse_qrels_combined, parse_rankings, parse_run, parse_topics, NotJudgeable};

    const DOCS: &str = include_str!("../../examples/nrp/docs.tsv");
    const ANSWERS_JSONL: &str = include_str!("../../examples/nrp/answers.jsonl");
    const SCORES: &str = include_str!("../../examples/nrp/answer_scores.csv");
    const EXPERT: &str = include_str!("../../examples/nrp/expert_rankings.csv");
    const CORPUS: &str = include_str!("../../examples/corpus.jsonl");
    const ANSWER_FILES: [(&str, &str); 4] = [
        (
            "examples/nrp/answers/gpt-3.5-turbo__multimedqa.csv",
            include_str!("../../examples/nrp/answers/gpt-3.5-turbo__multimedqa.csv"),
        ),
        (
            "examples/nrp/answers/gpt-3.5-turbo__no_prompt.csv",
            include_str!("../../examples/nrp/answers/gpt-3.5-turbo__no_prompt.csv"),
        ),
        (
            "examples/nrp/answers/llama-2-13b__multimedqa.csv",
            include_str!("../../examples/nrp/answers/llama-2-13b__multimedqa.csv"),
        ),
        (
            "examples/nrp/answers/llama-2-13b__no_prompt.csv",
            include_str!("../../examples/nrp/answers/llama-2-13b__no_prompt.csv"),
        ),
    ];

    fn location(err: &Error) -> (Option<usize>, Option<&str>) {
        let loc = err.location().expect("located");
        (loc.line, loc.field.as_deref())
    }

    fn example_answers_from_csv() -> Vec<Answer> {
        let mut all = Vec::new();
        for (name, text) in ANSWER_FILES {
            let (system, prompt) = system_prompt_from_file_name(name).unwrap();
            let (answers, _, warnings) = parse_answers_csv(name, text, &system, &prompt).unwrap();
            assert!(warnings.is_empty());
            all.extend(answers);
        }
        all
    }

    #[test]
    fn example_documents_and_corpus_parse() {
        let (docs, warnings) = parse_documents("docs.tsv", DOCS).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(docs.len(), 40);
        assert_eq!(docs[0].docno, "web-101-01");
        let (corpus, _) = parse_documents("corpus.jsonl", CORPUS).unwrap();
        assert_eq!(corpus.len(), 30);
        assert!(corpus.iter().any(|d| d.text.contains("β-blockers")));
    }

    #[test]
    fn document_errors_and_header() {
        let (docs, _) = parse_documents("d.tsv", "docno\ttext\nd1\ta\tb\n").unwrap();
        assert_eq!(docs, [Document { docno: "d1".into(), text: "a\tb".into() }]);
        let err = parse_documents("d.tsv", "d1\ta\nd2 no tab\n").unwrap_err();
        assert_eq!(location(&err), (Some(2), None));
        let err = parse_documents("d.tsv", "d1\ta\n\nd1\tb\n").unwrap_err();
        assert_eq!(location(&err), (Some(3), Some("docno")));
        assert!(err.to_string().ends_with("duplicate docno `d1` (also on line 1)"));
        let err = parse_documents("d.jsonl", "{\"docno\": \"d1\"}").unwrap_err();
        assert_eq!(location(&err), (Some(1), Some("text")));
    }

    #[test]
    fn example_answers_csv_and_jsonl_are_the_same_answers() {
        let from_csv: BTreeSet<(String, String)> =
            example_answers_from_csv().iter().map(|a| (a.qid.clone() + " " + &a.id(), a.text.clone())).collect();
        let (from_jsonl, warnings) = parse_answers_jsonl("answers.jsonl", ANSWERS_JSONL).unwrap();
        assert!(warnings.is_empty());
        let from_jsonl: BTreeSet<(String, String)> =
            from_jsonl.iter().map(|a| (a.qid.clone() + " " + &a.id(), a.text.clone())).collect();
        assert_eq!(from_csv.len(), 60);
        assert_eq!(from_csv, from_jsonl);
        assert!(from_csv.iter().any(|(id, _)| id == "101 gpt-3.5-turbo/multimedqa/2"), "answer3 is sample 2");
    }

    #[test]
    fn file_names_give_system_and_prompt() {
        assert_eq!(
            system_prompt_from_file_name("a/b\\llama-2-13b__no_prompt.csv"),
            Some(("llama-2-13b".into(), "no_prompt".into()))
        );
        assert_eq!(system_prompt_from_file_name("answers.csv"), None);
    }

    #[test]
    fn answers_csv_errors_and_empty_cells() {
        let err = parse_answers_csv("a.csv", "qid,query,text\n1,q,x\n", "s", "p").unwrap_err();
        assert_eq!(location(&err), (Some(1), Some("answer1")));
        let err = parse_answers_csv("a.csv", "qid,query,answer1\n1,q,x\n2,,y\n", "s", "p").unwrap_err();
        assert_eq!(location(&err), (Some(3), Some("query")));
        let err = parse_answers_csv("a.csv", "qid,query,answer1\n1,q,x\n1,q,y\n", "s", "p").unwrap_err();
        assert_eq!(location(&err), (Some(3), Some("qid")));
        let (answers, queries, warnings) = parse_answers_csv(
            "a.csv",
            "qid,query,answer1,answer2,model\n1,\"q, with comma\",,\"two\nlines\",m\n",
            "s",
            "p",
        )
        .unwrap();
        assert_eq!(answers.len(), 2);
        assert_eq!(answers[1].text, "two\nlines");
        assert_eq!(queries[0].query, "q, with comma");
        let messages: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            messages,
            ["a.csv:1: ignored unknown column(s): model", "a.csv: empty answers (kept) in column `answer1`: 1 (1)"]
        );
    }

    #[test]
    fn answers_and_scores_jsonl_refuse_blank_names() {
        // `"system": ""` was accepted and reported as a system without a name.
        for (field, line) in [
            ("system", r#"{"qid": "1", "system": "", "prompt": "p", "sample": 0, "text": "t"}"#),
            ("prompt", r#"{"qid": "1", "system": "s", "prompt": " ", "sample": 0, "text": "t"}"#),
            ("qid", r#"{"qid": "", "system": "s", "prompt": "p", "sample": 0, "text": "t"}"#),
        ] {
            let good = r#"{"qid": "1", "system": "s", "prompt": "p", "sample": 9, "text": "t"}"#;
            let text = format!("{good}\n{line}\n");
            let err = parse_answers_jsonl("a.jsonl", &text).unwrap_err();
            assert_eq!(err.to_string(), format!("a.jsonl:2: field `{field}`: `{field}` is empty"));
            let scores = line.replace("\"text\": \"t\"", "\"score\": 1.5");
            let err = parse_answer_scores("s.jsonl", &scores).unwrap_err();
            assert_eq!(err.to_string(), format!("s.jsonl:1: field `{field}`: `{field}` is empty"));
        }
    }

    #[test]
    fn answers_for_queries_that_are_not_topics_are_errors_at_their_line() {
        let topics = [Topic { qid: "101".into(), query: "q".into() }];
        let jsonl = "{\"qid\": \"101\", \"system\": \"s\", \"prompt\": \"p\", \"sample\": 0, \"text\": \"t\"}\n\n\
                     {\"qid\": 999, \"system\": \"s\", \"prompt\": \"p\", \"sample\": 0, \"text\": \"t\"}\n";
        let (answers, _) = parse_answers_jsonl("a.jsonl", jsonl).unwrap();
        let err = check_answers_have_topics("a.jsonl", jsonl, &answers, &topics).unwrap_err();
        assert_eq!(err.to_string(), "a.jsonl:3: field `qid`: answer `s/p/0` is for query `999`, which is not a topic");
        // CSV: the row's line (header = line 1); its three samples count as one plus 2 more.
        let csv = "qid,query,answer1,answer2,answer3\n101,q,a,b,c\n998,x,a,b,c\n";
        let (answers, _, _) = parse_answers_csv("m__p.csv", csv, "m", "p").unwrap();
        let err = check_answers_have_topics("m__p.csv", csv, &answers, &topics).unwrap_err();
        assert_eq!(err.to_string(), "m__p.csv:3: field `qid`: answer `m/p/0` is for query `998`, which is not a topic (2 more answers in this file are for queries that are not topics)");
        let (answers, _, _) = parse_answers_csv("m__p.csv", "qid,query,answer1\n101,q,a\n", "m", "p").unwrap();
        assert!(check_answers_have_topics("m__p.csv", "", &answers, &topics).is_ok());
    }

    #[test]
    fn answers_without_a_score_are_errors_naming_the_scores_file() {
        let answers = example_answers_from_csv();
        let (scores, _) = parse_answer_scores("answer_scores.csv", SCORES).unwrap();
        assert!(check_answers_scored("answer_scores.csv", &scores, &answers).is_ok());
        // Without its first two score rows, the first two answers of the CSV files are unscored.
        let err = check_answers_scored("answer_scores.csv", &scores[2..], &answers).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("answer_scores.csv: no score for answer `{}` of query `{}` (1 more answers have none); a ranker must score every answer", scores[0].answer_id(), scores[0].qid)
        );
    }

    #[test]
    fn answers_jsonl_duplicate_names_both_lines() {
        let line = r#"{"qid": 1, "system": "s", "prompt": "p", "sample": 0, "text": "t"}"#;
        let err = parse_answers_jsonl("a.jsonl", &format!("{line}\n{line}\n")).unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("sample")));
        assert!(err.to_string().ends_with("answer `s/p/0` to query `1` appears twice (also on line 1)"));
        let err = parse_answers_jsonl("a.jsonl", &line.replace("0,", "-1,")).unwrap_err();
        assert_eq!(location(&err), (Some(1), Some("sample")));
    }

    #[test]
    fn answer_scores_in_both_formats() {
        let (scores, warnings) = parse_answer_scores("answer_scores.csv", SCORES).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(scores.len(), 60);
        assert_eq!(scores[0].answer_id(), "gpt-3.5-turbo/no_prompt/0");
        let jsonl = r#"{"qid": "1", "system": "s", "prompt": "p", "sample": 2, "score": 1.5}"#;
        let (scores, _) = parse_answer_scores("s.jsonl", jsonl).unwrap();
        assert_eq!(
            scores[0],
            AnswerScore { qid: "1".into(), system: "s".into(), prompt: "p".into(), sample: 2, score: 1.5 }
        );
        let err = parse_answer_scores("s.csv", "qid,system,prompt,sample,score\n1,s,p,0,1\n1,s,p,0,2\n").unwrap_err();
        assert_eq!(location(&err), (Some(3), Some("sample")));
        let err = parse_answer_scores("s.csv", "qid,system,prompt,sample,score\n1,s,p,0,NaN\n").unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("score")));
    }

    #[test]
    fn the_example_nrp_inputs_fit_together() {
        let (topics, _) = parse_topics("topics.xml", include_str!("../../examples/nrp/topics.xml")).unwrap();
        let (judgments, _) = parse_qrels_combined(
            "qrels.combined.txt",
            include_str!("../../examples/nrp/qrels.combined.txt"),
            &NotJudgeable::clef_ehealth_2021(),
        )
        .unwrap();
        let (docs, _) = parse_documents("docs.tsv", DOCS).unwrap();
        let (run, _) = parse_run("run.bm25.txt", include_str!("../../examples/nrp/run.bm25.txt")).unwrap();
        let (scores, _) = parse_answer_scores("answer_scores.csv", SCORES).unwrap();
        let (expert, _) = parse_rankings("expert_rankings.csv", EXPERT).unwrap();
        let answers = example_answers_from_csv();
        let inputs = NrpInputs {
            topics: &topics,
            judgments: &judgments,
            answers: &answers,
            documents: Some(&docs),
            run: Some(&run),
            answer_scores: Some(&scores),
            expert_rankings: Some(&expert),
        };
        assert_eq!(check_nrp_inputs(&inputs).unwrap(), []);
        for (name, text) in ANSWER_FILES {
            let (system, prompt) = system_prompt_from_file_name(name).unwrap();
            let (_, queries, _) = parse_answers_csv(name, text, &system, &prompt).unwrap();
            assert_eq!(check_answer_queries(name, &queries, &topics), []);
        }

        // Now break it: drop a topic, a document, a run line, a score, and one sample.
        let fewer_topics = &topics[1..];
        let fewer_answers: Vec<Answer> =
            answers.iter().filter(|a| !(a.qid == "102" && a.id() == "llama-2-13b/no_prompt/2")).cloned().collect();
        let inputs = NrpInputs {
            topics: fewer_topics,
            documents: Some(&docs[1..]),
            run: Some(&run[1..]),
            answer_scores: Some(&scores[1..]),
            answers: &fewer_answers,
            expert_rankings: None,
            ..inputs
        };
        let messages: Vec<String> = check_nrp_inputs(&inputs).unwrap().iter().map(|w| w.to_string()).collect();
        assert_eq!(
            messages,
            [
                "NRP inputs: queries with relevance judgements but no topic: 1 (101)",
                "NRP inputs: queries with credibility judgements but no topic: 1 (101)",
                "NRP inputs: queries with readability judgements but no topic: 1 (101)",
                "NRP inputs: system/prompt pairs with an uneven number of samples per query (2 or 3 samples; 0 topics unanswered): 1 (llama-2-13b/no_prompt)",
                "NRP inputs: judged documents without a text in the documents file: 1 (101:web-101-01)",
                "NRP inputs: judged documents without a score in the run: 1 (101:web-101-03)",
                "NRP inputs: scores for answers that are not in the answers: 1 (102:llama-2-13b/no_prompt/2)",
            ]
        );
    }

    /// The example's precomputed scores were made by a Python BM25 (Lucene form, k1 = 0.9,
    /// b = 0.4, collection statistics from docs.tsv only) and rounded to 4 decimals; medrank's
    /// own BM25 must give the same numbers, so the demo's "precomputed" and "computed" paths
    /// agree.
    #[test]
    fn example_scores_are_medranks_bm25_over_the_documents() {
        use crate::eval::bm25::{Bm25Index, Bm25Params};
        let (topics, _) = parse_topics("topics.jsonl", include_str!("../../examples/nrp/topics.jsonl")).unwrap();
        let query = |qid: &str| topics.iter().find(|t| t.qid == qid).unwrap().query.clone();
        let (docs, _) = parse_documents("docs.tsv", DOCS).unwrap();
        let pairs: Vec<(&str, &str)> = docs.iter().map(|d| (d.docno.as_str(), d.text.as_str())).collect();
        let index = Bm25Index::new(&pairs, Bm25Params::anserini());
        let (run, _) = parse_run("run.bm25.txt", include_str!("../../examples/nrp/run.bm25.txt")).unwrap();
        for entry in &run {
            let position = docs.iter().position(|d| d.docno == entry.docno).unwrap();
            let score = index.score(&query(&entry.qid))[position];
            assert!((score - entry.score).abs() < 5e-5, "{}: {score} vs {}", entry.docno, entry.score);
        }
        let answers = example_answers_from_csv();
        let (scores, _) = parse_answer_scores("answer_scores.csv", SCORES).unwrap();
        for s in &scores {
            let answer = answers.iter().find(|a| a.qid == s.qid && a.id() == s.answer_id()).unwrap();
            let score = index.score_external(&query(&s.qid), &answer.text);
            assert!((score - s.score).abs() < 5e-5, "{}: {score} vs {}", s.answer_id(), s.score);
        }
    }

    #[test]
    fn expert_items_must_exist_and_answers_must_be_unique() {
        let (topics, _) = parse_topics("t.jsonl", "{\"qid\": \"1\", \"query\": \"q\"}").unwrap();
        let answer = Answer { qid: "1".into(), system: "s".into(), prompt: "p".into(), sample: 0, text: "t".into() };
        let (judgments, _) = parse_qrels_combined("q", "qid docno rel\n1 d1 2\n", &NotJudgeable::none()).unwrap();
        let check = |rankings: &str, answers: &[Answer]| {
            let (expert, _) = parse_rankings("e.csv", rankings).unwrap();
            let inputs = NrpInputs {
                topics: &topics,
                judgments: &judgments,
                answers,
                documents: None,
                run: None,
                answer_scores: None,
                expert_rankings: Some(&expert),
            };
            check_nrp_inputs(&inputs)
        };
        let header = "instance,annotator,system,rank\n";
        let answers = [answer.clone()];
        assert!(check(&format!("{header}1,e,d1,1\n1,e,s/p/0,2\n"), &answers).is_ok());
        let err = check(&format!("{header}1,e,d1,1\n1,e,s/p/1,2\n"), &answers).unwrap_err();
        assert_eq!(location(&err), (Some(3), Some("system")));
        let err = check(&format!("{header}2,e,d1,1\n"), &answers).unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("instance")));
        let err = check(&format!("{header}1,e,d1,1\n"), &[answer.clone(), answer]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "answer `s/p/0` to query `1` is given twice (two answer files for the same system and prompt?)"
        );
    }
}
