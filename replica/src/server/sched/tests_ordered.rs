//! The scheduler under `PrefillOrder::Shortest`: a short prompt beside a long prefill,
//! aging under a stream of short prompts, and the invariants the FCFS tests check.

use super::tests::{run, seq};
use super::*;
use warmpath_core::TokenId;

fn cfg(budget: usize, max_running: usize, order: PrefillOrder) -> SchedConfig {
    SchedConfig {
        order,
        ..super::tests::cfg(budget, max_running)
    }
}

fn ids(p: &Plan<usize>) -> Vec<(u64, usize, bool)> {
    p.items
        .iter()
        .map(|it| (it.id.0, it.len, it.sample))
        .collect()
}

/// Plans and completes one step; sampled sequences get a token (and finish after `gen`).
fn step(s: &mut Scheduler<usize>, gen: usize) -> Plan<usize> {
    let plan = s.schedule();
    s.complete(&plan.items);
    for it in plan.items.iter().filter(|it| it.sample) {
        s.push_token(it.id, TokenId(7));
        if s.get(it.id).unwrap().generated().len() >= gen {
            s.finish(it.id);
        }
    }
    plan
}

#[test]
fn a_short_prompt_beside_a_long_prefill_gets_the_next_step_alone() {
    let long: Vec<u32> = (0..400).collect();
    let short: Vec<u32> = (1000..1006).collect();
    for order in [PrefillOrder::Fcfs, PrefillOrder::default()] {
        let mut s = Scheduler::new(cfg(32, 8, order), RadixCache::new(256));
        s.add(seq(1, &long, None));
        assert_eq!(ids(&step(&mut s, 4)), vec![(1, 32, false)]);
        assert_eq!(ids(&step(&mut s, 4)), vec![(1, 32, false)]);
        s.add(seq(2, &short, None));
        let p = step(&mut s, 4);
        if order == PrefillOrder::Fcfs {
            // FCFS: the long prefill takes the whole budget; the chat waits for all of it.
            assert_eq!(ids(&p), vec![(1, 32, false)]);
            let mut steps = 1;
            while s.get(SeqId(2)).is_none_or(|q| q.generated().is_empty()) {
                step(&mut s, 4);
                steps += 1;
            }
            assert!(steps >= 10, "FCFS served the chat after {steps} steps");
        } else {
            // Shortest: the chat is admitted at once and its step carries nothing else,
            // so its first token costs its own prefill; the long one resumes next step.
            assert_eq!(ids(&p), vec![(2, 6, true)]);
            assert_eq!(ids(&step(&mut s, 4)), vec![(2, 1, true), (1, 31, false)]);
        }
    }
}

#[test]
fn aging_serves_a_long_prompt_under_a_stream_of_short_ones() {
    // Four 12-token prompts a step against a 32-token budget keep the replica overloaded;
    // a 200-token prompt arrives first. With no aging to speak of it would starve.
    for (slack, expect_done) in [(2u32, true), (u32::MAX, false)] {
        let mut s = Scheduler::new(
            cfg(32, 64, PrefillOrder::shortest(slack)),
            RadixCache::new(4096),
        );
        s.add(seq(0, &(0..200).collect::<Vec<_>>(), None));
        let mut next = 1u64;
        let mut long_first_token = None;
        for n in 0..200 {
            for _ in 0..4 {
                let p: Vec<u32> = (0..12).map(|t| 10_000 + 16 * next as u32 + t).collect();
                s.add(seq(next, &p, None));
                next += 1;
            }
            let p = step(&mut s, 1);
            if p.items.iter().any(|it| it.id == SeqId(0) && it.sample) {
                long_first_token = Some(n);
                break;
            }
        }
        // Slack 2: the 200-token prompt is passed by later arrivals for at most 400 tokens
        // of work (12.5 full steps); the short ones present then are done within as many
        // again, then its own 200 tokens (7 steps): well inside 60 steps.
        match (expect_done, long_first_token) {
            (true, Some(n)) => assert!(n < 60, "served after {n} steps"),
            (false, None) => {}
            other => panic!("slack {slack}: {other:?}"),
        }
    }
}

#[test]
fn preemption_and_an_oversized_prompt_behave_as_under_fcfs() {
    let mut s = Scheduler::new(cfg(32, 8, PrefillOrder::default()), RadixCache::new(10));
    for i in 0..8u64 {
        let prompt: Vec<u32> = (0..8).map(|t| t + 100 * i as u32).collect();
        s.add(seq(i, &prompt, None));
    }
    let done = run(&mut s, 8);
    assert_eq!(done.len(), 8);
    assert!(s.stats().preemptions > 0);
    for (id, _, gen) in &done {
        let want: Vec<u32> = (8..16).map(|p| 1000 + p).collect();
        assert_eq!(gen, &want, "sequence {id}");
    }
    assert_eq!(s.cache().locked_blocks(), 0);

    let mut s = Scheduler::new(cfg(64, 4, PrefillOrder::default()), RadixCache::new(2));
    s.add(seq(1, &(0..20).collect::<Vec<_>>(), None));
    assert_eq!(s.schedule().failed.len(), 1);
    assert!(s.is_idle());
}

