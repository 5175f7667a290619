//! One streamed OpenAI request: builds the body, reads the SSE stream, timestamps every
//! content chunk, and reads usage (with `prompt_tokens_details.cached_tokens`) and the
//! gateway's response headers. Requests go over a [`Pool`] of kept-alive connections to
//! the endpoint ([`pool`]); a redirect is an answer, not followed.

use super::sse::SseParser;
use crate::cli::Api;
use crate::metrics::ErrorKind;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use warmpath_http::http::{header::AUTHORIZATION, HeaderValue, Method};
use warmpath_http::{ClientError, Endpoint, Header, Pool};

/// Idle connections kept to the endpoint (one per concurrent request, up to this).
const MAX_IDLE: usize = 4096;

/// A connection pool to `endpoint`'s address (an `http://host:port[/base]` URL), for
/// [`call`] and [`resolve_model`] with that endpoint.
pub fn pool(endpoint: &str) -> Result<Pool, ClientError> {
    Ok(Pool::new(Endpoint::parse(endpoint)?.addr, MAX_IDLE))
}

/// The request path for `path` under `endpoint`, which must be where `client` connects,
/// and the bearer token header.
fn target(
    client: &Pool,
    endpoint: &str,
    path: &str,
    api_key: Option<&str>,
) -> Result<(String, Vec<Header>), ClientError> {
    let ep = Endpoint::parse(endpoint)?;
    if ep.addr != *client.addr() {
        return Err(ClientError::Url(format!(
            "{endpoint:?}: the pool connects to {}",
            client.addr()
        )));
    }
    let mut extra = Vec::new();
    if let Some(k) = api_key {
        let v = HeaderValue::from_str(&format!("Bearer {k}"))
            .map_err(|e| ClientError::Protocol(format!("api key: {e}")))?;
        extra.push((AUTHORIZATION, v));
    }
    Ok((ep.path(path), extra))
}

/// Response header naming the serving replica (see `warmpath_protocol::replica_api`).
pub const HEADER_REPLICA: &str = "x-warmpath-replica";
/// Response header with the gateway's predicted cached tokens.
pub const HEADER_PREDICTED_CACHED: &str = "x-warmpath-predicted-cached-tokens";

/// What to send.
#[derive(Clone, Debug)]
pub struct CallSpec<'a> {
    /// Base URL, e.g. `http://127.0.0.1:8080`.
    pub endpoint: &'a str,
    /// Completions or chat.
    pub api: Api,
    /// Model name.
    pub model: &'a str,
    /// Prompt text (chat: the user message).
    pub prompt: &'a str,
    /// Chat: a system message sent before the user message; completions: prepended to the
    /// prompt.
    pub system: Option<&'a str>,
    /// Chat: the `messages` and `tools` to send instead of `prompt` and `system` (the
    /// agent loop's chats, `crate::workload::agent_loop::chat`).
    pub chat: Option<&'a Value>,
    /// `max_tokens`.
    pub max_tokens: u32,
    /// Ask the server to produce exactly `max_tokens` (ignore_eos + min_tokens).
    pub ignore_eos: bool,
    /// Bearer token.
    pub api_key: Option<&'a str>,
    /// Whole-request timeout.
    pub timeout: Duration,
}

/// What came back. Times are offsets from the send, ms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallResult {
    /// First content chunk.
    pub ttft_ms: Option<f64>,
    /// Last content chunk (or the end of the stream).
    pub e2el_ms: f64,
    /// Gaps between content chunks after the first.
    pub itls_ms: Vec<f32>,
    /// Content chunks received.
    pub chunks: u32,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u32>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u32>,
    /// `usage.prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u32>,
    /// `x-warmpath-replica`.
    pub replica: Option<String>,
    /// `x-warmpath-predicted-cached-tokens`.
    pub predicted_cached_tokens: Option<u32>,
    /// Failure.
    pub error: Option<(ErrorKind, String)>,
}

