//! The replica processes of `warmpath up`, supervised: a replica that exits is logged
//! (status and the end of its log) and started again on the same port after the delay
//! [`CrashHistory`] gives, or left down once it has crashed too often. The gateway keeps
//! serving on the others meanwhile, and takes a restarted replica back once it is healthy.

use crate::console::say;
use crate::error::{log_tail, StackError};
use crate::procs::Proc;
use crate::supervise::{CrashHistory, RestartPolicy, Verdict};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::oneshot::{self, error::TryRecvError};

/// Lines of a replica's log shown when it exits.
const TAIL_LINES: usize = 15;

/// How replicas are started.
#[derive(Clone, Debug)]
pub struct ReplicaSpec {
    /// The `replica` binary.
    pub bin: PathBuf,
    /// `--model` value; empty for the default model.
    pub model: String,
    /// Compute threads each.
    pub threads: usize,
    /// Where the logs go (`replica-N.log`).
    pub dir: PathBuf,
    /// How long a restarted replica may take to listen before it counts as a crash.
    pub ready_timeout: Duration,
}

impl ReplicaSpec {
    /// Starts `replica serve` number `index` on `port` (0: a free one). The receiver
    /// yields the address once it prints `listening on ADDR`.
    pub fn spawn(
        &self,
        index: usize,
        port: u16,
    ) -> Result<(Proc, oneshot::Receiver<String>), StackError> {
        let mut args = vec!["serve".to_string()];
        if !self.model.is_empty() {
            args.extend(["--model".to_string(), self.model.clone()]);
        }
        args.extend(["--port".to_string(), port.to_string()]);
        args.extend(["--threads".to_string(), self.threads.to_string()]);
        let (p, rx) = Proc::spawn(
            &format!("replica {index}"),
            &self.bin,
            &args,
            log_path(&self.dir, index),
            true,
        )?;
        let rx = rx.ok_or_else(|| StackError::Http("replica stdout not captured".into()))?;
        Ok((p, rx))
    }
}

fn log_path(dir: &Path, index: usize) -> PathBuf {
    dir.join(format!("replica-{index}.log"))
}

/// Waits for a replica's `listening on ADDR` line; returns ADDR.
pub async fn wait_listening(
    p: &mut Proc,
    rx: oneshot::Receiver<String>,
    timeout: Duration,
) -> Result<String, StackError> {
    let started = Instant::now();
    let mut rx = Box::pin(rx);
    loop {
        tokio::select! {
            addr = &mut rx => return match addr {
                Ok(a) => Ok(a),
                Err(_) => {
                    let status = p.wait().await.map_err(|e| StackError::io("wait replica", e))?;
                    Err(p.exited(status))
                }
            },
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                if let Some(s) = p.try_exited() {
                    return Err(p.exited(s));
                }
                if started.elapsed() > timeout {
                    return Err(p.not_ready(timeout));
                }
            }
        }
    }
}

enum State {
    /// Serving (or at least listening).
    Up(Proc),
    /// Restarted; waiting for its `listening on` line.
    Starting {
        proc: Proc,
        rx: oneshot::Receiver<String>,
        since: Instant,
    },
    /// Down; to be restarted at `until`.
    Waiting { until: Instant },
    /// Down for good.
    GaveUp,
}

struct Slot {
    index: usize,
    port: u16,
    state: State,
    history: CrashHistory,
    restarts: u32,
}

/// The supervised replicas.
pub struct Replicas {
    spec: ReplicaSpec,
    policy: RestartPolicy,
    /// Where to watch replica health, named in the restart log lines.
    dashboard: String,
    slots: Vec<Slot>,
}

impl Replicas {
    /// No replicas yet.
    pub fn new(spec: ReplicaSpec, policy: RestartPolicy, dashboard: String) -> Self {
        Self {
            spec,
            policy,
            dashboard,
            slots: Vec::new(),
        }
    }

    /// How replicas are started.
    pub fn spec(&self) -> &ReplicaSpec {
        &self.spec
    }

    /// Starts the next replica on a free port; [`Replicas::wait_ready`] waits for it.
    pub fn launch(&mut self) -> Result<oneshot::Receiver<String>, StackError> {
        let index = self.slots.len();
        let (proc, rx) = self.spec.spawn(index, 0)?;
        self.slots.push(Slot {
            index,
            port: 0,
            state: State::Up(proc),
            history: CrashHistory::new(self.policy, Instant::now()),
            restarts: 0,
        });
        Ok(rx)
    }

    /// Waits until launched replica `index` listens; returns its address. Its port is the
    /// one it gets on every restart.
    pub async fn wait_ready(
        &mut self,
        index: usize,
        rx: oneshot::Receiver<String>,
        timeout: Duration,
    ) -> Result<String, StackError> {
        let slot = self
            .slots
            .get_mut(index)
            .ok_or_else(|| StackError::Args(format!("no replica {index}")))?;
        let State::Up(proc) = &mut slot.state else {
            return Err(StackError::Args(format!("replica {index} is not starting")));
        };
        let addr = wait_listening(proc, rx, timeout).await?;
        slot.port = port_of(&addr)?;
        slot.history.started(Instant::now());
        say(format!(
            "replica {index} listening on {addr} (pid {})",
            pid_text(proc)
        ));
        Ok(addr)
    }

