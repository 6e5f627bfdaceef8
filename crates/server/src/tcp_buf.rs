//! The per-connection input and output buffers of the TCP architectures.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::RawFd;

use nix::sys::epoll::EpollFlags;
use nix::sys::socket::{self, MsgFlags};
use wire::nullrpc::{self, Decoded, Header, Kind, WireError};

use crate::Limits;

/// The receive side of one TCP connection: bytes read but not yet consumed.
pub(crate) struct InBuf {
    buf: Vec<u8>,
    head: usize,
    tail: usize,
    /// Bytes the frame at `head` needs in total (from the last `Incomplete`).
    need: usize,
}

/// A request found by [`InBuf::pop_frame`].
pub(crate) struct Req {
    pub header: Header,
    pub payload: std::ops::Range<usize>,
    /// The frame's last byte is the last byte read so far (so the latest receive stamp is its).
    pub at_tail: bool,
}

impl InBuf {
    pub fn new() -> Self {
        InBuf {
            buf: vec![0; 16 * 1024],
            head: 0,
            tail: 0,
            need: nullrpc::HEADER_LEN,
        }
    }

    /// One `recvmsg` with the kernel receive stamp (the NIC's when `shared` has its clock
    /// and the packet carries one; counted by kind). `Ok((0, _))` is end of stream.
    pub fn read_from(
        &mut self,
        fd: RawFd,
        flags: i32,
        shared: &crate::Shared,
    ) -> io::Result<(usize, Option<u64>)> {
        if self.head == self.tail {
            self.head = 0;
            self.tail = 0;
        } else if self.head > 0 && self.buf.len() - self.head < self.need.max(4096) {
            self.buf.copy_within(self.head..self.tail, 0);
            self.tail -= self.head;
            self.head = 0;
        }
        if self.buf.len() < self.head + self.need {
            self.buf.resize(self.head + self.need, 0);
        }
        let (n, stamp) =
            host::tstamp::recv_stamped(fd, &mut self.buf[self.tail..], flags, shared.hw.as_ref())?;
        self.tail += n;
        Ok((n, shared.counters.rx_stamp(stamp)))
    }

    /// The next whole request, if there is one; a malformed or oversized frame is an error
    /// (the connection is then closed).
    pub fn pop_frame(&mut self, max_frame: usize) -> Result<Option<Req>, WireError> {
        let avail = &self.buf[self.head..self.tail];
        if let Some(h) = nullrpc::peek_header(avail)? {
            if h.len as usize > max_frame {
                return Err(WireError::TooLarge {
                    len: h.len as usize,
                });
            }
            if h.kind != Kind::Request {
                return Err(WireError::NotARequest(h.kind));
            }
        }
        match nullrpc::decode(avail)? {
            Decoded::Incomplete { need_at_least } => {
                self.need = need_at_least;
                Ok(None)
            }
            Decoded::Frame {
                header,
                payload,
                consumed,
                ..
            } => {
                let start = self.head + nullrpc::HEADER_LEN;
                let range = start..start + payload.len();
                self.head += consumed;
                self.need = nullrpc::HEADER_LEN;
                Ok(Some(Req {
                    header,
                    payload: range,
                    at_tail: self.head == self.tail,
                }))
            }
        }
    }

    pub fn bytes(&self, r: std::ops::Range<usize>) -> &[u8] {
        &self.buf[r]
    }
}

/// Responses of one connection that may await a transmit stamp at once; older ones are
/// given up on (a client that pipelines this deep is not measuring the server's T6).
const MAX_PENDING_TX: usize = 1024;

/// Capacity an output buffer keeps once it has drained: room for a couple of the largest
/// responses. A buffer that grew while its client was not reading gives the rest back, so
/// that memory follows what is unsent now, not what once was.
const KEEP_CAPACITY: usize = 2 * nullrpc::MAX_FRAME;

/// The send side of one TCP connection: responses not yet written, and the bookkeeping that
/// turns kernel transmit-stamp keys (byte offsets, see `host::tstamp::enable`) back into
/// request ids.
///
/// Transmit stamping is switched on for a connection only when its first request asks for
/// T6: once on, the kernel stamps every send and queues the stamps on the socket's error
/// queue, which must then be drained (it is charged to the receive buffer).
pub(crate) struct OutBuf {
    pub buf: Vec<u8>,
    head: usize,
    /// Bytes ever appended (the stream offset of the next byte).
    queued_total: u64,
    /// Bytes ever accepted by `write`.
    written_total: u64,
    /// Transmit stamping is on for this socket.
    pub tx_on: bool,
    /// `written_total` when transmit stamping was switched on: the kernel's keys count from
    /// there.
    tx_base: u64,
    /// (stream offset of the frame's last byte, request id) of responses awaiting T6.
    pending_tx: VecDeque<(u64, u64)>,
    /// Reads from this connection are paused for undrained replies (see
    /// [`OutBuf::update_pause`]).
    pub paused: bool,
    /// The epoll events this connection is registered for (epoll-driven architectures).
    pub registered: EpollFlags,
    /// Writes that took bytes.
    pub writes: u64,
}

