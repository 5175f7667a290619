//! Upstream connections: Pingora's own, each wrapped in [`Coalesce`] so a request header
//! leaves together with its body.
//!
//! Pingora 0.8 lets a proxy bring a connector for peers whose ALPN is custom; a connector
//! that answers with a plain stream gets an ordinary HTTP/1 session over it, pooled and
//! reused by Pingora exactly like its own (the pool keys idle connections by file
//! descriptor, which the wrapper passes through). [`Connector`] opens connections with
//! Pingora's [`TransportConnector`] (timeouts, socket options as for any peer) and wraps
//! them; [`mark`] sets the ALPN that sends a peer through it.

pub(crate) mod coalesce;
pub(crate) mod framing;

pub(crate) use coalesce::Coalesce;

use async_trait::async_trait;
use pingora_core::connectors::http::custom::{self, Connection};
use pingora_core::connectors::TransportConnector;
use pingora_core::protocols::tls::CustomALPN;
use pingora_core::protocols::ALPN;
use pingora_core::upstreams::peer::{HttpPeer, Peer};
use std::sync::OnceLock;
use std::time::Duration;

/// The ALPN name that routes a peer through [`Connector`]. Nothing is negotiated on a
/// plaintext connection; the name only selects the connector.
const PROTOCOL: &[u8] = b"warmpath-h1";

/// Sends `peer` through [`Connector`].
pub fn mark(peer: &mut HttpPeer) {
    static ALPN_CUSTOM: OnceLock<CustomALPN> = OnceLock::new();
    peer.options.alpn = ALPN::Custom(
        ALPN_CUSTOM
            .get_or_init(|| CustomALPN::new(PROTOCOL.to_vec()))
            .clone(),
    );
}

/// Opens upstream connections and wraps them in [`Coalesce`]. Pingora looks in its own
/// HTTP/1 pool first and asks this connector only for a new connection.
pub struct Connector {
    transport: TransportConnector,
}

impl Connector {
    /// A connector (its pool is never used: connections are pooled by Pingora's HTTP/1
    /// connector, which hands them back).
    pub fn new() -> Self {
        Self {
            transport: TransportConnector::new(None),
        }
    }
}

impl Default for Connector {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl custom::Connector for Connector {
    // Never made: every connection is answered as a stream for an HTTP/1 session.
    type Session = ();

    async fn get_http_session<P: Peer + Send + Sync + 'static>(
        &self,
        peer: &P,
    ) -> pingora_error::Result<(Connection<()>, bool)> {
        let stream = self.transport.new_stream(peer).await?;
        // Cut at the end of a shutdown's grace period (`crate::proxy::drain`).
        let stream = Box::new(crate::proxy::drain::CutStream::new(
            stream,
            &crate::proxy::drain::DRAIN,
        ));
        Ok((Connection::Stream(Box::new(Coalesce::new(stream))), false))
    }

    async fn reused_http_session<P: Peer + Send + Sync + 'static>(&self, _peer: &P) -> Option<()> {
        None
    }

    async fn release_http_session<P: Peer + Send + Sync + 'static>(
        &self,
        _session: (),
        _peer: &P,
        _idle_timeout: Option<Duration>,
    ) {
    }
}
