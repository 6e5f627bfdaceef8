//! A small blocking null-RPC client for the server tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use host::tstamp::mono_now_ns;
use server::{Arch, Server, ServerConfig, ServerHandle};
use wire::nullrpc::{self, Decoded, Flags, Header, Kind, Stamps};

/// Allowance for the kernel stamps' realtime → monotonic mapping (see host::tstamp tests).
pub const SLACK_NS: u64 = 20_000;

pub const TIMEOUT: Duration = Duration::from_secs(10);

pub fn start(cfg: ServerConfig) -> ServerHandle {
    if cfg.arch == Arch::Udp {
        Server::start_udp(UdpSocket::bind("127.0.0.1:0").unwrap(), cfg).unwrap()
    } else {
        Server::start_tcp(std::net::TcpListener::bind("127.0.0.1:0").unwrap(), cfg).unwrap()
    }
}

pub fn cfg(arch: Arch, workers: usize) -> ServerConfig {
    ServerConfig {
        arch,
        workers,
        ..ServerConfig::default()
    }
}

/// One answered request as the client saw it.
#[derive(Debug)]
pub struct Answer {
    pub header: Header,
    pub payload_ok: bool,
    pub stamps: Option<Stamps>,
    pub t6: Option<u64>,
    pub sent_ns: u64,
    pub received_ns: u64,
}

pub struct TcpClient {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl TcpClient {
    pub fn connect(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        TcpClient { s, buf: Vec::new() }
    }

    pub fn send(&mut self, id: u64, len: usize, flags: Flags) -> u64 {
        let mut req = Vec::new();
        nullrpc::encode_request(&mut req, id, id ^ 0xabcd, len, flags).unwrap();
        let t = mono_now_ns();
        self.s.write_all(&req).unwrap();
        t
    }

    /// Reads the next frame: (header, payload pattern ok for its id, stamps, tx stamp).
    pub fn next_frame(&mut self) -> (Header, bool, Option<Stamps>, Option<u64>) {
        loop {
            if let Decoded::Frame {
                header,
                payload,
                stamps,
                tx_stamp,
                consumed,
            } = nullrpc::decode(&self.buf).unwrap()
            {
                let ok = nullrpc::check_payload(header.id, payload);
                self.buf.drain(..consumed);
                return (header, ok, stamps, tx_stamp);
            }
            let mut tmp = [0u8; 65536];
            let n = self.s.read(&mut tmp).unwrap();
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }

    /// One request, its response and (if announced) its T6 follow-up.
    pub fn call(&mut self, id: u64, len: usize, flags: Flags) -> Answer {
        let sent_ns = self.send(id, len, flags);
        let (header, payload_ok, stamps, _) = self.next_frame();
        let received_ns = mono_now_ns();
        assert_eq!(header.kind, Kind::Response);
        assert_eq!(header.id, id);
        assert_eq!(header.client_ts, id ^ 0xabcd);
        let t6 = if header.flags.want_tx_stamp {
            let (h, _, _, t6) = self.next_frame();
            assert_eq!((h.kind, h.id), (Kind::TxStamp, id));
            t6
        } else {
            None
        };
        Answer {
            header,
            payload_ok,
            stamps,
            t6,
            sent_ns,
            received_ns,
        }
    }

    /// True when the server has closed this connection (EOF or reset) within the timeout.
    pub fn is_closed_by_server(&mut self) -> bool {
        let mut tmp = [0u8; 1024];
        loop {
            match self.s.read(&mut tmp) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }
}

pub struct UdpClient {
    pub s: UdpSocket,
    server: SocketAddr,
}

impl UdpClient {
    pub fn new(server: SocketAddr) -> Self {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        UdpClient { s, server }
    }

    fn recv(&self) -> (Header, bool, Option<Stamps>, Option<u64>) {
        let mut buf = vec![0u8; 70000];
        let n = self.s.recv(&mut buf).unwrap();
        match nullrpc::decode(&buf[..n]).unwrap() {
            Decoded::Frame {
                header,
                payload,
                stamps,
                tx_stamp,
                consumed,
            } => {
                assert_eq!(consumed, n);
                (
                    header,
                    nullrpc::check_payload(header.id, payload),
                    stamps,
                    tx_stamp,
                )
            }
            Decoded::Incomplete { .. } => panic!("short datagram"),
        }
    }

    pub fn send_raw(&self, bytes: &[u8]) {
        self.s.send_to(bytes, self.server).unwrap();
    }

    pub fn call(&mut self, id: u64, len: usize, flags: Flags) -> Answer {
        let mut req = Vec::new();
        nullrpc::encode_request(&mut req, id, id ^ 0xabcd, len, flags).unwrap();
        let sent_ns = mono_now_ns();
        self.send_raw(&req);
        let (header, payload_ok, stamps, _) = self.recv();
        let received_ns = mono_now_ns();
        assert_eq!((header.kind, header.id), (Kind::Response, id));
        let t6 = if header.flags.want_tx_stamp {
            let (h, _, _, t6) = self.recv();
            assert_eq!((h.kind, h.id), (Kind::TxStamp, id));
            t6
        } else {
            None
        };
        Answer {
            header,
            payload_ok,
            stamps,
            t6,
            sent_ns,
            received_ns,
        }
    }
}

/// A client of either transport.
pub enum Client {
    Tcp(TcpClient),
    Udp(UdpClient),
}

impl Client {
    pub fn new(arch: Arch, addr: SocketAddr) -> Self {
        if arch == Arch::Udp {
            Client::Udp(UdpClient::new(addr))
        } else {
            Client::Tcp(TcpClient::connect(addr))
        }
    }

    pub fn call(&mut self, id: u64, len: usize, flags: Flags) -> Answer {
        match self {
            Client::Tcp(c) => c.call(id, len, flags),
            Client::Udp(c) => c.call(id, len, flags),
        }
    }
}

pub const ALL: [Arch; 4] = [Arch::Thread, Arch::Epoll, Arch::Udp, Arch::Dispatch];
pub const TCP: [Arch; 3] = [Arch::Thread, Arch::Epoll, Arch::Dispatch];

pub const STAMPS: Flags = Flags {
    want_stamps: true,
    want_tx_stamp: true,
};
