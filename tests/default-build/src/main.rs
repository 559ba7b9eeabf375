//! The README's first example, as a user writes it: one typed tool over stdio on tokio, with
//! `mcp-tokio`'s default features.

use mcp_tokio::{schemars, serde, Server, ToolOutput};

#[derive(serde::Deserialize, schemars::JsonSchema)]
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
