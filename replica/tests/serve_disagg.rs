#![allow(clippy::unwrap_used)]
//! Prefill/decode disaggregation between two in-process replicas (`dummy:tiny`): the
//! decode replica fetches the prompt's KV from the prefill replica, answers exactly what
//! a replica computing everything answers, counts the fetched tokens as cached, and
//! recovers by recomputation from every broken transfer.

mod serve_support;

use replica::server::ServeArgs;
use serde_json::{json, Value};
use serve_support::*;
use std::net::SocketAddr;
use std::time::Duration;
use warmpath_core::ReplicaRole;

const MODEL: &str = "dummy:tiny";

fn prompt(n: u32, seed: u32) -> Vec<u32> {
    (0..n).map(|i| (i * 37 + seed * 11 + 5) % 300).collect()
}

fn role(r: ReplicaRole) -> impl FnOnce(&mut ServeArgs) {
    move |a| a.role = r
}

async fn complete(addr: SocketAddr, prompt: &[u32], from: Option<SocketAddr>) -> Resp {
    let model = get(addr, "/v1/models").await.json()["data"][0]["id"].clone();
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 16, "temperature": 0});
    let from = from.map(|a| format!("http://{a}"));
    let mut headers = vec![("x-warmpath-cache-salt", "tenant-a")];
    if let Some(f) = &from {
        headers.push(("x-warmpath-prefill-from", f.as_str()));
    }
    let r = send(
        addr,
        "POST",
        "/v1/completions",
        &headers,
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r
}

fn text(r: &Resp) -> String {
    r.json()["choices"][0]["text"].as_str().unwrap().to_string()
}

