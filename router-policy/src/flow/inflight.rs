//! [`InFlight`]: the requests one model's replicas are running, by tenant and class, and
//! the rule that lets a waiting request past a full replica ([`InFlight::outranks`]).
//!
//! Fair queuing decides who goes next when a slot frees, but a slot frees only when a
//! request ends: a light tenant that arrives while a burst holds every slot waits for the
//! residual service time of a request it outranks, and on a busy fleet that is seconds.
//! A running prefill is not taken back (the gateway cannot preempt an upstream request),
//! so instead a request that **outranks** work already in flight may take one of a few
//! reserve slots past the per-replica cap (`admission.flow.reserve_per_replica`): the
//! replica then serves it beside that work, and its own prefill order puts a short prompt
//! first. A request outranks the work in flight when
//! - it is [`Class::Interactive`] and a [`Class::Batch`] request is running, or
//! - its tenant holds less than its weighted share of the requests in flight: with `n_t`
//!   of the `n` running, weight `w_t` and `W` the weights of the tenants holding any (and
//!   its own), `n_t / n < w_t / W`.
//!
//! A tenant at or above its share, or a batch request, never takes a reserve slot, so a
//! burst cannot grow into the reserve, and the reserve is the most the replicas are sent
//! past their cap.

use super::types::{Class, FlowTenant};

/// One tenant's requests in flight (per class) and its weight.
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    count: [u32; 2],
    weight: u32,
}

impl Held {
    fn all(&self) -> u32 {
        self.count[0] + self.count[1]
    }
}

/// The requests in flight on one model's replicas. Memory: one entry per tenant index
/// that held a request (the caller's indexes are dense and bounded).
#[derive(Clone, Debug, Default)]
pub struct InFlight {
    tenants: Vec<Held>,
    by_class: [u32; 2],
    total: u32,
    /// Sum of the weights of tenants with a request in flight.
    active_weight: u64,
}

impl InFlight {
    /// A request of `tenant` (weight `weight`, at least 1) in `class` went to a replica.
    pub fn start(&mut self, tenant: FlowTenant, weight: u32, class: Class) {
        let i = tenant.0 as usize;
        if self.tenants.len() <= i {
            self.tenants.resize(i + 1, Held::default());
        }
        let h = &mut self.tenants[i];
        if h.all() == 0 {
            h.weight = weight.max(1);
            self.active_weight += u64::from(h.weight);
        }
        h.count[class.index()] += 1;
        self.by_class[class.index()] += 1;
        self.total += 1;
    }

    /// A request [`Self::start`]ed with the same tenant and class ended. Unmatched calls
    /// are ignored.
    pub fn finish(&mut self, tenant: FlowTenant, class: Class) {
        let Some(h) = self.tenants.get_mut(tenant.0 as usize) else {
            return;
        };
        if h.count[class.index()] == 0 {
            return;
        }
        h.count[class.index()] -= 1;
        if h.all() == 0 {
            self.active_weight -= u64::from(h.weight);
        }
        self.by_class[class.index()] -= 1;
        self.total -= 1;
    }

    /// Requests in flight.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Requests `tenant` has in flight.
    pub fn of_tenant(&self, tenant: FlowTenant) -> u32 {
        self.tenants.get(tenant.0 as usize).map_or(0, Held::all)
    }

    /// Requests of `class` in flight.
    pub fn of_class(&self, class: Class) -> u32 {
        self.by_class[class.index()]
    }

    /// Whether a request of `tenant` (weight `weight`) in `class` outranks work in flight
    /// (see the module docs): it may take a reserve slot.
    pub fn outranks(&self, tenant: FlowTenant, weight: u32, class: Class) -> bool {
        if class == Class::Interactive && self.by_class[Class::Batch.index()] > 0 {
            return true;
        }
        if class == Class::Batch || self.total == 0 {
            return false;
        }
        let mine = self.of_tenant(tenant);
        let weight = u64::from(weight.max(1));
        let weights = if mine == 0 {
            self.active_weight + weight
        } else {
            self.active_weight
        };
        // mine / total < weight / weights, in integers.
        u64::from(mine) * weights < weight * u64::from(self.total)
    }

    /// Whether nothing is in flight (the caller may drop it).
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: FlowTenant = FlowTenant(0);
    const B: FlowTenant = FlowTenant(1);

    #[test]
    fn a_tenant_below_its_share_outranks_a_burst_and_one_at_it_does_not() {
        let mut f = InFlight::default();
        for _ in 0..4 {
            f.start(A, 1, Class::Interactive);
        }
        assert!(
            f.outranks(B, 1, Class::Interactive),
            "0 of 4 held, share 1/2"
        );
        assert!(!f.outranks(A, 1, Class::Interactive), "A holds all of them");
        f.start(B, 1, Class::Interactive);
        f.start(B, 1, Class::Interactive);
        assert!(f.outranks(B, 1, Class::Interactive), "2 of 6 < 1/2");
        f.start(B, 1, Class::Interactive);
        f.start(B, 1, Class::Interactive);
        assert!(!f.outranks(B, 1, Class::Interactive), "4 of 8 is its share");
        assert!(!f.outranks(A, 1, Class::Interactive), "4 of 8 is its share");
    }

    #[test]
    fn weights_set_the_share() {
        let mut f = InFlight::default();
        for _ in 0..3 {
            f.start(A, 1, Class::Interactive);
        }
        f.start(B, 3, Class::Interactive);
        f.start(B, 3, Class::Interactive);
        // B: 2 of 5 against a share of 3/4.
        assert!(f.outranks(B, 3, Class::Interactive));
        // A: 3 of 5 against 1/4.
        assert!(!f.outranks(A, 1, Class::Interactive));
    }

    #[test]
    fn interactive_outranks_running_batch_and_batch_outranks_nothing() {
        let mut f = InFlight::default();
        f.start(A, 1, Class::Batch);
        assert!(
            f.outranks(A, 1, Class::Interactive),
            "its own batch work too"
        );
        assert!(
            !f.outranks(B, 1, Class::Batch),
            "batch never takes the reserve"
        );
        f.finish(A, Class::Batch);
        assert!(f.is_empty());
        assert!(!f.outranks(B, 1, Class::Interactive), "nothing to outrank");
    }

    #[test]
    fn finish_undoes_start_and_ignores_strays() {
        let mut f = InFlight::default();
        f.finish(B, Class::Interactive);
        f.start(A, 2, Class::Interactive);
        f.start(B, 1, Class::Batch);
        f.finish(B, Class::Interactive); // B has no interactive request in flight
        assert_eq!((f.total(), f.of_tenant(B)), (2, 1));
        f.finish(A, Class::Interactive);
        f.finish(B, Class::Batch);
        f.finish(B, Class::Batch);
        assert!(f.is_empty());
        assert_eq!(f.active_weight, 0);
        assert_eq!((f.of_tenant(A), f.of_class(Class::Batch)), (0, 0));
    }
}
