//! Rubric responses (HealthBench style): JSONL, one response per line with its rubric's
//! criteria; graded (the criteria a grader said it meets, scored by `eval::rubric`) or
//! ungraded, optionally with the conversation, the response text and several people's
//! judgements per criterion (read by `eval::rubric_agreement`). FORMATS.md, section 7.

use crate::data::common::{check_line_ends, content_lines, nothing_to_read};
use crate::data::json::{parse_record, Json, Record};
use crate::error::{Result, Warning};
use crate::stats::Stat;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The input format, for `--help` texts and the page.
pub const FORMAT: &str = r#"JSONL, one graded response per line:
{"id": "r1", "system": "model-a", "prompt_id": "p1", "tags": ["theme:emergency"],
 "criteria": [{"criterion": "Advises calling emergency services", "points": 10,
               "tags": ["axis:accuracy"], "met": true},
              {"criterion": "Recommends an unsafe dose", "points": -8, "tags": [], "met": false}]}
id, system: string or whole number; (system, id) unique. prompt_id (optional): responses to
the same prompt share it; the bootstrap resamples prompts (default: id). tags (optional):
response-level tags scored with the response score. criteria: non-empty array; criterion:
string; points: number (negative = penalty); tags: optional array of distinct strings; met: boolean.
A response whose points do not add up to finite sums and scores (e.g. 1e308 + 1e308) is refused.
Optional: prompt (a string or [{"role", "content"}] messages), response (a string), and per
criterion met_by ({"grader": true|false}: people's judgements, read by rubric-agreement) and
p_met (a model grader's P(met), 0 to 1: `medrank grade` writes it)."#;

/// One graded criterion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Criterion {
    pub criterion: String,
    pub points: f64,
    pub tags: Vec<String>,
    pub met: bool,
}

/// One graded response as read from the input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GradedResponse {
    pub id: String,
    pub system: String,
    pub prompt_id: Option<String>,
    /// Response-level tags (HealthBench example tags).
    pub tags: Vec<String>,
    pub criteria: Vec<Criterion>,
    /// 1-based line in the input.
    pub line: usize,
}

impl GradedResponse {
    /// The bootstrap unit: the prompt, or the response id when no prompt is given.
    pub fn unit(&self) -> &str {
        self.prompt_id.as_deref().unwrap_or(&self.id)
    }
}

/// One message of a conversation (HealthBench's `prompt` items).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// What the response answers: a plain text, or a conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Messages(Vec<Message>),
}

/// A criterion of a rubric file of any kind (graded, ungraded, judged by several people).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RubricCriterion {
    pub criterion: String,
    /// None only where the file gives no points (a meta-evaluation file: FORMATS.md §7).
    pub points: Option<f64>,
    pub tags: Vec<String>,
    /// The judgement `medrank rubric` scores; None in an ungraded file.
    pub met: Option<bool>,
    /// Judgements of named graders (people), in file order: (grader, met).
    pub met_by: Vec<(String, bool)>,
    /// A model grader's probability that the criterion is met (`medrank grade` writes it
    /// beside `met`), in [0, 1].
    pub p_met: Option<f64>,
    /// Where a drafted criterion comes from (`medrank rubric-draft` writes it).
    pub source: Option<CriterionSource>,
}

/// Where a drafted criterion comes from: the evidence document and the character span
/// (Unicode scalar values, end exclusive) of its statement in the document's text, and,
/// when an NLI model checked it, whether the conversation contradicts it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriterionSource {
    pub document: String,
    pub start: u32,
    pub end: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contradicted: Option<bool>,
}

impl RubricCriterion {
    /// The criterion as `medrank rubric` scores it. Only for criteria read in
    /// `Mode::Graded`, which refuses one without points or `met`.
    fn graded(&self) -> Criterion {
        Criterion {
            criterion: self.criterion.clone(),
            points: self.points.expect("a graded criterion has points"),
            tags: self.tags.clone(),
            met: self.met.expect("a graded criterion has `met`"),
        }
    }
}

