//! Graded rubric responses (HealthBench style): JSONL, one response per line with the
//! criteria a grader said it meets (FORMATS.md, section 7). Scored by `eval::rubric`.

use crate::data::common::{check_line_ends, content_lines, nothing_to_read};
use crate::data::json::{parse_record, Record};
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
A response whose points do not add up to finite sums and scores (e.g. 1e308 + 1e308) is refused."#;

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

const KNOWN_FIELDS: [&str; 5] = ["id", "system", "prompt_id", "tags", "criteria"];
const CRITERION_FIELDS: [&str; 4] = ["criterion", "points", "tags", "met"];

/// Parses graded responses (JSONL; blank lines skipped). Errors name file, line and field
/// (`criteria[2].met`; a key twice in one object is one); unknown fields give one warning
/// per name.
pub fn parse_graded(name: &str, text: &str) -> Result<(Vec<GradedResponse>, Vec<Warning>)> {
    let mut responses: Vec<GradedResponse> = Vec::new();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut unknown: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    check_line_ends(name, text)?;
    for (line, row) in content_lines(text) {
        let record = parse_record(name, line, row)?;
        let id = record.non_empty_label("id")?;
        let system = record.non_empty_label("system")?;
        if let Some(first) = seen.insert((system.clone(), id.clone()), line) {
            return Err(record.error("id", format!("system `{system}` already has a response `{id}` (line {first})")));
        }
        let tags = tag_list(&record)?;
        let criteria = criteria(&record, &mut unknown)?;
        check_finite_scores(&record, &criteria)?;
        for key in record.unknown_fields(&KNOWN_FIELDS) {
            unknown.entry(key.to_string()).or_insert((line, 0)).1 += 1;
        }
        responses.push(GradedResponse {
            id,
            system,
            prompt_id: match record.get("prompt_id") {
                Some(_) => Some(record.non_empty_label("prompt_id")?),
                None => None,
            },
            tags,
            criteria,
            line,
        });
    }
    if responses.is_empty() {
        return Err(nothing_to_read(name, text, "no graded responses (the file has no non-blank line)"));
    }
    let warnings = unknown
        .into_iter()
        .map(|(key, (first, count))| {
            Warning::at(
                crate::Location::at(name, first, key.as_str()),
                format!("ignored unknown field `{key}` on {count} line(s)"),
            )
        })
        .collect();
    Ok((responses, warnings))
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

fn criteria(record: &Record, unknown: &mut BTreeMap<String, (usize, usize)>) -> Result<Vec<Criterion>> {
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
            let points = item.number("points")?;
            if item.get("met").is_none() {
                return Err(item.error("met", "missing field `met` (was the criterion graded?)"));
            }
            let met = item.boolean("met")?;
            let tags = tag_list(item)?;
            for key in item.unknown_fields(&CRITERION_FIELDS) {
                unknown.entry(format!("criteria[].{key}")).or_insert((item.line, 0)).1 += 1;
            }
            Ok(Criterion { criterion: criterion.to_string(), points, tags, met })
        })
        .collect()
}

/// The optional `tags` of a record: an array of distinct, non-empty strings.
fn tag_list(record: &Record) -> Result<Vec<String>> {
    if record.get("tags").is_none() {
        return Ok(Vec::new());
    }
    let tags = record.string_array("tags")?;
    for (i, tag) in tags.iter().enumerate() {
        if tag.trim().is_empty() {
            return Err(record.error(&format!("tags[{i}]"), "empty tag"));
        }
        if tags[..i].contains(tag) {
            return Err(record.error(&format!("tags[{i}]"), format!("tag `{tag}` is listed twice")));
        }
    }
    Ok(tags)
}
