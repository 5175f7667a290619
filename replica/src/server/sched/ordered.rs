//! Prefill planning under `PrefillOrder::Shortest`: running prefills and waiting
//! sequences are one list ranked by `router_policy::prefill_order` (shortest uncached
//! prefill first, aged on the scheduler's work clock), and the step's budget left after the
//! decodes is handed out in that order by its [`Packer`](router_policy::Packer): a short
//! prompt that arrives while a long one prefills is admitted at the next step, alone with
//! the decodes, instead of waiting for the long prefill to end.

use super::{reusable_hashes, Plan, PlanItem, Scheduler, SeqId, PEEK_LIMIT};
use router_policy::prefill_order::Candidate;

/// A prefill candidate: running (holds pages) or waiting.
#[derive(Clone, Copy)]
enum Cand {
    Running(SeqId),
    Waiting(SeqId),
}

impl<P> Scheduler<P> {
    /// Plans prefills after the decodes of this step took their share of `budget`; the
    /// first-ranked one gets its whole prefill when that is at most `stretch` tokens.
    pub(super) fn plan_prefills_ordered(
        &mut self,
        budget: &mut usize,
        stretch: usize,
        plan: &mut Plan<P>,
    ) {
        let order = self.cfg.order;
        let (cands, keys) = self.prefill_candidates();
        // Chunked by step time: a short prompt (one step's worth, `stretch`) goes before
        // long prompts' chunks that are not overdue (`PrefillOrder::rank_short_first`).
        let ranked = if self.prefill_cap < usize::MAX {
            order.rank_short_first(&keys, stretch as u64, self.clock.0)
        } else {
            order.rank(&keys)
        };
        if let Some(&top) = ranked.first() {
            // A short prompt (its whole prefill within `stretch`) is not split: its first
            // token comes a step sooner. A long one's last tokens are chunked as usual,
            // so no step runs long while a short prompt may arrive behind it.
            let whole = keys[top].remaining as usize;
            if whole > *budget && keys[top].size as usize <= stretch {
                *budget = whole;
            }
        }
        let mut packer = order.packer(*budget as u64);
        let mut admission_open = true;
        for k in ranked {
            if plan.preempted > 0 || packer.left() == 0 {
                break;
            }
            let remaining = keys[k].remaining;
            match cands[k] {
                Cand::Running(id) => {
                    let len = packer.offer(remaining) as usize;
                    if len == 0 {
                        packer.commit(remaining, 0);
                        continue;
                    }
                    let before = *budget;
                    let mut cap = len;
                    self.plan_running(id, &mut cap, plan);
                    // `cap` comes back less what was planned, plus any preempted item's.
                    *budget = before - len + cap;
                    let got = plan
                        .items
                        .iter()
                        .find(|it| it.id == id)
                        .map_or(0, |it| it.len as u64);
                    packer.commit(remaining, got);
                }
                Cand::Waiting(id) => {
                    if !admission_open || self.running.len() >= self.cfg.max_running {
                        continue;
                    }
                    admission_open = self.admit_one(id, &mut packer, budget, plan);
                }
            }
        }
    }

    /// Every running prefill and waiting sequence with its ordering facts.
    fn prefill_candidates(&self) -> (Vec<Cand>, Vec<Candidate>) {
        let bs = self.cfg.block_size.get();
        let mut cands = Vec::new();
        let mut keys = Vec::new();
        // A preempted sequence recomputes its generated tokens too: past its prompt's end
        // it is still prefilling, not decoding, until one token is left.
        for s in self.running.iter().filter(|s| s.prefill_left() > 0) {
            cands.push(Cand::Running(s.id));
            let size = s.tokens.len() - s.cached_tokens.unwrap_or(0).min(s.tokens.len());
            keys.push(Candidate {
                arrival: s.arrival_no,
                arrival_work: s.arrival_work,
                remaining: s.prefill_left() as u64,
                size: size as u64,
            });
        }
        for (i, s) in self.waiting.iter().enumerate() {
            // Long queues skip the cache lookup (its cost grows with the queue).
            let cached = if i < PEEK_LIMIT {
                self.cache.peek_prefix_len(reusable_hashes(s, bs)) * bs
            } else {
                0
            };
            cands.push(Cand::Waiting(s.id));
            let remaining = s.tokens.len().saturating_sub(cached) as u64;
            keys.push(Candidate {
                arrival: s.arrival_no,
                arrival_work: s.arrival_work,
                remaining,
                size: remaining,
            });
        }
        (cands, keys)
    }

    /// Admits waiting sequence `id` with the chunk `packer` offers it. Returns whether
    /// admission may go on this step (false once pages ran out).
    fn admit_one(
        &mut self,
        id: SeqId,
        packer: &mut router_policy::Packer,
        budget: &mut usize,
        plan: &mut Plan<P>,
    ) -> bool {
        let bs = self.cfg.block_size.get();
        let Some(idx) = self.waiting.iter().position(|s| s.id == id) else {
            return true;
        };
        let seq = &self.waiting[idx];
        let hashes = reusable_hashes(seq, bs).to_vec();
        let total = seq.tokens.len();
        let nodes = self.cache.match_prefix(&hashes);
        let start = nodes.len() * bs;
        let remaining = (total - start) as u64;
        let len = packer.offer(remaining) as usize;
        if len == 0 {
            packer.commit(remaining, 0);
            return true;
        }
        self.cache.lock(&nodes);
        let need = self.pages_for(start + len) - nodes.len();
        let Some(new_pages) = self.cache.alloc(need) else {
            self.cache.unlock(&nodes);
            if self.running.is_empty() {
                // Nothing else holds pages and it still does not fit.
                if let Some(seq) = self.waiting.remove(idx) {
                    plan.failed.push(seq);
                }
            }
            return false;
        };
        let mut seq = self.waiting.remove(idx).expect("present");
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
            id,
            start,
            len,
            sample: start + len == total,
        });
        packer.commit(remaining, len as u64);
        *budget -= len;
        self.running.push(seq);
        true
    }
}
