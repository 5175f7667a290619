//! Real Redis for the fleet tests: Debian's `redis-server` on loopback, alone or as a
//! three-master Redis Cluster made with `redis-cli --cluster create`. Each server keeps
//! nothing on disk (no RDB, no AOF), so a restart comes back empty.

use crate::netns::Netns;
use crate::procs::free_port;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL: &str =
    "redis-server not found: install Debian's redis-server and redis-tools (scripts/ci-deps.sh does)";

/// The ACL of docs/security.md's deployment guidance (users `admin`, `gateway`, `replica`
/// and `readonly`), each with the password `<user>-pw`.
pub const DOCS_ACL: &str = "\
user default off
user admin on >admin-pw ~* &* +@all
user gateway on >gateway-pw ~warmpath:* resetchannels +@all -@dangerous +config|get
user replica on >replica-pw ~wpkv:* resetchannels -@all +@connection +get +mget +set
user readonly on >readonly-pw ~* resetchannels -@all +@connection +@read
";

/// One `redis-server` process.
pub struct RedisServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    cluster: bool,
    /// Extra `redis-server` arguments.
    extra: Vec<String>,
    /// The user and password `redis-cli` logs in with, on a server with an ACL.
    auth: Option<(String, String)>,
    /// What runs `redis-server` and `redis-cli` (empty, or `ip netns exec NAME`).
    prefix: Vec<String>,
    /// The address it listens on.
    bind: String,
}

impl RedisServer {
    /// Starts a server on a free port.
    pub fn start() -> Result<Self> {
        Self::start_on(free_port(), false)
    }

    /// Starts a server on a free port whose users are those of `acl` (ACL file lines, e.g.
    /// `user gateway on >pw ~warmpath:* +@all`), with `extra` server arguments;
    /// [`Self::cli`] logs in as `admin` (user, password), which `acl` must define.
    pub fn start_with_acl(acl: &str, admin: (&str, &str), extra: &[&str]) -> Result<Self> {
        let mut s = Self::new(free_port(), false)?;
        let file = s.dir.join("users.acl");
        std::fs::write(&file, acl)?;
        s.extra = vec!["--aclfile".into(), file.display().to_string()];
        s.extra.extend(extra.iter().map(|a| a.to_string()));
        s.auth = Some((admin.0.into(), admin.1.into()));
        s.spawn()?;
        Ok(s)
    }

    /// Starts a server inside `ns`, listening on every address there (the host reaches it
    /// at [`Netns::server_addr`] on [`Self::port`]); [`Self::cli`] runs inside `ns` too.
    pub fn start_in(ns: &Netns) -> Result<Self> {
        let mut s = Self::new(free_port(), false)?;
        s.prefix = ns.exec_prefix();
        s.bind = "0.0.0.0".into();
        s.spawn()?;
        Ok(s)
    }

    fn start_on(port: u16, cluster: bool) -> Result<Self> {
        let mut s = Self::new(port, cluster)?;
        s.spawn()?;
        Ok(s)
    }

    fn new(port: u16, cluster: bool) -> Result<Self> {
        let dir =
            std::env::temp_dir().join(format!("warmpath-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            child: None,
            port,
            dir,
            cluster,
            extra: Vec::new(),
            auth: None,
            prefix: Vec::new(),
            bind: "127.0.0.1".into(),
        })
    }

    /// The server's scratch directory (removed with it).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// `program`, run through [`Self::prefix`].
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.prefix.first().map_or(program, String::as_str));
        if !self.prefix.is_empty() {
            cmd.args(&self.prefix[1..]).arg(program);
        }
        cmd
    }

    fn spawn(&mut self) -> Result<()> {
        let mut cmd = self.command("redis-server");
        cmd.args(["--bind", &self.bind, "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra);
        if self.cluster {
            cmd.args(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"]);
            cmd.args(["--cluster-config-file", "nodes.conf"]);
        }
        let log = std::fs::File::create(self.dir.join("redis.log"))?;
        let child = cmd
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .context(INSTALL)?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.cli(&["PING"]).is_ok_and(|o| o.trim() == "PONG") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("redis-server on port {} did not answer PING", self.port)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Runs `redis-cli -p PORT args...` and returns its output.
    pub fn cli(&self, args: &[&str]) -> Result<String> {
        let out = self
            .command("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(self.auth.iter().flat_map(|(u, p)| {
                [
                    "--user",
                    u.as_str(),
                    "--pass",
                    p.as_str(),
                    "--no-auth-warning",
                ]
            }))
            .args(args)
            .output()
            .context("redis-cli not found: install Debian's redis-tools")?;
        // redis-cli exits 0 on a refused command; the error is its output.
        let text = String::from_utf8_lossy(&out.stdout);
        if text.starts_with("NOPERM") || text.starts_with("WRONGPASS") || text.starts_with("NOAUTH")
        {
            bail!("redis-cli {args:?}: {text}");
        }
        if !out.status.success() {
            bail!(
                "redis-cli {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(text.into_owned())
    }

    /// Kills the server (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the server (SIGSTOP): connections stay open and nothing is answered, a hung
    /// Redis. Commands sent meanwhile run, in order, after [`Self::resume`].
    pub fn pause(&self) {
        if let Some(c) = &self.child {
            crate::procs::signal(c, "STOP");
        }
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        if let Some(c) = &self.child {
            crate::procs::signal(c, "CONT");
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        self.spawn()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster of `n` masters (no replicas) on loopback.
pub struct RedisCluster {
    /// The nodes.
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `n` cluster-enabled servers and joins them with `redis-cli --cluster create`,
    /// then waits for `cluster_state:ok` on every node.
    pub fn start(n: usize) -> Result<Self> {
        let nodes = (0..n)
            .map(|_| RedisServer::start_on(free_port(), true))
            .collect::<Result<Vec<_>>>()?;
        let addrs: Vec<String> = nodes
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .context("redis-cli not found: install Debian's redis-tools")?;
        if !out.status.success() {
            bail!(
                "redis-cli --cluster create: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if nodes.iter().all(|s| {
                s.cli(&["CLUSTER", "INFO"])
                    .is_ok_and(|o| o.contains("cluster_state:ok"))
            }) {
                return Ok(Self { nodes });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("Redis Cluster never reached cluster_state:ok")
    }

    /// The seed URLs, one per node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}

/// libfaketime's preload library (Debian's `faketime` package), for clock-skew tests.
pub fn libfaketime() -> PathBuf {
    let p = PathBuf::from("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1");
    assert!(
        p.exists(),
        "{} not found: install Debian's faketime (scripts/ci-deps.sh does)",
        p.display()
    );
    p
}
