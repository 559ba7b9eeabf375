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
    serve_lines(server, caller, tokio::io::stdin(), tokio::io::stdout()).await
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
