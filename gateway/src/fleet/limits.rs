//! Shared tenant limits: one script call admits a request (requests per minute, tokens per
//! minute, a concurrency lease), and the [`Lease`] it returns settles the tokens and ends
//! the lease when the request is done. The scripts are `admit.lua` and `settle.lua`.

use super::Fleet;
use crate::config::TenantLimits;
use std::sync::Arc;
use std::time::Duration;

/// Which limit refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `max_concurrent`.
    Concurrency,
    /// `tokens_per_minute`.
    Tokens,
    /// `requests_per_minute`.
    Requests,
}

/// What the shared limits decided, with what is left of them.
#[derive(Debug)]
pub(crate) struct Decision {
    /// `None`: admitted; otherwise the limit that refused.
    pub refused: Option<Refused>,
    /// How long to wait before retrying (refusals).
    pub retry_after: Duration,
    /// Requests left in the burst now, when there is a request limit.
    pub remaining_requests: Option<u64>,
    /// Tokens left in the bucket now, when there is a token limit.
    pub remaining_tokens: Option<u64>,
    /// Until the token bucket is full again.
    pub reset_tokens: Duration,
    /// The reservation, when admitted.
    pub lease: Option<Lease>,
}

/// An admitted request's hold on the shared limits: its token reservation and its
/// concurrency lease. Settle it with the tokens used; dropped unsettled, it gives back the
/// whole reservation. Either way one script call runs in the background.
pub(crate) struct Lease {
    fleet: Arc<Fleet>,
    tenant: Arc<str>,
    tokens_per_minute: u64,
    reserved: u64,
    lease: Option<String>,
    settled: bool,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("tenant", &self.tenant)
            .field("reserved", &self.reserved)
            .finish()
    }
}

impl Lease {
    /// Charges `actual` tokens instead of the reservation and ends the concurrency lease.
    pub(crate) fn settle(&mut self, actual: u64) {
        if std::mem::replace(&mut self.settled, true) {
            return;
        }
        let delta = self.reserved as i64 - actual.min(i64::MAX as u64) as i64;
        let nothing_to_do = (self.tokens_per_minute == 0 || delta == 0) && self.lease.is_none();
        if nothing_to_do {
            return;
        }
        let fleet = self.fleet.clone();
        let tokens_key = fleet.key(&self.tenant, "tpm");
        let leases_key = fleet.key(&self.tenant, "conc");
        let tpm = self.tokens_per_minute;
        let lease = self.lease.take().unwrap_or_default();
        self.fleet.handle.spawn(async move {
            let mut call = fleet.scripts.settle.prepare_invoke();
            call.key(tokens_key)
                .key(leases_key)
                .arg(tpm)
                .arg(delta)
                .arg(lease);
            // Lost when Redis is away: the reservation then lapses with the bucket's own
            // refill and the lease with its expiry.
            let _: Option<i64> = fleet.call(&call).await;
        });
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.settle(0);
    }
}

impl Fleet {
    /// Admits one request that may use `tokens` tokens against `tenant`'s shared `limits`:
    /// one script call. `None` when Redis does not answer (the caller falls back to its
    /// local limiter).
    pub(crate) async fn admit(
        self: &Arc<Self>,
        tenant: &Arc<str>,
        limits: &TenantLimits,
        tokens: u64,
    ) -> Option<Decision> {
        let lease = (limits.max_concurrent > 0).then(|| self.next_lease());
        let mut call = self.scripts.admit.prepare_invoke();
        call.key(self.key(tenant, "rpm"))
            .key(self.key(tenant, "tpm"))
            .key(self.key(tenant, "conc"))
            .arg(limits.requests_per_minute)
            .arg(limits.request_burst.max(1))
            .arg(limits.tokens_per_minute)
            .arg(tokens)
            .arg(limits.max_concurrent)
            .arg(lease.as_deref().unwrap_or(""))
            .arg(self.cfg.lease_ttl_s * 1000);
        let r: Vec<i64> = self.call(&call).await?;
        let [admitted, kind, wait_ms, rem_requests, rem_tokens, reset_ms] = r[..] else {
            self.failed(&format_args!("admission script returned {r:?}"));
            return None;
        };
        let some = |v: i64| u64::try_from(v).ok();
        let ms = |v: i64| Duration::from_millis(u64::try_from(v).unwrap_or(0));
        let refused = match (admitted, kind) {
            (1, _) => None,
            (_, 1) => Some(Refused::Concurrency),
            (_, 2) => Some(Refused::Tokens),
            _ => Some(Refused::Requests),
        };
        Some(Decision {
            refused,
            retry_after: ms(wait_ms),
            remaining_requests: some(rem_requests),
            remaining_tokens: some(rem_tokens),
            reset_tokens: ms(reset_ms),
            lease: refused.is_none().then(|| Lease {
                fleet: self.clone(),
                tenant: tenant.clone(),
                tokens_per_minute: limits.tokens_per_minute,
                reserved: tokens,
                lease,
                settled: false,
            }),
        })
    }
}
