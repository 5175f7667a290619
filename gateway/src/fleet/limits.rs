//! Shared tenant limits: one script call admits a request (requests per minute, tokens per
//! minute, a lease that holds a concurrency slot), and the [`Lease`] it returns settles the
//! tokens and ends the lease when the request is done ([`super::settlements`]). The
//! scripts are `admit.lua` and `settle.lua`.

use super::pending::Settlement;
use super::{Fleet, Unanswered};
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
/// lease. Settle it with the tokens used; dropped unsettled, it gives back the whole
/// reservation. Either way one script call runs in the background, queued and replayed
/// when Redis does not answer.
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
    /// Charges `actual` tokens instead of the reservation and ends the concurrency lease
    /// ([`super::settlements`]: queued when Redis does not answer).
    pub(crate) fn settle(&mut self, actual: u64) {
        if std::mem::replace(&mut self.settled, true) {
            return;
        }
        let Some(lease) = self.lease.take() else {
            return;
        };
        let delta = self.reserved as i64 - actual.min(i64::MAX as u64) as i64;
        self.fleet.settle(Settlement {
            tenant: self.tenant.clone(),
            tokens_per_minute: self.tokens_per_minute,
            delta,
            lease,
            abandoned: false,
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
        // Every admission that holds something to settle (tokens, a slot) carries an id:
        // its settlement, and the release of an admission given up on, name it.
        let holds = limits.max_concurrent > 0 || limits.tokens_per_minute > 0;
        let lease = holds.then(|| self.next_lease());
        let mut call = self.scripts.admit.prepare_invoke();
        call.key(self.key(tenant, "rpm"))
            .key(self.key(tenant, "tpm"))
            .key(self.key(tenant, "conc"))
            .key(self.key(tenant, "gone"))
            .arg(limits.requests_per_minute)
            .arg(limits.request_burst.max(1))
            .arg(limits.tokens_per_minute)
            .arg(tokens)
            .arg(limits.max_concurrent)
            .arg(lease.as_deref().unwrap_or(""))
            .arg(self.cfg.lease_ttl_s * 1000);
        let r: Vec<i64> = match self.call(&call).await {
            Ok(r) => r,
            Err(why) => {
                // Given up on, but Redis may run it yet: release what it would hold.
                if let (Unanswered::Lost, Some(lease)) = (why, lease) {
                    self.enqueue(Settlement {
                        tenant: tenant.clone(),
                        tokens_per_minute: limits.tokens_per_minute,
                        delta: tokens.min(i64::MAX as u64) as i64,
                        lease,
                        abandoned: true,
                    });
                }
                return None;
            }
        };
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
