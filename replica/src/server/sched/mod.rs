//! Iteration-level (continuous batching) scheduler over the radix cache.
//!
//! Each [`Scheduler::schedule`] call plans one engine step under a token budget:
//! 1. running sequences that decode (one token each), oldest first;
//! 2. under `PrefillOrder::Fcfs`: running sequences still prefilling, oldest first, in
//!    chunks that fit the remaining budget; then waiting sequences, longest cached prefix
//!    first, except that a sequence passed over for `fairness_steps` steps (or preempted)
//!    goes first in arrival order, up to the cap on running sequences;
//! 3. under `PrefillOrder::Shortest` (the default) instead: running prefills and waiting
//!    sequences in one order, shortest uncached prefill first, aged on a work clock
//!    (`router_policy::prefill_order`, the simulator's rule too), so a short prompt is not
//!    stuck behind a long prompt's whole prefill ([`ordered`]).
//!
//! When a running sequence needs a page and none can be had (even after evicting unlocked
//! cached blocks), the newest running sequence is preempted by recompute: its pages are
//! released (its full blocks stay cached) and it goes back to the front of the queue.
//! After the engine ran the step, [`Scheduler::complete`] advances the sequences and
//! caches the blocks they filled; the caller then drains the cache events.

mod ordered;
mod seq;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ordered;

pub use seq::{SeqId, Sequence};

use router_policy::prefill_order::{PrefillOrder, WorkClock};
use std::collections::VecDeque;
use warmpath_core::BlockSize;
use warmpath_kv_cache::{Inserted, RadixCache};

/// Scheduler limits.
#[derive(Clone, Copy, Debug)]
pub struct SchedConfig {
    /// Tokens per page.
    pub block_size: BlockSize,
    /// Tokens computed per step.
    pub token_budget: usize,
    /// Sequences in the running batch.
    pub max_running: usize,
    /// Steps after which a waiting sequence is admitted in arrival order (FCFS order).
    pub fairness_steps: u64,
    /// The order prefills are served in.
    pub order: PrefillOrder,
}

/// One sequence's share of a step: compute tokens `start..start+len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanItem {
    /// The sequence.
    pub id: SeqId,
    /// First position computed.
    pub start: usize,
    /// Tokens computed.
    pub len: usize,
    /// Whether the step ends at the sequence's last token (so a token is sampled).
    pub sample: bool,
}

/// A planned step.
#[derive(Debug)]
pub struct Plan<P> {
    /// What to compute.
    pub items: Vec<PlanItem>,
    /// Sequences that can never run (larger than the whole pool); the caller fails them.
    pub failed: Vec<Sequence<P>>,
    /// Sequences preempted while planning.
    pub preempted: usize,
}

/// Counters since start.
#[derive(Clone, Copy, Debug, Default)]
pub struct SchedStats {
    /// Preemptions.
    pub preemptions: u64,
    /// Prompt tokens served from cache at first admission.
    pub cached_prompt_tokens: u64,
}

/// Uncached prompt tokens a prompt may have and still count as short under a prefill cap,
/// whatever the cap (a chat with its template and no cached prefix).
pub const SHORT_PROMPT_TOKENS: usize = 64;

/// The scheduler; owns the cache and every live sequence.
#[derive(Debug)]
pub struct Scheduler<P> {
    cfg: SchedConfig,
    cache: RadixCache,
    waiting: VecDeque<Sequence<P>>,
    running: Vec<Sequence<P>>,
    step: u64,
    admissions: u64,
    stats: SchedStats,
    /// Tokens computed in planned steps (the prefill order's aging clock).
    clock: WorkClock,
    /// Sequences added so far.
    arrivals: u64,
    /// Most prompt tokens a step may prefill ([`Scheduler::set_prefill_cap`]).
    prefill_cap: usize,
}

impl<P> Scheduler<P> {
    /// A scheduler over `cache`.
    pub fn new(cfg: SchedConfig, cache: RadixCache) -> Self {
        Self {
            cfg,
            cache,
            waiting: VecDeque::new(),
            running: Vec::new(),
            step: 0,
            admissions: 0,
            stats: SchedStats::default(),
            clock: WorkClock::default(),
            arrivals: 0,
            prefill_cap: usize::MAX,
        }
    }

