#![allow(clippy::unwrap_used)]
//! Slow readers (defect 1): clients that send a streaming request and never read cannot
//! hold replica slots for longer than `timeouts.client_write_ms`, so another tenant keeps
//! being served, and the upstream connection is closed (the replica cancels).

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, chat, replicas_yaml};
use warmpath_e2e::http::post_json;
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

/// A streaming request that is sent and then never read.
fn stalled_reader(addr: &str, key: &str, i: usize) -> TcpStream {
    let body = chat("mock", "s", &format!("stalled {i}"), 100_000, true).to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

#[test]
fn two_hundred_stalled_streaming_readers_do_not_starve_another_tenant() {
    let mock = MockReplica::start(Mode::Endless);
    let slots = 4;
    let yaml = format!(
        "{}{}admission: {{max_in_flight_per_replica: {slots}, max_queue: 16, queue_timeout_ms: 200, \
         flow: {{reserve_per_replica: 0}}}}\n\
         timeouts: {{client_write_ms: 300}}\n",
        auth_yaml(&[("stalled", "key-stalled", ""), ("other", "key-other", "")]),
        replicas_yaml(&[mock.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");

    // 200 stalled readers; the first ones to get a slot fill it with an endless stream.
    let stalled: Vec<TcpStream> = (0..200)
        .map(|i| stalled_reader(&gw.addr, "key-stalled", i))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while mock.generations() < slots {
        assert!(
            Instant::now() < deadline,
            "the stalled readers never took the replica's slots ({} generations)",
            mock.generations()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The other tenant is served: a stalled reader's slot is freed once a write to it
    // has made no progress for client_write_ms (without that, every request gets 503; the
    // flow reserve, which would let the other tenant past the full replica, is off here).
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut served, mut refused) = (0, 0);
    while served < 5 {
        assert!(
            Instant::now() < deadline,
            "the other tenant was served {served} times ({refused} refused) while readers stalled"
        );
        let r = post_json(
            &gw.addr,
            "/v1/chat/completions",
            &[("Authorization", "Bearer key-other")],
            &chat("mock", "s", &format!("other {served}"), 4, false),
        )
        .unwrap();
        match r.status {
            200 => served += 1,
            503 => refused += 1,
            s => panic!("unexpected status {s}: {}", r.text()),
        }
    }

    // The gateway closed the upstream connections of the streams it cut: the replica
    // sees its stream fail, which is what cancels a real replica's generation.
    let deadline = Instant::now() + Duration::from_secs(20);
    while mock.aborted() < slots {
        assert!(
            Instant::now() < deadline,
            "only {} of the cut streams were closed upstream",
            mock.aborted()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stalled);
}
