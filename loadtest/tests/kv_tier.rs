//! Shared KV tier in the simulator: with prefixes spread over replicas (round robin sends
//! every group to every replica), the tier lets a replica load a prefix another replica
//! computed, so the hit rate rises and the added part is tier hits; without the tier there
//! are none. `warm` with the tier on routes on fetch costs and still completes everything.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;

fn flags(policy: &str) -> Vec<String> {
    [
        "--workload",
        "shared-prefix",
        "--groups",
        "8",
        "--prompts-per-group",
        "8",
        "--system-prompt-len",
        "512",
        "--question-len",
        "32",
        "--output-len",
        "4",
        "--request-rate",
        "4",
        "--replicas",
        "4",
        "--policy",
        policy,
        "--kv-tier",
        "off,on",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn the_tier_turns_spread_prefixes_into_tier_hits() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tier.json");
    let mut v = flags("round_robin");
    v.extend(["--json".to_string(), json.to_str().unwrap().to_string()]);
    let r = loadtest::simulate_cmd::run(&common::args(&v)).unwrap();
    assert_eq!(r.len(), 2);
    let (off, on) = (&r[0].summary, &r[1].summary);
    assert_eq!(
        (off.policy.as_str(), on.policy.as_str()),
        ("round_robin/tier-off", "round_robin/tier-on")
    );
    assert_eq!((off.completed, on.completed), (64, 64));
    let (toff, ton) = (off.kv_tier.as_ref().unwrap(), on.kv_tier.as_ref().unwrap());
    assert!(!toff.on && ton.on);
    // Off: no tier hits at all, in the summary or any record.
    assert_eq!(toff.tier_hit_rate, 0.0);
    assert!(r[0].records.iter().all(|rec| rec.tier_cached_tokens == 0));
    assert!((toff.local_hit_rate - off.cache_hit_rate).abs() < 1e-12);
    // On: 8 groups x 4 replicas would each compute the 512-token prefix once without the
    // tier; with it only the first replica to see a group does.
    assert!(ton.tier_hit_rate > 0.1, "tier hits {}", ton.tier_hit_rate);
    assert!(
        on.cache_hit_rate > off.cache_hit_rate + 0.1,
        "hit rate on {} vs off {}",
        on.cache_hit_rate,
        off.cache_hit_rate
    );
    assert!((ton.local_hit_rate + ton.tier_hit_rate - on.cache_hit_rate).abs() < 1e-9);
    assert!(r[1].records.iter().any(|rec| rec.tier_cached_tokens > 0));
    assert!(r[1]
        .records
        .iter()
        .all(|rec| rec.tier_cached_tokens <= rec.cached_tokens));
    let arr: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(arr[1]["kv_tier"]["on"], true);
    assert!(arr[1]["kv_tier"]["tier_hit_rate"].as_f64().unwrap() > 0.1);
    assert_eq!(arr[0]["kv_tier"]["tier_hit_rate"], 0.0);
}

#[test]
fn warm_with_the_tier_completes_everything_and_uses_it() {
    let r = loadtest::simulate_cmd::run(&common::args(&flags("warm"))).unwrap();
    let (off, on) = (&r[0].summary, &r[1].summary);
    assert_eq!((off.completed, on.completed), (64, 64));
    assert_eq!(off.kv_tier.as_ref().unwrap().tier_hit_rate, 0.0);
    assert!(on.cache_hit_rate >= off.cache_hit_rate - 0.02);
}

#[test]
fn without_the_flag_there_is_no_tier_and_no_label() {
    let v: Vec<String> = flags("round_robin")
        .into_iter()
        .take_while(|f| f != "--kv-tier")
        .collect();
    let r = loadtest::simulate_cmd::run(&common::args(&v)).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].summary.policy, "round_robin");
    assert!(r[0].summary.kv_tier.is_none());
}
