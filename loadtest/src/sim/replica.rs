//! One simulated replica: admission bounded by batch size and KV pages, continuous
//! batching with chunked prefill, both in the replica's prefill order (FCFS, or shortest
//! uncached prefill first with aging: [`queue_order`]), over the replica's own radix cache
//! ([`warmpath_kv_cache::RadixCache`], one page per block). As in the replica's scheduler,
//! admission matches and locks the cached prefix and allocates pages for the rest, evicting
//! unlocked leaves when free pages run out (single-use before shared, then least recently
//! used: `Removed`); a prompt's new full blocks are inserted when its prefill finishes
//! (`Stored`), and a finished request unlocks its blocks and frees its private pages. The KV
//! events are the cache's own ([`RadixCache::take_events`]).

use super::profile::CostProfile;
use router_policy::prefill_order::{PrefillOrder, WorkClock};
use std::collections::VecDeque;
use std::sync::Arc;
use warmpath_core::{BlockHash, KvEvent, PageId};
use warmpath_kv_cache::{Inserted, NodeId, RadixCache};

/// What a sequence is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Job {
    /// Request `usize` of the workload.
    Request(usize),
    /// Pre-warm prompt `usize` of a rollout (prefill only, no record).
    Prewarm(usize),
    /// The prefill of split request `usize` on a prefill replica (prefill only; its KV
    /// then goes to the decode replica).
    Prefill(usize),
}

/// A request inside a replica.
#[derive(Debug)]
pub(crate) struct Seq {
    /// What it is for.
    pub job: Job,
    /// Full-block hash chain of the prompt.
    pub hashes: Arc<[BlockHash]>,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Output tokens to produce.
    pub output_target: u32,
    /// Arrival at the replica (= at the router; the network is not modelled), ms.
    pub arrival_ms: f64,
    /// Blocks of the prefix found cached at admission (locked while running).
    pub cached_blocks: u32,
    /// Prompt tokens still to prefill.
    pub remaining_prefill: u32,
    /// Output tokens produced so far.
    pub produced: u32,
    /// First token time, ms.
    pub first_token_ms: f64,
    /// Last token time, ms.
    pub last_token_ms: f64,
    /// Gaps between tokens, ms.
    pub itls: Vec<f32>,
    /// When its first prefill chunk began, ms (negative until then).
    pub prefill_started_ms: f64,
    /// Tokens of its last prefill chunk.
    pub last_chunk: u32,
    /// Nodes locked since a KV import (its leading blocks), until admission locks its own.
    pinned: Vec<NodeId>,
    /// A split request: the prompt tokens its prefill replica found cached, which its
    /// record reports as cached (the transferred ones were computed, there).
    pub prefill_hit_tokens: Option<u32>,
    /// Blocks loaded from the shared KV tier before admission (counted in `cached_blocks`
    /// once admitted).
    pub tier_blocks: u32,
    /// Nodes it holds locked: the cached prefix from admission, then every prompt block
    /// once stored; unlocked when it finishes.
    nodes: Vec<NodeId>,
    /// Pages taken at admission for the uncached full prompt blocks, until they are stored.
    prompt_pages: Vec<PageId>,
    /// Pages taken at admission for the partial tail and the output (freed at the end).
    private_pages: Vec<PageId>,
    /// Decoding at the start of the current step.
    decoding: bool,
    /// Prefill tokens scheduled in the current step.
    chunk: u32,
    /// The replica's work clock at its arrival (the prefill order's aging).
    arrival_work: u64,
    /// Arrival number at its replica.
    arrival_no: u64,
}

impl Seq {
    /// A new, not yet admitted request.
    pub(super) fn new(
        job: Job,
        hashes: Arc<[BlockHash]>,
        prompt_tokens: u32,
        output_target: u32,
        arrival_ms: f64,
    ) -> Self {
        Self {
            job,
            hashes,
            prompt_tokens,
            output_target: output_target.max(1),
            arrival_ms,
            cached_blocks: 0,
            remaining_prefill: prompt_tokens,
            produced: 0,
            first_token_ms: 0.0,
            last_token_ms: 0.0,
            itls: Vec::new(),
            prefill_started_ms: -1.0,
            last_chunk: 0,
            pinned: Vec::new(),
            prefill_hit_tokens: None,
            tier_blocks: 0,
            nodes: Vec::new(),
            prompt_pages: Vec::new(),
            private_pages: Vec::new(),
            decoding: false,
            chunk: 0,
            arrival_work: 0,
            arrival_no: 0,
        }
    }
}

/// What a finished step produced.
#[derive(Debug, Default)]
pub(crate) struct StepOutput {
    /// Requests that produced their last token.
    pub completed: Vec<Seq>,
    /// KV events, in order.
    pub events: Vec<KvEvent>,
}

