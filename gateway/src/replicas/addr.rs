//! Where a replica listens: `http://host:port`, parsed once at registration and in config
//! validation.

/// Where a replica listens, parsed from `http://host:port`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ReplicaAddr {
    /// Host name or IP.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl ReplicaAddr {
    /// Parses `http://host:port` (a trailing `/` is allowed; TLS is not supported).
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url:?}: only http:// replica URLs are supported"))?;
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') {
            return Err(format!("{url:?}: a replica URL has no path"));
        }
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("{url:?}: missing port"))?;
        let port: u16 = port.parse().map_err(|_| format!("{url:?}: bad port"))?;
        if host.is_empty() {
            return Err(format!("{url:?}: missing host"));
        }
        Ok(Self {
            host: host.to_string(),
            port,
        })
    }

    /// `host:port`.
    pub(crate) fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// `http://host:port`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.authority())
    }

    /// The address the HTTP client connects to.
    pub(crate) fn http(&self) -> warmpath_http::Addr {
        warmpath_http::Addr::new(self.host.clone(), self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_replica_urls() {
        let a = ReplicaAddr::parse("http://127.0.0.1:9000/").unwrap();
        assert_eq!(a.authority(), "127.0.0.1:9000");
        assert_eq!(a.http().authority(), a.authority());
        assert!(ReplicaAddr::parse("https://x:1").is_err());
        assert!(ReplicaAddr::parse("http://x").is_err());
        assert!(ReplicaAddr::parse("http://x:1/v1").is_err());
    }
}
