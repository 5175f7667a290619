//! The dashboard's login: a page that asks for the admin key, `POST /dashboard/login`
//! (JSON `{"key": "..."}`) that answers with a session cookie, and `POST /dashboard/logout`.

use super::auth::{self, Sessions};
use super::error::AdminError;
use crate::config::AdminConfig;
use http::Response;
use pingora_core::protocols::http::ServerSession;
use serde::Deserialize;

const LOGIN_HTML: &str = include_str!("../dashboard/login.html");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    key: String,
}

fn empty(status: u16) -> http::response::Builder {
    Response::builder()
        .status(status)
        .header("content-length", "0")
        .header("cache-control", "no-store")
}

/// The login page.
pub(crate) fn page() -> Response<Vec<u8>> {
    Response::builder()
        .status(200)
        .header("content-type", "text/html; charset=utf-8")
        .header("content-length", LOGIN_HTML.len().to_string())
        .header("cache-control", "no-store")
        .body(LOGIN_HTML.into())
        .unwrap_or_else(|_| Response::new(Vec::new()))
}

/// `303 See Other` to the login page.
pub(crate) fn to_login() -> Response<Vec<u8>> {
    empty(303)
        .header("location", "/dashboard/login")
        .body(Vec::new())
        .unwrap_or_else(|_| Response::new(Vec::new()))
}

/// Checks the key and starts a session (`204` with `Set-Cookie`); `401` for a wrong key.
/// With no key configured the dashboard is open and no cookie is needed.
pub(crate) async fn login(
    cfg: &AdminConfig,
    sessions: &Sessions,
    http: &mut ServerSession,
) -> Result<Response<Vec<u8>>, AdminError> {
    let body = super::body::read_body(http).await?;
    let login: Login =
        serde_json::from_slice(&body).map_err(|e| AdminError::BadRequest(e.to_string()))?;
    let Some(stored) = auth::stored_hash(cfg) else {
        return Ok(empty(204)
            .body(Vec::new())
            .unwrap_or_else(|_| Response::new(Vec::new())));
    };
    if !auth::key_matches(&stored, &login.key) {
        tracing::warn!("dashboard login with a wrong admin key");
        return Err(AdminError::Unauthorized);
    }
    let token = sessions.issue(&stored, auth::unix_now(), cfg.session_ttl_s);
    Ok(empty(204)
        .header(
            "set-cookie",
            auth::session_cookie(&token, cfg.session_ttl_s),
        )
        .body(Vec::new())
        .unwrap_or_else(|_| Response::new(Vec::new())))
}

/// Ends the browser's session (the cookie is cleared).
pub(crate) fn logout() -> Response<Vec<u8>> {
    empty(204)
        .header("set-cookie", auth::cleared_cookie())
        .body(Vec::new())
        .unwrap_or_else(|_| Response::new(Vec::new()))
}
