//! The chaos test's invariants, each checked after a step: admissions within the bound of
//! the fleet's state in the step, no admitted request lost, revoked keys refused, no lease
//! left behind, one rollout state on every gateway.

use super::setup::{Fleet, BURST, GATEWAYS, POLL_MS, RPM};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warmpath_e2e::chaos::{Load, Record};
use warmpath_e2e::http::get;
use warmpath_e2e::GatewayProc;

/// A window of the run and the fleet's state in it.
pub(crate) struct Step {
    pub(crate) name: &'static str,
    pub(crate) start: Instant,
    pub(crate) end: Instant,
    /// Gateways that reached Redis (on the shared limits) in the step.
    pub(crate) shared: usize,
    /// Gateways cut off from Redis (each on its local share) in the step.
    pub(crate) local: usize,
}

/// Time a request's admission may sit on either side of the window it was sent in, and the
/// time a gateway takes to notice Redis is gone (its 100 ms timeout).
const SLACK_S: f64 = 0.5;

/// The documented bound (docs/configuration.md, `state.gateway_count`) on requests the fleet
/// admits for `RPM`/`BURST` in `d` seconds: the shared limit for the gateways that reach
/// Redis, plus each cut-off gateway's local share (the limit and burst over
/// `gateway_count`, rounded up).
pub(crate) fn rpm_bound(d: f64, shared: usize, local: usize) -> f64 {
    let window = d + SLACK_S;
    let shared = if shared > 0 {
        RPM * window / 60.0 + BURST
    } else {
        0.0
    };
    let share = GATEWAYS as f64;
    shared + local as f64 * (RPM / share * window / 60.0 + (BURST / share).ceil())
}

/// Checks one step's records: every request answered cleanly, and tenant `rpm`'s
/// admissions within the bound for the step (and not far under what the load asked).
pub(crate) fn check_step(load: &Load, s: &Step) -> Vec<Record> {
    let records = load.sent_between(s.start, s.end);
    for r in &records {
        assert!(r.unclean.is_none(), "step {}: {r:?}", s.name);
        let ok = match r.tenant {
            "rpm" | "tok" | "conc" => [200, 429].contains(&r.status),
            _ => r.status == 200,
        };
        assert!(ok, "step {}: unexpected status: {r:?}", s.name);
    }
    let d = (s.end - s.start).as_secs_f64();
    let admitted = records
        .iter()
        .filter(|r| r.tenant == "rpm" && r.status == 200)
        .count() as f64;
    let asked = records.iter().filter(|r| r.tenant == "rpm").count();
    let bound = rpm_bound(d, s.shared, s.local);
    eprintln!(
        "step {:<18} {d:.2}s: rpm admitted {admitted} of {asked} (bound {bound:.1}), {} requests in all",
        s.name,
        records.len()
    );
    assert!(
        admitted <= bound * 1.01 + 1.0,
        "step {}: admitted {admitted} > bound {bound:.1}",
        s.name
    );
    // The fleet admits close to what was asked, up to its rate.
    let floor = 0.6 * (asked as f64).min(RPM * d / 60.0);
    assert!(
        admitted >= floor,
        "step {}: admitted {admitted}, under {floor:.1}",
        s.name
    );
    records
}

/// Waits until every gateway in `gws` gives `key` the status `want`; how long it took.
/// Panics past `within`.
pub(crate) fn until_everywhere(
    f: &Fleet,
    gws: &[usize],
    key: &str,
    want: u16,
    within: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let seen: Vec<u16> = gws
            .iter()
            .map(|g| key_status(&f.gws[*g].addr, key))
            .collect();
        if seen.iter().all(|s| *s == want) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{key}: statuses {seen:?} on gateways {gws:?}, never all {want} within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A revocation reaches a gateway within a poll, plus the time to read the store and a
/// poll's worth of scheduling slack on two busy cores.
pub(crate) fn revocation_window() -> Duration {
    Duration::from_millis(POLL_MS * 2 + 250)
}

/// The status `key` gets from the gateway at `addr` for `GET /v1/models` (authenticated
/// like a chat, answered by the gateway itself: a probe that costs no replica time).
pub(crate) fn key_status(addr: &str, key: &str) -> u16 {
    let auth = format!("Bearer {key}");
    get(addr, "/v1/models", &[("Authorization", &auth)])
        .expect("GET /v1/models")
        .status
}

/// Every key in `revoked` is refused by every gateway in `gws`.
pub(crate) fn revoked_refused(f: &Fleet, gws: &[usize], revoked: &[String], step: &str) {
    for key in revoked {
        for g in gws {
            let s = key_status(&f.gws[*g].addr, key);
            assert_eq!(
                s, 401,
                "step {step}: revoked key {key} got {s} on gateway {g}"
            );
        }
    }
}

/// Holds tenant `conc`'s clients until none is in flight; then no lease may remain
/// (settlements replayed, abandoned admissions released) within 3 s. Releases them.
pub(crate) fn no_lease_left(f: &Fleet, load: &Load, step: &str) {
    load.hold("conc");
    let start = Instant::now();
    while f.leases() > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "step {step}: {} leases held with no request in flight",
            f.leases()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    load.release("conc");
}

/// What must agree across gateways about each rollout.
fn rollout_view(g: &GatewayProc) -> Vec<Value> {
    let (status, v) = g.admin_call("GET", "/admin/rollouts", None).unwrap();
    assert_eq!(status, 200, "{v}");
    let list = v["rollouts"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|r| {
            serde_json::json!({
                "model": r["model"], "to": r["to"], "target": r["target_percent"],
                "state": r["state"], "generation": r["generation"],
            })
        })
        .collect()
}

/// Waits until the gateways in `gws` show one rollout state that `ok` accepts; returns it.
/// Panics past `within`.
pub(crate) fn one_rollout_state(
    f: &Fleet,
    gws: &[usize],
    within: Duration,
    ok: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let views: Vec<Vec<Value>> = gws.iter().map(|g| rollout_view(&f.gws[*g])).collect();
        if views.windows(2).all(|w| w[0] == w[1]) && ok(&views[0]) {
            return views[0].clone();
        }
        assert!(
            start.elapsed() < within,
            "gateways {gws:?} never agreed within {within:?}: {views:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Probes every revoked key on every gateway, over and over, for the whole run: once a
/// key is refused everywhere it must never be accepted again, whatever Redis does.
pub(crate) struct Prober {
    keys: Arc<Mutex<Vec<String>>>,
    accepted: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Prober {
    pub(crate) fn start(addrs: Vec<String>) -> Self {
        let keys: Arc<Mutex<Vec<String>>> = Arc::default();
        let accepted: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (k, a, s) = (keys.clone(), accepted.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let now: Vec<String> = k.lock().unwrap().clone();
                for key in &now {
                    for (g, addr) in addrs.iter().enumerate() {
                        let status = key_status(addr, key);
                        if status != 401 {
                            a.lock()
                                .unwrap()
                                .push(format!("{key} got {status} on gateway {g}"));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        });
        Self {
            keys,
            accepted,
            stop,
            handle: Some(handle),
        }
    }

    /// `key` is refused everywhere now: probe it from here on.
    pub(crate) fn add(&self, key: &str) {
        self.keys.lock().unwrap().push(key.to_string());
    }

    /// Stops probing; panics if a revoked key was ever accepted.
    pub(crate) fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
        let accepted = self.accepted.lock().unwrap();
        assert!(accepted.is_empty(), "revoked keys accepted: {accepted:?}");
    }
}
