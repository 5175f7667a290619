//! The processes `warmpath up` starts: spawned in their own process group (so the
//! terminal's Ctrl-C reaches only `warmpath`, which then stops them in order), output
//! appended to a log file each, stopped with SIGINT and, past a deadline, SIGKILL.

use crate::error::{log_tail, StackError};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// A started process.
#[derive(Debug)]
pub struct Proc {
    /// Human name, e.g. `replica 1`.
    pub name: String,
    /// Its log file.
    pub log: PathBuf,
    child: Child,
    /// The pid it was started with, kept after it is reaped (for log lines).
    started_pid: Option<u32>,
}

fn open_log(path: &Path) -> Result<std::fs::File, StackError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| StackError::io(format!("open {}", path.display()), e))
}

impl Proc {
    /// Starts `bin args...` with stderr to `log`. With `watch_stdout`, stdout is copied to
    /// the log too and the first line containing `listening on ` yields the address after
    /// it through the returned receiver; otherwise stdout also goes to the log.
    pub fn spawn(
        name: &str,
        bin: &Path,
        args: &[String],
        log: PathBuf,
        watch_stdout: bool,
    ) -> Result<(Self, Option<oneshot::Receiver<String>>), StackError> {
        let err = open_log(&log)?;
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .stdin(Stdio::null())
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true);
        if watch_stdout {
            cmd.stdout(Stdio::piped());
        } else {
            cmd.stdout(open_log(&log)?);
        }
        let mut child = cmd.spawn().map_err(|source| StackError::Spawn {
            what: format!("{name} ({})", bin.display()),
            source,
        })?;
        let rx = match child.stdout.take() {
            Some(out) => {
                let (tx, rx) = oneshot::channel();
                let log_path = log.clone();
                tokio::spawn(async move {
                    let mut tx = Some(tx);
                    let mut lines = BufReader::new(out).lines();
                    let mut file = tokio::fs::OpenOptions::new()
                        .append(true)
                        .open(&log_path)
                        .await
                        .ok();
                    while let Ok(Some(line)) = lines.next_line().await {
                        if let Some(addr) = line.split("listening on ").nth(1) {
                            if let Some(tx) = tx.take() {
                                let addr = addr.split_whitespace().next().unwrap_or("");
                                let _ = tx.send(addr.to_string());
                            }
                        }
                        if let Some(f) = file.as_mut() {
                            let _ = f.write_all(format!("{line}\n").as_bytes()).await;
                        }
                    }
                });
                Some(rx)
            }
            None => None,
        };
        Ok((
            Self {
                name: name.to_string(),
                log,
                started_pid: child.id(),
                child,
            },
            rx,
        ))
    }

    /// The error describing this process's unexpected exit.
    pub fn exited(&self, status: std::process::ExitStatus) -> StackError {
        StackError::Exited {
            what: self.name.clone(),
            status: status.to_string(),
            log: self.log.clone(),
            tail: log_tail(&self.log, 15),
        }
    }

    /// The error describing a readiness timeout.
    pub fn not_ready(&self, waited: Duration) -> StackError {
        StackError::NotReady {
            what: self.name.clone(),
            secs: waited.as_secs(),
            log: self.log.clone(),
            tail: log_tail(&self.log, 15),
        }
    }

    /// Exit status if it has exited.
    pub fn try_exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits for the process to exit.
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    /// The pid it was started with, also after it exited (never use it to signal).
    pub fn started_pid(&self) -> Option<u32> {
        self.started_pid
    }

    /// OS process id (None once reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// SIGKILL, then reap it.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGINT (the graceful stop of both `replica serve` and `gateway`), then SIGKILL if it
    /// is still running after `grace`. Returns how it ended.
    pub async fn stop(&mut self, grace: Duration) -> String {
        if let Some(s) = self.try_exited() {
            return format!("had already exited ({s})");
        }
        if let Some(pid) = self.pid() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGINT);
        }
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(s)) if s.success() => "stopped".to_string(),
            Ok(Ok(s)) => format!("stopped ({s})"),
            Ok(Err(e)) => format!("wait failed: {e}"),
            Err(_) => {
                let _ = self.child.kill().await;
                format!("killed after {} s", grace.as_secs())
            }
        }
    }
}
