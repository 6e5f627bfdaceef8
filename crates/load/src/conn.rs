//! One engine connection: a non-blocking socket, its protocol codec and its byte buffers.
//!
//! The connection knows nothing of the schedule or of records; the engine and the
//! calibrator keep that bookkeeping and call `queue`, `flush` and `read_replies`.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use crate::error::ProtoError;
use crate::protocol::{Protocol, Reply};
use crate::target::Transport;
use crate::tls::{TlsClient, TlsStats};

/// Initial and largest size of a TCP receive buffer; a reply must fit in the largest.
const RBUF_INITIAL: usize = 16 * 1024;
const RBUF_MAX: usize = 1 << 20;
/// A UDP datagram can be at most this large.
const UDP_MAX: usize = 65_536;
/// Reads per readiness event before returning to the schedule (bounds the time one busy
/// connection can hold up sends).
const MAX_READS_PER_EVENT: usize = 8;
/// Datagrams per `sendmmsg` call.
const UDP_BATCH: usize = 32;
/// Bytes of TLS records taken from the socket per read (two full records).
const TLS_READ: usize = 2 * (16 * 1024 + 256);

enum Sock {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

/// Why a connection stopped being usable.
#[derive(Debug)]
pub(crate) enum ConnFail {
    Closed,
    Io(io::Error),
    Proto(ProtoError),
}

impl std::fmt::Display for ConnFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnFail::Closed => f.write_str("connection closed by the server"),
            ConnFail::Io(e) => write!(f, "connection error: {e}"),
            ConnFail::Proto(e) => write!(f, "{e}"),
        }
    }
}

/// Hands the codec's unsent bytes to the TLS session and writes its records as far as the
/// kernel takes them.
fn flush_tls(
    t: &mut rustls::ClientConnection,
    s: &mut TcpStream,
    wbuf: &[u8],
    wpos: &mut usize,
    writes: &mut u64,
) -> Result<(), ConnFail> {
    if *wpos < wbuf.len() {
        // Without a buffer limit the session takes all of it (sealed once the handshake ends).
        let n = t.writer().write(&wbuf[*wpos..]).map_err(ConnFail::Io)?;
        *wpos += n;
    }
    while t.wants_write() {
        *writes += 1;
        match t.write_tls(s) {
            Ok(0) => return Err(ConnFail::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ConnFail::Io(e)),
        }
    }
    Ok(())
}

pub(crate) struct Conn {
    sock: Option<Sock>,
    pub(crate) proto: Box<dyn Protocol>,
    transport: Transport,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    /// The kernel refused part of the output (full socket buffer, connect in progress):
    /// nothing more is queued until a flush empties it.
    refused: bool,
    /// Write system calls made (TCP writes, UDP sendmmsg calls), for tests and benchmarks.
    pub(crate) writes: u64,
    /// UDP only: where each queued datagram ends in `wbuf`.
    dgram_ends: VecDeque<usize>,
    /// Whether kernel receive stamps were enabled on the socket.
    pub(crate) rx_stamps: bool,
    /// Non-fatal problems (bad UDP datagrams, ICMP errors): the latest one, for the user.
    pub(crate) soft_error: Option<String>,
    /// The codec is spoken over TLS with this client (from [`Protocol::tls`]).
    tls_client: Option<TlsClient>,
    /// The TLS session of the open socket: the codec's bytes go in and come out here.
    tls: Option<rustls::ClientConnection>,
    /// TLS records read from the socket, before rustls takes them.
    tls_in: Vec<u8>,
    /// When a handshake started that the I/O loop finishes (a connection opened without
    /// waiting, [`Conn::open_nonblocking`]).
    hs_started: Option<Instant>,
    /// This connection's handshakes, counted apart from its requests.
    pub(crate) tls_stats: TlsStats,
}

/// A TLS failure as an I/O error of the connection.
fn tls_error(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS {what}: {e}"))
}

/// Whether the server ended the handshake because it speaks none of the protocols offered by
/// ALPN (OpenSSL servers such as nginx do, rather than choosing none).
fn refused_alpn(e: &io::Error) -> bool {
    matches!(
        e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()),
        Some(rustls::Error::AlertReceived(
            rustls::AlertDescription::NoApplicationProtocol
        ))
    )
}

