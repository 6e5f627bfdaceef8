//! What an experiment tells the person watching it while it runs. The CLI implements this
//! with progress bars on stderr; tests and `--json` runs use [`Quiet`].

/// Receives progress while an experiment runs (from the calling thread).
pub trait Observer: Sync {
    /// A one-line message for a person ("spawned memcached 1.6.18 at …").
    fn note(&self, _msg: &str) {}
    /// Progress of a phase: `done` of `total` (requests, items, …).
    fn progress(&self, _phase: &str, _done: u64, _total: u64) {}
    /// A phase ended (clears its progress display).
    fn phase_done(&self, _phase: &str) {}
    /// A measured run of a loop (a sweep's point) is stored.
    fn run_done(&self, _run: &crate::run::Run) {}
}

/// Says nothing.
pub struct Quiet;

impl Observer for Quiet {}
