//! The Lua scripts the fleet runs in Redis: `admit.lua` (one call per admission) and
//! `settle.lua` (one call when a request ends), each sent once and then run by its SHA-1.

use redis::Script;

/// The two scripts, hashed once.
pub(crate) struct Scripts {
    /// `admit.lua`.
    pub admit: Script,
    /// `settle.lua`.
    pub settle: Script,
}

impl Scripts {
    /// Loads the script texts.
    pub(crate) fn new() -> Self {
        Self {
            admit: Script::new(include_str!("admit.lua")),
            settle: Script::new(include_str!("settle.lua")),
        }
    }
}

impl Default for Scripts {
    fn default() -> Self {
        Self::new()
    }
}
