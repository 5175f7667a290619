//! `loadtest simulate --regions ...`: the flags of a multi-region run and their translation
//! into a [`RegionSim`] (replicas split evenly, one gateway per region, request origins from
//! the diurnal model), plus the `@MODE` suffix of a `--policy` value.

use crate::sim::diurnal::{known_utc_offset, DailyCurve, OriginModel};
use crate::sim::RegionSim;
use crate::workload::{Workload, WorkloadKind};
use anyhow::{bail, Context};
use clap::ArgAction;
use router_policy::{RegionMode, Rtt};
use warmpath_core::RegionId;

/// Multi-region flags.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct RegionArgs {
    /// Regions to split the replicas across, e.g. `eu,us,ap` (contiguous id ranges, one
    /// gateway per region deciding the requests that originate there).
    #[arg(long, value_delimiter = ',')]
    pub regions: Vec<String>,
    /// Round trips between regions in ms, symmetric: `eu-us=70,eu-ap=140,us-ap=140`.
    #[arg(long, value_delimiter = ',', value_parser = parse_rtt)]
    pub rtt: Vec<(String, String, f64)>,
    /// Round trip for a pair `--rtt` does not list, ms.
    #[arg(long, default_value_t = 250.0)]
    pub unknown_rtt_ms: f64,
    /// How gateways treat other regions (local, global, spill) for every `--policy` without
    /// its own `@MODE` suffix (e.g. `--policy warm@spill --policy cache_aware@global`).
    #[arg(long, value_parser = parse_mode, default_value = "spill")]
    pub region_mode: RegionMode,
    /// `warm`'s spill margin: a remote replica must beat home by this much, ms.
    #[arg(long, default_value_t = 50.0)]
    pub spill_margin_ms: f64,
    /// UTC offsets in hours, `eu=0,us=-6,ap=8` (default: those for eu/us/ap, else evenly
    /// spread over the day).
    #[arg(long, value_delimiter = ',', value_parser = parse_pair)]
    pub region_tz: Vec<(String, f64)>,
    /// Static weights of the regions' traffic, `eu=2,us=1` (default: equal).
    #[arg(long, value_delimiter = ',', value_parser = parse_pair)]
    pub origin_share: Vec<(String, f64)>,
    /// Follow a daily curve per region: the workload's arrival span is mapped onto one day
    /// and each region's share of arrivals peaks at 14:00 local time.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub diurnal: bool,
    /// Night-time activity as a fraction of the daily peak.
    #[arg(long, default_value_t = 0.1)]
    pub diurnal_floor: f64,
    /// Draw origins per request, or per group (a group's requests all come from where its
    /// first one did). Default `auto`: per group for mooncake and multi-turn (a group is one
    /// conversation or user), per request for azure and shared-prefix (a group is a system
    /// prompt that users everywhere share).
    #[arg(long, value_enum, default_value_t = OriginBy::Auto)]
    pub origin_by: OriginBy,
}

/// How origins are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OriginBy {
    /// By the workload: see `--origin-by`.
    #[default]
    Auto,
    /// Every request on its own.
    Request,
    /// Once per group.
    Group,
}

fn parse_mode(s: &str) -> Result<RegionMode, String> {
    match s {
        "local" => Ok(RegionMode::Local),
        "global" => Ok(RegionMode::Global),
        "spill" => Ok(RegionMode::Spill),
        _ => Err(format!("unknown region mode {s:?} (local, global, spill)")),
    }
}

fn parse_pair(s: &str) -> Result<(String, f64), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=NUMBER, got {s:?}"))?;
    let v: f64 = v.parse().map_err(|_| format!("bad number in {s:?}"))?;
    Ok((k.to_string(), v))
}

fn parse_rtt(s: &str) -> Result<(String, String, f64), String> {
    let (pair, ms) = parse_pair(s)?;
    let (a, b) = pair
        .split_once('-')
        .ok_or_else(|| format!("expected A-B=MS, got {s:?}"))?;
    if !(ms.is_finite() && ms >= 0.0) {
        return Err(format!("round trip {ms} in {s:?} is not a finite ms >= 0"));
    }
    Ok((a.to_string(), b.to_string(), ms))
}

