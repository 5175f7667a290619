//! Shared-tier lookups: a request that misses its replica's cache first loads the run of
//! following blocks the tier holds (one lookup plus the tokens at the tier's bandwidth),
//! caches them, and only then joins the replica's queue ([`crate::sim::tier`]).

use super::Sim;
use crate::sim::replica::Seq;

impl Sim<'_> {
    /// With the tier on and `seq` missing replica `ri`'s cache: how long its lookup takes
    /// (ms) and the blocks `from..upto` it loads (`from == upto`: the tier had none of them,
    /// the lookup still costs its round trip). `None`: no tier, or nothing missing.
    pub(super) fn tier_lookup(&self, ri: usize, seq: &Seq) -> Option<(f64, usize, usize)> {
        let store = self.tier.as_ref()?;
        let (hit, max) = self.replicas[ri].local_hit(&seq.hashes, seq.prompt_tokens);
        if hit >= max {
            return None;
        }
        let run = store.run_from(&seq.hashes, hit, max - hit);
        let tokens = run as u64 * u64::from(self.block_size.0);
        Some((store.cfg().load_ms(tokens), hit, hit + run))
    }

    /// `seq`'s lookup at replica `ri` is done: the loaded blocks are cached (referenced
    /// until admission, their `Stored` event published) and it joins the queue.
    pub(super) fn tier_loaded(
        &mut self,
        now: f64,
        ri: usize,
        mut seq: Seq,
        from: usize,
        upto: usize,
    ) {
        if upto > from {
            let mut events = Vec::new();
            let received = self.replicas[ri].import(&mut seq, upto, &mut events);
            seq.tier_blocks = u32::try_from(received).unwrap_or(u32::MAX);
            self.publish(now, ri, events);
        }
        self.enqueue(now, ri, seq);
    }
}
