//! The paged KV pool: fixed-size pages of K and V for every layer.
//!
//! A page holds `block_size` consecutive positions of one sequence, for all layers. The
//! caller (the radix cache) owns page allocation and may share a page between sequences
//! whose prefixes match; the engine only reads and writes the pages a step names.
//!
//! The CPU pool stores f16 values, as llama.cpp's default cache does: every K and V value
//! is rounded to f16 when computed anyway, so f16 storage loses nothing and halves the
//! bytes that decode attention reads, that a page costs, and that a KV block record
//! carries. (The CUDA backend keeps its own f32 pool; its layout says so.)

use half::f16;
use half::slice::HalfFloatSliceExt;
use warmpath_core::BlockSize;
pub use warmpath_core::PageId;
pub use warmpath_protocol::kv_block::KvDtype;

/// Shape of one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    /// Positions per page (= the hashing block size).
    pub block_size: BlockSize,
    /// Layers stored per page.
    pub n_layers: usize,
    /// `n_kv_heads * head_dim`.
    pub kv_dim: usize,
    /// How the backend stores each value (f16 on the CPU, f32 on CUDA).
    pub dtype: KvDtype,
}

impl KvLayout {
    /// K and V values in one page.
    pub fn values_per_page(&self) -> usize {
        self.n_layers * 2 * self.block_size.get() * self.kv_dim
    }
    /// Memory of one page.
    pub fn bytes_per_page(&self) -> usize {
        self.values_per_page() * self.dtype.size()
    }
    /// Offset of the K (`kind = 0`) or V (`kind = 1`) row of `slot` in `layer` of `page`.
    fn offset(&self, page: PageId, layer: usize, kind: usize, slot: usize) -> usize {
        let bs = self.block_size.get();
        page.0 as usize * self.values_per_page() + ((layer * 2 + kind) * bs + slot) * self.kv_dim
    }
}

/// Storage for all pages, in f16.
#[derive(Debug)]
pub(crate) struct KvPool {
    layout: KvLayout,
    num_pages: usize,
    data: Vec<f16>,
}

impl KvPool {
    /// Allocates `num_pages` zeroed pages (`layout.dtype` must be f16).
    pub(crate) fn new(layout: KvLayout, num_pages: usize) -> Self {
        assert_eq!(layout.dtype, KvDtype::F16, "the CPU KV pool stores f16");
        Self {
            layout,
            num_pages,
            data: vec![f16::ZERO; layout.values_per_page() * num_pages],
        }
    }
    /// Page shape.
    pub(crate) fn layout(&self) -> KvLayout {
        self.layout
    }
    /// Number of pages.
    pub(crate) fn num_pages(&self) -> usize {
        self.num_pages
    }
    /// Stores K and V of position `pos` of a sequence with block table `pages` (values
    /// already f16-rounded, so the conversion is exact).
    pub(crate) fn write(
        &mut self,
        pages: &[PageId],
        layer: usize,
        pos: usize,
        k: &[f32],
        v: &[f32],
    ) {
        let bs = self.layout.block_size.get();
        let (page, slot) = (pages[pos / bs], pos % bs);
        let d = self.layout.kv_dim;
        let ko = self.layout.offset(page, layer, 0, slot);
        self.data[ko..ko + d].convert_from_f32_slice(k);
        let vo = self.layout.offset(page, layer, 1, slot);
        self.data[vo..vo + d].convert_from_f32_slice(v);
    }
    /// Every value of one page, in the KV block record's payload order (for each layer,
    /// the K rows then the V rows of all slots).
    pub(crate) fn page(&self, page: PageId) -> &[f16] {
        let n = self.layout.values_per_page();
        let o = page.0 as usize * n;
        &self.data[o..o + n]
    }
    /// Overwrites one page with `values` (as [`KvPool::page`] returns them).
    pub(crate) fn set_page(&mut self, page: PageId, values: &[f16]) {
        let n = self.layout.values_per_page();
        let o = page.0 as usize * n;
        self.data[o..o + n].copy_from_slice(values);
    }
    /// The contiguous K or V rows of `len` slots of one page (`len <= block_size`).
    pub(crate) fn page_rows(&self, page: PageId, layer: usize, kind: usize, len: usize) -> &[f16] {
        let o = self.layout.offset(page, layer, kind, 0);
        &self.data[o..o + len * self.layout.kv_dim]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Device;

    #[test]
    fn a_page_costs_what_its_device_stores() {
        let cpu = KvLayout {
            block_size: BlockSize(16),
            n_layers: 30,
            kv_dim: 192,
            dtype: Device::Cpu.kv_dtype(),
        };
        // SmolLM2-135M: 30 layers x (K, V) x 16 positions x 192 values, in f16.
        assert_eq!(cpu.bytes_per_page(), 30 * 2 * 16 * 192 * 2);
        let cuda = KvLayout {
            dtype: Device::Cuda(0).kv_dtype(),
            ..cpu
        };
        assert_eq!(cuda.bytes_per_page(), 2 * cpu.bytes_per_page());
        // Values round-trip through the pool exactly (they are f16 already).
        let mut pool = KvPool::new(cpu, 2);
        let k: Vec<f32> = (0..192).map(|i| (i as f32 - 96.0) * 0.125).collect();
        let v: Vec<f32> = k.iter().map(|x| -x).collect();
        pool.write(&[PageId(1)], 29, 5, &k, &v);
        let row = pool.page_rows(PageId(1), 29, 1, 6);
        let got: Vec<f32> = row[5 * 192..].iter().map(|h| h.to_f32()).collect();
        assert_eq!(got, v);
        assert!(pool.page(PageId(0)).iter().all(|h| h.to_f32() == 0.0));
    }
}
