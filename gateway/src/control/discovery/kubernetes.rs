//! The Kubernetes source: a Service's EndpointSlices (label
//! `kubernetes.io/service-name`), or the pods an `InferencePool` selects, followed with
//! kube-runtime's watcher: a LIST, then a WATCH from its `resourceVersion` (bookmarks
//! included), a new LIST when the server answers 410 Gone. Every change publishes the
//! whole [`EndpointSet`].

use super::endpoints::{self, EndpointSet};
use crate::config::KubernetesDiscovery;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;

/// Why the Kubernetes source cannot follow its pool (it retries).
#[derive(Debug, thiserror::Error)]
pub(crate) enum KubeSourceError {
    /// No client: no kubeconfig, no in-cluster service account, or an unusable one.
    #[error("no Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// The `InferencePool` could not be read.
    #[error("InferencePool {name}: {source}")]
    PoolRead {
        /// Its name.
        name: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// The `InferencePool` has no usable selector or port.
    #[error("InferencePool {0}: {1}")]
    PoolSpec(String, String),
}

/// The part of an `InferencePool`'s spec discovery reads
/// (`inference.networking.k8s.io/v1`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoolSpec {
    selector: PoolSelector,
    target_ports: Vec<PoolPort>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoolSelector {
    match_labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct PoolPort {
    number: u16,
}

/// The watcher's delay after an error (a failed LIST or WATCH, a 410 Gone): from 100 ms,
/// doubling to 5 s, reset by the next event. kube-runtime's default starts at 800 ms,
/// which would hold a relist back for most of a second.
struct QuickBackoff(Duration);

impl Default for QuickBackoff {
    fn default() -> Self {
        Self(Duration::from_millis(100))
    }
}

impl Iterator for QuickBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let d = self.0;
        self.0 = (self.0 * 2).min(Duration::from_secs(5));
        Some(d)
    }
}

impl Backoff for QuickBackoff {
    fn reset(&mut self) {
        *self = Self::default();
    }
}

