#![allow(clippy::unwrap_used)]
//! The Endpoint Picker (`gateway epp`) driven over real gRPC with the message sequences
//! Envoy's ext_proc filter sends (envoy/service/ext_proc/v3/external_processor.proto) and
//! the Gateway API Inference Extension's EPP protocol expects: BUFFERED (headers, their
//! answer, then the body in one message), FULL_DUPLEX_STREAMED with the body split at awkward
//! places, the subset hint, errors as immediate responses, a client that goes away, and a
//! restarted EPP that rebuilds its affinity from the replicas' KV events. The endpoints are
//! real `dummy:tiny` replicas; the test plays Envoy and forwards each request to the
//! endpoint the EPP chose.

use serde_json::{json, Value};
use std::time::Duration;
use warmpath_e2e::epp::{self, EppProc, ExtProc, BUFFERED, FULL_DUPLEX_STREAMED};
use warmpath_e2e::fixtures::auth_yaml;
use warmpath_e2e::http::post_json;
use warmpath_e2e::ReplicaProc;

/// Bound on one answer: a pick tokenizes and routes in microseconds; margins for a loaded
/// 2-core machine.
const ANSWER: Duration = Duration::from_secs(10);

fn replicas(n: usize) -> Vec<ReplicaProc> {
    (0..n)
        .map(|_| ReplicaProc::spawn("dummy:tiny").expect("replica"))
        .collect()
}

fn yaml(reps: &[ReplicaProc], tenants: &[(&str, &str, &str)]) -> String {
    let mut y = auth_yaml(tenants);
    y.push_str("replicas:\n");
    for r in reps {
        y.push_str(&format!("  - {}\n", r.url()));
    }
    y
}

