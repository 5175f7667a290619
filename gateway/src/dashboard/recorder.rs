//! The dashboard's own counters: per-replica and per-tenant token counts and the history
//! of cached tokens, which the Prometheus metrics do not break down. Fed once per finished
//! request from its [`Outcome`].

use crate::outcome::Outcome;
use parking_lot::Mutex;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// History points kept (one per second at most: five minutes).
pub(crate) const HISTORY_POINTS: usize = 300;
/// Shortest interval between two history points.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Token counters of one replica, as the gateway saw its responses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct ReplicaTokens {
    /// Responses that reported usage.
    pub responses_with_usage: u64,
    /// Prompt tokens of those responses.
    pub prompt_tokens: u64,
    /// Prompt tokens the replica reported cached (its own cache and the shared tier).
    pub cached_tokens: u64,
    /// Of `cached_tokens`, those it loaded from the shared KV tier.
    pub tier_cached_tokens: u64,
    /// Prompt tokens the router predicted cached on this replica.
    pub predicted_cached_tokens: u64,
}

/// Token counters of one tenant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct TenantTokens {
    /// Prompt tokens (reported usage, else the gateway's own count).
    pub prompt_tokens: u64,
    /// Completion tokens (reported usage).
    pub completion_tokens: u64,
}

/// Cumulative cached-token counters at one instant (a history point).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub(crate) struct HistoryPoint {
    /// Unix time, milliseconds.
    pub unix_ms: u64,
    /// Prompt tokens predicted cached, since start.
    pub predicted: u64,
    /// Prompt tokens the replicas reported cached, since start.
    pub actual: u64,
    /// Of `actual`, prompt tokens loaded from the shared KV tier, since start.
    pub tier: u64,
    /// Prompt tokens of requests with reported usage, since start.
    pub prompt: u64,
}

#[derive(Default)]
struct Inner {
    replicas: BTreeMap<String, ReplicaTokens>,
    tenants: BTreeMap<String, TenantTokens>,
    history: VecDeque<HistoryPoint>,
    last_sample: Option<Instant>,
}

/// Dashboard-only counters: what the Prometheus metrics do not break down.
#[derive(Default)]
pub(crate) struct Recorder {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

/// The counters under `key`, inserted on first use (the key is copied only then).
fn entry<'a, T: Default>(map: &'a mut BTreeMap<String, T>, key: &str) -> &'a mut T {
    if !map.contains_key(key) {
        map.insert(key.to_string(), T::default());
    }
    map.get_mut(key).expect("inserted above")
}

