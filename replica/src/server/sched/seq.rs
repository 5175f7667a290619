//! One request's state inside the scheduler: its tokens, how many have K/V in pages, its
//! block table and the cache nodes it holds.

use warmpath_core::PageId;
use warmpath_core::{BlockHash, BlockSize, ChainHasher, RootSeed, TokenId};
use warmpath_kv_cache::NodeId;

/// Identifies a sequence for its whole life (across preemptions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(pub u64);

/// A sequence. `P` is the caller's per-request data (sampler, reply channel, timings).
#[derive(Debug)]
pub struct Sequence<P> {
    pub(crate) id: SeqId,
    pub(crate) tokens: Vec<TokenId>,
    pub(crate) prompt_len: usize,
    pub(crate) hasher: ChainHasher,
    /// Tokens whose K/V is in `pages`.
    pub(crate) computed: usize,
    /// Block table: page `i` holds positions `i*bs..(i+1)*bs`.
    pub(crate) pages: Vec<PageId>,
    /// Locked cache nodes for the leading `nodes.len()` pages.
    pub(crate) nodes: Vec<NodeId>,
    /// Prompt tokens served from the cache at first admission.
    pub(crate) cached_tokens: Option<usize>,
    /// Scheduler step at which it arrived.
    pub(crate) arrival_step: u64,
    /// The scheduler's work clock when it arrived (the prefill order's aging).
    pub(crate) arrival_work: u64,
    /// Arrival number (ties in the prefill order go to the earlier).
    pub(crate) arrival_no: u64,
    /// Admission counter value (newest admitted = largest).
    pub(crate) admitted: u64,
    pub(crate) preempted: u32,
    /// Caller's data.
    pub extra: P,
}

impl<P> Sequence<P> {
    /// A new sequence for `prompt`, hashing its blocks from `seed`.
    pub fn new(
        id: SeqId,
        prompt: Vec<TokenId>,
        seed: RootSeed,
        block_size: BlockSize,
        extra: P,
    ) -> Self {
        let mut hasher = ChainHasher::new(seed, block_size);
        hasher.extend(&prompt);
        Self {
            id,
            prompt_len: prompt.len(),
            tokens: prompt,
            hasher,
            computed: 0,
            pages: Vec::new(),
            nodes: Vec::new(),
            cached_tokens: None,
            arrival_step: 0,
            arrival_work: 0,
            arrival_no: 0,
            admitted: 0,
            preempted: 0,
            extra,
        }
    }

    /// The sequence id.
    pub fn id(&self) -> SeqId {
        self.id
    }

    /// Prompt then generated tokens.
    pub fn tokens(&self) -> &[TokenId] {
        &self.tokens
    }

    /// Prompt length.
    pub fn prompt_len(&self) -> usize {
        self.prompt_len
    }

    /// Generated tokens so far.
    pub fn generated(&self) -> &[TokenId] {
        &self.tokens[self.prompt_len..]
    }

    /// The block table.
    pub fn pages(&self) -> &[PageId] {
        &self.pages
    }

    /// Tokens with K/V in pages.
    pub fn computed(&self) -> usize {
        self.computed
    }

    /// Prompt tokens that came from the cache (0 before admission).
    pub fn cached_tokens(&self) -> usize {
        self.cached_tokens.unwrap_or(0)
    }

    /// Times this sequence was preempted.
    pub fn preemptions(&self) -> u32 {
        self.preempted
    }

    /// Hashes of the full blocks of its tokens.
    pub fn block_hashes(&self) -> &[BlockHash] {
        self.hasher.hashes()
    }

    /// Tokens a running sequence computes before it samples again, when that is more than
    /// a decode's one: the rest of its prompt, or after a preemption the prompt and the
    /// tokens it had generated (0 while it decodes).
    pub fn prefill_left(&self) -> usize {
        match self.tokens.len().saturating_sub(self.computed) {
            1 => 0,
            n => n,
        }
    }

    /// Prompt tokens not yet computed.
    pub fn pending_prefill(&self) -> usize {
        self.prompt_len.saturating_sub(self.computed)
    }
}
