//! memcached's UDP framing: every datagram starts with an 8-byte header (request id,
//! sequence number, datagram count, reserved; u16 each, big-endian). A request fits one
//! datagram; a reply may be split over several, which arrive in any order and may be lost.
//! [`UdpReassembler`] puts replies back together, with bounded memory.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};

use super::McError;

/// Length of the frame header.
pub const UDP_HEADER_LEN: usize = 8;

/// The decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpHeader {
    /// Chosen by the client, echoed in every datagram of the reply.
    pub request_id: u16,
    /// Position of this datagram in the reply, 0-based.
    pub seq: u16,
    /// Datagrams in the whole message (at least 1).
    pub count: u16,
}

/// Appends a frame header.
pub fn encode_header(out: &mut Vec<u8>, h: UdpHeader) {
    out.extend_from_slice(&h.request_id.to_be_bytes());
    out.extend_from_slice(&h.seq.to_be_bytes());
    out.extend_from_slice(&h.count.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
}

/// Splits a datagram into its header and payload. The reserved field is not checked
/// (servers leave it zero; nothing depends on it).
pub fn parse_datagram(d: &[u8]) -> Result<(UdpHeader, &[u8]), McError> {
    if d.len() < UDP_HEADER_LEN {
        return Err(McError::BadUdp(format!("datagram of {} bytes", d.len())));
    }
    let u = |i: usize| u16::from_be_bytes([d[i], d[i + 1]]);
    let h = UdpHeader {
        request_id: u(0),
        seq: u(2),
        count: u(4),
    };
    if h.count == 0 || h.seq >= h.count {
        return Err(McError::BadUdp(format!(
            "sequence {} of {} datagrams",
            h.seq, h.count
        )));
    }
    Ok((h, &d[UDP_HEADER_LEN..]))
}

/// Splits a reply into datagrams of at most `max_payload` payload bytes each (what a
/// server does; used by tests and fake servers). At least one datagram, at most 65535.
pub fn split_reply(request_id: u16, reply: &[u8], max_payload: usize) -> Vec<Vec<u8>> {
    let max_payload = max_payload.max(1);
    let chunks: Vec<&[u8]> = if reply.is_empty() {
        vec![reply]
    } else {
        reply.chunks(max_payload).take(u16::MAX as usize).collect()
    };
    let count = chunks.len() as u16;
    chunks
        .iter()
        .enumerate()
        .map(|(seq, c)| {
            let mut d = Vec::with_capacity(UDP_HEADER_LEN + c.len());
            encode_header(
                &mut d,
                UdpHeader {
                    request_id,
                    seq: seq as u16,
                    count,
                },
            );
            d.extend_from_slice(c);
            d
        })
        .collect()
}

/// A complete reply: its request id and its bytes (borrowed from the datagram when it
/// came in one).
pub type Reassembled<'a> = (u16, Cow<'a, [u8]>);

/// Bytes charged per buffered datagram on top of its payload, so that many tiny
/// datagrams cannot exceed the memory bound either.
const PART_OVERHEAD: usize = 64;

struct Partial {
    /// Datagram count announced by the header.
    count: u16,
    /// The datagrams received so far, by sequence number (grown as they arrive: memory
    /// follows what was received, not what the header announces).
    parts: BTreeMap<u16, Vec<u8>>,
    /// Charged bytes (payload + overhead) of `parts`.
    bytes: usize,
}

/// Reassembles multi-datagram replies by request id. Memory is bounded: at most
/// `max_pending` incomplete replies and `max_bytes` buffered bytes (payload plus a fixed
/// overhead per datagram); when a new
/// datagram would exceed either, the oldest incomplete replies are dropped (they are
/// presumably lost in part and will time out).
pub struct UdpReassembler {
    pending: HashMap<u16, Partial>,
    /// Request ids in the order their first datagram arrived.
    order: VecDeque<u16>,
    bytes: usize,
    max_pending: usize,
    max_bytes: usize,
    dropped: u64,
}

impl UdpReassembler {
    /// A reassembler holding at most `max_pending` incomplete replies and `max_bytes`
    /// buffered bytes (both at least 1).
    pub fn new(max_pending: usize, max_bytes: usize) -> Self {
        UdpReassembler {
            pending: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            max_pending: max_pending.max(1),
            max_bytes: max_bytes.max(1),
            dropped: 0,
        }
    }

