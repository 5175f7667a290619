//! `loadtest simulate --prefill-replicas LIST`: the flags of a role-split (P/D) cluster, the
//! arms they expand to, and the disaggregation fields of each arm's summary.

use crate::metrics::disagg::DisaggSummary;
use crate::metrics::{percentile, Summary};
use crate::sim::{CostProfile, DisaggSim, SimOutcome};
use anyhow::bail;
use router_policy::DisaggConfig;

/// Disaggregation flags.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct DisaggArgs {
    /// Role-split arms, comma-separated: each value N runs every policy once with replicas
    /// `0..N` as prefill replicas and the rest as decode replicas; 0 is the co-located
    /// cluster (every replica does both). E.g. `0,4` on 16 replicas compares co-located
    /// with 4 prefill + 12 decode.
    #[arg(long, value_delimiter = ',')]
    pub prefill_replicas: Vec<u32>,
    /// Split a request only when the decode replica would compute at least this many
    /// prompt tokens itself (the gateway's `disaggregation.min_prompt_tokens`).
    #[arg(long, default_value_t = DisaggConfig::default().min_prompt_tokens)]
    pub disagg_min_prompt_tokens: u32,
    /// KV bytes per token the transfer moves (default: the profile's `kv_bytes_per_token`).
    #[arg(long)]
    pub kv_bytes_per_token: Option<f64>,
    /// Link bandwidth between a prefill and a decode replica, Gbit/s.
    #[arg(long, default_value_t = 100.0)]
    pub kv_transfer_gbps: f64,
    /// Fixed cost of one transfer (request, checks, import), ms.
    #[arg(long, default_value_t = 2.0)]
    pub kv_transfer_overhead_ms: f64,
}

/// One arm per `--prefill-replicas` value (`None` = co-located), or none without the flag.
pub fn arms(
    args: &DisaggArgs,
    replicas: u32,
    profile: &CostProfile,
) -> anyhow::Result<Vec<Option<DisaggSim>>> {
    if args.prefill_replicas.is_empty() {
        return Ok(Vec::new());
    }
    if !(args.kv_transfer_gbps.is_finite() && args.kv_transfer_gbps > 0.0) {
        bail!(
            "--kv-transfer-gbps must be > 0 Gbit/s, got {}",
            args.kv_transfer_gbps
        );
    }
    if !(args.kv_transfer_overhead_ms.is_finite() && args.kv_transfer_overhead_ms >= 0.0) {
        bail!("--kv-transfer-overhead-ms must be >= 0 ms");
    }
    let kv_bytes_per_token = match args.kv_bytes_per_token.or(profile.kv_bytes_per_token) {
        Some(b) if b.is_finite() && b > 0.0 => b,
        Some(b) => bail!("--kv-bytes-per-token must be > 0, got {b}"),
        None => bail!(
            "--prefill-replicas needs the KV size per token: give --kv-bytes-per-token or \
             set kv_bytes_per_token in the profile {:?}",
            profile.name
        ),
    };
    let mut out = Vec::new();
    for &p in &args.prefill_replicas {
        if p >= replicas {
            bail!("--prefill-replicas {p}: at least one of the {replicas} replicas must decode");
        }
        let arm = (p > 0).then(|| DisaggSim {
            prefill_replicas: p,
            config: DisaggConfig {
                min_prompt_tokens: args.disagg_min_prompt_tokens,
            },
            kv_bytes_per_token,
            transfer_bytes_per_s: args.kv_transfer_gbps * 1e9 / 8.0,
            transfer_overhead_ms: args.kv_transfer_overhead_ms,
        });
        if !out.contains(&arm) {
            out.push(arm);
        }
    }
    Ok(out)
}

/// The arm's label suffix: `colocated` or `4P+12D`.
pub fn arm_label(arm: Option<&DisaggSim>, replicas: u32) -> String {
    match arm {
        None => "colocated".into(),
        Some(d) => format!("{}P+{}D", d.prefill_replicas, replicas - d.prefill_replicas),
    }
}

/// Fills the disaggregation fields of an arm's summary from its outcome.
pub fn label_disagg(s: &mut Summary, arm: Option<&DisaggSim>, replicas: u32, out: &SimOutcome) {
    let prefill = arm.map_or(0, |d| d.prefill_replicas);
    let mut exposed: Vec<f64> = out.transfers.iter().map(|t| t.exposed_ms).collect();
    exposed.sort_by(f64::total_cmp);
    let n = out.transfers.len();
    let mean = |total: f64| if n > 0 { total / n as f64 } else { 0.0 };
    s.disagg = Some(DisaggSummary {
        prefill_replicas: prefill,
        decode_replicas: replicas - prefill,
        split_fraction: n as f64 / s.num_prompts.max(1) as f64,
        mean_transferred_tokens: mean(
            out.transfers
                .iter()
                .map(|t| t.transferred_tokens as f64)
                .sum(),
        ),
        mean_prefill_cached_tokens: mean(
            out.transfers
                .iter()
                .map(|t| t.prefill_cached_tokens as f64)
                .sum(),
        ),
        mean_exposed_transfer_ms: mean(exposed.iter().sum()),
        p99_exposed_transfer_ms: percentile(&exposed, 99.0),
        mean_decode_computed_tokens: if out.decode_served > 0 {
            out.decode_computed_tokens as f64 / out.decode_served as f64
        } else {
            0.0
        },
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(kv: Option<f64>) -> CostProfile {
        let mut p: CostProfile = serde_json::from_str(include_str!(
            "../../../configs/profiles/gpu-h100-class.json"
        ))
        .unwrap();
        p.kv_bytes_per_token = kv;
        p
    }

    fn args(list: &[u32]) -> DisaggArgs {
        DisaggArgs {
            prefill_replicas: list.to_vec(),
            disagg_min_prompt_tokens: 512,
            kv_bytes_per_token: None,
            kv_transfer_gbps: 100.0,
            kv_transfer_overhead_ms: 2.0,
        }
    }

    #[test]
    fn each_value_is_one_arm_and_zero_is_colocated() {
        let arms = arms(&args(&[0, 4, 4, 8]), 16, &profile(Some(1000.0))).unwrap();
        assert_eq!(arms.len(), 3);
        assert!(arms[0].is_none());
        let a = arms[1].as_ref().unwrap();
        assert_eq!(a.prefill_replicas, 4);
        assert_eq!(a.transfer_bytes_per_s, 12.5e9);
        assert_eq!(arm_label(arms[1].as_ref(), 16), "4P+12D");
        assert_eq!(arm_label(None, 16), "colocated");
    }

    #[test]
    fn bad_values_are_refused_with_the_flag_named() {
        let e = arms(&args(&[16]), 16, &profile(Some(1.0))).unwrap_err();
        assert!(e.to_string().contains("--prefill-replicas 16"), "{e}");
        let e = arms(&args(&[4]), 16, &profile(None)).unwrap_err();
        assert!(e.to_string().contains("--kv-bytes-per-token"), "{e}");
        let mut a = args(&[4]);
        a.kv_transfer_gbps = 0.0;
        let e = arms(&a, 16, &profile(Some(1.0))).unwrap_err();
        assert!(e.to_string().contains("--kv-transfer-gbps"), "{e}");
        assert!(arms(&args(&[]), 16, &profile(None)).unwrap().is_empty());
    }
}
