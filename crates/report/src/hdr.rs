//! HdrHistogram exports of a stored run, for the tools performance engineers already use:
//! an interval log ([`interval_log`], format 1.3, one histogram per series per second, written
//! with the `hdrhistogram` crate's V2 + deflate serializer) and the percentile spectrum
//! ([`hgrm`], as wrk2 and HdrHistogram's `outputPercentileDistribution` print it).
//!
//! Both stream the run's records from the store in intended order: memory is one histogram per
//! series for the current second, however long the run. Values are nanoseconds in the log
//! (its `MaxValueDivisor` of 1000 shows the interval maxima in µs); the spectrum prints µs.
//! Intervals are by intended send time, after the warm-up, like every figure of the run.
//!
//! The series of the log, one tag each (format 1.3's `Tag=`; HistogramLogProcessor reads one
//! with `-tag measured`, the reference Python reader gives each histogram's `get_tag()`):
//! `measured` (intended send → received), `ideal` (the same arrivals through the ideal server,
//! recomputed from the records exactly as the analysis does), `lateness` (the generator's
//! own), `server` (sent → client kernel receive), and `class-N` per request label when the
//! run had several.

use std::io::Write;
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use lab::summary::RunSummary;
use store::{RunRow, Store};

use crate::ReportError;

const SIGFIG: u8 = 3;
const SECOND: u64 = 1_000_000_000;
/// HdrHistogram's sub-bucket count for 3 significant digits: the power of two above
/// 2 × 10^3 (the footer of a spectrum names it).
const SUB_BUCKETS: u32 = 2048;

/// An auto-resizing histogram: it grows to any value recorded with `record` (its
/// `saturating_record` would clamp at the initial, tiny, highest trackable value).
fn hist() -> Result<Histogram<u64>, ReportError> {
    Histogram::new(SIGFIG).map_err(|e| ReportError::Hdr(e.to_string()))
}

/// Records `v`, keeping the first failure (none is expected: the histogram grows).
fn rec(h: &mut Histogram<u64>, v: u64, failed: &mut Option<ReportError>) {
    if let Err(e) = h.record(v) {
        failed.get_or_insert(ReportError::Hdr(e.to_string()));
    }
}

/// The ideal server of a stored run, driven online as the analysis drives it.
struct Ideal {
    queue: model::OnlineQueue,
    service_ns: f64,
}

fn ideal_of(s: &RunSummary) -> Result<Option<Ideal>, ReportError> {
    if s.ideal.is_none() {
        return Ok(None);
    }
    let Some(spec) = &s.ideal_spec else {
        return Ok(None);
    };
    let workers = spec.workers.map_or(1, |w| w as u32);
    let service_ns = spec.service_ns.unwrap_or(0.0);
    let queue = match spec.queues.as_deref() {
        Some("per-worker") => model::OnlineQueue::per_worker(workers),
        _ => model::OnlineQueue::shared(workers),
    }
    .map_err(|e| ReportError::Hdr(e.to_string()))?;
    Ok(Some(Ideal { queue, service_ns }))
}

/// A run's stored summary by field.
fn summary_of(row: &RunRow) -> RunSummary {
    row.summary.as_ref().map(RunSummary::of).unwrap_or_default()
}

/// Seconds since the epoch of an RFC 3339 UTC time as the store writes it
/// (`2026-11-21T21:00:00.000Z`).
fn epoch_s(t: &str) -> Option<f64> {
    let (date, time) = t.trim_end_matches('Z').split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, dd) = (d.next()??, d.next()??, d.next()??);
    let mut hms = time.split(':');
    let (h, mi) = (
        hms.next()?.parse::<i64>().ok()?,
        hms.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = hms.next()?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + dd - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60) as f64 + sec)
}

/// The series of one interval.
struct Interval {
    measured: Histogram<u64>,
    ideal: Histogram<u64>,
    lateness: Histogram<u64>,
    server: Histogram<u64>,
    classes: Vec<(u8, Histogram<u64>)>,
}

impl Interval {
    fn new() -> Result<Interval, ReportError> {
        Ok(Interval {
            measured: hist()?,
            ideal: hist()?,
            lateness: hist()?,
            server: hist()?,
            classes: Vec::new(),
        })
    }
}

