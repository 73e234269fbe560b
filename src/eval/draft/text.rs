//! The extractive half of drafting a rubric: evidence cut into passages, sentences and
//! atomic statements, each statement a piece of the evidence's own text with its place in
//! it. Nothing is rewritten: a statement is its source span with runs of whitespace
//! collapsed to one space (a list item's statement is its lead-in, a space, and the item).
//!
//! The rules, in order (each is tested on real clinical text, `tests` below):
//!
//! 1. **Units.** A passage is cut into units at list items and hard breaks. A list item
//!    starts at a line that begins (after spaces) with `-`, `*`, `+`, `•` or `–`, or a
//!    number of one to three digits with `.` or `)`, followed by a space; or inside a line
//!    at `-`, `*` or `•` and a space after two or more spaces or after a sentence's end or
//!    a colon (lists flattened into one line, as in MedQuAD's NIH pages: "factors. -
//!    Genetics."). The marker is not part of the item. A hard break is
//!    a run of three or more spaces or tabs inside a line before an upper-case letter or a
//!    digit (flattened paragraphs). A line break alone is no break (wrapped text).
//! 2. **Sentences.** A unit is cut after `.`, `!` or `?` (closing brackets and quotes
//!    included) that is followed by whitespace and then neither a lower-case letter nor
//!    `,`, `;`, `:`, and not after an abbreviation: the titles and Latin abbreviations of
//!    [`ABBREVIATIONS`] (`Dr.`, `e.g.`, `i.e.`, `et al.`, `approx.` ...), `No.`, `Fig.`,
//!    `p.` and `pp.` before a number, dotted capitals (`M.M.`, `U.S.`), and a single
//!    capital after a word that ends with a period (`Dr. M. Cohen`). Dosing abbreviations
//!    (`i.v.`, `b.i.d.`) end a sentence only before a capital, as any word does.
//!    A period between digits (`0.5 mg`, `2.5%`) or inside a word (`mg/kg`) is never
//!    followed by whitespace, so it cuts nothing.
//! 3. **Clauses.** A sentence is cut again at `;`, and at a comma with one of
//!    [`CLAUSE_CONJUNCTIONS`] before the start of a subject: `, and` / `, or` before a
//!    pronoun ([`PRONOUNS`]), `, but`, `, whereas`, `, while`, `, although`, `, yet` also
//!    before a determiner or "people", "patients" ... ([`SUBJECT_STARTS`]); outside
//!    brackets, and where both sides keep at least [`MIN_CLAUSE_WORDS`] words. The
//!    conjunction is left out of the second clause.
//! 4. **Lead-ins.** A unit before a run of list items whose last sentence does not end with
//!    `.`, `!` or `?` (it ends with `:` or with no punctuation, "Symptoms are") is the
//!    items' lead-in: it is no statement of its own, and each item's first clause becomes
//!    "lead-in item", its span running from the lead-in's start to the item's end.
//! 5. **Clean-up and what is left out.** A trailing `;` or `,` (with a trailing `and` /
//!    `or` after it) and a trailing `:` leave the span. A statement that ends with `?` (a
//!    question is no fact) or has fewer than the minimum words is left out, counted.

use crate::data::evidence::{Block, EvidenceDocument};
use serde::Serialize;

/// A part of a document's text, as byte offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn of(self, text: &str) -> &str {
        &text[self.start..self.end]
    }
    fn words(self, text: &str) -> usize {
        self.of(text).split_whitespace().count()
    }
}

/// The fewest words each side of a clause cut keeps (else the sentence stays whole).
pub const MIN_CLAUSE_WORDS: usize = 3;

/// Abbreviations that never end a sentence (lower case, without their last period): titles
/// and Latin. Dosing abbreviations (`i.v.`, `b.i.d.`, `p.o.`) are not here: "Take 500 mg
/// b.i.d. Avoid alcohol." ends after `b.i.d.`, and before a lower-case word ("i.v.
/// infusion") no abbreviation ends a sentence anyway.
pub const ABBREVIATIONS: &[&str] = &[
    "al", "approx", "ca", "cf", "dept", "dr", "e.g", "esp", "i.e", "incl", "mr", "mrs", "ms", "mt", "prof", "resp",
    "st", "viz", "vs",
];

