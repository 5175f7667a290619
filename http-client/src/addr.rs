//! Where a request goes: [`Addr`] (`host:port`) and [`Endpoint`] (an `http://` URL: an
//! address and a base path).

use crate::error::ClientError;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

/// A server's `host:port`; the host is a name or an IP (an IPv6 one in brackets).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Addr {
    /// Host name or IP.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Addr {
    /// `host`, `port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }

    /// `host:port` (also the `Host` header sent).
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl From<SocketAddr> for Addr {
    fn from(a: SocketAddr) -> Self {
        match a {
            SocketAddr::V4(v4) => Self::new(v4.ip().to_string(), v4.port()),
            SocketAddr::V6(v6) => Self::new(format!("[{}]", v6.ip()), v6.port()),
        }
    }
}

impl FromStr for Addr {
    type Err = ClientError;

    /// Parses `host:port`.
    fn from_str(s: &str) -> Result<Self, ClientError> {
        let bad = || ClientError::Url(format!("{s:?}: not host:port"));
        let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
        let port = port.parse().map_err(|_| bad())?;
        if host.is_empty() || host.contains('/') {
            return Err(bad());
        }
        Ok(Self::new(host, port))
    }
}

/// An `http://host[:port][/base]` URL: where to connect, and the path every request's path
/// is appended to (a load generator's `--endpoint`, a prefill replica's URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Where to connect (port 80 when the URL names none).
    pub addr: Addr,
    /// The URL's path without its trailing `/` (empty for none).
    pub base: String,
}

impl Endpoint {
    /// Parses a plain `http://` URL; `https://` (no TLS here), a query and userinfo are
    /// refused.
    pub fn parse(url: &str) -> Result<Self, ClientError> {
        let bad = |why: &str| ClientError::Url(format!("{url:?}: {why}"));
        let uri: http::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(bad("only http:// URLs are supported"));
        }
        let auth = uri.authority().ok_or_else(|| bad("no host"))?;
        if auth.as_str().contains('@') {
            return Err(bad("userinfo is not supported"));
        }
        if uri.query().is_some() {
            return Err(bad("a base URL has no query"));
        }
        let host = auth.host();
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match auth.port_u16() {
            Some(p) => p,
            None if auth.as_str() == host => 80,
            None => return Err(bad("bad port")),
        };
        Ok(Self {
            addr: Addr::new(host, port),
            base: uri.path().trim_end_matches('/').to_string(),
        })
    }

    /// The request path for `path` (which starts with `/`) under the base path.
    pub fn path(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses_and_urls() {
        let a: Addr = "127.0.0.1:9000".parse().unwrap();
        assert_eq!((a.host.as_str(), a.port), ("127.0.0.1", 9000));
        assert_eq!(a.authority(), "127.0.0.1:9000");
        assert!("127.0.0.1".parse::<Addr>().is_err());
        assert!("x:port".parse::<Addr>().is_err());
        assert!(":80".parse::<Addr>().is_err());
        let v6 = Addr::from(SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 1], 7)));
        assert_eq!(v6.authority(), "[::1]:7");

        let e = Endpoint::parse("http://localhost:8080/").unwrap();
        assert_eq!(
            (e.addr.authority(), e.base.as_str()),
            ("localhost:8080".into(), "")
        );
        assert_eq!(e.path("/v1/models"), "/v1/models");
        let e = Endpoint::parse("http://gw.example/api/").unwrap();
        assert_eq!(e.addr, Addr::new("gw.example", 80));
        assert_eq!(e.path("/v1/models"), "/api/v1/models");
        let e = Endpoint::parse("http://[::1]:9/").unwrap();
        assert_eq!(e.addr.authority(), "[::1]:9");
        for bad in [
            "https://x:1",
            "x:1",
            "http://u:p@x:1",
            "http://x:1/?a=b",
            "http://x:bad",
        ] {
            assert!(
                matches!(Endpoint::parse(bad), Err(ClientError::Url(_))),
                "{bad}"
            );
        }
    }
}
