//! `loadtest simulate --rollout-at SECONDS`: the flags of a checkpoint rollout, the arms
//! they expand to, and the rollout fields of each arm's summary.

use crate::metrics::rollout::RolloutSummary;
use crate::metrics::windows::windows;
use crate::metrics::Summary;
use crate::sim::{RolloutArm, RolloutKey, RolloutSim, SimOutcome};
use crate::workload::WorkloadKind;
use anyhow::bail;
use warmpath_core::CheckpointId;

/// Checkpoint id the new replicas serve in a rollout.
pub const SIM_NEW_CHECKPOINT: &str = "simulated-model@sim-next";

/// Rollout flags.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct RolloutArgs {
    /// Start a checkpoint rollout at this virtual second: `--rollout-replicas` replicas on a
    /// new checkpoint join with cold caches and conversations move to them. Every policy
    /// runs once per `--rollout-arms` arm.
    #[arg(long)]
    pub rollout_at: Option<f64>,
    /// Replicas on the new checkpoint (default: as many as `--replicas`, which stay on the
    /// old one).
    #[arg(long)]
    pub rollout_replicas: Option<u32>,
    /// Target share of conversations on the new checkpoint.
    #[arg(long, default_value_t = 1.0)]
    pub rollout_target: f64,
    /// Arms: `naive` (the share jumps to the target at once) and `prewarm` (hot prefixes
    /// replayed to the new replicas first, the share ramping with the replay).
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["naive", "prewarm"])]
    pub rollout_arms: Vec<RolloutArm>,
    /// Hot prefixes the prewarm arm replays.
    #[arg(long, default_value_t = 64)]
    pub prewarm_top: usize,
    /// Pre-warm requests in flight at once (default: a quarter of the new replicas, at least
    /// one, so three quarters stay free for the conversations that already moved).
    #[arg(long)]
    pub prewarm_concurrency: Option<usize>,
    /// Shortest prefix worth replaying, tokens.
    #[arg(long, default_value_t = 64)]
    pub prewarm_min_tokens: usize,
    /// Longest prefix the hot-prefix table keeps per conversation key, tokens.
    #[arg(long, default_value_t = 8192)]
    pub prewarm_max_tokens: usize,
    /// Window width of the over-time table, virtual seconds.
    #[arg(long, default_value_t = 10.0)]
    pub window: f64,
    /// What keeps a request on one checkpoint, as the gateway keys it: `conversation` (a
    /// chat: its messages through the first question; the workload's user), `request` (a
    /// one-shot chat: every request its own conversation), `first-blocks` (a completion:
    /// its first 8 blocks). Default: conversation for multi-turn, request for
    /// shared-prefix, first-blocks for the traces.
    #[arg(long, value_enum)]
    pub rollout_key: Option<RolloutKey>,
    /// The share ramps no faster than linearly over this many virtual seconds from the
    /// start (the gateway's `prewarm.ramp_s`; 0: as fast as the replay, or at once).
    #[arg(long, default_value_t = 0.0)]
    pub rollout_ramp_s: f64,
}

/// One [`RolloutSim`] per arm, or none without `--rollout-at`.
pub fn arms(
    args: &RolloutArgs,
    replicas: u32,
    kind: WorkloadKind,
) -> anyhow::Result<Vec<RolloutSim>> {
    let Some(at) = args.rollout_at else {
        return Ok(Vec::new());
    };
    if !(at.is_finite() && at >= 0.0) {
        bail!("--rollout-at must be a time >= 0 in seconds, got {at}");
    }
    if !(0.0..=1.0).contains(&args.rollout_target) {
        bail!("--rollout-target must be in [0, 1]");
    }
    if !(args.rollout_ramp_s.is_finite() && args.rollout_ramp_s >= 0.0) {
        bail!("--rollout-ramp-s must be >= 0 seconds");
    }
    if args.window <= 0.0 {
        bail!("--window must be > 0 seconds");
    }
    let new_replicas = args.rollout_replicas.unwrap_or(replicas);
    if new_replicas == 0 {
        bail!("--rollout-replicas must be at least 1");
    }
    let mut arms = args.rollout_arms.clone();
    arms.dedup();
    Ok(arms
        .into_iter()
        .map(|arm| RolloutSim {
            to: CheckpointId::new(SIM_NEW_CHECKPOINT),
            new_replicas,
            at_ms: at * 1000.0,
            target: args.rollout_target,
            arm,
            prewarm_top: args.prewarm_top,
            prewarm_concurrency: args
                .prewarm_concurrency
                .unwrap_or((new_replicas as usize / 4).max(1)),
            prewarm_min_tokens: args.prewarm_min_tokens,
            hot_capacity: 4096,
            hot_max_tokens: args.prewarm_max_tokens,
            ramp_ms: args.rollout_ramp_s * 1000.0,
            key: args.rollout_key.unwrap_or(match kind {
                WorkloadKind::MultiTurn | WorkloadKind::AgentLoop => RolloutKey::Conversation,
                WorkloadKind::SharedPrefix | WorkloadKind::Mixed => RolloutKey::Request,
                WorkloadKind::Mooncake | WorkloadKind::Azure => RolloutKey::FirstBlocks,
            }),
        })
        .collect())
}

/// Fills the rollout fields of an arm's summary from its outcome.
pub fn label_rollout(s: &mut Summary, r: &RolloutSim, out: &SimOutcome, window_s: f64) {
    let ok = out.records.iter().filter(|x| x.ok()).count();
    let on_new = out
        .records
        .iter()
        .filter(|x| x.ok() && x.checkpoint.as_ref() == Some(&r.to))
        .count();
    s.rollout = Some(RolloutSummary {
        arm: r.arm.as_str().to_string(),
        at_s: r.at_ms / 1000.0,
        target: r.target,
        new_replicas: r.new_replicas,
        prewarm_done_after_s: out.prewarm_done_ms.map(|t| (t - r.at_ms) / 1000.0),
        new_checkpoint_share: on_new as f64 / ok.max(1) as f64,
    });
    s.windows = windows(&out.records, r.at_ms, window_s * 1000.0, Some(&r.to));
}
