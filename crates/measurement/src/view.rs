//! The two views of a run's latency, and the choice between them a user makes.

use serde::{Deserialize, Serialize};

use crate::error::{invalid, LabError};

/// Which latency a run's figures (and an SLO) are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum View {
    /// Intended send → received: what a user behind the arrival process sees.
    User,
    /// Sent → the client kernel's receive: what the network and the server did.
    Server,
}

impl View {
    pub fn as_str(self) -> &'static str {
        match self {
            View::User => "user",
            View::Server => "server",
        }
    }
}

impl std::fmt::Display for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for View {
    type Err = LabError;
    fn from_str(s: &str) -> Result<View, LabError> {
        match s.trim() {
            "user" => Ok(View::User),
            "server" => Ok(View::Server),
            other => Err(invalid(format!(
                "--slo-view must be user or server, got '{other}'"
            ))),
        }
    }
}

/// The view the user asks for: one of the two, or `auto` — each run's headline view (the
/// user's when it is valid, else the server's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewChoice {
    #[default]
    Auto,
    User,
    Server,
}

impl ViewChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            ViewChoice::Auto => "auto",
            ViewChoice::User => "user",
            ViewChoice::Server => "server",
        }
    }
}

impl std::fmt::Display for ViewChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<View> for ViewChoice {
    fn from(v: View) -> ViewChoice {
        match v {
            View::User => ViewChoice::User,
            View::Server => ViewChoice::Server,
        }
    }
}

impl std::str::FromStr for ViewChoice {
    type Err = LabError;
    fn from_str(s: &str) -> Result<ViewChoice, LabError> {
        match s.trim() {
            "auto" => Ok(ViewChoice::Auto),
            "user" => Ok(ViewChoice::User),
            "server" => Ok(ViewChoice::Server),
            other => Err(invalid(format!(
                "a view must be auto, user or server, got '{other}'"
            ))),
        }
    }
}
