#![allow(clippy::unwrap_used)]
//! Bad input gets a 4xx OpenAI error JSON, nothing is forwarded, and the connection state
//! stays safe (ambiguous framing closes the connection; no smuggled second request).

use std::time::Duration;
use warmpath_e2e::fixtures::{auth_yaml, chat, replicas_yaml};
use warmpath_e2e::http::{post_json, raw, request};
use warmpath_e2e::mock::{MockReplica, Mode};
use warmpath_e2e::GatewayProc;

const AUTH: (&str, &str) = ("Authorization", "Bearer key-t");

fn gateway(mock: &MockReplica) -> GatewayProc {
    let yaml = format!(
        "{}{}limits: {{max_body_bytes: 4096, max_header_bytes: 2048}}\n",
        auth_yaml(&[("t", "key-t", "")]),
        replicas_yaml(&[mock.url()])
    );
    GatewayProc::spawn(&yaml, &[], 1).expect("gateway")
}

fn assert_openai_error(r: &warmpath_e2e::HttpResponse, status: u16, code: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    let v = r.json().unwrap();
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    assert!(v["error"]["type"].is_string());
}

#[test]
fn bad_requests_get_openai_errors_and_nothing_is_forwarded() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    let r = request(
        &gw.addr,
        "POST",
        "/v1/chat/completions",
        &[AUTH],
        Some(b"{\"model\": \"mock\", \"messages\": ["),
    )
    .unwrap();
    assert_openai_error(&r, 400, "invalid_body");
    let big = chat("mock", &"x".repeat(8000), "u", 4, false);
    assert_openai_error(
        &post_json(&gw.addr, "/v1/chat/completions", &[AUTH], &big).unwrap(),
        413,
        "body_too_large",
    );
    let long = "y".repeat(4000);
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[AUTH, ("x-padding", long.as_str())],
        &chat("mock", "s", "u", 4, false),
    )
    .unwrap();
    assert_openai_error(&r, 431, "headers_too_large");
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[AUTH],
        &chat("no-such-model", "s", "u", 4, false),
    )
    .unwrap();
    assert_openai_error(&r, 404, "model_not_found");
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[("Authorization", "Bearer wrong")],
        &chat("mock", "s", "u", 4, false),
    )
    .unwrap();
    assert_openai_error(&r, 401, "invalid_api_key");
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[],
        &chat("mock", "s", "u", 4, false),
    )
    .unwrap();
    assert_openai_error(&r, 401, "invalid_api_key");
    let r = request(&gw.addr, "GET", "/v1/nothing-here", &[AUTH], None).unwrap();
    assert_openai_error(&r, 404, "unknown_url");
    // Fields that are the gateway's to set, or that steer the engine past it.
    for (field, value) in [
        ("cache_salt", serde_json::json!("another-tenant")),
        (
            "kv_transfer_params",
            serde_json::json!({"remote_host": "10.0.0.9"}),
        ),
        ("priority", serde_json::json!(-100)),
        ("base_url", serde_json::json!("http://169.254.169.254/")),
        // Agent fields the engine's chat template could not take.
        ("tools", serde_json::json!([{"type": "function"}])),
        ("tools", serde_json::json!({"type": "function"})),
        ("chat_template_kwargs", serde_json::json!("enable_thinking")),
        ("tool_choice", serde_json::json!(3)),
    ] {
        let mut body = chat("mock", "s", "u", 4, false);
        body[field] = value;
        let r = post_json(&gw.addr, "/v1/chat/completions", &[AUTH], &body).unwrap();
        assert_openai_error(&r, 400, "bad_request");
        assert!(r.text().contains(field), "{}", r.text());
    }
    assert_eq!(mock.generations(), 0, "no bad request may reach a replica");

    // A well-formed agent request (tools, a tool call, its result) is rendered and sent.
    let mut body = chat("mock", "s", "u", 4, false);
    body["tools"] = serde_json::json!([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]);
    body["chat_template_kwargs"] = serde_json::json!({"enable_thinking": false});
    let messages = body["messages"].as_array_mut().unwrap();
    messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"q\": \"x\"}"}}]}));
    messages.push(serde_json::json!({"role": "tool", "tool_call_id": "c1", "content": "r"}));
    let r = post_json(&gw.addr, "/v1/chat/completions", &[AUTH], &body).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(mock.generations(), 1);

    // The body is forwarded, but the cache salt is the gateway's, whatever the client says.
    let r = post_json(
        &gw.addr,
        "/v1/chat/completions",
        &[AUTH, ("x-warmpath-cache-salt", "evil")],
        &chat("mock", "s", "u", 4, false),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(mock.generations(), 2);
    let salts = mock.salts();
    assert_eq!(salts.len(), 2);
    assert_ne!(salts[1], "evil");
    assert_eq!(salts[1].len(), 32);
}

