//! A Kubernetes API server stand-in for discovery tests: collections of objects (e.g. a
//! namespace's EndpointSlices or pods) served as the API server serves them, over plain
//! HTTP on loopback. `GET collection` is a LIST (`{kind}List`, the collection's
//! `resourceVersion`, items without `kind`/`apiVersion`); with `watch=true` a WATCH: one
//! JSON event per line (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`), first the
//! history after the request's `resourceVersion`, then live events, in a chunked body held
//! open. A `resourceVersion` older than the last compaction ([`KubeApi::expire`]) gets the
//! `ERROR` event with a 410 `Status` (`reason: Expired`), as a real server sends it, and
//! every open watch gets it too and ends: the client must LIST again. `GET
//! collection/NAME` reads one object. Requests are recorded for assertions.
//!
//! [`KubeApi::kubeconfig`] writes a kubeconfig naming it, for a client's `KUBECONFIG`.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Collection {
    kind: String,
    api_version: String,
    objects: BTreeMap<String, Value>,
}

#[derive(Default)]
struct State {
    /// The last resourceVersion handed out (one counter for every collection, as etcd's).
    rv: u64,
    /// Watches older than this get 410 Gone.
    compacted: u64,
    collections: BTreeMap<String, Collection>,
    /// `(collection, rv, event line)`, for watches that resume from an older version.
    history: Vec<(String, u64, String)>,
    /// Open watches: their collection and the channel their connection writes from
    /// (`None` ends the watch).
    watchers: Vec<(String, mpsc::Sender<Option<String>>)>,
    /// Every request line's target (path and query), in order.
    requests: Vec<String>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
}

/// A running stand-in.
pub struct KubeApi {
    shared: Arc<Shared>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        for (_, w) in st.watchers.drain(..) {
            let _ = w.send(None);
        }
        drop(st);
        let _ = TcpStream::connect(&self.addr);
    }
}

