//! [`HardIrqCounter`]: per-CPU hard-interrupt counts for the attribution sampler, read from
//! a memory-mapped BPF array with plain loads (no system call; well under 1 µs) instead of
//! /proc/interrupts (60–90 µs on the development VM, most of it the kernel's walk over every
//! possible IRQ number). A `bpf(BPF_MAP_LOOKUP_ELEM)` of a per-CPU array would cost 1.5–2 µs
//! in a tight loop and 2–4 µs more per sample in its context, measured.
//!
//! The attribution sampler's "hard interrupts" of a CPU are the sum of the rows of
//! /proc/interrupts that have a count per CPU: the numbered device lines and the
//! architecture's rows (x86: NMI, LOC, SPU, PMI, IWI, RTR, RES, CAL, TRM, THR, DFR, MCE, MCP,
//! HYP, HRE, HVS, PIN, NPI, PIW, PMN, those the kernel has; ERR and MIS have one number and
//! are not summed), less TLB: a TLB shootdown arrives as a function-call IPI, already counted
//! under CAL, and a CPU also counts one when it runs a queued flush on its way out of idle,
//! with no interrupt at all. `bpf/irqcount.bpf.c` adds one to a per-CPU array on the same
//! events, where the kernel counts them ([`ROWS`]):
//!
//! | row | event |
//! |---|---|
//! | device lines | `irq:irq_handler_entry` of a line's last handler (a shared line counts once) |
//! | LOC, RES, IWI, SPU, TRM, THR, DFR, PLT | `irq_vectors:NAME_entry` of the vector |
//! | CAL | `irq_vectors:call_function_entry` and `call_function_single_entry` |
//!
//! Not seen ([`UNSEEN`]): NMIs and performance-monitoring interrupts (their handlers are
//! `noinstr`: no tracepoint, no fentry), APIC ICR read retries (not interrupts), the Xen /
//! Hyper-V callback and KVM posted-interrupt vectors, machine-check polls, and a device
//! interrupt on a line with no handler (the kernel counts it and calls it spurious). On the
//! development VM these grow by a few a day; a host with an NMI watchdog adds one NMI per CPU
//! every 10 s, one sampled by `perf record` many PMIs. The kernel's own counters
//! (`kstat.irqs_sum` and `irq_stat`, read per CPU by a syscall program) would see every row
//! with no program on the interrupt path, but a program finds per-CPU variables only through
//! kallsyms' data symbols (CONFIG_KALLSYMS_ALL), which the development VM's kernel lacks.
//!
//! Against /proc/interrupts on the development VM (`tests/irqcount.rs`), every row's growth
//! agrees to the interrupts in flight at the readings in eight or nine runs in ten; in the
//! others one row (LOC, RES or a device line) grows in the file by 1–5 % more than here.
//! The programs ran exactly as often as they counted and no run was skipped (`misses` 0), so
//! the tracepoint did not fire for those interrupts; why, on this kernel, is not known.
//!
//! The cost falls on every interrupt of every CPU, one program run each.
//! [`HardIrqCounter::cost`] measures it with the kernel's BPF statistics: on the development
//! VM 100–600 ns a run (the local timer's are the slowest: they start on cold caches).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::ptr::NonNull;

use libbpf_rs::MapCore;

use crate::collector::{
    attach_loaded, enable_stats, kernel_cost, load_error, open_object, KernelCost,
};
use crate::EbpfError;

/// Slot 0 of the counts: every row counted.
pub const TOTAL: u32 = 0;

/// The slots of the counts other than [`TOTAL`] and the /proc/interrupts rows each counts
/// ("" for the numbered device lines), as numbered in `bpf/irqcount.bpf.c`.
pub const ROWS: [(u32, &str); 10] = [
    (1, ""),
    (2, "LOC"),
    (3, "RES"),
    (4, "CAL"),
    (5, "IWI"),
    (6, "SPU"),
    (7, "TRM"),
    (8, "THR"),
    (9, "DFR"),
    (10, "PLT"),
];