/// Follows the pool's upstreams into `tx` until every receiver is gone; a missing client
/// or pool is retried every few seconds.
pub(crate) async fn follow(pool: String, cfg: KubernetesDiscovery, tx: watch::Sender<EndpointSet>) {
    let mut delay = Duration::from_secs(1);
    while !tx.is_closed() {
        match follow_once(&cfg, &tx).await {
            Ok(()) => return,
            Err(e) => tracing::warn!(pool = %pool, error = %e, "kubernetes discovery; retrying"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

async fn follow_once(
    cfg: &KubernetesDiscovery,
    tx: &watch::Sender<EndpointSet>,
) -> Result<(), KubeSourceError> {
    let client = Client::try_default()
        .await
        .map_err(KubeSourceError::Client)?;
    let ns = cfg
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    if let Some(service) = &cfg.service {
        let api: Api<EndpointSlice> = Api::namespaced(client, &ns);
        let wc =
            watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
        let port = cfg.port;
        follow_objects(api, wc, tx, |o| endpoints::from_slices(o.values(), port)).await;
        return Ok(());
    }
    let name = cfg.inference_pool.clone().unwrap_or_default();
    let (selector, port) = read_pool(&client, &ns, &name, cfg.port).await?;
    tracing::info!(pool = %name, namespace = %ns, %selector, port, "following an InferencePool's pods");
    let api: Api<Pod> = Api::namespaced(client, &ns);
    let wc = watcher::Config::default().labels(&selector);
    follow_objects(api, wc, tx, |o| endpoints::from_pods(o.values(), port)).await;
    Ok(())
}

/// The label selector (`k=v,k=v`) and port of the `InferencePool` `name`.
async fn read_pool(
    client: &Client,
    ns: &str,
    name: &str,
    port: Option<u16>,
) -> Result<(String, u16), KubeSourceError> {
    let gvk = GroupVersionKind::gvk("inference.networking.k8s.io", "v1", "InferencePool");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "inferencepools");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let obj = api
        .get(name)
        .await
        .map_err(|source| KubeSourceError::PoolRead {
            name: name.to_string(),
            source,
        })?;
    pool_selector(name, obj.data.get("spec"), port)
}

/// The selector and port an `InferencePool`'s spec names (`port` overrides its first
/// target port).
fn pool_selector(
    name: &str,
    spec: Option<&serde_json::Value>,
    port: Option<u16>,
) -> Result<(String, u16), KubeSourceError> {
    let bad = |why: String| KubeSourceError::PoolSpec(name.to_string(), why);
    let spec: PoolSpec = serde_json::from_value(spec.cloned().unwrap_or_default())
        .map_err(|e| bad(format!("unexpected spec: {e}")))?;
    if spec.selector.match_labels.is_empty() {
        return Err(bad("selects no label".into()));
    }
    let selector = spec
        .selector
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let port = match (port, spec.target_ports.first()) {
        (Some(p), _) => p,
        (None, Some(p)) => p.number,
        (None, None) => return Err(bad("lists no targetPorts".into())),
    };
    Ok((selector, port))
}

/// Keeps the objects the watcher reports (a relist replaces them all) and publishes
/// `to_set` of them after every change that alters the set.
async fn follow_objects<K>(
    api: Api<K>,
    wc: watcher::Config,
    tx: &watch::Sender<EndpointSet>,
    to_set: impl Fn(&BTreeMap<String, K>) -> EndpointSet,
) where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    use futures::StreamExt;
    let mut objects: BTreeMap<String, K> = BTreeMap::new();
    let mut relist: Option<BTreeMap<String, K>> = None;
    let mut stream = std::pin::pin!(watcher::watcher(api, wc).backoff(QuickBackoff::default()));
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => {
                relist = Some(BTreeMap::new());
                continue;
            }
            Ok(Event::InitApply(o)) => {
                relist.get_or_insert_default().insert(o.name_any(), o);
                continue;
            }
            Ok(Event::InitDone) => objects = relist.take().unwrap_or_default(),
            Ok(Event::Apply(o)) => {
                objects.insert(o.name_any(), o);
            }
            Ok(Event::Delete(o)) => {
                objects.remove(&o.name_any());
            }
            Err(e) => {
                tracing::info!(error = %e, "kubernetes watch interrupted; resuming");
                continue;
            }
        }
        let set = to_set(&objects);
        tx.send_if_modified(|old| {
            let changed = *old != set;
            if changed {
                *old = set;
            }
            changed
        });
        if tx.is_closed() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inference_pools_spec_gives_selector_and_port() {
        let spec = serde_json::json!({
            "selector": {"matchLabels": {"app": "vllm-llama", "tier": "gpu"}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": "warmpath-epp", "port": {"number": 9002}}
        });
        let (sel, port) = pool_selector("p", Some(&spec), None).unwrap();
        assert_eq!((sel.as_str(), port), ("app=vllm-llama,tier=gpu", 8000));
        assert_eq!(pool_selector("p", Some(&spec), Some(9)).unwrap().1, 9);
        let none =
            serde_json::json!({"selector": {"matchLabels": {}}, "targetPorts": [{"number": 1}]});
        let e = pool_selector("p", Some(&none), None).unwrap_err();
        assert!(e.to_string().contains("selects no label"), "{e}");
        let e = pool_selector("p", None, None).unwrap_err();
        assert!(e.to_string().contains("unexpected spec"), "{e}");
    }

    #[test]
    fn the_backoff_starts_short_and_resets() {
        let mut b = QuickBackoff::default();
        let first: Vec<u128> = b.by_ref().take(8).map(|d| d.as_millis()).collect();
        assert_eq!(first, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        b.reset();
        assert_eq!(b.next(), Some(Duration::from_millis(100)));
    }
}
