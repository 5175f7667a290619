//! The template input is vLLM's: what each field becomes, and what is refused.

use super::*;

fn input(body: &str) -> ChatInput {
    ChatInput::from_body(body.as_bytes()).unwrap()
}

fn json(v: &Value) -> String {
    let mut s = String::new();
    crate::hf_json::write_compact(&mut s, v);
    s
}

#[test]
fn messages_are_reduced_as_vllm_reduces_them() {
    let i = input(
        r#"{"messages":[
        {"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}],"x":1},
        {"role":"assistant","content":null,"tool_calls":[
            {"id":"1","type":"function","function":{"name":"f","arguments":"{\"b\":1,\"a\":[2]}"}},
            {"id":"2","type":"function","function":{"name":"g","arguments":"not json"}},
            {"id":"3","type":"function","function":{"name":"h","arguments":"[1]"}},
            {"id":"4","type":"function","function":{"name":"k"}}]},
        {"role":"assistant","content":"done","tool_calls":[],"name":"bot"},
        {"role":"tool","tool_call_id":"1","content":"r"}]}"#,
    );
    let got: Vec<String> = i.messages.iter().map(json).collect();
    assert_eq!(
        got,
        [
            r#"{"role": "user", "content": "a\nb"}"#,
            r#"{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": [2]}}}, {"id": "2", "type": "function", "function": {"name": "g", "arguments": {}}}, {"id": "3", "type": "function", "function": {"name": "h", "arguments": {}}}, {"id": "4", "type": "function", "function": {"name": "k", "arguments": {}}}]}"#,
            r#"{"role": "assistant", "content": "done", "name": "bot"}"#,
            r#"{"role": "tool", "content": "r", "tool_call_id": "1"}"#,
        ]
    );
    assert!(i.add_generation_prompt);
}

#[test]
fn tools_are_dumped_as_pydantic_dumps_them() {
    let i = input(
        r#"{"messages":[],"tools":[{"function":{"strict":true,"parameters":{"z":1,"a":2},"name":"f"}}],
        "chat_template_kwargs":{"enable_thinking":false},"continue_final_message":true}"#,
    );
    assert_eq!(
        json(i.tools.as_ref().unwrap()),
        r#"[{"type": "function", "function": {"name": "f", "description": null, "parameters": {"z": 1, "a": 2}, "strict": true}}]"#
    );
    assert_eq!(i.kwargs.len(), 1);
    assert!(i.continue_final_message && !i.add_generation_prompt);
}

#[test]
fn bad_fields_are_refused_by_name() {
    for (body, param) in [
        (r#"{"messages":[],"tools":[{"type":"function"}]}"#, "tools"),
        (
            r#"{"messages":[],"tools":[{"type":"function","function":{"name":1}}]}"#,
            "tools",
        ),
        (
            r#"{"messages":[],"tools":[{"function":{"name":"f","parameters":[]}}]}"#,
            "tools",
        ),
        (
            r#"{"messages":[],"chat_template_kwargs":true}"#,
            "chat_template_kwargs",
        ),
        (
            r#"{"messages":[],"chat_template_kwargs":{"tools":[]}}"#,
            "chat_template_kwargs",
        ),
        (
            r#"{"messages":[],"tool_choice":{"type":"function"}}"#,
            "tool_choice",
        ),
        (r#"{"messages":[],"documents":[1]}"#, "documents"),
        (
            r#"{"messages":[{"role":"assistant","tool_calls":[{"type":"retrieval"}]}]}"#,
            "messages",
        ),
        (r#"{"messages":[{"content":"no role"}]}"#, "messages"),
        (
            r#"{"messages":[],"continue_final_message":true,"add_generation_prompt":true}"#,
            "continue_final_message",
        ),
    ] {
        let e = ChatInput::from_body(body.as_bytes()).unwrap_err();
        assert_eq!(e.param, param, "{body}: {e}");
    }
}

#[test]
fn only_requests_with_more_than_roles_and_strings_need_the_full_rendering() {
    for (body, needed) in [
        (r#"{"messages":[{"role":"user","content":"x"}]}"#, false),
        (
            r#"{"messages":[{"role":"user","content":null,"name":null}],"tools":null}"#,
            false,
        ),
        (r#"{"messages":[{"role":"user","content":[]}]}"#, true),
        (
            r#"{"messages":[{"role":"user","content":"x","name":"n"}]}"#,
            true,
        ),
        (r#"{"messages":[],"add_generation_prompt":true}"#, true),
        (r#"{"messages":[],"documents":[]}"#, true),
    ] {
        assert_eq!(ChatInput::needed(body.as_bytes()), needed, "{body}");
    }
}