/// Per-CPU rows of /proc/interrupts the programs cannot see (see the module doc).
pub const UNSEEN: [&str; 12] = [
    "NMI", "PMI", "RTR", "HYP", "HRE", "HVS", "PIN", "NPI", "PIW", "PMN", "MCE", "MCP",
];

/// Words per CPU in the array (`NWORDS` in the program): 128 bytes, two cache lines.
const NWORDS: usize = 16;

/// The per-CPU row of /proc/interrupts that is not interrupts (see the module doc).
pub const NOT_INTERRUPTS: &str = "TLB";

/// The array of counts, mapped read-only: `NWORDS` words per possible CPU.
struct Mapping {
    ptr: NonNull<u64>,
    len: usize,
}

impl Mapping {
    fn new(fd: &OwnedFd, words: usize) -> Result<Mapping, EbpfError> {
        // SAFETY: sysconf only reads a configuration value.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = (words * 8).div_ceil(page) * page;
        // SAFETY: a shared read-only mapping of a BPF array created with BPF_F_MMAPABLE, of
        // the size the kernel gives it (its values, rounded up to pages); the descriptor is
        // open for the call, and the mapping outlives it until `drop` unmaps it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(EbpfError::Load(format!(
                "mapping the counts: {}",
                std::io::Error::last_os_error()
            )));
        }
        let ptr = NonNull::new(ptr.cast::<u64>())
            .ok_or_else(|| EbpfError::Load("mapping the counts: a null address".into()))?;
        Ok(Mapping { ptr, len })
    }

    /// Word `i` (below the possible CPUs × `NWORDS`), as the kernel last wrote it.
    fn word(&self, i: usize) -> u64 {
        debug_assert!(i * 8 < self.len);
        // SAFETY: `i` is within the mapping (the callers index below possible × NWORDS words,
        // which `new` mapped); an aligned 8-byte load is never torn, and volatile because the
        // kernel writes the memory behind the compiler's back.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(i)) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the address and length are those `mmap` returned; nothing borrows them.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: the mapping is plain shared memory, only read through `&self`/`&mut self`; moving
// it to another thread changes nothing about who may read or unmap it.
unsafe impl Send for Mapping {}

/// The loaded and attached programs and the mapped counts; detached when dropped.
pub struct HardIrqCounter {
    // Field order is drop order: unmap, detach, then close the object.
    counts: Mapping,
    _links: Vec<libbpf_rs::Link>,
    obj: libbpf_rs::Object,
    stats: Option<OwnedFd>,
    possible: usize,
    missing: Vec<String>,
    reads: u64,
}

impl std::fmt::Debug for HardIrqCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HardIrqCounter")
            .field("possible", &self.possible)
            .field("missing", &self.missing)
            .finish_non_exhaustive()
    }
}

/// Whether the object's program `name` has its attach point here (None: it needs none of
/// those checked).
fn attach_point_present(name: &str) -> bool {
    if let Some(stem) = name.strip_prefix("vec_") {
        return crate::support::has_tracepoint("irq_vectors", &format!("{stem}_entry"));
    }
    if name == "irq_entry" {
        return crate::support::has_tracepoint("irq", "irq_handler_entry");
    }
    true
}

fn load(possible: usize) -> Result<(libbpf_rs::Object, Vec<String>), EbpfError> {
    let (mut open, missing) =
        open_object(embedded_object!("irqcount.bpf.o"), attach_point_present)?;
    let entries = u32::try_from(possible)
        .map_err(|_| EbpfError::Config(format!("{possible} possible CPUs")))?;
    for mut map in open.maps_mut().filter(|m| m.name() == "counts") {
        map.set_max_entries(entries)
            .map_err(|e| load_error("sizing the counts", e))?;
    }
    let obj = open
        .load()
        .map_err(|e| load_error("loading the hard-IRQ counter", e))?;
    Ok((obj, missing))
}

