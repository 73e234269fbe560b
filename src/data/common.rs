//! Small pieces every reader shares: line iteration, CSV set-up with line numbers,
//! header lookup, and warnings grouped by kind with counts and example ids.

use crate::data::json::line_error;
use crate::error::{Error, Location, Result, Warning};

/// How many ids a grouped warning lists before it says "and N more".
pub(crate) const MAX_LISTED_IDS: usize = 10;

/// The distinct items in order of first appearance (systems, batches, tasks as the files
/// list them; reports keep that order). Linear: a hostile file may have millions.
pub(crate) fn first_appearance<T: Eq + std::hash::Hash + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if seen.insert(item.clone()) {
            out.push(item);
        }
    }
    out
}

/// The text without a leading UTF-8 byte-order mark (spreadsheet exports often add one).
pub(crate) fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// An error for a file with nothing to read (empty, blank lines, or a header alone), at the
/// line after its last one: where its first record was expected (line 1 of an empty file).
pub(crate) fn nothing_to_read(file: &str, text: &str, message: impl Into<String>) -> Error {
    line_error(file, strip_bom(text).lines().count() + 1, message)
}

/// The first character that is not whitespace: `{` means JSONL, `<` XML, anything else
/// a delimited text format. Used by readers that accept two formats ("detect by content").
pub(crate) fn first_content_char(text: &str) -> Option<char> {
    strip_bom(text).chars().find(|c| !c.is_whitespace())
}

/// Non-blank lines as (1-based line number, line without its line ending).
pub(crate) fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    strip_bom(text).lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim().is_empty())
}

/// A carriage return that ends a line without a line feed, as classic Mac OS saved text:
/// the readers split lines at `\n` only, so such a file would read as one long line (a
/// combined qrels header then had every row's cells as columns). A CR followed by nothing
/// but spaces up to the line's end (or the file's) changes nothing and is let through.
/// The error names the line (1-based, counting `\n`) and the column of the CR.
pub(crate) fn check_line_ends(file: &str, text: &str) -> Result<()> {
    let bytes = strip_bom(text).as_bytes();
    let mut line_start = 0;
    let mut line = 1;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\n' => {
                line += 1;
                line_start = i + 1;
            }
            b'\r' if bytes.get(i + 1) != Some(&b'\n') => {
                let rest = &bytes[i + 1..];
                let rest = &rest[..rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())];
                if !rest.iter().all(u8::is_ascii_whitespace) {
                    return Err(bare_cr(file, line, &bytes[line_start..i]));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The error for a CR that ends a line alone, `before` being the line's bytes before it.
fn bare_cr(file: &str, line: usize, before: &[u8]) -> Error {
    let column = String::from_utf8_lossy(before).chars().count() + 1;
    line_error(
        file,
        line,
        format!(
            "a carriage return (CR) at column {column} ends a line without a line feed: medrank reads lines that end in LF or CRLF; save the file with those line ends (CR alone is how classic Mac OS saved text)"
        ),
    )
}

/// What the csv reader lets through unsaid: lines that end in a CR alone outside quoted
/// cells ([`check_line_ends`]; inside a quoted cell a CR is text, an error here), and a
/// file that ends inside a quoted cell (cut short, or a quote never closed: the csv reader
/// would give the cut text as a whole cell), returned as (line where the cell opens, index
/// of its record among the non-blank ones, 0 = the header, index of the cell). Follows the
/// csv reader's rules: a quote opens a quoted cell only as the cell's first character,
/// `""` inside one is a quote, and after the closing quote the cell goes on unquoted.
fn scan_csv(file: &str, text: &str) -> Result<Option<(usize, usize, usize)>> {
    #[derive(PartialEq)]
    enum State {
        StartField,
        Unquoted,
        Quoted,
        QuoteInQuoted,
    }
    let bytes = strip_bom(text).as_bytes();
    let (mut state, mut line, mut line_start) = (State::StartField, 1usize, 0usize);
    // The record being read: its index among non-blank records, whether it has a byte
    // yet, and the index of the cell being read.
    let (mut record, mut started, mut cell) = (0usize, false, 0usize);
    let mut open = (0, 0, 0);
    for (i, &b) in bytes.iter().enumerate() {
        if state == State::Quoted {
            match b {
                b'"' => state = State::QuoteInQuoted,
                b'\n' => {
                    line += 1;
                    line_start = i + 1;
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' if state == State::StartField => {
                state = State::Quoted;
                open = (line, record, cell);
                started = true;
            }
            b'"' if state == State::QuoteInQuoted => state = State::Quoted,
            b',' => {
                state = State::StartField;
                cell += 1;
                started = true;
            }
            b'\n' | b'\r' => {
                if b == b'\r' && bytes.get(i + 1) != Some(&b'\n') {
                    let rest = &bytes[i + 1..];
                    let rest = &rest[..rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())];
                    if !rest.iter().all(u8::is_ascii_whitespace) {
                        return Err(bare_cr(file, line, &bytes[line_start..i]));
                    }
                }
                if b == b'\n' {
                    line += 1;
                    line_start = i + 1;
                }
                if started {
                    record += 1;
                }
                (state, started, cell) = (State::StartField, false, 0);
            }
            _ => {
                state = State::Unquoted;
                started = true;
            }
        }
    }
    Ok((state == State::Quoted).then_some(open))
}

/// A CSV file's reader, past its header, and its records' lines: the text is checked first
/// ([`scan_csv`]: no CR-only line ends, not cut inside a quoted cell, which is an error at
/// the line where the cell opens naming its column), then the header is read
/// ([`Header::read`]).
pub(crate) fn open_csv<'t>(file: &str, text: &'t str) -> Result<(csv::Reader<&'t [u8]>, Header, CsvLines<'t>)> {
    let unclosed = scan_csv(file, text)?;
    let mut reader = csv_reader(text);
    let header = Header::read(file, &mut reader);
    if let Some((line, record, cell)) = unclosed {
        let message = "the file ends inside this quoted cell: it was cut short, or a quote (\") that opens the cell is never closed";
        let column = header.as_ref().ok().filter(|_| record > 0).and_then(|h| h.names.get(cell));
        return Err(match column {
            Some(name) if !name.is_empty() => Error::input(file, line, name, message),
            _ => line_error(file, line, message),
        });
    }
    Ok((reader, header?, CsvLines::new(text)))
}

