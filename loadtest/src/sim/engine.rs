//! The event loop: arrivals are routed by a real policy, replicas run continuous-batching
//! steps, KV events and load reports reach the router late by the configured amounts.

use super::events::{Event, EventQueue};
use super::profile::CostProfile;
use super::progress::{NoProgress, ProgressSink, SimProgress, REPORT_EVERY_EVENTS};
use super::replica::{Replica, Seq};
use crate::metrics::{ErrorKind, RequestRecord};
use crate::prompt::PromptHasher;
use crate::workload::{LoadShape, Workload};
use router_policy::cluster::{ClusterView, ReplicaSnapshot};
use router_policy::index::{IndexConfig, PrefixIndex};
use router_policy::policy::{Policy, RouteRequest};
use router_policy::{
    BlockSize, CheckpointId, Epoch, HashNamespace, KvEvent, KvEventRecord, KvStreamMessage, Millis,
    ReplicaId, SeqNo,
};
use std::sync::Arc;

/// Simulation settings (everything except the workload and the policy).
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Number of replicas.
    pub replicas: u32,
    /// Per-replica cost model and capacity.
    pub profile: CostProfile,
    /// Delay between a replica's KV change and the router applying it, ms.
    pub kv_event_delay_ms: f64,
    /// Period of load reports (a report is this old at worst), ms; 0 = always fresh.
    pub load_staleness_ms: f64,
    /// Checkpoint every replica serves.
    pub checkpoint: CheckpointId,
    /// Prefix index bounds.
    pub index: IndexConfig,
    /// Gateways in front of the replicas, each with its own prefix index.
    pub fleet: FleetSim,
}

/// A fleet of gateways in front of the simulated replicas. Requests reach the gateways in
/// turn (as a Service spreads many clients); each gateway routes with its own prefix index.
#[derive(Clone, Debug)]
pub struct FleetSim {
    /// Number of gateways (1: a single gateway).
    pub gateways: u32,
    /// Whether replicas publish KV events (to every gateway). Without them each index
    /// holds only routing decisions (the approximate index, as for engines without events).
    pub kv_events: bool,
    /// Whether every gateway's routing decisions reach the other gateways' indexes (a shared
    /// routing history), after `history_delay_ms`.
    pub shared_history: bool,
    /// Delay of the shared history, ms.
    pub history_delay_ms: f64,
}

impl Default for FleetSim {
    fn default() -> Self {
        Self {
            gateways: 1,
            kv_events: true,
            shared_history: false,
            history_delay_ms: 5.0,
        }
    }
}

/// Per-request records of one simulated run.
#[derive(Debug)]
pub struct SimOutcome {
    /// One record per request, in request order.
    pub records: Vec<RequestRecord>,
    /// Events processed (for the performance log).
    pub events: u64,
}

struct Sim<'a> {
    cfg: &'a SimConfig,
    workload: &'a Workload,
    hasher: PromptHasher,
    block_size: BlockSize,
    queue: EventQueue,
    replicas: Vec<Replica>,
    kv_seq: Vec<SeqNo>,
    view: ClusterView,
    /// One prefix index per gateway.
    indexes: Vec<PrefixIndex>,
    policy: Box<dyn Policy>,
    records: Vec<Option<RequestRecord>>,
    predicted: Vec<u32>,
    branches: Vec<Option<&'static str>>,
    next_closed: usize,
    outstanding: usize,
    /// Requests completed or failed.
    finished: usize,
    events: u64,
    epoch: Epoch,
}

/// Runs the workload through `policy` on the simulated cluster.
pub fn simulate(workload: &Workload, cfg: &SimConfig, policy: Box<dyn Policy>) -> SimOutcome {
    simulate_with(workload, cfg, policy, &mut NoProgress)
}

/// [`simulate`], reporting progress to `progress`.
pub fn simulate_with(
    workload: &Workload,
    cfg: &SimConfig,
    policy: Box<dyn Policy>,
    progress: &mut dyn ProgressSink,
) -> SimOutcome {
    let block_size = BlockSize(cfg.profile.block_size);
    let seed = HashNamespace::new(cfg.checkpoint.clone()).root_seed();
    let n = cfg.replicas as usize;
    let view = ClusterView::new(
        (0..n)
            .map(|i| ReplicaSnapshot {
                kv_capacity_blocks: cfg.profile.kv_capacity_blocks,
                prefill_tokens_per_s: cfg.profile.prefill_tokens_per_s,
                ..ReplicaSnapshot::idle(ReplicaId(i as u32), cfg.checkpoint.clone())
            })
            .collect(),
    );
    let mut sim = Sim {
        cfg,
        workload,
        hasher: PromptHasher::new(seed, block_size),
        block_size,
        queue: EventQueue::default(),
        replicas: (0..n).map(|_| Replica::new(&cfg.profile)).collect(),
        kv_seq: vec![SeqNo(0); n],
        view,
        indexes: (0..cfg.fleet.gateways.max(1))
            .map(|_| PrefixIndex::new(cfg.index.clone()))
            .collect(),
        policy,
        records: vec![None; workload.requests.len()],
        predicted: vec![0; workload.requests.len()],
        branches: vec![None; workload.requests.len()],
        next_closed: 0,
        outstanding: 0,
        finished: 0,
        events: 0,
        epoch: Epoch(1),
    };
    sim.run(progress);
    let records = sim.records.into_iter().flatten().collect();
    SimOutcome {
        records,
        events: sim.events,
    }
}

