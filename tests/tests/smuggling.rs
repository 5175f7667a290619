#![allow(clippy::unwrap_used)]
//! Request smuggling corpus (reliability matrix A1): framing vectors that one HTTP hop may
//! read differently from the next. Each is either refused (4xx, the connection closed,
//! nothing forwarded) or normalized: the replica then sees one request framed by one
//! `Content-Length`, never the client's framing (no `Transfer-Encoding`, no chunk syntax,
//! no bytes past the body). Every vector is followed on the same connection by a second,
//! well-framed generation request (`Connection: close`): however the gateway reads the
//! first, the replica sees exactly as many requests as the client got 200s.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;
use warmpath_e2e::fixtures::{chat, replicas_yaml};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

const HEAD: &str =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";

/// The corpus: (name, request bytes, whether the client half-closes after sending).
fn corpus(body: &str) -> Vec<(&'static str, String, bool)> {
    let n = body.len();
    let chunked = |ext: &str| format!("{n:x}{ext}\r\n{body}\r\n0\r\n\r\n");
    let lf_head = HEAD.replace("\r\n", "\n");
    vec![
        ("bare LF line ends", format!("{lf_head}Content-Length: {n}\n\n{body}"), false),
        ("obs-fold", format!("{HEAD}X-Folded: a\r\n b\r\nContent-Length: {n}\r\n\r\n{body}"), false),
        ("obs-fold of Content-Length", format!("{HEAD}Content-Length:\r\n {n}\r\n\r\n{body}"), false),
        (
            "HTTP/1.0 with a close-delimited body",
            format!("POST /v1/chat/completions HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\n\r\n{body}"),
            true,
        ),
        ("chunk extension", format!("{HEAD}Transfer-Encoding: chunked\r\n\r\n{}", chunked(";ext=1")), false),
        ("chunk extension with CR", format!("{HEAD}Transfer-Encoding: chunked\r\n\r\n{}", chunked(";a=\rb")), false),
        ("chunk extension with LF", format!("{HEAD}Transfer-Encoding: chunked\r\n\r\n{}", chunked(";a=\nb")), false),
        (
            "chunk-size overflow",
            format!("{HEAD}Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n{body}\r\n0\r\n\r\n"),
            false,
        ),
        (
            "chunk-size 2^64",
            format!("{HEAD}Transfer-Encoding: chunked\r\n\r\n10000000000000000{n:x}\r\n{body}\r\n0\r\n\r\n"),
            false,
        ),
        ("non-hex chunk size", format!("{HEAD}Transfer-Encoding: chunked\r\n\r\nzz\r\n{body}\r\n0\r\n\r\n"), false),
        ("negative chunk size", format!("{HEAD}Transfer-Encoding: chunked\r\n\r\n-{n:x}\r\n{body}\r\n0\r\n\r\n"), false),
        ("0x chunk size", format!("{HEAD}Transfer-Encoding: chunked\r\n\r\n0x{n:x}\r\n{body}\r\n0\r\n\r\n"), false),
        ("chunk size too small", format!("{HEAD}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n", n - 5), false),
        ("duplicate Content-Length, same", format!("{HEAD}Content-Length: {n}\r\nContent-Length: {n}\r\n\r\n{body}"), false),
        ("duplicate Content-Length, different", format!("{HEAD}Content-Length: {n}\r\nContent-Length: {}\r\n\r\n{body}", n + 3), false),
        ("Content-Length list", format!("{HEAD}Content-Length: {n}, {n}\r\n\r\n{body}"), false),
        ("Content-Length with +", format!("{HEAD}Content-Length: +{n}\r\n\r\n{body}"), false),
        ("Content-Length in hex", format!("{HEAD}Content-Length: 0x{n:x}\r\n\r\n{body}"), false),
        ("Content-Length with leading spaces", format!("{HEAD}Content-Length:    {n}\r\n\r\n{body}"), false),
        ("Content-Length with leading zeros", format!("{HEAD}Content-Length: 000{n}\r\n\r\n{body}"), false),
        ("Content-Length negative", format!("{HEAD}Content-Length: -{n}\r\n\r\n{body}"), false),
        ("space before the colon", format!("{HEAD}Content-Length : {n}\r\n\r\n{body}"), false),
        (
            "CL + TE",
            format!("{HEAD}Content-Length: {n}\r\nTransfer-Encoding: chunked\r\n\r\n{}", chunked("")),
            false,
        ),
        ("TE chunked, x", format!("{HEAD}Transfer-Encoding: chunked, x\r\n\r\n{}", chunked("")), false),
        ("TE x, chunked", format!("{HEAD}Transfer-Encoding: x, chunked\r\n\r\n{}", chunked("")), false),
        (
            "chunked in a second TE header",
            format!("{HEAD}Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n{}", chunked("")),
            false,
        ),
        (
            "TE chunked twice",
            format!("{HEAD}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n{}", chunked("")),
            false,
        ),
        ("TE casing", format!("{HEAD}Transfer-Encoding: ChUnKeD\r\n\r\n{}", chunked("")), false),
        ("TE name casing", format!("{HEAD}tRANSFER-eNCODING: chunked\r\n\r\n{}", chunked("")), false),
        ("TE with a tab", format!("{HEAD}Transfer-Encoding:\tchunked\r\n\r\n{}", chunked("")), false),
        ("TE with trailing space", format!("{HEAD}Transfer-Encoding: chunked \r\n\r\n{}", chunked("")), false),
        ("TE xchunked", format!("{HEAD}Transfer-Encoding: xchunked\r\n\r\n{}", chunked("")), false),
        (
            "TE with a vertical tab",
            format!("{HEAD}Transfer-Encoding:\x0bchunked\r\n\r\n{}", chunked("")),
            false,
        ),
        ("TE obs-fold", format!("{HEAD}Transfer-Encoding:\r\n chunked\r\n\r\n{}", chunked("")), false),
    ]
}

