#![allow(clippy::unwrap_used)]
//! Graceful shutdown under streaming load (reliability matrix B2/B4): on `SIGTERM` the
//! gateway stops accepting, streams that finish within `shutdown_grace_s` end with
//! `[DONE]`, a stream still running at the end of the grace period ends with a terminal
//! error event (never a silent cut, never `[DONE]`), and the process exits soon after.

use std::net::TcpStream;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{chat, replicas_yaml};
use warmpath_e2e::http::post_sse;
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

const GRACE_S: u64 = 4;

#[test]
fn sigterm_drains_short_streams_and_ends_long_ones_with_an_error_event() {
    // 150 ms per token: 6 tokens take about 1 s, 400 take a minute.
    let mock = MockReplica::start(Mode::SlowStream { delay_ms: 150 });
    let yaml = format!(
        "auth: {{enabled: false}}\n{}shutdown_grace_s: {GRACE_S}\n",
        replicas_yaml(&[mock.url()])
    );
    let mut gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let stream = |max_tokens: u32| {
        let addr = gw.addr.clone();
        std::thread::spawn(move || {
            let r = post_sse(
                &addr,
                "/v1/chat/completions",
                &[],
                &chat("mock", "s", "u", max_tokens, true),
            )
            .unwrap();
            (r, Instant::now())
        })
    };
    let long = stream(400);
    let short = stream(6);
    let deadline = Instant::now() + Duration::from_secs(30);
    while mock.generations() < 2 {
        assert!(Instant::now() < deadline, "both streams reach the replica");
        std::thread::sleep(Duration::from_millis(20));
    }
    let term = Instant::now();
    gw.signal("TERM");

    // New connections are refused once the listener has closed.
    let deadline = Instant::now() + Duration::from_secs(GRACE_S / 2);
    let mut refused = false;
    while Instant::now() < deadline {
        if TcpStream::connect(&gw.addr).is_err() {
            refused = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(refused, "a new connection after SIGTERM is refused");

    let (short, _) = short.join().unwrap();
    assert_eq!(short.status, 200);
    assert!(short.clean_end, "the short stream ends cleanly");
    assert_eq!(
        short.events.last().map(String::as_str),
        Some("[DONE]"),
        "{:?}",
        short.events
    );

    let (long, ended) = long.join().unwrap();
    assert_eq!(long.status, 200);
    let last = long.events.last().cloned().unwrap_or_default();
    assert!(
        last.contains("\"error\""),
        "the long stream ends with an error event: {:?}",
        long.events
    );
    assert!(
        !long.events.iter().any(|e| e == "[DONE]"),
        "{:?}",
        long.events
    );
    assert!(
        long.clean_end,
        "the error event is followed by the end of the body"
    );
    let cut = ended - term;
    assert!(
        cut >= Duration::from_secs(GRACE_S) / 2 && cut <= Duration::from_secs(GRACE_S + 2),
        "cut {cut:?} after SIGTERM, grace {GRACE_S} s"
    );
    assert!(
        long.events.len() > 5,
        "it streamed until the cut: {:?}",
        long.events.len()
    );

    let status = gw.wait_exit(Duration::from_secs(GRACE_S + 15));
    let exited = term.elapsed();
    assert!(status.is_some(), "the gateway exits; log: {}", gw.log());
    assert!(
        exited <= Duration::from_secs(GRACE_S + 6),
        "exited {exited:?} after SIGTERM"
    );
}

/// The long grace period of a production gateway: the tests below show it is not waited
/// out when nothing, or only a short stream, is in flight.
const LONG_GRACE_S: u64 = 30;

#[test]
fn an_idle_gateway_exits_at_once_on_sigterm_even_with_a_kept_alive_connection() {
    use std::io::{BufReader, Write};
    let mock = MockReplica::start(Mode::SlowStream { delay_ms: 150 });
    let yaml = format!(
        "auth: {{enabled: false}}\n{}shutdown_grace_s: {LONG_GRACE_S}\n",
        replicas_yaml(&[mock.url()])
    );
    let mut gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    // A kept-alive client connection, idle after its request.
    let mut idle = TcpStream::connect(&gw.addr).unwrap();
    idle.write_all(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n")
        .unwrap();
    let mut reader = BufReader::new(idle.try_clone().unwrap());
    let first = warmpath_e2e::http::read_response(&mut reader).unwrap();
    assert_eq!(first.status, 200, "{}", first.text());

    let term = Instant::now();
    gw.signal("TERM");
    let status = gw.wait_exit(Duration::from_secs(LONG_GRACE_S + 10));
    let exited = term.elapsed();
    assert!(status.is_some(), "the gateway exits; log: {}", gw.log());
    assert!(status.unwrap().success(), "exit status; log: {}", gw.log());
    assert!(
        exited < Duration::from_secs(5),
        "an idle gateway exited {exited:?} after SIGTERM, grace {LONG_GRACE_S} s"
    );
    drop(idle);
}

#[test]
fn sigterm_exits_as_soon_as_the_last_stream_ends() {
    // 150 ms per token: 16 tokens take about 2.5 s, far inside the grace period.
    let mock = MockReplica::start(Mode::SlowStream { delay_ms: 150 });
    let yaml = format!(
        "auth: {{enabled: false}}\n{}shutdown_grace_s: {LONG_GRACE_S}\n",
        replicas_yaml(&[mock.url()])
    );
    let mut gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let addr = gw.addr.clone();
    let stream = std::thread::spawn(move || {
        let r = post_sse(
            &addr,
            "/v1/chat/completions",
            &[],
            &chat("mock", "s", "u", 16, true),
        )
        .unwrap();
        (r, Instant::now())
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while mock.generations() < 1 {
        assert!(Instant::now() < deadline, "the stream reaches the replica");
        std::thread::sleep(Duration::from_millis(20));
    }
    let term = Instant::now();
    gw.signal("TERM");
    let status = gw.wait_exit(Duration::from_secs(LONG_GRACE_S + 10));
    let exited = Instant::now();
    assert!(status.is_some(), "the gateway exits; log: {}", gw.log());

    let (r, ended) = stream.join().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.events.last().map(String::as_str),
        Some("[DONE]"),
        "the stream in flight finishes: {:?}",
        r.events
    );
    assert!(exited >= ended, "the gateway waited for the stream");
    assert!(
        exited - term < Duration::from_secs(10),
        "exited {:?} after SIGTERM (the stream ended {:?} after it), grace {LONG_GRACE_S} s",
        exited - term,
        ended - term
    );
}
