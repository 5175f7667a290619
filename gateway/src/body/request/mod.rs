//! What the gateway reads from an OpenAI request body: model, prompt, stream flag and the
//! token budget, read the way the replica reads them (`warmpath_protocol::openai`, serde
//! derives). The body itself is forwarded unchanged (but for the completion bound of a
//! request without one, `crate::proxy::bound`), and the strings read from it are
//! borrowed from it where they hold no escapes (a 25 KB system prompt is hashed in place,
//! not copied).
//!
//! # Reading
//! The body is read in one pass with the crate's JSON scanner ([`crate::body::scan`]), which
//! validates the whole document as serde_json does and builds nothing but the fields below.
//! serde_json's derive did the same job in about 5,000 instructions for a short chat and
//! about 80,000 for one with a 25 KB system prompt (callgrind), most of it validating and
//! re-validating strings; the scanner takes a long string with `memchr`. The answers are
//! serde's: a property test (`request/tests.rs`) checks this reader against the serde
//! model it replaced on generated and mutated bodies. Two deliberate differences, both
//! refusals: a body that is not JSON anywhere (serde's derive does not check UTF-8,
//! surrogate pairs or number range inside fields it skips; this reader validates the
//! whole body as `serde_json::Value` does), and a body, message or content part written
//! as a JSON array (which the derive would read positionally, as `[role, content]`).

mod read;
mod types;

#[cfg(test)]
pub(crate) use types::Message;
pub(crate) use types::{Endpoint, ParsedRequest, Prompt};

use crate::error::GatewayError;
use std::sync::Arc;
use warmpath_text::ChatInput;

fn bad(msg: impl Into<String>) -> GatewayError {
    GatewayError::BadRequest(msg.into())
}

/// A chat's whole template input, read as the engine reads it; a malformed `tools`,
/// `tool_calls`, `chat_template_kwargs`, ... is a 400 naming the field.
fn chat_input(body: &[u8]) -> Result<Arc<ChatInput>, GatewayError> {
    ChatInput::from_body(body)
        .map(Arc::new)
        .map_err(|e| bad(e.to_string()))
}

