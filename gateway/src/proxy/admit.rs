//! Authenticate and admit: the tenant behind the API key, then a reservation of the
//! request's tokens against that tenant's limits (concurrency, requests and tokens per
//! minute). Over a limit the client gets 429 with `Retry-After` and the `x-ratelimit-*`
//! headers.

use super::ctx::Admission;
use crate::error::GatewayError;
use crate::state::AppState;
use crate::tenants::{fleet_limits, limits, Tenant};
use std::sync::Arc;
use std::time::Instant;

/// The tenant whose key is in `authorization` (the header's value), kept in `admission`.
pub(crate) fn authenticate(
    state: &AppState,
    admission: &mut Admission,
    authorization: Option<&[u8]>,
) -> Result<Arc<Tenant>, GatewayError> {
    let keys = state.fleet.as_ref().map(|f| f.key_view());
    let tenant = state.tenants().authenticate_with(authorization, keys)?;
    admission.tenant = Some(tenant.clone());
    Ok(tenant)
}

/// Reserves `tokens` (prompt plus the most the request may generate) against `tenant`'s
/// limits at `now`: the fleet's shared limits when state is in Redis (one round trip), this
/// gateway's own limiter otherwise or while Redis is unreachable. The permit and the
/// rate-limit headers go into `admission`, the headers on refusal too.
pub(crate) async fn reserve(
    state: &AppState,
    admission: &mut Admission,
    tenant: &Tenant,
    tokens: u64,
    now: Instant,
) -> Result<(), GatewayError> {
    let shared = match &state.fleet {
        Some(fleet) => {
            let decided = fleet_limits::reserve(fleet, tenant, tokens).await;
            if decided.is_none() {
                fleet.metrics().fallback_admissions.inc();
            }
            decided
        }
        None => None,
    };
    let decided = match shared {
        Some(d) => d,
        None => limits::reserve(&tenant.limiter, &tenant.id, tokens, now),
    };
    match decided {
        Ok((permit, headers)) => {
            admission.rate_headers = headers.headers;
            admission.permit = Some(permit);
            Ok(())
        }
        Err((e, headers)) => {
            admission.rate_headers = headers.headers;
            Err(e)
        }
    }
}
