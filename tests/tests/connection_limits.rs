#![allow(clippy::unwrap_used)]
//! Connection bounds (reliability research §8, "Pingora gaps the gateway must fill"): a
//! cap on open connections per client IP (`limits.max_connections_per_ip`) and a limit on
//! requests per kept-alive connection (`limits.max_requests_per_connection`).

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use warmpath_e2e::http::{get, read_response};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::{fixtures::replicas_yaml, GatewayProc};

const HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

fn gateway(mock: &MockReplica, limits: &str) -> GatewayProc {
    let yaml = format!(
        "auth: {{enabled: false}}\n{}limits: {{{limits}}}\n",
        replicas_yaml(&[mock.url()])
    );
    GatewayProc::spawn(&yaml, &[], 1).expect("gateway")
}

fn connect(addr: &str) -> BufReader<TcpStream> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    BufReader::new(s)
}

/// Sends a health check on `c` and returns its status and `Connection` header.
fn health(c: &mut BufReader<TcpStream>) -> (u16, Option<String>) {
    c.get_mut().write_all(HEALTH).unwrap();
    let r = read_response(c).unwrap();
    (r.status, r.header("connection").map(str::to_string))
}

/// The number of `connections_refused_total` in the gateway's metrics.
fn refused_metric(gw: &GatewayProc) -> u64 {
    let text = get(&gw.admin, "/metrics", &[]).unwrap().text();
    text.lines()
        .find(|l| l.starts_with("warmpath_gateway_connections_refused_total "))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .expect("warmpath_gateway_connections_refused_total in /metrics")
}