/// Parses the body of `endpoint`.
pub(crate) fn parse(endpoint: Endpoint, body: &[u8]) -> Result<ParsedRequest<'_>, GatewayError> {
    let fields = read::fields(endpoint, body).map_err(GatewayError::InvalidBody)?;
    if let Some((name, why)) = fields.refused {
        return Err(bad(format!("`{name}` {why}")));
    }
    let prompt = match fields.prompt {
        read::PromptField::Chat(msgs) if msgs.is_empty() => {
            return Err(bad("`messages` must not be empty"))
        }
        read::PromptField::Chat(msgs) => Prompt::Chat(msgs),
        read::PromptField::Text(t) => Prompt::Text(t),
        read::PromptField::Tokens(t) => Prompt::Tokens(t),
        read::PromptField::Texts(mut v) if v.len() == 1 => Prompt::Text(v.remove(0)),
        read::PromptField::Texts(_) => {
            return Err(bad("batched prompts are not supported; send one prompt"))
        }
    };
    let max_tokens = match endpoint {
        Endpoint::Chat => fields.max_completion_tokens.or(fields.max_tokens),
        Endpoint::Completions | Endpoint::Passthrough(_) => fields.max_tokens,
    };
    let chat_input = match (endpoint, fields.full_render) {
        (Endpoint::Chat, true) => Some(chat_input(body)?),
        _ => None,
    };
    let parsed = ParsedRequest {
        model: fields.model,
        stream: fields.stream.unwrap_or(false),
        max_tokens,
        n: fields.n.unwrap_or(1),
        prompt,
        chat_input,
    };
    if parsed.n == 0 || parsed.n > 16 {
        return Err(bad("`n` must be within 1..=16"));
    }
    if parsed.model.is_empty() {
        return Err(bad("`model` must not be empty"));
    }
    Ok(parsed)
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit_tests {
    use super::*;
    use std::borrow::Cow;
    use warmpath_core::TokenId;

    #[test]
    fn parses_chat_with_parts() {
        let body = br#"{"model":"m","messages":[{"role":"system","content":"s"},
            {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
            "stream":true,"max_completion_tokens":7}"#;
        let p = parse(Endpoint::Chat, body).unwrap();
        assert!(p.stream);
        assert_eq!(p.max_tokens, Some(7));
        assert_eq!(
            p.prompt,
            Prompt::Chat(vec![
                Message::new("system", "s"),
                Message::new("user", "ab")
            ])
        );
    }

    #[test]
    fn rejects_malformed_and_hostile_bodies() {
        assert!(matches!(
            parse(Endpoint::Chat, b"{not json"),
            Err(GatewayError::InvalidBody(_))
        ));
        assert!(matches!(
            parse(
                Endpoint::Chat,
                br#"{"model":"a","model":"b","messages":[{"role":"user","content":"x"}]}"#
            ),
            Err(GatewayError::InvalidBody(_))
        ));
        assert!(parse(
            Endpoint::Chat,
            br#"{"model":"m","messages":[{"role":"user","content":"x"}],"cache_salt":"evil"}"#
        )
        .is_err());
        assert!(parse(Endpoint::Chat, br#"{"model":"m","messages":[]}"#).is_err());
        assert!(parse(
            Endpoint::Completions,
            br#"{"model":"m","prompt":"x","n":1000}"#
        )
        .is_err());
    }

    #[test]
    fn engine_control_fields_are_refused_by_name_and_null_is_absent() {
        for (name, _) in read::REFUSED_FIELDS {
            for (endpoint, head) in [
                (
                    Endpoint::Chat,
                    r#"{"model":"m","messages":[{"role":"user","content":"x"}]"#,
                ),
                (Endpoint::Completions, r#"{"model":"m","prompt":"x""#),
            ] {
                let sent = format!(r#"{head},"{name}":{{"remote_host":"10.0.0.9"}}}}"#);
                match parse(endpoint, sent.as_bytes()) {
                    Err(GatewayError::BadRequest(msg)) => assert!(msg.contains(name), "{msg}"),
                    other => panic!("{name}: {:?}", other.map(|r| r.model)),
                }
                let null = format!(r#"{head},"{name}":null}}"#);
                assert!(
                    parse(endpoint, null.as_bytes()).is_ok(),
                    "{name}: null is absent"
                );
                let twice = format!(r#"{head},"{name}":null,"{name}":null}}"#);
                assert!(
                    matches!(
                        parse(endpoint, twice.as_bytes()),
                        Err(GatewayError::InvalidBody(_))
                    ),
                    "{name}: a duplicate"
                );
            }
        }
        // Names that merely resemble one pass through.
        let body = br#"{"model":"m","prompt":"x","priority_hint":1,"base":"u"}"#;
        assert!(parse(Endpoint::Completions, body).is_ok());
    }

    #[test]
    fn agent_fields_select_the_full_rendering_and_bad_ones_are_refused() {
        let head = r#"{"model":"m","messages":[{"role":"user","content":"x"}]"#;
        // Plain chats, and null agent fields, keep the role/content path.
        for body in [format!("{head}}}"), format!(r#"{head},"tools":null}}"#)] {
            let p = parse(Endpoint::Chat, body.as_bytes()).unwrap();
            assert!(p.chat_input.is_none(), "{body}");
        }
        let tool = r#"{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}"#;
        for extra in [
            format!(r#","tools":[{tool}]"#),
            r#","chat_template_kwargs":{"enable_thinking":false}"#.to_string(),
            r#","add_generation_prompt":false,"continue_final_message":true"#.to_string(),
        ] {
            let body = format!("{head}{extra}}}");
            let p = parse(Endpoint::Chat, body.as_bytes()).unwrap();
            assert!(p.chat_input.is_some(), "{body}");
        }
        let calls = br#"{"model":"m","messages":[{"role":"user","content":"x"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function",
            "function":{"name":"f","arguments":"{\"q\":1}"}}]},
            {"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"r"}]}]}"#;
        assert!(parse(Endpoint::Chat, calls).unwrap().chat_input.is_some());
        for (extra, field) in [
            (r#","tools":{"type":"function"}"#, "tools"),
            (
                r#","tools":[{"type":"function","function":{"description":"no name"}}]"#,
                "tools",
            ),
            (r#","tools":[{"type":"retrieval"}]"#, "tools"),
            (r#","chat_template_kwargs":[1]"#, "chat_template_kwargs"),
            (
                r#","chat_template_kwargs":{"messages":[]}"#,
                "chat_template_kwargs",
            ),
            (r#","tool_choice":7"#, "tool_choice"),
            (r#","documents":"d""#, "documents"),
            (r#","add_generation_prompt":"yes""#, "add_generation_prompt"),
        ] {
            let body = format!("{head}{extra}}}");
            match parse(Endpoint::Chat, body.as_bytes()) {
                Err(GatewayError::BadRequest(msg)) => assert!(msg.contains(field), "{msg}"),
                other => panic!("{body}: {:?}", other.map(|p| p.chat_input.is_some())),
            }
        }
    }

    #[test]
    fn parses_completion_prompts() {
        let p = parse(
            Endpoint::Completions,
            br#"{"model":"m","prompt":[1,2,3],"max_tokens":5}"#,
        )
        .unwrap();
        assert_eq!(
            p.prompt,
            Prompt::Tokens(vec![TokenId(1), TokenId(2), TokenId(3)])
        );
        let p = parse(Endpoint::Completions, br#"{"model":"m","prompt":"hi"}"#).unwrap();
        assert_eq!(p.prompt, Prompt::Text("hi".into()));
        // Strings without escapes are borrowed from the body; escaped ones are unescaped.
        let body = br#"{"model":"m","messages":[{"role":"user","content":"plain"},
            {"role":"user","content":"a\nb"}]}"#;
        let p = parse(Endpoint::Chat, body).unwrap();
        let Prompt::Chat(m) = &p.prompt else {
            panic!("a chat")
        };
        assert!(matches!(m[0].content, Cow::Borrowed("plain")));
        assert!(matches!(&m[1].content, Cow::Owned(s) if s == "a\nb"));
        assert!(matches!(p.model, Cow::Borrowed("m")));
        assert!(!p.stream);
    }
}
