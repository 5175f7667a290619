//! Turning the engine loop's [`SeqEvent`](crate::server::worker::SeqEvent)s into OpenAI responses: a full JSON body, or
//! server-sent events (`data: {chunk}` lines, an optional usage chunk, `data: [DONE]`).
//! Stop strings are applied by the reader (`super::reader`). For the gateway's stream
//! migration, events may carry their tokens (`warmpath_protocol::continuation`).

use super::job::{Endpoint, Job};
use super::reader::{Piece, Reader};
use crate::server::error::ApiError;
use crate::server::state::unix_now;
use crate::server::worker::FinishReason;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use warmpath_protocol::continuation::{tokens_comment, END_COMMENT, REPLAY_COMMENT};
use warmpath_protocol::openai::{
    ChatChoice, ChatChunkChoice, ChatCompletionChunk, ChatCompletionResponse, ChatDelta,
    CompletionChoice, CompletionResponse, ResponseMessage, Usage,
};

fn response_id(endpoint: Endpoint) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let prefix = match endpoint {
        Endpoint::Chat => "chatcmpl",
        Endpoint::Completion => "cmpl",
    };
    format!("{prefix}-{:x}{n:06x}", unix_now())
}

/// Waits for the whole answer and returns it as one JSON response.
pub async fn full(job: Job) -> Result<Response, ApiError> {
    let endpoint = job.endpoint;
    let model = job.model.clone();
    let mut r = Reader::new(job);
    let mut text = String::new();
    let mut reason = FinishReason::Stop;
    while let Some(p) = r.next().await {
        match p {
            Piece::Text(t) => text.push_str(&t),
            Piece::Alive => {}
            Piece::Done(why) => reason = why,
            Piece::Failed(m) => return Err(ApiError::Internal(m)),
        }
    }
    let (id, created, usage) = (response_id(endpoint), unix_now(), r.usage());
    let finish_reason = Some(reason.as_str().to_string());
    Ok(match endpoint {
        Endpoint::Chat => Json(ChatCompletionResponse {
            id,
            object: "chat.completion".into(),
            created,
            model,
            choices: vec![ChatChoice {
                index: 0,
                message: ResponseMessage {
                    role: "assistant".into(),
                    content: text,
                },
                finish_reason,
            }],
            usage,
        })
        .into_response(),
        Endpoint::Completion => Json(CompletionResponse {
            id,
            object: "text_completion".into(),
            created,
            model,
            choices: vec![CompletionChoice {
                text,
                index: 0,
                finish_reason,
            }],
            usage: Some(usage),
        })
        .into_response(),
    })
}

/// Builds SSE frames for one stream.
struct Framer {
    endpoint: Endpoint,
    id: String,
    created: u64,
    model: String,
}

impl Framer {
    fn frame<T: serde::Serialize>(value: &T) -> Bytes {
        let json = serde_json::to_string(value).unwrap_or_else(|_| "{}".into());
        Bytes::from(format!("data: {json}\n\n"))
    }

    fn chunk(
        &self,
        delta: ChatDelta,
        text: String,
        finish: Option<FinishReason>,
        usage: Option<Usage>,
    ) -> Bytes {
        let finish_reason = finish.map(|f| f.as_str().to_string());
        match self.endpoint {
            Endpoint::Chat => Self::frame(&ChatCompletionChunk {
                id: self.id.clone(),
                object: "chat.completion.chunk".into(),
                created: self.created,
                model: self.model.clone(),
                choices: if usage.is_some() {
                    Vec::new()
                } else {
                    vec![ChatChunkChoice {
                        index: 0,
                        delta,
                        finish_reason,
                    }]
                },
                usage,
            }),
            Endpoint::Completion => Self::frame(&CompletionResponse {
                id: self.id.clone(),
                object: "text_completion".into(),
                created: self.created,
                model: self.model.clone(),
                choices: if usage.is_some() {
                    Vec::new()
                } else {
                    vec![CompletionChoice {
                        text,
                        index: 0,
                        finish_reason,
                    }]
                },
                usage,
            }),
        }
    }

    fn text(&self, t: String) -> Bytes {
        self.chunk(
            ChatDelta {
                role: None,
                content: Some(t.clone()),
            },
            t,
            None,
            None,
        )
    }
}

/// State of one SSE stream.
struct SseState {
    reader: Reader,
    framer: Framer,
    include_usage: bool,
    started: bool,
    finished: bool,
}

/// Streams the answer as server-sent events.
pub fn sse(job: Job) -> Response {
    let framer = Framer {
        endpoint: job.endpoint,
        id: response_id(job.endpoint),
        created: unix_now(),
        model: job.model.clone(),
    };
    let include_usage = job.include_usage;
    let state = SseState {
        reader: Reader::new(job),
        framer,
        include_usage,
        started: false,
        finished: false,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        if st.finished {
            return None;
        }
        let mut out: Vec<u8> = Vec::new();
        if !st.started {
            st.started = true;
            // A continuation's client already had the role chunk.
            if st.framer.endpoint == Endpoint::Chat && !st.reader.job.resume.continues() {
                let first = ChatDelta {
                    role: Some("assistant".into()),
                    content: Some(String::new()),
                };
                out.extend_from_slice(&st.framer.chunk(first, String::new(), None, None));
            }
        }
        match st.reader.next().await {
            Some(Piece::Text(t)) => {
                if st.reader.job.tag_tokens {
                    let (sent, ids) = st.reader.take_ids();
                    out.extend_from_slice(tokens_comment(sent, &ids).as_bytes());
                    out.push(b'\n');
                }
                out.extend_from_slice(&st.framer.text(t));
            }
            Some(Piece::Alive) => {
                // A continuation replaying its tokens: a comment, so the gateway's idle
                // timeout does not take a long replay for a dead replica.
                if st.reader.job.tag_tokens {
                    out.extend_from_slice(REPLAY_COMMENT);
                    out.extend_from_slice(b"\n\n");
                }
            }
            Some(Piece::Done(reason)) => {
                if st.reader.job.tag_tokens {
                    out.extend_from_slice(END_COMMENT);
                    out.push(b'\n');
                }
                out.extend_from_slice(&st.framer.chunk(
                    ChatDelta::default(),
                    String::new(),
                    Some(reason),
                    None,
                ));
                if st.include_usage {
                    let usage = st.reader.usage();
                    out.extend_from_slice(&st.framer.chunk(
                        ChatDelta::default(),
                        String::new(),
                        None,
                        Some(usage),
                    ));
                }
                out.extend_from_slice(b"data: [DONE]\n\n");
                st.finished = true;
            }
            Some(Piece::Failed(m)) => {
                let body = ApiError::Internal(m).body();
                out.extend_from_slice(&Framer::frame(&body));
                st.finished = true;
            }
            None => st.finished = true,
        }
        Some((Ok::<Bytes, std::convert::Infallible>(Bytes::from(out)), st))
    });
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}