/// Abbreviations that end no sentence when a number follows (`No. 5`, `Fig. 2`, `p. 12`).
pub const BEFORE_NUMBERS: &[&str] = &["fig", "no", "p", "pp", "vol"];

/// One statement: the evidence's own words and where they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Statement {
    pub text: String,
    /// From the lead-in's start when it has one, to the statement's end.
    pub span: Span,
    /// The statement's own words (the list item's, without the lead-in).
    pub own: Span,
    /// The list item's lead-in, when the statement is "lead-in item".
    pub lead_in: Option<Span>,
}

/// Counts of what [`statements`] left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// Sentences that end with `?`.
    pub questions: usize,
    /// Statements under the minimum number of words.
    pub short: usize,
}

impl LeftOut {
    pub fn add(&mut self, other: LeftOut) {
        self.questions += other.questions;
        self.short += other.short;
    }
}

/// A unit of text between list-item starts and hard breaks.
#[derive(Debug, Clone, Copy)]
struct Unit {
    span: Span,
    item: bool,
}

fn is_horizontal_space(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// The bytes a list marker takes at the start of `s` (the marker and the spaces after
/// it), for a line's start (`line_start`) or inside a line.
fn list_marker(s: &str, line_start: bool) -> Option<usize> {
    let mut chars = s.char_indices();
    let (_, first) = chars.next()?;
    let marker_end = if line_start && first.is_ascii_digit() {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 3 || !matches!(s.as_bytes().get(digits), Some(b'.' | b')')) {
            return None;
        }
        digits + 1
    } else if matches!(first, '-' | '*' | '•') || (line_start && matches!(first, '+' | '–')) {
        first.len_utf8()
    } else {
        return None;
    };
    let after = &s[marker_end..];
    let spaces = after.len() - after.trim_start_matches(is_horizontal_space).len();
    (spaces > 0 && !after.trim_start_matches(is_horizontal_space).is_empty()).then_some(marker_end + spaces)
}

/// Rule 1: the units of `region`.
fn units(text: &str, region: Span) -> Vec<Unit> {
    // (end of the unit before, start of the next, whether the next is a list item)
    let mut breaks: Vec<(usize, usize, bool)> = Vec::new();
    let mut at = region.start;
    for line in region.of(text).split_inclusive('\n') {
        let line_start = at;
        at += line.len();
        let content = line.trim_start();
        let content_start = line_start + (line.len() - content.len());
        if let Some(marker) = list_marker(content, true) {
            breaks.push((line_start, content_start + marker, true));
        }
        // Inside the line: runs of spaces before an inline marker or a capital.
        let body = line.trim_end_matches(['\n', '\r']);
        let mut i = content_start - line_start;
        while i < body.len() {
            let rest = &body[i..];
            let run = rest.len() - rest.trim_start_matches(is_horizontal_space).len();
            if run == 0 {
                i += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            }
            let next = &rest[run..];
            if !next.is_empty() {
                let after_an_end = body[..i].trim_end_matches(CLOSERS).ends_with(['.', ':', '!', '?']);
                if run >= 2 || after_an_end {
                    if let Some(marker) = list_marker(next, false) {
                        breaks.push((line_start + i, line_start + i + run + marker, true));
                        i += run + marker;
                        continue;
                    }
                }
                let capital = next.chars().next().is_some_and(|c| c.is_uppercase() || c.is_ascii_digit());
                if run >= 3 && capital {
                    breaks.push((line_start + i, line_start + i + run, false));
                }
            }
            i += run;
        }
    }
    let mut out = Vec::new();
    let mut start = region.start;
    let mut item = false;
    for (end, next, next_item) in breaks {
        out.push(Unit { span: Span { start, end }, item });
        start = next;
        item = next_item;
    }
    out.push(Unit { span: Span { start, end: region.end }, item });
    out.into_iter().filter_map(|u| trimmed(text, u.span).map(|span| Unit { span, item: u.item })).collect()
}

/// `span` without the whitespace at either end; `None` when nothing is left.
fn trimmed(text: &str, span: Span) -> Option<Span> {
    let s = span.of(text);
    let start = span.start + (s.len() - s.trim_start().len());
    let end = span.start + s.trim_end().len();
    (start < end).then_some(Span { start, end })
}

/// The word that ends just before byte `dot` (the period), brackets before it dropped.
fn word_before(text: &str, dot: usize) -> &str {
    let before = &text[..dot];
    let start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    before[start..].trim_start_matches(['(', '[', '"', '“', '\''])
}

/// Rule 2: whether the period at byte `dot` ends no sentence because of the word before
/// it, given the character `next` that starts the following word.
fn abbreviation_before(text: &str, dot: usize, next: char) -> bool {
    let word = word_before(text, dot);
    let lower = word.to_lowercase();
    if ABBREVIATIONS.contains(&lower.as_str()) {
        return true;
    }
    if next.is_ascii_digit() && BEFORE_NUMBERS.contains(&lower.as_str()) {
        return true;
    }
    // Dotted initials: `M.M`, `U.S` (every part one capital).
    let parts: Vec<&str> = word.split('.').collect();
    if parts.len() >= 2 && parts.iter().all(|p| p.chars().count() == 1 && p.chars().all(char::is_uppercase)) {
        return true;
    }
    // A single capital after a word ending with a period: `Dr. M. Cohen`, `J. K. Smith`.
    if word.chars().count() == 1 && word.chars().all(char::is_uppercase) {
        let before = text[..dot - word.len()].trim_end();
        return before.ends_with('.');
    }
    false
}

const CLOSERS: [char; 7] = [')', ']', '"', '\'', '’', '”', '»'];

/// Rule 2: the sentences of a unit.
fn sentences_of(text: &str, unit: Span) -> Vec<Span> {
    let mut out = Vec::new();
    let mut start = unit.start;
    let s = unit.of(text);
    let mut iter = s.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        // The end of the terminal run: more terminals, then closing brackets and quotes.
        let mut end = i + c.len_utf8();
        while let Some(&(j, d)) = iter.peek() {
            if matches!(d, '.' | '!' | '?') || CLOSERS.contains(&d) {
                end = j + d.len_utf8();
                iter.next();
            } else {
                break;
            }
        }
        let rest = &s[end..];
        let Some(first) = rest.chars().next() else { break };
        if !first.is_whitespace() {
            continue;
        }
        let after = rest.trim_start();
        let Some(next) = after.chars().next() else { break };
        if next.is_lowercase() || matches!(next, ',' | ';' | ':') {
            continue;
        }
        if c == '.' && s[..end].trim_end_matches(CLOSERS).ends_with('.') {
            let dot = unit.start + s[..end].trim_end_matches(CLOSERS).len() - 1;
            if abbreviation_before(text, dot, next) {
                continue;
            }
        }
        out.push(Span { start, end: unit.start + end });
        start = unit.start + (s.len() - after.len());
    }
    out.push(Span { start, end: unit.end });
    out.into_iter().filter_map(|span| trimmed(text, span)).collect()
}

