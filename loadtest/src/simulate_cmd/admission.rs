//! `loadtest simulate --admission fcfs,flow`: tenants, priority classes and a TTFT
//! objective on the workload's requests, the gateway's admission arms they run under, and
//! each arm's goodput (requests meeting the objective per second) per tenant and class.

use crate::metrics::admission::{AdmissionGroup, AdmissionSummary};
use crate::metrics::{percentile, RequestRecord, Summary};
use crate::rng::mix;
use crate::sim::{AdmissionMode, AdmissionSim};
use crate::workload::Workload;
use anyhow::bail;
use clap::ValueEnum;
use router_policy::flow::{Class, FlowConfig};
use std::fmt::Write;

/// One arm of `--admission`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AdmissionArm {
    /// One first-come queue (the gateway before issue 42).
    Fcfs,
    /// The flow queue: fair per tenant, classes, deadline shedding.
    Flow,
}

/// Admission flags.
#[derive(Clone, Debug, clap::Args)]
pub struct AdmissionArgs {
    /// Gateway admission arms, comma-separated: each runs every policy once with at most
    /// `--slots-per-replica` requests in flight per replica and the rest waiting in one
    /// first-come queue (`fcfs`) or in the flow queue (`flow`: weighted fair per tenant,
    /// interactive before batch with aging, interactive requests shed when `warm`'s
    /// predicted TTFT misses the objective). Default: no admission (every request is
    /// routed on arrival).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub admission: Vec<AdmissionArm>,
    /// Tenants: a request of group (conversation, user) `g` belongs to tenant `g % N`.
    #[arg(long, default_value_t = 1)]
    pub tenants: u32,
    /// Tenant weights in the flow queue, comma-separated in tenant order (default 1 each).
    #[arg(long, value_delimiter = ',')]
    pub tenant_weights: Vec<u32>,
    /// Share of requests in the batch class (drawn per request from the seed); the rest
    /// are interactive.
    #[arg(long, default_value_t = 0.0)]
    pub batch_share: f64,
    /// TTFT objective of every request, ms: goodput counts the requests that meet it, and
    /// the flow queue sheds interactive requests predicted to miss it.
    #[arg(long)]
    pub ttft_slo_ms: Option<f64>,
    /// Requests in flight per replica (the gateway's `admission.max_in_flight_per_replica`).
    #[arg(long, default_value_t = 64)]
    pub slots_per_replica: u32,
    /// `fcfs`: requests allowed to wait (`admission.max_queue`).
    #[arg(long, default_value_t = 256)]
    pub admission_max_queue: u32,
    /// `fcfs`: how long a request waits for a slot before 503 (`admission.queue_timeout_ms`).
    #[arg(long, default_value_t = 2000.0)]
    pub admission_queue_timeout_ms: f64,
    /// `flow`: requests waiting, all tenants together.
    #[arg(long, default_value_t = 256)]
    pub flow_max_queued: u32,
    /// `flow`: requests one tenant may have waiting.
    #[arg(long, default_value_t = 64)]
    pub flow_max_queued_per_tenant: u32,
    /// `flow`: how long a batch request waits before it goes ahead of everything not aged.
    #[arg(long, default_value_t = 5000)]
    pub flow_aging_ms: u64,
    /// `flow`: a cached prompt token's share of a computed one's cost.
    #[arg(long, default_value_t = 0.1)]
    pub flow_cached_cost: f64,
    /// `flow`: slots per replica past `--slots-per-replica` for a request that outranks
    /// the work in flight (`admission.flow.reserve_per_replica`).
    #[arg(long, default_value_t = 1)]
    pub flow_reserve_per_replica: u32,
}

/// One [`AdmissionSim`] per `--admission` value (none without the flag).
pub fn arms(
    args: &AdmissionArgs,
    workload: &Workload,
    seed: u64,
) -> anyhow::Result<Vec<AdmissionSim>> {
    if args.admission.is_empty() {
        return Ok(Vec::new());
    }
    if args.tenants == 0 || args.slots_per_replica == 0 {
        bail!("--tenants and --slots-per-replica must be at least 1");
    }
    if !args.tenant_weights.is_empty() && args.tenant_weights.len() != args.tenants as usize {
        bail!(
            "--tenant-weights lists {} weights for {} tenants",
            args.tenant_weights.len(),
            args.tenants
        );
    }
    if !(0.0..=1.0).contains(&args.batch_share) {
        bail!("--batch-share must be between 0 and 1");
    }
    if args
        .ttft_slo_ms
        .is_some_and(|o| !(o.is_finite() && o > 0.0))
    {
        bail!("--ttft-slo-ms must be > 0");
    }
    let flow = FlowConfig {
        max_queued: args.flow_max_queued,
        max_queued_per_tenant: args.flow_max_queued_per_tenant,
        aging_ms: args.flow_aging_ms,
        cached_cost_fraction: args.flow_cached_cost,
        max_tenants: args.tenants.max(1),
    };
    flow.validate()?;
    let weights = if args.tenant_weights.is_empty() {
        vec![1; args.tenants as usize]
    } else {
        args.tenant_weights.clone()
    };
    let classes = (0..workload.requests.len())
        .map(|i| {
            let u = (mix(&[seed, 0x0C1A_55E5, i as u64]) >> 11) as f64 / (1u64 << 53) as f64;
            if u < args.batch_share {
                Class::Batch
            } else {
                Class::Interactive
            }
        })
        .collect::<Vec<_>>();
    let mut out = Vec::new();
    for &a in &args.admission {
        let mode = match a {
            AdmissionArm::Fcfs => AdmissionMode::Fcfs,
            AdmissionArm::Flow => AdmissionMode::Flow,
        };
        if out.iter().any(|s: &AdmissionSim| s.mode == mode) {
            continue;
        }
        out.push(AdmissionSim {
            mode,
            slots_per_replica: args.slots_per_replica,
            max_queue: args.admission_max_queue,
            queue_timeout_ms: args.admission_queue_timeout_ms,
            flow: flow.clone(),
            reserve_per_replica: match mode {
                AdmissionMode::Flow => args.flow_reserve_per_replica,
                AdmissionMode::Fcfs => 0,
            },
            weights: weights.clone(),
            classes: classes.clone(),
            ttft_objective_ms: args.ttft_slo_ms,
        });
    }
    Ok(out)
}

