//! `runs export`: one stored run as its per-request records (CSV, streamed one batch at a
//! time; JSON), an HdrHistogram interval log, its percentile spectrum, or its summary for
//! Prometheus; and the writing of an export to a file, all or nothing.

use std::io::Write;
use std::path::Path;
use std::str::FromStr;

use store::{RunRow, Store};

use crate::ReportError;

/// `runs export --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Csv,
    Json,
    Hdr,
    Hgrm,
    Openmetrics,
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        Ok(match s {
            "csv" => Format::Csv,
            "json" => Format::Json,
            "hdr" => Format::Hdr,
            "hgrm" => Format::Hgrm,
            "openmetrics" => Format::Openmetrics,
            _ => return Err("one of csv, json, hdr, hgrm, openmetrics".into()),
        })
    }
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Hdr => "hdr",
            Format::Hgrm => "hgrm",
            Format::Openmetrics => "openmetrics",
        }
    }

    /// Whether the format is made of the run's per-request records (then a run stored
    /// without them cannot be exported in it).
    pub fn needs_records(self) -> bool {
        matches!(self, Format::Csv | Format::Hdr | Format::Hgrm)
    }
}

/// Writes run `r` of `st` in `format` to `w`.
pub fn run(
    format: Format,
    st: &Store,
    r: &RunRow,
    mut w: &mut dyn Write,
) -> Result<(), ReportError> {
    let records = lab::records::StoredRecords::new(st, r.id);
    match format {
        Format::Openmetrics => crate::openmetrics::run(r, w)?,
        Format::Hdr => crate::hdr::interval_log(st, r, w)?,
        Format::Hgrm => crate::hdr::hgrm(st, r, w)?,
        Format::Csv => {
            // Streamed: one batch of records in memory at a time, however long the run.
            let mut first = true;
            records.batches(8192, &mut |cols| {
                if first {
                    store::export_csv_header(cols.names(), &mut w)?;
                    first = false;
                }
                store::export_csv_rows(cols, &mut w)
            })?;
            if first {
                store::export_csv_header(lab::records::COLUMNS, &mut w)?;
            }
        }
        Format::Json => store::export_json(r, records.all_columns()?.as_ref(), &mut w)?,
    }
    Ok(())
}

/// Writes an export, buffered, to `out` when given, else to `stdout`; a file that could not
/// be written whole and did not exist before is removed.
pub fn write_to(
    out: Option<&Path>,
    stdout: &mut dyn Write,
    body: impl Fn(&mut dyn Write) -> Result<(), ReportError>,
) -> Result<(), ReportError> {
    let write = |w: &mut dyn Write| -> Result<(), ReportError> {
        let mut w = std::io::BufWriter::new(w);
        body(&mut w)?;
        w.flush()?;
        Ok(())
    };
    let Some(p) = out else {
        return write(stdout);
    };
    let existed = p.exists();
    let failed = |e: &dyn std::fmt::Display| ReportError::Write {
        path: p.display().to_string(),
        msg: e.to_string(),
    };
    let mut f = std::fs::File::create(p).map_err(|e| failed(&e))?;
    write(&mut f).map_err(|e| {
        // No partial export left behind (a file that was there is already truncated).
        if !existed {
            let _ = std::fs::remove_file(p);
        }
        failed(&e)
    })
}
