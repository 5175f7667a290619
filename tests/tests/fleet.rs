#![allow(clippy::unwrap_used)]
//! A fleet of three gateways sharing tenant limits in a real Redis (one server, then a
//! three-master Redis Cluster), in front of a real replica: the fleet admits what one
//! gateway would, whatever the gateways' clocks say; Redis killed mid-run degrades each
//! gateway to its local share without hanging a request, and Redis restarted brings the
//! shared limits back without a gateway restart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, chat, model_of, replicas_yaml, smollm2_model};
use warmpath_e2e::fleet::{status_with, wait_degraded};
use warmpath_e2e::http::{post_json, post_sse, request};
use warmpath_e2e::openai_upstream::OpenAiUpstream;
use warmpath_e2e::redis::{libfaketime, RedisCluster, RedisServer};
use warmpath_e2e::{GatewayProc, ReplicaProc};

/// The tests here measure rates on two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const RPM: f64 = 600.0;
const BURST: f64 = 10.0;
const TPM: f64 = 1500.0;

/// Three gateways on `state` in front of `replica`, their clocks skewed by -30 s, 0 and
/// +30 s with libfaketime.
fn fleet(state: &str, replica: &str, tenants: &[(&str, &str, &str)]) -> Vec<GatewayProc> {
    let yaml = format!(
        "{}{}{state}",
        auth_yaml(tenants),
        replicas_yaml(&[replica.to_string()])
    );
    let preload = libfaketime();
    ["-30", "+0", "+30"]
        .iter()
        .map(|skew| {
            let env = [
                ("LD_PRELOAD", preload.to_str().unwrap()),
                ("FAKETIME", *skew),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ];
            GatewayProc::spawn_with(&yaml, &[], 1, None, &env).expect("gateway")
        })
        .collect()
}

/// What a load run saw.
#[derive(Default)]
struct Run {
    admitted: usize,
    refused: usize,
    /// Tokens the admitted requests used (from their usage), streaming runs.
    tokens: u64,
    first_sent: Option<Instant>,
    last_sent: Option<Instant>,
    last_done: Option<Instant>,
    slowest: Duration,
}

impl Run {
    /// From the first request sent to the last answer: every admission falls in it (the
    /// window of the upper bounds).
    fn window(&self) -> f64 {
        (self.last_done.unwrap() - self.first_sent.unwrap()).as_secs_f64()
    }

    /// From the first request sent to the last sent: the clients kept asking all along (the
    /// window of the lower bounds; the answers of the last requests, slow on a busy machine,
    /// add time in which nothing was asked).
    fn asking(&self) -> f64 {
        (self.last_sent.unwrap() - self.first_sent.unwrap()).as_secs_f64()
    }
}

/// Clients per gateway in [`load`]: enough that some client is always free to ask while
/// others wait for admitted answers (about 1 s each from a replica on a busy 2-core
/// machine), so the limit, not the clients, sets what is admitted.
const CLIENTS: usize = 4;

