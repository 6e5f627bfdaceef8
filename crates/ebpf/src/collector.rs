//! [`Collector`]: the BPF programs loaded (CO-RE, libbpf), told which processes, threads and
//! ports are the server's, attached to their tracepoints, and drained on demand.
//!
//! Nothing runs in user space while a run goes on: the kernel writes its records into one
//! ring buffer of bounded size without waking anyone, and the caller drains it when it wants
//! the events ([`Collector::drain`]). Records that find the buffer full are dropped and
//! counted ([`Counters::dropped`]).
//!
//! While it runs the collector holds one UDP socket that asked for software receive
//! timestamps (`SO_TIMESTAMPING`): the kernel stamps received packets only while some socket
//! on the host wants them, and the stamp of the packet queued at data-ready is the stack's
//! entry, T1 (see the crate's table). The cost is the kernel's clock read per received packet
//! — what any program asking for receive stamps (the load generator does) already turns on.
//! The kernel keeps that stamp on CLOCK_REALTIME; [`Collector::drain`] maps it to
//! CLOCK_MONOTONIC with an offset sampled at each drain ([`host::tstamp::ClockMap`]).

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use libbpf_rs::{MapCore, MapFlags, ObjectBuilder, PrintLevel, RingBufferBuilder};

use crate::event::Event;
use crate::EbpfError;

/// Smallest and largest ring buffer (bytes; the kernel wants a power of two of pages).
pub const MIN_RING_BYTES: usize = 1 << 20;
pub const MAX_RING_BYTES: usize = 1 << 28;

/// What the collector watches.
#[derive(Clone, Debug, Default)]
pub struct CollectorConfig {
    /// Server processes (every thread of each, and processes they fork).
    pub tgids: Vec<u32>,
    /// Server threads of a process that also runs other things (the built-in server inside
    /// tailscope).
    pub tids: Vec<u32>,
    /// Threads of process `.0` whose names start with `.1` (at most 16 bytes): the built-in
    /// server's threads inside tailscope, which come and go with its connections.
    pub thread_prefix: Option<(u32, String)>,
    /// The server's ports: data reaching a socket bound to one of them is an arrival.
    pub ports: Vec<u16>,
    /// Ring buffer size, bytes (rounded up to a power of two within the limits above).
    pub ring_bytes: usize,
    /// Attach the programs only in windows that keep their cost within a budget (None:
    /// attached for the collector's whole life).
    pub sampling: Option<crate::sampling::Sampling>,
}

/// The kernel side's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Records written to the ring buffer.
    pub events: u64,
    /// Records lost because the ring buffer was full.
    pub dropped: u64,
}

/// What the programs cost inside the kernel (BPF run-time statistics, on while the
/// collector runs), summed over programs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KernelCost {
    /// Whether the kernel counted (BPF_ENABLE_STATS accepted).
    pub measured: bool,
    /// Program runs and their total time, ns.
    pub runs: u64,
    pub run_time_ns: u64,
    /// Runs the kernel skipped because the program was already running on that CPU
    /// (`recursion_misses`).
    pub misses: u64,
    /// Per program: (name, runs, ns).
    pub programs: Vec<(String, u64, u64)>,
}

/// The watched system calls' numbers on this architecture and their classes (`CLS_*` in
/// the programs), for the raw pair's `calls` map: the calls of [`crate::support::SYSCALLS`],
/// `epoll_pwait2` only when `pwait2` (see [`Collector::start`]).
fn call_classes(pwait2: bool) -> Vec<(u32, u8)> {
    const READ: u8 = 1;
    const WRITE: u8 = 2;
    const EPOLL: u8 = 3;
    const RECVFROM: u8 = 4;
    const RECVMSG: u8 = 5;
    let mut v = vec![
        (libc::SYS_read, READ),
        (libc::SYS_readv, READ),
        (libc::SYS_recvfrom, RECVFROM),
        (libc::SYS_recvmsg, RECVMSG),
        (libc::SYS_recvmmsg, READ),
        (libc::SYS_write, WRITE),
        (libc::SYS_writev, WRITE),
        (libc::SYS_sendto, WRITE),
        (libc::SYS_sendmsg, WRITE),
        (libc::SYS_sendmmsg, WRITE),
        (libc::SYS_sendfile, WRITE),
        (libc::SYS_epoll_pwait, EPOLL),
    ];
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    v.push((libc::SYS_epoll_wait, EPOLL));
    if pwait2 {
        v.push((crate::support::NR_EPOLL_PWAIT2 as libc::c_long, EPOLL));
    }
    v.into_iter().map(|(nr, c)| (nr as u32, c)).collect()
}

