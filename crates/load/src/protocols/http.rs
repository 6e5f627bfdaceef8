//! HTTP/1.1 GET over persistent connections (replies in request order).

use crate::error::ProtoError;
use crate::protocol::{ErrorCode, Protocol, Reply};
use crate::target::Transport;
use crate::workload::{HttpWorkload, PathGen};
use crate::LoadError;

use super::fifo_reply;

/// GETs of the workload's paths with `Host: HOST:PORT`, keep-alive. A 4xx/5xx reply is
/// not ok; a reply announcing `Connection: close` tells the engine to reopen.
pub struct HttpGet {
    paths: PathGen,
    host: String,
}

impl HttpGet {
    /// A codec drawing paths from `w` with `seed`. Refuses paths HTTP cannot carry.
    pub fn new(w: &HttpWorkload, host: String, seed: u64) -> Result<Self, LoadError> {
        let mut scratch = Vec::new();
        for p in &w.paths {
            wire::http1::encode_get(&mut scratch, &host, p, true)
                .map_err(|e| LoadError::Config(e.to_string()))?;
        }
        Ok(HttpGet {
            paths: PathGen::new(w, seed)?,
            host,
        })
    }
}

impl Protocol for HttpGet {
    fn transport(&self) -> Transport {
        Transport::Tcp
    }
    fn encode(&mut self, _id: u64, _class: u8, out: &mut Vec<u8>) {
        // Every path and the host were checked in `new`.
        let _ = wire::http1::encode_get(out, &self.host, self.paths.next_path(), true);
    }
    fn decode(&mut self, buf: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError> {
        match wire::http1::decode(buf) {
            Ok(None) => Ok(None),
            Ok(Some((n, r))) => {
                let mut reply = fifo_reply(r.is_ok(), r.status == 404, r.close);
                reply.code = (!r.is_ok()).then_some(ErrorCode::Http(r.status));
                Ok(Some((n, reply)))
            }
            Err(e) => Err(ProtoError::Malformed(e.to_string())),
        }
    }
    fn carries_id(&self) -> bool {
        false
    }
}
