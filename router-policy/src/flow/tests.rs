//! Unit and property tests of the flow queue.

use super::*;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use warmpath_core::Millis;

fn entry(tenant: u32, class: Class, cost_tokens: u64, arrival: u64) -> Entry {
    Entry {
        tenant: FlowTenant(tenant),
        class,
        cost: Cost(cost_tokens * 1000),
        arrival: Millis(arrival),
        deadline: None,
        predicted_ttft: Millis(0),
    }
}

fn queue() -> FlowQueue {
    FlowQueue::new(FlowConfig {
        max_queued: 1000,
        max_queued_per_tenant: 500,
        aging_ms: 1000,
        ..FlowConfig::default()
    })
}

#[test]
fn cost_charges_cached_tokens_at_the_fraction_and_never_zero() {
    assert_eq!(prefill_cost(1000, 0, 0.1), Cost(1_000_000));
    assert_eq!(prefill_cost(1000, 900, 0.1), Cost(100_000 + 90_000));
    assert_eq!(prefill_cost(1000, 5000, 0.0), Cost(1000));
    assert_eq!(prefill_cost(0, 0, 0.5), Cost(1000));
    assert_eq!(prefill_cost(10, 10, 1.0), Cost(10_000));
}

#[test]
fn a_burst_tenant_does_not_hold_back_a_light_one() {
    let mut q = queue();
    for i in 0..100 {
        q.push(entry(0, Class::Interactive, 400, i)).unwrap();
    }
    let light = q.push(entry(1, Class::Interactive, 50, 100)).unwrap();
    // The light tenant's one request goes within the first two dispatches, not after 100.
    let first_two = [q.pop(Millis(101)).unwrap(), q.pop(Millis(101)).unwrap()];
    assert!(first_two.contains(&light), "{first_two:?}");
}

#[test]
fn weights_split_dispatches_by_cost() {
    let mut q = queue();
    q.set_tenant(FlowTenant(0), 3, None);
    q.set_tenant(FlowTenant(1), 1, None);
    for i in 0..400 {
        q.push(entry(0, Class::Interactive, 10, i)).unwrap();
        q.push(entry(1, Class::Interactive, 10, i)).unwrap();
    }
    let mut served = [0u32; 2];
    for _ in 0..400 {
        served[q.pop(Millis(500)).unwrap().tenant().0 as usize] += 1;
    }
    assert_eq!(served, [300, 100]);
}

#[test]
fn aged_batch_takes_every_other_slot_while_interactive_waits() {
    let mut q = queue();
    let b: Vec<Ticket> = (0..3)
        .map(|i| q.push(entry(0, Class::Batch, 10, i)).unwrap())
        .collect();
    let i: Vec<Ticket> = (0..3)
        .map(|k| q.push(entry(1, Class::Interactive, 10, 2000 + k)).unwrap())
        .collect();
    // Every batch request has aged at 2000: they alternate with interactive ones rather
    // than all going first.
    let order: Vec<Ticket> = (0..6).map(|_| q.pop(Millis(2000)).unwrap()).collect();
    assert_eq!(order, [b[0], i[0], b[1], i[1], b[2], i[2]]);
    assert_eq!(q.stats().aged, 3);
}

#[test]
fn peek_in_names_the_next_of_one_class_whoever_heads_the_queue() {
    let mut q = queue();
    let b = q.push(entry(0, Class::Batch, 10, 0)).unwrap();
    let i = q.push(entry(1, Class::Interactive, 10, 1500)).unwrap();
    // The aged batch request heads the queue; the interactive one is next of its class.
    assert_eq!(q.peek(Millis(2000)), Some(b));
    let anyone = |_: FlowTenant, _: u32| true;
    assert_eq!(
        q.peek_in(Millis(2000), Class::Interactive, &anyone),
        Some(i)
    );
    // Among eligible tenants only: tenant 1 is not, so nobody.
    let not_one = |t: FlowTenant, _: u32| t != FlowTenant(1);
    assert_eq!(q.peek_in(Millis(2000), Class::Interactive, &not_one), None);
    assert_eq!(q.pop_in(Millis(2000), Class::Interactive, &anyone), Some(i));
    assert_eq!(q.pop(Millis(2000)), Some(b));
    assert!(q.is_empty());
}

#[test]
fn interactive_goes_before_batch_until_batch_ages() {
    let mut q = queue();
    let b = q.push(entry(0, Class::Batch, 10, 0)).unwrap();
    let i1 = q.push(entry(1, Class::Interactive, 10, 10)).unwrap();
    assert_eq!(q.pop(Millis(20)), Some(i1));
    let i2 = q.push(entry(1, Class::Interactive, 10, 30)).unwrap();
    // Not aged yet at 999: interactive first.
    assert_eq!(q.pop(Millis(999)), Some(i2));
    q.push(entry(1, Class::Interactive, 10, 1000)).unwrap();
    // Aged at 1000: batch goes ahead of the waiting interactive request.
    assert_eq!(q.pop(Millis(1000)), Some(b));
    assert_eq!(q.stats().aged, 1);
}

