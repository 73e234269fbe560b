//! Statistics used by every method. Each function documents its convention and returns
//! `Stat::Undefined(reason)` on degenerate input instead of a made-up number.

use serde::{Serialize, Serializer};
use std::fmt;

/// A statistic that may be undefined (all-tied input, fewer than two units, ...).
/// Serialises as the bare value, or as `{"undefined": "<reason>"}`.
#[derive(Debug, Clone, PartialEq)]
pub enum Stat<T = f64> {
    Defined(T),
    Undefined(String),
}

impl<T> Stat<T> {
    pub fn undefined(reason: impl Into<String>) -> Self {
        Stat::Undefined(reason.into())
    }
    pub fn value(&self) -> Option<&T> {
        match self {
            Stat::Defined(v) => Some(v),
            Stat::Undefined(_) => None,
        }
    }
    pub fn is_defined(&self) -> bool {
        matches!(self, Stat::Defined(_))
    }
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Stat<U> {
        match self {
            Stat::Defined(v) => Stat::Defined(f(v)),
            Stat::Undefined(r) => Stat::Undefined(r),
        }
    }
    /// The value, panicking with the reason when undefined (tests and internal use).
    pub fn unwrap(self) -> T {
        match self {
            Stat::Defined(v) => v,
            Stat::Undefined(r) => panic!("statistic is undefined: {r}"),
        }
    }
}

impl<T: Serialize> Serialize for Stat<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Stat::Defined(v) => v.serialize(s),
            Stat::Undefined(reason) => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("undefined", reason)?;
                m.end()
            }
        }
    }
}

impl fmt::Display for Stat<f64> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stat::Defined(v) => match f.precision() {
                Some(p) => write!(f, "{v:.p$}"),
                None => write!(f, "{v}"),
            },
            Stat::Undefined(r) => write!(f, "undefined ({r})"),
        }
    }
}

pub mod bootstrap;
pub mod classes;
pub mod describe;
pub mod friedman;
pub mod kappa;
pub mod kendall;
pub mod krippendorff;
pub mod ndcg;
pub mod ranks;
pub mod spearman;

/// A closed interval `[lo, hi]`, e.g. a confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    pub fn contains(&self, value: f64) -> bool {
        self.lo <= value && value <= self.hi
    }
    pub fn width(&self) -> f64 {
        self.hi - self.lo
    }
}

/// The shared input checks of the two-sample statistics: equal lengths and no NaN.
/// Returns the reason the statistic is undefined, if any.
fn check_paired(x: &[f64], y: &[f64]) -> Option<String> {
    if x.len() != y.len() {
        return Some(format!("x and y differ in length ({} vs {})", x.len(), y.len()));
    }
    check_no_nan(x, "x").or_else(|| check_no_nan(y, "y"))
}

/// `Some(reason)` when `values` holds a NaN (statistics never guess what a NaN meant).
fn check_no_nan(values: &[f64], name: &str) -> Option<String> {
    values.iter().position(|v| v.is_nan()).map(|i| format!("{name} holds NaN at position {i}"))
}
