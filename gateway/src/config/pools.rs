//! Upstream pools: servers of one engine kind (Warmpath's replica, vLLM, SGLang, llama.cpp's
//! `llama-server`, or any OpenAI-compatible server) serving the same model, with where the
//! gateway gets their tokenizer and how it learns what they cache.
//!
//! ```yaml
//! pools:
//!   - name: llama
//!     engine: llamacpp            # warmpath | vllm | sglang | llamacpp | openai
//!     upstreams: [http://127.0.0.1:8001, http://127.0.0.1:8002]
//!     models: [smollm2]           # omit to discover them from GET /v1/models
//!     tokenizer: {gguf: /models/smollm2.gguf}
//!   - name: vllm
//!     engine: vllm
//!     upstreams:
//!       - url: http://10.0.0.5:8000
//!         kv_events: {endpoint: "tcp://10.0.0.5:5557", replay_endpoint: "tcp://10.0.0.5:5558"}
//!     tokenizer: {hf: {tokenizer: /models/llama/tokenizer.json, template: /models/llama/tokenizer_config.json}}
//! ```
//!
//! The top-level `replicas:` list is shorthand for upstreams of engine `warmpath`, which
//! publish their tokenizer, KV events and load themselves.

use super::error::ConfigError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What kind of server an upstream is: decides how the gateway registers it, learns its
/// cache and load, and probes its health.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Warmpath's own replica: info, tokenizer, exact KV events and load from its control plane.
    Warmpath,
    /// vLLM: `/metrics` load, KV events over ZeroMQ when configured.
    Vllm,
    /// SGLang: `/metrics` load, KV events over ZeroMQ when configured.
    Sglang,
    /// llama.cpp's `llama-server`: `/metrics` load (with `--metrics`), `timings.cache_n`.
    Llamacpp,
    /// Any other OpenAI-compatible server: the gateway's own counts only.
    Openai,
}

impl EngineKind {
    /// The name used in the config, metrics and the dashboard.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Warmpath => "warmpath",
            EngineKind::Vllm => "vllm",
            EngineKind::Sglang => "sglang",
            EngineKind::Llamacpp => "llamacpp",
            EngineKind::Openai => "openai",
        }
    }

    /// The health endpoint the engine serves, if any (`openai` upstreams promise only the
    /// OpenAI routes, so they are probed with a one-token request alone).
    pub fn health_path(self) -> Option<&'static str> {
        match self {
            EngineKind::Warmpath | EngineKind::Vllm | EngineKind::Sglang | EngineKind::Llamacpp => {
                Some("/health")
            }
            EngineKind::Openai => None,
        }
    }

    /// Whether the engine can publish KV events over ZeroMQ (vLLM's format).
    pub fn has_zmq_events(self) -> bool {
        matches!(self, EngineKind::Vllm | EngineKind::Sglang)
    }

    /// Whether the engine takes a prompt of token ids on `/v1/completions` (how a stream
    /// that lost its server continues on another: `docs/engines.md`). `openai`: unknown,
    /// so not unless a pool says so (`token_prompts`).
    pub fn takes_token_prompts(self) -> bool {
        matches!(
            self,
            EngineKind::Vllm | EngineKind::Sglang | EngineKind::Llamacpp
        )
    }
}

/// Where a pool's tokenizer comes from. In YAML: `none`, `{gguf: PATH}` or
/// `{hf: {tokenizer: PATH, template: PATH}}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "serde_yaml::Value")]
pub enum TokenizerSource {
    /// No tokenizer: prompts are hashed as text blocks (see `docs/engines.md`).
    #[default]
    None,
    /// The tokenizer and chat template inside a GGUF file's metadata.
    Gguf(PathBuf),
    /// A Hugging Face `tokenizer.json` plus a chat template (`tokenizer_config.json` or a
    /// `.jinja` file).
    Hf(HfTokenizerFiles),
}

impl TryFrom<serde_yaml::Value> for TokenizerSource {
    type Error = String;