/// Replica state.
#[derive(Debug)]
pub(crate) struct Replica {
    pub cache: RadixCache,
    pub waiting: VecDeque<Seq>,
    pub running: Vec<Seq>,
    /// A step is in progress.
    pub busy: bool,
    /// Duration of the step in progress, ms.
    pub step_ms: f64,
    block_size: u32,
    /// The order prefills are served in.
    order: PrefillOrder,
    /// Tokens computed so far (prefill and decode).
    clock: WorkClock,
    /// Requests queued so far.
    arrivals: u64,
}

impl Replica {
    pub(super) fn new(profile: &CostProfile, order: PrefillOrder) -> Self {
        Self {
            cache: RadixCache::new(
                usize::try_from(profile.kv_capacity_blocks).unwrap_or(usize::MAX),
            ),
            waiting: VecDeque::new(),
            running: Vec::new(),
            busy: false,
            step_ms: 0.0,
            block_size: profile.block_size,
            order,
            clock: WorkClock::default(),
            arrivals: 0,
        }
    }

    /// KV blocks in use (cached or reserved): the pages handed out.
    pub(super) fn used_blocks(&self) -> u64 {
        self.cache.used_pages() as u64
    }

    /// Pages held outside the cache (uncached prompt blocks, tails, outputs).
    #[cfg(test)]
    pub(super) fn reserved(&self) -> u64 {
        (self.cache.used_pages() - self.cache.cached_blocks()) as u64
    }

    /// Prompt tokens still to prefill, running and waiting. A waiting request counts only
    /// the tokens its cached prefix does not cover now (what admission would compute).
    pub(super) fn queued_prefill_tokens(&self) -> u64 {
        let bs = self.block_size;
        self.running
            .iter()
            .map(|s| s.remaining_prefill as u64)
            .sum::<u64>()
            + self
                .waiting
                .iter()
                .map(|s| {
                    let max_hit = (s.prompt_tokens.saturating_sub(1) / bs) as usize;
                    let hit = self.cache.peek_prefix_len(&s.hashes).min(max_hit) as u32;
                    u64::from(s.prompt_tokens - hit * bs)
                })
                .sum::<u64>()
    }

    /// Caches the KV of `seq`'s first `upto` prompt blocks received from a prefill replica
    /// or the shared tier, as the replica's import does: the blocks held here are locked,
    /// each missing one takes a page (evicting unlocked blocks when none is free) and is
    /// inserted, stopping where no page can be had. The chain stays locked until `seq` is
    /// admitted. Returns the blocks received; the cache's `Stored` and any `Removed` events
    /// go to `events`.
    pub(super) fn import(
        &mut self,
        seq: &mut Seq,
        upto: usize,
        events: &mut Vec<KvEvent>,
    ) -> usize {
        let all = seq.hashes.clone();
        let mut path: Vec<NodeId> = Vec::new();
        let mut received = 0;
        for &hash in &all[..upto.min(all.len())] {
            if let Some(n) = self.cache.lookup(hash) {
                self.cache.lock(&[n]);
                path.push(n);
                continue;
            }
            let Some(pages) = self.cache.alloc(1) else {
                break;
            };
            let node = store(&mut self.cache, path.last().copied(), hash, pages[0]);
            received += usize::from(matches!(node, Inserted::New(_)));
            path.push(node.node());
        }
        let old = std::mem::replace(&mut seq.pinned, path);
        self.cache.unlock(&old);
        events.extend(self.cache.take_events());
        received
    }

    /// Leading blocks of `hashes` (a prompt of `prompt_tokens`) this replica would reuse now,
    /// and the most it may reuse: at least one prompt token is always computed.
    pub(super) fn local_hit(&self, hashes: &[BlockHash], prompt_tokens: u32) -> (usize, usize) {
        let max_hit = (prompt_tokens.saturating_sub(1) / self.block_size) as usize;
        (self.cache.peek_prefix_len(hashes).min(max_hit), max_hit)
    }

