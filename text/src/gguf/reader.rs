//! The GGUF container read as a stream: header and metadata ([`GgufReader::metadata`]), and
//! the bounds-checked primitives the replica reads the tensor table with after them.
//!
//! Every read is checked against the file length first, so a truncated or corrupt file
//! yields a [`GgufError`] with the byte offset of the problem, never a panic, and a length
//! field larger than the file is refused before anything is allocated for it.

use super::value::Value;
use std::collections::BTreeMap;
use std::io::Read;

const MAGIC: &[u8; 4] = b"GGUF";
/// Upper bound on element counts read from the file, to reject absurd lengths early.
const MAX_COUNT: u64 = 1 << 32;

/// A malformed GGUF file: what was wrong, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid GGUF at byte offset {offset}: {msg}")]
pub struct GgufError {
    /// Byte offset where the problem was found.
    pub offset: u64,
    /// What was wrong.
    pub msg: String,
}

impl GgufError {
    /// An error at `offset`.
    pub fn new(offset: u64, msg: impl Into<String>) -> Self {
        Self {
            offset,
            msg: msg.into(),
        }
    }
}

/// The header and metadata of a GGUF file: everything before the tensor table.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufMetadata {
    /// Format version (2 or 3).
    pub version: u32,
    /// Number of entries in the tensor table that follows the metadata.
    pub tensor_count: usize,
    /// Metadata key/values.
    pub kv: BTreeMap<String, Value>,
}

impl GgufMetadata {
    /// Metadata value for `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.kv.get(key)
    }
}

/// Reads the header and metadata of a GGUF file of `len` bytes from `reader`, and nothing
/// after them (the tensor table and tensor data are never read).
pub fn read_metadata<R: Read>(reader: R, len: u64) -> Result<GgufMetadata, GgufError> {
    GgufReader::new(reader, len).metadata()
}

/// A position-tracking reader over a GGUF file of known length.
#[derive(Debug)]
pub struct GgufReader<R> {
    inner: R,
    pos: u64,
    len: u64,
}

impl<R: Read> GgufReader<R> {
    /// Reads `inner` from its start, a file of `len` bytes.
    pub fn new(inner: R, len: u64) -> Self {
        Self { inner, pos: 0, len }
    }

    /// Offset of the next byte to read.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The underlying reader, positioned at [`Self::position`] (or further ahead, when it
    /// buffers).
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// An error at the current position.
    pub fn error(&self, msg: impl Into<String>) -> GgufError {
        GgufError::new(self.pos, msg)
    }

    fn truncated(&self, n: u64, what: &str) -> GgufError {
        self.error(format!(
            "truncated: need {n} bytes for {what}, file has {}",
            self.len
        ))
    }

    fn fill(&mut self, buf: &mut [u8], what: &str) -> Result<(), GgufError> {
        let n = buf.len() as u64;
        if self.pos.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(self.truncated(n, what));
        }
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => self.truncated(n, what),
            _ => self.error(format!("reading {what}: {e}")),
        })?;
        self.pos += n;
        Ok(())
    }

    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        let mut a = [0u8; N];
        self.fill(&mut a, what)?;
        Ok(a)
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<Vec<u8>, GgufError> {
        if self
            .pos
            .checked_add(n as u64)
            .is_none_or(|end| end > self.len)
        {
            return Err(self.truncated(n as u64, what));
        }
        let mut b = vec![0u8; n];
        self.fill(&mut b, what)?;
        Ok(b)
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    /// A `u64` element count, refused when larger than the file could hold.
    pub fn count(&mut self, what: &str) -> Result<usize, GgufError> {
        let at = self.pos;
        let n = self.u64(what)?;
        if n > MAX_COUNT || n > self.len {
            return Err(GgufError::new(at, format!("implausible {what} {n}")));
        }
        usize::try_from(n).map_err(|_| GgufError::new(at, format!("implausible {what} {n}")))
    }

    /// A length-prefixed UTF-8 string.
    pub fn string(&mut self, what: &str) -> Result<String, GgufError> {
        let n = self.count(what)?;
        let at = self.pos;
        let b = self.bytes(n, what)?;
        String::from_utf8(b).map_err(|_| GgufError::new(at, format!("{what} is not UTF-8")))
    }

    /// A metadata value of type id `ty`, which was read at offset `ty_at`.
    fn value(&mut self, ty: u32, ty_at: u64, depth: u32) -> Result<Value, GgufError> {
        Ok(match ty {
            0 => Value::U64(self.arr::<1>("u8")?[0] as u64),
            1 => Value::I64(self.arr::<1>("i8")?[0] as i8 as i64),
            2 => Value::U64(u16::from_le_bytes(self.arr("u16")?) as u64),
            3 => Value::I64(i16::from_le_bytes(self.arr("i16")?) as i64),
            4 => Value::U64(self.u32("u32")? as u64),
            5 => Value::I64(i32::from_le_bytes(self.arr("i32")?) as i64),
            6 => Value::F64(f32::from_le_bytes(self.arr("f32")?) as f64),
            7 => Value::Bool(self.arr::<1>("bool")?[0] != 0),
            8 => Value::Str(self.string("string value")?),
            9 => {
                if depth > 2 {
                    return Err(self.error("arrays nested too deeply"));
                }
                let ety_at = self.pos;
                let ety = self.u32("array type")?;
                let n = self.count("array length")?;
                let mut v = Vec::with_capacity(n.min(1 << 20));
                for _ in 0..n {
                    v.push(self.value(ety, ety_at, depth + 1)?);
                }
                Value::Array(v)
            }
            10 => Value::U64(self.u64("u64")?),
            11 => Value::I64(i64::from_le_bytes(self.arr("i64")?)),
            12 => Value::F64(f64::from_le_bytes(self.arr("f64")?)),
            other => {
                return Err(GgufError::new(
                    ty_at,
                    format!("unknown metadata value type {other}"),
                ))
            }
        })
    }

    /// Reads the header and the metadata from the start of the file, leaving the reader at
    /// the tensor table.
    pub fn metadata(&mut self) -> Result<GgufMetadata, GgufError> {
        let magic: [u8; 4] = self.arr("magic")?;
        if &magic != MAGIC {
            return Err(GgufError::new(
                0,
                format!("bad magic {magic:02x?}, expected \"GGUF\""),
            ));
        }
        let version = self.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::new(4, format!("unsupported version {version}")));
        }
        let tensor_count = self.count("tensor count")?;
        let n_kv = self.count("metadata count")?;
        let mut kv = BTreeMap::new();
        for _ in 0..n_kv {
            let key = self.string("metadata key")?;
            let ty_at = self.pos;
            let ty = self.u32("metadata type")?;
            let v = self.value(ty, ty_at, 0)?;
            kv.insert(key, v);
        }
        Ok(GgufMetadata {
            version,
            tensor_count,
            kv,
        })
    }
}
