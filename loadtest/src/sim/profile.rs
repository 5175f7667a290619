//! Replica cost profiles: the numbers the simulator's continuous-batching model uses, read
//! from `configs/profiles/*.json` (written by `loadtest calibrate` or by hand with a source).

use serde::{Deserialize, Serialize};
use std::path::Path;

/// How long a replica takes to prefill and to decode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostProfile {
    /// Profile name.
    pub name: String,
    /// Where the numbers come from (measurement command, or published figures).
    pub source: String,
    /// Tokens per KV block (the replica's page size).
    pub block_size: u32,
    /// KV capacity per replica, in blocks.
    pub kv_capacity_blocks: u64,
    /// Prefill throughput for uncached prompt tokens, tokens per second.
    pub prefill_tokens_per_s: f64,
    /// Fixed cost of a step that runs prefill only, ms.
    #[serde(default)]
    pub prefill_step_overhead_ms: f64,
    /// Decode step time by batch size: `[batch, ms]` points, ascending; interpolated linearly
    /// and extrapolated with the last segment's slope.
    pub decode_step_ms: Vec<(u32, f64)>,
    /// Most sequences in a batch.
    pub max_batch: u32,
    /// Most prompt tokens prefilled per step (chunked prefill budget).
    pub max_prefill_tokens_per_step: u32,
    /// KV bytes per token (layers x KV heads x head dim x 2 x dtype size), for KV
    /// transfers between replicas; absent in profiles that predate them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_bytes_per_token: Option<f64>,
}

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Unreadable file.
    #[error("cannot read profile {0}: {1}")]
    Io(String, std::io::Error),
    /// Not a valid profile document.
    #[error("invalid profile {0}: {1}")]
    Parse(String, serde_json::Error),
    /// A value out of range.
    #[error("invalid profile {0}: {1}")]
    Invalid(String, String),
}

impl CostProfile {
    /// Reads and validates a profile file.
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError::Io(name.clone(), e))?;
        let p: CostProfile =
            serde_json::from_str(&text).map_err(|e| ProfileError::Parse(name.clone(), e))?;
        p.validate().map_err(|e| ProfileError::Invalid(name, e))?;
        Ok(p)
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), String> {
        if self.block_size == 0 || self.kv_capacity_blocks == 0 || self.max_batch == 0 {
            return Err("block_size, kv_capacity_blocks and max_batch must be positive".into());
        }
        if self.prefill_tokens_per_s <= 0.0 || self.max_prefill_tokens_per_step == 0 {
            return Err(
                "prefill_tokens_per_s and max_prefill_tokens_per_step must be positive".into(),
            );
        }
        if self
            .kv_bytes_per_token
            .is_some_and(|b| !(b.is_finite() && b > 0.0))
        {
            return Err("kv_bytes_per_token must be positive".into());
        }
        if self.decode_step_ms.is_empty()
            || self.decode_step_ms.windows(2).any(|w| w[0].0 >= w[1].0)
            || self
                .decode_step_ms
                .iter()
                .any(|&(b, ms)| b == 0 || ms <= 0.0)
        {
            return Err(
                "decode_step_ms needs ascending batch sizes >= 1 with positive times".into(),
            );
        }
        Ok(())
    }

    /// Decode step time for `batch` sequences, ms (0 for an empty batch).
    pub fn decode_ms(&self, batch: u32) -> f64 {
        if batch == 0 {
            return 0.0;
        }
        let pts = &self.decode_step_ms;
        if pts.len() == 1 || batch <= pts[0].0 {
            return pts[0].1;
        }
        let seg = pts
            .windows(2)
            .find(|w| batch <= w[1].0)
            .unwrap_or(&pts[pts.len() - 2..]);
        let ((b0, t0), (b1, t1)) = (seg[0], seg[1]);
        let slope = (t1 - t0) / (b1 - b0) as f64;
        t0 + slope * (batch - b0) as f64
    }

    /// Time to prefill `tokens` uncached tokens, ms.
    pub fn prefill_ms(&self, tokens: u64) -> f64 {
        tokens as f64 * 1000.0 / self.prefill_tokens_per_s
    }

    /// Duration of one step with `decode` decoding sequences and `prefill` prompt tokens.
    pub fn step_ms(&self, decode: u32, prefill: u64) -> f64 {
        let d = self.decode_ms(decode);
        let p = self.prefill_ms(prefill);
        if decode == 0 {
            p + self.prefill_step_overhead_ms
        } else {
            d + p
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn profile() -> CostProfile {
        CostProfile {
            name: "t".into(),
            source: "test".into(),
            block_size: 16,
            kv_capacity_blocks: 100,
            prefill_tokens_per_s: 1000.0,
            prefill_step_overhead_ms: 2.0,
            decode_step_ms: vec![(1, 10.0), (4, 16.0), (8, 20.0)],
            max_batch: 8,
            max_prefill_tokens_per_step: 256,
            kv_bytes_per_token: None,
        }
    }

    #[test]
    fn decode_interpolates_and_extrapolates() {
        let p = profile();
        assert_eq!(p.decode_ms(0), 0.0);
        assert_eq!(p.decode_ms(1), 10.0);
        assert_eq!(p.decode_ms(2), 12.0);
        assert_eq!(p.decode_ms(6), 18.0);
        assert_eq!(p.decode_ms(10), 22.0);
        assert_eq!(p.step_ms(0, 500), 502.0);
        assert_eq!(p.step_ms(4, 100), 116.0);
        assert!(p.validate().is_ok());
        let mut bad = p.clone();
        bad.decode_step_ms = vec![(4, 1.0), (2, 2.0)];
        assert!(bad.validate().is_err());
    }

    #[test]
    fn shipped_profiles_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/profiles");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.path().extension().is_some_and(|e| e == "json") {
                CostProfile::load(&entry.path()).unwrap();
                n += 1;
            }
        }
        assert!(n >= 2, "expected the shipped profiles in {}", dir.display());
    }
}