impl OutBuf {
    pub fn new() -> Self {
        OutBuf {
            buf: Vec::with_capacity(4096),
            head: 0,
            queued_total: 0,
            written_total: 0,
            tx_on: false,
            tx_base: 0,
            pending_tx: VecDeque::new(),
            paused: false,
            registered: crate::common::READ_EVENTS,
            writes: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.head == self.buf.len()
    }

    /// Reply bytes not yet accepted by the kernel.
    pub fn unsent(&self) -> usize {
        self.buf.len() - self.head
    }

    /// Pauses reads when more than `limits.max_unsent_bytes` are unsent and resumes them once
    /// no more than `limits.resume_unsent_bytes` are (hysteresis: a slow reader does not
    /// flip the pause on every reply). True when this call paused them, to be counted.
    pub fn update_pause(&mut self, limits: &Limits) -> bool {
        let unsent = self.unsent();
        if !self.paused && unsent > limits.max_unsent_bytes {
            self.paused = true;
            return true;
        }
        if self.paused && unsent <= limits.resume_unsent_bytes {
            self.paused = false;
        }
        false
    }

    /// Appends a response for request `id` via `f` (which encodes into the buffer); when
    /// `f` says a transmit stamp is wanted, switches stamping on for socket `fd` if needed
    /// and records the response as awaiting its stamp.
    pub fn push(&mut self, fd: RawFd, id: u64, f: impl FnOnce(&mut Vec<u8>) -> bool) {
        let before = self.buf.len();
        let want_tx = f(&mut self.buf);
        self.queued_total += (self.buf.len() - before) as u64;
        if want_tx && !self.tx_on && host::tstamp::enable(fd, true, true).is_ok() {
            self.tx_on = true;
            self.tx_base = self.written_total;
        }
        if want_tx && self.tx_on && self.buf.len() > before {
            if self.pending_tx.len() >= MAX_PENDING_TX {
                self.pending_tx.pop_front();
            }
            self.pending_tx.push_back((self.queued_total - 1, id));
        }
    }

    /// Gives up on the transmit stamps not yet seen (their clients get no follow-up).
    pub fn abandon_tx(&mut self) {
        self.pending_tx.clear();
    }

    /// True when some response still waits for its transmit stamp.
    pub fn awaiting_tx(&self) -> bool {
        !self.pending_tx.is_empty()
    }

    /// Writes as much as the socket takes (blocking if the socket blocks); `Ok(true)` when
    /// everything is written.
    pub fn flush(&mut self, mut s: &TcpStream) -> io::Result<bool> {
        self.flush_with(|b| s.write(b))
    }

    /// Writes as much as socket `fd` takes without blocking, even if the socket is a
    /// blocking one; `Ok(true)` when everything is written.
    pub fn flush_nowait(&mut self, fd: RawFd) -> io::Result<bool> {
        self.flush_with(|b| {
            socket::send(fd, b, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL)
                .map_err(io::Error::from)
        })
    }

    fn flush_with(
        &mut self,
        mut write: impl FnMut(&[u8]) -> io::Result<usize>,
    ) -> io::Result<bool> {
        while self.head < self.buf.len() {
            match write(&self.buf[self.head..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.head += n;
                    self.written_total += n as u64;
                    self.writes += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.compact();
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.head = 0;
        if self.buf.capacity() > KEEP_CAPACITY {
            self.buf.shrink_to(KEEP_CAPACITY);
        }
        Ok(true)
    }

    /// Drops the bytes already written once they are at least as many as the unsent ones.
    /// Without it a client that reads slowly but never lets the buffer drain completely
    /// would grow it without bound (written bytes were only dropped on a full drain); with
    /// it the buffer holds at most twice the unsent bytes, and each unsent byte is moved at
    /// most once per halving (amortised O(1)). Offsets in `pending_tx` count stream bytes,
    /// not buffer positions, so they are unaffected.
    fn compact(&mut self) {
        if self.head > 0 && self.head >= self.unsent() {
            self.buf.drain(..self.head);
            self.head = 0;
        }
    }

    /// Reads every transmit stamp waiting in `fd`'s error queue and appends a follow-up for
    /// each pending response it covers. Returns the number of follow-ups appended.
    pub fn collect_tx_stamps(&mut self, fd: RawFd) -> io::Result<u64> {
        let mut n = 0;
        while let Some((key, t6)) = host::tstamp::read_tx_stamp(fd)? {
            n += self.on_tx_stamp(key, t6);
        }
        Ok(n)
    }

    /// A send whose last byte had offset ≡ `key` (mod 2³²) from where stamping was switched
    /// on reached the driver at `t6`: every pending response ending at or before it is out.
    fn on_tx_stamp(&mut self, key: u32, t6: u64) -> u64 {
        let mut n = 0;
        while let Some(&(last, id)) = self.pending_tx.front() {
            // Wrapping comparison of 32-bit stream offsets.
            let rel = last.wrapping_sub(self.tx_base) as u32;
            if (key.wrapping_sub(rel) as i32) < 0 {
                break;
            }
            self.pending_tx.pop_front();
            let before = self.buf.len();
            nullrpc::encode_tx_stamp(&mut self.buf, id, t6);
            self.queued_total += (self.buf.len() - before) as u64;
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::{Pre, Work};
    use wire::nullrpc::Flags;

    #[test]
    fn tx_keys_resolve_every_response_up_to_them() {
        let mut o = OutBuf::new();
        let h = |id| Header {
            kind: Kind::Request,
            flags: Flags {
                want_stamps: true,
                want_tx_stamp: true,
            },
            len: 40,
            id,
            client_ts: 0,
        };
        let mut w = Work::without_work(&crate::ServerConfig::default());
        // Pretend stamping is on from the start (no socket in this unit test).
        o.tx_on = true;
        for id in 0..3 {
            o.push(-1, id, |b| {
                w.serve(&h(id), &[0; 8], Some(Pre::default()), b)
            });
        }
        let frame = (40 + nullrpc::STAMPS_LEN) as u64;
        assert_eq!(o.queued_total, 3 * frame);
        // A stamp for the first frame's last byte resolves only it.
        assert_eq!(o.on_tx_stamp((frame - 1) as u32, 7), 1);
        // One for the third resolves the second and third (sent together).
        assert_eq!(o.on_tx_stamp((3 * frame - 1) as u32, 9), 2);
        assert!(!o.awaiting_tx());
        // Follow-ups (40 bytes each) were appended after the responses.
        assert_eq!(o.buf.len() as u64, 3 * frame + 3 * 40);
        // Later stamps (of the follow-ups themselves) resolve nothing.
        assert_eq!(o.on_tx_stamp(u32::MAX / 4, 11), 0);
    }

    #[test]
    fn inbuf_frames_and_errors() {
        let mut b = InBuf::new();
        let mut req = Vec::new();
        nullrpc::encode_request(&mut req, 1, 0, 64, Flags::default()).unwrap();
        nullrpc::encode_request(&mut req, 2, 0, 64, Flags::default()).unwrap();
        b.buf[..100].copy_from_slice(&req[..100]);
        b.tail = 100;
        let r = b.pop_frame(1024).unwrap().unwrap();
        assert_eq!((r.header.id, r.at_tail, r.payload.len()), (1, false, 32));
        assert!(b.pop_frame(1024).unwrap().is_none());
        assert_eq!(b.need, 64);
        b.buf[100..128].copy_from_slice(&req[100..]);
        b.tail = 128;
        let r = b.pop_frame(1024).unwrap().unwrap();
        assert_eq!((r.header.id, r.at_tail), (2, true));
        // Over the server's own limit.
        let mut b = InBuf::new();
        b.buf[..64].copy_from_slice(&req[..64]);
        b.tail = 64;
        assert_eq!(b.pop_frame(63).err(), Some(WireError::TooLarge { len: 64 }));
    }

    #[test]
    fn reads_pause_above_the_cap_and_resume_at_the_low_mark() {
        let limits = Limits {
            max_unsent_bytes: 100,
            resume_unsent_bytes: 40,
            ..Limits::default()
        };
        let mut o = OutBuf::new();
        o.buf.extend_from_slice(&[1; 100]);
        assert!(!o.update_pause(&limits), "at the cap is not over it");
        o.buf.push(1);
        assert!(o.update_pause(&limits) && o.paused);
        assert!(!o.update_pause(&limits), "a pause is counted once");
        // 61 of 101 written: 40 left, at the low mark.
        o.head = 50;
        assert!(!o.update_pause(&limits) && o.paused, "above the low mark");
        o.head = 61;
        assert!(!o.update_pause(&limits) && !o.paused);
    }

    #[test]
    fn a_never_drained_buffer_keeps_only_about_its_unsent_bytes() {
        // A socket that takes half of what is unsent, then is full: the buffer never drains.
        let mut o = OutBuf::new();
        for _ in 0..1000 {
            o.buf.extend_from_slice(&[7; 1000]);
            let mut room = true;
            let r = o.flush_with(|b| {
                if std::mem::take(&mut room) {
                    Ok(b.len() / 2)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                }
            });
            assert!(!r.unwrap());
            assert!(
                o.buf.len() < 2 * o.unsent(),
                "{} for {}",
                o.buf.len(),
                o.unsent()
            );
        }
        assert_eq!(o.written_total + o.unsent() as u64, 1_000_000);
    }
}
