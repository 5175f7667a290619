//! The LoRA adapters an engine reports serving ([`AdapterReport`]): vLLM's
//! `vllm:lora_requests_info` gauge, whose facts are in its labels: `running_lora_adapters`
//! and `waiting_lora_adapters` (comma-separated adapter names) and `max_lora` (the adapter
//! slots, `--max-loras`). vLLM sets the gauge to the current time under each new label set
//! and leaves the old label sets on the page, so the series with the largest value (the
//! newest) is the one read.

use super::scrape::Scrape;

/// What an engine reports of its adapters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AdapterReport {
    /// Adapters of running or waiting requests.
    pub active: Vec<String>,
    /// Adapters the engine holds loaded at most (`max_lora`), if it says.
    pub slots: Option<usize>,
}

/// vLLM's adapter metric.
const VLLM_LORA_INFO: &str = "vllm:lora_requests_info";

/// The adapters on a vLLM page, `None` when it has no `vllm:lora_requests_info` (LoRA off).
pub(super) fn vllm(page: &Scrape) -> Option<AdapterReport> {
    let (labels, _) = page
        .labelled(VLLM_LORA_INFO)
        .filter(|(_, v)| v.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let get = |key: &str| {
        labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let mut active: Vec<String> = Vec::new();
    for key in ["running_lora_adapters", "waiting_lora_adapters"] {
        for name in get(key).unwrap_or("").split(',').map(str::trim) {
            if !name.is_empty() && !active.iter().any(|a| a == name) {
                active.push(name.to_string());
            }
        }
    }
    Some(AdapterReport {
        active,
        slots: get("max_lora").and_then(|v| v.parse().ok()),
    })
}
