#![allow(clippy::unwrap_used)]
//! Issue 44: a chaos test of the fleet. Three gateways share tenant limits, keys and
//! rollouts in one Redis, in front of two real replicas, under a steady mixed load from
//! four tenants (a request-rate limit, a token limit on streams, a concurrency limit, and
//! plain keys), while the test kills Redis, restarts it empty, pauses it (SIGSTOP) past the
//! gateways' timeout, skews the gateways' clocks, cuts one gateway off from Redis (its
//! link in a network namespace goes down), and revokes keys and starts, aborts, resumes
//! and ends rollouts through different gateways. After every step it checks:
//! - tenant `rpm`'s admissions within the documented bound for the fleet's state in that
//!   step (and tenant `tok`'s tokens over the whole run);
//! - every request answered cleanly (an admitted one whole, a refused one with an OpenAI
//!   error), none lost;
//! - every revoked key refused by every gateway that reaches Redis within a poll
//!   interval, and never accepted again (a prober asks every gateway with every revoked
//!   key, the whole run long);
//! - no concurrency lease held once tenant `conc` has nothing in flight;
//! - every gateway that reaches Redis shows the same rollout state within a poll interval
//!   of the last change, and a gateway that was cut off catches up when it is back.

#[path = "fleet_chaos/checks.rs"]
mod checks;
#[path = "fleet_chaos/setup.rs"]
mod setup;

use checks::{
    check_step, no_lease_left, one_rollout_state, revocation_window, revoked_refused,
    until_everywhere, Prober, Step,
};
use serde_json::{json, Value};
use setup::{Fleet, NEW, OLD, POLL_MS, TPM};
use std::time::{Duration, Instant};
use warmpath_e2e::chaos::{Clients, Load};
use warmpath_e2e::fleet::wait_degraded;

const ALL: [usize; 3] = [0, 1, 2];
const STEP: Duration = Duration::from_secs(4);

fn clients() -> Vec<Clients> {
    let c = |tenant, key: &str, stream, pause_ms, max_tokens, threads| Clients {
        tenant,
        key: key.into(),
        stream,
        pause: Duration::from_millis(pause_ms),
        max_tokens,
        threads,
    };
    // Tenant `rpm`'s clients ask far more than its limit even when the replicas are slow.
    vec![
        c("rpm", "key-rpm", false, 25, 2, 3),
        c("tok", "key-tok", true, 100, 4, 1),
        c("conc", "key-conc", false, 150, 6, 1),
        c("k", "key-k", false, 400, 1, 1),
    ]
}

/// Mints a key for tenant `k` through gateway `g`; waits until all of `gws` accept it.
fn mint(f: &Fleet, g: usize, gws: &[usize]) -> (String, String) {
    let (status, made) = f.gws[g]
        .admin_call("POST", "/admin/tenants/k/keys", None)
        .unwrap();
    assert_eq!(status, 201, "{made}");
    let key = made["key"].as_str().unwrap().to_string();
    let id = made["record"]["key_id"].as_str().unwrap().to_string();
    until_everywhere(f, gws, &key, 200, Duration::from_secs(2));
    (key, id)
}

/// Revokes `id` of `tenant` through gateway `g`.
fn revoke(f: &Fleet, g: usize, tenant: &str, id: &str) {
    let path = format!("/admin/tenants/{tenant}/keys/{id}");
    let (status, v) = f.gws[g].admin_call("DELETE", &path, None).unwrap();
    assert_eq!(status, 200, "{v}");
}

/// The id of the config key of tenant `cfg`, as gateway 0 lists it.
fn config_key_id(f: &Fleet) -> String {
    let (_, v) = f.gws[0]
        .admin_call("GET", "/admin/tenants/cfg/keys", None)
        .unwrap();
    v["keys"][0]["key_id"].as_str().unwrap().to_string()
}

/// A rollout change through gateway `g`: (status, body).
fn rollout(f: &Fleet, g: usize, method: &str, op: &str, body: Option<Value>) -> (u16, Value) {
    let path = format!("/admin/rollouts/{}{op}", f.model);
    f.gws[g].admin_call(method, &path, body.as_ref()).unwrap()
}

fn put_body(percent: f64) -> Value {
    json!({"from": OLD, "to": NEW, "percent": percent, "prewarm": {"top_n": 0}})
}

