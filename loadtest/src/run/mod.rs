//! `loadtest run`: sends a workload to an OpenAI-compatible endpoint, open loop (Poisson,
//! trace timestamps, burst) or closed loop (fixed concurrency), with a progress bar, and
//! reports the same summary as the simulator.

pub mod client;
pub mod sse;

use crate::cli::{Api, RunArgs};
use crate::metrics::{RequestRecord, Summary};
use crate::report::{class_table, table, RunReport};
use crate::simulate_cmd::{label_shape, write_outputs};
use crate::workload::{self, LoadShape, RequestSpec, Workload};
use anyhow::{bail, Context};
use client::{call, resolve_model, CallSpec};
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Settings every request task needs.
#[derive(Debug)]
struct Shared {
    endpoint: String,
    api: Api,
    model: String,
    api_key: Option<String>,
    ignore_eos: bool,
    timeout: Duration,
    /// Agent-loop chats (tools and tool calls) rather than prompt text.
    agent: bool,
    client: warmpath_http::Pool,
    start: Instant,
    bar: ProgressBar,
}

/// Runs the command on a fresh tokio runtime.
pub fn run_blocking(args: &RunArgs) -> anyhow::Result<Vec<RunReport>> {
    if args.policy.len() > 1 {
        bail!("run measures one endpoint: give at most one --policy label per invocation");
    }
    if args.workload.workload == workload::WorkloadKind::AgentLoop && args.api() != Api::Chat {
        bail!("the agent-loop workload is sent as chats with tools: leave out --api completions");
    }
    let workload = workload::build(&args.workload, args.seed).context("building the workload")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let records = rt.block_on(drive(args, &workload))?;
    let mut summary = Summary::compute(&records, &args.output.slo());
    summary.policy = args
        .policy
        .first()
        .cloned()
        .unwrap_or_else(|| "endpoint".into());
    summary.backend = match args.api() {
        Api::Completions => "openai-completions".into(),
        Api::Chat => "openai-chat".into(),
    };
    summary.workload = format!("{:?}", args.workload.workload).to_lowercase();
    label_shape(&mut summary, &workload.shape);
    println!("{}", table::render(&[&summary]));
    let classes = class_table::render(&[&summary]);
    if !classes.is_empty() {
        println!("{classes}");
    }
    let reports = vec![RunReport { summary, records }];
    write_outputs(&args.output, &reports)?;
    Ok(reports)
}

/// Sends every request and collects the records (in request order).
pub async fn drive(args: &RunArgs, workload: &Workload) -> anyhow::Result<Vec<RequestRecord>> {
    let n = workload.requests.len();
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(n as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let client = client::pool(&args.endpoint).context("--endpoint")?;
    let model = resolve_model(
        &client,
        &args.endpoint,
        &args.model,
        args.api_key.as_deref(),
    )
    .await;
    let shared = Arc::new(Shared {
        endpoint: args.endpoint.clone(),
        api: args.api(),
        model,
        api_key: args.api_key.clone(),
        ignore_eos: !args.no_ignore_eos,
        timeout: Duration::from_secs_f64(args.request_timeout.max(0.001)),
        agent: args.workload.workload == workload::WorkloadKind::AgentLoop,
        client,
        start: Instant::now(),
        bar,
    });
    let deadline = workload
        .duration_ms
        .map(|d| shared.start + Duration::from_secs_f64(d / 1000.0));
    let reqs: Arc<Vec<RequestSpec>> = Arc::new(workload.requests.clone());
    let mut set: JoinSet<Vec<RequestRecord>> = JoinSet::new();
    match workload.shape {
        LoadShape::Closed { concurrency } => {
            let next = Arc::new(AtomicUsize::new(0));
            for _ in 0..concurrency.min(n) {
                let (sh, rq, nx) = (shared.clone(), reqs.clone(), next.clone());
                set.spawn(async move {
                    let mut out = Vec::new();
                    loop {
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            break;
                        }
                        let i = nx.fetch_add(1, Ordering::Relaxed);
                        let Some(spec) = rq.get(i) else { break };
                        out.push(one(&sh, spec).await);
                    }
                    out
                });
            }
        }
        _ => {
            for i in 0..n {
                let at = shared.start + Duration::from_secs_f64(reqs[i].arrival_ms / 1000.0);
                if deadline.is_some_and(|d| at > d) {
                    break;
                }
                tokio::time::sleep_until(at.into()).await;
                let (sh, rq) = (shared.clone(), reqs.clone());
                set.spawn(async move { vec![one(&sh, &rq[i]).await] });
            }
        }
    }
    let mut records = Vec::with_capacity(n);
    while let Some(r) = set.join_next().await {
        records.extend(r.context("request task panicked")?);
    }
    shared.bar.finish_and_clear();
    records.sort_by_key(|r| r.id);
    Ok(records)
}

