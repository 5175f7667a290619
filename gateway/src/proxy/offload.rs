//! A long prompt is tokenized on tokio's blocking pool, so one 128k-token prompt does not
//! stall the event loop, and the short requests it serves, for the tens of milliseconds its
//! BPE takes (BENCHMARKS.md, long bodies). A short prompt is tokenized in place, as before:
//! a hop to another thread costs more than its tokenization (or its cache hit).

use crate::body::request::{Message, ParsedRequest, Prompt};
use crate::encoder::PromptEncoder;
use crate::error::GatewayError;
use crate::replicas::Replica;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;
use warmpath_core::TokenId;
use warmpath_text::ChatInput;

/// Prompts of at least this many bytes (roles and contents, or text) are tokenized on the
/// blocking pool. Uncached, 32 KiB of English is about 10k tokens, some 1.5 ms of BPE on one
/// core (BENCHMARKS.md section 26); below it, the event loop's stall is shorter than a thread
/// hop is worth.
pub(crate) const OFFLOAD_MIN_PROMPT_BYTES: usize = 32 * 1024;

/// The bytes of `prompt` the tokenizer reads.
pub(crate) fn prompt_bytes(prompt: &Prompt<'_>) -> usize {
    match prompt {
        Prompt::Chat(msgs) => msgs.iter().map(|m| m.role.len() + m.content.len()).sum(),
        Prompt::Text(t) => t.len(),
        Prompt::Tokens(_) => 0,
    }
}

/// Tokenizes the prompt of `req` with `replica`'s tokenizer ([`tokenize_in_place`]), on the
/// blocking pool when the prompt is long.
pub(crate) async fn tokenize(
    replica: &Arc<Replica>,
    req: &ParsedRequest<'_>,
) -> Result<Vec<TokenId>, GatewayError> {
    if prompt_bytes(&req.prompt) < OFFLOAD_MIN_PROMPT_BYTES {
        return tokenize_in_place(replica, req);
    }
    // The blocking pool needs owned data: one copy of the prompt's text, far cheaper than
    // its tokenization.
    let prompt = owned(&req.prompt);
    let input = req.chat_input.clone();
    let encoder = replica.tokenizer.clone();
    let joined =
        tokio::task::spawn_blocking(move || encode(&encoder, &prompt, input.as_ref())).await;
    match joined {
        Ok(tokens) => tokens,
        // A panic in the tokenizer stays a panic of this request, as it was in place.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The runtime is shutting down.
        Err(_) => Err(GatewayError::Overloaded {
            retry_after: Duration::from_secs(1),
        }),
    }
}

/// Tokenizes the prompt of `req` with `replica`'s tokenizer on this thread: a chat with
/// tools, tool calls or template kwargs from its whole template input, as the engine
/// renders it.
pub(crate) fn tokenize_in_place(
    replica: &Replica,
    req: &ParsedRequest<'_>,
) -> Result<Vec<TokenId>, GatewayError> {
    encode(&replica.tokenizer, &req.prompt, req.chat_input.as_ref())
}

fn encode(
    encoder: &PromptEncoder,
    prompt: &Prompt<'_>,
    chat_input: Option<&Arc<ChatInput>>,
) -> Result<Vec<TokenId>, GatewayError> {
    let r = match prompt {
        Prompt::Chat(msgs) => match chat_input {
            Some(input) => encoder.encode_chat_input(input, msgs),
            None => encoder.encode_chat(msgs),
        },
        Prompt::Text(t) => encoder.encode(t, true),
        Prompt::Tokens(t) => return Ok(t.clone()),
    };
    r.map_err(|e| GatewayError::BadRequest(format!("cannot tokenize the prompt: {e}")))
}

fn owned(prompt: &Prompt<'_>) -> Prompt<'static> {
    let own = |s: &Cow<'_, str>| Cow::Owned(s.to_string());
    match prompt {
        Prompt::Chat(msgs) => Prompt::Chat(
            msgs.iter()
                .map(|m| Message::new(own(&m.role), own(&m.content)))
                .collect(),
        ),
        Prompt::Text(t) => Prompt::Text(own(t)),
        Prompt::Tokens(t) => Prompt::Tokens(t.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::request::{self, Endpoint};
    use crate::config::Config;
    use crate::replicas::ReplicaAddr;
    use crate::state::AppState;
    use crate::tokenize::CachedTokenizer;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use warmpath_core::{BlockSize, CheckpointId};
    use warmpath_protocol::replica_api::ReplicaInfo;
    use warmpath_text::bytelevel::chatml_bpe_spec;

    fn replica(rt: &tokio::runtime::Runtime) -> Arc<Replica> {
        let state = AppState::new(Config::default(), rt.handle().clone());
        let info = ReplicaInfo {
            model: "m".into(),
            checkpoint: CheckpointId::new("m@1"),
            block_size: BlockSize(16),
            hash_scheme: warmpath_core::SCHEME_VERSION,
            capacity_blocks: 1 << 16,
            max_context: 1 << 20,
            region: None,
            device: "cpu".into(),
            role: Default::default(),
            kv_store_region: None,
        };
        let tok = CachedTokenizer::new(&chatml_bpe_spec(), 64, 1).unwrap();
        let addr = ReplicaAddr::parse("http://127.0.0.1:9").unwrap();
        state
            .registry
            .insert(addr, info, Arc::new(tok.into()))
            .unwrap();
        state.registry.all().remove(0)
    }

    fn body(content_bytes: usize) -> Vec<u8> {
        let text = "the cache stays warm ".repeat(content_bytes / 21 + 1);
        format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{text}"}}]}}"#).into()
    }

    /// Tokenizes `body` while another task counts its turns on the same single-threaded
    /// runtime (Pingora's, one thread): returns the tokens and the turns the other task got
    /// before the tokens came back. Tokenizing in place never yields, so that task gets none.
    fn tokenize_beside_a_ticker(body: &[u8]) -> (Vec<TokenId>, usize) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let r = replica(&rt);
        let req = request::parse(Endpoint::Chat, body).unwrap();
        let ticks = Arc::new(AtomicUsize::new(0));
        rt.block_on(async {
            let t = ticks.clone();
            let ticker = tokio::spawn(async move {
                loop {
                    t.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            });
            let tokens = tokenize(&r, &req).await.unwrap();
            let seen = ticks.load(Ordering::Relaxed);
            ticker.abort();
            assert_eq!(tokens, tokenize_in_place(&r, &req).unwrap());
            (tokens, seen)
        })
    }

    #[test]
    fn a_long_prompt_leaves_the_event_loop_free_and_a_short_one_stays_in_place() {
        let long = body(OFFLOAD_MIN_PROMPT_BYTES);
        let (tokens, ticks) = tokenize_beside_a_ticker(&long);
        assert!(tokens.len() > OFFLOAD_MIN_PROMPT_BYTES / 2);
        assert!(
            ticks > 0,
            "the event loop ran other tasks while it was tokenized"
        );
        let short = body(OFFLOAD_MIN_PROMPT_BYTES / 4);
        let (tokens, ticks) = tokenize_beside_a_ticker(&short);
        assert!(!tokens.is_empty());
        assert_eq!(
            ticks, 0,
            "a short prompt is tokenized in place, no thread hop"
        );
    }
}
