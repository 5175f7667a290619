//! Decoding one vLLM / SGLang KV event payload (msgpack written by msgspec) into typed
//! engine events, in either of the two encodings the engines use.
//!
//! Source of the format: vLLM's `vllm/distributed/kv_events.py` (the structs and
//! `ZmqEventPublisher`; read at commits `b4e69e0a` and `0181ea31`) and its reference client
//! `examples/online_serving/kv_events_subscriber.py`; SGLang's
//! `python/sglang/srt/disaggregation/kv_events.py` declares the same structs.
//!
//! - Array-like (vLLM up to late 2025, SGLang): `EventBatch = [ts, events, dp_rank?]`; each
//!   event is `[tag, field, ...]` in declaration order, trailing fields left at their
//!   default omitted:
//!   `["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id,
//!   medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind, sliding_window]`,
//!   `["BlockRemoved", block_hashes, medium, group_idx]`, `["AllBlocksCleared"]`. The
//!   oldest vLLM and SGLang stop after `lora_id` (and `BlockRemoved` after `block_hashes`).
//! - Maps (newest vLLM): `{"ts", "events", "data_parallel_rank"}`, each event a map with
//!   the tag under `"type"` and the same field names.
//!
//! Block hashes are ints (u64, or negative i64 from SGLang) or bytes (vLLM's
//! `ExternalBlockHash = bytes | int`); both become an opaque [`EngineHash`]. Fields this
//! crate does not use (`kv_cache_spec_*`, anything newer) are ignored; a value of the wrong
//! type is a [`WireError`], never a panic. An event tag this decoder does not know becomes
//! [`EngineEvent::Unknown`] so one new event kind does not make every batch unreadable.

use rmpv::Value;

/// Deepest nesting accepted: batch, events, event, field, `extra_keys` entry and a little
/// room inside it. Deeper input is refused before it is built.
const MAX_DEPTH: usize = 16;

/// An engine's own id of one cached block: opaque, only ever compared.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum EngineHash {
    /// An integer hash (vLLM's u64, SGLang's signed 64-bit), kept exactly.
    Int(i128),
    /// A byte-string hash (newer vLLM: a digest).
    Bytes(Box<[u8]>),
}

/// The LoRA adapter a stored block was computed under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EngineLora {
    /// `lora_id` (deprecated in vLLM, still sent).
    pub id: Option<i64>,
    /// `lora_name` (newer vLLM).
    pub name: Option<String>,
}

/// One entry of a block's `extra_keys` tuple (vLLM: the adapter's name, multimodal
/// `(identifier, offset)` pairs, the request's `cache_salt` on the first block, a prompt
/// embedding's digest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ExtraKey {
    /// A string: an adapter name or a cache salt.
    Text(String),
    /// An integer: an older vLLM's adapter id.
    Int(i64),
    /// Anything else (a multimodal pair, bytes): the tokens alone do not identify the block.
    Other,
}

/// One KV cache event as the engine reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EngineEvent {
    /// `BlockStored`: blocks written, chained after `parent`.
    Stored {
        /// The engine's hashes of the new blocks, in chain order.
        hashes: Vec<EngineHash>,
        /// The engine's hash of the block before `hashes[0]` (`None`: the chain's root).
        parent: Option<EngineHash>,
        /// The blocks' tokens, concatenated.
        token_ids: Vec<u32>,
        /// Tokens per block on the engine.
        block_size: u32,
        /// The adapter, if the blocks belong to one.
        lora: Option<EngineLora>,
        /// Where the blocks live (`"GPU"`, `"CPU"`, ...), if said.
        medium: Option<String>,
        /// Each block's `extra_keys` (empty for `null`, and none at all when the field is
        /// absent): what the engine hashed besides the tokens.
        extra_keys: Vec<Vec<ExtraKey>>,
        /// KV cache group (hybrid models), if said.
        group: Option<u32>,
    },
    /// `BlockRemoved`: blocks evicted.
    Removed {
        /// The engine's hashes of the evicted blocks.
        hashes: Vec<EngineHash>,
        /// Where they were evicted from, if said.
        medium: Option<String>,
        /// KV cache group, if said.
        group: Option<u32>,
    },
    /// `AllBlocksCleared`: the whole cache dropped.
    Cleared,
    /// An event type this decoder does not know.
    Unknown {
        /// Its tag.
        tag: String,
    },
}

