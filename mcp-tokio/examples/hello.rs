//! The smallest useful server: one typed tool, served over stdio, on tokio.
//! `cargo run -p mcp-tokio --example hello`, then type JSON-RPC lines, or let an MCP client
//! launch it as a command.
//!
//! It uses nothing but `mcp-tokio` and `tokio`: serde and schemars come through the shim's
//! re-exports, so a project built on it needs no version of its own of either (the README's
//! "Install" section). It needs none of the shim's features either; a stdio-only project opts
//! out of HTTP with `default-features = false`.

use mcp_tokio::{schemars, serde, Server, ToolOutput};

/// The tool's arguments: the schema the client sees is derived from this type.
#[derive(serde::Deserialize, schemars::JsonSchema)]
// The derives name their crate's path, since the project depends on these crates only through
// `mcp_tokio`.
#[serde(crate = "mcp_tokio::serde")]
#[schemars(crate = "mcp_tokio::schemars")]
struct Greet {
    /// Who to greet.
    name: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = Server::builder("hello", "1.0.0")
        .typed_tool("greet", "Greets someone by name", |args: Greet, _call| async move {
            ToolOutput::text(format!("Hello, {}!", args.name))
        })
        .build()?;
    mcp_tokio::serve_stdio(&server).await?;
    Ok(())
}
