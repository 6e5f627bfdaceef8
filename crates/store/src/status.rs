//! [`RowStatus`]: the status of a run or an experiment as the store keeps it.
//!
//! The store knows two states of its own: a row is `running` from its begin until its
//! producer finishes it, and `abandoned` when the process that began it died first. The
//! outcome a producer records when it finishes the row ("ok", "saturated", an experiment's
//! "2 ok, 1 invalid") is the producer's word, kept as its text: its meaning belongs to the
//! producer (lab reads it as its `RunStatus`). The column holds the same text as before.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A run's or an experiment's status: in the `status` column, in JSON and on screen the
/// text [`RowStatus::as_str`] gives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RowStatus {
    /// Begun and not finished: in progress, or begun by a build before schema 5 (which
    /// recorded no owner) and never finished.
    Running,
    /// Its process ended without finishing it (killed by SIGKILL, the OOM killer, a power
    /// loss); see [`crate::Store::mark_abandoned`].
    Abandoned,
    /// Finished with this outcome, as its producer recorded it (never "running" or
    /// "abandoned": [`RowStatus::from_text`] reads those as the store's own states).
    Finished(String),
}

impl RowStatus {
    /// The text of [`RowStatus::Running`].
    pub const RUNNING: &'static str = "running";
    /// The text of [`RowStatus::Abandoned`].
    pub const ABANDONED: &'static str = "abandoned";

    /// A status from its stored text.
    pub fn from_text(text: impl Into<String>) -> RowStatus {
        let text = text.into();
        match text.as_str() {
            Self::RUNNING => RowStatus::Running,
            Self::ABANDONED => RowStatus::Abandoned,
            _ => RowStatus::Finished(text),
        }
    }

    /// The stored text.
    pub fn as_str(&self) -> &str {
        match self {
            RowStatus::Running => Self::RUNNING,
            RowStatus::Abandoned => Self::ABANDONED,
            RowStatus::Finished(outcome) => outcome,
        }
    }

    /// The outcome a finished row records; `None` while running or when abandoned.
    pub fn outcome(&self) -> Option<&str> {
        match self {
            RowStatus::Finished(outcome) => Some(outcome),
            _ => None,
        }
    }
}

impl std::fmt::Display for RowStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that widths in format strings apply as they did to the text.
        f.pad(self.as_str())
    }
}

impl Serialize for RowStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RowStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RowStatus, D::Error> {
        String::deserialize(d).map(RowStatus::from_text)
    }
}

impl rusqlite::types::FromSql for RowStatus {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        String::column_result(v).map(RowStatus::from_text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_the_same_text() {
        for (text, status) in [
            ("running", RowStatus::Running),
            ("abandoned", RowStatus::Abandoned),
            ("ok", RowStatus::Finished("ok".into())),
            (
                "2 ok, 1 invalid",
                RowStatus::Finished("2 ok, 1 invalid".into()),
            ),
        ] {
            assert_eq!(RowStatus::from_text(text), status);
            assert_eq!(status.as_str(), text);
            assert_eq!(status.to_string(), text);
            let json = serde_json::to_value(&status).unwrap();
            assert_eq!(json, serde_json::Value::String(text.into()));
            assert_eq!(serde_json::from_value::<RowStatus>(json).unwrap(), status);
        }
        assert_eq!(RowStatus::Finished("ok".into()).outcome(), Some("ok"));
        assert_eq!(RowStatus::Running.outcome(), None);
        assert_eq!(format!("[{:<9}]", RowStatus::Running), "[running  ]");
    }
}
