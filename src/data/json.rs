//! A JSON tree that keeps every object key, duplicates included, in file order.
//!
//! `serde_json::Value` silently keeps only the last of two equal keys, so a line like
//! `{"options": {"1": "a", "1": "b"}}` would lose an option without a word. The readers
//! parse into this tree instead and turn a duplicate key into an error naming the field.

use crate::error::{Error, Location, Result};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    /// (key, value) in file order; duplicates are kept so that readers can report them.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// A short name of the JSON type, for "expected a string, found a number".
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v).map(Json::Number).ok_or_else(|| E::custom("number is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            entries.push((key, value));
        }
        Ok(Json::Object(entries))
    }
}

/// One JSON object of a JSONL line, with its file and line for messages: the line's
/// top-level object, or an object nested in it (see [`Record::objects`]).
pub(crate) struct Record<'a> {
    pub file: &'a str,
    pub line: usize,
    /// Where the object sits in its line, as a prefix of field names in messages:
    /// "" for the top level, "criteria[2]." for the third object of `criteria`.
    pub path: String,
    pub entries: Vec<(String, Json)>,
}

/// An error at `file:line` that has no field (e.g. the line is not JSON at all).
pub(crate) fn line_error(file: &str, line: usize, message: impl Into<String>) -> Error {
    Error::Input {
        location: Location { file: file.to_owned(), line: Some(line), field: None },
        message: message.into(),
    }
}

/// Parses one JSONL line into an object. Errors carry serde's column; serde's own
/// "at line 1 column N" suffix is dropped because the line inside the file is ours.
pub(crate) fn parse_record<'a>(file: &'a str, line: usize, text: &str) -> Result<Record<'a>> {
    let value: Json = serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        let message = match message.rsplit_once(" at line ") {
            Some((head, _)) => head.to_owned(),
            None => message,
        };
        line_error(file, line, format!("invalid JSON at column {}: {message}", e.column()))
    })?;
    match value {
        Json::Object(entries) => {
            let record = Record { file, line, path: String::new(), entries };
            record.reject_duplicates(&record.entries, None)?;
            Ok(record)
        }
        other => Err(line_error(file, line, format!("expected a JSON object on this line, found {}", other.kind()))),
    }
}

impl<'a> Record<'a> {
    /// An error at this record's file and line; `field` is relative to the record.
    pub(crate) fn error(&self, field: &str, message: impl Into<String>) -> Error {
        Error::input(self.file, self.line, &format!("{}{field}", self.path), message)
    }

    /// The value of a top-level field, if present (null counts as absent).
    pub(crate) fn get(&self, field: &str) -> Option<&Json> {
        self.entries.iter().find(|(k, _)| k == field).map(|(_, v)| v).filter(|v| **v != Json::Null)
    }

    pub(crate) fn require(&self, field: &str) -> Result<&Json> {
        self.get(field).ok_or_else(|| self.error(field, format!("missing field `{field}`")))
    }

    pub(crate) fn string(&self, field: &str) -> Result<&str> {
        self.as_str(field, self.require(field)?)
    }

