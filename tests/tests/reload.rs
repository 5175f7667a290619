#![allow(clippy::unwrap_used)]
//! Operations: SIGHUP reloads the config (tenant keys here) without a restart; a broken
//! config is rejected and the running one kept.

use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, chat, replicas_yaml};
use warmpath_e2e::http::post_json;
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

fn status_with(gw: &GatewayProc, key: &str) -> u16 {
    let auth = format!("Bearer {key}");
    post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[("Authorization", auth.as_str())],
        &chat("mock", "s", "u", 2, false),
    )
    .unwrap()
    .status
}

fn rewrite(gw: &GatewayProc, body: &str) {
    let old = std::fs::read_to_string(&gw.config_path).unwrap();
    let head: String = old.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&gw.config_path, format!("{head}{body}")).unwrap();
    gw.signal("HUP");
}

#[test]
fn sighup_reloads_tenants_and_rejects_bad_configs() {
    let mock = MockReplica::start(Mode::Ok);
    let reps = replicas_yaml(&[mock.url()]);
    let gw = GatewayProc::spawn(
        &format!("{}{reps}", auth_yaml(&[("t", "key-old", "")])),
        &[],
        1,
    )
    .expect("gateway");
    assert_eq!(status_with(&gw, "key-old"), 200);
    assert_eq!(status_with(&gw, "key-new"), 401);

    rewrite(
        &gw,
        &format!("{}{reps}", auth_yaml(&[("t", "key-new", "")])),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while status_with(&gw, "key-new") != 200 {
        assert!(
            Instant::now() < deadline,
            "reload never took effect: {}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status_with(&gw, "key-old"), 401);

    rewrite(
        &gw,
        &format!(
            "{}{reps}bogus_key: 1\n",
            auth_yaml(&[("t", "key-other", "")])
        ),
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        status_with(&gw, "key-new"),
        200,
        "a bad config must not replace the running one"
    );
    assert!(gw.log().contains("reload rejected"));
}
