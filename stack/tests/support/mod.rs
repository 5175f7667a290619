//! Helpers shared by the `warmpath up` tests: the binaries, free ports, and [`Stack`], a
//! running `warmpath up` that is stopped (with every child it had) when dropped.
#![allow(dead_code, unreachable_pub)]

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().and_then(|d| d.parent()).unwrap().join(name);
    assert!(
        p.is_file(),
        "{} not found: run `cargo build -p replica -p gateway -p warmpath` (same profile and target dir) first",
        p.display()
    );
    p
}

/// A port `p` with `p + 1` free too (gateway and admin listener).
pub fn free_port_pair() -> u16 {
    for _ in 0..50 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        if p < 65000 && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair");
}

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// The direct children of `pid`, from procfs.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut kids: Vec<u32> = tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    kids.sort_unstable();
    kids.dedup();
    kids
}

/// A process's identity: its start time in clock ticks (field 22 of `/proc/PID/stat`),
/// so a recycled pid is not mistaken for it. `None` once it is gone (or a zombie).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // after_comm starts at field 3 (state); field 22 is index 19.
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Reads `r` line by line into `tx` until EOF, so the child never blocks on a full pipe.
pub fn drain(r: impl Read + Send + 'static, tx: mpsc::Sender<String>) {
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
}

/// `warmpath up` running; stopped (with all its children) when dropped.
pub struct Stack {
    pub child: Child,
    /// stdout lines.
    pub out: mpsc::Receiver<String>,
    /// stderr lines.
    pub err: mpsc::Receiver<String>,
    /// Children seen while it ran: (pid, start time).
    pub kids: Vec<(u32, u64)>,
}

impl Stack {
    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(bin("warmpath"))
            .arg("up")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, out) = mpsc::channel();
        drain(child.stdout.take().unwrap(), tx);
        let (tx, err) = mpsc::channel();
        drain(child.stderr.take().unwrap(), tx);
        Stack {
            child,
            out,
            err,
            kids: Vec::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything on stderr so far.
    pub fn stderr(&self) -> String {
        self.err.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// Reads stdout until a line contains `marker`; returns all lines read.
    pub fn read_until(&mut self, marker: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let mut text = String::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(line) => {
                    let done = line.contains(marker);
                    text.push_str(&line);
                    text.push('\n');
                    if done {
                        return text;
                    }
                }
                Err(_) => panic!(
                    "no {marker:?} from warmpath within {} s; stdout:\n{text}\nstderr:\n{}",
                    timeout.as_secs(),
                    self.stderr()
                ),
            }
        }
    }

    /// Notes the current children (replicas, gateway) so that they can be checked later.
    pub fn record_children(&mut self) {
        for pid in children_of(self.pid()) {
            if let Some(t) = start_time(pid) {
                if !self.kids.iter().any(|k| k.0 == pid) {
                    self.kids.push((pid, t));
                }
            }
        }
    }

    /// Children seen earlier that still run (same pid and start time).
    pub fn live_children(&self) -> Vec<u32> {
        self.kids
            .iter()
            .filter(|(pid, t)| start_time(*pid) == Some(*t))
            .map(|k| k.0)
            .collect()
    }

    /// Waits for `warmpath` to exit; `None` on timeout.
    pub fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.record_children();
            let _ = kill(Pid::from_raw(self.pid() as i32), Signal::SIGTERM);
            if self.wait(STOP_TIMEOUT).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        for pid in self.live_children() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
}

/// The admin key the stack tests pass to `warmpath up --admin-key`.
pub const ADMIN_KEY: &str = "wp-admin-stack-tests";

/// `GET path` on the admin listener with [`ADMIN_KEY`].
pub fn admin_get(admin: &str, path: &str) -> Result<warmpath::probe::Reply, warmpath::StackError> {
    block_on(warmpath::probe::request(
        admin,
        "GET",
        path,
        &[("authorization", &format!("Bearer {ADMIN_KEY}"))],
        None,
        Duration::from_secs(5),
    ))
}
