//! The pre-warm task against counting mock replicas: one task per rollout generation,
//! whoever asks for it and however often; a region-pinned tenant's prefixes replayed only
//! in its regions, with the tier off where the replica's tier is elsewhere.

use super::*;
use crate::config::{Config, RolloutConfig};
use crate::replicas::ReplicaAddr;
use crate::rollout::hot::HotTag;
use crate::tokenize::CachedTokenizer;
use http::HeaderValue;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warmpath_core::{BlockSize, CheckpointId, TokenId};
use warmpath_protocol::replica_api::ReplicaInfo;
use warmpath_text::bytelevel::chatml_bpe_spec as byte_level_spec;

/// Each request a mock replica answered, as text (head and body).
type Served = Arc<Mutex<Vec<String>>>;

/// A replica that answers every request 200 and keeps them.
async fn counting_replica(rt: &tokio::runtime::Runtime) -> (String, Served) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Served::default();
    let count = served.clone();
    rt.spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1 << 16];
                let mut got = Vec::new();
                // Head, then the body by its Content-Length.
                loop {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if got.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                count
                    .lock()
                    .push(String::from_utf8_lossy(&got).to_lowercase());
                let body = r#"{"choices":[{"text":"x"}]}"#;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    (format!("http://{addr}"), served)
}

fn rollout(percent: f64) -> RolloutConfig {
    let mut c = crate::rollout::tests::cfg(percent, 4);
    c.prewarm.min_tokens = 1;
    c
}

/// A gateway without authentication (one tenant), with one replica of `m@2` at `url` and
/// two hot prefixes of `m@1`.
fn state(rt: &tokio::runtime::Runtime, url: &str) -> Arc<AppState> {
    let mut cfg = Config::default();
    cfg.auth.enabled = false;
    let state = AppState::new(cfg, rt.handle().clone());
    add_replica(&state, url, None, None);
    let tag = HotTag {
        tenant: crate::tenants::LOCAL_TENANT.into(),
        salt: HeaderValue::from_static("s"),
        residency: Arc::from(Vec::new()),
    };
    for key in [1u64, 2] {
        hot(&state, key, &tag);
    }
    state
}

/// Records a 40-token hot prefix of `m@1` with conversation key `key` for `tag`.
fn hot(state: &AppState, key: u64, tag: &HotTag) {
    let tokens: Vec<TokenId> = (0..40).map(|t| TokenId(t + key as u32 * 100)).collect();
    state
        .rollouts
        .hot
        .record(&CheckpointId::new("m@1"), key, &tokens, tag);
}

/// Registers a replica of `m@2` at `url` in `region`, its tier in `tier`.
fn add_replica(state: &AppState, url: &str, region: Option<&str>, tier: Option<&str>) {
    let tok = CachedTokenizer::new(&byte_level_spec(), 64, 1).unwrap();
    let info = ReplicaInfo {
        model: "m".into(),
        checkpoint: CheckpointId::new("m@2"),
        block_size: BlockSize(16),
        hash_scheme: warmpath_core::SCHEME_VERSION,
        capacity_blocks: 1 << 16,
        max_context: 1 << 16,
        region: region.map(String::from),
        device: "cpu".into(),
        role: Default::default(),
        kv_store_region: tier.map(String::from),
    };
    let addr = ReplicaAddr::parse(url).unwrap();
    state
        .registry
        .insert(addr, info, Arc::new(tok.into()))
        .unwrap();
}

/// Waits (up to 10 s) until the rollout's pre-warm finished and every task on `rt` but the
/// `listeners` mock replicas' ended (no pre-warm task left running).
fn until_finished(
    rt: &tokio::runtime::Runtime,
    m: &ModelRollout,
    listeners: usize,
) -> crate::rollout::Progress {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let p = m.status().progress;
        let tasks = rt.metrics().num_alive_tasks();
        if p.finished && tasks == listeners {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "pre-warm never finished: {p:?}, {tasks} tasks"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_rollout_started_twice_replays_each_prefix_once() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (url, served) = rt.block_on(counting_replica(&rt));
    let state = state(&rt, &url);
    let m = state.rollouts.set(&rollout(50.0));
    // The race forced: the admin call and the fleet poller both start the pre-warm of one
    // rollout generation before either task ran.
    start(&state, m.clone());
    start(&state, m.clone());
    let p = until_finished(&rt, &m, 1);
    assert_eq!((p.planned, p.done, p.failed), (2, 2, 0), "{p:?}");
    let ok = state.metrics.rollout_prewarm("m", "ok").get();
    assert_eq!(ok, 2, "replays counted: {ok}");
    assert_eq!(served.lock().len(), 2, "replays sent");
}

/// Issue 44, item 7: a pinned tenant's hot prefix is replayed only on the new
/// checkpoint's replicas in its region, with the tier off where that replica's tier is in
/// another region; an unpinned tenant's goes everywhere with the tier on; a removed
/// tenant's goes nowhere.
#[test]
fn a_pinned_tenants_prefix_is_replayed_only_in_its_region() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let yaml = "auth: {enabled: true, salt_secret: 0123456789abcdef0}\ntenants:\n  \
        - {id: eu-only, api_key_sha256: [], regions: [eu]}\n  \
        - {id: anywhere, api_key_sha256: []}\n";
    let state = AppState::new(Config::from_yaml(yaml).unwrap(), rt.handle().clone());
    // `eu` with its tier in `us`, `eu` with its tier at home, and `us`.
    let mocks: Vec<(String, Served)> = (0..3).map(|_| rt.block_on(counting_replica(&rt))).collect();
    add_replica(&state, &mocks[0].0, Some("eu"), Some("us"));
    add_replica(&state, &mocks[1].0, Some("eu"), Some("eu"));
    add_replica(&state, &mocks[2].0, Some("us"), Some("us"));
    let tag = |tenant: &str, salt: &'static str, pin: &[&str]| HotTag {
        tenant: tenant.into(),
        salt: HeaderValue::from_static(salt),
        residency: pin
            .iter()
            .map(|r| warmpath_core::RegionId::new(*r))
            .collect(),
    };
    hot(&state, 1, &tag("eu-only", "salt-eu", &["eu"]));
    hot(&state, 2, &tag("anywhere", "salt-any", &[]));
    hot(&state, 3, &tag("removed", "salt-gone", &[]));
    let m = state.rollouts.set(&rollout(50.0));
    start(&state, m.clone());
    let p = until_finished(&rt, &m, 3);
    assert_eq!((p.planned, p.done, p.failed), (5, 5, 0), "{p:?}");
    let seen = |i: usize, salt: &str| -> Vec<bool> {
        let got = mocks[i].1.lock();
        got.iter()
            .filter(|r| r.contains(&format!("x-warmpath-cache-salt: {salt}\r\n")))
            .map(|r| r.contains("x-warmpath-kv-tier-off: 1\r\n"))
            .collect()
    };
    // (replica, salt): the replays it got, each as "tier off".
    assert_eq!(
        seen(0, "salt-eu"),
        [true],
        "in region, tier in us: tier off"
    );
    assert_eq!(seen(1, "salt-eu"), [false], "in region, tier at home");
    assert_eq!(
        seen(2, "salt-eu"),
        [] as [bool; 0],
        "never out of its region"
    );
    for i in 0..3 {
        assert_eq!(
            seen(i, "salt-any"),
            [false],
            "unpinned: everywhere, tier on"
        );
        assert_eq!(
            seen(i, "salt-gone"),
            [] as [bool; 0],
            "a removed tenant's: nowhere"
        );
    }
}
