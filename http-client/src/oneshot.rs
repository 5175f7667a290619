//! One request on a new connection: opened ([`open`]) or read whole with a deadline
//! ([`fetch`], [`request`], [`post_json`], [`get_json`]).

use crate::addr::Addr;
use crate::body::{whole_within, BodyStream, Response};
use crate::conn::{build, connect, Header};
use crate::error::ClientError;
use http::Method;
use std::time::Duration;

/// Sends one request on a new connection and returns the status and the open body.
pub async fn open(
    addr: &Addr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
) -> Result<(u16, BodyStream), ClientError> {
    open_with(addr, method, path, body, &[]).await
}

/// [`open`] with extra request headers.
pub async fn open_with(
    addr: &Addr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
    extra: &[Header],
) -> Result<(u16, BodyStream), ClientError> {
    open_on(addr, build(addr, method, path, body, extra)?, None).await
}

/// [`open_with`], failing with [`ClientError::Timeout`] when the TCP connect takes longer
/// than `connect_timeout` (the caller bounds the rest).
pub async fn open_with_connect_timeout(
    addr: &Addr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
    extra: &[Header],
    connect_timeout: Duration,
) -> Result<(u16, BodyStream), ClientError> {
    let req = build(addr, method, path, body, extra)?;
    open_on(addr, req, Some(connect_timeout)).await
}

/// Sends `req` on a new connection to `addr` (connected within `connect_timeout`, if any).
async fn open_on(
    addr: &Addr,
    req: http::Request<http_body_util::Full<bytes::Bytes>>,
    connect_timeout: Option<Duration>,
) -> Result<(u16, BodyStream), ClientError> {
    let mut sender = match connect_timeout {
        Some(t) => tokio::time::timeout(t, connect(addr))
            .await
            .map_err(|_| ClientError::Timeout)??,
        None => connect(addr).await?,
    };
    let resp = sender.send_request(req).await?;
    Ok(BodyStream::new(resp, None))
}

/// One request whose whole exchange (connect, response, body of at most
/// [`MAX_BODY`](crate::MAX_BODY) bytes) must end within `timeout`; any status comes back
/// (a 3xx is not followed).
pub async fn fetch(
    addr: &Addr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
    extra: &[Header],
    timeout: Duration,
) -> Result<Response, ClientError> {
    whole_within(timeout, open_with(addr, method, path, body, extra)).await
}

