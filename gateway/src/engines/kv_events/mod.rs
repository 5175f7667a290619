//! KV cache events of vLLM and SGLang over ZeroMQ, turned into Warmpath's KV event stream
//! for the gateway's precise prefix index (see `docs/engines-kv-events.md`).
//!
//! # Layout
//! - [`wire`]: one msgpack payload decoded into [`wire::EngineBatch`] (both msgspec encodings).
//! - [`rehash`]: [`rehash::EventMapper`], engine events rehashed under Warmpath's hashing contract.
//! - [`stream`]: [`stream::EventStream`], batches folded into snapshot + numbered events.
//! - [`replay`]: the client of the engine's replay (ROUTER) socket; [`skip`]: why an event was skipped.
//! - [`subscribe`]: [`subscribe::ZmqSubscriber`], the SUB loop: gaps, replays, drops, reconnects.
//! - [`config`]: [`config::ZmqEventsConfig`]; [`counters`]: [`counters::SubscriberCounters`].
//!
//! # Use
//! ```no_run
//! # async fn f(replica: warmpath_core::ReplicaId, router: std::sync::Arc<std::sync::Mutex<router_policy::PrefixIndex>>) {
//! use gateway::{ZmqEventsConfig, ZmqSubscriber};
//! use warmpath_core::{CheckpointId, HashNamespace};
//! let cfg = ZmqEventsConfig {
//!     endpoint: "tcp://10.0.0.5:5557".into(),
//!     replay_endpoint: Some("tcp://10.0.0.5:5558".into()),
//!     topic: "kv-events".into(),
//!     ..ZmqEventsConfig::default()
//! };
//! let mapper = cfg.mapper(HashNamespace::new(CheckpointId::new("my-model")));
//! let sink = move |msg| {
//!     router.lock().unwrap().apply_message(replica, &msg);
//! };
//! let counts = ZmqSubscriber::new(cfg, mapper, sink).run(|| false).await;
//! # }
//! ```

pub(crate) mod config;
pub(crate) mod counters;
pub(crate) mod rehash;
pub(crate) mod replay;
pub(crate) mod skip;
pub(crate) mod stream;
pub(crate) mod subscribe;
pub(crate) mod wire;

pub(crate) use config::ZmqEventsConfig;
pub(crate) use subscribe::run;