/// The JSON body for a streamed request.
pub fn request_body(spec: &CallSpec<'_>) -> Value {
    let mut body = match (spec.api, spec.system) {
        (Api::Chat, _) if spec.chat.is_some() => {
            let mut b = spec.chat.cloned().unwrap_or_default();
            if let Some(o) = b.as_object_mut() {
                o.insert("model".into(), spec.model.into());
            }
            b
        }
        (Api::Completions, None) => json!({"model": spec.model, "prompt": spec.prompt}),
        (Api::Completions, Some(sys)) => {
            json!({"model": spec.model, "prompt": format!("{sys}{}", spec.prompt)})
        }
        (Api::Chat, None) => {
            json!({"model": spec.model, "messages": [{"role": "user", "content": spec.prompt}]})
        }
        (Api::Chat, Some(sys)) => json!({"model": spec.model, "messages": [
            {"role": "system", "content": sys},
            {"role": "user", "content": spec.prompt},
        ]}),
    };
    let o = body.as_object_mut().expect("object literal");
    o.insert("max_tokens".into(), spec.max_tokens.into());
    o.insert("temperature".into(), 0.0.into());
    o.insert("stream".into(), true.into());
    o.insert("stream_options".into(), json!({"include_usage": true}));
    if spec.ignore_eos {
        o.insert("ignore_eos".into(), true.into());
        o.insert("min_tokens".into(), spec.max_tokens.into());
    }
    body
}

/// Path of the API.
pub fn api_path(api: Api) -> &'static str {
    match api {
        Api::Completions => "/v1/completions",
        Api::Chat => "/v1/chat/completions",
    }
}