/// [`fetch`] with no extra headers; non-2xx is an error.
pub async fn request(
    addr: &Addr,
    method: Method,
    path: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Response, ClientError> {
    fetch(addr, method, path, body, &[], timeout)
        .await?
        .success()
}

/// `POST path` with a JSON body and extra headers, with a deadline; the whole answer is
/// returned. Non-2xx is an error.
pub async fn post_json(
    addr: &Addr,
    path: &str,
    body: &[u8],
    extra: &[Header],
    timeout: Duration,
) -> Result<Response, ClientError> {
    fetch(addr, Method::POST, path, Some(body), extra, timeout)
        .await?
        .success()
}

/// `GET path` parsed as JSON, with a deadline. Non-2xx is an error.
pub async fn get_json<T: serde::de::DeserializeOwned>(
    addr: &Addr,
    path: &str,
    timeout: Duration,
) -> Result<T, ClientError> {
    request(addr, Method::GET, path, None, timeout)
        .await?
        .json()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{serve_all, serve_once};
    use std::sync::atomic::Ordering;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn reads_chunked_and_length_bodies() {
        let (addr, server) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: b\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .await;
        let r = request(&addr, Method::GET, "/v1/x", None, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abcde"[..]));
        assert_eq!(r.header("x-a"), Some("b"));
        let head = String::from_utf8(server.await.unwrap()).unwrap();
        assert!(head.starts_with("GET /v1/x HTTP/1.1\r\n"), "{head}");
        assert!(head
            .to_ascii_lowercase()
            .contains(&format!("host: {}", addr.authority())));

        let (addr, _) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{\"a\"").await;
        let r = request(&addr, Method::GET, "/", None, Duration::from_secs(2)).await;
        // Length-delimited: exactly the promised bytes come back.
        assert_eq!(r.unwrap().body, b"{\"a\"");
    }

    #[tokio::test]
    async fn sends_headers_and_a_json_body() {
        let (addr, server) =
            serve_once(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno").await;
        let auth = (
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer k"),
        );
        let r = fetch(
            &addr,
            Method::POST,
            "/x",
            Some(b"{}"),
            &[auth],
            Duration::from_secs(2),
        )
        .await
        .unwrap();
        // `fetch` returns any status.
        assert_eq!((r.status, r.body.as_slice()), (404, &b"no"[..]));
        let head = String::from_utf8(server.await.unwrap())
            .unwrap()
            .to_ascii_lowercase();
        assert!(head.starts_with("post /x http/1.1\r\n"), "{head}");
        assert!(head.contains("authorization: bearer k\r\n"), "{head}");
        assert!(
            head.contains("content-type: application/json\r\n"),
            "{head}"
        );
        assert!(head.contains("content-length: 2\r\n"), "{head}");
        assert!(head.contains("accept: */*\r\n"), "{head}");

        // A caller's Accept and Content-Type replace the defaults.
        let (addr, server) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await;
        let extra = [
            (
                http::header::ACCEPT,
                http::HeaderValue::from_static("text/html"),
            ),
            (
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain"),
            ),
        ];
        fetch(
            &addr,
            Method::POST,
            "/",
            Some(b"x"),
            &extra,
            Duration::from_secs(2),
        )
        .await
        .unwrap();
        let head = String::from_utf8(server.await.unwrap())
            .unwrap()
            .to_ascii_lowercase();
        assert_eq!(head.matches("accept:").count(), 1, "{head}");
        assert!(head.contains("accept: text/html\r\n"), "{head}");
        assert_eq!(head.matches("content-type:").count(), 1, "{head}");
    }

    #[tokio::test]
    async fn a_redirect_is_returned_not_followed() {
        let (target, visits) = serve_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await;
        let reply: &'static [u8] = Box::leak(
            format!(
                "HTTP/1.1 302 Found\r\nLocation: http://{}/elsewhere\r\nContent-Length: 0\r\n\r\n",
                target.authority()
            )
            .into_bytes()
            .into_boxed_slice(),
        );
        let (addr, _) = serve_once(reply).await;
        let r = fetch(
            &addr,
            Method::POST,
            "/v1/kv/prefill",
            Some(b"{}"),
            &[],
            Duration::from_secs(2),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 302);
        assert!(r
            .header("location")
            .is_some_and(|l| l.ends_with("/elsewhere")));
        let (addr, _) = serve_once(reply).await;
        let e = request(&addr, Method::GET, "/", None, Duration::from_secs(2)).await;
        assert!(matches!(e, Err(ClientError::Status(302))), "{e:?}");
        let (addr, _) = serve_once(reply).await;
        let (status, _) = open(&addr, Method::GET, "/", None).await.unwrap();
        assert_eq!(status, 302);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(visits.load(Ordering::SeqCst), 0, "the Location was visited");
    }

    #[tokio::test]
    async fn a_stream_yields_each_chunk_as_it_arrives() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = Addr::from(l.local_addr().unwrap());
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            crate::testing::read_head(&mut s).await.unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata:1\r\n")
                .await
                .unwrap();
            // The second chunk waits until the client has read the first.
            let _ = released.await;
            s.write_all(b"6\r\ndata:2\r\n0\r\n\r\n").await.unwrap();
        });
        let (status, mut body) = open(&addr, Method::GET, "/events", None).await.unwrap();
        assert_eq!(status, 200);
        let first = tokio::time::timeout(Duration::from_secs(2), body.next_chunk()).await;
        assert_eq!(first.unwrap().unwrap().as_deref(), Some(&b"data:1"[..]));
        release.send(()).unwrap();
        assert_eq!(
            body.next_chunk().await.unwrap().as_deref(),
            Some(&b"data:2"[..])
        );
        assert_eq!(body.next_chunk().await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused() {
        let (addr, _) =
            serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789").await;
        let (_, body) = open(&addr, Method::GET, "/", None).await.unwrap();
        let e = body.read_all(9).await;
        assert!(
            matches!(&e, Err(ClientError::Protocol(m)) if m.contains("larger than 9")),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn failures_are_typed() {
        let (addr, _) =
            serve_once(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n").await;
        let e = request(
            &addr,
            Method::POST,
            "/",
            Some(b"{}"),
            Duration::from_secs(2),
        )
        .await;
        assert!(matches!(e, Err(ClientError::Status(503))), "{e:?}");

        // A body cut short of its Content-Length is an HTTP error, not a short body.
        let (addr, _) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").await;
        let e = request(&addr, Method::GET, "/", None, Duration::from_secs(2)).await;
        assert!(matches!(e, Err(ClientError::Http(_))), "{e:?}");

        // Not HTTP at all.
        let (addr, _) = serve_once(b"SSH-2.0-OpenSSH\r\n\r\n").await;
        let e = get_json::<serde_json::Value>(&addr, "/", Duration::from_secs(2)).await;
        assert!(matches!(e, Err(ClientError::Http(_))), "{e:?}");

        // A 2xx that is not JSON.
        let (addr, _) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno").await;
        let e = get_json::<serde_json::Value>(&addr, "/", Duration::from_secs(2)).await;
        assert!(matches!(e, Err(ClientError::Protocol(_))), "{e:?}");

        // Nothing listening.
        let closed = Addr::from(
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap(),
        );
        let e = request(&closed, Method::GET, "/", None, Duration::from_secs(2)).await;
        assert!(matches!(e, Err(ClientError::Io(_))), "{e:?}");

        // Nobody answers within the deadline.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = Addr::from(l.local_addr().unwrap());
        let e = request(&addr, Method::GET, "/", None, Duration::from_millis(200)).await;
        assert!(matches!(e, Err(ClientError::Timeout)), "{e:?}");
    }
}
