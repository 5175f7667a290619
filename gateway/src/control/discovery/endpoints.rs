//! What a discovery source reports: the set of upstream addresses and whether each may take
//! new requests; and how the Kubernetes objects (EndpointSlices, pods) become that set.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// Whether a discovered upstream may take new requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// Ready: it joins routing (the gateway's own health checks still apply).
    Ready,
    /// Listed but not ready (starting, failing its readiness probe, terminating): it gets
    /// no new requests, its in-flight ones finish, its index entries stay.
    NotReady,
}

/// Every upstream a source knows now, by address. An address missing from the set has left.
pub(crate) type EndpointSet = BTreeMap<SocketAddr, Readiness>;

/// Adds `addr` to `set`; an address listed twice (an endpoint moving between slices) is
/// ready if either entry is.
fn merge(set: &mut EndpointSet, addr: SocketAddr, r: Readiness) {
    let e = set.entry(addr).or_insert(r);
    if r == Readiness::Ready {
        *e = Readiness::Ready;
    }
}

/// The port of a slice's upstreams: `port` when configured, else the slice's only port or
/// the one named `http`.
fn slice_port(slice: &EndpointSlice, port: Option<u16>) -> Option<u16> {
    if port.is_some() {
        return port;
    }
    let ports = slice.ports.as_deref().unwrap_or_default();
    let chosen = match ports {
        [only] => Some(only),
        many => many.iter().find(|p| p.name.as_deref() == Some("http")),
    }?;
    chosen.port.and_then(|p| u16::try_from(p).ok())
}

/// The upstreams the EndpointSlices of a Service list. Per endpoint the conditions decide
/// (`ready` unset counts as ready, as the API specifies); FQDN slices and addresses that
/// are not IPs are skipped.
pub(crate) fn from_slices<'a>(
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    port: Option<u16>,
) -> EndpointSet {
    let mut set = EndpointSet::new();
    for slice in slices {
        if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
            continue;
        }
        let Some(p) = slice_port(slice, port) else {
            tracing::warn!(slice = ?slice.metadata.name, "EndpointSlice without a usable port: \
                set `discovery.kubernetes.port`, or name one port `http`");
            continue;
        };
        for ep in &slice.endpoints {
            let Some(ip) = ep.addresses.first().and_then(|a| a.parse::<IpAddr>().ok()) else {
                continue;
            };
            let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            let r = if ready {
                Readiness::Ready
            } else {
                Readiness::NotReady
            };
            merge(&mut set, SocketAddr::new(ip, p), r);
        }
    }
    set
}

/// The upstreams among the pods an `InferencePool` selects: a pod with an IP that is not
/// finished; ready when its `Ready` condition is true and it is not being deleted.
pub(crate) fn from_pods<'a>(pods: impl IntoIterator<Item = &'a Pod>, port: u16) -> EndpointSet {
    let mut set = EndpointSet::new();
    for pod in pods {
        let Some(status) = &pod.status else { continue };
        if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
            continue;
        }
        let Some(ip) = status
            .pod_ip
            .as_deref()
            .and_then(|a| a.parse::<IpAddr>().ok())
        else {
            continue;
        };
        let ready = status
            .conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let r = if ready && pod.metadata.deletion_timestamp.is_none() {
            Readiness::Ready
        } else {
            Readiness::NotReady
        };
        merge(&mut set, SocketAddr::new(ip, port), r);
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(json: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn slices_become_endpoints_by_their_conditions() {
        let a = slice(serde_json::json!({
            "metadata": {"name": "replica-abc", "resourceVersion": "7"},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 9000, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true, "serving": true, "terminating": false}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false, "serving": true, "terminating": true}},
                {"addresses": ["10.0.0.3"]},
                {"addresses": ["10.0.0.4"], "conditions": {"ready": false}}
            ]
        }));
        // The same pod in a second slice while it moves: ready in either is ready.
        let b = slice(serde_json::json!({
            "metadata": {"name": "replica-def"},
            "addressType": "IPv4",
            "ports": [{"name": "metrics", "port": 9100}, {"name": "http", "port": 9000}],
            "endpoints": [{"addresses": ["10.0.0.4"], "conditions": {"ready": true}}]
        }));
        let fqdn = slice(serde_json::json!({
            "metadata": {"name": "x"}, "addressType": "FQDN",
            "ports": [{"port": 80}], "endpoints": [{"addresses": ["a.example"]}]
        }));
        let set = from_slices([&a, &b, &fqdn], None);
        let got: Vec<(String, Readiness)> = set.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(
            got,
            [
                ("10.0.0.1:9000".to_string(), Readiness::Ready),
                ("10.0.0.2:9000".to_string(), Readiness::NotReady),
                ("10.0.0.3:9000".to_string(), Readiness::Ready),
                ("10.0.0.4:9000".to_string(), Readiness::Ready),
            ]
        );
        // A configured port wins over the slice's.
        let set = from_slices([&a], Some(8000));
        assert!(set.contains_key(&"10.0.0.1:8000".parse().unwrap()));
        // Two ports, none named http, no port configured: nothing to route to.
        let c = slice(serde_json::json!({
            "metadata": {"name": "c"}, "addressType": "IPv4",
            "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}],
            "endpoints": [{"addresses": ["10.0.0.9"]}]
        }));
        assert!(from_slices([&c], None).is_empty());
    }

    #[test]
    fn pods_are_ready_by_their_ready_condition_unless_deleted() {
        let pod = |name: &str, ip: &str, ready: &str, deleting: bool, phase: &str| -> Pod {
            let mut v = serde_json::json!({
                "metadata": {"name": name},
                "status": {"phase": phase, "podIP": ip,
                    "conditions": [{"type": "Ready", "status": ready}]}
            });
            if deleting {
                v["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z".into();
            }
            serde_json::from_value(v).unwrap()
        };
        let pods = [
            pod("a", "10.1.0.1", "True", false, "Running"),
            pod("b", "10.1.0.2", "False", false, "Running"),
            pod("c", "10.1.0.3", "True", true, "Running"),
            pod("d", "10.1.0.4", "True", false, "Succeeded"),
            pod("e", "", "False", false, "Pending"),
        ];
        let set = from_pods(&pods, 8000);
        let got: Vec<(String, Readiness)> = set.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(
            got,
            [
                ("10.1.0.1:8000".to_string(), Readiness::Ready),
                ("10.1.0.2:8000".to_string(), Readiness::NotReady),
                ("10.1.0.3:8000".to_string(), Readiness::NotReady),
            ]
        );
    }
}
