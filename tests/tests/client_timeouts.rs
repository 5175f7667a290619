#![allow(clippy::unwrap_used)]
//! Client read deadlines (`timeouts.client_read_ms`, reliability matrix A6 and A7): a header
//! that drips in, or never comes, closes the connection at the deadline; a header sent in
//! pieces within it is served; a keep-alive connection may idle past it between requests;
//! a body that drips in gets a 408 at the deadline.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, chat, replicas_yaml};
use warmpath_e2e::http::read_response;
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

const LIMIT: Duration = Duration::from_millis(1000);

fn gateway(mock: &MockReplica) -> GatewayProc {
    let yaml = format!(
        "{}{}timeouts: {{client_read_ms: {}}}\n",
        auth_yaml(&[("t", "key-t", "")]),
        replicas_yaml(&[mock.url()]),
        LIMIT.as_millis()
    );
    GatewayProc::spawn(&yaml, &[], 1).expect("gateway")
}

fn request_bytes() -> Vec<u8> {
    let body = serde_json::to_string(&chat("mock", "s", "u", 4, false)).unwrap();
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-t\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Writes `bytes` one every `gap` until the server closes (or everything is sent); returns
/// when the connection was seen closed, from the connect.
fn drip(addr: &str, bytes: &[u8], gap: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let mut buf = [0u8; 1024];
    for &b in bytes {
        if s.write_all(&[b]).is_err() {
            return Some(start.elapsed());
        }
        match s.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => panic!("an answer to an incomplete header"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(start.elapsed())
            }
            Err(_) => {}
        }
        std::thread::sleep(gap);
    }
    None
}

/// The gateway closes `s` within three deadlines of now, without sending a byte.
fn assert_closed_unanswered(s: &mut TcpStream) {
    let start = Instant::now();
    let n = s.read(&mut [0u8; 64]).unwrap_or(0);
    assert_eq!(n, 0, "closed without an answer");
    let took = start.elapsed();
    assert!(took < LIMIT * 3, "closed after {took:?}");
}

#[test]
fn a_dripping_or_silent_header_is_cut_at_the_deadline() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    // One byte every 100 ms: the whole header would take over 15 s.
    let closed = drip(&gw.addr, &request_bytes(), Duration::from_millis(100)).unwrap();
    assert!(
        closed >= LIMIT && closed < LIMIT * 3,
        "closed after {closed:?}"
    );
    // Nothing at all after the connect.
    let mut s = TcpStream::connect(&gw.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_closed_unanswered(&mut s);
    assert_eq!(mock.generations(), 0);
}

#[test]
fn a_header_in_pieces_within_the_deadline_and_an_idle_keepalive_are_served() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    let req = request_bytes();
    let mut s = TcpStream::connect(&gw.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Three pieces, 200 ms apart: 400 ms in all, within the 1 s deadline.
    let third = req.len() / 3;
    for piece in [&req[..third], &req[third..2 * third], &req[2 * third..]] {
        s.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut r = BufReader::new(s.try_clone().unwrap());
    assert_eq!(read_response(&mut r).unwrap().status, 200);
    // Idle past the deadline between two requests: the next one is still served.
    std::thread::sleep(LIMIT * 2);
    s.write_all(&req).unwrap();
    let again = read_response(&mut r).unwrap();
    assert_eq!(again.status, 200, "{}", again.text());
    // And the second request's own header has the deadline again.
    let mut slow = req.clone();
    slow.truncate(20);
    s.write_all(&slow).unwrap();
    assert_closed_unanswered(&mut s);
    assert_eq!(mock.generations(), 2);
}

#[test]
fn a_dripping_body_gets_408_at_the_deadline() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    let req = request_bytes();
    let head_len = req.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut s = TcpStream::connect(&gw.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    s.write_all(&req[..head_len]).unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let mut took = None;
    // The body a byte every 100 ms (it would take several seconds), until an answer.
    for &b in &req[head_len..] {
        if s.write_all(&[b]).is_err() {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                took = Some(start.elapsed());
                got.extend_from_slice(&buf[..n]);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut r = BufReader::new(s);
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    got.extend_from_slice(&rest);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("client_timeout"), "{text}");
    let took = took.expect("an answer while the body was still dripping");
    assert!(took >= LIMIT && took < LIMIT * 3, "answered after {took:?}");
    assert_eq!(mock.generations(), 0);
}
