//! Load read from an inference engine's own Prometheus `/metrics` page (vLLM, SGLang,
//! llama.cpp): requests running and waiting, KV cache usage and capacity, and the prompt-token
//! counters, as one [`EngineLoad`] ([`parse_load`]), which becomes the
//! [`ReplicaLoad`](warmpath_protocol::replica_api::ReplicaLoad) the routing policies read
//! ([`EngineLoad::to_replica_load`]).
//!
//! The metrics read, by engine (names as each engine's source registers them):
//!
//! | | vLLM | SGLang | llama.cpp |
//! |---|---|---|---|
//! | running | `vllm:num_requests_running` | `sglang:num_running_reqs` | `llamacpp:requests_processing` |
//! | waiting | `vllm:num_requests_waiting` | `sglang:num_queue_reqs` | `llamacpp:requests_deferred` |
//! | KV usage, 0..=1 | `vllm:kv_cache_usage_perc` (0.9 on), else `vllm:gpu_cache_usage_perc` | `sglang:token_usage` | `llamacpp:kv_cache_usage_ratio` where still exported |
//! | KV capacity | `vllm:cache_config_info` labels `num_gpu_blocks` × `block_size` | `sglang:max_total_num_tokens` | none |
//! | prompt tokens | `vllm:prompt_tokens_total` | `sglang:prompt_tokens_total` | `llamacpp:prompt_tokens_total` + `llamacpp:prompt_tokens_cached_total` |
//! | cached prompt tokens | `vllm:prefix_cache_hits_total` | `sglang:cached_tokens_total` | `llamacpp:prompt_tokens_cached_total` |
//! | prefill seconds | not read (a histogram) | none | `llamacpp:prompt_seconds_total` |
//! | LoRA adapters | `vllm:lora_requests_info` labels (`lora`) | none | none |
//!
//! Both vLLM usage gauges are fractions despite `_perc` ("1 means 100 percent usage").
//! llama.cpp's `prompt_tokens_total` leaves out tokens reused from the cache, so the prompt
//! total is the sum of its two counters. vLLM before 0.9 counted prefix cache hits in blocks
//! (`vllm:gpu_prefix_cache_hits`), which is not read. The llama.cpp built by
//! `scripts/llama-server.sh` (llama-cpp-python 0.3.36) no longer exports
//! `kv_cache_usage_ratio`: its KV usage is unknown.
//!
//! Several series of one metric (data-parallel engines, ranks, models) are combined per
//! engine instance (see `scrape`): counts, capacities and counters are summed, usage ratios
//! averaged (with equal pools, the fraction of all blocks in use). A metric the page lacks
//! leaves its field at 0 or `None` and says why in [`EngineLoad::missing`]; a page without
//! the engine's running and waiting gauges, or not in the text format, is an error.

mod error;
mod load;
mod lora;
mod scrape;
#[cfg(test)]
mod tests;

pub(crate) use error::MetricsError;
#[cfg(test)]
use load::RATIO_SCALE_BLOCKS;
pub(crate) use load::{EngineLoad, Missing, PrefillCounters, PrefillRate};
pub(crate) use lora::AdapterReport;
use scrape::{Found, Scrape};

/// Which engine's metric names to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum MetricsDialect {
    /// vLLM (`vllm:` metrics), V0 and V1 engines.
    Vllm,
    /// SGLang (`sglang:` metrics).
    Sglang,
    /// llama.cpp's `llama-server --metrics` (`llamacpp:` metrics).
    Llamacpp,
}

impl MetricsDialect {
    /// The engine's name, as logs and errors write it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Vllm => "vllm",
            Self::Sglang => "sglang",
            Self::Llamacpp => "llamacpp",
        }
    }
}

/// The load on one `/metrics` page of a `dialect` engine.
pub(crate) fn parse_load(dialect: MetricsDialect, text: &str) -> Result<EngineLoad, MetricsError> {
    let page = Scrape::parse(text)?;
    let mut r = Reader {
        page: &page,
        missing: Vec::new(),
    };
    let load = match dialect {
        MetricsDialect::Vllm => r.vllm()?,
        MetricsDialect::Sglang => r.sglang()?,
        MetricsDialect::Llamacpp => r.llamacpp()?,
    };
    if !load.missing.is_empty() {
        let missing: Vec<String> = load.missing.iter().map(ToString::to_string).collect();
        tracing::debug!(engine = dialect.as_str(), missing = ?missing, "engine metrics incomplete");
    }
    Ok(load)
}

/// Reads one page's metrics into the fields, noting what is missing.
struct Reader<'a> {
    page: &'a Scrape,
    missing: Vec<Missing>,
}

