//! TLS under any TCP codec (`https://`, `h2://`): rustls's client connection sits between the
//! socket and the codec, so the codec still sees plaintext and the engine its own epoll loop.
//!
//! rustls (a well-kept crate) does the protocol; this module only builds its configuration
//! from the user's choices (`--insecure`, `--ca`, `--sni`) and counts the handshakes. A
//! handshake is not a request: connections opened before the run shake hands before its first
//! send, and every handshake is counted apart ([`TlsStats`]) with its time and whether it
//! resumed an earlier session. All connections of a run share one configuration, hence one
//! session cache: a reconnection resumes.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde::{Deserialize, Serialize};

use crate::error::LoadError;
use crate::target::Target;

/// What the user chose about TLS for a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsOptions {
    /// Accept any certificate (`--insecure`): signatures are still checked, the chain and the
    /// name are not. For test certificates; the run says so.
    #[serde(default)]
    pub insecure: bool,
    /// Trust the certificates of this PEM file (`--ca FILE`) instead of the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
    /// The name sent as SNI and checked against the certificate (`--sni NAME`; default the
    /// URL's host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// Every request on a connection of its own, with a full handshake: no session is resumed
    /// (`--tls-handshake-per-request`; the engine's churn of one request per connection).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handshake_per_request: bool,
    /// The CA certificates themselves (PEM), in place of `ca`'s file: how an agent on another
    /// host gets the coordinator's `--ca`.
    #[serde(skip)]
    pub ca_pem: Option<Vec<u8>>,
}

/// One run's client configuration and the server's name, shared by all its connections.
#[derive(Clone)]
pub struct TlsClient {
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) name: ServerName<'static>,
    /// The ALPN protocol the codec needs (`h2` for HTTP/2), refused when not agreed.
    pub(crate) need_alpn: Option<&'static [u8]>,
    /// The certificate is not checked (`--insecure`).
    pub(crate) insecure: bool,
    /// No session is resumed: every request shakes hands in full on its own connection.
    pub(crate) per_request: bool,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("name", &self.name)
            .field("alpn", &self.config.alpn_protocols)
            .finish()
    }
}

/// ring's provider. rustls deprecates it for lacking post-quantum key exchange; aws-lc-rs,
/// which has it, builds a large C library with cmake in every clean build (issue 36's CI
/// time). Handshakes are counted apart from the requests, so the key exchange does not enter
/// a request's latency; the record protection (AES-GCM, ChaCha20-Poly1305) is the same.
#[allow(deprecated)]
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsClient {
    /// The configuration for `target` (which must be a TLS target): TLS 1.3 and 1.2, the
    /// ALPN its codec speaks, the roots the options name. A bad CA file is an error here,
    /// before anything starts.
    pub fn new(target: &Target, opts: &TlsOptions) -> Result<TlsClient, LoadError> {
        let bad = |reason: String| LoadError::Config(reason);
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| bad(format!("TLS: {e}")))?;
        let mut config = if opts.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth()
        } else {
            builder
                .with_root_certificates(roots(opts)?)
                .with_no_client_auth()
        };
        let (alpn, need_alpn): (&[u8], Option<&'static [u8]>) = match target.scheme.as_str() {
            "h2c" | "grpc" => (b"h2", Some(b"h2")),
            "http" => (b"http/1.1", None),
            _ => (b"", None),
        };
        if !alpn.is_empty() {
            config.alpn_protocols = vec![alpn.to_vec()];
        }
        if opts.handshake_per_request {
            config.resumption = rustls::client::Resumption::disabled();
        }
        let host = opts.server_name.as_deref().unwrap_or(&target.host);
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| bad(format!("TLS: '{host}' is not a valid server name")))?;
        Ok(TlsClient {
            config: Arc::new(config),
            name,
            need_alpn,
            insecure: opts.insecure,
            per_request: opts.handshake_per_request,
        })
    }

    /// A new client session with the run's configuration (its session cache: a session
    /// resumes when the cache holds a ticket of the server's).
    pub(crate) fn session(&self) -> Result<rustls::ClientConnection, rustls::Error> {
        rustls::ClientConnection::new(self.config.clone(), self.name.clone())
    }
}

/// The roots to trust: the PEM certificates given (`ca_pem`, else `ca`'s file), else the
/// system's (`/etc/ssl/certs`).
fn roots(opts: &TlsOptions) -> Result<RootCertStore, LoadError> {
    let mut store = RootCertStore::empty();
    let given = match (&opts.ca_pem, &opts.ca) {
        (Some(pem), _) => Some((
            "--ca (sent by the coordinator)".to_string(),
            CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>(),
        )),
        (None, Some(path)) => {
            let name = format!("--ca {}", path.display());
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| LoadError::Config(format!("{name}: {e}")))?
                .collect::<Result<Vec<_>, _>>();
            Some((name, certs))
        }
        (None, None) => None,
    };
    match given {
        Some((name, certs)) => {
            let certs = certs.map_err(|e| LoadError::Config(format!("{name}: {e}")))?;
            if certs.is_empty() {
                return Err(LoadError::Config(format!(
                    "{name}: no PEM certificate in the file"
                )));
            }
            for c in certs {
                store
                    .add(c)
                    .map_err(|e| LoadError::Config(format!("{name}: {e}")))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(LoadError::Config(
                    "TLS: no trusted certificates found on this host (install ca-certificates, \
                     or name one with --ca FILE, or pass --insecure for a test certificate)"
                        .into(),
                ));
            }
        }
    }
    Ok(store)
}

