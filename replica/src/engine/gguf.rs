//! GGUF container parsing: header, metadata, tensor table and data alignment.
//!
//! Every read is bounds-checked; a truncated or corrupt file yields
//! [`EngineError::Gguf`] with the byte offset of the problem, never a panic.

use super::EngineError;
use std::collections::BTreeMap;

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
/// Upper bound on element counts read from the file, to reject absurd lengths early.
const MAX_COUNT: u64 = 1 << 32;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Any unsigned integer type.
    U64(u64),
    /// Any signed integer type.
    I64(i64),
    /// `f32` or `f64`.
    F64(f64),
    /// Boolean.
    Bool(bool),
    /// UTF-8 string.
    Str(String),
    /// Array of values.
    Array(Vec<Value>),
}

impl Value {
    /// As a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::U64(v) => Some(*v),
            Value::I64(v) => u64::try_from(*v).ok(),
            _ => None,
        }
    }
    /// As a float.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::F64(v) => Some(*v),
            Value::U64(v) => Some(*v as f64),
            Value::I64(v) => Some(*v as f64),
            _ => None,
        }
    }
    /// As a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// As a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// As an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// ggml tensor element types the engine knows by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// 16-bit float.
    F16,
    /// 4-bit symmetric blocks.
    Q4_0,
    /// 4-bit blocks with minimum.
    Q4_1,
    /// 8-bit blocks.
    Q8_0,
    /// Any other type id (not computable here).
    Other(u32),
}

impl GgmlType {
    fn from_id(id: u32) -> Self {
        match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            8 => GgmlType::Q8_0,
            other => GgmlType::Other(other),
        }
    }
    /// Bytes for `n` elements, when the type is known (`n` a multiple of the block size).
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        match self {
            GgmlType::F32 => Some(n * 4),
            GgmlType::F16 => Some(n * 2),
            GgmlType::Q4_0 => Some(n / 32 * 18),
            GgmlType::Q4_1 => Some(n / 32 * 20),
            GgmlType::Q8_0 => Some(n / 32 * 34),
            GgmlType::Other(_) => None,
        }
    }
    /// Elements per block.
    pub fn block_len(self) -> u64 {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::Other(_) => 1,
            _ => 32,
        }
    }
    /// Display name (ggml's).
    pub fn name(self) -> String {
        match self {
            GgmlType::F32 => "F32".into(),
            GgmlType::F16 => "F16".into(),
            GgmlType::Q4_0 => "Q4_0".into(),
            GgmlType::Q4_1 => "Q4_1".into(),
            GgmlType::Q8_0 => "Q8_0".into(),
            GgmlType::Other(id) => format!("ggml type {id}"),
        }
    }
}

/// One entry of the tensor table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Tensor name.
    pub name: String,
    /// Dimensions, innermost first (ggml `ne`).
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
    /// Absolute file offset of the data.
    pub offset: u64,
    /// Data size in bytes (0 for unknown types).
    pub size: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A parsed GGUF header (metadata and tensor table; data stays in the file).
#[derive(Clone, Debug)]
pub struct GgufFile {
    /// Format version.
    pub version: u32,
    /// Metadata key/values.
    pub metadata: BTreeMap<String, Value>,
    /// Tensors by name.
    pub tensors: BTreeMap<String, TensorInfo>,
    /// Absolute offset of the data section.
    pub data_offset: u64,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, msg: impl Into<String>) -> EngineError {
        EngineError::gguf(self.pos as u64, msg)
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], EngineError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.err(format!(
                "truncated: need {n} bytes for {what}, file has {}",
                self.buf.len()
            ))),
        }
    }
    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N], EngineError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u32(&mut self, what: &str) -> Result<u32, EngineError> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64, EngineError> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }
    fn count(&mut self, what: &str) -> Result<usize, EngineError> {
        let at = self.pos;
        let n = self.u64(what)?;
        if n > MAX_COUNT || n as usize > self.buf.len() {
            return Err(EngineError::gguf(
                at as u64,
                format!("implausible {what} {n}"),
            ));
        }
        Ok(n as usize)
    }
    fn string(&mut self, what: &str) -> Result<String, EngineError> {
        let n = self.count(what)?;
        let at = self.pos;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| EngineError::gguf(at as u64, format!("{what} is not UTF-8")))
    }
    fn value(&mut self, ty: u32, depth: u32) -> Result<Value, EngineError> {
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
                    return Err(self.err("arrays nested too deeply"));
                }
                let ety = self.u32("array type")?;
                let n = self.count("array length")?;
                let mut v = Vec::with_capacity(n.min(1 << 20));
                for _ in 0..n {
                    v.push(self.value(ety, depth + 1)?);
                }
                Value::Array(v)
            }
            10 => Value::U64(self.u64("u64")?),
            11 => Value::I64(i64::from_le_bytes(self.arr("i64")?)),
            12 => Value::F64(f64::from_le_bytes(self.arr("f64")?)),
            other => {
                self.pos -= 4;
                return Err(self.err(format!("unknown metadata value type {other}")));
            }
        })
    }
}

