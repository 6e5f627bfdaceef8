//! Which printed percentiles are the server's (issue 37): a view valid as a whole can still
//! have a tail that is mostly the generator's own stalls (the user view) or the server under
//! the bursts those stalls send (the server view). Each measured percentile is judged per
//! view; [`crate::judge::Views`] carries the verdicts, and every place that prints a percentile
//! (terminal, JSON, HTML, SLO verdicts, `check`, `ab`) marks the ones a view does not stand
//! behind.

use analysis::RunAnalysis;
use serde::{Deserialize, Serialize};
use stats::Summary;

/// Whether one view of a run can be trusted (as a whole, or at one percentile), and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ViewValidity {
    pub valid: bool,
    pub why: String,
}

/// Whether each view stands behind one printed percentile, and why: a view's percentile is
/// valid only when the view is, and when what the generator did at that tail is small
/// against it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PercentileValidity {
    /// `"p99.9"`.
    pub key: String,
    pub q: f64,
    pub user: ViewValidity,
    /// None when the run has no server view.
    pub server: Option<ViewValidity>,
}

/// A percentile stands when the generator's share of it is at most this fraction of it.
pub const PERCENTILE_SHARE: f64 = 0.1;

/// The utilisation ρ above which the burst factor ρ/(1 − ρ) is not raised further.
const RHO_CAP: f64 = 0.95;

/// The utilisation the run's ideal puts on each worker (achieved rate × service time ÷
/// workers), when the run has an ideal.
fn utilisation(a: &RunAnalysis) -> Option<f64> {
    let i = a.ideal_spec.as_ref()?;
    (i.workers > 0 && i.service_ns > 0.0)
        .then(|| a.achieved_rate_rps * i.service_ns / 1e9 / f64::from(i.workers))
}

/// How much a burst of the requests due during a generator stall adds to their wait at the
/// server, per unit of lateness: ρ/(1 − ρ) (see [`judge`]); 1 (ρ = ½) when ρ is unknown.
pub fn burst_factor(rho: Option<f64>) -> f64 {
    rho.map_or(1.0, |r| {
        let r = r.clamp(0.0, RHO_CAP);
        r / (1.0 - r)
    })
}

/// Each measured percentile of `a` judged per view (see [`judge`]).
pub fn percentiles_of(a: &RunAnalysis) -> Vec<PercentileValidity> {
    let mut judged = judge(
        &a.measured,
        &a.lateness,
        a.server_view.as_ref().map(|s| &s.measured),
        utilisation(a),
        a.arrival_check
            .as_ref()
            .filter(|c| !c.exponential)
            .map(|c| c.p_value),
    );
    skipped_tail(&mut judged, a.outcomes.skipped, a.requests);
    judged
}

/// Requests skipped on purpose (`--overdue shed`) are missing from the user view, and they
/// were the late ones: its percentile q stands only when they are at most
/// [`PERCENTILE_SHARE`] of the requests beyond it, (1 − q) of all.
fn skipped_tail(judged: &mut [PercentileValidity], skipped: u64, requests: u64) {
    if skipped == 0 || requests == 0 {
        return;
    }
    let share = skipped as f64 / requests as f64;
    for p in judged.iter_mut() {
        if share > PERCENTILE_SHARE * (1.0 - p.q) {
            p.user = ViewValidity {
                valid: false,
                why: format!(
                    "{:.2} % of the requests were skipped (--overdue shed), > 10 % of those beyond {}: its tail is missing",
                    100.0 * share,
                    p.key
                ),
            };
        }
    }
}

