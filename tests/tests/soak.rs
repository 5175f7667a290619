#![allow(clippy::unwrap_used)]
//! Soak (reliability matrix G1), run by `scripts/soak.sh` (ignored in the ordinary suite):
//! sustained mixed load against the gateway and two mock replicas for `DURATION` seconds
//! (default 600), then the gateway's resident memory and open file descriptors are compared
//! with what they were after a warm-up. Growth of 5 % or more in either fails.
//!
//! The mix, per request: a streaming chat (45 %), a non-streaming one (30 %), a bad
//! request (invalid JSON, an unknown route or a wrong key: 15 %), and a client that hangs
//! up in the middle of a stream (10 %).

use rand::Rng;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use warmpath_e2e::fixtures::{auth_yaml, chat, replicas_yaml};
use warmpath_e2e::http::{post_json, post_sse, request};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

const AUTH: (&str, &str) = ("Authorization", "Bearer key-soak");

/// Resident memory (KiB) and open descriptors of `pid`.
fn usage(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    (rss, fds)
}

/// One request of the mix; returns its kind.
fn one(addr: &str, rng: &mut impl Rng) -> &'static str {
    let roll = rng.gen_range(0..100);
    let prompt = format!("user {}", rng.gen_range(0..50));
    if roll < 45 {
        let body = chat("mock", "soak system", &prompt, 8, true);
        match post_sse(addr, "/v1/chat/completions", &[AUTH], &body) {
            Ok(r) if r.status == 200 && r.events.last().is_some_and(|e| e == "[DONE]") => "ok",
            _ => "failed",
        }
    } else if roll < 75 {
        let body = chat("mock", "soak system", &prompt, 8, false);
        match post_json(addr, "/v1/chat/completions", &[AUTH], &body) {
            Ok(r) if r.status == 200 => "ok",
            _ => "failed",
        }
    } else if roll < 80 {
        let _ = request(
            addr,
            "POST",
            "/v1/chat/completions",
            &[AUTH],
            Some(b"{\"model\": "),
        );
        "bad"
    } else if roll < 85 {
        let _ = request(addr, "GET", "/v1/nope", &[AUTH], None);
        "bad"
    } else if roll < 90 {
        let body = chat("mock", "s", &prompt, 8, false).to_string();
        let _ = request(
            addr,
            "POST",
            "/v1/chat/completions",
            &[("Authorization", "Bearer wrong")],
            Some(body.as_bytes()),
        );
        "bad"
    } else {
        // A client that leaves in the middle of a stream.
        if let Ok(mut s) = TcpStream::connect(addr) {
            let body = chat("mock", "soak system", &prompt, 8, true).to_string();
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = write!(
                s,
                "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-soak\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let mut line = String::new();
            let _ = BufReader::new(&s).read_line(&mut line);
        }
        "disconnect"
    }
}

#[test]
#[ignore = "minutes long: run by scripts/soak.sh"]
fn soak_keeps_memory_and_descriptors_flat() {
    let duration = Duration::from_secs(
        std::env::var("DURATION")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(600),
    );
    let workers: usize = std::env::var("WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let warmup = (duration / 10).clamp(Duration::from_secs(5), Duration::from_secs(60));
    let a = MockReplica::start(Mode::Ok);
    let b = MockReplica::start(Mode::Ok);
    let yaml = format!(
        "{}{}",
        auth_yaml(&[("soak", "key-soak", "")]),
        replicas_yaml(&[a.url(), b.url()])
    );
    let gw = GatewayProc::spawn(&yaml, &[], 2).expect("gateway");
    let pid = gw.pid();
    let running = Arc::new(AtomicBool::new(true));
    let paused = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let failed_all = Arc::new(AtomicU64::new(0));
    let ok_all = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let (addr, running, paused, done) = (
                gw.addr.clone(),
                running.clone(),
                paused.clone(),
                done.clone(),
            );
            let (ok, failed) = (ok_all.clone(), failed_all.clone());
            std::thread::spawn(move || {
                let mut rng = rand::thread_rng();
                while running.load(Ordering::Acquire) {
                    if paused.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    match one(&addr, &mut rng) {
                        "ok" => ok.fetch_add(1, Ordering::AcqRel),
                        "failed" => failed.fetch_add(1, Ordering::AcqRel),
                        _ => 0,
                    };
                    done.fetch_add(1, Ordering::AcqRel);
                }
            })
        })
        .collect();
    // Measures with the load paused and the connections settled.
    let quiet_usage = || {
        paused.store(true, Ordering::Release);
        std::thread::sleep(Duration::from_secs(2));
        let u = usage(pid);
        paused.store(false, Ordering::Release);
        u
    };
    std::thread::sleep(warmup);
    let start = quiet_usage();
    let t0 = Instant::now();
    let n0 = done.load(Ordering::Acquire);
    std::thread::sleep(duration);
    let end = quiet_usage();
    let n = done.load(Ordering::Acquire) - n0;
    running.store(false, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    let growth = |a: f64, b: f64| (b - a) / a * 100.0;
    println!(
        "SOAK duration_s={:.0} requests={n} served_ok_with_warmup={} failed_with_warmup={} rps={:.1} rss_kib_start={} rss_kib_end={} rss_growth_pct={:.2} fds_start={} fds_end={} fds_growth_pct={:.2}",
        secs,
        ok_all.load(Ordering::Acquire),
        failed_all.load(Ordering::Acquire),
        n as f64 / secs,
        start.0,
        end.0,
        growth(start.0 as f64, end.0 as f64),
        start.1,
        end.1,
        growth(start.1 as f64, end.1 as f64)
    );
    assert!(n > 0, "load ran");
    assert_eq!(
        failed_all.load(Ordering::Acquire),
        0,
        "every good request is served"
    );
    assert!(
        growth(start.0 as f64, end.0 as f64) < 5.0,
        "RSS grew from {} to {} KiB",
        start.0,
        end.0
    );
    assert!(
        growth(start.1 as f64, end.1 as f64) < 5.0,
        "open fds grew from {} to {}",
        start.1,
        end.1
    );
}
