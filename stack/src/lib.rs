//! # warmpath
//!
//! `warmpath up`: the whole Warmpath stack in one command. It starts N `replica serve`
//! processes and one `gateway` on 127.0.0.1 (the binaries next to its own executable),
//! writes the gateway a config with one development tenant, waits until every replica is
//! registered and healthy, prints the endpoint, a curl example, the dashboard URL and the
//! API key, and stops everything it started on Ctrl-C, SIGTERM or SIGHUP.
//!
//! While it serves, a replica that exits is a fault to survive: `warmpath` logs its exit
//! status and the end of its log and restarts it on the same port after a capped
//! exponential backoff (0.5 s doubling to 10 s by default, reset after 30 s up), giving up
//! on it only after 5 crashes within 60 s (`--restart-*` flags). The gateway ejects the
//! dead replica, serves on the others, and re-admits the restarted one once its health
//! probe passes. Only the gateway's exit or a stop signal stops the stack.
//!
//! Exit status: 0 stopped by a signal, 1 could not start, 2 command-line usage error, 3
//! the gateway exited while serving ([`up::EXIT_CODES`]).
//!
//! # Layout
//! - [`up`]: the command ([`up::UpArgs`], [`up::run`]).
//! - [`args`]: the flags of `warmpath up` ([`args::UpArgs`], also [`up::UpArgs`]).
//! - [`launch`]: the gateway process of both modes: binaries, ports, readiness, banner.
//! - [`epp`]: `warmpath epp`: the gateway's Endpoint Picker mode in the foreground.
//! - [`front`]: `warmpath up --upstream`: the gateway alone, in front of existing servers.
//! - [`replicas`]: the replica processes, supervised and restarted.
//! - [`supervise`]: the restart policy (backoff, giving up) as pure logic.
//! - [`config`]: the generated gateway config and API keys.
//! - [`procs`]: child processes (own process group, log files, SIGINT then SIGKILL).
//! - [`signals`]: the stop signals.
//! - [`probe`]: a loopback HTTP client (hyper) for readiness checks.
//! - [`console`]: progress lines on stdout.
//! - [`error`]: the crate's error type, [`StackError`].

pub mod args;
pub mod config;
pub mod console;
pub mod epp;
pub mod error;
pub mod front;
pub mod launch;
pub mod probe;
pub mod procs;
pub mod replicas;
pub mod signals;
pub mod supervise;
pub mod up;

pub use error::StackError;
