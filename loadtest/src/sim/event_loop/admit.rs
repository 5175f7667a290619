//! The gateway's admission ([`crate::sim::admission`]): an arrival goes to routing at once
//! while fewer than the cap are in flight and nothing waits; otherwise it waits in the
//! gateway's queue (first come, or the flow queue) or is refused; a finished request frees
//! its slot and the next one goes. A refused request is recorded with its error (shed: 503,
//! tenant queue full: 429) at its arrival time. Under the flow queue a request that
//! outranks the work in flight (`router_policy::flow::InFlight::outranks`) may take one of
//! `reserve_per_replica` slots per replica past the cap, as the gateway's dispatch does.

use super::Sim;
use crate::metrics::{ErrorKind, RequestRecord};
use crate::sim::admission::AdmissionSim;
use crate::sim::admission::GatewayQueue;
use crate::sim::gateway::Ask;
use router_policy::flow::{prefill_cost, Class, Entry, Refusal};
use warmpath_core::Millis;

impl Sim<'_> {
    /// Request `i` reaches the gateway at `now`.
    pub(super) fn arrive(&mut self, now: f64, i: usize) {
        let cfg = self.cfg;
        let Some(a) = &cfg.admission else {
            return self.route_request(now, i, now);
        };
        let cap = a.slots_per_replica as usize * self.replicas.len();
        let free = self.admitted < cap && self.gate.as_ref().is_none_or(GatewayQueue::is_empty);
        let entry = match self.gate {
            Some(GatewayQueue::Flow(..)) => Some(self.flow_entry(now, i)),
            _ => None,
        };
        if free {
            if let Some(e) = entry {
                if e.class == Class::Interactive && !e.can_meet(Millis(now as u64)) {
                    return self.refuse(now, i, ErrorKind::Http5xx, "shed: deadline");
                }
            }
            self.admit(a, i);
            return self.route_request(now, i, now);
        }
        let max_queue = a.max_queue as usize;
        let refused = match (&mut self.gate, entry) {
            (Some(GatewayQueue::Fcfs(q)), _) if q.len() >= max_queue => {
                Some((ErrorKind::Http5xx, "queue full"))
            }
            (Some(GatewayQueue::Fcfs(q)), _) => {
                q.push_back((i, now));
                None
            }
            (Some(GatewayQueue::Flow(q, waiting)), Some(e)) => match q.push(e) {
                Ok(t) => {
                    waiting.insert(t.seq(), i);
                    None
                }
                Err(Refusal::TenantFull { .. }) => {
                    Some((ErrorKind::RateLimited, "tenant queue full"))
                }
                Err(Refusal::QueueFull { .. }) => Some((ErrorKind::Http5xx, "queue full")),
                Err(Refusal::Deadline { .. }) => Some((ErrorKind::Http5xx, "shed: deadline")),
                Err(Refusal::UnknownTenant) => Some((ErrorKind::Http4xx, "unknown tenant")),
            },
            _ => Some((ErrorKind::NoReplica, "no admission queue")),
        };
        if let Some((kind, why)) = refused {
            return self.refuse(now, i, kind, why);
        }
        // It may outrank the work in flight (the reserve).
        self.admit_waiting(now);
    }

    /// Counts request `i` in flight.
    fn admit(&mut self, a: &AdmissionSim, i: usize) {
        self.admitted += 1;
        let tenant = a.tenant_of(self.workload.requests[i].group);
        let weight = a.weights.get(tenant.0 as usize).copied().unwrap_or(1);
        self.in_flight.start(tenant, weight, a.class_of(i));
    }

    /// Request `i`, admitted by the gateway, finished (or failed): its slot goes to the next.
    pub(super) fn release_slot(&mut self, now: f64, i: usize) {
        let cfg = self.cfg;
        let Some(a) = &cfg.admission else {
            return;
        };
        self.admitted = self.admitted.saturating_sub(1);
        let tenant = a.tenant_of(self.workload.requests[i].group);
        self.in_flight.finish(tenant, a.class_of(i));
        self.admit_waiting(now);
    }

    /// Whether an interactive request that outranks the work in flight waits and a reserve
    /// slot is left (the requests in flight are below the cap plus the reserve).
    fn reserve_open(&mut self, now: f64, a: &AdmissionSim) -> bool {
        let reserve = a.reserve_per_replica as usize * self.replicas.len();
        let cap = a.slots_per_replica as usize * self.replicas.len();
        if self.admitted >= cap + reserve {
            return false;
        }
        let Some(GatewayQueue::Flow(q, _)) = &mut self.gate else {
            return false;
        };
        let in_flight = &self.in_flight;
        let outranks = |t, w| in_flight.outranks(t, w, Class::Interactive);
        q.peek_in(Millis(now as u64), Class::Interactive, &outranks)
            .is_some()
    }

    /// Sends waiting requests while slots are free (or, for one that outranks the work in
    /// flight, a reserve slot is).
    fn admit_waiting(&mut self, now: f64) {
        let cfg = self.cfg;
        let Some(a) = &cfg.admission else {
            return;
        };
        let cap = a.slots_per_replica as usize * self.replicas.len();
        let timeout = a.queue_timeout_ms;
        while self.admitted < cap || self.reserve_open(now, a) {
            let reserved = self.admitted >= cap;
            let mut expired = Vec::new();
            let next = match &mut self.gate {
                Some(GatewayQueue::Fcfs(q)) => q.pop_front(),
                Some(GatewayQueue::Flow(q, waiting)) => {
                    let at = Millis(now as u64);
                    let t = if reserved {
                        let in_flight = &self.in_flight;
                        let outranks = |t, w| in_flight.outranks(t, w, Class::Interactive);
                        q.pop_in(at, Class::Interactive, &outranks)
                    } else {
                        q.pop(at)
                    };
                    expired = q
                        .take_expired()
                        .into_iter()
                        .filter_map(|t| waiting.remove(&t.seq()))
                        .collect();
                    t.and_then(|t| waiting.remove(&t.seq()))
                        .map(|i| (i, self.workload.requests[i].arrival_ms))
                }
                None => None,
            };
            for j in expired {
                let at = self.workload.requests[j].arrival_ms;
                self.refuse(at, j, ErrorKind::Http5xx, "shed: deadline");
            }
            let Some((i, at)) = next else { break };
            if matches!(self.gate, Some(GatewayQueue::Fcfs(_))) && now - at > timeout {
                self.refuse(at, i, ErrorKind::Http5xx, "queue timeout");
                continue;
            }
            self.admit(a, i);
            self.route_request(now, i, at);
        }
    }

    /// Request `i`'s flow-queue entry at `now`: its tenant and class, its predicted prefill
    /// cost and TTFT on the best replica now (`warm`'s queue and prefill terms, without
    /// making a decision: a shed request must not charge a replica), and its deadline.
    fn flow_entry(&mut self, now: f64, i: usize) -> Entry {
        let cfg = self.cfg;
        let a = cfg.admission.as_ref().expect("admission");
        let spec = &self.workload.requests[i];
        let prompt_tokens = spec.prompt_tokens();
        let gateway = self.gateway_for(i);
        let (id, _, hasher) = &mut self.checkpoints[0];
        let hashes = hasher.hashes(&spec.prompt);
        let ask = Ask {
            checkpoint: id,
            hashes: &hashes,
            prompt_tokens,
            block_size: self.block_size,
            now_ms: now,
        };
        let rate = cfg.profile.prefill_tokens_per_s;
        let (predicted_ms, cached) = self.router.predict_ttft(gateway, &ask, rate);
        Entry {
            tenant: a.tenant_of(spec.group),
            class: a.class_of(i),
            cost: prefill_cost(prompt_tokens, cached, a.flow.cached_cost_fraction),
            arrival: Millis(now as u64),
            deadline: a.ttft_objective_ms.map(|o| Millis((now + o) as u64)),
            predicted_ttft: Millis(predicted_ms.max(0.0).ceil() as u64),
        }
    }

    /// Records request `i` as refused at `at`.
    fn refuse(&mut self, at: f64, i: usize, kind: ErrorKind, why: &str) {
        let spec = &self.workload.requests[i];
        self.records[i] = Some(RequestRecord {
            id: spec.id,
            group: spec.group,
            start_ms: at,
            prompt_tokens: spec.prompt_tokens(),
            class: spec.class,
            error: Some(kind),
            error_detail: Some(why.to_string()),
            ..RequestRecord::default()
        });
        self.finished += 1;
    }
}
