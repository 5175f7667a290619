//! Subcommands other than `serve`. (owner: engine)