/// A response of a rubric file of any kind, as read (FORMATS.md §7).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RubricResponse {
    pub id: String,
    pub system: String,
    pub prompt_id: Option<String>,
    pub tags: Vec<String>,
    pub prompt: Option<Prompt>,
    pub response: Option<String>,
    pub criteria: Vec<RubricCriterion>,
    /// 1-based line in the input.
    pub line: usize,
}

const KNOWN_FIELDS: [&str; 7] = ["id", "system", "prompt_id", "tags", "prompt", "response", "criteria"];
const CRITERION_FIELDS: [&str; 7] = ["criterion", "points", "tags", "met", "met_by", "p_met", "source"];
const SOURCE_FIELDS: [&str; 4] = ["document", "start", "end", "contradicted"];

/// What a reader asks of a file: `Graded` is what scoring needs (points and `met` on every
/// criterion, sums finite: `medrank rubric`); `Any` takes ungraded files and files without
/// points too (the import's output, `rubric-agreement`'s inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Graded,
    Any,
}

/// Parses graded responses (JSONL; blank lines skipped). Errors name file, line and field
/// (`criteria[2].met`; a key twice in one object is one); unknown fields give one warning
/// per name.
pub fn parse_graded(name: &str, text: &str) -> Result<(Vec<GradedResponse>, Vec<Warning>)> {
    let (responses, warnings) = read(name, text, Mode::Graded)?;
    let graded = responses
        .into_iter()
        .map(|r| GradedResponse {
            id: r.id,
            system: r.system,
            prompt_id: r.prompt_id,
            tags: r.tags,
            criteria: r.criteria.iter().map(RubricCriterion::graded).collect(),
            line: r.line,
        })
        .collect();
    Ok((graded, warnings))
}

/// Parses a rubric file of any kind (FORMATS.md §7): graded (every criterion has `met`) or
/// ungraded (none has; a mix is an error at the first criterion that differs), with or
/// without `points`, `met_by`, `prompt` and `response`.
pub fn parse_rubric(name: &str, text: &str) -> Result<(Vec<RubricResponse>, Vec<Warning>)> {
    read(name, text, Mode::Any)
}

fn read(name: &str, text: &str, mode: Mode) -> Result<(Vec<RubricResponse>, Vec<Warning>)> {
    let mut responses: Vec<RubricResponse> = Vec::new();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut unknown: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    // Whether the file's first criterion has `met`, and where it is: every other must agree.
    let mut graded: Option<(bool, usize)> = None;
    check_line_ends(name, text)?;
    for (line, row) in content_lines(text) {
        let record = parse_record(name, line, row)?;
        let id = record.non_empty_label("id")?;
        let system = record.non_empty_label("system")?;
        if let Some(first) = seen.insert((system.clone(), id.clone()), line) {
            return Err(record.error("id", format!("system `{system}` already has a response `{id}` (line {first})")));
        }
        let tags = tag_list(&record)?;
        let criteria = criteria(&record, mode, &mut graded, &mut unknown)?;
        if mode == Mode::Graded {
            // The finite-sum check runs the scoring formula over the criteria as scored.
            let scored: Vec<Criterion> = criteria.iter().map(RubricCriterion::graded).collect();
            check_finite_scores(&record, &scored)?;
        }
        for key in record.unknown_fields(&KNOWN_FIELDS) {
            unknown.entry(key.to_string()).or_insert((line, 0)).1 += 1;
        }
        let prompt = prompt(&record, &mut unknown)?;
        let response = match record.get("response") {
            Some(_) => Some(record.string("response")?.to_string()),
            None => None,
        };
        responses.push(RubricResponse {
            id,
            system,
            prompt_id: match record.get("prompt_id") {
                Some(_) => Some(record.non_empty_label("prompt_id")?),
                None => None,
            },
            tags,
            prompt,
            response,
            criteria,
            line,
        });
    }
    if responses.is_empty() {
        return Err(nothing_to_read(name, text, "no graded responses (the file has no non-blank line)"));
    }
    Ok((responses, unknown_field_warnings(name, unknown)))
}

