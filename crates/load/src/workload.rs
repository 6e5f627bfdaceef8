//! Workloads of real targets: what each request asks for (Tales of the Tail §4: memcached
//! with a 90/10 get/set mix over a preloaded key space; nginx serving static files).
//!
//! Spec strings (parsed by [`SizeDist::from_str`] and [`Popularity::from_str`]):
//! - sizes: `64` or `fixed:64` (always 64 bytes), `uniform:4,240` (uniform integer in
//!   4..=240), `etc` (Facebook ETC's published key or value size distribution, by which
//!   option it is given to; see [`crate::etc`]);
//! - popularity: `uniform` (every item equally likely) or `zipf:S` (item of rank k drawn
//!   with probability ∝ k^-S, S ≥ 0; rank 1 is item 0).
//!
//! Keys are `key:<n>` with `n` zero-padded so the key has the item's key size; when the
//! size is too small for the prefix, the key is `n` zero-padded alone (so sizes down to
//! the digit count of the largest item work, e.g. 4-byte keys for 10 000 items). An item's
//! key size is a pure function of the item number, so `preload` and the run agree.
//!
//! A [`WorkloadGen`] draws the requests of one connection from its own seed: a run is
//! reproducible for a given run seed and connection count.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::error::LoadError;
use crate::etc::EtcSize;
use crate::schedule::mix_seed;

/// Largest key memcached accepts (Redis accepts more, but the study stays within this).
pub const MAX_KEY_SIZE: usize = 250;
/// Largest value a workload may ask for.
pub const MAX_VALUE_SIZE: usize = 16 << 20;

/// A size in bytes: fixed or drawn from a distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeDist {
    /// Always this many bytes.
    Fixed(usize),
    /// Uniform integer in `lo..=hi`.
    Uniform { lo: usize, hi: usize },
    /// One of Facebook ETC's published size distributions (keys or values).
    Etc(EtcSize),
}

impl SizeDist {
    /// Smallest and largest size it can produce.
    pub fn bounds(&self) -> (usize, usize) {
        match *self {
            SizeDist::Fixed(n) => (n, n),
            SizeDist::Uniform { lo, hi } => (lo, hi),
            SizeDist::Etc(e) => e.bounds(),
        }
    }

    fn sample(&self, rng: &mut impl Rng) -> usize {
        match *self {
            SizeDist::Fixed(n) => n,
            SizeDist::Uniform { lo, hi } => rng.gen_range(lo..=hi),
            // `gen` is in [0, 1); 1 − it is in (0, 1], and the quantiles need (0, 1).
            SizeDist::Etc(e) => e.from_uniform((1.0 - rng.gen::<f64>()).min(1.0 - f64::EPSILON)),
        }
    }

    /// Mean of the distribution (exact but for ETC values; see [`EtcSize::mean`]).
    pub fn mean(&self) -> f64 {
        match *self {
            SizeDist::Etc(e) => e.mean(),
            _ => {
                let (lo, hi) = self.bounds();
                (lo + hi) as f64 / 2.0
            }
        }
    }

    /// P(size ≤ k), exactly.
    pub fn cdf(&self, k: usize) -> f64 {
        match *self {
            SizeDist::Fixed(n) => f64::from(u8::from(k >= n)),
            SizeDist::Uniform { lo, hi } => {
                ((k.min(hi) + 1).saturating_sub(lo)) as f64 / (hi - lo + 1) as f64
            }
            SizeDist::Etc(e) => e.cdf(k),
        }
    }

    /// This distribution for keys (`etc` means ETC's key sizes).
    pub fn for_keys(self) -> SizeDist {
        match self {
            SizeDist::Etc(_) => SizeDist::Etc(EtcSize::Key),
            d => d,
        }
    }

    /// This distribution for values (`etc` means ETC's value sizes).
    pub fn for_values(self) -> SizeDist {
        match self {
            SizeDist::Etc(_) => SizeDist::Etc(EtcSize::Value),
            d => d,
        }
    }
}

impl FromStr for SizeDist {
    type Err = LoadError;
    fn from_str(s: &str) -> Result<Self, LoadError> {
        let bad = || {
            LoadError::Config(format!(
                "bad size '{s}' (write N, fixed:N or uniform:LO,HI)"
            ))
        };
        let n = |t: &str| t.trim().parse::<usize>().map_err(|_| bad());
        let d = match s.split_once(':') {
            // Keys until placed: `for_values` turns it into ETC's value sizes.
            None if s == "etc" => SizeDist::Etc(EtcSize::Key),
            None => SizeDist::Fixed(n(s)?),
            Some(("fixed", v)) => SizeDist::Fixed(n(v)?),
            Some(("uniform", v)) => {
                let (lo, hi) = v.split_once(',').ok_or_else(bad)?;
                let (lo, hi) = (n(lo)?, n(hi)?);
                if lo > hi {
                    return Err(bad());
                }
                SizeDist::Uniform { lo, hi }
            }
            _ => return Err(bad()),
        };
        Ok(d)
    }
}

