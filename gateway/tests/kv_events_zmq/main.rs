//! vLLM's KV event publisher on loopback against the gateway's subscriber: a PUB socket
//! sending `(topic, seq, payload)` and a ROUTER serving replays from a bounded buffer, as
//! `ZmqEventPublisher` does, fed the golden msgspec payloads
//! (`tests/fixtures/vllm_events`); the subscriber's messages go into a real prefix index.
//! The publisher is in [`engine`].

mod engine;
#[path = "../support/follower.rs"]
mod follower;

use engine::{FakeEngine, TOPIC};
use follower::{base, Follower as Gateway, R};
use gateway::ZmqEventsConfig;
use std::time::{Duration, Instant};
use warmpath_core::{block_hashes, BlockHash, BlockSize, CacheSalt, Epoch, RootSeed, TokenId};
const WAIT: Duration = Duration::from_secs(10);

fn fixture(variant: &str, name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/vllm_events/{variant}/{name}.hex",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("fixture");
    hex::decode(text.trim()).expect("hex fixture")
}

fn seed() -> RootSeed {
    base().root_seed()
}

/// The gateway's hashes of `tokens` (the pool's namespace, no salt).
fn hashes(tokens: std::ops::Range<u32>) -> Vec<BlockHash> {
    let t: Vec<TokenId> = tokens.map(TokenId).collect();
    block_hashes(seed(), &t, BlockSize(16))
}

/// The subscriber following `engine` (with its replay socket when `replay`).
fn follow(engine: &FakeEngine, replay: bool) -> Gateway {
    let cfg = ZmqEventsConfig {
        endpoint: engine.endpoint.clone(),
        replay_endpoint: replay.then(|| engine.replay_endpoint.clone()),
        topic: TOPIC.into(),
        poll_ms: 20,
        ..ZmqEventsConfig::default()
    };
    Gateway::start(cfg, WAIT)
}

