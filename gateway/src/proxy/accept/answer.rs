//! The whole HTTP/1.1 answer the accept guards write themselves, before Pingora has read a
//! request: an OpenAI error with `Connection: close`.

use crate::error::GatewayError;

/// `err` as a complete HTTP/1.1 response that closes the connection.
pub(crate) fn closing(err: &GatewayError) -> Vec<u8> {
    let r = err.response();
    let reason = http::StatusCode::from_u16(r.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n",
        r.status,
        r.body.len()
    );
    for (k, v) in &r.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(&r.body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_a_complete_response_that_closes() {
        let text = String::from_utf8(closing(&GatewayError::HeadersTooLarge { limit: 9 })).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "headers_too_large");
    }
}
