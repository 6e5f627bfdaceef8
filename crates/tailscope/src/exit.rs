//! Mapping of errors to exit codes: 2 for bad usage or input, 1 for everything else; and the
//! one documented code for "measured fine, but what it found fails a criterion".
//!
//! The exit codes of tailscope: 0 success; 1 the measurement itself failed or no view asked
//! for was valid; 2 bad usage or input (nothing run, nothing written); 3 measured fine but the
//! SLO is violated (or undecided under `--slo-undecided fail`), or `check` found a regression.

use std::fmt;

/// Exit code 3: measured fine, the SLO (`--slo`) violated — or undecided with
/// `--slo-undecided fail`.
pub const SLO_VIOLATED: i32 = 3;

/// Exit code 3 too: a `check` row reads `worse` than its baseline (a regression). One code
/// for "measured fine, but it fails a criterion", distinct from 1 and 2.
pub const REGRESSION: i32 = SLO_VIOLATED;

/// An error in what the user asked for (arguments, input files). Exit code 2.
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Builds a usage error (exit code 2) from anything displayable.
pub fn usage(msg: impl fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Usage(msg.to_string()))
}

/// The exit code for an error: 2 when any error in its chain is the user's input at fault
/// (a usage error, or a library's error that says so), else 1.
pub fn code_of(e: &anyhow::Error) -> i32 {
    let invalid = |c: &(dyn std::error::Error + 'static)| {
        c.downcast_ref::<Usage>().is_some()
            || c.downcast_ref::<lab::LabError>()
                .is_some_and(|e| e.is_invalid())
            || c.downcast_ref::<report::files::FileError>()
                .is_some_and(|e| e.is_refused())
            || c.downcast_ref::<report::gate::GateError>()
                .is_some_and(|e| e.is_invalid())
    };
    if e.chain().any(invalid) {
        2
    } else {
        1
    }
}

/// Converts a domain crate's validation error into a usage error.
pub trait OrUsage<T> {
    fn or_usage(self) -> anyhow::Result<T>;
    fn or_usage_ctx(self, what: &str) -> anyhow::Result<T>;
}

impl<T, E: fmt::Display> OrUsage<T> for Result<T, E> {
    fn or_usage(self) -> anyhow::Result<T> {
        self.map_err(usage)
    }
    fn or_usage_ctx(self, what: &str) -> anyhow::Result<T> {
        self.map_err(|e| usage(format!("{what}: {e}")))
    }
}

/// An error and its causes joined with ": ", as `{e:#}` joins them, but without a cause that
/// the message before it already ends with (a library error whose text quotes its source, as
/// `cannot connect to ADDR: {source}` does, printed its source twice).
pub fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// The most characters of one error line.
const MAX_LINE_CHARS: usize = 2_000;

/// An error message as the one line tailscope prints: line breaks become spaces, any run of
/// characters without a space longer than [`lab::QUOTE_CHARS`] (a pasted
/// 100,000-character URL, quoted in the message once or twice) is cut with "…", and the
/// whole line is at most [`MAX_LINE_CHARS`] characters.
pub fn one_line(msg: &str) -> String {
    let flat = msg.trim().replace(['\n', '\r'], " ");
    let words: Vec<String> = flat.split(' ').map(|w| lab::clip(w).into_owned()).collect();
    lab::clip_to(&words.join(" "), MAX_LINE_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_are_one_line_and_bounded() {
        assert_eq!(one_line("a\nb  c "), "a b  c");
        let long = format!("bad URL 'x{}': '{}'", "y".repeat(100_000), "z".repeat(300));
        let line = one_line(&long);
        assert!(line.chars().count() < 500, "{}", line.len());
        assert!(line.starts_with("bad URL 'xyyy") && line.contains('…'));
        let many = "word ".repeat(10_000);
        assert!(one_line(&many).chars().count() <= MAX_LINE_CHARS + 1);
    }

    #[test]
    fn a_cause_its_parent_quotes_is_printed_once() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = anyhow::Error::new(load::LoadError::Connect {
            addr: "127.0.0.1:9".parse().unwrap(),
            source: refused,
        });
        assert_eq!(
            message(&e),
            format!("cannot connect to 127.0.0.1:9: {}", e.root_cause())
        );
        // Causes the message does not quote are joined as `{e:#}` joins them.
        let e = anyhow::anyhow!("no such file").context("reading runs.db");
        assert_eq!(message(&e), "reading runs.db: no such file");
    }

    #[test]
    fn usage_errors_map_to_2_and_others_to_1() {
        assert_eq!(code_of(&usage("bad")), 2);
        assert_eq!(code_of(&usage("bad").context("while parsing")), 2);
        assert_eq!(code_of(&anyhow::anyhow!("measurement failed")), 1);
        let refused = report::files::FileError::Refused("--plot: no such directory".into());
        assert_eq!(code_of(&anyhow::Error::new(refused)), 2);
        let e = lab::Slo::parse("p99<=", lab::ViewChoice::Auto).unwrap_err();
        assert!(e.is_invalid());
        assert_eq!(code_of(&anyhow::Error::new(e).context("--slo")), 2);
    }
}
