//! The smallest useful server: one typed tool, served over stdio, on tokio.
//! `cargo run -p mcp-tokio --example hello`, then type JSON-RPC lines, or let an MCP client
//! launch it as a command.
//!
//! It uses nothing but `mcp-tokio` and `tokio`: serde and schemars come through the shim's
//! re-exports, so a project built on it needs no version of its own of either (the README's
//! "Install" section). It needs none of the shim's features either; a stdio-only project opts
//! out of HTTP with `default-features = false`.

use mcp_tokio::{schemars, serde, BuildError, Server, ToolOutput};

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

/// The server, apart from how it is served, so that its tests build the very same one.
fn server() -> Result<Server, BuildError> {
    Server::builder("hello", "1.0.0")
        .typed_tool("greet", "Greets someone by name", |args: Greet, _call| async move {
            ToolOutput::text(format!("Hello, {}!", args.name))
        })
        .build()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    mcp_tokio::serve_stdio(&server()?).await?;
    Ok(())
}

// The tool's behaviour, in memory through the in-process test client; tests/tests/hello_example.rs
// runs the binary over its stdin and stdout.
#[cfg(test)]
mod tests {
    use mcp_tokio::serde_json::json;
    use mcp_tokio::testing::{self, ClientError};

    /// The schema is derived from the argument type through the re-exported schemars, and the
    /// tool greets by name.
    #[tokio::test]
    async fn greets_by_name() -> Result<(), Box<dyn std::error::Error>> {
        let mut client = testing::connect(&super::server()?).await?;
        assert_eq!(client.initialized()["serverInfo"]["name"], "hello");
        let tools = client.list_tools().await?;
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0]["name"], "greet");
        assert_eq!(tools[0]["inputSchema"]["properties"]["name"]["type"], "string");
        assert_eq!(tools[0]["inputSchema"]["required"], json!(["name"]));
        let reply = client.call_tool("greet", json!({"name": "Ada"})).await?;
        assert_eq!(reply.text(), Some("Hello, Ada!"));
        Ok(())
    }

    /// Arguments that do not match the type are the tool's error result (2025-11-25), not a
    /// greeting.
    #[tokio::test]
    async fn refuses_arguments_of_the_wrong_type() -> Result<(), Box<dyn std::error::Error>> {
        let mut client = testing::connect(&super::server()?).await?;
        match client.call_tool("greet", json!({"name": 7})).await {
            Err(ClientError::Tool(reply)) => assert!(reply.is_error()),
            other => panic!("a number is not a name: {other:?}"),
        }
        Ok(())
    }
}
