//! The page pool: a fixed set of KV pages, sized from a memory budget, handed out and
//! taken back by the radix cache.

use warmpath_core::PageId;

/// Number of pages that fit `budget_bytes` when one page costs `bytes_per_page`.
pub fn pages_for_budget(budget_bytes: u64, bytes_per_page: u64) -> usize {
    if bytes_per_page == 0 {
        return 0;
    }
    (budget_bytes / bytes_per_page) as usize
}

/// Free list over pages `0..total`. Double frees and frees of unknown pages panic in
/// debug builds and are ignored in release builds.
#[derive(Debug)]
pub struct PagePool {
    free: Vec<PageId>,
    in_use: Vec<bool>,
}

impl PagePool {
    /// A pool of `total` free pages.
    pub fn new(total: usize) -> Self {
        // Pop from the end: hand out low page ids first.
        let free = (0..total as u32).rev().map(PageId).collect();
        Self {
            free,
            in_use: vec![false; total],
        }
    }

    /// Takes one free page.
    pub fn alloc(&mut self) -> Option<PageId> {
        let p = self.free.pop()?;
        self.in_use[p.0 as usize] = true;
        Some(p)
    }

    /// Returns a page to the pool.
    pub fn free(&mut self, page: PageId) {
        let slot = self.in_use.get_mut(page.0 as usize);
        match slot {
            Some(used) if *used => {
                *used = false;
                self.free.push(page);
            }
            _ => debug_assert!(false, "freeing page {page:?} that is not in use"),
        }
    }

    /// Pages in the pool.
    pub fn total(&self) -> usize {
        self.in_use.len()
    }

    /// Pages not handed out.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Whether `page` is handed out.
    pub fn is_in_use(&self, page: PageId) -> bool {
        self.in_use.get(page.0 as usize).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_hands_out_each_page_once() {
        let mut p = PagePool::new(3);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        let c = p.alloc().unwrap();
        assert!(p.alloc().is_none());
        assert_ne!(a, b);
        assert_ne!(b, c);
        p.free(b);
        assert_eq!(p.free_count(), 1);
        assert_eq!(p.alloc(), Some(b));
        assert_eq!(pages_for_budget(1000, 300), 3);
        assert_eq!(pages_for_budget(1000, 0), 0);
    }
}