/// Most server processes traced (`MAX_TGIDS` in the programs).
pub const MAX_TGIDS: usize = 16;

/// The programs' `struct filter` for `cfg` (native endian):
/// `{ u32 ntgids; u32 tgids[16]; u32 has_tids; u32 comm_tgid; u32 comm_len; char prefix[16]; }`.
fn filter_value(cfg: &CollectorConfig) -> Result<Vec<u8>, EbpfError> {
    if cfg.tgids.len() > MAX_TGIDS {
        return Err(EbpfError::Config(format!(
            "at most {MAX_TGIDS} server processes can be traced, got {}",
            cfg.tgids.len()
        )));
    }
    let mut v = Vec::with_capacity(4 * (4 + MAX_TGIDS) + 16);
    v.extend_from_slice(&(cfg.tgids.len() as u32).to_ne_bytes());
    for k in 0..MAX_TGIDS {
        v.extend_from_slice(&cfg.tgids.get(k).copied().unwrap_or(0).to_ne_bytes());
    }
    v.extend_from_slice(&u32::from(!cfg.tids.is_empty()).to_ne_bytes());
    let (tgid, prefix) = match &cfg.thread_prefix {
        Some((t, p)) => (*t, p.as_bytes()),
        None => (0, &[][..]),
    };
    if prefix.len() > 16 || (cfg.thread_prefix.is_some() && prefix.is_empty()) {
        return Err(EbpfError::Config(
            "a thread name prefix must be 1 to 16 bytes".into(),
        ));
    }
    v.extend_from_slice(&tgid.to_ne_bytes());
    v.extend_from_slice(&(prefix.len() as u32).to_ne_bytes());
    let mut p = [0u8; 16];
    p[..prefix.len()].copy_from_slice(prefix);
    v.extend_from_slice(&p);
    Ok(v)
}

/// libbpf's warnings, kept for the error message of a failed load.
static LIBBPF_LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub(crate) fn keep_log(_level: PrintLevel, msg: String) {
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        if log.len() >= 20 {
            log.remove(0);
        }
        log.push(msg.trim_end().to_string());
    }
}

/// Opens an embedded BPF object (libbpf's messages kept for errors) with only the programs
/// `keep` accepts by name set to load (a tracepoint this kernel lacks, say); returns it and
/// the names of the programs left out.
pub(crate) fn open_object(
    bytes: &'static [u8],
    keep: impl Fn(&str) -> bool,
) -> Result<(libbpf_rs::OpenObject, Vec<String>), EbpfError> {
    libbpf_rs::set_print(Some((PrintLevel::Warn, keep_log)));
    let mut open = ObjectBuilder::default()
        .open_memory(bytes)
        .map_err(|e| load_error("opening the BPF object", e))?;
    let mut left_out = Vec::new();
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        if !keep(&name) {
            prog.set_autoload(false);
            left_out.push(name);
        }
    }
    Ok((open, left_out))
}

/// Sets `key` to `value` in the loaded object's map `name`.
pub(crate) fn update_map(
    obj: &libbpf_rs::Object,
    name: &str,
    key: &[u8],
    value: &[u8],
) -> Result<(), EbpfError> {
    let map = obj
        .maps()
        .find(|m| m.name() == name)
        .ok_or_else(|| EbpfError::Load(format!("the BPF object has no map {name}")))?;
    map.update(key, value, MapFlags::ANY)
        .map_err(|e| load_error(&format!("filling map {name}"), e))
}

