//! Command-line shapes (see shared/CLI.md): `loadtest run|simulate --workload ...` and
//! `loadtest calibrate --endpoint URL [--out FILE]`.

use crate::metrics::Slo;
use crate::simulate_cmd::disagg::DisaggArgs;
use crate::simulate_cmd::regions::RegionArgs;
use crate::simulate_cmd::rollout::RolloutArgs;
use crate::simulate_cmd::tier::TierArgs;
use crate::workload::{WorkloadArgs, WorkloadKind};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Warmpath load generator and cluster simulator.
#[derive(Debug, Parser)]
#[command(name = "loadtest", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// More logging (-v: debug, -vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process: the size does not matter
pub enum Command {
    /// Drive a real OpenAI-compatible endpoint.
    Run(RunArgs),
    /// Simulate a cluster routed by router-policy.
    #[command(after_help = SIMULATE_PROFILES_HELP)]
    Simulate(SimulateArgs),
    /// Measure a replica and write a simulator cost profile.
    Calibrate(CalibrateArgs),
}

/// `loadtest simulate --help`: which shipped profile fits which workload.
pub const SIMULATE_PROFILES_HELP: &str = "\
Profiles (--profile; configs/profiles/) and the workloads they fit:
  smollm2-cpu.json (default)  SmolLM2-135M on one CPU thread, calibrated: 555 prompt tokens/s,
      364 KV blocks of 16 tokens (5.8k tokens), batch 32. Fits the synthetic workloads at a
      fraction of a request/s per replica (shared-prefix with its default 2k-token prompts about
      0.12/s per replica, multi-turn about 0.13/s). NOT the traces at full scale: Mooncake needs
      ~140 such replicas, Azure conv ~20, Azure code ~13; scale them down with --token-scale
      and --time-scale (mooncake --token-scale 16 --time-scale 8 fits 2 replicas).
  gpu-h100-class.json  Qwen3-32B on 2xH100, derived from published figures: 15,000 prompt
      tokens/s, 19,208 blocks (307k tokens), batch 256. Fits the traces at full scale: Mooncake
      (60k prompt tokens/s) from 6 replicas, Azure conv (6.4k/s) and code (5.3k/s) from 1;
      shared-prefix --request-rate 40 from 4.
Before each run the offered load is compared with the cluster's prefill and decode capacity
(printed as `load check:`); an overloaded configuration gets a WARNING naming the factor and
the --replicas, --profile or arrival scaling that would fit. Progress goes to stderr: a bar on
a terminal, else a line every 5 s (none with --quiet).";

/// Which OpenAI endpoint to call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Api {
    /// `POST /v1/completions` with a text prompt.
    Completions,
    /// `POST /v1/chat/completions` with one user message (mixed: a system and a user message).
    Chat,
}

/// Outputs shared by `run` and `simulate`.
#[derive(Clone, Debug, Args)]
pub struct OutputArgs {
    /// Write the summary as a JSON array (one object per run/policy).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write one JSON line per request.
    #[arg(long)]
    pub requests_jsonl: Option<PathBuf>,
    /// Write SVG plots (TTFT CDF, throughput and hit rate over time; a rollout's TTFT p99 per
    /// window) into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Goodput SLOs, vLLM style: `ttft:MS`, `tpot:MS`, `e2el:MS` (repeatable).
    #[arg(long, value_parser = parse_slo_item, num_args = 1..)]
    pub goodput: Vec<(String, f64)>,
}

impl OutputArgs {
    /// The SLOs given with `--goodput`.
    pub fn slo(&self) -> Slo {
        let mut s = Slo::default();
        for (k, v) in &self.goodput {
            match k.as_str() {
                "ttft" => s.ttft_ms = Some(*v),
                "tpot" => s.tpot_ms = Some(*v),
                _ => s.e2el_ms = Some(*v),
            }
        }
        s
    }
}

fn parse_slo_item(s: &str) -> Result<(String, f64), String> {
    let (k, v) = s
        .split_once(':')
        .ok_or_else(|| format!("expected KEY:MS, got {s:?}"))?;
    if !matches!(k, "ttft" | "tpot" | "e2el") {
        return Err(format!("unknown SLO {k:?} (ttft, tpot, e2el)"));
    }
    let v: f64 = v.parse().map_err(|_| format!("bad milliseconds {v:?}"))?;
    Ok((k.to_string(), v))
}

