//! The offload part: blocks a replica keeps in its own offload tier (vLLM's CPU or disk
//! `medium`, LMCache), from `tier: offload` events. The storage is a second
//! [`PreciseIndex`] (block -> holders, bounded like the precise part): only the publishing
//! replica can load those blocks, so they are per replica like device blocks, but a hit
//! costs a load, not nothing. Matching turns them into each replica's offload run
//! ([`super::PrefixMatches::offload_blocks`]); the `warm` policy costs that run like a
//! shared-tier fetch.

use super::approx::Holders;
use super::replica_set::ReplicaSet;

/// Appends the sorted union of two sorted holder sets (device and offload) to `out`.
pub(super) fn push_union(a: Option<&ReplicaSet>, b: Option<&ReplicaSet>, out: &mut Holders) {
    let a = a.map_or(&[][..], ReplicaSet::as_slice);
    let b = b.map_or(&[][..], ReplicaSet::as_slice);
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                i += 1;
                j += 1;
                x
            }
            (Some(&x), Some(&y)) if x < y => {
                i += 1;
                x
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (_, Some(&y)) => {
                j += 1;
                y
            }
            (None, None) => break,
        };
        out.push(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[u32]) -> ReplicaSet {
        let mut s = ReplicaSet::default();
        for &i in ids {
            s.insert(warmpath_core::ids::ReplicaId(i));
        }
        s
    }

    #[test]
    fn union_is_sorted_and_deduplicated() {
        let mut out = Holders::new();
        push_union(Some(&set(&[1, 3, 5])), Some(&set(&[2, 3, 9])), &mut out);
        assert_eq!(out.as_slice(), &[1, 2, 3, 5, 9]);
        out.clear();
        push_union(None, Some(&set(&[4])), &mut out);
        assert_eq!(out.as_slice(), &[4]);
        out.clear();
        push_union(None, None, &mut out);
        assert!(out.is_empty());
    }
}
