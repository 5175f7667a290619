//! Per-tenant limits: requests/minute with `governor` (GCRA), tokens/minute as a
//! reserve-then-settle GCRA-equivalent bucket (governor cannot refund), and concurrency.

use crate::config::TenantLimits;
use crate::error::{GatewayError, LimitKind};
use crate::headers::{self, HeaderPairs};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use http::HeaderValue;
use parking_lot::Mutex;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod carry;

/// A tenant's limiter state.
#[derive(Debug)]
pub(crate) struct TenantLimiter {
    limits: TenantLimits,
    requests: Option<DefaultDirectRateLimiter>,
    tokens: Option<Mutex<TokenBucket>>,
    in_flight: Arc<AtomicU32>,
    /// `x-ratelimit-limit-requests` / `-tokens` values, formatted once.
    limit_requests: http::HeaderValue,
    limit_tokens: http::HeaderValue,
}

/// OpenAI-style `x-ratelimit-*` header values after an admission decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RateHeaders {
    /// Header name/value pairs.
    pub headers: HeaderPairs,
}

/// Tokens reserved by an admitted request; settle with the actual usage at the end.
/// Dropping an unsettled permit refunds the whole reservation.
#[derive(Debug)]
pub(crate) struct Permit {
    tokens_of: Option<Arc<TenantLimiter>>,
    reserved: u64,
    settled: bool,
    in_flight: Option<Arc<AtomicU32>>,
    /// The hold on the fleet's shared limits (Redis), when they admitted the request.
    shared: Option<crate::fleet::limits::Lease>,
}

impl Permit {
    /// A permit for `reserved` tokens the fleet's shared limits granted (`lease`).
    pub(crate) fn shared(lease: Option<crate::fleet::limits::Lease>, reserved: u64) -> Self {
        Self {
            tokens_of: None,
            reserved,
            settled: false,
            in_flight: None,
            shared: lease,
        }
    }

    /// Tokens reserved.
    #[cfg(test)]
    pub(crate) fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Charges `actual` tokens instead of the reservation (refund or debt).
    pub(crate) fn settle(&mut self, actual: u64) {
        if !self.settled {
            self.settle_at(actual, Instant::now());
        }
    }

