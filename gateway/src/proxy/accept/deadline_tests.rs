//! [`DeadlineStream`]'s head bounds over a real loopback connection: what Pingora would
//! read through it, and what the client gets.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMITS: Limits = Limits {
    deadline: Duration::from_secs(30),
    head: HeadLimits {
        max_bytes: 4096,
        max_headers: 20,
    },
};

/// Serves one connection through the wrapper: reads as Pingora would (into a growing
/// buffer) until the read fails or the connection ends; returns the bytes it was given.
async fn serve_one(l: TcpListener) -> usize {
    let (tcp, _) = l.accept().await.unwrap();
    let inner: Stream = Box::new(pingora_core::protocols::l4::stream::Stream::from(tcp));
    let mut s = DeadlineStream::wrap(inner, LIMITS);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return got.len(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Sends `head` from a client while reading what comes back; returns the answer.
async fn client(addr: std::net::SocketAddr, head: Vec<u8>) -> (String, bool) {
    let c = TcpStream::connect(addr).await.unwrap();
    let (mut r, mut w) = c.into_split();
    let writer = tokio::spawn(async move {
        // The client keeps sending: the write fails once the gateway has closed.
        for piece in head.chunks(1024) {
            if w.write_all(piece).await.is_err() {
                return false;
            }
        }
        true
    });
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), r.read_to_end(&mut answer)).await;
    let all_sent = writer.await.unwrap();
    (String::from_utf8_lossy(&answer).into_owned(), all_sent)
}

#[tokio::test]
async fn a_head_over_the_byte_bound_is_answered_431_and_never_passed_on() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = tokio::spawn(serve_one(l));
    let mut head = b"POST /v1/chat/completions HTTP/1.1\r\nX-Big: ".to_vec();
    head.resize(4 * 1024 * 1024, b'a');
    let (answer, all_sent) = client(addr, head).await;
    let passed = server.await.unwrap();
    assert!(passed <= 4096, "{passed} bytes reached the reader");
    assert!(
        answer.starts_with("HTTP/1.1 431 "),
        "{}",
        &answer[..answer.len().min(300)]
    );
    assert!(
        answer.contains("\"code\":\"headers_too_large\""),
        "{answer}"
    );
    assert!(
        !all_sent,
        "the connection closed while the client was still sending"
    );
}

#[tokio::test]
async fn a_head_over_the_line_bound_is_answered_431() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = tokio::spawn(serve_one(l));
    let mut head = b"GET /v1/models HTTP/1.1\r\n".to_vec();
    for i in 0..300 {
        head.extend_from_slice(format!("x{i}: 1\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    let (answer, _) = client(addr, head).await;
    let passed = server.await.unwrap();
    assert!(passed < 25 * 10, "{passed} bytes reached the reader");
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
}

#[tokio::test]
async fn a_head_within_bounds_and_its_body_pass_untouched() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = tokio::spawn(serve_one(l));
    let mut req = b"POST / HTTP/1.1\r\nContent-Length: 20000\r\n\r\n".to_vec();
    let n = req.len() + 20_000;
    req.resize(n, b'b');
    let (answer, all_sent) = client(addr, req).await;
    assert!(all_sent && answer.is_empty(), "{answer}");
    assert_eq!(server.await.unwrap(), n, "the body is not counted as head");
}

/// A request whose body is read while the client pipelines the next one: Pingora's idle
/// read (one byte) must not see the pipelined bytes while the first request is answered;
/// they are the next request's, read after it is logged.
#[tokio::test]
async fn pipelined_bytes_are_held_while_a_request_is_answered() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let mut c = TcpStream::connect(addr).await.unwrap();
    let (tcp, _) = l.accept().await.unwrap();
    let inner: Stream = Box::new(pingora_core::protocols::l4::stream::Stream::from(tcp));
    let mut s = DeadlineStream::new(inner, LIMITS);
    let first = b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
    c.write_all(first).await.unwrap();
    let mut got = vec![0u8; first.len()];
    s.read_exact(&mut got).await.unwrap();
    s.header_read();
    s.body_read();
    let next = b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n";
    c.write_all(next).await.unwrap();
    c.shutdown().await.unwrap();
    let mut one = [0u8; 1];
    let idle = tokio::time::timeout(Duration::from_millis(300), s.read(&mut one)).await;
    assert!(idle.is_err(), "the idle read waits: {idle:?}");
    s.expect_next_request();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, next, "the next request, whole, then the end");
}

/// With nothing pipelined, a client that goes away while its request is answered is seen.
#[tokio::test]
async fn a_client_gone_while_answered_is_seen() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let c = TcpStream::connect(addr).await.unwrap();
    let (tcp, _) = l.accept().await.unwrap();
    let inner: Stream = Box::new(pingora_core::protocols::l4::stream::Stream::from(tcp));
    let mut s = DeadlineStream::new(inner, LIMITS);
    s.header_read();
    s.body_read();
    drop(c);
    let mut one = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut one))
        .await
        .expect("the end is seen")
        .unwrap();
    assert_eq!(n, 0);
}
