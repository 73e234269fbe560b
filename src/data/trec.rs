//! TREC-style NRP inputs: topics (XML or JSONL), relevance judgements per quality
//! dimension (qrels), and run files with a ranker's document scores.

use crate::data::common::{
    check_line_ends, content_lines, first_content_char, nothing_to_read, parse_number, parse_unsigned, strip_bom, Tally,
};
use crate::data::json::{line_error, parse_record};
use crate::data::{Judgments, RunEntry, Topic};
use crate::error::{Error, Location, Result, Warning};
use std::collections::{BTreeMap, HashMap, HashSet};

// ---------------------------------------------------------------------------------------
// Topics

/// Parses topics: XML when the first non-blank character is `<`, otherwise JSONL
/// `{"qid", "query"}`. XML topics are `<topic>` elements (or, CLEF eHealth style, `<query>`
/// elements with child elements) whose id is an attribute `number`/`id`/`qid` or a child
/// `<id>`/`<num>`/`<number>`/`<qid>` (a leading "Number:" is dropped), and whose text is a
/// child `<query>` or, failing that, `<title>`. Other child elements (description, narrative)
/// are not used; a warning lists them.
pub fn parse_topics(name: &str, text: &str) -> Result<(Vec<Topic>, Vec<Warning>)> {
    check_line_ends(name, text)?;
    let (topics, warnings) = if first_content_char(text) == Some('<') {
        parse_topics_xml(name, text)?
    } else {
        parse_topics_jsonl(name, text)?
    };
    if topics.is_empty() {
        return Err(nothing_to_read(name, text, "no topics found"));
    }
    Ok((topics, warnings))
}

fn parse_topics_jsonl(name: &str, text: &str) -> Result<(Vec<Topic>, Vec<Warning>)> {
    let mut topics = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    let mut tally = Tally::new(name);
    for (line, text) in content_lines(text) {
        let record = parse_record(name, line, text)?;
        let qid = record.label("qid")?;
        let query = record.string("query")?.trim().to_owned();
        if qid.trim().is_empty() {
            return Err(record.error("qid", "`qid` is empty"));
        }
        if query.is_empty() {
            return Err(record.error("query", "`query` is empty"));
        }
        if let Some(first) = first_line.insert(qid.clone(), line) {
            return Err(record.error("qid", format!("duplicate qid `{qid}` (also on line {first})")));
        }
        for field in record.unknown_fields(&["qid", "query"]) {
            tally.add(format!("ignored unknown field `{field}` on topics"), qid.clone());
        }
        topics.push(Topic { qid, query });
    }
    Ok((topics, tally.into_warnings()))
}

const XML_ID_ATTRIBUTES: [&str; 3] = ["number", "id", "qid"];
const XML_ID_ELEMENTS: [&str; 4] = ["id", "num", "number", "qid"];
const XML_TEXT_ELEMENTS: [&str; 2] = ["query", "title"];

/// Deepest element nesting a topics file may have. Real topic files are 3 or 4 deep; a
/// hostile file 20,000 elements deep overflowed the stack while being read (the process
/// aborted), so deeper files are refused before parsing.
pub(crate) const MAX_XML_DEPTH: usize = 64;

fn parse_topics_xml(name: &str, text: &str) -> Result<(Vec<Topic>, Vec<Warning>)> {
    // The XML parser takes no byte-order mark; it is on line 1, so lines stay the same.
    let text = strip_bom(text);
    if let Some(line) = xml_depth_exceeds(text, MAX_XML_DEPTH) {
        return Err(line_error(
            name,
            line,
            format!("invalid topics XML: elements nested more than {MAX_XML_DEPTH} deep"),
        ));
    }
    let doc = roxmltree::Document::parse(text).map_err(|e| {
        use roxmltree::Error as X;
        match e {
            // roxmltree places these at 1:1; the problem is where the text stops.
            X::UnclosedRootNode | X::UnexpectedEndOfStream => line_error(
                name,
                last_line(text),
                format!("invalid XML: the file ends inside an element (truncated?): {e}"),
            ),
            _ => line_error(name, e.pos().row as usize, format!("invalid XML: {e}")),
        }
    })?;
    // Topics come in document order, so lines are counted once from the previous topic on
    // (roxmltree's `text_pos_at` counts from the start every time: quadratic on one long line).
    let lines = std::cell::RefCell::new((0usize, 1usize));
    let line_of = |node: roxmltree::Node| {
        let (pos, line) = &mut *lines.borrow_mut();
        let start = node.range().start.max(*pos);
        *line += text.as_bytes()[*pos..start].iter().filter(|&&b| b == b'\n').count();
        *pos = start;
        *line
    };
    let is_topic = |node: &roxmltree::Node| {
        node.has_tag_name("topic") || (node.has_tag_name("query") && node.children().any(|c| c.is_element()))
    };
    let mut topics = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    let mut tally = Tally::new(name);
    for node in doc.descendants().filter(is_topic) {
        let line = line_of(node);
        let child_text = |names: &[&str]| {
            names.iter().find_map(|n| node.children().find(|c| c.has_tag_name(*n)).map(|c| element_text(&c)))
        };
        let qid = XML_ID_ATTRIBUTES
            .iter()
            .find_map(|a| node.attribute(*a).map(|v| v.trim().to_owned()))
            .or_else(|| child_text(&XML_ID_ELEMENTS))
            .map(|id| id.strip_prefix("Number:").map(|s| s.trim().to_owned()).unwrap_or(id))
            .filter(|id| !id.is_empty())
            .ok_or_else(|| {
                Error::input(name, line, "id", "topic without an id (attribute `number` or element `<id>`/`<num>`)")
            })?;
        let query = child_text(&XML_TEXT_ELEMENTS).filter(|q| !q.is_empty()).ok_or_else(|| {
            Error::input(name, line, "query", format!("topic `{qid}` has no `<query>` or `<title>` text"))
        })?;
        if let Some(first) = first_line.insert(qid.clone(), line) {
            return Err(Error::input(name, line, "id", format!("duplicate topic id `{qid}` (also on line {first})")));
        }
        for child in node.children().filter(|c| c.is_element()) {
            let tag = child.tag_name().name();
            if !XML_ID_ELEMENTS.contains(&tag) && !XML_TEXT_ELEMENTS.contains(&tag) {
                tally.add(format!("ignored element `<{tag}>` on topics"), qid.clone());
            }
        }
        topics.push(Topic { qid, query });
    }
    Ok((topics, tally.into_warnings()))
}

