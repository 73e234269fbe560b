//! Which arithmetic the CPU encoder runs: f32, or int8 products ([`super::cpu::int8`]).
//! One switch for every command that runs the encoder (`--precision`), the page's Options
//! and the bench; every report's provenance names it.

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// f32 weights and products (the reference).
    #[default]
    F32,
    /// int8 weights per output channel, 7-bit activations per token, exact i32 sums; the
    /// embeddings, layer norms, attention and everything after the products stay f32.
    Int8,
}

impl Precision {
    /// `f32` or `int8` (the CLI's `--precision` and the page's field).
    pub fn parse(name: &str) -> Result<Precision> {
        match name.trim() {
            "f32" | "fp32" => Ok(Precision::F32),
            "int8" | "i8" | "q8" => Ok(Precision::Int8),
            other => Err(Error::invalid(format!("precision `{other}`: expected f32 or int8"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Int8 => "int8",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_others_are_refused() {
        assert_eq!(Precision::parse("int8").unwrap(), Precision::Int8);
        assert_eq!(Precision::parse(" f32").unwrap(), Precision::F32);
        assert_eq!(Precision::parse("f16").unwrap_err().to_string(), "precision `f16`: expected f32 or int8");
    }
}
