//! Mapper tests: rehashed chains equal `warmpath_core::block_hashes` over the same tokens,
//! and every skip reason.

use super::*;
use proptest::prelude::*;
use warmpath_core::{block_hashes, CheckpointId, HashNamespace};

const BS: u32 = 16;

fn base() -> HashNamespace {
    HashNamespace::new(CheckpointId::new("test-model"))
}

fn seed() -> RootSeed {
    base().root_seed()
}

fn mapper(max: usize) -> EventMapper {
    EventMapper::new(base(), BlockSize(BS), max)
}

fn eh(k: i128) -> EngineHash {
    EngineHash::Int(k)
}

fn toks(from: u32, n: u32) -> Vec<u32> {
    (from..from + n).collect()
}

fn stored(keys: &[i128], parent: Option<i128>, token_ids: Vec<u32>) -> EngineEvent {
    EngineEvent::Stored {
        hashes: keys.iter().map(|&k| eh(k)).collect(),
        parent: parent.map(eh),
        token_ids,
        block_size: BS,
        lora: None,
        medium: None,
        extra_keys: Vec::new(),
        group: None,
    }
}

fn warmpath(tokens: &[u32]) -> Vec<BlockHash> {
    let t: Vec<TokenId> = tokens.iter().map(|&t| TokenId(t)).collect();
    block_hashes(seed(), &t, BlockSize(BS))
}

fn stored_hashes(ev: Option<KvEvent>) -> (Option<BlockHash>, Vec<BlockHash>) {
    match ev {
        Some(KvEvent::Stored {
            parent,
            hashes,
            tier,
        }) => {
            // Engine (vLLM/SGLang) blocks are always the engine's own device blocks.
            assert_eq!(tier, KvTier::Device);
            (parent, hashes)
        }
        other => panic!("not a store: {other:?}"),
    }
}

#[test]
fn a_chain_split_over_events_rehashes_to_the_contract() {
    let mut m = mapper(100);
    let all = toks(1000, 64);
    let want = warmpath(&all);
    let (p1, a) = stored_hashes(m.map(&stored(&[1, 2], None, all[..32].to_vec())).unwrap());
    let (p2, b) = stored_hashes(
        m.map(&stored(&[3, 4], Some(2), all[32..].to_vec()))
            .unwrap(),
    );
    assert_eq!(p1, None);
    assert_eq!(p2, Some(want[1]));
    assert_eq!([a, b].concat(), want);
    assert_eq!(m.len(), 4);
    assert_eq!(m.get(&eh(3)), Some(want[2]));
}

#[test]
fn removed_translates_and_forgets_cleared_empties() {
    let mut m = mapper(100);
    let want = warmpath(&toks(0, 48));
    m.map(&stored(&[1, 2, 3], None, toks(0, 48))).unwrap();
    let removed = m.map(&EngineEvent::Removed {
        hashes: vec![eh(3), eh(77)],
        medium: Some("GPU".into()),
        group: Some(0),
    });
    assert_eq!(
        removed,
        Ok(Some(KvEvent::Removed {
            hashes: vec![want[2]],
            tier: KvTier::Device,
        }))
    );
    assert_eq!(m.get(&eh(3)), None);
    // Removing only unknown blocks changes nothing.
    let unknown = EngineEvent::Removed {
        hashes: vec![eh(3)],
        medium: None,
        group: None,
    };
    assert_eq!(m.map(&unknown), Ok(None));
    // A child of the removed block has an unknown parent now.
    let child = stored(&[4], Some(3), toks(48, 16));
    assert_eq!(m.map(&child), Err(SkipReason::UnknownParent));
    assert_eq!(m.map(&EngineEvent::Cleared), Ok(Some(KvEvent::Cleared)));
    assert!(m.is_empty());
}