    /// Caps the prompt tokens each step prefills (decodes are not capped), below the
    /// token budget: the worker sets it from the measured prefill rate so that a step
    /// with prefill work takes about `--step-target-ms` (at least one token). Under a
    /// shortest-first order a short prompt (its whole uncached prefill within twice the
    /// cap, or [`SHORT_PROMPT_TOKENS`]) is not split, and goes before long prompts' chunks
    /// that are not overdue (`PrefillOrder::rank_short_first`).
    pub fn set_prefill_cap(&mut self, cap: usize) {
        self.prefill_cap = cap.max(1);
    }

    /// Queues a new sequence.
    pub fn add(&mut self, mut seq: Sequence<P>) {
        seq.arrival_step = self.step;
        seq.arrival_work = self.clock.0;
        seq.arrival_no = self.arrivals;
        self.arrivals += 1;
        self.waiting.push_back(seq);
    }

    /// The cache.
    pub fn cache(&self) -> &RadixCache {
        &self.cache
    }

    /// The cache, mutably (to drain events or clear it).
    pub fn cache_mut(&mut self) -> &mut RadixCache {
        &mut self.cache
    }

    /// Running sequences.
    pub fn running(&self) -> &[Sequence<P>] {
        &self.running
    }

    /// Waiting sequences.
    pub fn waiting(&self) -> impl Iterator<Item = &Sequence<P>> {
        self.waiting.iter()
    }

    /// Counters.
    pub fn stats(&self) -> SchedStats {
        self.stats
    }

    /// Whether nothing is running or waiting.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    /// A running sequence.
    pub fn get(&self, id: SeqId) -> Option<&Sequence<P>> {
        self.running.iter().find(|s| s.id == id)
    }

    /// A running sequence, mutably.
    pub fn get_mut(&mut self, id: SeqId) -> Option<&mut Sequence<P>> {
        self.running.iter_mut().find(|s| s.id == id)
    }

    fn pages_for(&self, tokens: usize) -> usize {
        tokens.div_ceil(self.cfg.block_size.get())
    }

    /// Plans the next step.
    pub fn schedule(&mut self) -> Plan<P> {
        self.step += 1;
        let mut plan = Plan {
            items: Vec::new(),
            failed: Vec::new(),
            preempted: 0,
        };
        let mut budget = self.cfg.token_budget;
        // Pass 1 decodes, pass 2 prefill chunks; both oldest first (FCFS).
        let passes: &[bool] = if self.cfg.order == PrefillOrder::Fcfs {
            &[true, false]
        } else {
            &[true]
        };
        for &decode_pass in passes {
            if !decode_pass {
                // Prefills get what the decodes left, up to the prefill cap.
                budget = budget.min(self.prefill_cap);
            }
            let mut order: Vec<(u64, SeqId)> = self
                .running
                .iter()
                .filter(|s| (s.tokens.len() - s.computed == 1) == decode_pass)
                .map(|s| (s.admitted, s.id))
                .collect();
            order.sort_unstable();
            for (_, id) in order {
                if budget == 0 {
                    break;
                }
                self.plan_running(id, &mut budget, &mut plan);
            }
        }
        if self.cfg.order != PrefillOrder::Fcfs {
            let stretch = budget.min(self.prefill_cap.saturating_mul(2).max(SHORT_PROMPT_TOKENS));
            budget = budget.min(self.prefill_cap);
            self.plan_prefills_ordered(&mut budget, stretch, &mut plan);
        } else if plan.preempted == 0 {
            self.admit(&mut budget, &mut plan);
        }
        let computed: usize = plan.items.iter().map(|it| it.len).sum();
        self.clock.advance(computed as u64);
        plan
    }

