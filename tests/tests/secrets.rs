#![allow(clippy::unwrap_used)]
//! Credentials never reach the gateway's logs (issue #25, defect 4). Canary keys (one a
//! tenant's real key, one unknown) ride on every case of a bad-input corpus (malformed
//! framing that makes Pingora quote the raw request head, oversized headers, bad JSON,
//! unknown models, wrong keys, keys in the query string, cookies, other key headers), with
//! the gateway logging at `debug`; afterwards neither canary appears anywhere in its
//! stdout or stderr. Nor does any client credential header reach a replica.

use std::time::Duration;
use warmpath_e2e::fixtures::{auth_yaml, replicas_yaml};
use warmpath_e2e::http::raw;
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

const ADMIN_KEY: &str = "e2e-admin-secret-key-777";

/// One request's bytes, each a way to make the gateway (or Pingora) talk about it.
fn corpus(host: &str, valid: &str, wrong: &str) -> Vec<Vec<u8>> {
    let chat = r#"{"model":"mock","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}"#;
    let unknown = r#"{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}"#;
    let bad_json = r#"{"model":"mock","messages":[{"role":"#;
    let post = |key: &str, extra: &str, body: &str| {
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\
             {extra}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let big = "a".repeat(40 * 1024);
    let many: String = (0..300).map(|i| format!("X-H{i}: v\r\n")).collect();
    let mut cases: Vec<String> = vec![
        // Framing Pingora refuses while quoting the head.
        format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\nX-Fold: a\r\n  folded\r\nContent-Length: 2\r\n\r\n{{}}"),
        format!("GET /v1/models HTTP/1.1\nHost: {host}\nAuthorization: Bearer {valid}\n\n"),
        format!("GET /v1/models HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\nX-Mixed: 1\r\n\r\n"),
        format!("GET /v1/models?key={valid} HTTP/9.9\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\n\r\n"),
        format!("GET /v1/models\u{1}?api_key={valid} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\n\r\n"),
        format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization : Bearer {valid}\r\nContent-Length: 2\r\n\r\n{{}}"),
        format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\nContent-Length: abc\r\n\r\n{{}}"),
        format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{{}}"),
        format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\nTransfer-Encoding: chunked\r\n\r\nzz;ext=1\r\n{{}}\r\n0\r\n\r\n"),
        format!("POST /v1/chat/completions HTTP/1.0\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\n\r\n{chat}"),
        format!("GET /v1/models HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\nX-Big: {big}\r\n\r\n"),
        format!("GET /v1/models HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\r\n{many}\r\n"),
        format!("GET /v1/models HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {valid}\u{ff}\r\n\r\n"),
        // Requests the gateway itself rejects.
        post(valid, "", bad_json),
        post(valid, "", unknown),
        post(wrong, "", chat),
        post(&format!("{valid} extra"), "", chat),
        post(valid, &format!("x-api-key: {valid}\r\napi-key: {wrong}\r\n"), chat),
        post(valid, &format!("Cookie: session={valid}; warmpath_admin={wrong}\r\n"), chat),
        post(valid, &format!("Proxy-Authorization: Basic {wrong}\r\n"), chat),
        format!("GET /v1/models?api_key={valid}&key={wrong} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        format!("GET /v1/nowhere?token={wrong} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {wrong}\r\nConnection: close\r\n\r\n"),
        // And one that succeeds.
        post(valid, "", chat),
    ];
    cases.push(format!(
        "GET /v1/models HTTP/1.1\r\nHost: {host}\r\nAuthorization: Basic {wrong}\r\nConnection: close\r\n\r\n"
    ));
    cases.into_iter().map(String::into_bytes).collect()
}

#[test]
fn canary_keys_never_reach_the_logs() {
    let salt: u64 = rand::random();
    let valid = format!("canary-valid-{salt:016x}");
    let wrong = format!("canary-wrong-{salt:016x}");
    let mock = MockReplica::start(Mode::Ok);
    let yaml = format!(
        "shutdown_grace_s: 1\n{}{}",
        replicas_yaml(&[mock.url()]),
        auth_yaml(&[("t", &valid, "")])
    );
    let mut gw =
        GatewayProc::spawn_with(&yaml, &[], 1, Some(ADMIN_KEY), &[("RUST_LOG", "debug")]).unwrap();
    let mut answered = 0;
    for case in corpus(&gw.addr, &valid, &wrong) {
        if raw(&gw.addr, &case, Duration::from_secs(20)).is_ok() {
            answered += 1;
        }
    }
    // The admin plane, with a wrong and a right admin key.
    for key in [wrong.as_str(), ADMIN_KEY] {
        let req = format!(
            "GET /admin/replicas HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {key}\r\nX-Fold: a\r\n b\r\n\r\n",
            gw.admin
        );
        let _ = raw(&gw.admin, req.as_bytes(), Duration::from_secs(20));
    }
    assert!(answered > 10, "the corpus was not served");
    // Stop the gateway: every batched line is written before it exits.
    gw.signal("TERM");
    assert!(gw.wait_exit(Duration::from_secs(60)).is_some());
    let (log, out) = (gw.log(), gw.stdout());
    assert!(log.contains("DEBUG"), "not logging at debug: {log}");
    for secret in [valid.as_str(), wrong.as_str(), ADMIN_KEY] {
        for (name, text) in [("stderr", &log), ("stdout", &out)] {
            if let Some(at) = text.find(secret) {
                let line = text[..at].rsplit('\n').next().unwrap_or("");
                panic!("{secret} in the gateway's {name}: {line}{secret}...");
            }
        }
    }
    // The corpus reached the lines that quote raw heads and headers (now redacted).
    assert!(log.contains("InvalidHTTPHeader"), "{log}");
    assert!(log.contains("[REDACTED]"), "{log}");
}

/// Whatever credential a client sends, under whatever header, stays at the gateway: the
/// replica's raw request head carries none of them (the tenant is known by its salt).
#[test]
fn client_credentials_never_reach_the_replica() {
    let mock = MockReplica::start(Mode::Ok);
    let yaml = format!(
        "{}{}",
        auth_yaml(&[("t", "canary-tenant-key-4242", "")]),
        replicas_yaml(&[mock.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 1).expect("gateway");
    let body = r#"{"model":"mock","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}"#;
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer canary-tenant-key-4242\r\n\
         Proxy-Authorization: Basic canary-proxy-4242\r\nCookie: warmpath_admin=canary-cookie-4242\r\n\
         X-Api-Key: canary-xkey-4242\r\nApi-Key: canary-azure-4242\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        gw.addr,
        body.len()
    );
    let answer = raw(&gw.addr, req.as_bytes(), Duration::from_secs(10)).unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    let heads = mock.raw_requests();
    assert_eq!(heads.len(), 1, "one generation forwarded");
    let head = String::from_utf8_lossy(&heads[0]).to_ascii_lowercase();
    assert!(head.contains("x-warmpath-cache-salt"), "{head}");
    for canary in ["tenant-key", "proxy", "cookie", "xkey", "azure"] {
        let c = format!("canary-{canary}-4242");
        assert!(!head.contains(&c), "{c} reached the replica:\n{head}");
    }
}
