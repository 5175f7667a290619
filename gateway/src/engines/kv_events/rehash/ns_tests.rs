//! Mapper tests for namespaces and tiers: a `cache_salt` in a root block's extra keys and a
//! `lora_name` give the same hashes as the gateway's salted and adapter namespaces; blocks
//! with another medium are the replica's offload tier, removed from that tier only.

use super::*;
use crate::engines::kv_events::wire::{EngineLora, ExtraKey};
use warmpath_core::{block_hashes, CheckpointId};

const BS: u32 = 16;

fn base() -> HashNamespace {
    HashNamespace::new(CheckpointId::new("pool/base"))
}

fn mapper() -> EventMapper {
    EventMapper::new(base(), BlockSize(BS), 1000)
}

fn eh(k: i128) -> EngineHash {
    EngineHash::Int(k)
}

fn toks(n: u32) -> Vec<u32> {
    (0..n).map(|i| i * 7 + 3).collect()
}

fn gateway(ns: HashNamespace, tokens: &[u32]) -> Vec<BlockHash> {
    let t: Vec<TokenId> = tokens.iter().map(|&t| TokenId(t)).collect();
    block_hashes(ns.root_seed(), &t, BlockSize(BS))
}

/// A vLLM `BlockStored` with per-block extra keys and an adapter.
fn stored(
    keys: &[i128],
    parent: Option<i128>,
    tokens: &[u32],
    extra: Vec<Vec<ExtraKey>>,
    lora: Option<&str>,
    medium: Option<&str>,
) -> EngineEvent {
    EngineEvent::Stored {
        hashes: keys.iter().map(|&k| eh(k)).collect(),
        parent: parent.map(eh),
        token_ids: tokens.to_vec(),
        block_size: BS,
        lora: lora.map(|n| EngineLora {
            id: Some(1),
            name: Some(n.into()),
        }),
        medium: medium.map(str::to_string),
        extra_keys: extra,
        group: None,
    }
}

fn hashes_of(ev: Result<Option<KvEvent>, SkipReason>) -> (Vec<BlockHash>, KvTier) {
    match ev {
        Ok(Some(KvEvent::Stored { hashes, tier, .. })) => (hashes, tier),
        other => panic!("not a store: {other:?}"),
    }
}

fn text(s: &str) -> ExtraKey {
    ExtraKey::Text(s.into())
}

#[test]
fn a_salted_chain_hashes_in_the_tenants_namespace() {
    let t = toks(64);
    let mut m = mapper();
    // vLLM: the salt on the first block only, later blocks' extra keys null.
    let (a, tier) = hashes_of(m.map(&stored(
        &[1, 2],
        None,
        &t[..32],
        vec![vec![text("tenant-a")], vec![]],
        None,
        Some("GPU"),
    )));
    assert_eq!(tier, KvTier::Device);
    let (b, _) = hashes_of(m.map(&stored(&[3, 4], Some(2), &t[32..], vec![], None, None)));
    let salted = base().with_salt(Some(CacheSalt::new("tenant-a")));
    assert_eq!([a, b].concat(), gateway(salted, &t));
    // The same tokens from another tenant, and unsalted: three disjoint chains.
    let (other, _) = hashes_of(m.map(&stored(
        &[11, 12],
        None,
        &t[..32],
        vec![vec![text("tenant-b")]],
        None,
        None,
    )));
    let (plain, _) = hashes_of(m.map(&stored(&[21, 22], None, &t[..32], vec![], None, None)));
    assert_eq!(plain, gateway(base(), &t[..32]));
    let b_ns = base().with_salt(Some(CacheSalt::new("tenant-b")));
    assert_eq!(other, gateway(b_ns, &t[..32]));
    assert!(other.iter().all(|h| !plain.contains(h)));
    // A salt on a block that is not a chain's first is not vLLM's contract.
    let late = stored(&[5], Some(4), &t[..16], vec![vec![text("x")]], None, None);
    assert_eq!(m.map(&late), Err(SkipReason::ExtraKeys));
}

#[test]
fn adapter_blocks_hash_in_the_adapters_namespace() {
    let t = toks(48);
    let mut m = mapper();
    // vLLM puts the adapter's name in every block's extra keys, the salt after it.
    let extra = vec![
        vec![text("sql"), text("tenant-a")],
        vec![text("sql")],
        vec![text("sql")],
    ];
    let (got, _) = hashes_of(m.map(&stored(&[1, 2, 3], None, &t, extra, Some("sql"), None)));
    let ns = base()
        .with_adapter(Some("sql".into()))
        .with_salt(Some(CacheSalt::new("tenant-a")));
    assert_eq!(got, gateway(ns, &t));
    let base_chain = gateway(base(), &t);
    assert!(
        got.iter().all(|h| !base_chain.contains(h)),
        "adapter blocks are not base blocks"
    );
    // Without a salt: the adapter's namespace alone.
    let mut m = mapper();
    let extra = vec![vec![text("sql")]; 3];
    let (got, _) = hashes_of(m.map(&stored(&[1, 2, 3], None, &t, extra, Some("sql"), None)));
    assert_eq!(got, gateway(base().with_adapter(Some("sql".into())), &t));
}

#[test]
fn offload_blocks_are_their_own_tier() {
    let t = toks(48);
    let want = gateway(base(), &t);
    let mut m = mapper();
    hashes_of(m.map(&stored(&[1, 2, 3], None, &t, vec![], None, Some("GPU"))));
    // vLLM's CPU offloading reports hashes only: translated through the map.
    let cpu = stored(&[1, 2, 9], None, &[], vec![], None, Some("CPU"));
    let (got, tier) = hashes_of(m.map(&cpu));
    assert_eq!((got, tier), (want[..2].to_vec(), KvTier::Offload));
    // A GPU eviction leaves the CPU copy mapped; a CPU removal then forgets it.
    let rm = |medium: &str, k: i128| EngineEvent::Removed {
        hashes: vec![eh(k)],
        medium: Some(medium.into()),
        group: None,
    };
    assert_eq!(
        m.map(&rm("GPU", 1)),
        Ok(Some(KvEvent::Removed {
            hashes: vec![want[0]],
            tier: KvTier::Device
        }))
    );
    assert_eq!(m.get(&eh(1)), Some(want[0]));
    assert_eq!(m.map(&rm("GPU", 1)), Ok(None), "no longer on the GPU");
    assert_eq!(
        m.map(&rm("CPU", 1)),
        Ok(Some(KvEvent::Removed {
            hashes: vec![want[0]],
            tier: KvTier::Offload
        }))
    );
    assert_eq!(m.get(&eh(1)), None);
    // A disk tier with tokens (LMCache-style) is rehashed like the GPU, as offload.
    let mut m = mapper();
    let (got, tier) = hashes_of(m.map(&stored(&[7, 8, 9], None, &t, vec![], None, Some("DISK"))));
    assert_eq!((got, tier), (want, KvTier::Offload));
    assert_eq!(
        m.map(&rm("GPU", 7)),
        Ok(None),
        "a GPU removal leaves the offload tier"
    );
    assert!(m.get(&eh(7)).is_some());
}