    /// Gives running sequence `id` its share, preempting newer ones if pages run out.
    fn plan_running(&mut self, id: SeqId, budget: &mut usize, plan: &mut Plan<P>) {
        loop {
            let Some(seq) = self.running.iter().find(|s| s.id == id) else {
                return;
            };
            let start = seq.computed;
            let len = (seq.tokens.len() - start).min(*budget);
            let need = self.pages_for(start + len).saturating_sub(seq.pages.len());
            if let Some(pages) = self.cache.alloc(need) {
                let seq = self
                    .running
                    .iter_mut()
                    .find(|s| s.id == id)
                    .expect("present");
                seq.pages.extend(pages);
                let sample = start + len == seq.tokens.len();
                plan.items.push(PlanItem {
                    id,
                    start,
                    len,
                    sample,
                });
                *budget -= len;
                return;
            }
            // Out of pages: preempt the newest other running sequence, else this one.
            let victim = self
                .running
                .iter()
                .filter(|s| s.id != id)
                .max_by_key(|s| s.admitted)
                .map(|s| s.id);
            match victim {
                Some(v) => {
                    if let Some(pos) = plan.items.iter().position(|it| it.id == v) {
                        *budget += plan.items.remove(pos).len;
                    }
                    self.preempt(v);
                    plan.preempted += 1;
                }
                None => {
                    // Alone and still out of pages: it can never fit.
                    if let Some(pos) = self.running.iter().position(|s| s.id == id) {
                        let seq = self.release(pos);
                        plan.failed.push(seq);
                    }
                    return;
                }
            }
        }
    }