/// The status codes of every response in `text`, in order.
fn statuses(text: &str) -> Vec<u16> {
    text.match_indices("HTTP/1.")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect()
}

/// What the replica saw is one request framed by one Content-Length, nothing more.
fn assert_normalized(what: &str, raw: &[u8]) {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{what}: {text}"));
    let lower = head.to_ascii_lowercase();
    assert!(!lower.contains("transfer-encoding"), "{what}: {head}");
    let cls: Vec<&str> = lower
        .lines()
        .filter_map(|l| l.strip_prefix("content-length:"))
        .map(str::trim)
        .collect();
    // The value is the client's digits (leading zeros pass through), never another number.
    let lens: Vec<Option<usize>> = cls.iter().map(|v| v.parse().ok()).collect();
    assert_eq!(lens, vec![Some(body.len())], "{what}: {head}");
    assert!(cls[0].bytes().all(|b| b.is_ascii_digit()), "{what}: {head}");
    assert!(
        serde_json::from_str::<serde_json::Value>(body).is_ok(),
        "{what}: the body is one JSON document: {body:?}"
    );
}

#[test]
fn framing_vectors_are_refused_or_normalized_and_nothing_is_smuggled() {
    let mock = MockReplica::start(Mode::Ok);
    let yaml = format!("auth: {{enabled: false}}\n{}", replicas_yaml(&[mock.url()]));
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let body = serde_json::to_string(&chat("mock", "s", "u", 4, false)).unwrap();
    let follow = format!(
        "{HEAD}Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut refused = Vec::new();
    for (what, req, half_close) in corpus(&body) {
        let before = mock.generations();
        let seen_before = mock.raw_requests().len();
        let mut s = TcpStream::connect(&gw.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        if half_close {
            s.shutdown(Shutdown::Write).unwrap();
        } else {
            // The follow-up may meet a connection the gateway has already closed.
            let _ = s.write_all(follow.as_bytes());
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        let closed = loop {
            match s.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        let text = String::from_utf8_lossy(&got);
        let codes = statuses(&text);
        assert!(
            closed,
            "{what}: the connection ends (timed out instead): {text}"
        );
        assert!(!codes.is_empty(), "{what}: answered: {text}");
        assert!(
            codes.iter().all(|c| *c == 200 || (400..500).contains(c)),
            "{what}: {codes:?} {text}"
        );
        let served = codes.iter().filter(|c| **c == 200).count();
        let forwarded = mock.generations() - before;
        assert_eq!(
            forwarded, served,
            "{what}: the replica saw one request per 200: {text}"
        );
        for raw in &mock.raw_requests()[seen_before..] {
            assert_normalized(what, raw);
        }
        if codes[0] != 200 {
            refused.push(what);
            // A refusal closes the connection: the follow-up is never served.
            assert_eq!(codes.len(), 1, "{what}: {text}");
        }
    }
    // The plainly ambiguous shapes are among the refused ones.
    for what in [
        "chunk-size overflow",
        "duplicate Content-Length, different",
        "Content-Length with +",
        "Content-Length in hex",
        "CL + TE",
        "TE chunked, x",
        "chunked in a second TE header",
        "TE xchunked",
    ] {
        assert!(
            refused.contains(&what),
            "{what} is refused; refused: {refused:?}"
        );
    }
    println!("refused: {refused:?}");
}
