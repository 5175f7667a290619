use super::*;
use warmpath_core::{CacheSalt, CheckpointId, HashNamespace, RootSeed, TokenId};

const BS: u32 = 4;

pub(super) fn cfg(budget: usize, max_running: usize) -> SchedConfig {
    SchedConfig {
        block_size: BlockSize(BS),
        token_budget: budget,
        max_running,
        fairness_steps: 4,
        order: PrefillOrder::Fcfs,
    }
}

fn seed(salt: Option<&str>) -> RootSeed {
    HashNamespace::new(CheckpointId::new("test"))
        .with_salt(salt.map(CacheSalt::new))
        .root_seed()
}

pub(super) fn seq(id: u64, prompt: &[u32], salt: Option<&str>) -> Sequence<usize> {
    let toks = prompt.iter().map(|&t| TokenId(t)).collect();
    Sequence::new(SeqId(id), toks, seed(salt), BlockSize(BS), 0)
}

/// Runs steps until idle; every sequence generates `gen` tokens (token = position).
/// Returns (id, cached_tokens, generated) in finishing order.
pub(super) fn run(s: &mut Scheduler<usize>, gen: usize) -> Vec<(u64, usize, Vec<u32>)> {
    let mut done = Vec::new();
    for _ in 0..10_000 {
        if s.is_idle() {
            return done;
        }
        let plan = s.schedule();
        assert!(plan.failed.is_empty(), "nothing should be unschedulable");
        // Every planned sequence holds pages for its whole computed range.
        for it in &plan.items {
            let q = s.get(it.id).unwrap();
            assert!(q.pages().len() * BS as usize >= it.start + it.len);
        }
        s.complete(&plan.items);
        for it in plan.items.iter().filter(|it| it.sample) {
            let pos = s.get(it.id).unwrap().tokens().len() as u32;
            s.push_token(it.id, TokenId(1000 + pos));
            let q = s.get_mut(it.id).unwrap();
            q.extra += 1;
            if q.generated().len() >= gen {
                let q = s.finish(it.id).unwrap();
                done.push((
                    q.id().0,
                    q.cached_tokens(),
                    q.generated().iter().map(|t| t.0).collect(),
                ));
            }
        }
    }
    panic!("scheduler did not drain");
}

#[test]
fn second_identical_prompt_hits_all_full_blocks_but_the_last_token() {
    let mut s = Scheduler::new(cfg(64, 4), RadixCache::new(64));
    let prompt: Vec<u32> = (0..12).collect(); // 3 full blocks
    s.add(seq(1, &prompt, None));
    let first = run(&mut s, 3);
    s.add(seq(2, &prompt, None));
    let second = run(&mut s, 3);
    assert_eq!(first[0].1, 0);
    // 12 tokens: the last must be recomputed, so only 2 of 3 blocks count.
    assert_eq!(second[0].1, 8);
    assert_eq!(first[0].2, second[0].2);
    s.add(seq(3, &prompt, Some("tenant-b")));
    assert_eq!(run(&mut s, 1)[0].1, 0, "another salt never hits");
}

#[test]
fn chunked_prefill_respects_the_token_budget_and_decodes_first() {
    let mut s = Scheduler::new(cfg(8, 4), RadixCache::new(64));
    s.add(seq(1, &[1, 2, 3], None));
    let p = s.schedule();
    s.complete(&p.items);
    s.push_token(SeqId(1), TokenId(9));
    s.add(seq(2, &(0..20).collect::<Vec<_>>(), None));
    let p = s.schedule();
    assert_eq!(
        p.items[0],
        PlanItem {
            id: SeqId(1),
            start: 3,
            len: 1,
            sample: true
        }
    );
    assert_eq!(
        p.items[1],
        PlanItem {
            id: SeqId(2),
            start: 0,
            len: 7,
            sample: false
        }
    );
    assert_eq!(p.items.iter().map(|i| i.len).sum::<usize>(), 8);
}

#[test]
fn caps_running_sequences() {
    let mut s = Scheduler::new(cfg(100, 2), RadixCache::new(64));
    for i in 0..5 {
        s.add(seq(i, &[i as u32 + 1, 7, 7], None));
    }
    let p = s.schedule();
    assert_eq!(p.items.len(), 2);
    assert_eq!(s.running().len(), 2);
    assert_eq!(s.waiting().count(), 3);
}

