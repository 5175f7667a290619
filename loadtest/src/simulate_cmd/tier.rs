//! `loadtest simulate --kv-tier off,on`: the flags of the shared KV tier, the arms they
//! expand to, and the tier fields of each arm's summary (hit rate split into tokens found
//! in the replica's own cache and tokens loaded from the tier).

use crate::metrics::tier::TierSummary;
use crate::metrics::{RequestRecord, Summary};
use crate::sim::TierSim;
use anyhow::bail;
use clap::ValueEnum;

/// One arm of `--kv-tier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TierArm {
    /// No shared tier: replicas reuse only their own cache.
    Off,
    /// Every replica writes its blocks to the shared tier and loads from it on a miss.
    On,
}

/// Shared-tier flags.
#[derive(Clone, Debug, clap::Args)]
pub struct TierArgs {
    /// Shared KV tier arms, comma-separated: each runs every policy once without (`off`)
    /// or with (`on`) a tier every replica writes its computed blocks to and loads the
    /// following run of blocks from on a local miss. Default: `off` (no tier columns).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub kv_tier: Vec<TierArm>,
    /// Tier load bandwidth, prompt tokens per second (replicas report it as their
    /// measured tier rate).
    #[arg(long, default_value_t = 20_000.0)]
    pub kv_tier_tokens_per_s: f64,
    /// Fixed cost of one tier lookup (paid on every local miss), ms.
    #[arg(long, default_value_t = 2.0)]
    pub kv_tier_lookup_ms: f64,
    /// Blocks the tier holds; the first written are evicted first beyond it.
    #[arg(long, default_value_t = 1 << 30)]
    pub kv_tier_capacity_blocks: u64,
}

/// One arm per `--kv-tier` value (`None` = off), or none without the flag.
pub fn arms(args: &TierArgs) -> anyhow::Result<Vec<Option<TierSim>>> {
    if args.kv_tier.is_empty() {
        return Ok(Vec::new());
    }
    if !(args.kv_tier_tokens_per_s.is_finite() && args.kv_tier_tokens_per_s > 0.0) {
        bail!(
            "--kv-tier-tokens-per-s must be > 0, got {}",
            args.kv_tier_tokens_per_s
        );
    }
    if !(args.kv_tier_lookup_ms.is_finite() && args.kv_tier_lookup_ms >= 0.0) {
        bail!(
            "--kv-tier-lookup-ms must be >= 0, got {}",
            args.kv_tier_lookup_ms
        );
    }
    if args.kv_tier_capacity_blocks == 0 {
        bail!("--kv-tier-capacity-blocks must be at least 1");
    }
    let mut out = Vec::new();
    for &a in &args.kv_tier {
        let arm = (a == TierArm::On).then_some(TierSim {
            tokens_per_s: args.kv_tier_tokens_per_s,
            lookup_ms: args.kv_tier_lookup_ms,
            capacity_blocks: args.kv_tier_capacity_blocks,
        });
        if !out.contains(&arm) {
            out.push(arm);
        }
    }
    Ok(out)
}

/// The arm's label suffix: `tier-off` or `tier-on`.
pub fn arm_label(arm: Option<&TierSim>) -> &'static str {
    match arm {
        None => "tier-off",
        Some(_) => "tier-on",
    }
}

/// Fills the tier fields of an arm's summary from its records (completed requests,
/// token-weighted like `cache_hit_rate`).
pub fn label_tier(s: &mut Summary, arm: Option<&TierSim>, records: &[RequestRecord]) {
    let (mut prompt, mut cached, mut tier) = (0u64, 0u64, 0u64);
    for r in records.iter().filter(|r| r.ok()) {
        let c = r.cached_tokens.min(r.prompt_tokens);
        prompt += u64::from(r.prompt_tokens);
        cached += u64::from(c);
        tier += u64::from(r.tier_cached_tokens.min(c));
    }
    let rate = |x: u64| x as f64 / prompt.max(1) as f64;
    s.kv_tier = Some(TierSummary {
        on: arm.is_some(),
        tokens_per_s: arm.map(|t| t.tokens_per_s),
        lookup_ms: arm.map(|t| t.lookup_ms),
        local_hit_rate: rate(cached - tier),
        tier_hit_rate: rate(tier),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[TierArm]) -> TierArgs {
        TierArgs {
            kv_tier: list.to_vec(),
            kv_tier_tokens_per_s: 20_000.0,
            kv_tier_lookup_ms: 2.0,
            kv_tier_capacity_blocks: 100,
        }
    }

    #[test]
    fn arms_labels_and_bad_values() {
        let a = arms(&args(&[TierArm::Off, TierArm::On, TierArm::On])).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(arm_label(a[0].as_ref()), "tier-off");
        assert_eq!(a[1].unwrap().capacity_blocks, 100);
        assert_eq!(arm_label(a[1].as_ref()), "tier-on");
        assert!(arms(&args(&[])).unwrap().is_empty());
        let mut bad = args(&[TierArm::On]);
        bad.kv_tier_tokens_per_s = 0.0;
        let e = arms(&bad).unwrap_err();
        assert!(e.to_string().contains("--kv-tier-tokens-per-s"), "{e}");
    }

    #[test]
    fn hit_rate_splits_into_local_and_tier() {
        let rec = |prompt, cached, tier| RequestRecord {
            prompt_tokens: prompt,
            cached_tokens: cached,
            tier_cached_tokens: tier,
            ..RequestRecord::default()
        };
        let records = [rec(100, 60, 40), rec(100, 20, 0)];
        let mut s = Summary::default();
        label_tier(&mut s, None, &records);
        let t = s.kv_tier.unwrap();
        assert!((t.local_hit_rate - 0.2).abs() < 1e-12);
        assert!((t.tier_hit_rate - 0.2).abs() < 1e-12);
        assert!(!t.on);
    }
}