    /// Takes one datagram. Returns the request id and the whole reply once its last
    /// missing datagram arrives (a single-datagram reply is returned without copying).
    /// Duplicated datagrams are ignored; a datagram whose count disagrees with earlier
    /// ones of the same id replaces that incomplete reply (the id was reused).
    pub fn push<'a>(&mut self, datagram: &'a [u8]) -> Result<Option<Reassembled<'a>>, McError> {
        let (h, payload) = parse_datagram(datagram)?;
        if h.count == 1 {
            // A reply in one datagram; any partial one under the same id is stale.
            self.drop_incomplete(h.request_id);
            return Ok(Some((h.request_id, Cow::Borrowed(payload))));
        }
        let charge = payload.len() + PART_OVERHEAD;
        if charge > self.max_bytes {
            // Could never be held: the reply is lost.
            self.drop_incomplete(h.request_id);
            return Ok(None);
        }
        let stale = self
            .pending
            .get(&h.request_id)
            .is_some_and(|p| p.count != h.count);
        if stale {
            self.drop_incomplete(h.request_id);
        }
        if !self.pending.contains_key(&h.request_id) {
            self.make_room(1, charge);
            self.pending.insert(
                h.request_id,
                Partial {
                    count: h.count,
                    parts: BTreeMap::new(),
                    bytes: 0,
                },
            );
            self.order.push_back(h.request_id);
        } else {
            self.make_room_keeping(h.request_id, charge);
        }
        let Some(p) = self.pending.get_mut(&h.request_id) else {
            // Evicted to make room (a single reply larger than `max_bytes`).
            return Ok(None);
        };
        if p.parts.contains_key(&h.seq) {
            return Ok(None);
        }
        p.parts.insert(h.seq, payload.to_vec());
        p.bytes += charge;
        self.bytes += charge;
        if p.parts.len() < p.count as usize {
            return Ok(None);
        }
        let Some(p) = self.remove(h.request_id) else {
            return Ok(None);
        };
        let mut whole = Vec::with_capacity(p.parts.values().map(Vec::len).sum());
        // BTreeMap iterates in sequence order.
        for part in p.parts.values() {
            whole.extend_from_slice(part);
        }
        Ok(Some((h.request_id, Cow::Owned(whole))))
    }

    fn remove(&mut self, id: u16) -> Option<Partial> {
        let p = self.pending.remove(&id)?;
        self.bytes -= p.bytes;
        if let Some(pos) = self.order.iter().position(|&o| o == id) {
            self.order.remove(pos);
        }
        Some(p)
    }

    /// Evicts the oldest incomplete replies until `entries` more and `bytes` more fit.
    fn make_room(&mut self, entries: usize, bytes: usize) {
        while !self.order.is_empty()
            && (self.pending.len() + entries > self.max_pending
                || self.bytes + bytes > self.max_bytes)
        {
            if let Some(old) = self.order.front().copied() {
                self.remove(old);
                self.dropped += 1;
            }
        }
    }

    /// Like `make_room` for a datagram of an already pending reply `keep`: evicts others
    /// first, and `keep` itself only if it alone is over the byte bound.
    fn make_room_keeping(&mut self, keep: u16, bytes: usize) {
        while self.bytes + bytes > self.max_bytes {
            match self.order.iter().copied().find(|&o| o != keep) {
                Some(old) => {
                    self.remove(old);
                }
                None => {
                    self.remove(keep);
                    self.dropped += 1;
                    return;
                }
            }
            self.dropped += 1;
        }
    }

    /// Forgets the incomplete reply to `request_id` (e.g. its request timed out).
    pub fn drop_incomplete(&mut self, request_id: u16) -> bool {
        let had = self.remove(request_id).is_some();
        if had {
            self.dropped += 1;
        }
        had
    }

    /// Forgets every incomplete reply.
    pub fn clear(&mut self) {
        self.dropped += self.pending.len() as u64;
        self.pending.clear();
        self.order.clear();
        self.bytes = 0;
    }

    /// Incomplete replies held now.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Bytes held now (payload plus the per-datagram overhead charge).
    pub fn buffered_bytes(&self) -> usize {
        self.bytes
    }

    /// Incomplete replies dropped so far (evicted, replaced or dropped on demand).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}