/// Every sentence of `region` (list items and hard breaks end sentences too): where a
/// passage longer than the limit is cut.
pub fn sentences(text: &str, region: Span) -> Vec<Span> {
    units(text, region).into_iter().flat_map(|u| sentences_of(text, u.span)).collect()
}

/// The conjunctions that start a clause after a comma (rule 3).
pub const CLAUSE_CONJUNCTIONS: &[&str] = &["although", "and", "but", "or", "whereas", "while", "yet"];
/// `, and` and `, or` start a clause only before a pronoun ("..., and it spreads"): before
/// anything else they usually end a list ("a magnet, radio waves, and a computer").
pub const PRONOUNS: &[&str] = &["he", "i", "it", "she", "there", "these", "they", "this", "those", "we", "you"];
/// The other conjunctions start a clause before a pronoun or a word that can begin a
/// subject ("..., but some develop pneumonia"); before any other word ("lowers, but does
/// not eliminate, the risk") they join parts of one clause.
pub const SUBJECT_STARTS: &[&str] = &[
    "a", "adults", "all", "an", "children", "each", "few", "its", "many", "most", "others", "patients", "people",
    "some", "the", "their", "your",
];

/// Rule 3: a sentence's clauses (the sentence itself when no cut keeps enough words).
fn clauses(text: &str, sentence: Span) -> Vec<Span> {
    let s = sentence.of(text);
    // (end of the first clause, start of the second) at each candidate cut.
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ';' if depth == 0 => cuts.push((i, i + 1)),
            ',' if depth == 0 => {
                let rest = &s[i + 1..];
                let after = rest.trim_start();
                let word: String = after.chars().take_while(|c| c.is_alphabetic()).collect();
                let lower = word.to_lowercase();
                let next_word = || {
                    let tail = after[word.len()..].trim_start();
                    tail.chars().take_while(|c| c.is_alphabetic()).collect::<String>().to_lowercase()
                };
                let next = next_word();
                let subject = PRONOUNS.contains(&next.as_str())
                    || (!matches!(lower.as_str(), "and" | "or") && SUBJECT_STARTS.contains(&next.as_str()));
                let cut = CLAUSE_CONJUNCTIONS.contains(&lower.as_str()) && subject;
                if cut && after.len() > word.len() {
                    let skip = (rest.len() - after.len()) + word.len();
                    cuts.push((i, i + 1 + skip));
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut start = sentence.start;
    for (end, next) in cuts {
        let left = Span { start, end: sentence.start + end };
        let right = Span { start: sentence.start + next, end: sentence.end };
        if left.words(text) >= MIN_CLAUSE_WORDS && right.words(text) >= MIN_CLAUSE_WORDS {
            out.extend(trimmed(text, left));
            start = right.start;
        }
    }
    out.extend(trimmed(text, Span { start, end: sentence.end }));
    out
}

/// Rule 5's clean-up: a trailing `;`, `,`, `:` (and an `and` / `or` after `;` or `,`)
/// leaves the span.
fn tidy(text: &str, span: Span) -> Option<Span> {
    let mut s = span.of(text).trim_end();
    for tail in ["and", "or"] {
        if let Some(head) = s.strip_suffix(tail) {
            let head_trim = head.trim_end();
            if head.len() > head_trim.len() && head_trim.ends_with([';', ',']) {
                s = head_trim;
            }
        }
    }
    let s = s.trim_end_matches([';', ',', ':']).trim_end();
    trimmed(text, Span { start: span.start, end: span.start + s.len() })
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a sentence ends with `.`, `!` or `?` (brackets and quotes after it aside).
fn ends_a_sentence(s: &str) -> bool {
    s.trim_end().trim_end_matches(CLOSERS).ends_with(['.', '!', '?'])
}

/// The atomic statements of `region` of `text` (rules 1 to 5) whose own words start
/// within `within` (a passage of the region: the region is read whole, so a list cut by a
/// passage's edge keeps its lead-in), with what was left out there.
pub fn statements(text: &str, region: Span, within: Span, min_words: usize) -> (Vec<Statement>, LeftOut) {
    let units = units(text, region);
    let mut out = Vec::new();
    let mut left_out = LeftOut::default();
    let mut lead_in: Option<Span> = None;
    let mut push = |span: Span, lead: Option<Span>, out: &mut Vec<Statement>| {
        let Some(span) = tidy(text, span) else { return };
        if !(within.start..within.end).contains(&span.start) {
            return;
        }
        let own_span = span;
        let own = collapse(span.of(text));
        if own.ends_with('?') {
            left_out.questions += 1;
            return;
        }
        let (text_of, full) = match lead {
            Some(l) => (format!("{} {own}", collapse(l.of(text))), Span { start: l.start, end: span.end }),
            None => (own, span),
        };
        if text_of.split_whitespace().count() < min_words {
            left_out.short += 1;
            return;
        }
        out.push(Statement { text: text_of, span: full, own: own_span, lead_in: lead });
    };
    for (u, unit) in units.iter().enumerate() {
        let sentences = sentences_of(text, unit.span);
        if !unit.item {
            lead_in = None;
        }
        let next_is_item = units.get(u + 1).is_some_and(|n| n.item);
        for (k, sentence) in sentences.iter().enumerate() {
            let last = k + 1 == sentences.len();
            if !unit.item && last && next_is_item && !ends_a_sentence(sentence.of(text)) {
                lead_in = Some(*sentence);
                continue;
            }
            for (c, clause) in clauses(text, *sentence).into_iter().enumerate() {
                let lead = if unit.item && k == 0 && c == 0 { lead_in } else { None };
                push(clause, lead, &mut out);
            }
        }
    }
    (out, left_out)
}

/// One passage of a document: a part of its text no longer than the word limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Passage {
    pub span: Span,
    pub heading: Option<String>,
    /// The block (or blocks joined) it belongs to: its statements are read in it.
    pub block: Span,
}

/// The passages of a document, by the rules of FORMATS.md §13: each block is a passage;
/// a block of list items joins the block before it when that one ends with `:` (same
/// heading, within the limit); a block over `max_words` words is cut between sentences
/// into passages of at most `max_words` words, and a sentence over the limit is cut
/// between words. Returns the passages and how many sentences were cut.
pub fn passages(doc: &EvidenceDocument, max_words: usize) -> (Vec<Passage>, usize) {
    let text = doc.text.as_str();
    let mut out: Vec<Passage> = Vec::new();
    let mut cut = 0;
    let mut previous: Option<&Block> = None;
    for block in &doc.blocks {
        let span = Span { start: block.start, end: block.end };
        let words = span.words(text);
        let joins = previous.is_some_and(|p| {
            p.heading == block.heading
                && Span { start: p.start, end: p.end }.of(text).trim_end().ends_with(':')
                && list_marker(span.of(text), true).is_some()
        });
        previous = Some(block);
        if let (true, Some(last)) = (joins, out.last_mut()) {
            if last.span.words(text) + words <= max_words && last.block == last.span {
                last.span.end = span.end;
                last.block.end = span.end;
                continue;
            }
        }
        let passage = |piece: Span| Passage { span: piece, heading: block.heading.clone(), block: span };
        if words <= max_words {
            out.push(passage(span));
            continue;
        }
        // Whole sentences while they fit; a sentence over the limit on its own is cut.
        let mut pieces: Vec<Span> = Vec::new();
        for sentence in sentences(text, span) {
            if sentence.words(text) > max_words {
                cut += 1;
                pieces.extend(word_chunks(text, sentence, max_words));
            } else {
                pieces.push(sentence);
            }
        }
        let mut current: Option<Span> = None;
        for piece in pieces {
            current = match current {
                Some(c) if Span { start: c.start, end: piece.end }.words(text) <= max_words => {
                    Some(Span { start: c.start, end: piece.end })
                }
                Some(c) => {
                    out.push(passage(c));
                    Some(piece)
                }
                None => Some(piece),
            };
        }
        out.extend(current.map(passage));
    }
    (out, cut)
}

/// `span` cut between words into pieces of at most `max_words` words.
fn word_chunks(text: &str, span: Span, max_words: usize) -> Vec<Span> {
    let s = span.of(text);
    let mut words = Vec::new();
    let mut in_word: Option<usize> = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), in_word) {
            (false, None) => in_word = Some(i),
            (true, Some(st)) => {
                words.push((st, i));
                in_word = None;
            }
            _ => {}
        }
    }
    if let Some(st) = in_word {
        words.push((st, s.len()));
    }
    words
        .chunks(max_words.max(1))
        .map(|c| Span { start: span.start + c[0].0, end: span.start + c[c.len() - 1].1 })
        .collect()
}

