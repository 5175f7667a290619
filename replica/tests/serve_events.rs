#![allow(clippy::unwrap_used)]
//! KV event stream tests: a follower that joins at a random point (snapshot + deltas, or
//! a resume) ends up holding exactly the replica's cached block set; hashes follow the
//! shared contract; restarts and cache resets show up as new epochs.

mod serve_support;

use serde_json::{json, Value};
use serve_support::*;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;
use warmpath_core::rng::{Draw, SeedableRng, Xoshiro256StarStar};
use warmpath_core::{
    block_hashes, BlockHash, BlockSize, CacheSalt, CheckpointId, HashNamespace, KvEvent,
    KvStreamMessage, Observation, StreamCursor, TokenId,
};

/// A consumer of the event stream, as the gateway would be.
struct Follower {
    conn: Open,
    lines_seen: usize,
    cursor: StreamCursor,
    set: HashSet<BlockHash>,
    epochs: Vec<u64>,
    snapshots: usize,
}

impl Follower {
    async fn connect(addr: SocketAddr, query: &str) -> Self {
        let path = format!("/v1/kv/events{query}");
        let mut conn = open(addr, "GET", &path, &[], b"").await;
        assert!(conn.read_until("\r\n\r\n", Duration::from_secs(10)).await);
        Self {
            conn,
            lines_seen: 0,
            cursor: StreamCursor::new(),
            set: HashSet::new(),
            epochs: Vec::new(),
            snapshots: 0,
        }
    }

    fn apply_new_lines(&mut self) {
        let body = self.conn.body();
        let text = String::from_utf8_lossy(&body).into_owned();
        let complete: Vec<&str> = text
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .collect();
        for line in &complete[self.lines_seen..] {
            let msg: KvStreamMessage = serde_json::from_str(line.trim()).expect("valid message");
            match msg {
                KvStreamMessage::Snapshot { epoch, seq, hashes } => {
                    self.set = hashes.into_iter().collect();
                    self.cursor.reset_to(epoch, seq);
                    self.epochs.push(epoch.0);
                    self.snapshots += 1;
                }
                KvStreamMessage::Event(rec) => match self.cursor.observe(rec.epoch, rec.seq) {
                    Observation::Apply => apply(&mut self.set, &rec.event),
                    Observation::NewEpoch => {
                        assert_eq!(
                            rec.event,
                            KvEvent::Cleared,
                            "a new epoch starts with Cleared"
                        );
                        self.set.clear();
                        self.cursor.reset_to(rec.epoch, rec.seq);
                        self.epochs.push(rec.epoch.0);
                    }
                    other => panic!("unexpected {other:?} at {:?}", rec.seq),
                },
            }
        }
        self.lines_seen = complete.len();
    }

    /// Reads until the follower's position reaches `target`.
    async fn catch_up(&mut self, target: (u64, u64)) {
        for _ in 0..500 {
            self.apply_new_lines();
            if self.cursor.position().map(|(e, s)| (e.0, s.0)) == Some(target) {
                return;
            }
            let mut buf = [0u8; 8192];
            use tokio::io::AsyncReadExt;
            if let Ok(Ok(n)) =
                tokio::time::timeout(Duration::from_millis(50), self.conn.stream.read(&mut buf))
                    .await
            {
                self.conn.buf.extend_from_slice(&buf[..n]);
            }
        }
        panic!(
            "follower stuck at {:?}, target {target:?}",
            self.cursor.position()
        );
    }
}

fn apply(set: &mut HashSet<BlockHash>, ev: &KvEvent) {
    match ev {
        KvEvent::Stored { hashes, .. } => set.extend(hashes.iter().copied()),
        KvEvent::Removed { hashes, .. } => {
            for h in hashes {
                assert!(
                    set.remove(h),
                    "removed a block the follower never saw stored"
                );
            }
        }
        KvEvent::Cleared => set.clear(),
    }
}

/// The replica's current snapshot (a fresh reader's first line).
async fn snapshot(addr: SocketAddr) -> (u64, u64, HashSet<BlockHash>) {
    let mut f = Follower::connect(addr, "").await;
    for _ in 0..100 {
        f.apply_new_lines();
        if f.snapshots > 0 {
            let (e, s) = f.cursor.position().unwrap();
            return (e.0, s.0, f.set);
        }
        f.conn.read_until("\n", Duration::from_millis(100)).await;
    }
    panic!("no snapshot");
}

