#![allow(clippy::unwrap_used)]
//! Clients cannot grow the metric series (issue #25, defect 5): a tenant sending 1000
//! requests with random model names leaves `requests_total` with a bounded set of `model`
//! labels, the unknown names all counted under `other`.

use std::collections::HashSet;
use warmpath_e2e::fixtures::{auth_yaml, chat, replicas_yaml};
use warmpath_e2e::http::post_json;
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

/// `model` label values of `requests_total`, and the count under `other`.
fn model_labels(metrics: &str) -> (HashSet<String>, u64) {
    let mut labels = HashSet::new();
    let mut other = 0;
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("warmpath_gateway_requests_total{"))
    {
        let model = line
            .split("model=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap()
            .to_string();
        if model == "other" {
            other += line.rsplit(' ').next().unwrap().parse::<u64>().unwrap();
        }
        labels.insert(model);
    }
    (labels, other)
}

#[test]
fn random_model_names_share_one_label() {
    let mock = MockReplica::start(Mode::Ok);
    let yaml = format!(
        "{}{}",
        replicas_yaml(&[mock.url()]),
        auth_yaml(&[("t", "key-t", "")])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).unwrap();
    let auth = [("Authorization", "Bearer key-t")];
    let ok = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &auth,
        &chat("mock", "s", "u", 2, false),
    )
    .unwrap();
    assert_eq!(ok.status, 200, "{}", ok.text());
    for i in 0..1000u32 {
        let model = format!("m-{:016x}-{i}", rand::random::<u64>());
        let r = post_json(
            &gw.addr,
            "/v1/chat/completions",
            &auth,
            &chat(&model, "s", "u", 2, false),
        )
        .unwrap();
        assert_eq!(r.status, 404, "{}", r.text());
    }
    // A request is counted as it is logged, just after its answer is sent: wait for the last.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (labels, other) = loop {
        let (labels, other) = model_labels(&gw.metrics().unwrap());
        if other >= 1000 || std::time::Instant::now() > deadline {
            break (labels, other);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(
        labels.contains("mock"),
        "the served model keeps its label: {labels:?}"
    );
    assert!(
        labels.len() <= 3,
        "model labels grew with the requests: {} of them",
        labels.len()
    );
    assert_eq!(other, 1000, "every unknown model counted as `other`");
}