impl HardIrqCounter {
    /// Loads and attaches the programs (root, or CAP_BPF with CAP_PERFMON, and BTF). A
    /// tracepoint the kernel lacks is left out ([`HardIrqCounter::missing`]).
    ///
    /// The kernel's BPF run-time statistics are turned on for as long as it is open, so that
    /// [`cost`](HardIrqCounter::cost) can say what the programs cost; they stay on for every
    /// BPF program of the host meanwhile (two clock reads a run). [`open_unmeasured`]
    /// leaves them as they are.
    ///
    /// [`open_unmeasured`]: HardIrqCounter::open_unmeasured
    pub fn open() -> Result<HardIrqCounter, EbpfError> {
        Self::open_with(true)
    }

    /// [`open`](HardIrqCounter::open) without turning the BPF statistics on (the cost is
    /// then measured only while something else has them on).
    pub fn open_unmeasured() -> Result<HardIrqCounter, EbpfError> {
        Self::open_with(false)
    }

    fn open_with(measure: bool) -> Result<HardIrqCounter, EbpfError> {
        crate::support::check_irqcount().map_err(EbpfError::Unsupported)?;
        let possible = libbpf_rs::num_possible_cpus()
            .map_err(|e| EbpfError::Load(format!("counting the possible CPUs: {e}")))?;
        let (obj, missing) = load(possible)?;
        let map_fd = {
            let map = obj
                .maps()
                .find(|m| m.name() == "counts")
                .ok_or_else(|| EbpfError::Load("the BPF object has no map counts".into()))?;
            map.as_fd()
                .try_clone_to_owned()
                .map_err(|e| EbpfError::Load(format!("duplicating the map descriptor: {e}")))?
        };
        let counts = Mapping::new(&map_fd, possible * NWORDS)?;
        let stats = if measure { enable_stats() } else { None };
        let links = attach_loaded(&obj, |_| true)?;
        Ok(HardIrqCounter {
            counts,
            _links: links,
            obj,
            stats,
            possible,
            missing,
            reads: 0,
        })
    }

    /// The possible CPUs (the ids the counts are indexed by are below this).
    pub fn possible_cpus(&self) -> usize {
        self.possible
    }

    /// The programs left out for want of their attach point, by name (`vec_<vector>`,
    /// `irq_entry`).
    pub fn missing(&self) -> &[String] {
        &self.missing
    }

    /// The total count of every CPU since [`open`](HardIrqCounter::open), indexed by CPU id,
    /// into `per_cpu` (as many as it holds, up to the possible CPUs; the rest is zeroed).
    pub fn read(&mut self, per_cpu: &mut [u64]) -> Result<(), EbpfError> {
        self.read_slot(TOTAL, per_cpu)
    }

    /// One slot's counts (one of [`ROWS`], or [`TOTAL`]), as [`read`](HardIrqCounter::read).
    pub fn read_slot(&mut self, slot: u32, per_cpu: &mut [u64]) -> Result<(), EbpfError> {
        let slot = slot as usize;
        if slot > ROWS.len() {
            return Err(EbpfError::Read(format!("no slot {slot}")));
        }
        let n = per_cpu.len().min(self.possible);
        for (cpu, out) in per_cpu[..n].iter_mut().enumerate() {
            *out = self.counts.word(cpu * NWORDS + slot);
        }
        per_cpu[n..].fill(0);
        self.reads += 1;
        Ok(())
    }

    /// The programs' own runs and time in the kernel since they were attached (`measured`
    /// is false where the kernel's BPF statistics could not be turned on).
    pub fn cost(&self) -> KernelCost {
        kernel_cost(&self.obj, self.stats.is_some())
    }

    /// How many times the counts were read.
    pub fn reads(&self) -> u64 {
        self.reads
    }
}
