//! `replica serve` command-line arguments and their parsed forms.

use crate::server::error::ServerError;
use clap::Args;
use std::fmt;
use std::str::FromStr;

/// `--step-target-ms` on the CPU when not given: a short chat beside a long prefill then
/// waits about this long for the step in flight (BENCHMARKS.md section 33).
pub const DEFAULT_CPU_STEP_TARGET_MS: u64 = 50;

/// Arguments of `replica serve`.
#[derive(Args, Clone, Debug)]
pub struct ServeArgs {
    /// Model to serve: a GGUF/safetensors path, `dummy:NAME`, or no value for the default
    /// SmolLM2 checkpoint.
    #[arg(long, num_args = 0..=1, default_missing_value = "", default_value = "")]
    pub model: String,
    /// Port to listen on; 0 picks a free one (the bound address is printed).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Memory for the paged KV pool, e.g. `256MiB`, `1GiB`, `500000000`.
    #[arg(long, default_value = "256MiB")]
    pub kv_memory: ByteSize,
    /// Compute device: `cpu`, or `cuda:N` in a build with the `cuda` feature.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Tokens per KV page (= hashed block).
    #[arg(long, default_value_t = 16)]
    pub block_size: u32,
    /// Maximum sequences in the running batch.
    #[arg(long, default_value_t = 32)]
    pub max_running: usize,
    /// Tokens computed per engine step (decode tokens plus prefill chunks).
    #[arg(long, default_value_t = 512)]
    pub token_budget: usize,
    /// Target time of an engine step with prefill work, in milliseconds: prefills are
    /// chunked to the measured prefill rate times this (at least 8 tokens, at most
    /// `--token-budget`), so a short request that arrives while a long prompt prefills
    /// waits about one such step for its own. Default: 50 on `cpu`, where a step's time
    /// grows with its tokens; off on `cuda`, where it barely does (the token budget bounds
    /// chunks there). 0 turns it off.
    #[arg(long)]
    pub step_target_ms: Option<u64>,
    /// Compute threads (0 = the engine's default).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Deployment region label reported in the replica info.
    #[arg(long)]
    pub region: Option<String>,
    /// Checkpoint id to publish (in the replica info, KV events and every block hash)
    /// instead of the weights' content hash: names a deployment's weights for a rollout
    /// (`rollouts:` in the gateway config). Two replicas share cached prefixes only when
    /// their ids are equal, so give different weights different ids.
    #[arg(long)]
    pub checkpoint_id: Option<String>,
    /// Engine steps a waiting request may be passed over by better-cached ones before it
    /// is admitted in arrival order.
    #[arg(long, default_value_t = 16)]
    pub fairness_steps: u64,
    /// The order prefills are served in: `shortest` (default) ranks running prefills and
    /// waiting requests by uncached prompt tokens, aged by `--prefill-slack`, so a short
    /// prompt is not stuck behind a long one's whole prefill; `fcfs` serves running
    /// prefills oldest first and admits by cached prefix within `--fairness-steps`.
    #[arg(long, value_enum, default_value = "shortest")]
    pub prefill_order: PrefillOrderArg,
    /// Aging of `--prefill-order shortest`: once the replica has computed this many times
    /// a request's uncached prompt since it arrived, no later arrival goes before it.
    #[arg(long, default_value_t = router_policy::prefill_order::DEFAULT_SLACK)]
    pub prefill_slack: u32,
    /// Role in a prefill/decode split: `both` (default) prefills and decodes; `prefill`
    /// serves prompts' KV to decode replicas (`POST /v1/kv/prefill`); `decode` fetches the
    /// KV of the prefill replica the gateway names, then decodes. Every role still answers
    /// generation requests (the gateway only sends them where the role says).
    #[arg(long, default_value = "both")]
    pub role: warmpath_core::ReplicaRole,
    /// How long a decode replica waits for a prefill replica's KV before it computes the
    /// rest of the prompt itself.
    #[arg(long, default_value_t = 30_000)]
    pub kv_transfer_timeout_ms: u64,
    /// File holding the transfer key (at least 32 bytes), the deployment secret the
    /// gateways share: a decode replica then fetches KV only from a prefill replica the
    /// gateway named and signed, and a prefill replica serves `POST /v1/kv/prefill` only to
    /// pulls its peers signed. Without it, only loopback prefill replicas are fetched from.
    #[arg(long)]
    pub kv_transfer_key_file: Option<String>,
    /// Shared KV tier: `redis://HOST:PORT[/DB]` (`rediss://` for TLS). Every full block
    /// this replica computes is written there in the background, and on a local miss the
    /// prompt's following blocks are read from there instead of computed. Run Redis with `maxmemory` and
    /// `maxmemory-policy allkeys-lru`, apart from the gateways' state Redis, and log in as
    /// an ACL user reaching only `wpkv:*` (`redis://replica@HOST:PORT`, docs/security.md).
    #[arg(long)]
    pub kv_store: Option<String>,
    /// A file holding the tier Redis user's password (used instead of one in the URL, so
    /// it is in neither a command line nor a config file; one trailing newline ignored).
    /// The user comes from the URL (`redis://USER@HOST:PORT`), `default` when absent.
    #[arg(long)]
    pub kv_store_password_file: Option<std::path::PathBuf>,
    /// A file holding the tier's deployment secret (at least 32 random bytes, the same on
    /// every replica): each value is then written as `HMAC-SHA256 || record`, bound to its
    /// Redis key, and a value that does not verify is refused (reason `forged`). Without
    /// it tier values are unauthenticated and the replica warns at start.
    #[arg(long)]
    pub kv_store_key_file: Option<std::path::PathBuf>,
    /// With `--kv-store rediss://...`: a PEM bundle of the CA certificates that may sign
    /// the tier Redis's certificate (default: the system's trust store). The certificate
    /// must name the URL's host (a DNS name or an IP address SAN).
    #[arg(long)]
    pub kv_store_ca_file: Option<std::path::PathBuf>,
    /// With `--kv-store rediss://...`: this replica's client certificate (PEM), for a Redis
    /// run with `tls-auth-clients yes`. Needs `--kv-store-client-key-file`.
    #[arg(long)]
    pub kv_store_client_cert_file: Option<std::path::PathBuf>,
    /// The private key (PEM) of `--kv-store-client-cert-file`.
    #[arg(long)]
    pub kv_store_client_key_file: Option<std::path::PathBuf>,
    /// The region the `--kv-store` Redis runs in (default: `--region`), reported in the
    /// replica info: the gateway turns the tier off, per request, for a region-pinned
    /// tenant whose regions do not include it (`x-warmpath-kv-tier-off`).
    #[arg(long)]
    pub kv_store_region: Option<String>,
    /// Record bytes the tier's write queue holds before new blocks are dropped (counted in
    /// `warmpath_replica_kv_tier_writes_total{outcome="dropped"}`).
    #[arg(long, default_value = "256MiB")]
    pub kv_store_queue: ByteSize,
    /// Bytes of KV blocks that loads from the shared tier and from prefill replicas hold at
    /// once, all loads together (each reserves its largest footprint first: about 33
    /// blocks' records twice over for a tier lookup; SmolLM2's is about 24 MiB). A load that
    /// finds no room within its time limit computes the prompt instead (reason `busy`).
    #[arg(long, default_value = "256MiB")]
    pub kv_load_memory: ByteSize,
    /// How long a tier lookup waits for Redis before the replica computes the rest.
    #[arg(long, default_value_t = 500)]
    pub kv_store_timeout_ms: u64,
    /// TEST HOOK, off by default: a prefill replica cuts every KV stream after N blocks
    /// (a transfer killed midway), so the decode side's recovery can be tested.
    #[arg(long, hide = true)]
    pub fault_kv_cut_after_blocks: Option<u32>,
    /// TEST HOOK, off by default: the first request for more than one token gets NaN
    /// logits after N generated tokens, once (issue #25, matrix row C11), to exercise the
    /// degenerate-output guard without corrupting a model file.
    #[arg(long, hide = true)]
    pub fault_nan_logits_after: Option<u64>,
}

