//! Arrivals: the checkpoint (in a rollout), the block hashes, the gateway's decision, and
//! the hand-off to the chosen replica; and the rollout's start (the pre-warm replay).

use super::{Routed, Sim};
use crate::metrics::{ErrorKind, RequestRecord};
use crate::sim::events::Event;
use crate::sim::gateway::Ask;
use crate::sim::replica::{Job, Seq};
use crate::sim::rollout::{NEW, OLD};
use crate::workload::LoadShape;
use std::sync::Arc;
use warmpath_core::{block_hashes, BlockHash, Millis, ReplicaId};

impl Sim<'_> {
    /// The gateway that decides request `i`: its origin region's, else the next in turn.
    pub(super) fn gateway_for(&self, i: usize) -> usize {
        let k = self.router.gateways.len();
        match &self.cfg.regions {
            Some(g) => g.origins.get(i).map_or(i % k, |o| o.get().min(k - 1)),
            None => i % k,
        }
    }

    /// Routes request `i` at `now` (it reached the gateway at `arrived`: its TTFT counts
    /// from then) and hands it to the chosen replica.
    pub(super) fn route_request(&mut self, now: f64, i: usize, arrived: f64) {
        let spec = &self.workload.requests[i];
        let ck = match &mut self.rollout {
            Some(r) => r.checkpoint_for(spec, self.block_size, now),
            None => OLD,
        };
        let gateway = self.gateway_for(i);
        let (id, _, hasher) = &mut self.checkpoints[usize::from(ck.0)];
        let hashes: Arc<[BlockHash]> = hasher.hashes(&spec.prompt).into();
        let prompt_tokens = spec.prompt_tokens();
        let ask = Ask {
            checkpoint: id,
            hashes: &hashes,
            prompt_tokens,
            block_size: self.block_size,
            now_ms: now,
        };
        let decision = match self.router.route(gateway, &ask) {
            Ok(d) => d,
            Err(e) => {
                let origin = self.cfg.regions.as_ref().zip(self.router.home_of(gateway));
                self.records[i] = Some(RequestRecord {
                    id: spec.id,
                    group: spec.group,
                    start_ms: arrived,
                    prompt_tokens,
                    origin_region: origin.map(|(g, o)| g.names[o.get()].clone()),
                    class: spec.class,
                    error: Some(ErrorKind::NoReplica),
                    error_detail: Some(e.to_string()),
                    ..RequestRecord::default()
                });
                self.finished += 1;
                if matches!(self.workload.shape, LoadShape::Closed { .. }) {
                    self.issue_closed(now);
                }
                self.release_slot(now, i);
                return;
            }
        };
        self.routed[i] = Some(Routed {
            gateway,
            predicted_tokens: decision.predicted_cached_blocks * self.block_size.0,
            branch: decision.explanation.branch.as_str(),
            checkpoint: ck,
        });
        let seq = Seq::new(
            Job::Request(i),
            hashes,
            prompt_tokens,
            spec.output_tokens,
            arrived,
        );
        match decision.explanation.prefill {
            Some(p) => self.dispatch_split(now, gateway, decision.replica, p.replica, seq),
            None => self.dispatch(now, gateway, decision.replica, seq),
        }
    }

    /// Records the route in the gateway's index (and the shared history) and queues `seq`
    /// (after a shared-tier lookup on a local miss, when the tier is on).
    pub(super) fn dispatch(&mut self, now: f64, gateway: usize, r: ReplicaId, seq: Seq) {
        self.record_route(now, gateway, r, &seq.hashes);
        self.router.sent(gateway, r.0 as usize);
        self.outstanding += 1;
        match self.tier_lookup(r.0 as usize, &seq) {
            Some((ms, from, upto)) => {
                let ev = Event::TierLoaded(r, Box::new(seq), from, upto);
                self.queue.push(now + ms, ev);
            }
            None => self.enqueue(now, r.0 as usize, seq),
        }
    }

    /// Records in gateway `gateway`'s index (and, after its delay, the shared history) that
    /// `hashes` went to replica `r`.
    pub(super) fn record_route(
        &mut self,
        now: f64,
        gateway: usize,
        r: ReplicaId,
        hashes: &Arc<[BlockHash]>,
    ) {
        let at = Millis(now as u64);
        self.router.gateways[gateway]
            .index
            .record_routed(r, hashes, at);
        if self.cfg.fleet.shared_history {
            for g in (0..self.router.gateways.len()).filter(|g| *g != gateway) {
                self.queue.push(
                    now + self.cfg.fleet.history_delay_ms,
                    Event::HistoryDelivery(g, r, hashes.clone(), at),
                );
            }
        }
    }

    /// Puts `seq` in replica `ri`'s queue and starts a step if it is idle.
    pub(super) fn enqueue(&mut self, now: f64, ri: usize, seq: Seq) {
        self.replicas[ri].enqueue(seq);
        if !self.replicas[ri].busy {
            self.start_step(now, ri);
        }
        self.refresh_if_fresh(ri);
    }

    /// The new replicas join: in the prewarm arm the replay of hot prefixes begins.
    pub(super) fn start_rollout(&mut self, now: f64) {
        if let Some(r) = &mut self.rollout {
            r.start(now);
        }
        self.send_prewarm(now);
    }

    /// Sends pending pre-warm prompts to the new checkpoint's replicas (through gateway 0,
    /// as prefill-only requests) while the replay's concurrency allows.
    pub(super) fn send_prewarm(&mut self, now: f64) {
        let (id, seed) = {
            let (id, seed, _) = &self.checkpoints[usize::from(NEW.0)];
            (id.clone(), *seed)
        };
        while let Some((k, tokens)) = self.rollout.as_mut().and_then(|r| r.next_prewarm()) {
            let hashes: Arc<[BlockHash]> = block_hashes(seed, &tokens, self.block_size).into();
            let prompt_tokens = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
            let ask = Ask {
                checkpoint: &id,
                hashes: &hashes,
                prompt_tokens,
                block_size: self.block_size,
                now_ms: now,
            };
            match self.router.route(0, &ask) {
                Ok(d) => {
                    let seq = Seq::new(Job::Prewarm(k), hashes, prompt_tokens, 1, now);
                    self.dispatch(now, 0, d.replica, seq);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "pre-warm prompt not routed");
                    if let Some(r) = &mut self.rollout {
                        r.prewarm_finished(now);
                    }
                }
            }
        }
    }
}
