//! Tenants and adapters in front of a vLLM-style engine, end to end below HTTP: requests
//! hashed as `proxy::prepare` hashes them ([`EngineNamespace::seed`]), routed by the real
//! `warm` policy over the real prefix index, served by [`FakeVllm`] (a prefix cache keyed as
//! vLLM keys its blocks: parent, tokens and extra keys, with the adapter's name on every
//! block and the `cache_salt` on the first), whose `BlockStored` events (msgpack, vLLM's
//! array encoding) go through the gateway's decoder, mapper and event stream into the
//! index. Each request's predicted cached tokens are compared with what the engine reports.

use super::*;
use crate::config::{Config, TenantConfig};
use crate::engines::kv_events::counters::SubscriberCounters;
use crate::engines::kv_events::rehash::EventMapper;
use crate::engines::kv_events::stream::EventStream;
use crate::tenants::{hash_key, Tenant, TenantTable};
use rmpv::Value;
use router_policy::policy::{Policy, RouteRequest, Warm, WarmConfig};
use router_policy::{ClusterView, PrefixIndex, ReplicaSnapshot};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use warmpath_core::{block_hashes, BlockSize, Epoch, Millis, ReplicaId, TokenId};

/// What `proxy::prepare` passes for `tenant`: its salt and its own seed of `ck`.
fn tseed<'a>(
    tenant: &'a Tenant,
    ck: &'a CheckpointId,
) -> (&'a CacheSalt, impl FnOnce() -> RootSeed + 'a) {
    (&tenant.salt, move || tenant.root_seed(ck))
}

const BS: u32 = 16;

/// One vLLM server's prefix cache and the events it publishes.
#[derive(Default)]
struct FakeVllm {
    blocks: HashSet<u64>,
    events: Vec<Value>,
}

impl FakeVllm {
    /// Serves `tokens` with vLLM's per-request `cache_salt` and adapter: returns the cached
    /// tokens it reports (`usage.prompt_tokens_details.cached_tokens`) and caches the rest.
    fn serve(&mut self, tokens: &[u32], salt: Option<&str>, lora: Option<&str>) -> u32 {
        let mut parent = 0u64;
        let mut cached = 0;
        let mut hit = true;
        let (mut new, mut new_tokens, mut extra) = (Vec::new(), Vec::new(), Vec::new());
        let mut new_parent = Value::Nil;
        for (i, block) in tokens.chunks_exact(BS as usize).enumerate() {
            // vLLM's `generate_block_hash_extra_keys`: lora + mm + salt (first block only).
            let keys: Vec<&str> = lora.into_iter().chain(salt.filter(|_| i == 0)).collect();
            let mut h = DefaultHasher::new();
            (parent, block, &keys).hash(&mut h);
            let hash = h.finish();
            if hit && self.blocks.contains(&hash) {
                cached += BS;
            } else {
                if hit {
                    new_parent = if i == 0 {
                        Value::Nil
                    } else {
                        Value::from(parent)
                    };
                }
                hit = false;
                self.blocks.insert(hash);
                new.push(Value::from(hash));
                new_tokens.extend(block.iter().map(|&t| Value::from(t)));
                extra.push(if keys.is_empty() {
                    Value::Nil
                } else {
                    Value::Array(keys.iter().map(|&k| Value::from(k)).collect())
                });
            }
            parent = hash;
        }
        if !new.is_empty() {
            self.events.push(Value::Array(vec![
                Value::from("BlockStored"),
                Value::Array(new),
                new_parent,
                Value::Array(new_tokens),
                Value::from(BS),
                lora.map_or(Value::Nil, |_| Value::from(1)),
                Value::from("GPU"),
                lora.map_or(Value::Nil, Value::from),
                Value::Array(extra),
            ]));
        }
        cached
    }

    /// The events since the last call as one `EventBatch` payload.
    fn payload(&mut self) -> Vec<u8> {
        let batch = Value::Array(vec![
            Value::from(1.5),
            Value::Array(std::mem::take(&mut self.events)),
        ]);
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, &batch).expect("encode");
        out
    }
}

/// Where a replica's mapped events go.
type Sink = Box<dyn FnMut(warmpath_core::KvStreamMessage)>;

