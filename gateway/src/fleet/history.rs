//! The fleet's shared routing history: which replica each gateway sent a prompt's blocks
//! to, for engines without KV events, where each gateway's approximate index is all it
//! knows. Without it, a conversation that reaches another gateway on its next turn finds
//! an index that never saw it (the simulator's Mooncake trace at 8 replicas and 3 gateways:
//! 11.6% cache hits instead of 26.1%; BENCHMARKS.md section 11).
//!
//! One Redis stream, `<prefix>:{routes}`, capped at about `history_cap` entries: each
//! gateway appends its decisions in the background (batched; never on the request path,
//! dropped when the queue is full or Redis is away) and reads the others' every
//! `history_poll_ms`. An entry names the replica by its URL (replica ids are per gateway)
//! and carries the block hashes; the reader applies it with its own clock, so the index's
//! TTL runs from when it arrived.

use super::routed::Routed;
use super::Fleet;
use redis::streams::{StreamRangeReply, StreamReadReply};
use std::sync::Arc;
use tokio::sync::mpsc;
use warmpath_core::BlockHash;

/// Entries read in one poll, at most.
const READ_BATCH: usize = 2000;

/// Block hashes as the stream stores them: 8 little-endian bytes each.
fn encode(hashes: &[BlockHash]) -> Vec<u8> {
    hashes.iter().flat_map(|h| h.0.to_le_bytes()).collect()
}

fn decode(bytes: &[u8]) -> Vec<BlockHash> {
    bytes
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            BlockHash(u64::from_le_bytes(b))
        })
        .collect()
}

/// Where a gateway is in the stream: the last entry id it has read.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    last: Option<String>,
}

impl Fleet {
    fn routes_key(&self) -> String {
        format!("{}:{{routes}}", self.cfg.key_prefix)
    }

    /// Shares one routing decision (`replica`'s URL, the prompt's block hashes) with the
    /// fleet: queued for the background writer, never waited on; dropped when the queue is
    /// full or Redis is unreachable.
    /// `replica` gives the URL, built only when the decision is shared.
    pub(crate) fn share_route(&self, replica: impl FnOnce() -> String, hashes: &[BlockHash]) {
        if hashes.is_empty() || !self.cfg.share_routing || self.is_degraded() {
            return;
        }
        let _ = self.routes.try_send(Routed {
            replica: replica(),
            hashes: hashes.to_vec(),
        });
    }

    /// The writer: appends queued decisions to the stream, one pipeline per batch.
    pub(super) fn write_routes(self: &Arc<Self>, mut rx: mpsc::Receiver<Routed>) {
        let fleet = self.clone();
        self.handle.spawn(async move {
            let key = fleet.routes_key();
            let mut batch = Vec::with_capacity(256);
            while rx.recv_many(&mut batch, 256).await > 0 {
                let Some(conn) = fleet.conn.read().clone() else {
                    batch.clear();
                    continue;
                };
                let mut pipe = redis::pipe();
                for r in batch.drain(..) {
                    pipe.cmd("XADD")
                        .arg(&key)
                        .arg("MAXLEN")
                        .arg("~")
                        .arg(fleet.cfg.history_cap)
                        .arg("*")
                        .arg("g")
                        .arg(&fleet.tag)
                        .arg("r")
                        .arg(&r.replica)
                        .arg("h")
                        .arg(encode(&r.hashes))
                        .ignore();
                }
                let t = fleet.background_timeout(500);
                if let Err(e) = super::within(t, conn.pipeline::<()>(&pipe)).await {
                    fleet.failed(&e);
                }
            }
        });
    }

    /// Reads the decisions other gateways shared since `cursor`: (replica URL, hashes).
    /// The first read starts at the stream's end.
    pub(crate) async fn read_routes(
        self: &Arc<Self>,
        cursor: &mut Cursor,
    ) -> Option<Vec<(String, Vec<BlockHash>)>> {
        let conn = self.live_conn()?;
        let key = self.routes_key();
        let t = self.background_timeout(500);
        let Some(last) = cursor.last.clone() else {
            let mut cmd = redis::cmd("XREVRANGE");
            cmd.arg(&key).arg("+").arg("-").arg("COUNT").arg(1);
            let tail: StreamRangeReply = super::within(t, conn.query(&cmd)).await.ok()?;
            cursor.last = Some(tail.ids.first().map_or("0-0".into(), |e| e.id.clone()));
            return Some(Vec::new());
        };
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT")
            .arg(READ_BATCH)
            .arg("STREAMS")
            .arg(&key)
            .arg(&last);
        let reply: Option<StreamReadReply> = match super::within(t, conn.query(&cmd)).await {
            Ok(r) => r,
            Err(e) => {
                self.failed(&e);
                return None;
            }
        };
        let mut out = Vec::new();
        for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
            cursor.last = Some(entry.id.clone());
            let text = |f: &str| entry.get::<String>(f);
            if text("g").as_deref() == Some(self.tag.as_str()) {
                continue;
            }
            let (Some(replica), Some(hashes)) = (text("r"), entry.get::<Vec<u8>>("h")) else {
                continue;
            };
            out.push((replica, decode(&hashes)));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_round_trip_through_the_stream_encoding() {
        let h = vec![
            BlockHash(0),
            BlockHash(u64::MAX),
            BlockHash(0x0123_4567_89ab_cdef),
        ];
        assert_eq!(encode(&h).len(), 24);
        assert_eq!(decode(&encode(&h)), h);
        // A torn value loses only its partial tail.
        assert_eq!(decode(&encode(&h)[..20]), h[..2].to_vec());
    }
}
