#![allow(clippy::unwrap_used)]
//! Replicas that answer with error statuses (defect 8; reliability matrix rows C6, C7,
//! C8): a replica that answers 503 to all real traffic while passing the health probe is
//! ejected; a total outage stays within the retry budget and answers fast with
//! `Retry-After`; an upstream 429 with `Retry-After` cools that replica down, and other
//! 4xx are passed on, never retried.

use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{chat, replicas_yaml};
use warmpath_e2e::http::{post_json, HttpResponse};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

fn send(gw: &GatewayProc, i: usize) -> HttpResponse {
    post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat("mock", "s", &format!("question {i}"), 2, false),
    )
    .unwrap()
}

fn state_of(gw: &GatewayProc, url: &str) -> String {
    gw.replicas()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["url"] == url)
        .unwrap()["health"]["state"]
        .as_str()
        .unwrap()
        .to_string()
}

/// C6: one of `n` replicas answers 503 to every request (and passes the probe).
fn one_replica_always_503(n: usize) {
    let bad = MockReplica::start(Mode::Status(503));
    let good: Vec<MockReplica> = (1..n).map(|_| MockReplica::start(Mode::Ok)).collect();
    let mut urls = vec![bad.url()];
    urls.extend(good.iter().map(MockReplica::url));
    // A long ejection, so that a slow run never sees the half-open trial at the end.
    let yaml = format!(
        "auth: {{enabled: false}}\n{}health: {{ejection_ms: 60000}}\n",
        replicas_yaml(&urls)
    );
    let gw = GatewayProc::spawn(&yaml, &["--policy", "round_robin"], n).expect("gateway");
    let requests = 150;
    let ok = (0..requests)
        .filter(|&i| send(&gw, i).status == 200)
        .count();
    let attempts = bad.generations() + good.iter().map(MockReplica::generations).sum::<usize>();
    let ratio = attempts as f64 / requests as f64;
    let success = ok as f64 / requests as f64;
    eprintln!(
        "C6 with {n} replicas: success {:.1}% ({ok}/{requests}), upstream attempts {attempts} \
         ({ratio:.3} per request), the failing replica tried {} times",
        success * 100.0,
        bad.generations()
    );
    assert_eq!(
        state_of(&gw, &bad.url()),
        "ejected",
        "the replica failing every request was not ejected"
    );
    assert!(bad.generations() <= 10, "tried {} times", bad.generations());
    assert!(ratio <= 1.2, "upstream attempts per request {ratio:.3}");
    assert!(success >= 0.99, "success {:.1}%", success * 100.0);
}

#[test]
fn c6_one_replica_of_three_answering_503_is_ejected() {
    one_replica_always_503(3);
}

#[test]
fn c6_one_replica_of_two_answering_503_is_ejected() {
    one_replica_always_503(2);
}

#[test]
fn c7_total_outage_stays_within_the_retry_budget_and_answers_fast() {
    let mocks: Vec<MockReplica> = (0..3)
        .map(|_| MockReplica::start(Mode::Status(503)))
        .collect();
    let urls: Vec<String> = mocks.iter().map(MockReplica::url).collect();
    let yaml = format!(
        "auth: {{enabled: false}}\n{}retry: {{budget_ratio: 0.1, budget_floor_per_s: 1}}\n",
        replicas_yaml(&urls)
    );
    let gw = GatewayProc::spawn(&yaml, &["--policy", "round_robin"], 3).expect("gateway");
    let requests = 200;
    let threads = 4;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let addr = gw.addr.clone();
            std::thread::spawn(move || {
                (0..requests / threads)
                    .map(|i| {
                        let start = Instant::now();
                        let r = post_json(
                            &addr,
                            "/v1/chat/completions",
                            &[],
                            &chat("mock", "s", &format!("q {t} {i}"), 2, false),
                        )
                        .unwrap();
                        (r, start.elapsed())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<(HttpResponse, Duration)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let attempts: usize = mocks.iter().map(MockReplica::generations).sum();
    let ratio = attempts as f64 / requests as f64;
    let slowest = results.iter().map(|(_, d)| *d).max().unwrap();
    eprintln!("C7: {attempts} upstream attempts for {requests} requests ({ratio:.3}); slowest answer {slowest:?}");
    assert!(ratio <= 1.2, "upstream attempts per request {ratio:.3}");
    for (r, _) in &results {
        assert_eq!(r.status, 503, "{}", r.text());
        let ra: u64 = r
            .header("retry-after")
            .unwrap_or_else(|| panic!("503 without Retry-After: {:?}", r.headers))
            .parse()
            .unwrap();
        assert!(ra >= 1);
    }
    assert!(
        slowest < Duration::from_secs(5),
        "slowest answer {slowest:?}"
    );
}

#[test]
fn c8_an_upstream_429_with_retry_after_cools_that_replica_down() {
    let mock = MockReplica::start(Mode::StatusRetryAfter(429, 2));
    let yaml = format!("auth: {{enabled: false}}\n{}", replicas_yaml(&[mock.url()]));
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let sent = Instant::now();
    let first = send(&gw, 0);
    assert_eq!(first.status, 429, "{}", first.text());
    assert_eq!(first.header("retry-after"), Some("2"));
    assert_eq!(mock.generations(), 1);
    // No other capacity: the client is told to come back, and the replica gets nothing
    // before its 2 s are up (asked for until 1.5 s after the first request left, a margin
    // for a loaded machine).
    let mut refused = 0;
    while sent.elapsed() < Duration::from_millis(1500) {
        let r = send(&gw, 1);
        assert!(matches!(r.status, 429 | 503), "{} {}", r.status, r.text());
        assert!(r.header("retry-after").is_some(), "{:?}", r.headers);
        refused += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(refused > 0);
    assert_eq!(
        mock.generations(),
        1,
        "the replica was sent requests within its Retry-After"
    );
    mock.set_mode(Mode::Ok);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = send(&gw, 2);
        if r.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never served again: {}",
            r.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(sent.elapsed() >= Duration::from_secs(2));
}

#[test]
fn c8_other_4xx_from_a_replica_are_passed_on_not_retried() {
    let mocks: Vec<MockReplica> = (0..2)
        .map(|_| MockReplica::start(Mode::Status(400)))
        .collect();
    let urls: Vec<String> = mocks.iter().map(MockReplica::url).collect();
    let yaml = format!("auth: {{enabled: false}}\n{}", replicas_yaml(&urls));
    let gw = GatewayProc::spawn(&yaml, &[], 2).expect("gateway");
    for i in 0..5 {
        let r = send(&gw, i);
        assert_eq!(r.status, 400, "{}", r.text());
    }
    let attempts: usize = mocks.iter().map(MockReplica::generations).sum();
    assert_eq!(attempts, 5, "a 400 from a replica must not be retried");
    for m in &mocks {
        assert_eq!(
            state_of(&gw, &m.url()),
            "healthy",
            "a 400 is not the replica's fault"
        );
    }
}