impl KubeApi {
    /// Starts a stand-in with no collections.
    pub fn start() -> Self {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        crate::http::accept_loop(l, shared.clone(), |s| &s.stop, serve);
        Self { shared, addr }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves `path` (e.g. `/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices`) as a
    /// collection of `kind` objects of `api_version`.
    pub fn collection(&self, path: &str, kind: &str, api_version: &str) {
        self.lock().collections.insert(
            path.to_string(),
            Collection {
                kind: kind.to_string(),
                api_version: api_version.to_string(),
                objects: BTreeMap::new(),
            },
        );
    }

    /// Writes a kubeconfig whose current context is this server and `namespace`.
    pub fn kubeconfig(&self, namespace: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "warmpath-kube-{}-{}",
            std::process::id(),
            self.addr.replace([':', '.'], "-")
        ));
        std::fs::create_dir_all(&dir).expect("kubeconfig dir");
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster: {{server: \"http://{}\"}}\n\
             users:\n- name: tester\n  user: {{}}\ncontexts:\n- name: standin\n  context: {{cluster: standin, user: tester, namespace: {namespace}}}\n\
             current-context: standin\n",
            self.addr
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    /// Creates or replaces the object `obj` (named by `metadata.name`) in `path`, with a new
    /// resourceVersion, and sends `ADDED` or `MODIFIED` to the open watches.
    pub fn put(&self, path: &str, mut obj: Value) {
        let mut st = self.lock();
        st.rv += 1;
        let rv = st.rv;
        let c = st.collections.get_mut(path).expect("no such collection");
        obj["kind"] = c.kind.clone().into();
        obj["apiVersion"] = c.api_version.clone().into();
        obj["metadata"]["resourceVersion"] = rv.to_string().into();
        let name = obj["metadata"]["name"]
            .as_str()
            .expect("metadata.name")
            .to_string();
        let kind = if c.objects.contains_key(&name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        c.objects.insert(name, obj.clone());
        send(&mut st, path, rv, &json!({"type": kind, "object": obj}));
    }

    /// Deletes `name` from `path` and sends `DELETED` with its last state.
    pub fn delete(&self, path: &str, name: &str) {
        let mut st = self.lock();
        st.rv += 1;
        let rv = st.rv;
        let c = st.collections.get_mut(path).expect("no such collection");
        let mut obj = c.objects.remove(name).expect("no such object");
        obj["metadata"]["resourceVersion"] = rv.to_string().into();
        send(
            &mut st,
            path,
            rv,
            &json!({"type": "DELETED", "object": obj}),
        );
    }

    /// Sends a `BOOKMARK` at the current resourceVersion to the watches of `path`.
    pub fn bookmark(&self, path: &str) {
        let mut st = self.lock();
        let rv = st.rv;
        let c = &st.collections[path];
        let ev = json!({"type": "BOOKMARK", "object": {
            "kind": c.kind, "apiVersion": c.api_version,
            "metadata": {"resourceVersion": rv.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"}}}});
        send(&mut st, path, rv, &ev);
    }

    /// Compacts the history: `change` edits the objects of `path` silently (changes a
    /// watch never sees), then every open watch gets `ERROR` 410 and ends, and a watch
    /// from any earlier resourceVersion is refused the same way. Only a new LIST shows
    /// the change.
    pub fn expire(&self, path: &str, change: impl FnOnce(&mut BTreeMap<String, Value>)) {
        let mut st = self.lock();
        st.rv += 1;
        let rv = st.rv;
        st.compacted = rv;
        st.history.clear();
        change(
            &mut st
                .collections
                .get_mut(path)
                .expect("no such collection")
                .objects,
        );
        for obj in st
            .collections
            .get_mut(path)
            .into_iter()
            .flat_map(|c| c.objects.values_mut())
        {
            obj["metadata"]["resourceVersion"] = rv.to_string().into();
        }
        for (_, w) in st.watchers.drain(..) {
            let _ = w.send(Some(gone_line(rv - 1, rv)));
            let _ = w.send(None);
        }
        self.shared.changed.notify_all();
    }

    /// The request targets (path and query) received so far.
    pub fn requests(&self) -> Vec<String> {
        self.lock().requests.clone()
    }

    /// Waits until `pred` holds for the request targets, or `timeout` passes; returns
    /// whether it held.
    pub fn wait_requests(&self, timeout: Duration, pred: impl Fn(&[String]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        loop {
            if pred(&st.requests) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Records `ev` in the history and sends it to the watches of `path`.
fn send(st: &mut State, path: &str, rv: u64, ev: &Value) {
    let line = ev.to_string();
    st.history.push((path.to_string(), rv, line.clone()));
    st.watchers
        .retain(|(p, w)| p != path || w.send(Some(line.clone())).is_ok());
}

fn gone_line(asked: u64, current: u64) -> String {
    json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": format!("too old resource version: {asked} ({current})"),
        "reason": "Expired", "code": 410}})
    .to_string()
}

/// The value of `key` in a query string, percent-decoded.
fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| {
            let mut out = Vec::new();
            let b = v.as_bytes();
            let mut i = 0;
            while i < b.len() {
                match b[i] {
                    b'%' if i + 2 < b.len() => {
                        let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                        out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                        i += 3;
                    }
                    b'+' => {
                        out.push(b' ');
                        i += 1;
                    }
                    c => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
            String::from_utf8_lossy(&out).into_owned()
        })
    })
}

fn reply(conn: &mut TcpStream, status: &str, body: &Value) -> std::io::Result<()> {
    let body = body.to_string();
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn serve(mut conn: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let watch = matches!(query_param(query, "watch").as_deref(), Some("true" | "1"));
    let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    st.requests.push(target.clone());
    shared.changed.notify_all();
    if let Some(c) = st.collections.get(path) {
        if !watch {
            let items: Vec<Value> = c
                .objects
                .values()
                .map(|o| {
                    let mut o = o.clone();
                    if let Some(m) = o.as_object_mut() {
                        m.remove("kind");
                        m.remove("apiVersion");
                    }
                    o
                })
                .collect();
            let list = json!({"kind": format!("{}List", c.kind), "apiVersion": c.api_version,
                "metadata": {"resourceVersion": st.rv.to_string()}, "items": items});
            drop(st);
            return reply(&mut conn, "200 OK", &list);
        }
        let from: u64 = query_param(query, "resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(st.rv);
        let (tx, rx) = mpsc::channel();
        if from < st.compacted {
            let _ = tx.send(Some(gone_line(from, st.rv)));
            let _ = tx.send(None);
        } else {
            for (p, rv, l) in &st.history {
                if p == path && *rv > from {
                    let _ = tx.send(Some(l.clone()));
                }
            }
            st.watchers.push((path.to_string(), tx));
        }
        drop(st);
        conn.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        )?;
        while let Ok(Some(ev)) = rx.recv() {
            let chunk = format!("{ev}\n");
            write!(conn, "{:x}\r\n{chunk}\r\n", chunk.len())?;
        }
        return conn.write_all(b"0\r\n\r\n");
    }
    // `collection/NAME`: one object.
    if let Some((coll, name)) = path.rsplit_once('/') {
        if let Some(obj) = st.collections.get(coll).and_then(|c| c.objects.get(name)) {
            let obj = obj.clone();
            drop(st);
            return reply(&mut conn, "200 OK", &obj);
        }
    }
    drop(st);
    reply(
        &mut conn,
        "404 Not Found",
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("{path} not found"), "reason": "NotFound", "code": 404}),
    )
}
