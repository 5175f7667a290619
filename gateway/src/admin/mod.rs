//! The admin listener (separate from the data plane): metrics, replicas (list, add, drain,
//! remove), recent routing decisions and index statistics, tenants' API keys (with shared
//! state), as JSON, and the dashboard.
//!
//! Every route but the dashboard's login needs the admin key when one is configured
//! ([`auth`]): a request without it gets 401 before anything else is looked at. A
//! state-changing request must then come from the listener's own origin (403) with a JSON
//! body (415).
//!
//! # Layout
//! - this module: the routes.
//! - [`auth`]: the admin key, dashboard sessions, origin and content-type checks.
//! - [`login`]: the dashboard's login page and session cookie.
//! - [`keys`]: tenants' API keys in the shared key store.
//! - [`rollouts`]: checkpoint rollouts (set, pause, resume, abort, end).
//! - `render`: `POST /admin/render`, what the gateway computes for a request body.
//! - `body`: reading a bounded request body.
//! - [`error`]: [`AdminError`] and its one mapping to status and OpenAI error JSON.

pub(crate) mod auth;
mod body;
pub(crate) mod error;
pub(crate) mod keys;
pub(crate) mod login;
mod render;
pub(crate) mod rollouts;

use crate::control::register::{add_replica, remove_replica};
use crate::state::AppState;
use async_trait::async_trait;
use auth::Sessions;
use body::read_body;
pub(crate) use error::AdminError;
use http::Response;
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Instant;
use warmpath_core::ReplicaId;

/// The admin app.
pub(crate) struct Admin {
    state: Arc<AppState>,
    sessions: Sessions,
}

impl Admin {
    /// Admin API over `state`.
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self {
            state,
            sessions: Sessions::new(),
        }
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

fn keys_reply((status, body): (u16, serde_json::Value)) -> Response<Vec<u8>> {
    json(status, &body)
}

fn json(status: u16, v: &impl serde::Serialize) -> Response<Vec<u8>> {
    reply(
        status,
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    )
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
                    "models": r.upstream.models,
                    "engine": r.upstream.engine.as_str(),
                    "role": r.info.role.as_str(),
                    "pool": r.upstream.pool,
                    "checkpoint": r.info.checkpoint,
                    "block_size": r.info.block_size.0,
                    "region": r.region,
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
        match self.serve(http).await {
            Ok(r) => r,
            Err(e) => e.response(),
        }
    }
}

impl Admin {
    /// Checks access, then routes.
    async fn serve(&self, http: &mut ServerSession) -> Result<Response<Vec<u8>>, AdminError> {
        let head = http.req_header();
        let method = head.method.clone();
        let path = head.uri.path().to_string();
        let query = head.uri.query().unwrap_or("").to_string();
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let cfg = self.state.config();
        // The login page and the login itself are the only routes open without the key.
        match (method.as_str(), segs.as_slice()) {
            ("GET", ["dashboard", "login"]) => return Ok(login::page()),
            ("POST", ["dashboard", "login"]) => {
                auth::check_state_change(&head.headers)?;
                return login::login(&cfg.admin, &self.sessions, http).await;
            }
            ("POST", ["dashboard", "logout"]) => {
                auth::check_state_change(&head.headers)?;
                return Ok(login::logout());
            }
            _ => {}
        }
        if let Err(e) = auth::authenticate(&cfg.admin, &self.sessions, &head.headers) {
            return match (method.as_str(), segs.as_slice()) {
                // A browser opening the dashboard is sent to the login page.
                ("GET", ["dashboard"] | ["dashboard", "index.html"]) => Ok(login::to_login()),
                _ => Err(e),
            };
        }
        if auth::changes_state(&method) {
            auth::check_state_change(&head.headers)?;
        }
        self.route(http, method.as_str(), &path, &query, &segs)
            .await
    }