/// The physical lines CSV records start on. The csv reader's own count is one short after
/// a CRLF line end (it counts the record's line before the LF that ends the line before
/// it), so every error of a CRLF file named the line above; lines are counted here from
/// each record's byte offset instead, onwards from the previous record's.
pub(crate) struct CsvLines<'t> {
    bytes: &'t [u8],
    /// A byte offset and the line it is on.
    pos: usize,
    line: usize,
}

impl<'t> CsvLines<'t> {
    pub(crate) fn new(text: &'t str) -> CsvLines<'t> {
        // The reader reads the text past its byte-order mark: offsets are relative to that.
        CsvLines { bytes: strip_bom(text).as_bytes(), pos: 0, line: 1 }
    }

    /// The line of the record or error that starts at byte `start` (a record's offset may
    /// point at the line end before it: that is skipped).
    fn at(&mut self, start: usize) -> usize {
        let mut start = start.min(self.bytes.len());
        while start < self.bytes.len() && matches!(self.bytes[start], b'\r' | b'\n') {
            start += 1;
        }
        if start < self.pos {
            (self.pos, self.line) = (0, 1);
        }
        self.line += self.bytes[self.pos..start].iter().filter(|&&b| b == b'\n').count();
        self.pos = start;
        self.line
    }

    /// The line on which `record` starts (the header is line 1).
    pub(crate) fn of(&mut self, record: &csv::StringRecord) -> usize {
        record.position().map_or(0, |p| self.at(p.byte() as usize))
    }

    /// A csv reader's error as an input error at its line.
    pub(crate) fn error(&mut self, file: &str, error: csv::Error) -> Error {
        match error.position().map(|p| self.at(p.byte() as usize)) {
            Some(line) => line_error(file, line, csv_message(&error)),
            None => csv_error(file, error),
        }
    }
}

/// A CSV reader with a header row, equal-length rows, and fields trimmed of spaces.
pub(crate) fn csv_reader(text: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .trim(csv::Trim::All)
        .from_reader(strip_bom(text).as_bytes())
}

/// A csv crate error (of the header: line 1 in every file) as an input error at its line;
/// records' errors go through [`CsvLines::error`].
pub(crate) fn csv_error(file: &str, error: csv::Error) -> Error {
    let line = error.position().map(|p| p.line() as usize);
    let message = csv_message(&error);
    match line {
        Some(line) => line_error(file, line, message),
        None => Error::in_file(file, message),
    }
}

fn csv_message(error: &csv::Error) -> String {
    match error.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("this row has {len} fields but the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { .. } => "the text is not valid UTF-8".to_owned(),
        _ => error.to_string(),
    }
}

/// Column positions of a CSV header, looked up by name.
pub(crate) struct Header {
    pub names: Vec<String>,
}

impl Header {
    pub(crate) fn read(file: &str, reader: &mut csv::Reader<&[u8]>) -> Result<Header> {
        let names: Vec<String> = reader.headers().map_err(|e| csv_error(file, e))?.iter().map(str::to_owned).collect();
        if names.iter().all(|n| n.is_empty()) {
            return Err(line_error(file, 1, "the file is empty (expected a header row)"));
        }
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(Error::input(file, 1, name, format!("column `{name}` appears twice")));
            }
        }
        Ok(Header { names })
    }

    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub(crate) fn require(&self, file: &str, name: &str) -> Result<usize> {
        self.position(name).ok_or_else(|| {
            Error::input(file, 1, name, format!("missing column `{name}` (the header is `{}`)", self.names.join(",")))
        })
    }

    /// The positions of `names`, in their order; the first missing one is an error.
    pub(crate) fn require_all(&self, file: &str, names: &[&str]) -> Result<Vec<usize>> {
        names.iter().map(|c| self.require(file, c)).collect()
    }

    /// A warning listing columns the reader does not use, if any.
    pub(crate) fn unknown_columns(&self, file: &str, is_known: impl Fn(&str) -> bool) -> Option<Warning> {
        let unknown: Vec<&str> = self.names.iter().map(String::as_str).filter(|n| !is_known(n)).collect();
        (!unknown.is_empty()).then(|| {
            Warning::at(
                Location { file: file.to_owned(), line: Some(1), field: None },
                format!("ignored unknown column(s): {}", unknown.join(", ")),
            )
        })
    }
}

