//! Errors of an experiment, split by whose fault they are: the user's input (the CLI exits 2)
//! or the measurement (exit 1); and how they quote what the user gave ([`clip`]).

use std::borrow::Cow;

/// Why an experiment could not be planned or carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// Bad input, found before anything was started or written.
    #[error("{0}")]
    Invalid(String),
    /// The target could not be started or reached.
    #[error(transparent)]
    Target(#[from] targets::TargetError),
    #[error(transparent)]
    Load(#[from] load::LoadError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Analysis(#[from] analysis::AnalysisError),
    #[error(transparent)]
    Server(#[from] server::ServerError),
    /// A host mechanism (isolation) failed after the checks passed.
    #[error(transparent)]
    Host(#[from] host::HostError),
    /// A run's typed form could not be encoded, or a stored one decoded.
    #[error("typed run: {0}")]
    Encoding(String),
    /// The measurement itself failed (what was measured is stored).
    #[error("{0}")]
    Failed(String),
    /// A run that measured nothing usable (no successful request): stored as `failed` or
    /// `interrupted` with what is known (`summary`, the JSON a `--json` caller prints).
    #[error("{message}")]
    RunFailed {
        run_id: i64,
        message: String,
        summary: serde_json::Value,
    },
}

impl LabError {
    /// Whether the user's input is at fault (exit code 2).
    pub fn is_invalid(&self) -> bool {
        matches!(self, LabError::Invalid(_))
    }

    /// The stored summary of a run that failed, when there is one.
    pub fn run_summary(&self) -> Option<&serde_json::Value> {
        match self {
            LabError::RunFailed { summary, .. } => Some(summary),
            _ => None,
        }
    }
}

/// Shorthand for an [`LabError::Invalid`].
pub fn invalid(msg: impl std::fmt::Display) -> LabError {
    LabError::Invalid(msg.to_string())
}

/// How many characters of a user's value an error message quotes.
pub const QUOTE_CHARS: usize = 200;

/// `s` cut to [`QUOTE_CHARS`] characters, with "…" when it was longer: how error messages
/// quote what the user gave (a 100,000-character URL is not echoed whole).
pub fn clip(s: &str) -> Cow<'_, str> {
    clip_to(s, QUOTE_CHARS)
}

/// `s` cut to `max` characters, with "…" when it was longer.
pub fn clip_to(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some((i, _)) => Cow::Owned(format!("{}…", &s[..i])),
    }
}