/// Slot `slot` of the loaded object's per-CPU array of u64 counters `name`, summed over the
/// CPUs (0 when the map or the slot cannot be read).
pub(crate) fn percpu_sum(obj: &libbpf_rs::Object, name: &str, slot: u32) -> u64 {
    let Some(map) = obj.maps().find(|m| m.name() == name) else {
        return 0;
    };
    match map.lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY) {
        Ok(Some(per_cpu)) => per_cpu
            .iter()
            .filter_map(|v| v.get(..8))
            .map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                u64::from_ne_bytes(a)
            })
            .sum(),
        _ => 0,
    }
}

/// Attaches every program the object loaded whose name `pick` accepts; the links detach
/// them when dropped.
pub(crate) fn attach_loaded(
    obj: &libbpf_rs::Object,
    pick: impl Fn(&str) -> bool,
) -> Result<Vec<libbpf_rs::Link>, EbpfError> {
    let mut links = Vec::new();
    attach_each(obj, pick, &mut links, || {})?;
    Ok(links)
}

/// Attaches the loaded programs `pick` accepts into `links` one by one, calling `between`
/// after each; on an error the links made so far stay in `links`.
fn attach_each(
    obj: &libbpf_rs::Object,
    pick: impl Fn(&str) -> bool,
    links: &mut Vec<libbpf_rs::Link>,
    between: impl Fn(),
) -> Result<(), EbpfError> {
    for prog in obj
        .progs_mut()
        .filter(|p| p.autoload() && pick(&p.name().to_string_lossy()))
    {
        let name = prog.name().to_string_lossy().into_owned();
        let link = prog
            .attach()
            .map_err(|e| load_error(&format!("attaching {name}"), e))?;
        links.push(link);
        between();
    }
    Ok(())
}

pub(crate) fn load_error(what: &str, e: libbpf_rs::Error) -> EbpfError {
    let log = LIBBPF_LOG
        .lock()
        .map(|l| l.iter().rev().take(3).cloned().collect::<Vec<_>>())
        .unwrap_or_default();
    EbpfError::Load(format!(
        "{what}: {e}{}",
        if log.is_empty() {
            String::new()
        } else {
            format!(" (libbpf: {})", log.join(" | "))
        }
    ))
}

/// The loaded programs and the links that attach them, shared with the sampling thread.
pub(crate) struct Programs {
    // Field order is drop order: the links go before the object they belong to.
    links: Mutex<Vec<libbpf_rs::Link>>,
    /// The link of the program that stays attached outside the windows (forks: a server's
    /// new process must be in the filter when the next window opens).
    fork: Option<libbpf_rs::Link>,
    /// See [`Programs::pause`].
    piece_pause: std::time::Duration,
    /// Whether the kernel's BPF run-time statistics are on.
    measured: bool,
    obj: libbpf_rs::Object,
}

impl crate::sampling::Toggle for Programs {
    fn attach(&self) -> Result<u64, EbpfError> {
        Programs::attach(self)
    }

    fn detach(&self) {
        Programs::detach(self)
    }

    fn program_ns(&self) -> u64 {
        kernel_cost(&self.obj, self.measured).run_time_ns
    }
}

/// The program that follows the server's forks (attached for the collector's whole life).
const FORK_PROGRAM: &str = "on_fork";

impl Programs {
    /// Attaches every loaded program but the fork follower (already attached) after
    /// forgetting every thread's state: a call entered while the programs were detached
    /// must not return with the state of one before. Returns CLOCK_MONOTONIC after the last
    /// attach: every event from then on is seen.
    fn attach(&self) -> Result<u64, EbpfError> {
        let mut links = self
            .links
            .lock()
            .map_err(|_| EbpfError::Read("the programs' lock was poisoned".into()))?;
        links.clear();
        if let Some(map) = self.obj.maps().find(|m| m.name() == "threads") {
            let keys: Vec<Vec<u8>> = map.keys().collect();
            for k in keys {
                // A key gone meanwhile (the thread exited) is what we wanted anyway.
                let _ = map.delete(&k);
            }
        }
        attach_each(
            &self.obj,
            |name| name != FORK_PROGRAM,
            &mut links,
            || self.pause(),
        )?;
        Ok(host::clock::mono_now_ns())
    }