/// A CSV field that must not be empty.
pub(crate) fn non_empty<'r>(
    file: &str,
    line: usize,
    field: &str,
    record: &'r csv::StringRecord,
    column: usize,
) -> Result<&'r str> {
    let value = record.get(column).unwrap_or("");
    if value.is_empty() {
        return Err(Error::input(file, line, field, format!("`{field}` is empty")));
    }
    Ok(value)
}

/// Parses a finite number, naming the field on failure.
pub(crate) fn parse_number(file: &str, line: usize, field: &str, value: &str) -> Result<f64> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(Error::input(file, line, field, format!("expected a number, found `{value}`"))),
    }
}

/// Parses a whole number >= 0.
pub(crate) fn parse_unsigned(file: &str, line: usize, field: &str, value: &str) -> Result<u32> {
    value
        .parse::<u32>()
        .map_err(|_| Error::input(file, line, field, format!("expected a whole number >= 0, found `{value}`")))
}

/// A probability in [0, 1].
pub(crate) fn check_probability(file: &str, line: usize, field: &str, p: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(Error::input(file, line, field, format!("probability {p} is outside [0, 1]")))
    }
}

/// Warnings grouped by kind: each kind becomes one warning that says how many items it
/// concerns and lists the first few ids, so a file with 10,000 similar issues gives one
/// readable line instead of 10,000.
pub(crate) struct Tally {
    file: String,
    /// (message, ids) in order of first occurrence.
    groups: Vec<(String, Vec<String>)>,
    /// message -> its place in `groups` (a file may have millions of distinct messages,
    /// e.g. one per unknown field name).
    index: std::collections::HashMap<String, usize>,
}

impl Tally {
    pub(crate) fn new(file: &str) -> Tally {
        Tally { file: file.to_owned(), groups: Vec::new(), index: std::collections::HashMap::new() }
    }

    pub(crate) fn add(&mut self, message: impl Into<String>, id: impl Into<String>) {
        let message = message.into();
        match self.index.get(&message) {
            Some(&i) => self.groups[i].1.push(id.into()),
            None => {
                self.index.insert(message.clone(), self.groups.len());
                self.groups.push((message, vec![id.into()]));
            }
        }
    }

    pub(crate) fn into_warnings(self) -> Vec<Warning> {
        let file = self.file;
        self.groups
            .into_iter()
            .map(|(message, ids)| Warning::at(Location::file(file.clone()), format!("{message}: {}", list_ids(&ids))))
            .collect()
    }
}

/// "3 (a, b, c)" or "25 (a, b, ..., j, and 15 more)".
pub(crate) fn list_ids(ids: &[String]) -> String {
    let shown: Vec<&str> = ids.iter().take(MAX_LISTED_IDS).map(String::as_str).collect();
    let rest = ids.len().saturating_sub(MAX_LISTED_IDS);
    if rest == 0 {
        format!("{} ({})", ids.len(), shown.join(", "))
    } else {
        format!("{} ({}, and {rest} more)", ids.len(), shown.join(", "))
    }
}

