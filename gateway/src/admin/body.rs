//! Reading an admin request's body, bounded to 64 KiB.

use super::error::AdminError;
use pingora_core::protocols::http::ServerSession;

/// Reads a request body of at most 64 KiB.
pub(super) async fn read_body(http: &mut ServerSession) -> Result<Vec<u8>, AdminError> {
    let mut body = Vec::new();
    while let Some(chunk) = http
        .read_request_body()
        .await
        .map_err(|e| AdminError::BadRequest(e.to_string()))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > 64 * 1024 {
            return Err(AdminError::BadRequest("body too large".into()));
        }
    }
    Ok(body)
}