impl Gateway {
    /// Publishes empty batches until `done` holds (the slow-joiner wait), then waits until
    /// the subscriber has applied every one sent.
    async fn pump(
        &mut self,
        engine: &mut FakeEngine,
        variant: &str,
        what: &str,
        done: impl Fn(&Self) -> bool,
    ) {
        let deadline = Instant::now() + WAIT;
        let mut last = 0;
        loop {
            self.drain();
            if done(self) {
                break;
            }
            assert!(Instant::now() < deadline, "timed out pumping for {what}");
            last = engine.publish(&fixture(variant, "empty")).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.wait_until("the pumped batches", |g| g.next_seq() > last)
            .await;
    }

    /// Waits until the subscriber receives batches.
    async fn join(&mut self, engine: &mut FakeEngine, variant: &str) {
        self.pump(engine, variant, "the first batch", |g| g.next_seq() > 0)
            .await;
    }

    /// Publishes `payload` and waits until the subscriber has applied it.
    async fn send(&mut self, engine: &mut FakeEngine, payload: &[u8]) {
        let seq = engine.publish(payload).await;
        self.wait_until("the batch", |g| g.next_seq() > seq).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_blocks_become_routable_and_removed_or_cleared_ones_do_not() {
    for variant in ["vllm_v2", "vllm_v3", "sglang"] {
        let mut engine = FakeEngine::start(100).await;
        let mut gw = follow(&engine, true);
        gw.join(&mut engine, variant).await;
        let a = hashes(1000..1064);
        let c = hashes(5000..5032);

        gw.send(&mut engine, &fixture(variant, "stored_a")).await;
        gw.send(&mut engine, &fixture(variant, "stored_b")).await;
        assert_eq!(gw.matched(&a), 4, "{variant}");
        assert_eq!(gw.index.precise_blocks(R), 4, "{variant}");
        // A tenant-salted namespace shares nothing with the engine's blocks.
        let salted = base().with_salt(Some(CacheSalt::new("t1"))).root_seed();
        let t: Vec<TokenId> = (1000..1064).map(TokenId).collect();
        assert_eq!(gw.matched(&block_hashes(salted, &t, BlockSize(16))), 0);

        gw.send(&mut engine, &fixture(variant, "removed_b4")).await;
        assert_eq!(gw.matched(&a), 3, "{variant}");

        let skipped_before = gw.counters.snapshot().skipped_total();
        gw.send(&mut engine, &fixture(variant, "skips")).await;
        assert!(gw.counters.snapshot().skipped_total() >= skipped_before + 3);
        // The newest vLLM names the adapter (`lora_name`) and sends the salt in
        // `extra_keys`: those two blocks are stored in their own namespaces; the rest skip.
        let v3 = variant.starts_with("vllm_v3");
        if v3 {
            let ns = base();
            let t: Vec<TokenId> = (1000..1016).map(TokenId).collect();
            let salted = ns.clone().with_salt(Some(CacheSalt::new("salt-x")));
            let lora = ns.with_adapter(Some("adapter-7".into()));
            for seed in [salted.root_seed(), lora.root_seed()] {
                assert_eq!(gw.matched(&block_hashes(seed, &t, BlockSize(16))), 1);
            }
        }
        assert_eq!(
            gw.index.precise_blocks(R),
            3 + if v3 { 2 } else { 0 },
            "skips stored nothing else ({variant})"
        );

        gw.send(&mut engine, &fixture(variant, "cleared")).await;
        assert_eq!(gw.index.precise_blocks(R), 0, "{variant}");
        assert_eq!(gw.matched(&a), 0, "{variant}");

        gw.send(&mut engine, &fixture(variant, "stored_c")).await;
        assert_eq!(gw.matched(&c), 2, "{variant}");
        let counts = gw.stop().await;
        assert_eq!((counts.drops, counts.gaps, counts.decode_errors), (0, 0, 0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequence_gap_is_filled_by_a_replay() {
    let mut engine = FakeEngine::start(100).await;
    let mut gw = follow(&engine, true);
    gw.join(&mut engine, "vllm_v2").await;
    let requests_before = engine.requests().len();

    let lost = engine.lose(&fixture("vllm_v2", "stored_a")).await;
    gw.send(&mut engine, &fixture("vllm_v2", "stored_b")).await;
    gw.wait_until("the replayed blocks", |g| {
        g.matched(&hashes(1000..1064)) == 4
    })
    .await;

    assert_eq!(&engine.requests()[requests_before..], &[lost]);
    assert_eq!(gw.snapshots, vec![Epoch(100)], "no drop");
    let counts = gw.stop().await;
    assert_eq!(counts.gaps, 1);
    assert_eq!((counts.drops, counts.replay_failures), (0, 0));
    assert!(counts.replayed_batches >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_the_replay_buffer_no_longer_covers_drops_the_replica() {
    let mut engine = FakeEngine::start(1).await;
    let mut gw = follow(&engine, true);
    gw.join(&mut engine, "vllm_v3").await;
    gw.send(&mut engine, &fixture("vllm_v3", "stored_a")).await;
    let a = hashes(1000..1064);
    assert_eq!(gw.matched(&a), 2);

    let lost = engine.lose(&fixture("vllm_v3", "removed_b4")).await;
    engine.lose(&fixture("vllm_v3", "empty")).await;
    gw.send(&mut engine, &fixture("vllm_v3", "stored_c")).await;
    gw.wait_until("the drop", |g| g.snapshots.len() == 2).await;

    assert!(engine.requests().contains(&lost), "replay was asked for");
    assert_eq!(gw.snapshots, vec![Epoch(100), Epoch(101)]);
    assert_eq!(gw.matched(&a), 0, "stale blocks dropped");
    assert_eq!(gw.matched(&hashes(5000..5032)), 2, "the live batch applies");
    let counts = gw.stop().await;
    assert_eq!(
        (counts.gaps, counts.drops, counts.replay_failures),
        (1, 1, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_replay_endpoint_a_gap_drops_the_replica() {
    let mut engine = FakeEngine::start(100).await;
    let mut gw = follow(&engine, false);
    gw.join(&mut engine, "vllm_v1").await;
    gw.send(&mut engine, &fixture("vllm_v1", "stored_a")).await;
    assert_eq!(gw.matched(&hashes(1000..1032)), 2);

    engine.lose(&fixture("vllm_v1", "empty")).await;
    gw.send(&mut engine, &fixture("vllm_v1", "stored_c")).await;
    gw.wait_until("the drop", |g| g.snapshots.len() == 2).await;
    assert_eq!(gw.matched(&hashes(1000..1032)), 0);
    assert_eq!(gw.matched(&hashes(5000..5032)), 2);
    assert!(engine.requests().is_empty());
    let counts = gw.stop().await;
    assert_eq!((counts.gaps, counts.drops, counts.replays), (1, 1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_restart_drops_the_replica() {
    let mut engine = FakeEngine::start(100).await;
    let (endpoint, replay_endpoint) = (engine.endpoint.clone(), engine.replay_endpoint.clone());
    let mut gw = follow(&engine, true);
    gw.join(&mut engine, "vllm_v2").await;
    gw.send(&mut engine, &fixture("vllm_v2", "stored_a")).await;
    assert_eq!(gw.matched(&hashes(1000..1032)), 2);

    // The engine dies and comes back on the same ports, numbering from 0 with an empty cache.
    engine.shutdown().await;
    let mut engine = FakeEngine::start_at(100, &endpoint, &replay_endpoint).await;
    gw.pump(&mut engine, "vllm_v2", "the restart", |g| {
        g.snapshots.len() == 2 && g.next_seq() > 0
    })
    .await;
    assert_eq!(gw.matched(&hashes(1000..1032)), 0, "the old cache is gone");
    gw.send(&mut engine, &fixture("vllm_v2", "stored_c")).await;
    assert_eq!(gw.matched(&hashes(5000..5032)), 2);
    let counts = gw.stop().await;
    assert_eq!(counts.drops, 1);
    assert!(counts.connects >= 1);
}