/// [`CLIENTS`] clients per gateway send `key`'s requests for `secs`, pausing `pause`
/// between requests; streaming requests count the tokens their usage reports.
fn load(
    gws: &[GatewayProc],
    model: &str,
    key: &str,
    secs: f64,
    stream: bool,
    pause: Duration,
) -> Run {
    let run = Arc::new(Mutex::new(Run::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for (g, gw) in gws.iter().enumerate() {
        for c in 0..CLIENTS {
            let (addr, model, run, stop) = (
                gw.addr.clone(),
                model.to_string(),
                run.clone(),
                stop.clone(),
            );
            let auth = format!("Bearer {key}");
            handles.push(std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let mut body = chat(
                        &model,
                        "Answer briefly.",
                        &format!("g{g}c{c} n{i}: hi"),
                        4,
                        stream,
                    );
                    if stream {
                        body["stream_options"] = serde_json::json!({"include_usage": true});
                    }
                    let sent = Instant::now();
                    let (status, used) = if stream {
                        let r = post_sse(
                            &addr,
                            "/v1/chat/completions",
                            &[("Authorization", &auth)],
                            &body,
                        )
                        .unwrap();
                        let used = r
                            .events
                            .iter()
                            .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
                            .filter_map(|v| v["usage"]["total_tokens"].as_u64())
                            .next_back()
                            .unwrap_or(0);
                        (r.status, used)
                    } else {
                        let r = post_json(
                            &addr,
                            "/v1/chat/completions",
                            &[("Authorization", &auth)],
                            &body,
                        )
                        .unwrap();
                        (r.status, 0)
                    };
                    let done = Instant::now();
                    let mut r = run.lock().unwrap();
                    r.first_sent = Some(r.first_sent.map_or(sent, |f| f.min(sent)));
                    r.last_sent = Some(r.last_sent.map_or(sent, |l| l.max(sent)));
                    r.last_done = Some(r.last_done.map_or(done, |l| l.max(done)));
                    r.slowest = r.slowest.max(done - sent);
                    match status {
                        200 => {
                            assert!(!stream || used > 0, "a stream without usage");
                            r.admitted += 1;
                            r.tokens += used;
                        }
                        429 => r.refused += 1,
                        s => panic!("unexpected status {s}"),
                    }
                    drop(r);
                    std::thread::sleep(pause);
                }
            }));
        }
    }
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    Arc::try_unwrap(run).ok().unwrap().into_inner().unwrap()
}

/// The fleet's RPM and TPM hold as one limit: at most `L × t/60 + B` within 1%.
fn limits_hold(state: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let replica = ReplicaProc::spawn(&smollm2_model()).expect("replica");
    let model = model_of(&replica.addr);
    let rpm = format!("requests_per_minute: {RPM}, request_burst: {BURST}");
    let tpm = format!("tokens_per_minute: {TPM}");
    let gws = fleet(
        state,
        &replica.url(),
        &[("rpm", "key-rpm", &rpm), ("tpm", "key-tpm", &tpm)],
    );
    wait_degraded(&gws, 0, Duration::from_secs(10));

    let r = load(
        &gws,
        &model,
        "key-rpm",
        8.0,
        false,
        Duration::from_millis(15),
    );
    let bound = RPM * r.window() / 60.0 + BURST;
    let admitted = r.admitted as f64;
    eprintln!(
        "rpm: admitted {admitted} of {} in {:.2}s, bound {bound:.1}",
        r.admitted + r.refused,
        r.window()
    );
    assert!(
        admitted <= bound * 1.01,
        "admitted {admitted} > bound {bound:.1}"
    );
    let floor = RPM * r.asking() / 60.0 + BURST;
    assert!(
        admitted >= floor * 0.97 - 1.0,
        "admitted {admitted}, far under {floor:.1} (the rate while clients asked)"
    );
    assert!(r.refused > 0);

    // TPM, streaming: reservations of prompt + max_tokens, settled with the usage.
    let r = load(
        &gws,
        &model,
        "key-tpm",
        8.0,
        true,
        Duration::from_millis(15),
    );
    let bound = TPM * r.window() / 60.0 + TPM;
    eprintln!(
        "tpm: {} tokens in {} requests ({} refused) in {:.2}s, bound {bound:.0}",
        r.tokens,
        r.admitted,
        r.refused,
        r.window()
    );
    assert!(
        (r.tokens as f64) <= bound * 1.01,
        "used {} > bound {bound:.0}",
        r.tokens
    );
    let floor = TPM * r.asking() / 60.0 + TPM;
    assert!(
        (r.tokens as f64) >= floor * 0.85,
        "used {}, far under {floor:.0} (the rate while clients asked)",
        r.tokens
    );
    assert!(r.refused > 0);
}

