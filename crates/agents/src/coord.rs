//! The coordinator's side of a run with agents: start them, greet them (same version or
//! nothing), measure their clocks, announce the common start, then take what they stream —
//! histograms added per agent, record chunks into the store as one run — until every agent
//! is done or has failed. A failed agent (dead, disconnected, garbage, silent) stops the
//! others, which finish and report, so that everything measured is kept; Ctrl-C stops all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use load::{LoadConfig, RecordSink, Workload};
use store::{Columns, Store};

use crate::clock::{self, ClockOffset, Exchange};
use crate::fleet::{with_tail, Event, Fleet, Msg};
use crate::frame::{self, put_u64, Kind};
use crate::hist::{self, Interval};
use crate::job::{Done, Hello, Job};
use crate::{Launch, Plan, Progress};

/// How long an agent may take to answer the hello (ssh and kubectl connect first).
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one clock ping may take.
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// A running agent sends progress every second: this long without a frame means it hung.
const SILENCE: Duration = Duration::from_secs(20);

/// What the coordinator knows of one agent.
pub struct AgentState {
    pub cmd: Launch,
    pub hello: Option<Hello>,
    pub clock: Option<ClockOffset>,
    /// It reads this host's very CLOCK_MONOTONIC (same boot, same time namespace): its
    /// offset is exactly 0, whatever the pings' noise said.
    pub shared_clock: bool,
    /// The offset its start was converted with.
    pub applied_offset_ns: i64,
    /// Its histograms, added up over its intervals and threads.
    pub latency: Histogram<u64>,
    pub lateness: Histogram<u64>,
    pub outcomes: [u64; 4],
    pub chunks: u64,
    pub stored_records: u64,
    pub progress: (u64, u64),
    pub done: Option<Done>,
    /// Why it failed (without its name: the report adds it).
    pub failure: Option<String>,
    /// Done, failed: nothing more will come.
    pub finished: bool,
    last_heard: Instant,
}

impl AgentState {
    fn new(cmd: Launch) -> Self {
        AgentState {
            cmd,
            hello: None,
            clock: None,
            shared_clock: false,
            applied_offset_ns: 0,
            latency: hist::empty(),
            lateness: hist::empty(),
            outcomes: [0; 4],
            chunks: 0,
            stored_records: 0,
            progress: (0, 0),
            done: None,
            failure: None,
            finished: false,
            last_heard: Instant::now(),
        }
    }

    pub fn requests(&self) -> u64 {
        self.outcomes.iter().sum()
    }
}

/// A whole run's take.
pub struct Collected {
    pub agents: Vec<AgentState>,
    /// The common start on this host's clock (None: the run never started).
    pub start_mono_ns: Option<u64>,
    pub interrupted: bool,
    /// The store refused a chunk: the run could not be kept whole.
    pub store_error: Option<String>,
    /// What the coordinator decided for the agents that the user should know.
    pub notes: Vec<String>,
}

/// Where the records go: into a stored run, as the agents' chunks (each agent's threads
/// their own streams), or decoded into a record sink (a calibration's counts).
pub enum Sink<'a> {
    Store { store: &'a Store, run_id: i64 },
    Records(&'a mut dyn RecordSink),
}

impl Sink<'_> {
    fn put(&mut self, stream: u32, seq: u32, cols: &Columns) -> Result<(), String> {
        match self {
            Sink::Store { store, run_id } => store
                .put_chunk(*run_id, stream, seq, cols)
                .map_err(|e| e.to_string()),
            Sink::Records(sink) => {
                let records = crate::columns::from_columns(cols).map_err(|e| e.to_string())?;
                sink.write(stream as usize, &records)
            }
        }
    }
}

struct Coordinator<'a> {
    fleet: Fleet,
    agents: Vec<AgentState>,
    sink: Sink<'a>,
    /// Threads and connections of each agent (stream and connection numbering).
    threads: usize,
    connections: usize,
    store_error: Option<String>,
}