    /// [`Self::settle`] with the clock already read (the end of a request reads it once).
    pub(crate) fn settle_at(&mut self, actual: u64, now: Instant) {
        if self.settled {
            return;
        }
        self.settled = true;
        if let Some(mut lease) = self.shared.take() {
            lease.settle(actual);
        }
        if let Some(l) = &self.tokens_of {
            if let Some(b) = &l.tokens {
                b.lock().settle(self.reserved, actual, now);
            }
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.settle(0);
        if let Some(c) = self.in_flight.take() {
            c.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl TenantLimiter {
    /// Limiter for `limits` (0 = unlimited).
    pub(crate) fn new(limits: &TenantLimits) -> Self {
        let requests = NonZeroU32::new(limits.requests_per_minute).map(|rpm| {
            let burst = NonZeroU32::new(limits.request_burst).unwrap_or(NonZeroU32::MIN);
            RateLimiter::direct(Quota::per_minute(rpm).allow_burst(burst))
        });
        let tokens = (limits.tokens_per_minute > 0)
            .then(|| Mutex::new(TokenBucket::new(limits.tokens_per_minute, Instant::now())));
        Self {
            limits: limits.clone(),
            requests,
            tokens,
            in_flight: Arc::new(AtomicU32::new(0)),
            limit_requests: HeaderValue::from(u64::from(limits.requests_per_minute)),
            limit_tokens: HeaderValue::from(limits.tokens_per_minute),
        }
    }

    /// The configured limits.
    pub(crate) fn limits(&self) -> &TenantLimits {
        &self.limits
    }

    /// Concurrent requests now.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Acquire)
    }
}

/// Reserves one request that may use up to `tokens` tokens against the limits of tenant
/// `tenant` (its id, for the error): concurrency, then tokens per minute, then requests
/// per minute. A refusal spends nothing: the token reservation is taken back when the
/// request limit then refuses (governor cannot refund, the token bucket can). A request
/// that needs more tokens than the bucket ever holds is a 400, not a 429 it could retry.
pub(crate) fn reserve(
    l: &Arc<TenantLimiter>,
    tenant: &str,
    tokens: u64,
    now: Instant,
) -> Result<(Permit, RateHeaders), (GatewayError, RateHeaders)> {
    let mut hdrs = RateHeaders {
        headers: Vec::with_capacity(6),
    };
    // Concurrency first: it is released on every path through the permit's Drop.
    let mut permit = Permit {
        tokens_of: None,
        reserved: 0,
        settled: true,
        in_flight: None,
        shared: None,
    };
    if l.limits.max_concurrent > 0 {
        let prev = l.in_flight.fetch_add(1, Ordering::AcqRel);
        permit.in_flight = Some(l.in_flight.clone());
        if prev >= l.limits.max_concurrent {
            return Err((
                GatewayError::RateLimited {
                    kind: LimitKind::Concurrency,
                    retry_after: Duration::from_secs(1),
                    detail: format!("at most {} concurrent requests", l.limits.max_concurrent),
                },
                hdrs,
            ));
        }
    }
    if let Some(b) = &l.tokens {
        let refused = match b.lock().reserve(tokens, now) {
            Ok(()) => None,
            Err(TokenRefusal::Never) => {
                return Err((
                    too_many_tokens(tenant, tokens, l.limits.tokens_per_minute),
                    hdrs,
                ));
            }
            Err(TokenRefusal::Wait(wait)) => Some(wait),
        };
        if refused.is_none() {
            // Held from here: dropping the permit (a refusal below) gives the tokens back.
            permit.reserved = tokens;
            permit.settled = false;
            permit.tokens_of = Some(l.clone());
        }
        if let Some(wait) = refused {
            token_headers(l, b, now, &mut hdrs);
            return Err((
                GatewayError::RateLimited {
                    kind: LimitKind::Tokens,
                    retry_after: wait,
                    detail: format!(
                        "request reserves {tokens} tokens; limit {} tokens per minute",
                        l.limits.tokens_per_minute
                    ),
                },
                hdrs,
            ));
        }
    }
    if let Some(r) = &l.requests {
        hdrs.headers
            .push((headers::RATELIMIT_LIMIT_REQUESTS, l.limit_requests.clone()));
        if let Err(not_until) = r.check() {
            // Give the tokens back before reporting what is left of them.
            drop(permit);
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            hdrs.headers.push((
                headers::RATELIMIT_REMAINING_REQUESTS,
                http::HeaderValue::from_static("0"),
            ));
            hdrs.headers
                .push((headers::RATELIMIT_RESET_REQUESTS, format_secs(wait)));
            if let Some(b) = &l.tokens {
                token_headers(l, b, now, &mut hdrs);
            }
            return Err((
                GatewayError::RateLimited {
                    kind: LimitKind::Requests,
                    retry_after: wait,
                    detail: format!("{} requests per minute", l.limits.requests_per_minute),
                },
                hdrs,
            ));
        }
    }
    if let Some(b) = &l.tokens {
        token_headers(l, b, now, &mut hdrs);
    }
    Ok((permit, hdrs))
}

/// A request that needs more tokens than `tenant`'s whole `tokens_per_minute`: a 400 (no
/// wait makes them available), not a 429 it could retry.
pub(crate) fn too_many_tokens(tenant: &str, tokens: u64, tokens_per_minute: u64) -> GatewayError {
    GatewayError::BadRequest(format!(
        "request needs {tokens} tokens (prompt plus max_tokens) but tenant {tenant}'s \
         tokens_per_minute is {tokens_per_minute}: lower max_tokens or shorten the prompt"
    ))
}

/// The `x-ratelimit-*-tokens` headers as the bucket stands at `now`.
fn token_headers(l: &TenantLimiter, b: &Mutex<TokenBucket>, now: Instant, hdrs: &mut RateHeaders) {
    let mut b = b.lock();
    hdrs.headers
        .push((headers::RATELIMIT_LIMIT_TOKENS, l.limit_tokens.clone()));
    hdrs.headers.push((
        headers::RATELIMIT_REMAINING_TOKENS,
        HeaderValue::from(b.available(now)),
    ));
    hdrs.headers.push((
        headers::RATELIMIT_RESET_TOKENS,
        format_secs(b.time_to_full(now)),
    ));
}

/// A duration as OpenAI's reset headers write it: seconds with millisecond precision
/// (`1.250s`, rounded up so a client never retries early), formatted from integers.
pub(crate) fn format_secs(d: Duration) -> http::HeaderValue {
    let ms = d.as_nanos().div_ceil(1_000_000);
    if ms == 0 {
        return http::HeaderValue::from_static("0.000s");
    }
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(itoa::Buffer::new().format(ms / 1000).as_bytes());
    let frac = (ms % 1000) as u16;
    let digit = |d: u16| b'0' + (d % 10) as u8;
    out.extend_from_slice(&[b'.', digit(frac / 100), digit(frac / 10), digit(frac), b's']);
    http::HeaderValue::from_maybe_shared(bytes::Bytes::from(out))
        .unwrap_or_else(|_| http::HeaderValue::from_static("0.000s"))
}

/// Why the token bucket refused a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenRefusal {
    /// The tokens are available after this wait.
    Wait(Duration),
    /// More tokens than the bucket holds when full: no wait makes them available.
    Never,
}

/// Token bucket with capacity = tokens/minute, refilled continuously; equivalent to GCRA
/// with burst = one minute's worth, plus refunds. May go negative (debt) when a request
/// used more than it reserved.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    capacity: f64,
    per_sec: f64,
    level: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket of `per_minute` tokens.
    pub(crate) fn new(per_minute: u64, now: Instant) -> Self {
        let capacity = per_minute as f64;
        Self {
            capacity,
            per_sec: capacity / 60.0,
            level: capacity,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + dt * self.per_sec).min(self.capacity);
        self.at = now;
    }

    /// Takes `n` tokens, or says how long until they are available, or that they never
    /// will be (more than the capacity).
    pub(crate) fn reserve(&mut self, n: u64, now: Instant) -> Result<(), TokenRefusal> {
        self.refill(now);
        let n = n as f64;
        if n > self.capacity {
            return Err(TokenRefusal::Never);
        }
        if self.level >= n {
            self.level -= n;
            Ok(())
        } else {
            Err(TokenRefusal::Wait(Duration::from_secs_f64(
                (n - self.level) / self.per_sec,
            )))
        }
    }

    /// Replaces a reservation with the actual usage.
    pub(crate) fn settle(&mut self, reserved: u64, actual: u64, now: Instant) {
        self.refill(now);
        self.level = (self.level + reserved as f64 - actual as f64).min(self.capacity);
    }

    /// Whole tokens available now.
    pub(crate) fn available(&mut self, now: Instant) -> u64 {
        self.refill(now);
        self.level.max(0.0) as u64
    }

    /// Time until the bucket is full.
    pub(crate) fn time_to_full(&mut self, now: Instant) -> Duration {
        self.refill(now);
        Duration::from_secs_f64(((self.capacity - self.level) / self.per_sec).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, TenantConfig};
    use crate::tenants::{hash_key, TenantTable};

    fn tenant(limits: TenantLimits) -> Arc<crate::tenants::Tenant> {
        let mut c = Config::default();
        c.auth.salt_secret = "0123456789abcdef-secret".into();
        c.tenants = vec![TenantConfig {
            id: "t".into(),
            api_key_sha256: vec![hash_key("k")],
            models: vec!["*".into()],
            limits,
            regions: Vec::new(),
            flow: Default::default(),
        }];
        TenantTable::build(&c, None)
            .authenticate(Some(b"Bearer k"))
            .unwrap()
    }

    #[test]
    fn bucket_never_admits_more_than_capacity_plus_refill() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(6000, t0);
        let mut admitted = 0u64;
        for i in 0..2000u64 {
            let now = t0 + Duration::from_millis(i);
            if b.reserve(37, now).is_ok() {
                admitted += 37;
            }
        }
        // 2 s of refill at 100 tokens/s on top of a full bucket of 6000.
        assert!(admitted <= 6000 + 200, "{admitted}");
        assert!(admitted >= 6000, "{admitted}");
        assert_eq!(
            b.reserve(7000, t0 + Duration::from_secs(3)),
            Err(TokenRefusal::Never)
        );
    }

    #[test]
    fn settle_refunds_unused_tokens() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(600, t0);
        b.reserve(500, t0).unwrap();
        assert!(b.reserve(500, t0).is_err());
        b.settle(500, 100, t0);
        assert_eq!(b.available(t0), 500);
        b.reserve(500, t0).unwrap();
    }

