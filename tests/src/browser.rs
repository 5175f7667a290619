//! A headless Chromium for the end-to-end tests, driven over the W3C WebDriver protocol
//! (chromedriver on a free loopback port): open a page, run a script in it, take a
//! screenshot, and log in to the gateway's dashboard. Needs Debian's `chromium` and
//! `chromium-driver` (`scripts/ci-deps.sh` installs them); without them a test fails with a
//! message saying what to install.

use crate::http::{get, request};
use crate::procs::free_port;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What to do when the browser is missing.
pub const INSTALL: &str = "install Chromium and its WebDriver: apt-get install -y chromium chromium-driver (scripts/ci-deps.sh does it)";

/// The first of `names` on `PATH`.
pub fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names.iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

/// chromedriver on a free port, killed on drop.
pub struct Driver {
    child: Child,
    addr: String,
}

impl Driver {
    pub fn start() -> Self {
        let bin =
            which(&["chromedriver"]).unwrap_or_else(|| panic!("chromedriver not found: {INSTALL}"));
        let port = free_port();
        let child = Command::new(bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start chromedriver ({e}): {INSTALL}"));
        let d = Driver {
            child,
            addr: format!("127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if get(&d.addr, "/status", &[])
                .is_ok_and(|r| r.json().is_ok_and(|v| v["value"]["ready"] == true))
            {
                return d;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("chromedriver did not become ready: {INSTALL}");
    }

    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let bytes = body.map(|b| b.to_string().into_bytes());
        let r = request(&self.addr, method, path, &[], bytes.as_deref())
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        let v = r
            .json()
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: not JSON ({e})"));
        assert_eq!(r.status, 200, "WebDriver {method} {path}: {v}");
        v["value"].clone()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser session.
pub struct Browser<'a> {
    driver: &'a Driver,
    id: String,
}

impl<'a> Browser<'a> {
    pub fn open(driver: &'a Driver) -> Self {
        let chromium = which(&["chromium", "chromium-browser"])
            .unwrap_or_else(|| panic!("chromium not found: {INSTALL}"));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1500", "--no-first-run"]
            }
        }}});
        let v = driver.call("POST", "/session", Some(caps));
        let id = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("WebDriver gave no session id: {v}"))
            .to_string();
        Browser { driver, id }
    }

    pub fn goto(&self, url: &str) {
        self.driver.call(
            "POST",
            &format!("/session/{}/url", self.id),
            Some(json!({ "url": url })),
        );
    }

    pub fn eval(&self, script: &str) -> Value {
        self.driver.call(
            "POST",
            &format!("/session/{}/execute/sync", self.id),
            Some(json!({"script": script, "args": []})),
        )
    }

    /// As [`Self::eval`], `None` when the browser cannot run it now (mid-navigation).
    pub fn try_eval(&self, script: &str) -> Option<Value> {
        let body = json!({"script": script, "args": []}).to_string();
        let r = request(
            &self.driver.addr,
            "POST",
            &format!("/session/{}/execute/sync", self.id),
            &[],
            Some(body.as_bytes()),
        )
        .ok()?;
        (r.status == 200)
            .then(|| r.json().ok())??
            .get("value")
            .cloned()
    }

    pub fn screenshot(&self) -> Vec<u8> {
        let v = self
            .driver
            .call("GET", &format!("/session/{}/screenshot", self.id), None);
        base64_decode(
            v.as_str()
                .unwrap_or_else(|| panic!("WebDriver screenshot is not a string: {v}")),
        )
    }
}

impl Drop for Browser<'_> {
    fn drop(&mut self) {
        let _ = request(
            &self.driver.addr,
            "DELETE",
            &format!("/session/{}", self.id),
            &[],
            None,
        );
    }
}

/// Decodes standard base64 (a WebDriver screenshot).
pub fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("bad base64 byte {c}"),
    };
    let clean: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// Waits until `script` returns `want`.
pub fn wait_eval(b: &Browser, script: &str, want: &Value, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let got = b.try_eval(script);
        if got.as_ref() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{script} gave {got:?}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The dashboard sends a browser without a session to its login page; a wrong key is
/// refused there, the admin key opens the dashboard.
pub fn log_in(b: &Browser, admin_key: &str) {
    let path = "return window.location.pathname;";
    wait_eval(b, path, &json!("/dashboard/login"), Duration::from_secs(10));
    let submit = |key: &str| {
        b.eval(&format!(
            "document.getElementById('error').textContent = '';             document.getElementById('key').value = {key:?};             document.getElementById('submit').click(); return true;"
        ));
    };
    submit("not-the-admin-key");
    wait_eval(
        b,
        "return document.getElementById('error').textContent;",
        &json!("Wrong admin key."),
        Duration::from_secs(10),
    );
    submit(admin_key);
    wait_eval(
        b,
        "return window.location.pathname + ':' + !!document.getElementById('status');",
        &json!("/dashboard:true"),
        Duration::from_secs(10),
    );
}