/// `loadtest run`.
#[derive(Clone, Debug, Args)]
pub struct RunArgs {
    /// Workload and arrival knobs.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Base URL of the OpenAI-compatible server (gateway or replica), loopback in tests.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub endpoint: String,
    /// Replicas behind the endpoint (recorded in the report only).
    #[arg(long)]
    pub replicas: Option<u32>,
    /// Label for this run in the report, e.g. the gateway's policy (one per invocation).
    #[arg(long)]
    pub policy: Vec<String>,
    /// Seed for prompt content and arrivals.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Model name to put in requests.
    #[arg(long, default_value = "default")]
    pub model: String,
    /// Completions or chat endpoint [default: chat for --workload mixed, else completions].
    #[arg(long, value_enum)]
    pub api: Option<Api>,
    /// Bearer token, if the endpoint needs one.
    #[arg(long, env = "WARMPATH_API_KEY")]
    pub api_key: Option<String>,
    /// Per-request timeout, seconds.
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout: f64,
    /// Do not ask the server to ignore EOS (by default it must produce exactly the output length).
    #[arg(long)]
    pub no_ignore_eos: bool,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Outputs.
    #[command(flatten)]
    pub output: OutputArgs,
}

impl RunArgs {
    /// The endpoint to call: `--api`, else chat for the mixed workload (its short requests
    /// are chats with a system message) and the agent loop, else completions.
    pub fn api(&self) -> Api {
        self.api.unwrap_or(match self.workload.workload {
            WorkloadKind::Mixed | WorkloadKind::AgentLoop => Api::Chat,
            _ => Api::Completions,
        })
    }
}

/// `loadtest simulate`.
#[derive(Clone, Debug, Args)]
pub struct SimulateArgs {
    /// Workload and arrival knobs.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Number of simulated replicas.
    #[arg(long, default_value_t = 8)]
    pub replicas: u32,
    /// Policies to compare (repeatable); default: every router-policy policy. A value may
    /// also be `LABEL=JSON` with a router-policy config, e.g.
    /// `warm-gap2s={"type":"warm","spread_queue_gap_ms":2000}`.
    #[arg(long)]
    pub policy: Vec<String>,
    /// Seed for workload content, arrivals and randomised policies.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Replica cost profile (see the table below: the default CPU profile does not fit the
    /// traces at full scale).
    #[arg(long, default_value = "configs/profiles/smollm2-cpu.json")]
    pub profile: PathBuf,
    /// Override the profile's KV capacity per replica (blocks).
    #[arg(long)]
    pub kv_capacity_blocks: Option<u64>,
    /// Override the profile's block size (tokens).
    #[arg(long)]
    pub block_size: Option<u32>,
    /// KV event delay from replica to router, ms.
    #[arg(long, default_value_t = 10.0)]
    pub kv_event_delay_ms: f64,
    /// Load report period (staleness bound), ms; 0 = always fresh.
    #[arg(long, default_value_t = 100.0)]
    pub load_staleness_ms: f64,
    /// Gateways in front of the replicas, each with its own prefix index; requests reach
    /// them in turn.
    #[arg(long, default_value_t = 1)]
    pub gateways: u32,
    /// Whether replicas publish KV events (false: engines without them, where each
    /// gateway's index holds only its own routing decisions).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub kv_events: bool,
    /// Share every gateway's routing decisions with the other gateways' indexes.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub shared_history: bool,
    /// Delay of the shared routing history, ms.
    #[arg(long, default_value_t = 5.0)]
    pub history_delay_ms: f64,
    /// Also compute the oracle hit rate (one cache of N x capacity); on by default.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub oracle: bool,
    /// Hide progress output.
    #[arg(long)]
    pub quiet: bool,
    /// Multi-region cluster.
    #[command(flatten, next_help_heading = "Regions")]
    pub regions: RegionArgs,
    /// Checkpoint rollout.
    #[command(flatten, next_help_heading = "Rollout")]
    pub rollout: RolloutArgs,
    /// Role-split (prefill/decode) cluster.
    #[command(flatten, next_help_heading = "Disaggregation")]
    pub disagg: DisaggArgs,
    /// Shared KV tier.
    #[command(flatten, next_help_heading = "Shared KV tier")]
    pub tier: TierArgs,
    /// Replica prefill order.
    #[command(flatten, next_help_heading = "Replica prefill order")]
    pub order: crate::simulate_cmd::order::OrderArgs,
    /// Gateway admission: tenants, classes, objectives.
    #[command(
        flatten,
        next_help_heading = "Admission (tenants, classes, TTFT objectives)"
    )]
    pub admission: crate::simulate_cmd::admission::AdmissionArgs,
    /// Outputs.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `loadtest calibrate`.