fn model(r: &ReplicaProc) -> String {
    warmpath_e2e::http::get(&r.addr, "/v1/replica/info", &[])
        .unwrap()
        .json()
        .unwrap()["model"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A chat whose ~1,200-byte system prompt (dummy:tiny is byte-level: a token a byte) has
/// multi-byte characters throughout, so a split anywhere can land inside one.
fn chat(model: &str, marker: &str, question: &str) -> Vec<u8> {
    let mut system = format!("{marker}. ");
    while system.len() < 1200 {
        system.push_str("Réponds brièvement — naïve café ✓ 日本語. ");
    }
    serde_json::to_vec(&json!({
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "max_tokens": 2, "temperature": 0
    }))
    .unwrap()
}

/// The endpoints of an answer (header and metadata must agree).
fn endpoints(r: &envoy_types::pb::envoy::service::ext_proc::v3::ProcessingResponse) -> Vec<String> {
    let (header, md) = epp::destination(r).unwrap_or_else(|| panic!("no destination in {r:?}"));
    assert_eq!(header, md, "header and envoy.lb metadata differ");
    header.split(',').map(String::from).collect()
}

/// A pick as Envoy applies it: the endpoints, and the request headers it sets.
struct Pick {
    endpoints: Vec<String>,
    set: Vec<(String, String)>,
}

fn pick_of(r: &envoy_types::pb::envoy::service::ext_proc::v3::ProcessingResponse) -> Pick {
    let (set, remove) = epp::request_mutation(r);
    // The engine gets the tenant's salt, never the client's key.
    assert!(
        set.iter()
            .any(|(k, v)| k == "x-warmpath-cache-salt" && !v.is_empty()),
        "{set:?}"
    );
    assert!(remove.iter().any(|k| k == "authorization"), "{remove:?}");
    Pick {
        endpoints: endpoints(r),
        set,
    }
}

/// Plays Envoy's part after the pick: forwards `body` to `endpoint`, relays the response
/// head and body through the stream (BUFFERED response), and returns the headers the EPP
/// added to the response and the replica's JSON.
async fn relay(s: &mut ExtProc, pick: &Pick, body: &[u8]) -> (epp::ResponseAnswer, Value) {
    let b: Value = serde_json::from_slice(body).unwrap();
    let endpoint = pick.endpoints[0].clone();
    let set = pick.set.clone();
    // The blocking client runs its own runtime: off this one's thread.
    let to = endpoint.clone();
    let r = tokio::task::spawn_blocking(move || {
        let headers: Vec<(&str, &str)> =
            set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        post_json(&to, "/v1/chat/completions", &headers, &b)
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    s.send(epp::response_headers(r.status, &endpoint)).await;
    let head = s.recv(ANSWER).await.unwrap();
    s.send(epp::response_body(&r.body, true)).await;
    s.recv(ANSWER).await.unwrap();
    s.close();
    (epp::ResponseAnswer(head), r.json().unwrap())
}

/// One BUFFERED request: headers (answered at once, no destination yet), then the whole
/// body, whose answer carries the destination. Returns the endpoints and the stream.
async fn buffered(addr: &str, key: &str, body: &[u8]) -> (Pick, ExtProc) {
    let mut s = ExtProc::open(addr).await.unwrap();
    s.send(epp::request_headers(
        "/v1/chat/completions",
        Some(key),
        BUFFERED,
        None,
        false,
    ))
    .await;
    let h = s.recv(ANSWER).await.unwrap();
    assert!(
        epp::destination(&h).is_none(),
        "headers answered with a destination: {h:?}"
    );
    s.send(epp::request_body(body, true)).await;
    let a = s.recv(ANSWER).await.unwrap();
    (pick_of(&a), s)
}

/// One FULL_DUPLEX_STREAMED request with the body in `chunks`: silence until the last
/// chunk, then the headers' answer (the destination) and the body handed back whole.
async fn duplex(addr: &str, key: &str, chunks: &[&[u8]]) -> (Pick, ExtProc) {
    let mut s = ExtProc::open(addr).await.unwrap();
    s.send(epp::request_headers(
        "/v1/chat/completions",
        Some(key),
        FULL_DUPLEX_STREAMED,
        None,
        false,
    ))
    .await;
    let (last, rest) = chunks.split_last().unwrap();
    for c in rest {
        s.send(epp::request_body(c, false)).await;
    }
    assert!(
        s.silent_for(Duration::from_millis(300)).await,
        "the EPP answered before the body was whole"
    );
    s.send(epp::request_body(last, true)).await;
    let head = s.recv(ANSWER).await.unwrap();
    let eps = pick_of(&head);
    let mut echoed = Vec::new();
    loop {
        let m = s.recv(ANSWER).await.unwrap();
        let (bytes, eos) = epp::streamed_request_body(&m).expect("a streamed body answer");
        echoed.extend_from_slice(&bytes);
        if eos {
            break;
        }
    }
    assert_eq!(echoed, chunks.concat(), "the body handed back differs");
    (eps, s)
}

#[test]
fn buffered_and_split_duplex_bodies_route_a_shared_prefix_to_one_endpoint() {
    let reps = replicas(3);
    let m = model(&reps[0]);
    let p = EppProc::spawn(&yaml(&reps, &[("t", "k1", "")]), 3).unwrap();
    let rt = epp::runtime();
    rt.block_on(async {
        // BUFFERED: the primary and every other endpoint as fallbacks, each once.
        let a = chat(&m, "shared", "first question?");
        let (pa, mut s) = buffered(&p.grpc, "k1", &a).await;
        let eps = &pa.endpoints;
        let all: Vec<String> = reps.iter().map(|r| r.addr.clone()).collect();
        assert_eq!(eps.len(), 3, "{eps:?}");
        for e in eps {
            assert!(all.contains(e), "{e} is not an endpoint of the pool");
        }
        let (answer, first) = relay(&mut s, &pa, &a).await;
        assert!(first["usage"]["prompt_tokens"].as_u64().unwrap() > 1000);
        assert_eq!(
            answer
                .header("x-warmpath-predicted-cached-tokens")
                .as_deref(),
            Some("0")
        );

        // FULL_DUPLEX_STREAMED, the same system prompt, the body cut at awkward places:
        // single bytes, inside a multi-byte character, inside a JSON string and an escape.
        let b = chat(&m, "shared", "second \"question\"?");
        let cut = b.iter().position(|&c| c >= 0x80).unwrap() + 1; // mid-UTF-8
        let mid_string = cut + 40;
        let mut chunks: Vec<&[u8]> = b[..8].chunks(1).collect();
        chunks.push(&b[8..cut]);
        chunks.push(&b[cut..mid_string]);
        chunks.push(&b[mid_string..b.len() - 1]);
        chunks.push(&b[b.len() - 1..]);
        let (pb, mut s) = duplex(&p.grpc, "k1", &chunks).await;
        assert_eq!(
            pb.endpoints[0], pa.endpoints[0],
            "the shared prefix moved to another endpoint"
        );
        let (answer, second) = relay(&mut s, &pb, &b).await;
        let predicted: u64 = answer
            .header("x-warmpath-predicted-cached-tokens")
            .unwrap()
            .parse()
            .unwrap();
        assert!(predicted >= 1000, "predicted {predicted}");
        let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap();
        assert!(
            cached >= 1000,
            "the endpoint held the prefix: cached {cached}"
        );
    });
    // The decision log: both decisions, the second predicting the shared blocks cached.
    let log = p.admin_json("/admin/decisions?limit=2");
    let d = log.as_array().unwrap();
    assert_eq!(d.len(), 2, "{log}");
    assert_eq!(d[0]["decision"]["predicted_cached_blocks"], 0, "{log}");
    assert!(
        d[1]["decision"]["predicted_cached_blocks"]
            .as_u64()
            .unwrap()
            >= 1000 / 16,
        "{log}"
    );
    assert_eq!(d[0]["decision"]["replica"], d[1]["decision"]["replica"]);
}

#[test]
fn subset_hint_errors_limits_and_clients_that_go_away() {
    let reps = replicas(2);
    let m = model(&reps[0]);
    let p = EppProc::spawn(&yaml(&reps, &[("t", "k1", "max_concurrent: 1")]), 2).unwrap();
    let rt = epp::runtime();
    rt.block_on(async {
        let body = chat(&m, "subset", "which one?");
        // The subset hint: only the named endpoint, no fallback outside it.
        for r in &reps {
            let subset = vec![r.addr.clone()];
            let mut s = ExtProc::open(&p.grpc).await.unwrap();
            s.send(epp::request_headers(
                "/v1/chat/completions",
                Some("k1"),
                FULL_DUPLEX_STREAMED,
                Some(&subset),
                false,
            ))
            .await;
            s.send(epp::request_body(&body, true)).await;
            let a = s.recv(ANSWER).await.unwrap();
            assert_eq!(endpoints(&a), subset);
            s.close();
            // Envoy closed the stream before any response: the pick is settled and its
            // concurrency released (the tenant allows one at a time).
            while s.recv(ANSWER).await.is_ok() {}
        }
        // A subset with no endpoint of the pool: 503 with an OpenAI error body.
        let mut s = ExtProc::open(&p.grpc).await.unwrap();
        let none = vec!["10.255.0.1:8000".to_string()];
        s.send(epp::request_headers(
            "/v1/chat/completions",
            Some("k1"),
            BUFFERED,
            Some(&none),
            false,
        ))
        .await;
        s.recv(ANSWER).await.unwrap();
        s.send(epp::request_body(&body, true)).await;
        let (status, err) = epp::immediate(&s.recv(ANSWER).await.unwrap()).expect("immediate");
        assert_eq!(status, 503);
        assert_eq!(err["error"]["code"], "no_replica", "{err}");

        // A wrong key: 401, OpenAI-shaped.
        let mut s = ExtProc::open(&p.grpc).await.unwrap();
        s.send(epp::request_headers(
            "/v1/chat/completions",
            Some("nope"),
            FULL_DUPLEX_STREAMED,
            None,
            false,
        ))
        .await;
        s.send(epp::request_body(&body, true)).await;
        let (status, err) = epp::immediate(&s.recv(ANSWER).await.unwrap()).expect("immediate");
        assert_eq!(status, 401);
        assert_eq!(err["error"]["type"], "authentication_error", "{err}");

        // A client (Envoy stream) that goes away mid-body holds nothing: the next request
        // is picked although the tenant allows one request at a time.
        {
            let s = ExtProc::open(&p.grpc).await.unwrap();
            s.send(epp::request_headers(
                "/v1/chat/completions",
                Some("k1"),
                FULL_DUPLEX_STREAMED,
                None,
                false,
            ))
            .await;
            s.send(epp::request_body(&body[..body.len() / 2], false))
                .await;
        } // dropped: the gRPC stream is reset

        // One request in flight (picked, response not over) holds the tenant's only slot:
        // a second is refused 429 with Retry-After; once the first stream ends, it passes.
        let mut held = ExtProc::open(&p.grpc).await.unwrap();
        held.send(epp::request_headers(
            "/v1/chat/completions",
            Some("k1"),
            FULL_DUPLEX_STREAMED,
            None,
            false,
        ))
        .await;
        held.send(epp::request_body(&body, true)).await;
        assert!(epp::destination(&held.recv(ANSWER).await.unwrap()).is_some());
        let mut s = ExtProc::open(&p.grpc).await.unwrap();
        s.send(epp::request_headers(
            "/v1/chat/completions",
            Some("k1"),
            FULL_DUPLEX_STREAMED,
            None,
            false,
        ))
        .await;
        s.send(epp::request_body(&body, true)).await;
        let (status, err) = epp::immediate(&s.recv(ANSWER).await.unwrap()).expect("immediate");
        assert_eq!(status, 429, "{err}");
        assert_eq!(err["error"]["code"], "rate_limit_concurrency", "{err}");
        drop(held); // Envoy's stream goes away after the pick
        let mut ok = None;
        let deadline = std::time::Instant::now() + ANSWER;
        while std::time::Instant::now() < deadline {
            let mut s = ExtProc::open(&p.grpc).await.unwrap();
            s.send(epp::request_headers(
                "/v1/chat/completions",
                Some("k1"),
                FULL_DUPLEX_STREAMED,
                None,
                false,
            ))
            .await;
            s.send(epp::request_body(&body, true)).await;
            let a = s.recv(ANSWER).await.unwrap();
            if epp::destination(&a).is_some() {
                ok = Some(a);
                break;
            }
            // The reset reaches the EPP asynchronously: wait for its settlement.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            ok.is_some(),
            "the gone stream's slot was never released: {}",
            p.log()
        );
    });
    // Only picks are logged: not the refused ones nor the body that never completed.
    let log = p.admin_json("/admin/decisions?limit=50");
    assert_eq!(log.as_array().unwrap().len(), 4, "{log}");
}

#[test]
fn a_restarted_epp_rebuilds_affinity_from_kv_events() {
    let reps = replicas(2);
    let m = model(&reps[0]);
    let y = yaml(&reps, &[("t", "k1", "")]);
    let rt = epp::runtime();
    let first = {
        let p = EppProc::spawn(&y, 2).unwrap();
        rt.block_on(async {
            let a = chat(&m, "restart", "before the restart?");
            let (pa, mut s) = buffered(&p.grpc, "k1", &a).await;
            relay(&mut s, &pa, &a).await;
            pa.endpoints[0].clone()
        })
    }; // the first EPP process is killed here
    let p = EppProc::spawn(&y, 2).unwrap();
    // The new process knows nothing of the first's routing; the replica's KV events, read
    // from the start of its log, say where the prefix is.
    let b = chat(&m, "restart", "after the restart?");
    let probe = json!({"body": serde_json::from_slice::<Value>(&b).unwrap(), "tenant": "t"});
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = warmpath_e2e::http::post_json(&p.admin, "/admin/render", &[], &probe).unwrap();
        let v = r.json().unwrap_or(Value::Null);
        let held = v["replicas"].as_array().into_iter().flatten().any(|x| {
            x["url"].as_str().is_some_and(|u| u.ends_with(&first))
                && x["precise_blocks"].as_u64().unwrap_or(0) > 0
        });
        if held {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "KV events never arrived: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    rt.block_on(async {
        let (pb, mut s) = buffered(&p.grpc, "k1", &b).await;
        assert_eq!(
            pb.endpoints[0], first,
            "the restarted EPP lost the prefix's endpoint"
        );
        let (answer, _) = relay(&mut s, &pb, &b).await;
        let predicted: u64 = answer
            .header("x-warmpath-predicted-cached-tokens")
            .unwrap()
            .parse()
            .unwrap();
        assert!(predicted >= 1000, "predicted {predicted}");
    });
}