fn cached(r: &Resp) -> u64 {
    let v: Value = r.json();
    v["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap()
}

async fn metric(addr: SocketAddr, line_start: &str) -> Option<String> {
    get(addr, "/metrics")
        .await
        .text()
        .lines()
        .find(|l| l.starts_with(line_start))
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transferred_prefix_decodes_exactly_like_a_computed_one() {
    let reference = server(MODEL, |_| {}).await;
    let prefill = server(MODEL, role(ReplicaRole::Prefill)).await;
    let decode = server(MODEL, role(ReplicaRole::Decode)).await;
    let p = prompt(200, 1);
    let want = complete(reference.addr(), &p, None).await;
    let got = complete(decode.addr(), &p, Some(prefill.addr())).await;
    assert_eq!(
        text(&got),
        text(&want),
        "disaggregated greedy output differs"
    );
    // 12 full blocks of 16 came over; the last 8 tokens are computed in place.
    assert_eq!(got.header("x-warmpath-kv-transfer"), Some("ok"));
    assert_eq!(got.header("x-warmpath-kv-transferred-tokens"), Some("192"));
    assert_eq!(cached(&got), 192, "transferred tokens count as cached");
    let info = get(prefill.addr(), "/v1/replica/info").await.json();
    assert_eq!(info["role"], "prefill");
    assert!(
        metric(prefill.addr(), "warmpath_replica_kv_export_blocks_total 12")
            .await
            .is_some()
    );
    // Held now: the next turn needs nothing from the prefill replica.
    let again = complete(decode.addr(), &p, Some(prefill.addr())).await;
    assert_eq!(again.header("x-warmpath-kv-transfer"), Some("skipped"));
    assert_eq!(text(&again), text(&want));
    // A longer prompt sharing the prefix: only the new blocks are asked for.
    let mut longer = p.clone();
    longer.extend(prompt(100, 2));
    let want = complete(reference.addr(), &longer, None).await;
    let got = complete(decode.addr(), &longer, Some(prefill.addr())).await;
    assert_eq!(text(&got), text(&want));
    assert_eq!(got.header("x-warmpath-kv-transferred-tokens"), Some("96"));
    assert_eq!(cached(&got), 288);
    // A decode replica refuses to serve KV.
    let r = post_json(
        decode.addr(),
        "/v1/kv/prefill",
        &json!({"prompt": [1, 2, 3]}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("role is decode"), "{}", r.text());
    for s in [reference, prefill, decode] {
        s.shutdown(Duration::from_secs(5)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_transfers_end_in_the_right_answer_by_recomputation() {
    let reference = server(MODEL, |_| {}).await;
    let cut = server(MODEL, |a| {
        a.role = ReplicaRole::Prefill;
        a.fault_kv_cut_after_blocks = Some(3);
    })
    .await;
    let other_checkpoint = server(MODEL, |a| {
        a.role = ReplicaRole::Prefill;
        a.checkpoint_id = Some("another-checkpoint".into());
    })
    .await;
    let decode = server(MODEL, role(ReplicaRole::Decode)).await;
    // Killed midway: three good blocks are kept, the rest is computed.
    let p = prompt(200, 3);
    let want = complete(reference.addr(), &p, None).await;
    let got = complete(decode.addr(), &p, Some(cut.addr())).await;
    assert_eq!(text(&got), text(&want));
    assert_eq!(got.header("x-warmpath-kv-transfer"), Some("partial"));
    assert_eq!(cached(&got), 48);
    let m = r#"warmpath_replica_kv_transfers_total{outcome="partial",reason="truncated"} 1"#;
    assert!(metric(decode.addr(), m).await.is_some(), "{m}");
    // Another checkpoint's KV never enters the cache.
    let p = prompt(200, 4);
    let want = complete(reference.addr(), &p, None).await;
    let got = complete(decode.addr(), &p, Some(other_checkpoint.addr())).await;
    assert_eq!(text(&got), text(&want));
    assert_eq!(got.header("x-warmpath-kv-transfer"), Some("failed"));
    assert_eq!(cached(&got), 0);
    let m = r#"warmpath_replica_kv_transfers_total{outcome="failed",reason="mismatch"} 1"#;
    assert!(metric(decode.addr(), m).await.is_some(), "{m}");
    // A prefill replica that is gone.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let p = prompt(200, 5);
    let want = complete(reference.addr(), &p, None).await;
    let got = complete(decode.addr(), &p, Some(gone)).await;
    assert_eq!(text(&got), text(&want));
    assert_eq!(got.header("x-warmpath-kv-transfer"), Some("failed"));
    let m = r#"warmpath_replica_kv_transfers_total{outcome="failed",reason="connect"} 1"#;
    assert!(metric(decode.addr(), m).await.is_some(), "{m}");
    for s in [reference, cut, other_checkpoint, decode] {
        s.shutdown(Duration::from_secs(5)).await.unwrap();
    }
}

/// Sends a completion to `addr` with `headers`, returning the response.
async fn complete_with(addr: SocketAddr, prompt: &[u32], headers: &[(&str, &str)]) -> Resp {
    let model = get(addr, "/v1/models").await.json()["data"][0]["id"].clone();
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 4, "temperature": 0});
    let r = send(
        addr,
        "POST",
        "/v1/completions",
        headers,
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_transfer_the_gateway_asked_for_is_started() {
    // Without a transfer key: only a loopback prefill replica is fetched from, so a client
    // that reaches the replica cannot make it POST prompts elsewhere.
    let open = server(MODEL, role(ReplicaRole::Decode)).await;
    let p = prompt(64, 3);
    let r = complete_with(
        open.addr(),
        &p,
        &[("x-warmpath-prefill-from", "http://10.255.255.1:9")],
    )
    .await;
    assert_eq!(
        r.header("x-warmpath-kv-transfer"),
        None,
        "no transfer started"
    );

    // With a transfer key: only a name the gateway signed.
    let dir = std::env::temp_dir().join(format!("wp-transfer-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = b"a deployment secret of 32+ bytes, shared";
    let key_file = dir.join("key");
    std::fs::write(&key_file, key).unwrap();
    let with_key = |r: ReplicaRole| {
        let path = key_file.to_str().unwrap().to_string();
        move |a: &mut ServeArgs| {
            a.role = r;
            a.kv_transfer_key_file = Some(path);
        }
    };
    let prefill = server(MODEL, with_key(ReplicaRole::Prefill)).await;
    let decode = server(MODEL, with_key(ReplicaRole::Decode)).await;
    let from = format!("http://{}", prefill.addr());
    let exported = || async {
        metric(prefill.addr(), "warmpath_replica_kv_export_blocks_total")
            .await
            .unwrap()
    };
    let before = exported().await;
    let unsigned = complete_with(
        decode.addr(),
        &p,
        &[("x-warmpath-prefill-from", from.as_str())],
    )
    .await;
    assert_eq!(unsigned.header("x-warmpath-kv-transfer"), None);
    let forged_sig = warmpath_protocol::transfer_auth::sign(
        b"another secret, another deployment!!",
        warmpath_protocol::transfer_auth::Purpose::PrefillFrom,
        &from,
        now_ms(),
    );
    let forged = complete_with(
        decode.addr(),
        &prompt(64, 4),
        &[
            ("x-warmpath-prefill-from", from.as_str()),
            ("x-warmpath-prefill-auth", forged_sig.as_str()),
        ],
    )
    .await;
    assert_eq!(forged.header("x-warmpath-kv-transfer"), None);
    assert_eq!(
        exported().await,
        before,
        "the prefill replica exported nothing"
    );

    let sig = warmpath_protocol::transfer_auth::sign(
        key,
        warmpath_protocol::transfer_auth::Purpose::PrefillFrom,
        &from,
        now_ms(),
    );
    let signed = complete_with(
        decode.addr(),
        &prompt(64, 5),
        &[
            ("x-warmpath-prefill-from", from.as_str()),
            ("x-warmpath-prefill-auth", sig.as_str()),
        ],
    )
    .await;
    assert_eq!(signed.header("x-warmpath-kv-transfer"), Some("ok"));

    // The prefill endpoint itself serves only a signed pull.
    let body = json!({"prompt": prompt(64, 6), "skip_blocks": 0}).to_string();
    let r = send(
        prefill.addr(),
        "POST",
        "/v1/kv/prefill",
        &[],
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(
        r.text().contains("invalid_transfer_signature"),
        "{}",
        r.text()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