/// One warning per unknown field name: `unknown` maps it to (first line, lines with it).
pub(crate) fn unknown_field_warnings(name: &str, unknown: BTreeMap<String, (usize, usize)>) -> Vec<Warning> {
    unknown
        .into_iter()
        .map(|(key, (first, count))| {
            Warning::at(
                crate::Location::at(name, first, key.as_str()),
                format!("ignored unknown field `{key}` on {count} line(s)"),
            )
        })
        .collect()
}

/// The optional `prompt`: a string, or an array of `{role, content}` messages.
pub(crate) fn prompt(record: &Record, unknown: &mut BTreeMap<String, (usize, usize)>) -> Result<Option<Prompt>> {
    match record.get("prompt") {
        None => Ok(None),
        Some(Json::String(s)) => Ok(Some(Prompt::Text(s.clone()))),
        Some(Json::Array(_)) => Ok(Some(Prompt::Messages(messages(record, "prompt", unknown)?))),
        Some(other) => Err(record.error(
            "prompt",
            format!("expected a string or an array of {{role, content}} messages, found {}", other.kind()),
        )),
    }
}

/// An array of `{role, content}` messages (HealthBench's `prompt`): role a non-empty
/// string, content a string; other keys are warned about as `FIELD[].KEY`.
pub(crate) fn messages(
    record: &Record,
    field: &str,
    unknown: &mut BTreeMap<String, (usize, usize)>,
) -> Result<Vec<Message>> {
    record
        .objects(field)?
        .iter()
        .map(|m| {
            let role = m.string("role")?;
            if role.trim().is_empty() {
                return Err(m.error("role", "`role` is empty"));
            }
            let content = m.string("content")?.to_string();
            for key in m.unknown_fields(&["role", "content"]) {
                unknown.entry(format!("{field}[].{key}")).or_insert((m.line, 0)).1 += 1;
            }
            Ok(Message { role: role.to_string(), content })
        })
        .collect()
}

/// Writes responses as §7 JSONL, fields in the order of FORMATS.md (absent ones left out);
/// [`parse_rubric`] reads back equal values.
pub fn write_rubric_jsonl(responses: &[RubricResponse]) -> String {
    use serde_json::{Map, Value};
    let strings = |v: &[String]| Value::Array(v.iter().map(|t| Value::String(t.clone())).collect());
    let mut out = String::new();
    for r in responses {
        let mut o = Map::new();
        o.insert("id".into(), r.id.clone().into());
        o.insert("system".into(), r.system.clone().into());
        if let Some(p) = &r.prompt_id {
            o.insert("prompt_id".into(), p.clone().into());
        }
        if !r.tags.is_empty() {
            o.insert("tags".into(), strings(&r.tags));
        }
        if let Some(p) = &r.prompt {
            o.insert("prompt".into(), serde_json::to_value(p).expect("a prompt serializes"));
        }
        if let Some(text) = &r.response {
            o.insert("response".into(), text.clone().into());
        }
        let criteria = r
            .criteria
            .iter()
            .map(|c| {
                let mut o = Map::new();
                o.insert("criterion".into(), c.criterion.clone().into());
                if let Some(points) = c.points {
                    o.insert("points".into(), points_value(points));
                }
                o.insert("tags".into(), strings(&c.tags));
                if let Some(met) = c.met {
                    o.insert("met".into(), met.into());
                }
                if let Some(p) = c.p_met {
                    o.insert("p_met".into(), p.into());
                }
                if !c.met_by.is_empty() {
                    let by: Map<String, Value> = c.met_by.iter().map(|(g, m)| (g.clone(), Value::Bool(*m))).collect();
                    o.insert("met_by".into(), Value::Object(by));
                }
                if let Some(source) = &c.source {
                    o.insert("source".into(), serde_json::to_value(source).expect("a source serializes"));
                }
                Value::Object(o)
            })
            .collect();
        o.insert("criteria".into(), Value::Array(criteria));
        out.push_str(&Value::Object(o).to_string());
        out.push('\n');
    }
    out
}

