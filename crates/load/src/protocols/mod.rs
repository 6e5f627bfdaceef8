//! Codecs of the real targets (memcached over TCP and UDP, HTTP/1.1, Redis) and the
//! factory that builds one per connection with its own workload stream.

mod h2;
mod http;
mod memcached;
mod redis;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use h2::{metadata_ok as grpc_metadata_ok, H2Client, MAX_GRPC_MESSAGE};
pub use http::HttpGet;
pub use memcached::{MemcachedTcp, MemcachedUdp, UDP_MAX_REQUEST};
pub use redis::Redis;

use crate::error::LoadError;
use crate::error::ProtoError;
use crate::protocol::NullRpc;
use crate::protocol::{Protocol, Reply};
use crate::schedule::mix_seed;
use crate::target::{Target, Transport};
use crate::tls::{TlsClient, TlsOptions};
use crate::workload::{HttpWorkload, KvWorkload, Popularity, Workload};

/// Builds one codec per call (one per connection); what `run_open_loop`, `calibrate` and
/// `preload` take.
pub type ProtocolFactory = Box<dyn Fn() -> Box<dyn Protocol> + Send + Sync>;

/// A reply that completes the oldest request of a FIFO connection.
pub(crate) fn fifo_reply(ok: bool, miss: bool, closes: bool) -> Reply {
    Reply {
        code: None,
        id: None,
        ok,
        stamps: None,
        tx_stamp_for: None,
        miss,
        closes,
        control: false,
    }
}

/// Value bytes shared by every connection: `set`s send a prefix of this buffer.
pub(crate) fn value_bytes(w: &KvWorkload) -> Arc<[u8]> {
    let max = w.value_dist().bounds().1;
    (0..max).map(|i| b'a' + (i % 26) as u8).collect()
}

/// The paths an HTTP codec (HTTP/1.1 or HTTP/2) asks for: the workload's, else the URL's own
/// path (`/` without one).
fn http_workload(target: &Target, workload: &Workload) -> HttpWorkload {
    match workload {
        Workload::Http(w) => w.clone(),
        Workload::Kv(_) | Workload::NullRpc(_) | Workload::Grpc(_) => HttpWorkload {
            paths: vec![target.path.clone().unwrap_or_else(|| "/".into())],
            popularity: Popularity::Uniform,
        },
    }
}

/// The codec factory for a target: `nullrpc[+udp]`, `memcached[+udp]`, `http`, `h2c` or
/// `redis`. Connection
/// k (in the order the factory is called, which is the order connections are opened)
/// draws its requests from seed `mix(seed, k)`, so runs are reproducible.
///
/// - memcached / redis need [`Workload::Kv`].
/// - http takes [`Workload::Http`]; any other workload means "GET the target's path (or
///   `/`)" over and over.
/// - nullrpc takes [`Workload::NullRpc`].
///
/// A TLS target (`https://`, `h2://`) is verified against the system's roots; see
/// [`protocol_factory_with`] for the user's TLS options.
pub fn protocol_factory(
    target: &Target,
    workload: &Workload,
    seed: u64,
) -> Result<ProtocolFactory, LoadError> {
    protocol_factory_with(target, workload, seed, &TlsOptions::default())
}

/// [`protocol_factory`] with TLS's options: over a TLS target every codec is spoken inside a
/// session of one shared client configuration (one session cache: reconnections resume).
/// A bad CA file or server name is an error here.
pub fn protocol_factory_with(
    target: &Target,
    workload: &Workload,
    seed: u64,
    tls: &TlsOptions,
) -> Result<ProtocolFactory, LoadError> {
    let codecs = codec_factory(target, workload, seed)?;
    if !target.tls {
        return Ok(codecs);
    }
    let client = TlsClient::new(target, tls)?;
    Ok(Box::new(move || {
        Box::new(OverTls {
            inner: codecs(),
            client: client.clone(),
        }) as Box<dyn Protocol>
    }))
}