/// A byte offset of `text` as a character offset (what reports and the §7 file give).
pub fn char_offset(text: &str, byte: usize) -> usize {
    text[..byte].chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::evidence::{read_evidence, EvidenceDocument, EvidenceFormat};

    fn texts(text: &str, min_words: usize) -> Vec<String> {
        let all = Span { start: 0, end: text.len() };
        statements(text, all, all, min_words).0.into_iter().map(|s| s.text).collect()
    }

    #[test]
    fn abbreviations_numbers_and_doses_end_no_sentence() {
        // Written for this test, in the style of a drug label.
        let text = "Give 0.5 mg/kg i.v. once, e.g. before surgery. Dr. M. Cohen advised 2.5% lidocaine \
                    (approx. 10 mL) b.i.d. Doses over 4 g per day are toxic! See Fig. 2. No. It is not safe.";
        assert_eq!(
            texts(text, 1),
            [
                "Give 0.5 mg/kg i.v. once, e.g. before surgery.",
                "Dr. M. Cohen advised 2.5% lidocaine (approx. 10 mL) b.i.d.",
                "Doses over 4 g per day are toxic!",
                "See Fig. 2.",
                "No.",
                "It is not safe.",
            ]
        );
    }

    #[test]
    fn clauses_lists_and_lead_ins() {
        let text = "Most people recover within a week, but some develop pneumonia; antibiotics do not help. \
                    Symptoms include:\n- fever\n- a dry cough that lasts; and\n- fatigue that can last weeks\n";
        assert_eq!(
            texts(text, 1),
            [
                "Most people recover within a week",
                "some develop pneumonia",
                "antibiotics do not help.",
                "Symptoms include: fever",
                "Symptoms include: a dry cough that lasts",
                "Symptoms include: fatigue that can last weeks",
            ]
        );
        // A conjunction cuts only before a subject's start; a side under three words keeps
        // the sentence whole.
        assert_eq!(
            texts(
                "Wash hands often, and it spreads less. Condoms lower, but do not remove, the risk. It uses a magnet, \
                 radio waves, and a computer. Rest, but you.",
                1
            ),
            [
                "Wash hands often",
                "it spreads less.",
                "Condoms lower, but do not remove, the risk.",
                "It uses a magnet, radio waves, and a computer.",
                "Rest, but you."
            ]
        );
        let all = Span { start: 0, end: 41 };
        let (found, left_out) = statements("What is gout? Gout is arthritis. It hurts.", all, all, 3);
        assert_eq!(found.iter().map(|s| s.text.as_str()).collect::<Vec<_>>(), ["Gout is arthritis."]);
        assert_eq!(left_out, LeftOut { questions: 1, short: 1 });
    }

    /// The vendored MedQuAD slice (CC BY 4.0, data/medquad-mini): real NIH text.
    fn medquad() -> Vec<EvidenceDocument> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/medquad-mini/evidence.jsonl");
        let text = std::fs::read_to_string(path).unwrap();
        read_evidence(&[("evidence.jsonl", &text, EvidenceFormat::Corpus)]).unwrap().0
    }

    /// Every statement of a document, passage by passage (the drafting's own reading).
    fn of_document(doc: &EvidenceDocument, min_words: usize) -> (Vec<Statement>, LeftOut) {
        let mut all = Vec::new();
        let mut left_out = LeftOut::default();
        for p in passages(doc, 150).0 {
            let (found, lost) = statements(&doc.text, p.block, p.span, min_words);
            all.extend(found);
            left_out.add(lost);
        }
        (all, left_out)
    }

    fn document<'a>(docs: &'a [EvidenceDocument], id: &str) -> &'a EvidenceDocument {
        docs.iter().find(|d| d.id == id).unwrap()
    }

    #[test]
    fn real_clinical_text_keeps_titles_initials_doses_and_flattened_lists() {
        let docs = medquad();
        // MedlinePlus on scabies: paragraphs and a list flattened into runs of spaces, a
        // lead-in without a colon ("Symptoms are"), and the source's name at the end.
        let (scabies, _) = of_document(document(&docs, "4_MPlus_Health_Topics_QA/0000794-1"), 1);
        let texts: Vec<&str> = scabies.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            &texts[8..],
            [
                "Pets get a different mite infection called mange.",
                "Symptoms are Pimple-like irritations or a rash",
                "Symptoms are Intense itching, especially at night",
                "Symptoms are Sores caused by scratching",
                "Your health care provider diagnoses scabies by looking at the skin rash and finding burrows in the skin.",
                "Several lotions are available to treat scabies.",
                "The infected person's clothes, bedding and towels should be washed in hot water and dried in a hot dryer.",
                "Treatment is also recommended for household members and sexual partners.",
                "Centers for Disease Control and Prevention",
            ]
        );
        // GARD: "Dr. M.M. Cohen, Jr." ends the sentence only after "Jr."; "; however" cuts.
        let (cohen, _) = of_document(document(&docs, "2_GARD_QA/0001414-1"), 1);
        assert_eq!(
            cohen[0].text,
            "Cohen syndrome is a congenital (present since birth) condition that was first described in 1973 by Dr. \
             M.M. Cohen, Jr."
        );
        assert_eq!(cohen[7].text, "however, treatment for Cohen syndrome is focused on improving or alleviating signs and symptoms as they arise.");
        // GARD: a dose in mg/kg/d inside brackets, a percentage range, and the question the
        // answer starts with, left out.
        let (fasciitis, left_out) = of_document(document(&docs, "2_GARD_QA/0002114-3"), 1);
        assert_eq!(left_out, LeftOut { questions: 1, short: 0 });
        assert_eq!(
            fasciitis[0].text,
            "About 10-20% of people with eosinophilic fasciitis recover spontaneously without treatment."
        );
        assert_eq!(
            fasciitis[1].text,
            "For those who do not, glucocorticoids (0.51 mg/kg/d), such as prednisone, are the mainstay therapy."
        );
        // CDC: doses after a lead-in ending with a colon, "(i.e., ...)", "A. phagocytophilum".
        let (cdc, _) = of_document(document(&docs, "9_CDC_QA/0000014-1"), 1);
        let has = |s: &str| cdc.iter().any(|x| x.text == s);
        assert!(has("The estimated case fatality rate (i.e., the proportion of persons who die as a result of their \
                     infection) is less than 1%."));
        assert!(has(
            "The black-legged tick (Ixodes scapularis) is the vector of A. phagocytophilum in the northeast and \
                     upper midwestern United States."
        ));
        assert!(has(
            "Recommended Dosage Doxycycline is the first line treatment for adults and children of all ages: \
                     Children under 45 kg (100 lbs): 2.2 mg/kg body weight given twice a day"
        ));
        assert!(has("Standard duration of treatment is 7 to 14 days."));
        // NCI: items of a flattened list after "as follows:", the "; and" that joins them left out.
        let (nci, _) = of_document(document(&docs, "1_CancerGov_QA/0000030_1-5"), 1);
        let stage_one: Vec<&str> =
            nci.iter().map(|s| s.text.as_str()).filter(|t| t.starts_with("In stage I multiple")).collect();
        assert_eq!(
            stage_one,
            [
                "In stage I multiple myeloma, the blood levels are as follows: beta-2-microglobulin level is lower than 3.5 mg/L",
                "In stage I multiple myeloma, the blood levels are as follows: albumin level is 3.5 g/dL or higher.",
            ]
        );
    }

    #[test]
    fn every_statement_of_the_real_corpus_is_its_source_text() {
        for doc in medquad() {
            let (found, _) = of_document(&doc, 1);
            let mut last_own = 0;
            for s in &found {
                let own = collapse(s.own.of(&doc.text));
                match s.lead_in {
                    None => {
                        assert_eq!(s.text, own, "{}", doc.id);
                        assert_eq!(s.span, s.own);
                    }
                    Some(lead) => {
                        assert_eq!(s.text, format!("{} {own}", collapse(lead.of(&doc.text))), "{}", doc.id);
                        assert_eq!((s.span.start, s.span.end), (lead.start, s.own.end));
                    }
                }
                // In reading order, never overlapping, no list marker or stray space kept.
                assert!(s.own.start >= last_own, "{}: {}", doc.id, s.text);
                last_own = s.own.end;
                assert!(list_marker(s.own.of(&doc.text), true).is_none(), "{}: {}", doc.id, s.text);
                assert_eq!(s.text.trim(), s.text);
                assert!(!s.text.ends_with([';', ',', ':']), "{}: {}", doc.id, s.text);
            }
        }
    }

    #[test]
    fn passages_follow_blocks_and_the_word_limit() {
        let md =
            "# Gout\n\nGout is arthritis. It hurts a lot. Uric acid builds up in the blood over many years.\n\nYou \
                  are more likely to get gout if you:\n\n- are a man\n- drink alcohol\n";
        let (docs, _) = read_evidence(&[("gout.md", md, EvidenceFormat::Markdown)]).unwrap();
        let (found, cut) = passages(&docs[0], 16);
        let texts: Vec<&str> = found.iter().map(|p| p.span.of(&docs[0].text)).collect();
        // The first block (17 words) is cut between sentences; the list (7 words, markers
        // counted) joins its lead-in (9 words).
        assert_eq!(
            texts,
            [
                "Gout is arthritis. It hurts a lot.",
                "Uric acid builds up in the blood over many years.",
                "You are more likely to get gout if you:\n\n- are a man\n- drink alcohol",
            ]
        );
        assert!(found.iter().all(|p| p.heading.as_deref() == Some("Gout")));
        assert_eq!(cut, 0);
        // A sentence over the limit is cut between words, and counted.
        let (docs, _) =
            read_evidence(&[("long.txt", "one two three four five six seven.", EvidenceFormat::Text)]).unwrap();
        let (found, cut) = passages(&docs[0], 3);
        let texts: Vec<&str> = found.iter().map(|p| p.span.of(&docs[0].text)).collect();
        assert_eq!((texts, cut), (vec!["one two three", "four five six", "seven."], 1));
    }
}