impl Sim<'_> {
    fn run(&mut self, progress: &mut dyn ProgressSink) {
        for r in 0..self.replicas.len() {
            if !self.cfg.fleet.kv_events {
                break;
            }
            let snap = KvStreamMessage::Snapshot {
                epoch: self.epoch,
                seq: SeqNo(0),
                hashes: Vec::new(),
            };
            for index in &mut self.indexes {
                index.apply_message(ReplicaId(r as u32), &snap);
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
                Event::KvDelivery(r, msg) => {
                    for index in &mut self.indexes {
                        index.apply_message(r, &msg);
                    }
                }
                Event::HistoryDelivery(g, r, hashes, at) => {
                    self.indexes[g].record_routed(r, &hashes, at);
                }
                Event::LoadReport => {
                    self.report_all();
                    let work_left = self.outstanding > 0 || self.queue.len() > 0;
                    if work_left {
                        self.queue
                            .push(now + self.cfg.load_staleness_ms, Event::LoadReport);
                    }
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

    fn arrive(&mut self, now: f64, i: usize) {
        let spec = &self.workload.requests[i];
        let hashes: Arc<[_]> = self.hasher.hashes(&spec.prompt).into();
        let prompt_tokens = spec.prompt_tokens();
        let route = RouteRequest {
            checkpoint: &self.cfg.checkpoint,
            hashes: &hashes,
            prompt_tokens,
            block_size: self.block_size,
            now: Millis(now as u64),
            regions: None,
            residency: &[],
        };
        let gateway = i % self.indexes.len();
        let decision = match self
            .policy
            .select(&route, &self.view, &self.indexes[gateway])
        {
            Ok(d) => d,
            Err(e) => {
                self.records[i] = Some(RequestRecord {
                    id: spec.id,
                    group: spec.group,
                    start_ms: now,
                    prompt_tokens,
                    error: Some(ErrorKind::NoReplica),
                    error_detail: Some(e.to_string()),
                    ..RequestRecord::default()
                });
                self.finished += 1;
                if matches!(self.workload.shape, LoadShape::Closed { .. }) {
                    self.issue_closed(now);
                }
                return;
            }
        };
        let r = decision.replica;
        self.indexes[gateway].record_routed(r, &hashes, Millis(now as u64));
        if self.cfg.fleet.shared_history {
            for g in (0..self.indexes.len()).filter(|g| *g != gateway) {
                self.queue.push(
                    now + self.cfg.fleet.history_delay_ms,
                    Event::HistoryDelivery(g, r, hashes.clone(), Millis(now as u64)),
                );
            }
        }
        self.predicted[i] = decision.predicted_cached_blocks * self.block_size.0;
        self.branches[i] = Some(decision.explanation.branch.as_str());
        let ri = r.0 as usize;
        self.view.replicas[ri].in_flight += 1;
        self.outstanding += 1;
        self.replicas[ri].waiting.push_back(Seq::new(
            i,
            hashes,
            prompt_tokens,
            spec.output_tokens,
            now,
        ));
        if !self.replicas[ri].busy {
            self.start_step(now, ri);
        }
        self.refresh_if_fresh(ri);
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

    fn step_end(&mut self, now: f64, r: ReplicaId) {
        let ri = r.0 as usize;
        let out = self.replicas[ri].finish_step(now);
        self.publish(now, ri, out.events);
        let closed = matches!(self.workload.shape, LoadShape::Closed { .. });
        for s in out.completed {
            self.view.replicas[ri].in_flight = self.view.replicas[ri].in_flight.saturating_sub(1);
            self.outstanding -= 1;
            self.finished += 1;
            let spec = &self.workload.requests[s.req];
            self.records[s.req] = Some(RequestRecord {
                id: spec.id,
                group: spec.group,
                replica: Some(r.to_string()),
                start_ms: s.arrival_ms,
                ttft_ms: Some(s.first_token_ms - s.arrival_ms),
                e2el_ms: s.last_token_ms - s.arrival_ms,
                itls_ms: s.itls,
                prompt_tokens: s.prompt_tokens,
                output_tokens: s.produced,
                cached_tokens: s.cached_blocks * self.block_size.0,
                predicted_cached_tokens: Some(self.predicted[s.req]),
                route_branch: self.branches[s.req],
                error: None,
                error_detail: None,
            });
            if closed {
                self.issue_closed(now);
            }
        }
        self.start_step(now, ri);
        self.refresh_if_fresh(ri);
    }

    /// Sends a replica's KV events to the router (after the configured delay).
    fn publish(&mut self, now: f64, ri: usize, events: Vec<KvEvent>) {
        if !self.cfg.fleet.kv_events {
            return;
        }
        for event in events {
            self.kv_seq[ri] = self.kv_seq[ri].next();
            let msg = KvStreamMessage::Event(KvEventRecord {
                epoch: self.epoch,
                seq: self.kv_seq[ri],
                event,
            });
            let r = ReplicaId(ri as u32);
            if self.cfg.kv_event_delay_ms <= 0.0 {
                for index in &mut self.indexes {
                    index.apply_message(r, &msg);
                }
            } else {
                self.queue
                    .push(now + self.cfg.kv_event_delay_ms, Event::KvDelivery(r, msg));
            }
        }
    }

    fn refresh_if_fresh(&mut self, ri: usize) {
        if self.cfg.load_staleness_ms <= 0.0 {
            self.report(ri);
        }
    }

    fn report_all(&mut self) {
        for ri in 0..self.replicas.len() {
            self.report(ri);
        }
    }

    /// Copies replica `ri`'s current load into the router's view.
    fn report(&mut self, ri: usize) {
        let rep = &self.replicas[ri];
        let snap = &mut self.view.replicas[ri];
        snap.running = rep.running.len() as u32;
        snap.waiting = rep.waiting.len() as u32;
        snap.queued_prefill_tokens = rep.queued_prefill_tokens();
        snap.kv_used_blocks = rep.used_blocks();
    }
}
