#![allow(clippy::unwrap_used)]
//! Property test of the radix cache against a reference model: random requests insert,
//! match, lock, release and force evictions; pages in use are never evicted, no page is
//! owned twice, and the cached set (and the event stream replayed) matches the model.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::{HashMap, HashSet};
use warmpath_core::{
    block_hashes, BlockHash, BlockSize, CacheSalt, CheckpointId, HashNamespace, KvEvent, PageId,
    TokenId,
};
use warmpath_kv_cache::{Inserted, NodeId, RadixCache};

const BS: u32 = 2;
const PAGES: usize = 24;

#[derive(Clone, Debug)]
enum Op {
    /// A request with these tokens (tiny vocabulary so prefixes are shared) and salt.
    Request { tokens: Vec<u32>, salt: bool },
    /// Release the i-th held request (modulo the number held).
    Release(usize),
    /// Allocate and free `n` pages (forces evictions).
    Squeeze(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (proptest::collection::vec(0u32..2, 0..12), any::<bool>())
            .prop_map(|(tokens, salt)| Op::Request { tokens, salt }),
        3 => (0usize..8).prop_map(Op::Release),
        1 => (1usize..PAGES).prop_map(Op::Squeeze),
    ]
}

/// A request holding nodes (locked) and private pages, as a sequence would.
struct Held {
    nodes: Vec<NodeId>,
    node_pages: Vec<PageId>,
    hashes: Vec<BlockHash>,
    private: Vec<PageId>,
}

fn seed(salt: bool) -> warmpath_core::RootSeed {
    HashNamespace::new(CheckpointId::new("prop"))
        .with_salt(salt.then(|| CacheSalt::new("tenant")))
        .root_seed()
}

#[derive(Default)]
struct Model {
    /// Cached hashes and how many held requests lock each.
    locks: HashMap<BlockHash, usize>,
    /// Replay of the cache's events.
    replayed: HashSet<BlockHash>,
}

fn drain(cache: &mut RadixCache, model: &mut Model) -> Vec<BlockHash> {
    let mut removed = Vec::new();
    for ev in cache.take_events() {
        match ev {
            KvEvent::Stored { hashes, .. } => model.replayed.extend(hashes),
            KvEvent::Removed { hashes, .. } => {
                for h in hashes {
                    assert!(model.replayed.remove(&h), "removed a hash never stored");
                    removed.push(h);
                }
            }
            KvEvent::Cleared => model.replayed.clear(),
        }
    }
    removed
}

/// Drains the events after an allocation; every block it evicted must have been unlocked,
/// and the model forgets it.
fn forget_evicted(cache: &mut RadixCache, model: &mut Model) {
    for h in drain(cache, model) {
        assert_eq!(
            model.locks.get(&h).copied().unwrap_or(0),
            0,
            "evicted a locked block"
        );
        model.locks.remove(&h);
    }
}

fn check(cache: &RadixCache, held: &[Held], model: &Model) {
    // Every held node is still cached, on the same page, and its page is in use.
    let mut owned: HashSet<PageId> = HashSet::new();
    for h in held {
        for ((&n, &p), &hash) in h.nodes.iter().zip(&h.node_pages).zip(&h.hashes) {
            assert_eq!(cache.lookup(hash), Some(n), "a locked block was evicted");
            assert_eq!(cache.page(n), p, "a locked block changed page");
            assert!(cache.page_in_use(p));
        }
        for &p in &h.private {
            assert!(cache.page_in_use(p));
            assert!(owned.insert(p), "a private page is owned twice");
        }
    }
    // Cached pages are distinct and disjoint from private pages.
    let cached: HashSet<BlockHash> = cache.cached_hashes().into_iter().collect();
    for &hash in &cached {
        let p = cache.page(cache.lookup(hash).unwrap());
        assert!(owned.insert(p), "page {p:?} is used twice");
    }
    assert_eq!(
        owned.len(),
        cache.used_pages(),
        "leaked or double-counted pages"
    );
    // The cached set equals the replayed event stream, and contains every locked hash.
    assert_eq!(cached, model.replayed, "events disagree with the cache");
    for (h, &n) in &model.locks {
        if n > 0 {
            assert!(cached.contains(h));
        }
    }
    let locked = model.locks.values().filter(|&&n| n > 0).count();
    assert_eq!(cache.locked_blocks(), locked);
}

fn run_ops(ops: Vec<Op>) {
    let mut cache = RadixCache::new(PAGES);
    let mut held: Vec<Held> = Vec::new();
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Request { tokens, salt } => {
                let toks: Vec<TokenId> = tokens.iter().map(|&t| TokenId(t)).collect();
                let hashes = block_hashes(seed(salt), &toks, BlockSize(BS));
                let nodes = cache.match_prefix(&hashes);
                cache.lock(&nodes);
                let need = hashes.len() - nodes.len() + 1; // + a partial tail page
                let Some(pages) = cache.alloc(need) else {
                    cache.unlock(&nodes);
                    let removed = drain(&mut cache, &mut model);
                    assert!(removed.is_empty(), "a failed allocation must not evict");
                    continue;
                };
                forget_evicted(&mut cache, &mut model);
                let mut r = Held {
                    node_pages: nodes.iter().map(|&n| cache.page(n)).collect(),
                    nodes,
                    hashes: Vec::new(),
                    private: Vec::new(),
                };
                r.hashes = hashes[..r.nodes.len()].to_vec();
                let mut pages = pages.into_iter();
                for &h in &hashes[r.nodes.len()..] {
                    let page = pages.next().unwrap();
                    match cache.insert(r.nodes.last().copied(), h, page) {
                        Inserted::New(n) => {
                            r.nodes.push(n);
                            r.node_pages.push(page);
                        }
                        Inserted::Existing(n) => {
                            cache.free_pages(&[page]);
                            r.nodes.push(n);
                            r.node_pages.push(cache.page(n));
                        }
                    }
                    r.hashes.push(h);
                }
                r.private.extend(pages);
                for h in &r.hashes {
                    *model.locks.entry(*h).or_default() += 1;
                }
                drain(&mut cache, &mut model);
                held.push(r);
            }
            Op::Release(i) => {
                if held.is_empty() {
                    continue;
                }
                let r = held.remove(i % held.len());
                cache.unlock(&r.nodes);
                cache.free_pages(&r.private);
                for h in &r.hashes {
                    *model.locks.get_mut(h).unwrap() -= 1;
                }
            }
            Op::Squeeze(n) => {
                let before = cache.available_pages();
                match cache.alloc(n) {
                    Some(p) => {
                        cache.free_pages(&p);
                        forget_evicted(&mut cache, &mut model);
                    }
                    None => {
                        assert!(before < n);
                        assert!(drain(&mut cache, &mut model).is_empty());
                    }
                }
            }
        }
        check(&cache, &held, &model);
    }
    // Releasing everything leaves every cached block evictable.
    for r in held.drain(..) {
        cache.unlock(&r.nodes);
        cache.free_pages(&r.private);
    }
    assert_eq!(cache.locked_blocks(), 0);
    assert_eq!(cache.available_pages(), PAGES);
}

#[test]
fn radix_cache_matches_reference_model() {
    let config = Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[42; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    runner
        .run(&proptest::collection::vec(op(), 1..120), |ops| {
            run_ops(ops);
            Ok(())
        })
        .unwrap();
}
