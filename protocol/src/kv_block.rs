//! The KV block record: one full block of a prompt's K and V, as a replica hands it to
//! another (prefill/decode disaggregation) and as a shared KV tier would store it. Defined
//! once, versioned, and pinned by a test (`record_bytes_are_pinned`).
//!
//! # Record (version 1), all integers little-endian
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `WPKV` |
//! | 2 | version (`1`) |
//! | 1 | dtype: `0` = f32, `1` = f16 |
//! | 1 | flags: bit 0 = has parent |
//! | 4 × 3 | `n_layers`, `kv_dim` (`n_kv_heads × head_dim`), `block_size` |
//! | 8 | the block's chain hash ([`BlockHash`]: checkpoint and tenant salt are in it) |
//! | 8 | the parent block's hash (0 when there is none) |
//! | 4 × `block_size` | the block's token ids |
//! | 8 | payload length in bytes |
//! | payload | K and V: for each layer, `block_size` K rows of `kv_dim` values, then `block_size` V rows |
//! | 8 | xxh3-64 of every byte before it |
//!
//! A reader checks the magic, version, checksum and the layout against its own before it
//! uses a byte; the receiver also recomputes the chain hash from the tokens under its own
//! checkpoint and salt, so a record of another checkpoint or tenant is never taken.
//!
//! # The shared KV tier
//!
//! A replica with `--kv-store redis://...` stores each record as one Redis string under
//! [`tier_key`] of its chain hash, the record bytes unchanged. Since the chain hash is
//! seeded with the checkpoint and the tenant's salt, two checkpoints or tenants never share
//! a key; a reader still checks every record as above.
//!
//! # Backends
//!
//! The payload order is the page order of the replica's paged pool (per layer, the
//! block's K rows, then its V rows), so a page is a record's payload as it stands. The CPU
//! pool rounds every K and V value to f16 when it writes it, and its records are f16 (exact,
//! half the bytes). The CUDA pool has the same page layout in f32 but does not round, so a
//! CUDA replica would write f32 records (which every reader takes) from a device-to-host
//! copy of the page, and import by the reverse copy. That copy is future work: today a CUDA
//! replica neither exports nor imports pages (its transfers fail cleanly and it serves
//! without the tier).
//!
//! # Stream framing
//!
//! A stream of records (the body of `POST /v1/kv/prefill`) is a sequence of frames, each a
//! `u32` length then that many bytes of one record; a zero length ends the stream. A stream
//! without its end frame was cut short: the records before the cut are still whole and
//! checked one by one.

use warmpath_core::{BlockHash, TokenId};
use xxhash_rust::xxh3::xxh3_64;

/// The four bytes every record starts with.
pub const MAGIC: [u8; 4] = *b"WPKV";
/// The record version this crate writes and reads.
pub const VERSION: u16 = 1;
/// Largest frame a reader accepts (a record of a large model's block is a few MB).
pub const MAX_FRAME_BYTES: usize = 256 << 20;

const FIXED_HEADER: usize = 4 + 2 + 1 + 1 + 12 + 8 + 8;

/// The shared tier's key of the block with chain hash `hash`: `wpkv:` and the hash in 16
/// hex digits.
pub fn tier_key(hash: BlockHash) -> String {
    format!("wpkv:{hash}")
}

/// How K and V values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvDtype {
    /// 32-bit floats.
    F32,
    /// 16-bit floats (IEEE half).
    F16,
}

impl KvDtype {
    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            KvDtype::F32 => 4,
            KvDtype::F16 => 2,
        }
    }
    fn code(self) -> u8 {
        match self {
            KvDtype::F32 => 0,
            KvDtype::F16 => 1,
        }
    }
    fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(KvDtype::F32),
            1 => Some(KvDtype::F16),
            _ => None,
        }
    }
}

