#![allow(clippy::unwrap_used)]
//! Issue 44, item 3: TLS between Warmpath and Redis. A real `redis-server` serving TLS only
//! (certificates made with `openssl` per test) with the ACL of docs/security.md: gateways
//! on `rediss://` with `state.ca_file` share limits and keys and are not degraded (on one
//! server and on a three-master Cluster whose bus is TLS too); with
//! `tls-auth-clients yes` a gateway and replicas with client certificates work (the
//! replicas' shared KV tier stores and loads blocks) while a gateway without one is kept
//! out; a gateway or a replica trusting another CA never talks to Redis and says why; and
//! plain text to the TLS port gets nowhere.

use serde_json::json;
use std::time::Duration;
use warmpath_e2e::fixtures::{
    auth_yaml, completion_text, long_prompt, model_of, prompt_and_cached, replicas_yaml,
    smollm2_model,
};
use warmpath_e2e::fleet::{metric, status_with, until_status, wait_degraded};
use warmpath_e2e::http::{post_json, request, HttpResponse};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::redis_tls::{replica_metric, TlsRedis, TlsRedisCluster};
use warmpath_e2e::{GatewayProc, LoggedReplica};

const WITHIN: Duration = Duration::from_secs(10);
/// Several probe periods (250 ms) and connect timeouts of a gateway that cannot connect.
const SETTLE: Duration = Duration::from_millis(2500);

/// docs/security.md's ACL, with test passwords.
const ACL: &str = warmpath_e2e::redis::DOCS_ACL;
/// The replica's default `--block-size`.
const BLOCK: u64 = 16;
const WORDS: &[&str] = &["harbor", "lantern", "meadow", "cinder", "orchid", "granite"];
const QUESTION: &str = "Name the first word of the list:";

/// A gateway config on Redis as the `gateway` user (its password file in `redis`'s
/// directory) at `address` (`url: ...` or `cluster: [...]`), with `tls` (YAML pairs under
/// `state:`), tenants `a` (2 requests a minute) and `t`, in front of `mock`.
fn gateway_yaml(redis: &TlsRedis, address: &str, mock: &MockReplica, tls: &str) -> String {
    let pw = redis.password_file("gateway.password", "gateway-pw");
    format!(
        "{}{}state: {{backend: redis, {address}, password_file: '{pw}', timeout_ms: 500, \
         gateway_count: 2{tls}}}\n",
        auth_yaml(&[("a", "key-a", "requests_per_minute: 2"), ("t", "key-t", "")]),
        replicas_yaml(&[mock.url()]),
    )
}

fn gateway(redis: &TlsRedis, mock: &MockReplica, tls: &str) -> GatewayProc {
    let address = format!("url: '{}'", redis.url("gateway"));
    let yaml = gateway_yaml(redis, &address, mock, tls);
    GatewayProc::spawn(&yaml, &[], 1).unwrap()
}

/// `state:` pairs trusting `ca` (a file of the PKI), with the client certificate when
/// `client`.
fn tls_keys(redis: &TlsRedis, ca: &str, client: bool) -> String {
    let mut s = format!(", ca_file: '{}'", redis.pki.file(ca));
    if client {
        s += &format!(
            ", client_cert_file: '{}', client_key_file: '{}'",
            redis.pki.file("client.pem"),
            redis.pki.file("client.key")
        );
    }
    s
}

/// Asserts `gw` is still degraded after [`SETTLE`], has written nothing to Redis and
/// refuses a config key it cannot check against the store (503).
fn kept_out(gw: &GatewayProc, redis: &TlsRedis) {
    std::thread::sleep(SETTLE);
    assert_eq!(
        metric(gw, "warmpath_gateway_state_degraded"),
        1.0,
        "{}",
        gw.log()
    );
    assert_eq!(status_with(&gw.addr, "mock", "key-t"), 503, "{}", gw.log());
    assert!(redis.keys("warmpath:*").is_empty());
}

/// What gateway 0 used up of tenant `a`'s limit, gateway 1 refuses (each alone, or each
/// on its fallback of 2 / gateway_count, would admit one more).
fn one_limit_for_the_fleet(gws: &[GatewayProc; 2]) {
    assert_eq!(status_with(&gws[0].addr, "mock", "key-a"), 200);
    assert_eq!(until_status(&gws[0], "mock", "key-a", 429, WITHIN), 429);
    assert_eq!(status_with(&gws[1].addr, "mock", "key-a"), 429);
}

