//! The load read from an engine's `/metrics` page ([`EngineLoad`], with what it lacks and
//! why: [`Missing`]), and that load as the [`ReplicaLoad`] the routing policies read
//! ([`EngineLoad::to_replica_load`]).
//!
//! The policies count KV in the gateway's blocks (`ReplicaInfo::block_size` tokens each):
//! `warm` adds a request's uncached blocks to `kv_used_blocks` and compares the sum with
//! `kv_total_blocks`, so both are in those blocks here. The total is the engine's own
//! capacity when its page gives one (vLLM, SGLang), in the gateway's blocks; else the
//! capacity the replica was registered with; the used blocks are the usage ratio times that
//! total. With no capacity at all the ratio is expressed against [`RATIO_SCALE_BLOCKS`]: the
//! usage fraction is right, but a request's blocks then weigh as if the cache held that many.
//! With no usage (llama.cpp) both stay 0, "unknown": the snapshot falls back to the registered
//! capacity and sees no blocks in use.
//!
//! Engines do not report prompt tokens still to prefill, decode throughput or steps: those
//! stay 0, which the policies read as unknown (they use their defaults). The prefill rate
//! comes from the engine's prefill counters where it has them (llama.cpp: prompt tokens
//! computed and the seconds spent on them), over the window between two scrapes
//! ([`PrefillRate`]). It is the speed of one request's prefill as the engine times it: with
//! several prompts prefilled in one batch each is timed whole, so the rate reads low and
//! `warm` sees queues as longer than they are (it spreads sooner), never shorter.

use std::fmt;
use warmpath_core::BlockSize;
use warmpath_protocol::replica_api::ReplicaLoad;

/// A field of [`EngineLoad`] left at 0 or `None`, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Missing {
    /// The field.
    pub field: &'static str,
    /// Why it is unknown.
    pub reason: String,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

/// An engine's load, read from one `/metrics` page.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct EngineLoad {
    /// Requests being computed, over all engine instances.
    pub running: u32,
    /// Requests admitted but waiting (queued, or deferred for a free slot).
    pub waiting: u32,
    /// Fraction of the KV cache in use, `0..=1`, averaged over engine instances.
    pub kv_usage: Option<f64>,
    /// KV cache capacity in tokens, over all engine instances.
    pub kv_capacity_tokens: Option<u64>,
    /// Prompt tokens since the engine started, cached ones included (a counter).
    pub prompt_tokens_total: Option<f64>,
    /// Prompt tokens served from the prefix cache since the engine started (a counter).
    pub cached_prompt_tokens_total: Option<f64>,
    /// Prompt tokens computed (not reused) and the seconds spent computing them since the
    /// engine started (counters), where the engine times its prefills.
    pub prefill: Option<PrefillCounters>,
    /// The LoRA adapters it reports serving (`None`: it reports none).
    pub adapters: Option<super::lora::AdapterReport>,
    /// Fields left at 0 or `None`, and why.
    pub missing: Vec<Missing>,
}

/// The block count a KV usage ratio is expressed against when no capacity is known.
pub(crate) const RATIO_SCALE_BLOCKS: u64 = 10_000;

impl EngineLoad {
    /// The load in the policies' terms. `block_size`: tokens per block of the gateway's
    /// hashing; `registered_blocks`: the replica's capacity as registered
    /// (`ReplicaInfo::capacity_blocks`), 0 when unknown.
    /// `prefill_tokens_per_s`: the rate [`PrefillRate`] measured, 0 when unknown.
    pub(crate) fn to_replica_load(
        &self,
        block_size: BlockSize,
        registered_blocks: u64,
        prefill_tokens_per_s: f64,
    ) -> ReplicaLoad {
        let (kv_used_blocks, kv_total_blocks) = match self.kv_usage {
            Some(usage) => {
                let total = self.capacity_blocks(block_size, registered_blocks);
                let used = (usage.clamp(0.0, 1.0) * total as f64).round() as u64;
                (used.min(total), total)
            }
            None => (0, 0),
        };
        ReplicaLoad {
            running: self.running,
            waiting: self.waiting,
            queued_prefill_tokens: 0,
            kv_used_blocks,
            kv_total_blocks,
            prefill_tokens_per_s,
            decode_tokens_per_s: 0.0,
            steps: 0,
            tier_tokens_per_s: 0.0,
        }
    }

    /// The KV capacity in blocks of `block_size` tokens: the engine's, else the registered
    /// one, else [`RATIO_SCALE_BLOCKS`].
    fn capacity_blocks(&self, block_size: BlockSize, registered_blocks: u64) -> u64 {
        let tokens_per_block = u64::from(block_size.0.max(1));
        self.kv_capacity_tokens
            .map(|tokens| tokens / tokens_per_block)
            .filter(|&blocks| blocks > 0)
            .or((registered_blocks > 0).then_some(registered_blocks))
            .unwrap_or(RATIO_SCALE_BLOCKS)
    }
}

/// An engine's prefill counters: prompt tokens computed and seconds spent computing them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PrefillCounters {
    /// Prompt tokens computed (cache hits left out).
    pub tokens: f64,
    /// Seconds spent prefilling them.
    pub seconds: f64,
}

/// Less prefill time than this between two scrapes keeps the previous rate.
const MIN_WINDOW_S: f64 = 0.05;
/// Fewer prompt tokens than this keep the previous rate too: engines time a short prompt
/// with their fixed per-request costs (llama.cpp: 38 tokens in 0.66 s in this crate's
/// fixture, a tenth of its rate on long prompts), and such a rate made `warm` send every
/// new prefix to the other replica.
const MIN_WINDOW_TOKENS: f64 = 256.0;

/// One engine's prefill rate, from its counters scrape after scrape: over the window since
/// the last scrape that closed one (a window closes once it holds [`MIN_WINDOW_TOKENS`] and
/// [`MIN_WINDOW_S`] of prefill), else the engine's lifetime average once that is as large;
/// 0 (unknown) before. An engine restart (a counter going back) starts over.
#[derive(Clone, Debug, Default)]
pub(crate) struct PrefillRate {
    last: Option<PrefillCounters>,
    rate: f64,
}

impl PrefillRate {
    /// Takes a scrape's counters (`None`: the engine does not time its prefills); returns
    /// the rate in tokens per second, 0 when unknown.
    pub(crate) fn update(&mut self, now: Option<PrefillCounters>) -> f64 {
        let Some(now) = now else {
            *self = Self::default();
            return 0.0;
        };
        match self.last {
            Some(l) if now.tokens >= l.tokens && now.seconds >= l.seconds => {
                // Too little prefill since the window opened: it stays open.
                if now.seconds - l.seconds >= MIN_WINDOW_S
                    && now.tokens - l.tokens >= MIN_WINDOW_TOKENS
                {
                    self.rate = (now.tokens - l.tokens) / (now.seconds - l.seconds);
                    self.last = Some(now);
                }
            }
            // The first scrape, or the engine restarted.
            _ => {
                self.rate = if now.seconds >= MIN_WINDOW_S && now.tokens >= MIN_WINDOW_TOKENS {
                    now.tokens / now.seconds
                } else {
                    0.0
                };
                self.last = Some(now);
            }
        }
        self.rate
    }
}
