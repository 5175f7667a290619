//! Routing-decision latency and prefix-index memory (issue: router-policy benchmarks).
//!
//! - `decide/{8,64,512}`: one `warm` decision for an 8,192-token prompt (512 blocks at B=16)
//!   against an index holding 1M (block, replica) entries; the prompt shares its first 256
//!   blocks with a cached chain. Hashes are precomputed (the gateway hashes while it
//!   tokenizes); `hash_8k` times hashing alone.
//! - `decide_spill/{8,64}`: the same decision with half the replicas in a second region
//!   70 ms away and `regions.mode: spill` (`warm` evaluates twice: all regions, then home).
//! - `rollout/conversation_key`: a chat's rollout key (1 KB system prompt and a question);
//!   `rollout/hot_record`: one request of 2,048 tokens counted in a 1,024-key hot-prefix
//!   table (the per-request cost the gateway pays for pre-warm history).
//! - After criterion, a fixed-count loop prints p50/p99 per replica count, and a counting
//!   allocator measures index heap bytes per (block, replica) entry.
//!
//! Run: `cargo bench -p router-policy --bench routing`.

use criterion::{criterion_group, BenchmarkId, Criterion};
use router_policy::{
    ClusterView, IndexConfig, PolicyConfig, PrefixIndex, ReplicaSnapshot, RouteRequest,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use warmpath_core::{
    block_hashes, BlockHash, BlockSize, CheckpointId, Epoch, HashNamespace, KvStreamMessage,
    Millis, ReplicaId, SeqNo, TokenId,
};

/// Counts live heap bytes so the index's footprint is measured, not estimated.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only adds byte counting.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const BLOCK: BlockSize = BlockSize(16);
const PROMPT_TOKENS: usize = 8192;
const INDEX_ENTRIES: usize = 1 << 20;
const CHAIN_BLOCKS: usize = 512;

fn checkpoint() -> CheckpointId {
    CheckpointId::new("bench@1")
}

/// A deterministic chain of `CHAIN_BLOCKS` hashes; chains share nothing unless asked.
fn chain(id: u32) -> Vec<BlockHash> {
    let tokens: Vec<TokenId> = (0..CHAIN_BLOCKS * 16)
        .map(|i| TokenId(id.wrapping_mul(2_654_435_761) ^ i as u32))
        .collect();
    block_hashes(HashNamespace::new(checkpoint()).root_seed(), &tokens, BLOCK)
}

/// An index with `INDEX_ENTRIES` (block, replica) entries spread over `replicas` replicas.
fn build_index(replicas: u32) -> PrefixIndex {
    let mut index = PrefixIndex::new(IndexConfig {
        max_precise_entries: INDEX_ENTRIES,
        ..IndexConfig::default()
    });
    let chains = INDEX_ENTRIES / CHAIN_BLOCKS;
    let mut per_replica: Vec<Vec<BlockHash>> = vec![Vec::new(); replicas as usize];
    for c in 0..chains as u32 {
        per_replica[(c % replicas) as usize].extend(chain(c));
    }
    for (r, hashes) in per_replica.into_iter().enumerate() {
        let msg = KvStreamMessage::Snapshot {
            epoch: Epoch(1),
            seq: SeqNo(0),
            hashes,
        };
        index.apply_message(ReplicaId(r as u32), &msg);
    }
    index
}

fn view(replicas: u32) -> ClusterView {
    ClusterView::new(
        (0..replicas)
            .map(|i| {
                let mut s = ReplicaSnapshot::idle(ReplicaId(i), checkpoint());
                s.running = i % 7;
                s.waiting = i % 3;
                s.queued_prefill_tokens = u64::from(i % 5) * 512;
                s.kv_capacity_blocks = 65_536;
                s.kv_used_blocks = u64::from(i % 11) * 4096;
                s
            })
            .collect(),
    )
}

/// The request: first 256 blocks of chain 5, then 256 new blocks.
fn prompt_hashes() -> Vec<BlockHash> {
    let tokens: Vec<TokenId> = (0..PROMPT_TOKENS)
        .map(|i| {
            if i < PROMPT_TOKENS / 2 {
                TokenId(5u32.wrapping_mul(2_654_435_761) ^ i as u32)
            } else {
                TokenId(0xdead_0000 ^ i as u32)
            }
        })
        .collect();
    block_hashes(HashNamespace::new(checkpoint()).root_seed(), &tokens, BLOCK)
}

/// Index, cluster view and a fresh `warm` policy for `replicas` replicas.
fn setup(replicas: u32) -> (PrefixIndex, ClusterView, Box<dyn router_policy::Policy>) {
    (
        build_index(replicas),
        view(replicas),
        PolicyConfig::default().build(),
    )
}

/// The routing request for the benchmark prompt.
fn request<'a>(ck: &'a CheckpointId, hashes: &'a [BlockHash]) -> RouteRequest<'a> {
    RouteRequest {
        checkpoint: ck,
        hashes,
        prompt_tokens: PROMPT_TOKENS as u32,
        block_size: BLOCK,
        now: Millis(1),
        regions: None,
        residency: &[],
    }
}

fn bench_decide(c: &mut Criterion) {
    let ck = checkpoint();
    let hashes = prompt_hashes();
    let mut group = c.benchmark_group("decide");
    for replicas in [8u32, 64, 512] {
        let (index, view, mut policy) = setup(replicas);
        let req = request(&ck, &hashes);
        group.bench_with_input(BenchmarkId::from_parameter(replicas), &replicas, |b, _| {
            b.iter(|| black_box(policy.select(&req, &view, &index).expect("routable")))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("decide_spill");
    let regions = router_policy::Regions::new(
        warmpath_core::RegionId::new("eu"),
        router_policy::RegionMode::Spill,
    )
    .with_rtt("eu", "us", 70.0);
    for replicas in [8u32, 64] {
        let (index, mut view, mut policy) = setup(replicas);
        for r in &mut view.replicas {
            let region = if r.id.0 % 2 == 0 { "eu" } else { "us" };
            r.region = Some(warmpath_core::RegionId::new(region));
        }
        let req = RouteRequest {
            regions: Some(&regions),
            ..request(&ck, &hashes)
        };
        group.bench_with_input(BenchmarkId::from_parameter(replicas), &replicas, |b, _| {
            b.iter(|| black_box(policy.select(&req, &view, &index).expect("routable")))
        });
    }
    group.finish();
    bench_rollout(c);
    let tokens: Vec<TokenId> = (0..PROMPT_TOKENS as u32).map(TokenId).collect();
    let seed = HashNamespace::new(ck).root_seed();
    c.bench_function("hash_8k", |b| {
        b.iter(|| black_box(block_hashes(seed, black_box(&tokens), BLOCK)))
    });
}

/// The per-request costs of rollout stickiness and pre-warm history.
fn bench_rollout(c: &mut Criterion) {
    let system = "You are a careful assistant who answers briefly. ".repeat(20);
    let salt = warmpath_core::CacheSalt::new("tenant");
    c.bench_function("rollout/conversation_key", |b| {
        b.iter(|| {
            black_box(router_policy::conversation_key(
                [
                    ("system", system.as_str()),
                    ("user", "What is the weather like?"),
                ],
                Some(&salt),
            ))
        })
    });
    // A steady table: 1,024 conversations of 2,048 tokens each, then repeat turns of one.
    let mut hot: router_policy::HotPrefixes<()> = router_policy::HotPrefixes::new(1024, 4096);
    let prompt = |k: u32| -> Vec<TokenId> { (0..2048).map(|i| TokenId(i ^ k)).collect() };
    for k in 0..1024u32 {
        hot.record(u64::from(k), &prompt(k), &());
    }
    let turn = prompt(7);
    c.bench_function("rollout/hot_record", |b| {
        b.iter(|| hot.record(7, black_box(&turn), &()))
    });
}

/// p50/p99 over a fixed number of decisions (criterion reports means and medians of
/// batches; the target is stated per decision).
fn percentiles() {
    let ck = checkpoint();
    let hashes = prompt_hashes();
    println!("\nper-decision latency (warm, 8,192-token prompt, 1M-entry index)");
    println!("{:>9} {:>10} {:>10}", "replicas", "p50 (us)", "p99 (us)");
    for replicas in [8u32, 64, 512] {
        let (index, view, mut policy) = setup(replicas);
        let req = request(&ck, &hashes);
        let mut samples: Vec<f64> = (0..5_000)
            .map(|_| {
                let t = Instant::now();
                black_box(policy.select(&req, &view, &index).expect("routable"));
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
        println!("{replicas:>9} {:>10.2} {:>10.2}", at(0.5), at(0.99));
    }
}

/// Heap bytes per (block, replica) entry, at one and at three holders per block.
fn memory() {
    println!("\nprefix index memory (counting allocator)");
    for holders in [1u32, 3] {
        let before = LIVE.load(Ordering::Relaxed);
        let mut index = PrefixIndex::new(IndexConfig {
            max_precise_entries: INDEX_ENTRIES,
            ..IndexConfig::default()
        });
        let chains = INDEX_ENTRIES / CHAIN_BLOCKS / holders as usize;
        for c in 0..chains as u32 {
            let hashes = chain(c);
            for h in 0..holders {
                let msg = KvStreamMessage::Snapshot {
                    epoch: Epoch(1),
                    seq: SeqNo(0),
                    hashes: Vec::new(),
                };
                if c == 0 {
                    index.apply_message(ReplicaId(h), &msg);
                }
                let ev = KvStreamMessage::Event(warmpath_core::KvEventRecord {
                    epoch: Epoch(1),
                    seq: SeqNo(u64::from(c) + 1),
                    event: warmpath_core::KvEvent::Stored {
                        parent: None,
                        hashes: hashes.clone(),
                        tier: warmpath_core::KvTier::Device,
                    },
                });
                index.apply_message(ReplicaId(h), &ev);
            }
        }
        let entries = index.stats().precise_entries;
        let used = LIVE.load(Ordering::Relaxed) - before;
        println!(
            "  {holders} holder(s)/block: {entries} entries, {} bytes live, {:.1} bytes/entry (index reports {:.1})",
            used,
            used as f64 / entries as f64,
            index.allocated_bytes() as f64 / entries as f64
        );
        drop(index);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = bench_decide
}

fn main() {
    benches();
    percentiles();
    memory();
    Criterion::default().configure_from_args().final_summary();
}
