//! The admin listener's one error type and its single mapping to HTTP status and OpenAI
//! error JSON.

use http::Response;

/// Everything an admin request can fail with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminError {
    /// No admin key, a wrong one, or no valid dashboard session.
    #[error(
        "admin key required: send `Authorization: Bearer <admin key>` \
         (or log in at /dashboard/login)"
    )]
    Unauthorized,
    /// A state-changing request from another origin.
    #[error("cross-origin admin request refused ({0})")]
    CrossOrigin(String),
    /// A body that is not `application/json`.
    #[error("admin request bodies must be sent as Content-Type: application/json")]
    UnsupportedMediaType,
    /// A malformed request.
    #[error("{0}")]
    BadRequest(String),
    /// No such endpoint or replica.
    #[error("{0}")]
    NotFound(String),
    /// The replica to register could not be reached or used.
    #[error("{0}")]
    Upstream(String),
    /// The shared state (Redis) did not answer.
    #[error("{0}")]
    Unavailable(String),
    /// The shared state moved on since this gateway read it (a stale generation).
    #[error("{0}")]
    Conflict(String),
}

impl AdminError {
    /// HTTP status.
    pub(crate) fn status(&self) -> u16 {
        match self {
            AdminError::Unauthorized => 401,
            AdminError::CrossOrigin(_) => 403,
            AdminError::UnsupportedMediaType => 415,
            AdminError::BadRequest(_) => 400,
            AdminError::NotFound(_) => 404,
            AdminError::Upstream(_) => 502,
            AdminError::Unavailable(_) => 503,
            AdminError::Conflict(_) => 409,
        }
    }

    /// OpenAI error `type` and `code`.
    fn kind(&self) -> (&'static str, &'static str) {
        match self {
            AdminError::Unauthorized => ("authentication_error", "invalid_admin_key"),
            AdminError::CrossOrigin(_) => ("permission_error", "cross_origin"),
            AdminError::UnsupportedMediaType => ("invalid_request_error", "unsupported_media_type"),
            AdminError::BadRequest(_) => ("invalid_request_error", "invalid_request"),
            AdminError::NotFound(_) => ("invalid_request_error", "not_found"),
            AdminError::Upstream(_) => ("api_error", "replica_unavailable"),
            AdminError::Unavailable(_) => ("api_error", "state_unavailable"),
            AdminError::Conflict(_) => ("invalid_request_error", "conflict"),
        }
    }

    /// The response: OpenAI error JSON with the status; `WWW-Authenticate` on 401.
    pub(crate) fn response(&self) -> Response<Vec<u8>> {
        let (kind, code) = self.kind();
        let body = serde_json::to_vec(&serde_json::json!({"error": {
            "message": self.to_string(), "type": kind, "param": null, "code": code,
        }}))
        .unwrap_or_default();
        let mut r = Response::builder()
            .status(self.status())
            .header("content-type", "application/json")
            .header("content-length", body.len().to_string())
            .header("cache-control", "no-store");
        if matches!(self, AdminError::Unauthorized) {
            r = r.header("www-authenticate", "Bearer realm=\"warmpath-admin\"");
        }
        r.body(body).unwrap_or_else(|_| Response::new(Vec::new()))
    }
}
