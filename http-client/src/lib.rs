//! The workspace's one outbound HTTP client: the gateway's control plane, the replica's
//! prefill/decode KV pull, the load generator, `warmpath up`'s readiness probes.
//!
//! HTTP/1.1 on hyper's connection-level client, plain `http://` only (no TLS). It never
//! follows a redirect: a 3xx comes back as a status like any other, so a caller decides
//! where it sends a request (a replica must not be steered to another host by a peer).
//!
//! - [`open`]/[`open_with`]: one request on a new connection; the status, headers and an
//!   open [`BodyStream`] read chunk by chunk as it arrives (event streams, SSE).
//! - [`fetch`], [`request`], [`post_json`], [`get_json`]: one exchange with a deadline and
//!   the whole body (at most [`MAX_BODY`] bytes) as a [`Response`].
//! - [`KeptAlive`]: one connection a poller reuses request after request.
//! - [`Pool`]: idle connections to one address reused by many concurrent requests.
//!
//! Addresses are [`Addr`] (`host:port`); an `http://` URL with a base path parses into an
//! [`Endpoint`]. Failures are a [`ClientError`].

mod addr;
mod body;
mod conn;
mod error;
mod idle;
mod kept;
mod oneshot;
mod pool;
#[cfg(test)]
mod testing;

pub use addr::{Addr, Endpoint};
pub use body::{BodyStream, Response, MAX_BODY};
pub use conn::Header;
pub use error::ClientError;
/// The `http` crate the API's types come from (methods, header names and values).
pub use http;
pub use kept::KeptAlive;
pub use oneshot::{
    fetch, get_json, open, open_with, open_with_connect_timeout, post_json, request,
};
pub use pool::Pool;
