//! [`FlowQueue`]: per-tenant, per-class FIFOs served by aging, then priority, then
//! start-time fair queuing (see the module docs for the rules).

use super::types::{Class, Entry, FlowConfig, FlowStats, FlowTenant, Refusal, Ticket};
use std::collections::VecDeque;
use warmpath_core::Millis;

/// Virtual-time units per cost unit per unit of weight (keeps `cost / weight` exact
/// enough for small weights without floats).
const SCALE: u128 = 1 << 20;

/// A class and which tenants may answer ([`FlowQueue::peek_in`]); `None`: everyone.
type Only<'a> = Option<(Class, &'a dyn Fn(FlowTenant, u32) -> bool)>;

/// One waiting request.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    seq: u64,
    entry: Entry,
}

/// One tenant's FIFO in one class, and its virtual time (the start tag of its head).
#[derive(Debug, Default)]
struct Flow {
    fifo: VecDeque<Waiting>,
    vtime: u128,
}

/// One tenant: weight, bound and a flow per class.
#[derive(Debug)]
struct TenantFlows {
    weight: u32,
    limit: Option<u32>,
    queued: u32,
    served_cost: u64,
    flows: [Flow; 2],
}

impl TenantFlows {
    fn new() -> Self {
        Self {
            weight: 1,
            limit: None,
            queued: 0,
            served_cost: 0,
            flows: Default::default(),
        }
    }
}

/// The flow queue. Deterministic: the same pushes, pops and removes at the same times
/// give the same order.
#[derive(Debug)]
pub struct FlowQueue {
    cfg: FlowConfig,
    tenants: Vec<TenantFlows>,
    /// Each class's virtual time: the start tag of its last dispatch.
    band_vtime: [u128; 2],
    next_seq: u64,
    expired: Vec<Ticket>,
    stats: FlowStats,
    /// The last dispatch went because it had aged (the next one goes by priority).
    last_aged: bool,
}

impl FlowQueue {
    /// An empty queue (`cfg` is assumed validated).
    pub fn new(cfg: FlowConfig) -> Self {
        Self {
            cfg,
            tenants: Vec::new(),
            band_vtime: [0; 2],
            next_seq: 0,
            expired: Vec::new(),
            stats: FlowStats::default(),
            last_aged: false,
        }
    }

    /// The config it runs under.
    pub fn config(&self) -> &FlowConfig {
        &self.cfg
    }

    /// Sets a tenant's weight (at least 1) and its own queue bound (`None`: the config's
    /// per-tenant bound). False for a tenant at or above `max_tenants`.
    pub fn set_tenant(&mut self, tenant: FlowTenant, weight: u32, limit: Option<u32>) -> bool {
        let Some(t) = self.tenant_mut(tenant) else {
            return false;
        };
        t.weight = weight.max(1);
        t.limit = limit;
        true
    }

    /// A tenant's weight (1 for one never set).
    pub fn weight(&self, tenant: FlowTenant) -> u32 {
        self.tenants.get(tenant.0 as usize).map_or(1, |t| t.weight)
    }

    fn tenant_mut(&mut self, tenant: FlowTenant) -> Option<&mut TenantFlows> {
        let i = tenant.0 as usize;
        if tenant.0 >= self.cfg.max_tenants {
            return None;
        }
        if self.tenants.len() <= i {
            self.tenants.resize_with(i + 1, TenantFlows::new);
        }
        self.tenants.get_mut(i)
    }