#[test]
fn deadlines_shed_interactive_at_push_and_at_pop_but_let_batch_wait() {
    let mut q = queue();
    let mut e = entry(0, Class::Interactive, 10, 0);
    e.deadline = Some(Millis(100));
    e.predicted_ttft = Millis(150);
    assert_eq!(
        q.push(e),
        Err(Refusal::Deadline {
            predicted: Millis(150),
            objective: Millis(100)
        })
    );
    e.class = Class::Batch;
    let batch = q.push(e).unwrap();
    e.class = Class::Interactive;
    e.predicted_ttft = Millis(50);
    let late = q.push(e).unwrap();
    // At 60 the interactive one can no longer make it (60 + 50 > 100): dropped, and the
    // batch one goes.
    assert_eq!(q.pop(Millis(60)), Some(batch));
    assert_eq!(q.take_expired(), vec![late]);
    assert!(q.is_empty());
    assert_eq!(q.stats().expired, 1);
    assert_eq!(q.stats().refused_deadline, 1);
}

#[test]
fn bounds_refuse_per_tenant_then_globally() {
    let mut q = FlowQueue::new(FlowConfig {
        max_queued: 3,
        max_queued_per_tenant: 2,
        ..FlowConfig::default()
    });
    q.set_tenant(FlowTenant(2), 1, Some(5));
    q.push(entry(0, Class::Interactive, 1, 0)).unwrap();
    q.push(entry(0, Class::Batch, 1, 0)).unwrap();
    assert_eq!(
        q.push(entry(0, Class::Interactive, 1, 0)),
        Err(Refusal::TenantFull { limit: 2 })
    );
    q.push(entry(2, Class::Interactive, 1, 0)).unwrap();
    assert_eq!(
        q.push(entry(2, Class::Interactive, 1, 0)),
        Err(Refusal::QueueFull { limit: 3 })
    );
    assert_eq!(
        q.push(entry(5000, Class::Interactive, 1, 0)),
        Err(Refusal::UnknownTenant)
    );
}

#[test]
fn remove_takes_a_waiting_request_out_once() {
    let mut q = queue();
    let a = q.push(entry(0, Class::Interactive, 1, 0)).unwrap();
    let b = q.push(entry(0, Class::Interactive, 1, 0)).unwrap();
    assert!(q.remove(a));
    assert!(!q.remove(a));
    assert_eq!(q.tenant_queued(FlowTenant(0)), 1);
    assert_eq!(q.pop(Millis(0)), Some(b));
    assert!(!q.remove(b));
    assert_eq!(q.pop(Millis(0)), None);
}

