//! Tests of [`super::parse_load`] on real metric pages of each engine
//! (`gateway/tests/fixtures/engine_metrics/`: llama.cpp captured from the pinned
//! llama-server, SGLang's documented example, vLLM built from the names its source registers)
//! and on the ways a page can be incomplete or not a metrics page at all.

use super::*;
use warmpath_core::BlockSize;

const VLLM: &str = include_str!("../../../tests/fixtures/engine_metrics/vllm.txt");
const VLLM_OLD: &str = include_str!("../../../tests/fixtures/engine_metrics/vllm_old.txt");
const SGLANG: &str = include_str!("../../../tests/fixtures/engine_metrics/sglang.txt");
const LLAMACPP: &str = include_str!("../../../tests/fixtures/engine_metrics/llamacpp.txt");

fn load(dialect: MetricsDialect, text: &str) -> EngineLoad {
    parse_load(dialect, text).expect("a valid page")
}

fn close(actual: Option<f64>, expected: f64) -> bool {
    actual.is_some_and(|a| (a - expected).abs() < 1e-9)
}

fn missing_fields(load: &EngineLoad) -> Vec<&'static str> {
    load.missing.iter().map(|m| m.field).collect()
}

#[test]
fn vllm_data_parallel_engines_are_summed_and_usage_averaged() {
    let l = load(MetricsDialect::Vllm, VLLM);
    assert_eq!((l.running, l.waiting), (5, 1));
    assert!(close(l.kv_usage, 0.30), "{:?}", l.kv_usage);
    // 2 engines x 27514 blocks x 16 tokens.
    assert_eq!(l.kv_capacity_tokens, Some(2 * 27_514 * 16));
    assert!(close(l.prompt_tokens_total, 83_000.0));
    assert!(close(l.cached_prompt_tokens_total, 59_480.0));
    assert!(l.missing.is_empty(), "{:?}", l.missing);
}

#[test]
fn vllm_reads_kv_cache_usage_perc_before_the_deprecated_gauge() {
    let text = VLLM.replace(
        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"Qwen/Qwen2.5-7B-Instruct\"} 0.42",
        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"Qwen/Qwen2.5-7B-Instruct\"} 0.62",
    );
    assert_ne!(text, VLLM);
    assert!(close(load(MetricsDialect::Vllm, &text).kv_usage, 0.40));
}

#[test]
fn vllm_v0_page_uses_gpu_cache_usage_perc_and_has_no_token_hit_counter() {
    let l = load(MetricsDialect::Vllm, VLLM_OLD);
    assert_eq!((l.running, l.waiting), (4, 2));
    assert!(close(l.kv_usage, 0.6328));
    assert_eq!(l.kv_capacity_tokens, Some(7281 * 16));
    assert!(close(l.prompt_tokens_total, 120_512.0));
    assert_eq!(l.cached_prompt_tokens_total, None);
    assert_eq!(missing_fields(&l), ["cached_prompt_tokens_total"]);
    assert!(l.missing[0].reason.contains("vllm:prefix_cache_hits_total"));
}

#[test]
fn sglang_documented_page() {
    let l = load(MetricsDialect::Sglang, SGLANG);
    assert_eq!((l.running, l.waiting), (162, 2826));
    assert!(close(l.kv_usage, 0.28));
    assert!(close(l.prompt_tokens_total, 8_128_902.0));
    // That SGLang exported neither its capacity nor a cached-token counter.
    assert_eq!(l.kv_capacity_tokens, None);
    assert_eq!(l.cached_prompt_tokens_total, None);
    assert_eq!(
        missing_fields(&l),
        ["kv_capacity_tokens", "cached_prompt_tokens_total"]
    );
}

/// Built from the labels SGLang's scheduler sets (model_name, engine_type, tp_rank, pp_rank,
/// moe_ep_rank, dp_rank) with metrics on every scheduler: two data-parallel ranks of two
/// tensor-parallel ranks each. The tensor-parallel ranks repeat their scheduler's numbers.
#[test]
fn sglang_tensor_parallel_ranks_count_once_and_data_parallel_ranks_add_up() {
    let mut text = String::new();
    for (dp, running, queued, usage, pool) in [(0, 7, 2, 0.5, 400_000), (1, 3, 0, 0.25, 400_000)] {
        for tp in 0..2 {
            let labels = format!(
                "dp_rank=\"{dp}\",engine_type=\"unified\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"{tp}\""
            );
            text.push_str(&format!(
                "sglang:num_running_reqs{{{labels}}} {running}.0\n"
            ));
            text.push_str(&format!("sglang:num_queue_reqs{{{labels}}} {queued}.0\n"));
            text.push_str(&format!("sglang:token_usage{{{labels}}} {usage}\n"));
            text.push_str(&format!(
                "sglang:max_total_num_tokens{{{labels}}} {pool}.0\n"
            ));
        }
    }
    let l = load(MetricsDialect::Sglang, &text);
    assert_eq!((l.running, l.waiting), (10, 2));
    assert!(close(l.kv_usage, 0.375));
    assert_eq!(l.kv_capacity_tokens, Some(800_000));
}

