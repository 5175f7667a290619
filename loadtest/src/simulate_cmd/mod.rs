//! `loadtest simulate`: builds the workload once, computes the oracle hit rate, checks the
//! offered load against the cluster, simulates each requested policy (with progress on
//! stderr) and reports one row / one JSON object per run. With `--regions` every policy
//! runs on a multi-region cluster (its mode from `@MODE` or `--region-mode`); with
//! `--rollout-at` every policy runs once per rollout arm; with `--prefill-replicas` once per
//! role split; with `--kv-tier` once per tier arm, with `--replica-order` once per
//! replica prefill order, and with `--admission` once per gateway admission mode (times any
//! of the others).

pub mod admission;
pub mod disagg;
pub mod load_check;
pub mod order;
pub mod progress_ui;
pub mod regions;
pub mod rollout;
pub mod tier;

use crate::cli::SimulateArgs;
use crate::metrics::Summary;
use crate::prompt::PromptHasher;
use crate::report::{
    class_table, disagg_table, json, plot, region_table, table, tier_table, window_table, RunReport,
};
use crate::rng::mix;
use crate::sim::{oracle_hit_rate, simulate_with, CostProfile, FleetSim, SimConfig};
use crate::workload::{self, LoadShape, Workload};
use anyhow::{bail, Context};
use progress_ui::ProgressUi;
use router_policy::{IndexConfig, PolicyConfig, POLICY_NAMES};
use std::time::Instant;
use warmpath_core::{BlockSize, CheckpointId, HashNamespace};

/// Checkpoint id the simulated replicas serve.
pub const SIM_CHECKPOINT: &str = "simulated-model@sim";

