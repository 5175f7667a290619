//! `state:`'s TLS to Redis (`rediss://`): `ca_file`, the CA bundle the gateway trusts, and
//! the optional client certificate `client_cert_file` + `client_key_file` (mutual TLS).
//! Checked when the config loads (readable PEM of the right kind) and read again at every
//! connect, so renewed files are picked up by the next connection.

use super::error::ConfigError;
use redis::{ClientTlsConfig, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// What kind of PEM a file must hold.
#[derive(Clone, Copy)]
enum Pem {
    Certificates,
    PrivateKey,
}

/// Reads `path` (the value of `state.{key}`) and checks it holds `kind`; the error is the
/// reason, without the key.
fn read_pem(path: &str, kind: Pem) -> Result<Vec<u8>, String> {
    if path.is_empty() {
        return Err("must be a path".into());
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    match kind {
        Pem::Certificates => {
            let certs = CertificateDer::pem_slice_iter(&bytes)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{path}: not PEM certificates: {e}"))?;
            if certs.is_empty() {
                return Err(format!("{path}: holds no PEM CERTIFICATE block"));
            }
        }
        Pem::PrivateKey => {
            PrivateKeyDer::from_pem_slice(&bytes)
                .map_err(|e| format!("{path}: no PEM private key: {e}"))?;
        }
    }
    Ok(bytes)
}

/// The TLS files `state:` names (`ca_file`, `client_cert_file`, `client_key_file`).
pub(crate) struct TlsFiles<'a> {
    /// `state.ca_file`.
    pub ca_file: Option<&'a str>,
    /// `state.client_cert_file`.
    pub client_cert_file: Option<&'a str>,
    /// `state.client_key_file`.
    pub client_key_file: Option<&'a str>,
}

impl TlsFiles<'_> {
    /// The keys set, with what each must hold.
    fn each(&self) -> [(&'static str, Option<&str>, Pem); 3] {
        [
            ("ca_file", self.ca_file, Pem::Certificates),
            ("client_cert_file", self.client_cert_file, Pem::Certificates),
            ("client_key_file", self.client_key_file, Pem::PrivateKey),
        ]
    }
}

fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: format!("state.{key}"),
        reason: reason.into(),
    }
}

/// Checks the TLS keys against the address: `tls` is whether it is `rediss://`.
pub(super) fn validate(files: &TlsFiles<'_>, tls: bool) -> Result<(), ConfigError> {
    if files.client_cert_file.is_some() != files.client_key_file.is_some() {
        return Err(invalid(
            "client_cert_file",
            "set both `client_cert_file` and `client_key_file` (mutual TLS), or neither",
        ));
    }
    for (key, path, kind) in files.each() {
        let Some(path) = path else { continue };
        if !tls {
            return Err(invalid(
                key,
                "is set but Redis is addressed with redis:// (plain text): use rediss://",
            ));
        }
        read_pem(path, kind).map_err(|reason| invalid(key, reason))?;
    }
    Ok(())
}

/// The CA and client certificate of `files`, read now; `None` when no file is set (then
/// the system's trust store verifies Redis).
pub(crate) fn certificates(files: &TlsFiles<'_>) -> redis::RedisResult<Option<TlsCertificates>> {
    if files.each().iter().all(|(_, path, _)| path.is_none()) {
        return Ok(None);
    }
    let read = |key: &'static str, path: Option<&str>, kind| {
        path.map(|p| {
            read_pem(p, kind).map_err(|reason| {
                redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "state TLS file unreadable",
                    format!("state.{key}: {reason}"),
                ))
            })
        })
        .transpose()
    };
    let [ca, cert, key] = files.each();
    let root_cert = read(ca.0, ca.1, ca.2)?;
    let client_cert = read(cert.0, cert.1, cert.2)?;
    let client_key = read(key.0, key.1, key.2)?;
    let client_tls = client_cert
        .zip(client_key)
        .map(|(client_cert, client_key)| ClientTlsConfig {
            client_cert,
            client_key,
        });
    Ok(Some(TlsCertificates {
        client_tls,
        root_cert,
    }))
}

#[cfg(test)]
mod tests {
    use crate::config::StateConfig;

    /// PEM envelopes (what the config check reads; the handshake checks the contents).
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

    fn parse(yaml: &str) -> Result<StateConfig, String> {
        let c: StateConfig = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    struct Files(std::path::PathBuf);

    impl Files {
        fn new(tag: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("wp-state-tls-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("ca.pem"), CERT).unwrap();
            std::fs::write(dir.join("cert.pem"), CERT).unwrap();
            std::fs::write(dir.join("key.pem"), KEY).unwrap();
            std::fs::write(dir.join("empty.pem"), "not a certificate\n").unwrap();
            Self(dir)
        }

        fn path(&self, name: &str) -> String {
            self.0.join(name).display().to_string()
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn tls_files_need_rediss_and_readable_pem_of_their_kind() {
        let f = Files::new("check");
        let (ca, cert, key) = (f.path("ca.pem"), f.path("cert.pem"), f.path("key.pem"));
        let (missing, empty) = (f.path("missing.pem"), f.path("empty.pem"));
        let tls = "backend: redis, url: 'rediss://a:1'";
        // (state: pairs, what the error must name)
        let cases = [
            (format!("backend: redis, url: 'redis://a:1', ca_file: '{ca}'"), vec!["state.ca_file", "rediss://"]),
            (format!("ca_file: '{ca}'"), vec!["state.backend"]),
            (format!("{tls}, ca_file: '{missing}'"), vec!["state.ca_file", &missing]),
            (format!("{tls}, ca_file: '{empty}'"), vec!["state.ca_file", "CERTIFICATE"]),
            (format!("{tls}, client_cert_file: '{cert}'"), vec!["client_key_file"]),
            (
                format!("{tls}, client_cert_file: '{cert}', client_key_file: '{cert}'"),
                vec!["state.client_key_file", "private key"],
            ),
            (
                format!("backend: redis, cluster: ['redis://a:1'], client_cert_file: '{cert}', client_key_file: '{key}'"),
                vec!["state.client_cert_file", "rediss://"],
            ),
        ];
        for (pairs, named) in cases {
            let e = parse(&format!("{{{pairs}}}")).unwrap_err();
            assert!(named.iter().all(|n| e.contains(n)), "{pairs}: {e}");
        }
    }

    #[test]
    fn rediss_reads_the_ca_and_the_client_pair_at_connect() {
        let f = Files::new("read");
        let (ca, cert, key) = (f.path("ca.pem"), f.path("cert.pem"), f.path("key.pem"));
        let plain = parse("{backend: redis, url: 'rediss://a:1'}").unwrap();
        assert!(plain.tls_certificates().unwrap().is_none(), "system roots");
        let yaml = format!(
            "{{backend: redis, cluster: ['rediss://a:1', 'rediss://b:2'], ca_file: '{ca}', \
             client_cert_file: '{cert}', client_key_file: '{key}'}}"
        );
        let c = parse(&yaml).unwrap();
        let certs = c.tls_certificates().unwrap().expect("certificates");
        assert_eq!(certs.root_cert.as_deref(), Some(CERT.as_bytes()));
        let client = certs.client_tls.expect("client pair");
        assert_eq!(client.client_key, KEY.as_bytes());
        std::fs::remove_file(&ca).unwrap();
        let e = c.tls_certificates().unwrap_err().to_string();
        assert!(e.contains("state.ca_file") && e.contains(&ca), "{e}");
    }
}
