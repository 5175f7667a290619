//! GGUF tensor table and data alignment, read after the header and metadata with the
//! metadata reader of `warmpath_text::gguf` (one parser of the container).
//!
//! Every read is bounds-checked; a truncated or corrupt file yields
//! [`EngineError::Gguf`] with the byte offset of the problem, never a panic.

use crate::error::EngineError;
use std::collections::BTreeMap;
use warmpath_text::gguf::{GgufError, GgufMetadata, GgufReader};

pub use warmpath_text::gguf::Value;

const DEFAULT_ALIGNMENT: u64 = 32;

impl From<GgufError> for EngineError {
    fn from(e: GgufError) -> Self {
        EngineError::Gguf {
            offset: e.offset,
            msg: e.msg,
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
    /// Format version and metadata key/values.
    pub metadata: GgufMetadata,
    /// Tensors by name.
    pub tensors: BTreeMap<String, TensorInfo>,
    /// Absolute offset of the data section.
    pub data_offset: u64,
}

impl GgufFile {
    /// Parses the header of `buf` (the whole file) and checks every tensor lies in it.
    pub fn parse(buf: &[u8]) -> Result<Self, EngineError> {
        let mut r = GgufReader::new(buf, buf.len() as u64);
        let metadata = r.metadata()?;
        let n_tensors = metadata.tensor_count;
        let mut infos = Vec::with_capacity(n_tensors.min(1 << 16));
        for _ in 0..n_tensors {
            let at = r.position();
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
                .ok_or_else(|| EngineError::gguf(r.position(), "bad general.alignment"))?,
            None => DEFAULT_ALIGNMENT,
        };
        let data_offset = r.position().div_ceil(align) * align;
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
            let offset = data_offset.saturating_add(rel);
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
