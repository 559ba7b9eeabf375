//! Declared extensions and typed failures through a whole server, over an in-memory stdio
//! session: the server declares extensions, a handler reads the client's, and a handler's
//! `Result<Json<T>, ToolFailure>` is encoded with envelopes, its cause never sent.

use mcp_tokio::{Caller, Gate, Json, Server, Tool, ToolCall, ToolFailure};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const UI: &str = "io.modelcontextprotocol/ui";

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Seen {
    /// What the client declared for the UI extension.
    settings: Value,
}

fn server() -> Server {
    Server::builder("ext", "1")
        .extension(UI, json!({}))
        .gated_extension("com.example/audit", json!({"level": "full"}), Gate::role("admin"))
        .envelopes(true)
        .tool(
            Tool::new("ui_settings", "What the client declared for MCP Apps", json!({"type": "object"})),
            |call: ToolCall| async move {
                match call.ctx.client_extension(UI) {
                    Some(settings) => Ok(Json(Seen { settings: settings.clone() })),
                    None => Err(ToolFailure::new("no_ui", "this client shows no UI")
                        .with_cause("the secret reason, for the log only")),
                }
            },
        )
        .build()
        .expect("server")
}

/// Sends `frames` on one session as `caller` and returns one reply line per frame with an id.
async fn session(server: &Server, caller: Caller, frames: &[Value]) -> Vec<Value> {
    let (client, server_side) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_side);
    let (client_read, mut client_write) = tokio::io::split(client);
    let served = server.clone();
    let task =
        tokio::spawn(async move { mcp_tokio::serve_lines(&served, caller, server_read, server_write).await });
    let mut lines = BufReader::new(client_read).lines();
    let mut replies = Vec::new();
    for frame in frames {
        client_write.write_all(format!("{frame}\n").as_bytes()).await.unwrap();
        if frame.get("id").is_some() {
            let line = lines.next_line().await.unwrap().expect("a reply");
            replies.push(serde_json::from_str(&line).unwrap());
        }
    }
    // Dropping one half of a split duplex leaves the stream open: shut it down for end of input.
    client_write.shutdown().await.unwrap();
    task.await.unwrap().unwrap();
    replies
}

fn init(version: &str, capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "c", "version": "1"}}})
}

fn call(id: u64, meta: Option<Value>) -> Value {
    let mut params = json!({"name": "ui_settings", "arguments": {}});
    if let Some(caps) = meta {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
        });
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

#[tokio::test]
async fn a_legacy_client_declares_extensions_in_initialize() {
    let server = server();
    let ui = json!({"mimeTypes": ["text/html;profile=mcp-app"]});
    let frames = [
        init("2025-11-25", json!({"extensions": {UI: ui.clone()}})),
        serde_json::from_str(INITIALIZED).unwrap(),
        call(1, None),
    ];
    let replies = session(&server, Caller::anonymous(), &frames).await;
    // The gated extension is not shown to a caller without the role.
    assert_eq!(replies[0]["result"]["capabilities"]["extensions"], json!({UI: {}}), "{}", replies[0]);
    let result = &replies[1]["result"];
    assert_eq!(result["structuredContent"], json!({"value": {"settings": ui}}), "{result}");
    assert_eq!(result["content"][0]["text"], json!({"value": {"settings": ui}}).to_string());
}

#[tokio::test]
async fn older_sessions_are_not_told_and_admins_see_the_gated_one() {
    let server = server();
    let frames = [init("2025-06-18", json!({}))];
    let replies = session(&server, Caller::anonymous(), &frames).await;
    assert!(replies[0]["result"]["capabilities"].get("extensions").is_none(), "{}", replies[0]);
    let admin = Caller::identified("alice").with_role("admin");
    let replies = session(&server, admin, &[init("2025-11-25", json!({}))]).await;
    let expected = json!({"com.example/audit": {"level": "full"}, UI: {}});
    assert_eq!(replies[0]["result"]["capabilities"]["extensions"], expected, "{}", replies[0]);
}

#[tokio::test]
async fn a_modern_request_declares_its_own_and_a_failure_keeps_its_cause() {
    let server = server();
    let frames = [call(1, Some(json!({"extensions": {UI: {"mimeTypes": []}}}))), call(2, Some(json!({})))];
    let replies = session(&server, Caller::anonymous(), &frames).await;
    let seen = &replies[0]["result"]["structuredContent"];
    assert_eq!(seen, &json!({"value": {"settings": {"mimeTypes": []}}}), "{}", replies[0]);
    // Capabilities are per request on 2026-07-28: the second request declared none.
    let failed = &replies[1]["result"];
    let failure =
        json!({"failure": {"code": "no_ui", "message": "this client shows no UI", "retryable": false}});
    assert_eq!(failed["isError"], json!(true), "{failed}");
    assert_eq!(failed["structuredContent"], failure, "{failed}");
    assert!(!replies[1].to_string().contains("secret"), "the cause stays on the server: {}", replies[1]);
}

#[test]
fn malformed_extensions_fail_the_build() {
    for (id, settings) in [("ui", json!({})), ("com.example/x", json!([])), ("com.example/", json!({}))] {
        let built = Server::builder("s", "1").extension(id, settings.clone()).build();
        assert!(built.is_err(), "{id} {settings}");
    }
    let twice = Server::builder("s", "1").extension(UI, json!({})).extension(UI, json!({})).build();
    assert!(twice.is_err());
}
