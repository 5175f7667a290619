#![allow(clippy::unwrap_used)]
//! The agent-loop measurement (issue 40): `loadtest run --workload agent-loop` through the
//! gateway to mock vLLM servers (`scripts/mock_vllm.py`: vLLM's message preparation and
//! `transformers`' `apply_chat_template` on Qwen 2.5's template and the Qwen 2 vocabulary, a
//! prefix cache of 16-token blocks, vLLM's KV events over ZeroMQ for exactly the blocks it
//! stores). Per request, the gateway's `x-warmpath-predicted-cached-tokens` must equal the
//! engine's reported `usage.prompt_tokens_details.cached_tokens` on at least 99% of requests.
//!
//! `bench_agent_loop` (ignored; `scripts/bench-agent-loop.sh` runs it) is the larger run
//! behind BENCHMARKS.md: the same, per policy, with the prefix hit rate of each.
//!
//! Needs `gateway` and `loadtest` built (`cargo build -p gateway -p loadtest --bins`), python3
//! with venv and network access on the first run (`scripts/mock-vllm-venv.sh`,
//! `scripts/render-reference.sh` for the vocabulary).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use warmpath_e2e::procs::{bin, free_port, GatewayProc};

const MODEL: &str = "agent";
const TEMPLATE: &str = "text/tests/data/templates/Qwen-Qwen2.5-7B-Instruct.jinja";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A line `KEY=VALUE` a setup script printed.
fn script_value(script: &str, key: &str) -> String {
    let out = Command::new("bash")
        .arg(repo().join(script))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{script} failed (it needs python3 with venv and pip, and network access on its \
         first run): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{script} printed no {key}=: {text}"))
        .to_string()
}

/// What the mocks and the gateway are started with.
struct Files {
    python: String,
    tokenizer: PathBuf,
    template: PathBuf,
    bos: String,
    eos: String,
    dir: PathBuf,
}

