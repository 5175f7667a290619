use super::*;

fn h(x: u64) -> BlockHash {
    BlockHash(x)
}

/// Caches the chain `hashes` as one sequence would: alloc, insert, keep locked.
fn cache_chain(c: &mut RadixCache, hashes: &[u64]) -> Vec<NodeId> {
    let pages = c.alloc(hashes.len()).unwrap();
    let mut nodes: Vec<NodeId> = Vec::new();
    for (&x, page) in hashes.iter().zip(pages) {
        match c.insert(nodes.last().copied(), h(x), page) {
            Inserted::New(n) => nodes.push(n),
            Inserted::Existing(n) => {
                c.free_pages(&[page]);
                nodes.push(n);
            }
        }
    }
    nodes
}

#[test]
fn matches_longest_cached_prefix_and_stops_at_first_miss() {
    let mut c = RadixCache::new(8);
    let nodes = cache_chain(&mut c, &[1, 2, 3]);
    c.unlock(&nodes);
    assert_eq!(c.match_prefix(&[h(1), h(2), h(9), h(3)]).len(), 2);
    assert_eq!(c.peek_prefix_len(&[h(1), h(2), h(3), h(4)]), 3);
    assert_eq!(c.peek_prefix_len(&[h(2)]), 0);
    assert_eq!(c.page(nodes[1]), c.page(c.lookup(h(2)).unwrap()));
}

#[test]
fn locked_blocks_are_never_evicted() {
    let mut c = RadixCache::new(4);
    let held = cache_chain(&mut c, &[1, 2]);
    let other = cache_chain(&mut c, &[7, 8]);
    c.unlock(&other);
    assert_eq!(c.available_pages(), 2);
    assert!(c.alloc(3).is_none(), "only two pages can be had");
    assert_eq!(c.cached_blocks(), 4, "a failed alloc evicts nothing");
    let pages = c.alloc(2).unwrap();
    assert_eq!(c.cached_blocks(), 2);
    assert!(c.lookup(h(1)).is_some() && c.lookup(h(2)).is_some());
    assert!(!pages.contains(&c.page(held[0])) && !pages.contains(&c.page(held[1])));
}

#[test]
fn evicts_least_recently_used_leaves_first_and_cascades() {
    let mut c = RadixCache::new(6);
    let a = cache_chain(&mut c, &[1, 2]);
    c.unlock(&a);
    let b = cache_chain(&mut c, &[5, 6]);
    c.unlock(&b);
    c.match_prefix(&[h(1), h(2)]); // touch chain a: chain b is now older
    assert_eq!(c.evict(1), 1);
    assert!(
        c.lookup(h(6)).is_none(),
        "the leaf of the older chain goes first"
    );
    assert_eq!(c.evict(1), 1);
    assert!(c.lookup(h(5)).is_none(), "its parent became a leaf");
    assert!(c.lookup(h(1)).is_some() && c.lookup(h(2)).is_some());
}

#[test]
fn shared_prefixes_are_evicted_after_single_use_blocks() {
    let mut c = RadixCache::new(6);
    let shared = cache_chain(&mut c, &[1]);
    c.unlock(&shared);
    let again = c.match_prefix(&[h(1)]);
    c.lock(&again); // a second sequence uses block 1
    c.unlock(&again);
    let single = cache_chain(&mut c, &[9]);
    c.unlock(&single);
    c.match_prefix(&[h(9)]); // the single-use block is the more recent one
    assert_eq!(c.evict(1), 1);
    assert!(
        c.lookup(h(9)).is_none(),
        "single-use goes before the shared prefix"
    );
    assert!(c.lookup(h(1)).is_some());
}

#[test]
fn duplicate_insert_returns_existing_locked_node() {
    let mut c = RadixCache::new(4);
    let first = cache_chain(&mut c, &[1]);
    let page = c.alloc(1).unwrap()[0];
    let ins = c.insert(None, h(1), page);
    assert_eq!(ins, Inserted::Existing(first[0]));
    assert_eq!(c.refs(first[0]), 2);
    c.free_pages(&[page]);
    assert_eq!(c.used_pages(), 1);
}

#[test]
fn events_record_chains_evictions_and_clear() {
    let mut c = RadixCache::new(3);
    let a = cache_chain(&mut c, &[1, 2, 3]);
    assert_eq!(
        c.take_events(),
        vec![KvEvent::Stored {
            parent: None,
            hashes: vec![h(1), h(2), h(3)],
            tier: KvTier::Device,
        }]
    );
    c.unlock(&a);
    c.alloc(2).unwrap();
    assert_eq!(
        c.take_events(),
        vec![KvEvent::Removed {
            hashes: vec![h(3), h(2)],
            tier: KvTier::Device,
        }]
    );
    assert!(c.take_events().is_empty());
    assert!(c.clear());
    assert_eq!(c.take_events(), vec![KvEvent::Cleared]);
    assert_eq!(c.cached_blocks(), 0);
    assert_eq!(c.used_pages(), 2, "pages private to sequences stay theirs");
}

#[test]
fn clear_refuses_while_blocks_are_locked() {
    let mut c = RadixCache::new(2);
    let a = cache_chain(&mut c, &[1]);
    assert!(!c.clear());
    c.unlock(&a);
    assert!(c.clear());
}