    pub(crate) fn as_str<'v>(&self, field: &str, value: &'v Json) -> Result<&'v str> {
        match value {
            Json::String(s) => Ok(s),
            other => Err(self.error(field, format!("expected a string, found {}", other.kind()))),
        }
    }

    /// A label such as an option key: a string, or a whole number written without quotes
    /// (`"answer": 3` and `"answer": "3"` mean the same; the HiTZ files use numbers).
    pub(crate) fn label(&self, field: &str) -> Result<String> {
        match self.require(field)? {
            Json::String(s) => Ok(s.clone()),
            Json::Number(n) if n.is_u64() || n.is_i64() => Ok(n.to_string()),
            other => Err(self.error(field, format!("expected a string or a whole number, found {}", other.kind()))),
        }
    }

    /// A label that is not empty or blank (an id, a system name).
    pub(crate) fn non_empty_label(&self, field: &str) -> Result<String> {
        let label = self.label(field)?;
        if label.trim().is_empty() {
            return Err(self.error(field, format!("`{field}` is empty")));
        }
        Ok(label)
    }

    /// `true` or `false`.
    pub(crate) fn boolean(&self, field: &str) -> Result<bool> {
        match self.require(field)? {
            Json::Bool(b) => Ok(*b),
            other => Err(self.error(field, format!("expected true or false, found {}", other.kind()))),
        }
    }

    /// A finite number.
    pub(crate) fn number(&self, field: &str) -> Result<f64> {
        match self.require(field)? {
            Json::Number(n) => Ok(n.as_f64().expect("serde_json numbers convert to f64")),
            other => Err(self.error(field, format!("expected a number, found {}", other.kind()))),
        }
    }

    /// A non-negative whole number.
    pub(crate) fn unsigned(&self, field: &str) -> Result<u32> {
        match self.require(field)? {
            Json::Number(n) => n
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| self.error(field, format!("expected a whole number >= 0, found {n}"))),
            other => Err(self.error(field, format!("expected a whole number >= 0, found {}", other.kind()))),
        }
    }

    /// An object field whose values are all strings, as (key, text) in file order.
    pub(crate) fn string_map(&self, field: &str) -> Result<Vec<(String, String)>> {
        let entries = self.object(field)?;
        entries
            .iter()
            .map(|(k, v)| match v {
                Json::String(s) => Ok((k.clone(), s.clone())),
                other => Err(self.error(&format!("{field}.{k}"), format!("expected a string, found {}", other.kind()))),
            })
            .collect()
    }

    /// An object field whose values are all numbers, as (key, value) in file order.
    pub(crate) fn number_map(&self, field: &str) -> Result<Vec<(String, f64)>> {
        let entries = self.object(field)?;
        entries
            .iter()
            .map(|(k, v)| match v {
                Json::Number(n) => Ok((k.clone(), n.as_f64().expect("finite"))),
                other => Err(self.error(&format!("{field}.{k}"), format!("expected a number, found {}", other.kind()))),
            })
            .collect()
    }

    /// An object field whose values are all `true` or `false`, as (key, value) in file order.
    pub(crate) fn boolean_map(&self, field: &str) -> Result<Vec<(String, bool)>> {
        let entries = self.object(field)?;
        entries
            .iter()
            .map(|(k, v)| match v {
                Json::Bool(b) => Ok((k.clone(), *b)),
                other => {
                    Err(self.error(&format!("{field}.{k}"), format!("expected true or false, found {}", other.kind())))
                }
            })
            .collect()
    }

    /// An array field whose items are all strings, in file order (may be empty).
    pub(crate) fn string_array(&self, field: &str) -> Result<Vec<String>> {
        let items = self.array(field, "an array of strings")?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Json::String(s) => Ok(s.clone()),
                other => {
                    Err(self.error(&format!("{field}[{i}]"), format!("expected a string, found {}", other.kind())))
                }
            })
            .collect()
    }

    /// An array field whose items are all objects, each as a record at this line whose
    /// messages name `field[i].key`. A key twice in one of them is an error.
    pub(crate) fn objects(&self, field: &str) -> Result<Vec<Record<'a>>> {
        let items = self.array(field, "an array of objects")?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let at = format!("{field}[{i}]");
                match item {
                    Json::Object(entries) => {
                        let record = Record {
                            file: self.file,
                            line: self.line,
                            path: format!("{}{at}.", self.path),
                            entries: entries.clone(),
                        };
                        record.reject_duplicates(&record.entries, None)?;
                        Ok(record)
                    }
                    other => Err(self.error(&at, format!("expected an object, found {}", other.kind()))),
                }
            })
            .collect()
    }

    /// An object field as a record at this line whose messages name `field.key` (a key
    /// twice in it is an error).
    pub(crate) fn object_record(&self, field: &str) -> Result<Record<'a>> {
        let entries = self.object(field)?.clone();
        Ok(Record { file: self.file, line: self.line, path: format!("{}{field}.", self.path), entries })
    }

    /// `expected` names the array's content for the message, e.g. "an array of strings".
    fn array(&self, field: &str, expected: &str) -> Result<&Vec<Json>> {
        match self.require(field)? {
            Json::Array(items) => Ok(items),
            other => Err(self.error(field, format!("expected {expected}, found {}", other.kind()))),
        }
    }

    pub(crate) fn object(&self, field: &str) -> Result<&Vec<(String, Json)>> {
        match self.require(field)? {
            Json::Object(entries) => {
                self.reject_duplicates(entries, Some(field))?;
                Ok(entries)
            }
            other => Err(self.error(field, format!("expected an object, found {}", other.kind()))),
        }
    }

    /// Linear in the number of keys (a hostile line may have millions of them).
    pub(crate) fn reject_duplicates(&self, entries: &[(String, Json)], parent: Option<&str>) -> Result<()> {
        let mut seen = std::collections::HashSet::with_capacity(entries.len());
        for (key, _) in entries {
            if !seen.insert(key.as_str()) {
                let field = match parent {
                    Some(p) => format!("{p}.{key}"),
                    None => key.clone(),
                };
                return Err(self.error(&field, format!("duplicate key `{key}`")));
            }
        }
        Ok(())
    }

    /// Top-level keys outside `known`, for an "unknown field" warning.
    pub(crate) fn unknown_fields(&self, known: &[&str]) -> Vec<&str> {
        self.entries.iter().map(|(k, _)| k.as_str()).filter(|k| !known.contains(k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_json_reports_serde_column_without_serde_line() {
        let err = parse_record("f.jsonl", 7, r#"{"id": "a",, }"#).err().unwrap();
        let loc = err.location().unwrap();
        assert_eq!((loc.line, loc.field.as_deref()), (Some(7), None));
        // The second comma is at column 12; Python 3 agrees: json.loads('{"id": "a",, }') ->
        // "Expecting property name enclosed in double quotes: line 1 column 12".
        assert_eq!(err.to_string(), "f.jsonl:7: invalid JSON at column 12: key must be a string");
    }

    #[test]
    fn duplicate_keys_are_errors_at_any_level() {
        let err = parse_record("f", 1, r#"{"id": "a", "id": "b"}"#).err().unwrap();
        assert_eq!(err.location().unwrap().field.as_deref(), Some("id"));
        let rec = parse_record("f", 2, r#"{"o": {"1": "x", "1": "y"}}"#).unwrap();
        let err = rec.string_map("o").unwrap_err();
        assert_eq!(err.to_string(), "f:2: field `o.1`: duplicate key `1`");
    }

    #[test]
    fn nested_objects_name_their_path_in_messages() {
        let rec = parse_record("f", 4, r#"{"c": [{"b": true, "s": ["x"]}, {"b": 1, "s": ["y", 2]}], "n": 5}"#).unwrap();
        let items = rec.objects("c").unwrap();
        assert!(items[0].boolean("b").unwrap());
        assert_eq!(items[0].string_array("s").unwrap(), ["x"]);
        assert_eq!(
            items[1].boolean("b").unwrap_err().to_string(),
            "f:4: field `c[1].b`: expected true or false, found a number"
        );
        assert_eq!(
            items[1].string_array("s").unwrap_err().to_string(),
            "f:4: field `c[1].s[1]`: expected a string, found a number"
        );
        assert_eq!(
            rec.objects("n").err().unwrap().to_string(),
            "f:4: field `n`: expected an array of objects, found a number"
        );
        let rec = parse_record("f", 5, r#"{"c": [{"k": 1}, 3], "d": [{"k": 1, "k": 2}]}"#).unwrap();
        assert_eq!(
            rec.objects("c").err().unwrap().to_string(),
            "f:5: field `c[1]`: expected an object, found a number"
        );
        assert_eq!(rec.objects("d").err().unwrap().to_string(), "f:5: field `d[0].k`: duplicate key `k`");
    }

    #[test]
    fn labels_accept_whole_numbers_and_keep_key_order() {
        let rec = parse_record("f", 1, r#"{"a": 3, "o": {"10": "x", "2": "y"}}"#).unwrap();
        assert_eq!(rec.label("a").unwrap(), "3");
        let keys: Vec<String> = rec.string_map("o").unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["10", "2"]);
        let rec = parse_record("f", 1, r#"{"a": 3.5}"#).unwrap();
        assert!(rec.label("a").is_err());
    }
}
