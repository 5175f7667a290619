//! What both attention loops ([`super::attn`] and its AVX-512 twin) work on: one head's
//! rows of the KV pool ([`HeadRows`]) and the SIMD width whose summation order they
//! reproduce ([`LANES`]).

use half::f16;

/// SIMD width whose summation order is reproduced.
pub(crate) const LANES: usize = 16;

/// One head's columns of the K or V rows of a sequence in one layer.
pub(crate) struct HeadRows<'a> {
    /// Each page's rows of this layer and kind, in position order (`block_size * kv_dim`
    /// values; the last page may be shorter).
    pub(crate) pages: &'a [&'a [f16]],
    /// Positions per page.
    pub(crate) block_size: usize,
    /// Values per row (`n_kv_heads * head_dim`).
    pub(crate) kv_dim: usize,
    /// The head's first column.
    pub(crate) off: usize,
    /// The head's width.
    pub(crate) head_dim: usize,
    /// Positions attended to (`<= pages.len() * block_size`).
    pub(crate) n: usize,
}

impl HeadRows<'_> {
    /// The head's slice of the row of position `s` (page `pi`, slot `si`).
    #[inline(always)]
    pub(crate) fn row(&self, pi: usize, si: usize) -> &[f16] {
        let o = si * self.kv_dim + self.off;
        &self.pages[pi][o..o + self.head_dim]
    }

    /// `f(s, row of s)` for every position `s < n`, in order.
    #[inline(always)]
    pub(super) fn each(&self, mut f: impl FnMut(usize, &[f16])) {
        let mut s = 0;
        for (pi, page) in self.pages.iter().enumerate() {
            let len = (self.n - s)
                .min(self.block_size)
                .min(page.len() / self.kv_dim);
            for si in 0..len {
                f(s, self.row(pi, si));
                s += 1;
            }
            if s == self.n {
                break;
            }
        }
    }
}