/// Tenants `a` and `b`, a pool of two vLLM servers, the gateway's index and `warm`.
struct Cluster {
    tenants: [Arc<Tenant>; 2],
    ns: EngineNamespace,
    ck: CheckpointId,
    engines: Vec<FakeVllm>,
    streams: Vec<EventStream<Sink>>,
    inbox: std::sync::mpsc::Receiver<(ReplicaId, warmpath_core::KvStreamMessage)>,
    index: PrefixIndex,
    warm: Warm,
}

/// One request's outcome.
#[derive(Debug)]
struct Served {
    replica: ReplicaId,
    predicted: u32,
    reported: u32,
}

impl Cluster {
    fn new(salt: bool) -> Self {
        let mut c = Config::default();
        c.auth.enabled = true;
        c.auth.salt_secret = "0123456789abcdef-secret".into();
        c.tenants = ["a", "b"]
            .iter()
            .map(|id| TenantConfig {
                id: (*id).into(),
                api_key_sha256: vec![hash_key(&format!("key-{id}"))],
                models: vec!["*".into()],
                limits: Default::default(),
                regions: Vec::new(),
                flow: Default::default(),
            })
            .collect();
        let table = TenantTable::build(&c, None);
        let get = |id: &str| {
            table
                .authenticate(Some(format!("Bearer key-{id}").as_bytes()))
                .expect("key")
        };
        let ck = CheckpointId::new("vllm/base");
        let (tx, inbox) = std::sync::mpsc::channel();
        let mut index = PrefixIndex::default();
        let streams = (0..2u32)
            .map(|r| {
                let tx = tx.clone();
                let sink: Sink = Box::new(move |m| tx.send((ReplicaId(r), m)).expect("inbox"));
                let mapper =
                    EventMapper::new(HashNamespace::new(ck.clone()), BlockSize(BS), 1 << 12);
                let counters = Arc::new(SubscriberCounters::default());
                let mut s = EventStream::new(mapper, sink, Epoch(1), counters);
                s.start();
                s
            })
            .collect();
        for (r, m) in inbox.try_iter() {
            index.apply_message(r, &m);
        }
        Self {
            tenants: [get("a"), get("b")],
            ns: EngineNamespace {
                salt,
                adapters: vec!["sql".to_string()].into(),
            },
            ck,
            engines: vec![FakeVllm::default(), FakeVllm::default()],
            streams,
            inbox,
            index,
            warm: Warm::new(WarmConfig::default()),
        }
    }

    /// Tenant `t` (0 or 1) asks for `model`: hashed and routed as the gateway does (or sent
    /// to `pin`), served by that engine, its events followed.
    fn request(&mut self, t: usize, model: &str, tokens: &[u32], pin: Option<u32>) -> Served {
        let tenant = &self.tenants[t];
        let seed = self.ns.seed(&self.ck, model, true, tseed(tenant, &self.ck));
        let ids: Vec<TokenId> = tokens.iter().map(|&x| TokenId(x)).collect();
        let hashes = block_hashes(seed, &ids, BlockSize(BS));
        let replica = match pin {
            Some(r) => ReplicaId(r),
            None => {
                let req = RouteRequest {
                    checkpoint: &self.ck,
                    hashes: &hashes,
                    prompt_tokens: tokens.len() as u32,
                    block_size: BlockSize(BS),
                    now: Millis(0),
                    regions: None,
                    residency: &[],
                };
                let view = ClusterView::new(
                    (0..2)
                        .map(|i| ReplicaSnapshot {
                            prefill_tokens_per_s: 4000.0,
                            ..ReplicaSnapshot::idle(ReplicaId(i), self.ck.clone())
                        })
                        .collect(),
                );
                self.warm
                    .select(&req, &view, &self.index)
                    .expect("routed")
                    .replica
            }
        };
        let predicted = self
            .index
            .match_prefix(&hashes, Millis(0))
            .get(replica)
            .blocks()
            * BS;
        let i = replica.0 as usize;
        // What the gateway sends: the salt when the pool salts, the adapter as the model.
        let salt = self.ns.salt.then(|| tenant.salt.as_str().to_string());
        let lora = self.ns.adapter(model).map(str::to_string);
        let reported = self.engines[i].serve(tokens, salt.as_deref(), lora.as_deref());
        let payload = self.engines[i].payload();
        self.streams[i].apply(&payload, false).expect("decodes");
        for (r, m) in self.inbox.try_iter() {
            self.index.apply_message(r, &m);
        }
        Served {
            replica,
            predicted,
            reported,
        }
    }
}