#[test]
fn connections_beyond_the_per_ip_cap_get_a_429_and_are_closed() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock, "max_connections_per_ip: 2");
    // Two connections are held open (one idle before its first request, one kept alive
    // after a request).
    let mut first = connect(&gw.addr);
    assert_eq!(health(&mut first).0, 200);
    let _idle = connect(&gw.addr);
    std::thread::sleep(Duration::from_millis(200));

    // The third is answered at once, without sending anything, and closed.
    let mut third = connect(&gw.addr);
    let r = read_response(&mut third).unwrap();
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.header("retry-after"), Some("1"));
    let v = r.json().unwrap();
    assert_eq!(v["error"]["code"], "too_many_connections");
    assert_eq!(v["error"]["type"], "rate_limit_error");
    let mut rest = Vec::new();
    assert_eq!(
        third.read_to_end(&mut rest).unwrap_or(0),
        0,
        "closed after it"
    );
    assert_eq!(refused_metric(&gw), 1);

    // The held connections still work, and closing one frees its slot.
    assert_eq!(health(&mut first).0, 200);
    drop(first);
    let mut ok = None;
    for _ in 0..50 {
        let mut c = connect(&gw.addr);
        if c.get_mut().write_all(HEALTH).is_ok() {
            if let Ok(r) = read_response(&mut c) {
                if r.status == 200 {
                    ok = Some(c);
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut fourth = ok.expect("a freed slot serves a new connection");
    assert_eq!(health(&mut fourth).0, 200, "and keeps it alive");
}

#[test]
fn a_connection_closes_after_its_request_limit() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock, "max_requests_per_connection: 3");
    let mut c = connect(&gw.addr);
    let answers: Vec<_> = (0..3).map(|_| health(&mut c)).collect();
    assert!(
        answers.iter().all(|(status, _)| *status == 200),
        "{answers:?}"
    );
    assert_ne!(answers[1].1.as_deref(), Some("close"), "{answers:?}");
    assert_eq!(answers[2].1.as_deref(), Some("close"), "{answers:?}");
    // The gateway closed it: a fourth request gets no answer.
    let _ = c.get_mut().write_all(HEALTH);
    let mut rest = Vec::new();
    assert_eq!(c.read_to_end(&mut rest).unwrap_or(0), 0, "{rest:?}");
    // A new connection starts a new count.
    let mut again = connect(&gw.addr);
    let (status, connection) = health(&mut again);
    assert_eq!(status, 200);
    assert_ne!(connection.as_deref(), Some("close"));
}

#[test]
fn the_defaults_leave_a_busy_client_alone() {
    // Defaults: 1024 connections per IP, 1000 requests per connection; 40 connections at
    // once from one address, each serving 3 requests, are all served.
    let mock = MockReplica::start(Mode::Ok);
    let yaml = format!("auth: {{enabled: false}}\n{}", replicas_yaml(&[mock.url()]));
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let mut conns: Vec<_> = (0..40).map(|_| connect(&gw.addr)).collect();
    for _ in 0..3 {
        for c in &mut conns {
            let (status, connection) = health(c);
            assert_eq!(status, 200);
            assert_ne!(connection.as_deref(), Some("close"));
        }
    }
    assert_eq!(refused_metric(&gw), 0);
}

#[test]
fn connections_beyond_the_total_cap_get_a_503_and_are_closed() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock, "max_connections: 3, max_connections_per_ip: 0");
    let mut held: Vec<_> = (0..3).map(|_| connect(&gw.addr)).collect();
    for c in &mut held {
        assert_eq!(health(c).0, 200);
    }
    // The fourth is answered at once and closed.
    let mut fourth = connect(&gw.addr);
    let r = read_response(&mut fourth).unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.json().unwrap()["error"]["code"], "overloaded");
    let mut rest = Vec::new();
    assert_eq!(fourth.read_to_end(&mut rest).unwrap_or(0), 0);
    assert_eq!(refused_metric(&gw), 1, "the refusal is counted");
    // Closing one frees its slot.
    drop(held.pop());
    let mut ok = None;
    for _ in 0..100 {
        let mut c = connect(&gw.addr);
        if c.get_mut().write_all(HEALTH).is_ok() {
            if let Ok(r) = read_response(&mut c) {
                if r.status == 200 {
                    ok = Some(c);
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut again = ok.expect("a freed slot serves a new connection");
    assert_eq!(health(&mut again).0, 200);
    for c in &mut held {
        assert_eq!(health(c).0, 200, "the held connections still work");
    }
}

/// Sends `head` while reading the answer; returns the answer and whether every byte could
/// be written.
fn send_head(addr: &str, head: Vec<u8>) -> (Vec<u8>, bool) {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer =
        std::thread::spawn(move || head.chunks(4096).all(|piece| w.write_all(piece).is_ok()));
    let mut answer = Vec::new();
    let _ = (&s).read_to_end(&mut answer);
    let all_sent = writer.join().unwrap();
    (answer, all_sent)
}

fn assert_431(answer: &[u8]) {
    let text = String::from_utf8_lossy(answer);
    assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
    assert!(text.contains("\r\nconnection: close\r\n"), "{text}");
    assert!(text.contains("\"code\":\"headers_too_large\""), "{text}");
}

/// Defect 10: the head bounds apply as the head streams in, not after Pingora has
/// buffered up to 1 MiB and 256 headers.
#[test]
fn an_oversize_head_is_refused_with_431_while_the_client_is_still_sending() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock, "max_header_bytes: 16384, max_headers: 100");
    // 8 MiB of one header: far past the bound and Pingora's own 1 MiB.
    let mut head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    head.resize(8 * 1024 * 1024, b'a');
    let (answer, all_sent) = send_head(&gw.addr, head);
    assert_431(&answer);
    assert!(!all_sent, "closed while the client was still sending");
    // 300 small headers (under the byte bound).
    let mut head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..300 {
        head.extend_from_slice(format!("x-h{i}: 1\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    assert!(head.len() < 16384);
    let (answer, _) = send_head(&gw.addr, head);
    assert_431(&answer);
    // A head at the bounds still works.
    let mut c = connect(&gw.addr);
    assert_eq!(health(&mut c).0, 200);
    assert_eq!(mock.generations(), 0);
}