/// Writes the run's HdrHistogram interval log to `w`.
pub fn interval_log(store: &Store, row: &RunRow, w: &mut dyn Write) -> Result<(), ReportError> {
    let s = summary_of(row);
    let warmup = s.warmup_ns.map_or(0, |v| v as u64);
    let per_class = s.classes.len() > 1;
    let mut ideal = ideal_of(&s)?;
    let start = epoch_s(&row.started_at).map(|t| t + warmup as f64 / 1e9);
    // The header: the version line, the times, the legend, as Java's HistogramLogWriter.
    writeln!(w, "#[Histogram log format version 1.3]")?;
    writeln!(
        w,
        "#[tailscope run {} ({}), {}: latencies in ns, intervals of 1 s by intended send time after the {:.3} s warm-up]",
        row.id, row.status, row.target, warmup as f64 / 1e9
    )?;
    writeln!(
        w,
        "#[Tag=measured: intended send -> received; Tag=ideal: {}; Tag=lateness: the generator's own; Tag=server: sent -> client kernel receive{}]",
        if ideal.is_some() {
            "the same arrivals through the ideal server"
        } else {
            "absent (this run has no stable ideal)"
        },
        if per_class { "; Tag=class-N: per request label" } else { "" }
    )?;
    if let Some(t) = start {
        writeln!(
            w,
            "#[StartTime: {t:.3} (seconds since epoch), {}]",
            row.started_at
        )?;
        writeln!(w, "#[BaseTime: {t:.3} (seconds since epoch)]")?;
    }
    writeln!(
        w,
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    )?;
    let mut ser = V2DeflateSerializer::new();
    // The header is written above; the builder adds the divisor of the interval maxima (its
    // "#[MaxValueDivisor: 1000.000]" line, after the legend, as the Rust writer places it).
    let mut w = w;
    let mut log = IntervalLogWriterBuilder::new()
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut w, &mut ser)?;
    let mut cur: Option<(u64, Interval)> = None;
    let mut failed: Option<ReportError> = None;
    let records = lab::records::StoredRecords::new(store, row.id);
    let kept = records.for_each(&mut |r| {
        if failed.is_some() {
            return;
        }
        let ideal_ns = ideal.as_mut().map(|i| {
            let (_, resp) = i.queue.push(r.intended_ns as f64, r.conn, i.service_ns);
            resp.round() as u64
        });
        if r.intended_ns < warmup {
            return;
        }
        let k = (r.intended_ns - warmup) / SECOND;
        if cur.as_ref().is_none_or(|(ck, _)| *ck != k) {
            if let Some((ck, iv)) = cur.take() {
                if let Err(e) = write_interval(&mut log, ck, &iv) {
                    failed = Some(e);
                    return;
                }
            }
            match Interval::new() {
                Ok(iv) => cur = Some((k, iv)),
                Err(e) => {
                    failed = Some(e);
                    return;
                }
            }
        }
        let Some((_, iv)) = cur.as_mut() else { return };
        if let Some(v) = ideal_ns {
            rec(&mut iv.ideal, v, &mut failed);
        }
        if let Some(l) = r.lateness_ns() {
            rec(&mut iv.lateness, l, &mut failed);
        }
        if let Some(l) = r.latency_ns() {
            rec(&mut iv.measured, l, &mut failed);
            let arrived = if r.kernel_rx_ns > 0 {
                r.kernel_rx_ns
            } else {
                r.received_ns
            };
            rec(
                &mut iv.server,
                arrived.saturating_sub(r.sent_ns),
                &mut failed,
            );
            if per_class {
                if !iv.classes.iter().any(|(c, _)| *c == r.class) {
                    match hist() {
                        Ok(h) => {
                            iv.classes.push((r.class, h));
                            iv.classes.sort_by_key(|(c, _)| *c);
                        }
                        Err(e) => failed = Some(e),
                    }
                }
                if let Some((_, h)) = iv.classes.iter_mut().find(|(c, _)| *c == r.class) {
                    rec(h, l, &mut failed);
                }
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some((k, iv)) = cur.take() {
        write_interval(&mut log, k, &iv)?;
    }
    if !kept {
        return Err(ReportError::NoRecords(row.id));
    }
    Ok(())
}

fn write_interval<W: Write>(
    log: &mut hdrhistogram::serialization::interval_log::IntervalLogWriter<
        '_,
        '_,
        W,
        V2DeflateSerializer,
    >,
    k: u64,
    iv: &Interval,
) -> Result<(), ReportError> {
    // The interval maxima in µs, as the header's MaxValueDivisor says.
    let start = Duration::from_secs(k);
    let len = Duration::from_secs(1);
    let classes: Vec<(String, &Histogram<u64>)> = iv
        .classes
        .iter()
        .map(|(c, h)| (format!("class-{c}"), h))
        .collect();
    let series = [
        ("measured", &iv.measured),
        ("ideal", &iv.ideal),
        ("lateness", &iv.lateness),
        ("server", &iv.server),
    ];
    for (tag, h) in series
        .into_iter()
        .chain(classes.iter().map(|(t, h)| (t.as_str(), *h)))
    {
        if h.is_empty() {
            continue;
        }
        let tag = Tag::new(tag);
        log.write_histogram(h, start, len, tag)
            .map_err(|e| ReportError::Hdr(e.to_string()))?;
    }
    Ok(())
}

/// Writes the run's measured latency (intended send → received, after the warm-up) as the
/// percentile spectrum HdrHistogram and wrk2 print: values in µs, five ticks per half
/// distance to 100 %, then the mean, deviation, maximum and count.
pub fn hgrm(store: &Store, row: &RunRow, w: &mut dyn Write) -> Result<(), ReportError> {
    let warmup = summary_of(row).warmup_ns.map_or(0, |v| v as u64);
    let mut h = hist()?;
    let mut failed = None;
    let kept = lab::records::StoredRecords::new(store, row.id).for_each(&mut |r| {
        if r.intended_ns >= warmup {
            if let Some(l) = r.latency_ns() {
                rec(&mut h, l, &mut failed);
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if !kept {
        return Err(ReportError::NoRecords(row.id));
    }
    spectrum(&h, w)
}

/// The spectrum of `h` (ns) in µs, in HdrHistogram's layout.
pub fn spectrum(h: &Histogram<u64>, w: &mut dyn Write) -> Result<(), ReportError> {
    const RATIO: f64 = 1000.0;
    writeln!(
        w,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    if h.is_empty() {
        return Err(ReportError::Empty);
    }
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        let q = v.quantile_iterated_to();
        let value = h.highest_equivalent(v.value_iterated_to()) as f64 / RATIO;
        total += v.count_since_last_iteration();
        if q < 1.0 {
            writeln!(
                w,
                "{value:12.3} {q:2.12} {total:10} {:14.2}",
                1.0 / (1.0 - q)
            )?;
        } else {
            writeln!(w, "{value:12.3} {q:2.12} {total:10}")?;
        }
    }
    writeln!(
        w,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        h.mean() / RATIO,
        h.stdev() / RATIO
    )?;
    writeln!(
        w,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        h.max() as f64 / RATIO,
        h.len()
    )?;
    writeln!(
        w,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        SUB_BUCKETS
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_times_read_as_epoch_seconds() {
        assert_eq!(epoch_s("1970-01-01T00:00:00.000Z"), Some(0.0));
        assert_eq!(epoch_s("2000-03-01T00:00:01.500Z"), Some(951_868_801.5));
        assert_eq!(epoch_s("garbage"), None);
    }

    #[test]
    fn the_spectrum_has_the_hgrm_layout() {
        let mut h = hist().unwrap();
        for v in 1..=10_000u64 {
            h.record(v * 1000).unwrap();
        }
        let mut out = Vec::new();
        spectrum(&h, &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        let mut lines = t.lines();
        assert!(lines.next().unwrap().contains("1/(1-Percentile)"));
        assert_eq!(lines.next(), Some(""));
        let first: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(first[0], "1.000");
        assert!(t.contains("#[Max     =    10002.431"), "{t}");
        assert!(t.contains("Total count    =        10000]"));
    }
}