/// Fills an arm's admission summary from its records (in request order, `id` = index).
pub fn label_admission(s: &mut Summary, a: &AdmissionSim, records: &[RequestRecord]) {
    let first = records
        .iter()
        .map(|r| r.start_ms)
        .fold(f64::INFINITY, f64::min);
    let last = records.iter().map(|r| r.start_ms).fold(0.0, f64::max);
    let span_s = ((last - first) / 1000.0).max(1e-9);
    let mut groups: Vec<(AdmissionGroup, Vec<f64>)> = Vec::new();
    for r in records {
        let tenant = a.tenant_of(r.group).0;
        let class = a.class_of(r.id as usize).as_str();
        let pos = match groups
            .iter()
            .position(|(g, _)| g.tenant == tenant && g.class == class)
        {
            Some(p) => p,
            None => {
                let g = AdmissionGroup {
                    tenant,
                    class: class.into(),
                    ..AdmissionGroup::default()
                };
                groups.push((g, Vec::new()));
                groups.len() - 1
            }
        };
        let (g, ttfts) = &mut groups[pos];
        g.requests += 1;
        match (r.ok(), r.ttft_ms) {
            (true, Some(t)) => {
                g.completed += 1;
                g.met += usize::from(a.met(t));
                ttfts.push(t);
            }
            (true, None) => g.completed += 1,
            (false, _) => g.refused += 1,
        }
    }
    groups.sort_by(|x, y| (x.0.tenant, &x.0.class).cmp(&(y.0.tenant, &y.0.class)));
    let groups: Vec<AdmissionGroup> = groups
        .into_iter()
        .map(|(mut g, mut t)| {
            t.sort_by(f64::total_cmp);
            g.median_ttft_ms = percentile(&t, 50.0);
            g.p99_ttft_ms = percentile(&t, 99.0);
            g.goodput_per_s = g.met as f64 / span_s;
            g
        })
        .collect();
    let met = groups.iter().map(|g| g.met).sum::<usize>();
    s.admission = Some(AdmissionSummary {
        mode: a.mode.as_str().into(),
        objective_ms: a.ttft_objective_ms,
        span_s,
        met,
        refused: groups.iter().map(|g| g.refused).sum(),
        goodput_per_s: met as f64 / span_s,
        groups,
    });
}

/// The admission table: per run, then per tenant and class (empty without admission runs).
pub fn render(summaries: &[&Summary]) -> String {
    let mut out = String::new();
    if summaries.iter().all(|s| s.admission.is_none()) {
        return out;
    }
    let header = format!(
        "{:<28} {:>7} {:>12} {:>8} {:>8} {:>8} {:>10} {:>10} {:>10}",
        "policy / admission",
        "tenant",
        "class",
        "sent",
        "refused",
        "met",
        "TTFT p50",
        "TTFT p99",
        "goodput/s"
    );
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.len()));
    for s in summaries {
        let Some(a) = &s.admission else { continue };
        let sent: usize = a.groups.iter().map(|g| g.requests).sum();
        let _ = writeln!(
            out,
            "{:<28} {:>7} {:>12} {:>8} {:>8} {:>8} {:>8.1}ms {:>8.1}ms {:>10.3}",
            s.policy,
            "all",
            "all",
            sent,
            a.refused,
            a.met,
            s.median_ttft_ms,
            s.p99_ttft_ms,
            a.goodput_per_s
        );
        if a.groups.len() > 1 {
            for g in &a.groups {
                let _ = writeln!(
                    out,
                    "{:<28} {:>7} {:>12} {:>8} {:>8} {:>8} {:>8.1}ms {:>8.1}ms {:>10.3}",
                    "",
                    g.tenant,
                    g.class,
                    g.requests,
                    g.refused,
                    g.met,
                    g.median_ttft_ms,
                    g.p99_ttft_ms,
                    g.goodput_per_s
                );
            }
        }
    }
    out
}