impl Coordinator<'_> {
    fn fail(&mut self, i: usize, why: String) {
        let a = &mut self.agents[i];
        if a.finished {
            return;
        }
        a.failure = Some(with_tail(why, &self.fleet.tail(i)));
        a.finished = true;
        self.fleet.kill(i);
    }

    fn live(&self) -> impl Iterator<Item = usize> + '_ {
        let agents = &self.agents;
        (0..agents.len()).filter(move |&i| !agents[i].finished)
    }

    fn any_failed(&self) -> bool {
        self.agents.iter().any(|a| a.failure.is_some())
    }

    fn send_all(&mut self, kind: Kind, payload: &[u8]) {
        for i in self.live().collect::<Vec<_>>() {
            if let Err(e) = self.fleet.send(i, kind, payload) {
                self.fail(i, e);
            }
        }
    }

    /// Why an agent's output ended, with how its process ended when it has.
    fn ended(&mut self, i: usize) -> String {
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut status = self.fleet.exit_status(i);
        while status.is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            status = self.fleet.exit_status(i);
        }
        match status {
            Some(s) => format!("it ended before finishing its part ({s})"),
            None => "its output ended before it finished its part (disconnected)".into(),
        }
    }

    /// Handles one event of the run; Msg::Hello and pongs are only expected earlier.
    fn on_event(&mut self, e: Event) {
        let i = e.agent;
        self.agents[i].last_heard = Instant::now();
        if self.agents[i].finished {
            return;
        }
        match e.what {
            Err(m) => self.fail(i, m),
            Ok(None) => {
                let why = self.ended(i);
                self.fail(i, why);
            }
            Ok(Some(m)) => self.on_msg(i, m),
        }
    }

    fn on_msg(&mut self, i: usize, m: Msg) {
        match m {
            Msg::Progress { done, total } => self.agents[i].progress = (done, total),
            Msg::Interval(iv) => self.on_interval(i, &iv),
            Msg::Chunk { thread, seq, cols } => self.on_chunk(i, thread, seq, cols),
            Msg::Done(d) => {
                let a = &mut self.agents[i];
                a.done = Some(*d);
                a.finished = true;
            }
            Msg::Error(m) => self.fail(i, format!("it reported: {m}")),
            Msg::Pong { .. } => {}
            Msg::Hello(_) => self.fail(i, "a second hello in the middle of the run".into()),
        }
    }

    fn on_interval(&mut self, i: usize, iv: &Interval) {
        if iv.thread as usize >= self.threads {
            return self.fail(
                i,
                format!("histograms of thread {} of {}", iv.thread, self.threads),
            );
        }
        let a = &mut self.agents[i];
        let added = a
            .latency
            .add(&iv.latency)
            .and_then(|_| a.lateness.add(&iv.lateness));
        if let Err(e) = added {
            return self.fail(i, format!("its histograms cannot be added: {e:?}"));
        }
        for (t, o) in a.outcomes.iter_mut().zip(iv.outcomes) {
            *t += o;
        }
    }

    fn on_chunk(&mut self, i: usize, thread: u32, seq: u32, mut cols: Columns) {
        if thread as usize >= self.threads {
            return self.fail(i, format!("records of thread {thread} of {}", self.threads));
        }
        // Connections are numbered agent by agent, so that each is one connection of the run
        // (the per-worker ideal partitions them; exports tell the agents apart).
        let base = (i * self.connections) as i64;
        if let Some((_, conn)) = cols.cols.iter_mut().find(|(n, _)| n == "conn") {
            conn.iter_mut().for_each(|c| *c += base);
        }
        let stream = u32::try_from(i * self.threads + thread as usize).unwrap_or(u32::MAX);
        match self.sink.put(stream, seq, &cols) {
            Ok(()) => {
                let a = &mut self.agents[i];
                a.chunks += 1;
                a.stored_records += cols.len as u64;
            }
            Err(e) => {
                if self.store_error.is_none() {
                    self.store_error = Some(format!("storing the records: {e}"));
                }
            }
        }
    }

    /// The hello both ways; false when an agent failed (or Ctrl-C came first).
    fn greet(&mut self, here: &Hello, stop: &AtomicBool) -> bool {
        let Ok(p) = frame::to_json(Kind::Hello, here) else {
            return false;
        };
        self.send_all(Kind::Hello, &p);
        let deadline = Instant::now() + HELLO_TIMEOUT;
        while self.live().any(|i| self.agents[i].hello.is_none()) {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(e) = self.fleet.recv(left.min(Duration::from_millis(200))) else {
                if left.is_zero() {
                    self.fail_silent_greeting();
                }
                continue;
            };
            let i = e.agent;
            match e.what {
                Ok(Some(Msg::Hello(h))) => match here.mismatch(&h) {
                    Some(m) => self.fail(i, m),
                    None => self.agents[i].hello = Some(h),
                },
                other => self.on_event(Event {
                    agent: i,
                    at_ns: e.at_ns,
                    what: other,
                }),
            }
        }
        !self.any_failed()
    }

    /// Fails every agent that has not answered the hello.
    fn fail_silent_greeting(&mut self) {
        let why = format!(
            "no answer to the hello within {} s (does its command run `tailscope agent`?)",
            HELLO_TIMEOUT.as_secs()
        );
        for i in self.live().collect::<Vec<_>>() {
            if self.agents[i].hello.is_none() {
                self.fail(i, why.clone());
            }
        }
    }

    /// Clock pings to each agent in turn; false when an agent failed (or Ctrl-C came).
    fn sync_clocks(&mut self, here: &Hello, stop: &AtomicBool) -> bool {
        for i in 0..self.agents.len() {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let mut xs = Vec::with_capacity(clock::EXCHANGES);
            for seq in 0..clock::EXCHANGES as u64 {
                if self.agents[i].finished {
                    return false;
                }
                let mut p = Vec::with_capacity(16);
                put_u64(&mut p, seq);
                put_u64(&mut p, host::tstamp::mono_now_ns());
                if let Err(m) = self.fleet.send(i, Kind::Ping, &p) {
                    self.fail(i, m);
                    return false;
                }
                let deadline = Instant::now() + PING_TIMEOUT;
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let Some(e) = self.fleet.recv(left) else {
                        self.fail(i, "no answer to a clock ping within 10 s".into());
                        return false;
                    };
                    match e.what {
                        Ok(Some(Msg::Pong { seq: s, t1, t2, t3 })) if e.agent == i && s == seq => {
                            xs.push(Exchange {
                                t1,
                                t2,
                                t3,
                                t4: e.at_ns,
                            });
                            break;
                        }
                        Ok(Some(Msg::Pong { .. })) if e.agent == i => {
                            self.fail(i, "a pong that answers no ping".into());
                            return false;
                        }
                        what => self.on_event(Event {
                            agent: e.agent,
                            at_ns: e.at_ns,
                            what,
                        }),
                    }
                    if self.any_failed() {
                        return false;
                    }
                }
            }
            let Some(c) = clock::estimate(&xs) else {
                self.fail(i, "its clock stamps contradict each other".into());
                return false;
            };
            let a = &mut self.agents[i];
            a.shared_clock = a.hello.as_ref().is_some_and(|h| here.same_clock(h));
            a.applied_offset_ns = if a.shared_clock { 0 } else { c.offset_ns };
            a.clock = Some(c);
        }
        true
    }

    /// Takes events until every agent is done or failed; stops them all on Ctrl-C, a failed
    /// agent or a store error.
    fn collect(&mut self, stop: &AtomicBool, grace: Duration, obs: &dyn Progress) -> bool {
        let mut stopping: Option<Instant> = None;
        let mut interrupted = false;
        let mut last_progress = Instant::now();
        while self.live().next().is_some() {
            if let Some(e) = self.fleet.recv(Duration::from_millis(100)) {
                self.on_event(e);
            }
            let user = stop.load(Ordering::Relaxed);
            if stopping.is_none() && (user || self.any_failed() || self.store_error.is_some()) {
                interrupted |= user;
                stopping = Some(Instant::now());
                self.send_all(Kind::Stop, &[]);
            }
            let now = Instant::now();
            for i in self.live().collect::<Vec<_>>() {
                let quiet = now.duration_since(self.agents[i].last_heard);
                if quiet > SILENCE + grace {
                    self.fail(
                        i,
                        format!(
                            "it sent nothing for {} s (hung, or its connection stalled)",
                            quiet.as_secs()
                        ),
                    );
                } else if stopping.is_some_and(|s| now.duration_since(s) > grace) {
                    self.fail(
                        i,
                        format!(
                            "it did not finish within {} s of being told to stop",
                            grace.as_secs()
                        ),
                    );
                }
            }
            if last_progress.elapsed() >= Duration::from_millis(250) {
                last_progress = Instant::now();
                let (d, t) = self
                    .agents
                    .iter()
                    .fold((0, 0), |(d, t), a| (d + a.progress.0, t + a.progress.1));
                obs.progress("run", d, t.max(d));
            }
        }
        interrupted
    }
}

