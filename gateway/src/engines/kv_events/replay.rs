//! The replay client: asks an engine's ROUTER socket for the batches it buffered from a
//! sequence number on.
//!
//! Protocol (vLLM's `ZmqEventPublisher._service_replay`, the same in SGLang): the client
//! sends the start sequence number as 8 bytes big-endian behind an empty delimiter frame (a
//! REQ socket adds it; this client is a DEALER and adds it itself). The publisher answers each
//! buffered batch with `seq >= start` as `("", seq: 8 bytes BE, payload)` (newer versions:
//! `("", topic, seq, payload)`), then an end marker whose sequence number is -1 (eight `0xff`
//! bytes) with an empty payload. The buffer is bounded (`buffer_steps`), so the first batch
//! may come later than asked for.
//!
//! Each replay uses a fresh DEALER, dropped afterwards: replies of an abandoned (timed out)
//! replay can never be mistaken for those of the next one.

use bytes::Bytes;
use std::time::Duration;
use zeromq::{DealerSocket, Socket, SocketOptions, SocketRecv, SocketSend, ZmqError, ZmqMessage};

/// The sequence number of the end marker, as sent.
const END_MARKER: [u8; 8] = [0xff; 8];

/// Why a replay brought nothing usable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplayError {
    /// Connecting, sending or receiving failed.
    #[error("replay socket: {0}")]
    Zmq(#[from] ZmqError),
    /// No end marker within the time allowed.
    #[error("replay timed out after {0:?}")]
    Timeout(Duration),
    /// A reply that is not (delimiter,) sequence number, payload.
    #[error("malformed replay reply ({0} frames)")]
    Malformed(usize),
}

/// Asks `endpoint` for the batches from `from` on and returns those before `until`, in the
/// order sent. Stops at the end marker, or as soon as batch `until - 1` arrives.
pub(crate) async fn replay(
    endpoint: &str,
    from: u64,
    until: u64,
    timeout: Duration,
) -> Result<Vec<(u64, Bytes)>, ReplayError> {
    match tokio::time::timeout(timeout, replay_inner(endpoint, from, until, timeout)).await {
        Ok(r) => r,
        Err(_) => Err(ReplayError::Timeout(timeout)),
    }
}

async fn replay_inner(
    endpoint: &str,
    from: u64,
    until: u64,
    timeout: Duration,
) -> Result<Vec<(u64, Bytes)>, ReplayError> {
    let mut options = SocketOptions::default();
    options.connect_timeout(timeout);
    let mut dealer = DealerSocket::with_options(options);
    dealer.connect(endpoint).await?;
    let request = vec![Bytes::new(), Bytes::copy_from_slice(&from.to_be_bytes())];
    let request = ZmqMessage::try_from(request).map_err(|_| ReplayError::Malformed(0))?;
    dealer.send(request).await?;
    tracing::debug!(endpoint, from, until, "replay requested");
    let mut out = Vec::new();
    loop {
        let reply = dealer.recv().await?;
        let (seq, payload) = parse_reply(reply)?;
        let Some(seq) = seq else {
            return Ok(out);
        };
        if seq < until {
            out.push((seq, payload));
        }
        if seq.saturating_add(1) >= until {
            return Ok(out);
        }
    }
}

/// `(Some(seq), payload)` for a batch, `(None, _)` for the end marker.
fn parse_reply(reply: ZmqMessage) -> Result<(Option<u64>, Bytes), ReplayError> {
    let n = reply.len();
    let mut frames = reply.into_vec();
    // A DEALER sees the publisher's empty delimiter; tolerate its absence. Newer publishers
    // (vLLM 0.34, SGLang 0.5.23) put the topic before the sequence number, as live messages
    // have it: (delimiter, topic, seq, payload). The last two frames are (seq, payload).
    if !(2..=4).contains(&n) {
        return Err(ReplayError::Malformed(n));
    }
    let [seq, payload]: [Bytes; 2] = frames
        .split_off(n - 2)
        .try_into()
        .map_err(|_| ReplayError::Malformed(n))?;
    let seq: [u8; 8] = seq[..].try_into().map_err(|_| ReplayError::Malformed(n))?;
    if seq == END_MARKER {
        return Ok((None, payload));
    }
    Ok((Some(u64::from_be_bytes(seq)), payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(frames: &[&[u8]]) -> ZmqMessage {
        ZmqMessage::try_from(
            frames
                .iter()
                .map(|f| Bytes::copy_from_slice(f))
                .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    #[test]
    fn replies_with_and_without_delimiter_and_the_end_marker() {
        let seven = 7u64.to_be_bytes();
        let (seq, p) = parse_reply(msg(&[b"", &seven, b"abc"])).unwrap();
        assert_eq!((seq, &p[..]), (Some(7), &b"abc"[..]));
        let (seq, _) = parse_reply(msg(&[&seven, b"abc"])).unwrap();
        assert_eq!(seq, Some(7));
        let end = (-1i64).to_be_bytes();
        assert_eq!(parse_reply(msg(&[b"", &end, b""])).unwrap().0, None);
        // With the topic (vLLM 0.34, SGLang 0.5.23): batches and the end marker.
        let (seq, p) = parse_reply(msg(&[b"", b"kv-events", &seven, b"abc"])).unwrap();
        assert_eq!((seq, &p[..]), (Some(7), &b"abc"[..]));
        assert_eq!(parse_reply(msg(&[b"", b"", &end, b""])).unwrap().0, None);
        assert!(matches!(
            parse_reply(msg(&[b"", b"t", &seven, b"abc", b"x"])),
            Err(ReplayError::Malformed(5))
        ));
        assert!(matches!(
            parse_reply(msg(&[b"", b"\x01\x02", b"x"])),
            Err(ReplayError::Malformed(3))
        ));
        assert!(matches!(
            parse_reply(msg(&[b"x"])),
            Err(ReplayError::Malformed(1))
        ));
    }
}