#[derive(Clone, Debug, Args)]
pub struct CalibrateArgs {
    /// Replica (or gateway) base URL.
    #[arg(long)]
    pub endpoint: String,
    /// Where to write the profile.
    #[arg(long, default_value = "configs/profiles/calibrated.json")]
    pub out: PathBuf,
    /// Profile name.
    #[arg(long, default_value = "calibrated")]
    pub name: String,
    /// Model name to put in requests.
    #[arg(long, default_value = "default")]
    pub model: String,
    /// Completions or chat endpoint.
    #[arg(long, value_enum, default_value_t = Api::Completions)]
    pub api: Api,
    /// Bearer token, if needed.
    #[arg(long, env = "WARMPATH_API_KEY")]
    pub api_key: Option<String>,
    /// Prompt tokens of the prefill probe.
    #[arg(long, default_value_t = 512)]
    pub prefill_tokens: u32,
    /// Batch sizes to measure decode step time at.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub batches: Vec<u32>,
    /// Output tokens per decode probe.
    #[arg(long, default_value_t = 32)]
    pub decode_tokens: u32,
    /// Block size and KV capacity when the replica does not report them.
    #[arg(long, default_value_t = 16)]
    pub block_size: u32,
    /// KV capacity in blocks when the replica does not report it.
    #[arg(long, default_value_t = 4096)]
    pub kv_capacity_blocks: u64,
    /// Most sequences in a batch (the replica's limit).
    #[arg(long, default_value_t = 32)]
    pub max_batch: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_command_shapes_parse() {
        let c = Cli::try_parse_from([
            "loadtest",
            "simulate",
            "--workload",
            "mooncake",
            "--trace",
            "t.jsonl",
            "--replicas",
            "64",
            "--policy",
            "warm",
            "--policy",
            "round_robin",
            "--seed",
            "3",
            "--json",
            "o.json",
            "--plot",
            "d",
        ])
        .unwrap();
        let Command::Simulate(s) = c.command else {
            panic!("not simulate")
        };
        assert_eq!(s.policy, vec!["warm", "round_robin"]);
        assert_eq!((s.replicas, s.seed), (64, 3));
        let c = Cli::try_parse_from([
            "loadtest",
            "run",
            "--workload",
            "shared-prefix",
            "--endpoint",
            "http://127.0.0.1:9",
            "--groups",
            "4",
            "--goodput",
            "ttft:500",
            "tpot:50",
        ])
        .unwrap();
        let Command::Run(r) = c.command else {
            panic!("not run")
        };
        assert_eq!(r.workload.groups, 4);
        assert_eq!(r.output.slo().ttft_ms, Some(500.0));
        assert_eq!(r.output.slo().tpot_ms, Some(50.0));
        assert!(Cli::try_parse_from([
            "loadtest",
            "calibrate",
            "--endpoint",
            "http://x",
            "--out",
            "p.json"
        ])
        .is_ok());
        assert!(Cli::try_parse_from(["loadtest", "run", "--workload", "nope"]).is_err());
    }

    #[test]
    fn mixed_workload_flags_parse_and_default_to_chat() {
        let run = |extra: &[&str]| {
            let mut v = vec!["loadtest", "run", "--workload", "mixed"];
            v.extend_from_slice(extra);
            match Cli::try_parse_from(v).unwrap().command {
                Command::Run(r) => r,
                _ => panic!("not run"),
            }
        };
        let r = run(&[
            "--long-every",
            "4",
            "--short-input-len",
            "40",
            "--short-range-ratio",
            "0.25",
            "--short-output-len",
            "32",
            "--long-input-len",
            "1024",
            "--long-output-len",
            "8",
            "--request-rate",
            "0.8",
        ]);
        let w = &r.workload;
        assert_eq!(w.workload, WorkloadKind::Mixed);
        assert_eq!(
            (w.long_every, w.short_input_len, w.short_output_len),
            (4, 40, 32)
        );
        assert_eq!((w.long_input_len, w.long_output_len), (1024, 8));
        assert_eq!((w.short_range_ratio, w.request_rate), (0.25, Some(0.8)));
        assert_eq!(r.api(), Api::Chat);
        let d = run(&[]);
        assert_eq!(
            (d.workload.long_every, d.workload.long_input_len),
            (8, 2048)
        );
        assert_eq!(run(&["--api", "completions"]).api(), Api::Completions);
        let sp = Cli::try_parse_from(["loadtest", "run", "--workload", "shared-prefix"]).unwrap();
        let Command::Run(sp) = sp.command else {
            panic!("not run")
        };
        assert_eq!(sp.api(), Api::Completions);
        let sim = Cli::try_parse_from(["loadtest", "simulate", "--workload", "mixed"]).unwrap();
        assert!(
            matches!(sim.command, Command::Simulate(s) if s.workload.workload == WorkloadKind::Mixed)
        );
        let help = Cli::try_parse_from(["loadtest", "run", "--help"])
            .unwrap_err()
            .to_string();
        for needle in [
            "--long-every",
            "--short-output-len",
            "chat for --workload mixed",
        ] {
            assert!(help.contains(needle), "run --help lacks {needle:?}");
        }
    }

    #[test]
    fn simulate_help_says_which_profile_fits_which_workload() {
        let err = Cli::try_parse_from(["loadtest", "simulate", "--help"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp);
        let help = err.to_string();
        for needle in [
            "smollm2-cpu.json (default)",
            "NOT the traces at full scale",
            "gpu-h100-class.json",
            "Mooncake\n      (60k prompt tokens/s) from 6 replicas",
            "--regions",
            "--rollout-at",
            "--prefill-replicas",
            "--kv-tier",
        ] {
            assert!(help.contains(needle), "help lacks {needle:?}");
        }
    }
}