/// Whole points as integers (`5`, not `5.0`), as HealthBench writes them.
fn points_value(points: f64) -> serde_json::Value {
    if points.fract() == 0.0 && points.abs() < 9.0e15 {
        serde_json::Value::from(points as i64)
    } else {
        serde_json::Value::from(points)
    }
}

/// Points achieved over points possible for a set of criteria.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointsScore {
    /// Σ points of the criteria met, penalties included.
    pub achieved: f64,
    /// Σ positive points.
    pub possible: f64,
    /// achieved / possible, unclipped; undefined when `possible` is 0.
    pub score: Stat<f64>,
}

/// The HealthBench formula over `criteria` (the method, `eval::rubric`, scores with it).
pub fn score_criteria<'a>(criteria: impl IntoIterator<Item = &'a Criterion>) -> PointsScore {
    let (mut achieved, mut possible) = (0.0, 0.0);
    for c in criteria {
        if c.points > 0.0 {
            possible += c.points;
        }
        if c.met {
            achieved += c.points;
        }
    }
    let score = if possible > 0.0 {
        Stat::Defined(achieved / possible)
    } else {
        Stat::undefined("no criterion with positive points")
    };
    PointsScore { achieved, possible, score }
}

/// The largest magnitude of a criterion's points (HealthBench's go from -10 to 10): every
/// reader of rubric files takes points within it, so that no sum of them overflows and a
/// graded file written by `medrank grade` reads back (points of 1e308 gave undefined
/// means, and a graded file that `medrank rubric` then refused).
pub const MAX_POINTS: f64 = 1e6;

/// A criterion's `points`: a number from -[`MAX_POINTS`] to [`MAX_POINTS`].
pub(crate) fn points(item: &Record) -> Result<f64> {
    let points = item.number("points")?;
    if points.abs() > MAX_POINTS {
        return Err(item.error(
            "points",
            format!("{points:e} is beyond the points a criterion may have (from -{MAX_POINTS:e} to {MAX_POINTS:e})"),
        ));
    }
    Ok(points)
}

/// The sums and scores of a response (overall and per criterion tag) must be finite
/// numbers: points such as 1e308 overflow a sum, and the report would show `null`. (The
/// check uses the method's own formula, [`score_criteria`].)
fn check_finite_scores(record: &Record, criteria: &[Criterion]) -> Result<()> {
    let mut groups: BTreeMap<&str, Vec<&Criterion>> = BTreeMap::new();
    groups.insert("", criteria.iter().collect());
    for c in criteria {
        for t in &c.tags {
            groups.entry(t.as_str()).or_default().push(c);
        }
    }
    for (tag, group) in groups {
        let s = score_criteria(group);
        let score_finite = s.score.value().is_none_or(|v| v.is_finite());
        if !(s.achieved.is_finite() && s.possible.is_finite() && score_finite) {
            let scope = if tag.is_empty() { String::new() } else { format!(" of tag `{tag}`") };
            return Err(record.error(
                "criteria",
                format!(
                    "the points{scope} do not add up to a finite score (met {:e}, possible {:e}); points must be ordinary numbers",
                    s.achieved, s.possible
                ),
            ));
        }
    }
    Ok(())
}