impl Reader<'_> {
    fn vllm(&mut self) -> Result<EngineLoad, MetricsError> {
        let (running, waiting) = self.queues(
            "vllm",
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
        )?;
        let kv_usage = self.ratio(
            "kv_usage",
            &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        );
        let kv_capacity_tokens = self.vllm_capacity();
        let prompt_tokens_total = self.counter("prompt_tokens_total", "vllm:prompt_tokens_total");
        let cached_prompt_tokens_total =
            self.counter("cached_prompt_tokens_total", "vllm:prefix_cache_hits_total");
        Ok(self.finish(EngineLoad {
            running,
            waiting,
            kv_usage,
            kv_capacity_tokens,
            prompt_tokens_total,
            cached_prompt_tokens_total,
            prefill: None,
            adapters: lora::vllm(self.page),
            missing: Vec::new(),
        }))
    }

    fn sglang(&mut self) -> Result<EngineLoad, MetricsError> {
        let (running, waiting) =
            self.queues("sglang", "sglang:num_running_reqs", "sglang:num_queue_reqs")?;
        let kv_usage = self.ratio("kv_usage", &["sglang:token_usage"]);
        let kv_capacity_tokens = self
            .counter("kv_capacity_tokens", "sglang:max_total_num_tokens")
            .map(|t| t.round() as u64);
        let prompt_tokens_total = self.counter("prompt_tokens_total", "sglang:prompt_tokens_total");
        let cached_prompt_tokens_total =
            self.counter("cached_prompt_tokens_total", "sglang:cached_tokens_total");
        Ok(self.finish(EngineLoad {
            running,
            waiting,
            kv_usage,
            kv_capacity_tokens,
            prompt_tokens_total,
            cached_prompt_tokens_total,
            prefill: None,
            adapters: None,
            missing: Vec::new(),
        }))
    }

    fn llamacpp(&mut self) -> Result<EngineLoad, MetricsError> {
        let (running, waiting) = self.queues(
            "llamacpp",
            "llamacpp:requests_processing",
            "llamacpp:requests_deferred",
        )?;
        let kv_usage = self.ratio("kv_usage", &["llamacpp:kv_cache_usage_ratio"]);
        self.note(
            "kv_capacity_tokens",
            "llama.cpp exports no KV capacity (its context size is in GET /props)".into(),
        );
        let computed = self.counter("prompt_tokens_total", "llamacpp:prompt_tokens_total");
        let cached = self.counter(
            "cached_prompt_tokens_total",
            "llamacpp:prompt_tokens_cached_total",
        );
        // llamacpp:prompt_tokens_total counts only the prompt tokens computed, not reused.
        let prompt_tokens_total = match (computed, cached) {
            (Some(c), Some(k)) => Some(c + k),
            (Some(_), None) => {
                self.note(
                    "prompt_tokens_total",
                    "llamacpp:prompt_tokens_total leaves out cached tokens and \
                     llamacpp:prompt_tokens_cached_total is absent"
                        .into(),
                );
                None
            }
            (None, _) => None,
        };
        let seconds = self.counter("prefill", "llamacpp:prompt_seconds_total");
        let prefill = computed
            .zip(seconds)
            .map(|(tokens, seconds)| PrefillCounters { tokens, seconds });
        Ok(self.finish(EngineLoad {
            running,
            waiting,
            kv_usage,
            kv_capacity_tokens: None,
            prompt_tokens_total,
            cached_prompt_tokens_total: cached,
            prefill,
            adapters: None,
            missing: Vec::new(),
        }))
    }

    /// Running and waiting requests; an error when the page has neither gauge.
    fn queues(
        &mut self,
        dialect: &'static str,
        running: &'static str,
        waiting: &'static str,
    ) -> Result<(u32, u32), MetricsError> {
        if !self.page.has(running) && !self.page.has(waiting) {
            return Err(MetricsError::NotThisEngine {
                dialect,
                running,
                waiting,
            });
        }
        Ok((
            self.count("running", running),
            self.count("waiting", waiting),
        ))
    }

    /// A request count: 0 when absent or invalid (noted).
    fn count(&mut self, field: &'static str, name: &str) -> u32 {
        self.counter(field, name)
            .map_or(0, |v| v.round().min(f64::from(u32::MAX)) as u32)
    }

    /// A non-negative sum over engine instances (counts, counters, capacities).
    fn counter(&mut self, field: &'static str, name: &str) -> Option<f64> {
        match self.page.sum(name) {
            Found::Value(v) => Some(v),
            Found::Absent => {
                self.note(field, format!("{name} is not on the page"));
                None
            }
            Found::Invalid(v) => {
                self.note(field, format!("{name} has the invalid value {v}"));
                None
            }
        }
    }

    /// A usage ratio averaged over engine instances: the first of `names` on the page.
    fn ratio(&mut self, field: &'static str, names: &[&str]) -> Option<f64> {
        let Some(name) = names.iter().find(|n| self.page.has(n)) else {
            self.note(
                field,
                format!("none of {} is on the page", names.join(", ")),
            );
            return None;
        };
        match self.page.mean(name) {
            Found::Value(v) if v <= 1.0 => Some(v),
            Found::Value(v) | Found::Invalid(v) => {
                self.note(field, format!("{name} is {v}, not a fraction in 0..=1"));
                None
            }
            Found::Absent => None,
        }
    }

    /// vLLM's KV capacity: `num_gpu_blocks` × `block_size` from each engine's
    /// `vllm:cache_config_info`, summed.
    fn vllm_capacity(&mut self) -> Option<u64> {
        const INFO: &str = "vllm:cache_config_info";
        let page = self.page;
        let mut total: Option<u64> = None;
        for labels in page.labels_of(INFO) {
            let get = |key: &str| {
                labels
                    .iter()
                    .find(|(k, _)| k == key)
                    .and_then(|(_, v)| v.parse::<u64>().ok())
            };
            match (get("num_gpu_blocks"), get("block_size")) {
                (Some(blocks), Some(size)) => {
                    total = Some(
                        total
                            .unwrap_or(0)
                            .saturating_add(blocks.saturating_mul(size)),
                    );
                }
                _ => {
                    self.note(
                        "kv_capacity_tokens",
                        format!("{INFO} lacks a numeric num_gpu_blocks or block_size"),
                    );
                    return None;
                }
            }
        }
        if total.is_none() {
            self.note("kv_capacity_tokens", format!("{INFO} is not on the page"));
        }
        total
    }

    fn note(&mut self, field: &'static str, reason: String) {
        self.missing.push(Missing { field, reason });
    }

    fn finish(&mut self, mut load: EngineLoad) -> EngineLoad {
        load.missing = std::mem::take(&mut self.missing);
        load
    }
}
