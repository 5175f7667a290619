#![allow(clippy::unwrap_used)]
//! docs/configuration.md documents every gateway config key, and only real ones.
//!
//! The key list is derived from the config structs themselves: the example config (which
//! has a tenant), the defaults, and every routing policy's parameters are serialised to
//! JSON and walked. A key is a dotted path; array elements are `[]` (`tenants[].id`);
//! policy parameters are `policy.<field>`, documented under their policy's `type`.

use gateway::Config;
use router_policy::{PolicyConfig, POLICY_NAMES};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn walk(prefix: &str, v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(path.clone());
                walk(&path, v, out);
            }
        }
        Value::Array(items) => {
            for item in items.iter().filter(|i| i.is_object()) {
                let path = format!("{prefix}[]");
                walk(&path, item, out);
            }
        }
        _ => {}
    }
}

/// Every key of the gateway config.
fn config_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let example = Config::load(&repo().join("configs/gateway.example.yaml")).unwrap();
    assert!(
        !example.tenants.is_empty(),
        "the example config must show a tenant"
    );
    walk("", &serde_json::to_value(&example).unwrap(), &mut keys);
    walk(
        "",
        &serde_json::to_value(Config::default()).unwrap(),
        &mut keys,
    );
    for name in POLICY_NAMES {
        let p = PolicyConfig::from_name(name).unwrap();
        walk("policy", &serde_json::to_value(p).unwrap(), &mut keys);
    }
    // A pool with every key set (the example config shows pools only in comments: its
    // upstreams would not exist on the reader's machine).
    let pools = Config::from_yaml(
        "pools:\n  - name: p\n    engine: vllm\n    models: [m]\n    checkpoint: c\n    \
         upstreams:\n      - url: http://127.0.0.1:1\n        kv_events: {endpoint: \"tcp://127.0.0.1:2\", \
         replay_endpoint: \"tcp://127.0.0.1:3\", topic: t}\n",
    )
    .unwrap();
    walk("", &serde_json::to_value(&pools).unwrap(), &mut keys);
    // Pools that discover their upstreams, one per source, every key set.
    let discovered = Config::from_yaml(
        "pools:\n  - name: k\n    engine: vllm\n    discovery: {kubernetes: {namespace: n, \
         service: s, port: 8000}}\n  - name: i\n    engine: vllm\n    discovery: {kubernetes: \
         {inference_pool: p}}\n  - name: d\n    engine: openai\n    discovery: {dns: {name: \
         localhost, port: 8000, interval_ms: 1000}}\n",
    )
    .unwrap();
    walk("", &serde_json::to_value(&discovered).unwrap(), &mut keys);
    // Regions and a rollout, every key set (both are absent by default).
    let regional = Config::from_yaml(
        "regions: {home: eu, mode: spill, rtt: [{a: eu, b: us, ms: 70}], unknown_rtt_ms: 200, \
         spill_margin_ms: 40}\nrollouts:\n  - {model: m, from: m@1, to: m@2, percent: 10, \
         state: paused, prewarm: {top_n: 4, min_tokens: 16, concurrency: 1, timeout_ms: 1000, ramp_s: 5}}\n",
    )
    .unwrap();
    walk("", &serde_json::to_value(&regional).unwrap(), &mut keys);
    keys
}

#[test]
fn every_config_key_is_documented() {
    let keys = config_keys();
    assert!(keys.len() > 40, "suspiciously few keys: {keys:?}");
    let doc = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not document these config keys (write each as `key`): {missing:?}"
    );
    for name in POLICY_NAMES {
        assert!(
            doc.contains(&format!("`type: {name}`")),
            "docs/configuration.md has no section for policy `type: {name}`"
        );
    }
}

#[test]
fn documented_keys_exist() {
    let keys = config_keys();
    let doc = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    // The first cell of each key table row: "| `key` | ..." (flags excepted).
    let stale: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|k| !k.starts_with("--")) // the command-line flag table
        .filter(|k| !keys.contains(*k))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/configuration.md documents keys the config does not have: {stale:?}"
    );
}
