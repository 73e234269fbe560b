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
    /// A field of a file that is one JSON object rather than lines of records (a model's
    /// `config.json`): the field's name says where, a line would not.
    pub fn field(file: impl Into<String>, field: impl Into<String>) -> Self {
        Location { file: file.into(), line: None, field: Some(field.into()) }
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
    /// The GPU was forced (`--backend gpu`, the page's "GPU") and cannot run the model; the
    /// kind of reason picks the sentence the page shows.
    #[error("model: the GPU backend was requested but cannot run: {}", .0.reason)]
    GpuRefused(GpuNotUsed),
    /// The user cancelled a long-running job.
    #[error("cancelled")]
    Cancelled,
    /// A model computed NaN or infinity where a job reads its output (`model::finite`).
    #[error("{0}")]
    NonFinite(NonFinite),
}

/// Why the GPU did not run: its kind, which picks the sentence a clinician reads
/// (`gpu::select` words each), and the technical reason, which reports and the page's
/// disclosure show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuNotUsed {
    pub why: GpuUnavailable,
    pub reason: String,
}

/// The kinds of reason the GPU does not run a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuUnavailable {
    /// The model runs in int8, and the GPU kernels are f32.
    Int8,
    /// The only adapter is a software one (lavapipe, SwiftShader), slower than the CPU
    /// path: Auto leaves it alone.
    SoftwareAdapter,
    /// No adapter could be opened.
    NoAdapter,
    /// An adapter opened, but the model could not be set up on it (its limits, its memory).
    Setup,
}

/// A model output that is not a number: where it was found (the output and the input's
/// position among those the model function was given), then, once a job knows them, the
/// model and the input as a user knows it ([`Error::naming_input`]). Such an output must
/// never become a verdict: NaN's argmax is class 0 ("contradicted"), a NaN ranker ties
/// every answer, a NaN mean is written as null.
#[derive(Debug, Clone, PartialEq)]
pub struct NonFinite {
    /// What the model computed: "logits", "embedding", "token vectors", "similarity", "loss".
    pub output: &'static str,
    pub index: usize,
    pub model: Option<String>,
    pub input: Option<String>,
}

impl fmt::Display for NonFinite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.model {
            Some(m) => write!(f, "model {m} computed")?,
            None => write!(f, "the model computed")?,
        }
        write!(f, " NaN or infinite {} for ", self.output)?;
        match &self.input {
            Some(i) => write!(f, "{i}")?,
            None => write!(f, "input #{}", self.index + 1)?,
        }
        write!(
            f,
            ": numbers that are not numbers are no verdict, so nothing is reported. Its weights or config.json \
             make it so (weights of extreme size overflow f32; check the folder, or train it again)"
        )
    }
}

impl Error {
    /// An input error at `file:line`, field `field`.
    pub fn input(file: &str, line: usize, field: &str, message: impl Into<String>) -> Self {
        Error::Input { location: Location::at(file, line, field), message: message.into() }
    }
    /// An input error at field `field` of `file`, without a line (see [`Location::field`]).
    pub fn field(file: &str, field: &str, message: impl Into<String>) -> Self {
        Error::Input { location: Location::field(file, field), message: message.into() }
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
    /// A [`Error::NonFinite`] with its model and its input named (`describe` maps the input's
    /// position to what the user knows it by); what a model function already named stays.
    /// Any other error is returned as it is.
    pub fn naming_input(self, model: &str, describe: impl FnOnce(usize) -> String) -> Self {
        match self {
            Error::NonFinite(mut n) => {
                n.model.get_or_insert_with(|| model.to_string());
                if n.input.is_none() {
                    n.input = Some(describe(n.index));
                }
                Error::NonFinite(n)
            }
            other => other,
        }
    }
    /// [`Error::naming_input`] for a function that knows its inputs but not the model.
    pub fn describing_input(self, describe: impl FnOnce(usize) -> String) -> Self {
        match self {
            Error::NonFinite(mut n) if n.input.is_none() => {
                n.input = Some(describe(n.index));
                Error::NonFinite(n)
            }
            other => other,
        }
    }
    /// A [`Error::NonFinite`] whose input position is `to(index)`: a function that gave a
    /// model its inputs in another order (pieces of documents) says which of its own
    /// inputs it was.
    pub fn reindexing(self, to: impl FnOnce(usize) -> usize) -> Self {
        match self {
            Error::NonFinite(mut n) => {
                n.index = to(n.index);
                Error::NonFinite(n)
            }
            other => other,
        }
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
