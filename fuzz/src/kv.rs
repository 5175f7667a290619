//! Fuzz targets for the KV block wire format (`warmpath-protocol`'s `kv_block`), which a
//! replica reads from the shared tier and from a peer replica: bytes from outside the
//! process.

use warmpath_protocol::kv_block::{Frame, FrameReader, KvBlockRecord};
use xxhash_rust::xxh3::xxh3_64;

/// A record: decoding never panics; the input with its checksum recomputed (so that the
/// mutations reach the length and layout checks behind the checksum) decodes only to a
/// record that encodes back to the same bytes, with a payload of its layout's size.
pub(crate) fn record(data: &[u8]) {
    let _ = KvBlockRecord::decode(data);
    if data.len() < 8 {
        return;
    }
    let mut sealed = data.to_vec();
    let n = sealed.len();
    let sum = xxh3_64(&sealed[..n - 8]);
    sealed[n - 8..].copy_from_slice(&sum.to_le_bytes());
    if let Ok(r) = KvBlockRecord::decode(&sealed) {
        assert_eq!(r.payload.len(), r.layout.payload_bytes(), "payload size");
        assert_eq!(r.tokens.len(), r.layout.block_size as usize, "tokens");
        assert_eq!(r.encode(), sealed, "round trip");
    }
}

/// A frame stream: the first byte sets a chunk size, the rest is fed in chunks of it; the
/// frames read (or the error) are the same as when the bytes arrive at once.
pub(crate) fn frames(data: &[u8]) {
    let Some((&chunk, rest)) = data.split_first() else {
        return;
    };
    let whole = read(std::iter::once(rest));
    let chunked = read(rest.chunks(usize::from(chunk.max(1))));
    assert_eq!(whole, chunked, "chunking changed the frames");
}

/// Every frame read, up to the end frame or the first error.
fn read<'a>(chunks: impl Iterator<Item = &'a [u8]>) -> Vec<Result<Frame, String>> {
    let mut r = FrameReader::default();
    let mut out = Vec::new();
    for c in chunks {
        r.push(c);
        loop {
            match r.next_frame() {
                Ok(None) => break,
                Ok(Some(Frame::End)) => {
                    out.push(Ok(Frame::End));
                    return out;
                }
                Ok(Some(f)) => out.push(Ok(f)),
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            }
        }
    }
    out
}
