#![allow(clippy::unwrap_used)]
//! Discovery (issue 43): a pool's replicas join and leave the running gateway by
//! themselves. Against a Kubernetes API stand-in that serves a Service's EndpointSlices
//! as the API server does (LIST, then WATCH events: ADDED, MODIFIED, DELETED, BOOKMARK,
//! and an ERROR 410 Gone that forces a relist), the gateway's replica set follows a scale
//! up, a pod going unready and ready again, a scale down whose in-flight stream finishes
//! (drain) before the replica leaves, changes missed during a 410, and the Service's slice
//! deleted: each within a second of the event, with no restart. The same for an
//! InferencePool's pods (read the pool, then list and watch the pods its selector picks:
//! a pod starting (not registered until ready), ready, terminating, deleted). And DNS: `localhost` resolved for real.
//!
//! The replicas are mock Warmpath replicas on 127.0.0.2, .3 and .4, one port: the shape
//! of pods behind one Service.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::chat;
use warmpath_e2e::http::post_json;
use warmpath_e2e::k8s_api::KubeApi;
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::procs::free_port;
use warmpath_e2e::GatewayProc;

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices";
/// The bound: the replica set reflects an event within a second.
const WITHIN: Duration = Duration::from_secs(1);

/// Three mocks on 127.0.0.2..4 sharing one port.
fn three_mocks() -> (u16, Vec<MockReplica>) {
    for _ in 0..20 {
        let port = free_port();
        let mocks: Vec<MockReplica> = (2..=4)
            .filter_map(|i| MockReplica::start_on(Mode::Ok, &format!("127.0.0.{i}:{port}")).ok())
            .collect();
        if mocks.len() == 3 {
            return (port, mocks);
        }
    }
    panic!("no port free on 127.0.0.2, .3 and .4");
}

/// An EndpointSlice of Service `replica` listing `eps` (`(ip, ready)`), as the
/// EndpointSlice controller writes it.
fn slice(name: &str, port: u16, eps: &[(&str, bool)]) -> Value {
    let endpoints: Vec<Value> = eps
        .iter()
        .map(|(ip, ready)| {
            json!({"addresses": [ip],
                "conditions": {"ready": ready, "serving": ready, "terminating": false},
                "targetRef": {"kind": "Pod", "namespace": "llm", "name": format!("replica-{ip}")},
                "nodeName": "node-1"})
        })
        .collect();
    json!({
        "metadata": {"name": name, "namespace": "llm", "generateName": "replica-",
            "labels": {"kubernetes.io/service-name": "replica",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "replica",
                "uid": "6c1f0a3e-0000-4000-8000-000000000001", "controller": true,
                "blockOwnerDeletion": true}]},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}]
    })
}

/// `url -> draining` of every registered replica.
fn members(gw: &GatewayProc) -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = gw
        .replicas()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["url"].as_str().unwrap().to_string(),
                r["draining"].as_bool().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Waits (polling the admin API) until the replica set is `want`; returns how long it
