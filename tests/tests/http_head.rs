//! Handlers read the HTTP request their call arrived on (`RequestContext::http_request`) on both
//! runtimes: headers, cookies, `Host`, the connection's peer and the target; on a legacy
//! session the POST that carried the call, not the `initialize`; nothing over stdio.

use std::net::SocketAddr;

use mcp_proto::http::HttpConfig;
use mcp_proto::{Tool, ToolOutput};
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{each, ensure, event_data, modern, serve, Client, Outcome, Req, Response, Shim};
use mcp_tests::lines::Lines;
use serde_json::{json, Value};

const LEGACY: &str = "2025-06-18";

/// A server whose one tool answers with what it saw of the request head.
fn server() -> Result<Server, String> {
    let tool = Tool::new("head", "What the request looked like", json!({"type": "object"}));
    Server::builder("head", "1")
        .tool(tool, |call: ToolCall| async move {
            let seen = match call.ctx.http_request() {
                None => json!(null),
                Some(h) => json!({
                    "method": h.method(),
                    "target": h.target(),
                    "host": h.host(),
                    "sid": h.cookie("sid"),
                    "tenant": h.header("x-tenant"),
                    "authorization": h.header("authorization"),
                    "peer_is_loopback": h.peer().is_some_and(|p| p.ip().is_loopback()),
                    "cookie_lines": h.header_values("cookie").count(),
                }),
            };
            Ok::<_, mcp_proto::HandlerError>(ToolOutput::text(seen.to_string()))
        })
        .build()
        .map_err(|e| e.to_string())
}

/// The tool's answer in a response, JSON or one SSE event.
fn seen(resp: &Response) -> Result<Value, String> {
    let message = match resp.header("content-type") {
        Some(t) if t.starts_with("text/event-stream") => {
            let text = String::from_utf8_lossy(&resp.body).into_owned();
            text.split("\n\n")
                .filter_map(event_data)
                .find(|m| m.get("id").is_some())
                .ok_or_else(|| format!("no answer in the stream: {text}"))?
        }
        _ => resp.json()?,
    };
    let text = message["result"]["content"][0]["text"].as_str().ok_or_else(|| message.to_string())?;
    serde_json::from_str(text).map_err(|e| format!("{e}: {text}"))
}

fn call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "head", "arguments": {}}})
}

fn modern_head(shim: Shim) -> Outcome {
    let addr = serve(shim, server()?, HttpConfig::default());
    let req = modern(1, "tools/call", json!({"name": "head", "arguments": {}}))
        .path("/mcp?from=test")
        .header("Cookie", "theme=dark; sid=s-1")
        .header("Cookie", "lang=en")
        .header("X-Tenant", "acme")
        .header("Authorization", "Bearer not-for-this-server");
    let resp = Client::connect(addr).map_err(|e| format!("connect: {e}"))?.request(&req)?;
    let got = seen(&resp)?;
    // This server verifies no token, so the header is the application's business: it stays.
    let want = json!({
        "method": "POST", "target": "/mcp?from=test", "host": "localhost", "sid": "s-1",
        "tenant": "acme", "authorization": "Bearer not-for-this-server", "peer_is_loopback": true,
        "cookie_lines": 2,
    });
    ensure(got == want, || format!("{got}"))
}

#[test]
fn a_handler_reads_the_request_head() {
    each(modern_head);
}

/// A legacy session POST: the session's request, in session.
fn legacy(sid: &str, body: &Value, cookie: &str) -> Req {
    Req::post(body.to_string())
        .header("MCP-Protocol-Version", LEGACY)
        .header("Mcp-Session-Id", sid)
        .header("Cookie", cookie)
}

fn legacy_head(shim: Shim) -> Outcome {
    let addr: SocketAddr = serve(shim, server()?, HttpConfig::default());
    let mut c = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "head-test", "version": "1"}}});
    let resp = c.request(&Req::post(init.to_string()).header("Cookie", "sid=at-initialize"))?;
    let sid = resp.header("mcp-session-id").ok_or_else(|| format!("no session: {resp:?}"))?.to_owned();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = c.request(&legacy(&sid, &note, "sid=at-initialized"))?;
    ensure(resp.status() == 202, || format!("initialized: {resp:?}"))?;
    for (id, cookie) in [(2, "sid=first-call"), (3, "sid=second-call")] {
        let got = seen(&c.request(&legacy(&sid, &call(id), cookie))?)?;
        let want = cookie.trim_start_matches("sid=");
        ensure(got["sid"] == want, || format!("call {id} saw {got}, not its own POST's cookie"))?;
    }
    Ok(())
}

#[test]
fn a_legacy_sessions_handler_sees_the_post_that_carried_its_call() {
    each(legacy_head);
}

#[test]
fn there_is_no_request_head_over_stdio() {
    each(|shim| {
        let mut s = Lines::serve(shim, server()?)?;
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "head-test", "version": "1"}}});
        s.send(&init.to_string())?;
        s.next("initialize")?;
        s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        s.send(&call(2).to_string())?;
        let answer = s.next("tools/call")?;
        ensure(answer["result"]["content"][0]["text"] == "null", || format!("over stdio: {answer}"))?;
        s.finish()
    });
}

/// Gates see the head too (seed 004: a gate reads the Cookie the caller presented).
fn gated_by_cookie(shim: Shim) -> Outcome {
    let gate = mcp_proto::Gate::new(|c| c.http.as_ref().and_then(|h| h.cookie("role")) == Some("admin"));
    let tool = Tool::new("admin", "For admins", json!({"type": "object"})).gate(gate);
    let server = Server::builder("head", "1")
        .tool(tool, |_: ToolCall| async move { Ok::<_, mcp_proto::HandlerError>(ToolOutput::text("done")) })
        .build()
        .map_err(|e| e.to_string())?;
    let addr = serve(shim, server, HttpConfig::default());
    for (cookie, listed) in [("role=admin", true), ("role=guest", false)] {
        let req = modern(1, "tools/list", json!({})).header("Cookie", cookie);
        let list = Client::connect(addr).map_err(|e| format!("connect: {e}"))?.request(&req)?.json()?;
        let shown =
            list["result"]["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "admin"));
        ensure(shown == listed, || format!("with {cookie}: {list}"))?;
    }
    Ok(())
}

#[test]
fn a_gate_reads_the_request_head() {
    each(gated_by_cookie);
}
