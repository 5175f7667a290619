//! `responses:`: what the gateway keeps of each Responses API answer, so a follow-up naming
//! it (`previous_response_id`) continues the conversation on the replica that holds its
//! prefix ([`crate::api::responses::store`]).

use super::error::ConfigError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest a record may be kept: a week.
pub(crate) const MAX_TTL_S: u64 = 7 * 24 * 3600;

/// Bounds of the Responses records, in this gateway's memory and in Redis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResponsesConfig {
    /// Records kept in this gateway's memory (least recently used evicted).
    pub max_records: usize,
    /// The most bytes of the records' JSON kept in this gateway's memory.
    pub max_bytes: usize,
    /// How long a record is kept, here and in Redis, seconds.
    pub ttl_s: u64,
}

impl Default for ResponsesConfig {
    fn default() -> Self {
        Self {
            max_records: 10_000,
            max_bytes: 256 << 20,
            ttl_s: 3600,
        }
    }
}

impl ResponsesConfig {
    /// How long a record is kept.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_s)
    }

    /// Each bound is at least 1 (a store that keeps nothing would turn every follow-up into
    /// a 400), and a record lives at most [`MAX_TTL_S`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, reason: String| ConfigError::Invalid {
            key: format!("responses.{key}"),
            reason,
        };
        if self.max_records == 0 {
            return Err(invalid("max_records", "must be at least 1".into()));
        }
        if self.max_bytes < 1 << 20 {
            return Err(invalid(
                "max_bytes",
                format!("{} is below the 1 MiB minimum", self.max_bytes),
            ));
        }
        if self.ttl_s == 0 || self.ttl_s > MAX_TTL_S {
            return Err(invalid(
                "ttl_s",
                format!("{} is outside 1..={MAX_TTL_S} (a week)", self.ttl_s),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_bound_names_its_key() {
        assert!(ResponsesConfig::default().validate().is_ok());
        for (cfg, key) in [
            (
                ResponsesConfig {
                    max_records: 0,
                    ..Default::default()
                },
                "responses.max_records",
            ),
            (
                ResponsesConfig {
                    max_bytes: 1000,
                    ..Default::default()
                },
                "responses.max_bytes",
            ),
            (
                ResponsesConfig {
                    ttl_s: 0,
                    ..Default::default()
                },
                "responses.ttl_s",
            ),
            (
                ResponsesConfig {
                    ttl_s: MAX_TTL_S + 1,
                    ..Default::default()
                },
                "responses.ttl_s",
            ),
        ] {
            match cfg.validate() {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{cfg:?}: {other:?}"),
            }
        }
    }
}
