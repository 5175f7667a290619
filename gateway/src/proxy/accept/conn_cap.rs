//! Caps on open connections: per client IP (`limits.max_connections_per_ip`) and in all
//! (`limits.max_connections`).
//!
//! Pingora accepts every connection it is offered, so clients can hold as many sockets
//! as the gateway has file descriptors: idle keep-alives, or slow headers that each last
//! until the header deadline (`super::deadline`). [`ConnectionCap`] sees every accepted
//! connection first (`super::connection`), before any of its bytes are read:
//! - with `limits.max_connections` already open, it is answered at once with a 503 OpenAI
//!   error (`overloaded`, `Retry-After: 1`, `Connection: close`) and closed;
//! - from an address that already holds its per-IP cap, with a 429 (`too_many_connections`).
//!
//! Both refusals count in `connections_refused_total`. The counts fall when a connection
//! ends, however it ends. The caps are read per connection, so a reload applies to new
//! connections; 0 turns a cap off. Connections whose peer is not an IP socket (a Unix
//! socket) count towards the total only.

use super::answer;
use crate::error::GatewayError;
use pingora_core::protocols::Stream;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// The caps for a new connection (0: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Caps {
    /// Open connections per client IP.
    pub per_ip: u32,
    /// Open connections in all.
    pub total: u32,
}

/// The caps for a new connection, read per connection.
pub(crate) type CapFn = Box<dyn Fn() -> Caps + Send + Sync>;
/// Called once for every refused connection (a metric).
pub(crate) type RefusedFn = Box<dyn Fn() + Send + Sync>;

/// Open connections per client address.
#[derive(Debug, Default)]
pub(crate) struct IpTable {
    open: Mutex<HashMap<IpAddr, u32>>,
}

impl IpTable {
    /// A slot for one more connection from `ip`, or `None` when it already holds `cap`.
    pub(crate) fn acquire(self: &Arc<Self>, ip: IpAddr, cap: u32) -> Option<IpSlot> {
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
pub(crate) struct IpSlot {
    table: Arc<IpTable>,
    ip: IpAddr,
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        self.table.release(self.ip);
    }
}

/// Open connections in all.
#[derive(Debug, Default)]
pub(crate) struct Total {
    open: AtomicU32,
}

impl Total {
    /// A slot for one more connection, or `None` when `cap` are open (0: no cap, but the
    /// connection is still counted so that a cap set by a reload sees it).
    pub(crate) fn acquire(self: &Arc<Self>, cap: u32) -> Option<TotalSlot> {
        let before = self.open.fetch_add(1, Ordering::AcqRel);
        if cap > 0 && before >= cap {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(TotalSlot {
            total: self.clone(),
        })
    }

    /// Connections open now.
    pub(crate) fn open(&self) -> u32 {
        self.open.load(Ordering::Acquire)
    }
}

/// One connection counted in the total; dropping it gives the slot back.
#[derive(Debug)]
pub(crate) struct TotalSlot {
    total: Arc<Total>,
}

impl Drop for TotalSlot {
    fn drop(&mut self) {
        self.total.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The slots one admitted connection holds until it ends.
#[derive(Debug)]
pub(crate) struct Slots {
    _total: TotalSlot,
    _ip: Option<IpSlot>,
}

/// Refuses connections beyond the total and per-IP caps.
pub(crate) struct ConnectionCap {
    table: Arc<IpTable>,
    total: Arc<Total>,
    cap: CapFn,
    refused: RefusedFn,
}

impl ConnectionCap {
    /// At most `cap()` connections (per client IP and in all); `refused()` runs for each
    /// connection turned away.
    pub(crate) fn new(cap: CapFn, refused: RefusedFn) -> Self {
        Self {
            table: Arc::default(),
            total: Arc::default(),
            cap,
            refused,
        }
    }

    /// Client connections open now (all of them, capped or not).
    pub(crate) fn open(&self) -> u32 {
        self.total.open()
    }

    /// Counts a new connection: its slots, or `Err` once it has been answered with the
    /// 503 or 429 and closed.
    pub(crate) async fn count(&self, stream: &mut Stream) -> Result<Slots, Refused> {
        let caps = (self.cap)();
        let admitted = match self.total.acquire(caps.total) {
            None => Err(GatewayError::Overloaded {
                retry_after: Duration::from_secs(1),
            }),
            Some(total) => match peer_ip(stream).filter(|_| caps.per_ip > 0) {
                None => Ok(Slots {
                    _total: total,
                    _ip: None,
                }),
                Some(ip) => match self.table.acquire(ip, caps.per_ip) {
                    Some(slot) => Ok(Slots {
                        _total: total,
                        _ip: Some(slot),
                    }),
                    None => Err(GatewayError::TooManyConnections { limit: caps.per_ip }),
                },
            },
        };
        let err = match admitted {
            Ok(slots) => return Ok(slots),
            Err(err) => err,
        };
        (self.refused)();
        tracing::debug!(?caps, open = self.total.open(), "connection refused: {err}");
        // Best effort: a client that vanished needs no answer.
        let _ = stream.write_all(&answer::closing(&err)).await;
        let _ = stream.shutdown().await;
        Err(Refused)
    }
}

/// A connection turned away by the cap (already answered and closed).
#[derive(Debug)]
pub(crate) struct Refused;

/// The peer's IP address, when the connection is over TCP.
fn peer_ip(stream: &Stream) -> Option<IpAddr> {
    let digest = stream.get_socket_digest()?;
    Some(digest.peer_addr()?.as_inet()?.ip())
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
    fn the_total_is_capped_and_slots_come_back() {
        let total = Arc::new(Total::default());
        let held: Vec<_> = (0..3)
            .map(|_| total.acquire(3).expect("under the cap"))
            .collect();
        assert!(total.acquire(3).is_none(), "the fourth is over the cap");
        assert_eq!(total.open(), 3, "a refusal leaves the count alone");
        drop(held);
        assert_eq!(total.open(), 0);
        let uncapped: Vec<_> = (0..5).map(|_| total.acquire(0).unwrap()).collect();
        assert_eq!(total.open(), 5, "counted even without a cap");
        assert!(total.acquire(5).is_none());
        drop(uncapped);
        assert!(total.acquire(1).is_some());
    }

    #[test]
    fn the_refusal_is_a_complete_429_that_closes() {
        let text = String::from_utf8(answer::closing(&GatewayError::TooManyConnections {
            limit: 7,
        }))
        .unwrap();
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
