//! Flow control settings (issue 42): the gateway-wide queue knobs under `admission.flow`
//! and each tenant's `flow:` (weight, queue bound, classes, default TTFT objective).

use super::error::ConfigError;
use router_policy::flow::Class;
use serde::{Deserialize, Serialize};

/// Heaviest tenant weight accepted.
pub(crate) const MAX_WEIGHT: u32 = 1000;

/// `admission.flow`: how waiting requests are queued when every replica slot is taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlowSettings {
    /// Requests one tenant may have waiting (a tenant's `flow.max_queued` overrides it);
    /// above it, 429 with Retry-After.
    pub max_queued_per_tenant: u32,
    /// How long a batch request waits before it goes ahead of everything that has not
    /// waited as long (the starvation bound).
    pub batch_aging_ms: u64,
    /// What a cached prompt token costs in the fair share, as a fraction of a computed
    /// one (0 to 1).
    pub cached_token_cost: f64,
    /// What a cached prompt token (as the replica reports it in `usage`) costs in the
    /// tokens-per-minute limit when the reservation is settled (0 to 1; 1: as today,
    /// every prompt token in full).
    pub tpm_cached_token_cost: f64,
    /// Requests a replica at `max_in_flight_per_replica` may still be sent, only for a
    /// request that outranks work in flight (an interactive one while batch runs, or a
    /// tenant below its weighted share of the requests in flight); 0: none (0 to 64).
    pub reserve_per_replica: u32,
}

impl Default for FlowSettings {
    fn default() -> Self {
        Self {
            max_queued_per_tenant: 64,
            batch_aging_ms: 5000,
            cached_token_cost: 0.1,
            tpm_cached_token_cost: 1.0,
            reserve_per_replica: 1,
        }
    }
}

impl FlowSettings {
    /// Checks ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_queued_per_tenant == 0 {
            return Err(invalid(
                "admission.flow.max_queued_per_tenant",
                "must be at least 1",
            ));
        }
        if self.reserve_per_replica > 64 {
            return Err(invalid(
                "admission.flow.reserve_per_replica",
                "must be 0 to 64",
            ));
        }
        for (key, v) in [
            ("admission.flow.cached_token_cost", self.cached_token_cost),
            (
                "admission.flow.tpm_cached_token_cost",
                self.tpm_cached_token_cost,
            ),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(invalid(key, "must be between 0 and 1"));
            }
        }
        Ok(())
    }
}

/// A tenant's `flow:`: its share when replicas are saturated, and its classes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TenantFlow {
    /// Share of the replicas' prefill work relative to other tenants' weights (1 to 1000).
    pub weight: u32,
    /// Requests this tenant may have waiting (unset: `admission.flow.max_queued_per_tenant`).
    pub max_queued: Option<u32>,
    /// The classes its requests may ask for with `x-priority` or `priority`.
    pub classes: Vec<Class>,
    /// The class of a request that asks for none.
    pub default_class: Class,
    /// The TTFT objective of a request without `x-slo-ttft-ms` (0: none).
    pub ttft_slo_ms: u64,
}

impl Default for TenantFlow {
    fn default() -> Self {
        Self {
            weight: 1,
            max_queued: None,
            classes: Class::ALL.to_vec(),
            default_class: Class::Interactive,
            ttft_slo_ms: 0,
        }
    }
}

impl TenantFlow {
    /// Checks ranges; `key` is the tenant's key (`tenants[i]`).
    pub fn validate(&self, key: &str) -> Result<(), ConfigError> {
        if self.weight == 0 || self.weight > MAX_WEIGHT {
            return Err(invalid(
                format!("{key}.flow.weight"),
                format!("must be 1 to {MAX_WEIGHT}"),
            ));
        }
        if self.max_queued == Some(0) {
            return Err(invalid(
                format!("{key}.flow.max_queued"),
                "must be at least 1 (remove it for the default)",
            ));
        }
        if !self.classes.contains(&self.default_class) {
            return Err(invalid(
                format!("{key}.flow.default_class"),
                "must be one of `classes`",
            ));
        }
        Ok(())
    }
}

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_flow_parses_and_validates() {
        let f: TenantFlow = serde_yaml::from_str(
            "weight: 4\nclasses: [batch]\ndefault_class: batch\nttft_slo_ms: 500",
        )
        .unwrap();
        assert_eq!(f.weight, 4);
        assert!(f.validate("tenants[0]").is_ok());
        let bad: TenantFlow = serde_yaml::from_str("classes: [batch]").unwrap();
        let e = bad.validate("tenants[0]").unwrap_err().to_string();
        assert!(e.contains("tenants[0].flow.default_class"), "{e}");
        assert!(serde_yaml::from_str::<TenantFlow>("wieght: 2").is_err());
        let zero: TenantFlow = serde_yaml::from_str("weight: 0").unwrap();
        assert!(zero.validate("t").is_err());
    }

    #[test]
    fn settings_validate_the_fraction() {
        let s = FlowSettings {
            cached_token_cost: 1.5,
            ..FlowSettings::default()
        };
        assert!(s.validate().is_err());
        let s = FlowSettings {
            tpm_cached_token_cost: -0.1,
            ..FlowSettings::default()
        };
        assert!(s.validate().is_err());
        assert!(FlowSettings::default().validate().is_ok());
    }
}
