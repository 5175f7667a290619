//! The chaos test's fleet: Redis alone in a network namespace, reached by each gateway
//! through its own link (so one gateway can be cut off while the others carry on), two real
//! SmolLM2 replicas loaded as two checkpoints (so rollouts have somewhere to go), and three
//! gateways whose clocks libfaketime skews from a file the test rewrites mid-run.

use std::path::PathBuf;
use std::time::Duration;
use warmpath_e2e::fixtures::{auth_yaml, model_of, replicas_yaml, smollm2_model};
use warmpath_e2e::fleet::wait_degraded;
use warmpath_e2e::netns::Netns;
use warmpath_e2e::redis::{libfaketime, RedisServer};
use warmpath_e2e::{GatewayProc, ReplicaProc};

pub(crate) const RPM: f64 = 600.0;
pub(crate) const BURST: f64 = 9.0;
pub(crate) const TPM: f64 = 1200.0;
pub(crate) const GATEWAYS: usize = 3;
/// `state.keys_poll_ms`: revocations and rollout changes reach every gateway within it.
pub(crate) const POLL_MS: u64 = 250;
pub(crate) const OLD: &str = "smollm2@old";
pub(crate) const NEW: &str = "smollm2@new";

/// Tenants: (id, key, limits).
pub(crate) const TENANTS: [(&str, &str, &str); 5] = [
    (
        "rpm",
        "key-rpm",
        "requests_per_minute: 600, request_burst: 9",
    ),
    ("tok", "key-tok", "tokens_per_minute: 1200"),
    ("conc", "key-conc", "max_concurrent: 2"),
    ("k", "key-k", ""),
    ("cfg", "key-cfg", ""),
];

/// Everything the test runs. Fields drop in order: gateways, replicas, Redis, namespace.
pub(crate) struct Fleet {
    pub(crate) gws: Vec<GatewayProc>,
    _replicas: (ReplicaProc, ReplicaProc),
    pub(crate) redis: RedisServer,
    pub(crate) ns: Netns,
    /// Each gateway's libfaketime offset file.
    clocks: Vec<PathBuf>,
    pub(crate) model: String,
}

impl Fleet {
    pub(crate) fn start() -> Self {
        let ns = Netns::new(GATEWAYS).expect("network namespace");
        let redis = RedisServer::start_in(&ns).expect("redis in the namespace");
        let path = smollm2_model();
        let old = ReplicaProc::spawn_args(&path, 0, &["--checkpoint-id", OLD]).expect("replica");
        let new = ReplicaProc::spawn_args(&path, 0, &["--checkpoint-id", NEW]).expect("replica");
        let model = model_of(&old.addr);
        let preload = libfaketime();
        let dir = redis.dir().to_path_buf();
        let mut clocks = Vec::new();
        let mut gws = Vec::new();
        for (k, skew) in ["-30", "+0", "+30"].iter().enumerate() {
            let clock = dir.join(format!("clock-{k}"));
            std::fs::write(&clock, skew).unwrap();
            let yaml = format!(
                "{}{}state: {{backend: redis, url: 'redis://{}:{}', gateway_count: {GATEWAYS}, \
                 timeout_ms: 100, probe_ms: 100, keys_poll_ms: {POLL_MS}}}\n",
                auth_yaml(&TENANTS),
                replicas_yaml(&[old.url(), new.url()]),
                ns.server_addr(k),
                redis.port,
            );
            let env = [
                ("LD_PRELOAD", preload.to_str().unwrap()),
                ("FAKETIME_TIMESTAMP_FILE", clock.to_str().unwrap()),
                ("FAKETIME_CACHE_DURATION", "1"),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ];
            gws.push(GatewayProc::spawn_with(&yaml, &[], 2, None, &env).expect("gateway"));
            clocks.push(clock);
        }
        wait_degraded(&gws, 0, Duration::from_secs(10));
        Self {
            gws,
            _replicas: (old, new),
            redis,
            ns,
            clocks,
            model,
        }
    }

    /// Sets gateway `k`'s clock offset (libfaketime's syntax, e.g. `+90`); it reads the
    /// file again within a second.
    pub(crate) fn skew(&self, k: usize, offset: &str) {
        std::fs::write(&self.clocks[k], offset).unwrap();
    }

    /// The gateways' data-plane addresses.
    pub(crate) fn addrs(&self) -> Vec<String> {
        self.gws.iter().map(|g| g.addr.clone()).collect()
    }

    /// Leases tenant `conc` holds in Redis now.
    pub(crate) fn leases(&self) -> u64 {
        let n = self.redis.cli(&["ZCARD", "warmpath:{conc}:conc"]).unwrap();
        n.trim().parse().unwrap()
    }
}
