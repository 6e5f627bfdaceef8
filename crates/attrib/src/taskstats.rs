//! A thread's context switches from the kernel's taskstats interface (generic netlink,
//! `TASKSTATS_CMD_GET` by thread id), in place of formatting its whole /proc status.
//!
//! One request and one reply: 5–6 µs on the development VM against 8–13 µs for a status, and
//! the reply carries the thread's timeslices and run-queue wait too, which [`Probe`] checks
//! against the schedstat it has just read (a thread id reused by another thread would show
//! fewer). The kernel answers only a caller with CAP_NET_ADMIN and only with CONFIG_TASKSTATS;
//! without either, [`Taskstats::open`] or the first query fails and the probe reads statuses.
//! It names threads in the caller's pid namespace, so the probe uses it only on the host's own
//! `/proc`, never on a fixture tree.
//!
//! [`Probe`]: crate::Probe

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NLMSG_HDR: usize = 16;
const GENL_HDR: usize = 4;
const NLA_HDR: usize = 4;
const NLMSG_ERROR: u16 = 2;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_CMD_ATTR_PID: u16 = 1;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_PID: u16 = 4;
/// The flag bits of an attribute's type (nested, network byte order).
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Offsets in `struct taskstats` (linux/taskstats.h; fields are only ever appended).
const OFF_CPU_COUNT: usize = 16;
const OFF_CPU_DELAY_TOTAL: usize = 24;
const OFF_CPU_RUN_VIRTUAL_TOTAL: usize = 72;
const OFF_AC_PID: usize = 128;
const OFF_NVCSW: usize = 272;
const OFF_NIVCSW: usize = 280;
const STATS_MIN_LEN: usize = OFF_NIVCSW + 8;

/// What a reply says of one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TaskCounts {
    pub tid: u32,
    /// Timeslices (schedstat's third number).
    pub timeslices: u64,
    /// Run-queue wait, ns (schedstat's second number).
    pub run_delay_ns: u64,
    /// Time on a CPU, ns (schedstat's first number).
    pub runtime_ns: u64,
    pub vol: u64,
    pub invol: u64,
}

/// A generic netlink socket bound to the TASKSTATS family.
#[derive(Debug)]
pub(crate) struct Taskstats {
    fd: OwnedFd,
    family: u16,
    seq: u32,
    req: Vec<u8>,
    buf: Vec<u8>,
}

impl Taskstats {
    /// Open the socket and look the family up.
    pub(crate) fn open() -> io::Result<Taskstats> {
        // SAFETY: plain syscalls on values we own; the fd is owned right after.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_GENERIC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: a zeroed sockaddr_nl with its family set is a valid address (kernel picks
        // the port id).
        let rc = unsafe {
            let mut addr: libc::sockaddr_nl = std::mem::zeroed();
            addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut ts = Taskstats {
            fd,
            family: 0,
            seq: 0,
            req: Vec::with_capacity(64),
            buf: vec![0; 8192],
        };
        let seq = ts.next_seq();
        encode_request(
            &mut ts.req,
            GENL_ID_CTRL,
            seq,
            CTRL_CMD_GETFAMILY,
            CTRL_ATTR_FAMILY_NAME,
            b"TASKSTATS\0",
        );
        let n = ts.round_trip(seq)?;
        ts.family = parse_family_id(&ts.buf[..n])
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))?;
        Ok(ts)
    }

    /// [`open`](Taskstats::open), and one query of the calling thread: the kernel lets the
    /// caller ask (CAP_NET_ADMIN) and fills in the scheduler's counts (a thread that is
    /// running has had a timeslice). None when it does not.
    pub(crate) fn open_checked() -> Option<Taskstats> {
        let mut ts = Taskstats::open().ok()?;
        // SAFETY: gettid has no arguments and cannot fail.
        let me = unsafe { libc::gettid() } as u32;
        let c = ts.thread(me).ok()?;
        (c.tid == me && c.timeslices > 0).then_some(ts)
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Send `self.req`, receive the reply numbered `seq` into `self.buf`; its length. The
    /// kernel answers inside the send, so the reply is waiting when `send` returns and the
    /// receive never blocks (an answer that is not there is an error, not a wait).
    fn round_trip(&mut self, seq: u32) -> io::Result<usize> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: the pointer and length are those of `self.req`.
        let sent = unsafe { libc::send(fd, self.req.as_ptr().cast(), self.req.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            // SAFETY: the pointer and length are those of `self.buf`.
            let got = unsafe {
                libc::recv(
                    fd,
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if got < 0 {
                return Err(io::Error::last_os_error());
            }
            let n = got as usize;
            // A reply to an earlier request that failed on our side is dropped.
            if n >= NLMSG_HDR && u32_at(&self.buf, 8) == Some(seq) {
                return Ok(n);
            }
        }
    }

    /// One thread's counts, by thread id.
    pub(crate) fn thread(&mut self, tid: u32) -> io::Result<TaskCounts> {
        let seq = self.next_seq();
        encode_request(
            &mut self.req,
            self.family,
            seq,
            TASKSTATS_CMD_GET,
            TASKSTATS_CMD_ATTR_PID,
            &tid.to_ne_bytes(),
        );
        let n = self.round_trip(seq)?;
        parse_task_reply(&self.buf[..n])
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One generic netlink request with one attribute, into `out` (cleared first).
pub(crate) fn encode_request(
    out: &mut Vec<u8>,
    family: u16,
    seq: u32,
    cmd: u8,
    attr: u16,
    payload: &[u8],
) {
    out.clear();
    let attr_len = NLA_HDR + payload.len();
    let total = NLMSG_HDR + GENL_HDR + align4(attr_len);
    out.extend_from_slice(&(total as u32).to_ne_bytes());
    out.extend_from_slice(&family.to_ne_bytes());
    out.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&[cmd, 1, 0, 0]);
    out.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    out.extend_from_slice(&attr.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(total, 0);
}

/// The attributes in `b` (no header): (type without flags, payload).
fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(b, at)?);
        let kind = u16_at(b, at + 2)? & NLA_TYPE_MASK;
        let payload = b.get(at + NLA_HDR..at + len.max(NLA_HDR))?;
        at += align4(len.max(NLA_HDR));
        Some((kind, payload))
    })
}