/// The shape of one block's K and V: a record is usable only by a pool of the same layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KvRecordLayout {
    /// Layers.
    pub n_layers: u32,
    /// `n_kv_heads × head_dim`.
    pub kv_dim: u32,
    /// Tokens per block.
    pub block_size: u32,
    /// Value type.
    pub dtype: KvDtype,
}

impl KvRecordLayout {
    /// Payload bytes of one block. For a layout read from untrusted bytes use
    /// [`Self::checked_payload_bytes`]: the product of hostile fields can overflow.
    pub fn payload_bytes(&self) -> usize {
        self.n_layers as usize
            * 2
            * self.block_size as usize
            * self.kv_dim as usize
            * self.dtype.size()
    }

    /// Payload bytes of one block, `None` when the product overflows `usize`.
    pub fn checked_payload_bytes(&self) -> Option<usize> {
        (self.n_layers as usize)
            .checked_mul(2)?
            .checked_mul(self.block_size as usize)?
            .checked_mul(self.kv_dim as usize)?
            .checked_mul(self.dtype.size())
    }

    /// Bytes of one encoded record of this layout (header, tokens, payload, checksum).
    pub fn record_bytes(&self) -> usize {
        FIXED_HEADER + 4 * self.block_size as usize + 8 + self.payload_bytes() + 8
    }
}

/// One full block of KV.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvBlockRecord {
    /// Shape of `payload`.
    pub layout: KvRecordLayout,
    /// The block's chain hash.
    pub hash: BlockHash,
    /// The previous block's chain hash (`None` for a prompt's first block).
    pub parent: Option<BlockHash>,
    /// The block's tokens (`layout.block_size` of them).
    pub tokens: Vec<TokenId>,
    /// K and V, laid out as the module doc says.
    pub payload: Vec<u8>,
}

/// Why bytes are not a usable record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvRecordError {
    /// Fewer bytes than the header or the lengths in it promise.
    #[error("record truncated: {0} bytes")]
    Truncated(usize),
    /// Not a record.
    #[error("bad magic")]
    BadMagic,
    /// A version this reader does not know.
    #[error("record version {0} (this build reads {VERSION})")]
    Version(u16),
    /// A dtype code this reader does not know.
    #[error("unknown dtype code {0}")]
    Dtype(u8),
    /// The checksum does not match the bytes.
    #[error("checksum mismatch")]
    Checksum,
    /// Lengths inside the record disagree with its layout.
    #[error("malformed record: {0}")]
    Malformed(&'static str),
    /// A frame longer than [`MAX_FRAME_BYTES`].
    #[error("frame of {0} bytes exceeds the limit")]
    FrameTooLarge(usize),
}

