//! The stdio reader hands over to the runtime every `Runtime::frames_per_turn` frames of one
//! read, as the runtime asks: counted with a runtime that wraps tokio's and counts its yields.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mcp_tokio::mcp_server::{self, BoxFuture, Runtime};
use mcp_tokio::{Caller, Server, TokioRuntime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

#[derive(Clone)]
struct Counting {
    inner: TokioRuntime,
    per_turn: usize,
    yields: Arc<AtomicUsize>,
}

impl Runtime for Counting {
    fn spawn(&self, fut: BoxFuture<()>) {
        self.inner.spawn(fut)
    }
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        self.inner.sleep_until(deadline)
    }
    fn now(&self) -> Instant {
        self.inner.now()
    }
    fn yield_now(&self) -> BoxFuture<()> {
        self.yields.fetch_add(1, Ordering::Relaxed);
        self.inner.yield_now()
    }
    fn frames_per_turn(&self) -> usize {
        self.per_turn
    }
}

/// Serves `frames` pings, written at once before the session starts so that one read takes
/// them all, on a runtime asking for `per_turn`; returns the yields and the answers.
async fn yields_for(per_turn: usize, frames: usize) -> (usize, usize) {
    let server = Server::builder("turns", "1").build().expect("server");
    let (client, server_side) = tokio::io::duplex(1024 * 1024);
    let (server_read, server_write) = tokio::io::split(server_side);
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let pings: String =
        (0..frames).map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n")).collect();
    client_write.write_all(pings.as_bytes()).await.unwrap();
    client_write.shutdown().await.unwrap();
    let yields = Arc::new(AtomicUsize::new(0));
    let rt = Counting { inner: TokioRuntime::current(), per_turn, yields: yields.clone() };
    mcp_server::serve_lines(
        &server,
        rt,
        Caller::anonymous(),
        server_read.compat(),
        server_write.compat_write(),
    )
    .await
    .unwrap();
    let mut out = String::new();
    client_read.read_to_string(&mut out).await.unwrap();
    (yields.load(Ordering::Relaxed), out.lines().count())
}

#[tokio::test(flavor = "current_thread")]
async fn the_reader_yields_every_frames_per_turn_frames_of_a_read() {
    assert_eq!(yields_for(3, 12).await, (4, 12));
    assert_eq!(yields_for(4, 12).await, (3, 12));
    assert_eq!(yields_for(5, 12).await, (2, 12));
    // 0 counts as 1: a yield after every frame, never a division by zero.
    assert_eq!(yields_for(0, 12).await, (12, 12));
}
