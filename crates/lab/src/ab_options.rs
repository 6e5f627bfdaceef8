//! `ab`'s options (a clap struct the CLI flattens) and their one conversion into an
//! [`AbSpec`]: each arm is a quoted word holding its target URL and its own server flags
//! (`'nullrpc:// --server-work det:60us'`); server flags given outside the arms apply to
//! both, an arm's own win. Each arm becomes the run `tailscope run` would make of it, so every
//! check of `run` applies; nothing starts here.

use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches};

use crate::options::{
    AgentArgs, GateArgs, Given, LoadArgs, OnOff, ServerSideArgs, UndecidedArg, ViewArg,
};
use crate::options_cmd::RunOptions;
use experiments::ab::{AbSpec, ArmSpec, Design};
use measurement::agent_spec::split_words;
use measurement::error::{clip, invalid, LabError};
use measurement::Arm;
use measurement::{DurationArg, Label, Tolerance};

/// Pairs of a fixed design, and the first look of `--until-decided`, unless `--pairs` says.
pub const DEFAULT_PAIRS: u32 = 20;
pub const DEFAULT_FIRST_LOOK: u32 = 6;
/// The longest `--until-decided` adds pairs, unless `--max-duration` says.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(120);

/// `ab`'s options beside its two arms.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("slo", |a| {
    a.help(
        "Service-level objective of each arm (as for `run --slo`): a verdict per arm, exit 3 \
         when either violates it",
    )
}))]
pub struct AbOptions {
    /// Request rate of both arms (the same arrivals need the same rate): requests per second
    /// (6000) or a percentage of the baseline's calibrated capacity (40%).
    #[arg(long)]
    pub rate: Given<experiments::Load>,
    /// Each slice's counted length: the arms alternate in slices this long.
    #[arg(long, default_value = "1s")]
    pub slice: Given<DurationArg>,
    /// The start of each slice that is not counted (before it, the other arm had the
    /// server's CPUs and the generator's connections are new).
    #[arg(long, default_value = "100ms")]
    pub settle: Given<DurationArg>,
    /// Pause after each slice's last reply before the next slice (longer when a request timed
    /// out), so that one arm's backlog never lands in the other's slice.
    #[arg(long, default_value = "50ms")]
    pub gap: Given<DurationArg>,
    /// Pairs of slices, each pair one slice of each arm with the same arrivals (default 20);
    /// with --until-decided, the pairs before the first look (default 6).
    #[arg(long, value_name = "N")]
    pub pairs: Option<u32>,
    /// Add pairs until every --decide percentile of the view read (--view) is better,
    /// worse or same, or --max-duration (default 120s) of pairs has passed; the result is
    /// looked at after ~1.5× more pairs each time, each look's intervals at 1 − α/looks.
    #[arg(long)]
    pub until_decided: bool,
    /// The percentiles --until-decided waits for.
    #[arg(long, default_value = "p50,p99", value_name = "LIST")]
    pub decide: String,
    /// How far the ratio candidate ÷ baseline may lie from 1 and still be the same, e.g.
    /// 10% or 0.1 (as for `check`).
    #[arg(long, default_value = "10%", allow_hyphen_values = true)]
    pub tolerance: Tolerance,
    /// The view --until-decided reads: user, server, or auto (the user's while the generator
    /// keeps its schedule in both arms, else the server's). Both views' rows are reported.
    #[arg(long, value_enum, default_value_t = ViewArg::Auto)]
    pub view: ViewArg,
    #[command(flatten)]
    pub gate: GateArgs,
    /// A name stored with the comparison and its two runs (config `label`), shown by `runs
    /// list`. Letters, digits and . _ - + / @.
    #[arg(long, value_name = "NAME")]
    pub label: Option<Label>,
    /// Skip the short host-noise probe made before the pairs.
    #[arg(long)]
    pub no_noise_probe: bool,
    /// Duet: load both arms at once in each pair (two schedules, one seed), each judged by
    /// the ratio (Bulej et al., ICPE 2020). Each server needs CPUs of its own (each arm's
    /// --server-cpus) and each generator one (--cpus A,B: the baseline's, the candidate's):
    /// refused on a host with fewer than 4 CPUs.
    #[arg(long)]
    pub duet: bool,
    /// The load of both arms (as for `run`; --warmup is each arm's warm-up before the first
    /// pair; --max-duration goes with --until-decided).
    #[command(flatten)]
    pub load: LoadArgs,
    /// Server flags for both arms (each arm's own, in its quoted word, win).
    #[command(flatten)]
    pub side: ServerSideArgs,
}

