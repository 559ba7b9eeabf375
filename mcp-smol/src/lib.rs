//! Serve an MCP server on smol.
//!
//! The protocol lives in [`mcp_proto`]; the handler API and the drivers live in its runtime-independent
//! [`server`](mcp_proto::server) layer. This crate only supplies smol: the task spawner, the timer, the
//! clock and the standard streams. `mcp-tokio` is its mirror image.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use mcp_smol::{Server, ToolOutput};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Echo { text: String }
//!
//! let server = Server::builder("demo", "1.0.0")
//!     .typed_tool("echo", "Echoes its text", |args: Echo, _call| async move { ToolOutput::text(args.text) })
//!     .build()
//!     .expect("valid tools");
//! mcp_smol::serve_stdio(&server).await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

use std::io;
use std::time::Instant;

pub use mcp_proto;
pub use mcp_proto::server::{
    typed_tool, BoxFuture, BuildError, Complete, GetPrompt, IntoToolResult, ReadResource, RequestContext,
    Runtime, Server, ServerBuilder, ShutdownReport, Status, StdioEnd, ToolCall, ToolResult, DEFAULT_DRAIN,
};
pub use mcp_proto::{
    Caller, Completion, Content, Gate, HandlerError, LogLevel, Prompt, PromptArgument, PromptMessage,
    PromptOutput, Resource, ResourceContents, ResourceTemplate, RpcError, Tool, ToolOutput,
};

/// The smol [`Runtime`]: spawns on smol's global executor and sleeps on async-io timers.
#[derive(Debug, Clone, Default)]
pub struct SmolRuntime;

impl Runtime for SmolRuntime {
    fn spawn(&self, fut: BoxFuture<()>) {
        smol::spawn(fut).detach();
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        Box::pin(async move {
            smol::Timer::at(deadline).await;
        })
    }

    fn now(&self) -> Instant {
        Instant::now()
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
    let stdin = smol::Unblock::new(std::io::stdin());
    let stdout = smol::Unblock::new(std::io::stdout());
    serve_lines(server, caller, stdin, stdout).await
}

/// Serves one session over any pair of futures-io byte streams (a pipe, a socket).
pub async fn serve_lines<I, O>(server: &Server, caller: Caller, input: I, output: O) -> io::Result<StdioEnd>
where
    I: smol::io::AsyncRead + Unpin,
    O: smol::io::AsyncWrite + Unpin,
{
    mcp_proto::server::serve_lines(server, SmolRuntime, caller, input, output, DEFAULT_DRAIN).await
}
