//! Helpers of the fleet tests (gateways sharing state in Redis): waiting for the degraded
//! flag, one request's status, a key's status reached within a deadline.

use crate::fixtures::chat;
use crate::http::post_json;
use crate::GatewayProc;
use std::time::{Duration, Instant};

/// Waits until every gateway reports `state_degraded` = `want`; returns how long it took.
/// Panics with the first gateway's log past `within`.
pub fn wait_degraded(gws: &[GatewayProc], want: u8, within: Duration) -> Duration {
    let start = Instant::now();
    let line = format!("warmpath_gateway_state_degraded {want}");
    while start.elapsed() < within {
        if gws
            .iter()
            .all(|g| g.metrics().is_ok_and(|m| m.lines().any(|l| l == line)))
        {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "gateways not at state_degraded {want} within {within:?}; log: {}",
        gws[0].log()
    );
}

/// Status of one chat request for `model` with `key` through `addr`.
pub fn status_with(addr: &str, model: &str, key: &str) -> u16 {
    let auth = format!("Bearer {key}");
    post_json(
        addr,
        "/v1/chat/completions",
        &[("Authorization", &auth)],
        &chat(model, "s", "hi", 1, false),
    )
    .expect("chat request")
    .status
}

/// Waits until `key` gets `want` through `gw` (polling every 20 ms); the last status seen
/// when `within` passes first.
pub fn until_status(gw: &GatewayProc, model: &str, key: &str, want: u16, within: Duration) -> u16 {
    let start = Instant::now();
    loop {
        let s = status_with(&gw.addr, model, key);
        if s == want || start.elapsed() >= within {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of the counter or gauge `name` (no labels) in `gw`'s metrics, 0 when absent.
pub fn metric(gw: &GatewayProc, name: &str) -> f64 {
    let text = gw.metrics().unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}
