//! `loadtest simulate --replica-order fcfs,shortest`: the order the simulated replicas serve
//! prefills in (the replica's `--prefill-order`), the arms it expands to, and each arm's
//! comparison with the no-queueing floor (every request's own uncached prefill time).

use crate::metrics::order::OrderSummary;
use crate::metrics::{RequestRecord, Summary};
use crate::sim::CostProfile;
use clap::ValueEnum;
use router_policy::PrefillOrder;
use std::fmt::Write;

/// One arm of `--replica-order`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderArm {
    /// First come, first served (Warmpath's replica before this order existed).
    Fcfs,
    /// Shortest uncached prefill first, aged by `--prefill-slack`.
    Shortest,
}

/// Prefill-order flags.
#[derive(Clone, Debug, clap::Args)]
pub struct OrderArgs {
    /// Replica prefill orders, comma-separated: each runs every policy once with its
    /// replicas serving prefills first come, first served (`fcfs`) or shortest uncached
    /// prefill first with aging (`shortest`, the replica's default). With the flag, runs
    /// are labelled `/fcfs`, `/shortest` and an order table compares TTFT with the
    /// no-queueing floor. Default: `shortest`, unlabelled.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub replica_order: Vec<OrderArm>,
    /// Aging of `shortest`: a request is never passed by later arrivals once the replica
    /// has computed this many times its uncached prompt since it arrived (the replica's
    /// `--prefill-slack`).
    #[arg(long, default_value_t = router_policy::prefill_order::DEFAULT_SLACK)]
    pub prefill_slack: u32,
}

impl OrderArgs {
    /// The orders to run: one per `--replica-order` value, or the default alone.
    pub fn arms(&self) -> Vec<PrefillOrder> {
        let one = |a: OrderArm| match a {
            OrderArm::Fcfs => PrefillOrder::Fcfs,
            OrderArm::Shortest => PrefillOrder::shortest(self.prefill_slack),
        };
        let mut out: Vec<PrefillOrder> = Vec::new();
        for &a in &self.replica_order {
            if !out.contains(&one(a)) {
                out.push(one(a));
            }
        }
        if out.is_empty() {
            out.push(one(OrderArm::Shortest));
        }
        out
    }

    /// Whether runs carry the order in their label and get the order table.
    pub fn labelled(&self) -> bool {
        !self.replica_order.is_empty()
    }
}

/// Fills the order fields of an arm's summary: the floor of every completed request is
/// its uncached prompt tokens at the profile's prefill rate.
pub fn label_order(
    s: &mut Summary,
    order: PrefillOrder,
    profile: &CostProfile,
    records: &[RequestRecord],
) {
    let mut floors = Vec::new();
    let mut ratios = Vec::new();
    for r in records.iter().filter(|r| r.ok()) {
        let Some(ttft) = r.ttft_ms else { continue };
        let uncached = r
            .prompt_tokens
            .saturating_sub(r.cached_tokens.min(r.prompt_tokens));
        let floor = profile.prefill_ms(u64::from(uncached.max(1)));
        floors.push(floor);
        ratios.push(ttft / floor);
    }
    let median_floor_ms = percentile(&mut floors, 0.5);
    s.prefill_order = Some(OrderSummary {
        order: order.name().into(),
        slack: order.slack(),
        median_floor_ms,
        p99_floor_ms: percentile(&mut floors, 0.99),
        median_ttft_over_floor: s.median_ttft_ms / median_floor_ms.max(f64::MIN_POSITIVE),
        median_request_ratio: percentile(&mut ratios, 0.5),
    });
}

/// Nearest-rank percentile (0 for no values).
fn percentile(xs: &mut [f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let rank = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
    xs[rank - 1]
}

/// The order table: TTFT against the no-queueing floor per run (empty without order runs).
pub fn render(summaries: &[&Summary]) -> String {
    let mut out = String::new();
    if summaries.iter().all(|s| s.prefill_order.is_none()) {
        return out;
    }
    let header = format!(
        "{:<28} {:>9} {:>10} {:>10} {:>11} {:>11} {:>9} {:>9}",
        "policy / order",
        "order",
        "TTFT p50",
        "TTFT p99",
        "floor p50",
        "floor p99",
        "p50/floor",
        "med ratio"
    );
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.len()));
    for s in summaries {
        let Some(o) = &s.prefill_order else { continue };
        let name = match o.slack {
            Some(k) => format!("{}/{k}", o.order),
            None => o.order.clone(),
        };
        let _ = writeln!(
            out,
            "{:<28} {:>9} {:>8.1}ms {:>8.1}ms {:>9.1}ms {:>9.1}ms {:>8.2}x {:>8.2}x",
            s.policy,
            name,
            s.median_ttft_ms,
            s.p99_ttft_ms,
            o.median_floor_ms,
            o.p99_floor_ms,
            o.median_ttft_over_floor,
            o.median_request_ratio
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::RequestRecord;

    #[test]
    fn arms_default_to_the_replicas_order_and_dedup() {
        let a = OrderArgs {
            replica_order: vec![],
            prefill_slack: 3,
        };
        assert_eq!(a.arms(), vec![PrefillOrder::shortest(3)]);
        assert!(!a.labelled());
        let b = OrderArgs {
            replica_order: vec![OrderArm::Fcfs, OrderArm::Shortest, OrderArm::Fcfs],
            prefill_slack: 2,
        };
        assert_eq!(
            b.arms(),
            vec![PrefillOrder::Fcfs, PrefillOrder::shortest(2)]
        );
        assert!(b.labelled());
    }

    #[test]
    fn floor_is_the_uncached_prefill_time() {
        let profile = CostProfile {
            name: "t".into(),
            source: "test".into(),
            block_size: 16,
            kv_capacity_blocks: 100,
            prefill_tokens_per_s: 1000.0,
            prefill_step_overhead_ms: 0.0,
            decode_step_ms: vec![(1, 10.0)],
            max_batch: 8,
            max_prefill_tokens_per_step: 256,
            kv_bytes_per_token: None,
        };
        // 1,000 uncached tokens (1 s floor) with TTFT 3 s; 200 uncached (0.2 s) with 0.4 s.
        let rec = |prompt, cached, ttft| RequestRecord {
            prompt_tokens: prompt,
            cached_tokens: cached,
            ttft_ms: Some(ttft),
            output_tokens: 1,
            ..RequestRecord::default()
        };
        let records = vec![rec(1_500, 500, 3_000.0), rec(200, 0, 400.0)];
        let mut s = Summary::compute(&records, &Default::default());
        label_order(&mut s, PrefillOrder::Fcfs, &profile, &records);
        let o = s.prefill_order.clone().unwrap();
        assert_eq!(o.order, "fcfs");
        assert_eq!(o.median_floor_ms, 200.0);
        assert_eq!(o.p99_floor_ms, 1_000.0);
        assert_eq!(o.median_request_ratio, 2.0, "ratios 3 and 2");
        let t = render(&[&s]);
        assert!(t.contains("200.0ms") && t.contains("fcfs"), "{t}");
    }
}