/// A short, single-line excerpt of a text for messages.
pub(crate) fn excerpt(text: &str, max_chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max_chars {
        flat
    } else {
        let cut: String = flat.chars().take(max_chars).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_groups_and_caps_the_id_list() {
        let mut tally = Tally::new("b.jsonl");
        for i in 0..12 {
            tally.add("empty argument text", format!("q{i}"));
        }
        tally.add("other", "x");
        let warnings = tally.into_warnings();
        assert_eq!(warnings.len(), 2);
        assert_eq!(
            warnings[0].to_string(),
            "b.jsonl: empty argument text: 12 (q0, q1, q2, q3, q4, q5, q6, q7, q8, q9, and 2 more)"
        );
        assert_eq!(warnings[1].to_string(), "b.jsonl: other: 1 (x)");
    }

    #[test]
    fn csv_record_lines_count_physical_lines_including_quoted_newlines() {
        // LF and CRLF alike (the csv reader's own count said 1 and 3 with CRLF), after a
        // byte-order mark and blank lines too.
        for text in ["a,b\n\"x\ny\",1\nz,2\n", "a,b\r\n\"x\r\ny\",1\r\nz,2\r\n", "\u{feff}a,b\n\"x\ny\",1\n\nz,2\n"] {
            let (mut reader, _, mut lines) = open_csv("f", text).unwrap();
            let found: Vec<usize> = reader.records().map(|r| lines.of(&r.unwrap())).collect();
            let blank = usize::from(text.contains("\n\n"));
            assert_eq!(found, [2, 4 + blank], "{text:?}");
        }
        // A short row's error is at its own line in a CRLF file too.
        let (mut reader, _, mut lines) = open_csv("f", "a,b\r\n1,2\r\n3\r\n").unwrap();
        let err = reader.records().find_map(|r| r.err()).unwrap();
        assert_eq!(lines.error("f", err).to_string(), "f:3: this row has 1 fields but the header has 2");
    }

    #[test]
    fn a_csv_cut_inside_a_quoted_cell_is_refused_where_the_cell_opens() {
        let message = "the file ends inside this quoted cell: it was cut short, or a quote (\") that opens the cell is never closed";
        let err = open_csv("a.csv", "qid,query,answer1\n1,q,\"cut in the mid").err().unwrap();
        assert_eq!(err.to_string(), format!("a.csv:2: field `answer1`: {message}"));
        // A cell that opens on line 3 of a record starting on line 2 (a closed cell spans
        // lines 2-3), and one cut in the header (no column name yet).
        let err = open_csv("a.csv", "a,b\n\"x\ny\",\"never\nclosed").err().unwrap();
        assert_eq!(err.to_string(), format!("a.csv:3: field `b`: {message}"));
        let err = open_csv("a.csv", "a,\"b").err().unwrap();
        assert_eq!(err.to_string(), format!("a.csv:1: {message}"));
        // Closed cells over lines, doubled quotes, and a quote inside an unquoted cell
        // (text, as the csv reader takes it) are fine.
        for text in ["a,b\n\"x\ny\",1\nz,2\n", "a,b\n\"he said \"\"hi\"\"\",1\n", "a,b\nab\"c,1\n", "a,b\n\"x\"y,1\n"] {
            let (mut reader, header, _) = open_csv("a.csv", text).unwrap();
            assert_eq!(header.names, ["a", "b"]);
            assert!(reader.records().all(|r| r.is_ok()), "{text:?}");
        }
    }

    #[test]
    fn lines_ending_in_a_carriage_return_alone_are_refused_at_their_line() {
        let message = |line: usize, column: usize| {
            format!("f:{line}: a carriage return (CR) at column {column} ends a line without a line feed: medrank reads lines that end in LF or CRLF; save the file with those line ends (CR alone is how classic Mac OS saved text)")
        };
        assert_eq!(check_line_ends("f", "a\nbé\rd\n").unwrap_err().to_string(), message(2, 3));
        assert_eq!(check_line_ends("f", "\u{feff}ab\rc").unwrap_err().to_string(), message(1, 3));
        // CRLF, and a CR with nothing but spaces after it on its line, are line ends.
        for fine in ["a\r\nb\r\n", "a\r", "a\r \nb\n", ""] {
            assert!(check_line_ends("f", fine).is_ok(), "{fine:?}");
        }
        // In CSV, a CR inside a quoted cell is text; outside, it ends a line.
        assert_eq!(open_csv("f", "a,b\r1,2\r").err().unwrap().to_string(), message(1, 4));
        let (mut reader, _, _) = open_csv("f", "a,b\n\"x\ry\",2\n").unwrap();
        assert_eq!(reader.records().next().unwrap().unwrap().get(0), Some("x\ry"));
    }

    #[test]
    fn an_empty_file_is_refused_where_its_first_record_was_expected() {
        assert_eq!(nothing_to_read("f", "", "empty").location().unwrap().line, Some(1));
        assert_eq!(nothing_to_read("f", "a,b\n", "no rows").location().unwrap().line, Some(2));
        assert_eq!(nothing_to_read("f", "\u{feff}\n\n  \n", "blank").to_string(), "f:4: blank");
    }

    #[test]
    fn excerpt_flattens_and_cuts_on_characters() {
        assert_eq!(excerpt("Sjögren\n syndrome", 9), "Sjögren s…");
        assert_eq!(excerpt("short", 9), "short");
    }
}