/// Refuses a session whose ALPN is not the one the codec needs (HTTP/2 over TLS).
fn check_alpn(c: &rustls::ClientConnection, client: &TlsClient) -> io::Result<()> {
    match client.need_alpn {
        Some(need) if c.alpn_protocol() != Some(need) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "TLS handshake: the server did not agree to {} by ALPN (it chose {})",
                String::from_utf8_lossy(need),
                c.alpn_protocol()
                    .map_or("none".into(), |a| String::from_utf8_lossy(a).into_owned())
            ),
        )),
        _ => Ok(()),
    }
}

/// Ensures free space after `rend` in `rbuf`: compact, then grow up to `RBUF_MAX`.
fn make_room_in(rbuf: &mut Vec<u8>, rstart: &mut usize, rend: &mut usize) -> Result<(), ConnFail> {
    if *rend < rbuf.len() {
        return Ok(());
    }
    if *rstart > 0 {
        rbuf.copy_within(*rstart..*rend, 0);
        *rend -= *rstart;
        *rstart = 0;
        return Ok(());
    }
    if rbuf.len() >= RBUF_MAX {
        return Err(ConnFail::Proto(ProtoError::Malformed(format!(
            "reply larger than {RBUF_MAX} bytes"
        ))));
    }
    let new_len = (rbuf.len() * 2).min(RBUF_MAX);
    rbuf.resize(new_len, 0);
    Ok(())
}

impl Conn {
    /// A connection with no socket yet (see [`Conn::open`]).
    pub(crate) fn new(proto: Box<dyn Protocol>) -> Self {
        let transport = proto.transport();
        let tls_client = proto.tls().cloned();
        let cap = match transport {
            Transport::Tcp => RBUF_INITIAL,
            Transport::Udp => UDP_MAX,
        };
        Conn {
            sock: None,
            proto,
            transport,
            rbuf: vec![0; cap],
            rstart: 0,
            rend: 0,
            wbuf: Vec::with_capacity(256),
            wpos: 0,
            refused: false,
            writes: 0,
            dgram_ends: VecDeque::new(),
            rx_stamps: false,
            soft_error: None,
            tls_client,
            tls: None,
            tls_in: Vec::new(),
            hs_started: None,
            tls_stats: TlsStats::default(),
        }
    }

    /// (Re)opens the socket. TCP connects with `connect_timeout`; UDP binds an ephemeral
    /// port and connects (which cannot detect a dead server: its requests time out).
    pub(crate) fn open(&mut self, addr: SocketAddr, connect_timeout: Duration) -> io::Result<()> {
        self.open_with(addr, connect_timeout, true)
    }

    /// [`Conn::open`], with a TLS handshake that the I/O loop finishes instead of this call
    /// (a reconnection during the run: a refused connect still fails here, at once).
    pub(crate) fn reopen(&mut self, addr: SocketAddr, connect_timeout: Duration) -> io::Result<()> {
        self.open_with(addr, connect_timeout, false)
    }

