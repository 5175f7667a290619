//! Host-side preparation of one step for the device: the ragged batch flattened into
//! per-row arrays, the block tables flattened into one array with per-item offsets, and
//! the float offsets of every row's KV slot in the paged pool (same layout as the CPU pool).

use crate::error::EngineError;
use crate::kv::KvLayout;
use crate::step::StepItem;

/// Float offsets inside the device KV pool, which has the CPU pool's page layout:
/// page-major, then layer, then K/V, then slot, then `kv_dim` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KvGeom {
    /// Floats in one page.
    pub(crate) page_floats: i64,
    /// Floats from a layer's K rows to the next layer's K rows.
    pub(crate) layer_floats: i64,
    /// Floats from a slot's K row to its V row.
    pub(crate) v_off: i64,
    /// Values per row.
    pub(crate) kv_dim: i64,
}

impl KvGeom {
    /// The geometry of `layout`.
    pub(crate) fn new(layout: &KvLayout) -> Self {
        let bs = layout.block_size.get() as i64;
        let kv_dim = layout.kv_dim as i64;
        Self {
            page_floats: layout.values_per_page() as i64,
            layer_floats: 2 * bs * kv_dim,
            v_off: bs * kv_dim,
            kv_dim,
        }
    }
    /// Offset of the K row of `slot` of layer 0 in `page`.
    pub(crate) fn slot(&self, page: u32, slot: usize) -> i64 {
        page as i64 * self.page_floats + slot as i64 * self.kv_dim
    }
    /// Offset of layer `l`'s K rows within a page.
    pub(crate) fn layer(&self, l: usize) -> i64 {
        l as i64 * self.layer_floats
    }
}

/// One step flattened into the arrays the kernels read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StepPlan {
    /// Token of every row (all items' new tokens, back to back).
    pub(crate) tokens: Vec<u32>,
    /// Position of every row in its sequence.
    pub(crate) pos: Vec<i32>,
    /// Item of every row.
    pub(crate) row_item: Vec<i32>,
    /// Start of each item's block table in `pt`.
    pub(crate) pt_off: Vec<i32>,
    /// All items' block tables (only the pages covering their positions), back to back.
    pub(crate) pt: Vec<i32>,
    /// Offset of every row's layer-0 K slot in the pool ([`KvGeom::slot`]).
    pub(crate) kv_dst: Vec<i64>,
    /// Row of each item's last new token (whose logits are returned).
    pub(crate) last_rows: Vec<i32>,
}