#[test]
fn an_idle_tenant_saves_up_no_credit() {
    let mut q = queue();
    // Tenant 0 is served alone for a long time.
    for i in 0..50 {
        q.push(entry(0, Class::Interactive, 10, i)).unwrap();
        q.pop(Millis(i)).unwrap();
    }
    // Tenant 1 arrives; both backlogged: they alternate, tenant 1 does not get 50 in a row.
    for i in 0..10 {
        q.push(entry(0, Class::Interactive, 10, 100 + i)).unwrap();
        q.push(entry(1, Class::Interactive, 10, 100 + i)).unwrap();
    }
    let order: Vec<u32> = (0..6)
        .map(|_| q.pop(Millis(200)).unwrap().tenant().0)
        .collect();
    assert_eq!(order.iter().filter(|&&t| t == 1).count(), 3, "{order:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, rng_seed: RngSeed::Fixed(42), ..ProptestConfig::default() })]

    /// While every tenant stays backlogged, served cost / weight of any two differ by at
    /// most max_cost_i / w_i + max_cost_j / w_j (start-time fair queuing's bound).
    #[test]
    fn weights_hold_within_the_sfq_bound(
        weights in proptest::collection::vec(1u32..8, 2..5),
        costs in proptest::collection::vec(1u64..500, 1..20),
        pops in 50usize..400,
    ) {
        let mut q = queue();
        let n = weights.len();
        for (i, w) in weights.iter().enumerate() {
            q.set_tenant(FlowTenant(i as u32), *w, Some(1000));
        }
        let max_cost = costs.iter().max().copied().unwrap() * 1000;
        let mut k = 0usize;
        // Each tenant keeps 3 waiting: refill after every pop.
        for t in 0..n {
            for _ in 0..3 {
                q.push(entry(t as u32, Class::Interactive, costs[k % costs.len()], 0)).unwrap();
                k += 1;
            }
        }
        for _ in 0..pops {
            let t = q.pop(Millis(0)).unwrap().tenant().0;
            q.push(entry(t, Class::Interactive, costs[(k * 7 + t as usize) % costs.len()], 0)).unwrap();
            k += 1;
        }
        for i in 0..n {
            for j in 0..n {
                let (wi, wj) = (f64::from(weights[i]), f64::from(weights[j]));
                let si = q.served_cost(FlowTenant(i as u32)) as f64 / wi;
                let sj = q.served_cost(FlowTenant(j as u32)) as f64 / wj;
                let bound = max_cost as f64 / wi + max_cost as f64 / wj;
                prop_assert!((si - sj).abs() <= bound + 1e-6, "tenants {i},{j}: {si} vs {sj}, bound {bound}");
            }
        }
    }

    /// Under a flood of interactive work, once a batch request has aged, a request that
    /// arrived after it is dispatched before it only right after an aged dispatch (aged
    /// work takes every other slot); and every batch request is served.
    #[test]
    fn batch_is_never_starved_past_aging(
        ops in proptest::collection::vec((0u32..4, any::<bool>(), 1u64..100, 0u64..30), 1..300),
    ) {
        let mut q = queue();
        let aging = q.config().aging_ms;
        let mut now = 0u64;
        let mut waiting: Vec<(Ticket, u64)> = Vec::new();
        let mut batch_pushed = 0u64;
        let mut prev_aged = false;
        for (tenant, batch, cost, dt) in ops {
            now += dt;
            let class = if batch { Class::Batch } else { Class::Interactive };
            // Interactive floods: two pushes per pop.
            let t = q.push(entry(tenant, class, cost, now)).unwrap();
            waiting.push((t, now));
            batch_pushed += u64::from(batch);
            if !batch {
                let t2 = q.push(entry(tenant, class, cost, now)).unwrap();
                waiting.push((t2, now));
            }
            let aged_before = q.stats().aged;
            let got = q.pop(Millis(now)).unwrap();
            let arrival = waiting.iter().find(|(t, _)| *t == got).unwrap().1;
            for (t, a) in &waiting {
                if t.class() == Class::Batch && a + aging <= now && arrival > *a {
                    prop_assert!(prev_aged, "{got:?} (arrived {arrival}) went before aged batch {t:?} (arrived {a}) without an aged dispatch just before");
                }
            }
            prev_aged = q.stats().aged > aged_before;
            waiting.retain(|(t, _)| *t != got);
        }
        // Drain: batch all served eventually.
        let mut batch_served = 0u64;
        while let Some(t) = q.pop(Millis(now + aging)) {
            batch_served += u64::from(t.class() == Class::Batch);
        }
        let batch_left = waiting.iter().filter(|(t, _)| t.class() == Class::Batch).count() as u64;
        prop_assert_eq!(batch_served, batch_left);
        prop_assert!(batch_left <= batch_pushed);
        prop_assert!(q.is_empty());
    }

    /// Per-tenant and global bounds hold under any mix of pushes, pops and removes, and
    /// a refusal happens exactly when a bound is reached.
    #[test]
    fn bounds_hold(
        ops in proptest::collection::vec((0u32..5, 0u8..4), 1..400),
        per_tenant in 1u32..6,
        global in 1u32..15,
    ) {
        let mut q = FlowQueue::new(FlowConfig {
            max_queued: global,
            max_queued_per_tenant: per_tenant,
            ..FlowConfig::default()
        });
        let mut held: Vec<Ticket> = Vec::new();
        for (tenant, op) in ops {
            match op {
                0 | 1 => {
                    let before_t = q.tenant_queued(FlowTenant(tenant));
                    let before = q.len() as u32;
                    match q.push(entry(tenant, if op == 0 { Class::Interactive } else { Class::Batch }, 5, 0)) {
                        Ok(t) => {
                            prop_assert!(before_t < per_tenant && before < global);
                            held.push(t);
                        }
                        Err(Refusal::TenantFull { .. }) => prop_assert_eq!(before_t, per_tenant),
                        Err(Refusal::QueueFull { .. }) => prop_assert_eq!(before, global),
                        Err(r) => prop_assert!(false, "unexpected {r:?}"),
                    }
                }
                2 => {
                    if let Some(t) = q.pop(Millis(0)) {
                        prop_assert!(held.contains(&t));
                        held.retain(|h| *h != t);
                    }
                }
                _ => {
                    if let Some(t) = held.pop() {
                        prop_assert!(q.remove(t));
                    }
                }
            }
            prop_assert!(q.len() as u32 <= global);
            prop_assert_eq!(q.len(), held.len());
            for t in 0..5 {
                prop_assert!(q.tenant_queued(FlowTenant(t)) <= per_tenant);
            }
        }
    }
}

#[test]
fn peek_names_what_pop_returns_without_taking_it() {
    let mut q = queue();
    q.set_tenant(FlowTenant(1), 2, None);
    for i in 0..20 {
        q.push(entry(
            i % 3,
            if i % 4 == 0 {
                Class::Batch
            } else {
                Class::Interactive
            },
            7 + u64::from(i),
            u64::from(i) * 100,
        ))
        .unwrap();
    }
    let mut now = 2000;
    while let Some(p) = q.peek(Millis(now)) {
        assert_eq!(q.peek(Millis(now)), Some(p));
        assert_eq!(q.pop(Millis(now)), Some(p));
        now += 50;
    }
    assert!(q.is_empty());
}
