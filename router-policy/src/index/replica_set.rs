//! A sorted set of replica ids, inline up to three members (16 bytes in all), on the heap
//! beyond. Most blocks are held by one to three replicas, so most sets never allocate.

use warmpath_core::ids::ReplicaId;

const INLINE: usize = 3;

/// Sorted, duplicate-free replica ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReplicaSet {
    /// Up to [`INLINE`] members in `ids[..len]`.
    Inline { len: u8, ids: [u32; INLINE] },
    /// More than [`INLINE`] members. Boxed so the enum stays 16 bytes (a bare `Vec` is 24).
    #[allow(clippy::box_collection)]
    Heap(Box<Vec<u32>>),
}

impl Default for ReplicaSet {
    fn default() -> Self {
        ReplicaSet::Inline {
            len: 0,
            ids: [0; INLINE],
        }
    }
}

impl ReplicaSet {
    /// Members as a sorted slice of raw ids.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u32] {
        match self {
            ReplicaSet::Inline { len, ids } => &ids[..*len as usize],
            ReplicaSet::Heap(v) => v,
        }
    }

    /// Number of members.
    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// True when there are no members.
    pub(crate) fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// True when `r` is a member.
    #[cfg(test)]
    pub(crate) fn contains(&self, r: ReplicaId) -> bool {
        self.as_slice().binary_search(&r.0).is_ok()
    }

    /// Adds `r`; false when it was already a member.
    pub(crate) fn insert(&mut self, r: ReplicaId) -> bool {
        let pos = match self.as_slice().binary_search(&r.0) {
            Ok(_) => return false,
            Err(pos) => pos,
        };
        match self {
            ReplicaSet::Inline { len, ids } if (*len as usize) < INLINE => {
                let n = *len as usize;
                ids.copy_within(pos..n, pos + 1);
                ids[pos] = r.0;
                *len += 1;
            }
            ReplicaSet::Inline { ids, .. } => {
                let mut v = Vec::with_capacity(INLINE + 2);
                v.extend_from_slice(ids);
                v.insert(pos, r.0);
                *self = ReplicaSet::Heap(Box::new(v));
            }
            ReplicaSet::Heap(v) => v.insert(pos, r.0),
        }
        true
    }

    /// Removes `r`; false when it was not a member.
    pub(crate) fn remove(&mut self, r: ReplicaId) -> bool {
        let pos = match self.as_slice().binary_search(&r.0) {
            Ok(pos) => pos,
            Err(_) => return false,
        };
        match self {
            ReplicaSet::Inline { len, ids } => {
                let n = *len as usize;
                ids.copy_within(pos + 1..n, pos);
                *len -= 1;
            }
            ReplicaSet::Heap(v) => {
                v.remove(pos);
                if v.len() <= INLINE {
                    let mut ids = [0; INLINE];
                    ids[..v.len()].copy_from_slice(v);
                    *self = ReplicaSet::Inline {
                        len: v.len() as u8,
                        ids,
                    };
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn sixteen_bytes() {
        assert_eq!(std::mem::size_of::<ReplicaSet>(), 16);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(7), ..ProptestConfig::default() })]
        #[test]
        fn behaves_like_a_btreeset(ops in proptest::collection::vec((any::<bool>(), 0u32..8), 0..64)) {
            let mut set = ReplicaSet::default();
            let mut model = BTreeSet::new();
            for (ins, r) in ops {
                if ins {
                    prop_assert_eq!(set.insert(ReplicaId(r)), model.insert(r));
                } else {
                    prop_assert_eq!(set.remove(ReplicaId(r)), model.remove(&r));
                }
                let want: Vec<u32> = model.iter().copied().collect();
                prop_assert_eq!(set.as_slice(), &want[..]);
                prop_assert_eq!(set.len(), model.len());
                prop_assert_eq!(set.is_empty(), model.is_empty());
                prop_assert!(model.iter().all(|&m| set.contains(ReplicaId(m))));
            }
        }
    }
}