impl StepPlan {
    /// Flattens `items` (already validated by the engine: non-empty, pages covering every
    /// position, page ids in range) for a pool of shape `layout`.
    pub(crate) fn new(layout: &KvLayout, items: &[StepItem<'_>]) -> Result<Self, EngineError> {
        let bs = layout.block_size.get();
        let geom = KvGeom::new(layout);
        let rows: usize = items.iter().map(|it| it.tokens.len()).sum();
        let too_big = |what: &str| EngineError::InvalidStep(format!("{what} exceeds i32 range"));
        let mut p = StepPlan {
            tokens: Vec::with_capacity(rows),
            pos: Vec::with_capacity(rows),
            row_item: Vec::with_capacity(rows),
            kv_dst: Vec::with_capacity(rows),
            ..Self::default()
        };
        for (i, it) in items.iter().enumerate() {
            let end = it.start_pos + it.tokens.len();
            let used = end.div_ceil(bs);
            if it.tokens.is_empty() || it.pages.len() < used {
                return Err(EngineError::InvalidStep(format!(
                    "item {i}: {} pages cannot hold {end} positions",
                    it.pages.len()
                )));
            }
            p.pt_off
                .push(i32::try_from(p.pt.len()).map_err(|_| too_big("block tables"))?);
            for page in &it.pages[..used] {
                p.pt.push(i32::try_from(page.0).map_err(|_| too_big("page id"))?);
            }
            for (j, t) in it.tokens.iter().enumerate() {
                let pos = it.start_pos + j;
                p.tokens.push(t.0);
                p.pos
                    .push(i32::try_from(pos).map_err(|_| too_big("position"))?);
                p.row_item.push(i as i32);
                p.kv_dst.push(geom.slot(it.pages[pos / bs].0, pos % bs));
            }
            p.last_rows
                .push(i32::try_from(p.tokens.len() - 1).map_err(|_| too_big("rows"))?);
        }
        Ok(p)
    }

    /// Rows (new tokens) in the step.
    pub(crate) fn rows(&self) -> usize {
        self.tokens.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::{KvPool, PageId};
    use warmpath_core::{BlockSize, TokenId};

    fn layout() -> KvLayout {
        KvLayout {
            block_size: BlockSize(4),
            n_layers: 3,
            kv_dim: 6,
            dtype: crate::KvDtype::F16,
        }
    }

    #[test]
    fn cuda_geometry_matches_the_cpu_pool() {
        let l = layout();
        let g = KvGeom::new(&l);
        let pool = KvPool::new(l, 5);
        let base = pool.page_rows(PageId(0), 0, 0, 1).as_ptr();
        let off = |page: u32, layer: usize, kind: usize| {
            let p = pool.page_rows(PageId(page), layer, kind, 1).as_ptr();
            ((p as usize - base as usize) / std::mem::size_of::<half::f16>()) as i64
        };
        for page in [0u32, 1, 4] {
            for layer in 0..3 {
                let k = g.slot(page, 0) + g.layer(layer);
                assert_eq!(k, off(page, layer, 0), "K page {page} layer {layer}");
                assert_eq!(
                    k + g.v_off,
                    off(page, layer, 1),
                    "V page {page} layer {layer}"
                );
            }
        }
        assert_eq!(g.slot(2, 3) - g.slot(2, 0), 3 * 6);
        assert_eq!(g.page_floats as usize, l.values_per_page());
    }

    #[test]
    fn cuda_plan_flattens_ragged_items_and_block_tables() {
        let l = layout();
        let toks: Vec<TokenId> = (10..16).map(TokenId).collect();
        let pages_a = [PageId(7), PageId(2), PageId(9)];
        let pages_b = [PageId(3), PageId(1)];
        let items = [
            // Prefill chunk at positions 3..8 over pages 7, 2 (page 9 unused so far).
            StepItem {
                tokens: &toks[..5],
                start_pos: 3,
                pages: &pages_a,
            },
            // Decode at position 4 (page 1, slot 0).
            StepItem {
                tokens: &toks[5..],
                start_pos: 4,
                pages: &pages_b,
            },
        ];
        let p = StepPlan::new(&l, &items).unwrap();
        assert_eq!(p.rows(), 6);
        assert_eq!(p.tokens, vec![10, 11, 12, 13, 14, 15]);
        assert_eq!(p.pos, vec![3, 4, 5, 6, 7, 4]);
        assert_eq!(p.row_item, vec![0, 0, 0, 0, 0, 1]);
        assert_eq!(p.pt, vec![7, 2, 3, 1]);
        assert_eq!(p.pt_off, vec![0, 2]);
        assert_eq!(p.last_rows, vec![4, 5]);
        let g = KvGeom::new(&l);
        assert_eq!(p.kv_dst[0], g.slot(7, 3));
        assert_eq!(p.kv_dst[1], g.slot(2, 0));
        assert_eq!(p.kv_dst[4], g.slot(2, 3));
        assert_eq!(p.kv_dst[5], g.slot(1, 0));
        // Every row's block-table entry resolves to the page holding its position.
        for r in 0..p.rows() {
            let item = p.row_item[r] as usize;
            let pos = p.pos[r] as usize;
            let page = p.pt[p.pt_off[item] as usize + pos / 4];
            assert_eq!(p.kv_dst[r], g.slot(page as u32, pos % 4), "row {r}");
        }
    }

    #[test]
    fn cuda_plan_rejects_short_block_tables() {
        let toks = [TokenId(1); 5];
        let pages = [PageId(0)];
        let e = StepPlan::new(
            &layout(),
            &[StepItem {
                tokens: &toks,
                start_pos: 0,
                pages: &pages,
            }],
        )
        .unwrap_err();
        assert!(e.to_string().contains("cannot hold 5 positions"), "{e}");
    }
}
