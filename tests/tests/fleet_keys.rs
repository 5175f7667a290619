#![allow(clippy::unwrap_used)]
//! Revocation in a fleet (issue 44, item 2), on a real Redis in front of a mock replica:
//! a key removed from the config stops working when the gateway restarts, a gateway that
//! starts while Redis hangs accepts no key it cannot check against the store's revocations,
//! and a Redis that lost its data cannot bring back a key the gateway had verified.

use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, replicas_yaml};
use warmpath_e2e::fleet::{status_with, until_status, wait_degraded};
use warmpath_e2e::http::request;
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::redis::RedisServer;
use warmpath_e2e::GatewayProc;

const WITHIN: Duration = Duration::from_secs(10);

/// One gateway on `redis` in front of `mock`, with `tenants` (id, key, limits).
fn gateway(redis: &RedisServer, mock: &MockReplica, tenants: &[(&str, &str, &str)]) -> GatewayProc {
    let yaml = format!(
        "{}{}state: {{backend: redis, url: '{}', timeout_ms: 200}}\n",
        auth_yaml(tenants),
        replicas_yaml(&[mock.url()]),
        redis.url()
    );
    GatewayProc::spawn(&yaml, &[], 1).expect("gateway")
}

/// An admin call on `gw`: (status, JSON body).
fn admin(gw: &GatewayProc, method: &str, path: &str) -> (u16, serde_json::Value) {
    let r = request(&gw.admin, method, path, &[], None).unwrap();
    (r.status, r.json().unwrap_or_default())
}

/// The key ids `gw` lists for `tenant`.
fn listed(gw: &GatewayProc, tenant: &str) -> Vec<String> {
    let (status, body) = admin(gw, "GET", &format!("/admin/tenants/{tenant}/keys"));
    assert_eq!(status, 200, "{body}");
    body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key_id"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until `gw` lists `n` keys for `tenant`; returns their ids.
fn until_listed(gw: &GatewayProc, tenant: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + WITHIN;
    loop {
        let ids = listed(gw, tenant);
        if ids.len() == n {
            return ids;
        }
        assert!(Instant::now() < deadline, "{ids:?}; log: {}", gw.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The key store's change counter, 0 when there is none.
fn epoch(redis: &RedisServer) -> u64 {
    redis
        .cli(&["GET", "warmpath:{keys}:epoch"])
        .unwrap()
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn a_key_removed_from_the_config_is_refused_after_a_restart() {
    let redis = RedisServer::start().expect("redis");
    let mock = MockReplica::start(Mode::Ok);
    let first = gateway(&redis, &mock, &[("a", "key-a", ""), ("b", "key-b", "")]);
    wait_degraded(std::slice::from_ref(&first), 0, WITHIN);
    assert_eq!(until_status(&first, "mock", "key-b", 200, WITHIN), 200);
    // The config's key reached the store.
    let old_ids = until_listed(&first, "b", 1);
    drop(first);

    // The same fleet restarted with tenant b's key replaced in the config.
    let second = gateway(&redis, &mock, &[("a", "key-a", ""), ("b", "key-b2", "")]);
    wait_degraded(std::slice::from_ref(&second), 0, WITHIN);
    assert_eq!(until_status(&second, "mock", "key-b2", 200, WITHIN), 200);
    // Refused, and still refused after several polls of the store (the store kept it as a
    // config key and every gateway took it from there).
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        assert_eq!(status_with(&second.addr, "mock", "key-b"), 401);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(status_with(&second.addr, "mock", "key-a"), 200);
    // The store no longer lists it either.
    let now = listed(&second, "b");
    assert!(!now.contains(&old_ids[0]), "{now:?}");
    assert_eq!(now.len(), 1, "{now:?}");
}

#[test]
fn a_gateway_started_while_redis_hangs_accepts_no_key_it_cannot_check() {
    let redis = RedisServer::start().expect("redis");
    let mock = MockReplica::start(Mode::Ok);
    let tenants = [("t", "key-t", ""), ("u", "key-u", "")];
    let first = gateway(&redis, &mock, &tenants);
    wait_degraded(std::slice::from_ref(&first), 0, WITHIN);
    // Tenant t's config key is revoked through the admin API.
    let id = until_listed(&first, "t", 1).remove(0);
    let (status, body) = admin(&first, "DELETE", &format!("/admin/tenants/t/keys/{id}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(status_with(&first.addr, "mock", "key-t"), 401);

    // Redis hangs; a second gateway with the same config starts.
    redis.pause();
    let second = gateway(&redis, &mock, &tenants);
    let revoked = status_with(&second.addr, "mock", "key-t");
    assert_eq!(
        revoked, 503,
        "a revoked key got {revoked} before the store was read"
    );
    assert_eq!(status_with(&second.addr, "mock", "key-u"), 503);
    let ready = warmpath_e2e::http::get(&second.addr, "/ready", &[]).unwrap();
    assert_eq!(ready.status, 503, "{}", ready.text());

    // Redis answers again: the good key works, the revoked one stays refused.
    redis.resume();
    assert_eq!(until_status(&second, "mock", "key-u", 200, WITHIN), 200);
    assert_eq!(status_with(&second.addr, "mock", "key-t"), 401);
    let ready = warmpath_e2e::http::get(&second.addr, "/ready", &[]).unwrap();
    assert_eq!(ready.status, 200, "{}", ready.text());
}

#[test]
fn a_redis_that_lost_its_data_does_not_bring_back_a_verified_key() {
    let mut redis = RedisServer::start().expect("redis");
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&redis, &mock, &[("t", "key-t", "")]);
    wait_degraded(std::slice::from_ref(&gw), 0, WITHIN);
    let (status, made) = admin(&gw, "POST", "/admin/tenants/t/keys");
    assert_eq!(status, 201, "{made}");
    let minted = made["key"].as_str().unwrap().to_string();
    // Verified once: remembered.
    assert_eq!(status_with(&gw.addr, "mock", &minted), 200);

    let verified_at = epoch(&redis);

    // Redis restarts empty (no persistence): the minted key is gone with it. The new
    // store's counter then climbs back to where the old one stood when the key was
    // verified (keys are made until it does).
    redis.restart().expect("redis restart");
    let deadline = Instant::now() + WITHIN;
    let mut again = None;
    while epoch(&redis) < verified_at {
        let (status, made) = admin(&gw, "POST", "/admin/tenants/t/keys");
        if status == 201 {
            again = made["key"].as_str().map(str::to_string);
        }
        assert!(
            Instant::now() < deadline,
            "{status}: {made}; log: {}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(k) = &again {
        assert_eq!(until_status(&gw, "mock", k, 200, WITHIN), 200);
    }
    // Past a poll of the new store the remembered key is refused (it got 200 forever
    // when the cache was keyed by the counter alone).
    let minted_now = until_status(&gw, "mock", &minted, 401, Duration::from_secs(2));
    assert_eq!(minted_now, 401, "a key lost with Redis's data still works");
    assert_eq!(status_with(&gw.addr, "mock", "key-t"), 200);
}
