//! Test servers on a free loopback port, written against raw TCP so that a test controls
//! every byte the client reads.

use crate::addr::Addr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Reads one request head from `s`; `None` when the client closed first.
pub(crate) async fn read_head(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    Some(got)
}

/// A one-connection server that reads the request head and answers `reply`; it returns
/// what it read.
pub(crate) async fn serve_once(reply: &'static [u8]) -> (Addr, tokio::task::JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = Addr::from(l.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let got = read_head(&mut s).await.expect("a request head");
        s.write_all(reply).await.unwrap();
        got
    });
    (addr, task)
}

/// A server answering every request on every connection with `reply` (keep-alive), and
/// the count of connections it accepted.
pub(crate) async fn serve_all(reply: &'static [u8]) -> (Addr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = Addr::from(l.local_addr().unwrap());
    let accepts = Arc::new(AtomicUsize::new(0));
    let counted = accepts.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                while read_head(&mut s).await.is_some() {
                    if s.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepts)
}