    fn open_with(
        &mut self,
        addr: SocketAddr,
        connect_timeout: Duration,
        handshake_now: bool,
    ) -> io::Result<()> {
        self.close();
        let sock = match self.transport {
            Transport::Tcp => {
                let mut s = TcpStream::connect_timeout(&addr, connect_timeout)?;
                s.set_nodelay(true)?;
                if handshake_now {
                    self.handshake(&mut s, connect_timeout)?;
                } else {
                    self.start_tls_in_loop()?;
                }
                s.set_nonblocking(true)?;
                Sock::Tcp(s)
            }
            Transport::Udp => {
                let local: SocketAddr = if addr.is_ipv4() {
                    (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let s = UdpSocket::bind(local)?;
                s.connect(addr)?;
                s.set_nonblocking(true)?;
                Sock::Udp(s)
            }
        };
        self.attach(sock);
        Ok(())
    }

    /// Over TLS, a session whose handshake goes out once the socket connects and which the
    /// I/O loop finishes; the codec's first bytes wait in the session until then.
    fn start_tls_in_loop(&mut self) -> io::Result<()> {
        if let Some(client) = &self.tls_client {
            let mut c = client.session().map_err(|e| tls_error("set-up", e))?;
            c.set_buffer_limit(None);
            self.tls = Some(c);
            self.hs_started = Some(Instant::now());
        }
        Ok(())
    }

    /// Shakes hands over the connected, still blocking socket when the codec is spoken over
    /// TLS, within `timeout` per step; the session then carries everything the connection
    /// sends and reads. The handshake is timed and counted apart from requests.
    fn handshake(&mut self, s: &mut TcpStream, timeout: Duration) -> io::Result<()> {
        let Some(client) = self.tls_client.clone() else {
            return Ok(());
        };
        let mut c = client.session().map_err(|e| tls_error("set-up", e))?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        let t0 = Instant::now();
        while c.is_handshaking() {
            match c.complete_io(s) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(tls_error(
                        "handshake",
                        format!("no answer within {timeout:?} (does the server speak TLS here?)"),
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(tls_error("handshake", "the server closed the connection"))
                }
                Err(e) if refused_alpn(&e) => {
                    return Err(tls_error(
                        "handshake",
                        format!(
                            "the server did not agree to {} by ALPN (it answered with the alert \
                             NoApplicationProtocol)",
                            client
                                .need_alpn
                                .map_or("the protocol".into(), String::from_utf8_lossy)
                        ),
                    ))
                }
                Err(e) => return Err(tls_error("handshake", e)),
            }
        }
        let ns = t0.elapsed().as_nanos() as u64;
        check_alpn(&c, &client)?;
        self.tls_stats.record(&c, ns, &client);
        s.set_read_timeout(None)?;
        s.set_write_timeout(None)?;
        c.set_buffer_limit(None);
        self.tls = Some(c);
        Ok(())
    }

    /// Like [`Conn::open`], but a TCP connect does not wait for the handshake: the
    /// socket is returned while connecting, and queued output goes out once it is
    /// established (writes report WouldBlock until then; a refused connect shows up as
    /// an error on the next write or read). Used by churn, so that the engine thread keeps
    /// sending on time while a connection is being set up.
    pub(crate) fn open_nonblocking(&mut self, addr: SocketAddr) -> io::Result<()> {
        if self.transport != Transport::Tcp {
            return self.open(addr, Duration::from_secs(1));
        }
        self.close();
        let s = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        s.set_nonblocking(true)?;
        s.set_nodelay(true)?;
        match s.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        self.start_tls_in_loop()?;
        self.attach(Sock::Tcp(s.into()));
        Ok(())
    }

    fn attach(&mut self, sock: Sock) {
        let fd = match &sock {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Udp(s) => s.as_raw_fd(),
        };
        // Kernel rx stamps are a bonus: without them kernel_rx_ns stays 0.
        self.rx_stamps = host::tstamp::enable(fd, true, false).is_ok();
        self.sock = Some(sock);
        // What the codec sends first (HTTP/2's preface) goes out ahead of the first request.
        self.proto.on_open(&mut self.wbuf);
    }

    /// Sends what the codec owes the server after a read (HTTP/2 acknowledgements and window
    /// updates), behind any output not yet taken by the kernel. Written bytes before them are
    /// dropped by the next [`Conn::queue`], as always.
    fn send_owed(&mut self) -> Result<(), ConnFail> {
        let before = self.wbuf.len();
        self.proto.take_output(&mut self.wbuf);
        // TLS owes its own records too (the rest of a handshake, key updates).
        if self.wbuf.len() > before || self.tls.as_ref().is_some_and(|t| t.wants_write()) {
            self.flush()?;
        }
        Ok(())
    }

    pub(crate) fn close(&mut self) {
        if self.sock.is_some() {
            self.proto.reset();
        }
        self.sock = None;
        self.tls = None;
        self.hs_started = None;
        self.rstart = 0;
        self.rend = 0;
        self.wbuf.clear();
        self.wpos = 0;
        self.refused = false;
        self.dgram_ends.clear();
    }

    pub(crate) fn is_open(&self) -> bool {
        self.sock.is_some()
    }

    pub(crate) fn fd(&self) -> Option<RawFd> {
        match self.sock.as_ref()? {
            Sock::Tcp(s) => Some(s.as_raw_fd()),
            Sock::Udp(s) => Some(s.as_raw_fd()),
        }
    }

    /// The socket's local address (its port is what the server sees as the peer's).
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        match self.sock.as_ref()? {
            Sock::Tcp(s) => s.local_addr().ok(),
            Sock::Udp(s) => s.local_addr().ok(),
        }
    }

    /// Bytes (or a datagram) accepted by `queue` but not yet taken by the kernel.
    pub(crate) fn has_pending_output(&self) -> bool {
        self.wpos < self.wbuf.len() || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// Output a flush left behind because the kernel would not take it: the connection
    /// takes no more requests until it has gone. (Requests queued and not yet flushed do
    /// not count: more may join them, to go out in the same write.)
    pub(crate) fn write_blocked(&self) -> bool {
        self.refused && self.has_pending_output()
    }

    /// Encodes request `id` into the output buffer, behind any output not yet flushed (send
    /// it with [`Conn::flush`]: everything queued goes in one write when the kernel takes it).
    pub(crate) fn queue(&mut self, id: u64, class: u8) {
        if self.wpos >= self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
            self.dgram_ends.clear();
        }
        self.proto.encode(id, class, &mut self.wbuf);
        if self.transport == Transport::Udp {
            self.dgram_ends.push_back(self.wbuf.len());
        }
    }

    /// Writes as much pending output as the kernel takes without blocking: TCP in one write
    /// (more only when the kernel takes part of it), UDP's datagrams in `sendmmsg` batches.
    pub(crate) fn flush(&mut self) -> Result<(), ConnFail> {
        let res = match self.sock.as_mut() {
            None => return Err(ConnFail::Closed),
            Some(Sock::Tcp(s)) if self.tls.is_some() => match self.tls.as_mut() {
                Some(t) => flush_tls(t, s, &self.wbuf, &mut self.wpos, &mut self.writes),
                None => Err(ConnFail::Closed),
            },
            Some(Sock::Tcp(s)) => {
                let mut res = Ok(());
                while self.wpos < self.wbuf.len() {
                    self.writes += 1;
                    match s.write(&self.wbuf[self.wpos..]) {
                        Ok(0) => {
                            res = Err(ConnFail::Closed);
                            break;
                        }
                        Ok(n) => self.wpos += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            res = Err(ConnFail::Io(e));
                            break;
                        }
                    }
                }
                res
            }
            Some(Sock::Udp(s)) => {
                let fd = s.as_raw_fd();
                self.flush_udp(fd);
                Ok(())
            }
        };
        self.refused = self.has_pending_output();
        res
    }

