//! A request's class and TTFT objective, and whether it met the objective (goodput).

use crate::body::response::Usage;
use crate::error::GatewayError;
use crate::metrics::Metrics;
use crate::tenants::Tenant;
use http::HeaderMap;
use router_policy::flow::Class;
use std::time::Instant;

/// The header naming a request's class (`interactive` or `batch`).
pub(crate) const PRIORITY_HEADER: &str = "x-priority";
/// The header carrying a request's TTFT objective in milliseconds.
pub(crate) const SLO_HEADER: &str = "x-slo-ttft-ms";

/// What flow control knows of one request.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FlowRequest {
    /// Its class.
    pub class: Class,
    /// Its TTFT objective, milliseconds.
    pub objective_ms: Option<u64>,
    /// Time it waited in the flow queue, milliseconds (0: it found a slot at once).
    pub queued_ms: u64,
    /// Its first body byte was seen (goodput counted once).
    pub first_byte: bool,
}

impl FlowRequest {
    /// The class and objective of a request from `tenant` with `headers`: the headers'
    /// when present (a class the tenant may not use is refused, 403), the tenant's
    /// defaults otherwise.
    pub(crate) fn classify(tenant: &Tenant, headers: &HeaderMap) -> Result<Self, GatewayError> {
        let class = match headers.get(PRIORITY_HEADER) {
            None => tenant.flow.default_class,
            Some(v) => {
                let text = v.to_str().unwrap_or("");
                let class = Class::parse(text).ok_or_else(|| {
                    GatewayError::BadRequest(format!(
                        "{PRIORITY_HEADER} must be `interactive` or `batch`, not {text:?}"
                    ))
                })?;
                Self::allowed(tenant, class)?
            }
        };
        let objective_ms = match headers.get(SLO_HEADER) {
            None => (tenant.flow.ttft_slo_ms > 0).then_some(tenant.flow.ttft_slo_ms),
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .filter(|ms| *ms > 0)
                    .ok_or_else(|| {
                        GatewayError::BadRequest(format!(
                            "{SLO_HEADER} must be a positive number of milliseconds"
                        ))
                    })?,
            ),
        };
        Ok(Self {
            class,
            objective_ms,
            ..Self::default()
        })
    }

    /// `class` if `tenant` may use it, else 403.
    pub(crate) fn allowed(tenant: &Tenant, class: Class) -> Result<Class, GatewayError> {
        if tenant.flow.classes.contains(&class) {
            Ok(class)
        } else {
            Err(GatewayError::ClassNotAllowed(class.as_str().to_string()))
        }
    }

    /// The first body byte of a successful response went to the client `start`..now
    /// after arrival: counts the request toward goodput if it met its objective.
    pub(crate) fn first_byte(&mut self, metrics: &Metrics, tenant: &str, start: Instant) {
        if self.first_byte {
            return;
        }
        self.first_byte = true;
        let Some(objective) = self.objective_ms else {
            return;
        };
        let ttft = start.elapsed().as_millis() as u64;
        let met = if ttft <= objective { "met" } else { "missed" };
        metrics
            .flow
            .objectives
            .with_label_values(&[tenant, self.class.as_str(), met])
            .inc();
    }
}

/// Tokens to settle a reservation with: `charged`, less the share of the reported cached
/// prompt tokens that `cached_cost` (0 to 1) lets off.
pub(crate) fn tpm_charge(charged: u64, usage: Option<Usage>, cached_cost: f64) -> u64 {
    let cached = usage.and_then(|u| u.cached_tokens.map(|c| c.min(u.prompt_tokens)));
    let Some(cached) = cached else {
        return charged;
    };
    let kept = (cached as f64 * cached_cost.clamp(0.0, 1.0)).round() as u64;
    charged.saturating_sub(cached - kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_are_charged_at_the_fraction() {
        let u = Usage {
            prompt_tokens: 1000,
            completion_tokens: 10,
            cached_tokens: Some(800),
        };
        assert_eq!(tpm_charge(1010, Some(u), 1.0), 1010);
        assert_eq!(tpm_charge(1010, Some(u), 0.1), 1010 - 720);
        assert_eq!(tpm_charge(1010, Some(u), 0.0), 210);
        assert_eq!(tpm_charge(1010, None, 0.0), 1010);
        let odd = Usage {
            cached_tokens: Some(5000),
            ..u
        };
        assert_eq!(tpm_charge(1010, Some(odd), 0.0), 10);
    }
}
