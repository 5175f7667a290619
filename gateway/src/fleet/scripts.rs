//! The Lua scripts the fleet runs in Redis: `admit.lua` (one call per admission),
//! `settle.lua` (one call when a request ends), `rollout_write.lua` and
//! `rollout_progress.lua` (a shared rollout's compare-and-set writes), each sent once and
//! then run by its SHA-1.

use redis::Script;

/// The scripts, hashed once.
pub(crate) struct Scripts {
    /// `admit.lua`.
    pub admit: Script,
    /// `settle.lua`.
    pub settle: Script,
    /// `rollout_write.lua`.
    pub rollout_write: Script,
    /// `rollout_progress.lua`.
    pub rollout_progress: Script,
}

impl Scripts {
    /// Loads the script texts.
    pub(crate) fn new() -> Self {
        Self {
            admit: Script::new(include_str!("admit.lua")),
            settle: Script::new(include_str!("settle.lua")),
            rollout_write: Script::new(include_str!("rollout_write.lua")),
            rollout_progress: Script::new(include_str!("rollout_progress.lua")),
        }
    }
}

impl Default for Scripts {
    fn default() -> Self {
        Self::new()
    }
}
