//! `--slo`, `--percentiles`, `--slo-undecided`, `--junit` and `--markdown` of the measuring
//! commands: validated before anything runs, then the verdicts' files and exit code.

use std::path::PathBuf;

use lab::options::{GateArgs, UndecidedArg};
use lab::{LabError, Slo, SloReport, Verdict, ViewChoice};

use crate::files::{check_writable, FileError};

/// Why the gate's options were refused, or its files not written.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// An SLO or a percentile list that does not parse.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// An output file refused before the run, or not written after it.
    #[error(transparent)]
    File(#[from] FileError),
}

impl GateError {
    /// Whether the user's input is at fault (the CLI exits 2).
    pub fn is_invalid(&self) -> bool {
        match self {
            GateError::Lab(e) => e.is_invalid(),
            GateError::File(e) => e.is_refused(),
        }
    }
}

/// The validated options.
pub struct Gate {
    pub slo: Option<Slo>,
    /// Percentiles beyond the standard five: `--percentiles` and the SLO's own.
    pub extra: Vec<(String, f64)>,
    pub undecided_fails: bool,
    junit: Option<PathBuf>,
    markdown: Option<PathBuf>,
}

impl Gate {
    /// Parses and checks everything (the output files must be writable): a usage error on
    /// bad input, before anything runs or is written.
    pub fn new(g: &GateArgs) -> Result<Gate, GateError> {
        let view = ViewChoice::from(g.slo_view);
        let slo = g.slo.as_deref().map(|s| Slo::parse(s, view)).transpose()?;
        let mut gate = Gate::judging(&[slo.as_ref()], g)?;
        gate.slo = slo;
        Ok(gate)
    }

    /// The options for outputs judged by several SLOs (`colocate`'s two services); `slo` is
    /// left empty, `extra` holds every SLO's percentiles.
    pub fn judging(slos: &[Option<&Slo>], g: &GateArgs) -> Result<Gate, GateError> {
        let mut extra = match &g.percentiles {
            Some(p) => lab::parse_percentiles(p)?,
            None => Vec::new(),
        };
        for s in slos.iter().flatten() {
            for (k, q) in s.extra_quantiles() {
                if !extra.iter().any(|(e, _)| *e == k) {
                    extra.push((k, q));
                }
            }
        }
        for (flag, p) in [("--junit", &g.junit), ("--markdown", &g.markdown)] {
            if let Some(p) = p {
                if slos.iter().all(Option::is_none) {
                    return Err(refused(format!(
                        "{flag} writes the SLO's verdicts: give --slo (e.g. --slo 'p99<=1ms')"
                    )));
                }
                check_writable(flag, p)?;
            }
        }
        if let (Some(j), Some(m)) = (&g.junit, &g.markdown) {
            if j == m {
                return Err(refused(format!(
                    "--junit and --markdown name the same file {}",
                    j.display()
                )));
            }
        }
        Ok(Gate {
            slo: None,
            extra,
            undecided_fails: g.slo_undecided == UndecidedArg::Fail,
            junit: g.junit.clone(),
            markdown: g.markdown.clone(),
        })
    }

    /// The exit code of a measurement that went fine, by the SLO's verdict: 3 when violated,
    /// or undecided under `--slo-undecided fail`; else 0.
    pub fn code(&self, v: Verdict) -> i32 {
        lab::verdict_code(v, self.undecided_fails)
    }

    /// Writes the JUnit and Markdown files asked for; returns the paths written.
    pub fn write(&self, suites: &[(String, SloReport)]) -> Result<Vec<String>, GateError> {
        self.write_split(suites, suites)
    }

    /// Writes `gated` as JUnit (the test cases the exit code is made of) and `all` as
    /// Markdown (a report, which may hold more).
    pub fn write_split(
        &self,
        gated: &[(String, SloReport)],
        all: &[(String, SloReport)],
    ) -> Result<Vec<String>, GateError> {
        let mut written = Vec::new();
        let files = [
            (
                &self.junit,
                crate::slo_view::junit(gated, self.undecided_fails),
            ),
            (&self.markdown, crate::slo_view::markdown(all)),
        ];
        for (p, body) in files {
            let Some(p) = p else { continue };
            std::fs::write(p, body).map_err(|source| FileError::Create {
                path: p.display().to_string(),
                source,
            })?;
            written.push(p.display().to_string());
        }
        Ok(written)
    }
}

fn refused(m: String) -> GateError {
    GateError::File(FileError::Refused(m))
}
