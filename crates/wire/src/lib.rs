//! Protocol codecs: the byte layer between the load generator (`load`) and the servers
//! (`server`, real targets).
//!
//! In the data flow (`workload spec → load generator → per-request records`), this crate turns
//! a request the generator wants to send into bytes, and the bytes a target answers with back
//! into the response, including the server's stage stamps T1..T6 when the built-in null-RPC
//! server appends them. Everything here is pure: no sockets, no clocks, and allocation only where a
//! message needs it (the caller's output buffer, RESP arrays, UDP reassembly), so every
//! decoder can be fuzzed (see `fuzz/`).
//!
//! Modules:
//! - [`nullrpc`]: the built-in server's null-RPC frame (request, echoed response with an
//!   optional stamp trailer, transmit-stamp follow-up).
//! - [`memcache`]: memcached's text protocol (get/set, pipelined) and its UDP framing with
//!   multi-datagram reassembly.
//! - [`http1`]: HTTP/1.1 GET requests and response framing (Content-Length, chunked).
//! - [`resp`]: RESP2 (Redis) GET/SET and replies.
//! - [`h2`]: HTTP/2 frames (every type a client meets, checked as RFC 9113 requires) and
//!   request/response header blocks through HPACK.
//! - [`hpack`]: the HPACK (RFC 7541) decoder behind [`h2`]'s response headers, with a
//!   table-driven Huffman decoder.
//! - [`grpc`]: gRPC's length-prefixed messages and the status its trailers carry.
//!
//! Every decoder looks at the front of a buffer and answers "need more", a value and the
//! bytes it used, or an error; none panics on any input and all bound the sizes they
//! accept.

pub mod grpc;
pub mod h2;
pub mod hpack;
pub mod http1;
pub mod memcache;
pub mod nullrpc;
pub mod resp;

pub use nullrpc::WireError;
