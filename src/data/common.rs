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

/// The first character that is not whitespace: `{` means JSONL, `<` XML, anything else
/// a delimited text format. Used by readers that accept two formats ("detect by content").
pub(crate) fn first_content_char(text: &str) -> Option<char> {
    strip_bom(text).chars().find(|c| !c.is_whitespace())
}

/// Non-blank lines as (1-based line number, line without its line ending).
pub(crate) fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    strip_bom(text).lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim().is_empty())
}

/// A CSV reader with a header row, equal-length rows, and fields trimmed of spaces.
pub(crate) fn csv_reader(text: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .trim(csv::Trim::All)
        .from_reader(strip_bom(text).as_bytes())
}

/// A csv crate error as an input error at its line.
pub(crate) fn csv_error(file: &str, error: csv::Error) -> Error {
    let line = error.position().map(|p| p.line() as usize);
    let message = match error.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("this row has {len} fields but the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { .. } => "the text is not valid UTF-8".to_owned(),
        _ => error.to_string(),
    };
    match line {
        Some(line) => line_error(file, line, message),
        None => Error::in_file(file, message),
    }
}

/// The line on which a CSV record starts (header = line 1).
pub(crate) fn record_line(record: &csv::StringRecord) -> usize {
    record.position().map(|p| p.line() as usize).unwrap_or(0)
}

/// Column positions of a CSV header, looked up by name.
pub(crate) struct Header {
    pub names: Vec<String>,
}

impl Header {
    pub(crate) fn read(file: &str, reader: &mut csv::Reader<&[u8]>) -> Result<Header> {
        let names: Vec<String> = reader.headers().map_err(|e| csv_error(file, e))?.iter().map(str::to_owned).collect();
        if names.iter().all(|n| n.is_empty()) {
            return Err(Error::in_file(file, "the file is empty (expected a header row)"));
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
        let text = "a,b\n\"x\ny\",1\nz,2\n";
        let mut reader = csv_reader(text);
        let lines: Vec<usize> = reader.records().map(|r| record_line(&r.unwrap())).collect();
        assert_eq!(lines, [2, 4]);
    }

    #[test]
    fn excerpt_flattens_and_cuts_on_characters() {
        assert_eq!(excerpt("Sjögren\n syndrome", 9), "Sjögren s…");
        assert_eq!(excerpt("short", 9), "short");
    }
}
