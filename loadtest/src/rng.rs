//! The load tester's seeded randomness: xoshiro256** seeded through SplitMix64, with the
//! draws of `warmpath_core::rng`, so every workload and simulation is reproducible for a
//! seed; plus [`mix`], which derives independent per-stream seeds.

pub use warmpath_core::rng::{Draw, Xoshiro256StarStar as Rng};
use warmpath_core::rng::{RngCore, SeedableRng, SplitMix64};

/// Mixes several words into one seed (order-sensitive): each word is folded into the
/// state and the state replaced by one SplitMix64 output.
pub fn mix(words: &[u64]) -> u64 {
    let mut st = 0x1234_5678_9ABC_DEF0_u64;
    for w in words {
        st = SplitMix64::seed_from_u64(st ^ *w).next_u64();
    }
    if words.is_empty() {
        0
    } else {
        st
    }
}

/// A generator seeded from one word.
pub fn seeded(seed: u64) -> Rng {
    Rng::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_ranges_hold() {
        let mut a = seeded(7);
        let mut b = seeded(7);
        let mut c = seeded(8);
        let xs: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        for _ in 0..1000 {
            let v = a.range_inclusive(3, 5);
            assert!((3..=5).contains(&v));
            let f = a.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
        let mean: f64 = (0..20_000).map(|_| a.exp(2.0)).sum::<f64>() / 20_000.0;
        assert!((mean - 2.0).abs() < 0.1, "exp mean {mean}");
    }

    #[test]
    fn mix_is_the_old_splitmix_fold() {
        // The value the hand-written SplitMix64 fold gave (workload seeds depend on it).
        fn old(words: &[u64]) -> u64 {
            let mut st = 0x1234_5678_9ABC_DEF0_u64;
            let mut out = 0;
            for w in words {
                st ^= *w;
                st = st.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = st;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                out = z ^ (z >> 31);
                st = out;
            }
            out
        }
        for words in [&[][..], &[0], &[42, 0xA77], &[1, 2, 3, 4]] {
            assert_eq!(mix(words), old(words));
        }
    }
}