#[test]
fn content_length_plus_transfer_encoding_is_rejected_and_closed() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    let body = serde_json::to_string(&chat("mock", "s", "u", 4, false)).unwrap();
    // CL.TE smuggling shape: a chunked body that ends early, followed by a second request
    // that a confused hop would read as a new request on the same connection.
    let smuggled = "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-t\r\n\r\n";
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-t\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n{smuggled}",
        body.len() + 10,
        body.len()
    );
    let r = raw(&gw.addr, req.as_bytes(), Duration::from_secs(10)).unwrap();
    assert_openai_error(&r, 400, "ambiguous_framing");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(
        !r.text().contains("HTTP/1.1"),
        "a second response leaked: {}",
        r.text()
    );
    assert_eq!(mock.generations(), 0);
}

/// The other framing shapes: each is a 400, nothing reaches a replica, and the connection is
/// closed where the framing is in doubt. Pingora itself refuses a duplicate Content-Length
/// (and a non-numeric one) while reading the header, with its own bare 400 (no hook runs
/// before it, so that answer is not OpenAI JSON); the rest reach the request phase, which
/// answers with an OpenAI error.
#[test]
fn ambiguous_or_unsupported_framing_is_rejected() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    let body = serde_json::to_string(&chat("mock", "s", "u", 4, false)).unwrap();
    let head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-t\r\n\
                Content-Type: application/json\r\n";
    let n = body.len();
    // (what, request, OpenAI error code; None for Pingora's own 400)
    let cases = [
        (
            "duplicate Content-Length",
            format!("{head}Content-Length: {n}\r\nContent-Length: {n}\r\n\r\n{body}"),
            None,
        ),
        (
            "Transfer-Encoding other than chunked",
            format!(
                "{head}Transfer-Encoding: gzip, chunked\r\n\r\n{n:x}\r\n{body}\r\n0\r\n\r\n"
            ),
            Some("ambiguous_framing"),
        ),
        (
            "Content-Length with a sign",
            format!("{head}Content-Length: +{n}\r\n\r\n{body}"),
            Some("ambiguous_framing"),
        ),
        (
            "protocol upgrade",
            format!(
                "{head}Connection: upgrade\r\nUpgrade: websocket\r\nContent-Length: {n}\r\n\r\n{body}"
            ),
            Some("bad_request"),
        ),
    ];
    for (what, req, code) in cases {
        let r = raw(&gw.addr, req.as_bytes(), Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(r.status, 400, "{what}: {}", r.text());
        match code {
            Some(code) => assert_openai_error(&r, 400, code),
            None => assert_eq!(r.header("connection"), Some("close"), "{what}"),
        }
    }
    // The same request with one Content-Length goes through.
    let ok = format!("{head}Content-Length: {n}\r\n\r\n{body}");
    let r = raw(&gw.addr, ok.as_bytes(), Duration::from_secs(10)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        mock.generations(),
        1,
        "only the well-framed request reached the replica"
    );
}

