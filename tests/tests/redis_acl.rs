#![allow(clippy::unwrap_used)]
//! Issue 44, item 3: Redis as a guarded trust boundary. A real `redis-server` with an ACL
//! file (users `gateway`, `replica`, `readonly`, `admin`; no default user): a gateway
//! logging in as `gateway` with its password from `state.password_file` shares limits
//! there, a replica's user cannot touch the gateway's keys nor the gateway's the tier's,
//! and a read-only user cannot change limits. A gateway refuses to start on a Redis whose
//! eviction policy would evict keys without a TTL (item 8).

use std::process::Command;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, replicas_yaml};
use warmpath_e2e::fleet::{until_status, wait_degraded};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::procs::bin;
use warmpath_e2e::redis::RedisServer;
use warmpath_e2e::GatewayProc;

const WITHIN: Duration = Duration::from_secs(10);

/// docs/security.md's ACL, with test passwords.
const ACL: &str = warmpath_e2e::redis::DOCS_ACL;

fn client(redis: &RedisServer, user: &str) -> redis::Connection {
    let url = format!("redis://{user}:{user}-pw@127.0.0.1:{}", redis.port);
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// The error code of `cmd` run as `user` (`None`: it ran).
fn refused(redis: &RedisServer, user: &str, cmd: &redis::Cmd) -> Option<String> {
    let r: redis::RedisResult<redis::Value> = cmd.query(&mut client(redis, user));
    r.err().map(|e| e.code().unwrap_or("other").to_string())
}

fn gateway_yaml(redis: &RedisServer, mock: &MockReplica, extra: &str) -> String {
    let pw = redis.dir().join("gateway.password");
    std::fs::write(&pw, "gateway-pw\n").unwrap();
    format!(
        "{}{}state: {{backend: redis, url: 'redis://gateway@127.0.0.1:{}', password_file: '{}', \
         timeout_ms: 200, gateway_count: 2{extra}}}\n",
        auth_yaml(&[("a", "key-a", "requests_per_minute: 2")]),
        replicas_yaml(&[mock.url()]),
        redis.port,
        pw.display(),
    )
}

#[test]
fn acl_users_reach_only_their_keys_and_a_read_only_user_cannot_change_limits() {
    let redis = RedisServer::start_with_acl(ACL, ("admin", "admin-pw"), &[]).unwrap();
    let mock = MockReplica::start(Mode::Ok);
    let gw = GatewayProc::spawn(&gateway_yaml(&redis, &mock, ""), &[], 1).unwrap();
    wait_degraded(std::slice::from_ref(&gw), 0, WITHIN);
    // Shared limits work through the `gateway` user: two requests, then 429.
    assert_eq!(until_status(&gw, "mock", "key-a", 200, WITHIN), 200);
    assert_eq!(until_status(&gw, "mock", "key-a", 429, WITHIN), 429);
    let keys = redis.cli(&["KEYS", "warmpath:{a}:*"]).unwrap();
    assert!(!keys.trim().is_empty(), "no limit state in Redis");
    let limit_key = keys.lines().next().unwrap().trim().to_string();

    // A read-only user reads, but cannot write a limit nor run the admission script.
    assert_eq!(
        refused(&redis, "readonly", redis::cmd("EXISTS").arg(&limit_key)),
        None
    );
    let noperm = Some("NOPERM".to_string());
    let mut hset = redis::cmd("HSET");
    hset.arg(&limit_key).arg("tat").arg("0");
    assert_eq!(refused(&redis, "readonly", &hset), noperm);
    assert_eq!(
        refused(&redis, "readonly", redis::cmd("DEL").arg(&limit_key)),
        noperm
    );
    let mut evalsha = redis::cmd("EVALSHA");
    evalsha.arg("0".repeat(40)).arg(1).arg(&limit_key);
    assert_eq!(refused(&redis, "readonly", &evalsha), noperm);
    let mut mint = redis::cmd("HSET");
    mint.arg("warmpath:{keys}:by_hash").arg("x").arg("a");
    assert_eq!(refused(&redis, "readonly", &mint), noperm);

    // The replica's user reaches the tier's keys only, and the gateway's user not the tier.
    let mut tier_set = redis::cmd("SET");
    tier_set.arg("wpkv:0123").arg("v");
    assert_eq!(refused(&redis, "replica", &tier_set), None);
    assert_eq!(refused(&redis, "replica", &hset), noperm);
    assert_eq!(
        refused(&redis, "replica", redis::cmd("GET").arg(&limit_key)),
        noperm
    );
    assert_eq!(refused(&redis, "replica", &mint), noperm);
    assert_eq!(refused(&redis, "gateway", &tier_set), noperm);
    assert_eq!(refused(&redis, "gateway", &redis::cmd("FLUSHALL")), noperm);
    // And no one gets in without a password.
    let anon = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port)).unwrap();
    let r: redis::RedisResult<String> = redis::cmd("GET")
        .arg(&limit_key)
        .query(&mut anon.get_connection().unwrap());
    assert!(r.is_err(), "the default user is off");
}

#[test]
fn a_gateway_refuses_a_redis_that_evicts_keys_without_a_ttl() {
    let redis = RedisServer::start_with_acl(
        ACL,
        ("admin", "admin-pw"),
        &["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"],
    )
    .unwrap();
    let mock = MockReplica::start(Mode::Ok);
    let dir = redis.dir().join("gw");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("gateway.yaml");
    std::fs::write(&cfg, gateway_yaml(&redis, &mock, "")).unwrap();
    let mut child = Command::new(bin("gateway"))
        .arg("--config")
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("err")).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the gateway started on an allkeys-lru Redis");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(dir.join("err")).unwrap();
    assert!(!status.success());
    assert!(
        err.contains("maxmemory-policy") && err.contains("allkeys-lru"),
        "{err}"
    );

    // With `volatile-lru` it starts, and a user without `CONFIG GET` only gets a warning.
    redis
        .cli(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"])
        .unwrap();
    redis
        .cli(&["ACL", "SETUSER", "gateway", "-config|get"])
        .unwrap();
    let gw = GatewayProc::spawn(&gateway_yaml(&redis, &mock, ""), &[], 1).unwrap();
    wait_degraded(std::slice::from_ref(&gw), 0, WITHIN);
    assert!(
        gw.log().contains("could not read Redis maxmemory-policy"),
        "{}",
        gw.log()
    );
}
