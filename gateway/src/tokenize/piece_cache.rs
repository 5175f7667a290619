//! The token cache of [`super::CachedTokenizer`]: token ids by 128-bit content hash, least
//! recently used out first, bounded by its entries (`tokenizer.cache_entries`) and by the
//! tokens it holds in all. A long prompt's piece can be a million tokens (4 MB): bounded by
//! entries alone, 4096 of them would be gigabytes.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Arc;
use warmpath_core::TokenId;

/// Tokens held by one cache at most: 128 MiB of ids, a thousand 32k-token prompts.
pub(crate) const MAX_CACHED_TOKENS: usize = 1 << 25;

/// See the module docs.
pub(crate) struct PieceCache {
    lru: LruCache<u128, Arc<[TokenId]>>,
    tokens: usize,
    max_tokens: usize,
}

impl PieceCache {
    /// At most `entries` runs and `max_tokens` tokens.
    pub(crate) fn new(entries: NonZeroUsize, max_tokens: usize) -> Self {
        Self {
            lru: LruCache::new(entries),
            tokens: 0,
            max_tokens,
        }
    }

    /// The run cached under `key`, now the most recently used.
    pub(crate) fn get(&mut self, key: &u128) -> Option<&Arc<[TokenId]>> {
        self.lru.get(key)
    }

    /// Caches `ids` under `key`, evicting the least recently used runs past either bound. A
    /// run longer than the token bound is not cached.
    pub(crate) fn put(&mut self, key: u128, ids: Arc<[TokenId]>) {
        if ids.len() > self.max_tokens {
            return;
        }
        self.tokens += ids.len();
        if let Some((_, out)) = self.lru.push(key, ids) {
            self.tokens -= out.len();
        }
        while self.tokens > self.max_tokens {
            match self.lru.pop_lru() {
                Some((_, out)) => self.tokens -= out.len(),
                None => break,
            }
        }
    }

    /// Runs cached.
    pub(crate) fn len(&self) -> usize {
        self.lru.len()
    }

    /// Tokens held in all.
    #[cfg(test)]
    pub(crate) fn tokens(&self) -> usize {
        self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: usize) -> Arc<[TokenId]> {
        vec![TokenId(1); n].into()
    }

    #[test]
    fn bounded_by_entries_and_by_tokens() {
        let mut c = PieceCache::new(NonZeroUsize::new(3).unwrap(), 100);
        c.put(1, run(10));
        c.put(2, run(10));
        c.put(3, run(10));
        c.put(4, run(10));
        assert_eq!((c.len(), c.tokens()), (3, 30), "the entry bound evicts one");
        assert!(c.get(&1).is_none());
        // Touch 2: 3 is now the least recently used.
        assert!(c.get(&2).is_some());
        // 3 out by the entry bound, then 4 by the token bound (30 + 85 - 10 > 100).
        c.put(5, run(85));
        assert_eq!((c.len(), c.tokens()), (2, 95));
        assert!(c.get(&3).is_none() && c.get(&4).is_none());
        assert!(c.get(&2).is_some() && c.get(&5).is_some());
        // Replacing a key counts its tokens once.
        c.put(5, run(5));
        assert_eq!((c.len(), c.tokens()), (2, 15));
        // Longer than the whole bound: not cached, nothing evicted.
        c.put(6, run(101));
        assert!(c.get(&6).is_none());
        assert_eq!((c.len(), c.tokens()), (2, 15));
    }
}
