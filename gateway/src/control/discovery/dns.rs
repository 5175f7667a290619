//! The DNS source: a name resolved again every `interval_ms`; each address it resolves to
//! is an upstream, one that stops resolving has left. A failed resolution keeps the last
//! set (a resolver blip does not empty the pool).

use super::endpoints::{EndpointSet, Readiness};
use crate::config::DnsDiscovery;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// A resolution in progress.
pub(crate) type Resolving = Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>>;

/// Resolves a name to socket addresses (the system's resolver, or a test's script).
pub(crate) trait Resolve: Send + Sync + 'static {
    /// The addresses of `name`, each with `port`.
    fn resolve(&self, name: &str, port: u16) -> Resolving;
}

/// The system resolver (`getaddrinfo`, through tokio).
pub(crate) struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, name: &str, port: u16) -> Resolving {
        let name = name.to_string();
        Box::pin(async move { Ok(tokio::net::lookup_host((name, port)).await?.collect()) })
    }
}

/// Follows `cfg.name` into `tx` until every receiver is gone.
pub(crate) async fn follow(
    pool: String,
    cfg: DnsDiscovery,
    resolver: Arc<dyn Resolve>,
    tx: watch::Sender<EndpointSet>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(cfg.interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !tx.is_closed() {
        tick.tick().await;
        match resolver.resolve(&cfg.name, cfg.port).await {
            Ok(addrs) => {
                let set: EndpointSet = addrs.into_iter().map(|a| (a, Readiness::Ready)).collect();
                tx.send_if_modified(|old| {
                    let changed = *old != set;
                    if changed {
                        tracing::info!(pool = %pool, name = %cfg.name, addresses = ?set.keys().collect::<Vec<_>>(), "dns discovery: addresses changed");
                        *old = set;
                    }
                    changed
                });
            }
            Err(e) => {
                tracing::warn!(pool = %pool, name = %cfg.name, error = %e, "dns discovery: resolution failed; keeping the last addresses")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::collections::VecDeque;

    /// Answers each resolution with the next scripted result (then the last one again).
    struct Scripted(Mutex<VecDeque<std::io::Result<Vec<SocketAddr>>>>);

    impl Resolve for Scripted {
        fn resolve(&self, _name: &str, port: u16) -> Resolving {
            let mut q = self.0.lock();
            let r = match q.pop_front() {
                Some(Ok(v)) if q.is_empty() => {
                    q.push_back(Ok(v.clone()));
                    Ok(v)
                }
                Some(r) => r,
                None => Ok(Vec::new()),
            };
            let r = r.map(|v| {
                v.into_iter()
                    .map(|a: SocketAddr| SocketAddr::new(a.ip(), port))
                    .collect()
            });
            Box::pin(async move { r })
        }
    }

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter()
            .map(|a| format!("{a}:1").parse().unwrap())
            .collect()
    }

    fn keys(set: &EndpointSet) -> Vec<String> {
        set.keys().map(ToString::to_string).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn addresses_join_and_leave_and_a_failure_keeps_the_last_set() {
        let script = Scripted(Mutex::new(VecDeque::from([
            Ok(addrs(&["10.0.0.1", "10.0.0.2"])),
            Ok(addrs(&["10.0.0.2", "10.0.0.1", "10.0.0.3"])),
            Err(std::io::Error::other("SERVFAIL")),
            Ok(addrs(&["10.0.0.3"])),
        ])));
        let (tx, mut rx) = watch::channel(EndpointSet::new());
        let cfg = DnsDiscovery {
            name: "llm.internal".into(),
            port: 8000,
            interval_ms: 1000,
        };
        let task = tokio::spawn(follow("p".into(), cfg, Arc::new(script), tx));
        let start = tokio::time::Instant::now();
        let mut seen = Vec::new();
        for _ in 0..3 {
            rx.changed().await.unwrap();
            seen.push((keys(&rx.borrow_and_update()), start.elapsed().as_millis()));
        }
        assert_eq!(
            seen,
            [
                (
                    vec!["10.0.0.1:8000".to_string(), "10.0.0.2:8000".to_string()],
                    0
                ),
                (
                    vec![
                        "10.0.0.1:8000".to_string(),
                        "10.0.0.2:8000".to_string(),
                        "10.0.0.3:8000".to_string()
                    ],
                    1000
                ),
                // The failure at 2 s changed nothing; the next answer, at 3 s, did.
                (vec!["10.0.0.3:8000".to_string()], 3000),
            ]
        );
        drop(rx);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the source stops once nobody listens")
            .unwrap();
    }

    #[tokio::test]
    async fn the_system_resolver_resolves_localhost() {
        let got = SystemResolver.resolve("localhost", 9).await.unwrap();
        assert!(
            got.iter().any(|a| a.ip().is_loopback() && a.port() == 9),
            "{got:?}"
        );
    }
}
