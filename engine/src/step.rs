//! [`StepItem`]: one sequence's part of a ragged batched step.

use warmpath_core::TokenId;

use crate::kv::PageId;

/// One sequence's part of a step.
#[derive(Clone, Copy, Debug)]
pub struct StepItem<'a> {
    /// New tokens to compute (a prefill chunk, or one decode token).
    pub tokens: &'a [TokenId],
    /// Position of `tokens[0]`; K/V for positions `0..start_pos` are already in `pages`.
    pub start_pos: usize,
    /// Block table covering positions `0..start_pos + tokens.len()`.
    pub pages: &'a [PageId],
}
