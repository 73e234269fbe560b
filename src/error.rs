//! One error type for the whole crate. Input errors carry the place a user can fix:
//! file, line (1-based) and field. The CLI prints them and exits non-zero; the page shows
//! them inline next to the file that caused them.

use serde::Serialize;
use std::fmt;

/// Where in the user's input something happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    pub file: String,
    /// 1-based line number (for CSV: the physical line of the record, header = line 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl Location {
    pub fn file(file: impl Into<String>) -> Self {
        Location { file: file.into(), line: None, field: None }
    }
    pub fn at(file: impl Into<String>, line: usize, field: impl Into<String>) -> Self {
        Location { file: file.into(), line: Some(line), field: Some(field.into()) }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad user input at a known place.
    #[error("{location}: {message}")]
    Input { location: Location, message: String },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// Inputs that are each valid but do not fit together, or bad options.
    #[error("{0}")]
    Invalid(String),
    /// An option's value refused, named by the option's key (`epochs`, `dev_split`) and
    /// worded by the front end that shows it: the CLI as its flag (`--epochs 0: ...`), the
    /// page after its form's field.
    #[error("--{} {message}", .option.replace('_', "-"))]
    Option { option: &'static str, message: String },
    /// Loading or running a model failed.
    #[error("model: {0}")]
    Model(String),
    /// The user cancelled a long-running job.
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    /// An input error at `file:line`, field `field`.
    pub fn input(file: &str, line: usize, field: &str, message: impl Into<String>) -> Self {
        Error::Input { location: Location::at(file, line, field), message: message.into() }
    }
    /// An input error about a whole file (no line).
    pub fn in_file(file: &str, message: impl Into<String>) -> Self {
        Error::Input { location: Location::file(file), message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }
    /// The value of the option `option` (its key, as the front ends' forms and the job
    /// layer's options name it) refused: `message` says the value and what was expected.
    pub fn option(option: &'static str, message: impl Into<String>) -> Self {
        Error::Option { option, message: message.into() }
    }
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
    pub fn model(message: impl fmt::Display) -> Self {
        Error::Model(message.to_string())
    }
    /// The location, when the error has one (the page highlights that file).
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::Input { location, .. } => Some(location),
            _ => None,
        }
    }
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Error::Model(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Something a user should know about but that does not stop the run (e.g. inputs that
/// were truncated to the model's limit). Reports list every warning with a count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Warning {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    pub message: String,
}

impl Warning {
    pub fn new(message: impl Into<String>) -> Self {
        Warning { location: None, message: message.into() }
    }
    pub fn at(location: Location, message: impl Into<String>) -> Self {
        Warning { location: Some(location), message: message.into() }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(loc) => write!(f, "{loc}: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}
