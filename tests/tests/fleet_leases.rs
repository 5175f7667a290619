#![allow(clippy::unwrap_used)]
//! Concurrency leases across a Redis stall (issue 44, item 5), on a real Redis in front of
//! a slow mock replica: settlements that could not reach Redis are replayed when it
//! answers again, and an admission that timed out on the gateway but ran on Redis leaves no
//! lease behind, so a tenant's `max_concurrent` slots are free again within seconds, not
//! after `state.lease_ttl_s` (900 s).

use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, replicas_yaml};
use warmpath_e2e::fleet::{metric, status_with, wait_degraded};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::redis::RedisServer;
use warmpath_e2e::GatewayProc;

const WITHIN: Duration = Duration::from_secs(10);
const LEASES: &str = "warmpath:{t}:conc";

/// Leases tenant t holds in Redis now.
fn leases(redis: &RedisServer) -> u64 {
    redis
        .cli(&["ZCARD", LEASES])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits until tenant t holds `want` leases; panics past `WITHIN`.
fn until_leases(redis: &RedisServer, gw: &GatewayProc, want: u64) {
    let start = Instant::now();
    while leases(redis) != want {
        assert!(
            start.elapsed() < WITHIN,
            "tenant t holds {} leases, not {want}; log: {}",
            leases(redis),
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `n` slow requests of tenant t at once; their statuses.
fn at_once(gw: &GatewayProc, n: usize) -> Vec<std::thread::JoinHandle<u16>> {
    (0..n)
        .map(|_| {
            let addr = gw.addr.clone();
            std::thread::spawn(move || status_with(&addr, "mock", "key-t"))
        })
        .collect()
}

fn statuses(handles: Vec<std::thread::JoinHandle<u16>>) -> Vec<u16> {
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Redis, a slow mock replica (600 ms a request) and one gateway in front of them, with
/// tenant t limited to 2 requests at once; the gateway already on the shared limits.
fn setup() -> (RedisServer, MockReplica, GatewayProc) {
    let redis = RedisServer::start().expect("redis");
    let mock = MockReplica::start(Mode::SlowStream { delay_ms: 600 });
    let yaml = format!(
        "{}{}state: {{backend: redis, url: '{}', timeout_ms: 100, probe_ms: 100}}\n",
        auth_yaml(&[("t", "key-t", "max_concurrent: 2")]),
        replicas_yaml(&[mock.url()]),
        redis.url()
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    wait_degraded(std::slice::from_ref(&gw), 0, WITHIN);
    (redis, mock, gw)
}

/// Both slots free again (two requests at once admitted), and the limit still holds (a
/// third at once is refused, once the two before have settled).
fn slots_free(redis: &RedisServer, gw: &GatewayProc) {
    assert_eq!(statuses(at_once(gw, 2)), [200, 200]);
    until_leases(redis, gw, 0);
    let three = statuses(at_once(gw, 3));
    assert_eq!(three.iter().filter(|s| **s == 429).count(), 1, "{three:?}");
}

#[test]
fn settlements_that_miss_a_redis_stall_are_replayed() {
    let (redis, _mock, gw) = setup();
    let one = std::slice::from_ref(&gw);
    // Two requests hold both slots; Redis hangs while they run, so their settlements
    // cannot reach it.
    let running = at_once(&gw, 2);
    until_leases(&redis, &gw, 2);
    redis.pause();
    assert_eq!(statuses(running), [200, 200]);
    wait_degraded(one, 1, WITHIN);
    redis.resume();
    wait_degraded(one, 0, WITHIN);
    until_leases(&redis, &gw, 0);
    assert!(metric(&gw, "warmpath_gateway_state_settlements_queued_total") >= 2.0);
    assert!(metric(&gw, "warmpath_gateway_state_settlements_replayed_total") >= 2.0);
    assert_eq!(
        metric(&gw, "warmpath_gateway_state_settlements_dropped_total"),
        0.0
    );
    slots_free(&redis, &gw);
}

#[test]
fn an_admission_abandoned_in_a_redis_stall_leaves_no_lease() {
    let (redis, _mock, gw) = setup();
    // Redis hangs under an admission: the gateway gives up on it (and serves the request
    // under its local limit), but Redis runs the script when it resumes.
    redis.pause();
    assert_eq!(status_with(&gw.addr, "mock", "key-t"), 200);
    redis.resume();
    wait_degraded(std::slice::from_ref(&gw), 0, WITHIN);
    until_leases(&redis, &gw, 0);
    slots_free(&redis, &gw);
}