impl KvBlockRecord {
    /// The record's bytes (checksum included).
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(FIXED_HEADER + 4 * self.tokens.len() + 8 + self.payload.len() + 8);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(self.layout.dtype.code());
        out.push(u8::from(self.parent.is_some()));
        out.extend_from_slice(&self.layout.n_layers.to_le_bytes());
        out.extend_from_slice(&self.layout.kv_dim.to_le_bytes());
        out.extend_from_slice(&self.layout.block_size.to_le_bytes());
        out.extend_from_slice(&self.hash.0.to_le_bytes());
        out.extend_from_slice(&self.parent.map_or(0, |p| p.0).to_le_bytes());
        for t in &self.tokens {
            out.extend_from_slice(&t.0.to_le_bytes());
        }
        out.extend_from_slice(&(self.payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.payload);
        let sum = xxh3_64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// Parses and checks a record: magic, version, checksum, and lengths against its own
    /// layout. Checking the layout against the reader's pool is the caller's job.
    pub fn decode(bytes: &[u8]) -> Result<Self, KvRecordError> {
        let n = bytes.len();
        if n < FIXED_HEADER + 16 {
            return Err(KvRecordError::Truncated(n));
        }
        if bytes[..4] != MAGIC {
            return Err(KvRecordError::BadMagic);
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != VERSION {
            return Err(KvRecordError::Version(version));
        }
        let (body, sum) = bytes.split_at(n - 8);
        if xxh3_64(body) != u64_at(sum, 0) {
            return Err(KvRecordError::Checksum);
        }
        let dtype = KvDtype::from_code(bytes[6]).ok_or(KvRecordError::Dtype(bytes[6]))?;
        if bytes[7] & !1 != 0 {
            return Err(KvRecordError::Malformed("unknown flags"));
        }
        let has_parent = bytes[7] & 1 == 1;
        if !has_parent && u64_at(bytes, 28) != 0 {
            return Err(KvRecordError::Malformed(
                "a parent hash without the parent flag",
            ));
        }
        let layout = KvRecordLayout {
            n_layers: u32_at(bytes, 8),
            kv_dim: u32_at(bytes, 12),
            block_size: u32_at(bytes, 16),
            dtype,
        };
        let hash = BlockHash(u64_at(bytes, 20));
        let parent = has_parent.then(|| BlockHash(u64_at(bytes, 28)));
        let bs = layout.block_size as usize;
        let tokens_end = bs
            .checked_mul(4)
            .and_then(|t| t.checked_add(FIXED_HEADER))
            .filter(|&end| end.checked_add(8).is_some_and(|e| e <= body.len()))
            .ok_or(KvRecordError::Truncated(n))?;
        let tokens = (0..bs)
            .map(|i| TokenId(u32_at(bytes, FIXED_HEADER + 4 * i)))
            .collect();
        let payload_len = u64_at(bytes, tokens_end) as usize;
        let payload = &body[tokens_end + 8..];
        if payload.len() != payload_len || Some(payload_len) != layout.checked_payload_bytes() {
            return Err(KvRecordError::Malformed("payload length"));
        }
        Ok(Self {
            layout,
            hash,
            parent,
            tokens,
            payload: payload.to_vec(),
        })
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Appends one frame holding `record` to `out`.
pub fn push_frame(out: &mut Vec<u8>, record: &[u8]) {
    out.extend_from_slice(&(record.len() as u32).to_le_bytes());
    out.extend_from_slice(record);
}

/// The frame that ends a stream.
pub const END_FRAME: [u8; 4] = [0; 4];

/// What [`FrameReader::next_frame`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One record's bytes (not yet decoded).
    Record(Vec<u8>),
    /// The end frame: the stream is complete.
    End,
}

/// Splits a byte stream, fed chunk by chunk, into frames.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    at: usize,
}

impl FrameReader {
    /// Adds bytes received.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.at > 0 && self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole frame, `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, KvRecordError> {
        let rest = &self.buf[self.at..];
        if rest.len() < 4 {
            return Ok(None);
        }
        let len = u32_at(rest, 0) as usize;
        if len == 0 {
            self.at += 4;
            return Ok(Some(Frame::End));
        }
        if len > MAX_FRAME_BYTES {
            return Err(KvRecordError::FrameTooLarge(len));
        }
        if rest.len() < 4 + len {
            return Ok(None);
        }
        let frame = rest[4..4 + len].to_vec();
        self.at += 4 + len;
        if self.at > (1 << 20) && self.at * 2 > self.buf.len() {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        Ok(Some(Frame::Record(frame)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> KvBlockRecord {
        let layout = KvRecordLayout {
            n_layers: 2,
            kv_dim: 3,
            block_size: 2,
            dtype: KvDtype::F32,
        };
        KvBlockRecord {
            layout,
            hash: BlockHash(0x1122_3344_5566_7788),
            parent: Some(BlockHash(7)),
            tokens: vec![TokenId(5), TokenId(6)],
            payload: (0..layout.payload_bytes()).map(|i| i as u8).collect(),
        }
    }

    #[test]
    fn record_bytes_are_pinned() {
        // Changing the format changes these bytes: bump VERSION and keep a reader.
        let bytes = sample().encode();
        assert_eq!(bytes.len(), 36 + 8 + 8 + 96 + 8);
        assert_eq!(bytes.len(), sample().layout.record_bytes());
        assert_eq!(&bytes[..8], b"WPKV\x01\x00\x00\x01");
        assert_eq!(&bytes[8..20], &[2, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(&bytes[20..28], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(
            xxh3_64(&bytes),
            0x0410_61aa_d784_a5c5,
            "record bytes changed: {:02x?}",
            bytes
        );
        assert_eq!(KvBlockRecord::decode(&bytes), Ok(sample()));
    }

    /// Re-encodes `r` with its checksum fixed, so that only the edited fields are wrong.
    fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
        let n = bytes.len();
        let sum = xxh3_64(&bytes[..n - 8]);
        bytes[n - 8..].copy_from_slice(&sum.to_le_bytes());
        bytes
    }

    #[test]
    fn a_layout_whose_size_overflows_is_refused_not_a_panic() {
        // n_layers × 2 × block_size × kv_dim × 4 overflows 64 bits; the payload length
        // field is left at the real payload's so the lengths line up except for the layout.
        let mut bytes = sample().encode();
        bytes[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        bytes[16..20].copy_from_slice(&2u32.to_le_bytes());
        let layout = KvRecordLayout {
            n_layers: u32::MAX,
            kv_dim: u32::MAX,
            block_size: u32::MAX,
            dtype: KvDtype::F32,
        };
        assert_eq!(layout.checked_payload_bytes(), None);
        assert_eq!(
            KvBlockRecord::decode(&resealed(bytes)),
            Err(KvRecordError::Malformed("payload length"))
        );
        // A block size whose token list cannot fit the record.
        let mut bytes = sample().encode();
        bytes[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            KvBlockRecord::decode(&resealed(bytes)),
            Err(KvRecordError::Truncated(_))
        ));
    }

    #[test]
    fn a_record_has_one_encoding() {
        // Found by the `kv_record` fuzz target: flag bits other than "has parent", and a
        // parent hash without that flag, were accepted and then re-encoded differently.
        let mut bytes = sample().encode();
        bytes[7] |= 0x80;
        assert_eq!(
            KvBlockRecord::decode(&resealed(bytes)),
            Err(KvRecordError::Malformed("unknown flags"))
        );
        let mut bytes = sample().encode();
        bytes[7] = 0;
        assert_eq!(
            KvBlockRecord::decode(&resealed(bytes)),
            Err(KvRecordError::Malformed(
                "a parent hash without the parent flag"
            ))
        );
    }

    #[test]
    fn tier_keys_are_pinned() {
        // Replicas of different builds share one tier: the key must not drift.
        assert_eq!(
            tier_key(BlockHash(0x1122_3344_5566_7788)),
            "wpkv:1122334455667788"
        );
        assert_eq!(tier_key(BlockHash(0xab)), "wpkv:00000000000000ab");
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(
                KvBlockRecord::decode(&bad).is_err(),
                "byte {i} flip accepted"
            );
        }
        assert_eq!(
            KvBlockRecord::decode(&bytes[..bytes.len() - 1]),
            Err(KvRecordError::Checksum)
        );
    }

    #[test]
    fn frames_split_across_chunks_and_end() {
        let rec = sample().encode();
        let mut stream = Vec::new();
        push_frame(&mut stream, &rec);
        push_frame(&mut stream, &rec);
        stream.extend_from_slice(&END_FRAME);
        let mut r = FrameReader::default();
        let mut frames = Vec::new();
        for chunk in stream.chunks(7) {
            r.push(chunk);
            while let Some(f) = r.next_frame().unwrap() {
                frames.push(f);
            }
        }
        assert_eq!(
            frames,
            vec![Frame::Record(rec.clone()), Frame::Record(rec), Frame::End]
        );
        let mut big = FrameReader::default();
        big.push(&u32::MAX.to_le_bytes());
        assert!(matches!(
            big.next_frame(),
            Err(KvRecordError::FrameTooLarge(_))
        ));
    }
}
