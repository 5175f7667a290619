//! [`Coalesce`] under Pingora's own HTTP/1 client, over a connection that records every
//! send.

use super::*;
use pingora_core::protocols::http::v1::client::HttpSession;
use pingora_core::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Ssl, UniqueID, UniqueIDType,
};
use pingora_http::RequestHeader;
use std::sync::Arc;
use std::sync::Mutex;

/// A connection that records each write call as one send and takes at most `max` bytes
/// of it.
#[derive(Debug)]
struct Wire {
    sends: Arc<Mutex<Vec<Vec<u8>>>>,
    max: usize,
}

impl Wire {
    fn coalesced(max: usize) -> (Stream, Arc<Mutex<Vec<Vec<u8>>>>) {
        let sends = Arc::new(Mutex::new(Vec::new()));
        let wire = Wire {
            sends: sends.clone(),
            max,
        };
        (Box::new(Coalesce::new(Box::new(wire))), sends)
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut send: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        send.truncate(self.max);
        let n = send.len();
        self.sends.lock().unwrap().push(send);
        Poll::Ready(Ok(n))
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[async_trait]
impl Shutdown for Wire {
    async fn shutdown(&mut self) {}
}
impl UniqueID for Wire {
    fn id(&self) -> UniqueIDType {
        7
    }
}
impl Ssl for Wire {}
impl GetTimingDigest for Wire {
    fn get_timing_digest(&self) -> Vec<Option<pingora_core::protocols::TimingDigest>> {
        Vec::new()
    }
}
impl GetProxyDigest for Wire {
    fn get_proxy_digest(&self) -> Option<Arc<pingora_core::protocols::raw_connect::ProxyDigest>> {
        None
    }
}
impl GetSocketDigest for Wire {
    fn get_socket_digest(&self) -> Option<Arc<pingora_core::protocols::SocketDigest>> {
        None
    }
}
#[async_trait]
impl Peek for Wire {}

fn request(body: &[u8], extra: &[(&str, &str)]) -> Box<RequestHeader> {
    let mut h = RequestHeader::build("POST", b"/v1/chat/completions", None).unwrap();
    h.insert_header("Host", "replica").unwrap();
    if !body.is_empty() {
        h.insert_header("Content-Length", body.len().to_string())
            .unwrap();
    }
    for (k, v) in extra {
        h.insert_header(k.to_string(), *v).unwrap();
    }
    Box::new(h)
}

/// Writes one request the way Pingora's proxy does: header (flushed), body, finish.
async fn send(session: &mut HttpSession, body: &[u8], extra: &[(&str, &str)]) {
    session
        .write_request_header(request(body, extra))
        .await
        .unwrap();
    if !body.is_empty() {
        session.write_body(body).await.unwrap();
    }
    session.finish_body().await.unwrap();
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

#[test]
fn a_header_and_its_body_leave_in_one_send() {
    rt().block_on(async {
        let (stream, sends) = Wire::coalesced(usize::MAX);
        let mut session = HttpSession::new(stream);
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        send(&mut session, body, &[]).await;
        let sends = sends.lock().unwrap();
        assert_eq!(sends.len(), 1, "one send for header and body");
        assert!(sends[0].starts_with(b"POST /v1/chat/completions HTTP/1.1\r\n"));
        assert!(sends[0].ends_with(&body[..]));
    });
}

#[test]
fn each_request_on_a_kept_connection_is_held_again() {
    rt().block_on(async {
        let (mut stream, sends) = Wire::coalesced(usize::MAX);
        // Two requests on one connection, as Pingora's pool reuses it: a new session each.
        for body in [&b"{\"a\":1}"[..], b"{\"b\":22}"] {
            let mut session = HttpSession::new(stream);
            send(&mut session, body, &[]).await;
            stream = session.into_inner();
        }
        let sends = sends.lock().unwrap();
        assert_eq!(sends.len(), 2);
        assert!(sends[1].ends_with(b"{\"b\":22}"));
        assert!(sends[1].starts_with(b"POST "));
    });
}

#[test]
fn a_request_without_a_body_or_waiting_for_continue_goes_out_at_once() {
    rt().block_on(async {
        let (stream, sends) = Wire::coalesced(usize::MAX);
        let mut session = HttpSession::new(stream);
        session
            .write_request_header(request(b"", &[]))
            .await
            .unwrap();
        assert_eq!(sends.lock().unwrap().len(), 1, "no body: sent at its flush");

        let (stream, sends) = Wire::coalesced(usize::MAX);
        let mut session = HttpSession::new(stream);
        session
            .write_request_header(request(b"abc", &[("Expect", "100-continue")]))
            .await
            .unwrap();
        assert_eq!(
            sends.lock().unwrap().len(),
            1,
            "a client waiting for 100 Continue gets its header out first"
        );
    });
}

#[test]
fn a_chunked_request_passes_through_and_the_connection_is_not_held_again() {
    rt().block_on(async {
        let (stream, sends) = Wire::coalesced(usize::MAX);
        let mut session = HttpSession::new(stream);
        let mut h = RequestHeader::build("POST", b"/", None).unwrap();
        h.insert_header("Transfer-Encoding", "chunked").unwrap();
        session.write_request_header(Box::new(h)).await.unwrap();
        assert_eq!(sends.lock().unwrap().len(), 1, "the header went out alone");
        session
            .write_body(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n")
            .await
            .unwrap();
        session.finish_body().await.unwrap();
        let mut stream = session.into_inner();
        let all: Vec<u8> = sends.lock().unwrap().concat();
        assert!(
            all.ends_with(b"0\r\n\r\n"),
            "every chunk and the last one were sent"
        );
        // Framing lost: even a length-framed request is now written as it comes.
        let n = sends.lock().unwrap().len();
        stream
            .write_all(b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(sends.lock().unwrap().len(), n + 1);
    });
}

#[test]
fn a_connection_that_takes_a_few_bytes_at_a_time_gets_every_byte_in_order() {
    rt().block_on(async {
        let (stream, sends) = Wire::coalesced(7);
        let mut session = HttpSession::new(stream);
        let body = br#"{"model":"m","messages":[{"role":"user","content":"a longer body"}]}"#;
        send(&mut session, body, &[]).await;
        let mut stream = session.into_inner();
        let all = sends.lock().unwrap().concat();
        let (head, rest) = all.split_at(all.len() - body.len());
        assert_eq!(rest, &body[..]);
        assert!(head.ends_with(b"\r\n\r\n"));
        // The framing survived the partial writes: the next request is held again.
        let n = sends.lock().unwrap().len();
        stream
            .write_all(b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n")
            .await
            .unwrap();
        stream.flush().await.unwrap();
        assert_eq!(sends.lock().unwrap().len(), n, "held for its body");
    });
}

#[test]
fn a_held_header_is_sent_at_shutdown() {
    rt().block_on(async {
        let (mut stream, sends) = Wire::coalesced(usize::MAX);
        stream
            .write_all(b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n")
            .await
            .unwrap();
        stream.flush().await.unwrap();
        assert!(sends.lock().unwrap().is_empty());
        AsyncWriteExt::shutdown(&mut stream).await.unwrap();
        assert_eq!(sends.lock().unwrap().len(), 1);
    });
}