#[test]
fn llamacpp_captured_page() {
    let l = load(MetricsDialect::Llamacpp, LLAMACPP);
    assert_eq!((l.running, l.waiting), (0, 0));
    // This llama.cpp exports no KV usage or capacity.
    assert_eq!(l.kv_usage, None);
    assert_eq!(l.kv_capacity_tokens, None);
    assert_eq!(missing_fields(&l), ["kv_usage", "kv_capacity_tokens"]);
    // Two requests with one 37-token prompt: 37 + 1 tokens computed, 36 reused by the second
    // (values of this capture; a new capture changes them).
    assert!(close(l.cached_prompt_tokens_total, 36.0));
    assert!(close(l.prompt_tokens_total, 74.0));
    // 38 tokens computed in 0.659555 s.
    let p = l.prefill.expect("llama.cpp times its prefills");
    assert_eq!((p.tokens, p.seconds), (38.0, 0.659555));
    // Too few tokens to be a measure of the engine's speed.
    assert_eq!(PrefillRate::default().update(l.prefill), 0.0);
    let more = PrefillCounters {
        tokens: 38.0 + 300.0,
        seconds: 0.659555 + 0.7,
    };
    assert!((PrefillRate::default().update(Some(more)) - 338.0 / 1.359555).abs() < 1e-9);
}

#[test]
fn the_prefill_rate_is_the_window_between_scrapes() {
    let c = |tokens, seconds| Some(PrefillCounters { tokens, seconds });
    let near = |got: f64, want: f64| assert!((got - want).abs() < 1e-6, "{got} != {want}");
    let mut r = PrefillRate::default();
    // Lifetime average first: 1000 tokens in 2 s.
    near(r.update(c(1000.0, 2.0)), 500.0);
    // Then the window: 300 more tokens in 0.5 s.
    near(r.update(c(1300.0, 2.5)), 600.0);
    // Idle scrapes (no prefill time) keep the rate, and the window stays open
    // until enough prefill time has passed: 20 tokens in 0.01 s is not a measure.
    near(r.update(c(1300.0, 2.5)), 600.0);
    near(r.update(c(1320.0, 2.51)), 600.0);
    near(r.update(c(1600.0, 3.1)), 500.0);
    // Nor are short prompts, however long the engine took for them (its fixed costs per
    // request): 100 tokens in 1 s keeps the rate, and they count once more arrive.
    near(r.update(c(1700.0, 4.1)), 500.0);
    near(r.update(c(2000.0, 4.5)), 400.0 / 1.4);
    // A restart (counters back to small values) starts over.
    near(r.update(c(10.0, 0.01)), 0.0);
    near(r.update(c(110.0, 0.26)), 0.0);
    near(r.update(c(410.0, 1.01)), 400.0);
    // An engine that stops timing its prefills has no rate.
    near(r.update(None), 0.0);
}

#[test]
fn llamacpp_without_the_cached_counter_has_no_prompt_total() {
    let text = "llamacpp:prompt_tokens_total 42\nllamacpp:requests_processing 1\nllamacpp:requests_deferred 3\nllamacpp:kv_cache_usage_ratio 0.125\n";
    let l = load(MetricsDialect::Llamacpp, text);
    assert_eq!((l.running, l.waiting), (1, 3));
    assert!(close(l.kv_usage, 0.125));
    assert_eq!(l.prompt_tokens_total, None);
    assert_eq!(
        missing_fields(&l),
        [
            "kv_capacity_tokens",
            "cached_prompt_tokens_total",
            "prompt_tokens_total",
            "prefill"
        ]
    );
}

#[test]
fn a_missing_gauge_is_zero_with_its_reason() {
    let l = load(
        MetricsDialect::Vllm,
        "vllm:num_requests_running{model_name=\"m\"} 2.0\n",
    );
    assert_eq!((l.running, l.waiting), (2, 0));
    let waiting = l
        .missing
        .iter()
        .find(|m| m.field == "waiting")
        .expect("noted");
    assert!(waiting.reason.contains("vllm:num_requests_waiting"));
    assert_eq!(l.kv_usage, None);
}