impl ServeArgs {
    /// The tier's TLS flags: only with a `rediss://` `--kv-store`, the client certificate
    /// and key together.
    fn validate_tier_tls(&self) -> Result<(), ServerError> {
        let tls_flags = [
            ("--kv-store-ca-file", &self.kv_store_ca_file),
            (
                "--kv-store-client-cert-file",
                &self.kv_store_client_cert_file,
            ),
            ("--kv-store-client-key-file", &self.kv_store_client_key_file),
        ];
        let tls = self
            .kv_store
            .as_deref()
            .is_some_and(|u| u.starts_with("rediss://"));
        if let Some((flag, _)) = tls_flags.iter().find(|(_, v)| v.is_some()) {
            if !tls {
                return Err(ServerError::Config(format!(
                    "{flag} needs a TLS tier: --kv-store rediss://HOST:PORT"
                )));
            }
        }
        if self.kv_store_client_cert_file.is_some() != self.kv_store_client_key_file.is_some() {
            return Err(ServerError::Config(
                "--kv-store-client-cert-file and --kv-store-client-key-file go together".into(),
            ));
        }
        if let Some(url) = &self.kv_store {
            let insecure = redis::parse_redis_url(url).is_some_and(|u| u.fragment().is_some());
            if insecure {
                return Err(ServerError::Config(format!(
                    "--kv-store {url:?}: #insecure (no certificate check) is not supported; \
                     give --kv-store-ca-file"
                )));
            }
        }
        Ok(())
    }

