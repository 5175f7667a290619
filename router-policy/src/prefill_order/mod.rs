//! The order in which a replica serves its prefills: one rule for the replica's scheduler
//! and the simulator's replica model, so both make the same decisions.
//!
//! Two orders:
//! - [`PrefillOrder::Fcfs`]: arrival order; a running prefill takes as much of a step's
//!   token budget as it can before the next one gets any (so a short prompt waits behind a
//!   long one's whole prefill).
//! - [`PrefillOrder::Shortest`]: shortest uncached prefill first, aged. Every candidate (a
//!   waiting request or a running prefill) has the key
//!   `arrival_work + slack x remaining_uncached_tokens`, where `arrival_work` is the
//!   replica's [`WorkClock`] (tokens computed since it started) when the request arrived,
//!   and the lowest key goes first (ties in arrival order). A candidate's key only falls as
//!   its prefill progresses, and every request arriving later has a key of at least the
//!   clock at its arrival. Hence the **starvation bound**: once the replica has computed
//!   `slack x c` tokens since a request with `c` uncached tokens arrived, no request that
//!   arrives afterwards is ordered ahead of it; only work already present can be. `slack`
//!   0 is arrival order (by work clock); the larger the slack, the closer to plain
//!   shortest-first (which has no bound).
//!
//! A replica that chunks prefills by step time (a CPU replica's `--step-target-ms`) ranks
//! with [`PrefillOrder::rank_short_first`]: a **short** prompt (its whole uncached prefill
//! fits one step) goes before long prompts' chunks even when the key would put a long
//! prompt's last chunks first (its few tokens left, aged by its own progress), unless the
//! long prompt is overdue (the starvation bound above has passed for it). A short chat
//! then waits for the step in flight only, and the bound still holds. The simulator's
//! replicas do not chunk by time, so they rank with [`PrefillOrder::rank`].
//!
//! A step is packed by [`Packer`]: candidates in rank order each get
//! `min(remaining, budget left)` tokens; under `Shortest`, once a candidate finishes its
//! prefill in the step, the step closes at the first lower-ranked one that would not
//! finish: the step that yields a short prompt's first token is not stretched by a long
//! prompt's chunk, and nothing ranked after a candidate left out is served before it.

#[cfg(test)]
mod tests;

/// How a replica orders waiting and prefilling work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefillOrder {
    /// First come, first served.
    Fcfs,
    /// Shortest uncached prefill first, aged by `slack` (see the module docs).
    Shortest {
        /// Tokens of work a request's key is deferred per uncached token it has.
        slack: u32,
    },
}

impl Default for PrefillOrder {
    fn default() -> Self {
        Self::shortest(DEFAULT_SLACK)
    }
}

/// The slack of `Shortest` unless configured: a request may be passed by later arrivals
/// for at most twice its own uncached prefill's work.
pub const DEFAULT_SLACK: u32 = 2;

impl PrefillOrder {
    /// `Shortest { slack }`.
    pub fn shortest(slack: u32) -> Self {
        Self::Shortest { slack }
    }

    /// The slack of a shortest-first order, `None` for FCFS.
    pub fn slack(self) -> Option<u32> {
        match self {
            Self::Fcfs => None,
            Self::Shortest { slack } => Some(slack),
        }
    }

    /// The name used in flags and reports: `fcfs` or `shortest`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fcfs => "fcfs",
            Self::Shortest { .. } => "shortest",
        }
    }

    /// The sort key of a candidate (lowest first): see the module docs. Under FCFS the key
    /// is the arrival alone.
    pub fn key(self, c: &Candidate) -> (u64, u64) {
        match self.slack() {
            None => (c.arrival, 0),
            Some(s) => (
                c.arrival_work
                    .saturating_add(u64::from(s).saturating_mul(c.remaining)),
                c.arrival,
            ),
        }
    }

    /// Positions of `cands` in the order they are served.
    pub fn rank(self, cands: &[Candidate]) -> Vec<usize> {
        let mut ix: Vec<usize> = (0..cands.len()).collect();
        ix.sort_by_key(|&i| (self.key(&cands[i]), i));
        ix
    }

    /// [`Self::rank`], then (under `Shortest`) every short candidate (`size <= short`)
    /// moved ahead of the long ones that are not overdue at work clock `clock` (those whose
    /// `arrival_work + slack x size` is still ahead of it); order is kept within each
    /// group: overdue long ones, short ones, the rest.
    pub fn rank_short_first(self, cands: &[Candidate], short: u64, clock: u64) -> Vec<usize> {
        let ranked = self.rank(cands);
        let Some(s) = self.slack() else {
            return ranked;
        };
        let overdue = |c: &Candidate| {
            c.size > short
                && c.arrival_work
                    .saturating_add(u64::from(s).saturating_mul(c.size))
                    <= clock
        };
        let group = |i: &usize| {
            let c = &cands[*i];
            if overdue(c) {
                0
            } else if c.size.max(c.remaining) <= short {
                1
            } else {
                2
            }
        };
        let mut out = ranked;
        out.sort_by_key(group); // stable: rank order within a group
        out
    }

    /// A packer for one step with `budget` tokens.
    pub fn packer(self, budget: u64) -> Packer {
        Packer {
            order: self,
            left: budget,
            finished: false,
            closed: false,
        }
    }
}

/// What the order needs to know of one waiting request or running prefill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Arrival order (a sequence number or a time; smaller arrived first).
    pub arrival: u64,
    /// The replica's [`WorkClock`] when it arrived.
    pub arrival_work: u64,
    /// Prompt tokens it still has to compute (its cached prefix excluded).
    pub remaining: u64,
    /// Uncached prompt tokens it had when admitted (its whole prefill); equal to
    /// `remaining` while it waits.
    pub size: u64,
}

/// Tokens a replica has computed since it started (prefill and decode): the clock the aging
/// of [`PrefillOrder::Shortest`] runs on, so the bound is in work, whatever a step costs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct WorkClock(pub u64);

impl WorkClock {
    /// Advances by `tokens` computed.
    pub fn advance(&mut self, tokens: u64) {
        self.0 = self.0.saturating_add(tokens);
    }
}

/// Hands out one step's token budget to prefills in rank order (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Packer {
    order: PrefillOrder,
    left: u64,
    finished: bool,
    closed: bool,
}

impl Packer {
    /// Budget still to hand out.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// The chunk the next candidate in rank order would get for its `remaining` tokens (0:
    /// none this step). Call [`Packer::commit`] once it is really scheduled.
    pub fn offer(&self, remaining: u64) -> u64 {
        let len = remaining.min(self.left);
        let finishes = len == remaining;
        if self.closed || (self.finished && !finishes && self.order.slack().is_some()) {
            return 0;
        }
        len
    }

    /// Records that the candidate offered [`Packer::offer`]`(remaining)` got `len` tokens
    /// this step. A candidate with work left that got none closes the step under
    /// `Shortest` (no lower-ranked candidate is served before it). A candidate the caller
    /// could not schedule for its own reasons (no batch slot, no pages) is not committed.
    pub fn commit(&mut self, remaining: u64, len: u64) {
        self.left = self.left.saturating_sub(len);
        if len > 0 && len == remaining {
            self.finished = true;
        }
        if len == 0 && remaining > 0 && self.order.slack().is_some() {
            self.closed = true;
        }
    }
}
