//! Evidence for drafting rubrics (`medrank rubric-draft`, FORMATS.md §13): the user's own
//! documents as they have them. A *corpus* file (the documents NRP reads: JSONL
//! `{"docno", "text"}` or TSV `docno<TAB>text`) holds one document per line; a plain text
//! or Markdown file is one document, named by its file.
//!
//! Each document is cut into *blocks* here, by its format's rules (the drafting packs
//! blocks into passages, `eval::draft::text::passages`):
//!
//! - every format: a blank line (empty or spaces only) ends a block;
//! - Markdown also: an ATX heading line (`#` to `######` then a space or the line's end)
//!   ends a block and is no block itself; its text (without the `#`s) is the heading of the
//!   blocks that follow, until the next heading; a fenced code block (a line starting with
//!   ```` ``` ```` or `~~~`, up to the line that closes it, or the file's end) is left out,
//!   counted in a warning.
//!
//! Offsets are byte offsets into the document's text (the `text` field as read, or the
//! whole file without its byte-order mark); reports turn them into character offsets.

use crate::data::common::{check_line_ends, nothing_to_read, strip_bom};
use crate::error::{Error, Result, Warning};
use serde::Serialize;
use std::collections::HashMap;

/// How an evidence file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceFormat {
    /// Documents, one per line: JSONL `{"docno", "text"}` or TSV `docno<TAB>text`,
    /// told apart by content as NRP's documents are (`data::parse_documents`).
    Corpus,
    /// One document: the file, paragraphs separated by blank lines.
    Text,
    /// One document: the file, with Markdown's headings and fenced code blocks.
    Markdown,
}

impl EvidenceFormat {
    /// The names [`EvidenceFormat::parse`] takes.
    pub const NAMES: [&'static str; 3] = ["corpus", "text", "markdown"];

    pub fn name(self) -> &'static str {
        match self {
            EvidenceFormat::Corpus => "corpus",
            EvidenceFormat::Text => "text",
            EvidenceFormat::Markdown => "markdown",
        }
    }

    pub fn parse(name: &str) -> Result<EvidenceFormat> {
        match name.trim().to_ascii_lowercase().as_str() {
            "corpus" => Ok(EvidenceFormat::Corpus),
            "text" => Ok(EvidenceFormat::Text),
            "markdown" => Ok(EvidenceFormat::Markdown),
            other => Err(Error::invalid(format!(
                "unknown evidence format `{other}`; expected one of {}",
                EvidenceFormat::NAMES.join(", ")
            ))),
        }
    }

    /// The format a file's name says: `.jsonl`, `.tsv` a corpus; `.txt`, `.text` plain
    /// text; `.md`, `.markdown` Markdown (case-insensitive). Any other name is refused,
    /// naming the file and the extensions, rather than guessed.
    pub fn of_file_name(name: &str) -> Result<EvidenceFormat> {
        let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
        let extension = base.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
        match extension.as_str() {
            "jsonl" | "tsv" => Ok(EvidenceFormat::Corpus),
            "txt" | "text" => Ok(EvidenceFormat::Text),
            "md" | "markdown" => Ok(EvidenceFormat::Markdown),
            _ => Err(Error::in_file(
                name,
                "the evidence format is read from the file's extension: .jsonl or .tsv (documents, one per line), \
                 .txt or .text (plain text), .md or .markdown (Markdown); rename the file",
            )),
        }
    }
}

/// A run of a document's text between blank lines (or headings), as byte offsets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Block {
    pub start: usize,
    pub end: usize,
    /// The Markdown heading the block sits under (its nearest one above), if any.
    pub heading: Option<String>,
}

/// One evidence document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceDocument {
    /// The corpus's `docno`, or the file's name for a text or Markdown file.
    pub id: String,
    /// The file it came from.
    pub file: String,
    pub format: EvidenceFormat,
    pub text: String,
    pub blocks: Vec<Block>,
}

