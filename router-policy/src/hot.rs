//! Hot prefixes: the prompts a gateway sees most often, remembered by conversation key, so
//! a rollout can replay them to a new checkpoint's replicas before they take traffic.
//!
//! Each entry keeps the **longest common prefix** of the prompts that shared its key (the
//! first request's tokens, cut back on every later hit to what they have in common), so an
//! entry converges on what is actually shared: a system prompt, or a conversation's earlier
//! turns. Replaying it prefills exactly the part later requests reuse.
//!
//! Bounded: past `2 x capacity` keys, only the `capacity` most counted survive (amortised
//! O(1) per request, a few KB per entry).

use std::collections::HashMap;
use warmpath_core::ids::TokenId;

/// One hot prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct HotPrefix<T> {
    /// Its conversation key.
    pub key: u64,
    /// Requests that shared its key.
    pub count: u64,
    /// The tokens they have in common (at most the table's `max_tokens`).
    pub tokens: Vec<TokenId>,
    /// The caller's tag (the gateway keeps the tenant's cache salt here).
    pub tag: T,
}

/// The most requested prefixes, by conversation key.
#[derive(Clone, Debug)]
pub struct HotPrefixes<T> {
    capacity: usize,
    max_tokens: usize,
    entries: HashMap<u64, HotPrefix<T>>,
}

impl<T: Clone> HotPrefixes<T> {
    /// A table keeping about `capacity` keys, each at most `max_tokens` long.
    pub fn new(capacity: usize, max_tokens: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            max_tokens: max_tokens.max(1),
            entries: HashMap::new(),
        }
    }

    /// Counts one request with conversation `key` and prompt `tokens`.
    pub fn record(&mut self, key: u64, tokens: &[TokenId], tag: &T) {
        match self.entries.get_mut(&key) {
            Some(e) => {
                e.count += 1;
                let common = common_prefix(&e.tokens, tokens);
                e.tokens.truncate(common);
            }
            None => {
                let n = tokens.len().min(self.max_tokens);
                self.entries.insert(
                    key,
                    HotPrefix {
                        key,
                        count: 1,
                        tokens: tokens[..n].to_vec(),
                        tag: tag.clone(),
                    },
                );
                if self.entries.len() > 2 * self.capacity {
                    self.shrink();
                }
            }
        }
    }

    /// Keeps the `capacity` most counted keys (ties: the lower key).
    fn shrink(&mut self) {
        let mut ranked: Vec<(u64, u64)> = self.entries.iter().map(|(k, e)| (e.count, *k)).collect();
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, key) in &ranked[self.capacity..] {
            self.entries.remove(key);
        }
    }

    /// The `n` most counted prefixes of at least `min_tokens` tokens, most counted first
    /// (ties: longer first, then key order, so the result is deterministic).
    pub fn top(&self, n: usize, min_tokens: usize) -> Vec<&HotPrefix<T>> {
        let mut v: Vec<(&u64, &HotPrefix<T>)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.tokens.len() >= min_tokens.max(1))
            .collect();
        v.sort_by(|a, b| {
            b.1.count
                .cmp(&a.1.count)
                .then(b.1.tokens.len().cmp(&a.1.tokens.len()))
                .then(a.0.cmp(b.0))
        });
        v.into_iter().take(n).map(|(_, e)| e).collect()
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets everything (the checkpoint it was recorded for left).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// How many leading tokens `a` and `b` share. Every request behind a long shared prompt
/// compares its whole kept prefix, so whole chunks are compared without an early exit (a
/// loop LLVM vectorises), and only the chunk that differs token by token.
fn common_prefix(a: &[TokenId], b: &[TokenId]) -> usize {
    const CHUNK: usize = 32;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + CHUNK <= n {
        let diff = a[i..i + CHUNK]
            .iter()
            .zip(&b[i..i + CHUNK])
            .fold(0u32, |acc, (x, y)| acc | (x.0 ^ y.0));
        if diff != 0 {
            break;
        }
        i += CHUNK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(r: std::ops::Range<u32>) -> Vec<TokenId> {
        r.map(TokenId).collect()
    }

    proptest::proptest! {
        /// The chunked comparison agrees with a token-by-token one, wherever the first
        /// difference falls (inside a chunk, on its edge, past the shorter slice).
        #[test]
        fn common_prefix_is_the_first_difference(
            a in proptest::collection::vec(0u32..4, 0..200),
            b in proptest::collection::vec(0u32..4, 0..200),
            shared in 0usize..150,
        ) {
            let mut x: Vec<TokenId> = a.iter().copied().map(TokenId).collect();
            let mut y: Vec<TokenId> = b.iter().copied().map(TokenId).collect();
            let head = toks(0..shared as u32);
            x.splice(0..0, head.iter().copied());
            y.splice(0..0, head.iter().copied());
            let naive = x.iter().zip(&y).take_while(|(p, q)| p == q).count();
            proptest::prop_assert_eq!(common_prefix(&x, &y), naive);
        }
    }

    #[test]
    fn an_entry_converges_on_the_shared_prefix() {
        let mut h: HotPrefixes<()> = HotPrefixes::new(8, 1000);
        let mut a = toks(0..100);
        a.extend(toks(500..520));
        let mut b = toks(0..100);
        b.extend(toks(900..950));
        h.record(7, &a, &());
        h.record(7, &b, &());
        h.record(9, &toks(0..30), &());
        let top = h.top(10, 1);
        assert_eq!(top[0].count, 2);
        assert_eq!(top[0].tokens, toks(0..100), "cut back to what both share");
        assert_eq!(top[1].count, 1);
        assert_eq!(h.top(10, 50).len(), 1, "short prefixes filtered");
    }

    #[test]
    fn bounded_and_keeps_the_most_counted() {
        let mut h: HotPrefixes<u8> = HotPrefixes::new(4, 16);
        for _ in 0..10 {
            h.record(1, &toks(0..40), &1);
            h.record(2, &toks(0..40), &2);
        }
        for k in 100..200 {
            h.record(k, &toks(0..5), &0);
        }
        assert!(h.len() <= 8, "{}", h.len());
        let top = h.top(2, 1);
        assert_eq!(top.len(), 2);
        assert!(top.iter().all(|e| e.count == 10 && e.tokens.len() == 16));
        let tags: Vec<u8> = top.iter().map(|e| e.tag).collect();
        assert!(tags.contains(&1) && tags.contains(&2));
        h.clear();
        assert!(h.is_empty());
    }
}