/// An arm's word: its URL and its own server flags.
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "arm", no_binary_name = true, args_override_self = true)]
struct ArmLine {
    target: String,
    #[command(flatten)]
    side: ServerSideArgs,
}

/// The server flags of `text` (an arm's word), with the ones `shared` (the `ab` command line's
/// matches) gave as its defaults.
fn arm_line(arm: Arm, text: &str, shared: &ArgMatches) -> Result<ArmLine, LabError> {
    let shown = clip(text);
    let words = split_words(text).map_err(|m| invalid(format!("the {arm} '{shown}': {m}")))?;
    let ids: Vec<String> = ServerSideArgs::augment_args(clap::Command::new("x"))
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    let mut cmd = ArmLine::command();
    for id in &ids {
        if shared.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let Some(raw) = shared.get_raw(id) else {
            continue;
        };
        // clap's defaults are `'static` (without its "string" feature): these few words of
        // one command line live as long as the process anyway.
        let vals: Vec<&'static str> = raw
            .filter_map(|v| v.to_str())
            .map(|v| &*Box::leak(v.to_string().into_boxed_str()))
            .collect();
        cmd = cmd.mut_arg(id, |a| a.default_values(vals));
    }
    let m = cmd.try_get_matches_from(&words).map_err(|e| {
        let first = e.to_string();
        let first = first.lines().next().unwrap_or("bad arm").trim();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        invalid(format!(
            "the {arm} '{shown}': {first} (an arm is a target URL and its own server flags, e.g. 'nullrpc:// --server-work det:60us'; load options apply to both arms)"
        ))
    })?;
    ArmLine::from_arg_matches(&m).map_err(|e| invalid(format!("the {arm} '{shown}': {e}")))
}

/// The flags of `run` that set a run's length, refused by `ab` (its length is pairs of
/// slices).
const LENGTH_FLAGS: [(&str, &str); 3] = [
    ("duration", "--duration"),
    ("requests", "--requests"),
    ("precision", "--precision"),
];

impl AbOptions {
    /// The comparison of `baseline` and `candidate` these options ask for, checked;
    /// `matches` are the `ab` command line's (which options it gave), `extra_quantiles` the
    /// gate's.
    pub fn plan(
        &self,
        baseline: &str,
        candidate: &str,
        matches: &ArgMatches,
        extra_quantiles: Vec<(String, f64)>,
    ) -> Result<AbSpec, LabError> {
        let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        for (id, flag) in LENGTH_FLAGS {
            if given(id) {
                return Err(invalid(format!(
                    "{flag} does not apply to ab: its length is --pairs pairs of two --slice slices (or --until-decided, up to --max-duration)"
                )));
            }
        }
        if given("max_duration") && !self.until_decided {
            return Err(invalid(
                "--max-duration goes with --until-decided (the longest the pairs may take)",
            ));
        }
        let positive = |g: &Given<DurationArg>, flag: &str| -> Result<Duration, LabError> {
            let d = g.value.0;
            if d.is_zero() {
                return Err(invalid(format!("{flag} must be positive, got {}", g.text)));
            }
            Ok(d)
        };
        let slice = positive(&self.slice, "--slice")?;
        let (settle, gap) = (self.settle.value.0, self.gap.value.0);
        if slice > Duration::from_secs(3600) || settle > slice || gap > Duration::from_secs(60) {
            return Err(invalid(format!(
                "--slice {} must be at most 1h, --settle {} at most the slice, --gap {} at most 60s",
                self.slice, self.settle, self.gap
            )));
        }
        let pairs = match (self.pairs, self.until_decided) {
            (Some(0), _) => return Err(invalid("--pairs must be at least 1")),
            (Some(n), _) if n > 100_000 => {
                return Err(invalid(format!("--pairs must be at most 100000, got {n}")))
            }
            (Some(n), _) => n,
            (None, false) => DEFAULT_PAIRS,
            (None, true) => DEFAULT_FIRST_LOOK,
        };
        let until_decided = self.until_decided.then(|| {
            self.load
                .max_duration
                .as_ref()
                .map_or(DEFAULT_MAX_DURATION, |m| m.value.0)
        });
        let tol = self.tolerance.0;
        let (percentiles, decide) = rows_and_decide(&self.decide, &extra_quantiles)?;
        let generators = self.duet_generators()?;
        let mut arms = Vec::with_capacity(2);
        for (k, (arm, text)) in [(Arm::Baseline, baseline), (Arm::Candidate, candidate)]
            .into_iter()
            .enumerate()
        {
            let line = arm_line(arm, text, matches)?;
            let mut opts = self.run_options(arm, line.side);
            if let Some(g) = &generators {
                opts.load.cpus = Some(measurement::CpuList(vec![g[k]]));
            }
            let (tplan, run) =
                opts.plan(&line.target, extra_quantiles.clone())
                    .map_err(|e| match e {
                        LabError::Invalid(m) => invalid(format!("the {arm} '{}': {m}", clip(text))),
                        other => other,
                    })?;
            arms.push(ArmSpec {
                arm,
                text: text.to_string(),
                tplan,
                run,
            });
        }
        let [b, c]: [ArmSpec; 2] = arms
            .try_into()
            .map_err(|_| invalid("two arms are compared"))?;
        if b.tplan.stress() != c.tplan.stress() {
            return Err(invalid(
                "the arms' --stress differ: a stressor runs through the whole comparison, beside both arms alike (give it outside the arms); to compare with and without one, run each with `run --repeat`",
            ));
        }
        if self.duet {
            duet_servers(&b, &c, generators.as_deref().unwrap_or_default())?;
        }
        Ok(AbSpec {
            arms: [b, c],
            design: Design {
                duet: self.duet,
                slice,
                settle,
                gap,
                pairs,
                until_decided,
                tolerance: tol,
                confidence: self.load.confidence,
                percentiles,
                decide,
                view: self.view.into(),
                label: self.label.as_ref().map(|l| l.0.clone()),
                seed: self.load.seed,
            },
        })
    }