/// took, failing after `limit`.
fn await_members(
    gw: &GatewayProc,
    want: &[(String, bool)],
    limit: Duration,
    what: &str,
) -> Duration {
    let start = Instant::now();
    loop {
        let got = members(gw);
        if got == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "{what}: replica set still {got:?}, want {want:?} after {limit:?}; log:\n{}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn replicas_follow_a_services_endpointslices() {
    let api = KubeApi::start();
    api.collection(SLICES, "EndpointSlice", "discovery.k8s.io/v1");
    let (port, mocks) = three_mocks();
    let url = |i: usize| format!("http://127.0.0.{}:{port}", i + 2);
    let (a, b, c) = ("127.0.0.2", "127.0.0.3", "127.0.0.4");
    api.put(SLICES, slice("replica-x1", port, &[(a, true)]));
    let kubeconfig = api.kubeconfig("llm");
    let gw = GatewayProc::spawn_with(
        "auth: {enabled: false}\npools:\n  - name: replicas\n    engine: warmpath\n    \
         discovery: {kubernetes: {service: replica}}\n",
        &[],
        1,
        None,
        &[
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
            ("RUST_LOG", "info"),
        ],
    )
    .expect("gateway");
    let pid = gw.pid();
    assert_eq!(members(&gw), [(url(0), false)]);
    let reqs = api.requests();
    assert!(
        reqs.iter().all(|r| r.starts_with(SLICES)
            && r.contains("labelSelector=kubernetes.io%2Fservice-name%3Dreplica")),
        "{reqs:?}"
    );
    // The first LIST, then a WATCH from its resourceVersion.
    assert!(
        api.wait_requests(Duration::from_secs(10), |r| r
            .iter()
            .any(|q| q.contains("watch=true"))),
        "no WATCH after the LIST: {:?}",
        api.requests()
    );
    let mut took = Vec::new();

    // Scale up: the slice MODIFIED with a second ready pod.
    api.put(SLICES, slice("replica-x1", port, &[(a, true), (b, true)]));
    let t = await_members(&gw, &[(url(0), false), (url(1), false)], WITHIN, "scale up");
    took.push(("scale up", t));

    // A BOOKMARK changes nothing; the watch goes on.
    api.bookmark(SLICES);

    // A pod goes unready: it stops taking requests (draining) but stays, index and all.
    api.put(SLICES, slice("replica-x1", port, &[(a, true), (b, false)]));
    let t = await_members(&gw, &[(url(0), false), (url(1), true)], WITHIN, "unready");
    took.push(("unready", t));
    // Ready again.
    api.put(SLICES, slice("replica-x1", port, &[(a, true), (b, true)]));
    let t = await_members(
        &gw,
        &[(url(0), false), (url(1), false)],
        WITHIN,
        "ready again",
    );
    took.push(("ready again", t));

    // Scale down with a stream in flight on the leaving replica: it drains at once, the
    // stream finishes, then it leaves.
    mocks[0].set_mode(Mode::SlowStream { delay_ms: 100 });
    api.put(SLICES, slice("replica-x1", port, &[(a, true), (b, false)]));
    await_members(&gw, &[(url(0), false), (url(1), true)], WITHIN, "b unready");
    let addr = gw.addr.clone();
    let stream = std::thread::spawn(move || {
        post_json(
            &addr,
            "/v1/chat/completions",
            &[],
            &chat("mock", "s", "u", 30, true),
        )
        .unwrap()
    });
    // The stream is under way on a (the only routable replica) before a leaves.
    let deadline = Instant::now() + Duration::from_secs(10);
    while mocks[0].generations() == 0 {
        assert!(
            Instant::now() < deadline,
            "the stream never reached replica a"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    api.put(SLICES, slice("replica-x1", port, &[(b, true)]));
    let t = await_members(
        &gw,
        &[(url(0), true), (url(1), false)],
        WITHIN,
        "scale down: drain",
    );
    took.push(("scale down (drain)", t));
    let resp = stream.join().unwrap();
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(
        resp.text().contains("[DONE]"),
        "the draining replica's stream finished: {}",
        resp.text()
    );
    let t = await_members(&gw, &[(url(1), false)], WITHIN, "scale down: removed");
    took.push(("removed after its stream", t));

    // 410 Gone: the server compacts while a pod joins silently (no event ever carries
    // it); the watch gets ERROR 410, the client relists and finds it.
    let lists = |r: &[String]| r.iter().filter(|q| !q.contains("watch=true")).count();
    let before = lists(&api.requests());
    let expired = Instant::now();
    api.expire(SLICES, |objs| {
        objs.insert(
            "replica-x1".into(),
            slice("replica-x1", port, &[(b, true), (c, true)]),
        );
    });
    let t = await_members(
        &gw,
        &[(url(1), false), (url(2), false)],
        WITHIN,
        "relist after 410",
    );
    took.push(("relist after 410 Gone", expired.elapsed().max(t)));
    assert!(
        lists(&api.requests()) > before,
        "no LIST after the 410: {:?}",
        api.requests()
    );

    // The watch resumed after the relist: the slice DELETED empties the pool.
    assert!(api.wait_requests(Duration::from_secs(5), |r| r
        .iter()
        .rev()
        .take(1)
        .any(|q| q.contains("watch=true"))));
    api.delete(SLICES, "replica-x1");
    let t = await_members(&gw, &[], WITHIN, "slice deleted");
    took.push(("slice deleted", t));

    // Requests routed through it all along: a fresh pod joins and serves.
    api.put(SLICES, slice("replica-x2", port, &[(c, true)]));
    await_members(&gw, &[(url(2), false)], WITHIN, "rejoin");
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat("mock", "s", "u", 2, false),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(gw.pid(), pid);
    assert!(!gw.log().contains("panicked"), "{}", gw.log());
    for (what, t) in &took {
        eprintln!("discovery: {what}: {} ms", t.as_millis());
    }
}

#[test]
fn dns_discovery_follows_localhost() {
    // `localhost` resolves (for real) to 127.0.0.1 and perhaps ::1; the replica listens on
    // 127.0.0.1 only, so exactly that address joins.
    let port = free_port();
    let mock = MockReplica::start_on(Mode::Ok, &format!("127.0.0.1:{port}")).expect("bind");
    let gw = GatewayProc::spawn(
        &format!(
            "auth: {{enabled: false}}\npools:\n  - name: local\n    engine: warmpath\n    \
             discovery: {{dns: {{name: localhost, port: {port}, interval_ms: 200}}}}\n"
        ),
        &[],
        1,
    )
    .expect("gateway");
    assert_eq!(members(&gw), [(mock.url(), false)]);
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat("mock", "s", "u", 2, false),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(mock.generations(), 1);
}

const POOLS: &str = "/apis/inference.networking.k8s.io/v1/namespaces/llm/inferencepools";
const PODS: &str = "/api/v1/namespaces/llm/pods";

/// A pod of the pool: labelled for its selector, with an IP, ready or not, perhaps being
/// deleted.
fn pod(name: &str, ip: &str, ready: bool, deleting: bool) -> Value {
    let status = if ready { "True" } else { "False" };
    let mut p = json!({
        "metadata": {"name": name, "namespace": "llm",
            "labels": {"app.kubernetes.io/name": "replica", "pod-template-hash": "6f9c"}},
        "spec": {"containers": [{"name": "replica", "image": "warmpath/replica"}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "ContainersReady", "status": status},
                {"type": "Ready", "status": status}]}
    });
    if deleting {
        p["metadata"]["deletionTimestamp"] = "2026-12-07T11:00:00Z".into();
        p["metadata"]["deletionGracePeriodSeconds"] = 30.into();
    }
    p
}

#[test]
fn replicas_follow_an_inference_pools_pods() {
    let api = KubeApi::start();
    api.collection(POOLS, "InferencePool", "inference.networking.k8s.io/v1");
    api.collection(PODS, "Pod", "v1");
    let (port, _mocks) = three_mocks();
    let url = |i: usize| format!("http://127.0.0.{}:{port}", i + 2);
    api.put(
        POOLS,
        json!({"metadata": {"name": "replica", "namespace": "llm"},
            "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "replica"}},
                "targetPorts": [{"number": port}],
                "endpointPickerRef": {"name": "warmpath-epp", "port": {"number": 9002}}}}),
    );
    api.put(PODS, pod("replica-a", "127.0.0.2", true, false));
    let kubeconfig = api.kubeconfig("llm");
    let gw = GatewayProc::spawn_with(
        "auth: {enabled: false}\npools:\n  - name: replicas\n    engine: warmpath\n    \
         discovery: {kubernetes: {inference_pool: replica}}\n",
        &[],
        1,
        None,
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    )
    .expect("gateway");
    assert_eq!(members(&gw), [(url(0), false)]);
    assert!(api
        .requests()
        .iter()
        .any(|r| r.starts_with(&format!("{POOLS}/replica"))));
    let pod_reqs: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|r| r.starts_with(PODS))
        .collect();
    assert!(
        pod_reqs
            .iter()
            .all(|r| r.contains("labelSelector=app.kubernetes.io%2Fname%3Dreplica")),
        "{pod_reqs:?}"
    );
    assert!(api.wait_requests(Duration::from_secs(10), |r| r
        .iter()
        .any(|q| q.starts_with(PODS) && q.contains("watch=true"))));

    // A new pod, not ready yet, then pod a terminating: by the time a drains (the later
    // event), b has been seen, and it is not registered while it starts.
    api.put(PODS, pod("replica-b", "127.0.0.3", false, false));
    api.put(PODS, pod("replica-a", "127.0.0.2", true, true));
    await_members(
        &gw,
        &[(url(0), true)],
        WITHIN,
        "pod a terminating, b starting",
    );
    // b ready: it joins.
    api.put(PODS, pod("replica-b", "127.0.0.3", true, false));
    await_members(
        &gw,
        &[(url(0), true), (url(1), false)],
        WITHIN,
        "pod b ready",
    );
    // Pod a gone: it leaves.
    api.delete(PODS, "replica-a");
    await_members(&gw, &[(url(1), false)], WITHIN, "pod a deleted");
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat("mock", "s", "u", 2, false),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}
