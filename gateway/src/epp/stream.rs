//! One ext_proc stream (one HTTP request through Envoy) as a state machine: gather the
//! request body in the body mode in force, pick once it is whole, answer in the order the
//! mode requires (FULL_DUPLEX_STREAMED: the headers' answer with the destination, then the
//! body handed back as streamed chunks; BUFFERED: the headers at once, the destination on
//! the body's answer), then follow the response until the stream ends.

use super::follow::Follow;
use super::pick::{pick, Head};
use super::wire;
use crate::config::EppBodyMode;
use crate::error::GatewayError;
use crate::flow::request::{PRIORITY_HEADER, SLO_HEADER};
use crate::state::AppState;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    processing_request::Request, processing_response, HttpHeaders, ProcessingRequest,
    ProcessingResponse, TrailersResponse,
};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

/// Largest body chunk handed back in one streamed message (the reference EPP's 62 000, below
/// gRPC's default 4 MiB message bound with room to spare).
const CHUNK: usize = 62_000;

/// Envoy's `BodySendMode` values this picker distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `FULL_DUPLEX_STREAMED`: no answer until the picker chooses to send one.
    Duplex,
    /// `BUFFERED` / `BUFFERED_PARTIAL`: one answer per message, the body in one message.
    Buffered,
    /// `STREAMED`: one answer per message, the body in chunks.
    Streamed,
}

impl Mode {
    /// The mode Envoy announced (`protocol_config`), else the configured default.
    fn of(value: Option<i32>, default: EppBodyMode) -> Self {
        match value {
            Some(4) => Mode::Duplex,
            Some(2 | 3) => Mode::Buffered,
            Some(1) => Mode::Streamed,
            _ => match default {
                EppBodyMode::FullDuplexStreamed => Mode::Duplex,
                EppBodyMode::Buffered => Mode::Buffered,
            },
        }
    }
}

/// The `:status` of a response head.
fn status_of(h: &HttpHeaders) -> Option<u16> {
    std::str::from_utf8(wire::header(h, ":status")?)
        .ok()?
        .parse()
        .ok()
}

type Tx = mpsc::Sender<Result<ProcessingResponse, Status>>;

/// Sends `r`; `false` when Envoy's side of the stream is gone.
async fn send(tx: &Tx, r: ProcessingResponse) -> bool {
    tx.send(Ok(r)).await.is_ok()
}

/// The per-stream state.
struct Stream {
    state: Arc<AppState>,
    req_mode: Mode,
    resp_mode: Mode,
    head: Head,
    body: Vec<u8>,
    started: Instant,
    follow: Option<Follow>,
    /// The response ended (its last body chunk, or trailers).
    complete: bool,
}

/// What to do after a message.
enum Next {
    Go,
    /// The stream is over for the picker (an immediate response was sent, or Envoy left).
    Stop,
}

impl Stream {
    /// Headers of the request: what routing needs from them.
    fn read_head(
        &mut self,
        h: &HttpHeaders,
        md: Option<&envoy_types::pb::envoy::config::core::v3::Metadata>,
    ) {
        self.head.path = wire::header(h, ":path")
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default();
        self.head.authorization = wire::header(h, "authorization").map(<[u8]>::to_vec);
        self.head.request_id =
            wire::header(h, "x-request-id").and_then(|v| http::HeaderValue::from_bytes(v).ok());
        self.head.subset = wire::subset(md);
        // The flow-control headers (class, TTFT objective), read as the gateway reads them.
        self.head.flow = http::HeaderMap::new();
        for name in [PRIORITY_HEADER, SLO_HEADER] {
            if let Some(v) =
                wire::header(h, name).and_then(|v| http::HeaderValue::from_bytes(v).ok())
            {
                self.head.flow.insert(name, v);
            }
        }
    }

    /// Picks for the gathered body and sends the answers the request mode requires.
    async fn decide(&mut self, tx: &Tx) -> Next {
        let body = std::mem::take(&mut self.body);
        let picked = match pick(&self.state, &self.head, &body).await {
            Ok(p) => p,
            Err(e) => return self.refuse(tx, &e).await,
        };
        let mut out = Vec::new();
        match self.req_mode {
            Mode::Duplex => {
                out.push(picked.destination.headers_answer());
                let forward = picked.destination.body.as_deref().unwrap_or(&body);
                if forward.is_empty() {
                    out.push(wire::streamed_body(true, Vec::new(), true));
                }
                let n = forward.len().div_ceil(CHUNK);
                for (i, c) in forward.chunks(CHUNK).enumerate() {
                    out.push(wire::streamed_body(true, c.to_vec(), i + 1 == n));
                }
            }
            Mode::Buffered => out.push(picked.destination.buffered_body_answer()),
            Mode::Streamed => {
                let mut answer = picked.destination.buffered_body_answer();
                // STREAMED takes no whole-body replacement: the bound and salt stay off.
                if let Some(processing_response::Response::RequestBody(b)) = &mut answer.response {
                    if let Some(c) = b.response.as_mut() {
                        c.body_mutation = None;
                        if let Some(m) = c.header_mutation.as_mut() {
                            m.set_headers.retain(|h| {
                                h.header.as_ref().is_none_or(|h| h.key != "content-length")
                            });
                        }
                    }
                }
                out.push(answer);
            }
        }
        self.follow = Some(Follow::new(picked, self.started));
        for r in out {
            if !send(tx, r).await {
                return Next::Stop;
            }
        }
        Next::Go
    }

