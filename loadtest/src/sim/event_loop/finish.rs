//! Step ends: finished sequences leave their replica; a request gets its record (a remote
//! region's round trip added once to TTFT and end-to-end latency), a pre-warm prompt moves
//! the rollout's ramp.

use super::Sim;
use crate::metrics::RequestRecord;
use crate::sim::config::RegionIx;
use crate::sim::replica::{Job, Seq};
use crate::workload::LoadShape;
use warmpath_core::ReplicaId;

impl Sim<'_> {
    pub(super) fn step_end(&mut self, now: f64, r: ReplicaId) {
        let ri = r.0 as usize;
        let mut out = self.replicas[ri].finish_step(now);
        if let Some(t) = &mut self.tier {
            let shared = t.write_through(&out.events);
            out.events.extend(shared);
        }
        self.publish(now, ri, out.events);
        let closed = matches!(self.workload.shape, LoadShape::Closed { .. });
        for s in out.completed {
            self.outstanding -= 1;
            match s.job {
                Job::Prewarm(_) => {
                    self.router.finished(0, ri);
                    if let Some(r) = &mut self.rollout {
                        r.prewarm_finished(now);
                    }
                    self.send_prewarm(now);
                }
                Job::Prefill(i) => {
                    self.outstanding += 1; // the request goes on, to its decode replica
                    self.prefill_done(now, i, &s);
                }
                Job::Request(i) => {
                    self.complete(i, ri, &s);
                    self.release_slot(now, i);
                    if closed {
                        self.issue_closed(now);
                    }
                }
            }
        }
        self.start_step(now, ri);
        self.refresh_if_fresh(ri);
    }

    /// Records request `i`, served by replica `ri`: a remote region's round trip is added
    /// once to its TTFT and end-to-end latency.
    pub(super) fn complete(&mut self, i: usize, ri: usize, s: &Seq) {
        self.finished += 1;
        let Some(routed) = self.routed[i] else {
            return;
        };
        self.router.finished(routed.gateway, ri);
        let origin = self.router.home_of(routed.gateway);
        let served = self.router.region_of(ri);
        let regions = self.cfg.regions.as_ref();
        let rtt = match (regions, origin, served) {
            (Some(g), Some(o), Some(sv)) => g.rtt_ms(o, sv),
            _ => 0.0,
        };
        let name = |ix: Option<RegionIx>| Some(regions?.names[ix?.get()].clone());
        let spec = &self.workload.requests[i];
        let role = self.cfg.disagg.as_ref().map(|d| d.role(ri));
        if role == Some(warmpath_core::ReplicaRole::Decode) {
            self.decode_served += 1;
            let cached = s.cached_blocks * self.block_size.0;
            self.decode_computed_tokens += u64::from(s.prompt_tokens.saturating_sub(cached));
        }
        self.records[i] = Some(RequestRecord {
            id: spec.id,
            group: spec.group,
            replica: Some(ReplicaId(ri as u32).to_string()),
            start_ms: s.arrival_ms,
            ttft_ms: Some(s.first_token_ms - s.arrival_ms + rtt),
            e2el_ms: s.last_token_ms - s.arrival_ms + rtt,
            itls_ms: s.itls.clone(),
            prompt_tokens: s.prompt_tokens,
            output_tokens: s.produced,
            cached_tokens: s
                .prefill_hit_tokens
                .unwrap_or(s.cached_blocks * self.block_size.0),
            tier_cached_tokens: s.tier_blocks.min(s.cached_blocks) * self.block_size.0,
            predicted_cached_tokens: Some(routed.predicted_tokens),
            route_branch: Some(routed.branch),
            origin_region: name(origin),
            served_region: name(served),
            rtt_ms: regions.map(|_| rtt),
            checkpoint: self
                .rollout
                .as_ref()
                .map(|_| self.checkpoints[usize::from(routed.checkpoint.0)].0.clone()),
            class: spec.class,
            error: None,
            error_detail: None,
        });
    }
}
