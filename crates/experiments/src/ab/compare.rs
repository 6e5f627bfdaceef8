//! [`compare`]: the loop of `tailscope ab`. Both targets are started; each gets the load
//! once as a warm-up; then pair after pair, the one generator sends a slice to each arm with
//! the pair's arrival sequence (its seed), in a randomized counterbalanced order (each block
//! of two pairs holds both orders), with a drain gap after each slice. Each arm's slices are
//! stored as one ordinary run (kind `ab-arm`, finished by `measure`'s analysis), the pair
//! recorders give the paired rows, and the whole is stored as an experiment of kind `ab`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::paired::{AbRow, Arm, CarryOver, Looks, PairFacts, Paired, SliceFacts};
use super::slices::{ArmFacts, Discard, SliceSink};
use crate::check::CheckVerdict;
use measurement::error::{invalid, LabError};
use measurement::records::StoreSink;
use measurement::run_config::stored;
use measurement::view::{View, ViewChoice};
use measurement::Observer;
use measurement::{host_facts, Db};
use measurement::{CheckedRun, RunSpec};
use measurement::{Loaded, Measured, RunPlan};
use measurement::{Ready, TargetPlan};
use measurement::{Run, RunStatus};

/// How the rows' intervals are made, as the output names it.
pub const AB_METHOD: &str = "paired slices (same arrivals per pair, counterbalanced order); \
     ratio per group of adjacent pairs, log scale, t interval (sectioning)";

/// Time a slice costs beside its settle time and length: connections, threads, the start's
/// lead (an estimate for planning the looks; the real pairs are timed).
const SLICE_OVERHEAD: Duration = Duration::from_millis(20);

/// One arm: its target and its run, as `run` would make them.
#[derive(Clone, Debug)]
pub struct ArmSpec {
    pub arm: Arm,
    /// As the user gave it (the URL and its own flags).
    pub text: String,
    pub tplan: TargetPlan,
    pub run: RunSpec,
}

/// Everything `tailscope ab` asks for, checked: the two arms and the design.
#[derive(Clone, Debug)]
pub struct AbSpec {
    /// Baseline, then candidate.
    pub arms: [ArmSpec; 2],
    pub design: Design,
}

/// How two configurations are compared, whatever they are (`ab`'s two targets, a tuning
/// step against the one before it, a sweep's knob value against the axis's first).
#[derive(Clone, Debug)]
pub struct Design {
    /// Each slice's counted length.
    pub slice: Duration,
    /// The start of each slice that is not counted.
    pub settle: Duration,
    /// The pause after each slice (after its last reply), before the next one.
    pub gap: Duration,
    /// The pairs of a fixed design; with `until_decided`, the first look.
    pub pairs: u32,
    /// Add pairs until every `decide` percentile is decided, for at most this long.
    pub until_decided: Option<Duration>,
    pub tolerance: f64,
    pub confidence: f64,
    /// The rows: (key, q).
    pub percentiles: Vec<(String, f64)>,
    /// The percentiles `until_decided` waits for.
    pub decide: Vec<String>,
    /// The view `until_decided` waits for (auto: the user's while the generator keeps its
    /// schedule in both arms, else the server's).
    pub view: ViewChoice,
    pub label: Option<String>,
    pub seed: u64,
    /// Both arms loaded at once in each pair (duet benchmarking, Bulej et al. ICPE'20), each
    /// server and generator on CPUs of its own; otherwise one slice after the other.
    pub duet: bool,
}

impl AbSpec {
    /// Every check that needs no started target (each arm's as for `run`).
    pub fn check(&self, db: &std::path::Path) -> Result<[CheckedRun; 2], LabError> {
        let b = self.arms[0].run.check(&self.arms[0].tplan, db)?;
        let c = self.arms[1].run.check(&self.arms[1].tplan, db)?;
        Ok([b, c])
    }
}

