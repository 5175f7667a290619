//! Issue 44, item 1: a shared rollout's changes never lose to a pre-warm's progress. A
//! rollout ended through the gateway that pre-warms it, while the pre-warm runs, stays
//! ended: the task's later progress writes find a newer generation in Redis and change
//! nothing.

use super::{admin, checkpoints_of, one_at_a_time, rollout_status, turn, NEW, OLD};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{model_of, smollm2_model};
use warmpath_e2e::redis::RedisServer;
use warmpath_e2e::{GatewayProc, ReplicaProc};

/// Two gateways sharing one Redis, in front of one replica of each checkpoint.
pub(crate) struct Fleet {
    /// The shared store.
    pub redis: RedisServer,
    /// The model both replicas serve.
    pub model: String,
    /// The gateways.
    pub a: GatewayProc,
    pub b: GatewayProc,
    _replicas: (ReplicaProc, ReplicaProc),
}

impl Fleet {
    pub(crate) fn start() -> Self {
        let redis = RedisServer::start().unwrap();
        let model_path = smollm2_model();
        let old = ReplicaProc::spawn_args(&model_path, 0, &["--checkpoint-id", OLD]).unwrap();
        let new = ReplicaProc::spawn_args(&model_path, 0, &["--checkpoint-id", NEW]).unwrap();
        let yaml = format!(
            "auth: {{enabled: false}}\nreplicas:\n  - {}\n  - {}\n\
             state: {{backend: redis, url: '{}', gateway_count: 2}}\n",
            old.url(),
            new.url(),
            redis.url()
        );
        Self {
            model: model_of(&old.addr),
            a: GatewayProc::spawn(&yaml, &[], 2).unwrap(),
            b: GatewayProc::spawn(&yaml, &[], 2).unwrap(),
            redis,
            _replicas: (old, new),
        }
    }
}

/// Waits (up to 120 s) until `g`'s log has a line with one of `needles`.
fn until_logged(g: &GatewayProc, needles: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !needles.iter().any(|n| g.log().contains(n)) {
        assert!(Instant::now() < deadline, "never logged {needles:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (up to 30 s) until `g` shows the rollout of `model`.
fn until_shown(g: &GatewayProc, model: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = rollout_status(g)["rollouts"].clone();
        let list = all.as_array().cloned().unwrap_or_default();
        if list.iter().any(|r| r["model"] == json!(model)) {
            return;
        }
        assert!(Instant::now() < deadline, "{model} never shown: {all}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_rollout_ended_during_its_prewarm_stays_ended() {
    let _one = one_at_a_time();
    let f = Fleet::start();
    let (redis, model, a, b) = (&f.redis, f.model.clone(), &f.a, &f.b);
    let ck_a = checkpoints_of(a);
    const N: usize = 4;
    for i in 0..N {
        let (r, _, _) = turn(a, &model, i, 0);
        assert_eq!(ck_a[&r], OLD);
    }

    // Set through A and ended through A at once, while A's pre-warm runs.
    let body = json!({"from": OLD, "to": NEW, "percent": 50, "prewarm": {"top_n": N}});
    let (status, set) = admin(a, "PUT", &format!("/admin/rollouts/{model}"), Some(body));
    assert_eq!(status, 200, "{set}");
    let (status, ended) = admin(a, "DELETE", &format!("/admin/rollouts/{model}"), None);
    assert_eq!(status, 200, "{ended}");

    // The pre-warm task of the ended rollout ends (stopped, or done with what was in
    // flight); everything it wrote is in Redis by then.
    until_logged(
        a,
        &["rollout pre-warm stopped", "rollout pre-warm finished"],
    );
    let record = redis
        .cli(&["HEXISTS", "warmpath:{rollouts}:all", &model])
        .unwrap();
    assert_eq!(record.trim(), "0", "the ended rollout's record is back");

    // A marker rollout set after it: once both gateways show it, they have read the store
    // past every write of the ended one, which neither may show.
    let marker = "marker-model";
    let body = json!({"from": "x@1", "to": "x@2", "percent": 10, "prewarm": {"top_n": 0}});
    let (status, set) = admin(a, "PUT", &format!("/admin/rollouts/{marker}"), Some(body));
    assert_eq!(status, 200, "{set}");
    for g in [a, b] {
        until_shown(g, marker);
        let all: Vec<Value> = rollout_status(g)["rollouts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            all.iter().all(|r| r["model"] != json!(model)),
            "the ended rollout is in force again: {all:?}"
        );
    }
    let prewarms_started = a.log().matches("rollout pre-warm started").count();
    assert_eq!(prewarms_started, 1, "A pre-warmed the ended rollout again");
}

#[test]
fn a_rollout_replaced_through_another_gateway_during_its_prewarm_stays_replaced() {
    let _one = one_at_a_time();
    let f = Fleet::start();
    let (redis, model, a, b) = (&f.redis, f.model.clone(), &f.a, &f.b);
    const N: usize = 6;
    for i in 0..N {
        turn(a, &model, i, 0);
    }

    // Set through A; replaced through B while A's replays are in flight.
    let body = json!({"from": OLD, "to": NEW, "percent": 50, "prewarm": {"top_n": N}});
    let (status, set) = admin(a, "PUT", &format!("/admin/rollouts/{model}"), Some(body));
    assert_eq!(status, 200, "{set}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = rollout_status(a)["rollouts"][0]["progress"].clone();
        if p["started"] == json!(true) && p["planned"].as_u64() > Some(0) {
            assert!(
                p["finished"] != json!(true),
                "pre-warm ended before the test: {p}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "A's pre-warm never started: {p}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let body = json!({"from": OLD, "to": NEW, "percent": 30, "prewarm": {"top_n": N}});
    let (status, set) = admin(b, "PUT", &format!("/admin/rollouts/{model}"), Some(body));
    assert_eq!(status, 200, "{set}");

    // A's first pre-warm ends; whatever it wrote meanwhile, B's setting holds everywhere.
    until_logged(
        a,
        &["rollout pre-warm stopped", "rollout pre-warm finished"],
    );
    let marker = "marker-model";
    let body = json!({"from": "x@1", "to": "x@2", "percent": 10, "prewarm": {"top_n": 0}});
    let (status, set) = admin(b, "PUT", &format!("/admin/rollouts/{marker}"), Some(body));
    assert_eq!(status, 200, "{set}");
    for g in [a, b] {
        until_shown(g, marker);
        let all = rollout_status(g)["rollouts"].clone();
        let ours = all
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["model"] == json!(model))
            .cloned()
            .unwrap_or(Value::Null);
        assert_eq!(ours["target_percent"].as_f64(), Some(30.0), "{all}");
    }
    let record = redis
        .cli(&["HGET", "warmpath:{rollouts}:all", &model])
        .unwrap();
    assert!(record.contains(r#""percent":30"#), "{record}");
}
