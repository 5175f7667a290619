//! What the gateway reads from message bodies, without building them: the fields a request
//! is routed on, the usage a response reports, and whether a stream ended well. Used by the
//! data plane; the line splitter by the control plane's event follower too.
//!
//! # Layout
//! - [`scan`]: the strict, allocation-free JSON scanner the readers are built on.
//! - [`request`]: a request body's model, prompt, stream flag and token budget.
//! - [`response`]: watching a response as it passes through (usage, `[DONE]`).
//! - [`tail`]: the last members of a JSON object, read backwards from its end.
//! - [`gather`]: a body gathered from Pingora's chunks, copied only when split.
//! - [`budget`]: the gateway-wide budget of request body bytes held in flight.
//! - [`lines`]: a byte stream split into lines.

pub(crate) mod budget;
pub(crate) mod gather;
pub(crate) mod lines;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod scan;
pub(crate) mod tail;