#[test]
fn invalid_values_are_left_out_with_their_reason() {
    let text = "vllm:num_requests_running{engine=\"0\"} NaN\nvllm:num_requests_waiting{engine=\"0\"} -1\nvllm:kv_cache_usage_perc{engine=\"0\"} 42.0\n";
    let l = load(MetricsDialect::Vllm, text);
    assert_eq!((l.running, l.waiting), (0, 0));
    assert_eq!(l.kv_usage, None);
    let reasons: Vec<String> = l.missing.iter().map(ToString::to_string).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("running:") && r.contains("NaN")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("waiting:") && r.contains("-1")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("kv_usage:") && r.contains("0..=1")),
        "{reasons:?}"
    );
}

#[test]
fn a_family_without_samples_is_skipped_not_fatal() {
    let text = "# HELP vllm:lora_requests_info Running stats on lora requests.\n# TYPE vllm:lora_requests_info gauge\n# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1.0\n";
    assert_eq!(load(MetricsDialect::Vllm, text).running, 1);
}

#[test]
fn another_engines_page_is_an_error() {
    let err = parse_load(MetricsDialect::Vllm, LLAMACPP).expect_err("no vllm gauges");
    assert!(
        matches!(
            err,
            MetricsError::NotThisEngine {
                dialect: "vllm",
                ..
            }
        ),
        "{err}"
    );
    let err = parse_load(MetricsDialect::Llamacpp, SGLANG).expect_err("no llamacpp gauges");
    assert!(
        err.to_string().contains("llamacpp:requests_processing"),
        "{err}"
    );
}

#[test]
fn text_that_is_not_prometheus_format_is_an_error() {
    for text in [
        "<html><body>502 Bad Gateway</body></html>",
        "{\"error\": \"not found\"}",
        "vllm:num_requests_running{model_name=\"m\" 1.0\n",
        "vllm:num_requests_running one\n",
    ] {
        let err = parse_load(MetricsDialect::Vllm, text).expect_err(text);
        assert!(matches!(err, MetricsError::Syntax(_)), "{text}: {err:?}");
    }
    assert!(matches!(
        parse_load(MetricsDialect::Sglang, " \n"),
        Err(MetricsError::Empty)
    ));
}

#[test]
fn replica_load_uses_the_engines_capacity_in_gateway_blocks() {
    let r = load(MetricsDialect::Vllm, VLLM).to_replica_load(BlockSize(16), 1000, 0.0);
    assert_eq!((r.running, r.waiting), (5, 1));
    assert_eq!(r.kv_total_blocks, 2 * 27_514);
    assert_eq!(r.kv_used_blocks, (0.30_f64 * 55_028.0).round() as u64);
    // In 64-token blocks the same capacity is a quarter of the blocks.
    let r64 = load(MetricsDialect::Vllm, VLLM).to_replica_load(BlockSize(64), 1000, 0.0);
    assert_eq!(r64.kv_total_blocks, 2 * 27_514 / 4);
}

#[test]
fn replica_load_falls_back_to_the_registered_capacity_then_the_ratio_scale() {
    let sglang = load(MetricsDialect::Sglang, SGLANG);
    let r = sglang.to_replica_load(BlockSize(16), 5000, 0.0);
    assert_eq!((r.kv_used_blocks, r.kv_total_blocks), (1400, 5000));
    let r = sglang.to_replica_load(BlockSize(16), 0, 0.0);
    assert_eq!(r.kv_total_blocks, RATIO_SCALE_BLOCKS);
    assert_eq!(r.kv_used_blocks, 2800);
    assert_eq!(r.queued_prefill_tokens, 0);
}

#[test]
fn replica_load_without_usage_leaves_kv_unknown() {
    let r = load(MetricsDialect::Llamacpp, LLAMACPP).to_replica_load(BlockSize(16), 128, 0.0);
    assert_eq!((r.kv_used_blocks, r.kv_total_blocks), (0, 0));
}

#[test]
fn vllms_lora_info_gives_the_newest_adapters_and_slots() {
    // As vLLM's Prometheus logger leaves it: one series per label set it ever set, the
    // value the time it was set.
    let text = "\
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"old\",waiting_lora_adapters=\"\"} 1.7e9
vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"sql-lora,chat-lora\",waiting_lora_adapters=\"sql-lora,tool-lora\"} 1.8e9
vllm:lora_requests_info{max_lora=\"4\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} 1.75e9
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2.0
vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1.0
";
    let l = load(MetricsDialect::Vllm, text);
    let a = l.adapters.expect("adapters reported");
    assert_eq!(a.active, ["sql-lora", "chat-lora", "tool-lora"]);
    assert_eq!(a.slots, Some(4));
    // LoRA off: no metric, no report; other engines report none.
    assert_eq!(load(MetricsDialect::Vllm, VLLM).adapters, None);
    assert_eq!(load(MetricsDialect::Sglang, SGLANG).adapters, None);
}
