//! The gate a long request passes before its body is parsed and its prompt tokenized off
//! the event loop ([`LongPrompts`]).
//!
//! In place, a 128k-token prompt holds its worker thread for its whole BPE (about 20 ms
//! when new), and every short request on that thread waits behind it (BENCHMARKS.md,
//! section 26). A long request instead parses and tokenizes under
//! `tokio::task::block_in_place`: the worker's other tasks move to another thread while
//! this one works. Memory stays bounded by the gate: a long body is parsed (its decoded
//! text is as large as the body) only once the request holds one of its permits, one per
//! worker thread, so no more long prompts are decoded and tokenized at once than when each
//! worker thread did it in place.

use tokio::sync::{Semaphore, SemaphorePermit};

/// Bodies of at least this many bytes pass the gate and are parsed and tokenized off the
/// event loop. Uncached, 32 KiB of English is about 8k tokens, a few milliseconds of BPE;
/// below it the hand-off costs more than the stall it saves.
pub(crate) const LONG_BODY_BYTES: usize = 32 * 1024;

/// The gate (see the module docs).
#[derive(Debug)]
pub(crate) struct LongPrompts(Semaphore);

impl LongPrompts {
    /// A gate letting `permits` long requests parse and tokenize at once.
    pub(crate) fn new(permits: usize) -> Self {
        Self(Semaphore::new(permits.max(1)))
    }

    /// Waits for a permit when `body_len` is long; `None` (no wait) for a short body.
    pub(crate) async fn enter(&self, body_len: usize) -> Option<SemaphorePermit<'_>> {
        if body_len < LONG_BODY_BYTES {
            return None;
        }
        // Never closed, so acquiring only waits.
        self.0.acquire().await.ok()
    }
}

/// Runs `f` off the event loop when `long` (the worker's other tasks go on on another
/// thread), in place otherwise. Outside a multi-thread runtime (unit tests) it runs in
/// place.
pub(crate) fn off_loop<T>(long: bool, f: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if long && multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn only_long_bodies_wait_for_a_permit() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let gate = LongPrompts::new(1);
            assert!(gate.enter(LONG_BODY_BYTES - 1).await.is_none());
            let held = gate.enter(LONG_BODY_BYTES).await;
            assert!(held.is_some());
            // The one permit is held: a second long body waits, a short one does not.
            assert!(gate.enter(10).await.is_none());
            let mut waiting = std::pin::pin!(gate.enter(LONG_BODY_BYTES));
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            assert!(
                waiting.as_mut().poll(&mut cx).is_pending(),
                "a second long body waits"
            );
            drop(held);
            assert!(matches!(
                waiting.as_mut().poll(&mut cx),
                std::task::Poll::Ready(Some(_))
            ));
            assert!(gate.enter(LONG_BODY_BYTES).await.is_some());
        });
    }

    #[test]
    fn off_loop_runs_in_place_without_a_multi_thread_runtime_and_off_it_with_one() {
        assert_eq!(off_loop(true, || 7), 7);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let here = std::thread::current().id();
        let ran_on = rt.block_on(async {
            tokio::spawn(async { off_loop(true, || std::thread::current().id()) })
                .await
                .unwrap()
        });
        assert_ne!(ran_on, here);
    }
}
