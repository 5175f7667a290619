use super::*;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn text(out: &Bytes) -> String {
    String::from_utf8(out.to_vec()).unwrap()
}

const ROLE: &str = "data: {\"id\":\"c-1\",\"created\":7,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";

#[test]
fn tags_are_stripped_and_counted_and_only_whole_events_pass() {
    let mut t = Transcript::default();
    let first = format!(
        "{ROLE}: warmpath-tokens 2 5,6\ndata: {{\"choices\":[{{\"delta\":{{\"content\":\"ab\"}}}}]}}\n\n"
    );
    let out = t.pass(&b(&first));
    assert!(!text(&out).contains("warmpath"), "{}", text(&out));
    assert!(text(&out).starts_with(ROLE));
    assert_eq!(
        (t.tokens.clone(), t.text_bytes, t.tagged),
        (vec![5, 6], 2, true)
    );
    // The usual chunk: one tagged event, passed as a slice of itself.
    let out = t.pass(&b(
        ": warmpath-tokens 3 7\ndata: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n",
    ));
    assert_eq!(
        text(&out),
        "data: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n"
    );
    // An event cut in two: nothing of it passes before its end.
    let out = t.pass(&b(": warmpath-tokens 4 8\ndata: {\"choices\":[{\"del"));
    assert!(out.is_empty());
    assert_eq!(
        t.tokens,
        [5, 6, 7],
        "its tag is read with the event, not before"
    );
    let out = t.pass(&b("ta\":{\"content\":\"d\"}}]}\n\n"));
    assert!(text(&out).ends_with("\"d\"}}]}\n\n"));
    assert_eq!(t.tokens, [5, 6, 7, 8]);
    assert_eq!(t.text_bytes, 4);
    assert!(!t.ended);
    t.pass(&b(
        ": warmpath-end\ndata: {\"choices\":[{\"finish_reason\":\"stop\"}]}\n\n",
    ));
    assert!(t.ended);
}

#[test]
fn an_error_event_is_held_back_and_a_continuation_takes_the_first_id() {
    let mut t = Transcript::default();
    t.pass(&b(ROLE));
    let out = t.pass(&b("data: {\"error\":{\"message\":\"boom\"}}\n\n"));
    assert!(out.is_empty(), "the client does not see it");
    assert!(t.error_event);
    let mut kept = Transcript::default();
    kept.pass(&b("data: {\"error\":{\"message\":\"boom\"}}\n\n"));
    assert_eq!(
        kept.take_held_error().as_deref(),
        Some(&b"data: {\"error\":{\"message\":\"boom\"}}\n\n"[..]),
        "a stream that does not continue ends with it"
    );
    // A half event of the failed stream is dropped at the seam.
    t.pass(&b("data: {\"choices\":"));
    assert!(t.splice());
    assert!(!t.error_event);
    assert!(
        t.pass(&b(": warmpath-replay\n\n")).is_empty(),
        "a sign of life only"
    );
    let out = t.pass(&b(
        ": warmpath-tokens 9 1\ndata: {\"id\":\"other\",\"created\":99,\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n",
    ));
    let s = text(&out);
    let data = s
        .strip_prefix("data: ")
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(v["id"], "c-1");
    assert_eq!(v["created"], 7);
    assert_eq!(v["choices"][0]["delta"]["content"], "x");
    assert!(
        v["choices"][0]["delta"].get("role").is_none(),
        "no second role"
    );
    assert!(s.ends_with("data: [DONE]\n\n"));
    assert!(t.ended);
}

#[test]
fn a_stream_with_no_event_yet_takes_the_continuation_as_it_comes() {
    let mut t = Transcript::default();
    assert!(t.splice());
    let out = t.pass(&b(ROLE));
    assert_eq!(
        text(&out),
        ROLE,
        "the continuation's own id: the client saw no other"
    );
    let mut broken = Transcript::default();
    broken.pass(&b("data: [1,2]\n\n"));
    assert!(!broken.splice(), "a first event without an id");
}

#[test]
fn the_continuation_field_leads_the_body() {
    let c = Continuation {
        tokens: vec![1, 2],
        text_bytes: 3,
        rng_draws: None,
    };
    let out = continuation_body(br#" {"model":"m","stream":true}"#, &c).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["model"], "m");
    assert_eq!(v[FIELD]["tokens"], serde_json::json!([1, 2]));
    assert_eq!(v[FIELD]["text_bytes"], 3);
    let empty = continuation_body(b"{ }", &c).unwrap();
    assert!(serde_json::from_slice::<serde_json::Value>(&empty).is_ok());
    assert!(continuation_body(b"[]", &c).is_none());
}

#[test]
fn the_outcome_label_says_what_became_of_a_failed_stream() {
    let mut m = Migration::new(Bytes::new());
    assert_eq!(m.outcome(true), None, "never failed");
    m.refused = Some("limit");
    assert_eq!(m.outcome(false), Some("refused"));
    m.count = 1;
    assert_eq!(m.outcome(true), Some("ok"));
    assert_eq!(m.outcome(false), Some("failed"));
}

#[test]
fn untagged_whole_events_pass_as_they_came_and_are_noted_alike() {
    let chunk = b(&format!(
        "{ROLE}data: {{\"choices\":[{{\"delta\":{{\"content\":\"hi\"}}}}]}}\n\ndata: [DONE]\n\n"
    ));
    let mut fast = Transcript::default();
    let out = fast.pass(&chunk);
    assert_eq!(out, chunk);
    assert_eq!(out.as_ptr(), chunk.as_ptr(), "passed on without a copy");
    // The general path, one event at a time, notes the same.
    let mut slow = Transcript::default();
    for part in text(&chunk).split_inclusive("\n\n") {
        // Split in two, so neither half takes the whole-events path.
        let (a, z) = part.split_at(3);
        assert!(slow.pass(&b(a)).is_empty());
        slow.pass(&b(z));
    }
    assert_eq!(
        (fast.data_events, fast.ended, fast.tagged),
        (slow.data_events, slow.ended, slow.tagged)
    );
    assert_eq!((fast.data_events, fast.ended), (2, true));
    assert!(fast.splice(), "the first event was kept for a splice");

    // Another server's comment goes on as it came; a line of Warmpath's own or an error
    // event in the chunk takes the general path, which strips or holds it.
    let ping = b(&format!(": ping\n\n{ROLE}"));
    assert_eq!(Transcript::default().pass(&ping), ping);
    let mut t = Transcript::default();
    let out = t.pass(&b(&format!(": warmpath-replay\n\n{ROLE}")));
    assert_eq!(text(&out), ROLE);
    let mut t = Transcript::default();
    let out = t.pass(&b(&format!(
        "{ROLE}data: {{\"error\":{{\"message\":\"boom\"}}}}\n\n"
    )));
    assert_eq!(text(&out), ROLE, "the error event is held back");
    assert!(t.error_event);
}

#[test]
fn a_stream_whose_server_takes_no_token_ids_is_not_read_for_its_text() {
    let event = b("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n");
    let mut read = Transcript::default();
    read.pass(&event);
    assert_eq!((read.text.as_str(), read.not_text), ("hi", false));
    let mut skipped = Transcript::default();
    skipped.skip_text = true;
    skipped.pass(&event);
    assert!(skipped.text.is_empty());
    assert!(
        skipped.not_text,
        "text went out that no continuation can carry"
    );
    assert_eq!(skipped.data_events, 1);
}
