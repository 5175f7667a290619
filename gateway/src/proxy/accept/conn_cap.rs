//! A cap on open connections per client IP (`limits.max_connections_per_ip`).
//!
//! Pingora accepts every connection it is offered, so one client can hold as many sockets
//! as the gateway has file descriptors: idle keep-alives, or slow headers that each last
//! until the header deadline (`super::deadline`). [`ConnectionCap`] sees every accepted
//! connection first (`super::connection`): one from an address that already holds the cap
//! is answered at once with a 429 OpenAI error (`too_many_connections`, `Connection:
//! close`) and closed, before any of its bytes are read. The count of an address falls
//! when one of its connections ends, however it ends.
//!
//! The cap is read per connection, so a reload applies to new connections; 0 turns it off.
//! Connections whose peer is not an IP socket (a Unix socket) are not counted.

use crate::error::GatewayError;
use pingora_core::protocols::Stream;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::io::AsyncWriteExt;

/// The cap for a new connection (0: none).
pub type CapFn = Box<dyn Fn() -> u32 + Send + Sync>;
/// Called once for every refused connection (a metric).
pub type RefusedFn = Box<dyn Fn() + Send + Sync>;

/// Open connections per client address.
#[derive(Debug, Default)]
pub struct IpTable {
    open: Mutex<HashMap<IpAddr, u32>>,
}

impl IpTable {
    /// A slot for one more connection from `ip`, or `None` when it already holds `cap`.
    pub fn acquire(self: &Arc<Self>, ip: IpAddr, cap: u32) -> Option<IpSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let n = open.entry(ip).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(IpSlot {
            table: self.clone(),
            ip,
        })
    }

    /// Connections open from `ip`.
    #[cfg(test)]
    fn open(&self, ip: IpAddr) -> u32 {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&ip).copied().unwrap_or(0)
    }

    /// Addresses with at least one open connection.
    #[cfg(test)]
    fn addresses(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn release(&self, ip: IpAddr) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&ip);
            }
        }
    }
}

/// One counted connection; dropping it gives the slot back.
#[derive(Debug)]
pub struct IpSlot {
    table: Arc<IpTable>,
    ip: IpAddr,
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        self.table.release(self.ip);
    }
}

/// Refuses connections beyond a per-IP cap.
pub struct ConnectionCap {
    table: Arc<IpTable>,
    cap: CapFn,
    refused: RefusedFn,
}

impl ConnectionCap {
    /// At most `cap()` connections per client IP; `refused()` runs for each connection
    /// turned away.
    pub fn new(cap: CapFn, refused: RefusedFn) -> Self {
        Self {
            table: Arc::default(),
            cap,
            refused,
        }
    }

    /// Counts a new connection: its slot (`None` when uncounted: no cap, or not an IP
    /// peer), or `Err` once it has been answered with the 429 and closed.
    pub async fn count(&self, stream: &mut Stream) -> Result<Option<IpSlot>, Refused> {
        let cap = (self.cap)();
        let Some(ip) = peer_ip(stream).filter(|_| cap > 0) else {
            return Ok(None);
        };
        match self.table.acquire(ip, cap) {
            Some(slot) => Ok(Some(slot)),
            None => {
                (self.refused)();
                tracing::debug!(%ip, cap, "connection refused: per-IP cap");
                // Best effort: a client that vanished needs no answer.
                let _ = stream.write_all(&refusal(cap)).await;
                let _ = stream.shutdown().await;
                Err(Refused)
            }
        }
    }
}

/// A connection turned away by the cap (already answered and closed).
#[derive(Debug)]
pub struct Refused;

/// The peer's IP address, when the connection is over TCP.
fn peer_ip(stream: &Stream) -> Option<IpAddr> {
    let digest = stream.get_socket_digest()?;
    Some(digest.peer_addr()?.as_inet()?.ip())
}

/// The whole HTTP/1.1 answer to a refused connection.
fn refusal(cap: u32) -> Vec<u8> {
    let r = GatewayError::TooManyConnections { limit: cap }.response();
    let reason = http::StatusCode::from_u16(r.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n",
        r.status,
        r.body.len()
    );
    for (k, v) in &r.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(&r.body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_at_most_its_cap_and_slots_come_back() {
        let table = Arc::new(IpTable::default());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let s1 = table.acquire(a, 2).expect("first");
        let s2 = table.acquire(a, 2).expect("second");
        assert!(table.acquire(a, 2).is_none(), "third over the cap");
        let other = table
            .acquire(b, 2)
            .expect("another address has its own count");
        assert_eq!((table.open(a), table.open(b)), (2, 1));
        drop(s1);
        assert_eq!(table.open(a), 1);
        let s3 = table.acquire(a, 2).expect("a freed slot is reusable");
        drop((s2, s3, other));
        assert_eq!(table.addresses(), 0, "empty entries are removed");
        // A cap lowered below what is open refuses until enough close.
        let held: Vec<_> = (0..3).map(|_| table.acquire(a, 5).unwrap()).collect();
        assert!(table.acquire(a, 2).is_none());
        drop(held);
        assert!(table.acquire(a, 2).is_some());
    }

    #[test]
    fn the_refusal_is_a_complete_429_that_closes() {
        let text = String::from_utf8(refusal(7)).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 429 Too Many Requests\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert!(head.contains("\r\nretry-after: 1"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "too_many_connections");
        assert_eq!(v["error"]["type"], "rate_limit_error");
        assert!(v["error"]["message"].as_str().unwrap().contains('7'));
    }
}
