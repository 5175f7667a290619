//! The gateway's KV event follower on streams produced by the engines' own publisher code:
//! vLLM's and SGLang's `ZmqEventPublisher`, `KVEventBatch` and event structs, taken from
//! their published wheels (three versions each, three wire schemas each: see
//! `docs/engines-kv-events.md`) and run with msgspec and pyzmq on loopback ports
//! ([`driver`]). The subscriber's messages go into a real prefix index, which must then hold
//! exactly the blocks the engine reported: stores (before and after the gateway joined),
//! removals, a clear, a lost batch filled by the engine's replay socket, and a restart of
//! the engine on the same ports.
//!
//! Needs python3 with msgspec, pyzmq and pydantic (`scripts/ci-deps.sh`) and, the first
//! time, network access to download the wheels; a missing piece fails the test, naming it.

mod driver;
#[path = "../support/follower.rs"]
mod follower;

use driver::Driver;
use follower::{base, Follower as Gateway, R};
use gateway::ZmqEventsConfig;
use std::time::{Duration, Instant};
use warmpath_core::{block_hashes, BlockHash, BlockSize, Epoch, TokenId};
/// Bound on every wait for the subscriber (a loaded 2-core CI machine runs six of these).
const WAIT: Duration = Duration::from_secs(30);

fn tokens(range: std::ops::Range<u32>) -> Vec<u32> {
    range.collect()
}

/// The gateway's hashes of `tokens` in the pool's namespace (no adapter, no salt).
fn hashes(tokens: &[u32]) -> Vec<BlockHash> {
    let t: Vec<TokenId> = tokens.iter().copied().map(TokenId).collect();
    block_hashes(base().root_seed(), &t, BlockSize(16))
}

/// The subscriber following `engine`.
fn follow(engine: &Driver) -> Gateway {
    let cfg = ZmqEventsConfig {
        endpoint: engine.endpoint.clone(),
        replay_endpoint: Some(engine.replay_endpoint.clone()),
        topic: "kv-events".into(),
        replay_timeout_ms: 10_000,
        poll_ms: 20,
        ..ZmqEventsConfig::default()
    };
    Gateway::start(cfg, WAIT)
}

impl Gateway {
    /// Waits until the subscriber has applied the engine's batch `seq`.
    async fn applied(&mut self, seq: u64) {
        self.wait_until(&format!("batch {seq}"), |g| g.next_seq() > seq)
            .await;
    }

    /// Has the engine publish empty batches until `done` holds (a SUB socket receives only
    /// what is sent after it joined), then waits until every one sent is applied.
    async fn pump(&mut self, engine: &mut Driver, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + WAIT;
        let last = loop {
            let last = engine.empty();
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.drain();
            if done(self) {
                break last;
            }
            assert!(
                Instant::now() < deadline,
                "timed out pumping for {what}; counters {:?}",
                self.counters.snapshot()
            );
        };
        self.applied(last).await;
    }
}

/// The whole scenario against one engine version's own publisher.
async fn follows(engine: &str, version: &str) {
    let label = format!("{engine} {version}");
    let mut eng = Driver::start(engine, version, None);

    // Cached before the gateway subscribed: learnt by the replay from 0 that the first live
    // batch triggers.
    let early = tokens(100..132);
    eng.store(&[], &early, false);
    let mut gw = follow(&eng);
    gw.pump(&mut eng, "the first live batch", |g| g.next_seq() > 0)
        .await;
    assert_eq!(
        gw.matched(&hashes(&early)),
        2,
        "{label}: stored before the join"
    );

    // A prefix stored in two steps, chained through the parent hash; then its last block
    // removed.
    let a = tokens(1000..1064);
    let seq = eng.store(&[], &a[..32], false);
    gw.applied(seq).await;
    assert_eq!(gw.matched(&hashes(&a)), 2, "{label}");
    let seq = eng.store(&a[..32], &a[32..], false);
    gw.applied(seq).await;
    assert_eq!(gw.matched(&hashes(&a)), 4, "{label}: the continuation");
    let seq = eng.remove(&a[..48], &a[48..]);
    gw.applied(seq).await;
    assert_eq!(gw.matched(&hashes(&a)), 3, "{label}: the removed block");

    // A batch lost on the way: the next live one shows the gap, the engine's replay socket
    // fills it, and nothing is dropped.
    let (c, d) = (tokens(5000..5032), tokens(7000..7016));
    eng.store(&[], &c, true);
    let seq = eng.store(&[], &d, false);
    gw.applied(seq).await;
    assert_eq!(
        gw.matched(&hashes(&c)),
        2,
        "{label}: the lost batch, replayed"
    );
    assert_eq!(gw.matched(&hashes(&d)), 1, "{label}");
    assert_eq!(gw.matched(&hashes(&a)), 3, "{label}: nothing dropped");
    assert_eq!(gw.snapshots, vec![Epoch(100)], "{label}: no drop");
    let counts = gw.counters.snapshot();
    assert_eq!((counts.gaps, counts.replay_failures), (1, 0), "{label}");

    // Everything cleared.
    let seq = eng.clear();
    gw.applied(seq).await;
    assert_eq!(gw.index.precise_blocks(R), 0, "{label}: cleared");

    // The engine restarts on the same ports with an empty cache, numbering from 0, and
    // caches `f` before the gateway has reconnected.
    let e = tokens(9000..9032);
    let seq = eng.store(&[], &e, false);
    gw.applied(seq).await;
    assert_eq!(gw.matched(&hashes(&e)), 2, "{label}");
    let ports = eng.ports();
    eng.quit();
    let mut eng = Driver::start(engine, version, Some(ports));
    let f = tokens(11000..11048);
    eng.store(&[], &f, false);
    gw.pump(&mut eng, "the restart", |g| {
        g.snapshots.len() == 2 && g.next_seq() > 0
    })
    .await;
    assert_eq!(gw.matched(&hashes(&e)), 0, "{label}: the old cache is gone");
    assert_eq!(
        gw.matched(&hashes(&f)),
        3,
        "{label}: the new engine's blocks"
    );

    let counts = gw.stop().await;
    assert_eq!(counts.drops, 1, "{label}: the restart");
    assert_eq!(
        (
            counts.decode_errors,
            counts.bad_frames,
            counts.skipped_total()
        ),
        (0, 0, 0),
        "{label}"
    );
    assert!(counts.replayed_batches >= 2, "{label}: {counts:?}");
    eng.quit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_0_9_2() {
    follows("vllm", "0.9.2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_0_11_0() {
    follows("vllm", "0.11.0").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_0_34_0() {
    follows("vllm", "0.34.0").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_0_4_9() {
    follows("sglang", "0.4.9").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_0_5_9() {
    follows("sglang", "0.5.9").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_0_5_23() {
    follows("sglang", "0.5.23").await;
}
