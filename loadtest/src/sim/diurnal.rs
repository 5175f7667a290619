//! Request origins for a multi-region run: each request of a workload is given an origin
//! region so that each region's share of the arrivals follows a daily activity curve shifted
//! by its time zone. The trace keeps its arrival times (the total load is the trace's);
//! only who sends each request changes, so at any moment one region is busier than others.
//!
//! Mapping: the workload's arrival span (first to last arrival) is stretched linearly onto
//! one day, 00:00 to 24:00 UTC. A region at UTC offset `z` hours is at local hour
//! `h = (24 * t / span + z) mod 24`, and its activity is a raised cosine peaking at
//! `peak_hour` local time and bottoming out 12 hours later at `floor` (a fraction of the
//! peak): `a(h) = floor + (1 - floor) * (1 + cos(2 pi (h - peak_hour) / 24)) / 2`. A request
//! at `t` comes from region `r` with probability proportional to `weight_r * a_r(h)`.
//!
//! By group, a whole group (a Mooncake conversation, a multi-turn user) takes the origin
//! drawn for its first request: a conversation stays where its user is.

use super::config::RegionIx;
use crate::rng::{mix, seeded, Draw};
use crate::workload::RequestSpec;
use std::collections::HashMap;
use std::f64::consts::PI;

/// The daily activity curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DailyCurve {
    /// Activity at the quietest hour, as a fraction of the peak, `[0, 1]`.
    pub floor: f64,
    /// Local hour of the peak.
    pub peak_hour: f64,
}

impl Default for DailyCurve {
    fn default() -> Self {
        Self {
            floor: 0.1,
            peak_hour: 14.0,
        }
    }
}

impl DailyCurve {
    /// Activity at local hour `h`, in `[floor, 1]`.
    pub fn activity(&self, h: f64) -> f64 {
        let f = self.floor.clamp(0.0, 1.0);
        f + (1.0 - f) * (1.0 + (2.0 * PI * (h - self.peak_hour) / 24.0).cos()) / 2.0
    }
}

/// UTC offset (hours) of a well-known region label; `None` for others.
pub fn known_utc_offset(name: &str) -> Option<f64> {
    match name {
        "eu" | "europe" | "eu-west" | "eu-central" => Some(0.0),
        "us" | "us-east" | "na" | "americas" => Some(-6.0),
        "ap" | "asia" | "ap-southeast" | "apac" => Some(8.0),
        _ => None,
    }
}

/// Who sends the requests.
#[derive(Clone, Debug, PartialEq)]
pub struct OriginModel {
    /// Each region's UTC offset, hours.
    pub utc_offset_h: Vec<f64>,
    /// Each region's static weight (its population).
    pub weight: Vec<f64>,
    /// The daily curve; `None`: static weights only.
    pub curve: Option<DailyCurve>,
}

impl OriginModel {
    /// Each region's weight at arrival `t_ms` of a span `[t0, t0 + span_ms]`.
    pub fn weights_at(&self, t_ms: f64, t0: f64, span_ms: f64, out: &mut Vec<f64>) {
        out.clear();
        let utc_h = if span_ms > 0.0 {
            24.0 * (t_ms - t0) / span_ms
        } else {
            0.0
        };
        for (w, z) in self.weight.iter().zip(&self.utc_offset_h) {
            let a = self
                .curve
                .map_or(1.0, |c| c.activity((utc_h + z).rem_euclid(24.0)));
            out.push(w.max(0.0) * a);
        }
    }