    /// Between two programs' attaches or detaches when sampling: each takes ~0.2 ms of CPU
    /// in the kernel, unpreempted (the tracepoint's jump labels are patched with IPIs to every
    /// CPU), so all of them at once stalled the server's CPU for 1.5 ms; one at a time with a
    /// pause between, the server runs in the gaps.
    fn pause(&self) {
        if !self.piece_pause.is_zero() {
            std::thread::sleep(self.piece_pause);
        }
    }

    /// Detaches the programs (the fork follower stays), one at a time.
    fn detach(&self) {
        if let Ok(mut links) = self.links.lock() {
            while let Some(link) = links.pop() {
                drop(link);
                self.pause();
            }
        }
    }

    fn attached(&self) -> usize {
        self.links.lock().map(|l| l.len()).unwrap_or(0) + usize::from(self.fork.is_some())
    }

    fn loaded(&self) -> usize {
        self.obj.progs().filter(|p| p.autoload()).count()
    }
}

/// The loaded and attached programs of one run; detached when dropped.
pub struct Collector {
    // Field order is drop order: the sampling thread stops first, the ring goes before the
    // object it reads.
    sampler: Option<crate::sampling::Sampler>,
    ring: libbpf_rs::RingBuffer<'static>,
    programs: Arc<Programs>,
    received: Arc<Mutex<Vec<Event>>>,
    /// Keeps the kernel's BPF run-time statistics on while it is open.
    stats: Option<OwnedFd>,
    /// Records that did not parse (a kernel/user layout mismatch would show here).
    malformed: Arc<Mutex<u64>>,
    started: Instant,
    /// Records dropped because no window saw them whole.
    outside: u64,
    /// Keeps the kernel's receive stamping on (None: the socket could not ask for it).
    _stamping: Option<std::net::UdpSocket>,
}

/// A socket that asked for software receive stamps: while it is open the kernel stamps
/// every received packet.
fn stamping_socket() -> Option<std::net::UdpSocket> {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
    host::tstamp::enable(s.as_raw_fd(), true, false).ok()?;
    Some(s)
}