fn files(tag: &str) -> Files {
    let python = script_value("scripts/mock-vllm-venv.sh", "python");
    let vocab = PathBuf::from(script_value("scripts/render-reference.sh", "vocab"));
    let spec = warmpath_text::gguf::tokenizer_spec_from_file(&vocab.join("ggml-vocab-qwen2.gguf"))
        .expect("the Qwen 2 vocabulary");
    let dir = std::env::temp_dir().join(format!("warmpath-agent-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tokenizer = dir.join("qwen2.tokenizer.json");
    std::fs::write(&tokenizer, serde_json::to_vec(&spec.tokenizer).unwrap()).unwrap();
    Files {
        python,
        tokenizer,
        template: repo().join(TEMPLATE),
        bos: spec.bos_token.unwrap_or_default(),
        eos: spec.eos_token.unwrap_or_default(),
        dir,
    }
}

/// One running `scripts/mock_vllm.py`.
struct MockVllm {
    child: Child,
    port: u16,
    kv_port: u16,
    replay_port: u16,
}

impl MockVllm {
    fn start(f: &Files, n: usize) -> Self {
        let (port, kv_port, replay_port) = (free_port(), free_port(), free_port());
        let log = std::fs::File::create(f.dir.join(format!("mock{n}.log"))).unwrap();
        let mut child = Command::new(&f.python)
            .arg(repo().join("scripts/mock_vllm.py"))
            .args(["--port", &port.to_string()])
            .args(["--kv-port", &kv_port.to_string()])
            .args(["--replay-port", &replay_port.to_string()])
            .arg("--tokenizer")
            .arg(&f.tokenizer)
            .arg("--template")
            .arg(&f.template)
            .args(["--bos", &f.bos, "--eos", &f.eos, "--model", MODEL])
            .arg("--log")
            .arg(f.dir.join(format!("mock{n}.jsonl")))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn the mock vLLM");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout).read_line(&mut line).unwrap();
        assert_eq!(
            line.trim(),
            "ready",
            "the mock vLLM did not start: {}",
            std::fs::read_to_string(f.dir.join(format!("mock{n}.log"))).unwrap_or_default()
        );
        Self {
            child,
            port,
            kv_port,
            replay_port,
        }
    }

    fn upstream_yaml(&self) -> String {
        format!(
            "      - url: http://127.0.0.1:{}\n        kv_events: {{endpoint: \"tcp://127.0.0.1:{}\", \
             replay_endpoint: \"tcp://127.0.0.1:{}\", topic: kv-events}}\n",
            self.port, self.kv_port, self.replay_port
        )
    }
}

impl Drop for MockVllm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One policy's run of the workload.
#[derive(Debug, Default)]
struct Measurement {
    requests: usize,
    failed: usize,
    /// Requests whose predicted cached tokens equal the engine's reported ones.
    equal: usize,
    prompt_tokens: u64,
    cached_tokens: u64,
    predicted_tokens: u64,
    /// The first requests whose prediction differed: (id, conversation, replica, start ms,
    /// prompt, reported, predicted).
    mismatches: Vec<String>,
}

impl Measurement {
    fn equal_share(&self) -> f64 {
        self.equal as f64 / self.requests.max(1) as f64
    }
    fn hit_rate(&self) -> f64 {
        self.cached_tokens as f64 / self.prompt_tokens.max(1) as f64
    }
}

/// Fresh mocks (empty caches) and a gateway running `policy`, then the workload.
fn measure(f: &Files, policy: &str, replicas: usize, workload: &[&str]) -> Measurement {
    let mocks: Vec<MockVllm> = (0..replicas).map(|i| MockVllm::start(f, i)).collect();
    let upstreams: String = mocks.iter().map(MockVllm::upstream_yaml).collect();
    let yaml = format!(
        "auth: {{enabled: false}}\npools:\n  - name: vllm\n    engine: vllm\n    models: [{MODEL}]\n    \
         metrics: false\n    tokenizer: {{hf: {{tokenizer: {}, template: {}}}}}\n    upstreams:\n{upstreams}",
        f.tokenizer.display(),
        f.template.display()
    );
    let gw = GatewayProc::spawn(&yaml, &["--policy", policy], replicas).expect("gateway");
    let out = f.dir.join(format!("{policy}.jsonl"));
    let status = Command::new(bin("loadtest"))
        .args(["run", "--workload", "agent-loop", "--quiet", "--seed", "1"])
        .args([
            "--model",
            MODEL,
            "--endpoint",
            &format!("http://{}", gw.addr),
        ])
        .args(workload)
        .arg("--requests-jsonl")
        .arg(&out)
        .stdout(Stdio::null())
        .status()
        .expect("run loadtest (cargo build -p loadtest)");
    assert!(
        status.success(),
        "loadtest failed; gateway log: {}",
        gw.log()
    );
    let mut m = Measurement::default();
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        m.requests += 1;
        if !r["error"].is_null() {
            m.failed += 1;
            continue;
        }
        let cached = r["cached_tokens"].as_u64().unwrap_or(0);
        let predicted = r["predicted_cached_tokens"].as_u64();
        m.equal += usize::from(predicted == Some(cached));
        if predicted != Some(cached) && m.mismatches.len() < 8 {
            m.mismatches.push(format!(
                "#{} conv {} {} at {:.0} ms: prompt {} reported {cached} predicted {predicted:?}",
                r["id"],
                r["group"],
                r["replica"],
                r["start_ms"].as_f64().unwrap_or(0.0),
                r["prompt_tokens"]
            ));
        }
        m.prompt_tokens += r["prompt_tokens"].as_u64().unwrap_or(0);
        m.cached_tokens += cached;
        m.predicted_tokens += predicted.unwrap_or(0);
    }
    m
}

#[test]
fn predicted_cached_tokens_equal_the_engines_on_an_agent_loop() {
    let f = files("e2e");
    let m = measure(
        &f,
        "warm",
        2,
        &[
            "--users",
            "6",
            "--rounds",
            "5",
            "--concurrency",
            "1",
            "--system-prompt-len",
            "200",
        ],
    );
    eprintln!("{m:?}");
    assert_eq!(m.requests, 30, "{m:?}");
    assert_eq!(m.failed, 0, "{m:?}");
    // The engine reuses most of each turn's prompt (the previous turn's blocks), and the
    // gateway predicts what it reports.
    assert!(m.hit_rate() > 0.5, "{m:?}");
    assert!(m.equal_share() >= 0.99, "{m:?}");
    if std::env::var_os("AGENT_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&f.dir);
    }
}

/// The benchmark behind BENCHMARKS.md (`scripts/bench-agent-loop.sh`): knobs from
/// `AGENT_BENCH_REPLICAS` (4), `AGENT_BENCH_USERS` (32), `AGENT_BENCH_ROUNDS` (8),
/// `AGENT_BENCH_CONCURRENCY` (8), `AGENT_BENCH_POLICIES` (`warm,cache_aware,round_robin`).
#[test]
#[ignore = "benchmark: scripts/bench-agent-loop.sh"]
fn bench_agent_loop() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let replicas: usize = env("AGENT_BENCH_REPLICAS", "4").parse().unwrap();
    let (users, rounds, conc) = (
        env("AGENT_BENCH_USERS", "32"),
        env("AGENT_BENCH_ROUNDS", "8"),
        env("AGENT_BENCH_CONCURRENCY", "8"),
    );
    let f = files("bench");
    println!(
        "| policy | requests | failed | predicted = reported | prefix hit rate (reported) | predicted / reported tokens |"
    );
    println!("|---|---|---|---|---|---|");
    for policy in env("AGENT_BENCH_POLICIES", "warm,cache_aware,round_robin").split(',') {
        let m = measure(
            &f,
            policy,
            replicas,
            &[
                "--users",
                &users,
                "--rounds",
                &rounds,
                "--concurrency",
                &conc,
            ],
        );
        println!(
            "| {policy} | {} | {} | {:.2}% | {:.1}% | {:.4} |",
            m.requests,
            m.failed,
            100.0 * m.equal_share(),
            100.0 * m.hit_rate(),
            m.predicted_tokens as f64 / m.cached_tokens.max(1) as f64
        );
        for line in &m.mismatches {
            eprintln!("{policy}: {line}");
        }
    }
    if std::env::var_os("AGENT_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&f.dir);
    }
}