    /// The origin of every request (in request order), drawn with a seeded generator;
    /// `by_group`: once per [`RequestSpec::group`], at its first request.
    pub fn assign(&self, requests: &[RequestSpec], seed: u64, by_group: bool) -> Vec<RegionIx> {
        let (t0, t1) = requests
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
                (lo.min(r.arrival_ms), hi.max(r.arrival_ms))
            });
        let span = if t1 > t0 { t1 - t0 } else { 0.0 };
        let mut rng = seeded(mix(&[seed, 0x0008_161A]));
        let mut w = Vec::with_capacity(self.weight.len());
        let mut groups: HashMap<u64, RegionIx> = HashMap::new();
        requests
            .iter()
            .map(|r| {
                if let Some(o) = by_group.then(|| groups.get(&r.group)).flatten() {
                    return *o;
                }
                self.weights_at(r.arrival_ms, t0, span, &mut w);
                let total: f64 = w.iter().sum();
                let mut x = rng.next_f64() * total;
                let mut pick = w.len().saturating_sub(1);
                for (i, wi) in w.iter().enumerate() {
                    if x < *wi {
                        pick = i;
                        break;
                    }
                    x -= wi;
                }
                let o = RegionIx(u16::try_from(pick).unwrap_or(u16::MAX));
                if by_group {
                    groups.insert(r.group, o);
                }
                o
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Prompt;

    fn requests(n: usize, gap_ms: f64) -> Vec<RequestSpec> {
        (0..n)
            .map(|i| RequestSpec {
                id: i as u64,
                group: 0,
                arrival_ms: i as f64 * gap_ms,
                prompt: Prompt::default(),
                output_tokens: 1,
                class: None,
                system_segments: 0,
            })
            .collect()
    }

    #[test]
    fn the_curve_peaks_at_the_peak_hour_and_bottoms_at_the_floor() {
        let c = DailyCurve::default();
        assert!((c.activity(14.0) - 1.0).abs() < 1e-12);
        assert!((c.activity(2.0) - 0.1).abs() < 1e-12);
        assert!((c.activity(8.0) - 0.55).abs() < 1e-12);
    }

    #[test]
    fn each_regions_share_follows_its_local_day() {
        let m = OriginModel {
            utc_offset_h: vec![0.0, -6.0, 8.0],
            weight: vec![1.0, 1.0, 1.0],
            curve: Some(DailyCurve::default()),
        };
        // 24,000 requests over the "day": hour h holds requests 1000h..1000(h+1).
        let rs = requests(24_000, 1.0);
        let o = m.assign(&rs, 3, false);
        let share = |hour: usize, region: u16| {
            let slice = &o[hour * 1000..(hour + 1) * 1000];
            slice.iter().filter(|x| x.0 == region).count() as f64 / 1000.0
        };
        // 14:00 UTC: eu at its peak (1.0), us at 08:00 (0.55), ap at 22:00 (0.325).
        let total = 1.0 + 0.55 + 0.325;
        assert!(
            (share(14, 0) - 1.0 / total).abs() < 0.05,
            "{}",
            share(14, 0)
        );
        assert!((share(14, 2) - 0.325 / total).abs() < 0.05);
        // 06:00 UTC: ap is at its peak (14:00 local) and busiest.
        assert!(share(6, 2) > share(6, 0) && share(6, 2) > share(6, 1));
        // 20:00 UTC: us at 14:00 local.
        assert!(share(20, 1) > 0.5, "{}", share(20, 1));
        // Deterministic for a seed; static weights without a curve.
        assert_eq!(o, m.assign(&rs, 3, false));
        // By group: every request of a group shares its first request's origin.
        let mut grouped = rs.clone();
        grouped.iter_mut().for_each(|r| r.group = r.id % 50);
        let g = m.assign(&grouped, 3, true);
        assert!((0..24_000).all(|i| g[i] == g[i % 50]));
        assert!(
            (0..3).all(|k| g[..50].iter().any(|x| x.0 == k)),
            "all regions used"
        );
        let flat = OriginModel {
            curve: None,
            weight: vec![1.0, 0.0, 0.0],
            ..m
        };
        assert!(flat.assign(&rs[..100], 1, false).iter().all(|x| x.0 == 0));
        assert_eq!(known_utc_offset("us"), Some(-6.0));
    }
}