impl Collector {
    /// Loads, configures and attaches the programs. Check [`crate::support::check`] first
    /// for the reason a host cannot.
    pub fn start(cfg: &CollectorConfig) -> Result<Collector, EbpfError> {
        if cfg.tgids.is_empty() && cfg.tids.is_empty() && cfg.thread_prefix.is_none() {
            return Err(EbpfError::Config(
                "no server process or thread to trace".into(),
            ));
        }
        let ring = cfg
            .ring_bytes
            .clamp(MIN_RING_BYTES, MAX_RING_BYTES)
            .next_power_of_two();
        // A call whose tracepoint this kernel lacks (an optional one) is not loaded; nor is
        // `epoll_pwait2` unless a server thread waits in it now. memcached, nginx, Redis and
        // the built-in server wait in `epoll_wait`; the one caller of `epoll_pwait2` here is
        // tailscope's own generator, whose spin between sends would run both programs on
        // every poll (a third of the programs' runs per request) to be filtered out.
        let pwait2 = crate::support::server_waits_in(
            &crate::support::root(),
            &cfg.tgids,
            &cfg.tids,
            cfg.thread_prefix.as_ref(),
            crate::support::NR_EPOLL_PWAIT2,
        );
        // Sampled, the calls are watched on the raw pair (detached in well under a
        // millisecond); attached throughout, on their own tracepoints (cheaper per call).
        let sampled = cfg.sampling.is_some();
        if sampled && !crate::support::has_tracepoint("raw_syscalls", "sys_enter") {
            return Err(EbpfError::Config(
                "sampled stages need the raw_syscalls:sys_enter and sys_exit tracepoints".into(),
            ));
        }
        let (mut open, _) = open_object(embedded_object!("stages.bpf.o"), |name| {
            if name.starts_with("raw_sys_") {
                return sampled;
            }
            let call = name
                .strip_prefix("enter_")
                .or_else(|| name.strip_prefix("exit_"));
            let Some(call) = call else {
                return true;
            };
            if sampled {
                return false;
            }
            let side = if name.starts_with("enter_") {
                "enter"
            } else {
                "exit"
            };
            crate::support::has_tracepoint("syscalls", &format!("sys_{side}_{call}"))
                && (call != "epoll_pwait2" || pwait2)
        })?;
        for mut m in open.maps_mut() {
            if m.name() == "events" {
                let n = u32::try_from(ring).unwrap_or(u32::MAX);
                m.set_max_entries(n)
                    .map_err(|e| load_error("sizing the ring buffer", e))?;
            }
        }
        let obj = open
            .load()
            .map_err(|e| load_error("loading the BPF programs", e))?;
        let update = |name: &str, key: &[u8], value: &[u8]| update_map(&obj, name, key, value);
        for t in &cfg.tids {
            update("tids", &t.to_ne_bytes(), &[1])?;
        }
        for p in &cfg.ports {
            update("ports", &u32::from(*p).to_ne_bytes(), &[1])?;
        }
        update("filter", &0u32.to_ne_bytes(), &filter_value(cfg)?)?;
        if sampled {
            for (nr, class) in call_classes(pwait2) {
                update("calls", &nr.to_ne_bytes(), &[class])?;
            }
        }
        let received = Arc::new(Mutex::new(Vec::new()));
        let malformed = Arc::new(Mutex::new(0u64));
        let ring = {
            let events = obj
                .maps()
                .find(|m| m.name() == "events")
                .ok_or_else(|| EbpfError::Load("the BPF object has no ring buffer".into()))?;
            let mut b = RingBufferBuilder::new();
            let (sink, bad) = (Arc::clone(&received), Arc::clone(&malformed));
            b.add(&events, move |data: &[u8]| {
                match Event::parse(data) {
                    Some(e) => {
                        if let Ok(mut v) = sink.lock() {
                            v.push(e);
                        }
                    }
                    None => {
                        if let Ok(mut n) = bad.lock() {
                            *n += 1;
                        }
                    }
                }
                0
            })
            .map_err(|e| load_error("opening the ring buffer", e))?;
            b.build()
                .map_err(|e| load_error("opening the ring buffer", e))?
        };
        let stats = enable_stats();
        let fork = attach_loaded(&obj, |name| name == FORK_PROGRAM)?.pop();
        let programs = Arc::new(Programs {
            links: Mutex::new(Vec::new()),
            fork,
            piece_pause: if sampled {
                std::time::Duration::from_micros(200)
            } else {
                std::time::Duration::ZERO
            },
            measured: stats.is_some(),
            obj,
        });
        let started = host::clock::mono_now_ns();
        // Sampled with a first window later on, the programs wait for it detached.
        let attached = match &cfg.sampling {
            Some(s) if !s.first_after.is_zero() => None,
            _ => Some(programs.attach()?),
        };
        let sampler = cfg
            .sampling
            .clone()
            .map(|s| {
                crate::sampling::Sampler::start(
                    s,
                    Arc::clone(&programs) as Arc<dyn crate::sampling::Toggle>,
                    started,
                    attached,
                    stats.is_some(),
                )
            })
            .transpose()?;
        Ok(Collector {
            sampler,
            ring,
            programs,
            received,
            stats,
            malformed,
            started: Instant::now(),
            outside: 0,
            _stamping: stamping_socket(),
        })
    }

