//! The terminal observer of long work (`lab::Observer`): notes and progress bars on stderr.
//! Bars draw only on a terminal; under `--json` with stderr not a terminal nothing is printed
//! at all.

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

/// Notes and progress bars on stderr.
pub struct Progress {
    quiet: bool,
    bar: Mutex<Option<(String, ProgressBar)>>,
}

impl Progress {
    /// `json`: the command prints JSON on stdout (then notes go quiet unless stderr is a
    /// terminal, so that scripts capturing both streams get only the object and errors).
    pub fn new(json: bool) -> Self {
        Progress {
            quiet: json && !std::io::stderr().is_terminal(),
            bar: Mutex::new(None),
        }
    }
}

impl lab::Observer for Progress {
    fn note(&self, msg: &str) {
        if self.quiet {
            return;
        }
        let bar = self.bar.lock().ok();
        match bar.as_ref().and_then(|b| b.as_ref()) {
            // A bar drawn on a terminal prints the note above itself; a hidden one (stderr
            // not a terminal) would swallow it.
            Some((_, b)) if !b.is_hidden() => b.println(msg),
            _ => eprintln!("{msg}"),
        }
    }

    fn progress(&self, phase: &str, done: u64, total: u64) {
        if self.quiet {
            return;
        }
        let Ok(mut slot) = self.bar.lock() else {
            return;
        };
        if slot.as_ref().is_none_or(|(p, _)| p != phase) {
            if let Some((_, b)) = slot.take() {
                b.finish_and_clear();
            }
            let b = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} [{bar:30}] {human_pos}/{human_len} ({elapsed}, eta {eta})",
            ) {
                b.set_style(style.progress_chars("=> "));
            }
            b.set_message(phase.to_string());
            *slot = Some((phase.to_string(), b));
        }
        if let Some((_, b)) = slot.as_ref() {
            b.set_length(total);
            b.set_position(done);
        }
    }

    fn phase_done(&self, phase: &str) {
        if let Ok(mut slot) = self.bar.lock() {
            if slot.as_ref().is_some_and(|(p, _)| p == phase) {
                if let Some((_, b)) = slot.take() {
                    b.finish_and_clear();
                }
            }
        }
    }
}