impl GgufFile {
    /// Parses the header of `buf` (the whole file) and checks every tensor lies in it.
    pub fn parse(buf: &[u8]) -> Result<Self, EngineError> {
        let mut r = Reader { buf, pos: 0 };
        let magic = r.take(4, "magic")?;
        if magic != MAGIC {
            return Err(EngineError::gguf(
                0,
                format!("bad magic {magic:02x?}, expected \"GGUF\""),
            ));
        }
        let version = r.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(EngineError::gguf(
                4,
                format!("unsupported version {version}"),
            ));
        }
        let n_tensors = r.count("tensor count")?;
        let n_kv = r.count("metadata count")?;
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = r.string("metadata key")?;
            let ty = r.u32("metadata type")?;
            let v = r.value(ty, 0)?;
            metadata.insert(key, v);
        }
        let mut infos = Vec::with_capacity(n_tensors.min(1 << 16));
        for _ in 0..n_tensors {
            let at = r.pos as u64;
            let name = r.string("tensor name")?;
            let nd = r.u32("tensor rank")?;
            if nd == 0 || nd > 4 {
                return Err(EngineError::gguf(at, format!("tensor {name}: rank {nd}")));
            }
            let mut dims = Vec::with_capacity(nd as usize);
            for _ in 0..nd {
                dims.push(r.u64("tensor dim")?);
            }
            let ty = GgmlType::from_id(r.u32("tensor type")?);
            let offset = r.u64("tensor offset")?;
            infos.push((at, name, dims, ty, offset));
        }
        let align = match metadata.get("general.alignment") {
            Some(v) => v
                .as_u64()
                .filter(|a| a.is_power_of_two())
                .ok_or_else(|| EngineError::gguf(r.pos as u64, "bad general.alignment"))?,
            None => DEFAULT_ALIGNMENT,
        };
        let data_offset = (r.pos as u64).div_ceil(align) * align;
        let mut tensors = BTreeMap::new();
        for (at, name, dims, ty, rel) in infos {
            let n = dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| EngineError::gguf(at, format!("tensor {name}: size overflow")))?;
            if n % ty.block_len() != 0 {
                return Err(EngineError::gguf(
                    at,
                    format!("tensor {name}: {n} elements not a multiple of the block size"),
                ));
            }
            if rel % align != 0 {
                return Err(EngineError::gguf(
                    at,
                    format!("tensor {name}: offset {rel} not aligned to {align}"),
                ));
            }
            let size = ty.bytes_for(n).unwrap_or(0);
            let offset = data_offset + rel;
            if offset
                .checked_add(size)
                .is_none_or(|end| end > buf.len() as u64)
            {
                return Err(EngineError::gguf(
                    offset,
                    format!(
                        "tensor {name}: data {offset}..{} beyond end of file ({} bytes)",
                        offset.saturating_add(size),
                        buf.len()
                    ),
                ));
            }
            tensors.insert(
                name.clone(),
                TensorInfo {
                    name,
                    dims,
                    ty,
                    offset,
                    size,
                },
            );
        }
        Ok(GgufFile {
            version,
            metadata,
            tensors,
            data_offset,
        })
    }

    /// Metadata value for `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }
}