    /// Sends the queued datagrams, up to [`UDP_BATCH`] per `sendmmsg`. A refused error is the
    /// ICMP report of an earlier datagram: the current one was not sent, so it is tried once
    /// more, then given up (its request times out).
    fn flush_udp(&mut self, fd: RawFd) {
        let mut failures = 0;
        while !self.dgram_ends.is_empty() {
            let mut iov: [libc::iovec; UDP_BATCH] = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; UDP_BATCH];
            let mut from = self.wpos;
            let n = self.dgram_ends.len().min(UDP_BATCH);
            for (k, &end) in self.dgram_ends.iter().take(n).enumerate() {
                iov[k] = libc::iovec {
                    // The kernel only reads through it (sendmmsg takes no mutable data).
                    iov_base: self.wbuf[from..end].as_ptr() as *mut libc::c_void,
                    iov_len: end - from,
                };
                from = end;
            }
            // SAFETY: all-zero is a valid msghdr (no name, no control data).
            let mut msgs: [libc::mmsghdr; UDP_BATCH] = unsafe { std::mem::zeroed() };
            for (m, v) in msgs.iter_mut().zip(iov.iter_mut()).take(n) {
                m.msg_hdr.msg_iov = v;
                m.msg_hdr.msg_iovlen = 1;
            }
            self.writes += 1;
            // SAFETY: `msgs[..n]` point at `iov[..n]`, which point into `wbuf`; all outlive
            // the call, and the socket is connected (no address needed).
            let sent = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as libc::c_uint, 0) };
            let done = if sent >= 0 {
                failures = 0;
                sent as usize
            } else {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return,
                    io::ErrorKind::Interrupted => 0,
                    _ if failures == 0 => {
                        failures = 1;
                        0
                    }
                    _ => {
                        self.soft_error = Some(format!("udp send: {e}"));
                        failures = 0;
                        1
                    }
                }
            };
            for _ in 0..done {
                if let Some(end) = self.dgram_ends.pop_front() {
                    self.wpos = end;
                }
            }
        }
    }

    /// Reads what is available and hands every complete reply to `on_reply` together with
    /// the user-space receive time (`now()` just after the read) and the kernel receive
    /// stamp (absolute CLOCK_MONOTONIC ns) of that read, if any.
    pub(crate) fn read_replies(
        &mut self,
        now: impl Fn() -> u64,
        mut on_reply: impl FnMut(Reply, u64, Option<u64>),
    ) -> Result<(), ConnFail> {
        let Some(fd) = self.fd() else {
            return Err(ConnFail::Closed);
        };
        match self.transport {
            Transport::Tcp => self.read_tcp(fd, &now, &mut on_reply),
            Transport::Udp => {
                self.read_udp(fd, &now, &mut on_reply);
                Ok(())
            }
        }
    }

    fn read_tcp(
        &mut self,
        fd: RawFd,
        now: &impl Fn() -> u64,
        on_reply: &mut impl FnMut(Reply, u64, Option<u64>),
    ) -> Result<(), ConnFail> {
        for _ in 0..MAX_READS_PER_EVENT {
            self.make_room()?;
            // (the socket may hold more, the read's kernel stamp, the server ended the session)
            let (more, krx, eof) = if self.tls.is_some() {
                match self.recv_tls(fd)? {
                    Some(v) => v,
                    None => return Ok(()),
                }
            } else {
                let space = self.rbuf.len() - self.rend;
                match host::tstamp::recv_with_stamp(fd, &mut self.rbuf[self.rend..], 0) {
                    Ok((0, _)) => return Err(ConnFail::Closed),
                    Ok((n, krx)) => {
                        self.rend += n;
                        // A short read: the socket is (almost certainly) drained;
                        // level-triggered epoll reports it again if not.
                        (n == space, krx, false)
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(ConnFail::Io(e)),
                }
            };
            let t = now();
            while self.rstart < self.rend {
                match self.proto.decode(&self.rbuf[self.rstart..self.rend]) {
                    Ok(Some((used, reply))) => {
                        // A codec claiming more bytes than it was given is a codec bug;
                        // treat it as malformed input rather than slicing out of bounds.
                        if used == 0 || used > self.rend - self.rstart {
                            return Err(ConnFail::Proto(ProtoError::Malformed(format!(
                                "codec consumed {used} of {} bytes",
                                self.rend - self.rstart
                            ))));
                        }
                        self.rstart += used;
                        on_reply(reply, t, krx);
                    }
                    Ok(None) => break,
                    Err(e) => return Err(ConnFail::Proto(e)),
                }
            }
            if self.rstart == self.rend {
                self.rstart = 0;
                self.rend = 0;
            }
            if eof {
                return Err(ConnFail::Closed);
            }
            self.send_owed()?;
            if !more {
                return Ok(());
            }
        }
        Ok(())
    }

    /// One read of TLS records from the socket, decrypted into the receive buffer. `None`:
    /// nothing to read. Else (the socket may hold more, the read's kernel stamp, the server
    /// ended the session).
    fn recv_tls(&mut self, fd: RawFd) -> Result<Option<(bool, Option<u64>, bool)>, ConnFail> {
        if self.tls_in.is_empty() {
            self.tls_in = vec![0; TLS_READ];
        }
        let (n, krx) = loop {
            match host::tstamp::recv_with_stamp(fd, &mut self.tls_in, 0) {
                Ok((0, _)) => return Err(ConnFail::Closed),
                Ok(v) => break v,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ConnFail::Io(e)),
            }
        };
        let Some(t) = self.tls.as_mut() else {
            return Err(ConnFail::Closed);
        };
        let mut input = &self.tls_in[..n];
        let mut eof = false;
        while !input.is_empty() {
            if t.read_tls(&mut input).map_err(ConnFail::Io)? == 0 {
                break;
            }
            let st = t
                .process_new_packets()
                .map_err(|e| ConnFail::Io(tls_error("session", e)))?;
            // Every byte of plaintext goes to the codec's buffer (rustls keeps little).
            loop {
                make_room_in(&mut self.rbuf, &mut self.rstart, &mut self.rend)?;
                match io::Read::read(&mut t.reader(), &mut self.rbuf[self.rend..]) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(k) => self.rend += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(ConnFail::Io(e)),
                }
            }
            eof |= st.peer_has_closed();
        }
        // A handshake the I/O loop carried (a connection opened without waiting) ends here.
        if let Some(t0) = self.hs_started {
            if !t.is_handshaking() {
                self.hs_started = None;
                if let Some(client) = &self.tls_client {
                    check_alpn(t, client).map_err(ConnFail::Io)?;
                    self.tls_stats
                        .record(t, t0.elapsed().as_nanos() as u64, client);
                }
            }
        }
        Ok(Some((n == self.tls_in.len(), krx, eof)))
    }

    /// Ensures free space after `rend`: compact, then grow up to `RBUF_MAX`.
    fn make_room(&mut self) -> Result<(), ConnFail> {
        make_room_in(&mut self.rbuf, &mut self.rstart, &mut self.rend)
    }

    fn read_udp(
        &mut self,
        fd: RawFd,
        now: &impl Fn() -> u64,
        on_reply: &mut impl FnMut(Reply, u64, Option<u64>),
    ) {
        for _ in 0..MAX_READS_PER_EVENT {
            let (n, krx) = match host::tstamp::recv_with_stamp(fd, &mut self.rbuf, 0) {
                Ok(v) => v,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ICMP port unreachable and the like: the requests will time out.
                    self.soft_error = Some(format!("udp receive: {e}"));
                    continue;
                }
            };
            let t = now();
            match self.proto.decode(&self.rbuf[..n]) {
                Ok(Some((_, reply))) => on_reply(reply, t, krx),
                // Part of a multi-datagram reply, kept by the codec.
                Ok(None) => {}
                Err(e) => self.soft_error = Some(format!("bad datagram: {e}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::NullRpc;
    use std::io::Read;
    use std::net::{TcpListener, UdpSocket};

    /// The request ids in a byte stream of null-RPC frames.
    fn ids(mut buf: &[u8]) -> Vec<u64> {
        let mut out = Vec::new();
        while let Ok(wire::nullrpc::Decoded::Frame {
            header, consumed, ..
        }) = wire::nullrpc::decode(buf)
        {
            out.push(header.id);
            buf = &buf[consumed..];
        }
        out
    }

    #[test]
    fn requests_queued_together_go_out_in_one_tcp_write() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Conn::new(Box::new(NullRpc::new(Transport::Tcp, 64, false, false)));
        c.open(l.local_addr().unwrap(), Duration::from_secs(1))
            .unwrap();
        let (mut peer, _) = l.accept().unwrap();
        for id in 0..50 {
            c.queue(id, 0);
            // Queued and not yet flushed is not blocked: more may join the write.
            assert!(c.has_pending_output() && !c.write_blocked());
        }
        c.flush().unwrap();
        assert_eq!(c.writes, 1);
        assert!(!c.has_pending_output() && !c.write_blocked());
        let mut buf = vec![0; 50 * 64];
        peer.read_exact(&mut buf).unwrap();
        assert_eq!(ids(&buf), (0..50).collect::<Vec<u64>>());
        // The next pass's requests start a new buffer and a new write.
        c.queue(50, 0);
        c.flush().unwrap();
        assert_eq!(c.writes, 2);
        let mut one = vec![0; 64];
        peer.read_exact(&mut one).unwrap();
        assert_eq!(ids(&one), vec![50]);
    }

    #[test]
    fn a_full_socket_buffer_blocks_the_connection_until_it_drains() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Conn::new(Box::new(NullRpc::new(Transport::Tcp, 4096, false, false)));
        c.open(l.local_addr().unwrap(), Duration::from_secs(1))
            .unwrap();
        let (mut peer, _) = l.accept().unwrap();
        // Far more than loopback's buffers hold while the peer reads nothing.
        let n = 5_000u64;
        for id in 0..n {
            c.queue(id, 0);
        }
        c.flush().unwrap();
        assert!(c.write_blocked());
        let total = n as usize * 4096;
        let mut got = vec![0; total];
        let mut read = 0;
        peer.set_nonblocking(true).unwrap();
        while c.has_pending_output() || read < total {
            match peer.read(&mut got[read..]) {
                Ok(k) => read += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
            c.flush().unwrap();
        }
        assert!(!c.write_blocked());
        assert_eq!(ids(&got).len(), n as usize);
    }

    #[test]
    fn queued_datagrams_go_out_in_sendmmsg_batches() {
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut c = Conn::new(Box::new(NullRpc::new(Transport::Udp, 64, false, false)));
        c.open(peer.local_addr().unwrap(), Duration::from_secs(1))
            .unwrap();
        let n = UDP_BATCH as u64 + 18;
        for id in 0..n {
            c.queue(id, 0);
        }
        c.flush().unwrap();
        assert_eq!(c.writes, 2);
        assert!(!c.has_pending_output());
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        for _ in 0..n {
            let k = peer.recv(&mut buf).unwrap();
            assert_eq!(k, 64);
            got.extend(ids(&buf[..k]));
        }
        assert_eq!(got, (0..n).collect::<Vec<u64>>());
    }
}
