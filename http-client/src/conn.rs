//! One HTTP/1.1 connection: connect, and the request as sent.

use crate::addr::Addr;
use crate::error::ClientError;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST};
use http::Method;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// An extra request header.
pub type Header = (http::HeaderName, http::HeaderValue);

/// The sending half of a connection.
pub(crate) type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// A sender on a new connection to `addr`; the connection task ends when the sender and
/// the last response body are dropped.
pub(crate) async fn connect(addr: &Addr) -> Result<Sender, ClientError> {
    let stream = TcpStream::connect(addr.authority()).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "http client connection ended");
        }
    });
    Ok(sender)
}

/// `method path` to `addr` with `extra` headers (`Accept: */*` unless they name one); a
/// body is sent as JSON (unless they name a content type).
pub(crate) fn build(
    addr: &Addr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
    extra: &[Header],
) -> Result<http::Request<Full<Bytes>>, ClientError> {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, addr.authority());
    let named = |h: &http::HeaderName| extra.iter().any(|(k, _)| k == h);
    if !named(&ACCEPT) {
        req = req.header(ACCEPT, "*/*");
    }
    for (k, v) in extra {
        req = req.header(k, v);
    }
    if body.is_some() && !named(&CONTENT_TYPE) {
        req = req.header(CONTENT_TYPE, "application/json");
    }
    req.body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default())))
        .map_err(|e| ClientError::Protocol(e.to_string()))
}
