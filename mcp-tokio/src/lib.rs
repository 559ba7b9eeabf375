//! Serve an MCP server on tokio.
//!
//! The protocol lives in [`mcp_proto`]; the handler API and the drivers live in its runtime-independent
//! [`server`](mcp_proto::server) layer. This crate only supplies tokio: the task spawner, the timer, the
//! clock and the standard streams. `mcp-smol` is its mirror image.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use mcp_tokio::{Server, ToolOutput};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Echo { text: String }
//!
//! let server = Server::builder("demo", "1.0.0")
//!     .typed_tool("echo", "Echoes its text", |args: Echo, _call| async move { ToolOutput::text(args.text) })
//!     .build()
//!     .expect("valid tools");
//! mcp_tokio::serve_stdio(&server).await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

use std::io;
use std::time::Instant;

pub use mcp_proto;
pub use mcp_proto::server::{
    typed_tool, BoxFuture, BuildError, Complete, GetPrompt, IntoToolResult, ReadResource, RequestContext,
    Runtime, Server, ServerBuilder, Status, StdioEnd, ToolCall, ToolResult, DEFAULT_DRAIN,
};
pub use mcp_proto::{
    Caller, Completion, Content, Gate, HandlerError, LogLevel, Prompt, PromptArgument, PromptMessage,
    PromptOutput, Resource, ResourceContents, ResourceTemplate, RpcError, Tool, ToolOutput,
};

use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The tokio [`Runtime`]: spawns on the current runtime and uses tokio's clock, so tests with
/// paused time stay deterministic.
#[derive(Debug, Clone)]
pub struct TokioRuntime {
    handle: tokio::runtime::Handle,
}

impl TokioRuntime {
    /// The runtime this is called from.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn current() -> Self {
        Self { handle: tokio::runtime::Handle::current() }
    }
}

impl Runtime for TokioRuntime {
    fn spawn(&self, fut: BoxFuture<()>) {
        self.handle.spawn(fut);
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// Serves one session on stdin/stdout until stdin ends, for an anonymous caller. Only protocol
/// bytes go to stdout.
pub async fn serve_stdio(server: &Server) -> io::Result<StdioEnd> {
    serve_stdio_as(server, Caller::anonymous()).await
}

/// [`serve_stdio`] for a given caller: whoever launched the process decides who it is (for
/// example from a command-line flag), and the server's gates see that caller.
pub async fn serve_stdio_as(server: &Server, caller: Caller) -> io::Result<StdioEnd> {
    serve_lines(server, caller, StdinThread::spawn(), tokio::io::stdout()).await
}

/// Standard input read on a thread of its own.
///
/// `tokio::io::stdin` reads on tokio's blocking pool, and a read there cannot be cancelled, so a
/// runtime shutting down waits for one more line that may never come (a client that closed our
/// stdout but not our stdin). A detached thread can simply be abandoned when the session ends.
struct StdinThread {
    chunks: tokio::sync::mpsc::Receiver<io::Result<Vec<u8>>>,
    pending: Vec<u8>,
    offset: usize,
}

impl StdinThread {
    fn spawn() -> Self {
        // A few chunks of read-ahead keep the pipe busy without buffering without bound.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let spawned = std::thread::Builder::new().name("mcp-stdin".into()).spawn(move || {
            use std::io::Read;
            let mut stdin = std::io::stdin().lock();
            loop {
                let mut buf = vec![0u8; 64 * 1024];
                let chunk = match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        buf.truncate(n);
                        Ok(buf)
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
                let failed = chunk.is_err();
                if tx.blocking_send(chunk).is_err() || failed {
                    break;
                }
            }
        });
        if let Err(e) = spawned {
            // Without the thread there is no input: report it as the first read's error.
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let _ = tx.try_send(Err(e));
            return Self { chunks: rx, pending: Vec::new(), offset: 0 };
        }
        Self { chunks: rx, pending: Vec::new(), offset: 0 }
    }
}

impl tokio::io::AsyncRead for StdinThread {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        use std::task::Poll;
        let this = &mut *self;
        if this.offset >= this.pending.len() {
            match this.chunks.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                // The thread ended: end of input.
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(Some(Ok(chunk))) => {
                    this.pending = chunk;
                    this.offset = 0;
                }
            }
        }
        let rest = this.pending.get(this.offset..).unwrap_or_default();
        let n = rest.len().min(buf.remaining());
        buf.put_slice(rest.get(..n).unwrap_or_default());
        this.offset += n;
        Poll::Ready(Ok(()))
    }
}

/// Serves one session over any pair of tokio byte streams (a pipe, a socket, a duplex).
pub async fn serve_lines<I, O>(server: &Server, caller: Caller, input: I, output: O) -> io::Result<StdioEnd>
where
    I: tokio::io::AsyncRead + Unpin,
    O: tokio::io::AsyncWrite + Unpin,
{
    let rt = TokioRuntime::current();
    mcp_proto::server::serve_lines(server, rt, caller, input.compat(), output.compat_write(), DEFAULT_DRAIN)
        .await
}

// The README's examples are compiled and run as doctests, so they cannot rot.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