/// Each percentile of `user` judged per view.
///
/// - **User view** (intended send → received): the generator's own lateness is part of it.
///   Its percentile q stands when the lateness at q is at most [`PERCENTILE_SHARE`] of the
///   latency at q: then at most a tenth of that tail is the client's stall.
/// - **Server view** (sent → kernel receive): the lateness is not in it, but a stalled
///   generator sends its backlog at once, so the server sees bursts that the process asked
///   for does not have. A stall of length g sends its g·λ requests together, in due order,
///   and c workers clear them at c/S: the request due s into the stall waits ρ·s behind
///   those due before it (ρ = λS/c), and arrivals during the drain stretch that by
///   1/(1 − ρ). Its lateness is g − s, and over a stall s and g − s are spread alike, so the
///   added wait is distributed as ρ/(1 − ρ) × the lateness ([`burst_factor`]): the server
///   view's percentile q stands when that factor × the lateness at q is at most
///   [`PERCENTILE_SHARE`] of the latency at q. ρ is the ideal's utilisation; without an
///   ideal it is taken as ½ (factor 1); the factor stops growing at ρ = 0.95 (19). The
///   server view's ideal is computed from the same sends, so its *excess* stands either
///   way; the mark is on the latency the process asked for. (The test
///   `the_burst_bound_holds_in_a_queue_with_scripted_stalls` checks the factor in a
///   simulated queue.)
///
/// `not_poisson`: the arrival check's p-value when it rejected the sends' process; each
/// server percentile then says so beside its verdict.
pub fn judge(
    user: &Summary,
    lateness: &Summary,
    server: Option<&Summary>,
    rho: Option<f64>,
    not_poisson: Option<f64>,
) -> Vec<PercentileValidity> {
    let factor = burst_factor(rho);
    let rho_text = rho.map_or("ρ unknown, taken as 50 %".to_string(), |r| {
        format!("ρ {:.0} %", 100.0 * r.min(1.0))
    });
    let share = |part: f64, whole: f64| {
        if whole > 0.0 {
            format!("{:.0} %", 100.0 * part / whole)
        } else {
            "all".into()
        }
    };
    let within = |ok: bool| {
        let bound = share(PERCENTILE_SHARE, 1.0);
        if ok {
            format!("≤ {bound}")
        } else {
            format!("> {bound}")
        }
    };
    user.quantiles
        .iter()
        .map(|x| {
            let late = lateness.get(&x.key).map_or(0.0, |e| e.value.max(0.0));
            let user_ok = late <= PERCENTILE_SHARE * x.est.value;
            let user = ViewValidity {
                valid: user_ok,
                why: format!(
                    "lateness {} {}, {} of it ({}){}",
                    x.key,
                    fmt_ns(late),
                    share(late, x.est.value),
                    within(user_ok),
                    if user_ok { "" } else { ": the client's stalls" }
                ),
            };
            let server = server.and_then(|s| {
                let server_q = s.get(&x.key)?.value;
                let added = factor * late;
                let ok = added <= PERCENTILE_SHARE * server_q;
                let mut why = format!(
                    "bursts after stalls add ≤ {} at {} ({rho_text}), {} of it ({})",
                    fmt_ns(added),
                    x.key,
                    share(added, server_q),
                    within(ok),
                );
                if let Some(p) = not_poisson {
                    why.push_str(&format!("; sends not exponential (p = {p:.3})"));
                }
                Some(ViewValidity { valid: ok, why })
            });
            PercentileValidity {
                key: x.key.clone(),
                q: x.q,
                user,
                server,
            }
        })
        .collect()
}

fn fmt_ns(ns: f64) -> String {
    model::format_duration_ns(ns)
}

/// An exact summary of `values` (ns), for tests.
#[cfg(test)]
pub(crate) fn summary_of(values: &[f64]) -> Summary {
    let mut r = stats::Recorder::exact(values.len());
    for &v in values {
        r.record(v.max(1.0) as u64);
    }
    r.summarize(0.95).unwrap()
}

