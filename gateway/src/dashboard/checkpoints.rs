//! The dashboard's checkpoint rows: traffic and cache hit rate per (model, checkpoint), and
//! the rollouts in force, so an operator watches a rollout move conversations and its new
//! checkpoint's cache warm up.

use super::series::{ratio, series};
use crate::metrics::Metrics;
use crate::replicas::Registry;
use crate::rollout::RolloutStatus;
use serde::Serialize;
use std::collections::BTreeMap;

/// One (model, checkpoint) row.
#[derive(Debug, Default, Serialize)]
pub(crate) struct CheckpointRow {
    /// Model name.
    pub model: String,
    /// Checkpoint id.
    pub checkpoint: String,
    /// `from` or `to` when a rollout of the model names it.
    pub rollout_role: Option<&'static str>,
    /// Registered replicas serving it.
    pub replicas: usize,
    /// Requests answered.
    pub requests: u64,
    /// Prompt tokens of requests with reported usage.
    pub prompt_tokens: u64,
    /// Of those, reported cached.
    pub cached_tokens: u64,
    /// `cached_tokens / prompt_tokens`, when any.
    pub hit_rate: Option<f64>,
}

/// The rows, by model then checkpoint: every checkpoint that served a request or has a
/// replica.
pub(crate) fn rows(
    metrics: &Metrics,
    registry: &Registry,
    rollouts: &[RolloutStatus],
) -> Vec<CheckpointRow> {
    let r = &metrics.rollout;
    let mut rows: BTreeMap<(String, String), CheckpointRow> = BTreeMap::new();
    let key = |labels: &BTreeMap<String, String>| {
        let get = |k: &str| labels.get(k).cloned().unwrap_or_default();
        (get("model"), get("checkpoint"))
    };
    for (labels, v) in series(&r.checkpoint_requests) {
        rows.entry(key(&labels)).or_default().requests += v;
    }
    for (labels, v) in series(&r.checkpoint_prompt_tokens) {
        rows.entry(key(&labels)).or_default().prompt_tokens += v;
    }
    for (labels, v) in series(&r.checkpoint_cached_tokens) {
        rows.entry(key(&labels)).or_default().cached_tokens += v;
    }
    for rep in registry.all() {
        let k = (
            metrics.model_label(&rep.info.model).to_string(),
            rep.info.checkpoint.to_string(),
        );
        rows.entry(k).or_default().replicas += 1;
    }
    rows.into_iter()
        .map(|((model, checkpoint), mut row)| {
            row.rollout_role = rollouts
                .iter()
                .filter(|ro| ro.model == model)
                .find_map(|ro| {
                    if ro.from.as_str() == checkpoint {
                        Some("from")
                    } else if ro.to.as_str() == checkpoint {
                        Some("to")
                    } else {
                        None
                    }
                });
            row.hit_rate = ratio(row.cached_tokens, row.prompt_tokens);
            row.model = model;
            row.checkpoint = checkpoint;
            row
        })
        .collect()
}