impl Design {
    /// The looks this comparison makes.
    pub fn looks(&self) -> Looks {
        match self.until_decided {
            None => Looks::fixed(self.pairs, self.confidence),
            Some(max) => {
                let slices = if self.duet { 1 } else { 2 };
                let pair = slices * (self.settle + self.slice + self.gap + SLICE_OVERHEAD);
                let most = (max.as_secs_f64() / pair.as_secs_f64()).floor() as u32;
                Looks::plan(self.pairs, most.max(self.pairs), self.confidence)
            }
        }
    }
}

/// One arm's part of the result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArmResult {
    pub arm: Arm,
    /// As the user gave it.
    pub spec: String,
    pub url: String,
    pub run_id: Option<i64>,
    pub status: RunStatus,
    /// Slices measured.
    pub slices: u32,
    /// Why the arm failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The result of `tailscope ab`, stored as the `ab` experiment's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbResult {
    pub kind: String,
    pub experiment: i64,
    /// ok, or the worst of the arms (failed, interrupted, saturated).
    pub status: RunStatus,
    pub baseline: ArmResult,
    pub candidate: ArmResult,
    pub method: String,
    /// As a fraction (0.1 for 10 %).
    pub tolerance: f64,
    /// The confidence asked for, and the one each look's intervals were made at.
    pub confidence: f64,
    pub confidence_per_look: f64,
    pub rate_rps: f64,
    pub slice_s: f64,
    pub settle_s: f64,
    pub gap_s: f64,
    pub pairs: u32,
    pub until_decided: bool,
    /// Both arms were loaded at once in each pair (duet); no order within a pair then.
    #[serde(default)]
    pub duet: bool,
    pub looks: Vec<u32>,
    /// The looks made (pair counts), the last one's verdicts are the rows.
    pub looked: Vec<u32>,
    /// Every `decide` percentile of the decided view has a verdict.
    pub decided: bool,
    /// Why the comparison stopped, for a person.
    pub stopped: String,
    /// The view `until_decided` waited for.
    pub decided_view: View,
    pub decide: Vec<String>,
    pub rows: Vec<AbRow>,
    pub carry_over: Vec<CarryOver>,
    pub pair_facts: Vec<PairFacts>,
    /// Rows per verdict.
    pub counts: std::collections::BTreeMap<String, usize>,
    /// Any row `worse`.
    pub regression: bool,
    /// Seconds the pairs took.
    pub elapsed_s: f64,
}

impl AbResult {
    /// The row of `view` and `percentile`.
    pub fn row(&self, view: View, percentile: &str) -> Option<&AbRow> {
        self.rows
            .iter()
            .find(|r| r.view == view && r.percentile == percentile)
    }

    /// The arm's part.
    pub fn arm(&self, arm: Arm) -> &ArmResult {
        match arm {
            Arm::Baseline => &self.baseline,
            Arm::Candidate => &self.candidate,
        }
    }
}

/// The result and the arms' runs (baseline first; an arm that stored nothing is missing).
pub struct AbOutcome {
    pub result: AbResult,
    pub runs: Vec<Run>,
}

/// One arm while the pairs run.
struct Live<'a> {
    arm: Arm,
    /// As the user gave it.
    text: String,
    ready: &'a Ready,
    plan: RunPlan,
    run_id: i64,
    store: StoreSink,
    origin: Option<u64>,
    facts: ArmFacts,
    writer_cpus: Vec<usize>,
    /// The stressor both arms share (started with the baseline's) and the server's counters.
    beside: Option<measurement::interference::Beside>,
    error: Option<String>,
}

/// The order of pair `i`: counterbalanced in blocks of two pairs (one of each order), which
/// comes first drawn from the seed.
pub fn candidate_first(seed: u64, i: u32) -> bool {
    let flip = load::derive_seed(seed ^ 0x00ab_00ab_00ab_00ab, u64::from(i / 2)) & 1 == 1;
    i.is_multiple_of(2) == flip
}