    /// Admits waiting requests in the prefill order while the batch and the KV pages allow, as the
    /// replica's scheduler does: match and lock the reusable cached prefix, then take pages
    /// for the rest of the prompt and the output, evicting unlocked blocks when free pages
    /// run out (their `Removed` events go to `events`). An idle replica always takes the head
    /// request, with as many pages as it can have (prompt blocks first; blocks left without
    /// a page are not cached).
    fn admit(&mut self, profile: &CostProfile, events: &mut Vec<KvEvent>) {
        let bs = self.block_size;
        if self.running.len() < profile.max_batch as usize {
            self.order_waiting();
        }
        while self.running.len() < profile.max_batch as usize {
            let Some(seq) = self.waiting.front() else {
                break;
            };
            // At least one prompt token is always computed (as in vLLM): cap the hit.
            let max_hit = ((seq.prompt_tokens.saturating_sub(1)) / bs) as usize;
            let hashes = seq.hashes.clone();
            let prompt_blocks = hashes.len();
            let tail = (seq.prompt_tokens - prompt_blocks as u32 * bs) + seq.output_target;
            let nodes = self
                .cache
                .match_prefix(&hashes[..max_hit.min(prompt_blocks)]);
            self.cache.lock(&nodes);
            let hit = nodes.len();
            let new_prompt = prompt_blocks - hit;
            let need = new_prompt + tail.div_ceil(bs) as usize;
            let pages = match self.cache.alloc(need) {
                Some(pages) => pages,
                None if self.running.is_empty() => {
                    let n = self.cache.available_pages();
                    self.cache.alloc(n).unwrap_or_default()
                }
                None => {
                    self.cache.unlock(&nodes);
                    break;
                }
            };
            let Some(mut seq) = self.waiting.pop_front() else {
                self.cache.unlock(&nodes);
                self.cache.free_pages(&pages);
                break;
            };
            let pinned = std::mem::take(&mut seq.pinned);
            self.cache.unlock(&pinned);
            seq.cached_blocks = hit as u32;
            seq.remaining_prefill = seq.prompt_tokens - hit as u32 * bs;
            seq.nodes = nodes;
            seq.prompt_pages = pages;
            seq.private_pages = seq
                .prompt_pages
                .split_off(new_prompt.min(seq.prompt_pages.len()));
            self.running.push(seq);
        }
        events.extend(self.cache.take_events());
    }

    /// Admits work and plans the next step; returns its duration, or `None` when idle.
    pub(super) fn plan_step(
        &mut self,
        profile: &CostProfile,
        events: &mut Vec<KvEvent>,
    ) -> Option<f64> {
        self.admit(profile, events);
        if self.running.is_empty() {
            self.busy = false;
            return None;
        }
        let mut decode = 0u32;
        for s in &mut self.running {
            s.decoding = s.remaining_prefill == 0;
            s.chunk = 0;
            decode += u32::from(s.decoding);
        }
        let prefill = self.plan_chunks(profile.max_prefill_tokens_per_step);
        self.clock.advance(prefill + u64::from(decode));
        self.busy = true;
        self.step_ms = profile.step_ms(decode, prefill);
        Some(self.step_ms)
    }

    /// Applies the step that ends at `now`.
    pub(super) fn finish_step(&mut self, now: f64) -> StepOutput {
        let mut out = StepOutput::default();
        for s in &mut self.running {
            if s.decoding {
                s.produced += 1;
                s.itls.push((now - s.last_token_ms) as f32);
                s.last_token_ms = now;
            } else if s.chunk > 0 {
                if s.prefill_started_ms < 0.0 {
                    s.prefill_started_ms = now - self.step_ms;
                }
                s.remaining_prefill -= s.chunk;
                s.last_chunk = s.chunk;
                s.chunk = 0;
                if s.remaining_prefill == 0 {
                    s.produced = 1;
                    s.first_token_ms = now;
                    s.last_token_ms = now;
                    // Its new full blocks join the cache, under its locked prefix.
                    for page in std::mem::take(&mut s.prompt_pages) {
                        let hash = s.hashes[s.nodes.len()];
                        let ins = store(&mut self.cache, s.nodes.last().copied(), hash, page);
                        s.nodes.push(ins.node());
                    }
                }
            }
        }
        let mut i = 0;
        while i < self.running.len() {
            let s = &self.running[i];
            if s.remaining_prefill == 0 && s.produced >= s.output_target {
                let mut s = self.running.remove(i);
                self.cache.unlock(&std::mem::take(&mut s.nodes));
                self.cache.free_pages(&std::mem::take(&mut s.private_pages));
                out.completed.push(s);
            } else {
                i += 1;
            }
        }
        out.events = self.cache.take_events();
        out
    }
}

/// Inserts block `hash` written in `page` under `parent`, locked, as the replica does: a
/// block another sequence stored first keeps its page and `page` goes back to the pool.
fn store(
    cache: &mut RadixCache,
    parent: Option<NodeId>,
    hash: BlockHash,
    page: PageId,
) -> Inserted {
    let ins = cache.insert(parent, hash, page);
    if let Inserted::Existing(_) = ins {
        cache.free_pages(&[page]);
    }
    ins
}

mod queue_order;
#[cfg(test)]
mod tests;
