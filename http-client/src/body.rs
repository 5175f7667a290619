//! What comes back: [`BodyStream`] (headers and a body read as it arrives) and
//! [`Response`] (the whole body).

use crate::conn::Sender;
use crate::error::ClientError;
use crate::idle::Idle;
use bytes::Bytes;
use http::HeaderMap;
use http_body_util::BodyExt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The largest body read whole ([`Response`]): a tokenizer spec is a few MB.
pub const MAX_BODY: usize = 256 * 1024 * 1024;

/// The response `opened` gives with its whole body (at most [`MAX_BODY`] bytes), all
/// within `timeout`.
pub(crate) async fn whole_within(
    timeout: Duration,
    opened: impl Future<Output = Result<(u16, BodyStream), ClientError>>,
) -> Result<Response, ClientError> {
    let fut = async {
        let (status, stream) = opened.await?;
        stream.into_response(status, MAX_BODY).await
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| ClientError::Timeout)?
}

/// An open response: its headers, and its body read incrementally. Dropping it before the
/// end closes the connection.
pub struct BodyStream {
    headers: HeaderMap,
    body: hyper::body::Incoming,
    /// A pooled connection goes back to its pool when the body ends.
    recycle: Option<(Sender, Arc<Idle>)>,
}

impl std::fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyStream")
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

impl BodyStream {
    /// The body of `resp`; `recycle` is the pool its connection returns to at the end.
    pub(crate) fn new(
        resp: http::Response<hyper::body::Incoming>,
        recycle: Option<(Sender, Arc<Idle>)>,
    ) -> (u16, Self) {
        let status = resp.status().as_u16();
        let (parts, body) = resp.into_parts();
        let stream = Self {
            headers: parts.headers,
            body,
            recycle,
        };
        (status, stream)
    }

    /// The response headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The first header `name`, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The next piece of body as it arrived, or `None` at the end. Cancel-safe: a dropped
    /// call loses nothing.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        while let Some(frame) = self.body.frame().await {
            // Trailers carry nothing a caller reads.
            if let Ok(data) = frame?.into_data() {
                return Ok(Some(data));
            }
        }
        if let Some((sender, idle)) = self.recycle.take() {
            idle.put(sender);
        }
        Ok(None)
    }

    /// Reads the rest of the body, failing past `limit` bytes.
    pub async fn read_all(mut self, limit: usize) -> Result<Vec<u8>, ClientError> {
        let mut out = Vec::new();
        while let Some(c) = self.next_chunk().await? {
            if out.len() + c.len() > limit {
                return Err(ClientError::Protocol(format!(
                    "body larger than {limit} bytes"
                )));
            }
            out.extend_from_slice(&c);
        }
        Ok(out)
    }

    /// The whole response, its body at most `limit` bytes.
    pub(crate) async fn into_response(
        self,
        status: u16,
        limit: usize,
    ) -> Result<Response, ClientError> {
        let headers = self.headers.clone();
        let body = self.read_all(limit).await?;
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// A response with its whole body.
#[derive(Clone, Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: HeaderMap,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Response {
    /// The response, or [`ClientError::Status`] when it is not a 2xx.
    pub fn success(self) -> Result<Self, ClientError> {
        if (200..300).contains(&self.status) {
            Ok(self)
        } else {
            Err(ClientError::Status(self.status))
        }
    }

    /// The body parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ClientError> {
        serde_json::from_slice(&self.body).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    /// The first header `name`, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}
