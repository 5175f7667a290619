#![allow(clippy::unwrap_used)]
//! docs/metrics.md lists every gateway metric, and it and the Grafana dashboard use only
//! metrics the gateway exports. Names are read from every file of gateway/src/metrics/
//! (the string literals passed to the metric constructors).

use std::collections::BTreeSet;
use std::path::PathBuf;

const PREFIX: &str = "warmpath_gateway_";

fn read(rel: &str) -> String {
    std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(rel),
    )
    .unwrap()
}

/// Metric names (without prefix) defined in gateway/src/metrics/ (the module and its
/// series files).
fn exported() -> BTreeSet<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../gateway/src/metrics");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with(".rs"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "metric files: {files:?}");
    let src = files
        .iter()
        .map(|f| read(&format!("gateway/src/metrics/{f}")))
        .collect::<Vec<_>>()
        .join("\n");
    src.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            !s.is_empty()
                && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                && [
                    "_total",
                    "_seconds",
                    "_tokens",
                    "_requests",
                    "_share",
                    "_degraded",
                    "_bytes",
                ]
                .iter()
                .any(|e| s.ends_with(e))
                && *s != "warmpath_gateway"
        })
        .map(String::from)
        .collect()
}

/// `warmpath_gateway_*` names used in `text`, without prefix and histogram suffixes.
fn used(text: &str) -> BTreeSet<String> {
    text.match_indices(PREFIX)
        .map(|(i, _)| {
            let rest = &text[i + PREFIX.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name)
                .to_string()
        })
        .filter(|n| !n.is_empty()) // the bare prefix, as in "prefix `warmpath_gateway_`"
        .collect()
}

#[test]
fn metrics_doc_and_grafana_match_the_gateway() {
    let exported = exported();
    assert!(
        exported.len() >= 15,
        "parsed too few metric names: {exported:?}"
    );
    let doc = used(&read("docs/metrics.md"));
    let undocumented: Vec<_> = exported.difference(&doc).collect();
    assert!(
        undocumented.is_empty(),
        "docs/metrics.md misses {undocumented:?}"
    );
    let unknown: Vec<_> = doc.difference(&exported).collect();
    assert!(
        unknown.is_empty(),
        "docs/metrics.md names metrics the gateway lacks: {unknown:?}"
    );

    let grafana: serde_json::Value =
        serde_json::from_str(&read("configs/grafana/warmpath.json")).unwrap();
    let panels = grafana["panels"].as_array().unwrap();
    let mut exprs = String::new();
    for p in panels {
        for t in p["targets"].as_array().into_iter().flatten() {
            exprs.push_str(t["expr"].as_str().unwrap());
            exprs.push('\n');
        }
    }
    let in_grafana = used(&exprs);
    let unknown: Vec<_> = in_grafana.difference(&exported).collect();
    assert!(
        unknown.is_empty(),
        "Grafana dashboard queries unknown metrics: {unknown:?}"
    );
    for needed in [
        "predicted_cached_tokens_total",
        "actual_cached_tokens_total",
        "limit_rejections_total",
        "routing_decisions_total",
    ] {
        assert!(
            in_grafana.contains(needed),
            "Grafana dashboard has no panel over {needed}"
        );
    }
    let titles: Vec<&str> = panels.iter().filter_map(|p| p["title"].as_str()).collect();
    for t in [
        "Cache hit rate",
        "KV usage per replica",
        "Requests per tenant",
        "Decisions by branch",
    ] {
        assert!(
            titles.contains(&t),
            "Grafana dashboard lacks panel {t:?}: {titles:?}"
        );
    }
}
