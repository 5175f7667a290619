//! TLS to the tier's Redis (`--kv-store rediss://...`): `--kv-store-ca-file`, the CA bundle
//! trusted for Redis's certificate (default: the system's trust store), and the optional
//! client certificate `--kv-store-client-cert-file` + `--kv-store-client-key-file` for a
//! Redis run with `tls-auth-clients yes`. Read and checked once, at start.

use crate::server::error::ServerError;
use redis::{ClientTlsConfig, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;

/// The tier's TLS files, as given on the command line.
#[derive(Clone, Copy, Debug, Default)]
pub struct TlsFiles<'a> {
    /// `--kv-store-ca-file`.
    pub ca: Option<&'a Path>,
    /// `--kv-store-client-cert-file`.
    pub cert: Option<&'a Path>,
    /// `--kv-store-client-key-file`.
    pub key: Option<&'a Path>,
}

fn unreadable(flag: &str, path: &Path, why: impl std::fmt::Display) -> ServerError {
    ServerError::Config(format!("{flag} {}: {why}", path.display()))
}

/// Reads a PEM file of certificates (at least one) named by `flag`.
fn certificates(flag: &str, path: &Path) -> Result<Vec<u8>, ServerError> {
    let bytes = std::fs::read(path).map_err(|e| unreadable(flag, path, e))?;
    let n = CertificateDer::pem_slice_iter(&bytes)
        .try_fold(0usize, |n, c| c.map(|_| n + 1))
        .map_err(|e| unreadable(flag, path, format!("not PEM certificates: {e}")))?;
    if n == 0 {
        return Err(unreadable(flag, path, "holds no PEM CERTIFICATE block"));
    }
    Ok(bytes)
}

/// Reads a PEM private key named by `flag`.
fn private_key(flag: &str, path: &Path) -> Result<Vec<u8>, ServerError> {
    let bytes = std::fs::read(path).map_err(|e| unreadable(flag, path, e))?;
    PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|e| unreadable(flag, path, format!("no PEM private key: {e}")))?;
    Ok(bytes)
}

impl TlsFiles<'_> {
    /// The certificates for a `rediss://` tier: `None` when no file is given (the system's
    /// trust store verifies Redis). The flags' combinations are checked by
    /// `ServeArgs::validate`.
    pub fn load(&self) -> Result<Option<TlsCertificates>, ServerError> {
        let root_cert = self
            .ca
            .map(|p| certificates("--kv-store-ca-file", p))
            .transpose()?;
        let client_tls = match (self.cert, self.key) {
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: certificates("--kv-store-client-cert-file", cert)?,
                client_key: private_key("--kv-store-client-key-file", key)?,
            }),
            _ => None,
        };
        let any = root_cert.is_some() || client_tls.is_some();
        Ok(any.then_some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PEM envelopes (what is checked here; the handshake checks the contents). The key is
    /// SEC1 (`openssl ecparam -genkey`'s form); PKCS#8 and PKCS#1 read the same way.
    const KEY: &str = "-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\n";
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n";

    #[test]
    fn the_files_are_read_as_pem_of_their_kind_and_errors_name_the_flag() {
        let dir = std::env::temp_dir().join(format!("wp-tier-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, key, junk) = (dir.join("ca.pem"), dir.join("key.pem"), dir.join("junk"));
        std::fs::write(&ca, CERT).unwrap();
        std::fs::write(&key, KEY).unwrap();
        std::fs::write(&junk, "junk\n").unwrap();
        assert!(TlsFiles::default().load().unwrap().is_none());
        let both = TlsFiles {
            ca: Some(&ca),
            cert: Some(&ca),
            key: Some(&key),
        };
        let certs = both.load().unwrap().expect("certificates");
        assert_eq!(certs.root_cert.as_deref(), Some(CERT.as_bytes()));
        assert!(certs.client_tls.is_some());
        let missing = dir.join("missing.pem");
        // (the files, what the error must name)
        let cases = [
            (
                TlsFiles {
                    ca: Some(&junk),
                    ..both
                },
                ["--kv-store-ca-file", "CERTIFICATE"],
            ),
            (
                TlsFiles {
                    key: Some(&ca),
                    ..both
                },
                ["--kv-store-client-key-file", "private key"],
            ),
            (
                TlsFiles {
                    cert: Some(&missing),
                    ..both
                },
                ["--kv-store-client-cert-file", "missing.pem"],
            ),
        ];
        for (files, named) in cases {
            let e = files.load().unwrap_err().to_string();
            assert!(named.iter().all(|n| e.contains(n)), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