async fn completion(
    addr: SocketAddr,
    model: &str,
    prompt: &[u32],
    max_tokens: u32,
    salt: &str,
) -> Value {
    let body =
        json!({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0});
    let r = post_json_salted(addr, "/v1/completions", salt, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// The workload's deterministic draws: the workspace's seeded generator.
struct Workload(Xoshiro256StarStar);
impl Workload {
    fn new(seed: u64) -> Self {
        Self(Xoshiro256StarStar::seed_from_u64(seed))
    }
    fn next(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_from_any_point_hold_the_cached_block_set() {
    // 48 pages (4 KiB each, f16): the workload below needs evictions.
    let srv = server("dummy:tiny", |a| {
        a.kv_memory = replica::server::ByteSize(48 * 4096)
    })
    .await;
    let addr = srv.addr();
    let info = get(addr, "/v1/replica/info").await.json();
    let model = info["model"].as_str().unwrap().to_string();
    let checkpoint = CheckpointId::new(info["checkpoint"].as_str().unwrap());
    let mut early = Follower::connect(addr, "").await;
    let mut rng = Workload::new(7);
    let prefixes: Vec<Vec<u32>> = (0..3)
        .map(|p| (0..64).map(|i| 40 + ((i * 13 + p * 29) % 200)).collect())
        .collect();
    let mut mid_resume = None;
    let mut late = None;
    // Random points (seeded) at which a follower resumes and a new follower joins.
    let resume_round = 4 + rng.next(10);
    let late_round = 4 + rng.next(16);
    for round in 0..24 {
        let mut prompt = prefixes[rng.next(3) as usize].clone();
        let extra = 1 + rng.next(80) as usize;
        prompt.extend((0..extra).map(|_| 40 + rng.next(200) as u32));
        let salt = if rng.next(4) == 0 {
            "tenant-b"
        } else {
            "tenant-a"
        };
        completion(addr, &model, &prompt, 1 + rng.next(20) as u32, salt).await;
        if round == 3 {
            // Contract check: the gateway's hashes of the prompt are what the replica stores.
            let ns = HashNamespace::new(checkpoint.clone()).with_salt(Some(CacheSalt::new(salt)));
            let toks: Vec<TokenId> = prompt.iter().map(|&t| TokenId(t)).collect();
            let want = block_hashes(ns.root_seed(), &toks, BlockSize(16));
            let (_, _, snap) = snapshot(addr).await;
            assert!(
                want.iter().all(|h| snap.contains(h)),
                "prompt blocks of the last request are cached"
            );
        }
        if round == resume_round {
            mid_resume = Some(snapshot(addr).await);
        }
        if round == late_round {
            late = Some(Follower::connect(addr, "").await);
        }
    }
    // A follower that held the set at `resume_round` resumes from its position.
    let (e, s, held) = mid_resume.unwrap();
    let mut resumed = Follower::connect(addr, &format!("?epoch={e}&from_seq={s}")).await;
    resumed
        .cursor
        .reset_to(warmpath_core::Epoch(e), warmpath_core::SeqNo(s));
    resumed.set = held;
    let mut stale = Follower::connect(addr, &format!("?epoch={}&from_seq=3", e ^ 1)).await;

    let (epoch, seq, truth) = snapshot(addr).await;
    let load = get(addr, "/v1/replica/load").await.json();
    assert_eq!(load["running"], 0);
    assert_eq!(
        truth.len() as u64,
        load["kv_used_blocks"].as_u64().unwrap(),
        "idle: every used page is a cached block"
    );
    let m = get(addr, "/metrics").await.text();
    assert!(
        !m.contains("warmpath_replica_prompt_tokens_cached_total 0\n"),
        "the workload had hits"
    );
    let mut late = late.unwrap();
    for f in [&mut early, &mut late, &mut resumed, &mut stale] {
        f.catch_up((epoch, seq)).await;
        assert_eq!(f.set, truth);
    }
    assert_eq!(
        resumed.snapshots, 0,
        "a resume within the ring gets only deltas"
    );
    assert_eq!(stale.snapshots, 1, "a foreign epoch gets a snapshot");
    assert!(seq > 24, "evictions and stores happened: seq {seq}");

    // A cache reset (weight reload) is a Cleared under a new epoch, followed live.
    let r = send(addr, "POST", "/v1/replica/reset_prefix_cache", &[], b"").await;
    assert_eq!(r.status, 202);
    let mut new_pos = (epoch, seq);
    for _ in 0..100 {
        let (e2, s2, set) = snapshot(addr).await;
        if e2 != epoch {
            assert!(set.is_empty());
            new_pos = (e2, s2);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_ne!(new_pos.0, epoch, "reset starts a new epoch");
    early.catch_up(new_pos).await;
    assert!(early.set.is_empty());
    assert_eq!(early.epochs.last(), Some(&new_pos.0));
    drop((early, late, resumed, stale));
    srv.shutdown(Duration::from_secs(5)).await.unwrap();

    // A restart is a new epoch too.
    let srv2 = server("dummy:tiny", |_| {}).await;
    let (e3, s3, set3) = snapshot(srv2.addr()).await;
    assert_ne!(e3, new_pos.0);
    assert_ne!(e3, epoch);
    assert_eq!((s3, set3.len()), (0, 0));
    srv2.shutdown(Duration::from_secs(5)).await.unwrap();
}
