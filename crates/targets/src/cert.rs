//! A throwaway certificate authority and server certificate for a TLS server tailscope starts
//! (rcgen, a well-kept crate, makes both): the server presents the certificate, the client
//! trusts the CA's, so the handshake is verified as against a real deployment. Both live in the
//! server's temporary directory and go with it.

use std::net::Ipv4Addr;
use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

use crate::TargetError;

/// The CA's certificate (PEM), the server's certificate and its private key, in the server's
/// directory.
pub(crate) const CA_FILE: &str = "ca.pem";
pub(crate) const CERT_FILE: &str = "cert.pem";
pub(crate) const KEY_FILE: &str = "key.pem";

fn made(e: rcgen::Error) -> TargetError {
    TargetError::io(
        "making the server's TLS certificate",
        std::io::Error::other(e.to_string()),
    )
}

/// Writes a new CA and a server certificate for `localhost`, 127.0.0.1, ::1 and `listen`
/// (the container's address when there is one) into `dir`.
pub(crate) fn write_server_files(dir: &Path, listen: Ipv4Addr) -> Result<(), TargetError> {
    let ca_key = KeyPair::generate().map_err(made)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(made)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "tailscope throwaway CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).map_err(made)?;
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !listen.is_loopback() {
        names.push(listen.to_string());
    }
    let key = KeyPair::generate().map_err(made)?;
    let mut leaf = CertificateParams::new(names).map_err(made)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).map_err(made)?;
    for (name, text) in [
        (CA_FILE, ca_cert.pem()),
        (CERT_FILE, cert.pem()),
        (KEY_FILE, key.serialize_pem()),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| TargetError::io(format!("writing {}", path.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_hold_a_ca_a_certificate_it_signed_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        write_server_files(dir.path(), Ipv4Addr::LOCALHOST).unwrap();
        let read = |n| std::fs::read_to_string(dir.path().join(n)).unwrap();
        assert!(read(CA_FILE).starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(read(CERT_FILE).starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(read(KEY_FILE).contains("PRIVATE KEY-----"));
        assert_ne!(read(CA_FILE), read(CERT_FILE));
    }
}