fn prompt(seed: u32, blocks: u32) -> Vec<u32> {
    (0..blocks * BS)
        .map(|i| (i * 7919 + seed * 104_729) % 50_000)
        .collect()
}

fn extend(p: &[u32], seed: u32, blocks: u32) -> Vec<u32> {
    [p, &prompt(seed, blocks)].concat()
}

#[test]
fn salted_tenants_never_see_each_others_prefix_and_keep_their_own() {
    let mut c = Cluster::new(true);
    let p = prompt(1, 8);
    let first = c.request(0, "base", &p, None);
    assert_eq!((first.predicted, first.reported), (0, 0));
    // Tenant a again, longer: routed back, predicted exactly what the engine reuses.
    let again = c.request(0, "base", &extend(&p, 2, 2), None);
    assert_eq!(again.replica, first.replica, "reuse inside the tenant");
    assert_eq!((again.predicted, again.reported), (8 * BS, 8 * BS));
    // Tenant b, the same prefix, on the very replica that holds a's: no hit predicted, and
    // the engine (salted) reports none either.
    let other = c.request(1, "base", &extend(&p, 3, 1), Some(first.replica.0));
    assert_eq!((other.predicted, other.reported), (0, 0), "{other:?}");
    // Routed by the policy, b's prefix is b's: it reuses its own, still not a's.
    let b_again = c.request(1, "base", &extend(&p, 4, 1), None);
    assert_eq!(b_again.replica, first.replica, "b's blocks are there now");
    assert_eq!((b_again.predicted, b_again.reported), (8 * BS, 8 * BS));
    // And a still sees only its own.
    let a3 = c.request(0, "base", &extend(&p, 2, 2), None);
    assert_eq!((a3.predicted, a3.reported), (10 * BS, 10 * BS));
}

#[test]
fn without_salts_tenants_share_and_the_prediction_says_so() {
    // The paired control: the same requests with `cache_salt: none` do share, so the test
    // above could fail if the salt reached nothing.
    let mut c = Cluster::new(false);
    let p = prompt(1, 8);
    let first = c.request(0, "base", &p, None);
    let other = c.request(1, "base", &extend(&p, 3, 1), Some(first.replica.0));
    assert_eq!((other.predicted, other.reported), (8 * BS, 8 * BS));
}

#[test]
fn adapter_requests_go_where_the_adapter_is_warm_and_never_match_base_blocks() {
    let mut c = Cluster::new(true);
    let p = prompt(5, 8);
    // Replica 0 has the prefix for the base model, replica 1 for adapter `sql`.
    let base = c.request(0, "base", &p, Some(0));
    let lora = c.request(0, "sql", &p, Some(1));
    assert_eq!(
        (base.reported, lora.reported),
        (0, 0),
        "the engine keeps them apart"
    );
    // The adapter's request, longer: to replica 1, predicted what the engine reuses.
    let a = c.request(0, "sql", &extend(&p, 6, 2), None);
    assert_eq!(a.replica, ReplicaId(1), "{a:?}");
    assert_eq!((a.predicted, a.reported), (8 * BS, 8 * BS));
    // On replica 0 (base blocks only) an adapter request is predicted no hit, rightly.
    let pinned = c.request(0, "sql", &extend(&p, 7, 1), Some(0));
    assert_eq!((pinned.predicted, pinned.reported), (0, 0), "{pinned:?}");
    // The base model's request goes to the base blocks, not the adapter's.
    let b = c.request(0, "base", &extend(&p, 8, 1), None);
    assert_eq!(b.replica, ReplicaId(0), "{b:?}");
    assert_eq!((b.predicted, b.reported), (8 * BS, 8 * BS));
}