    fn try_from(v: serde_yaml::Value) -> Result<Self, String> {
        const SHAPES: &str =
            "expected `none`, `{gguf: PATH}` or `{hf: {tokenizer: PATH, template: PATH}}`";
        match &v {
            serde_yaml::Value::String(s) if s == "none" => Ok(TokenizerSource::None),
            serde_yaml::Value::Null => Ok(TokenizerSource::None),
            serde_yaml::Value::Mapping(m) if m.len() == 1 => {
                let (k, inner) = m.iter().next().ok_or(SHAPES)?;
                match k.as_str() {
                    Some("gguf") => serde_yaml::from_value(inner.clone())
                        .map(TokenizerSource::Gguf)
                        .map_err(|e| format!("gguf: {e}")),
                    Some("hf") => serde_yaml::from_value(inner.clone())
                        .map(TokenizerSource::Hf)
                        .map_err(|e| format!("hf: {e}")),
                    _ => Err(format!("unknown tokenizer source {k:?}: {SHAPES}")),
                }
            }
            _ => Err(SHAPES.to_string()),
        }
    }
}

impl TokenizerSource {
    /// The same source as `warmpath-text` names it (`None` for `none`).
    pub fn to_text_source(&self) -> Option<warmpath_text::TokenizerSource> {
        match self {
            TokenizerSource::None => None,
            TokenizerSource::Gguf(path) => Some(warmpath_text::TokenizerSource::Gguf(path.clone())),
            TokenizerSource::Hf(files) => Some(warmpath_text::TokenizerSource::HuggingFace {
                tokenizer: files.tokenizer.clone(),
                template: files.template.clone(),
            }),
        }
    }

    /// Reads the files and builds the tokenizer, as registration will (config validation,
    /// at start and on every reload); the error names the file.
    pub fn check(&self) -> Result<(), String> {
        let Some(source) = self.to_text_source() else {
            return Ok(());
        };
        if let Some(loaded) = source.load().map_err(|e| e.to_string())? {
            warmpath_text::ChatTokenizer::from_spec(&loaded.spec)
                .map_err(|e| format!("the tokenizer does not build: {e}"))?;
        }
        Ok(())
    }
}

/// The files of a Hugging Face tokenizer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HfTokenizerFiles {
    /// `tokenizer.json`.
    pub tokenizer: PathBuf,
    /// `tokenizer_config.json` (its `chat_template`) or a `chat_template.jinja`.
    #[serde(default)]
    pub template: Option<PathBuf>,
}

/// Whether the gateway sends each tenant's salt as the engine's `cache_salt` (vLLM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaltMode {
    /// Every request carries its tenant's salt: tenants never share the engine's blocks,
    /// and requests are hashed in the tenant's namespace, as the engine's events are.
    PerTenant,
    /// No salt is sent: the engine's cache is shared by every tenant.
    None,
}

/// An engine's ZeroMQ KV event publisher (vLLM's `--kv-events-config`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvEventsEndpoint {
    /// The PUB socket, e.g. `tcp://10.0.0.5:5557`.
    pub endpoint: String,
    /// The ROUTER socket answering replay requests after a gap, e.g. `tcp://10.0.0.5:5558`.
    #[serde(default)]
    pub replay_endpoint: Option<String>,
    /// The topic the engine publishes on (`""`: every topic).
    #[serde(default)]
    pub topic: String,
}

/// One upstream of a pool: a URL, or a URL with its KV event endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UpstreamConfig {
    /// `http://host:port`.
    Url(String),
    /// `{url: ..., kv_events: {...}}`.
    Detailed(DetailedUpstream),
}

/// An upstream with its KV event endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetailedUpstream {
    /// `http://host:port`.
    pub url: String,
    /// Its ZeroMQ KV event publisher (vLLM and SGLang only).
    #[serde(default)]
    pub kv_events: Option<KvEventsEndpoint>,
}

impl UpstreamConfig {
    /// The upstream's base URL.
    pub fn url(&self) -> &str {
        match self {
            UpstreamConfig::Url(u) => u,
            UpstreamConfig::Detailed(d) => &d.url,
        }
    }