    async fn route(
        &self,
        http: &mut ServerSession,
        method: &str,
        path: &str,
        query: &str,
        segs: &[&str],
    ) -> Result<Response<Vec<u8>>, AdminError> {
        Ok(match (method, segs) {
            ("GET", ["metrics"]) => {
                let held = i64::try_from(self.state.bodies.held()).unwrap_or(i64::MAX);
                self.state.metrics.inflight_body_bytes.set(held);
                for r in self.state.rollouts.list() {
                    self.state
                        .metrics
                        .rollout
                        .share
                        .with_label_values(&[self.state.metrics.model_label(&r.model)])
                        .set(r.share_percent / 100.0);
                }
                reply(
                    200,
                    "text/plain; version=0.0.4",
                    self.state.metrics.render(),
                )
            }
            ("GET", ["admin", "replicas"]) => json(200, &self.replicas()),
            ("POST", ["admin", "replicas"]) => {
                let body = read_body(http).await?;
                let add: AddReplica = serde_json::from_slice(&body)
                    .map_err(|e| AdminError::BadRequest(e.to_string()))?;
                let r = add_replica(&self.state, &add.url)
                    .await
                    .map_err(|e| AdminError::Upstream(e.to_string()))?;
                json(
                    201,
                    &serde_json::json!({"id": r.id.0, "model": r.info.model}),
                )
            }
            ("POST", ["admin", "replicas", id, "drain"]) => match id.parse::<u32>() {
                Ok(id) if self.state.registry.drain(ReplicaId(id)) => {
                    json(200, &serde_json::json!({"drained": id}))
                }
                _ => return Err(AdminError::NotFound("no such replica".into())),
            },
            ("DELETE", ["admin", "replicas", id]) => match id.parse::<u32>() {
                Ok(id) if remove_replica(&self.state, ReplicaId(id)) => {
                    json(200, &serde_json::json!({"removed": id}))
                }
                _ => return Err(AdminError::NotFound("no such replica".into())),
            },
            ("GET", ["admin", "decisions"]) => {
                let limit = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("limit="))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(100);
                json(200, &self.state.router.recent(limit))
            }
            ("GET", ["admin", "tenants", t, "keys"]) => keys_reply(
                keys::handle(
                    self.state.fleet.as_deref(),
                    &self.state.tenants(),
                    t,
                    keys::KeyOp::List,
                )
                .await?,
            ),
            ("POST", ["admin", "tenants", t, "keys"]) => keys_reply(
                keys::handle(
                    self.state.fleet.as_deref(),
                    &self.state.tenants(),
                    t,
                    keys::KeyOp::Create,
                )
                .await?,
            ),
            ("POST", ["admin", "tenants", t, "keys", k, "rotate"]) => keys_reply(
                keys::handle(
                    self.state.fleet.as_deref(),
                    &self.state.tenants(),
                    t,
                    keys::KeyOp::Rotate(k),
                )
                .await?,
            ),
            ("DELETE", ["admin", "tenants", t, "keys", k]) => keys_reply(
                keys::handle(
                    self.state.fleet.as_deref(),
                    &self.state.tenants(),
                    t,
                    keys::KeyOp::Revoke(k),
                )
                .await?,
            ),
            ("GET", ["admin", "rollouts"]) => json(200, &rollouts::list(&self.state)),
            ("PUT", ["admin", "rollouts", model]) => {
                let body = read_body(http).await?;
                json(200, &rollouts::put(&self.state, model, &body).await?)
            }
            ("POST", ["admin", "rollouts", model, op]) => {
                let op = match *op {
                    "pause" => rollouts::Op::Pause,
                    "resume" => rollouts::Op::Resume,
                    "abort" => rollouts::Op::Abort,
                    other => {
                        return Err(AdminError::NotFound(format!(
                            "unknown rollout action {other:?} (pause, resume or abort)"
                        )))
                    }
                };
                json(200, &rollouts::change(&self.state, model, op).await?)
            }
            ("DELETE", ["admin", "rollouts", model]) => {
                json(200, &rollouts::delete(&self.state, model).await?)
            }
            ("POST", ["admin", "render" | "explain"]) => {
                let body = read_body(http).await?;
                json(200, &render::render(&self.state, &body).await?)
            }
            ("GET", ["admin", "index"]) => json(200, &self.state.router.index_stats()),
            ("GET", ["dashboard", rest @ ..]) => {
                crate::dashboard::http::respond(&self.state, http, &rest.join("/")).await
            }
            _ => {
                return Err(AdminError::NotFound(format!(
                    "unknown admin endpoint {method} {path}"
                )))
            }
        })
    }
}