/// Folds one SSE payload into the result; `at_ms` is its arrival offset.
pub fn apply_payload(res: &mut CallResult, payload: &str, at_ms: f64, last_ms: &mut f64) {
    if payload.trim() == "[DONE]" {
        return;
    }
    let Ok(v) = serde_json::from_str::<Value>(payload) else {
        res.error = Some((
            ErrorKind::BadStream,
            format!("non-JSON event: {}", truncate(payload)),
        ));
        return;
    };
    if let Some(err) = v.get("error") {
        res.error = Some((
            ErrorKind::BadStream,
            format!("error event: {}", truncate(&err.to_string())),
        ));
        return;
    }
    let content = v["choices"].as_array().and_then(|c| c.first()).map(|c| {
        c.get("text")
            .and_then(Value::as_str)
            .or_else(|| c["delta"].get("content").and_then(Value::as_str))
            .unwrap_or("")
    });
    if content.is_some_and(|t| !t.is_empty()) {
        match res.ttft_ms {
            None => res.ttft_ms = Some(at_ms),
            Some(_) => res.itls_ms.push((at_ms - *last_ms) as f32),
        }
        *last_ms = at_ms;
        res.chunks += 1;
        res.e2el_ms = at_ms;
    }
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        let n = |x: &Value| x.as_u64().map(|x| x as u32);
        res.prompt_tokens = n(&u["prompt_tokens"]).or(res.prompt_tokens);
        res.completion_tokens = n(&u["completion_tokens"]).or(res.completion_tokens);
        res.cached_tokens = n(&u["prompt_tokens_details"]["cached_tokens"]).or(res.cached_tokens);
    }
    // llama.cpp's `llama-server` reports the prompt tokens it reused as `timings.cache_n`
    // (in the last chunk), without `prompt_tokens_details`.
    if res.cached_tokens.is_none() {
        if let Some(c) = v["timings"]["cache_n"].as_u64() {
            res.cached_tokens = Some(c as u32);
        }
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Model name that means "whatever the endpoint serves" (the `--model` default).
pub const DEFAULT_MODEL: &str = "default";

/// The model name to put in requests: `requested`, unless it is [`DEFAULT_MODEL`], in which
/// case the first id the endpoint lists at `GET /v1/models` (real replicas reject unknown
/// names). Falls back to `requested` when the endpoint lists nothing.
pub async fn resolve_model(
    client: &Pool,
    endpoint: &str,
    requested: &str,
    api_key: Option<&str>,
) -> String {
    if requested != DEFAULT_MODEL {
        return requested.to_string();
    }
    let listed = async {
        let (path, extra) = target(client, endpoint, "/v1/models", api_key).ok()?;
        let v: Value = client
            .fetch(Method::GET, &path, None, &extra, Duration::from_secs(10))
            .await
            .ok()?
            .success()
            .ok()?
            .json()
            .ok()?;
        first_model_id(&v)
    }
    .await;
    match listed {
        Some(id) => {
            tracing::info!(model = %id, "using the endpoint's model");
            id
        }
        None => requested.to_string(),
    }
}

/// The first `data[].id` of an OpenAI `/v1/models` listing.
pub fn first_model_id(v: &Value) -> Option<String> {
    v["data"]
        .as_array()?
        .iter()
        .find_map(|m| m["id"].as_str())
        .map(str::to_string)
}

/// The error kind of a failed exchange: the deadline, or anything else on the wire.
fn failure(e: &ClientError) -> ErrorKind {
    match e {
        ClientError::Timeout => ErrorKind::Timeout,
        _ => ErrorKind::Connect,
    }
}

/// `fut`, or [`ClientError::Timeout`] at `deadline`.
async fn by<T>(
    deadline: tokio::time::Instant,
    fut: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Result<T, ClientError> {
    tokio::time::timeout_at(deadline, fut)
        .await
        .unwrap_or(Err(ClientError::Timeout))
}

/// `429 Too Many Requests`: the code and its reason phrase, when it has one.
fn status_line(status: u16) -> String {
    match warmpath_http::http::StatusCode::from_u16(status) {
        Ok(s) => s.to_string(),
        Err(_) => status.to_string(),
    }
}

/// Sends one streamed request over `client` (a [`pool`] to `spec.endpoint`) and measures
/// it; the whole request (connect to the end of the stream) has `spec.timeout`.
pub async fn call(client: &Pool, spec: &CallSpec<'_>) -> CallResult {
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let ms = |s: Instant| s.elapsed().as_secs_f64() * 1000.0;
    let mut res = CallResult::default();
    let opened = match target(client, spec.endpoint, api_path(spec.api), spec.api_key) {
        Ok((path, extra)) => {
            let body = request_body(spec).to_string();
            let open = client.open_with(Method::POST, &path, Some(body.as_bytes()), &extra);
            by(deadline, open).await
        }
        Err(e) => Err(e),
    };
    let (status, mut body) = match opened {
        Ok(r) => r,
        Err(e) => {
            res.error = Some((failure(&e), e.to_string()));
            res.e2el_ms = ms(start);
            return res;
        }
    };
    let header = |name: &str| body.header(name).map(str::to_string);
    res.replica = header(HEADER_REPLICA);
    res.predicted_cached_tokens = header(HEADER_PREDICTED_CACHED).and_then(|v| v.parse().ok());
    if !(200..300).contains(&status) {
        let text = by(deadline, body.read_all(warmpath_http::MAX_BODY))
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        res.error = Some((
            ErrorKind::from_status(status),
            format!("HTTP {}: {}", status_line(status), truncate(&text)),
        ));
        res.e2el_ms = ms(start);
        return res;
    }
    let mut parser = SseParser::new();
    let mut last = 0.0;
    loop {
        match by(deadline, body.next_chunk()).await {
            Ok(Some(bytes)) => {
                let at = ms(start);
                for payload in parser.feed(&bytes) {
                    apply_payload(&mut res, &payload, at, &mut last);
                }
            }
            Ok(None) => break,
            Err(e) => {
                res.error = Some((failure(&e), e.to_string()));
                break;
            }
        }
    }
    if let Some(p) = parser.finish() {
        apply_payload(&mut res, &p, ms(start), &mut last);
    }
    if res.error.is_none() && res.ttft_ms.is_none() {
        res.error = Some((ErrorKind::BadStream, "stream ended without content".into()));
    }
    if res.error.is_some() {
        res.e2el_ms = ms(start);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server on a free loopback port that reads one request and writes `parts` with
    /// `gap` between them; it returns the endpoint URL and the request it read.
    async fn serve(
        parts: Vec<&'static [u8]>,
        gap: Duration,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            for p in parts {
                s.write_all(p).await.unwrap();
                tokio::time::sleep(gap).await;
            }
            String::from_utf8_lossy(&got).into_owned()
        });
        (url, task)
    }

    fn spec(endpoint: &str, timeout: Duration) -> CallSpec<'_> {
        CallSpec {
            endpoint,
            api: Api::Completions,
            model: "m",
            prompt: "hi",
            system: None,
            chat: None,
            max_tokens: 2,
            ignore_eos: false,
            api_key: Some("k"),
            timeout,
        }
    }

    #[tokio::test]
    async fn a_stream_is_timed_chunk_by_chunk() {
        let (url, server) = serve(
            vec![
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nx-warmpath-replica: r1\r\nx-warmpath-predicted-cached-tokens: 16\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"22\r\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\n\r\n",
                b"22\r\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\n\r\n",
                b"74\r\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n\r\n0\r\n\r\n",
            ],
            Duration::from_millis(60),
        )
        .await;
        let client = pool(&url).unwrap();
        let r = call(&client, &spec(&url, Duration::from_secs(5))).await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.chunks, 2);
        // The chunks arrived 60 ms apart, and each was timed as it arrived.
        assert!(
            r.itls_ms.len() == 1 && r.itls_ms[0] >= 40.0,
            "{:?}",
            r.itls_ms
        );
        assert!(
            r.ttft_ms.is_some_and(|t| t >= 40.0 && t < r.e2el_ms),
            "{r:?}"
        );
        assert_eq!(r.replica.as_deref(), Some("r1"));
        assert_eq!(r.predicted_cached_tokens, Some(16));
        assert_eq!((r.prompt_tokens, r.cached_tokens), (Some(5), Some(4)));
        let head = server.await.unwrap().to_ascii_lowercase();
        assert!(
            head.starts_with("post /v1/completions http/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains("authorization: bearer k\r\n"), "{head}");
        assert!(
            head.contains("content-type: application/json\r\n"),
            "{head}"
        );
        // The connection went back to the pool at the end of the stream.
        assert_eq!(client.idle(), 1);
    }

    #[tokio::test]
    async fn refusals_and_silence_are_classified() {
        let (url, _) = serve(
            vec![b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 4\r\n\r\nslow"],
            Duration::ZERO,
        )
        .await;
        let r = call(&pool(&url).unwrap(), &spec(&url, Duration::from_secs(5))).await;
        let (kind, detail) = r.error.unwrap();
        assert_eq!(kind, ErrorKind::from_status(429));
        assert_eq!(detail, "HTTP 429 Too Many Requests: slow");

        let (url, _) = serve(
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"],
            Duration::from_secs(5),
        )
        .await;
        let r = call(
            &pool(&url).unwrap(),
            &spec(&url, Duration::from_millis(200)),
        )
        .await;
        assert_eq!(r.error.map(|e| e.0), Some(ErrorKind::Timeout));

        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let url = format!("http://{closed}");
        let r = call(&pool(&url).unwrap(), &spec(&url, Duration::from_secs(2))).await;
        assert_eq!(r.error.map(|e| e.0), Some(ErrorKind::Connect));
        assert!(pool("https://x:1").is_err());
    }

    #[test]
    fn chunks_usage_and_body() {
        let mut r = CallResult::default();
        let mut last = 0.0;
        apply_payload(&mut r, r#"{"choices":[{"text":""}]}"#, 5.0, &mut last);
        apply_payload(&mut r, r#"{"choices":[{"text":" the"}]}"#, 100.0, &mut last);
        apply_payload(
            &mut r,
            r#"{"choices":[{"delta":{"content":" cat"}}]}"#,
            130.0,
            &mut last,
        );
        apply_payload(&mut r, r#"{"choices":[{"text":" sat"}]}"#, 150.0, &mut last);
        apply_payload(
            &mut r,
            r#"{"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":32}}}"#,
            151.0,
            &mut last,
        );
        apply_payload(&mut r, "[DONE]", 152.0, &mut last);
        let mut llama = CallResult::default();
        apply_payload(
            &mut llama,
            r#"{"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":3},"timings":{"cache_n":48,"prompt_n":2}}"#,
            1.0,
            &mut 0.0,
        );
        assert_eq!(llama.cached_tokens, Some(48));
        assert_eq!(r.ttft_ms, Some(100.0));
        assert_eq!(r.itls_ms, vec![30.0, 20.0]);
        assert_eq!(r.e2el_ms, 150.0);
        assert_eq!(
            (r.prompt_tokens, r.completion_tokens, r.cached_tokens),
            (Some(50), Some(3), Some(32))
        );
        assert!(r.error.is_none());
        apply_payload(&mut r, "garbage", 1.0, &mut last);
        assert_eq!(r.error.as_ref().map(|e| e.0), Some(ErrorKind::BadStream));

        let models =
            serde_json::json!({"object": "list", "data": [{"id": "SmolLM2"}, {"id": "b"}]});
        assert_eq!(first_model_id(&models).as_deref(), Some("SmolLM2"));
        assert_eq!(first_model_id(&serde_json::json!({"data": []})), None);

        let spec = CallSpec {
            endpoint: "http://127.0.0.1:1",
            api: Api::Chat,
            model: "m",
            prompt: "hi",
            system: None,
            chat: None,
            max_tokens: 7,
            ignore_eos: true,
            api_key: None,
            timeout: Duration::from_secs(1),
        };
        let b = request_body(&spec);
        assert_eq!(b["messages"][0]["content"], "hi");
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(
            (b["max_tokens"].as_u64(), b["min_tokens"].as_u64()),
            (Some(7), Some(7))
        );
        let with_system = CallSpec {
            system: Some("be brief."),
            ..spec.clone()
        };
        let b = request_body(&with_system);
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["messages"][0]["content"], "be brief.");
        assert_eq!(b["messages"][1]["role"], "user");
        assert_eq!(b["messages"][1]["content"], "hi");
        let b = request_body(&CallSpec {
            api: Api::Completions,
            ..with_system
        });
        assert_eq!(b["prompt"], "be brief.hi");
    }
}
