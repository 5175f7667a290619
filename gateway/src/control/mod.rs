//! The control plane: everything that keeps the gateway's picture of its replicas current,
//! off the request path and on its own runtime (`AppState::control`). It imports nothing
//! from the data plane ([`crate::proxy`]); the two meet only in the in-process state
//! ([`crate::state`], [`crate::replicas`], [`crate::routing`]).
//!
//! # Layout
//! - [`register`]: discover a replica (info, tokenizer), add it, remove it, retry a
//!   configured one until it answers; [`upstream`]: the same for an upstream of an engine pool (vLLM, SGLang, llama.cpp, any OpenAI server).
//! - [`tasks`]: per replica, the KV event follower, and the start of its other tasks:
//!   [`load`] (the load poller: a replica's load endpoint or an engine's `/metrics`) and
//!   [`probe`] (the health prober); [`zmq`]: a vLLM or SGLang server's KV events.
//! - [`reload`]: SIGHUP reload of the config file.
//! - [`discovery`]: a pool's upstreams joining and leaving by themselves (Kubernetes, DNS).
//! - [`history`]: the other gateways' routing decisions, from the fleet's shared history.
//! - [`client`]: the control plane's HTTP client (the workspace's `warmpath_http`).

pub(crate) mod client;
pub(crate) mod discovery;
pub(crate) mod history;
pub(crate) mod load;
pub(crate) mod probe;
pub(crate) mod register;
pub(crate) mod register_error;
pub(crate) mod reload;
pub(crate) mod tasks;
pub(crate) mod upstream;
pub(crate) mod zmq;
