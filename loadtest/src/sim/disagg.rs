//! A role-split cluster: the first `prefill_replicas` replicas only prefill, the rest only
//! decode, and the gateway splits each request the way the real one does
//! (`router_policy::disagg::select`): the decode replica is the policy's choice among the
//! decoders; when that replica would compute at least `min_prompt_tokens` prompt tokens
//! itself, a prefill replica (the policy among the prefillers) computes the prompt, its KV
//! streams to the decode replica, and the decode replica decodes with it cached.
//!
//! The transfer model ([`DisaggSim::transfer_done_ms`]): the prefill replica streams each
//! full block the step that caches it, over a link of `transfer_bytes_per_s`. The decode
//! replica has the whole prompt when both the last chunk has crossed the link after the
//! prefill ends and the whole prompt has crossed it since the prefill began, plus a fixed
//! `transfer_overhead_ms` (connection, checks, import). Blocks the decode replica already
//! holds are not sent.

use router_policy::DisaggConfig;
use warmpath_core::{ReplicaId, ReplicaRole};

/// The role split of a simulated cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct DisaggSim {
    /// Replicas `0..prefill_replicas` are `prefill`, the rest `decode`; 0 makes every
    /// replica `both` (co-located).
    pub prefill_replicas: u32,
    /// When a request is split (the gateway's `disaggregation:`).
    pub config: DisaggConfig,
    /// KV bytes per token (the model's layers x KV heads x head dim x 2 x dtype size).
    pub kv_bytes_per_token: f64,
    /// Link bandwidth between a prefill and a decode replica, bytes per second.
    pub transfer_bytes_per_s: f64,
    /// Fixed cost of one transfer (request, checks, import), ms.
    pub transfer_overhead_ms: f64,
}

impl DisaggSim {
    /// Role of replica `i`.
    pub fn role(&self, i: usize) -> ReplicaRole {
        match self.prefill_replicas {
            0 => ReplicaRole::Both,
            p if i < p as usize => ReplicaRole::Prefill,
            _ => ReplicaRole::Decode,
        }
    }

    /// Time to send `tokens` tokens' KV over the link, ms.
    pub fn send_ms(&self, tokens: u64) -> f64 {
        tokens as f64 * self.kv_bytes_per_token * 1000.0 / self.transfer_bytes_per_s
    }

    /// When the decode replica holds the prompt: the prefill began at `started_ms` and ended
    /// at `ended_ms` with a last chunk of `last_chunk_tokens`; `tokens` tokens' KV are sent.
    pub fn transfer_done_ms(
        &self,
        started_ms: f64,
        ended_ms: f64,
        last_chunk_tokens: u64,
        tokens: u64,
    ) -> f64 {
        let tail = ended_ms + self.send_ms(last_chunk_tokens.min(tokens));
        let whole = started_ms + self.send_ms(tokens);
        tail.max(whole) + self.transfer_overhead_ms
    }
}

/// One split request's transfer, as the outcome reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Transfer {
    /// Request index.
    pub request: usize,
    /// The prefill replica.
    pub prefill: ReplicaId,
    /// The decode replica.
    pub decode: ReplicaId,
    /// Prompt tokens the prefill replica found cached (its compute saved).
    pub prefill_cached_tokens: u32,
    /// Tokens whose KV the decode replica received and cached.
    pub transferred_tokens: u32,
    /// From the end of the prefill to the decode replica holding the KV, ms (the part of
    /// the transfer the prefill's streaming did not hide).
    pub exposed_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim() -> DisaggSim {
        DisaggSim {
            prefill_replicas: 2,
            config: DisaggConfig::default(),
            kv_bytes_per_token: 1000.0,
            transfer_bytes_per_s: 1e6, // 1 token per ms
            transfer_overhead_ms: 2.0,
        }
    }

    #[test]
    fn roles_follow_replica_ids() {
        let s = sim();
        let roles: Vec<_> = (0..4).map(|i| s.role(i)).collect();
        assert_eq!(
            roles,
            [
                ReplicaRole::Prefill,
                ReplicaRole::Prefill,
                ReplicaRole::Decode,
                ReplicaRole::Decode
            ]
        );
        let colocated = DisaggSim {
            prefill_replicas: 0,
            ..sim()
        };
        assert_eq!(colocated.role(0), ReplicaRole::Both);
    }

    #[test]
    fn streaming_hides_the_transfer_behind_a_slow_prefill() {
        let s = sim();
        // A 1,000 ms prefill of 1,000 tokens, last chunk 100 tokens: the link keeps up, only
        // the last chunk's 100 ms and the overhead are exposed.
        assert_eq!(s.transfer_done_ms(0.0, 1000.0, 100, 1000), 1102.0);
        // A 100 ms prefill of the same prompt: the link is the bottleneck (1,000 ms).
        assert_eq!(s.transfer_done_ms(0.0, 100.0, 100, 1000), 1002.0);
        // Only 50 tokens to send (the decode replica held the rest).
        assert_eq!(s.transfer_done_ms(0.0, 1000.0, 100, 50), 1052.0);
    }
}
