//! The simulated replica's prefill order: the replica's own rule
//! ([`router_policy::prefill_order`]) applied to the model's waiting queue (admission
//! order) and to its running prefills (who gets a step's chunk budget).

use super::{Replica, Seq};
use router_policy::prefill_order::{Candidate, PrefillOrder};

impl Replica {
    /// Queues `seq` on arrival, stamped with the replica's work clock and arrival number.
    pub(in crate::sim) fn enqueue(&mut self, mut seq: Seq) {
        seq.arrival_work = self.clock.0;
        seq.arrival_no = self.arrivals;
        self.arrivals += 1;
        self.waiting.push_back(seq);
    }

    /// Uncached prompt tokens admission would compute for waiting `seq` now.
    fn uncached(&self, seq: &Seq) -> u64 {
        let (hit, _) = self.local_hit(&seq.hashes, seq.prompt_tokens);
        u64::from(seq.prompt_tokens).saturating_sub(hit as u64 * u64::from(self.block_size))
    }

    /// Sorts the waiting queue into admission order (a no-op under FCFS: it is kept in
    /// arrival order).
    pub(super) fn order_waiting(&mut self) {
        if self.order == PrefillOrder::Fcfs || self.waiting.len() < 2 {
            return;
        }
        let cands: Vec<Candidate> = self
            .waiting
            .iter()
            .map(|s| {
                let c = self.uncached(s);
                candidate(s, c, c)
            })
            .collect();
        let ranked = self.order.rank(&cands);
        let mut old: Vec<Option<Seq>> = self.waiting.drain(..).map(Some).collect();
        self.waiting
            .extend(ranked.into_iter().filter_map(|i| old[i].take()));
    }

    /// Gives the running prefills their chunks of a step's `budget`, in order; returns the
    /// prompt tokens scheduled. Decoding sequences must be marked already.
    pub(super) fn plan_chunks(&mut self, budget: u32) -> u64 {
        let prefilling: Vec<usize> = (0..self.running.len())
            .filter(|&i| !self.running[i].decoding)
            .collect();
        let ranked: Vec<usize> = if self.order == PrefillOrder::Fcfs {
            prefilling
        } else {
            let cands: Vec<Candidate> = prefilling
                .iter()
                .map(|&i| {
                    let s = &self.running[i];
                    let size = s.prompt_tokens - s.cached_blocks * self.block_size;
                    candidate(s, u64::from(s.remaining_prefill), u64::from(size))
                })
                .collect();
            self.order
                .rank(&cands)
                .into_iter()
                .map(|k| prefilling[k])
                .collect()
        };
        let mut packer = self.order.packer(u64::from(budget));
        let mut total = 0;
        for i in ranked {
            let s = &mut self.running[i];
            let remaining = u64::from(s.remaining_prefill);
            let len = packer.offer(remaining);
            packer.commit(remaining, len);
            s.chunk = u32::try_from(len).unwrap_or(u32::MAX);
            total += len;
        }
        total
    }
}

fn candidate(s: &Seq, remaining: u64, size: u64) -> Candidate {
    Candidate {
        arrival: s.arrival_no,
        arrival_work: s.arrival_work,
        remaining,
        size,
    }
}
