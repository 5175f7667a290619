//! One simulated replica: FCFS admission bounded by batch size and KV blocks, continuous
//! batching with chunked prefill, a radix cache that stores each prompt's full blocks when
//! its prefill finishes (a `Stored` event) and evicts LRU leaves to admit work (`Removed`).

use super::profile::CostProfile;
use super::radix::RadixCache;
use std::collections::VecDeque;
use std::sync::Arc;
use warmpath_core::{BlockHash, KvEvent, KvTier};

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
    /// Leading blocks referenced since a KV import, until admission takes its own.
    pub(super) pinned: usize,
    /// A split request: the prompt tokens its prefill replica found cached, which its
    /// record reports as cached (the transferred ones were computed, there).
    pub prefill_hit_tokens: Option<u32>,
    /// Blocks loaded from the shared KV tier before admission (counted in `cached_blocks`
    /// once admitted).
    pub tier_blocks: u32,
    /// Blocks reserved for the uncached full prompt blocks until they are stored.
    reserved_prompt: u64,
    /// Blocks reserved for the partial tail and the output (freed at the end).
    reserved_private: u64,
    /// Decoding at the start of the current step.
    decoding: bool,
    /// Prefill tokens scheduled in the current step.
    chunk: u32,
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
            pinned: 0,
            prefill_hit_tokens: None,
            tier_blocks: 0,
            reserved_prompt: 0,
            reserved_private: 0,
            decoding: false,
            chunk: 0,
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
    /// Blocks reserved but not in the cache (uncached prompt blocks, tails, outputs).
    pub reserved: u64,
    /// A step is in progress.
    pub busy: bool,
    /// Duration of the step in progress, ms.
    pub step_ms: f64,
    capacity: u64,
    block_size: u32,
}

