//! `epp:`: the Endpoint Picker mode (`gateway epp`, [`crate::epp`]): where its ext_proc gRPC
//! server listens and which body mode Envoy is configured with when a request does not say.

use super::error::ConfigError;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// How Envoy sends a request body to the EPP when its `ProcessingRequest` carries no
/// `protocol_config` (Envoy before 1.33 sends none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EppBodyMode {
    /// `FULL_DUPLEX_STREAMED` (what Envoy Gateway, kgateway and Istio configure for an
    /// `InferencePool`): the EPP answers the headers after the whole body, and hands the
    /// body back as streamed mutations.
    #[default]
    FullDuplexStreamed,
    /// `BUFFERED`: Envoy waits for the headers' answer, then sends the body in one message;
    /// the endpoint comes in the body's answer.
    Buffered,
}

/// The Endpoint Picker's listener and defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EppConfig {
    /// The ext_proc gRPC listen address (`gateway epp`); the admin listener (dashboard,
    /// metrics, decision log) stays on `admin_listen`.
    pub listen: String,
    /// The request body mode assumed when Envoy does not send its protocol configuration.
    pub body_mode: EppBodyMode,
    /// The largest request body the EPP gathers before it answers 413.
    pub max_body_bytes: usize,
}

impl Default for EppConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9002".into(),
            body_mode: EppBodyMode::default(),
            max_body_bytes: 32 << 20,
        }
    }
}

impl EppConfig {
    /// The listen address parses and the body bound is at least 1 KiB.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, reason: String| ConfigError::Invalid {
            key: format!("epp.{key}"),
            reason,
        };
        self.listen
            .parse::<SocketAddr>()
            .map_err(|e| invalid("listen", format!("{:?}: {e}", self.listen)))?;
        if self.max_body_bytes < 1024 {
            return Err(invalid(
                "max_body_bytes",
                format!("{} is below the 1 KiB minimum", self.max_body_bytes),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_bad_values_name_their_key() {
        let c: EppConfig =
            serde_yaml::from_str("{listen: '0.0.0.0:9002', body_mode: buffered}").expect("yaml");
        assert_eq!(c.body_mode, EppBodyMode::Buffered);
        assert!(c.validate().is_ok());
        assert!(serde_yaml::from_str::<EppConfig>("{port: 1}").is_err());
        let bad = EppConfig {
            listen: "nowhere".into(),
            ..EppConfig::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("epp.listen"));
        let small = EppConfig {
            max_body_bytes: 10,
            ..EppConfig::default()
        };
        assert!(small
            .validate()
            .unwrap_err()
            .to_string()
            .contains("epp.max_body_bytes"));
    }
}
