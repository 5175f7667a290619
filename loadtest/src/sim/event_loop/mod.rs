//! The event loop: arrivals are routed by a real policy (through their gateway), replicas
//! run continuous-batching steps, KV events and load reports reach the gateways late by the
//! configured amounts, and a rollout, if any, starts on time. Routing is in [`route`],
//! completions in [`finish`], split requests (prefill/decode disaggregation) in [`split`],
//! shared-tier lookups in [`tier`].

mod admit;
mod finish;
mod route;
mod split;
mod tier;

use super::config::SimConfig;
use super::disagg::Transfer;
use super::events::{Deliver, Event, EventQueue};
use super::gateway::Router;
use super::progress::{NoProgress, ProgressSink, SimProgress, REPORT_EVERY_EVENTS};
use super::replica::{Replica, Seq};
use super::rollout::{CkIx, RolloutRun};
use super::tier::SharedStore;
use crate::metrics::RequestRecord;
use crate::prompt::PromptHasher;
use crate::workload::{LoadShape, Workload};
use router_policy::PolicyConfig;
use std::sync::Arc;
use warmpath_core::{
    BlockSize, CheckpointId, Epoch, HashNamespace, KvEvent, KvEventRecord, KvStreamMessage,
    ReplicaId, RootSeed, SeqNo,
};

/// Per-request records of one simulated run.
#[derive(Debug)]
pub struct SimOutcome {
    /// One record per request, in request order.
    pub records: Vec<RequestRecord>,
    /// Events processed (for the performance log).
    pub events: u64,
    /// Rollout: when the last pre-warm request finished, ms (prewarm arm).
    pub prewarm_done_ms: Option<f64>,
    /// Role split: every split request's transfer, in the order they finished.
    pub transfers: Vec<Transfer>,
    /// Role split: requests served by decode replicas, and the prompt tokens those replicas
    /// computed for them (what imported KV did not cover: unsplit prompts, tails, misses).
    pub decode_served: u64,
    /// See `decode_served`.
    pub decode_computed_tokens: u64,
}

/// How a request was routed.
#[derive(Clone, Copy, Debug)]
struct Routed {
    gateway: usize,
    predicted_tokens: u32,
    branch: &'static str,
    checkpoint: CkIx,
}

/// A split request between its prefill and its decode ([`split`]).
#[derive(Debug)]
struct Split {
    prefill: ReplicaId,
    decode: ReplicaId,
    /// The request as the decode replica will serve it.
    seq: Seq,
    /// Prompt tokens the prefill replica found cached.
    prefill_cached_tokens: u32,
    /// When the prefill ended, ms.
    prefill_done_ms: f64,
}

struct Sim<'a> {
    cfg: &'a SimConfig,
    workload: &'a Workload,
    /// Per checkpoint (old, new): its id, hash seed and prompt hasher.
    checkpoints: Vec<(CheckpointId, RootSeed, PromptHasher)>,
    block_size: BlockSize,
    queue: EventQueue,
    replicas: Vec<Replica>,
    kv_seq: Vec<SeqNo>,
    router: Router,
    rollout: Option<RolloutRun>,
    records: Vec<Option<RequestRecord>>,
    routed: Vec<Option<Routed>>,
    /// Split requests between their prefill and their decode, by request index.
    splits: std::collections::HashMap<usize, Split>,
    transfers: Vec<Transfer>,
    decode_served: u64,
    decode_computed_tokens: u64,
    next_closed: usize,
    /// Sequences sent and not finished (requests and pre-warm prompts).
    outstanding: usize,
    /// Requests completed or failed.
    finished: usize,
    events: u64,
    epoch: Epoch,
    /// The shared KV tier, when on.
    tier: Option<SharedStore>,
    /// Requests waiting at the gateway (with admission).
    gate: Option<super::admission::GatewayQueue>,
    /// Requests admitted by the gateway and not finished (with admission).
    admitted: usize,
    /// The same requests by tenant and class (the flow queue's reserve rule).
    in_flight: router_policy::flow::InFlight,
}

/// Runs the workload through policy `pc` (validated) on the simulated cluster.
pub fn simulate(workload: &Workload, cfg: &SimConfig, pc: &PolicyConfig) -> SimOutcome {
    simulate_with(workload, cfg, pc, &mut NoProgress)
}

/// [`simulate`], reporting progress to `progress`.
pub fn simulate_with(
    workload: &Workload,
    cfg: &SimConfig,
    pc: &PolicyConfig,
    progress: &mut dyn ProgressSink,
) -> SimOutcome {
    let block_size = BlockSize(cfg.profile.block_size);
    let mut ids = vec![cfg.checkpoint.clone()];
    let mut per_replica = vec![cfg.checkpoint.clone(); cfg.replicas as usize];
    if let Some(r) = &cfg.rollout {
        ids.push(r.to.clone());
        per_replica.extend((0..r.new_replicas).map(|_| r.to.clone()));
    }
    let checkpoints = ids
        .into_iter()
        .map(|id| {
            let seed = HashNamespace::new(id.clone()).root_seed();
            (id, seed, PromptHasher::new(seed, block_size))
        })
        .collect();
    let n = per_replica.len();
    let mut sim = Sim {
        cfg,
        workload,
        checkpoints,
        block_size,
        queue: EventQueue::default(),
        replicas: (0..n)
            .map(|_| Replica::new(&cfg.profile, cfg.prefill_order))
            .collect(),
        kv_seq: vec![SeqNo(0); n],
        router: Router::new(cfg, pc, &per_replica),
        rollout: cfg
            .rollout
            .clone()
            .map(|r| RolloutRun::new(r, cfg.checkpoint.clone())),
        records: vec![None; workload.requests.len()],
        routed: vec![None; workload.requests.len()],
        splits: Default::default(),
        transfers: Vec::new(),
        decode_served: 0,
        decode_computed_tokens: 0,
        next_closed: 0,
        outstanding: 0,
        finished: 0,
        events: 0,
        epoch: Epoch(1),
        tier: cfg.tier.map(SharedStore::new),
        gate: cfg
            .admission
            .as_ref()
            .map(super::admission::GatewayQueue::new),
        admitted: 0,
        in_flight: Default::default(),
    };
    sim.run(progress);
    let prewarm_done_ms = sim.rollout.as_ref().and_then(|r| r.prewarm_done_at);
    SimOutcome {
        records: sim.records.into_iter().flatten().collect(),
        events: sim.events,
        prewarm_done_ms,
        transfers: sim.transfers,
        decode_served: sim.decode_served,
        decode_computed_tokens: sim.decode_computed_tokens,
    }
}

