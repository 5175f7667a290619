//! `regions:`, `rollouts:` and `hot_prefixes:`: where this gateway is and how far the
//! others are, the checkpoint rollouts it runs, and the history it pre-warms them from.
//!
//! ```yaml
//! regions:
//!   home: eu
//!   mode: spill            # local | spill | global
//!   rtt: [{a: eu, b: us, ms: 70}, {a: eu, b: ap, ms: 140}]
//!   spill_margin_ms: 50
//! rollouts:
//!   - model: smollm2
//!     from: smollm2@a1b2
//!     to: smollm2@c3d4
//!     percent: 20            # canary share of conversations on `to`
//!     state: active          # active | paused | aborted
//!     prewarm: {top_n: 32}   # 0 = no pre-warm (naive cut-over)
//! ```

use super::error::ConfigError;
use router_policy::RolloutState;
use serde::{Deserialize, Serialize};

fn invalid(key: String, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

/// One model's rollout from checkpoint `from` to checkpoint `to`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutConfig {
    /// The model name clients use.
    pub model: String,
    /// The checkpoint id being replaced (as replicas report it).
    pub from: String,
    /// The new checkpoint id.
    pub to: String,
    /// Target share of conversations on `to`, percent.
    pub percent: f64,
    /// Active, paused or aborted.
    #[serde(default)]
    pub state: RolloutState,
    /// Replaying hot prefixes to `to`'s replicas before they take their share.
    #[serde(default)]
    pub prewarm: PrewarmConfig,
}

/// Pre-warm: the `top_n` hottest prefixes of `from` are replayed (prefill only) to every
/// replica of `to`; the share ramps with the fraction replayed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrewarmConfig {
    /// Prefixes to replay; 0 turns pre-warm off (the full share at once).
    pub top_n: usize,
    /// Shortest prefix worth replaying, tokens.
    pub min_tokens: usize,
    /// Replays in flight at once per replica.
    pub concurrency: usize,
    /// Timeout of one replay, ms (a timed-out replay counts as done, failed).
    pub timeout_ms: u64,
    /// The share ramps no faster than linearly over this many seconds from the start (0:
    /// as fast as the replay), spreading the recompute pre-warm cannot do (conversations'
    /// private histories) over time.
    pub ramp_s: u64,
}

impl Default for PrewarmConfig {
    fn default() -> Self {
        Self {
            top_n: 32,
            min_tokens: 32,
            concurrency: 2,
            timeout_ms: 30_000,
            ramp_s: 0,
        }
    }
}

/// The routing history kept per (model, checkpoint) for pre-warm.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HotPrefixConfig {
    /// Conversation keys remembered per checkpoint (the most requested survive).
    pub capacity: usize,
    /// Longest prefix kept per key, tokens.
    pub max_tokens: usize,
}

impl Default for HotPrefixConfig {
    fn default() -> Self {
        Self {
            capacity: 1024,
            max_tokens: 4096,
        }
    }
}

impl RolloutConfig {
    /// The target share as a fraction.
    pub fn share(&self) -> f64 {
        self.percent / 100.0
    }

    /// Checks one rollout; `key` is its path, e.g. `rollouts[0]`.
    pub fn validate(&self, key: &str) -> Result<(), ConfigError> {
        for (k, v) in [
            ("model", &self.model),
            ("from", &self.from),
            ("to", &self.to),
        ] {
            if v.is_empty() {
                return Err(invalid(format!("{key}.{k}"), "must be non-empty"));
            }
        }
        if self.from == self.to {
            return Err(invalid(format!("{key}.to"), "must differ from `from`"));
        }
        if !(self.percent.is_finite() && (0.0..=100.0).contains(&self.percent)) {
            return Err(invalid(
                format!("{key}.percent"),
                format!("{} is outside [0, 100]", self.percent),
            ));
        }
        if self.prewarm.concurrency == 0 || self.prewarm.concurrency > 64 {
            return Err(invalid(
                format!("{key}.prewarm.concurrency"),
                "must be within [1, 64]",
            ));
        }
        if self.prewarm.timeout_ms == 0 {
            return Err(invalid(
                format!("{key}.prewarm.timeout_ms"),
                "must be positive",
            ));
        }
        if self.prewarm.ramp_s > 86_400 {
            return Err(invalid(
                format!("{key}.prewarm.ramp_s"),
                "must be at most 86400 (a day)",
            ));
        }
        if self.prewarm.top_n > 10_000 {
            return Err(invalid(
                format!("{key}.prewarm.top_n"),
                "must be at most 10000",
            ));
        }
        Ok(())
    }
}

/// Checks every rollout (one per model) and the hot-prefix table.
pub(crate) fn validate_rollouts(
    rollouts: &[RolloutConfig],
    hot: &HotPrefixConfig,
) -> Result<(), ConfigError> {
    let mut models = std::collections::HashSet::new();
    for (i, r) in rollouts.iter().enumerate() {
        let key = format!("rollouts[{i}]");
        r.validate(&key)?;
        if !models.insert(r.model.as_str()) {
            return Err(invalid(
                format!("{key}.model"),
                format!("{:?} has another rollout; one per model", r.model),
            ));
        }
    }
    if hot.capacity == 0 || hot.capacity > 1 << 20 {
        return Err(invalid(
            "hot_prefixes.capacity".into(),
            "must be within [1, 1048576]",
        ));
    }
    if hot.max_tokens == 0 || hot.max_tokens > 1 << 20 {
        return Err(invalid(
            "hot_prefixes.max_tokens".into(),
            "must be within [1, 1048576]",
        ));
    }
    Ok(())
}

/// Checks `regions:`.
pub(crate) fn validate_regions(
    regions: Option<&router_policy::Regions>,
) -> Result<(), ConfigError> {
    if let Some(g) = regions {
        g.validate().map_err(|e| match e {
            router_policy::RouteError::InvalidConfig { key, reason } => {
                invalid(key.to_string(), reason)
            }
            other => invalid("regions".into(), other.to_string()),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ro() -> RolloutConfig {
        RolloutConfig {
            model: "m".into(),
            from: "m@1".into(),
            to: "m@2".into(),
            percent: 20.0,
            state: RolloutState::Active,
            prewarm: PrewarmConfig::default(),
        }
    }

    #[test]
    fn errors_name_the_key() {
        let hot = HotPrefixConfig::default();
        validate_rollouts(&[ro()], &hot).unwrap();
        let mut same = ro();
        same.to = "m@1".into();
        let e = validate_rollouts(&[same], &hot).unwrap_err().to_string();
        assert!(e.contains("rollouts[0].to"), "{e}");
        let mut pct = ro();
        pct.percent = 120.0;
        let e = validate_rollouts(&[pct], &hot).unwrap_err().to_string();
        assert!(e.contains("rollouts[0].percent"), "{e}");
        let e = validate_rollouts(&[ro(), ro()], &hot)
            .unwrap_err()
            .to_string();
        assert!(e.contains("rollouts[1].model"), "{e}");
        let yaml = "model: m\nfrom: a\nto: b\npercent: 5\nspeed: 3\n";
        let e = serde_yaml::from_str::<RolloutConfig>(yaml).unwrap_err();
        assert!(e.to_string().contains("speed"), "{e}");
        let g: router_policy::Regions =
            serde_yaml::from_str("home: eu\nrtt: [{a: eu, b: us, ms: -1}]\n").unwrap();
        let e = validate_regions(Some(&g)).unwrap_err().to_string();
        assert!(e.contains("regions.rtt.ms"), "{e}");
    }
}
