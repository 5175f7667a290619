//! The engine loop's side of the shared KV tier: after each step, the full blocks each
//! sequence newly computed go to the tier's queue ([`TierSink`]). Blocks a sequence found
//! cached (its own earlier work, a prefill replica's or the tier's) are not written again;
//! a full queue drops blocks before their page is read. A sequence the gateway turned the
//! tier off for (data residency, `x-warmpath-kv-tier-off`) writes nothing.

use super::Loop;
use crate::server::kv::record::record_layout;
use crate::server::sched::PlanItem;

impl Loop {
    /// Offers the blocks the step just cached to the tier.
    pub(super) fn write_tier(&mut self, items: &[PlanItem]) {
        let Some(sink) = self.tier.clone() else {
            return;
        };
        let bs = self.block_size.get();
        let bytes = record_layout(self.engine.kv_layout()).record_bytes() as u64;
        for it in items {
            let Some(seq) = self.sched.get(it.id).filter(|s| s.extra.tier) else {
                continue;
            };
            let hashes = seq.hasher.hashes();
            let full = seq
                .nodes
                .len()
                .min(hashes.len())
                .min(seq.tokens().len() / bs);
            let from = seq.extra.tier_next.max(seq.cached_tokens() / bs);
            let mut next = from;
            for i in from..full {
                next = i + 1;
                if !sink.has_room(bytes) {
                    continue;
                }
                match self.exported_block(seq, i) {
                    Ok(b) => sink.push(b, bytes),
                    Err(e) => {
                        tracing::warn!(error = %e, "KV tier write stopped");
                        break;
                    }
                }
            }
            if let Some(seq) = self.sched.get_mut(it.id) {
                seq.extra.tier_next = seq.extra.tier_next.max(next);
            }
        }
    }
}