impl fmt::Display for SizeDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeDist::Fixed(n) => write!(f, "fixed:{n}"),
            SizeDist::Uniform { lo, hi } => write!(f, "uniform:{lo},{hi}"),
            SizeDist::Etc(_) => f.write_str("etc"),
        }
    }
}

/// Which items requests ask for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Popularity {
    /// Every item equally likely.
    Uniform,
    /// Zipf with exponent S ≥ 0 over item ranks (item 0 the most popular).
    Zipf(f64),
}

impl FromStr for Popularity {
    type Err = LoadError;
    fn from_str(s: &str) -> Result<Self, LoadError> {
        let bad = || LoadError::Config(format!("bad popularity '{s}' (write uniform or zipf:S)"));
        match s.split_once(':') {
            None if s == "uniform" => Ok(Popularity::Uniform),
            Some(("zipf", v)) => {
                let e: f64 = v.trim().parse().map_err(|_| bad())?;
                if !(e.is_finite() && e >= 0.0) {
                    return Err(bad());
                }
                Ok(Popularity::Zipf(e))
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Popularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Popularity::Uniform => f.write_str("uniform"),
            Popularity::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

/// A key-value workload (memcached, Redis).
#[derive(Clone, Debug, PartialEq)]
pub struct KvWorkload {
    /// Fraction of requests that are `get` (the rest are `set`); Tales uses 0.9.
    pub get_ratio: f64,
    /// Key size of each item (Tales: 64).
    pub key_size: SizeDist,
    /// Value size of each `set` (Tales: 1024).
    pub value_size: SizeDist,
    /// Items in the key space (item numbers 0..items).
    pub items: u64,
    /// Which items requests ask for.
    pub popularity: Popularity,
}

impl Default for KvWorkload {
    /// Tales of the Tail §4: 90 % gets, 64-byte keys, 1024-byte values; 10 000 items,
    /// uniform popularity.
    fn default() -> Self {
        KvWorkload {
            get_ratio: 0.9,
            key_size: SizeDist::Fixed(64),
            value_size: SizeDist::Fixed(1024),
            items: 10_000,
            popularity: Popularity::Uniform,
        }
    }
}

/// An HTTP workload: GETs of a set of paths.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpWorkload {
    /// Paths (each starting with `/`); path k has popularity rank k+1.
    pub paths: Vec<String>,
    /// Which paths requests ask for.
    pub popularity: Popularity,
}

/// Null-RPC requests to the built-in server: a fixed size, with or without its stage stamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NullRpcWorkload {
    /// Request frame length in bytes (header included), `wire::nullrpc::HEADER_LEN..=MAX_FRAME`.
    pub request_size: usize,
    /// Ask the server for its T1..T6 stamps (and the T6 follow-up).
    pub stamps: bool,
}

impl Default for NullRpcWorkload {
    fn default() -> Self {
        NullRpcWorkload {
            request_size: wire::nullrpc::DEFAULT_REQUEST_LEN,
            stamps: true,
        }
    }
}

/// gRPC unary calls: one method, the same request message every time.
#[derive(Clone, PartialEq, Eq)]
pub struct GrpcWorkload {
    /// The call's path, `/package.Service/Method`.
    pub path: String,
    /// The request message's protobuf bytes (without gRPC's 5-byte prefix).
    pub message: Vec<u8>,
    /// Custom metadata sent with every call (`--metadata KEY:VALUE`): header names in lower
    /// case, values printable ASCII.
    pub metadata: Vec<(String, String)>,
}

/// The path, the message's length and its first 32 bytes in hex: what a stored run's
/// configuration keeps of it (a 64 KiB message is not written out as a list of numbers).
impl fmt::Debug for GrpcWorkload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex: String = self
            .message
            .iter()
            .take(32)
            .map(|b| format!("{b:02x}"))
            .collect();
        let more = if self.message.len() > 32 { "…" } else { "" };
        write!(
            f,
            "GrpcWorkload {{ path: {:?}, message: {} bytes {hex}{more}, metadata: {:?} }}",
            self.path,
            self.message.len(),
            self.metadata
        )
    }
}

/// What the requests of a run ask for.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    Kv(KvWorkload),
    Http(HttpWorkload),
    NullRpc(NullRpcWorkload),
    Grpc(GrpcWorkload),
}

/// One request drawn from a key-value workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvOp {
    Get { item: u64 },
    Set { item: u64, value_len: usize },
}

fn digits(n: u64) -> usize {
    n.max(1).ilog10() as usize + 1
}