fn criteria(
    record: &Record,
    mode: Mode,
    graded: &mut Option<(bool, usize)>,
    unknown: &mut BTreeMap<String, (usize, usize)>,
) -> Result<Vec<RubricCriterion>> {
    let items = record.objects("criteria")?;
    if items.is_empty() {
        return Err(record.error("criteria", "needs at least one criterion"));
    }
    items
        .iter()
        .map(|item| {
            let criterion = item.string("criterion")?;
            if criterion.trim().is_empty() {
                return Err(item.error("criterion", "`criterion` is empty"));
            }
            let points = match (mode, item.get("points")) {
                (Mode::Any, None) => None,
                _ => Some(points(item)?),
            };
            let met = match (mode, item.get("met")) {
                (Mode::Graded, None) => {
                    return Err(item.error("met", "missing field `met` (was the criterion graded?)"));
                }
                (Mode::Any, None) => None,
                _ => Some(item.boolean("met")?),
            };
            // A file is graded or ungraded throughout: a criterion without `met` in a graded
            // file would otherwise be scored as not met, or left out, without a word.
            match *graded {
                None => *graded = Some((met.is_some(), item.line)),
                Some((first, line)) if first != met.is_some() => {
                    let (has, lacks) = if first { ("has `met`", "has none") } else { ("has no `met`", "has one") };
                    return Err(item.error(
                        "met",
                        format!(
                            "the file's first criterion (line {line}) {has} and this one {lacks}: a file is \
                             graded (every criterion has `met`) or ungraded (none has) throughout"
                        ),
                    ));
                }
                Some(_) => {}
            }
            let tags = tag_list(item)?;
            let met_by = match item.get("met_by") {
                None => Vec::new(),
                Some(_) => {
                    let judged = item.boolean_map("met_by")?;
                    if judged.is_empty() {
                        return Err(
                            item.error("met_by", "`met_by` is empty: leave it out where nobody judged the criterion")
                        );
                    }
                    if let Some((grader, _)) = judged.iter().find(|(g, _)| g.trim().is_empty()) {
                        return Err(item.error(&format!("met_by.{grader}"), "empty grader name"));
                    }
                    judged
                }
            };
            let p_met = match item.get("p_met") {
                None | Some(Json::Null) => None,
                Some(_) => {
                    let p = item.number("p_met")?;
                    if !(0.0..=1.0).contains(&p) {
                        return Err(item.error("p_met", format!("{p} is not a probability (0 to 1)")));
                    }
                    Some(p)
                }
            };
            let source = match item.get("source") {
                None => None,
                Some(_) => Some(criterion_source(item, unknown)?),
            };
            for key in item.unknown_fields(&CRITERION_FIELDS) {
                unknown.entry(format!("criteria[].{key}")).or_insert((item.line, 0)).1 += 1;
            }
            Ok(RubricCriterion { criterion: criterion.to_string(), points, tags, met, met_by, p_met, source })
        })
        .collect()
}

/// A criterion's `source`: `{document, start, end, contradicted?}` (FORMATS.md §7).
fn criterion_source(item: &Record, unknown: &mut BTreeMap<String, (usize, usize)>) -> Result<CriterionSource> {
    let source = item.object_record("source")?;
    let document = source.non_empty_label("document")?;
    let (start, end) = (source.unsigned("start")?, source.unsigned("end")?);
    if end < start {
        return Err(source.error("end", format!("the span ends ({end}) before it starts ({start})")));
    }
    let contradicted = match source.get("contradicted") {
        None => None,
        Some(_) => Some(source.boolean("contradicted")?),
    };
    for key in source.unknown_fields(&SOURCE_FIELDS) {
        unknown.entry(format!("criteria[].source.{key}")).or_insert((item.line, 0)).1 += 1;
    }
    Ok(CriterionSource { document, start, end, contradicted })
}

/// The optional `tags` of a record: an array of distinct, non-empty strings.
pub(crate) fn tag_list(record: &Record) -> Result<Vec<String>> {
    tags_in(record, "tags")
}