#[test]
fn shared_limits_hold_across_three_skewed_gateways_on_one_redis() {
    let redis = RedisServer::start().expect("redis");
    limits_hold(&format!(
        "state: {{backend: redis, url: '{}', gateway_count: 3}}\n",
        redis.url()
    ));
    // The state really is in Redis, under the tenant's hash tag, and every admission was
    // one script call.
    let keys = redis.cli(&["KEYS", "warmpath:*"]).unwrap();
    assert!(keys.contains("warmpath:{tpm}:tpm"), "{keys}");
    let stats = redis.cli(&["INFO", "commandstats"]).unwrap();
    let calls: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|l| l.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(calls > 1000, "{stats}");
}

#[test]
fn shared_limits_hold_on_a_three_master_redis_cluster() {
    let cluster = RedisCluster::start(3).expect("redis cluster");
    let seeds = cluster
        .urls()
        .iter()
        .map(|u| format!("'{u}'"))
        .collect::<Vec<_>>()
        .join(", ");
    limits_hold(&format!(
        "state: {{backend: redis, cluster: [{seeds}], gateway_count: 3}}\n"
    ));
}

#[test]
fn redis_killed_degrades_to_local_shares_and_restarted_resumes_shared_limits() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut redis = RedisServer::start().expect("redis");
    let replica = ReplicaProc::spawn(&smollm2_model()).expect("replica");
    let model = model_of(&replica.addr);
    let rpm = format!("requests_per_minute: {RPM}, request_burst: 9");
    let gws = fleet(
        &format!(
            "state: {{backend: redis, url: '{}', gateway_count: 3, timeout_ms: 100}}\n",
            redis.url()
        ),
        &replica.url(),
        &[("t", "key-t", &rpm)],
    );
    wait_degraded(&gws, 0, Duration::from_secs(10));

    redis.kill();
    // Known tenants are served, each gateway under its share: 600/3 per minute, burst 3.
    let r = load(&gws, &model, "key-t", 4.0, false, Duration::from_millis(15));
    let per_gateway = RPM / 3.0 * r.window() / 60.0 + 3.0;
    eprintln!(
        "degraded: admitted {} refused {} in {:.2}s, slowest {:?}",
        r.admitted,
        r.refused,
        r.window(),
        r.slowest
    );
    assert!(
        r.admitted as f64 <= 3.0 * per_gateway * 1.01 + 1.0,
        "{} admitted",
        r.admitted
    );
    let floor = 3.0 * (RPM / 3.0 * r.asking() / 60.0 + 3.0);
    assert!(
        r.admitted as f64 >= floor * 0.8,
        "{} admitted, far under {floor:.1}",
        r.admitted
    );
    assert!(
        r.slowest < Duration::from_secs(2),
        "a request took {:?}",
        r.slowest
    );
    wait_degraded(&gws, 1, Duration::from_secs(1));
    // No request waited on Redis past its 100 ms timeout: each gateway's time before the
    // upstream request (Redis's part included) stayed under 250 ms for every request.
    for g in &gws {
        let m = g.metrics().unwrap();
        let value = |prefix: &str| -> u64 {
            m.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{prefix} missing"))
        };
        let under =
            value("warmpath_gateway_added_latency_seconds_bucket{endpoint=\"chat\",le=\"0.25\"}");
        let all = value("warmpath_gateway_added_latency_seconds_count{endpoint=\"chat\"}");
        assert_eq!(
            under, all,
            "a request waited over 250 ms before its upstream request"
        );
        assert!(all > 0);
    }
    // An unknown key is refused, degraded or not.
    let unknown = post_json(
        &gws[0].addr,
        "/v1/chat/completions",
        &[("Authorization", "Bearer nope")],
        &chat(&model, "s", "u", 1, false),
    )
    .unwrap();
    assert_eq!(unknown.status, 401);
    for g in &gws {
        assert!(g.log().contains("shared state degraded"), "{}", g.log());
    }

    // Redis back, empty: every gateway returns to the shared limits without a restart.
    redis.restart().expect("redis restart");
    let back = wait_degraded(&gws, 0, Duration::from_secs(5));
    eprintln!("recovered {back:?} after the restart");
    std::thread::sleep(Duration::from_secs(2));
    let r = load(&gws, &model, "key-t", 4.0, false, Duration::from_millis(15));
    let bound = RPM * r.window() / 60.0 + 9.0;
    eprintln!(
        "resumed: admitted {} in {:.2}s, bound {bound:.1}",
        r.admitted,
        r.window()
    );
    assert!(
        r.admitted as f64 <= bound * 1.01,
        "admitted {} > shared bound {bound:.1}",
        r.admitted
    );
}

