//! `--slo`, `--percentiles`, `--slo-undecided`, `--junit` and `--markdown` of `run` and
//! `sweep`: validated before anything runs, then the verdicts' files and exit code.

use std::path::PathBuf;

use lab::{Slo, SloReport, Verdict, ViewChoice};

use super::target::lab_err;
use crate::cli::{GateArgs, UndecidedArg};
use crate::exit::usage;
use crate::output;

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
    pub fn new(slo: Option<&str>, view: ViewChoice, g: &GateArgs) -> anyhow::Result<Gate> {
        let slo = slo
            .map(|s| Slo::parse(s, view))
            .transpose()
            .map_err(lab_err)?;
        let mut gate = Gate::judging(&[slo.as_ref()], g)?;
        gate.slo = slo;
        Ok(gate)
    }

    /// The options for outputs judged by several SLOs (`colocate`'s two services); `slo` is
    /// left empty, `extra` holds every SLO's percentiles.
    pub fn judging(slos: &[Option<&Slo>], g: &GateArgs) -> anyhow::Result<Gate> {
        let mut extra = match &g.percentiles {
            Some(p) => lab::parse_percentiles(p).map_err(lab_err)?,
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
                    return Err(usage(format!(
                        "{flag} writes the SLO's verdicts: give --slo (e.g. --slo 'p99<=1ms')"
                    )));
                }
                output::check_writable(flag, p)?;
            }
        }
        if let (Some(j), Some(m)) = (&g.junit, &g.markdown) {
            if j == m {
                return Err(usage(format!(
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
    pub fn write(&self, suites: &[(String, SloReport)]) -> anyhow::Result<Vec<String>> {
        self.write_split(suites, suites)
    }

    /// Writes `gated` as JUnit (the test cases the exit code is made of) and `all` as
    /// Markdown (a report, which may hold more).
    pub fn write_split(
        &self,
        gated: &[(String, SloReport)],
        all: &[(String, SloReport)],
    ) -> anyhow::Result<Vec<String>> {
        let mut written = Vec::new();
        if let Some(p) = &self.junit {
            std::fs::write(p, report::slo_view::junit(gated, self.undecided_fails))
                .map_err(|e| anyhow::anyhow!("--junit {}: {e}", p.display()))?;
            written.push(p.display().to_string());
        }
        if let Some(p) = &self.markdown {
            std::fs::write(p, report::slo_view::markdown(all))
                .map_err(|e| anyhow::anyhow!("--markdown {}: {e}", p.display()))?;
            written.push(p.display().to_string());
        }
        Ok(written)
    }
}
