//! The pre-warm task against a counting mock replica: one task per rollout generation,
//! whoever asks for it and however often.

use super::*;
use crate::config::{Config, RolloutConfig};
use crate::replicas::ReplicaAddr;
use crate::tokenize::CachedTokenizer;
use http::HeaderValue;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warmpath_core::{BlockSize, CheckpointId, TokenId};
use warmpath_protocol::replica_api::ReplicaInfo;
use warmpath_text::bytelevel::chatml_bpe_spec as byte_level_spec;

/// A replica that answers every request 200 and counts them.
async fn counting_replica(rt: &tokio::runtime::Runtime) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Arc::new(AtomicUsize::new(0));
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
                count.fetch_add(1, Ordering::SeqCst);
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

/// A gateway with one replica of `m@2` at `url` and two hot prefixes of `m@1`.
fn state(rt: &tokio::runtime::Runtime, url: &str) -> Arc<AppState> {
    let state = AppState::new(Config::default(), rt.handle().clone());
    let tok = CachedTokenizer::new(&byte_level_spec(), 64, 1).unwrap();
    let info = ReplicaInfo {
        model: "m".into(),
        checkpoint: CheckpointId::new("m@2"),
        block_size: BlockSize(16),
        hash_scheme: warmpath_core::SCHEME_VERSION,
        capacity_blocks: 1 << 16,
        max_context: 1 << 16,
        region: None,
        device: "cpu".into(),
        role: Default::default(),
    };
    let addr = ReplicaAddr::parse(url).unwrap();
    state
        .registry
        .insert(addr, info, Arc::new(tok.into()))
        .unwrap();
    let salt = HeaderValue::from_static("s");
    for key in [1u64, 2] {
        let tokens: Vec<TokenId> = (0..40).map(|t| TokenId(t + key as u32 * 100)).collect();
        state
            .rollouts
            .hot
            .record(&CheckpointId::new("m@1"), key, &tokens, &salt);
    }
    state
}

/// Waits (up to 10 s) until the rollout's pre-warm finished and every task on `rt` but the
/// mock replica's listener ended (no pre-warm task left running).
fn until_finished(rt: &tokio::runtime::Runtime, m: &ModelRollout) -> crate::rollout::Progress {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let p = m.status().progress;
        let tasks = rt.metrics().num_alive_tasks();
        if p.finished && tasks == 1 {
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
    let p = until_finished(&rt, &m);
    assert_eq!((p.planned, p.done, p.failed), (2, 2, 0), "{p:?}");
    let ok = state.metrics.rollout_prewarm("m", "ok").get();
    assert_eq!(ok, 2, "replays counted: {ok}");
    assert_eq!(served.load(Ordering::SeqCst), 2, "replays sent");
}
