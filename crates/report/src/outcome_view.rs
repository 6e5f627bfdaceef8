//! The closing lines of an experiment on the terminal: a tuning walk's tuned configuration
//! and its SLO, named SLO judgements (a colocation's cells), and the files written.

use std::io::{self, Write};

use lab::{Suites, TuneResult};

/// A tuning walk: its table of steps, then the tuned configuration's SLO judgement.
pub fn tune(w: &mut dyn Write, r: &TuneResult) -> io::Result<()> {
    crate::sweep_view::tune(w, r)?;
    if let Some((t, rep)) = r.tuned().and_then(|t| Some((t, t.slo.as_ref()?))) {
        writeln!(w, "the tuned configuration (through step {}):", t.name)?;
        crate::slo_view::lines(w, rep)?;
    }
    Ok(())
}

/// Each named judgement: its name, then its conditions.
pub fn suites(w: &mut dyn Write, suites: &Suites) -> io::Result<()> {
    for (name, rep) in suites {
        writeln!(w, "{name}:")?;
        crate::slo_view::lines(w, rep)?;
    }
    Ok(())
}

/// "wrote PATH", one line per file written.
pub fn written(w: &mut dyn Write, paths: &[String]) -> io::Result<()> {
    for p in paths {
        writeln!(w, "wrote {p}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_written_are_listed_one_a_line() {
        let mut out = Vec::new();
        written(&mut out, &["a.xml".into(), "b.md".into()]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "wrote a.xml\nwrote b.md\n");
        let mut out = Vec::new();
        suites(&mut out, &Vec::new()).unwrap();
        assert!(out.is_empty());
    }
}