/// Unix time in milliseconds.
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Recorder {
    /// Adds one finished request's numbers, then samples the history at `now` (not forced,
    /// as [`Self::sample`]), under one lock.
    pub(crate) fn add(
        &self,
        replica: Option<(&str, ReplicaTokens)>,
        tenant: Option<(&str, TenantTokens)>,
        now: Instant,
        point: impl FnOnce() -> HistoryPoint,
    ) {
        let mut g = self.inner.lock();
        if let Some((label, t)) = replica {
            let e = entry(&mut g.replicas, label);
            e.responses_with_usage += t.responses_with_usage;
            e.prompt_tokens += t.prompt_tokens;
            e.cached_tokens += t.cached_tokens;
            e.tier_cached_tokens += t.tier_cached_tokens;
            e.predicted_cached_tokens += t.predicted_cached_tokens;
        }
        if let Some((id, t)) = tenant {
            let e = entry(&mut g.tenants, id);
            e.prompt_tokens += t.prompt_tokens;
            e.completion_tokens += t.completion_tokens;
        }
        Self::sample_locked(&mut g, now, false, point);
    }

    /// Per-replica counters, by replica label (`r0`, `r1`, ...).
    pub(crate) fn replicas(&self) -> BTreeMap<String, ReplicaTokens> {
        self.inner.lock().replicas.clone()
    }

    /// Per-tenant counters, by tenant id.
    pub(crate) fn tenants(&self) -> BTreeMap<String, TenantTokens> {
        self.inner.lock().tenants.clone()
    }

    /// Appends `point` unless the last one is under a second old (or `force`).
    pub(crate) fn sample(&self, now: Instant, force: bool, point: impl FnOnce() -> HistoryPoint) {
        let mut g = self.inner.lock();
        Self::sample_locked(&mut g, now, force, point);
    }

    fn sample_locked(
        g: &mut Inner,
        now: Instant,
        force: bool,
        point: impl FnOnce() -> HistoryPoint,
    ) {
        if !force
            && g.last_sample
                .is_some_and(|t| now.duration_since(t) < SAMPLE_EVERY)
        {
            return;
        }
        g.last_sample = Some(now);
        if g.history.len() >= HISTORY_POINTS {
            g.history.pop_front();
        }
        g.history.push_back(point());
    }

    /// Records one finished request (from the request's end, which read the clock at
    /// `now`): the replica's token counts when it reported usage, the tenant's tokens (the
    /// reported usage, else the gateway's prompt count once a response started).
    pub(crate) fn record(
        &self,
        o: &Outcome<'_>,
        now: Instant,
        point: impl FnOnce() -> HistoryPoint,
    ) {
        let replica = match (o.usage, o.predicted_cached_tokens) {
            (Some(u), Some(predicted)) => Some(ReplicaTokens {
                responses_with_usage: 1,
                prompt_tokens: u.prompt_tokens,
                cached_tokens: u.cached_tokens.unwrap_or(0),
                tier_cached_tokens: o
                    .tier_cached_tokens
                    .unwrap_or(0)
                    .min(u.cached_tokens.unwrap_or(0)),
                predicted_cached_tokens: predicted,
            }),
            _ => None,
        };
        let tenant = o.tenant.map(|id| {
            let tokens = match o.usage {
                Some(u) => TenantTokens {
                    prompt_tokens: u.prompt_tokens,
                    completion_tokens: u.completion_tokens,
                },
                None if o.response_started => TenantTokens {
                    prompt_tokens: o.prompt_tokens,
                    completion_tokens: 0,
                },
                None => TenantTokens::default(),
            };
            (id, tokens)
        });
        self.add(replica.map(|t| (o.replica_label(), t)), tenant, now, point);
    }

    /// History points, oldest first.
    pub(crate) fn history(&self) -> Vec<HistoryPoint> {
        self.inner.lock().history.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_accumulate_per_key() {
        let r = Recorder::default();
        let t = ReplicaTokens {
            responses_with_usage: 1,
            prompt_tokens: 100,
            cached_tokens: 64,
            tier_cached_tokens: 16,
            predicted_cached_tokens: 48,
        };
        r.add(Some(("r0", t)), None, Instant::now(), HistoryPoint::default);
        r.add(
            Some(("r0", t)),
            Some((
                "acme",
                TenantTokens {
                    prompt_tokens: 5,
                    completion_tokens: 7,
                },
            )),
            Instant::now(),
            HistoryPoint::default,
        );
        r.add(Some(("r1", t)), None, Instant::now(), HistoryPoint::default);
        let reps = r.replicas();
        assert_eq!(reps["r0"].prompt_tokens, 200);
        assert_eq!(reps["r0"].cached_tokens, 128);
        assert_eq!(reps["r0"].tier_cached_tokens, 32);
        assert_eq!(reps["r1"].responses_with_usage, 1);
        assert_eq!(r.tenants()["acme"].completion_tokens, 7);
    }

    #[test]
    fn history_is_rate_limited_and_bounded() {
        let r = Recorder::default();
        let t0 = Instant::now();
        r.sample(t0, false, HistoryPoint::default);
        r.sample(t0 + Duration::from_millis(10), false, HistoryPoint::default);
        assert_eq!(
            r.history().len(),
            1,
            "second sample within a second is dropped"
        );
        for i in 0..(HISTORY_POINTS as u64 + 10) {
            r.sample(t0, true, || HistoryPoint {
                unix_ms: i,
                ..HistoryPoint::default()
            });
        }
        let h = r.history();
        assert_eq!(h.len(), HISTORY_POINTS);
        assert_eq!(h.last().map(|p| p.unix_ms), Some(HISTORY_POINTS as u64 + 9));
    }

    #[test]
    fn a_finished_request_adds_its_counters_and_samples_at_most_once_a_second() {
        let r = Recorder::default();
        let t = ReplicaTokens {
            responses_with_usage: 1,
            prompt_tokens: 10,
            cached_tokens: 4,
            tier_cached_tokens: 0,
            predicted_cached_tokens: 8,
        };
        let t0 = Instant::now();
        let point = |ms| {
            move || HistoryPoint {
                unix_ms: ms,
                ..HistoryPoint::default()
            }
        };
        r.add(Some(("r0", t)), None, t0, point(1));
        r.add(
            Some(("r0", t)),
            None,
            t0 + Duration::from_millis(500),
            point(2),
        );
        r.add(Some(("r0", t)), None, t0 + SAMPLE_EVERY, point(3));
        assert_eq!(r.replicas()["r0"].prompt_tokens, 30);
        let times: Vec<u64> = r.history().iter().map(|p| p.unix_ms).collect();
        assert_eq!(
            times,
            vec![1, 3],
            "the sample half a second later is skipped"
        );
    }
}
