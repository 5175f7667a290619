//! The command line on top of the config file: [`Overrides`] and [`load`], used at start and
//! again on every reload.

use super::model::{Config, ConfigError};
use std::path::PathBuf;

/// Command-line overrides applied on top of the config file (at start and on reload).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<String>,
    /// `--admin-listen`.
    pub admin_listen: Option<String>,
    /// `--replica` (replaces the file's list when non-empty).
    pub replicas: Vec<String>,
    /// `--policy`.
    pub policy: Option<String>,
    /// `--no-auth`.
    pub no_auth: bool,
}

/// Loads the file (or defaults), applies `overrides`, validates.
pub fn load(path: Option<&PathBuf>, o: &Overrides) -> Result<Config, ConfigError> {
    let mut cfg = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.display().to_string(),
                source,
            })?;
            Config::from_yaml(&text)?
        }
        None => Config::default(),
    };
    if let Some(l) = &o.listen {
        cfg.listen = l.clone();
    }
    if let Some(l) = &o.admin_listen {
        cfg.admin_listen = l.clone();
    }
    if !o.replicas.is_empty() {
        cfg.replicas = o.replicas.clone();
    }
    if let Some(p) = &o.policy {
        cfg.policy =
            router_policy::PolicyConfig::from_name(p).map_err(|e| ConfigError::Invalid {
                key: "policy".into(),
                reason: e.to_string(),
            })?;
    }
    if o.no_auth {
        cfg.auth.enabled = false;
    }
    cfg.validate()?;
    Ok(cfg)
}
