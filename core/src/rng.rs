//! Seeded pseudo-random numbers for the whole workspace, defined once: the generators come
//! from `rand_xoshiro` and the draws on top of them ([`Draw`]) live here, so the same seed
//! gives the same routing choices, workloads, dummy weights and samples in every crate.
//!
//! - [`SplitMix64`]: one word of state; the `random` and `least_loaded` policies, the
//!   replica's sampler and its dummy weights.
//! - [`Xoshiro256StarStar`]: the load tester's workloads; `seed_from_u64` fills its state
//!   with four SplitMix64 outputs.
//!
//! Not cryptographic. Both generators are the reference algorithms, so their streams do not
//! change with crate versions; a golden test below pins them.

pub use rand_xoshiro::rand_core::{RngCore, SeedableRng};
pub use rand_xoshiro::{SplitMix64, Xoshiro256StarStar};

/// SplitMix64 finaliser: a fast, well-mixed 64-bit permutation.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Draws from a generator's 64-bit words. Implemented for every [`RngCore`].
pub trait Draw: RngCore {
    /// Uniform in `0..n` (`n > 0`), by Lemire's multiply-shift (no rejection: the bias is
    /// below `n / 2^64`).
    fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform integer in `lo..=hi` (`lo` when `hi <= lo`).
    fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`, from the top 53 bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[0, 1)`, from the top 24 bits.
    fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Exponentially distributed with the given mean.
    fn exp(&mut self, mean: f64) -> f64 {
        let u = 1.0 - self.next_f64(); // (0, 1]
        -u.ln() * mean
    }

    /// Fisher-Yates shuffle.
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

impl<R: RngCore + ?Sized> Draw for R {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streams the policies, the replica and the load tester were pinned against when
    /// they had their own generators.
    #[test]
    fn streams_are_the_reference_algorithms() {
        let mut sm = SplitMix64::seed_from_u64(3);
        let got: Vec<u64> = (0..4).map(|_| sm.next_u64()).collect();
        assert_eq!(
            got,
            [
                0x1D0B_14E4_DB01_8FED,
                0xB346_6F8A_7B81_A989,
                0x9CEB_E8A6_D050_DD01,
                0x12A7_64FB_66AB_C9CF
            ]
        );
        let mut x = Xoshiro256StarStar::seed_from_u64(7);
        let got: Vec<u64> = (0..4).map(|_| x.next_u64()).collect();
        assert_eq!(
            got,
            [
                0xB358_FAF7_4EF9_765A,
                0x475C_3D96_4F48_2CD2,
                0xD6F1_D349_952C_7996,
                0xFB29_3873_1E80_7240
            ]
        );
    }

    #[test]
    fn draws_stay_in_range() {
        let mut rng = SplitMix64::seed_from_u64(1);
        for _ in 0..1000 {
            assert!(rng.below(7) < 7);
            assert!((3..=5).contains(&rng.range_inclusive(3, 5)));
            assert!((0.0..1.0).contains(&rng.next_f64()));
            assert!((0.0..1.0).contains(&rng.next_f32()));
        }
        let mut v: Vec<u32> = (0..50).collect();
        rng.shuffle(&mut v);
        v.sort_unstable();
        assert_eq!(v, (0..50).collect::<Vec<_>>());
    }
}