/// Waits until `key` gets `want` from every gateway in `gws`; returns how long it took.
fn until_status(gws: &[&GatewayProc], model: &str, key: &str, want: u16) -> Duration {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if gws.iter().all(|g| status_with(&g.addr, model, key) == want) {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("key never got {want} from every gateway");
}

#[test]
fn keys_made_rotated_and_revoked_on_one_gateway_hold_on_all_three() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let redis = RedisServer::start().expect("redis");
    let replica = ReplicaProc::spawn(&smollm2_model()).expect("replica");
    let model = model_of(&replica.addr);
    let gws = fleet(
        &format!(
            "state: {{backend: redis, url: '{}', gateway_count: 3}}\n",
            redis.url()
        ),
        &replica.url(),
        &[("t", "config-key", "")],
    );
    wait_degraded(&gws, 0, Duration::from_secs(10));
    let admin = |g: &GatewayProc, method: &str, path: &str| {
        let r = request(&g.admin, method, path, &[], None).unwrap();
        (r.status, r.json().unwrap_or_default())
    };

    // The config's key was seeded into the store; a new key is shown once, stored hashed.
    let (status, made) = admin(&gws[0], "POST", "/admin/tenants/t/keys");
    assert_eq!(status, 201, "{made}");
    let key = made["key"].as_str().unwrap().to_string();
    let key_id = made["record"]["key_id"].as_str().unwrap().to_string();
    let (_, listed) = admin(&gws[1], "GET", "/admin/tenants/t/keys");
    let text = listed.to_string();
    assert!(
        text.contains(&key_id) && text.contains("\"config\""),
        "{text}"
    );
    assert!(!text.contains(&key), "a listing shows a key: {text}");
    let all = redis.cli(&["HGETALL", "warmpath:{keys}:all"]).unwrap();
    assert!(!all.contains(&key), "a key stored in clear");
    let others = [&gws[1], &gws[2]];
    let new_key = until_status(&others, &model, &key, 200);
    eprintln!("a new key worked on the other gateways after {new_key:?}");
    assert_eq!(status_with(&gws[0].addr, &model, &key), 200);

    // Revoked through gateway 0: the other two refuse it within one second.
    let (status, _) = admin(
        &gws[0],
        "DELETE",
        &format!("/admin/tenants/t/keys/{key_id}"),
    );
    assert_eq!(status, 200);
    let revoked = until_status(&others, &model, &key, 401);
    eprintln!("a revoked key was refused by the other gateways after {revoked:?}");
    assert!(revoked < Duration::from_secs(1), "{revoked:?}");
    assert_eq!(status_with(&gws[0].addr, &model, &key), 401);

    // A config key can be rotated: the new one works everywhere, the old one nowhere.
    let config_id = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["source"] == "config")
        .unwrap()["key_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, rotated) = admin(
        &gws[2],
        "POST",
        &format!("/admin/tenants/t/keys/{config_id}/rotate"),
    );
    assert_eq!(status, 201, "{rotated}");
    let fresh = rotated["key"].as_str().unwrap().to_string();
    let all: Vec<&GatewayProc> = gws.iter().collect();
    until_status(&all, &model, "config-key", 401);
    until_status(&all, &model, &fresh, 200);

    // Bad asks get clear errors.
    let (status, e) = admin(&gws[0], "DELETE", "/admin/tenants/t/keys/k-nope");
    assert_eq!(status, 404, "{e}");
    let (status, e) = admin(&gws[0], "POST", "/admin/tenants/nobody/keys");
    assert_eq!(status, 404, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("nobody"));
}

