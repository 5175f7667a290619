//! The control-plane HTTP client (replica info, load, tokenizer, KV event stream, health
//! probes): the workspace's [`warmpath_http`] client, addressed by
//! [`ReplicaAddr::http`](crate::replicas::ReplicaAddr::http). One connection per request,
//! or one kept-alive connection for the load poller ([`KeptAlive`]); plain `http://` only;
//! a 3xx is a status, never followed. The proxied traffic does not use it (Pingora keeps
//! its own upstream pool).

pub(crate) use warmpath_http::{
    get_json, open, post_json, request, BodyStream, ClientError, KeptAlive,
};