    /// Its KV event endpoint, if configured.
    pub fn kv_events(&self) -> Option<&KvEventsEndpoint> {
        match self {
            UpstreamConfig::Url(_) => None,
            UpstreamConfig::Detailed(d) => d.kv_events.as_ref(),
        }
    }
}

/// A pool of upstreams of one engine serving the same model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Name, unique among pools; part of the default checkpoint id.
    pub name: String,
    /// The engine every upstream of the pool runs.
    pub engine: EngineKind,
    /// The upstreams (may be empty with `discovery`).
    #[serde(default)]
    pub upstreams: Vec<UpstreamConfig>,
    /// Where further upstreams come from: Kubernetes or DNS (`super::discovery`).
    #[serde(default)]
    pub discovery: Option<super::discovery::DiscoveryConfig>,
    /// Model names clients use. Omitted: discovered from each upstream's `GET /v1/models`.
    #[serde(default)]
    pub models: Option<Vec<String>>,
    /// Where the tokenizer comes from (`none` by default). Ignored for `warmpath`, which
    /// publishes its own.
    #[serde(default)]
    pub tokenizer: TokenizerSource,
    /// A Jinja chat template file replacing the tokenizer's (vLLM's and llama-server's
    /// `--chat-template`): give the file the engine was started with.
    #[serde(default)]
    pub chat_template: Option<PathBuf>,
    /// Tokens per hashed block (with `tokenizer: none`, 4-byte text units per block). For
    /// vLLM and SGLang with KV events this must equal the engine's block (page) size.
    #[serde(default = "default_block_size")]
    pub block_size: u32,
    /// The weights' identity, part of every block hash. Default: `POOL/MODEL`. Change it
    /// when the pool's weights change, so no stale prefix is ever predicted.
    #[serde(default)]
    pub checkpoint: Option<String>,
    /// KV capacity of one upstream, in blocks (the policies' estimate when the engine's
    /// metrics give only a usage ratio).
    #[serde(default = "default_capacity_blocks")]
    pub capacity_blocks: u64,
    /// Longest context an upstream accepts, tokens.
    #[serde(default = "default_max_context")]
    pub max_context: u32,
    /// Scrape the engine's Prometheus `/metrics` for load (vLLM, SGLang, llama.cpp).
    #[serde(default = "default_true")]
    pub metrics: bool,
    /// Region of every upstream of the pool (a Warmpath replica reports its own, from
    /// `replica serve --region`).
    #[serde(default)]
    pub region: Option<String>,
    /// The pass-through APIs its upstreams serve (`embeddings`, `tokenize`,
    /// `detokenize`); left out, the engine's defaults (`super::serves`).
    #[serde(default)]
    pub apis: Option<Vec<super::apis::PassthroughApi>>,
    /// Whether its upstreams take a prompt of token ids on `/v1/completions`, so a stream
    /// that loses its server continues on another; left out, the engine's default
    /// ([`EngineKind::takes_token_prompts`]).
    #[serde(default)]
    pub token_prompts: Option<bool>,
    /// vLLM's per-request `cache_salt` (`per_tenant` or `none`); left out, `per_tenant` for
    /// `vllm` and `none` for every other engine (`PoolConfig::salt_mode`).
    #[serde(default)]
    pub cache_salt: Option<SaltMode>,
    /// LoRA adapters the upstreams serve, by the model name clients send (vLLM's
    /// `--lora-modules NAME=PATH`): such a request is hashed in the adapter's namespace.
    #[serde(default)]
    pub lora_adapters: Vec<String>,
}

fn default_block_size() -> u32 {
    16
}
fn default_capacity_blocks() -> u64 {
    8192
}
fn default_max_context() -> u32 {
    8192
}
fn default_true() -> bool {
    true
}

