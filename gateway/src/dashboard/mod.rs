//! The routing dashboard, served at `/dashboard` on the admin listener.
//!
//! One self-contained page (HTML, JS and CSS compiled into the binary with `include_str!`;
//! no CDN, it works offline) fed by a JSON snapshot ([`snapshot::Snapshot`]) that
//! `/dashboard/snapshot.json` returns once and `/dashboard/events` streams as server-sent
//! events, one per second.
//!
//! Most of the snapshot is read from state the gateway keeps anyway: the replica registry
//! (health, in-flight, polled load and KV usage), the Prometheus counters (requests,
//! rejections, predicted and reported cached tokens) and the router's decision log. What
//! the gateway does not otherwise keep, per-replica and per-tenant token counts, is kept by
//! [`recorder::Recorder`], fed once per finished request from its outcome.
//!
//! # Layout
//! - [`recorder`]: per-replica and per-tenant token counters, history samples.
//! - [`snapshot`]: assembling the JSON snapshot; [`series`]: reading counters back.
//! - [`checkpoints`]: traffic and hit rate per checkpoint, and the rollouts in force.
//! - [`http`]: the routes, including the SSE stream.

pub(crate) mod checkpoints;
pub(crate) mod http;
pub(crate) mod recorder;
pub(crate) mod series;
pub(crate) mod snapshot;
