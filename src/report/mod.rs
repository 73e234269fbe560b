//! What every report carries so that a result can be reproduced: program version, seed,
//! sha256 fingerprints of every input and model file, and the conventions in force.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// sha256 of some bytes, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// One input (or model file) that a report depends on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fingerprint {
    /// The name the user gave (a path on the CLI, a file name in the browser).
    pub name: String,
    pub sha256: String,
    pub bytes: u64,
}

impl Fingerprint {
    pub fn of(name: impl Into<String>, bytes: &[u8]) -> Self {
        Fingerprint { name: name.into(), sha256: sha256_hex(bytes), bytes: bytes.len() as u64 }
    }
}

/// A report computed from one input file: its provenance and its warnings.
pub trait SingleInputReport {
    fn provenance_mut(&mut self) -> &mut Provenance;
    fn warnings_mut(&mut self) -> &mut Vec<crate::Warning>;

    /// Records the input file `name` (its fingerprint) and puts its reader's warnings
    /// before the method's.
    fn with_input(mut self, name: &str, text: &str, mut reader_warnings: Vec<crate::Warning>) -> Self
    where
        Self: Sized,
    {
        self.provenance_mut().inputs.push(Fingerprint::of(name, text.as_bytes()));
        reader_warnings.append(self.warnings_mut());
        *self.warnings_mut() = reader_warnings;
        self
    }
}

/// The header of every report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Provenance {
    pub program: String,
    pub version: String,
    /// Present on every report; methods without randomness record the seed they were given.
    pub seed: u64,
    pub inputs: Vec<Fingerprint>,
    /// Conventions in force, as key -> human-readable value (tie policy, NRP denominator, ...).
    pub conventions: Vec<(String, String)>,
}

impl Provenance {
    pub fn new(seed: u64) -> Self {
        Provenance {
            program: "medrank".into(),
            version: crate::VERSION.into(),
            seed,
            inputs: Vec::new(),
            conventions: Vec::new(),
        }
    }
    pub fn input(mut self, fp: Fingerprint) -> Self {
        self.inputs.push(fp);
        self
    }
    pub fn convention(mut self, key: &str, value: impl Into<String>) -> Self {
        self.conventions.push((key.into(), value.into()));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_fips_180_2_example() {
        // FIPS 180-2, Appendix B.1: SHA-256("abc").
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn counts_amounts_and_durations_read_as_people_write_them() {
        assert_eq!(
            [thousands(0), thousands(999), thousands(8605), thousands(1234567)],
            ["0", "999", "8,605", "1,234,567"]
        );
        assert_eq!(
            [compact(950.0), compact(1234.0), compact(12345.0), compact(1_900_000.0)],
            ["950", "1.2 k", "12 k", "1.9 M"]
        );
        assert_eq!(
            [fmt_duration(0.2), fmt_duration(59.4), fmt_duration(245.0), fmt_duration(3720.0)],
            ["1 s", "59 s", "4 min 05 s", "1 h 02 min"]
        );
    }
}

/// A flat table: what the CLI prints, what `--csv DIR` writes, and what the page exports.
/// Every report turns itself into tables with one function, so the three agree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    /// File stem for CSV export, e.g. "ranking_mcqa".
    pub name: String,
    /// A human title for printing.
    pub title: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(name: &str, title: &str, headers: &[&str]) -> Self {
        Table {
            name: name.into(),
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }
    pub fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.headers.len(), "row width of table {}", self.name);
        self.rows.push(row);
    }
    /// RFC 4180 CSV (fields with comma, quote or newline are quoted).
    pub fn to_csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&self.headers).expect("writing to memory");
        for r in &self.rows {
            w.write_record(r).expect("writing to memory");
        }
        String::from_utf8(w.into_inner().expect("writing to memory")).expect("utf-8 in, utf-8 out")
    }
}

/// Formats a number for tables: fixed decimals, "undefined" for a missing statistic.
pub fn fmt_num(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "undefined".into()
    }
}

/// A count with thousands separated: "8,605".
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A large amount, short: "950", "12.3 k", "1.9 M".
pub fn compact(x: f64) -> String {
    match x {
        x if x >= 1e6 => format!("{:.1} M", x / 1e6),
        x if x >= 1e4 => format!("{:.0} k", x / 1e3),
        x if x >= 1e3 => format!("{:.1} k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

/// A duration for people: "8 s", "4 min 05 s", "1 h 02 min".
pub fn fmt_duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        s if s < 60 => format!("{} s", s.max(1)),
        s if s < 3600 => format!("{} min {:02} s", s / 60, s % 60),
        s => format!("{} h {:02} min", s / 3600, (s % 3600) / 60),
    }
}

/// How many digits a p-value keeps below 0.0001, where it is written in scientific notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PValueDigits {
    /// Tables and their CSV exports: four significant digits (`1.234e-5`).
    Table,
    /// The page's cards and sentences: two (`1.2e-5`).
    Page,
}

/// A p-value as every front end writes it: four decimals, or scientific notation below
/// 0.0001 so that a small p-value is never shown as a bare 0.
pub fn fmt_p_value(p: f64, digits: PValueDigits) -> String {
    if p.is_finite() && p != 0.0 && p < 1e-4 {
        match digits {
            PValueDigits::Table => format!("{p:.3e}"),
            PValueDigits::Page => format!("{p:.1e}"),
        }
    } else {
        fmt_num(p, 4)
    }
}

/// Formats a `Stat` for tables.
pub fn fmt_stat(s: &crate::stats::Stat<f64>, decimals: usize) -> String {
    match s {
        crate::stats::Stat::Defined(v) => fmt_num(*v, decimals),
        crate::stats::Stat::Undefined(reason) => format!("undefined ({reason})"),
    }
}