/// Sends one request and turns the result into a record.
async fn one(sh: &Shared, spec: &RequestSpec) -> RequestRecord {
    let (system, prompt) = message_texts(spec, sh.api);
    let chat = sh.agent.then(|| workload::agent_loop::chat(spec));
    let call_spec = CallSpec {
        endpoint: &sh.endpoint,
        api: sh.api,
        model: &sh.model,
        prompt: &prompt,
        system: system.as_deref(),
        chat: chat.as_ref(),
        max_tokens: spec.output_tokens,
        ignore_eos: sh.ignore_eos,
        api_key: sh.api_key.as_deref(),
        timeout: sh.timeout,
    };
    let start_ms = sh.start.elapsed().as_secs_f64() * 1000.0;
    let res = call(&sh.client, &call_spec).await;
    sh.bar.inc(1);
    if let Some((kind, detail)) = &res.error {
        sh.bar.set_message(format!("last error: {}", kind.as_str()));
        tracing::debug!(id = spec.id, %detail, "request failed");
    }
    RequestRecord {
        id: spec.id,
        group: spec.group,
        replica: res.replica,
        start_ms,
        ttft_ms: res.ttft_ms,
        e2el_ms: res.e2el_ms,
        itls_ms: res.itls_ms,
        prompt_tokens: res.prompt_tokens.unwrap_or(spec.prompt_tokens()),
        output_tokens: res.completion_tokens.unwrap_or(res.chunks),
        cached_tokens: res.cached_tokens.unwrap_or(0),
        predicted_cached_tokens: res.predicted_cached_tokens,
        route_branch: None,
        class: spec.class,
        error: res.error.as_ref().map(|e| e.0),
        error_detail: res.error.map(|e| e.1),
        ..RequestRecord::default()
    }
}

/// The texts to send: with the chat API and a spec whose leading segments are a system
/// prompt, (system message, user message); otherwise the whole prompt as one text.
pub fn message_texts(spec: &RequestSpec, api: Api) -> (Option<String>, String) {
    let n = spec.system_segments.min(spec.prompt.segments.len());
    if api != Api::Chat || n == 0 {
        return (None, spec.prompt.text());
    }
    let part = |segs: &[crate::prompt::Segment]| {
        crate::prompt::Prompt {
            segments: segs.to_vec(),
        }
        .text()
    };
    let (sys, user) = spec.prompt.segments.split_at(n);
    (Some(part(sys)), part(user))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::test_args::args;

    #[test]
    fn mixed_chats_send_the_system_prompt_as_a_system_message() {
        let w = workload::build(&args(&["--workload", "mixed", "--num-requests", "8"]), 2).unwrap();
        let long = &w.requests[7];
        assert_eq!(long.class, Some("long"));
        let (sys, user) = message_texts(long, Api::Chat);
        let sys = sys.unwrap();
        assert_eq!(sys.split_whitespace().count(), 16);
        assert_eq!(user.split_whitespace().count(), 2048);
        assert_eq!(format!("{sys}{user}"), long.prompt.text());
        let (sys0, _) = message_texts(&w.requests[0], Api::Chat);
        assert_eq!(sys0.as_deref(), Some(sys.as_str()));
        let (none, whole) = message_texts(long, Api::Completions);
        assert_eq!((none, whole), (None, long.prompt.text()));
    }
}