    /// Defaults for an in-process server serving `model` on a free loopback port.
    pub fn for_model(model: &str) -> Self {
        Self {
            model: model.to_string(),
            port: 0,
            host: "127.0.0.1".to_string(),
            kv_memory: ByteSize(256 << 20),
            device: "cpu".to_string(),
            block_size: 16,
            max_running: 32,
            token_budget: 512,
            step_target_ms: None,
            threads: 0,
            region: None,
            checkpoint_id: None,
            fairness_steps: 16,
            prefill_order: PrefillOrderArg::Shortest,
            prefill_slack: router_policy::prefill_order::DEFAULT_SLACK,
            fault_nan_logits_after: None,
            role: warmpath_core::ReplicaRole::Both,
            kv_transfer_timeout_ms: 30_000,
            kv_transfer_key_file: None,
            kv_store: None,
            kv_store_password_file: None,
            kv_store_key_file: None,
            kv_store_ca_file: None,
            kv_store_client_cert_file: None,
            kv_store_client_key_file: None,
            kv_store_region: None,
            kv_store_queue: ByteSize(256 << 20),
            kv_load_memory: ByteSize(256 << 20),
            kv_store_timeout_ms: 500,
            fault_kv_cut_after_blocks: None,
        }
    }

    /// The parsed `--device`; `cuda:N` is an error in a build without the `cuda` feature.
    pub fn device(&self) -> Result<warmpath_engine::Device, ServerError> {
        let d: warmpath_engine::Device = self
            .device
            .parse()
            .map_err(|e: warmpath_engine::EngineError| ServerError::Config(e.to_string()))?;
        d.check_compiled()
            .map_err(|e| ServerError::Config(e.to_string()))?;
        Ok(d)
    }

    /// `--step-target-ms`, with the device's default; `None` when off.
    pub fn step_target(&self) -> Result<Option<std::time::Duration>, ServerError> {
        let ms = match self.step_target_ms {
            Some(ms) => ms,
            None if self.device()? == warmpath_engine::Device::Cpu => DEFAULT_CPU_STEP_TARGET_MS,
            None => 0,
        };
        Ok((ms > 0).then(|| std::time::Duration::from_millis(ms)))
    }

    /// Checks values clap cannot.
    pub fn validate(&self) -> Result<(), ServerError> {
        self.device()?;
        if self.block_size == 0 || self.block_size > 256 {
            return Err(ServerError::Config(
                "--block-size must be in 1..=256".into(),
            ));
        }
        if self.max_running == 0 {
            return Err(ServerError::Config(
                "--max-running must be at least 1".into(),
            ));
        }
        if self.token_budget == 0 {
            return Err(ServerError::Config(
                "--token-budget must be at least 1".into(),
            ));
        }
        if self.kv_transfer_timeout_ms == 0 {
            return Err(ServerError::Config(
                "--kv-transfer-timeout-ms must be at least 1".into(),
            ));
        }
        if let Some(url) = &self.kv_store {
            let scheme_ok = url.starts_with("redis://") || url.starts_with("rediss://");
            if !scheme_ok || redis::Client::open(url.as_str()).is_err() {
                return Err(ServerError::Config(format!(
                    "--kv-store {url:?}: expected a Redis URL, redis://HOST:PORT[/DB]"
                )));
            }
        }
        if self.kv_store.is_none()
            && (self.kv_store_password_file.is_some() || self.kv_store_key_file.is_some())
        {
            return Err(ServerError::Config(
                "--kv-store-password-file and --kv-store-key-file need --kv-store".into(),
            ));
        }
        self.validate_tier_tls()?;
        if self.kv_store_timeout_ms == 0 {
            return Err(ServerError::Config(
                "--kv-store-timeout-ms must be at least 1".into(),
            ));
        }
        if let Some(id) = &self.checkpoint_id {
            if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) {
                return Err(ServerError::Config(
                    "--checkpoint-id must be 1 to 200 printable characters".into(),
                ));
            }
        }
        Ok(())
    }
}