#[test]
fn skip_reasons() {
    let base = || stored(&[1], None, toks(0, 16));
    let with = |f: &dyn Fn(&mut EngineEvent)| {
        let mut e = base();
        f(&mut e);
        e
    };
    let cases: Vec<(EngineEvent, SkipReason)> = vec![
        (
            with(&|e| {
                if let EngineEvent::Stored {
                    block_size,
                    token_ids,
                    ..
                } = e
                {
                    *block_size = 32;
                    *token_ids = toks(0, 32);
                }
            }),
            SkipReason::BlockSizeMismatch {
                engine: 32,
                gateway: BS,
            },
        ),
        (
            with(&|e| {
                if let EngineEvent::Stored {
                    block_size,
                    token_ids,
                    ..
                } = e
                {
                    *block_size = 5;
                    *token_ids = toks(0, 5);
                }
            }),
            SkipReason::PartialBlock,
        ),
        (stored(&[1], None, toks(0, 5)), SkipReason::PartialBlock),
        (
            stored(&[1], None, toks(0, 17)),
            SkipReason::TokenCountMismatch,
        ),
        (
            stored(&[1, 2, 3], None, toks(0, 20)),
            SkipReason::TokenCountMismatch,
        ),
        (
            stored(&[1], Some(9), toks(0, 16)),
            SkipReason::UnknownParent,
        ),
        (
            with(&|e| {
                if let EngineEvent::Stored { lora, .. } = e {
                    *lora = Some(super::super::wire::EngineLora {
                        id: Some(1),
                        name: None,
                    });
                }
            }),
            SkipReason::Lora,
        ),
        (
            with(&|e| {
                if let EngineEvent::Stored { extra_keys, .. } = e {
                    *extra_keys = vec![vec![super::super::wire::ExtraKey::Other]];
                }
            }),
            SkipReason::ExtraKeys,
        ),
        (
            with(&|e| {
                if let EngineEvent::Stored {
                    medium, token_ids, ..
                } = e
                {
                    *medium = Some("CPU".into());
                    token_ids.clear();
                }
            }),
            SkipReason::UnknownBlock,
        ),
        (
            with(&|e| {
                if let EngineEvent::Stored { group, .. } = e {
                    *group = Some(1);
                }
            }),
            SkipReason::OtherGroup,
        ),
        (
            EngineEvent::Unknown { tag: "X".into() },
            SkipReason::UnknownEvent,
        ),
    ];
    for (event, reason) in cases {
        let mut m = mapper(100);
        assert_eq!(m.map(&event), Err(reason), "{event:?}");
        assert!(m.is_empty(), "{event:?} left entries");
        assert_eq!(SkipReason::LABELS[reason.index()], reason.label());
    }
    // "gpu" in any case is the GPU.
    let mut m = mapper(100);
    let gpu = with(&|e| {
        if let EngineEvent::Stored { medium, .. } = e {
            *medium = Some("gpu".into());
        }
    });
    assert!(m.map(&gpu).unwrap().is_some());
}

#[test]
fn a_trailing_partial_block_is_left_out() {
    let mut m = mapper(100);
    let (_, got) = stored_hashes(m.map(&stored(&[1, 2], None, toks(0, 20))).unwrap());
    assert_eq!(got, warmpath(&toks(0, 16)));
    assert_eq!(m.get(&eh(2)), None);
}

#[test]
fn at_the_bound_stores_are_skipped_until_removals_make_room() {
    let mut m = mapper(2);
    m.map(&stored(&[1, 2], None, toks(0, 32))).unwrap();
    // Storing mapped blocks again adds nothing, so it passes at the bound.
    assert!(m.map(&stored(&[1], None, toks(0, 16))).unwrap().is_some());
    assert_eq!(
        m.map(&stored(&[3], Some(2), toks(32, 16))),
        Err(SkipReason::MapFull)
    );
    let rm = EngineEvent::Removed {
        hashes: vec![eh(1)],
        medium: None,
        group: None,
    };
    m.map(&rm).unwrap();
    let (parent, got) = stored_hashes(m.map(&stored(&[3], Some(2), toks(32, 16))).unwrap());
    let want = warmpath(&toks(0, 48));
    assert_eq!(parent, Some(want[1]));
    assert_eq!(got, vec![want[2]]);
    assert_eq!(m.len(), 2);
}

proptest! {
    /// However the engine splits a sequence into events, and whatever it names its blocks,
    /// the Warmpath hashes equal `block_hashes` over the same tokens.
    #[test]
    fn rehashed_chains_equal_block_hashes(
        tokens in prop::collection::vec(0u32..50_000, 0..200),
        cuts in prop::collection::vec(1usize..5, 1..20),
        salt in any::<u64>(),
        tail in 0usize..16,
    ) {
        let mut m = mapper(1 << 10);
        let blocks = tokens.len() / BS as usize;
        let mut got = Vec::new();
        let mut at = 0;
        let mut cut = cuts.iter().cycle();
        let name = |i: usize| i128::from(salt) * 1000 + i as i128;
        while at < blocks {
            let n = (*cut.next().unwrap()).min(blocks - at);
            let end = at + n;
            let mut ids = tokens[at * 16..end * 16].to_vec();
            let mut keys: Vec<i128> = (at..end).map(name).collect();
            if end == blocks && tail > 0 {
                // The last event may carry a partial block's tokens and hash too.
                let extra = (tokens.len() - end * 16).min(tail);
                if extra > 0 {
                    ids.extend_from_slice(&tokens[end * 16..end * 16 + extra]);
                    keys.push(name(end));
                }
            }
            let parent = at.checked_sub(1).map(name);
            let (p, hs) = stored_hashes(m.map(&stored(&keys, parent, ids)).unwrap());
            prop_assert_eq!(p, at.checked_sub(1).map(|i| got[i]));
            got.extend(hs);
            at = end;
        }
        prop_assert_eq!(got, warmpath(&tokens));
        prop_assert_eq!(m.len(), blocks);
    }
}