/// The optional tag array `field` of a record (`tags`; HealthBench's `example_tags`).
pub(crate) fn tags_in(record: &Record, field: &str) -> Result<Vec<String>> {
    if record.get(field).is_none() {
        return Ok(Vec::new());
    }
    let tags = record.string_array(field)?;
    for (i, tag) in tags.iter().enumerate() {
        if tag.trim().is_empty() {
            return Err(record.error(&format!("{field}[{i}]"), "empty tag"));
        }
        if tags[..i].contains(tag) {
            return Err(record.error(&format!("{field}[{i}]"), format!("tag `{tag}` is listed twice")));
        }
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"id": "r", "system": "s", "criteria": [{"criterion": "a", "points": 1}, {"criterion": "b", "points": -2, "tags": ["axis:accuracy"]}]}"#;

    fn err(text: &str) -> String {
        parse_rubric("g.jsonl", text).unwrap_err().to_string()
    }

    #[test]
    fn a_model_graders_probability_reads_and_writes_back() {
        let text = r#"{"id": "r", "system": "s", "criteria": [{"criterion": "a", "points": 1, "tags": [], "met": true, "p_met": 0.75}, {"criterion": "b", "points": 2, "tags": [], "met": false, "p_met": null}]}
"#;
        let (rs, warnings) = parse_rubric("g.jsonl", text).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!((rs[0].criteria[0].p_met, rs[0].criteria[1].p_met), (Some(0.75), None));
        assert_eq!(parse_rubric("g.jsonl", &write_rubric_jsonl(&rs)).unwrap().0, rs);
        let e = err(r#"{"id": "r", "system": "s", "criteria": [{"criterion": "a", "points": 1, "p_met": 1.5}]}"#);
        assert!(e.ends_with("g.jsonl:1: field `criteria[0].p_met`: 1.5 is not a probability (0 to 1)"), "{e}");
    }

    #[test]
    fn a_drafted_criterions_source_reads_and_writes_back() {
        let text = r#"{"id": "p", "system": "draft", "criteria": [{"criterion": "a", "points": 5, "source": {"document": "guide.md", "start": 107, "end": 160, "contradicted": true}}, {"criterion": "b", "points": 5, "source": {"document": 7, "start": 0, "end": 0}}]}
"#;
        let (rs, warnings) = parse_rubric("d.jsonl", text).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let source = |document: &str, start, end, contradicted| {
            Some(CriterionSource { document: document.into(), start, end, contradicted })
        };
        assert_eq!(rs[0].criteria[0].source, source("guide.md", 107, 160, Some(true)));
        assert_eq!(rs[0].criteria[1].source, source("7", 0, 0, None));
        assert_eq!(parse_rubric("d.jsonl", &write_rubric_jsonl(&rs)).unwrap().0, rs);
        let with = |source: &str| {
            err(&format!(
                r#"{{"id": "r", "system": "s", "criteria": [{{"criterion": "a", "points": 1, "source": {source}}}]}}"#
            ))
        };
        assert_eq!(
            with(r#"{"document": "d", "start": 9, "end": 3}"#),
            "g.jsonl:1: field `criteria[0].source.end`: the span ends (3) before it starts (9)"
        );
        assert_eq!(
            with(r#"{"document": "d", "start": -1, "end": 3}"#),
            "g.jsonl:1: field `criteria[0].source.start`: expected a whole number >= 0, found -1"
        );
        assert_eq!(
            with(r#"{"start": 0, "end": 3}"#),
            "g.jsonl:1: field `criteria[0].source.document`: missing field `document`"
        );
        assert_eq!(
            with(r#"{"document": "d", "start": 0, "end": 3, "end": 4}"#),
            "g.jsonl:1: field `criteria[0].source.end`: duplicate key `end`"
        );
        assert_eq!(with(r#""guide.md""#), "g.jsonl:1: field `criteria[0].source`: expected an object, found a string");
    }

    #[test]
    fn ungraded_files_with_prompts_read_and_write_back() {
        let text = r#"{"id": "r1", "system": "s", "prompt": "Is 38.5 °C a fever?", "response": "Yes.", "criteria": [{"criterion": "a", "points": 1}]}
{"id": "r2", "system": "s", "prompt": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "?"}], "criteria": [{"criterion": "a", "met_by": {"x": true, "y": false}}]}"#;
        let (rs, warnings) = parse_rubric("g.jsonl", text).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(rs[0].prompt, Some(Prompt::Text("Is 38.5 °C a fever?".into())));
        assert_eq!(rs[0].response.as_deref(), Some("Yes."));
        assert_eq!((rs[0].criteria[0].points, rs[0].criteria[0].met), (Some(1.0), None));
        let Some(Prompt::Messages(m)) = &rs[1].prompt else { panic!("messages") };
        assert_eq!((m[1].role.as_str(), m[1].content.as_str()), ("assistant", "?"));
        assert_eq!(rs[1].criteria[0].met_by, [("x".to_string(), true), ("y".to_string(), false)]);
        assert_eq!(rs[1].criteria[0].points, None);
        let (back, _) = parse_rubric("g.jsonl", &write_rubric_jsonl(&rs)).unwrap();
        assert_eq!(back, rs);
        // Scoring needs `met` and points: the ungraded file is refused by `medrank rubric`.
        assert_eq!(
            parse_graded("g.jsonl", LINE).unwrap_err().to_string(),
            "g.jsonl:1: field `criteria[0].met`: missing field `met` (was the criterion graded?)"
        );
        let no_points = r#"{"id": "r", "system": "s", "criteria": [{"criterion": "a", "met": true}]}"#;
        assert_eq!(
            parse_graded("g.jsonl", no_points).unwrap_err().to_string(),
            "g.jsonl:1: field `criteria[0].points`: missing field `points`"
        );
    }

    #[test]
    fn graded_files_read_as_before_with_met_by_beside_met() {
        // `met_by` and `prompt` are fields of the format now: no warning, and `met` is scored.
        let text = r#"{"id": "r", "system": "s", "prompt": "q", "criteria": [{"criterion": "a", "points": 1, "met": false, "met_by": {"x": true}}]}"#;
        let (rs, warnings) = parse_graded("g.jsonl", text).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(!rs[0].criteria[0].met);
    }

    #[test]
    fn mixing_graded_and_ungraded_criteria_is_an_error() {
        let graded_first = "{\"id\": \"r0\", \"system\": \"s\", \"criteria\": [{\"criterion\": \"a\", \"points\": 1, \"met\": true}]}\n";
        assert_eq!(
            err(&format!("{graded_first}{LINE}")),
            "g.jsonl:2: field `criteria[0].met`: the file's first criterion (line 1) has `met` and this one has none: \
             a file is graded (every criterion has `met`) or ungraded (none has) throughout"
        );
        // `met: null` is no judgement (null counts as a missing field).
        let null_met = r#"{"id": "r", "system": "s", "criteria": [{"criterion": "a", "points": 1, "met": null}, {"criterion": "b", "points": 1, "met": false}]}"#;
        assert_eq!(
            err(null_met),
            "g.jsonl:1: field `criteria[1].met`: the file's first criterion (line 1) has no `met` and this one has one: \
             a file is graded (every criterion has `met`) or ungraded (none has) throughout"
        );
    }

    #[test]
    fn bad_prompts_and_judgements_name_their_field() {
        let with = |extra: &str, criterion: &str| {
            format!(
                r#"{{"id": "r", "system": "s"{extra}, "criteria": [{{"criterion": "a", "points": 1{criterion}}}]}}"#
            )
        };
        assert_eq!(
            err(&with(r#", "prompt": 3"#, "")),
            "g.jsonl:1: field `prompt`: expected a string or an array of {role, content} messages, found a number"
        );
        assert_eq!(
            err(&with(r#", "prompt": [{"role": "", "content": "x"}]"#, "")),
            "g.jsonl:1: field `prompt[0].role`: `role` is empty"
        );
        assert_eq!(
            err(&with(r#", "prompt": [{"role": "user"}]"#, "")),
            "g.jsonl:1: field `prompt[0].content`: missing field `content`"
        );
        assert_eq!(
            err(&with(r#", "response": 1"#, "")),
            "g.jsonl:1: field `response`: expected a string, found a number"
        );
        assert_eq!(
            err(&with("", r#", "met_by": {"x": "yes"}"#)),
            "g.jsonl:1: field `criteria[0].met_by.x`: expected true or false, found a string"
        );
        assert_eq!(
            err(&with("", r#", "met_by": {"x": true, "x": false}"#)),
            "g.jsonl:1: field `criteria[0].met_by.x`: duplicate key `x`"
        );
        assert_eq!(
            err(&with("", r#", "met_by": {}"#)),
            "g.jsonl:1: field `criteria[0].met_by`: `met_by` is empty: leave it out where nobody judged the criterion"
        );
        assert_eq!(
            err(&with("", r#", "met_by": {" ": true}"#)),
            "g.jsonl:1: field `criteria[0].met_by. `: empty grader name"
        );
    }
}
