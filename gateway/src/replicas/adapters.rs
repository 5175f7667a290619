//! Which LoRA adapters a replica has loaded, as far as the gateway knows: the adapters its
//! engine reports serving (vLLM's `vllm:lora_requests_info`, read with its `/metrics`) and
//! the adapters this gateway sent it lately. The policy's adapter term
//! ([`router_policy::AdapterState`]) reads [`AdapterTracker::state`].
//!
//! vLLM keeps up to `--max-loras` adapters loaded on the device (its metric's `max_lora`
//! label; 1 by default) and loads an adapter that is not before the request's prefill,
//! evicting the least recently used one. So an adapter counts as loaded where the engine's
//! last report names it running or waiting, or where it is among the `max_lora` adapters
//! this gateway sent most recently, within [`SENT_TTL`]. Other gateways' traffic and
//! adapters loaded at start-up are seen only through the report.

use crate::engines::metrics::AdapterReport;
use parking_lot::Mutex;
use router_policy::AdapterState;
use std::time::{Duration, Instant};

/// How long an adapter sent to a replica counts as loaded there without a report naming it.
pub(crate) const SENT_TTL: Duration = Duration::from_secs(300);

/// How long an engine's report of its adapters holds.
pub(crate) const REPORT_TTL: Duration = Duration::from_secs(30);

/// Adapter slots assumed when the engine reports none (vLLM's default `--max-loras`).
pub(crate) const DEFAULT_SLOTS: usize = 1;

/// Adapters remembered per replica (the most recent first).
const REMEMBERED: usize = 16;

#[derive(Debug, Default)]
struct Inner {
    /// The last report and when it came.
    report: Option<(AdapterReport, Instant)>,
    /// Adapters sent here, the most recent first, with when.
    sent: Vec<(Box<str>, Instant)>,
}

/// One replica's adapters (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct AdapterTracker {
    inner: Mutex<Inner>,
}

impl AdapterTracker {
    /// A request for `adapter` was sent here at `now`.
    pub(crate) fn sent(&self, adapter: &str, now: Instant) {
        let mut g = self.inner.lock();
        if let Some(i) = g.sent.iter().position(|(a, _)| &**a == adapter) {
            g.sent.remove(i);
        }
        g.sent.insert(0, (adapter.into(), now));
        g.sent.truncate(REMEMBERED);
    }

    /// The engine's report, read at `now` (`None`: the engine reports no adapters).
    pub(crate) fn report(&self, report: Option<AdapterReport>, now: Instant) {
        self.inner.lock().report = report.map(|r| (r, now));
    }

    /// Whether `adapter` (the one the request names, if any) is loaded here at `now`.
    pub(crate) fn state(&self, adapter: Option<&str>, now: Instant) -> AdapterState {
        let Some(adapter) = adapter else {
            return AdapterState::NotRequested;
        };
        let g = self.inner.lock();
        let fresh = g
            .report
            .as_ref()
            .filter(|(_, at)| now.saturating_duration_since(*at) <= REPORT_TTL)
            .map(|(r, _)| r);
        if fresh.is_some_and(|r| r.active.iter().any(|a| a == adapter)) {
            return AdapterState::Loaded;
        }
        let slots = fresh.and_then(|r| r.slots).unwrap_or(DEFAULT_SLOTS).max(1);
        let recent = g
            .sent
            .iter()
            .take(slots)
            .any(|(a, at)| &**a == adapter && now.saturating_duration_since(*at) <= SENT_TTL);
        if recent {
            AdapterState::Loaded
        } else {
            AdapterState::NotLoaded
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_adapter_named_is_no_term() {
        let t = AdapterTracker::default();
        assert_eq!(t.state(None, Instant::now()), AdapterState::NotRequested);
    }

    #[test]
    fn an_adapter_sent_here_is_loaded_until_evicted_or_stale() {
        let t = AdapterTracker::default();
        let t0 = Instant::now();
        assert_eq!(t.state(Some("a"), t0), AdapterState::NotLoaded);
        t.sent("a", t0);
        assert_eq!(t.state(Some("a"), t0), AdapterState::Loaded);
        assert_eq!(t.state(Some("b"), t0), AdapterState::NotLoaded);
        // One slot (vLLM's default): sending "b" evicts "a".
        t.sent("b", t0);
        assert_eq!(t.state(Some("a"), t0), AdapterState::NotLoaded);
        assert_eq!(t.state(Some("b"), t0), AdapterState::Loaded);
        // The engine says it holds 4: both are loaded.
        let report = AdapterReport {
            active: Vec::new(),
            slots: Some(4),
        };
        t.report(Some(report), t0);
        assert_eq!(t.state(Some("a"), t0), AdapterState::Loaded);
        // Past the TTL a send no longer counts (nor does the report).
        let later = t0 + SENT_TTL + Duration::from_secs(1);
        assert_eq!(t.state(Some("b"), later), AdapterState::NotLoaded);
    }

    #[test]
    fn the_engines_report_names_adapters_other_gateways_sent() {
        let t = AdapterTracker::default();
        let t0 = Instant::now();
        let report = AdapterReport {
            active: vec!["x".into(), "y".into()],
            slots: Some(2),
        };
        t.report(Some(report), t0);
        assert_eq!(t.state(Some("y"), t0), AdapterState::Loaded);
        assert_eq!(t.state(Some("z"), t0), AdapterState::NotLoaded);
        let stale = t0 + REPORT_TTL + Duration::from_secs(1);
        assert_eq!(t.state(Some("y"), stale), AdapterState::NotLoaded);
        t.report(None, t0);
        assert_eq!(t.state(Some("y"), t0), AdapterState::NotLoaded);
    }

    #[test]
    fn the_list_stays_bounded() {
        let t = AdapterTracker::default();
        let t0 = Instant::now();
        for i in 0..100 {
            t.sent(&format!("a{i}"), t0);
        }
        assert_eq!(t.inner.lock().sent.len(), REMEMBERED);
        t.sent("a50", t0);
        assert_eq!(&*t.inner.lock().sent[0].0, "a50");
    }
}
