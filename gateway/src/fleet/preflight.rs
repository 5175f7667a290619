//! Checks of the shared-state Redis made before the gateway serves, and again on every
//! connect: an eviction policy that may evict keys without a TTL (`allkeys-*`) would evict
//! the key store's revocations, limit state and rollouts, so such a Redis is refused. A
//! Redis that does not let this user run `CONFIG GET` (an ACL without `+config|get`) is
//! used, with a warning that the policy could not be checked.

use super::conn::Conn;
use crate::config::StateConfig;
use std::time::Duration;

/// What the policy check found wrong.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PolicyError {
    /// The policy evicts keys that carry no TTL.
    #[error(
        "Redis maxmemory-policy is {0:?}: it may evict keys without a TTL (revoked keys, \
         limit state, rollouts); use `noeviction` or a `volatile-*` policy, and a separate \
         Redis for the KV tier (docs/security.md)"
    )]
    Evicting(String),
    /// The policy could not be read.
    #[error("could not read Redis maxmemory-policy ({0}); it is not checked")]
    Unchecked(String),
}

/// Reads `maxmemory-policy` and refuses an `allkeys-*` one.
pub(crate) async fn check_policy(conn: &Conn, limit: Duration) -> Result<(), PolicyError> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("maxmemory-policy");
    let got = tokio::time::timeout(limit, conn.query::<Vec<String>>(&cmd)).await;
    let pair = match got {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) => return Err(PolicyError::Unchecked(e.to_string())),
        Err(_) => return Err(PolicyError::Unchecked("no answer".into())),
    };
    match pair.get(1) {
        Some(p) if p.starts_with("allkeys-") => Err(PolicyError::Evicting(p.clone())),
        Some(_) => Ok(()),
        None => Err(PolicyError::Unchecked("empty answer".into())),
    }
}

/// The start-up check: warns about `state.gateway_count: 1`, connects once (waiting a few
/// seconds) and fails on an evicting policy. An unreachable Redis is not an error here:
/// the gateway starts degraded and checks again when it connects.
pub(crate) fn at_start(cfg: &StateConfig, rt: &tokio::runtime::Handle) -> anyhow::Result<()> {
    if cfg.gateway_count == 1 {
        tracing::warn!(
            "state.gateway_count is 1: while Redis is unreachable every gateway admits each \
             tenant's full limits; set it to the number of gateways in the fleet"
        );
    }
    let conn = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(3), Conn::connect(cfg)).await });
    let conn = match conn {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "Redis unreachable at start: eviction policy checked on connect");
            return Ok(());
        }
        Err(_) => {
            tracing::warn!(
                "Redis did not answer within 3 s at start: eviction policy checked on connect"
            );
            return Ok(());
        }
    };
    match rt.block_on(check_policy(&conn, Duration::from_secs(2))) {
        Ok(()) => Ok(()),
        Err(e @ PolicyError::Evicting(_)) => Err(anyhow::anyhow!("state: {e}")),
        Err(e @ PolicyError::Unchecked(_)) => {
            tracing::warn!("{e}");
            Ok(())
        }
    }
}