/// `--insecure`: any certificate chain and name is accepted; the handshake's signatures are
/// still verified with the provider's algorithms, so the session is a real one.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The handshakes of a run (or of one connection), counted apart from its requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsStats {
    /// Handshakes completed.
    pub handshakes: u64,
    /// Of them, those that resumed an earlier session (no certificate exchange).
    pub resumed: u64,
    /// Their total and longest time, ns (from the first byte sent to the handshake's end).
    pub handshake_ns_total: u64,
    pub handshake_ns_max: u64,
    /// What was agreed on the last handshake: `TLSv1_3`, the cipher suite, the ALPN protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpn: Option<String>,
    /// The certificate was not checked (`--insecure`).
    #[serde(default)]
    pub insecure: bool,
    /// Handshake times in µs by percentile (`p50`, `p90`, `p99`, `p99.9`), from a histogram
    /// of every handshake; filled when the run ends ([`TlsStats::finish`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub handshake_us: std::collections::BTreeMap<String, f64>,
    /// Each request had a connection and a full handshake of its own
    /// (`--tls-handshake-per-request`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_request: bool,
    /// Every handshake's time, µs (2 significant digits: ~20 KB, whatever the count).
    #[serde(skip)]
    hist: Option<Box<hdrhistogram::Histogram<u64>>>,
}

/// The longest handshake the histogram tells apart, µs (a minute); longer ones count as this.
const HANDSHAKE_MAX_US: u64 = 60_000_000;

impl TlsStats {
    /// Adds another connection's or thread's handshakes.
    pub fn add(&mut self, o: &TlsStats) {
        self.handshakes += o.handshakes;
        self.resumed += o.resumed;
        self.handshake_ns_total += o.handshake_ns_total;
        self.handshake_ns_max = self.handshake_ns_max.max(o.handshake_ns_max);
        if o.version.is_some() {
            self.version.clone_from(&o.version);
            self.cipher.clone_from(&o.cipher);
            self.alpn.clone_from(&o.alpn);
        }
        self.insecure |= o.insecure;
        self.per_request |= o.per_request;
        match (&mut self.hist, &o.hist) {
            // Same bounds on both: adding cannot fail.
            (Some(a), Some(b)) => {
                let _ = a.add(&**b);
            }
            (None, Some(b)) => self.hist = Some(b.clone()),
            // Percentiles without their histogram (an agent's, sent over the wire): a
            // quantile of the pooled handshakes lies between the shares' own, so the largest
            // is kept, an upper bound.
            (_, None) => {
                for (k, v) in &o.handshake_us {
                    let e = self.handshake_us.entry(k.clone()).or_insert(*v);
                    *e = e.max(*v);
                }
            }
        }
    }

    /// The handshakes' percentiles from their histogram (once every connection's is added).
    pub fn finish(&mut self) {
        if let Some(h) = &self.hist {
            for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)] {
                self.handshake_us
                    .insert(name.to_string(), h.value_at_quantile(q) as f64);
            }
        }
    }

    /// The mean handshake time, ns (0 without one).
    pub fn mean_ns(&self) -> f64 {
        if self.handshakes == 0 {
            0.0
        } else {
            self.handshake_ns_total as f64 / self.handshakes as f64
        }
    }

    /// One line for a person (two with `--insecure`): what was agreed, the handshakes and
    /// their time.
    pub fn line(&self) -> String {
        let version = self.version.as_deref().unwrap_or("TLS");
        let alpn = self
            .alpn
            .as_deref()
            .map(|a| format!(", ALPN {a}"))
            .unwrap_or_default();
        let unchecked = if self.insecure {
            "\nTLS: the server's certificate was NOT checked (--insecure)"
        } else {
            ""
        };
        let time = |ns: f64| {
            if ns >= 1e6 {
                format!("{:.1} ms", ns / 1e6)
            } else {
                format!("{:.0} µs", ns / 1e3)
            }
        };
        if self.per_request {
            let q = |k: &str| time(self.handshake_us.get(k).copied().unwrap_or(0.0) * 1e3);
            return format!(
                "TLS: {version}{alpn} · {} handshakes, {} resumed: p50 {}, p99 {}, max {}\nTLS: a connection and full handshake per request; each latency includes them{unchecked}",
                self.handshakes,
                self.resumed,
                q("p50"),
                q("p99"),
                time(self.handshake_ns_max as f64)
            );
        }
        format!(
            "TLS: {version}{alpn} · {} handshake(s) apart from the requests ({} resumed), mean {}, max {}{unchecked}",
            self.handshakes,
            self.resumed,
            time(self.mean_ns()),
            time(self.handshake_ns_max as f64)
        )
    }

    /// Records one finished handshake of `conn`, which took `ns`.
    pub(crate) fn record(&mut self, conn: &rustls::ClientConnection, ns: u64, client: &TlsClient) {
        self.handshakes += 1;
        if conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
            self.resumed += 1;
        }
        self.handshake_ns_total += ns;
        self.handshake_ns_max = self.handshake_ns_max.max(ns);
        if self.hist.is_none() {
            // Valid bounds (1 µs to a minute, 2 digits): cannot fail.
            self.hist = hdrhistogram::Histogram::new_with_bounds(1, HANDSHAKE_MAX_US, 2)
                .ok()
                .map(Box::new);
        }
        if let Some(h) = &mut self.hist {
            h.saturating_record((ns / 1_000).clamp(1, HANDSHAKE_MAX_US));
        }
        self.version = conn.protocol_version().map(|v| format!("{v:?}"));
        self.cipher = conn
            .negotiated_cipher_suite()
            .map(|s| format!("{:?}", s.suite()));
        self.alpn = conn
            .alpn_protocol()
            .map(|a| String::from_utf8_lossy(a).into_owned());
        self.insecure = client.insecure;
        self.per_request = client.per_request;
    }
}
