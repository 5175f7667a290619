//! An agent loop: every conversation shares one system prompt and one tool list, states its
//! task, then runs `--rounds` tool-call turns. Request `t` of a conversation carries the
//! task and the `t` earlier turns (an assistant message calling a tool, then the tool's
//! result), so each request extends the previous one, the heaviest prefix reuse there is.
//! Requests are issued turn-major (every conversation's turn 0, then turn 1, ...).
//!
//! `run` sends each request as a chat with `tools`, assistant `tool_calls` and `tool`
//! messages ([`chat`]), rebuilt from the request's segments; `simulate` sees the segments'
//! token runs (a tool call and its JSON stand for [`CALL_TOKENS`] tokens there).

use super::args::WorkloadArgs;
use super::spec::{RequestSpec, WorkloadError};
use crate::prompt::{Prompt, Segment};
use serde_json::{json, Value};

const TAG_SYSTEM: u64 = 0x4a01;
const TAG_TOOL: u64 = 0x4a02;
const TAG_TASK: u64 = 0x4a03;
const TAG_CALL: u64 = 0x4a04;
const TAG_RESULT: u64 = 0x4a05;

/// The tools every conversation is offered.
pub const TOOLS: [&str; 4] = ["search_docs", "read_file", "run_command", "fetch_url"];
/// Words of each tool's description.
const TOOL_TOKENS: u32 = 24;
/// Words of a tool call's `query` argument.
pub const CALL_TOKENS: u32 = 12;
/// Segments before a conversation's own: the system prompt and one per tool.
const SHARED_SEGMENTS: usize = 1 + TOOLS.len();

/// Builds the requests (arrival times are assigned later).
pub(super) fn build(args: &WorkloadArgs, seed: u64) -> Result<Vec<RequestSpec>, WorkloadError> {
    let sys = args.system_prompt_len.unwrap_or(600);
    let task = args.question_len.unwrap_or(48);
    let out = args.output_len.unwrap_or(24);
    let result = args.tool_result_len;
    if args.users == 0 || args.rounds == 0 || sys == 0 || task == 0 || out == 0 || result == 0 {
        return Err(WorkloadError::Invalid(
            "users, rounds, system prompt, task, output and tool result lengths must be > 0".into(),
        ));
    }
    let mut shared = vec![Segment::new(&[seed, TAG_SYSTEM], sys, true)];
    shared.extend(
        (0..TOOLS.len() as u64).map(|i| Segment::new(&[seed, TAG_TOOL, i], TOOL_TOKENS, true)),
    );
    let mut v = Vec::with_capacity((args.users * args.rounds) as usize);
    for turn in 0..u64::from(args.rounds) {
        for c in 0..u64::from(args.users) {
            let mut segments = shared.clone();
            segments.push(Segment::new(&[seed, TAG_TASK, c], task, true));
            for k in 0..turn {
                segments.push(Segment::new(&[seed, TAG_CALL, c, k], CALL_TOKENS, true));
                segments.push(Segment::new(&[seed, TAG_RESULT, c, k], result, true));
            }
            v.push(RequestSpec {
                id: 0,
                group: c,
                arrival_ms: 0.0,
                prompt: Prompt { segments },
                output_tokens: out,
                class: None,
                system_segments: 0,
            });
        }
    }
    Ok(v)
}

fn text(seg: &Segment) -> String {
    let p = Prompt {
        segments: vec![*seg],
    };
    p.text().trim_start().to_string()
}

/// The chat an agent-loop request is sent as: `messages` (system prompt, task, then each
/// turn's assistant tool call and tool result) and `tools`.
pub fn chat(spec: &RequestSpec) -> Value {
    let segs = &spec.prompt.segments;
    let tools: Vec<Value> = TOOLS
        .iter()
        .zip(&segs[1..SHARED_SEGMENTS])
        .map(|(name, seg)| {
            json!({"type": "function", "function": {
                "name": name,
                "description": text(seg),
                "parameters": {"type": "object", "properties": {
                    "query": {"type": "string", "description": "What to look up."}},
                    "required": ["query"]}}})
        })
        .collect();
    let mut messages = vec![
        json!({"role": "system", "content": text(&segs[0])}),
        json!({"role": "user", "content": text(&segs[SHARED_SEGMENTS])}),
    ];
    for (k, pair) in segs[SHARED_SEGMENTS + 1..].chunks(2).enumerate() {
        let id = format!("call_{}_{k}", spec.group);
        let arguments = json!({"query": text(&pair[0])}).to_string();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function",
             "function": {"name": TOOLS[k % TOOLS.len()], "arguments": arguments}}]}));
        if let Some(result) = pair.get(1) {
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": text(result)}));
        }
    }
    json!({"messages": messages, "tools": tools})
}

#[cfg(test)]
mod tests {
    use super::chat;
    use crate::workload::{build, test_args::args};

    #[test]
    fn each_turn_extends_the_conversation_behind_one_system_prompt_and_tool_list() {
        let w = build(
            &args(&["--workload", "agent-loop", "--users", "3", "--rounds", "3"]),
            7,
        )
        .unwrap();
        assert_eq!(w.requests.len(), 9);
        let (t0, t1, t2) = (&w.requests[1], &w.requests[4], &w.requests[7]);
        assert_eq!((t0.group, t1.group, t2.group), (1, 1, 1));
        let (c0, c1, c2) = (chat(t0), chat(t1), chat(t2));
        let msgs = |c: &serde_json::Value| c["messages"].as_array().unwrap().clone();
        assert_eq!(msgs(&c0).len(), 2);
        assert_eq!(msgs(&c1).len(), 4);
        assert_eq!(msgs(&c2).len(), 6);
        // Each request starts with the previous one's messages, and all share the tools
        // and the system prompt.
        assert_eq!(msgs(&c2)[..4], msgs(&c1)[..]);
        assert_eq!(msgs(&c1)[..2], msgs(&c0)[..]);
        assert_eq!(c0["tools"], chat(&w.requests[0])["tools"]);
        assert_eq!(c0["tools"].as_array().unwrap().len(), 4);
        assert_eq!(msgs(&c0)[0], msgs(&chat(&w.requests[0]))[0]);
        assert_ne!(msgs(&c0)[1], msgs(&chat(&w.requests[0]))[1]);
        let call = &msgs(&c2)[4]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "read_file");
        let args: serde_json::Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["query"].as_str().unwrap().split(' ').count(), 12);
        assert_eq!(msgs(&c2)[5]["tool_call_id"], call["id"]);
        assert_eq!(t2.prompt_tokens(), 600 + 4 * 24 + 48 + 2 * (12 + 128));
    }
}