impl Replica {
    pub(super) fn new(profile: &CostProfile) -> Self {
        Self {
            cache: RadixCache::new(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            reserved: 0,
            busy: false,
            step_ms: 0.0,
            capacity: profile.kv_capacity_blocks,
            block_size: profile.block_size,
        }
    }

    /// KV blocks in use (cached or reserved).
    pub(super) fn used_blocks(&self) -> u64 {
        self.cache.len() as u64 + self.reserved
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
                    let hit = self.cache.match_len(&s.hashes).min(max_hit) as u32;
                    u64::from(s.prompt_tokens - hit * bs)
                })
                .sum::<u64>()
    }

    /// Caches the KV of `seq`'s first `upto` prompt blocks received from a prefill replica
    /// or the shared tier after the leading ones held here, evicting unreferenced blocks for room and stopping where
    /// none is left. The chain stays referenced until `seq` is admitted. Returns the blocks
    /// received; their `Stored` event and any `Removed` go to `events`.
    pub(super) fn import(
        &mut self,
        seq: &mut Seq,
        upto: usize,
        events: &mut Vec<KvEvent>,
    ) -> usize {
        let all = seq.hashes.clone();
        let chain = &all[..upto.min(all.len())];
        let held = self.cache.match_len(chain);
        self.cache.acquire(&chain[..held]);
        let want = (chain.len() - held) as u64;
        let free = self.capacity.saturating_sub(self.used_blocks());
        if want > free {
            let evicted = self.cache.evict((want - free) as usize);
            if !evicted.is_empty() {
                events.push(KvEvent::Removed {
                    hashes: evicted,
                    tier: KvTier::Device,
                });
            }
        }
        let free = self.capacity.saturating_sub(self.used_blocks());
        let end = held + want.min(free) as usize;
        let (present, new) = self.cache.insert_acquired(&chain[..end]);
        self.cache.release(&chain[..held]);
        let received = new.len();
        if !new.is_empty() {
            let parent = present.checked_sub(1).map(|i| chain[i]);
            events.push(KvEvent::Stored {
                parent,
                hashes: new,
                tier: KvTier::Device,
            });
        }
        seq.pinned = end;
        received
    }

    /// Leading blocks of `hashes` (a prompt of `prompt_tokens`) this replica would reuse now,
    /// and the most it may reuse: at least one prompt token is always computed.
    pub(super) fn local_hit(&self, hashes: &[BlockHash], prompt_tokens: u32) -> (usize, usize) {
        let max_hit = (prompt_tokens.saturating_sub(1) / self.block_size) as usize;
        (self.cache.match_len(hashes).min(max_hit), max_hit)
    }

    /// Admits waiting requests in FCFS order while the batch and the KV capacity allow,
    /// evicting unreferenced cached blocks as needed (their `Removed` events go to `events`).
    fn admit(&mut self, profile: &CostProfile, events: &mut Vec<KvEvent>) {
        let bs = self.block_size;
        while self.running.len() < profile.max_batch as usize {
            let Some(seq) = self.waiting.front() else {
                break;
            };
            // At least one prompt token is always computed (as in vLLM): cap the hit.
            let max_hit = ((seq.prompt_tokens.saturating_sub(1)) / bs) as usize;
            let hit = self.cache.match_len(&seq.hashes).min(max_hit);
            let prompt_blocks = seq.hashes.len() as u64;
            let new_prompt = prompt_blocks - hit as u64;
            let tail = (seq.prompt_tokens - prompt_blocks as u32 * bs) + seq.output_target;
            let private = tail.div_ceil(bs) as u64;
            let need = new_prompt + private;
            let hashes = seq.hashes.clone();
            self.cache.acquire(&hashes[..hit]);
            let free = self.capacity.saturating_sub(self.used_blocks());
            if need > free {
                let evicted = self.cache.evict((need - free) as usize);
                if !evicted.is_empty() {
                    events.push(KvEvent::Removed {
                        hashes: evicted,
                        tier: KvTier::Device,
                    });
                }
            }
            let free = self.capacity.saturating_sub(self.used_blocks());
            // An idle replica always takes the head request, even if it over-commits.
            if need > free && !self.running.is_empty() {
                self.cache.release(&hashes[..hit]);
                break;
            }
            let Some(mut seq) = self.waiting.pop_front() else {
                break;
            };
            self.cache.release(&hashes[..seq.pinned]);
            seq.pinned = 0;
            seq.cached_blocks = hit as u32;
            seq.remaining_prefill = seq.prompt_tokens - hit as u32 * bs;
            seq.reserved_prompt = new_prompt;
            seq.reserved_private = private;
            self.reserved += need;
            self.running.push(seq);
        }
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
        let mut budget = profile.max_prefill_tokens_per_step;
        let mut decode = 0u32;
        let mut prefill = 0u64;
        for s in &mut self.running {
            s.decoding = s.remaining_prefill == 0;
            s.chunk = 0;
            if s.decoding {
                decode += 1;
            } else if budget > 0 {
                s.chunk = s.remaining_prefill.min(budget);
                budget -= s.chunk;
                prefill += s.chunk as u64;
            }
        }
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
                    let (present, new) = self.cache.insert_acquired(&s.hashes);
                    self.cache.release(&s.hashes[..s.cached_blocks as usize]);
                    self.reserved -= s.reserved_prompt;
                    s.reserved_prompt = 0;
                    if !new.is_empty() {
                        let parent = present.checked_sub(1).map(|i| s.hashes[i]);
                        out.events.push(KvEvent::Stored {
                            parent,
                            hashes: new,
                            tier: KvTier::Device,
                        });
                    }
                }
            }
        }
        let mut i = 0;
        while i < self.running.len() {
            let s = &self.running[i];
            if s.remaining_prefill == 0 && s.produced >= s.output_target {
                let s = self.running.remove(i);
                self.cache.release(&s.hashes);
                self.reserved -= s.reserved_private;
                out.completed.push(s);
            } else {
                i += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