impl KvWorkload {
    /// Checks the workload (sizes within limits, keys long enough for the item count).
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Config(m));
        if !(0.0..=1.0).contains(&self.get_ratio) {
            return bad(format!(
                "get ratio must be in [0, 1], got {}",
                self.get_ratio
            ));
        }
        if self.items == 0 {
            return bad("the workload needs at least one item".into());
        }
        let (klo, khi) = self.key_dist().bounds();
        let need = digits(self.items - 1);
        if klo < need || khi > MAX_KEY_SIZE {
            return bad(format!(
                "key sizes must be in {need}..={MAX_KEY_SIZE} for {} items, got {}",
                self.items, self.key_size
            ));
        }
        if self.value_dist().bounds().1 > MAX_VALUE_SIZE {
            return bad(format!(
                "value sizes must be at most {MAX_VALUE_SIZE}, got {}",
                self.value_size
            ));
        }
        if let Popularity::Zipf(s) = self.popularity {
            if !(s.is_finite() && s >= 0.0) {
                return bad(format!("zipf exponent must be >= 0, got {s}"));
            }
        }
        Ok(())
    }

    /// The key sizes' distribution (`etc` read as ETC's key sizes).
    pub fn key_dist(&self) -> SizeDist {
        self.key_size.for_keys()
    }

    /// The value sizes' distribution (`etc` read as ETC's value sizes).
    pub fn value_dist(&self) -> SizeDist {
        self.value_size.for_values()
    }

    /// Key size of `item` (a pure function of the item number).
    pub fn key_size_of(&self, item: u64) -> usize {
        match self.key_dist() {
            SizeDist::Fixed(n) => n,
            d => d.sample(&mut Xoshiro256PlusPlus::seed_from_u64(mix_seed(
                0x6b6579, item,
            ))),
        }
    }

    /// Appends the key of `item` to `out`.
    pub fn write_key(&self, item: u64, out: &mut Vec<u8>) {
        let size = self.key_size_of(item);
        let d = digits(item);
        if size >= 4 + d {
            out.extend_from_slice(b"key:");
            out.extend_from_slice(format!("{item:0w$}", w = size - 4).as_bytes());
        } else {
            out.extend_from_slice(format!("{item:0w$}", w = size).as_bytes());
        }
    }

    /// Draws a value size.
    pub fn value_len(&self, rng: &mut impl Rng) -> usize {
        self.value_dist().sample(rng)
    }
}

/// Draws items 0..n with uniform or Zipf popularity.
#[derive(Clone, Debug)]
pub(crate) struct ItemPicker {
    n: u64,
    zipf: Option<Zipf<f64>>,
}

impl ItemPicker {
    pub(crate) fn new(n: u64, pop: Popularity) -> Result<Self, LoadError> {
        let zipf = match pop {
            Popularity::Uniform => None,
            Popularity::Zipf(s) => Some(
                Zipf::new(n.max(1), s)
                    .map_err(|e| LoadError::Config(format!("zipf:{s} over {n} items: {e}")))?,
            ),
        };
        Ok(ItemPicker { n: n.max(1), zipf })
    }

    pub(crate) fn pick(&self, rng: &mut impl Rng) -> u64 {
        match &self.zipf {
            // Zipf samples ranks 1..=n as floats.
            Some(z) => (z.sample(rng) as u64).clamp(1, self.n) - 1,
            None => rng.gen_range(0..self.n),
        }
    }
}

/// The request stream of one connection of a key-value workload.
#[derive(Clone, Debug)]
pub struct WorkloadGen {
    w: Arc<KvWorkload>,
    picker: ItemPicker,
    rng: Xoshiro256PlusPlus,
}

impl WorkloadGen {
    /// A stream for one connection; `seed` should differ per connection.
    pub fn new(w: Arc<KvWorkload>, seed: u64) -> Result<Self, LoadError> {
        w.validate()?;
        let picker = ItemPicker::new(w.items, w.popularity)?;
        Ok(WorkloadGen {
            w,
            picker,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        })
    }

    /// The workload this stream draws from.
    pub fn workload(&self) -> &KvWorkload {
        &self.w
    }

    /// The next request.
    pub fn next_op(&mut self) -> KvOp {
        let is_get = self.rng.gen::<f64>() < self.w.get_ratio;
        let item = self.picker.pick(&mut self.rng);
        if is_get {
            KvOp::Get { item }
        } else {
            KvOp::Set {
                item,
                value_len: self.w.value_len(&mut self.rng),
            }
        }
    }
}

/// The path stream of one HTTP connection.
#[derive(Clone, Debug)]
pub struct PathGen {
    paths: Arc<Vec<String>>,
    picker: ItemPicker,
    rng: Xoshiro256PlusPlus,
}

impl PathGen {
    /// A stream for one connection; `seed` should differ per connection.
    pub fn new(w: &HttpWorkload, seed: u64) -> Result<Self, LoadError> {
        if w.paths.is_empty() {
            return Err(LoadError::Config(
                "the HTTP workload needs at least one path".into(),
            ));
        }
        if let Some(p) = w.paths.iter().find(|p| !p.starts_with('/')) {
            return Err(LoadError::Config(format!(
                "HTTP path '{p}' must start with '/'"
            )));
        }
        Ok(PathGen {
            paths: Arc::new(w.paths.clone()),
            picker: ItemPicker::new(w.paths.len() as u64, w.popularity)?,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        })
    }

    /// The next path.
    pub fn next_path(&mut self) -> &str {
        let k = self.picker.pick(&mut self.rng) as usize;
        &self.paths[k.min(self.paths.len() - 1)]
    }
}

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