/// One decoded payload: an `EventBatch`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EngineBatch {
    /// The engine's timestamp (seconds since the epoch, as a float).
    pub ts: f64,
    /// The events, in order.
    pub events: Vec<EngineEvent>,
    /// The data-parallel rank that published it, when sent.
    pub dp_rank: Option<u32>,
}

/// Why a payload could not be decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WireError {
    /// Not valid msgpack, or nested deeper than allowed.
    #[error("payload is not readable msgpack: {0}")]
    Msgpack(#[from] rmpv::decode::Error),
    /// Bytes left after the batch.
    #[error("{0} bytes after the event batch")]
    TrailingBytes(usize),
    /// A value of the wrong type.
    #[error("{what}: expected {expected}")]
    Shape {
        /// Which value.
        what: &'static str,
        /// What it should have been.
        expected: &'static str,
    },
    /// A required field is absent.
    #[error("{0} is missing")]
    Missing(&'static str),
    /// A number outside the range its field allows.
    #[error("{0} is out of range")]
    Range(&'static str),
}

fn shape(what: &'static str, expected: &'static str) -> WireError {
    WireError::Shape { what, expected }
}

/// The fields of one struct in either encoding.
enum Fields<'a> {
    /// Array-like: positions counted after the tag (events) or from 0 (the batch).
    Array(&'a [Value]),
    /// Map: looked up by name.
    Map(&'a [(Value, Value)]),
}

impl<'a> Fields<'a> {
    /// The field at `pos` (array-like) or named `name` (map); `None` when absent or null.
    fn get(&self, pos: usize, name: &str) -> Option<&'a Value> {
        let v = match self {
            Fields::Array(a) => a.get(pos),
            Fields::Map(m) => m
                .iter()
                .find(|(k, _)| k.as_str() == Some(name))
                .map(|e| &e.1),
        };
        v.filter(|v| !v.is_nil())
    }

    fn req(&self, pos: usize, name: &str, what: &'static str) -> Result<&'a Value, WireError> {
        self.get(pos, name).ok_or(WireError::Missing(what))
    }
}

/// Decodes one payload (the third frame of a published message, or the second of a
/// replayed one).
pub(crate) fn decode_batch(payload: &[u8]) -> Result<EngineBatch, WireError> {
    let mut rest = payload;
    let value = rmpv::decode::read_value_with_max_depth(&mut rest, MAX_DEPTH)?;
    if !rest.is_empty() {
        return Err(WireError::TrailingBytes(rest.len()));
    }
    let fields = match &value {
        Value::Array(a) => Fields::Array(a),
        Value::Map(m) => Fields::Map(m),
        _ => return Err(shape("event batch", "an array or a map")),
    };
    let ts = match fields.req(0, "ts", "batch.ts")? {
        Value::F64(f) => *f,
        Value::F32(f) => f64::from(*f),
        Value::Integer(i) => i.as_f64().ok_or(WireError::Range("batch.ts"))?,
        _ => return Err(shape("batch.ts", "a number")),
    };
    let events = array(fields.req(1, "events", "batch.events")?, "batch.events")?;
    let dp_rank = fields
        .get(2, "data_parallel_rank")
        .map(|v| uint(v, "batch.data_parallel_rank"))
        .transpose()?;
    Ok(EngineBatch {
        ts,
        events: events.iter().map(decode_event).collect::<Result<_, _>>()?,
        dp_rank,
    })
}

fn decode_event(value: &Value) -> Result<EngineEvent, WireError> {
    let (tag, f) = match value {
        Value::Array(a) => {
            let (tag, rest) = a.split_first().ok_or(WireError::Missing("event type"))?;
            (tag, Fields::Array(rest))
        }
        Value::Map(m) => {
            let tag = m
                .iter()
                .find(|(k, _)| k.as_str() == Some("type"))
                .map(|e| &e.1)
                .ok_or(WireError::Missing("event type"))?;
            (tag, Fields::Map(m))
        }
        _ => return Err(shape("event", "an array or a map")),
    };
    let tag = tag.as_str().ok_or(shape("event type", "a string"))?;
    Ok(match tag {
        "BlockStored" => {
            let hashes = hashes(f.req(0, "block_hashes", "BlockStored.block_hashes")?)?;
            let parent = f
                .get(1, "parent_block_hash")
                .map(|v| hash(v, "BlockStored.parent_block_hash"))
                .transpose()?;
            let token_ids = array(
                f.req(2, "token_ids", "BlockStored.token_ids")?,
                "BlockStored.token_ids",
            )?
            .iter()
            .map(|t| uint(t, "BlockStored.token_ids"))
            .collect::<Result<_, _>>()?;
            let block_size = uint(
                f.req(3, "block_size", "BlockStored.block_size")?,
                "BlockStored.block_size",
            )?;
            let lora_id = f
                .get(4, "lora_id")
                .map(|v| int(v, "BlockStored.lora_id"))
                .transpose()?;
            let lora_name = f
                .get(6, "lora_name")
                .map(|v| text(v, "BlockStored.lora_name"))
                .transpose()?;
            let lora = (lora_id.is_some() || lora_name.is_some()).then_some(EngineLora {
                id: lora_id,
                name: lora_name,
            });
            let extra_keys = match f.get(7, "extra_keys") {
                None => Vec::new(),
                Some(v) => {
                    let keys: Vec<Vec<ExtraKey>> = array(v, "BlockStored.extra_keys")?
                        .iter()
                        .map(extra_keys)
                        .collect();
                    // All null (what vLLM sends for plain blocks) is no extra key at all.
                    if keys.iter().all(Vec::is_empty) {
                        Vec::new()
                    } else {
                        keys
                    }
                }
            };
            EngineEvent::Stored {
                hashes,
                parent,
                token_ids,
                block_size,
                lora,
                medium: medium(&f, 5)?,
                extra_keys,
                group: group(&f, 8)?,
            }
        }
        "BlockRemoved" => EngineEvent::Removed {
            hashes: hashes(f.req(0, "block_hashes", "BlockRemoved.block_hashes")?)?,
            medium: medium(&f, 1)?,
            group: group(&f, 2)?,
        },
        "AllBlocksCleared" => EngineEvent::Cleared,
        other => EngineEvent::Unknown {
            tag: other.to_string(),
        },
    })
}

/// One block's `extra_keys`: `null`, or a tuple (an array) of keys.
fn extra_keys(v: &Value) -> Vec<ExtraKey> {
    let key = |k: &Value| match k {
        Value::String(s) => s
            .as_str()
            .map_or(ExtraKey::Other, |s| ExtraKey::Text(s.to_string())),
        Value::Integer(i) => i.as_i64().map_or(ExtraKey::Other, ExtraKey::Int),
        _ => ExtraKey::Other,
    };
    match v {
        Value::Nil => Vec::new(),
        Value::Array(a) => a.iter().filter(|k| !k.is_nil()).map(key).collect(),
        other => vec![key(other)],
    }
}

fn medium(f: &Fields<'_>, pos: usize) -> Result<Option<String>, WireError> {
    f.get(pos, "medium")
        .map(|v| text(v, "event.medium"))
        .transpose()
}

fn group(f: &Fields<'_>, pos: usize) -> Result<Option<u32>, WireError> {
    f.get(pos, "group_idx")
        .map(|v| uint(v, "event.group_idx"))
        .transpose()
}

fn array<'a>(v: &'a Value, what: &'static str) -> Result<&'a [Value], WireError> {
    match v {
        Value::Array(a) => Ok(a),
        _ => Err(shape(what, "an array")),
    }
}

fn hashes(v: &Value) -> Result<Vec<EngineHash>, WireError> {
    array(v, "event.block_hashes")?
        .iter()
        .map(|h| hash(h, "event.block_hashes"))
        .collect()
}

fn hash(v: &Value, what: &'static str) -> Result<EngineHash, WireError> {
    match v {
        Value::Integer(i) => i
            .as_u64()
            .map(i128::from)
            .or_else(|| i.as_i64().map(i128::from))
            .map(EngineHash::Int)
            .ok_or(WireError::Range(what)),
        Value::Binary(b) => Ok(EngineHash::Bytes(b.clone().into_boxed_slice())),
        _ => Err(shape(what, "an integer or bytes")),
    }
}

fn uint(v: &Value, what: &'static str) -> Result<u32, WireError> {
    match v {
        Value::Integer(i) => i
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or(WireError::Range(what)),
        _ => Err(shape(what, "an unsigned integer")),
    }
}

fn int(v: &Value, what: &'static str) -> Result<i64, WireError> {
    match v {
        Value::Integer(i) => i.as_i64().ok_or(WireError::Range(what)),
        _ => Err(shape(what, "an integer")),
    }
}

fn text(v: &Value, what: &'static str) -> Result<String, WireError> {
    v.as_str()
        .map(str::to_string)
        .ok_or(shape(what, "a UTF-8 string"))
}

#[cfg(test)]
mod tests;