    /// Notices exits, restarts replicas whose delay has passed and takes in those that
    /// listen again. Call it every few hundred milliseconds.
    pub async fn tick(&mut self, now: Instant) {
        let (spec, policy, dashboard) = (&self.spec, &self.policy, &self.dashboard);
        let mut gave_up = false;
        for slot in &mut self.slots {
            gave_up |= step(slot, spec, policy, dashboard, now).await;
        }
        if gave_up && self.running() == 0 {
            say(format!(
                "no replica is left running: the gateway answers 503 until warmpath is \
                 restarted; logs in {}",
                self.spec.dir.display()
            ));
        }
    }

    /// Replicas up or starting.
    pub fn running(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s.state, State::Up(_) | State::Starting { .. }))
            .count()
    }

    /// Stops every replica process (last started first) and says how each ended.
    pub async fn stop_all(&mut self, grace: Duration) {
        for slot in self.slots.iter_mut().rev() {
            let proc = match &mut slot.state {
                State::Up(p) | State::Starting { proc: p, .. } => p,
                State::Waiting { .. } | State::GaveUp => continue,
            };
            let how = proc.stop(grace).await;
            say(format!("{}: {how}", proc.name));
        }
    }
}

/// Advances one replica; true when it was given up on now.
async fn step(
    slot: &mut Slot,
    spec: &ReplicaSpec,
    policy: &RestartPolicy,
    dashboard: &str,
    now: Instant,
) -> bool {
    let (i, port) = (slot.index, slot.port);
    match &mut slot.state {
        State::Up(proc) => {
            let Some(status) = proc.try_exited() else {
                return false;
            };
            say(format!(
                "replica {i} (port {port}, pid {}) exited ({status}); last lines of {}:\n{}",
                pid_text(proc),
                proc.log.display(),
                log_tail(&proc.log, TAIL_LINES)
            ));
            crashed(slot, policy, dashboard, now)
        }
        State::Starting { proc, rx, since } => {
            match rx.try_recv() {
                Ok(addr) => {
                    slot.restarts += 1;
                    say(format!(
                        "replica {i} listening on {addr} (pid {}, restart {}); the gateway \
                         takes it back once its health probe passes",
                        pid_text(proc),
                        slot.restarts
                    ));
                    slot.history.started(now);
                    let State::Starting { proc, .. } =
                        std::mem::replace(&mut slot.state, State::GaveUp)
                    else {
                        return false;
                    };
                    slot.state = State::Up(proc);
                    return false;
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => {}
            }
            if let Some(status) = proc.try_exited() {
                say(format!(
                    "replica {i} (port {port}) exited ({status}) before it listened; last \
                     lines of {}:\n{}",
                    proc.log.display(),
                    log_tail(&proc.log, TAIL_LINES)
                ));
            } else if now.saturating_duration_since(*since) > spec.ready_timeout {
                proc.kill().await;
                say(format!(
                    "replica {i} (port {port}) did not listen within {} s; killed it",
                    spec.ready_timeout.as_secs()
                ));
            } else {
                return false;
            }
            crashed(slot, policy, dashboard, now)
        }
        State::Waiting { until } => {
            if now < *until {
                return false;
            }
            mark_restart(&spec.dir, i);
            match spec.spawn(i, port) {
                Ok((proc, rx)) => {
                    say(format!("restarting replica {i} on port {port}"));
                    slot.state = State::Starting {
                        proc,
                        rx,
                        since: now,
                    };
                    false
                }
                Err(e) => {
                    say(format!("cannot restart replica {i} (port {port}): {e}"));
                    crashed(slot, policy, dashboard, now)
                }
            }
        }
        State::GaveUp => false,
    }
}

/// Records a crash of `slot` and schedules its restart or gives up; true when given up.
fn crashed(slot: &mut Slot, policy: &RestartPolicy, dashboard: &str, now: Instant) -> bool {
    let (i, port) = (slot.index, slot.port);
    let window = policy.window.as_secs();
    match slot.history.crashed(now) {
        Verdict::Restart { delay, crashes } => {
            say(format!(
                "replica {i} (port {port}): restart in {:.1} s ({crashes} crash(es) in the last \
                 {window} s); the gateway serves on the other replicas meanwhile; replica \
                 health: {dashboard}",
                delay.as_secs_f64()
            ));
            slot.state = State::Waiting { until: now + delay };
            false
        }
        Verdict::GiveUp { crashes } => {
            say(format!(
                "giving up on replica {i} (port {port}): {crashes} crashes within {window} s; \
                 it stays down until warmpath is restarted (see --restart-limit); the gateway \
                 serves on the other replicas; replica health: {dashboard}"
            ));
            slot.state = State::GaveUp;
            true
        }
    }
}

/// Appends a marker to replica `index`'s log, so each run's lines can be told apart.
fn mark_restart(dir: &Path, index: usize) {
    use std::io::Write;
    let path = log_path(dir, index);
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&path) {
        let _ = writeln!(f, "---- warmpath: restarting replica {index} ----");
    }
}

fn pid_text(p: &Proc) -> String {
    p.started_pid()
        .map_or_else(|| "?".to_string(), |n| n.to_string())
}

/// The port of `host:port`.
fn port_of(addr: &str) -> Result<u16, StackError> {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .ok_or_else(|| StackError::Http(format!("replica address without a port: {addr:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_is_read_from_the_listening_address() {
        assert_eq!(port_of("127.0.0.1:43121").expect("port"), 43121);
        assert!(port_of("127.0.0.1").is_err());
        assert!(port_of("127.0.0.1:x").is_err());
    }
}
