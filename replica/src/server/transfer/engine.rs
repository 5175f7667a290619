//! What a KV transfer and a shared-tier lookup ask of the engine loop, the same way: the
//! prompt's chain hashes under this replica's checkpoint and the tenant's salt, how many
//! leading blocks it holds already, and caching a run of checked blocks.

use crate::server::http::AppState;
use crate::server::worker::{ImportBlock, WorkerMsg};
use warmpath_core::{block_hashes, BlockHash, BlockSize, CacheSalt, HashNamespace, TokenId};

/// Sends a message that carries a reply channel to the engine loop and awaits the reply
/// (`None` when the loop is gone).
pub async fn ask<T>(
    state: &AppState,
    msg: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> WorkerMsg,
) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    state.submit.send(msg(tx)).ok()?;
    rx.await.ok()
}

/// `prompt`'s full-block chain hashes as this replica computes them (its checkpoint, the
/// tenant's `salt`), and how many leading blocks of them its cache holds.
pub async fn held_prefix(
    state: &AppState,
    prompt: &[TokenId],
    salt: Option<&CacheSalt>,
) -> (Vec<BlockHash>, usize) {
    let ns = HashNamespace::new(state.facts.checkpoint.clone()).with_salt(salt.cloned());
    let hashes = block_hashes(ns.root_seed(), prompt, BlockSize(state.block_size as u32));
    let have = ask(state, |reply| WorkerMsg::CachedPrefix {
        hashes: hashes.clone(),
        reply,
    })
    .await
    .unwrap_or(0);
    (hashes, have)
}

/// Caches `blocks` (checked, in chain order, following the held prefix); returns how many
/// the pool took.
pub async fn import(state: &AppState, blocks: Vec<ImportBlock>) -> usize {
    if blocks.is_empty() {
        return 0;
    }
    ask(state, |reply| WorkerMsg::Import { blocks, reply })
        .await
        .unwrap_or(0)
}