impl Sim<'_> {
    fn run(&mut self, progress: &mut dyn ProgressSink) {
        if self.cfg.fleet.kv_events {
            let snap = KvStreamMessage::Snapshot {
                epoch: self.epoch,
                seq: SeqNo(0),
                hashes: Vec::new(),
            };
            for r in 0..self.replicas.len() {
                self.router
                    .apply_kv(ReplicaId(r as u32), &snap, Deliver::All);
            }
        }
        match self.workload.shape {
            LoadShape::Closed { concurrency } => {
                for _ in 0..concurrency {
                    self.issue_closed(0.0);
                }
            }
            _ => {
                for (i, r) in self.workload.requests.iter().enumerate() {
                    self.queue.push(r.arrival_ms, Event::Arrival(i));
                }
            }
        }
        if self.cfg.load_staleness_ms > 0.0 {
            self.queue.push(0.0, Event::LoadReport);
        }
        if let Some(r) = &self.cfg.rollout {
            self.queue.push(r.at_ms, Event::RolloutStart);
        }
        let total = self.workload.requests.len();
        let mut last = 0.0;
        while let Some((now, ev)) = self.queue.pop() {
            self.events += 1;
            last = now;
            if self.events.is_multiple_of(REPORT_EVERY_EVENTS) {
                progress.update(&SimProgress {
                    done: self.finished,
                    total,
                    virtual_ms: now,
                });
            }
            match ev {
                Event::Arrival(i) => self.arrive(now, i),
                Event::StepEnd(r) => self.step_end(now, r),
                Event::KvDelivery(r, msg, to) => self.router.apply_kv(r, &msg, to),
                Event::HistoryDelivery(g, r, hashes, at) => {
                    self.router.gateways[g].index.record_routed(r, &hashes, at);
                }
                Event::LoadReport => {
                    for ri in 0..self.replicas.len() {
                        self.report(ri);
                    }
                    let work_left = self.outstanding > 0 || self.queue.len() > 0;
                    if work_left {
                        self.queue
                            .push(now + self.cfg.load_staleness_ms, Event::LoadReport);
                    }
                }
                Event::RolloutStart => self.start_rollout(now),
                Event::TransferDone(i) => self.transfer_done(now, i),
                Event::TierLoaded(r, seq, from, upto) => {
                    self.tier_loaded(now, r.0 as usize, *seq, from, upto)
                }
            }
        }
        progress.update(&SimProgress {
            done: self.finished,
            total,
            virtual_ms: last,
        });
    }

    fn issue_closed(&mut self, now: f64) {
        if self.next_closed >= self.workload.requests.len() {
            return;
        }
        if self.workload.duration_ms.is_none_or(|d| now <= d) {
            self.queue.push(now, Event::Arrival(self.next_closed));
            self.next_closed += 1;
        }
    }

    fn start_step(&mut self, now: f64, ri: usize) {
        let mut kv = Vec::new();
        let step = self.replicas[ri].plan_step(&self.cfg.profile, &mut kv);
        self.publish(now, ri, kv);
        if let Some(ms) = step {
            self.queue
                .push(now + ms, Event::StepEnd(ReplicaId(ri as u32)));
        }
    }

    /// Sends a replica's KV events to the gateways (after the configured delays).
    fn publish(&mut self, now: f64, ri: usize, events: Vec<KvEvent>) {
        if !self.cfg.fleet.kv_events {
            return;
        }
        let r = ReplicaId(ri as u32);
        for event in events {
            self.kv_seq[ri] = self.kv_seq[ri].next();
            let msg = Arc::new(KvStreamMessage::Event(KvEventRecord {
                epoch: self.epoch,
                seq: self.kv_seq[ri],
                event,
            }));
            for j in 0..self.router.kv_routes(ri).len() {
                let (to, delay) = self.router.kv_routes(ri)[j];
                if delay <= 0.0 {
                    self.router.apply_kv(r, &msg, to);
                } else {
                    self.queue
                        .push(now + delay, Event::KvDelivery(r, msg.clone(), to));
                }
            }
        }
    }

    fn refresh_if_fresh(&mut self, ri: usize) {
        if self.cfg.load_staleness_ms <= 0.0 {
            self.report(ri);
        }
    }

    /// Copies replica `ri`'s current load into the gateways' views.
    fn report(&mut self, ri: usize) {
        let rep = &self.replicas[ri];
        let load = (
            rep.running.len() as u32,
            rep.waiting.len() as u32,
            rep.queued_prefill_tokens(),
            rep.used_blocks(),
        );
        self.router.report(ri, load);
    }
}