/// The number of the last line of a text (a final line ending starts no new line).
fn last_line(text: &str) -> usize {
    text.trim_end_matches(['\n', '\r']).bytes().filter(|&b| b == b'\n').count() + 1
}

/// The line of the first element that opens deeper than `limit` inside others, if any.
/// A light scan, not a parser: comments, CDATA, declarations and quoted attribute values
/// are skipped so that a `<` or `>` inside them counts for nothing.
fn xml_depth_exceeds(text: &str, limit: usize) -> Option<usize> {
    let b = text.as_bytes();
    let (mut depth, mut line, mut i) = (0usize, 1usize, 0usize);
    // Moves past the next `end`, counting lines; the end of the text if there is none.
    let skip_past = |i: usize, end: &[u8], line: &mut usize| -> usize {
        let mut j = i;
        while j < b.len() && !b[j..].starts_with(end) {
            *line += usize::from(b[j] == b'\n');
            j += 1;
        }
        (j + end.len()).min(b.len())
    };
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'<' => {
                let rest = &b[i + 1..];
                if rest.starts_with(b"!--") {
                    i = skip_past(i + 4, b"-->", &mut line);
                } else if rest.starts_with(b"![CDATA[") {
                    i = skip_past(i + 9, b"]]>", &mut line);
                } else if rest.starts_with(b"?") {
                    // A processing instruction ends at `?>`, not at its first `>`: closing
                    // tags inside one must not lower the count.
                    i = skip_past(i + 2, b"?>", &mut line);
                } else if rest.starts_with(b"!") {
                    // A declaration (DOCTYPE) ends at the first `>` outside quotes and outside
                    // its `[...]` internal subset.
                    let (mut j, mut quote, mut brackets) = (i + 2, None, 0usize);
                    while j < b.len() {
                        match (quote, b[j]) {
                            (_, b'\n') => line += 1,
                            (None, q @ (b'"' | b'\'')) => quote = Some(q),
                            (Some(q), c) if c == q => quote = None,
                            (None, b'[') => brackets += 1,
                            (None, b']') => brackets = brackets.saturating_sub(1),
                            (None, b'>') if brackets == 0 => break,
                            _ => {}
                        }
                        j += 1;
                    }
                    i = j + 1;
                } else if rest.starts_with(b"/") {
                    depth = depth.saturating_sub(1);
                    i = skip_past(i + 1, b">", &mut line);
                } else {
                    let start_line = line;
                    // The start tag's end: the first `>` outside a quoted attribute value.
                    let mut j = i + 1;
                    let mut quote = None;
                    while j < b.len() {
                        match (quote, b[j]) {
                            (_, b'\n') => line += 1,
                            (None, q @ (b'"' | b'\'')) => quote = Some(q),
                            (Some(q), c) if c == q => quote = None,
                            (None, b'>') => break,
                            _ => {}
                        }
                        j += 1;
                    }
                    let self_closing = j < b.len() && b[j - 1] == b'/';
                    if !self_closing {
                        depth += 1;
                        if depth > limit {
                            return Some(start_line);
                        }
                    }
                    i = j + 1;
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// All text inside an element, whitespace collapsed (topics are often indented).
fn element_text(node: &roxmltree::Node) -> String {
    let raw: String = node.descendants().filter(|n| n.is_text()).filter_map(|n| n.text()).collect();
    raw.split_whitespace().collect::<Vec<_>>().join(" ")
}

// ---------------------------------------------------------------------------------------
// Qrels

/// Grades that mean "the assessor was not able to judge", per dimension. Judgements with
/// such a grade go to `Judgments::missing` and never count as a grade.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NotJudgeable {
    by_dimension: BTreeMap<String, Vec<i64>>,
}

impl NotJudgeable {
    /// No grade is special.
    pub fn none() -> Self {
        NotJudgeable::default()
    }
    /// The convention of the CLEF eHealth 2021 consumer health search qrels used by the NRP
    /// paper: credibility grade 3 = not able to judge.
    pub fn clef_ehealth_2021() -> Self {
        NotJudgeable::none().with("credibility", &[3])
    }
    /// Adds grades for a dimension (full name, e.g. `credibility`).
    pub fn with(mut self, dimension: &str, grades: &[i64]) -> Self {
        self.by_dimension.entry(dimension.to_owned()).or_default().extend_from_slice(grades);
        self
    }
    pub fn grades(&self, dimension: &str) -> &[i64] {
        self.by_dimension.get(dimension).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// The full dimension name for the short column names of combined qrels files.
pub fn dimension_name(column: &str) -> String {
    match column {
        "rel" => "relevance".into(),
        "cred" => "credibility".into(),
        "read" => "readability".into(),
        other => other.into(),
    }
}

/// True when the first non-blank line is a header naming `qid` and `docno` (the combined
/// qrels variant); TREC qrels have no header.
pub fn is_combined_qrels(text: &str) -> bool {
    content_lines(text).next().is_some_and(|(_, line)| {
        let cells = split_cells(line, separator_of(line));
        cells.contains(&"qid") && cells.contains(&"docno")
    })
}

/// Reads either qrels variant (see [`is_combined_qrels`]); a TREC file gives one
/// `Judgments` for `trec_dimension`.
pub fn parse_qrels_any(
    name: &str,
    text: &str,
    trec_dimension: &str,
    not_judgeable: &NotJudgeable,
) -> Result<(Vec<Judgments>, Vec<Warning>)> {
    if is_combined_qrels(text) {
        parse_qrels_combined(name, text, not_judgeable)
    } else {
        let (judgments, warnings) = parse_qrels(name, text, trec_dimension, not_judgeable.grades(trec_dimension))?;
        Ok((vec![judgments], warnings))
    }
}

/// Reads a qrels file given for one named dimension (`--qrels relevance=FILE`): TREC format,
/// or a file with a header naming `qid`, `docno` and exactly one grade column (such as
/// `qid iter docno grade`), whose grades are then `dimension`'s. A header with several
/// dimension columns, or one that names another dimension (`cred` given as relevance), is
/// an error: the file is combined qrels, or given for the wrong dimension.
pub fn parse_qrels_dimension(
    name: &str,
    text: &str,
    dimension: &str,
    not_judgeable: &NotJudgeable,
) -> Result<(Judgments, Vec<Warning>)> {
    if is_combined_qrels(text) {
        let (mut judgments, warnings) = qrels_with_header(name, text, not_judgeable, Some(dimension))?;
        Ok((judgments.remove(0), warnings))
    } else {
        parse_qrels(name, text, dimension, not_judgeable.grades(dimension))
    }
}

/// Builds one dimension's judgements, rejecting a second judgement of a (qid, docno).
struct JudgmentsBuilder<'a> {
    judgments: Judgments,
    not_judgeable: &'a [i64],
    missing_seen: HashSet<(String, String)>,
}

impl<'a> JudgmentsBuilder<'a> {
    fn new(dimension: &str, not_judgeable: &'a [i64]) -> Self {
        JudgmentsBuilder {
            judgments: Judgments { dimension: dimension.to_owned(), grades: BTreeMap::new(), missing: Vec::new() },
            not_judgeable,
            missing_seen: HashSet::new(),
        }
    }

    /// Adds a judgement; `Err(())` when (qid, docno) was judged before in this dimension.
    fn add(&mut self, qid: &str, docno: &str, grade: i64) -> Result<(), ()> {
        let judged_before = self.judgments.grades.get(qid).is_some_and(|d| d.contains_key(docno))
            || self.missing_seen.contains(&(qid.to_owned(), docno.to_owned()));
        if judged_before {
            return Err(());
        }
        if self.not_judgeable.contains(&grade) {
            self.missing_seen.insert((qid.to_owned(), docno.to_owned()));
            self.judgments.missing.push((qid.to_owned(), docno.to_owned()));
        } else if let Some(docs) = self.judgments.grades.get_mut(qid) {
            docs.insert(docno.to_owned(), grade);
        } else {
            self.judgments.grades.insert(qid.to_owned(), BTreeMap::from([(docno.to_owned(), grade)]));
        }
        Ok(())
    }

    fn finish(self, file: &str, warnings: &mut Vec<Warning>) -> Judgments {
        if !self.judgments.missing.is_empty() {
            let grades: Vec<String> = self.not_judgeable.iter().map(|g| g.to_string()).collect();
            warnings.push(Warning::at(
                Location::file(file),
                format!(
                    "{} {} judgements have a \"not able to judge\" grade ({}) and count as missing, not as a grade",
                    self.judgments.missing.len(),
                    self.judgments.dimension,
                    grades.join(", ")
                ),
            ));
        }
        self.judgments
    }
}

/// Parses TREC qrels `qid iteration docno grade` (whitespace separated; the iteration
/// column is ignored) for one quality dimension.
pub fn parse_qrels(
    name: &str,
    text: &str,
    dimension: &str,
    not_judgeable: &[i64],
) -> Result<(Judgments, Vec<Warning>)> {
    check_line_ends(name, text)?;
    let mut builder = JudgmentsBuilder::new(dimension, not_judgeable);
    for (line, row) in content_lines(text) {
        let cells = whitespace_columns(name, line, row, "qid iteration docno grade")?;
        let (qid, docno) = (cells[0], cells[2]);
        let grade = parse_grade(name, line, "grade", cells[3])?;
        if builder.add(qid, docno, grade).is_err() {
            let first = first_line_where(text, |c| c.len() == 4 && c[0] == qid && c[2] == docno);
            return Err(duplicate_judgement(name, line, dimension, qid, docno, first));
        }
    }
    if builder.judgments.grades.is_empty() && builder.judgments.missing.is_empty() {
        return Err(nothing_to_read(name, text, "no judgements in the file"));
    }
    let mut warnings = Vec::new();
    let judgments = builder.finish(name, &mut warnings);
    Ok((judgments, warnings))
}

/// Parses the combined qrels variant: a header naming `qid`, `docno` and one or more
/// dimension columns (e.g. `qid docno rel cred read`), then one row per judged document.
/// Cells are separated by tabs if the header has a tab, else by commas if it has a comma,
/// else by whitespace. A cell `-` (or an empty cell) means "not judged in this dimension".
/// Columns named `iter`, `iteration` or `Q0` are ignored; `rel`, `cred` and `read` are
/// reported as relevance, credibility and readability ([`dimension_name`]).
pub fn parse_qrels_combined(
    name: &str,
    text: &str,
    not_judgeable: &NotJudgeable,
) -> Result<(Vec<Judgments>, Vec<Warning>)> {
    qrels_with_header(name, text, not_judgeable, None)
}

/// Qrels with a header; `single` = the file was given for this one dimension, so the header
/// must have exactly one grade column, which is read as that dimension.
fn qrels_with_header(
    name: &str,
    text: &str,
    not_judgeable: &NotJudgeable,
    single: Option<&str>,
) -> Result<(Vec<Judgments>, Vec<Warning>)> {
    check_line_ends(name, text)?;
    let mut lines = content_lines(text);
    let (header_line, header) =
        lines.next().ok_or_else(|| nothing_to_read(name, text, "the file is empty (expected a header)"))?;
    let separator = separator_of(header);
    let columns = split_cells(header, separator);
    let position = |col: &str| {
        columns
            .iter()
            .position(|c| *c == col)
            .ok_or_else(|| Error::input(name, header_line, col, format!("the header has no `{col}` column")))
    };
    let (qid_col, docno_col) = (position("qid")?, position("docno")?);
    let ignored = ["iter", "iteration", "Q0"];
    let mut dimension_cols: Vec<(usize, String)> = columns
        .iter()
        .enumerate()
        .filter(|(i, c)| *i != qid_col && *i != docno_col && !ignored.contains(c))
        .map(|(i, c)| (i, dimension_name(c)))
        .collect();
    if dimension_cols.is_empty() {
        return Err(line_error(name, header_line, "the header names no dimension column besides qid and docno"));
    }
    // `rel rel` (or `rel relevance`) would give two judgements of one dimension, each
    // column's grades as if from another file.
    for (k, (col, dimension)) in dimension_cols.iter().enumerate() {
        if let Some((first, _)) = dimension_cols[..k].iter().find(|(_, d)| d == dimension) {
            let also = if columns[*first] == columns[*col] {
                format!("column {} is `{}` too", first + 1, columns[*first])
            } else {
                format!("so does column {} (`{}`)", first + 1, columns[*first])
            };
            return Err(Error::input(
                name,
                header_line,
                columns[*col],
                format!(
                    "column {} (`{}`) names dimension {dimension}, and {also}: a dimension has one column",
                    col + 1,
                    columns[*col]
                ),
            ));
        }
    }
    if let Some(dimension) = single {
        let named: Vec<&str> = dimension_cols.iter().map(|(i, _)| columns[*i]).collect();
        if named.len() > 1 {
            return Err(line_error(
                name,
                header_line,
                format!(
                    "given as the qrels of one dimension ({dimension}), but the header has {} grade columns ({}): give it as combined qrels",
                    named.len(),
                    named.join(", ")
                ),
            ));
        }
        let known = ["relevance", "credibility", "readability"];
        let column_dimension = &dimension_cols[0].1;
        if known.contains(&column_dimension.as_str()) && column_dimension != dimension {
            return Err(Error::input(
                name,
                header_line,
                named[0],
                format!("given as the {dimension} qrels, but its grade column is `{}` ({column_dimension})", named[0]),
            ));
        }
        dimension_cols[0].1 = dimension.to_owned();
    }
    let mut builders: Vec<JudgmentsBuilder> =
        dimension_cols.iter().map(|(_, dim)| JudgmentsBuilder::new(dim, not_judgeable.grades(dim))).collect();
    for (line, row) in lines {
        let cells = split_cells(row, separator);
        if cells.len() != columns.len() {
            return Err(line_error(
                name,
                line,
                format!("this row has {} cells but the header has {}", cells.len(), columns.len()),
            ));
        }
        let (qid, docno) = (cells[qid_col], cells[docno_col]);
        for ((col, dim), builder) in dimension_cols.iter().zip(builders.iter_mut()) {
            let cell = cells[*col];
            if cell.is_empty() || cell == "-" {
                continue;
            }
            let grade = parse_grade(name, line, columns[*col], cell)?;
            if builder.add(qid, docno, grade).is_err() {
                let first =
                    first_line_where(text, |c| c.len() == columns.len() && c[qid_col] == qid && c[docno_col] == docno);
                return Err(duplicate_judgement(name, line, dim, qid, docno, first));
            }
        }
    }
    let mut warnings = Vec::new();
    let judgments = builders.into_iter().map(|b| b.finish(name, &mut warnings)).collect();
    Ok((judgments, warnings))
}

fn parse_grade(name: &str, line: usize, field: &str, value: &str) -> Result<i64> {
    value
        .parse::<i64>()
        .map_err(|_| Error::input(name, line, field, format!("expected a whole-number grade, found `{value}`")))
}

fn duplicate_judgement(
    name: &str,
    line: usize,
    dimension: &str,
    qid: &str,
    docno: &str,
    first: Option<usize>,
) -> Error {
    let also = first.map(|l| format!(" (also on line {l})")).unwrap_or_default();
    Error::input(
        name,
        line,
        "docno",
        format!("document `{docno}` is judged twice for query `{qid}` in {dimension}{also}"),
    )
}

/// The first content line whose whitespace-separated cells satisfy `matches`. Used only to
/// name the earlier line in a duplicate error, so the hot path stores no line numbers.
fn first_line_where(text: &str, matches: impl Fn(&[&str]) -> bool) -> Option<usize> {
    content_lines(text).find_map(|(line, row)| {
        let cells = split_cells(row, separator_of(row));
        matches(&cells).then_some(line)
    })
}

#[derive(Clone, Copy)]
enum Separator {
    Tab,
    Comma,
    Whitespace,
}

fn separator_of(line: &str) -> Separator {
    if line.contains('\t') {
        Separator::Tab
    } else if line.contains(',') {
        Separator::Comma
    } else {
        Separator::Whitespace
    }
}

fn split_cells(line: &str, separator: Separator) -> Vec<&str> {
    match separator {
        Separator::Tab => line.split('\t').map(str::trim).collect(),
        Separator::Comma => line.split(',').map(str::trim).collect(),
        Separator::Whitespace => line.split_whitespace().collect(),
    }
}

/// The whitespace-separated cells of one row of a TREC file, exactly as many as `layout`
/// names (`qid Q0 docno rank score tag`), or an error at the row's line.
fn whitespace_columns<'a>(name: &str, line: usize, row: &'a str, layout: &str) -> Result<Vec<&'a str>> {
    let cells: Vec<&str> = row.split_whitespace().collect();
    let expected = layout.split_whitespace().count();
    if cells.len() != expected {
        return Err(line_error(name, line, format!("expected {expected} columns `{layout}`, found {}", cells.len())));
    }
    Ok(cells)
}

// ---------------------------------------------------------------------------------------
// Run files

/// Parses a TREC run file `qid Q0 docno rank score tag` (whitespace separated). A document
/// listed twice for a query is an error; several tags in one file give a warning (runs of
/// different rankers should be separate files).
pub fn parse_run(name: &str, text: &str) -> Result<(Vec<RunEntry>, Vec<Warning>)> {
    let mut entries = Vec::new();
    let mut first_line: HashMap<(String, String), usize> = HashMap::new();
    let mut tags: Vec<String> = Vec::new();
    check_line_ends(name, text)?;
    for (line, row) in content_lines(text) {
        let cells = whitespace_columns(name, line, row, "qid Q0 docno rank score tag")?;
        let rank = parse_unsigned(name, line, "rank", cells[3])?;
        let score = parse_number(name, line, "score", cells[4])?;
        let (qid, docno, tag) = (cells[0], cells[2], cells[5]);
        if let Some(first) = first_line.insert((qid.to_owned(), docno.to_owned()), line) {
            return Err(Error::input(
                name,
                line,
                "docno",
                format!("document `{docno}` is listed twice for query `{qid}` (also on line {first})"),
            ));
        }
        if !tags.iter().any(|t| t == tag) {
            tags.push(tag.to_owned());
        }
        entries.push(RunEntry { qid: qid.to_owned(), docno: docno.to_owned(), rank, score, tag: tag.to_owned() });
    }
    if entries.is_empty() {
        return Err(nothing_to_read(name, text, "the run file has no entries"));
    }
    let mut warnings = Vec::new();
    if tags.len() > 1 {
        warnings.push(Warning::at(
            Location::file(name),
            format!("the run file has {} tags ({}); scores are used as one ranking", tags.len(), tags.join(", ")),
        ));
    }
    Ok((entries, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPICS_XML: &str = include_str!("../../examples/nrp/topics.xml");
    const TOPICS_JSONL: &str = include_str!("../../examples/nrp/topics.jsonl");
    const RELEVANCE: &str = include_str!("../../examples/nrp/qrels.relevance.txt");
    const CREDIBILITY: &str = include_str!("../../examples/nrp/qrels.credibility.txt");
    const READABILITY: &str = include_str!("../../examples/nrp/qrels.readability.txt");
    const COMBINED: &str = include_str!("../../examples/nrp/qrels.combined.txt");
    const RUN: &str = include_str!("../../examples/nrp/run.bm25.txt");

    fn location(err: &Error) -> (Option<usize>, Option<&str>) {
        let loc = err.location().expect("located");
        (loc.line, loc.field.as_deref())
    }

    #[test]
    fn example_topics_in_both_formats_agree() {
        let (xml, w1) = parse_topics("topics.xml", TOPICS_XML).unwrap();
        let (jsonl, w2) = parse_topics("topics.jsonl", TOPICS_JSONL).unwrap();
        assert!(w1.is_empty() && w2.is_empty());
        assert_eq!(xml, jsonl);
        assert_eq!(xml.len(), 5);
        assert_eq!(
            xml[0],
            Topic { qid: "101".into(), query: "is it safe to take ibuprofen with high blood pressure".into() }
        );
    }

    #[test]
    fn xml_topic_variants_are_accepted() {
        let text = "<topics>\n<topic number=\"7\"><title> dry\n  eyes </title><narrative>n</narrative></topic>\n\
                    <topic><num>Number: 8</num><query>β-blocker asthma</query></topic>\n</topics>";
        let (topics, warnings) = parse_topics("t.xml", text).unwrap();
        assert_eq!(topics[0], Topic { qid: "7".into(), query: "dry eyes".into() });
        assert_eq!(topics[1], Topic { qid: "8".into(), query: "β-blocker asthma".into() });
        assert_eq!(warnings[0].to_string(), "t.xml: ignored element `<narrative>` on topics: 1 (7)");
        // CLEF eHealth style: <queries><query><id>..</id><title>..</title></query></queries>.
        let text = "<queries><query><id>151001</id><title>melatonin children</title></query></queries>";
        let (topics, _) = parse_topics("q.xml", text).unwrap();
        assert_eq!(topics[0], Topic { qid: "151001".into(), query: "melatonin children".into() });
    }

    #[test]
    fn topic_errors_name_line_and_field() {
        let err = parse_topics("t.xml", "<topics>\n<topic>\n<query>q</query></topic></topics>").unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("id")));
        let err = parse_topics("t.xml", "<topics>\n<topic><id>1</id></topic></topics>").unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("query")));
        let err = parse_topics("t.xml", "<topics>\n<topic><id>1</id><query>q</query>\n</topics>").unwrap_err();
        assert_eq!(location(&err).0, Some(3), "roxmltree reports the unclosed tag where it ends");
        let err = parse_topics(
            "t.xml",
            "<topics><topic><id>1</id><query>a</query></topic>\n<topic><id>1</id><query>b</query></topic></topics>",
        )
        .unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("id")));
        assert!(err.to_string().ends_with("duplicate topic id `1` (also on line 1)"));
        let err =
            parse_topics("t.jsonl", "{\"qid\": 1, \"query\": \"a\"}\n{\"qid\": \"1\", \"query\": \"b\"}").unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("qid")));
        let err = parse_topics("t.jsonl", "{\"qid\": \"1\", \"query\": \"  \"}").unwrap_err();
        assert_eq!(location(&err), (Some(1), Some("query")));
    }

    #[test]
    fn deeply_nested_xml_is_refused_at_its_line_instead_of_overflowing_the_stack() {
        // 20,000 nested elements used to abort the process ("has overflowed its stack").
        let deep = format!("<topics>\n{}{}</topics>", "<a>".repeat(20_000), "</a>".repeat(20_000));
        let err = parse_topics("t.xml", &deep).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("t.xml:2: invalid topics XML: elements nested more than {MAX_XML_DEPTH} deep")
        );
        // Exactly at the limit is fine for the scan (<topics> + 63 <a> = 64 levels); the file
        // is then refused for having no topic, not for its depth.
        let at_limit = format!("<topics>{}{}</topics>", "<a>".repeat(63), "</a>".repeat(63));
        assert_eq!(xml_depth_exceeds(&at_limit, MAX_XML_DEPTH), None);
        assert_eq!(parse_topics("t.xml", &at_limit).unwrap_err().to_string(), "t.xml:2: no topics found");
        // Self-closing tags, comments, CDATA and quoted `>` do not nest.
        let flat = format!("<t>{}</t>", "<x a='>'/><!-- <b> --><![CDATA[<c>]]>".repeat(1000));
        assert_eq!(xml_depth_exceeds(&flat, 2), None);
        assert_eq!(xml_depth_exceeds("<a>\n<b\nc='1'>\n<d>", 2), Some(4)); // <d> opens on line 4
    }

    #[test]
    fn closing_tags_inside_instructions_and_declarations_do_not_hide_depth() {
        // A processing instruction ends at `?>`: 400 x (50 opens, `<? x >` + 50 closes
        // inside the instruction, ` ?>`) nests 20,000 deep; ending it at its first `>`
        // counted the closes and the file overflowed the stack after the scan.
        let pi = format!(
            "<topics>{}{}",
            format!("{}<? x >{} ?>", "<a>".repeat(50), "</a>".repeat(50)).repeat(400),
            "</a>".repeat(20_000)
        );
        assert_eq!(xml_depth_exceeds(&pi, MAX_XML_DEPTH), Some(1));
        assert!(parse_topics("t.xml", &pi).unwrap_err().to_string().contains("nested more than"));
        // The same with closes inside a DOCTYPE's internal subset (its `>` inside `[...]`).
        let doctype = format!("<!DOCTYPE t [ <!ENTITY e \">{}\"> ]><t>{}", "</a>".repeat(10), "<a>".repeat(70));
        assert_eq!(xml_depth_exceeds(&doctype, MAX_XML_DEPTH), Some(1));
        // Instructions and declarations themselves do not nest.
        let flat = "<?xml version='1.0'?><!DOCTYPE t [<!ENTITY x 'y'>]><t><?pi a > b ?></t>";
        assert_eq!(xml_depth_exceeds(flat, 1), None);
    }

    #[test]
    fn truncated_xml_is_reported_where_the_file_ends() {
        // The example has 23 lines, the last one `</topics>`; cut inside it, the file ends on
        // line 23 (roxmltree itself says 1:1 for an unexpected end).
        let lines: Vec<&str> = TOPICS_XML.lines().collect();
        assert_eq!((lines.len(), lines[22]), (23, "</topics>"));
        let cut = format!("{}\n</top", lines[..22].join("\n"));
        let err = parse_topics("topics.xml", &cut).unwrap_err();
        assert_eq!(location(&err), (Some(23), None));
        assert!(err.to_string().contains("the file ends inside an element (truncated?)"), "{err}");
        // Without its last line (and with a final newline) the file ends on line 22.
        let cut = format!("{}\n", lines[..22].join("\n"));
        assert_eq!(location(&parse_topics("topics.xml", &cut).unwrap_err()), (Some(22), None));
    }

    #[test]
    fn many_topics_on_one_long_line_are_read_in_linear_time() {
        // 200,000 topics (7.6 MB) on line 1, then one more on line 2 that repeats qid 0.
        // Lines used to be counted from the start of the file for every topic: about
        // 200,000 x 3.8 MB of scanning on average, minutes; now each byte is counted once.
        let mut text = String::from("<topics>");
        for i in 0..200_000 {
            text.push_str(&format!("<topic><id>{i}</id><query>q{i}</query></topic>"));
        }
        let ok = format!("{text}</topics>");
        let (topics, _) = parse_topics("t.xml", &ok).unwrap();
        assert_eq!(topics.len(), 200_000);
        assert_eq!(topics[199_999], Topic { qid: "199999".into(), query: "q199999".into() });
        let dup = format!("{text}\n<topic><id>0</id><query>again</query></topic></topics>");
        let err = parse_topics("t.xml", &dup).unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("id")));
        assert!(err.to_string().ends_with("duplicate topic id `0` (also on line 1)"));
    }

    #[test]
    fn a_jsonl_topic_with_many_unknown_fields_is_read_in_linear_time() {
        // 200,000 unknown fields on one line (2.9 MB): each was looked up among all earlier
        // keys (duplicates) and among all earlier warning groups (Tally), 2 x 2e10 string
        // comparisons; now hash lookups. Each field name is its own warning group.
        let fields: String = (0..200_000).map(|i| format!(", \"k{i}\": 0")).collect();
        let line = format!("{{\"qid\": \"1\", \"query\": \"q\"{fields}}}");
        let (topics, warnings) = parse_topics("t.jsonl", &line).unwrap();
        assert_eq!(topics, [Topic { qid: "1".into(), query: "q".into() }]);
        assert_eq!(warnings.len(), 200_000);
        assert_eq!(warnings[199_999].to_string(), "t.jsonl: ignored unknown field `k199999` on topics: 1 (1)");
    }

    #[test]
    fn example_qrels_per_dimension_match_the_combined_file() {
        let nj = NotJudgeable::clef_ehealth_2021();
        let (relevance, w) = parse_qrels("r", RELEVANCE, "relevance", nj.grades("relevance")).unwrap();
        assert!(w.is_empty());
        let (credibility, w) = parse_qrels("c", CREDIBILITY, "credibility", nj.grades("credibility")).unwrap();
        assert_eq!(
            w[0].to_string(),
            "c: 5 credibility judgements have a \"not able to judge\" grade (3) and count as missing, not as a grade"
        );
        let (readability, _) = parse_qrels("d", READABILITY, "readability", &[]).unwrap();
        assert_eq!(relevance.grades.values().map(|d| d.len()).sum::<usize>(), 40);
        assert_eq!(credibility.grades.values().map(|d| d.len()).sum::<usize>(), 35);
        assert_eq!(credibility.missing.len(), 5);
        assert!(credibility.missing.contains(&("101".to_string(), "web-101-04".to_string())));
        assert_eq!(relevance.grades["101"]["web-101-01"], 2);

        assert!(is_combined_qrels(COMBINED) && !is_combined_qrels(RELEVANCE));
        let (combined, _) = parse_qrels_any("qrels.combined.txt", COMBINED, "unused", &nj).unwrap();
        assert_eq!(combined, [relevance, credibility, readability]);
    }

    #[test]
    fn qrels_errors_name_line_and_field() {
        let err = parse_qrels("q", "1 0 d1 2\n\n1 0 d2 high\n", "relevance", &[]).unwrap_err();
        assert_eq!(location(&err), (Some(3), Some("grade")));
        let err = parse_qrels("q", "1 0 d1 2\n1 0 d1\n", "relevance", &[]).unwrap_err();
        assert_eq!(location(&err), (Some(2), None));
        assert!(err.to_string().ends_with("expected 4 columns `qid iteration docno grade`, found 3"));
        // A duplicate is an error even when the first judgement was "not able to judge".
        let err = parse_qrels("q", "1 0 d1 3\n1 0 d2 1\n1 0 d1 2\n", "credibility", &[3]).unwrap_err();
        assert_eq!(location(&err), (Some(3), Some("docno")));
        assert!(err
            .to_string()
            .ends_with("document `d1` is judged twice for query `1` in credibility (also on line 1)"));
        let err = parse_qrels_combined("c", "qid\tdocno\trel\n1\td1\t2\n1\td1\t-\n1\td1\t1\n", &NotJudgeable::none())
            .unwrap_err();
        assert_eq!(location(&err), (Some(4), Some("docno")));
        assert!(err.to_string().ends_with("in relevance (also on line 2)"));
        let err = parse_qrels_combined("c", "qid docno\n1 d1\n", &NotJudgeable::none()).unwrap_err();
        assert_eq!(location(&err), (Some(1), None));
        let err = parse_qrels_combined("c", "qid,docno,cred\n1,d1,x\n", &NotJudgeable::none()).unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("cred")));
        let err = parse_qrels_combined("c", "qid,docno,cred\n1,d1\n", &NotJudgeable::none()).unwrap_err();
        assert_eq!(location(&err), (Some(2), None));
    }

    #[test]
    fn qrels_of_one_dimension_may_have_a_one_column_header_but_keep_their_dimension() {
        let nj = NotJudgeable::none();
        // `qid iter docno grade` was read as combined qrels with a dimension named `grade`.
        let text = "qid iter docno grade\n101 0 web-101-01 2\n101 0 web-101-02 0\n";
        let (j, _) = parse_qrels_dimension("r.txt", text, "relevance", &nj).unwrap();
        assert_eq!(j.dimension, "relevance");
        assert_eq!(j.grades["101"], BTreeMap::from([("web-101-01".to_string(), 2), ("web-101-02".to_string(), 0)]));
        // Without a header it is the plain TREC format, as the examples.
        let (j, _) = parse_qrels_dimension("r.txt", RELEVANCE, "relevance", &nj).unwrap();
        assert_eq!(j, parse_qrels("r.txt", RELEVANCE, "relevance", &[]).unwrap().0);
        // "Not able to judge" grades follow the given dimension.
        let text = "qid docno grade\n1 d1 3\n1 d2 1\n";
        let (j, _) = parse_qrels_dimension("c.txt", text, "credibility", &NotJudgeable::clef_ehealth_2021()).unwrap();
        assert_eq!(j.missing, [("1".to_string(), "d1".to_string())]);
        // Several grade columns, or a column of another dimension, are refused at the header.
        let err = parse_qrels_dimension("c.txt", COMBINED, "relevance", &nj).unwrap_err();
        assert_eq!(location(&err), (Some(1), None));
        assert!(err.to_string().ends_with("given as the qrels of one dimension (relevance), but the header has 3 grade columns (rel, cred, read): give it as combined qrels"), "{err}");
        let err = parse_qrels_dimension("c.txt", "qid docno cred\n1 d1 2\n", "relevance", &nj).unwrap_err();
        assert_eq!(
            err.to_string(),
            "c.txt:1: field `cred`: given as the relevance qrels, but its grade column is `cred` (credibility)"
        );
    }

    #[test]
    fn combined_qrels_skip_unjudged_cells_and_ignore_iteration() {
        let text = "qid,iter,docno,rel,cred\n1,0,d1,2,-\n1,0,d2,0,3\n";
        let nj = NotJudgeable::clef_ehealth_2021();
        let (j, _) = parse_qrels_combined("c", text, &nj).unwrap();
        assert_eq!(j.len(), 2);
        assert_eq!(j[0].dimension, "relevance");
        assert_eq!(j[1].dimension, "credibility");
        assert!(j[1].grades.is_empty());
        assert_eq!(j[1].missing, [("1".to_string(), "d2".to_string())]);
    }

    #[test]
    fn a_dimension_named_twice_in_a_combined_header_is_refused_at_its_column() {
        // `rel rel` made two relevance judgements, and the NRP job then said "dimension
        // `relevance` is judged by two qrels files"; `rel` and `relevance` are one too.
        let nj = NotJudgeable::none();
        let err = parse_qrels_combined("c.txt", "qid docno rel rel\n1 d1 1 2\n", &nj).unwrap_err();
        assert_eq!(
            err.to_string(),
            "c.txt:1: field `rel`: column 4 (`rel`) names dimension relevance, and column 3 is `rel` too: a dimension has one column"
        );
        let err = parse_qrels_combined("c.txt", "qid\tdocno\trelevance\tcred\trel\n", &nj).unwrap_err();
        assert_eq!(
            err.to_string(),
            "c.txt:1: field `rel`: column 5 (`rel`) names dimension relevance, and so does column 3 (`relevance`): a dimension has one column"
        );
    }

    #[test]
    fn qrels_with_carriage_returns_alone_for_line_ends_are_refused_at_line_one() {
        // Read as one line, the combined example's header had every row's cells as columns.
        let err = parse_qrels_combined("c.txt", &COMBINED.replace('\n', "\r"), &NotJudgeable::none()).unwrap_err();
        assert_eq!(location(&err), (Some(1), None));
        assert!(err
            .to_string()
            .starts_with("c.txt:1: a carriage return (CR) at column 24 ends a line without a line feed"));
        let err = parse_qrels("r.txt", &RELEVANCE.replace('\n', "\r"), "relevance", &[]).unwrap_err();
        assert_eq!(location(&err), (Some(1), None));
        // CRLF is a line end like LF.
        let (crlf, _) = parse_qrels_combined("c.txt", &COMBINED.replace('\n', "\r\n"), &NotJudgeable::none()).unwrap();
        assert_eq!(crlf, parse_qrels_combined("c.txt", COMBINED, &NotJudgeable::none()).unwrap().0);
    }

    #[test]
    fn example_run_parses() {
        let (run, warnings) = parse_run("run.bm25.txt", RUN).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(run.len(), 40);
        assert_eq!(
            run[0],
            RunEntry { qid: "101".into(), docno: "web-101-03".into(), rank: 1, score: 6.4331, tag: "bm25".into() }
        );
    }

    #[test]
    fn run_errors_name_line_and_field() {
        let err = parse_run("r", "1 Q0 d1 1 2.5 bm25\n1 Q0 d2 2 x bm25\n").unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("score")));
        let err = parse_run("r", "1 Q0 d1 first 2.5 bm25\n").unwrap_err();
        assert_eq!(location(&err), (Some(1), Some("rank")));
        let err = parse_run("r", "1 Q0 d1 1 2.5 bm25\n1 Q0 d1 2 2.0 bm25\n").unwrap_err();
        assert_eq!(location(&err), (Some(2), Some("docno")));
        assert!(err.to_string().ends_with("(also on line 1)"));
        let err = parse_run("r", "1 Q0 d1 1 2.5\n").unwrap_err();
        assert_eq!(location(&err), (Some(1), None));
        let (_, warnings) = parse_run("r", "1 Q0 d1 1 2.5 a\n1 Q0 d2 2 2.0 b\n").unwrap();
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn a_million_qrels_lines_parse_quickly() {
        // The bench feeds 1,000,000 qrels lines: parsing must stay linear-ish.
        let mut text = String::with_capacity(25_000_000);
        for q in 0..1000 {
            for d in 0..1000 {
                text.push_str(&format!("q{q} 0 doc{d} {}\n", (q + d) % 3));
            }
        }
        let start = std::time::Instant::now();
        let (j, _) = parse_qrels("big", &text, "relevance", &[]).unwrap();
        assert_eq!(j.grades.len(), 1000);
        assert!(start.elapsed().as_secs_f64() < 20.0, "took {:?}", start.elapsed());
    }
}
