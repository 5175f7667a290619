//! Replica roles in a prefill/decode split pool: `both` (the default: prefill and decode
//! in place), `prefill` (computes prompts' KV for others) and `decode`. The gateway, the
//! replica (`--role`), the policies and the simulator all name roles with this one type.

use serde::{Deserialize, Serialize};

/// What a replica does in a role-split pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplicaRole {
    /// Prefill and decode (co-located).
    #[default]
    Both,
    /// Computes prompts' KV and hands it to decode replicas.
    Prefill,
    /// Decodes requests whose KV a prefill replica computed (and short prompts itself).
    Decode,
}

impl ReplicaRole {
    /// Every role, in the order `--role` documents them.
    pub const ALL: [ReplicaRole; 3] =
        [ReplicaRole::Both, ReplicaRole::Prefill, ReplicaRole::Decode];

    /// The name in flags, configs and documents.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaRole::Both => "both",
            ReplicaRole::Prefill => "prefill",
            ReplicaRole::Decode => "decode",
        }
    }

    /// Whether requests may be sent to it to be answered.
    pub fn decodes(self) -> bool {
        matches!(self, ReplicaRole::Both | ReplicaRole::Decode)
    }

    /// Whether it serves KV to decode replicas.
    pub fn prefills(self) -> bool {
        matches!(self, ReplicaRole::Both | ReplicaRole::Prefill)
    }
}

impl std::str::FromStr for ReplicaRole {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown role {s:?}: expected both, prefill or decode"))
    }
}

impl std::fmt::Display for ReplicaRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_and_print() {
        for r in ReplicaRole::ALL {
            assert_eq!(r.as_str().parse::<ReplicaRole>(), Ok(r));
        }
        assert!("both,prefill".parse::<ReplicaRole>().is_err());
        assert!(ReplicaRole::Decode.decodes() && !ReplicaRole::Decode.prefills());
        assert!(ReplicaRole::Prefill.prefills() && !ReplicaRole::Prefill.decodes());
    }
}