/// Reads evidence files, given as (name, text, format), into documents. A document id
/// twice (within a corpus, or across files) is an error naming both places; an empty
/// document is kept, without blocks, and warned about by the corpus reader or here.
pub fn read_evidence(files: &[(&str, &str, EvidenceFormat)]) -> Result<(Vec<EvidenceDocument>, Vec<Warning>)> {
    let mut documents: Vec<EvidenceDocument> = Vec::new();
    let mut warnings = Vec::new();
    let mut where_from: HashMap<String, String> = HashMap::new();
    for &(name, text, format) in files {
        let read = match format {
            EvidenceFormat::Corpus => {
                let (docs, w) = crate::data::parse_documents(name, text)?;
                warnings.extend(w);
                docs.into_iter()
                    .map(|d| {
                        let blocks = blocks(&d.text, false).0;
                        EvidenceDocument { id: d.docno, file: name.to_owned(), format, text: d.text, blocks }
                    })
                    .collect::<Vec<_>>()
            }
            EvidenceFormat::Text | EvidenceFormat::Markdown => {
                check_line_ends(name, text)?;
                let body = strip_bom(text);
                if body.trim().is_empty() {
                    return Err(nothing_to_read(name, text, "no text in the file"));
                }
                let (blocks, code_blocks) = blocks(body, format == EvidenceFormat::Markdown);
                if code_blocks > 0 {
                    warnings.push(Warning::at(
                        crate::Location::file(name),
                        format!("{code_blocks} fenced code block(s) left out of the evidence (code is not evidence)"),
                    ));
                }
                if blocks.is_empty() {
                    return Err(nothing_to_read(name, text, "no text outside headings and code blocks"));
                }
                vec![EvidenceDocument {
                    id: name.to_owned(),
                    file: name.to_owned(),
                    format,
                    text: body.to_owned(),
                    blocks,
                }]
            }
        };
        for d in read {
            if let Some(first) = where_from.insert(d.id.clone(), d.file.clone()) {
                let what = if first == d.file { "twice in this file".to_owned() } else { format!("also in {first}") };
                return Err(Error::in_file(
                    &d.file,
                    format!("document id `{}` is {what}: ids name one document", d.id),
                ));
            }
            documents.push(d);
        }
    }
    Ok((documents, warnings))
}

/// The blocks of `text` and the number of fenced code blocks left out (Markdown only).
fn blocks(text: &str, markdown: bool) -> (Vec<Block>, usize) {
    let mut out = Vec::new();
    let mut heading: Option<String> = None;
    let mut open: Option<(usize, usize)> = None; // (start, end) of the block being read
    let mut fence: Option<&str> = None; // the open code fence's marker
    let mut code_blocks = 0;
    let mut at = 0;
    let close = |open: &mut Option<(usize, usize)>, out: &mut Vec<Block>, heading: &Option<String>| {
        if let Some((start, end)) = open.take() {
            out.push(Block { start, end, heading: heading.clone() });
        }
    };
    for raw in text.split_inclusive('\n') {
        let line_start = at;
        at += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        let trimmed = line.trim_start();
        if markdown {
            if let Some(marker) = fence {
                if trimmed.starts_with(marker) {
                    fence = None;
                }
                continue;
            }
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                close(&mut open, &mut out, &heading);
                fence = Some(&trimmed[..3]);
                code_blocks += 1;
                continue;
            }
            if let Some(title) = atx_heading(line) {
                close(&mut open, &mut out, &heading);
                heading = (!title.is_empty()).then(|| title.to_owned());
                continue;
            }
        }
        if line.trim().is_empty() {
            close(&mut open, &mut out, &heading);
            continue;
        }
        // The block's text starts at the line's first non-space character and ends at
        // its last one.
        let first = line_start + (line.len() - trimmed.len());
        let last = line_start + line.trim_end().len();
        open = Some(match open {
            Some((start, _)) => (start, last),
            None => (first, last),
        });
    }
    close(&mut open, &mut out, &heading);
    (out, code_blocks)
}