/// A body that arrives in several pieces (chunked, with pauses between writes) is gathered
/// whole before routing and forwarded once, by its length; past the body limit across
/// pieces it is a 413.
#[test]
fn a_body_sent_in_pieces_is_gathered_whole_and_limited_across_pieces() {
    use std::io::{BufReader, Write};
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    let send = |body: &str| {
        let mut s = std::net::TcpStream::connect(&gw.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-t\r\n\
             Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        .unwrap();
        let third = body.len() / 3;
        for piece in [&body[..third], &body[third..2 * third]] {
            write!(s, "{:x}\r\n{piece}\r\n", piece.len()).unwrap();
            s.flush().unwrap();
            std::thread::sleep(Duration::from_millis(60));
        }
        // The last piece goes with the terminating chunk: once it is over the limit the
        // gateway answers and closes, and a client still writing after that could see a
        // reset instead of the answer.
        let last = &body[2 * third..];
        write!(s, "{:x}\r\n{last}\r\n0\r\n\r\n", last.len()).unwrap();
        warmpath_e2e::http::read_response(&mut BufReader::new(s)).unwrap()
    };
    let body =
        serde_json::to_string(&chat("mock", "a system prompt", "a question", 4, false)).unwrap();
    let r = send(&body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(mock.generations(), 1);
    assert_eq!(
        mock.bodies(),
        vec![body.as_bytes().to_vec()],
        "the replica gets the gathered body, framed by its length"
    );
    let big = serde_json::to_string(&chat(
        "mock",
        &"x".repeat(3000),
        &"y".repeat(1500),
        4,
        false,
    ))
    .unwrap();
    assert!(big.len() > 4096 && big.len() / 3 < 4096);
    assert_openai_error(&send(&big), 413, "body_too_large");
    assert_eq!(mock.generations(), 1, "an oversize body is not forwarded");
}

/// Connection reuse after a request the gateway answers itself (reliability matrix A3): the
/// unread body of a refused POST must be drained or the connection closed, so that bytes of
/// that body are never read as the next request.
#[test]
fn the_body_of_a_refused_request_is_never_read_as_the_next_request() {
    use std::io::{Read, Write};
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    // The body of each refused request is itself a valid request for the model list.
    let smuggled = "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-t\r\n\r\n";
    // Sent as a request of its own, it does get the list (so the check below can fail).
    let direct = raw(&gw.addr, smuggled.as_bytes(), Duration::from_secs(5)).unwrap();
    assert!(
        direct.text().contains("\"object\":\"list\""),
        "{}",
        direct.text()
    );
    let refused = [
        // Wrong key: refused before the body is read.
        ("Bearer wrong", "/v1/chat/completions", 401),
        // Unknown route.
        ("Bearer key-t", "/v1/nothing-here", 404),
        // Good key, body not JSON: read, then refused.
        ("Bearer key-t", "/v1/chat/completions", 400),
    ];
    for (key, path, status) in refused {
        let mut s = std::net::TcpStream::connect(&gw.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let first = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {key}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{smuggled}",
            smuggled.len()
        );
        let second = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        s.write_all(first.as_bytes()).unwrap();
        s.write_all(second.as_bytes()).unwrap();
        let mut got = Vec::new();
        // Read to the close (the second request asks for it) or to the timeout.
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        let statuses: Vec<&str> = text
            .match_indices("HTTP/1.1 ")
            .map(|(i, _)| &text[i + 9..i + 12])
            .collect();
        assert_eq!(statuses.first(), Some(&&*status.to_string()), "{text}");
        // After the refusal: nothing (refused before the body was read: the connection is
        // closed), or the health answer (the body was read whole), never the model list
        // that the body spells.
        assert!(statuses.len() <= 2, "{text}");
        if statuses.len() == 2 {
            assert_eq!(statuses[1], "200", "{text}");
            assert!(text.contains("\"status\":\"ok\""), "{text}");
        }
        assert!(
            !text.contains("\"object\":\"list\""),
            "the body was read as a request: {text}"
        );
    }
    assert_eq!(mock.generations(), 0);
}

/// Credential confusion (reliability matrix D8): two `Authorization` headers, or a key in the
/// URL, are refused before anything is forwarded; other query parameters pass.
#[test]
fn duplicate_keys_and_keys_in_the_url_are_refused() {
    let mock = MockReplica::start(Mode::Ok);
    let gw = gateway(&mock);
    let body = serde_json::to_vec(&chat("mock", "s", "u", 4, false)).unwrap();
    for keys in [
        [AUTH, ("Authorization", "Bearer wrong")],
        [("Authorization", "Bearer wrong"), AUTH],
    ] {
        let r = request(&gw.addr, "POST", "/v1/chat/completions", &keys, Some(&body)).unwrap();
        assert_openai_error(&r, 400, "bad_request");
        assert!(
            r.text().contains("more than one Authorization"),
            "{}",
            r.text()
        );
    }
    for path in [
        "/v1/chat/completions?api_key=key-t",
        "/v1/chat/completions?x=1&API-KEY=key-t",
        "/v1/models?key=key-t",
    ] {
        let method = if path.starts_with("/v1/models") {
            "GET"
        } else {
            "POST"
        };
        let body = (method == "POST").then_some(body.as_slice());
        let r = request(&gw.addr, method, path, &[AUTH], body).unwrap();
        assert_openai_error(&r, 400, "bad_request");
        assert!(
            !r.text().contains("key-t"),
            "the key is not echoed: {}",
            r.text()
        );
    }
    assert_eq!(mock.generations(), 0, "nothing refused reaches a replica");
    let r = request(
        &gw.addr,
        "POST",
        "/v1/chat/completions?api-version=2024-02-01",
        &[AUTH],
        Some(&body),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(mock.generations(), 1);
}