fn invalid(key: String, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

impl PoolConfig {
    /// Whether its upstreams take token-id prompts (`token_prompts`, else the engine's).
    pub fn takes_token_prompts(&self) -> bool {
        self.token_prompts
            .unwrap_or_else(|| self.engine.takes_token_prompts())
    }

    /// The checkpoint id of `model` in this pool.
    pub fn checkpoint_for(&self, model: &str) -> String {
        match &self.checkpoint {
            Some(c) => c.clone(),
            None => format!("{}/{}", self.name, model),
        }
    }

    /// Checks one pool (`key` is `pools[i]`): engine-specific keys, model names, and that
    /// the tokenizer files can be read and build a tokenizer.
    pub fn validate(&self, key: &str) -> Result<(), ConfigError> {
        if self.name.is_empty() {
            return Err(invalid(format!("{key}.name"), "must be non-empty"));
        }
        if let Some(d) = &self.discovery {
            d.validate(&format!("{key}.discovery"))?;
        } else if self.upstreams.is_empty() {
            return Err(invalid(
                format!("{key}.upstreams"),
                "lists no upstream: give at least one http://host:port, or `discovery`",
            ));
        }
        for (j, u) in self.upstreams.iter().enumerate() {
            let ukey = format!("{key}.upstreams[{j}]");
            crate::replicas::addr::ReplicaAddr::parse(u.url())
                .map_err(|e| invalid(ukey.clone(), e))?;
            if let Some(ev) = u.kv_events() {
                if !self.engine.has_zmq_events() {
                    return Err(invalid(
                        format!("{ukey}.kv_events"),
                        format!(
                            "engine `{}` publishes no ZeroMQ KV events (only vllm and sglang do)",
                            self.engine.as_str()
                        ),
                    ));
                }
                for (k, ep) in [
                    ("endpoint", Some(&ev.endpoint)),
                    ("replay_endpoint", ev.replay_endpoint.as_ref()),
                ] {
                    if let Some(ep) = ep {
                        if !ep.starts_with("tcp://") && !ep.starts_with("ipc://") {
                            return Err(invalid(
                                format!("{ukey}.kv_events.{k}"),
                                format!("{ep:?}: expected tcp://HOST:PORT or ipc://PATH"),
                            ));
                        }
                    }
                }
            }
        }
        self.check_namespace(key)?;
        if let Some(models) = &self.models {
            if models.is_empty() {
                return Err(invalid(
                    format!("{key}.models"),
                    "names no model: list the model names, or omit `models` to discover them \
                     from the upstreams' GET /v1/models",
                ));
            }
            if models.iter().any(|m| m.trim().is_empty()) {
                return Err(invalid(
                    format!("{key}.models"),
                    "holds an empty model name",
                ));
            }
        }
        if self.block_size == 0 || self.block_size > 4096 {
            return Err(invalid(format!("{key}.block_size"), "must be in 1..=4096"));
        }
        if self.capacity_blocks == 0 {
            return Err(invalid(
                format!("{key}.capacity_blocks"),
                "must be positive",
            ));
        }
        if self.max_context == 0 {
            return Err(invalid(format!("{key}.max_context"), "must be positive"));
        }
        if matches!(&self.checkpoint, Some(c) if c.is_empty()) {
            return Err(invalid(format!("{key}.checkpoint"), "must be non-empty"));
        }
        if self.engine == EngineKind::Warmpath && self.tokenizer != TokenizerSource::None {
            return Err(invalid(
                format!("{key}.tokenizer"),
                "a warmpath replica publishes its own tokenizer: leave `tokenizer` out",
            ));
        }
        if self.engine == EngineKind::Warmpath && self.token_prompts.is_some() {
            return Err(invalid(
                format!("{key}.token_prompts"),
                "a warmpath replica continues a stream exactly: leave `token_prompts` out",
            ));
        }
        self.tokenizer
            .check()
            .map_err(|e| invalid(format!("{key}.tokenizer"), e))?;
        if let Some(path) = &self.chat_template {
            let ckey = format!("{key}.chat_template");
            if self.engine == EngineKind::Warmpath {
                return Err(invalid(
                    ckey,
                    "a warmpath replica publishes its own template",
                ));
            }
            let Some(source) = self.tokenizer.to_text_source() else {
                return Err(invalid(
                    ckey,
                    "needs a tokenizer (`tokenizer: {gguf: ..}` or `{hf: ..}`): with \
                     `tokenizer: none` prompts are hashed as text, no template is rendered",
                ));
            };
            super::chat_template::check(&source, path).map_err(|e| invalid(ckey, e))?;
        }
        Ok(())
    }
}

/// Checks every pool, and that pool names and upstream URLs are unique across the pools
/// and the top-level `replicas` list.
pub(crate) fn validate_pools(pools: &[PoolConfig], replicas: &[String]) -> Result<(), ConfigError> {
    let mut names = std::collections::HashSet::new();
    let mut urls: std::collections::HashSet<String> = replicas
        .iter()
        .map(|u| u.trim_end_matches('/').to_string())
        .collect();
    for (i, p) in pools.iter().enumerate() {
        let key = format!("pools[{i}]");
        p.validate(&key)?;
        if !names.insert(p.name.as_str()) {
            return Err(invalid(
                format!("{key}.name"),
                format!("{:?} is used by two pools", p.name),
            ));
        }
        for (j, u) in p.upstreams.iter().enumerate() {
            if !urls.insert(u.url().trim_end_matches('/').to_string()) {
                return Err(invalid(
                    format!("{key}.upstreams[{j}]"),
                    format!(
                        "{} is listed twice (an upstream belongs to one pool)",
                        u.url()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// One server the gateway registers: its URL, and the pool it belongs to (`None`: a
/// Warmpath replica from the top-level `replicas` list).
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// `http://host:port` as configured.
    pub url: String,
    /// Its pool.
    pub pool: Option<PoolConfig>,
    /// Its ZeroMQ KV event endpoint, if configured.
    pub kv_events: Option<KvEventsEndpoint>,
}

impl Target {
    /// A Warmpath replica outside any pool (the `replicas` list, `--replica`, the admin API).
    pub fn warmpath(url: &str) -> Self {
        Self {
            url: url.to_string(),
            pool: None,
            kv_events: None,
        }
    }

    /// The engine it runs.
    pub fn engine(&self) -> EngineKind {
        self.pool
            .as_ref()
            .map_or(EngineKind::Warmpath, |p| p.engine)
    }

    /// The URL without a trailing `/`, as registered replicas report theirs.
    pub fn normalized_url(&self) -> &str {
        self.url.trim_end_matches('/')
    }
}

/// The targets of a config: `replicas` first, then every pool's upstreams in order.
pub(crate) fn targets(replicas: &[String], pools: &[PoolConfig]) -> Vec<Target> {
    let mut out: Vec<Target> = replicas.iter().map(|u| Target::warmpath(u)).collect();
    for p in pools {
        for u in &p.upstreams {
            out.push(Target {
                url: u.url().to_string(),
                pool: Some(p.clone()),
                kv_events: u.kv_events().cloned(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, EngineKind, TokenizerSource};

    fn load(pools: &str) -> Result<Config, String> {
        let yaml = format!("auth: {{enabled: false}}\npools:\n{pools}");
        let c = Config::from_yaml(&yaml).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn pools_parse_every_tokenizer_form() {
        let c = load(
            "  - {name: a, engine: openai, upstreams: [http://127.0.0.1:1], tokenizer: none}\n\
             \x20 - name: b\n    engine: vllm\n    models: [m]\n    upstreams:\n\
             \x20     - url: http://127.0.0.1:2\n        kv_events: {endpoint: \"tcp://127.0.0.1:5557\"}\n\
             \x20     - http://127.0.0.1:3\n",
        )
        .unwrap();
        assert_eq!(c.pools[0].tokenizer, TokenizerSource::None);
        assert_eq!(c.pools[1].engine, EngineKind::Vllm);
        let t = c.targets();
        assert_eq!(t.len(), 3);
        assert_eq!(
            t[1].kv_events.as_ref().unwrap().endpoint,
            "tcp://127.0.0.1:5557"
        );
        assert!(t[2].kv_events.is_none());
        assert_eq!(c.pools[1].checkpoint_for("m"), "b/m");
        let y: super::PoolConfig = serde_yaml::from_str(
            "{name: g, engine: llamacpp, upstreams: [http://h:1], tokenizer: {gguf: /m.gguf}}",
        )
        .unwrap();
        assert_eq!(y.tokenizer, TokenizerSource::Gguf("/m.gguf".into()));
        let y: super::PoolConfig = serde_yaml::from_str(
            "{name: h, engine: sglang, upstreams: [http://h:1], tokenizer: {hf: {tokenizer: /t.json, template: /c.json}}}",
        )
        .unwrap();
        assert!(
            matches!(y.tokenizer, TokenizerSource::Hf(ref f) if f.template.as_deref() == Some(std::path::Path::new("/c.json")))
        );
    }

    #[test]
    fn token_prompts_follow_the_engine_unless_a_pool_says() {
        let c = load(
            "  - {name: a, engine: openai, upstreams: [http://127.0.0.1:1]}\n\
             \x20 - {name: b, engine: openai, upstreams: [http://127.0.0.1:2], token_prompts: true}\n\
             \x20 - {name: c, engine: llamacpp, upstreams: [http://127.0.0.1:3]}\n\
             \x20 - {name: d, engine: vllm, upstreams: [http://127.0.0.1:4], token_prompts: false}\n",
        )
        .unwrap();
        let takes: Vec<bool> = c.pools.iter().map(|p| p.takes_token_prompts()).collect();
        assert_eq!(takes, [false, true, true, false]);
        let e = load("  - {name: w, engine: warmpath, upstreams: [http://127.0.0.1:5], token_prompts: true}\n")
            .unwrap_err();
        assert!(e.contains("pools[0].token_prompts"), "{e}");
    }

    #[test]
    fn bad_pools_are_refused_naming_the_key() {
        let cases = [
            (
                "  - {name: a, engine: tgi, upstreams: [http://127.0.0.1:1]}\n",
                "unknown variant `tgi`",
            ),
            (
                "  - {name: a, engine: vllm, models: [], upstreams: [http://127.0.0.1:1]}\n",
                "pools[0].models",
            ),
            ("  - {name: a, engine: vllm, upstreams: []}\n", "pools[0].upstreams"),
            (
                "  - {name: a, engine: llamacpp, upstreams: [http://127.0.0.1:1], tokenizer: {gguf: /nonexistent/model.gguf}}\n",
                "pools[0].tokenizer",
            ),
            (
                "  - {name: a, engine: llamacpp, upstreams: [{url: http://127.0.0.1:1, kv_events: {endpoint: \"tcp://h:1\"}}]}\n",
                "pools[0].upstreams[0].kv_events",
            ),
            (
                "  - {name: a, engine: vllm, upstreams: [{url: http://127.0.0.1:1, kv_events: {endpoint: \"h:1\"}}]}\n",
                "pools[0].upstreams[0].kv_events.endpoint",
            ),
            (
                "  - {name: a, engine: openai, upstreams: [http://127.0.0.1:1]}\n  - {name: a, engine: openai, upstreams: [http://127.0.0.1:2]}\n",
                "pools[1].name",
            ),
            (
                "  - {name: a, engine: openai, upstreams: [http://127.0.0.1:1]}\n  - {name: b, engine: openai, upstreams: [http://127.0.0.1:1/]}\n",
                "pools[1].upstreams[0]",
            ),
            (
                "  - {name: a, engine: openai, upstreams: [ftp://127.0.0.1:1]}\n",
                "pools[0].upstreams[0]",
            ),
            (
                "  - {name: a, engine: warmpath, upstreams: [http://127.0.0.1:1], tokenizer: {gguf: /m.gguf}}\n",
                "pools[0].tokenizer",
            ),
            (
                "  - {name: a, engine: openai, upstreams: [http://127.0.0.1:1], block_size: 0}\n",
                "pools[0].block_size",
            ),
            (
                "  - {name: a, engine: openai, upstreams: [http://127.0.0.1:1], tokenizer: {spm: /x}}\n",
                "unknown tokenizer source",
            ),
            (
                "  - {name: a, engine: openai, upstreams: [http://127.0.0.1:1], tokenizer: {hf: {tokenizr: /x}}}\n",
                "unknown field `tokenizr`",
            ),
        ];
        for (yaml, want) in cases {
            let err = load(yaml).unwrap_err();
            assert!(err.contains(want), "{yaml}: {err}");
        }
    }
}