/// For tests: 20,000 latencies from 100 µs to 10 ms, and a lateness of 1 µs except 2 ms in
/// the last 0.5 % (a tail the generator's stalls make up).
#[cfg(test)]
pub(crate) fn late_tail_values() -> (Vec<f64>, Vec<f64>) {
    let n = 20_000;
    let user = (0..n)
        .map(|i| 100e3 + 9_900e3 * (i as f64 / n as f64).powi(8))
        .collect();
    let lateness = (0..n)
        .map(|i| if i >= n - n / 200 { 2e6 } else { 1e3 })
        .collect();
    (user, lateness)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, Exp};

    use super::summary_of as summary;

    fn at(s: &Summary, key: &str) -> f64 {
        s.get(key).unwrap().value
    }

    /// An M/D/c FIFO queue fed at the sends: each request's time from send to done.
    fn queue(sends: &[f64], service: f64, workers: usize) -> Vec<f64> {
        let mut free = vec![0.0f64; workers];
        sends
            .iter()
            .map(|&t| {
                let (k, &f) = free
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .unwrap();
                let done = t.max(f) + service;
                free[k] = done;
                done - t
            })
            .collect()
    }

    /// Poisson arrivals at `rate` (per ns) over `n` requests; the generator stalls for
    /// `stall` ns every `every` ns, and the requests due during a stall go out at its end.
    fn arrivals(n: usize, rate: f64, stall: f64, every: f64, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let gap = Exp::new(rate).unwrap();
        let phase = rng.gen_range(0.0..every);
        let mut t = 0.0;
        let (mut due, mut sent) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            t += gap.sample(&mut rng);
            let into = (t + phase) % every;
            let s = if stall > 0.0 && into < stall {
                t + stall - into
            } else {
                t
            };
            due.push(t);
            sent.push(s);
        }
        (due, sent)
    }

    /// The claim behind the server view's rule: a stalled generator's bursts add to the
    /// server's latency at q at most ρ/(1 − ρ) × the lateness at q, and at high enough
    /// lateness they do add a share of that (the rule marks a real effect, not noise).
    #[test]
    fn the_burst_bound_holds_in_a_queue_with_scripted_stalls() {
        let service = 20_000.0; // 20 µs
        for (workers, rho) in [(1usize, 0.3), (1, 0.6), (2, 0.5)] {
            let rate = rho * workers as f64 / service;
            for (stall, every) in [(500_000.0, 20e6), (2e6, 50e6)] {
                let n = 400_000;
                let (due, sent) = arrivals(n, rate, stall, every, 7);
                let calm = summary(&queue(&due, service, workers));
                let burst = summary(&queue(&sent, service, workers));
                let late: Vec<f64> = due.iter().zip(&sent).map(|(d, s)| s - d).collect();
                let late = summary(&late);
                let f = burst_factor(Some(rho));
                for key in ["p99", "p99.9"] {
                    let added = at(&burst, key) - at(&calm, key);
                    let bound = f * at(&late, key);
                    let case = format!(
                        "{workers} worker(s), ρ {rho}, stall {stall} every {every}, {key}: added {added:.0} ns, bound {bound:.0} ns (lateness {:.0})",
                        at(&late, key)
                    );
                    // Within the bound, give or take one service time and 10 %.
                    assert!(added <= 1.1 * bound + service, "{case}");
                    // And not loose: the bursts add a good part of it (34–76 % in these cases).
                    assert!(added >= 0.25 * bound, "{case}");
                }
            }
        }
    }

    #[test]
    fn a_percentile_stands_when_the_generators_share_is_at_most_a_tenth() {
        // Latencies 100 µs ... 10 ms; lateness 1 µs below the tail, 2 ms in its last 0.5 %.
        let (user, lateness) = late_tail_values();
        let server: Vec<f64> = user.iter().map(|u| u * 0.9).collect();
        let (u, l, s) = (summary(&user), summary(&lateness), summary(&server));
        let judged = judge(&u, &l, Some(&s), Some(0.5), None);
        let get = |k: &str| judged.iter().find(|p| p.key == k).unwrap();
        for k in ["p50", "p90"] {
            assert!(get(k).user.valid, "{:?}", get(k));
            assert!(get(k).server.as_ref().unwrap().valid, "{:?}", get(k));
        }
        // p99.9: lateness 2 ms against a user p99.9 of ~9.3 ms: 21 % > 10 %.
        let p = get("p99.9");
        assert!(!p.user.valid, "{p:?}");
        assert!(p.user.why.contains("> 10 %"), "{p:?}");
        // And the server view's: ρ ½ → factor 1, 2 ms against ~8.4 ms.
        assert!(!p.server.as_ref().unwrap().valid, "{p:?}");
        // At a low utilisation the same lateness adds little at the server.
        let light = judge(&u, &l, Some(&s), Some(0.05), Some(0.001));
        let p = light.iter().find(|p| p.key == "p99.9").unwrap();
        let sv = p.server.as_ref().unwrap();
        assert!(sv.valid, "{p:?}");
        assert!(sv.why.contains("not exponential"), "{p:?}");
        // Unknown ρ counts as ½.
        assert_eq!(burst_factor(None), 1.0);
        assert!((burst_factor(Some(0.5)) - 1.0).abs() < 1e-12);
        assert!((burst_factor(Some(2.0)) - 19.0).abs() < 1e-9);
    }
}
