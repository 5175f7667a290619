#![allow(clippy::unwrap_used)]
//! The admin listener's access rules (issue #25, defect 3): every route needs the admin key
//! (a bearer token, or the dashboard's login cookie); a state-changing request must come
//! from the listener's own origin with a JSON body, so a cross-site `text/plain` POST cannot
//! register a replica; and a non-loopback `admin_listen` without a key does not start.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::replicas_yaml;
use warmpath_e2e::http::{get, raw, request};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::procs::{bin, free_port};
use warmpath_e2e::GatewayProc;

const KEY: &str = "e2e-admin-key-0123456789";

fn gateway(mock: &MockReplica) -> GatewayProc {
    GatewayProc::spawn_with_admin_key(&replicas_yaml(&[mock.url()]), &["--no-auth"], 1, KEY)
        .unwrap()
}

/// `POST /admin/replicas` with `body` as `content_type`, and extra headers, on the wire.
fn post_replica(gw: &GatewayProc, body: &str, content_type: &str, extra: &str) -> u16 {
    let req = format!(
        "POST /admin/replicas HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\n{extra}\r\n{body}",
        gw.admin,
        body.len()
    );
    raw(&gw.admin, req.as_bytes(), Duration::from_secs(30))
        .unwrap()
        .status
}

fn registered(gw: &GatewayProc) -> usize {
    gw.replicas().unwrap().as_array().unwrap().len()
}

#[test]
fn every_admin_route_needs_the_admin_key() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    for path in [
        "/admin/replicas",
        "/admin/decisions",
        "/admin/index",
        "/metrics",
        "/dashboard/snapshot.json",
    ] {
        let none = get(&gw.admin, path, &[]).unwrap();
        assert_eq!(none.status, 401, "{path} without a key: {}", none.text());
        assert_eq!(
            none.json().unwrap()["error"]["code"],
            "invalid_admin_key",
            "{path}"
        );
        let wrong = get(&gw.admin, path, &[("Authorization", "Bearer not-the-key")]).unwrap();
        assert_eq!(wrong.status, 401, "{path} with a wrong key");
        let right = gw.admin_get(path).unwrap();
        assert_eq!(right.status, 200, "{path} with the key: {}", right.text());
    }
    // Writes too: no key, no drain, no removal.
    for (method, path) in [
        ("POST", "/admin/replicas/0/drain"),
        ("DELETE", "/admin/replicas/0"),
    ] {
        let r = request(&gw.admin, method, path, &[], None).unwrap();
        assert_eq!(r.status, 401, "{method} {path}");
    }
    assert_eq!(registered(&gw), 1);
    assert_eq!(gw.replicas().unwrap()[0]["draining"], false);
}

#[test]
fn admin_writes_need_json_and_the_same_origin() {
    let mock = MockReplica::start(Mode::Ok);
    let rogue = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    let auth = format!("Authorization: Bearer {KEY}\r\n");
    let body = format!("{{\"url\": \"{}\"}}", rogue.url());

    // The cross-site browser attack: a text/plain POST, with or without credentials.
    assert_eq!(post_replica(&gw, &body, "text/plain", ""), 401);
    assert_eq!(post_replica(&gw, &body, "text/plain", &auth), 415);
    assert_eq!(
        post_replica(&gw, &body, "application/x-www-form-urlencoded", &auth),
        415
    );
    // JSON, but from another origin.
    let foreign = format!("{auth}Origin: http://evil.example\r\n");
    assert_eq!(post_replica(&gw, &body, "application/json", &foreign), 403);
    let cross = format!("{auth}Sec-Fetch-Site: cross-site\r\n");
    assert_eq!(post_replica(&gw, &body, "application/json", &cross), 403);
    assert_eq!(
        registered(&gw),
        1,
        "nothing registered by a refused request"
    );

    // The key, JSON, the listener's own origin: registered.
    let same = format!("{auth}Origin: http://{}\r\n", gw.admin);
    assert_eq!(post_replica(&gw, &body, "application/json", &same), 201);
    assert_eq!(registered(&gw), 2);
}

#[test]
fn the_dashboard_requires_a_login() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    let page = get(&gw.admin, "/dashboard", &[]).unwrap();
    assert_eq!(page.status, 303, "{}", page.text());
    assert_eq!(page.header("location"), Some("/dashboard/login"));
    assert_eq!(
        get(&gw.admin, "/dashboard/events", &[]).unwrap().status,
        401
    );
    let login_page = get(&gw.admin, "/dashboard/login", &[]).unwrap();
    assert_eq!(login_page.status, 200);
    assert!(login_page.text().contains("Admin key"));

    let login = |key: &str, extra: &[(&str, &str)]| {
        let body = serde_json::json!({ "key": key }).to_string();
        request(
            &gw.admin,
            "POST",
            "/dashboard/login",
            extra,
            Some(body.as_bytes()),
        )
        .unwrap()
    };
    let wrong = login("wrong", &[]);
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
    let origin = format!("http://{}", gw.admin);
    let foreign = login(KEY, &[("Origin", "http://evil.example")]);
    assert_eq!(foreign.status, 403);
    assert!(foreign.header("set-cookie").is_none());

    let ok = login(KEY, &[("Origin", &origin)]);
    assert_eq!(ok.status, 204, "{}", ok.text());
    let set = ok.header("set-cookie").unwrap().to_string();
    assert!(set.contains("HttpOnly"), "{set}");
    assert!(set.contains("SameSite=Strict"), "{set}");
    let cookie = set.split(';').next().unwrap().to_string();
    assert!(!cookie.contains(KEY), "the cookie is not the key: {cookie}");
    let page = get(&gw.admin, "/dashboard", &[("Cookie", &cookie)]).unwrap();
    assert_eq!(page.status, 200);
    assert!(page.text().contains("app.js"), "the dashboard page");
    let snap = get(
        &gw.admin,
        "/dashboard/snapshot.json",
        &[("Cookie", &cookie)],
    )
    .unwrap();
    assert_eq!(snap.status, 200);
    // A forged cookie is not a session.
    let forged = format!("{}0", cookie);
    assert_eq!(
        get(
            &gw.admin,
            "/dashboard/snapshot.json",
            &[("Cookie", &forged)]
        )
        .unwrap()
        .status,
        401
    );
}

#[test]
fn a_public_admin_listener_without_a_key_is_refused_at_start() {
    let dir = std::env::temp_dir().join(format!("warmpath-e2e-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("gateway.yaml");
    std::fs::write(
        &cfg,
        format!(
            "listen: 127.0.0.1:{}\nadmin_listen: 0.0.0.0:{}\n",
            free_port(),
            free_port()
        ),
    )
    .unwrap();
    let mut child = Command::new(bin("gateway"))
        .arg("--config")
        .arg(&cfg)
        .arg("--no-auth")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the gateway started with a public admin listener and no admin key");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(err.contains("admin.key_sha256"), "{err}");
}