    /// Order in which waiting sequences are considered.
    fn admission_order(&self) -> Vec<usize> {
        let bs = self.cfg.block_size.get();
        let mut keyed: Vec<(bool, i64, u64, usize)> = self
            .waiting
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let starved = s.preempted > 0
                    || self.step.saturating_sub(s.arrival_step) >= self.cfg.fairness_steps;
                // The cache-aware part is skipped for long queues (its cost grows).
                let prefix = if starved || i >= PEEK_LIMIT {
                    0
                } else {
                    self.cache.peek_prefix_len(reusable_hashes(s, bs)) as i64
                };
                (!starved, -prefix, s.arrival_step, i)
            })
            .collect();
        keyed.sort_unstable();
        keyed.into_iter().map(|k| k.3).collect()
    }

    fn admit(&mut self, budget: &mut usize, plan: &mut Plan<P>) {
        let bs = self.cfg.block_size.get();
        let order = self.admission_order();
        let mut admitted = Vec::new();
        for idx in order {
            if self.running.len() + admitted.len() >= self.cfg.max_running || *budget == 0 {
                break;
            }
            let seq = &self.waiting[idx];
            let hashes = reusable_hashes(seq, bs).to_vec();
            let total = seq.tokens.len();
            let nodes = self.cache.match_prefix(&hashes);
            self.cache.lock(&nodes);
            let start = nodes.len() * bs;
            let len = (total - start).min(*budget);
            let need = self.pages_for(start + len) - nodes.len();
            let Some(new_pages) = self.cache.alloc(need) else {
                self.cache.unlock(&nodes);
                if self.running.is_empty() && admitted.is_empty() {
                    // Nothing else holds pages and it still does not fit.
                    if let Some(seq) = self.waiting.remove(idx) {
                        plan.failed.push(seq);
                    }
                }
                break;
            };
            let seq = &mut self.waiting[idx];
            seq.pages = nodes.iter().map(|&n| self.cache.page(n)).collect();
            seq.pages.extend(new_pages);
            seq.nodes = nodes;
            seq.computed = start;
            if seq.cached_tokens.is_none() {
                seq.cached_tokens = Some(start);
                self.stats.cached_prompt_tokens += start as u64;
            }
            self.admissions += 1;
            seq.admitted = self.admissions;
            plan.items.push(PlanItem {
                id: seq.id,
                start,
                len,
                sample: start + len == total,
            });
            *budget -= len;
            admitted.push(idx);
        }
        admitted.sort_unstable_by(|a, b| b.cmp(a));
        let mut moved: Vec<Sequence<P>> = admitted
            .into_iter()
            .filter_map(|i| self.waiting.remove(i))
            .collect();
        moved.sort_unstable_by_key(|s| s.admitted);
        self.running.extend(moved);
    }

    /// Releases running sequence at `pos`: unlocks its nodes and frees its private pages.
    fn release(&mut self, pos: usize) -> Sequence<P> {
        let mut seq = self.running.remove(pos);
        self.cache.unlock(&seq.nodes);
        let private = seq.pages.split_off(seq.nodes.len());
        self.cache.free_pages(&private);
        seq.pages.clear();
        seq.nodes.clear();
        seq
    }

    fn preempt(&mut self, id: SeqId) {
        let Some(pos) = self.running.iter().position(|s| s.id == id) else {
            return;
        };
        let mut seq = self.release(pos);
        seq.computed = 0;
        seq.preempted += 1;
        self.stats.preemptions += 1;
        tracing::debug!(seq = id.0, "preempted (recompute)");
        self.waiting.push_front(seq);
    }

    /// Records that the engine computed `plan`'s items and caches every block they filled.
    pub fn complete(&mut self, items: &[PlanItem]) {
        let bs = self.cfg.block_size.get();
        for it in items {
            let Some(seq) = self.running.iter_mut().find(|s| s.id == it.id) else {
                continue;
            };
            seq.computed = it.start + it.len;
            let full = (seq.computed / bs).min(seq.hasher.hashes().len());
            while seq.nodes.len() < full {
                let i = seq.nodes.len();
                let hash = seq.hasher.hashes()[i];
                match self
                    .cache
                    .insert(seq.nodes.last().copied(), hash, seq.pages[i])
                {
                    Inserted::New(n) => seq.nodes.push(n),
                    Inserted::Existing(n) => {
                        self.cache.free_pages(&[seq.pages[i]]);
                        seq.pages[i] = self.cache.page(n);
                        seq.nodes.push(n);
                    }
                }
            }
        }
    }

    /// Appends a sampled token to running sequence `id`.
    pub fn push_token(&mut self, id: SeqId, token: warmpath_core::TokenId) {
        if let Some(seq) = self.running.iter_mut().find(|s| s.id == id) {
            seq.tokens.push(token);
            seq.hasher.extend(&[token]);
        }
    }

    /// Removes a finished running sequence, releasing its pages.
    pub fn finish(&mut self, id: SeqId) -> Option<Sequence<P>> {
        let pos = self.running.iter().position(|s| s.id == id)?;
        Some(self.release(pos))
    }

    /// Removes every sequence (running or waiting) for which `cancelled` holds, releasing
    /// its pages at once.
    pub fn remove_where(
        &mut self,
        mut cancelled: impl FnMut(&Sequence<P>) -> bool,
    ) -> Vec<Sequence<P>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            if cancelled(&self.running[i]) {
                out.push(self.release(i));
            } else {
                i += 1;
            }
        }
        let (gone, keep): (Vec<_>, Vec<_>) = self.waiting.drain(..).partition(|s| cancelled(s));
        self.waiting = keep.into();
        out.extend(gone);
        out
    }

    /// Prompt tokens still to compute over running and waiting sequences. A waiting
    /// sequence that has computed nothing yet counts only what its cached prefix will not
    /// cover (what admission will compute), so a queue of cache hits does not look like a
    /// queue of cold prompts to the router.
    pub fn queued_prefill_tokens(&self) -> u64 {
        let bs = self.cfg.block_size.get();
        let running = self.running.iter().map(|s| s.pending_prefill() as u64);
        let waiting = self.waiting.iter().enumerate().map(|(i, s)| {
            let pending = s.pending_prefill();
            // Long queues skip the lookup (bounded cost per load report).
            if s.computed > 0 || i >= PEEK_LIMIT {
                return pending as u64;
            }
            let cached = self.cache.peek_prefix_len(reusable_hashes(s, bs)) * bs;
            pending.saturating_sub(cached) as u64
        });
        running.chain(waiting).sum()
    }
}

/// Waiting sequences past this position skip cache lookups (their cost grows with the queue).
const PEEK_LIMIT: usize = 256;

/// The block hashes a cache hit may cover: full blocks only, and never the last token, which
/// is recomputed to produce the first output's logits.
fn reusable_hashes<P>(s: &Sequence<P>, bs: usize) -> &[warmpath_core::BlockHash] {
    let max_blocks = (s.tokens.len().saturating_sub(1) / bs).min(s.block_hashes().len());
    &s.block_hashes()[..max_blocks]
}