/// Runs the command; returns the reports (also written/printed as asked).
pub fn run(args: &SimulateArgs) -> anyhow::Result<Vec<RunReport>> {
    let mut profile = CostProfile::load(&args.profile)?;
    if let Some(c) = args.kv_capacity_blocks {
        profile.kv_capacity_blocks = c;
    }
    if let Some(b) = args.block_size {
        profile.block_size = b;
    }
    profile.validate().map_err(anyhow::Error::msg)?;
    if args.replicas == 0 {
        bail!("--replicas must be at least 1");
    }
    let started = Instant::now();
    let workload = workload::build(&args.workload, args.seed).context("building the workload")?;
    tracing::info!(
        requests = workload.requests.len(),
        ms = started.elapsed().as_millis() as u64,
        "workload built"
    );
    let policies: Vec<String> = if args.policy.is_empty() {
        POLICY_NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        args.policy.clone()
    };
    let region_sim = regions::region_sim(
        &args.regions,
        &workload,
        args.workload.workload,
        args.replicas,
        args.seed,
    )?;
    let arms = rollout::arms(&args.rollout, args.replicas, args.workload.workload)?;
    if region_sim.is_some() && !arms.is_empty() {
        bail!("--regions and --rollout-at cannot be combined (simulate them separately)");
    }
    let splits = disagg::arms(&args.disagg, args.replicas, &profile)?;
    if !splits.is_empty() && (region_sim.is_some() || !arms.is_empty()) {
        bail!(
            "--prefill-replicas cannot be combined with --regions or --rollout-at \
             (simulate them separately)"
        );
    }
    let tiers = tier::arms(&args.tier)?;
    if tiers.iter().any(Option::is_some) && splits.iter().any(Option::is_some) {
        bail!("--kv-tier on cannot be combined with --prefill-replicas (simulate them separately)");
    }
    if region_sim.is_some() && args.gateways != 1 {
        bail!("--gateways does not apply with --regions: there is one gateway per region");
    }
    let cfg = SimConfig {
        replicas: args.replicas,
        profile,
        kv_event_delay_ms: args.kv_event_delay_ms,
        load_staleness_ms: args.load_staleness_ms,
        checkpoint: CheckpointId::new(SIM_CHECKPOINT),
        index: IndexConfig::default(),
        fleet: FleetSim {
            gateways: args.gateways,
            kv_events: args.kv_events,
            shared_history: args.shared_history,
            history_delay_ms: args.history_delay_ms,
        },
        regions: region_sim,
        rollout: None,
        disagg: None,
        tier: None,
        prefill_order: router_policy::PrefillOrder::default(),
        admission: None,
    };
    let orders = args.order.arms();
    let admissions = admission::arms(&args.admission, &workload, args.seed)?;
    if !admissions.is_empty() && (!arms.is_empty() || !splits.is_empty()) {
        bail!("--admission cannot be combined with --rollout-at or --prefill-replicas");
    }
    let oracle = args.oracle.then(|| {
        let seed = HashNamespace::new(cfg.checkpoint.clone()).root_seed();
        let mut h = PromptHasher::new(seed, BlockSize(cfg.profile.block_size));
        oracle_hit_rate(
            &workload.requests,
            &mut h,
            cfg.profile.kv_capacity_blocks * args.replicas as u64,
        )
    });
    load_check::check(
        &workload,
        &cfg.profile,
        &args.profile,
        args.replicas,
        oracle,
        args.quiet,
    );
    let mut reports = Vec::new();
    for name in &policies {
        let variants: Vec<SimConfig> = if !arms.is_empty() {
            arms.iter()
                .map(|a| SimConfig {
                    rollout: Some(a.clone()),
                    ..cfg.clone()
                })
                .collect()
        } else if !splits.is_empty() {
            splits
                .iter()
                .map(|d| SimConfig {
                    disagg: d.clone(),
                    ..cfg.clone()
                })
                .collect()
        } else {
            vec![cfg.clone()]
        };
        let variants: Vec<SimConfig> = if tiers.is_empty() {
            variants
        } else {
            variants
                .iter()
                .flat_map(|v| {
                    tiers.iter().map(|t| SimConfig {
                        tier: *t,
                        ..v.clone()
                    })
                })
                .collect()
        };
        let variants: Vec<SimConfig> = variants
            .iter()
            .flat_map(|v| {
                orders.iter().map(|&o| SimConfig {
                    prefill_order: o,
                    ..v.clone()
                })
            })
            .collect();
        let variants: Vec<SimConfig> = if admissions.is_empty() {
            variants
        } else {
            variants
                .iter()
                .flat_map(|v| {
                    admissions.iter().map(|a| SimConfig {
                        admission: Some(a.clone()),
                        ..v.clone()
                    })
                })
                .collect()
        };
        for c in &variants {
            let t = Instant::now();
            let report = simulate_policy(name, &workload, c, args, oracle)?;
            if !args.quiet {
                eprintln!(
                    "simulated {}: {} requests on {} replicas in {:.2} s",
                    report.summary.policy,
                    report.records.len(),
                    args.replicas,
                    t.elapsed().as_secs_f64()
                );
            }
            reports.push(report);
        }
    }
    let rows: Vec<&Summary> = reports.iter().map(|r| &r.summary).collect();
    println!("{}", table::render(&rows));
    for extra in [
        class_table::render(&rows),
        region_table::render(&rows),
        window_table::render(&rows),
        disagg_table::render(&rows),
        tier_table::render(&rows),
        order::render(&rows),
        admission::render(&rows),
    ] {
        if !extra.is_empty() {
            println!("{extra}");
        }
    }
    write_outputs(&args.output, &reports)?;
    Ok(reports)
}

