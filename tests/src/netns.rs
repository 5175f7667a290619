//! A network namespace made by a test, to cut one client off a server as a real partition
//! does. The namespace holds the server; each client reaches it through its own veth pair,
//! so one link can be taken down (every packet on it vanishes: connections hang, nothing is
//! refused) and brought up again while the other links carry on. Link K has host end
//! `198.18.B.1` and namespace end `198.18.B.2` (B: its block, by process), in the range
//! RFC 2544 sets aside for network tests, so never a real network. Needs root and iproute2
//! (`ip netns`), as CI has.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// A namespace with `links` veth pairs to the host; removed on drop.
pub struct Netns {
    /// The namespace's name (`wpc<pid>`).
    pub name: String,
    /// The first link's third octet.
    base: usize,
    links: usize,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("`ip` not found: install iproute2")?;
    if !out.status.success() {
        bail!(
            "ip {}: {} (network namespaces need root and iproute2; run the tests as root, as CI does)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Netns {
    /// Makes the namespace and its `links` pairs (at most 3), all up.
    pub fn new(links: usize) -> Result<Self> {
        assert!(links <= 3, "at most 3 links");
        let pid = std::process::id();
        let ns = Self {
            name: format!("wpc{pid}"),
            // By process: two test runs side by side never share a block.
            base: (pid as usize % 80) * 3,
            links,
        };
        // A namespace left by a crashed run of the same pid would make `add` fail.
        let _ = Command::new("ip").args(["netns", "del", &ns.name]).output();
        ip(&["netns", "add", &ns.name])?;
        ns.exec_ip(&["link", "set", "lo", "up"])?;
        for k in 0..links {
            let (host, inner) = (ns.host_if(k), ns.inner_if(k));
            let _ = Command::new("ip").args(["link", "del", &host]).output();
            ip(&[
                "link", "add", &host, "type", "veth", "peer", "name", &inner, "netns", &ns.name,
            ])?;
            ip(&[
                "addr",
                "add",
                &format!("{}/24", ns.addr(k, 1)),
                "dev",
                &host,
            ])?;
            ip(&["link", "set", &host, "up"])?;
            ns.exec_ip(&[
                "addr",
                "add",
                &format!("{}/24", ns.addr(k, 2)),
                "dev",
                &inner,
            ])?;
            ns.exec_ip(&["link", "set", &inner, "up"])?;
        }
        Ok(ns)
    }

    fn host_if(&self, k: usize) -> String {
        format!("{}h{k}", self.name)
    }

    fn inner_if(&self, k: usize) -> String {
        format!("{}n{k}", self.name)
    }

    fn addr(&self, k: usize, host: u8) -> String {
        format!("198.18.{}.{host}", self.base + k)
    }

    fn exec_ip(&self, args: &[&str]) -> Result<()> {
        let mut all = vec!["netns", "exec", &self.name, "ip"];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// The address the host reaches the namespace at through link `k`.
    pub fn server_addr(&self, k: usize) -> String {
        self.addr(k, 2)
    }

    /// The command prefix that runs a program inside the namespace (`ip netns exec NAME`;
    /// the program keeps its pid, so signals reach it).
    pub fn exec_prefix(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.name]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    /// Cuts link `k`: its namespace end goes down and every packet on it is lost.
    pub fn cut(&self, k: usize) -> Result<()> {
        self.exec_ip(&["link", "set", &self.inner_if(k), "down"])
    }

    /// Mends link `k`.
    pub fn mend(&self, k: usize) -> Result<()> {
        self.exec_ip(&["link", "set", &self.inner_if(k), "up"])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for k in 0..self.links {
            let _ = Command::new("ip")
                .args(["link", "del", &self.host_if(k)])
                .output();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