/// A memory size such as `256MiB`, `2GB`, `1k` or a plain byte count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let value: f64 = num.parse().map_err(|_| format!("invalid size {s:?}"))?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" => 1_000,
            "kib" => 1 << 10,
            "m" | "mb" => 1_000_000,
            "mib" => 1 << 20,
            "g" | "gb" => 1_000_000_000,
            "gib" => 1 << 30,
            other => return Err(format!("unknown size unit {other:?} in {s:?}")),
        };
        Ok(ByteSize((value * mult as f64) as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_parse() {
        assert_eq!("256MiB".parse::<ByteSize>().unwrap(), ByteSize(256 << 20));
        assert_eq!("1gb".parse::<ByteSize>().unwrap(), ByteSize(1_000_000_000));
        assert_eq!("1024".parse::<ByteSize>().unwrap(), ByteSize(1024));
        assert_eq!("1.5KiB".parse::<ByteSize>().unwrap(), ByteSize(1536));
        assert!("12 parsecs".parse::<ByteSize>().is_err());
        assert!("MiB".parse::<ByteSize>().is_err());
    }

    #[test]
    fn cuda_device_needs_the_feature() {
        let mut a = ServeArgs::for_model("dummy:tiny");
        a.device = "cuda:0".into();
        if cfg!(feature = "cuda") {
            assert_eq!(a.device().unwrap(), warmpath_engine::Device::Cuda(0));
        } else {
            let e = a.validate().unwrap_err().to_string();
            assert!(e.contains("cuda:0") && e.contains("--device cpu"), "{e}");
            assert!(e.contains("built without the cuda feature"), "{e}");
        }
        a.device = "tpu".into();
        let e = a.validate().unwrap_err().to_string();
        assert!(e.contains("unknown device") && e.contains("tpu"), "{e}");
    }
    #[test]
    fn tier_tls_flags_need_rediss_and_the_client_pair_goes_together() {
        let mut a = ServeArgs::for_model("dummy:tiny");
        a.kv_store = Some("redis://127.0.0.1:6379".into());
        a.kv_store_ca_file = Some("ca.pem".into());
        let e = a.validate().unwrap_err().to_string();
        assert!(
            e.contains("--kv-store-ca-file") && e.contains("rediss://"),
            "{e}"
        );
        a.kv_store = Some("rediss://127.0.0.1:6379".into());
        a.validate().unwrap();
        a.kv_store_client_key_file = Some("key.pem".into());
        let e = a.validate().unwrap_err().to_string();
        assert!(e.contains("--kv-store-client-cert-file"), "{e}");
        a.kv_store_client_cert_file = Some("cert.pem".into());
        a.validate().unwrap();
        a.kv_store = Some("rediss://127.0.0.1:6379/#insecure".into());
        let e = a.validate().unwrap_err().to_string();
        assert!(e.contains("#insecure"), "{e}");
        a.kv_store = None;
        let e = a.validate().unwrap_err().to_string();
        assert!(e.contains("rediss://"), "{e}");
    }
}

/// `--prefill-order`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PrefillOrderArg {
    /// First come, first served.
    Fcfs,
    /// Shortest uncached prefill first, aged.
    Shortest,
}

impl ServeArgs {
    /// The scheduler's prefill order from `--prefill-order` and `--prefill-slack`.
    pub fn prefill_order(&self) -> router_policy::PrefillOrder {
        match self.prefill_order {
            PrefillOrderArg::Fcfs => router_policy::PrefillOrder::Fcfs,
            PrefillOrderArg::Shortest => router_policy::PrefillOrder::shortest(self.prefill_slack),
        }
    }
}