/// Whether origins are drawn per group for this workload.
pub fn by_group(o: OriginBy, kind: WorkloadKind) -> bool {
    match o {
        OriginBy::Request => false,
        OriginBy::Group => true,
        OriginBy::Auto => matches!(kind, WorkloadKind::Mooncake | WorkloadKind::MultiTurn),
    }
}

/// Splits a trailing `@local`, `@global` or `@spill` off a `--policy` value.
pub fn split_mode(spec: &str) -> (&str, Option<RegionMode>) {
    if let Some((head, tail)) = spec.rsplit_once('@') {
        if let Ok(m) = parse_mode(tail) {
            return (head, Some(m));
        }
    }
    (spec, None)
}

/// The regional setup for `workload` (origins drawn with `seed`), or `None` without
/// `--regions`. The mode is `--region-mode`; callers override it per policy.
pub fn region_sim(
    args: &RegionArgs,
    workload: &Workload,
    kind: WorkloadKind,
    replicas: u32,
    seed: u64,
) -> anyhow::Result<Option<RegionSim>> {
    if args.regions.is_empty() {
        return Ok(None);
    }
    let names = &args.regions;
    let k = names.len();
    if names.iter().any(String::is_empty) || (1..k).any(|i| names[..i].contains(&names[i])) {
        bail!("--regions needs distinct, non-empty names, got {names:?}");
    }
    if (replicas as usize) < k {
        bail!("--replicas {replicas} cannot cover {k} regions");
    }
    let known = |n: &str| names.iter().any(|x| x == n);
    for (a, b, _) in &args.rtt {
        if !known(a) || !known(b) {
            bail!("--rtt {a}-{b}: both ends must be in --regions {names:?}");
        }
    }
    let lookup = |list: &[(String, f64)], flag: &str| -> anyhow::Result<()> {
        match list.iter().find(|(n, _)| !known(n)) {
            Some((n, _)) => bail!("{flag} {n}: not in --regions {names:?}"),
            None => Ok(()),
        }
    };
    lookup(&args.region_tz, "--region-tz")?;
    lookup(&args.origin_share, "--origin-share")?;
    let value = |list: &[(String, f64)], n: &str| list.iter().find(|(x, _)| x == n).map(|p| p.1);
    let model = OriginModel {
        utc_offset_h: names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                value(&args.region_tz, n)
                    .or_else(|| known_utc_offset(n))
                    .unwrap_or(24.0 * i as f64 / k as f64)
            })
            .collect(),
        weight: names
            .iter()
            .map(|n| value(&args.origin_share, n).unwrap_or(1.0))
            .collect(),
        curve: args.diurnal.then_some(DailyCurve {
            floor: args.diurnal_floor,
            ..DailyCurve::default()
        }),
    };
    if model.weight.iter().all(|w| *w <= 0.0) {
        bail!("--origin-share gives every region a zero weight");
    }
    let g = RegionSim {
        names: names.iter().map(|n| RegionId::new(n.as_str())).collect(),
        rtt: args
            .rtt
            .iter()
            .map(|(a, b, ms)| Rtt {
                a: RegionId::new(a.as_str()),
                b: RegionId::new(b.as_str()),
                ms: *ms,
            })
            .collect(),
        unknown_rtt_ms: args.unknown_rtt_ms,
        mode: args.region_mode,
        spill_margin_ms: args.spill_margin_ms,
        origins: model.assign(&workload.requests, seed, by_group(args.origin_by, kind)),
    };
    g.gateway_regions(crate::sim::RegionIx(0))
        .validate()
        .context("region settings")?;
    Ok(Some(g))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_modes_split_off_policies() {
        assert_eq!(
            parse_rtt("eu-us=70").unwrap(),
            ("eu".into(), "us".into(), 70.0)
        );
        assert!(parse_rtt("eu=70").is_err());
        assert!(parse_rtt("eu-us=-1").is_err());
        assert_eq!(parse_pair("us=-6").unwrap(), ("us".into(), -6.0));
        assert_eq!(split_mode("warm@local"), ("warm", Some(RegionMode::Local)));
        assert_eq!(split_mode("cache_aware@global").1, Some(RegionMode::Global));
        assert_eq!(split_mode("warm"), ("warm", None));
        // An `@` that is not a mode stays in the value (e.g. inside a JSON config).
        assert_eq!(split_mode("x@y"), ("x@y", None));
    }
}