fn codec_factory(
    target: &Target,
    workload: &Workload,
    seed: u64,
) -> Result<ProtocolFactory, LoadError> {
    let counter = Arc::new(AtomicU64::new(0));
    let next_seed = move || mix_seed(seed, counter.fetch_add(1, Ordering::Relaxed));
    let kv = || match workload {
        Workload::Kv(w) => {
            w.validate()?;
            Ok(Arc::new(w.clone()))
        }
        Workload::Http(_) | Workload::NullRpc(_) | Workload::Grpc(_) => Err(LoadError::Config(
            format!("{} needs a key-value workload", target.scheme),
        )),
    };
    match (target.scheme.as_str(), target.transport) {
        ("memcached", Transport::Tcp) => {
            let w = kv()?;
            let values = value_bytes(&w);
            MemcachedTcp::new(w.clone(), values.clone(), 0)?;
            Ok(Box::new(move || {
                match MemcachedTcp::new(w.clone(), values.clone(), next_seed()) {
                    Ok(p) => Box::new(p) as Box<dyn Protocol>,
                    // Validated above with the same workload: cannot happen.
                    Err(_) => unreachable_codec(),
                }
            }))
        }
        ("memcached", Transport::Udp) => {
            let w = kv()?;
            let values = value_bytes(&w);
            MemcachedUdp::new(w.clone(), values.clone(), 0)?;
            Ok(Box::new(move || {
                match MemcachedUdp::new(w.clone(), values.clone(), next_seed()) {
                    Ok(p) => Box::new(p) as Box<dyn Protocol>,
                    Err(_) => unreachable_codec(),
                }
            }))
        }
        ("redis", Transport::Tcp) => {
            let w = kv()?;
            let values = value_bytes(&w);
            Redis::new(w.clone(), values.clone(), 0)?;
            Ok(Box::new(move || {
                match Redis::new(w.clone(), values.clone(), next_seed()) {
                    Ok(p) => Box::new(p) as Box<dyn Protocol>,
                    Err(_) => unreachable_codec(),
                }
            }))
        }
        ("http", Transport::Tcp) => {
            let w = http_workload(target, workload);
            let host = target.addr.to_string();
            HttpGet::new(&w, host.clone(), 0)?;
            Ok(Box::new(move || {
                match HttpGet::new(&w, host.clone(), next_seed()) {
                    Ok(p) => Box::new(p) as Box<dyn Protocol>,
                    Err(_) => unreachable_codec(),
                }
            }))
        }
        ("h2c", Transport::Tcp) => {
            let w = http_workload(target, workload);
            let (authority, tls) = (target.addr.to_string(), target.tls);
            H2Client::get(&w, authority.clone(), tls, 0)?;
            Ok(Box::new(move || {
                match H2Client::get(&w, authority.clone(), tls, next_seed()) {
                    Ok(p) => Box::new(p) as Box<dyn Protocol>,
                    Err(_) => unreachable_codec(),
                }
            }))
        }
        ("grpc", Transport::Tcp) => {
            let Workload::Grpc(w) = workload else {
                return Err(LoadError::Config(
                    "grpc targets take a gRPC workload (--method, and the message)".into(),
                ));
            };
            let (authority, tls) = (target.addr.to_string(), target.tls);
            H2Client::grpc(w, authority.clone(), tls)?;
            let w = w.clone();
            Ok(Box::new(move || {
                match H2Client::grpc(&w, authority.clone(), tls) {
                    Ok(p) => Box::new(p) as Box<dyn Protocol>,
                    Err(_) => unreachable_codec(),
                }
            }))
        }
        ("nullrpc", transport) => {
            let Workload::NullRpc(w) = *workload else {
                return Err(LoadError::Config(
                    "nullrpc targets take a null-RPC workload (request size, stamps)".into(),
                ));
            };
            let range = wire::nullrpc::HEADER_LEN..=wire::nullrpc::MAX_FRAME;
            if !range.contains(&w.request_size) {
                return Err(LoadError::Config(format!(
                    "null-RPC request size must be between {} and {} bytes, got {}",
                    range.start(),
                    range.end(),
                    w.request_size
                )));
            }
            Ok(Box::new(move || {
                Box::new(NullRpc::new(transport, w.request_size, w.stamps, w.stamps))
                    as Box<dyn Protocol>
            }))
        }
        (s, t) => Err(LoadError::Config(format!("no codec for {s} over {t}"))),
    }
}

/// A codec that fails every reply: only returned if a constructor that succeeded once
/// with the same inputs fails later, which it cannot.
fn unreachable_codec() -> Box<dyn Protocol> {
    struct Broken;
    impl Protocol for Broken {
        fn transport(&self) -> Transport {
            Transport::Tcp
        }
        fn encode(&mut self, _: u64, _: u8, _: &mut Vec<u8>) {}
        fn decode(&mut self, _: &[u8]) -> Result<Option<(usize, Reply)>, crate::error::ProtoError> {
            Err(crate::error::ProtoError::Unexpected(
                "codec construction failed".into(),
            ))
        }
        fn carries_id(&self) -> bool {
            false
        }
    }
    Box::new(Broken)
}

#[cfg(test)]
mod tests;

/// A codec spoken over TLS: the codec itself, and the client the connection shakes hands with.
pub(crate) struct OverTls {
    pub(crate) inner: Box<dyn Protocol>,
    pub(crate) client: TlsClient,
}

impl Protocol for OverTls {
    fn transport(&self) -> Transport {
        self.inner.transport()
    }
    fn encode(&mut self, id: u64, class: u8, out: &mut Vec<u8>) {
        self.inner.encode(id, class, out)
    }
    fn decode(&mut self, buf: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError> {
        self.inner.decode(buf)
    }
    fn carries_id(&self) -> bool {
        self.inner.carries_id()
    }
    fn reset(&mut self) {
        self.inner.reset()
    }
    fn on_open(&mut self, out: &mut Vec<u8>) {
        self.inner.on_open(out)
    }
    fn take_output(&mut self, out: &mut Vec<u8>) {
        self.inner.take_output(out)
    }
    fn in_flight_limit(&self) -> Option<usize> {
        self.inner.in_flight_limit()
    }
    fn tls(&self) -> Option<&TlsClient> {
        Some(&self.client)
    }
}
