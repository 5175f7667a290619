//! The oracle hit rate: one cache of N x capacity blocks seeing every request in arrival
//! order. No router can place requests better than one shared cache that size, so this is
//! the upper bound to compare policies with.

use super::radix::RadixCache;
use crate::prompt::PromptHasher;
use crate::workload::RequestSpec;

/// Token-weighted hit rate of one LRU radix cache of `capacity_blocks` over `requests`
/// (in arrival order), with the same "compute at least one token" cap as the replicas.
pub fn oracle_hit_rate(
    requests: &[RequestSpec],
    hasher: &mut PromptHasher,
    capacity_blocks: u64,
) -> f64 {
    let bs = hasher.block_size().0;
    let mut order: Vec<&RequestSpec> = requests.iter().collect();
    order.sort_by(|a, b| a.arrival_ms.total_cmp(&b.arrival_ms).then(a.id.cmp(&b.id)));
    let mut cache = RadixCache::new();
    let (mut cached, mut total) = (0u64, 0u64);
    for r in order {
        let hashes = hasher.hashes(&r.prompt);
        let tokens = r.prompt_tokens();
        let max_hit = (tokens.saturating_sub(1) / bs) as usize;
        let hit = cache.match_len(&hashes).min(max_hit);
        cached += (hit as u64) * bs as u64;
        total += tokens as u64;
        cache.insert_acquired(&hashes);
        let over = (cache.len() as u64).saturating_sub(capacity_blocks);
        cache.release(&hashes);
        if over > 0 {
            cache.evict(over as usize);
        }
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
