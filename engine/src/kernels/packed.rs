//! Activations of several tokens laid out for the AVX-512 multi-token kernels: tokens go
//! in pairs (one 512-bit register holds one block of two tokens) and in groups of up to
//! [`GROUP`] tokens, so one pass over a weight row serves a whole group.

use super::super::quant::{Q8Block, QK};

/// Most tokens one kernel call handles against a weight row.
pub(crate) const GROUP: usize = 16;

/// 64 bytes, cache-line aligned: the quants of one block of two tokens.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct Pair(pub(crate) [i8; 2 * QK]);

/// 16 floats, cache-line aligned: one value per token of a group.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct PerToken(pub(crate) [f32; GROUP]);

/// Up to [`GROUP`] tokens of one input.
pub(crate) struct PackedGroup {
    /// Tokens in the group (`1..=GROUP`).
    pub(crate) len: usize,
    /// `len` rounded up to pairs.
    pub(crate) pairs: usize,
    /// Block `i` of pair `p` at `i * pairs + p`: token `2p`'s 32 quants, then token
    /// `2p + 1`'s (zeros past `len`).
    pub(crate) qs: Vec<Pair>,
    /// Block `i`: the scale `d` of every token (zeros past `len`).
    pub(crate) d: Vec<PerToken>,
    /// Block `i`: `d * sum(qs)` of every token (zeros past `len`).
    pub(crate) s: Vec<PerToken>,
}

/// All tokens of one input, in groups of [`GROUP`].
pub(crate) struct Packed {
    /// The groups, in token order.
    pub(crate) groups: Vec<PackedGroup>,
}

impl Packed {
    /// Packs `n` tokens of `nb` blocks each (`xq.len() == n * nb`, token-major).
    pub(crate) fn new(xq: &[Q8Block], n: usize, nb: usize) -> Self {
        debug_assert_eq!(xq.len(), n * nb);
        let groups = (0..n)
            .step_by(GROUP)
            .map(|t0| {
                let len = (n - t0).min(GROUP);
                let pairs = len.div_ceil(2);
                let mut g = PackedGroup {
                    len,
                    pairs,
                    qs: vec![Pair([0; 2 * QK]); nb * pairs],
                    d: vec![PerToken([0.0; GROUP]); nb],
                    s: vec![PerToken([0.0; GROUP]); nb],
                };
                for j in 0..len {
                    let blocks = &xq[(t0 + j) * nb..(t0 + j + 1) * nb];
                    for (i, b) in blocks.iter().enumerate() {
                        let half = (j % 2) * QK;
                        g.qs[i * pairs + j / 2].0[half..half + QK].copy_from_slice(&b.qs);
                        g.d[i].0[j] = b.d;
                        g.s[i].0[j] = b.s;
                    }
                }
                g
            })
            .collect();
        Self { groups }
    }
}