#[test]
fn a_fleet_on_rediss_shares_limits_and_keys_and_plain_text_is_refused() {
    let redis = TlsRedis::start(ACL, ("admin", "admin-pw"), false).unwrap();
    let mock = MockReplica::start(Mode::Ok);
    let tls = tls_keys(&redis, "ca.pem", false);
    let gws = [gateway(&redis, &mock, &tls), gateway(&redis, &mock, &tls)];
    let took = wait_degraded(&gws, 0, WITHIN);
    eprintln!("two gateways connected over TLS after {took:?}");

    one_limit_for_the_fleet(&gws);
    assert!(
        !redis.keys("warmpath:{a}:*").is_empty(),
        "no limit state in Redis"
    );

    // A key made through gateway 0's admin API works on gateway 1.
    let made = request(&gws[0].admin, "POST", "/admin/tenants/t/keys", &[], None).unwrap();
    assert_eq!(made.status, 201, "{}", made.text());
    let key = made.json().unwrap()["key"].as_str().unwrap().to_string();
    assert_eq!(until_status(&gws[1], "mock", &key, 200, WITHIN), 200);
    for gw in &gws {
        assert_eq!(metric(gw, "warmpath_gateway_state_degraded"), 0.0);
        assert_eq!(metric(gw, "warmpath_gateway_state_redis_errors_total"), 0.0);
    }

    // Plain text to the TLS port: a client with the right password gets no answer, and a
    // gateway given `redis://` for it stays degraded.
    let plain =
        redis::Client::open(format!("redis://admin:admin-pw@127.0.0.1:{}", redis.port)).unwrap();
    let pong = plain
        .get_connection_with_timeout(Duration::from_secs(2))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
    assert!(pong.is_err(), "plain text answered: {pong:?}");
    let plain_url = format!("url: 'redis://gateway@127.0.0.1:{}'", redis.port);
    let before = redis.keys("warmpath:*");
    let yaml = gateway_yaml(&redis, &plain_url, &mock, "");
    let gw = GatewayProc::spawn(&yaml, &[], 1).unwrap();
    std::thread::sleep(SETTLE);
    assert_eq!(metric(&gw, "warmpath_gateway_state_degraded"), 1.0);
    assert_eq!(status_with(&gw.addr, "mock", "key-t"), 503);
    assert_eq!(redis.keys("warmpath:*"), before);
}

#[test]
fn a_gateway_and_a_replica_trusting_another_ca_never_use_redis_and_say_why() {
    let redis = TlsRedis::start(ACL, ("admin", "admin-pw"), false).unwrap();
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&redis, &mock, &tls_keys(&redis, "other-ca.pem", false));
    kept_out(&gw, &redis);
    let log = gw.log();
    assert!(
        log.contains("Redis unreachable at start") && log.contains("UnknownIssuer"),
        "{log}"
    );

    let model_path = smollm2_model();
    let replica = tiered(&redis, &model_path, "other-ca.pem");
    let model = model_of(&replica.proc.addr);
    let prompt = long_prompt("List", 7, WORDS, QUESTION);
    for _ in 0..2 {
        let r = complete(&replica, &model, &prompt);
        assert_ne!(r.header("x-warmpath-kv-tier"), Some("hit"));
        std::thread::sleep(Duration::from_millis(1200));
    }
    let connects = "warmpath_replica_kv_tier_errors_total{op=\"connect\"}";
    assert!(
        replica_metric(&replica.proc.addr, connects) >= 1.0,
        "no failed connect counted"
    );
    let log = replica.log();
    assert!(
        log.contains("cannot connect to Redis") && log.contains("UnknownIssuer"),
        "{log}"
    );
    assert!(!log.contains("KV tier connected"), "{log}");
    assert_eq!(redis.cli(&["DBSIZE"]).unwrap().trim(), "0");
}

