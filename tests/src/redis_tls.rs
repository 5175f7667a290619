//! Redis over TLS for the TLS tests (issue 44, item 3): a throwaway PKI made with the
//! `openssl` CLI (a CA, a server certificate for `IP:127.0.0.1`, a client certificate, and
//! a second CA that signed nothing), and Debian's `redis-server` serving TLS only
//! (`--port 0 --tls-port P`) with an ACL file, alone or as a three-master Cluster
//! (`tls-cluster yes`). `redis-cli --tls` reaches each server as the admin.

use crate::procs::free_port;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NO_OPENSSL: &str =
    "openssl not found: install Debian's openssl (scripts/ci-deps.sh does); the TLS tests make their certificates with it";
const NO_REDIS: &str =
    "redis-server not found: install Debian's redis-server and redis-tools (scripts/ci-deps.sh does)";

/// Runs `openssl args...` in `dir`; fails with its stderr.
fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let mut cmd = Command::new("openssl");
    cmd.current_dir(dir).args(args);
    run(cmd, NO_OPENSSL)
}

/// Runs `cmd` to its end (`missing`: what to install when it is not found); fails with
/// its output when it fails.
fn run(mut cmd: Command, missing: &str) -> Result<()> {
    let out = cmd.output().with_context(|| missing.to_string())?;
    if !out.status.success() {
        let output = [out.stdout, out.stderr].concat();
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&output));
    }
    Ok(())
}

/// Polls `ready` every 50 ms until it holds (`Ok`) or `within` passes (`Err`).
fn poll(within: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(())
}

