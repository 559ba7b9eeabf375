//! Typed tool outputs ([`Json`]) over real sockets, on both runtimes: the output type's schema is
//! the tool's `outputSchema` in `tools/list`, each value the result's `structuredContent` with its
//! JSON text as the content, and a value that breaks its own schema is answered as any invalid
//! structured output is (the generic internal error), exactly as a hand-declared schema is.

use mcp_proto::http::HttpConfig;
use mcp_proto::{HandlerError, Tool, ToolOutput};
use mcp_server::{Json, Server, ToolCall};
use mcp_tests::http::{each, ensure, modern, serve, Client};
use serde_json::{json, Value};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Pair {
    a: i64,
    b: i64,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Sum {
    sum: i64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// Promises `n` of at most 10 in its schema, which the `overflow` tool then breaks.
#[derive(serde::Serialize, schemars::JsonSchema)]
struct Small {
    #[schemars(range(max = 10))]
    n: u32,
}

fn server() -> Result<Server, String> {
    Server::builder("typed", "1")
        .typed_tool("add", "Adds two integers", |p: Pair, _: ToolCall| async move {
            let sum = p.a.checked_add(p.b).ok_or_else(|| HandlerError::private("overflow"))?;
            Ok::<_, HandlerError>(Json(Sum { sum }))
        })
        .typed_tool("overflow", "Breaks its own output schema", |_: NoArgs, _: ToolCall| async {
            Json(Small { n: 11 })
        })
        // The same broken contract, declared by hand: the reference for how it is answered.
        .tool(
            Tool::new("by_hand", "Breaks a declared output schema", json!({"type": "object"}))
                .output_schema(json!({"type": "object", "properties": {"n": {"maximum": 10}}})),
            |_: ToolCall| async { ToolOutput::structured(json!({"n": 11})) },
        )
        .build()
        .map_err(|e| e.to_string())
}

fn call(client: &mut Client, id: u64, name: &str, arguments: Value) -> Result<Value, String> {
    client.request(&modern(id, "tools/call", json!({"name": name, "arguments": arguments})))?.json()
}

#[test]
fn json_outputs_declare_their_schema_and_are_checked_against_it() {
    each(|shim| {
        let addr = serve(shim, server()?, HttpConfig::default());
        let mut client = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;

        let list = client.request(&modern(1, "tools/list", json!({})))?.json()?;
        let tools = list["result"]["tools"].as_array().ok_or_else(|| format!("tools/list: {list}"))?;
        let add = tools.iter().find(|t| t["name"] == "add").ok_or("no add tool")?;
        let schema = &add["outputSchema"];
        ensure(
            schema["type"] == "object"
                && schema["properties"]["sum"]["type"] == "integer"
                && schema["required"] == json!(["sum"]),
            || format!("add's outputSchema: {add}"),
        )?;

        let reply = call(&mut client, 2, "add", json!({"a": 2, "b": 3}))?;
        let result = &reply["result"];
        ensure(result["structuredContent"] == json!({"sum": 5}), || format!("add: {reply}"))?;
        let text = result["content"][0]["text"].as_str().ok_or_else(|| format!("add's text: {reply}"))?;
        let mirrored: Value = serde_json::from_str(text).map_err(|e| format!("add's text {text:?}: {e}"))?;
        ensure(mirrored == json!({"sum": 5}) && result.get("isError").is_none(), || {
            format!("add's text mirrors the JSON: {reply}")
        })?;

        let typed = call(&mut client, 3, "overflow", json!({}))?;
        let by_hand = call(&mut client, 4, "by_hand", json!({}))?;
        ensure(typed["error"]["code"] == -32603, || format!("overflow: {typed}"))?;
        ensure(typed["error"] == by_hand["error"], || {
            format!("a typed output is answered like a declared one: {typed} vs {by_hand}")
        })
    });
}
