//! # ebpf — per-request stages of unmodified servers, from kernel tracepoints
//!
//! In tailscope's data flow this crate sits beside the load generator: while a run goes on
//! it watches the *server* — memcached, nginx, Redis as Debian ships them, or the built-in
//! server's threads — from inside the kernel, and afterwards gives each client request the
//! server-side stage stamps T1..T6 that Tales of the Tail (§3.3.1) got from a patched kernel
//! and patched servers, and the ThunderX study from SystemTap. `lab` joins them into the
//! request records, where the stage table and the "why" read them as they read the built-in
//! server's own stamps.
//!
//! ```text
//!  server threads ─ syscalls, sched, sock/skb/net tracepoints ─► BPF programs ─► ring buffer
//!                                                       (bounded, no wake-ups)      │ drain
//!  load records (per chunk) ─► Joiner (by connection, in send order) ◄── Event ─────┘
//!                                 └─► T1..T6 per request
//! ```
//!
//! ## What is traced (tracepoints only: no kprobes, no patches)
//!
//! | tracepoint | for the server's threads (tgid or tid filter) |
//! |---|---|
//! | `syscalls:sys_enter_CALL` / `sys_exit_CALL`, one program per call, when attached throughout; `raw_syscalls:sys_enter` / `sys_exit` (the call's class from a map of numbers) when sampled in windows ([`sampling`]: they run on every system call of every process, but detach in ~2 ms where the per-call ones take 50–90 ms each) | entry and return (and, for UDP reads, the datagram's source port and first bytes from the caller's buffers) of `epoll_wait`/`epoll_pwait[2]` (`epoll_pwait2` only when a server thread waits in it as the run starts: otherwise its one caller is tailscope's generator), `read`/`readv`/`recvfrom`/`recvmsg`/`recvmmsg`, `write`/`writev`/`sendto`/`sendmsg`/`sendmmsg`/`sendfile64` (memcached: `read` + `sendmsg`, UDP `recvfrom` + `sendmsg`; nginx: `recvfrom` + `writev` + `sendfile`; Redis: `read` + `write`, checked with strace) |
//! | `sock:sock_recv_length` / `sock_send_length` | which socket a read or write used, its bytes, and (TCP) the stream position after it (`copied_seq`, `write_seq`) |
//! | `sock:sk_data_ready` | data reached a socket on the server's port: the protocol stack's end (Tales' T2); the receive stamp of the packet just queued (`skb->tstamp` of the receive queue's tail: the stack's entry, T1); TCP: `rcv_nxt`; UDP: the queued datagram's client port and request id |
//! | `net:net_dev_queue` | a write's packet handed to the device (T6; the software transmit stamp's point) |
//! | `sched:sched_wakeup` / `sched_switch` | when a server thread was woken and got a CPU (run-queue wait) |
//! | `sched:sched_process_fork` | workers forked by a traced server (nginx) are traced too |
//!
//! Timestamps are `bpf_ktime_get_ns`: CLOCK_MONOTONIC, the clock of tailscope's records (a
//! record's time + the run's `start_mono_ns` is absolute MONOTONIC). Records (80 bytes) go
//! through one ring buffer of bounded size, submitted without waking the consumer; the
//! consumer drains it when it needs the events ([`Collector::drain`]). Memory does not grow
//! with a run: the ring buffer is fixed, and the [`Joiner`] holds only events not yet older
//! than every request still to come, under a cap.
//!
//! How events become per-request T1..T6, including pipelined requests on one read, is in
//! [`join`]'s documentation. The mapping onto the built-in server's stamps:
//!
//! | stamp | from eBPF | built-in server | Tales |
//! |---|---|---|---|
//! | T1 | the receive stamp of the packet queued at `sk_data_ready` (`skb->tstamp`, the stack's entry; CLOCK_REALTIME, mapped to monotonic at each drain); when the packet carried none, the data-ready instant, and the stack is then not split from the wake-up (`join.stack_entry_missing`) | the same software stamp, from the socket (or the NIC's hardware stamp) | T1 |
//! | stack end (`Matched::stack`, the records' `stack_ns`) | `sk_data_ready`: the request's data queued on the socket, after TCP/UDP processing | — (not visible from user space) | T2 |
//! | T2 | the reading thread's return from `epoll_wait`; the stack end if it was already awake | the same, in user space | T3 |
//! | T3 | return of the read that consumed the request | after read and decode | T4 |
//! | T4 | = T5: the application's time is T3→T5 | after the work | — |
//! | T5 | entry of the reply's first write | just before the write | T5 |
//! | T6 | the reply's last packet handed to the device (else the write's return) | the software transmit stamp | T6 |
//!
//! The kernel stamps received packets only while some socket on the host asked for receive
//! timestamps: the [`Collector`] holds one such socket while it runs. A stamp is used only
//! within its request's send → data-ready span (give or take [`join::RX_SLACK_NS`] for the
//! clock mapping, clamped into it); the eBPF T1 is always the software stamp (a NIC hardware
//! stamp lives in `skb_shared_info` on the NIC's clock, which this path does not read).
//!
//! ## Why libbpf-rs with CO-RE rather than aya
//!
//! * **The kernel side is C, compiled once, run anywhere with BTF.** The programs read a few
//!   kernel fields (`skc_num`, `rcv_nxt`, `copied_seq`, `sk_buff.head`…). With CO-RE the
//!   object carries the accesses' names and libbpf relocates them against the running
//!   kernel's `/sys/kernel/btf/vmlinux` at load time; the object is built from a handful of
//!   declarations marked `preserve_access_index`, with no `vmlinux.h` and nothing of the
//!   build host's kernel. libbpf *is* the reference implementation of these relocations;
//!   aya re-implements them in Rust and has lagged on some relocation kinds.
//! * **The toolchain is Debian's.** clang 14 compiles the C program (`build.rs`); aya's
//!   Rust-side BPF programs need a nightly toolchain and `bpf-linker`, which this project's
//!   machines cannot fetch. With aya we would still write the kernel half in C and gain only
//!   a pure-Rust loader.
//! * **Cost:** `libbpf-sys` builds libbpf from its bundled sources and links libelf and zlib
//!   (`libelf-dev`, `zlib1g-dev`, `pkg-config` — `scripts/test.sh` installs them with
//!   clang). That is the price; aya would need none of them.
//!
//! ## The noise contributors' timer (a second, independent program set)
//!
//! [`contrib::ContribTimer`] (`bpf/contrib.bpf.c`) serves `tailscope noise`: it times each
//! hard IRQ handler, softirq, x86 system vector and other task's slice on the probed CPUs
//! into fixed duration histograms ([`hist`]), read once at the end, so that contributors can
//! be classed by their measured p99.9. It shares only the loader's helpers with the stage
//! collector; [`support::check_contrib`] checks its tracepoints (`irq:*`, `sched_switch`).
//!
//! ## The hard-IRQ counter (a third program set)
//!
//! [`irqcount::HardIrqCounter`] (`bpf/irqcount.bpf.c`) counts hard interrupts per CPU as
//! /proc/interrupts does, for the attribution sampler, which reads the counts from memory
//! shared with the kernel in every sample instead of formatting that file (see the module for
//! what it cannot see).
//!
//! ## Unsupported hosts
//!
//! [`support::check`] names the first missing piece in one line — not root, no BTF, tracefs
//! not mounted (it mounts it at `/sys/kernel/tracing` when root), a missing tracepoint
//! (`sock:sock_*_length` arrived in Linux 6.3) — and the caller runs without eBPF stages.

/// A BPF object the build script compiled (`OUT_DIR/NAME`), embedded aligned for libbpf's
/// ELF parser: `&'static [u8]`.
macro_rules! embedded_object {
    ($name:literal) => {{
        #[repr(C, align(8))]
        struct Aligned<T: ?Sized>(T);
        static OBJECT: &Aligned<[u8]> =
            &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/", $name)));
        &OBJECT.0
    }};
}

pub mod collector;
pub mod contrib;
pub mod event;
pub mod hist;
pub mod irqcount;
pub mod join;
pub mod sampling;
pub mod support;

pub use collector::{Collector, CollectorConfig, Counters, KernelCost};
pub use event::{Event, Kind, Proto};
pub use join::{JoinStats, Joiner, Matched, Request};
pub use sampling::{Sampling, SamplingReport, Window};
pub use support::Unsupported;

/// What can go wrong while collecting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EbpfError {
    #[error("eBPF stages unsupported here: {0}")]
    Unsupported(Unsupported),
    #[error("eBPF collector: {0}")]
    Config(String),
    #[error("eBPF collector: {0}")]
    Load(String),
    #[error("eBPF collector: {0}")]
    Read(String),
}
