//! The replay test tools served by a real [`Server`], for the stdio test binaries
//! (`src/bin/stdio-tokio.rs`, `src/bin/stdio-smol.rs`) that [`crate::pipe`] drives over pipes.
//!
//! The server is configured like the replay runner's engine: server info `replay` `1.0.0`,
//! the fixed cursor key `[7; 32]`, default limits, and the tools of [`crate::tools`] (all, or the
//! ones named on the command line, like `! tools`). Each tool gets a real async handler that does
//! what its auto-mode behaviour says, with three differences a real process needs:
//!
//! - `panic` really panics: inside its future, or, with `{"when": "call"}`, before it returns one;
//! - `slow` sleeps on the runtime's timer for `arguments.ms` milliseconds (default
//!   [`DEFAULT_SLOW_MS`]) and then answers the text `slept <ms>ms`;
//! - with `--yield`, every other handler yields to the runtime once before answering, so that it
//!   is spawned as a task instead of being answered inline.
//!
//! Usage: `stdio-tokio [--yield] [TOOL...]`. Exit status: see [`exit_code`].

use std::time::Duration;

use mcp_proto::{HandlerError, KeyRing, ToolOutput};
use mcp_server::{BoxFuture, Server, StdioEnd, ToolCall, ToolResult};
use serde_json::Value;

use crate::tools::{all_tools, auto_reply, TestHandler};

/// How long `slow` sleeps when its arguments do not say.
pub const DEFAULT_SLOW_MS: u64 = 300;

/// A runtime's timer: completes after the given duration.
pub type Sleep = fn(Duration) -> BoxFuture<()>;

/// What the command line asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Register only these tools (`None`: all of them).
    pub tools: Option<Vec<String>>,
    /// Make every handler but `slow` yield once before answering.
    pub yield_first: bool,
}

impl Options {
    /// Parses `[--yield] [TOOL...]`.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut opts = Options::default();
        let mut names = Vec::new();
        for arg in args {
            match arg.as_str() {
                "--yield" => opts.yield_first = true,
                s if s.starts_with('-') => {
                    return Err(format!("unknown option {s:?}; usage: [--yield] [TOOL...]"))
                }
                _ => names.push(arg),
            }
        }
        if !names.is_empty() {
            opts.tools = Some(names);
        }
        Ok(opts)
    }
}

/// Builds the server; `sleep` is the runtime's timer (for `slow`).
pub fn build(opts: &Options, sleep: Sleep) -> Result<Server, String> {
    build_with_limits(opts, mcp_proto::Limits::default(), sleep)
}

/// [`build`], with every bound and timeout taken from `limits`.
pub fn build_with_limits(opts: &Options, limits: mcp_proto::Limits, sleep: Sleep) -> Result<Server, String> {
    let all = all_tools();
    if let Some(wanted) = &opts.tools {
        if let Some(bad) = wanted.iter().find(|n| !all.iter().any(|(t, _)| t.name() == n.as_str())) {
            return Err(format!("no test tool named {bad:?}"));
        }
    }
    let yield_first = opts.yield_first;
    // Like the replay runner's engine, which logs and reports resource changes by default.
    let mut builder =
        Server::builder("replay", "1.0.0").keys(KeyRing::new([7; 32])).logging().resource_subscriptions();
    builder.config_mut().limits = limits;
    for (tool, handler) in all {
        if opts.tools.as_ref().is_none_or(|w| w.iter().any(|n| n == tool.name())) {
            builder = builder.tool(tool, move |call: ToolCall| handle(handler, call, sleep, yield_first));
        }
    }
    builder.build().map_err(|e| e.to_string())
}

fn handle(handler: TestHandler, call: ToolCall, sleep: Sleep, yield_first: bool) -> BoxFuture<ToolResult> {
    match handler {
        TestHandler::Panic => {
            if call.arguments.get("when").and_then(Value::as_str) == Some("call") {
                panic!("the panic tool panics before returning its future, as asked");
            }
            Box::pin(async move { explode() })
        }
        TestHandler::Slow => {
            let ms = call.arguments.get("ms").and_then(Value::as_u64).unwrap_or(DEFAULT_SLOW_MS);
            Box::pin(async move {
                sleep(Duration::from_millis(ms)).await;
                Ok(ToolOutput::text(format!("slept {ms}ms")))
            })
        }
        other => Box::pin(async move {
            if yield_first {
                smol::future::yield_now().await;
            }
            // `slow` is the only tool without an automatic behaviour, and it is handled above.
            auto_reply(other, &call.arguments).unwrap_or(Err(HandlerError::Panicked))
        }),
    }
}

fn explode() -> ToolResult {
    panic!("the panic tool panics inside its future, as asked")
}

/// The process exit status for how the session ended: 0 only for a clean end of input.
///
/// | end | status |
/// |-----|--------|
/// | end of input, every call answered | 0 |
/// | an I/O error before the session started | 1 |
/// | bad command line | 2 (not from here) |
/// | end of input, calls cancelled after the drain budget | 3 |
/// | a line over the frame limit | 4 |
/// | stdout closed | 5 |
/// | stdout not read for the stall timeout | 7 |
pub fn exit_code(end: &std::io::Result<StdioEnd>) -> u8 {
    match end {
        Ok(StdioEnd::EndOfInput) => 0,
        Err(_) => 1,
        Ok(StdioEnd::Drained { .. }) => 3,
        Ok(StdioEnd::FrameTooLarge) => 4,
        Ok(StdioEnd::OutputClosed) => 5,
        Ok(StdioEnd::Stalled) => 7,
        Ok(_) => 6,
    }
}