/// Three gateways on `redis` in front of two plain OpenAI servers (no KV events: each
/// gateway's approximate index knows only where requests went).
fn plain_fleet(
    redis: &RedisServer,
    upstreams: &[&OpenAiUpstream],
    share: bool,
) -> Vec<GatewayProc> {
    let list: Vec<String> = upstreams
        .iter()
        .map(|u| format!("      - {}", u.url()))
        .collect();
    let yaml = format!(
        "{}pools:\n  - name: plain\n    engine: openai\n    tokenizer: none\n    upstreams:\n{}\n\
         state: {{backend: redis, url: '{}', gateway_count: 3, share_routing: {share}}}\n",
        auth_yaml(&[("t", "key-t", "")]),
        list.join("\n"),
        redis.url()
    );
    (0..3)
        .map(|_| GatewayProc::spawn(&yaml, &[], upstreams.len()).expect("gateway"))
        .collect()
}

/// (replica URL, predicted cached tokens) of one chat with a long shared system prompt
/// (replica ids are per gateway: the URL is what the gateways share).
fn routed(gw: &GatewayProc, system: &str, user: &str) -> (String, u64) {
    let body = serde_json::json!({"model": "plain-model", "max_tokens": 4, "messages": [
        {"role": "system", "content": system}, {"role": "user", "content": user}]});
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[("Authorization", "Bearer key-t")],
        &body,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let predicted = r
        .header("x-warmpath-predicted-cached-tokens")
        .unwrap_or("0")
        .parse()
        .unwrap();
    let id = r
        .header("x-warmpath-replica")
        .unwrap()
        .trim_start_matches('r');
    let replicas = gw.replicas().unwrap();
    let url = replicas
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"].as_u64().map(|n| n.to_string()).as_deref() == Some(id))
        .and_then(|x| x["url"].as_str())
        .unwrap()
        .to_string();
    (url, predicted)
}

#[test]
fn routing_history_is_shared_for_engines_without_kv_events() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (a, b) = (
        OpenAiUpstream::start("plain-model"),
        OpenAiUpstream::start("plain-model"),
    );
    for share in [false, true] {
        let redis = RedisServer::start().expect("redis");
        let gws = plain_fleet(&redis, &[&a, &b], share);
        wait_degraded(&gws, 0, Duration::from_secs(10));
        let mut seen = Vec::new();
        for conv in 0..4 {
            let system = format!(
                "[conversation {conv} of {share}] {}",
                "Answer as a careful librarian would. ".repeat(40)
            );
            let (first, _) = routed(&gws[0], &system, "turn one");
            std::thread::sleep(Duration::from_millis(300));
            // The next turns reach the other gateways, which never routed this prefix.
            for g in &gws[1..] {
                let (replica, predicted) = routed(g, &system, "turn two");
                seen.push((replica == first, predicted));
            }
        }
        let predicted_hits = seen.iter().filter(|(_, p)| *p > 0).count();
        let same_replica = seen.iter().filter(|(s, _)| *s).count();
        eprintln!("share_routing {share}: {predicted_hits}/{} predicted a cached prefix, {same_replica} on the first replica", seen.len());
        if share {
            assert_eq!(predicted_hits, seen.len(), "{seen:?}");
            assert_eq!(same_replica, seen.len(), "{seen:?}");
        } else {
            assert_eq!(
                predicted_hits, 0,
                "without sharing no other gateway knows the prefix: {seen:?}"
            );
        }
    }
}