/// A SmolLM2 replica on `redis`'s tier as the `replica` user over mutual TLS, trusting
/// `ca`.
fn tiered(redis: &TlsRedis, model_path: &str, ca: &str) -> LoggedReplica {
    let url = redis.url("replica");
    let pw = redis.password_file("replica.password", "replica-pw");
    let (ca, cert, key) = (
        redis.pki.file(ca),
        redis.pki.file("client.pem"),
        redis.pki.file("client.key"),
    );
    let args = [
        "--kv-store",
        url.as_str(),
        "--kv-store-password-file",
        pw.as_str(),
        "--kv-store-ca-file",
        ca.as_str(),
        "--kv-store-client-cert-file",
        cert.as_str(),
        "--kv-store-client-key-file",
        key.as_str(),
    ];
    LoggedReplica::spawn(model_path, &args).unwrap()
}

fn complete(r: &LoggedReplica, model: &str, prompt: &str) -> HttpResponse {
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 16, "temperature": 0});
    let resp = post_json(&r.proc.addr, "/v1/completions", &[], &body).unwrap();
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp
}

#[test]
fn mutual_tls_carries_a_gateway_and_the_kv_tier_and_keeps_out_a_client_without_a_certificate() {
    let redis = TlsRedis::start(ACL, ("admin", "admin-pw"), true).unwrap();
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&redis, &mock, &tls_keys(&redis, "ca.pem", true));
    wait_degraded(std::slice::from_ref(&gw), 0, WITHIN);
    assert_eq!(until_status(&gw, "mock", "key-t", 200, WITHIN), 200);
    assert!(!redis.keys("warmpath:*").is_empty());
    drop(gw);
    redis.cli(&["FLUSHALL"]).unwrap();
    let anonymous = gateway(&redis, &mock, &tls_keys(&redis, "ca.pem", false));
    kept_out(&anonymous, &redis);

    // The tier: A computes and writes the prompt's blocks, B loads them.
    let model_path = smollm2_model();
    let (a, b) = (
        tiered(&redis, &model_path, "ca.pem"),
        tiered(&redis, &model_path, "ca.pem"),
    );
    let model = model_of(&a.proc.addr);
    let prompt = long_prompt("List", 1, WORDS, QUESTION);
    let first = complete(&a, &model, &prompt);
    let (tokens, _) = prompt_and_cached(&first);
    let blocks = tokens / BLOCK;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while (redis.keys("wpkv:*").len() as u64) < blocks {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {blocks} blocks in Redis; log: {}",
            redis.keys("wpkv:*").len(),
            a.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let hits = "warmpath_replica_kv_tier_lookups_total{outcome=\"hit\",reason=\"complete\"}";
    let got = complete(&b, &model, &prompt);
    assert_eq!(got.header("x-warmpath-kv-tier"), Some("hit"), "{}", b.log());
    assert_eq!(replica_metric(&b.proc.addr, hits), 1.0);
    assert!(prompt_and_cached(&got).1 > 0, "{}", got.text());
    assert_eq!(completion_text(&got), completion_text(&first));
    for r in [&a, &b] {
        assert!(r.log().contains("KV tier connected"), "{}", r.log());
        let errors = replica_metric(&r.proc.addr, "warmpath_replica_kv_tier_errors_total");
        assert_eq!(errors, 0.0, "{}", r.log());
    }
}

#[test]
fn a_fleet_on_a_rediss_cluster_shares_limits() {
    let cluster = TlsRedisCluster::start(3, ACL, ("admin", "admin-pw")).unwrap();
    let mock = MockReplica::start(Mode::Ok);
    let node = &cluster.nodes[0];
    let seeds: Vec<String> = cluster
        .urls("gateway")
        .iter()
        .map(|u| format!("'{u}'"))
        .collect();
    let address = format!("cluster: [{}]", seeds.join(", "));
    let yaml = gateway_yaml(node, &address, &mock, &tls_keys(node, "ca.pem", false));
    let gws = [
        GatewayProc::spawn(&yaml, &[], 1).unwrap(),
        GatewayProc::spawn(&yaml, &[], 1).unwrap(),
    ];
    wait_degraded(&gws, 0, WITHIN);
    one_limit_for_the_fleet(&gws);
    let stored: usize = cluster
        .nodes
        .iter()
        .map(|n| n.keys("warmpath:{a}:*").len())
        .sum();
    assert!(stored > 0, "no limit state in the Cluster");
    for gw in &gws {
        assert_eq!(metric(gw, "warmpath_gateway_state_redis_errors_total"), 0.0);
    }
}