/// One rollout, in `state`, targeting `percent`.
fn is_rollout(state: &'static str, percent: f64) -> impl Fn(&[Value]) -> bool {
    move |v| v.len() == 1 && v[0]["state"] == json!(state) && v[0]["target"] == json!(percent)
}

/// Waits until Redis holds `model`'s rollout record again; how long it took.
fn until_restored(f: &Fleet, model: &Value, within: Duration) -> Duration {
    let start = Instant::now();
    let model = model.as_str().unwrap();
    while f
        .redis
        .cli(&["HEXISTS", "warmpath:{rollouts}:all", model])
        .unwrap()
        .trim()
        != "1"
    {
        assert!(
            start.elapsed() < within,
            "the rollout was never written back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

/// Waits `STEP` under the current state; the step's window.
fn hold_state(name: &'static str, shared: usize, local: usize) -> Step {
    let start = Instant::now();
    std::thread::sleep(STEP);
    Step {
        name,
        start,
        end: Instant::now(),
        shared,
        local,
    }
}

#[test]
fn the_fleet_keeps_its_invariants_through_redis_faults_skew_and_a_partition() {
    let mut f = Fleet::start();
    let poll = Duration::from_millis(POLL_MS) + revocation_window();
    let mut revoked: Vec<String> = Vec::new();
    let mut steps = Vec::new();
    let began = Instant::now();
    let load = Load::start(&f.addrs(), &f.model, &clients());
    let prober = Prober::start(f.addrs());

    // 1. Healthy: a key minted through gateway 0 and revoked through gateway 2; a rollout
    // set through gateway 0.
    let (k1, id1) = mint(&f, 0, &ALL);
    revoke(&f, 2, "k", &id1);
    let took = until_everywhere(&f, &ALL, &k1, 401, revocation_window());
    eprintln!("k1 revoked everywhere after {took:?}");
    prober.add(&k1);
    revoked.push(k1);
    let (status, v) = rollout(&f, 0, "PUT", "", Some(put_body(50.0)));
    assert_eq!(status, 200, "{v}");
    let before = one_rollout_state(&f, &ALL, poll, is_rollout("active", 50.0));
    steps.push(hold_state("healthy", 3, 0));
    no_lease_left(&f, &load, "healthy");

    // 2. Redis killed: every gateway on its local share; a rollout change is refused
    // cleanly; keys they knew still work, revoked ones stay refused.
    f.redis.kill();
    wait_degraded(&f.gws, 1, Duration::from_secs(2));
    let (status, v) = rollout(&f, 0, "PUT", "", Some(put_body(80.0)));
    assert_eq!(status, 503, "{v}");
    steps.push(hold_state("redis killed", 0, 3));
    revoked_refused(&f, &ALL, &revoked, "redis killed");

    // 3. Redis back, empty: shared limits again; the gateways write back what they know
    // (revocations, the rollout in force), and a change made now reaches all of them.
    f.redis.restart().expect("redis restart");
    wait_degraded(&f.gws, 0, Duration::from_secs(5));
    let took = until_restored(&f, &before[0]["model"], poll);
    eprintln!("the rollout was written back into the empty Redis after {took:?}");
    let restored = one_rollout_state(&f, &ALL, poll, is_rollout("active", 50.0));
    assert_eq!(restored[0]["generation"], json!(1), "{restored:?}");
    revoked_refused(&f, &ALL, &revoked, "redis restarted empty");
    let (status, v) = rollout(&f, 1, "PUT", "", Some(put_body(30.0)));
    assert_eq!(status, 200, "{v}");
    one_rollout_state(&f, &ALL, poll, is_rollout("active", 30.0));
    let cfg_id = config_key_id(&f);
    revoke(&f, 0, "cfg", &cfg_id);
    until_everywhere(&f, &ALL, "key-cfg", 401, revocation_window());
    prober.add("key-cfg");
    revoked.push("key-cfg".into());
    steps.push(hold_state("redis restarted", 3, 0));
    no_lease_left(&f, &load, "redis restarted");

    // 4. Redis paused past the timeout, then let go.
    f.redis.pause();
    wait_degraded(&f.gws, 1, Duration::from_secs(2));
    steps.push(hold_state("redis paused", 0, 3));
    f.redis.resume();
    wait_degraded(&f.gws, 0, Duration::from_secs(5));
    steps.push(hold_state("redis resumed", 3, 0));
    no_lease_left(&f, &load, "redis resumed");
    revoked_refused(&f, &ALL, &revoked, "redis resumed");

    // 5. Clocks skewed further apart (-30/0/+30 s to +90/-5/-120 s): nothing changes.
    f.skew(0, "+90");
    f.skew(1, "-5");
    f.skew(2, "-120");
    std::thread::sleep(Duration::from_millis(1100));
    let (k2, id2) = mint(&f, 1, &ALL);
    revoke(&f, 2, "k", &id2);
    until_everywhere(&f, &ALL, &k2, 401, revocation_window());
    prober.add(&k2);
    revoked.push(k2);
    let (status, v) = rollout(&f, 2, "POST", "/pause", None);
    assert_eq!(status, 200, "{v}");
    one_rollout_state(&f, &ALL, poll, is_rollout("paused", 30.0));
    steps.push(hold_state("clocks skewed", 3, 0));
    no_lease_left(&f, &load, "clocks skewed");

    // 6. Gateway 1 cut off from Redis. A key revoked through gateway 0 is refused by the
    // two that reach Redis; gateway 1 keeps its last view until it is back. An abort
    // through gateway 1 applies there and is refused as unshared (503).
    let (k3, id3) = mint(&f, 0, &ALL);
    f.ns.cut(1).unwrap();
    wait_degraded(std::slice::from_ref(&f.gws[1]), 1, Duration::from_secs(3));
    revoke(&f, 0, "k", &id3);
    until_everywhere(&f, &[0, 2], &k3, 401, revocation_window());
    let (status, v) = rollout(&f, 1, "POST", "/abort", None);
    assert_eq!(status, 503, "{v}");
    one_rollout_state(&f, &[1], poll, is_rollout("aborted", 30.0));
    one_rollout_state(&f, &[0, 2], poll, is_rollout("paused", 30.0));
    steps.push(hold_state("gateway 1 cut off", 2, 1));
    revoked_refused(&f, &ALL, &revoked, "gateway 1 cut off");

    // 7. The link mended: gateway 1 refuses the key revoked meanwhile, and the abort it
    // applied alone reaches the fleet.
    f.ns.mend(1).unwrap();
    wait_degraded(&f.gws, 0, Duration::from_secs(5));
    let took = until_everywhere(&f, &[1], &k3, 401, poll);
    eprintln!("gateway 1 refused the key revoked while it was cut off {took:?} after it was back");
    prober.add(&k3);
    revoked.push(k3);
    one_rollout_state(&f, &ALL, poll, is_rollout("aborted", 30.0));
    steps.push(hold_state("link mended", 3, 0));
    no_lease_left(&f, &load, "link mended");

    // 8. Resumed through gateway 2, ended through gateway 0.
    let (status, v) = rollout(&f, 2, "POST", "/resume", None);
    assert_eq!(status, 200, "{v}");
    one_rollout_state(&f, &ALL, poll, is_rollout("active", 30.0));
    let (status, v) = rollout(&f, 0, "DELETE", "", None);
    assert_eq!(status, 200, "{v}");
    one_rollout_state(&f, &ALL, poll, <[Value]>::is_empty);

    // The whole run: every step's records, and tenant `tok`'s tokens within the bound.
    no_lease_left(&f, &load, "end");
    revoked_refused(&f, &ALL, &revoked, "end");
    for s in &steps {
        check_step(&load, s);
    }
    let all = load.stop();
    prober.finish();
    let secs = began.elapsed().as_secs_f64();
    for r in &all {
        assert!(r.unclean.is_none(), "{r:?}");
    }
    let tokens: u64 = all
        .iter()
        .filter(|r| r.tenant == "tok" && r.status == 200)
        .map(|r| r.tokens)
        .sum();
    // The bucket's rate over the run, plus a full bucket at the start, one after the empty
    // restart, and a full local share on each gateway in each of the three degraded spells.
    let bound = TPM * secs / 60.0 + 2.0 * TPM + 3.0 * TPM;
    eprintln!(
        "tok: {tokens} tokens in {} requests, bound {bound:.0}; {} requests in all",
        all.iter().filter(|r| r.tenant == "tok").count(),
        all.len()
    );
    assert!((tokens as f64) <= bound, "{tokens} tokens > {bound:.0}");
    assert!(tokens > 0);
}