    /// Whether nothing waits (the caller's fast path: a free slot and an empty queue
    /// means go at once).
    pub fn is_empty(&self) -> bool {
        self.stats.queued == 0
    }

    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.stats.queued as usize
    }

    /// Requests `tenant` has waiting.
    pub fn tenant_queued(&self, tenant: FlowTenant) -> u32 {
        self.tenants.get(tenant.0 as usize).map_or(0, |t| t.queued)
    }

    /// Cost dispatched for `tenant` so far.
    pub fn served_cost(&self, tenant: FlowTenant) -> u64 {
        self.tenants
            .get(tenant.0 as usize)
            .map_or(0, |t| t.served_cost)
    }

    /// Counters.
    pub fn stats(&self) -> FlowStats {
        self.stats
    }

    /// Asks `entry` to wait: a ticket, or why not. Checks, in order: the tenant is known,
    /// an interactive deadline can be met at arrival, the tenant's bound, the global bound.
    pub fn push(&mut self, entry: Entry) -> Result<Ticket, Refusal> {
        let per_tenant = self.cfg.max_queued_per_tenant;
        let max = self.cfg.max_queued;
        let queued = self.stats.queued;
        let band_v = self.band_vtime[entry.class.index()];
        if entry.tenant.0 >= self.cfg.max_tenants {
            return Err(Refusal::UnknownTenant);
        }
        if entry.class == Class::Interactive && !entry.can_meet(entry.arrival) {
            self.stats.refused_deadline += 1;
            return Err(Refusal::Deadline {
                predicted: entry.predicted_ttft,
                objective: Millis(
                    entry
                        .deadline
                        .map_or(0, |d| d.0.saturating_sub(entry.arrival.0)),
                ),
            });
        }
        let seq = self.next_seq;
        let Some(t) = self.tenant_mut(entry.tenant) else {
            return Err(Refusal::UnknownTenant);
        };
        let limit = t.limit.unwrap_or(per_tenant);
        if t.queued >= limit {
            self.stats.refused_tenant += 1;
            return Err(Refusal::TenantFull { limit });
        }
        if queued >= max {
            self.stats.refused_full += 1;
            return Err(Refusal::QueueFull { limit: max });
        }
        let flow = &mut t.flows[entry.class.index()];
        if flow.fifo.is_empty() {
            // An idle flow starts at the band's virtual time: no credit saved up.
            flow.vtime = flow.vtime.max(band_v);
        }
        flow.fifo.push_back(Waiting { seq, entry });
        t.queued += 1;
        self.next_seq += 1;
        self.stats.queued += 1;
        self.stats.queued_by_class[entry.class.index()] += 1;
        self.stats.pushed += 1;
        Ok(Ticket {
            seq,
            tenant: entry.tenant,
            class: entry.class,
        })
    }

    /// Who goes next at `now`, when a replica slot is free; `None` when nothing waits.
    /// Interactive requests that can no longer meet their deadline are dropped on the way
    /// (see [`Self::take_expired`]).
    pub fn pop(&mut self, now: Millis) -> Option<Ticket> {
        let (tenant, class, aged) = self.choose(now, None)?;
        Some(self.take(tenant, class, aged))
    }

    /// Who goes next at `now` among the requests of `class` alone whose tenant (with its
    /// weight) is `eligible` (fair share among them), without dispatching it: the caller
    /// may place a request that outranks the work in flight even when another request is
    /// [`Self::peek`]'s answer.
    pub fn peek_in(
        &mut self,
        now: Millis,
        class: Class,
        eligible: &dyn Fn(FlowTenant, u32) -> bool,
    ) -> Option<Ticket> {
        let (tenant, class, _) = self.choose(now, Some((class, eligible)))?;
        let w = self.tenants[tenant].flows[class.index()].fifo.front()?;
        Some(Ticket {
            seq: w.seq,
            tenant: w.entry.tenant,
            class,
        })
    }

    /// Dispatches the request [`Self::peek_in`] names.
    pub fn pop_in(
        &mut self,
        now: Millis,
        class: Class,
        eligible: &dyn Fn(FlowTenant, u32) -> bool,
    ) -> Option<Ticket> {
        let (tenant, class, aged) = self.choose(now, Some((class, eligible)))?;
        Some(self.take(tenant, class, aged))
    }

    /// Dispatches the head of `tenant`'s flow in `class`.
    fn take(&mut self, tenant: usize, class: Class, aged: bool) -> Ticket {
        let t = &mut self.tenants[tenant];
        let flow = &mut t.flows[class.index()];
        let w = flow.fifo.pop_front().expect("chosen flows have a head");
        let start = flow.vtime;
        flow.vtime += u128::from(w.entry.cost.0) * SCALE / u128::from(t.weight);
        t.queued -= 1;
        t.served_cost += w.entry.cost.0;
        self.stats.queued -= 1;
        self.stats.queued_by_class[class.index()] -= 1;
        self.band_vtime[class.index()] = self.band_vtime[class.index()].max(start);
        self.stats.dispatched += 1;
        if aged {
            self.stats.aged += 1;
        }
        self.last_aged = aged;
        Ticket {
            seq: w.seq,
            tenant: w.entry.tenant,
            class,
        }
    }

    /// Who [`Self::pop`] would return at `now`, without dispatching it (the caller checks
    /// that it can place it first). Drops expired interactive requests like `pop`.
    pub fn peek(&mut self, now: Millis) -> Option<Ticket> {
        let (tenant, class, _) = self.choose(now, None)?;
        let w = self.tenants[tenant].flows[class.index()].fifo.front()?;
        Some(Ticket {
            seq: w.seq,
            tenant: w.entry.tenant,
            class,
        })
    }

    /// The flow whose head goes next (and whether it goes because it aged), among `only`
    /// that class's flows if set, dropping interactive heads that can no longer meet
    /// their deadline. An aged batch head goes first unless the last dispatch was an aged
    /// one: then the next goes by priority, so aged batch work takes at most every other
    /// dispatch while interactive work waits.
    fn choose(&mut self, now: Millis, only: Only<'_>) -> Option<(usize, Class, bool)> {
        loop {
            let aged = if self.last_aged || only.is_some() {
                None
            } else {
                self.oldest_aged(now)
            };
            let (tenant, class) = aged
                .map(|t| (t, Class::Batch))
                .or_else(|| self.fairest(only))?;
            let t = &mut self.tenants[tenant];
            let fifo = &mut t.flows[class.index()].fifo;
            let head = fifo.front()?;
            if class == Class::Batch || head.entry.can_meet(now) {
                return Some((tenant, class, aged.is_some()));
            }
            // Not charged: it never ran.
            let w = fifo.pop_front()?;
            t.queued -= 1;
            self.stats.queued -= 1;
            self.stats.queued_by_class[class.index()] -= 1;
            self.stats.expired += 1;
            self.expired.push(Ticket {
                seq: w.seq,
                tenant: w.entry.tenant,
                class,
            });
        }
    }

    /// The tenant whose batch head has aged and arrived first (ties: push order).
    fn oldest_aged(&self, now: Millis) -> Option<usize> {
        let aging = self.cfg.aging_ms;
        self.tenants
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let w = t.flows[Class::Batch.index()].fifo.front()?;
                (w.entry.arrival.0.saturating_add(aging) <= now.0).then_some((
                    w.entry.arrival,
                    w.seq,
                    i,
                ))
            })
            .min()
            .map(|(_, _, i)| i)
    }

    /// The highest class with anything waiting (or `only`'s class, among its eligible
    /// tenants), and in it the tenant with the smallest virtual time (ties: push order of
    /// the heads).
    fn fairest(&self, only: Only<'_>) -> Option<(usize, Class)> {
        let classes: &[Class] = match only {
            Some((Class::Interactive, _)) => &[Class::Interactive],
            Some((Class::Batch, _)) => &[Class::Batch],
            None => &Class::ALL,
        };
        classes.iter().find_map(|&class| {
            self.tenants
                .iter()
                .enumerate()
                .filter(|(i, t)| only.is_none_or(|(_, ok)| ok(FlowTenant(*i as u32), t.weight)))
                .filter_map(|(i, t)| {
                    let f = &t.flows[class.index()];
                    f.fifo.front().map(|w| (f.vtime, w.seq, i))
                })
                .min()
                .map(|(_, _, i)| (i, class))
        })
    }

    /// Takes a waiting request out (its client went away or its wait timed out). False
    /// when it no longer waits (dispatched, expired or removed already).
    pub fn remove(&mut self, ticket: Ticket) -> bool {
        let Some(t) = self.tenants.get_mut(ticket.tenant.0 as usize) else {
            return false;
        };
        let fifo = &mut t.flows[ticket.class.index()].fifo;
        let Some(i) = fifo.iter().position(|w| w.seq == ticket.seq) else {
            return false;
        };
        fifo.remove(i);
        t.queued -= 1;
        self.stats.queued -= 1;
        self.stats.queued_by_class[ticket.class.index()] -= 1;
        self.stats.removed += 1;
        true
    }

    /// The requests `pop` dropped for their deadline since the last call.
    pub fn take_expired(&mut self) -> Vec<Ticket> {
        std::mem::take(&mut self.expired)
    }
}