    /// Answers an error the way the protocol says: an immediate response (the status and
    /// OpenAI-shaped body of the gateway's one error mapping).
    async fn refuse(&mut self, tx: &Tx, e: &GatewayError) -> Next {
        tracing::info!(
            status = e.status(),
            code = e.code(),
            "epp refused a request: {e}"
        );
        let _ = send(tx, wire::immediate(&e.response())).await;
        Next::Stop
    }

    /// One message from Envoy.
    async fn on(&mut self, msg: ProcessingRequest, tx: &Tx) -> Next {
        let md = msg.metadata_context.as_ref();
        let Some(req) = msg.request.as_ref() else {
            return Next::Go;
        };
        match req {
            Request::RequestHeaders(h) => {
                self.read_head(h, md);
                if h.end_of_stream {
                    return self.decide(tx).await;
                }
                if self.req_mode != Mode::Duplex && !send(tx, wire::headers_continue()).await {
                    return Next::Stop;
                }
                Next::Go
            }
            Request::RequestBody(b) => {
                if self.head.subset.is_none() {
                    self.head.subset = wire::subset(md);
                }
                let limit = self.state.config().epp.max_body_bytes;
                if self.body.len() + b.body.len() > limit {
                    return self.refuse(tx, &GatewayError::BodyTooLarge { limit }).await;
                }
                self.body.extend_from_slice(&b.body);
                if b.end_of_stream || b.end_of_stream_without_message {
                    return self.decide(tx).await;
                }
                if self.req_mode == Mode::Streamed {
                    let empty = ProcessingResponse {
                        response: Some(processing_response::Response::RequestBody(
                            Default::default(),
                        )),
                        ..Default::default()
                    };
                    if !send(tx, empty).await {
                        return Next::Stop;
                    }
                }
                Next::Go
            }
            Request::RequestTrailers(_) => {
                // Trailers end a body that had no end-of-stream chunk.
                if self.follow.is_none() && self.req_mode == Mode::Duplex {
                    return self.decide(tx).await;
                }
                let r = ProcessingResponse {
                    response: Some(processing_response::Response::RequestTrailers(
                        TrailersResponse::default(),
                    )),
                    ..Default::default()
                };
                if send(tx, r).await {
                    Next::Go
                } else {
                    Next::Stop
                }
            }
            Request::ResponseHeaders(h) => {
                let served = wire::served(md);
                let headers = match self.follow.as_mut() {
                    Some(f) => f.head(status_of(h), served.as_deref()),
                    None => Vec::new(),
                };
                if h.end_of_stream {
                    self.complete = true;
                }
                if send(tx, wire::response_headers(&headers)).await {
                    Next::Go
                } else {
                    Next::Stop
                }
            }
            Request::ResponseBody(b) => {
                if let Some(f) = self.follow.as_mut() {
                    f.body(&b.body);
                }
                let eos = b.end_of_stream || b.end_of_stream_without_message;
                if eos {
                    self.complete = true;
                }
                let r = match self.resp_mode {
                    Mode::Duplex => wire::streamed_body(false, b.body.clone(), eos),
                    _ => wire::response_body_continue(),
                };
                if send(tx, r).await {
                    Next::Go
                } else {
                    Next::Stop
                }
            }
            Request::ResponseTrailers(_) => {
                self.complete = true;
                let r = ProcessingResponse {
                    response: Some(processing_response::Response::ResponseTrailers(
                        TrailersResponse::default(),
                    )),
                    ..Default::default()
                };
                if send(tx, r).await {
                    Next::Go
                } else {
                    Next::Stop
                }
            }
        }
    }
}

/// Runs one stream until Envoy closes it (or goes away), then settles the request.
pub(crate) async fn run(state: Arc<AppState>, mut inbound: Streaming<ProcessingRequest>, tx: Tx) {
    let default = state.config().epp.body_mode;
    let mut s = Stream {
        state,
        req_mode: Mode::of(None, default),
        resp_mode: Mode::of(None, default),
        head: Head::default(),
        body: Vec::new(),
        started: Instant::now(),
        follow: None,
        complete: false,
    };
    let mut first = true;
    loop {
        let msg = match inbound.message().await {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(e) => {
                tracing::debug!("ext_proc stream ended: {e}");
                break;
            }
        };
        if first {
            first = false;
            if let Some(pc) = &msg.protocol_config {
                s.req_mode = Mode::of(Some(pc.request_body_mode), default);
                s.resp_mode = Mode::of(Some(pc.response_body_mode), default);
            }
        }
        if msg.observability_mode {
            // Nothing may be answered in observability mode; a picker has nothing to do.
            continue;
        }
        if let Next::Stop = s.on(msg, &tx).await {
            break;
        }
    }
    if let Some(f) = s.follow.take() {
        f.finish(&s.state, s.complete);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announced_mode_wins_over_the_default() {
        assert_eq!(Mode::of(Some(4), EppBodyMode::Buffered), Mode::Duplex);
        assert_eq!(
            Mode::of(Some(2), EppBodyMode::FullDuplexStreamed),
            Mode::Buffered
        );
        assert_eq!(
            Mode::of(Some(1), EppBodyMode::FullDuplexStreamed),
            Mode::Streamed
        );
        assert_eq!(Mode::of(None, EppBodyMode::Buffered), Mode::Buffered);
        assert_eq!(
            Mode::of(Some(0), EppBodyMode::FullDuplexStreamed),
            Mode::Duplex
        );
    }
}