/// One arm planned: its run as `run` would make it, against its started target.
pub struct PlannedArm<'a> {
    pub arm: Arm,
    /// As the user gave it.
    pub text: String,
    pub plan: RunPlan,
    pub ready: &'a Ready,
}

/// Sets the host up for an arm before each of its slices, when both arms share one server
/// and differ only in a host setting (a tuning step's interrupts, C-states or governor).
pub type Switch<'s> = &'s mut dyn FnMut(Arm) -> Result<(), String>;

/// Runs the comparison against the two started targets (baseline, candidate).
pub fn compare(
    spec: &AbSpec,
    checked: &[CheckedRun; 2],
    ready: [&Ready; 2],
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<AbOutcome, LabError> {
    // Each arm planned as `run` plans it (its ideal, calibrated when tailscope started its
    // server).
    let mut arms = Vec::with_capacity(2);
    for (k, a) in spec.arms.iter().enumerate() {
        obs.note(&format!("{}: {}", a.arm, ready[k].url));
        arms.push(PlannedArm {
            arm: a.arm,
            text: a.text.clone(),
            plan: a.run.plan(&checked[k], ready[k], db, stop, obs)?,
            ready: ready[k],
        });
    }
    let arms: [PlannedArm; 2] = arms
        .try_into()
        .map_err(|_| invalid("two arms are compared"))?;
    compare_planned(&spec.design, arms, None, db, stop, obs)
}

/// The comparison of two planned arms; `switch`, when given, is called before each slice
/// (and warm-up) of an arm, with that arm. Both arms are sent the baseline's rate: the same
/// arrivals need the same rate.
pub fn compare_planned(
    spec: &Design,
    arms: [PlannedArm<'_>; 2],
    mut switch: Option<Switch<'_>>,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<AbOutcome, LabError> {
    if spec.duet && switch.is_some() {
        return Err(invalid(
            "a duet loads both arms at once: arms that differ in a host setting cannot be",
        ));
    }
    let [a0, a1] = arms;
    let texts = [a0.text, a1.text];
    let ready = [a0.ready, a1.ready];
    let arm_of = [a0.arm, a1.arm];
    let plans = vec![a0.plan, a1.plan];
    let rate = plans[0].load.rate_per_s;
    if (plans[1].load.rate_per_s - rate).abs() > 1e-9 * rate {
        obs.note(&format!(
            "both arms are sent {rate:.0} req/s (the baseline's rate): the same arrivals need the same rate"
        ));
    }
    let noise = plans[0].config.host_noise.clone();
    let experiment = db.store.begin_experiment(&store::NewExperiment {
        kind: "ab".into(),
        started_at: store::now_rfc3339(),
        config: stored(&AbConfig {
            baseline: texts[0].clone(),
            candidate: texts[1].clone(),
            run: plans[0].config.clone(),
            slice: format!("{:?}", spec.slice),
            settle: format!("{:?}", spec.settle),
            gap: format!("{:?}", spec.gap),
            pairs: spec.pairs,
            until_decided: spec.until_decided.map(|d| d.as_secs_f64()),
            tolerance: spec.tolerance,
            label: spec.label.clone(),
        }),
    })?;
    let mut live = Vec::with_capacity(2);
    for (k, mut plan) in plans.into_iter().enumerate() {
        plan.kind = "ab-arm".into();
        plan.experiment = Some(experiment);
        plan.load.rate_per_s = rate;
        plan.config.rate_rps = Some(rate);
        plan.config.arm = Some(arm_of[k]);
        plan.config.host_noise.clone_from(&noise);
        // The slices are measured here: no attribution sampler or eBPF beside them.
        plan.attribution = false;
        plan.precision = None;
        let run_id = db.store.begin_run_in(
            &store::NewRun {
                kind: plan.kind.clone(),
                target: ready[k].label.clone(),
                started_at: store::now_rfc3339(),
                config: plan.config.to_json(),
                host: host_facts(),
            },
            Some(experiment),
        )?;
        let store = StoreSink::open(&db.path, run_id)?;
        let server = if plan.server_cpus.is_empty() {
            ready[k].server_cpus()
        } else {
            plan.server_cpus.clone()
        };
        let writer_cpus = measurement::local::helper_cpus(&plan.load.cpus, &server);
        // A stressor is the same in both arms (checked): it runs once, through the whole
        // comparison, started with the baseline's.
        let beside = if k == 0 {
            measurement::interference::Beside::start(ready[k], &plan.load.cpus, &server, obs)?
        } else {
            measurement::interference::Beside::counters_only(ready[k])
        };
        live.push(Live {
            arm: arm_of[k],
            text: texts[k].clone(),
            ready: ready[k],
            plan,
            run_id,
            store,
            origin: None,
            facts: ArmFacts::default(),
            writer_cpus,
            beside: Some(beside),
            error: None,
        });
    }
    let mut live: [Live; 2] = live
        .try_into()
        .map_err(|_| invalid("two arms are compared"))?;
    warm_up(spec, &mut live, &mut switch, stop, obs);
    let (paired, looked, decided, stopped, elapsed) =
        pairs(spec, &mut live, &mut switch, stop, obs);
    obs.phase_done("pairs");
    finish(
        spec,
        experiment,
        live,
        paired,
        (looked, decided, stopped, elapsed),
        (rate, stop.load(Ordering::Relaxed)),
        db,
    )
}

/// Calls `switch` (when given) for `l`'s arm; a failure is the arm's.
fn switch_to(switch: &mut Option<Switch<'_>>, l: &mut Live) -> bool {
    if let Some(f) = switch.as_mut() {
        if let Err(e) = f(l.arm) {
            l.error = Some(format!("switching the host to it: {e}"));
            return false;
        }
    }
    true
}

/// Each arm sent the load for `--warmup`, nothing kept (the baseline first).
fn warm_up(
    spec: &Design,
    live: &mut [Live; 2],
    switch: &mut Option<Switch<'_>>,
    stop: &AtomicBool,
    obs: &dyn Observer,
) {
    let warmup = live[0].plan.load.warmup;
    if warmup.is_zero() {
        return;
    }
    obs.note(&format!("warming both arms up ({warmup:?} each)"));
    for l in live.iter_mut() {
        if stop.load(Ordering::Relaxed) || l.error.is_some() || !switch_to(switch, l) {
            return;
        }
        let mut cfg = slice_config(l, spec.seed ^ u64::MAX);
        cfg.stop = load::StopAt::Duration(warmup);
        cfg.warmup = Duration::ZERO;
        let sent = l
            .ready
            .factory(cfg.seed)
            .map_err(|e| e.to_string())
            .and_then(|f| {
                load::run_open_loop_into(&cfg, f.as_ref(), stop, &|_, _| {}, &mut Discard, None)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = sent {
            l.error = Some(format!("during the warm-up: {e}"));
        }
        std::thread::sleep(spec.gap);
    }
}

/// The load of one slice of arm `l` with seed `seed`.
fn slice_config(l: &Live, seed: u64) -> load::LoadConfig {
    let mut cfg = l.plan.load.clone();
    cfg.seed = seed;
    cfg.target = l.ready.target.clone();
    cfg.churn = l.ready.churn;
    cfg.spread = l.ready.spread();
    cfg.writer_cpus.clone_from(&l.writer_cpus);
    cfg
}

type Pairs = (Paired, Vec<u32>, bool, String, f64);

/// The pairs, until the design's count, a decision, the time allowed, a failure or Ctrl-C.
fn pairs(
    spec: &Design,
    live: &mut [Live; 2],
    switch: &mut Option<Switch<'_>>,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Pairs {
    let looks = spec.looks();
    let most = looks.at.last().copied().unwrap_or(spec.pairs);
    let mut paired = Paired::new();
    let mut looked = Vec::new();
    let t0 = Instant::now();
    let mut next_look = 0;
    let mut slowest_pair = Duration::ZERO;
    let settle_ns = spec.settle.as_nanos() as u64;
    let mut i = 0u32;
    let stopped = loop {
        if live.iter().any(|l| l.error.is_some()) {
            let why: Vec<String> = live
                .iter()
                .filter_map(|l| {
                    l.error
                        .as_ref()
                        .map(|e| format!("the {} failed: {e}", l.arm))
                })
                .collect();
            break why.join("; ");
        }
        if stop.load(Ordering::Relaxed) {
            break format!("interrupted after {i} pairs");
        }
        if i >= most {
            break if spec.until_decided.is_some() {
                format!("not decided after {i} pairs, the most that fit")
            } else {
                format!("{i} pairs (fixed design)")
            };
        }
        if let Some(max) = spec.until_decided {
            if i > 0 && t0.elapsed() + slowest_pair > max {
                break format!(
                    "not decided within --max-duration {:.0} s ({i} pairs)",
                    max.as_secs_f64()
                );
            }
        }
        let began = Instant::now();
        let seed = load::derive_seed(spec.seed, u64::from(i));
        let cf = candidate_first(spec.seed, i);
        let mut facts: [SliceFacts; 2] = Default::default();
        if spec.duet {
            facts = duet_slices(spec, live, &mut paired, i, seed, settle_ns, stop);
        } else {
            let order = if cf { [1, 0] } else { [0, 1] };
            for k in order {
                let l = &mut live[k];
                if !switch_to(switch, l) {
                    break;
                }
                match slice_at(spec, l, &mut paired, i, seed, settle_ns, stop, None) {
                    Ok(f) => facts[k] = f,
                    Err(e) => l.error = Some(e),
                }
                let timed_out = facts[k].failed > 0;
                std::thread::sleep(spec.gap);
                if timed_out {
                    // A request that timed out may still be in the server: let it finish
                    // before the other arm's slice.
                    std::thread::sleep(l.plan.load.timeout.min(Duration::from_secs(1)));
                }
            }
        }
        if live.iter().any(|l| l.error.is_some()) {
            continue;
        }
        let [baseline, candidate] = facts;
        paired.push_pair(PairFacts {
            index: i,
            seed,
            candidate_first: cf && !spec.duet,
            at_s: (began - t0).as_secs_f64(),
            baseline,
            candidate,
        });
        slowest_pair = slowest_pair.max(began.elapsed());
        i += 1;
        obs.progress("pairs", u64::from(i), u64::from(most));
        if looks.at.get(next_look) == Some(&i) {
            next_look += 1;
            looked.push(i);
            if spec.until_decided.is_some() && is_decided(spec, &paired, live, looks.confidence) {
                break format!("decided after {i} pairs");
            }
        }
    };
    let decided = is_decided(spec, &paired, live, looks.confidence);
    if looked.last() != Some(&i) && i > 0 {
        looked.push(i);
    }
    (paired, looked, decided, stopped, t0.elapsed().as_secs_f64())
}

/// Both slices of pair `i` at once (duet): each arm's generator on its own CPU, started at the
/// same instant with the same seed; each records into a recorder of its own, merged after.
fn duet_slices(
    spec: &Design,
    live: &mut [Live; 2],
    paired: &mut Paired,
    i: u32,
    seed: u64,
    settle_ns: u64,
    stop: &AtomicBool,
) -> [SliceFacts; 2] {
    // Both schedules' time zero, far enough ahead for both to open their connections.
    let at = host::clock::mono_now_ns() + 50_000_000;
    let [lb, lc] = live;
    let (mut pb, mut pc) = (Paired::new(), Paired::new());
    let (rb, rc) = std::thread::scope(|s| {
        let b = s.spawn(|| slice_at(spec, lb, &mut pb, i, seed, settle_ns, stop, Some(at)));
        let c = slice_at(spec, lc, &mut pc, i, seed, settle_ns, stop, Some(at));
        let b = b
            .join()
            .unwrap_or_else(|_| Err("the baseline's slice thread panicked".into()));
        (b, c)
    });
    paired.absorb(&pb, Arm::Baseline);
    paired.absorb(&pc, Arm::Candidate);
    let mut facts: [SliceFacts; 2] = Default::default();
    for (k, (l, r)) in [(lb, rb), (lc, rc)].into_iter().enumerate() {
        match r {
            Ok(f) => facts[k] = f,
            Err(e) => l.error = Some(e),
        }
    }
    std::thread::sleep(spec.gap);
    facts
}

/// One slice of arm `l` in pair `i`: its counted records stored and recorded; its schedule's
/// time zero at `at` (absolute CLOCK_MONOTONIC ns) when given.
#[allow(clippy::too_many_arguments)]
fn slice_at(
    spec: &Design,
    l: &mut Live,
    paired: &mut Paired,
    i: u32,
    seed: u64,
    settle_ns: u64,
    stop: &AtomicBool,
    at: Option<u64>,
) -> Result<SliceFacts, String> {
    let mut cfg = slice_config(l, seed);
    cfg.stop = load::StopAt::Duration(spec.slice);
    cfg.warmup = spec.settle;
    cfg.start_at_mono_ns = at;
    let factory = l.ready.factory(seed).map_err(|e| e.to_string())?;
    let mut sink = SliceSink::new(&mut l.store, paired, &mut l.origin, i, l.arm, settle_ns);
    let summary =
        load::run_open_loop_into(&cfg, factory.as_ref(), stop, &|_, _| {}, &mut sink, None)
            .map_err(|e| e.to_string())?;
    let (shift, stored) = (sink.shift(), sink.stored);
    let facts = sink.facts();
    l.facts.add(&summary, shift, stored, settle_ns);
    if facts.requests > 0 && facts.ok == 0 {
        let first = summary.errors.first().cloned().unwrap_or_default();
        return Err(format!(
            "no request of pair {i}'s slice was answered {first}"
        ));
    }
    Ok(facts)
}

/// The view `--until-decided` waits for: the one asked, or under auto the user's while the
/// generator kept its schedule in both arms (the median slice's lateness p99 within the
/// threshold), else the server's.
fn decided_view(spec: &Design, paired: &Paired, live: &[Live; 2]) -> View {
    match spec.view {
        ViewChoice::User => View::User,
        ViewChoice::Server => View::Server,
        ViewChoice::Auto => {
            let on_time = |k: usize| {
                let mut late: Vec<f64> = paired
                    .pairs()
                    .iter()
                    .map(|p| match k {
                        0 => p.baseline.lateness_p99_us,
                        _ => p.candidate.lateness_p99_us,
                    })
                    .filter(|x| x.is_finite())
                    .collect();
                late.sort_by(f64::total_cmp);
                let threshold_us = live[k].plan.lateness_threshold_ns / 1e3;
                late.get(late.len() / 2).is_none_or(|m| *m <= threshold_us)
            };
            if on_time(0) && on_time(1) {
                View::User
            } else {
                View::Server
            }
        }
    }
}

fn is_decided(spec: &Design, paired: &Paired, live: &[Live; 2], confidence: f64) -> bool {
    let view = decided_view(spec, paired, live);
    let asked: Vec<(String, f64)> = spec
        .percentiles
        .iter()
        .filter(|(k, _)| spec.decide.contains(k))
        .cloned()
        .collect();
    !asked.is_empty()
        && paired
            .rows(view, &asked, confidence, spec.tolerance, None)
            .iter()
            .all(|r| r.verdict != CheckVerdict::Undecided)
}

/// Why `view` cannot be compared: an arm's run did not measure it validly.
fn invalid_view(runs: &[Option<&Run>; 2], view: View) -> Option<String> {
    for (arm, r) in [Arm::Baseline, Arm::Candidate].into_iter().zip(runs) {
        let Some(r) = r else {
            return Some(format!("the {arm} has no run"));
        };
        let v = match view {
            View::User => Some(&r.views.user),
            View::Server => r.views.server.as_ref(),
        };
        match v {
            None => return Some(format!("the {arm} has no {view} view")),
            Some(v) if !v.valid => {
                return Some(format!("the {arm}'s {view} view is invalid: {}", v.why))
            }
            _ => {}
        }
    }
    None
}

/// The arms' runs finished (analysed and stored), the rows, the stored experiment.
fn finish(
    spec: &Design,
    experiment: i64,
    mut live: [Live; 2],
    paired: Paired,
    (looked, decided, stopped, elapsed): (Vec<u32>, bool, String, f64),
    (rate, interrupted): (f64, bool),
    db: &Db,
) -> Result<AbOutcome, LabError> {
    let looks = spec.looks();
    let confidence = looks.confidence;
    let mut view = decided_view(spec, &paired, &live);
    let mut server_facts: Vec<measurement::ServerFacts> = live
        .iter_mut()
        .map(|l| match l.beside.take() {
            Some(b) => b.finish(l.ready, &measurement::Quiet),
            None => l.ready.server_facts(),
        })
        .collect();
    let stress = server_facts[0].colocated_stress.clone();
    if server_facts[1].colocated_stress.is_none() {
        server_facts[1].colocated_stress = stress;
    }
    let mut arms = Vec::new();
    let mut runs: Vec<Option<Run>> = Vec::new();
    for (k, l) in live.into_iter().enumerate() {
        let slices = l.facts.slices();
        let run = if slices == 0 {
            let why = l
                .error
                .clone()
                .unwrap_or_else(|| "no slice was measured".into());
            let _ = db.store.finish_run(
                l.run_id,
                RunStatus::Failed.as_str(),
                &json!({"status": "failed", "error": why}),
            );
            Err(why)
        } else {
            let cfg = slice_config(&l, spec.seed);
            let mut facts = l.facts.summary;
            facts.interrupted |= interrupted;
            let same_host = cfg.target.addr.ip().is_loopback();
            let loaded = Loaded {
                generator_cpus: cfg.cpus.clone(),
                same_host_start_mono_ns: same_host.then_some(facts.start_mono_ns),
                instruments: vec![
                    measurement::instruments::generator_instrument(&facts.generator, &cfg.cpus),
                    measurement::instruments::writer_instrument(&facts.writer),
                ],
                cfg,
                facts,
                measured: Measured::Records,
                server: server_facts[k].clone(),
                series: None,
                convergence: None,
                agents: None,
                failures: l.error.iter().cloned().collect(),
                user_late: None,
            };
            measurement::measure::finish(&l.plan, l.ready, &db.store, l.run_id, loaded)
                .map_err(|e| e.to_string())
        };
        let (status, error) = match &run {
            Ok(r) => (r.status, l.error.clone()),
            Err(e) => (RunStatus::Failed, Some(e.clone())),
        };
        arms.push(ArmResult {
            arm: l.arm,
            spec: l.text.clone(),
            url: l.ready.url.clone(),
            run_id: Some(l.run_id),
            status,
            slices,
            error,
        });
        runs.push(run.ok());
    }
    let refs = [runs[0].as_ref(), runs[1].as_ref()];
    let mut rows = Vec::new();
    for v in [View::User, View::Server] {
        let why = invalid_view(&refs, v);
        rows.extend(paired.rows(
            v,
            &spec.percentiles,
            confidence,
            spec.tolerance,
            why.as_deref(),
        ));
    }
    for r in &mut rows {
        r.unstood = [Arm::Baseline, Arm::Candidate]
            .into_iter()
            .zip(refs)
            .find_map(|(arm, run)| {
                let run = run?;
                let p = run
                    .views
                    .percentile(r.view, &r.percentile)
                    .filter(|p| !p.valid && run.views.is_valid(r.view))?;
                Some(format!(
                    "the {arm}'s {} is not the server's alone: {}",
                    r.percentile, p.why
                ))
            });
    }
    // The view read while the pairs ran judged the generator by the median slice; the arms'
    // runs judge it over all their requests. When they find the view read invalid and the
    // other valid, the other is the one the verdicts are read from (and decided again).
    let mut stopped = stopped;
    if view == View::User
        && invalid_view(&refs, View::User).is_some()
        && invalid_view(&refs, View::Server).is_none()
        && spec.view == ViewChoice::Auto
    {
        view = View::Server;
        stopped = format!(
            "{stopped}; the arms' runs found the user view invalid over all their requests, so the verdicts are the server view's"
        );
    }
    let decided = decided
        && spec.decide.iter().all(|k| {
            rows.iter()
                .find(|r| r.view == view && &r.percentile == k)
                .is_some_and(|r| r.verdict != CheckVerdict::Undecided)
        });
    let carry_over = (0..super::paired::SLICE_PERCENTILES.len())
        .filter_map(|k| paired.carry_over(view, k, spec.confidence))
        .collect();
    let mut counts = std::collections::BTreeMap::new();
    for v in ["better", "worse", "same", "undecided"] {
        counts.insert(v.to_string(), 0);
    }
    for r in &rows {
        *counts.entry(r.verdict.to_string()).or_insert(0) += 1;
    }
    let statuses: Vec<RunStatus> = arms.iter().map(|a| a.status).collect();
    let status = [
        RunStatus::Failed,
        RunStatus::Interrupted,
        RunStatus::Saturated,
    ]
    .into_iter()
    .find(|s| statuses.contains(s))
    .unwrap_or(RunStatus::Ok);
    let mut arms = arms.into_iter();
    let (Some(baseline), Some(candidate)) = (arms.next(), arms.next()) else {
        return Err(invalid("two arms are compared"));
    };
    let result = AbResult {
        kind: "ab".into(),
        experiment,
        status,
        baseline,
        candidate,
        method: AB_METHOD.into(),
        tolerance: spec.tolerance,
        confidence: spec.confidence,
        confidence_per_look: confidence,
        rate_rps: rate,
        slice_s: spec.slice.as_secs_f64(),
        settle_s: spec.settle.as_secs_f64(),
        gap_s: spec.gap.as_secs_f64(),
        pairs: paired.pairs().len() as u32,
        until_decided: spec.until_decided.is_some(),
        duet: spec.duet,
        looks: looks.at,
        looked,
        decided,
        stopped,
        decided_view: view,
        decide: spec.decide.clone(),
        regression: rows.iter().any(|r| r.verdict == CheckVerdict::Worse),
        rows,
        carry_over,
        pair_facts: paired.pairs().to_vec(),
        counts,
        elapsed_s: elapsed,
    };
    let summary = serde_json::to_value(&result).unwrap_or(serde_json::Value::Null);
    db.store
        .finish_experiment(experiment, status.as_str(), &summary)?;
    Ok(AbOutcome {
        result,
        runs: runs.into_iter().flatten().collect(),
    })
}

/// A paired A/B comparison: the two arms as the user wrote them, and its design.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AbConfig {
    pub baseline: String,
    pub candidate: String,
    /// The baseline's options (each arm's run stores its own).
    pub run: measurement::RunConfig,
    /// `Debug` of the durations (`1s`, `100ms`), as stored since the first `ab`.
    pub slice: String,
    pub settle: String,
    pub gap: String,
    pub pairs: u32,
    /// `--until-decided`'s longest duration in seconds.
    pub until_decided: Option<f64>,
    pub tolerance: f64,
    pub label: Option<String>,
}