/// Runs `cfg` (its target the started one) split over `plan`'s agents, the records of all
/// going into `sink`.
pub fn run(
    cfg: &LoadConfig,
    work: &Workload,
    plan: &Plan,
    sink: Sink<'_>,
    stop: &AtomicBool,
    obs: &dyn Progress,
) -> Collected {
    let n = plan.launch.len();
    let mut c = Coordinator {
        fleet: Fleet::spawn(&plan.launch),
        agents: plan.launch.iter().cloned().map(AgentState::new).collect(),
        sink,
        threads: cfg.effective_threads(),
        connections: cfg.connections,
        store_error: None,
    };
    let here = Hello::here();
    let ready = c.greet(&here, stop) && c.sync_clocks(&here, stop);
    let mut start = None;
    let mut interrupted = stop.load(Ordering::Relaxed);
    let mut notes = Vec::new();
    let mut cfg = cfg.clone();
    // Agents on this machine spinning for their next send on more CPUs than it has would
    // starve each other and the server: each would be late by whole scheduler slices. They
    // sleep until shortly before a far send instead.
    let here_agents = c
        .agents
        .iter()
        .filter(|a| a.hello.as_ref().is_some_and(|h| here.same_machine(h)))
        .count();
    let spinning = here_agents * c.threads;
    if ready && !cfg.yield_when_far && here_agents > 1 && spinning >= host::placement::online_cpus()
    {
        cfg.yield_when_far = true;
        notes.push(format!(
            "{here_agents} agents on this host would spin on {spinning} of its {} CPUs: they sleep until shortly before a send more than 200 µs away (as --yield-when-far)",
            host::placement::online_cpus()
        ));
    }
    for n in &notes {
        obs.note(n);
    }
    let cfg = &cfg;
    if ready && !interrupted {
        let lead = if here_agents == n {
            plan.lead.min(crate::LOCAL_LEAD)
        } else {
            plan.lead
        };
        let s = host::tstamp::mono_now_ns() + u64::try_from(lead.as_nanos()).unwrap_or(u64::MAX);
        obs.note(&format!(
            "{n} agent(s) ready; common start in {:.0} ms",
            lead.as_secs_f64() * 1e3
        ));
        for i in 0..n {
            let mut job = Job::of(cfg, work, (i as u32, n as u32));
            job.start_mono_ns = s;
            job.offset_ns = c.agents[i].applied_offset_ns;
            job.records = plan.records;
            job.tls.clone_from(&plan.tls);
            let sent = frame::to_json(Kind::Start, &job)
                .map_err(|e| e.to_string())
                .and_then(|p| c.fleet.send(i, Kind::Start, &p));
            if let Err(m) = sent {
                c.fail(i, m);
            }
        }
        start = Some(s);
        // Agents drain up to a timeout after a stop, then report.
        let grace = cfg.timeout * 2 + Duration::from_secs(10);
        interrupted |= c.collect(stop, grace, obs);
    } else {
        // Nothing started: idle agents end when their input closes.
        for i in 0..n {
            c.fleet.close(i);
        }
    }
    c.fleet.finish(Duration::from_secs(2));
    Collected {
        agents: c.agents,
        start_mono_ns: start,
        interrupted,
        store_error: c.store_error,
        notes,
    }
}
