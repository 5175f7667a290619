//! A publisher that behaves as vLLM's `ZmqEventPublisher`: a PUB socket sending `(topic,
//! seq, payload)`, a ROUTER socket serving replays from a bounded buffer (batches with
//! `seq >= start`, then the `-1` end marker), the batch appended to the buffer after it is
//! sent.

use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use zeromq::{PubSocket, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

/// The topic the fake engine publishes on.
pub(crate) const TOPIC: &str = "kv-events";

fn frames(parts: Vec<Bytes>) -> ZmqMessage {
    ZmqMessage::try_from(parts).expect("frames")
}

/// A publisher that behaves as vLLM's `ZmqEventPublisher`.
pub(crate) struct FakeEngine {
    publisher: PubSocket,
    pub(crate) endpoint: String,
    pub(crate) replay_endpoint: String,
    next_seq: u64,
    buffer: Arc<Mutex<VecDeque<(u64, Bytes)>>>,
    buffer_steps: usize,
    /// Start sequence numbers of the replay requests served.
    requests: Arc<Mutex<Vec<u64>>>,
    router: tokio::task::JoinHandle<()>,
    /// Tells the replay task to close its ROUTER socket and end.
    stop_router: tokio::sync::oneshot::Sender<()>,
}

impl FakeEngine {
    pub(crate) async fn start(buffer_steps: usize) -> Self {
        Self::start_at(buffer_steps, "tcp://127.0.0.1:0", "tcp://127.0.0.1:0").await
    }

    /// A publisher bound at `endpoint` and `replay_endpoint` (port 0: any free port).
    pub(crate) async fn start_at(
        buffer_steps: usize,
        endpoint: &str,
        replay_endpoint: &str,
    ) -> Self {
        let mut publisher = PubSocket::new();
        let endpoint = publisher.bind(endpoint).await.expect("bind PUB");
        let mut router = RouterSocket::new();
        let replay_endpoint = router.bind(replay_endpoint).await.expect("bind ROUTER");
        let buffer = Arc::new(Mutex::new(VecDeque::<(u64, Bytes)>::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (buf, reqs) = (buffer.clone(), requests.clone());
        let (stop_router, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let router = tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    msg = router.recv() => match msg {
                        Ok(msg) => msg,
                        Err(_) => break,
                    },
                    _ = &mut stopped => break,
                };
                // (client identity, empty delimiter, start: 8 bytes BE), or ignored.
                let Ok([client, _, start]) = <[Bytes; 3]>::try_from(msg.into_vec()) else {
                    continue;
                };
                let Ok(start) = <[u8; 8]>::try_from(&start[..]) else {
                    continue;
                };
                let start = u64::from_be_bytes(start);
                reqs.lock().expect("requests").push(start);
                let due: Vec<(u64, Bytes)> = buf
                    .lock()
                    .expect("buffer")
                    .iter()
                    .filter(|b| b.0 >= start)
                    .cloned()
                    .collect();
                for (seq, payload) in due {
                    let seq = Bytes::copy_from_slice(&seq.to_be_bytes());
                    let reply = frames(vec![client.clone(), Bytes::new(), seq, payload]);
                    if router.send(reply).await.is_err() {
                        break;
                    }
                }
                let end = Bytes::copy_from_slice(&(-1i64).to_be_bytes());
                let _ = router
                    .send(frames(vec![client, Bytes::new(), end, Bytes::new()]))
                    .await;
            }
            // Closing (not dropping) waits until the listener is unbound, so a restarted
            // engine can bind the same port at once.
            router.close().await;
        });
        Self {
            publisher,
            endpoint: endpoint.to_string(),
            replay_endpoint: replay_endpoint.to_string(),
            next_seq: 0,
            buffer,
            buffer_steps,
            requests,
            router,
            stop_router,
        }
    }

    /// Sends the next batch and keeps it for replay; returns its sequence number.
    pub(crate) async fn publish(&mut self, payload: &[u8]) -> u64 {
        self.emit(payload, true).await
    }

    /// Keeps the next batch for replay without sending it: a message the subscriber lost.
    pub(crate) async fn lose(&mut self, payload: &[u8]) -> u64 {
        self.emit(payload, false).await
    }

    async fn emit(&mut self, payload: &[u8], send: bool) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let payload = Bytes::copy_from_slice(payload);
        if send {
            let msg = frames(vec![
                Bytes::from_static(TOPIC.as_bytes()),
                Bytes::copy_from_slice(&seq.to_be_bytes()),
                payload.clone(),
            ]);
            self.publisher.send(msg).await.expect("publish");
        }
        let mut buf = self.buffer.lock().expect("buffer");
        buf.push_back((seq, payload));
        while buf.len() > self.buffer_steps {
            buf.pop_front();
        }
        seq
    }

    /// Stops as a crashed engine would: both sockets closed, the buffer gone.
    /// Each listener is unbound before this returns, so the ports are free to bind again.
    pub(crate) async fn shutdown(self) {
        let _ = self.stop_router.send(());
        self.router.await.expect("the replay task ends");
        self.publisher.close().await;
    }

    pub(crate) fn requests(&self) -> Vec<u64> {
        self.requests.lock().expect("requests").clone()
    }
}