    /// `--duet`'s generator CPUs, the baseline's then the candidate's; None without it.
    fn duet_generators(&self) -> Result<Option<Vec<usize>>, LabError> {
        if !self.duet {
            return Ok(None);
        }
        let online = host::placement::online_cpus();
        if online < DUET_CPUS && !duet_anywhere() {
            return Err(invalid(format!(
                "--duet loads both arms at once, each server and each generator on CPUs of its own: at least {DUET_CPUS} CPUs, and this host has {online} (without --duet the arms alternate in slices on the same CPUs)"
            )));
        }
        let cpus = self.load.cpus.clone().unwrap_or_default().0;
        match cpus.as_slice() {
            [a, b] if a != b => Ok(Some(vec![*a, *b])),
            [a] if duet_anywhere() => Ok(Some(vec![*a, *a])),
            _ => Err(invalid(
                "--duet needs --cpus A,B: two CPUs, the baseline's generator's and the candidate's",
            )),
        }
    }

    /// The options `run` would be given for one arm: its server flags, the shared load.
    fn run_options(&self, arm: Arm, side: ServerSideArgs) -> RunOptions {
        let mut load = self.load.clone();
        // The run's length is not ab's (checked above); its precision loop does not apply.
        load.precision = None;
        load.max_duration = None;
        RunOptions {
            rate: self.rate.clone(),
            load,
            side,
            stages: measurement::StagesMode::Stamps,
            stages_budget: measurement::StagesBudget::default(),
            repeat: 1,
            label: self.label.clone(),
            view: self.view,
            // One probe before the pairs, made with the baseline's plan.
            no_noise_probe: self.no_noise_probe || arm == Arm::Candidate,
            gate: GateArgs {
                slo: self.gate.slo.clone(),
                slo_view: self.gate.slo_view,
                percentiles: self.gate.percentiles.clone(),
                slo_undecided: UndecidedArg::Fail,
                junit: None,
                markdown: None,
            },
            agents: AgentArgs {
                agent: Vec::new(),
                agents_file: None,
                agent_records: OnOff::On,
            },
        }
    }
}

/// Percentiles as (key, q).
type Percentiles = Vec<(String, f64)>;

/// A comparison's rows (the standard percentiles, `extra`, and `--decide`'s) and the
/// percentiles `--decide` (`p50,p99`) waits for.
pub(crate) fn rows_and_decide(
    decide_list: &str,
    extra: &[(String, f64)],
) -> Result<(Percentiles, Vec<String>), LabError> {
    let mut rows: Vec<(String, f64)> = stats::STANDARD_QUANTILES
        .iter()
        .map(|(k, q)| (k.to_string(), *q))
        .collect();
    for (k, q) in extra {
        if !rows.iter().any(|(p, _)| p == k) {
            rows.push((k.clone(), *q));
        }
    }
    let mut decide: Vec<String> = Vec::new();
    for part in decide_list.split(',') {
        let (k, q) =
            experiments::parse_percentile(part).map_err(|e| invalid(format!("--decide: {e}")))?;
        if !rows.iter().any(|(p, _)| *p == k) {
            rows.push((k.clone(), q));
        }
        if !decide.contains(&k) {
            decide.push(k);
        }
    }
    Ok((rows, decide))
}

/// The fewest CPUs a duet needs: two servers and two generators, none sharing.
pub const DUET_CPUS: usize = 4;