    /// Moves every record in the ring buffer to `out` (in the order the kernel wrote them),
    /// each arrival's receive stamp mapped to CLOCK_MONOTONIC ([`Event::rx`]).
    pub fn drain(&mut self, out: &mut Vec<Event>) -> Result<usize, EbpfError> {
        self.ring
            .consume()
            .map_err(|e| EbpfError::Read(format!("draining the ring buffer: {e}")))?;
        let mut got = self
            .received
            .lock()
            .map_err(|_| EbpfError::Read("ring buffer callback panicked".into()))?;
        let mut kept = Vec::new();
        if let Some(s) = &self.sampler {
            // Only what a window saw whole: the programs attach and detach one by one, so
            // records from around the edges may lack their other halves. Events after the
            // start of an attach whose window is not listed yet wait for the next drain.
            let (windows, attaching) = s.windows_and_attaching();
            let (inside, rest): (Vec<Event>, Vec<Event>) = std::mem::take(&mut *got)
                .into_iter()
                .partition(|e| crate::sampling::inside(&windows, e.ts));
            let rest_len = rest.len();
            kept = rest
                .into_iter()
                .filter(|e| attaching.is_some_and(|t| e.ts >= t))
                .collect();
            self.outside += (rest_len - kept.len()) as u64;
            *got = inside;
        }
        let n = got.len();
        let offset = host::tstamp::ClockMap::sample().offset_ns();
        for e in got.iter_mut() {
            e.map_rx(offset);
        }
        out.append(&mut got);
        *got = kept;
        Ok(n)
    }

    /// The sampling windows so far (empty without sampling: attached throughout).
    pub fn windows(&self) -> Vec<crate::sampling::Window> {
        self.sampler
            .as_ref()
            .map(|s| s.windows())
            .unwrap_or_default()
    }

    /// Forgets windows that closed before `horizon` (CLOCK_MONOTONIC ns).
    pub fn forget_windows_before(&self, horizon: u64) {
        if let Some(s) = &self.sampler {
            s.forget_before(horizon);
        }
    }

    /// What the sampling did so far (None without sampling).
    pub fn sampling(&self) -> Option<crate::sampling::SamplingReport> {
        self.sampler.as_ref().map(|s| s.report(self.outside))
    }

    /// The kernel side's counters, summed over CPUs.
    pub fn counters(&self) -> Counters {
        Counters {
            events: percpu_sum(&self.programs.obj, "counters", 0),
            dropped: percpu_sum(&self.programs.obj, "counters", 1),
        }
    }

    /// The programs' runs and time in the kernel so far.
    pub fn kernel_cost(&self) -> KernelCost {
        kernel_cost(&self.programs.obj, self.stats.is_some())
    }

    /// Records that did not parse.
    pub fn malformed(&self) -> u64 {
        self.malformed.lock().map(|n| *n).unwrap_or(0)
    }

    /// Programs loaded (attached in each window, or throughout).
    pub fn loaded(&self) -> usize {
        self.programs.obj.progs().filter(|p| p.autoload()).count()
    }

    /// Programs loaded: attached throughout, or, sampled, in the windows (the fork follower
    /// throughout).
    pub fn programs(&self) -> usize {
        self.programs.loaded()
    }

    /// Programs attached now (sampled, between windows only the fork follower).
    pub fn attached(&self) -> usize {
        self.programs.attached()
    }

    /// How long the programs have been attached.
    pub fn age(&self) -> std::time::Duration {
        self.started.elapsed()
    }
}

/// The run-time statistics of `obj`'s programs (`measured`: whether BPF_ENABLE_STATS is on).
pub(crate) fn kernel_cost(obj: &libbpf_rs::Object, measured: bool) -> KernelCost {
    let mut cost = KernelCost {
        measured,
        ..KernelCost::default()
    };
    for prog in obj.progs().filter(|p| p.autoload()) {
        let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of_val(&info) as u32;
        let fd = prog.as_fd();
        // SAFETY: `info` is a valid, writable bpf_prog_info of `len` bytes, and `fd` a
        // live program descriptor borrowed for the call.
        let rc = unsafe {
            libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len)
        };
        if rc == 0 {
            cost.runs += info.run_cnt;
            cost.run_time_ns += info.run_time_ns;
            cost.misses += info.recursion_misses;
            cost.programs.push((
                prog.name().to_string_lossy().into_owned(),
                info.run_cnt,
                info.run_time_ns,
            ));
        }
    }
    cost
}

/// Turns the kernel's BPF run-time statistics on for as long as the descriptor is open.
pub(crate) fn enable_stats() -> Option<OwnedFd> {
    // SAFETY: bpf_enable_stats takes a plain enum value and returns a new descriptor (or a
    // negative error); the descriptor is owned by nobody else.
    unsafe {
        let fd = libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME);
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
    }
}