#[test]
fn a_cached_prompt_counts_only_its_uncached_tail() {
    // Two 40-token prompts: one fully cached but for its last block, one cold of 24
    // tokens. The cached one has 4 tokens to compute and goes first.
    let mut s = Scheduler::new(cfg(64, 8, PrefillOrder::default()), RadixCache::new(64));
    let warm: Vec<u32> = (0..40).collect();
    s.add(seq(1, &warm, None));
    run(&mut s, 1);
    s.add(seq(2, &(500..524).collect::<Vec<_>>(), None));
    s.add(seq(3, &warm, None));
    let p = s.schedule();
    assert_eq!(p.items[0].id, SeqId(3));
    assert_eq!((p.items[0].start, p.items[0].len), (36, 4));
}

#[test]
fn a_short_prompt_within_twice_the_cap_is_not_split_and_a_long_tail_is() {
    let mut s = Scheduler::new(cfg(64, 8, PrefillOrder::default()), RadixCache::new(256));
    s.set_prefill_cap(16);
    let short: Vec<u32> = (0..24).collect();
    s.add(seq(1, &short, None));
    // 24 tokens, within 2 x 16 (and 64): one step, and its first token.
    assert_eq!(ids(&step(&mut s, 100)), vec![(1, 24, true)]);
    let long: Vec<u32> = (1000..1072).collect();
    s.add(seq(2, &long, None));
    // 72 tokens, more than 2 x 16 and 64: chunked at the cap to its end, the tail included.
    for _ in 0..4 {
        assert_eq!(ids(&step(&mut s, 100)), vec![(1, 1, true), (2, 16, false)]);
    }
    assert_eq!(ids(&step(&mut s, 100)), vec![(1, 1, true), (2, 8, true)]);
}

#[test]
fn the_prefill_cap_chunks_prefills_but_never_decodes() {
    let long: Vec<u32> = (0..400).collect();
    let short: Vec<u32> = (1000..1010).collect();
    for order in [PrefillOrder::Fcfs, PrefillOrder::default()] {
        let mut s = Scheduler::new(cfg(64, 8, order), RadixCache::new(256));
        s.set_prefill_cap(16);
        s.add(seq(1, &short, None));
        // 10 prompt tokens fit the cap: one step, then decodes.
        assert_eq!(ids(&step(&mut s, 100)), vec![(1, 10, true)]);
        s.add(seq(2, &long, None));
        // The long prompt gets 16 tokens a step beside the decode, whatever the budget.
        for _ in 0..3 {
            assert_eq!(ids(&step(&mut s, 100)), vec![(1, 1, true), (2, 16, false)]);
        }
        // A cap above the budget leaves the budget in charge.
        s.set_prefill_cap(1000);
        assert_eq!(ids(&step(&mut s, 100)), vec![(1, 1, true), (2, 63, false)]);
        // A cap of 0 still lets a prefill move.
        s.set_prefill_cap(0);
        assert_eq!(ids(&step(&mut s, 100)), vec![(1, 1, true), (2, 1, false)]);
    }
}

#[test]
fn every_sequence_finishes_under_a_changing_prefill_cap() {
    // Small pools preempt: a preempted sequence recomputes its prompt and the tokens it
    // generated, in chunks that may end past its prompt (it is still prefilling there).
    for order in [PrefillOrder::Fcfs, PrefillOrder::default()] {
        let mut preempted = 0;
        for seed in 0..50u32 {
            let mut s = Scheduler::new(cfg(512, 32, order), RadixCache::new(24));
            let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(7);
            let mut rand = move |n: u32| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x % n
            };
            let mut added = 0u64;
            for _ in 0..400 {
                if added < 30 && rand(3) == 0 {
                    let len = 20 + rand(60);
                    let p: Vec<u32> = (0..len).map(|i| 1000 * added as u32 + i).collect();
                    s.add(seq(added, &p, None));
                    added += 1;
                }
                s.set_prefill_cap(1 + rand(40) as usize);
                step(&mut s, 4);
            }
            for _ in 0..2000 {
                if s.is_idle() {
                    break;
                }
                step(&mut s, 4);
            }
            preempted += s.stats().preemptions;
            let stuck: Vec<_> = s
                .running
                .iter()
                .map(|q| (q.id, q.tokens.len(), q.computed, q.prompt_len))
                .collect();
            assert!(
                s.is_idle(),
                "{order:?} seed {seed}: never finished: running {stuck:?}, {} waiting",
                s.waiting.len()
            );
        }
        assert!(preempted > 0, "{order:?}: the pool never ran out");
    }
}
