//! Workspace-level tests of the MCP engine: replay transcripts against a bare
//! [`mcp_proto::Engine`], and validation of every emitted frame against the official wire
//! schemas.
//!
//! - [`replay`]: the transcript format and its runner (transcripts live in `tests/transcripts/`);
//! - [`tools`]: the fixed test tools and their automatic behaviours;
//! - [`wire`]: JSON Schema validation of frames, per protocol version (from `mcp-testkit`);
//! - [`stdio_server`]: the test tools served by a real server, for the `stdio-tokio` and
//!   `stdio-smol` binaries;
//! - [`pipe`]: drives those binaries over real stdio pipes (transcripts and shim behaviour tests);
//! - [`http`]: serves the same tools over real loopback HTTP on either runtime, and a small
//!   HTTP/1.1 client that can also misbehave;
//! - [`lines`]: a stdio session served in-process by either shim, over a socket pair;
//! - [`oauth`]: an authorization server played over loopback HTTP, and the tokens it issues;
//! - [`examples`]: where the demo servers' binaries are, for tests that run them;
//! - [`echo_server`]: the smallest real server (one `echo` tool), for tests of a transport.

pub mod examples;
pub mod http;
pub mod lines;
pub mod oauth;
pub mod pipe;
pub mod replay;
pub mod skills;
pub mod stdio_server;
pub mod tools;
pub use mcp_testkit::wire;

/// A server named `name` with one tool, `echo` (`{text: string}` required, answered with
/// `text`), under `limits`: the smallest real server, for tests of a transport or a bound
/// rather than of the tools.
pub fn echo_server(name: &str, limits: mcp_proto::Limits) -> mcp_server::Server {
    let mut builder = mcp_server::Server::builder(name, "1");
    builder.config_mut().limits = limits;
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"]
    });
    builder
        .tool(mcp_proto::Tool::new("echo", "Echoes text", schema), |call: mcp_server::ToolCall| async move {
            let text = call.arguments.get("text").and_then(serde_json::Value::as_str).unwrap_or_default();
            mcp_proto::ToolOutput::text(text.to_owned())
        })
        .build()
        .unwrap_or_else(|e| panic!("the echo server is valid: {e}"))
}
