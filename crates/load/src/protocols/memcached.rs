//! memcached over TCP (FIFO, pipelined) and over UDP (8-byte frame header carrying a
//! 16-bit request id, replies possibly split over several datagrams).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use wire::memcache::{self as mc, udp};

use super::fifo_reply;
use crate::error::ProtoError;
use crate::protocol::{Protocol, Reply};
use crate::target::Transport;
use crate::workload::{KvOp, KvWorkload, WorkloadGen};
use crate::LoadError;

/// Largest request datagram (memcached does not accept requests spread over several
/// datagrams; 1400 bytes fits a 1500-byte Ethernet MTU).
pub const UDP_MAX_REQUEST: usize = 1400;
/// Incomplete UDP replies kept per connection, and their bytes.
const REASM_PENDING: usize = 256;
const REASM_BYTES: usize = 8 << 20;

fn malformed(e: impl std::fmt::Display) -> ProtoError {
    ProtoError::Malformed(e.to_string())
}

/// Appends the text request of the next operation; returns whether it is a get.
fn encode_op(gen: &mut WorkloadGen, key: &mut Vec<u8>, values: &[u8], out: &mut Vec<u8>) -> bool {
    let op = gen.next_op();
    key.clear();
    let (KvOp::Get { item } | KvOp::Set { item, .. }) = op;
    gen.workload().write_key(item, key);
    // Keys and values were validated against memcached's limits when the workload was
    // (`KvWorkload::validate`), so the encoders cannot refuse them.
    let _ = match op {
        KvOp::Get { .. } => mc::encode_get(out, key),
        KvOp::Set { value_len, .. } => {
            let v = &values[..value_len.min(values.len())];
            mc::encode_set(out, key, 0, 0, v, false)
        }
    };
    matches!(op, KvOp::Get { .. })
}

/// Whether `r` can answer a get (`is_get`) or a set: a reply of the other kind means the
/// byte stream is out of step with the requests.
fn fits(is_get: bool, r: &mc::Response<'_>) -> bool {
    use mc::Response as R;
    match r {
        R::Hit { .. } | R::Miss => is_get,
        R::Stored | R::NotStored | R::Exists | R::NotFound => !is_get,
        R::Error | R::ClientError(_) | R::ServerError(_) => true,
    }
}

fn reply_of(r: &mc::Response<'_>) -> Reply {
    fifo_reply(r.is_ok(), matches!(r, mc::Response::Miss), false)
}

/// memcached text protocol over TCP: replies in request order. Each reply is checked
/// against the kind of request it answers (a `STORED` for a get is a protocol error).
pub struct MemcachedTcp {
    gen: WorkloadGen,
    key: Vec<u8>,
    values: Arc<[u8]>,
    /// Kinds (get = true) of the requests not answered yet, oldest first.
    kinds: VecDeque<bool>,
}

impl MemcachedTcp {
    /// A codec drawing its requests from `w` with `seed`; `values` holds at least the
    /// largest value size.
    pub fn new(w: Arc<KvWorkload>, values: Arc<[u8]>, seed: u64) -> Result<Self, LoadError> {
        Ok(MemcachedTcp {
            gen: WorkloadGen::new(w, seed)?,
            key: Vec::new(),
            values,
            kinds: VecDeque::new(),
        })
    }
}

impl Protocol for MemcachedTcp {
    fn transport(&self) -> Transport {
        Transport::Tcp
    }
    fn encode(&mut self, _id: u64, _class: u8, out: &mut Vec<u8>) {
        let is_get = encode_op(&mut self.gen, &mut self.key, &self.values, out);
        self.kinds.push_back(is_get);
    }
    fn decode(&mut self, buf: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError> {
        match mc::decode(buf).map_err(malformed)? {
            None => Ok(None),
            Some((n, r)) => match self.kinds.pop_front() {
                Some(is_get) if fits(is_get, &r) => Ok(Some((n, reply_of(&r)))),
                Some(is_get) => Err(ProtoError::Unexpected(format!(
                    "{r:?} in answer to a {}",
                    if is_get { "get" } else { "set" }
                ))),
                None => Err(ProtoError::Unexpected(format!("{r:?} with no request out"))),
            },
        }
    }
    fn carries_id(&self) -> bool {
        false
    }
    fn reset(&mut self) {
        self.kinds.clear();
    }
}

/// memcached text protocol over UDP: each request one datagram with a 16-bit request id,
/// mapped back to the engine's id; replies reassembled from their datagrams.
pub struct MemcachedUdp {
    gen: WorkloadGen,
    key: Vec<u8>,
    values: Arc<[u8]>,
    next_rid: u16,
    /// 16-bit request id → engine id. Bounded by the id space (65 536 entries); an entry
    /// whose reply never came is overwritten when the id comes round again.
    ids: HashMap<u16, u64>,
    reasm: udp::UdpReassembler,
}

impl MemcachedUdp {
    /// Like [`MemcachedTcp::new`]; refuses workloads whose requests exceed one datagram.
    pub fn new(w: Arc<KvWorkload>, values: Arc<[u8]>, seed: u64) -> Result<Self, LoadError> {
        let longest =
            udp::UDP_HEADER_LEN + 64 + w.key_dist().bounds().1 + w.value_dist().bounds().1;
        if w.get_ratio < 1.0 && longest > UDP_MAX_REQUEST {
            return Err(LoadError::Config(format!(
                "memcached over UDP: a set of up to {longest} bytes does not fit one \
                 {UDP_MAX_REQUEST}-byte datagram (use smaller values or TCP)"
            )));
        }
        Ok(MemcachedUdp {
            gen: WorkloadGen::new(w, seed)?,
            key: Vec::new(),
            values,
            next_rid: 0,
            ids: HashMap::new(),
            reasm: udp::UdpReassembler::new(REASM_PENDING, REASM_BYTES),
        })
    }
}

impl Protocol for MemcachedUdp {
    fn transport(&self) -> Transport {
        Transport::Udp
    }

    fn encode(&mut self, id: u64, _class: u8, out: &mut Vec<u8>) {
        let rid = self.next_rid;
        self.next_rid = rid.wrapping_add(1);
        // A reply still being assembled under a reused id is stale.
        self.reasm.drop_incomplete(rid);
        self.ids.insert(rid, id);
        udp::encode_header(
            out,
            udp::UdpHeader {
                request_id: rid,
                seq: 0,
                count: 1,
            },
        );
        encode_op(&mut self.gen, &mut self.key, &self.values, out);
    }

    fn decode(&mut self, datagram: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError> {
        let Some((rid, whole)) = self.reasm.push(datagram).map_err(malformed)? else {
            // Part of a reply that is not complete yet.
            return Ok(None);
        };
        let r = match mc::decode(&whole).map_err(malformed)? {
            Some((n, r)) if n == whole.len() => r,
            Some((n, _)) => {
                return Err(malformed(format!(
                    "{} stray bytes after a UDP reply",
                    whole.len() - n
                )))
            }
            None => return Err(malformed("truncated UDP reply")),
        };
        let mut reply = reply_of(&r);
        // An id not in the table (a duplicate or a reply to a forgotten request) completes
        // nothing: the engine ignores replies without a known id.
        reply.id = self.ids.remove(&rid);
        Ok(Some((datagram.len(), reply)))
    }

    fn carries_id(&self) -> bool {
        true
    }

    fn reset(&mut self) {
        self.ids.clear();
        self.reasm.clear();
    }
}
