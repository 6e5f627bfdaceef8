//! Why an agent's side of a run, or the coordinator's, could not go on.

/// An agent could not serve its coordinator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The coordinator asked for something this agent cannot do (another version, a job it
    /// cannot run): the input is at fault.
    #[error("{0}")]
    Invalid(String),
    /// The job's load could not be set up.
    #[error(transparent)]
    Load(#[from] load::LoadError),
    /// The run itself failed (a pipe broke, a frame could not be written).
    #[error("{0}")]
    Failed(String),
}