/// Simulates one policy by name on `cfg` and summarises it. A trailing `@local`, `@global`
/// or `@spill` sets the region mode of a regional run; a rollout arm or a role split is
/// appended to the label (`warm/prewarm`, `warm/4P+12D`).
pub fn simulate_policy(
    name: &str,
    workload: &Workload,
    cfg: &SimConfig,
    args: &SimulateArgs,
    oracle: Option<f64>,
) -> anyhow::Result<RunReport> {
    let (spec, mode) = regions::split_mode(name);
    let (mut label, mut pc) = parse_policy(spec)?;
    let mut cfg = cfg.clone();
    match (&mut cfg.regions, mode) {
        (Some(g), Some(m)) => {
            g.mode = m;
            label = format!("{label}@{}", mode_name(m));
        }
        (Some(g), None) => label = format!("{label}@{}", mode_name(g.mode)),
        (None, Some(_)) => bail!("--policy {name}: a region mode needs --regions"),
        (None, None) => {}
    }
    if let Some(r) = &cfg.rollout {
        label = format!("{label}/{}", r.arm.as_str());
    }
    let split_run = !args.disagg.prefill_replicas.is_empty();
    if split_run {
        label = format!(
            "{label}/{}",
            disagg::arm_label(cfg.disagg.as_ref(), cfg.replicas)
        );
    }
    let tier_run = !args.tier.kv_tier.is_empty();
    if tier_run {
        label = format!("{label}/{}", tier::arm_label(cfg.tier.as_ref()));
    }
    if args.order.labelled() {
        label = format!("{label}/{}", cfg.prefill_order.name());
    }
    if let Some(a) = &cfg.admission {
        label = format!("{label}/{}", a.mode.as_str());
    }
    if let PolicyConfig::Random { seed } = &mut pc {
        *seed = mix(&[args.seed, 0x0BAD_5EED]);
    }
    pc.validate()?;
    let mut ui = ProgressUi::new(&label, workload.requests.len(), args.quiet);
    let outcome = simulate_with(workload, &cfg, &pc, &mut ui);
    ui.finish();
    tracing::debug!(policy = name, events = outcome.events, "simulation done");
    let mut summary = Summary::compute(&outcome.records, &args.output.slo());
    summary.policy = label;
    summary.backend = "simulator".into();
    summary.workload = format!("{:?}", args.workload.workload).to_lowercase();
    summary.oracle_hit_rate = oracle;
    label_shape(&mut summary, &workload.shape);
    if let Some(r) = &cfg.rollout {
        rollout::label_rollout(&mut summary, r, &outcome, args.rollout.window);
    }
    if split_run {
        disagg::label_disagg(&mut summary, cfg.disagg.as_ref(), cfg.replicas, &outcome);
    }
    if tier_run {
        tier::label_tier(&mut summary, cfg.tier.as_ref(), &outcome.records);
    }
    if let Some(a) = &cfg.admission {
        admission::label_admission(&mut summary, a, &outcome.records);
    }
    if args.order.labelled() {
        order::label_order(
            &mut summary,
            cfg.prefill_order,
            &cfg.profile,
            &outcome.records,
        );
    }
    Ok(RunReport {
        summary,
        records: outcome.records,
    })
}

fn mode_name(m: router_policy::RegionMode) -> &'static str {
    match m {
        router_policy::RegionMode::Local => "local",
        router_policy::RegionMode::Global => "global",
        router_policy::RegionMode::Spill => "spill",
    }
}

/// A `--policy` value: a policy name with default parameters, or `LABEL=JSON` where JSON is a
/// router-policy config such as `{"type": "warm", "spread_queue_gap_ms": 2000}` (the row is
/// labelled LABEL). Returns the label and the config.
pub fn parse_policy(spec: &str) -> anyhow::Result<(String, PolicyConfig)> {
    match spec.split_once('=') {
        Some((label, json)) => {
            let pc: PolicyConfig = serde_json::from_str(json)
                .with_context(|| format!("--policy {label}: invalid policy config {json}"))?;
            Ok((label.to_string(), pc))
        }
        None => Ok((spec.to_string(), PolicyConfig::from_name(spec)?)),
    }
}

/// Records the arrival shape in vLLM's keys.
pub fn label_shape(s: &mut Summary, shape: &LoadShape) {
    match *shape {
        LoadShape::Poisson { rate } => s.request_rate = Some(rate),
        LoadShape::Closed { concurrency } => s.max_concurrency = Some(concurrency),
        LoadShape::Burst | LoadShape::Trace { .. } => {}
    }
}

/// Writes `--json`, `--requests-jsonl` and `--plot` outputs.
pub fn write_outputs(out: &crate::cli::OutputArgs, reports: &[RunReport]) -> anyhow::Result<()> {
    if let Some(p) = &out.json {
        json::write_summaries(p, reports)?;
    }
    if let Some(p) = &out.requests_jsonl {
        json::write_requests(p, reports)?;
    }
    if let Some(d) = &out.plot {
        let paths = plot::write_plots(d, reports)?;
        tracing::info!(?paths, "plots written");
    }
    Ok(())
}
