//! The OpenAI Responses API (`POST /v1/responses`), served by translation to chat
//! completions for every engine (docs/responses-api.md):
//!
//! - [`request`]: the Responses body read and rendered as the equivalent chat body, which
//!   then takes the chat path unchanged (same token blocks, same prefix routing).
//! - [`store`]: what each response was (the conversation, the replica that served it),
//!   bounded and with a TTL, in Redis too with shared state, so a follow-up naming it
//!   (`previous_response_id`) is expanded to the whole conversation and pinned to that
//!   replica.
//! - [`output`]: a chat completion rendered as a Responses object; [`stream`]: a chat SSE
//!   stream rendered as the Responses event stream.
//!
//! [`Exchange`] is one request's side of it: opened from the client's body, it translates
//! the replica's answer as it passes and yields the record to keep.

pub(crate) mod output;
pub(crate) mod request;
pub(crate) mod store;
pub(crate) mod stream;
#[cfg(test)]
mod tests;

use crate::error::GatewayError;
use crate::fleet::Fleet;
use bytes::Bytes;
use output::{Answer, Meta};
use request::ResponsesRequest;
use serde_json::Value;
use std::sync::Arc;
use store::{Record, Store};
use stream::StreamTranslator;

/// One Responses request: what to answer the client with, and what to keep.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// The tenant whose request it is (its records are its own).
    tenant: String,
    meta: Meta,
    /// The conversation before this answer (earlier turns and the new input).
    conversation: Vec<Value>,
    /// The replica that served the previous response (its URL), when continuing one.
    pin: Option<String>,
    /// The replica answered 200: its body is translated.
    translating: bool,
    stream: Option<StreamTranslator>,
    /// A plain answer's body, gathered until it is complete.
    json: Vec<u8>,
    answer: Option<Answer>,
}

impl Exchange {
    /// Reads a Responses body and expands a follow-up with the conversation it continues
    /// (this gateway's record or the fleet's, `tenant`'s only): the exchange and the chat
    /// body to route and send. An unknown `previous_response_id` is a 400
    /// (`previous_response_not_found`).
    pub(crate) async fn open(
        tenant: &str,
        body: &[u8],
        store: &Store,
        fleet: Option<&Arc<Fleet>>,
    ) -> Result<(Self, Bytes), GatewayError> {
        let req = ResponsesRequest::parse(body)?;
        let previous = match &req.previous_response_id {
            Some(id) => Some(
                store
                    .get(tenant, id, fleet)
                    .await
                    .ok_or_else(|| GatewayError::PreviousResponseNotFound(id.clone()))?,
            ),
            None => None,
        };
        let history = previous.as_ref().map_or(&[][..], |p| &p.messages[..]);
        let chat = req.chat_body(history);
        let mut conversation = history.to_vec();
        conversation.extend(req.input.iter().cloned());
        let meta = Meta {
            id: output::new_id("resp"),
            created_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            model: req.model.clone(),
            instructions: req.instructions.clone(),
            previous_response_id: req.previous_response_id.clone(),
            store: req.store,
            echo: req.echo.clone(),
        };
        let stream = req.stream.then(|| StreamTranslator::new(meta.clone()));
        let x = Self {
            tenant: tenant.to_string(),
            meta,
            conversation,
            pin: previous.map(|p| p.replica.clone()),
            translating: false,
            stream,
            json: Vec::new(),
            answer: None,
        };
        Ok((x, Bytes::from(chat)))
    }

    /// The tenant whose request it is.
    pub(crate) fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The replica a follow-up should go to (the previous response's), when there is one.
    pub(crate) fn pin(&self) -> Option<&str> {
        self.pin.as_deref()
    }

    /// The replica's status: a 200 is translated; anything else (OpenAI error JSON, the
    /// same in both APIs) passes through as it is. Returns whether the body is translated
    /// (its length changes: the caller drops `Content-Length`).
    pub(crate) fn on_status(&mut self, status: u16) -> bool {
        self.translating = status == 200;
        self.translating
    }

    /// Translates one body chunk in place: a stream event by event, a plain answer whole
    /// at its end (nothing goes out before).
    pub(crate) fn on_body(&mut self, body: &mut Option<Bytes>, end: bool) {
        if !self.translating {
            return;
        }
        if let Some(t) = self.stream.as_mut() {
            let out = body.as_deref().map(|b| t.push(b)).unwrap_or_default();
            if end && t.completed() {
                self.answer = Some(t.answer());
            }
            *body = Some(Bytes::from(out));
            return;
        }
        if let Some(b) = body.take() {
            self.json.extend_from_slice(&b);
        }
        if !end {
            *body = Some(Bytes::new());
            return;
        }
        let out = match serde_json::from_slice::<Value>(&self.json) {
            Ok(v) if v.get("choices").is_some() => {
                let answer = Answer::from_chat(&v);
                let object = self.meta.complete(&answer);
                self.answer = Some(answer);
                serde_json::to_vec(&object).unwrap_or_default()
            }
            // Not a chat completion: passed on as the replica sent it.
            _ => std::mem::take(&mut self.json),
        };
        *body = Some(Bytes::from(out));
    }

    /// What to keep of a complete answer served by `replica` (`None` when `store` is
    /// false or the answer did not complete).
    pub(crate) fn record(&self, replica: String) -> Option<(String, Record)> {
        if !self.meta.store {
            return None;
        }
        let answer = self.answer.as_ref()?;
        let mut messages = self.conversation.clone();
        messages.push(answer.chat_message());
        let record = Record {
            model: self.meta.model.clone(),
            messages,
            replica,
        };
        Some((self.meta.id.clone(), record))
    }
}