    #[test]
    fn requests_get_burst_then_429_with_retry_after() {
        let t = tenant(TenantLimits {
            requests_per_minute: 60,
            request_burst: 3,
            ..Default::default()
        });
        let mut ok = 0;
        let mut last_err = None;
        for _ in 0..5 {
            match reserve(&t.limiter, "t", 10, Instant::now()) {
                Ok(_) => ok += 1,
                Err((e, h)) => {
                    assert!(h
                        .headers
                        .iter()
                        .any(|(k, _)| k == "x-ratelimit-reset-requests"));
                    last_err = Some(e);
                }
            }
        }
        assert_eq!(ok, 3);
        match last_err {
            Some(GatewayError::RateLimited {
                kind: LimitKind::Requests,
                retry_after,
                ..
            }) => {
                assert!(retry_after <= Duration::from_secs(1) && retry_after > Duration::ZERO)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reset_durations_are_written_in_seconds_rounded_up() {
        let cases = [
            (Duration::ZERO, "0.000s"),
            (Duration::from_nanos(1), "0.001s"),
            (Duration::from_millis(1250), "1.250s"),
            (Duration::from_millis(7_999), "7.999s"),
            (Duration::from_millis(10_087), "10.087s"),
            (Duration::from_micros(59_999_001), "60.000s"),
            (Duration::from_secs(61), "61.000s"),
        ];
        for (d, want) in cases {
            assert_eq!(format_secs(d), want, "{d:?}");
        }
    }

    #[test]
    fn concurrency_is_released_on_drop() {
        let t = tenant(TenantLimits {
            max_concurrent: 1,
            ..Default::default()
        });
        let p = reserve(&t.limiter, "t", 1, Instant::now()).unwrap();
        assert!(reserve(&t.limiter, "t", 1, Instant::now()).is_err());
        drop(p);
        assert_eq!(t.limiter.in_flight(), 0);
        assert!(reserve(&t.limiter, "t", 1, Instant::now()).is_ok());
    }

    #[test]
    fn unsettled_permit_refunds_and_settled_charges_actual() {
        let t = tenant(TenantLimits {
            tokens_per_minute: 1000,
            ..Default::default()
        });
        let (p, _) = reserve(&t.limiter, "t", 900, Instant::now()).unwrap();
        assert!(reserve(&t.limiter, "t", 900, Instant::now()).is_err());
        drop(p);
        let (mut p, _) = reserve(&t.limiter, "t", 900, Instant::now()).unwrap();
        p.settle(850);
        drop(p);
        assert!(reserve(&t.limiter, "t", 900, Instant::now()).is_err());
        assert!(reserve(&t.limiter, "t", 100, Instant::now()).is_ok());
    }

    #[test]
    fn a_reservation_larger_than_the_tpm_is_a_400_naming_the_limit() {
        let t = tenant(TenantLimits {
            tokens_per_minute: 1000,
            requests_per_minute: 60,
            request_burst: 1,
            ..Default::default()
        });
        match reserve(&t.limiter, "t", 1500, Instant::now()) {
            Err((GatewayError::BadRequest(msg), _)) => {
                assert!(
                    msg.contains("1500") && msg.contains("tenant t's tokens_per_minute is 1000"),
                    "{msg}"
                );
            }
            other => panic!("expected a 400, got {other:?}"),
        }
        assert!(
            reserve(&t.limiter, "t", 10, Instant::now()).is_ok(),
            "the refusal spent neither the request allowance nor tokens"
        );
    }

    #[test]
    fn a_token_refusal_does_not_spend_the_request_allowance() {
        let t = tenant(TenantLimits {
            requests_per_minute: 1,
            request_burst: 2,
            tokens_per_minute: 1000,
            ..Default::default()
        });
        let now = Instant::now();
        let first = reserve(&t.limiter, "t", 900, now).unwrap();
        match reserve(&t.limiter, "t", 900, now) {
            Err((
                GatewayError::RateLimited {
                    kind: LimitKind::Tokens,
                    ..
                },
                _,
            )) => {}
            other => panic!("expected the token limit, got {other:?}"),
        }
        // The burst of two requests still has one left.
        let second = reserve(&t.limiter, "t", 50, now);
        assert!(second.is_ok(), "{:?}", second.err());
        drop((first, second));
    }

    #[test]
    fn a_request_refusal_gives_the_tokens_back() {
        let t = tenant(TenantLimits {
            requests_per_minute: 1,
            request_burst: 1,
            tokens_per_minute: 6000,
            ..Default::default()
        });
        let now = Instant::now();
        let (_first, _) = reserve(&t.limiter, "t", 1000, now).unwrap();
        match reserve(&t.limiter, "t", 3000, now) {
            Err((
                GatewayError::RateLimited {
                    kind: LimitKind::Requests,
                    ..
                },
                h,
            )) => {
                let left = h
                    .headers
                    .iter()
                    .find(|(k, _)| k == "x-ratelimit-remaining-tokens")
                    .map(|(_, v)| v.to_str().unwrap().parse::<u64>().unwrap());
                assert_eq!(left, Some(5000), "the refused request's tokens are back");
            }
            other => panic!("expected the request limit, got {other:?}"),
        }
    }
}
