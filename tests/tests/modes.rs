//! One catalogue, two publication modes: clones of one builder built into a direct and a compact
//! server, each serving the same tools and handlers its own way, over real sockets on both
//! runtimes.

use mcp_proto::http::HttpConfig;
use mcp_proto::Mode;
use mcp_server::{Server, ServerBuilder, ToolCall};
use mcp_tests::http::{each, ensure, modern, serve, Client};
use serde_json::{json, Value};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

fn catalogue() -> ServerBuilder {
    Server::builder("modes", "1").typed_tool(
        "shout",
        "Upper-cases its text",
        |t: Text, _: ToolCall| async move { mcp_proto::ToolOutput::text(t.text.to_uppercase()) },
    )
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[test]
fn clones_of_one_builder_serve_one_catalogue_in_each_mode() {
    each(|shim| {
        let builder = catalogue();
        let compact = builder.clone().mode(Mode::Compact).build().map_err(|e| e.to_string())?;
        let direct = builder.build().map_err(|e| e.to_string())?;
        let direct_addr = serve(shim, direct, HttpConfig::default());
        let compact_addr = serve(shim, compact, HttpConfig::default());

        let mut d = Client::connect(direct_addr).map_err(|e| format!("connect: {e}"))?;
        let list = d.request(&modern(1, "tools/list", json!({})))?.json()?;
        ensure(names(&list) == ["shout"], || format!("direct tools/list: {list}"))?;
        let shout = json!({"name": "shout", "arguments": {"text": "hi"}});
        let called = d.request(&modern(2, "tools/call", shout))?.json()?;
        ensure(called["result"]["content"][0]["text"] == "HI", || format!("direct call: {called}"))?;

        let mut c = Client::connect(compact_addr).map_err(|e| format!("connect: {e}"))?;
        let list = c.request(&modern(1, "tools/list", json!({})))?.json()?;
        ensure(names(&list) == ["call_tool", "get_tool_details", "search_tools"], || {
            format!("compact tools/list: {list}")
        })?;
        let inner = json!({"name": "call_tool", "arguments": {"name": "shout", "arguments": {"text": "hi"}}});
        let called = c.request(&modern(2, "tools/call", inner))?.json()?;
        ensure(called["result"]["content"][0]["text"] == "HI", || format!("compact call_tool: {called}"))?;
        Ok(())
    });
}