/// A testing knob: `TAILSCOPE_TEST_DUET_ANYWHERE=1` lets `--duet` run where its CPUs cannot be
/// kept apart (this project's 2-CPU VM), so that its loop is tested; the measurements it makes
/// there disturb each other and are not a duet's.
fn duet_anywhere() -> bool {
    std::env::var_os("TAILSCOPE_TEST_DUET_ANYWHERE").is_some_and(|v| v == "1")
}

/// `--duet`: each arm's server on CPUs of its own, apart from the other's and the generators'.
fn duet_servers(b: &ArmSpec, c: &ArmSpec, generators: &[usize]) -> Result<(), LabError> {
    if duet_anywhere() {
        return Ok(());
    }
    let cpus = |a: &ArmSpec| {
        let mut v = a.tplan.server_cpus();
        if v.is_empty() {
            v.clone_from(&a.run.server_cpus);
        }
        v
    };
    let (sb, sc) = (cpus(b), cpus(c));
    for (a, s) in [(b, &sb), (c, &sc)] {
        if s.is_empty() {
            return Err(invalid(format!(
                "--duet: give the {}'s --server-cpus (its server's CPUs, apart from the other's)",
                a.arm
            )));
        }
        if let Some(x) = s.iter().find(|x| generators.contains(x)) {
            return Err(invalid(format!(
                "--duet: the {}'s server CPU {x} is a generator's (--cpus)",
                a.arm
            )));
        }
    }
    if let Some(x) = sb.iter().find(|x| sc.contains(x)) {
        return Err(invalid(format!(
            "--duet: both servers would run on CPU {x}: give each arm --server-cpus of its own"
        )));
    }
    Ok(())
}

/// `--interleave`'s options for `tune` and `sweep` (the comparisons' design; each adds pairs
/// until decided, as `ab --until-decided` does).
#[derive(clap::Args, Debug, Clone)]
pub struct InterleaveArgs {
    /// Measure each configuration against the one it is compared with (tune: the step
    /// before; sweep: the knob axes' first values) in paired, interleaved slices with the
    /// same arrivals, as `ab --until-decided` does: each gain as a ratio with its interval.
    #[arg(long)]
    pub interleave: bool,
    /// With --interleave: each slice's counted length.
    #[arg(
        long,
        default_value = "1s",
        value_name = "DURATION",
        requires = "interleave"
    )]
    pub slice: measurement::DurationArg,
    /// With --interleave: the pairs before a comparison's first look.
    #[arg(long, default_value_t = DEFAULT_FIRST_LOOK, value_name = "N", requires = "interleave")]
    pub pairs: u32,
    /// With --interleave: the longest one comparison adds pairs.
    #[arg(
        long,
        default_value = "60s",
        value_name = "DURATION",
        requires = "interleave"
    )]
    pub interleave_for: measurement::DurationArg,
    /// With --interleave: the percentiles a comparison waits for.
    #[arg(
        long,
        default_value = "p50,p99",
        value_name = "LIST",
        requires = "interleave"
    )]
    pub decide: String,
    /// With --interleave: how far a ratio may lie from 1 and still be the same.
    #[arg(
        long,
        default_value = "10%",
        allow_hyphen_values = true,
        requires = "interleave"
    )]
    pub tolerance: measurement::Tolerance,
}

impl InterleaveArgs {
    /// The design `--interleave` asks for (None without it), checked; `confidence` and
    /// `seed` are the run options'.
    pub fn design(
        &self,
        confidence: f64,
        seed: u64,
        label: Option<String>,
    ) -> Result<Option<Design>, LabError> {
        if !self.interleave {
            return Ok(None);
        }
        let slice = self.slice.0;
        if slice < Duration::from_millis(100) || slice > Duration::from_secs(3600) {
            return Err(invalid(format!(
                "--slice must be 100ms to 1h, got {:?}",
                slice
            )));
        }
        if !(1..=100_000).contains(&self.pairs) {
            return Err(invalid(format!(
                "--pairs must be 1 to 100000, got {}",
                self.pairs
            )));
        }
        if self.interleave_for.0.is_zero() {
            return Err(invalid("--interleave-for must be positive"));
        }
        let (percentiles, decide) = rows_and_decide(&self.decide, &[])?;
        Ok(Some(Design {
            slice,
            settle: (slice / 10).min(Duration::from_millis(100)),
            gap: Duration::from_millis(50),
            pairs: self.pairs,
            until_decided: Some(self.interleave_for.0),
            tolerance: self.tolerance.0,
            confidence,
            percentiles,
            decide,
            view: measurement::view::ViewChoice::Auto,
            label,
            seed,
            duet: false,
        }))
    }
}
