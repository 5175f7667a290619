//! The loader against an engine loop stand-in (a thread answering the loop's messages with
//! a pool of a given size) and a source that serves every block.

use super::*;
use crate::server::kv::block::ExportedBlock;
use crate::server::kv::budget::LoadBudget;
use crate::server::kv::record::encode;
use crate::server::kv::source::SourceMetrics;
use crate::server::metrics::Metrics;
use crate::server::worker::WorkerMsg;
use half::f16;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use warmpath_core::{BlockSize, CheckpointId};
use warmpath_engine::{KvDtype, KvLayout};

const LAYOUT: KvLayout = KvLayout {
    block_size: BlockSize(4),
    n_layers: 1,
    kv_dim: 2,
    dtype: KvDtype::F16,
};

/// The loop stand-in: holds nothing, takes at most `room` blocks in all, and records the
/// size of every batch it is given.
fn engine_loop(room: usize) -> (std::sync::mpsc::Sender<WorkerMsg>, Arc<Mutex<Vec<usize>>>) {
    let (tx, rx) = std::sync::mpsc::channel::<WorkerMsg>();
    let batches = Arc::new(Mutex::new(Vec::new()));
    let seen = batches.clone();
    std::thread::spawn(move || {
        let mut left = room;
        for msg in rx {
            match msg {
                WorkerMsg::CachedPrefix { reply, .. } => {
                    let _ = reply.send(0);
                }
                WorkerMsg::Import { blocks, reply } => {
                    seen.lock().unwrap().push(blocks.len());
                    let took = blocks.len().min(left);
                    left -= took;
                    let _ = reply.send(took);
                }
                _ => {}
            }
        }
    });
    (tx, batches)
}

fn linked(room: usize, budget: u64) -> (KvLink, Arc<Mutex<Vec<usize>>>) {
    let (tx, batches) = engine_loop(room);
    let link = KvLink::new(
        tx,
        CheckpointId::new("m@1"),
        4,
        LAYOUT,
        Metrics::new(),
        Arc::new(LoadBudget::new(budget)),
    );
    (link, batches)
}

/// Serves every block of the prompt, in order.
struct Everything;

impl KvSource for Everything {
    fn name(&self) -> &'static str {
        "test"
    }
    fn label(&self, outcome: LoadOutcome) -> &'static str {
        match outcome {
            LoadOutcome::Full => "full",
            LoadOutcome::Partial => "partial",
            LoadOutcome::None => "none",
            LoadOutcome::Skipped => "skipped",
        }
    }
    fn metrics<'m>(&self, m: &'m Metrics) -> SourceMetrics<'m> {
        SourceMetrics {
            loads: &m.kv_tier_lookups,
            tokens: &m.kv_tier_hit_tokens,
            seconds: &m.kv_tier_lookup_seconds,
        }
    }
    fn strict_end(&self) -> bool {
        false
    }
    fn read_ahead_blocks(&self) -> usize {
        0
    }
    fn patience(&self) -> Duration {
        Duration::from_millis(50)
    }
    async fn fetch(
        &self,
        want: &Expected<'_>,
        _salt: Option<&CacheSalt>,
        skip: usize,
        sink: &mut Sink<'_>,
    ) -> &'static str {
        let bs = want.layout.block_size as usize;
        for i in skip..want.hashes.len() {
            let block = ExportedBlock {
                index: i,
                hash: want.hashes[i],
                parent: i.checked_sub(1).map(|p| want.hashes[p]),
                tokens: want.prompt[i * bs..(i + 1) * bs].to_vec(),
                values: vec![f16::from_f32(0.25); LAYOUT.values_per_page()],
            };
            let checked = want
                .check(skip + sink.taken(), &encode(want.layout, block))
                .expect("own record");
            if sink.push(checked).await.is_err() {
                return KV_TRANSFER_REASON_IMPORT;
            }
        }
        "complete"
    }
}

fn prompt(blocks: u32) -> Vec<TokenId> {
    (0..blocks * 4).map(TokenId).collect()
}

#[tokio::test]
async fn a_long_prompt_is_cached_in_batches_not_held_whole() {
    let (link, batches) = linked(usize::MAX, 64 << 20);
    let got = load(&link, &Everything, &prompt(100), None).await;
    assert_eq!(got.outcome, LoadOutcome::Full);
    assert_eq!(got.reason, "complete");
    assert_eq!(got.tokens, 400);
    let batches = batches.lock().unwrap().clone();
    assert_eq!(batches.iter().sum::<usize>(), 100);
    assert!(
        batches.iter().all(|&n| n <= BATCH_BLOCKS),
        "the loader held more than a batch: {batches:?}"
    );
}

#[tokio::test]
async fn a_full_pool_stops_the_fetch_at_once() {
    let (link, batches) = linked(20, 64 << 20);
    let got = load(&link, &Everything, &prompt(100), None).await;
    assert_eq!(got.outcome, LoadOutcome::Partial);
    assert_eq!(got.reason, "import");
    assert_eq!(got.tokens, 20 * 4);
    // The second batch found the pool full: nothing more was fetched or offered.
    assert_eq!(*batches.lock().unwrap(), vec![16, 16]);
}

#[tokio::test]
async fn loads_share_the_budget_and_one_without_room_computes_instead() {
    let (link, _) = linked(usize::MAX, 0);
    let need = footprint(&link, 0);
    assert_eq!(check_budget(&link, 0), Err(need));
    // Room for exactly one load.
    let (link, _) = linked(usize::MAX, need);
    assert_eq!(check_budget(&link, 0), Ok(()));
    let held = link.budget().reserve(need, Duration::ZERO).await;
    assert!(held.is_some());
    let got = load(&link, &Everything, &prompt(8), None).await;
    assert_eq!((got.outcome, got.reason), (LoadOutcome::None, BUSY));
    drop(held);
    let got = load(&link, &Everything, &prompt(8), None).await;
    assert_eq!((got.outcome, got.reason), (LoadOutcome::Full, "complete"));
    assert_eq!(link.budget().available_bytes(), link.budget().total_bytes());
}
