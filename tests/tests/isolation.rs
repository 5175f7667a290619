#![allow(clippy::unwrap_used)]
//! Tenant isolation (issue #25). E6: the gateway sends the tenant's cache salt on every
//! forwarded generation endpoint (chat and completions, streaming or not) and refuses a
//! client-chosen `cache_salt`. E3: on the real replica, a prompt another tenant just sent
//! is not measurably faster than a cold one of the same length sent by the same tenant at
//! the same places in the sequence (two-sample Kolmogorov–Smirnov, p > 0.01),
//! while the same tenant's repeat is (p < 1e-3: the test has the power to see a hit).

use serde_json::{json, Value};
use std::time::Instant;
use warmpath_e2e::fixtures::{auth_yaml, model_of, replicas_yaml, smollm2_model};
use warmpath_e2e::http::{post_json, post_sse};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::stats::ks_two_sample;
use warmpath_e2e::{GatewayProc, ReplicaProc};

const TENANTS: [(&str, &str, &str); 2] = [("alpha", "key-alpha", ""), ("beta", "key-beta", "")];

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

fn body(path: &str, model: &str, text: &str, stream: bool) -> Value {
    if path == "/v1/completions" {
        json!({"model": model, "prompt": text, "max_tokens": 2, "stream": stream})
    } else {
        json!({"model": model, "messages": [{"role": "user", "content": text}],
               "max_tokens": 2, "stream": stream})
    }
}

#[test]
fn every_endpoint_carries_the_tenant_salt_never_the_client_one() {
    let mock = MockReplica::start(Mode::Ok);
    let yaml = format!("{}{}", auth_yaml(&TENANTS), replicas_yaml(&[mock.url()]));
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let mut seen: Vec<(&str, String)> = Vec::new();
    for path in ["/v1/chat/completions", "/v1/completions"] {
        for stream in [false, true] {
            for (tenant, key, _) in TENANTS {
                let before = mock.salts().len();
                let b = body(path, "mock", &format!("{tenant} {path} {stream}"), stream);
                let auth = bearer(key);
                let h = [("Authorization", auth.as_str())];
                let status = if stream {
                    post_sse(&gw.addr, path, &h, &b).unwrap().status
                } else {
                    post_json(&gw.addr, path, &h, &b).unwrap().status
                };
                assert_eq!(status, 200, "{tenant} {path} stream={stream}");
                let salts = mock.salts();
                assert_eq!(salts.len(), before + 1, "{path}: one generation");
                seen.push((tenant, salts[before].clone()));

                // A client-chosen salt is refused, and never reaches the replica.
                let mut evil = b.clone();
                evil["cache_salt"] = json!("evil-salt");
                let r = post_json(&gw.addr, path, &h, &evil).unwrap();
                assert_eq!(r.status, 400, "{path}: {}", r.text());
                assert_eq!(mock.salts().len(), before + 1, "{path}: forwarded");
            }
        }
    }
    let salt_of =
        |t: &str| -> Vec<&String> { seen.iter().filter(|s| s.0 == t).map(|s| &s.1).collect() };
    let (a, b) = (salt_of("alpha"), salt_of("beta"));
    assert_eq!(a.len(), 4);
    assert!(!a[0].is_empty() && !b[0].is_empty(), "{seen:?}");
    assert!(
        a.iter().all(|s| *s == a[0]),
        "alpha's salt differs by endpoint: {seen:?}"
    );
    assert!(
        b.iter().all(|s| *s == b[0]),
        "beta's salt differs by endpoint: {seen:?}"
    );
    assert_ne!(a[0], b[0]);
    for body in mock.bodies() {
        let text = String::from_utf8_lossy(&body);
        assert!(!text.contains("evil-salt"), "{text}");
    }
}

/// Seconds a non-streaming `max_tokens: 1` chat takes.
fn timed(gw: &GatewayProc, key: &str, model: &str, prompt: &str) -> f64 {
    let auth = bearer(key);
    let b = json!({"model": model, "messages": [{"role": "user", "content": prompt}],
                   "max_tokens": 1, "temperature": 0});
    let t = Instant::now();
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[("Authorization", auth.as_str())],
        &b,
    )
    .unwrap();
    let dt = t.elapsed().as_secs_f64();
    assert_eq!(r.status, 200, "{}", r.text());
    dt
}

#[test]
fn another_tenants_prompt_is_not_faster_than_a_cold_one() {
    const TRIALS: usize = 24;
    let replica = ReplicaProc::spawn(&smollm2_model()).expect("replica");
    let yaml = format!("{}{}", auth_yaml(&TENANTS), replicas_yaml(&[replica.url()]));
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let model = model_of(&replica.addr);
    let (a, b) = (TENANTS[0].1, TENANTS[1].1);
    // About 150 tokens, so prefill dominates (and the test stays under a minute); unique per
    // trial from the first token.
    let filler = "The gateway routes each prompt to the replica holding its prefix. ".repeat(12);
    // Per trial: alpha sends P twice (cold, then its own cached repeat); then beta sends P
    // (`other`, which alpha's cache must not speed up) and a fresh prompt Q (`fresh`: cold
    // for everyone, the control), in alternating order, so the two compared samples come
    // from the same tenant at the same positions in the sequence. P and Q differ only in
    // the first digit of the nonce (each digit is one token): the same length, and no
    // shared block.
    let (mut cold, mut same, mut other, mut fresh) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    timed(&gw, a, &model, "warm up the replica and the gateway");
    for i in 0..TRIALS {
        let nonce = i * 7919 + 13;
        let p = format!("Trial {i} of {TRIALS}, nonce 1{nonce:06}. {filler}");
        let q = format!("Trial {i} of {TRIALS}, nonce 2{nonce:06}. {filler}");
        cold.push(timed(&gw, a, &model, &p));
        same.push(timed(&gw, a, &model, &p));
        if i % 2 == 0 {
            other.push(timed(&gw, b, &model, &p));
            fresh.push(timed(&gw, b, &model, &q));
        } else {
            fresh.push(timed(&gw, b, &model, &q));
            other.push(timed(&gw, b, &model, &p));
        }
    }
    let median = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    let summary = format!(
        "medians: cold {:.1} ms, same tenant {:.1} ms, other tenant {:.1} ms, fresh {:.1} ms",
        median(&cold) * 1e3,
        median(&same) * 1e3,
        median(&other) * 1e3,
        median(&fresh) * 1e3
    );
    let (d_same, p_same) = ks_two_sample(&cold, &same);
    let (d_other, p_other) = ks_two_sample(&fresh, &other);
    eprintln!(
        "{summary}; KS cold/same D={d_same:.2} p={p_same:.2e}; fresh/other D={d_other:.2} p={p_other:.2e}"
    );
    assert!(
        p_same < 1e-3,
        "the same tenant's repeat is not clearly faster (D={d_same:.2}, p={p_same:.2e}); {summary}"
    );
    assert!(
        p_other > 0.01,
        "another tenant's prompt is measurably faster (D={d_other:.2}, p={p_other:.2e}); {summary}"
    );
}
