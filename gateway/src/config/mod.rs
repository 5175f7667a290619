//! The one configuration model, read from YAML, overridden by the command line, checked by
//! [`Config::validate`], whose errors name the offending key.
//!
//! # Layout
//! - [`model`]: the model, its defaults and its validation; [`error`]: its error type.
//! - [`pools`]: upstream pools of other engines (vLLM, SGLang, llama.cpp, OpenAI);
//!   [`discovery`]: a pool's upstreams from Kubernetes or DNS;
//!   [`chat_template`]: a pool's template override; [`apis`] and [`serves`]: the pass-through APIs (embeddings, tokenize) each serves.
//! - [`state`]: `state:`, the memory or Redis backend a gateway fleet shares;
//!   [`state_tls`]: its TLS to Redis (`rediss://`, `ca_file`, the client certificate).
//! - [`responses`]: `responses:`, the bounds of the Responses API's conversation records.
//! - [`rollout`]: `regions:`, `rollouts:` and `hot_prefixes:` (issue 28).
//! - [`flow`]: `admission.flow` and a tenant's `flow:` (fair, priority- and deadline-aware
//!   admission, issue 42).
//! - [`env`]: `${NAME}` in string values, from the environment (secrets).
//! - [`overrides`]: the command line on top of the file; [`load`].

pub(crate) mod apis;
pub(crate) mod chat_template;
pub(crate) mod discovery;
pub(crate) mod env;
pub(crate) mod epp;
pub(crate) mod error;
pub(crate) mod flow;
pub(crate) mod model;
pub(crate) mod overrides;
pub(crate) mod pool_namespace;
pub(crate) mod pools;
pub(crate) mod responses;
pub(crate) mod rollout;
pub(crate) mod serves;
pub(crate) mod state;
pub(crate) mod state_tls;

pub use apis::PassthroughApi;
pub use discovery::{DiscoveryConfig, DnsDiscovery, KubernetesDiscovery};
pub use epp::{EppBodyMode, EppConfig};
pub use flow::{FlowSettings, TenantFlow};
pub use model::*;
pub use overrides::{load, Overrides};
pub use pools::{
    EngineKind, HfTokenizerFiles, KvEventsEndpoint, PoolConfig, SaltMode, Target, TokenizerSource,
};
pub use responses::ResponsesConfig;
pub use rollout::{HotPrefixConfig, PrewarmConfig, RolloutConfig};
pub use state::{StateBackend, StateConfig};
