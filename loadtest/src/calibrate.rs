//! `loadtest calibrate`: measures a real replica's prefill rate and decode step time vs batch
//! size, and writes a [`CostProfile`] the simulator reads.
//!
//! * Prefill: TTFT of a long fresh prompt minus TTFT of a short one, over the token
//!   difference (median of three pairs), with `max_tokens = 1`.
//! * Decode: for each batch size b, b concurrent fresh short prompts generating
//!   `decode_tokens` tokens; the step time is the median inter-token latency.
//! * Block size and KV capacity come from `GET /v1/replica/info` when the replica serves it.

use crate::cli::CalibrateArgs;
use crate::metrics::percentile;
use crate::prompt::{Prompt, Segment};
use crate::run::client::{call, pool, resolve_model, CallResult, CallSpec};
use crate::sim::CostProfile;
use anyhow::{bail, Context};
use std::time::Duration;
use warmpath_http::http::Method;
use warmpath_protocol::replica_api::{ReplicaInfo, PATH_INFO};

/// Runs the calibration on a fresh tokio runtime and writes the profile.
pub fn run_blocking(args: &CalibrateArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let profile = rt.block_on(measure(args))?;
    profile.validate().map_err(anyhow::Error::msg)?;
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&profile)? + "\n")
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("{}", serde_json::to_string_pretty(&profile)?);
    eprintln!("profile written to {}", args.out.display());
    Ok(())
}

/// Fresh (never cached) prompt text of about `tokens` tokens.
fn fresh_prompt(tag: u64, tokens: u32) -> String {
    Prompt {
        segments: vec![Segment::new(&[0xCA11B, tag, rand_nonce()], tokens, false)],
    }
    .text()
}

/// A per-process nonce so repeated calibrations never hit a warm cache.
fn rand_nonce() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

async fn one(
    client: &warmpath_http::Pool,
    args: &CalibrateArgs,
    model: &str,
    prompt: &str,
    max_tokens: u32,
) -> anyhow::Result<CallResult> {
    let spec = CallSpec {
        endpoint: &args.endpoint,
        api: args.api,
        model,
        prompt,
        system: None,
        chat: None,
        max_tokens,
        ignore_eos: true,
        api_key: args.api_key.as_deref(),
        timeout: Duration::from_secs(600),
    };
    let r = call(client, &spec).await;
    if let Some((kind, detail)) = &r.error {
        bail!("calibration request failed ({}): {detail}", kind.as_str());
    }
    Ok(r)
}

/// Measures the endpoint.
pub async fn measure(args: &CalibrateArgs) -> anyhow::Result<CostProfile> {
    let client = pool(&args.endpoint).context("--endpoint")?;
    let (block_size, capacity) = replica_info(&client, args)
        .await
        .unwrap_or((args.block_size, args.kv_capacity_blocks));
    let model = resolve_model(
        &client,
        &args.endpoint,
        &args.model,
        args.api_key.as_deref(),
    )
    .await;
    let model = model.as_str();
    one(&client, args, model, &fresh_prompt(0, 32), 2)
        .await
        .context("warm-up")?;

    let short = 16u32;
    let mut rates = Vec::new();
    for i in 0..3u64 {
        let a = one(&client, args, model, &fresh_prompt(10 + i, short), 1).await?;
        let b = one(
            &client,
            args,
            model,
            &fresh_prompt(20 + i, args.prefill_tokens),
            1,
        )
        .await?;
        let (ta, tb) = (a.ttft_ms.unwrap_or(0.0), b.ttft_ms.unwrap_or(0.0));
        let tokens = b
            .prompt_tokens
            .unwrap_or(args.prefill_tokens)
            .saturating_sub(a.prompt_tokens.unwrap_or(short));
        if tb > ta && tokens > 0 {
            rates.push(tokens as f64 * 1000.0 / (tb - ta));
        }
        tracing::info!(
            short_ttft_ms = ta,
            long_ttft_ms = tb,
            tokens,
            "prefill probe"
        );
    }
    if rates.is_empty() {
        bail!("prefill probes gave no usable timing (long prompt not slower than short)");
    }
    rates.sort_by(f64::total_cmp);
    let prefill_tokens_per_s = percentile(&rates, 50.0);

    let mut decode = Vec::new();
    for (bi, &b) in args.batches.iter().enumerate() {
        let futs = (0..b).map(|j| {
            let p = fresh_prompt(1000 + bi as u64 * 100 + j as u64, 32);
            let client = &client;
            async move { one(client, args, model, &p, args.decode_tokens).await }
        });
        let results = futures_join_all(futs).await?;
        let mut itls: Vec<f64> = results
            .iter()
            .flat_map(|r| r.itls_ms.iter().map(|&x| x as f64))
            .collect();
        if itls.is_empty() {
            bail!("decode probe at batch {b} streamed no inter-token gaps");
        }
        itls.sort_by(f64::total_cmp);
        let step = percentile(&itls, 50.0);
        tracing::info!(batch = b, step_ms = step, "decode probe");
        decode.push((b, step));
    }
    decode.sort_by_key(|p| p.0);
    decode.dedup_by_key(|p| p.0);
    Ok(CostProfile {
        name: args.name.clone(),
        source: format!(
            "loadtest calibrate --endpoint {} (prefill probe {} tokens, decode probes {:?} x {} tokens)",
            args.endpoint, args.prefill_tokens, args.batches, args.decode_tokens
        ),
        block_size,
        kv_capacity_blocks: capacity,
        prefill_tokens_per_s,
        prefill_step_overhead_ms: 0.0,
        decode_step_ms: decode,
        max_batch: args.max_batch,
        max_prefill_tokens_per_step: args.prefill_tokens.max(512),
        kv_bytes_per_token: None,
    })
}

/// Runs futures concurrently on the current task and collects their results in order.
async fn futures_join_all<F, T>(futs: impl Iterator<Item = F>) -> anyhow::Result<Vec<T>>
where
    F: std::future::Future<Output = anyhow::Result<T>>,
{
    let futs: Vec<_> = futs.map(Box::pin).collect();
    let mut slots: Vec<Option<anyhow::Result<T>>> = (0..futs.len()).map(|_| None).collect();
    let mut pending: Vec<(usize, _)> = futs.into_iter().enumerate().collect();
    std::future::poll_fn(|cx| {
        pending.retain_mut(|(i, f)| match f.as_mut().poll(cx) {
            std::task::Poll::Ready(v) => {
                slots[*i] = Some(v);
                false
            }
            std::task::Poll::Pending => true,
        });
        if pending.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    slots
        .into_iter()
        .map(|s| s.unwrap_or_else(|| Err(anyhow::anyhow!("future lost"))))
        .collect()
}

/// `(block_size, capacity_blocks)` from the replica's info endpoint, if it has one (and
/// answers within 10 s).
async fn replica_info(client: &warmpath_http::Pool, args: &CalibrateArgs) -> Option<(u32, u64)> {
    let path = warmpath_http::Endpoint::parse(&args.endpoint)
        .ok()?
        .path(PATH_INFO);
    let info: ReplicaInfo = client
        .fetch(Method::GET, &path, None, &[], Duration::from_secs(10))
        .await
        .ok()?
        .success()
        .ok()?
        .json()
        .ok()?;
    Some((info.block_size.0, info.capacity_blocks))
}
