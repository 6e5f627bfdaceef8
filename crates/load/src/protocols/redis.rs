//! Redis (RESP2) GET/SET over TCP (replies in request order).

use std::sync::Arc;

use crate::error::ProtoError;
use crate::protocol::{Protocol, Reply};
use crate::target::Transport;
use crate::workload::{KvOp, KvWorkload, WorkloadGen};
use crate::LoadError;

use super::fifo_reply;

/// `GET key` / `SET key value` from the workload; `-ERR` replies are not ok, a nil bulk
/// reply to GET is a miss.
pub struct Redis {
    gen: WorkloadGen,
    key: Vec<u8>,
    values: Arc<[u8]>,
}

impl Redis {
    /// A codec drawing its requests from `w` with `seed`.
    pub fn new(w: Arc<KvWorkload>, values: Arc<[u8]>, seed: u64) -> Result<Self, LoadError> {
        Ok(Redis {
            gen: WorkloadGen::new(w, seed)?,
            key: Vec::new(),
            values,
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
                let miss = v == wire::resp::Value::Bulk(None);
                Ok(Some((n, fifo_reply(v.is_ok(), miss, false))))
            }
            Err(e) => Err(ProtoError::Malformed(e.to_string())),
        }
    }
    fn carries_id(&self) -> bool {
        false
    }
}
