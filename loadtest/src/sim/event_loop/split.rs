//! Split requests in a role-split pool: the prompt is prefilled on the prefill replica the
//! gateway chose (a prefill-only sequence, whose blocks it caches and publishes), its KV
//! streams to the decode replica ([`crate::sim::disagg::DisaggSim::transfer_done_ms`]),
//! which caches the blocks it received and then serves the request as usual, the imported
//! blocks counting as cached.

use super::{Sim, Split};
use crate::sim::disagg::Transfer;
use crate::sim::events::Event;
use crate::sim::replica::{Job, Seq};
use warmpath_core::ReplicaId;

impl Sim<'_> {
    /// Gateway `gateway` sends request `seq` to decode replica `decode`, naming prefill
    /// replica `prefill`: the prefill replica is recorded as holding the prompt (as the
    /// gateway does: the decode replica's own `Stored` events after the import say when it
    /// holds it), the decode replica counts it in flight, and the prefill runs first.
    pub(super) fn dispatch_split(
        &mut self,
        now: f64,
        gateway: usize,
        decode: ReplicaId,
        prefill: ReplicaId,
        seq: Seq,
    ) {
        let Job::Request(i) = seq.job else {
            self.dispatch(now, gateway, decode, seq);
            return;
        };
        self.record_route(now, gateway, prefill, &seq.hashes);
        self.router.sent(gateway, decode.0 as usize);
        self.outstanding += 1;
        let job = Seq::new(
            Job::Prefill(i),
            seq.hashes.clone(),
            seq.prompt_tokens,
            1,
            now,
        );
        self.splits.insert(
            i,
            Split {
                prefill,
                decode,
                seq,
                prefill_cached_tokens: 0,
                prefill_done_ms: 0.0,
            },
        );
        self.enqueue(now, prefill.0 as usize, job);
    }

    /// Request `i`'s prefill (`done`) ended on its prefill replica: the transfer's end is
    /// scheduled from the prefill's timeline and the blocks the decode replica lacks.
    pub(super) fn prefill_done(&mut self, now: f64, i: usize, done: &Seq) {
        let (Some(split), Some(d)) = (self.splits.get_mut(&i), self.cfg.disagg.as_ref()) else {
            return;
        };
        let bs = self.block_size.0;
        split.prefill_cached_tokens = done.cached_blocks * bs;
        split.prefill_done_ms = now;
        let dec = &self.replicas[split.decode.0 as usize];
        let held = dec.cache.peek_prefix_len(&split.seq.hashes);
        let send = (split.seq.hashes.len() - held) as u64 * u64::from(bs);
        let started = if done.prefill_started_ms >= 0.0 {
            done.prefill_started_ms
        } else {
            now
        };
        let at = d.transfer_done_ms(started, now, u64::from(done.last_chunk), send);
        self.queue.push(at.max(now), Event::TransferDone(i));
    }

    /// Request `i`'s KV reached its decode replica: the blocks are cached there (their
    /// `Stored` event published) and the request joins the decode replica's queue.
    pub(super) fn transfer_done(&mut self, now: f64, i: usize) {
        let Some(mut split) = self.splits.remove(&i) else {
            return;
        };
        let di = split.decode.0 as usize;
        let mut events = Vec::new();
        let received = self.replicas[di].import(&mut split.seq, usize::MAX, &mut events);
        self.publish(now, di, events);
        self.transfers.push(Transfer {
            request: i,
            prefill: split.prefill,
            decode: split.decode,
            prefill_cached_tokens: split.prefill_cached_tokens,
            transferred_tokens: received as u32 * self.block_size.0,
            exposed_ms: now - split.prefill_done_ms,
        });
        split.seq.prefill_hit_tokens = Some(split.prefill_cached_tokens);
        self.enqueue(now, di, split.seq);
    }
}
