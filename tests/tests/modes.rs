//! One catalogue, two publication modes: clones of one builder built into a direct and a compact
//! server, each serving the same tools and handlers its own way, and sharing their run-time
//! edits when built to share a catalogue, over real sockets on both runtimes.

use std::net::SocketAddr;

use mcp_proto::http::HttpConfig;
use mcp_proto::{Mode, RegistryError, Tool, ToolOutput};
use mcp_server::{Server, ServerBuilder, ToolCall};
use mcp_tests::http::{each, ensure, event_data, modern, poll_until, serve, Client, Req, TIMEOUT};
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

/// The legacy version the listening session speaks: list changes reach it on its `GET` stream.
const LEGACY: &str = "2025-06-18";

fn in_session(req: Req, sid: &str) -> Req {
    req.header("Mcp-Session-Id", sid).header("MCP-Protocol-Version", LEGACY)
}

/// A legacy session through its handshake, and its `GET` stream with the head read.
fn listening_session(addr: SocketAddr) -> Result<Client, String> {
    let mut c = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "modes-test", "version": "1"}}});
    let resp = c.request(&Req::post(init.to_string()))?;
    ensure(resp.status() == 200, || format!("initialize: {}", resp.status()))?;
    let sid = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?.to_owned();
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let resp = c.request(&in_session(Req::post(note), &sid))?;
    ensure(resp.status() == 202, || format!("initialized: {}", resp.status()))?;
    let mut stream = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let get = in_session(Req::new("GET", "/mcp").header("Accept", "text/event-stream"), &sid);
    stream.send(&get.to_bytes()).map_err(|e| format!("GET: {e}"))?;
    let head = stream.head()?;
    ensure(head.status == 200, || format!("GET: {head:?}"))?;
    Ok(stream)
}

/// Reads `stream` until it tells that the tool list changed.
fn tools_list_changed(stream: &mut Client) -> Result<(), String> {
    while let Some(event) = stream.event()? {
        if event_data(&event).is_some_and(|d| d["method"] == "notifications/tools/list_changed") {
            return Ok(());
        }
    }
    Err("the stream ended before notifications/tools/list_changed".into())
}

/// What a compact server's `search_tools` finds for `query`.
fn search(c: &mut Client, id: u64, query: &str) -> Result<Vec<String>, String> {
    let search = json!({"name": "search_tools", "arguments": {"query": query}});
    let found = c.request(&modern(id, "tools/call", search))?.json()?;
    Ok(found["result"]["structuredContent"]["value"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default())
}

fn echo() -> Tool {
    Tool::new("echo", "Echoes its text back", json!({"type": "object"}))
}

#[test]
fn servers_sharing_a_catalogue_see_each_others_run_time_edits() {
    each(|shim| {
        let builder = catalogue().shared_catalogue();
        let direct = builder.clone().build().map_err(|e| e.to_string())?;
        // The compact server has one tool of its own, which the direct one must not take.
        let own = Tool::new("taken", "The compact server's own", json!({"type": "object"}));
        let compact = builder
            .mode(Mode::Compact)
            .tool(own, |_| async { ToolOutput::text("own") })
            .build()
            .map_err(|e| e.to_string())?;
        let direct_addr = serve(shim, direct.clone(), HttpConfig::default());
        let compact_addr = serve(shim, compact.clone(), HttpConfig::default());
        let mut listening = listening_session(direct_addr)?;
        poll_until("the direct server counted the stream", TIMEOUT, || {
            Ok((direct.status().streams == 1).then_some(()))
        })?;

        compact.add_tool(echo(), |_| async { ToolOutput::text("echoed") }).map_err(|e| e.to_string())?;
        tools_list_changed(&mut listening)?;
        let mut d = Client::connect(direct_addr).map_err(|e| format!("connect: {e}"))?;
        let list = d.request(&modern(1, "tools/list", json!({})))?.json()?;
        ensure(names(&list) == ["echo", "shout"], || format!("direct tools/list after add: {list}"))?;
        let mut c = Client::connect(compact_addr).map_err(|e| format!("connect: {e}"))?;
        ensure(search(&mut c, 1, "echoes")? == ["echo"], || "compact search_tools misses echo".into())?;
        let inner = json!({"name": "call_tool", "arguments": {"name": "echo", "arguments": {}}});
        let called = c.request(&modern(2, "tools/call", inner.clone()))?.json()?;
        ensure(called["result"]["content"][0]["text"] == "echoed", || {
            format!("compact call_tool: {called}")
        })?;

        ensure(direct.remove_tool("echo"), || "echo was not registered".into())?;
        tools_list_changed(&mut listening)?;
        let list = d.request(&modern(4, "tools/list", json!({})))?.json()?;
        ensure(names(&list) == ["shout"], || format!("direct tools/list after remove: {list}"))?;
        ensure(search(&mut c, 3, "echoes")?.is_empty(), || "compact search_tools still finds echo".into())?;
        let called = c.request(&modern(4, "tools/call", inner))?.json()?;
        ensure(called["result"]["isError"] == true, || {
            format!("compact call_tool of a removed tool: {called}")
        })?;
        ensure(!compact.remove_tool("echo"), || "the compact server still held echo".into())?;

        // The compact server refuses a name its own tool takes: the direct one keeps none of it.
        let refused = direct.add_tool(Tool::new("taken", "T", json!({"type": "object"})), |_| async { "no" });
        ensure(matches!(&refused, Err(RegistryError::Duplicate(n)) if n == "taken"), || {
            format!("adding a name the compact server takes: {refused:?}")
        })?;
        let list = d.request(&modern(5, "tools/list", json!({})))?.json()?;
        ensure(names(&list) == ["shout"], || format!("direct tools/list after a refusal: {list}"))?;
        Ok(())
    });
}
