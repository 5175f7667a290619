//! The admin listener (separate from the data plane): metrics, replicas (list, add, drain,
//! remove), recent routing decisions and index statistics, as JSON.

use crate::control::register::{add_replica, remove_replica};
use crate::state::AppState;
use async_trait::async_trait;
use http::Response;
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;
use router_policy::ReplicaId;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Instant;

/// The admin app.
pub struct Admin {
    state: Arc<AppState>,
}

impl Admin {
    /// Admin API over `state`.
    pub fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddReplica {
    url: String,
}

fn reply(status: u16, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("content-length", body.len().to_string())
        .body(body)
        .unwrap_or_else(|_| Response::new(Vec::new()))
}

fn json(status: u16, v: &impl serde::Serialize) -> Response<Vec<u8>> {
    reply(
        status,
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    )
}

fn err(status: u16, msg: impl std::fmt::Display) -> Response<Vec<u8>> {
    json(
        status,
        &serde_json::json!({"error": {"message": msg.to_string()}}),
    )
}

async fn read_body(http: &mut ServerSession) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = http.read_request_body().await.map_err(|e| e.to_string())? {
        body.extend_from_slice(&chunk);
        if body.len() > 64 * 1024 {
            return Err("body too large".into());
        }
    }
    Ok(body)
}

impl Admin {
    fn replicas(&self) -> serde_json::Value {
        let now = Instant::now();
        let list: Vec<_> = self
            .state
            .registry
            .all()
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id.0,
                    "url": r.addr.url(),
                    "model": r.info.model,
                    "checkpoint": r.info.checkpoint,
                    "block_size": r.info.block_size.0,
                    "region": r.info.region,
                    "draining": r.draining.load(std::sync::atomic::Ordering::Acquire),
                    "health": r.health.lock().view(now),
                    "in_flight": r.in_flight(),
                    "load": r.load.lock().clone(),
                    "indexed_blocks": self.state.router.precise_blocks(r.id),
                })
            })
            .collect();
        serde_json::json!({ "policy": self.state.router.policy_name(), "replicas": list })
    }
}

#[async_trait]
impl ServeHttp for Admin {
    async fn response(&self, http: &mut ServerSession) -> Response<Vec<u8>> {
        let method = http.req_header().method.as_str().to_string();
        let path = http.req_header().uri.path().to_string();
        let query = http.req_header().uri.query().unwrap_or("").to_string();
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        match (method.as_str(), segs.as_slice()) {
            ("GET", ["metrics"]) => reply(
                200,
                "text/plain; version=0.0.4",
                self.state.metrics.render(),
            ),
            ("GET", ["admin", "replicas"]) => json(200, &self.replicas()),
            ("POST", ["admin", "replicas"]) => {
                let body = match read_body(http).await {
                    Ok(b) => b,
                    Err(e) => return err(400, e),
                };
                let add: AddReplica = match serde_json::from_slice(&body) {
                    Ok(a) => a,
                    Err(e) => return err(400, e),
                };
                match add_replica(&self.state, &add.url).await {
                    Ok(r) => json(
                        201,
                        &serde_json::json!({"id": r.id.0, "model": r.info.model}),
                    ),
                    Err(e) => err(502, e),
                }
            }
            ("POST", ["admin", "replicas", id, "drain"]) => match id.parse::<u32>() {
                Ok(id) if self.state.registry.drain(ReplicaId(id)) => {
                    json(200, &serde_json::json!({"drained": id}))
                }
                _ => err(404, "no such replica"),
            },
            ("DELETE", ["admin", "replicas", id]) => match id.parse::<u32>() {
                Ok(id) if remove_replica(&self.state, ReplicaId(id)) => {
                    json(200, &serde_json::json!({"removed": id}))
                }
                _ => err(404, "no such replica"),
            },
            ("GET", ["admin", "decisions"]) => {
                let limit = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("limit="))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(100);
                json(200, &self.state.router.recent(limit))
            }
            ("GET", ["admin", "index"]) => json(200, &self.state.router.index_stats()),
            ("GET", ["dashboard", rest @ ..]) => {
                crate::dashboard::http::respond(&self.state, http, &rest.join("/")).await
            }
            _ => err(404, format!("unknown admin endpoint {method} {path}")),
        }
    }
}
