//! The oracle hit rate: one cache of N x capacity blocks seeing every request in arrival
//! order, the reference to compare policies with. The cache is the replicas' own
//! ([`warmpath_kv_cache::RadixCache`]), so it evicts as they do: single-use blocks before
//! blocks that served two sequences, then least recently used. Under that rule a bigger
//! cache is not always a better one (its shared class can fill with old prefixes while
//! new blocks are evicted before their second use), so on a trace of documents reused a
//! few times each (Mooncake) N separate replicas can beat it; where prefixes are shared
//! widely it is still the ceiling (BENCHMARKS.md, section 23).

use crate::prompt::PromptHasher;
use crate::workload::RequestSpec;
use warmpath_kv_cache::{Inserted, RadixCache};

/// Token-weighted hit rate of one radix cache of `capacity_blocks` pages over `requests`
/// (in arrival order), with the same "compute at least one token" cap as the replicas.
/// Each prompt is stored as a replica stores it: its cached prefix locked, pages taken for
/// the rest (evicting unlocked blocks; the blocks no page is left for are not cached),
/// inserted, then unlocked.
pub fn oracle_hit_rate(
    requests: &[RequestSpec],
    hasher: &mut PromptHasher,
    capacity_blocks: u64,
) -> f64 {
    let bs = hasher.block_size().0;
    let mut order: Vec<&RequestSpec> = requests.iter().collect();
    order.sort_by(|a, b| a.arrival_ms.total_cmp(&b.arrival_ms).then(a.id.cmp(&b.id)));
    let mut cache = RadixCache::new(usize::try_from(capacity_blocks).unwrap_or(usize::MAX));
    let (mut cached, mut total) = (0u64, 0u64);
    for r in order {
        let hashes = hasher.hashes(&r.prompt);
        let tokens = r.prompt_tokens();
        let max_hit = (tokens.saturating_sub(1) / bs) as usize;
        let hit = cache.peek_prefix_len(&hashes).min(max_hit);
        cached += (hit as u64) * bs as u64;
        total += tokens as u64;
        let mut nodes = cache.match_prefix(&hashes);
        cache.lock(&nodes);
        let want = (hashes.len() - nodes.len()).min(cache.available_pages());
        for page in cache.alloc(want).unwrap_or_default() {
            let ins = cache.insert(nodes.last().copied(), hashes[nodes.len()], page);
            if let Inserted::Existing(_) = ins {
                cache.free_pages(&[page]);
            }
            nodes.push(ins.node());
        }
        cache.unlock(&nodes);
        // Nobody listens to the oracle's events.
        cache.take_events();
    }
    if total == 0 {
        0.0
    } else {
        cached as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::{Prompt, Segment};
    use warmpath_core::{BlockSize, CheckpointId, HashNamespace};

    fn req(id: u64, parts: &[(u64, u32)]) -> RequestSpec {
        RequestSpec {
            id,
            group: 0,
            arrival_ms: id as f64,
            prompt: Prompt {
                segments: parts
                    .iter()
                    .map(|&(k, t)| Segment::new(&[k], t, true))
                    .collect(),
            },
            output_tokens: 1,
            class: None,
            system_segments: 0,
        }
    }

    #[test]
    fn shared_prefix_hits_and_capacity_limits() {
        let seed = HashNamespace::new(CheckpointId::new("o")).root_seed();
        let mut h = PromptHasher::new(seed, BlockSize(16));
        // Two requests share a 64-token prefix: the second hits 64 of its 80 tokens.
        let rs = vec![req(0, &[(1, 64), (2, 16)]), req(1, &[(1, 64), (3, 16)])];
        let rate = oracle_hit_rate(&rs, &mut h, 1000);
        assert!((rate - 64.0 / 160.0).abs() < 1e-12, "{rate}");
        // With room for 2 blocks only, only the first two prefix blocks survive.
        let small = oracle_hit_rate(&rs, &mut h, 2);
        assert!((small - 32.0 / 160.0).abs() < 1e-12, "{small}");
    }
}
