//! `/admin/tenants/{id}/keys`: a tenant's API keys in the shared key store (Redis).
//! - `GET`: the keys' ids, sources and creation times (never a key);
//! - `POST`: a new key, shown in this response only;
//! - `POST .../{key_id}/rotate`: a new key, and the old one revoked;
//! - `DELETE .../{key_id}`: revoked on every gateway within `state.keys_poll_ms`.

use super::error::AdminError;
use crate::fleet::keys::KeyError;
use crate::fleet::Fleet;
use crate::tenants::TenantTable;

impl From<KeyError> for AdminError {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::NoStore => AdminError::BadRequest(e.to_string()),
            KeyError::Unavailable(_) => AdminError::Unavailable(e.to_string()),
            KeyError::NoSuchKey { .. } => AdminError::NotFound(e.to_string()),
        }
    }
}

/// What a key route asks.
pub(crate) enum KeyOp<'a> {
    /// List.
    List,
    /// Create.
    Create,
    /// Rotate this key.
    Rotate(&'a str),
    /// Revoke this key.
    Revoke(&'a str),
}

/// Runs `op` on `tenant`'s keys: the status and JSON body of the answer.
pub(crate) async fn handle(
    fleet: Option<&Fleet>,
    tenants: &TenantTable,
    tenant: &str,
    op: KeyOp<'_>,
) -> Result<(u16, serde_json::Value), AdminError> {
    let fleet = fleet.ok_or(KeyError::NoStore)?;
    if tenants.get(tenant).is_none() {
        return Err(AdminError::NotFound(format!(
            "no tenant {tenant} in the config (tenants and their limits come from the config file)"
        )));
    }
    Ok(match op {
        KeyOp::List => {
            let mut keys = fleet.list_keys(tenant).await?;
            keys.sort_by(|a, b| (a.created, &a.key_id).cmp(&(b.created, &b.key_id)));
            (200, serde_json::json!({"tenant": tenant, "keys": keys}))
        }
        KeyOp::Create => {
            let (key, stored) = fleet.create_key(tenant).await?;
            (201, serde_json::json!({"key": key, "record": stored}))
        }
        KeyOp::Rotate(old) => {
            // The old key must exist before a new one is made.
            let existing = fleet.list_keys(tenant).await?;
            if !existing.iter().any(|k| k.key_id == old) {
                return Err(KeyError::NoSuchKey {
                    tenant: tenant.into(),
                    key_id: old.into(),
                }
                .into());
            }
            let (key, stored) = fleet.create_key(tenant).await?;
            fleet.revoke_key(tenant, old).await?;
            (
                201,
                serde_json::json!({"key": key, "record": stored, "revoked": old}),
            )
        }
        KeyOp::Revoke(key_id) => {
            fleet.revoke_key(tenant, key_id).await?;
            (200, serde_json::json!({"revoked": key_id}))
        }
    })
}
