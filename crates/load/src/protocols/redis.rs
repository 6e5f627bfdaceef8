//! Redis (RESP2) GET/SET over TCP (replies in request order).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::error::ProtoError;
use crate::protocol::{Protocol, Reply};
use crate::target::Transport;
use crate::workload::{KvOp, KvWorkload, WorkloadGen};
use crate::LoadError;

use super::fifo_reply;

/// `GET key` / `SET key value` from the workload; `-ERR` replies are not ok, a nil bulk
/// reply to GET is a miss. A reply of the wrong type for its request (a bulk string for a
/// SET, a status for a GET) is a protocol error: the stream is out of step.
pub struct Redis {
    gen: WorkloadGen,
    key: Vec<u8>,
    values: Arc<[u8]>,
    /// Kinds (GET = true) of the requests not answered yet, oldest first.
    kinds: VecDeque<bool>,
}

impl Redis {
    /// A codec drawing its requests from `w` with `seed`.
    pub fn new(w: Arc<KvWorkload>, values: Arc<[u8]>, seed: u64) -> Result<Self, LoadError> {
        Ok(Redis {
            gen: WorkloadGen::new(w, seed)?,
            key: Vec::new(),
            values,
            kinds: VecDeque::new(),
        })
    }
}

impl Protocol for Redis {
    fn transport(&self) -> Transport {
        Transport::Tcp
    }
    fn encode(&mut self, _id: u64, _class: u8, out: &mut Vec<u8>) {
        let op = self.gen.next_op();
        let (KvOp::Get { item } | KvOp::Set { item, .. }) = op;
        self.key.clear();
        self.gen.workload().write_key(item, &mut self.key);
        self.kinds.push_back(matches!(op, KvOp::Get { .. }));
        match op {
            KvOp::Get { .. } => wire::resp::encode_get(out, &self.key),
            KvOp::Set { value_len, .. } => {
                let v = &self.values[..value_len.min(self.values.len())];
                wire::resp::encode_set(out, &self.key, v)
            }
        }
    }
    fn decode(&mut self, buf: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError> {
        match wire::resp::decode(buf) {
            Ok(None) => Ok(None),
            Ok(Some((n, v))) => {
                use wire::resp::Value;
                let fits = match (self.kinds.pop_front(), &v) {
                    (None, _) => false,
                    (Some(_), Value::Error(_)) => true,
                    (Some(true), Value::Bulk(_)) => true,
                    (Some(false), Value::Simple(_)) => true,
                    _ => false,
                };
                if !fits {
                    return Err(ProtoError::Unexpected(format!(
                        "reply {v:?} does not answer the request it follows"
                    )));
                }
                let miss = v == Value::Bulk(None);
                Ok(Some((n, fifo_reply(v.is_ok(), miss, false))))
            }
            Err(e) => Err(ProtoError::Malformed(e.to_string())),
        }
    }
    fn carries_id(&self) -> bool {
        false
    }
    fn reset(&mut self) {
        self.kinds.clear();
    }
}