/// The attributes of one generic netlink message, or the error it reports.
fn message_attrs(msg: &[u8]) -> io::Result<&[u8]> {
    let bad = || io::Error::from(io::ErrorKind::InvalidData);
    let len = u32_at(msg, 0).ok_or_else(bad)? as usize;
    let msg = msg.get(..len).ok_or_else(bad)?;
    if u16_at(msg, 4) == Some(NLMSG_ERROR) {
        let err = u32_at(msg, NLMSG_HDR).ok_or_else(bad)? as i32;
        return Err(io::Error::from_raw_os_error(-err));
    }
    msg.get(NLMSG_HDR + GENL_HDR..).ok_or_else(bad)
}

/// The family id in the controller's reply.
pub(crate) fn parse_family_id(msg: &[u8]) -> Option<u16> {
    attrs(message_attrs(msg).ok()?)
        .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
        .and_then(|(_, p)| u16_at(p, 0))
}

/// A thread's counts in a `TASKSTATS_CMD_GET` reply (or the error the kernel sent back).
pub(crate) fn parse_task_reply(msg: &[u8]) -> io::Result<TaskCounts> {
    let bad = || io::Error::from(io::ErrorKind::InvalidData);
    let (_, aggr) = attrs(message_attrs(msg)?)
        .find(|(k, _)| *k == TASKSTATS_TYPE_AGGR_PID)
        .ok_or_else(bad)?;
    let (_, s) = attrs(aggr)
        .find(|(k, p)| *k == TASKSTATS_TYPE_STATS && p.len() >= STATS_MIN_LEN)
        .ok_or_else(bad)?;
    let get = |at| u64_at(s, at).ok_or_else(bad);
    Ok(TaskCounts {
        tid: u32_at(s, OFF_AC_PID).ok_or_else(bad)?,
        timeslices: get(OFF_CPU_COUNT)?,
        run_delay_ns: get(OFF_CPU_DELAY_TOTAL)?,
        runtime_ns: get(OFF_CPU_RUN_VIRTUAL_TOTAL)?,
        vol: get(OFF_NVCSW)?,
        invol: get(OFF_NIVCSW)?,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An attribute: header, payload, padding.
    fn attr(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((NLA_HDR + payload.len()) as u16).to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(payload);
        v.resize(align4(v.len()), 0);
        v
    }

    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((NLMSG_HDR + GENL_HDR + body.len()) as u32).to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&[0; 10]);
        v.extend_from_slice(&[TASKSTATS_CMD_GET, 1, 0, 0]);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn a_reply_gives_the_counts_at_their_offsets_in_struct_taskstats() {
        let mut stats = vec![0u8; 352];
        let mut put = |at: usize, v: u64| stats[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        put(OFF_CPU_COUNT, 11);
        put(OFF_CPU_DELAY_TOTAL, 222);
        put(OFF_CPU_RUN_VIRTUAL_TOTAL, 3333);
        put(OFF_NVCSW, 7);
        put(OFF_NIVCSW, 4);
        stats[OFF_AC_PID..OFF_AC_PID + 4].copy_from_slice(&4242u32.to_ne_bytes());
        let nested = [
            attr(1, &4242u32.to_ne_bytes()),
            attr(TASKSTATS_TYPE_STATS, &stats),
        ]
        .concat();
        // The kernel marks the aggregate as nested (flag bit 15).
        let msg = message(5 + 0x10, &attr(TASKSTATS_TYPE_AGGR_PID | 0x8000, &nested));
        let c = parse_task_reply(&msg).unwrap();
        assert_eq!(
            c,
            TaskCounts {
                tid: 4242,
                timeslices: 11,
                run_delay_ns: 222,
                runtime_ns: 3333,
                vol: 7,
                invol: 4
            }
        );
        // A short or truncated reply is an error, not numbers.
        assert!(parse_task_reply(&msg[..msg.len() - 100]).is_err());
        let short = attr(TASKSTATS_TYPE_STATS, &stats[..200]);
        let msg = message(0x15, &attr(TASKSTATS_TYPE_AGGR_PID, &short));
        assert!(parse_task_reply(&msg).is_err());
    }

    #[test]
    fn an_error_reply_is_the_kernels_errno() {
        let mut body = (-libc::ESRCH).to_ne_bytes().to_vec();
        body.extend_from_slice(&[0; 16]);
        let mut msg = message(NLMSG_ERROR, &[]);
        msg.truncate(NLMSG_HDR);
        msg.extend_from_slice(&body);
        let len = msg.len() as u32;
        msg[..4].copy_from_slice(&len.to_ne_bytes());
        let e = parse_task_reply(&msg).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH));
    }

    /// Whether this process may not use taskstats, with the evidence: no CAP_NET_ADMIN in its
    /// effective set (EPERM), or a kernel without the TASKSTATS family (ENOENT).
    pub(crate) fn cannot_have_taskstats(e: &io::Error) -> bool {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let cap_eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|h| u64::from_str_radix(h.trim(), 16).ok());
        let no_net_admin = cap_eff.is_some_and(|c| c & (1 << 12) == 0);
        match e.raw_os_error() {
            Some(libc::EPERM) => no_net_admin,
            Some(libc::ENOENT) => true,
            _ => false,
        }
    }

    /// On the real kernel: a sleeping thread's counts by netlink are those of its schedstat and
    /// status, number for number.
    #[test]
    fn the_kernel_gives_a_sleeping_threads_counts_as_proc_does() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let dir = format!("/proc/{pid}/task/{pid}");
        while !std::fs::read_to_string(format!("{dir}/stat"))
            .unwrap()
            .contains("(sleep) S")
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let got = Taskstats::open().and_then(|mut t| t.thread(pid));
        let sched = std::fs::read_to_string(format!("{dir}/schedstat")).unwrap();
        let status = std::fs::read_to_string(format!("{dir}/status")).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let c = match got {
            Ok(c) => c,
            Err(e) => {
                assert!(cannot_have_taskstats(&e), "taskstats failed: {e}");
                return;
            }
        };
        let s = host::procfs::parse_task_schedstat(&sched).unwrap();
        assert_eq!(c.tid, pid);
        assert_eq!(
            (c.runtime_ns, c.run_delay_ns, c.timeslices),
            (s.runtime_ns, s.run_delay_ns, s.timeslices)
        );
        assert_eq!(
            Some((c.vol, c.invol)),
            host::procfs::parse_ctxt_switches(&status)
        );
    }

    #[test]
    fn a_request_is_padded_and_says_its_length() {
        let mut v = Vec::new();
        encode_request(
            &mut v,
            31,
            9,
            TASKSTATS_CMD_GET,
            TASKSTATS_CMD_ATTR_PID,
            &[1, 2, 3],
        );
        assert_eq!(v.len(), 28);
        assert_eq!(u32_at(&v, 0), Some(28));
        assert_eq!(u16_at(&v, 4), Some(31));
        assert_eq!(u32_at(&v, 8), Some(9));
        assert_eq!((u16_at(&v, 20), u16_at(&v, 22)), (Some(7), Some(1)));
        assert_eq!(&v[24..], &[1, 2, 3, 0]);
    }
}
