use super::*;
use proptest::prelude::*;

fn ns() -> HashNamespace {
    HashNamespace::new(CheckpointId::new("smollm2-135m-instruct-q4_1"))
}

fn toks(v: impl IntoIterator<Item = u32>) -> Vec<TokenId> {
    v.into_iter().map(TokenId).collect()
}

/// Pins the scheme. If this fails you changed the contract: bump SCHEME_VERSION, update
/// the values, and say so in the change log, because every fleet's index goes cold.
#[test]
fn golden_values_are_pinned() {
    let seed = ns().root_seed();
    let salted = ns().with_salt(Some(CacheSalt::new("tenant-a"))).root_seed();
    let hashes = block_hashes(seed, &toks(0..40), BlockSize(16));
    let got: Vec<String> = std::iter::once(seed.0)
        .chain(std::iter::once(salted.0))
        .chain(hashes.iter().map(|h| h.0))
        .map(|v| format!("{v:016x}"))
        .collect();
    assert_eq!(got, GOLDEN, "hashing contract changed");
}

const GOLDEN: [&str; 4] = [
    "f225fc2ed84952c2",
    "2cc349fe4e6e3311",
    "74e7150ff234ef36",
    "bab24078a55f3b7e",
];

#[test]
fn only_full_blocks_are_hashed() {
    let seed = ns().root_seed();
    assert_eq!(block_hashes(seed, &toks(0..15), BlockSize(16)).len(), 0);
    assert_eq!(block_hashes(seed, &toks(0..16), BlockSize(16)).len(), 1);
    assert_eq!(block_hashes(seed, &toks(0..47), BlockSize(16)).len(), 2);
}

#[test]
fn none_and_empty_fields_differ() {
    let a = ns().with_salt(None).root_seed();
    let b = ns().with_salt(Some(CacheSalt::new(""))).root_seed();
    let c = ns().with_adapter(Some(String::new())).root_seed();
    assert_ne!(a, b);
    assert_ne!(a, c);
    assert_ne!(b, c);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(7), ..ProptestConfig::default() })]

    #[test]
    fn checkpoint_change_changes_every_hash(tokens in proptest::collection::vec(0u32..50_000, 16..200), other in "[a-z]{1,12}") {
        let a = block_hashes(ns().root_seed(), &toks(tokens.clone()), BlockSize(16));
        let ns2 = HashNamespace::new(CheckpointId::new(format!("x-{other}")));
        let b = block_hashes(ns2.root_seed(), &toks(tokens), BlockSize(16));
        prop_assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) { prop_assert_ne!(x, y); }
    }

    #[test]
    fn salt_change_changes_every_hash(tokens in proptest::collection::vec(0u32..50_000, 16..200), s1 in "[a-z]{0,8}", s2 in "[a-z]{0,8}") {
        prop_assume!(s1 != s2);
        let a = block_hashes(ns().with_salt(Some(CacheSalt::new(s1))).root_seed(), &toks(tokens.clone()), BlockSize(16));
        let b = block_hashes(ns().with_salt(Some(CacheSalt::new(s2))).root_seed(), &toks(tokens), BlockSize(16));
        for (x, y) in a.iter().zip(&b) { prop_assert_ne!(x, y); }
    }

    #[test]
    fn token_change_in_block_k_changes_k_onwards_only(
        tokens in proptest::collection::vec(0u32..50_000, 16..300),
        pos in any::<proptest::sample::Index>(),
        delta in 1u32..1000,
        bs in 1u32..40,
    ) {
        let bs = BlockSize(bs);
        let seed = ns().root_seed();
        let mut changed = tokens.clone();
        let i = pos.index(changed.len());
        changed[i] = changed[i].wrapping_add(delta);
        let a = block_hashes(seed, &toks(tokens), bs);
        let b = block_hashes(seed, &toks(changed), bs);
        let k = i / bs.get();
        for j in 0..a.len() {
            if j < k { prop_assert_eq!(a[j], b[j]); } else { prop_assert_ne!(a[j], b[j]); }
        }
    }

    #[test]
    fn incremental_equals_batch(tokens in proptest::collection::vec(0u32..50_000, 0..300), cuts in proptest::collection::vec(0usize..300, 0..6), bs in 1u32..40) {
        let seed = ns().root_seed();
        let t = toks(tokens);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(t.len())).collect();
        cuts.sort_unstable();
        let mut h = ChainHasher::new(seed, BlockSize(bs));
        let mut last = 0;
        for c in cuts { h.extend(&t[last..c]); last = c; }
        h.extend(&t[last..]);
        prop_assert_eq!(h.into_hashes(), block_hashes(seed, &t, BlockSize(bs)));
    }

    #[test]
    fn prefix_blocks_share_hashes(tokens in proptest::collection::vec(0u32..50_000, 0..300), extra in proptest::collection::vec(0u32..50_000, 0..100)) {
        let seed = ns().root_seed();
        let a = block_hashes(seed, &toks(tokens.clone()), BlockSize(16));
        let mut longer = tokens; longer.extend(extra);
        let b = block_hashes(seed, &toks(longer), BlockSize(16));
        prop_assert_eq!(&b[..a.len()], &a[..]);
    }
}