#[test]
fn small_pool_preempts_and_everything_still_completes() {
    // 8 sequences x (8 prompt + 8 generated) tokens = 4 pages each, but only 10 pages.
    let mut s = Scheduler::new(cfg(32, 8), RadixCache::new(10));
    for i in 0..8u64 {
        let prompt: Vec<u32> = (0..8).map(|t| t + 100 * i as u32).collect();
        s.add(seq(i, &prompt, None));
    }
    let done = run(&mut s, 8);
    assert_eq!(done.len(), 8);
    assert!(
        s.stats().preemptions > 0,
        "the pool is too small to run all at once"
    );
    for (id, _, gen) in &done {
        // Token = position: recomputation must not change what was generated.
        let want: Vec<u32> = (8..16).map(|p| 1000 + p).collect();
        assert_eq!(gen, &want, "sequence {id}");
    }
    assert_eq!(s.cache().locked_blocks(), 0);
}

#[test]
fn waiting_order_prefers_cached_prefixes_within_the_fairness_bound() {
    let mut s = Scheduler::new(cfg(64, 1), RadixCache::new(64));
    let warm: Vec<u32> = (0..9).collect();
    s.add(seq(1, &warm, None));
    run(&mut s, 1);
    s.add(seq(2, &[50, 51, 52, 53, 54], None)); // cold, arrives first
    s.add(seq(3, &warm, None)); // warm
    s.schedule();
    assert_eq!(
        s.running()[0].id(),
        SeqId(3),
        "the cached prefix goes first"
    );
}

#[test]
fn starved_request_is_not_overtaken_forever() {
    let mut s = Scheduler::new(cfg(64, 1), RadixCache::new(64));
    let warm: Vec<u32> = (0..9).collect();
    s.add(seq(100, &warm, None));
    run(&mut s, 1);
    s.add(seq(1, &[50, 51, 52, 53, 54], None)); // cold
    let mut next = 2;
    let mut admitted_cold_at = None;
    for step in 0..40 {
        // Keep a warm request always waiting.
        if s.waiting().count() < 2 {
            s.add(seq(next, &warm, None));
            next += 1;
        }
        let plan = s.schedule();
        s.complete(&plan.items);
        for it in plan.items.iter().filter(|it| it.sample) {
            s.push_token(it.id, TokenId(1));
            if it.id == SeqId(1) && admitted_cold_at.is_none() {
                admitted_cold_at = Some(step);
            }
            s.finish(it.id);
        }
    }
    let at = admitted_cold_at.expect("the cold request must run");
    assert!(at <= 6, "admitted at step {at}, fairness bound is 4 steps");
}

#[test]
fn cancelled_sequences_release_pages_immediately() {
    let mut s = Scheduler::new(cfg(64, 4), RadixCache::new(16));
    s.add(seq(1, &(0..10).collect::<Vec<_>>(), None));
    let p = s.schedule();
    s.complete(&p.items);
    assert!(s.cache().used_pages() >= 3);
    assert_eq!(s.cache().locked_blocks(), 2);
    let gone = s.remove_where(|q| q.id() == SeqId(1));
    assert_eq!(gone.len(), 1);
    assert_eq!(s.cache().locked_blocks(), 0);
    assert_eq!(
        s.cache().used_pages(),
        2,
        "only the two cached full blocks remain"
    );
    assert!(s.is_idle());
}

#[test]
fn a_sequence_larger_than_the_pool_fails_instead_of_looping() {
    let mut s = Scheduler::new(cfg(64, 4), RadixCache::new(2));
    s.add(seq(1, &(0..20).collect::<Vec<_>>(), None));
    let p = s.schedule();
    assert_eq!(p.failed.len(), 1);
    assert!(s.is_idle());
}

#[test]
fn queued_prefill_counts_only_what_the_cache_will_not_cover() {
    let mut s = Scheduler::new(cfg(64, 4), RadixCache::new(64));
    let prompt: Vec<u32> = (0..12).collect(); // 3 full blocks
    s.add(seq(1, &prompt, None));
    assert_eq!(s.queued_prefill_tokens(), 12, "cold prompt: all of it");
    run(&mut s, 1);
    s.add(seq(2, &prompt, None));
    // Blocks 0-1 are cached; the last block holds the token that must be recomputed.
    assert_eq!(s.queued_prefill_tokens(), 4);
    s.add(seq(3, &prompt, Some("tenant-b")));
    assert_eq!(
        s.queued_prefill_tokens(),
        4 + 12,
        "another salt hits nothing"
    );
}