/// The text of an ATX heading line (`## Side effects ##` -> `Side effects`): up to three
/// spaces, one to six `#`, then a space or the line's end; closing `#`s are dropped.
fn atx_heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let hashes = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let after = &rest[hashes..];
    if !after.is_empty() && !after.starts_with([' ', '\t']) {
        return None;
    }
    Some(after.trim().trim_end_matches('#').trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(d: &EvidenceDocument) -> Vec<(&str, Option<&str>)> {
        d.blocks.iter().map(|b| (&d.text[b.start..b.end], b.heading.as_deref())).collect()
    }

    #[test]
    fn markdown_blocks_follow_headings_blank_lines_and_fences() {
        let md = "# Scabies\n\nScabies is an itchy skin condition.\nIt spreads by skin contact.\n\n## Treatment ##\nPermethrin 5% cream is applied once.\n   \n```\nnot evidence\n\nstill code\n```\n- Wash bedding in hot water.\n#hashtag is text\n";
        let (docs, warnings) = read_evidence(&[("notes/scabies.md", md, EvidenceFormat::Markdown)]).unwrap();
        assert_eq!(docs[0].id, "notes/scabies.md");
        assert_eq!(
            texts(&docs[0]),
            [
                ("Scabies is an itchy skin condition.\nIt spreads by skin contact.", Some("Scabies")),
                ("Permethrin 5% cream is applied once.", Some("Treatment")),
                ("- Wash bedding in hot water.\n#hashtag is text", Some("Treatment")),
            ]
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0]
            .to_string()
            .ends_with("1 fenced code block(s) left out of the evidence (code is not evidence)"));
        // The same text as plain text: headings and code are text, blank lines still part.
        let (docs, _) = read_evidence(&[("scabies.txt", md, EvidenceFormat::Text)]).unwrap();
        assert_eq!(docs[0].blocks.len(), 5);
        assert!(docs[0].blocks.iter().all(|b| b.heading.is_none()));
    }

    #[test]
    fn corpus_documents_keep_their_ids_and_ids_are_unique_across_files() {
        let jsonl = "{\"docno\": \"d1\", \"text\": \"First paragraph.\\n\\nSecond paragraph.\"}\n";
        let tsv = "d2\tOne line only.\n";
        let (docs, _) = read_evidence(&[
            ("a.jsonl", jsonl, EvidenceFormat::Corpus),
            ("b.tsv", tsv, EvidenceFormat::Corpus),
            ("c.txt", "\u{feff}Plain text.\r\n", EvidenceFormat::Text),
        ])
        .unwrap();
        assert_eq!(docs.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["d1", "d2", "c.txt"]);
        assert_eq!(texts(&docs[0]), [("First paragraph.", None), ("Second paragraph.", None)]);
        assert_eq!(texts(&docs[2]), [("Plain text.", None)]);
        let err = read_evidence(&[("a.jsonl", jsonl, EvidenceFormat::Corpus), ("d1", "x", EvidenceFormat::Text)])
            .unwrap_err()
            .to_string();
        assert_eq!(err, "d1: document id `d1` is also in a.jsonl: ids name one document");
        let err = read_evidence(&[("e.md", " \n```\ncode\n```\n", EvidenceFormat::Markdown)]).unwrap_err().to_string();
        assert_eq!(err, "e.md:5: no text outside headings and code blocks");
        let err = read_evidence(&[("e.txt", "\n \n", EvidenceFormat::Text)]).unwrap_err().to_string();
        assert_eq!(err, "e.txt:3: no text in the file");
    }

    #[test]
    fn formats_by_name() {
        assert_eq!(EvidenceFormat::of_file_name("x/Guide.MD").unwrap(), EvidenceFormat::Markdown);
        assert_eq!(EvidenceFormat::of_file_name("docs.tsv").unwrap(), EvidenceFormat::Corpus);
        assert_eq!(EvidenceFormat::of_file_name("notes.txt").unwrap(), EvidenceFormat::Text);
        let err = EvidenceFormat::of_file_name("guide.pdf").unwrap_err().to_string();
        assert!(err.starts_with("guide.pdf: the evidence format is read from the file's extension"), "{err}");
        assert_eq!(EvidenceFormat::parse("Markdown").unwrap(), EvidenceFormat::Markdown);
    }
}