/// A test PKI in a directory: `ca.pem` signed `server.pem` (`IP:127.0.0.1`) and
/// `client.pem` (CN `warmpath`); `other-ca.pem` is a CA that signed neither. Keys are
/// P-256, PKCS#8, beside each certificate (`*.key`).
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Makes the PKI in `dir` (created).
    pub fn make(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "other-ca"] {
            let (key, pem, subj) = (
                format!("{ca}.key"),
                format!("{ca}.pem"),
                format!("/CN=warmpath test {ca}"),
            );
            let mut args = vec![
                "req", "-x509", "-days", "2", "-keyout", &key, "-out", &pem, "-subj", &subj,
            ];
            args.extend(ec);
            args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
            args.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
            openssl(dir, &args)?;
        }
        // A Cluster's nodes present their server certificate to each other on the bus, as
        // clients: it serves both purposes.
        let leaves = [
            (
                "server",
                "/CN=127.0.0.1",
                "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
            ),
            ("client", "/CN=warmpath", "extendedKeyUsage=clientAuth\n"),
        ];
        for (serial, (name, subj, ext)) in leaves.into_iter().enumerate() {
            let (key, csr, pem, cnf) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.pem"),
                format!("{name}.ext"),
            );
            let ext =
                format!("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n{ext}");
            std::fs::write(dir.join(&cnf), ext)?;
            let mut req = vec!["req", "-keyout", &key, "-out", &csr, "-subj", subj];
            req.extend(ec);
            openssl(dir, &req)?;
            let serial = (serial + 2).to_string();
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-set_serial",
                    &serial,
                    "-days",
                    "2",
                    "-extfile",
                    &cnf,
                    "-out",
                    &pem,
                ],
            )?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// A file of the PKI (`ca.pem`, `other-ca.pem`, `server.pem`, `client.key`, ...).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// [`Self::path`] as a string, for a config or a command line.
    pub fn file(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// `redis-cli`'s TLS flags: trust the CA, present the client certificate.
    fn cli_args(&self) -> [String; 7] {
        [
            "--tls".into(),
            "--cacert".into(),
            self.file("ca.pem"),
            "--cert".into(),
            self.file("client.pem"),
            "--key".into(),
            self.file("client.key"),
        ]
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch(what: &str, port: u16) -> PathBuf {
    std::env::temp_dir().join(format!(
        "warmpath-redis-tls-{what}-{}-{port}",
        std::process::id()
    ))
}

/// A `redis-server` serving TLS only, with the users of an ACL file. Killed on drop.
pub struct TlsRedis {
    child: Option<Child>,
    /// Its TLS port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    /// The certificates it serves and trusts.
    pub pki: Arc<Pki>,
    admin: (String, String),
}

impl TlsRedis {
    /// Starts a server on a free port with `acl` (ACL file lines) and a PKI of its own;
    /// `redis-cli` logs in as `admin` (user, password), which `acl` must define. `mutual`:
    /// clients must present a certificate of the CA (`tls-auth-clients yes`).
    pub fn start(acl: &str, admin: (&str, &str), mutual: bool) -> Result<Self> {
        let port = free_port();
        let pki = Arc::new(Pki::make(&scratch("pki", port))?);
        let auth_clients = if mutual { "yes" } else { "no" };
        Self::spawn(pki, port, acl, admin, &["--tls-auth-clients", auth_clients])
    }

    fn spawn(
        pki: Arc<Pki>,
        port: u16,
        acl: &str,
        admin: (&str, &str),
        extra: &[&str],
    ) -> Result<Self> {
        let dir = scratch("server", port);
        std::fs::create_dir_all(&dir)?;
        let acl_file = dir.join("users.acl");
        std::fs::write(&acl_file, acl)?;
        let log = std::fs::File::create(dir.join("redis.log"))?;
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .args(["--tls-port", &port.to_string()])
            .args(["--tls-cert-file", &pki.file("server.pem")])
            .args(["--tls-key-file", &pki.file("server.key")])
            .args(["--tls-ca-cert-file", &pki.file("ca.pem")])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--aclfile")
            .arg(&acl_file)
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .context(NO_REDIS)?;
        let s = Self {
            child: Some(child),
            port,
            dir,
            pki,
            admin: (admin.0.into(), admin.1.into()),
        };
        let pong = || s.cli(&["PING"]).is_ok_and(|o| o.trim() == "PONG");
        if poll(Duration::from_secs(10), pong).is_err() {
            bail!(
                "redis-server (TLS port {port}) did not answer PING; its log: {}",
                std::fs::read_to_string(s.dir.join("redis.log")).unwrap_or_default()
            )
        }
        Ok(s)
    }

    /// `rediss://USER@127.0.0.1:PORT`.
    pub fn url(&self, user: &str) -> String {
        format!("rediss://{user}@127.0.0.1:{}", self.port)
    }

    /// The server's scratch directory (removed with it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A file in [`Self::dir`] holding `password` and a newline (a password file).
    pub fn password_file(&self, name: &str, password: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, format!("{password}\n")).expect("password file");
        p.display().to_string()
    }

    /// Runs `redis-cli --tls ... args` as the admin (with the client certificate) and
    /// returns its output.
    pub fn cli(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(self.pki.cli_args())
            .args(["--user", &self.admin.0, "--pass", &self.admin.1])
            .arg("--no-auth-warning")
            .args(args)
            .output()
            .context("redis-cli not found: install Debian's redis-tools")?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || text.starts_with("ERR") || text.starts_with("NOPERM") {
            bail!(
                "redis-cli --tls {args:?}: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(text.into_owned())
    }

    /// The keys matching `pattern` (`KEYS`, fine on a test server).
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        self.cli(&["KEYS", pattern])
            .expect("KEYS")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// A Redis Cluster of `n` TLS-only masters (no replicas) on loopback, one PKI for all
/// (every node's certificate names `IP:127.0.0.1`, the address each announces).
pub struct TlsRedisCluster {
    /// The nodes.
    pub nodes: Vec<TlsRedis>,
}

impl TlsRedisCluster {
    /// Starts `n` cluster-enabled servers with `acl`, joins them with `redis-cli --cluster
    /// create` as `admin` and waits for `cluster_state:ok` on every node.
    pub fn start(n: usize, acl: &str, admin: (&str, &str)) -> Result<Self> {
        let pki = Arc::new(Pki::make(&scratch("cluster-pki", free_port()))?);
        let nodes = (0..n)
            .map(|_| {
                let bus = free_port().to_string();
                let args = [
                    "--tls-auth-clients",
                    "no",
                    "--tls-cluster",
                    "yes",
                    "--cluster-enabled",
                    "yes",
                ];
                let more = ["--cluster-port", &bus, "--cluster-node-timeout", "2000"];
                let extra: Vec<&str> = args.into_iter().chain(more).collect();
                TlsRedis::spawn(pki.clone(), free_port(), acl, admin, &extra)
            })
            .collect::<Result<Vec<_>>>()?;
        let addrs: Vec<String> = nodes
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        // `timeout`: redis-cli waits for the nodes to join without end.
        let mut create = Command::new("timeout");
        create
            .args(["30", "redis-cli"])
            .args(pki.cli_args())
            .args(["--user", admin.0, "--pass", admin.1, "--no-auth-warning"])
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"]);
        run(create, "redis-cli not found: install Debian's redis-tools")?;
        let joined = |s: &TlsRedis| {
            s.cli(&["CLUSTER", "INFO"])
                .is_ok_and(|o| o.contains("cluster_state:ok"))
        };
        if poll(Duration::from_secs(30), || nodes.iter().all(joined)).is_err() {
            bail!("the TLS Redis Cluster never reached cluster_state:ok");
        }
        Ok(Self { nodes })
    }

    /// The seed URLs, `rediss://USER@127.0.0.1:PORT` for every node.
    pub fn urls(&self, user: &str) -> Vec<String> {
        self.nodes.iter().map(|n| n.url(user)).collect()
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The sum of a replica's `/metrics` samples named `sample`: an exact sample with labels
/// (`name{a="b"}`), or a bare name, which sums it over all its labels. 0 when absent.
pub fn replica_metric(addr: &str, sample: &str) -> f64 {
    let body = crate::http::get(addr, "/metrics", &[])
        .expect("replica /metrics")
        .text();
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(s, _)| {
            *s == sample || (!sample.contains('{') && s.split('{').next() == Some(sample))
        })
        .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
        .sum()
}
