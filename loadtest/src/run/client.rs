//! One streamed OpenAI request: builds the body, reads the SSE stream, timestamps every
//! content chunk, and reads usage (with `prompt_tokens_details.cached_tokens`) and the
//! gateway's response headers.

use super::sse::SseParser;
use crate::cli::Api;
use crate::metrics::ErrorKind;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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
    client: &reqwest::Client,
    endpoint: &str,
    requested: &str,
    api_key: Option<&str>,
) -> String {
    if requested != DEFAULT_MODEL {
        return requested.to_string();
    }
    let url = format!("{}/v1/models", endpoint.trim_end_matches('/'));
    let mut req = client.get(url).timeout(Duration::from_secs(10));
    if let Some(k) = api_key {
        req = req.bearer_auth(k);
    }
    let listed = async {
        let v: Value = req
            .send()
            .await
            .ok()?
            .error_for_status()
            .ok()?
            .json()
            .await
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

/// Sends one streamed request and measures it.
pub async fn call(client: &reqwest::Client, spec: &CallSpec<'_>) -> CallResult {
    let url = format!(
        "{}{}",
        spec.endpoint.trim_end_matches('/'),
        api_path(spec.api)
    );
    let start = Instant::now();
    let ms = |s: Instant| s.elapsed().as_secs_f64() * 1000.0;
    let mut res = CallResult::default();
    let mut req = client
        .post(&url)
        .json(&request_body(spec))
        .timeout(spec.timeout);
    if let Some(k) = spec.api_key {
        req = req.bearer_auth(k);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            let kind = if e.is_timeout() {
                ErrorKind::Timeout
            } else {
                ErrorKind::Connect
            };
            res.error = Some((kind, e.to_string()));
            res.e2el_ms = ms(start);
            return res;
        }
    };
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    res.replica = header(HEADER_REPLICA);
    res.predicted_cached_tokens = header(HEADER_PREDICTED_CACHED).and_then(|v| v.parse().ok());
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        res.error = Some((
            ErrorKind::from_status(status.as_u16()),
            format!("HTTP {status}: {}", truncate(&body)),
        ));
        res.e2el_ms = ms(start);
        return res;
    }
    let mut resp = resp;
    let mut parser = SseParser::new();
    let mut last = 0.0;
    loop {
        match resp.chunk().await {
            Ok(Some(bytes)) => {
                let at = ms(start);
                for payload in parser.feed(&bytes) {
                    apply_payload(&mut res, &payload, at, &mut last);
                }
            }
            Ok(None) => break,
            Err(e) => {
                let kind = if e.is_timeout() {
                    ErrorKind::Timeout
                } else {
                    ErrorKind::Connect
                };
                res.error = Some((kind, e.to_string()));
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
