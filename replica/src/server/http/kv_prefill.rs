//! `POST /v1/kv/prefill` on a prefill replica: computes the prompt's KV (a one-token
//! greedy generation, whose blocks land in the radix cache as usual) and streams each
//! full block, from `skip_blocks` on, the step that caches it. A clean end is the end
//! frame; a failed prefill, or the cut test hook, aborts the body without one.

use super::params::sampling_params;
use crate::server::error::ApiError;
use crate::server::kv::block::{Export, ExportedBlock, EXPORT_QUEUE_BLOCKS};
use crate::server::kv::record::{encode, record_layout};
use crate::server::kv::trust::now_ms;
use crate::server::state::AppState;
use crate::server::worker::{GenRequest, SeqEvent, WorkerMsg};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use tokio::sync::mpsc::{channel, unbounded_channel, Receiver, UnboundedReceiver};
use warmpath_core::CacheSalt;
use warmpath_engine::sampling::SamplingParams;
use warmpath_protocol::kv_block::{push_frame, KvRecordLayout, END_FRAME};
use warmpath_protocol::replica_api::{PrefillRequest, HEADER_CACHE_SALT, PATH_KV_PREFILL};
use warmpath_protocol::transfer_auth::HEADER_TRANSFER_AUTH;

/// The handler.
pub async fn prefill(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !state.role.prefills() {
        return Err(ApiError::InvalidRequest(format!(
            "this replica's role is {}: it does not serve KV to other replicas",
            state.role
        )));
    }
    let auth = headers
        .get(HEADER_TRANSFER_AUTH)
        .and_then(|v| v.to_str().ok());
    state
        .trust
        .may_serve_pull(PATH_KV_PREFILL, auth, now_ms())
        .map_err(|e| ApiError::Unauthorized(e.to_string()))?;
    let req: PrefillRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let vocab = state.facts.vocab_size;
    if let Some(bad) = req.prompt.iter().find(|t| t.0 as usize >= vocab) {
        return Err(ApiError::InvalidParam {
            param: "prompt",
            message: format!("token id {} is outside the vocabulary ({vocab} ids)", bad.0),
        });
    }
    let pool_tokens = state.info.capacity_blocks as usize * state.block_size;
    let fields = warmpath_protocol::openai::SamplingFields {
        max_tokens: Some(1),
        temperature: Some(0.0),
        ..Default::default()
    };
    let params: SamplingParams = sampling_params(
        &fields,
        req.prompt.len(),
        state.facts.max_context,
        pool_tokens,
    )?;
    let salt = headers
        .get(HEADER_CACHE_SALT)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
        .map(CacheSalt::new);
    let (reply, rx) = unbounded_channel();
    let (tx, blocks) = channel(EXPORT_QUEUE_BLOCKS);
    let gen = GenRequest {
        prompt: req.prompt,
        params,
        salt,
        ignore_eos: true,
        reply,
        export: Some(Export::new(tx, req.skip_blocks as usize)),
        // The decode replica passes on the gateway's tier switch (data residency).
        tier: !super::generate::tier_off(&headers),
        rng_draws: 0,
        replay: Vec::new(),
    };
    state
        .submit
        .send(WorkerMsg::Generate(gen))
        .map_err(|_| ApiError::Unavailable)?;
    let stream = Stream {
        layout: record_layout(state.facts.kv_layout),
        blocks,
        rx,
        sent: 0,
        cut_after: state.fault_kv_cut_after_blocks,
        done: false,
    };
    let body = Body::from_stream(futures_util::stream::unfold(stream, Stream::next));
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok(resp)
}

/// The body's state: blocks until the sequence ends, then its last event.
struct Stream {
    layout: KvRecordLayout,
    blocks: Receiver<ExportedBlock>,
    rx: UnboundedReceiver<SeqEvent>,
    sent: u32,
    cut_after: Option<u32>,
    done: bool,
}

type Item = Result<Bytes, std::io::Error>;

impl Stream {
    async fn next(mut self) -> Option<(Item, Self)> {
        if self.done {
            return None;
        }
        if let Some(block) = self.blocks.recv().await {
            if self.cut_after.is_some_and(|n| self.sent >= n) {
                // TEST HOOK (--fault-kv-cut-after-blocks): the transfer dies midway, after
                // the frames already sent have had time to leave.
                self.done = true;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                return Some((
                    Err(std::io::Error::other("KV stream cut (test hook)")),
                    self,
                ));
            }
            self.sent += 1;
            let layout = self.layout;
            let bytes = tokio::task::spawn_blocking(move || {
                let rec = encode(layout, block);
                let mut frame = Vec::with_capacity(rec.len() + 4);
                push_frame(&mut frame, &rec);
                frame
            })
            .await
            .map_err(std::io::Error::other);
            return Some((bytes.map(Bytes::from), self));
        }
        // The sequence ended (its export sender went with it): a finished prefill ends
        // the stream cleanly; a failed one aborts it.
        self.done = true;
        loop {
            match self.rx.recv().await {
                Some(SeqEvent::Finished { .. }) => {
                    return Some((Ok(Bytes::from_static(&END_FRAME)), self));
                }
                Some(SeqEvent::Failed(m)) => {
                    return Some((Err(std::io::Error::other(m)), self));
                }
                Some(_) => continue,
                None => {
                    let e = std::io::Error::other("the engine dropped the prefill");
                    return Some((Err(e), self));
                }
            }
        }
    }
}
