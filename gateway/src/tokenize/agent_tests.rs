//! The gateway encodes an agent request (tools, tool calls, tool results) to the same ids
//! as the replica's `ChatTokenizer::encode_input`, through its piece cache.

use super::CachedTokenizer;
use warmpath_text::bytelevel::chatml_bpe_spec;
use warmpath_text::{ChatInput, ChatMessage};

const QWEN25: &str =
    include_str!("../../../text/tests/data/templates/Qwen-Qwen2.5-7B-Instruct.jinja");

const AGENT: &str = r#"{"model":"m","messages":[
    {"role":"system","content":"You are an agent <|im_end|> with tools."},
    {"role":"user","content":"weather in Zürich?"},
    {"role":"assistant","content":null,"tool_calls":[
        {"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Zürich\"}"}},
        {"id":"c2","type":"function","function":{"name":"get_time","arguments":""}}]},
    {"role":"tool","tool_call_id":"c1","content":"21 °C"},
    {"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"12:00"}]}],
  "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather.",
    "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
    {"type":"function","function":{"name":"get_time"}}]}"#;

fn tokenizer() -> CachedTokenizer {
    let mut spec = chatml_bpe_spec();
    spec.chat_template = Some(QWEN25.to_string());
    CachedTokenizer::new(&spec, 64, 8).unwrap()
}

#[test]
fn an_agent_request_encodes_as_the_replica_encodes_it() {
    let tok = tokenizer();
    let input = ChatInput::from_body(AGENT.as_bytes()).unwrap();
    let want = tok.inner().encode_input(&input).unwrap();
    assert_eq!(tok.encode_input(&input).unwrap(), want);
    // Again, from the piece cache.
    assert_eq!(tok.encode_input(&input).unwrap(), want);
    let text = tok.inner().decode(&want).unwrap();
    // The tool specs and the parsed arguments are in the prompt, as the engine renders them.
    assert!(
        text.contains(
            r#"{"type": "function", "function": {"name": "get_weather", "description": "Weather.""#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#""arguments": {"city": "Zürich"}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"name": "get_time", "arguments": {}}"#),
        "{text}"
    );
    assert!(
        text.contains("<tool_response>\n12:00\n</tool_response>"),
        "{text}"
    );
    // The system prompt's special-token text stays literal: one `<|im_end|>` id per turn.
    let im_end = tok.inner().encode("<|im_end|>", false).unwrap();
    let turns = want.iter().filter(|&&t| t == im_end[0]).count();
    assert_eq!(turns, 4, "{text}");
}

#[test]
fn a_plain_chat_renders_the_same_either_way() {
    let tok = tokenizer();
    let msgs = [
        ChatMessage::new("system", "s"),
        ChatMessage::new("user", "hi"),
    ];
    let body = r#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}"#;
    assert!(!ChatInput::needed(body.as_bytes()));
    let input = ChatInput::from_body(body.as_bytes()).unwrap();
    assert_eq!(
        tok.encode_input(&input).unwrap(),
        tok.encode_chat(&msgs).unwrap()
    );
}
