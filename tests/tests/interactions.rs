//! Asking the client for input (`RequestContext::ask_one`) through both shims: over Streamable
//! HTTP on real loopback sockets (a legacy 2025-11-25 session, where the call's response turns
//! into an SSE stream carrying `elicitation/create`; and the stateless 2026-07-28 wire, where the
//! call answers `input_required` and is retried), and over a line-delimited stdio session.
//!
//! The stdio scenarios serve the session in-process with each shim's `serve_lines` over a Unix
//! socket pair rather than through the `stdio-*` binaries of `tests/src/pipe.rs`: those serve the
//! fixed replay tools, none of which asks, and a test must not change them. The byte path past
//! the engine is the same one `serve_stdio` uses.

use std::net::SocketAddr;
use std::time::Duration;

use mcp_proto::http::HttpConfig;
use mcp_proto::interaction::InputRequest;
use mcp_proto::{AskError, HandlerError, Tool, ToolOutput};
use mcp_server::{Elicited, Server, ToolCall};
use mcp_tests::http::{each, ensure, event_data, poll_until, serve, Client, Req, Response, TIMEOUT};
use mcp_tests::lines::Lines;
use serde_json::{json, Value};

type Outcome = mcp_tests::http::Outcome;

const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// A server whose `ask` tool asks for a name (form-mode elicitation under key `k`) and greets
/// it; when the client cannot be asked it says so instead of failing.
fn server() -> Server {
    Server::builder("interactions", "1.0.0")
        .tool(ask_tool(), ask)
        .build()
        .unwrap_or_else(|e| panic!("the test server is valid: {e}"))
}

fn ask_tool() -> Tool {
    Tool::new("ask", "Asks the user's name", json!({"type": "object"}))
}

async fn ask(call: ToolCall) -> Result<ToolOutput, HandlerError> {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let request = InputRequest::elicit("What is your name?", schema)
        .map_err(|e| HandlerError::private(e.to_string()))?;
    if !call.ctx.can_ask(&request) {
        return Ok(ToolOutput::text("cannot ask"));
    }
    let answer = match call.ctx.ask_one("k", request).await {
        Ok(answer) => answer,
        // 2026-07-28: the call was answered `input_required`; this run is over.
        Err(AskError::Suspended) => return Err(HandlerError::Cancelled),
        Err(e) => return Err(e.into()),
    };
    let name = answer["content"]["name"].as_str().unwrap_or("nobody").to_owned();
    Ok(ToolOutput::text(format!("hello {name}")))
}

fn initialize(capabilities: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": capabilities,
        "clientInfo": {"name": "interactions-test", "version": "1"}}})
    .to_string()
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","arguments":{}}}"#;
const ANSWER: &str = r#"{"action":"accept","content":{"name":"Ada"}}"#;

fn answer() -> Value {
    serde_json::from_str(ANSWER).unwrap_or_default()
}

fn expect_status(resp: &Response, status: u16, what: &str) -> Outcome {
    ensure(resp.status() == status, || {
        format!("{what}: expected {status}, got {} {}", resp.status(), String::from_utf8_lossy(&resp.body))
    })
}

fn connect(addr: SocketAddr) -> Result<Client, String> {
    Client::connect(addr).map_err(|e| format!("connect: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Legacy sessions over HTTP
// ---------------------------------------------------------------------------------------------

fn in_session(req: Req, sid: &str) -> Req {
    req.header("Mcp-Session-Id", sid).header("MCP-Protocol-Version", LEGACY)
}

fn legacy_session(addr: SocketAddr, capabilities: &Value) -> Result<String, String> {
    let resp = connect(addr)?.request(&Req::post(initialize(capabilities)))?;
    expect_status(&resp, 200, "initialize")?;
    let sid = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?.to_owned();
    expect_status(&connect(addr)?.request(&in_session(Req::post(INITIALIZED), &sid))?, 202, "initialized")?;
    Ok(sid)
}

/// The next event of `client`'s stream that carries a message.
fn next_message(client: &mut Client, what: &str) -> Result<Value, String> {
    loop {
        let event = client.event()?.ok_or_else(|| format!("{what}: the stream ended"))?;
        if let Some(data) = event_data(&event) {
            return Ok(data);
        }
    }
}

/// A 2025-11-25 session whose client declared form elicitation: the call's response becomes an
/// SSE stream, priming event first, then `elicitation/create` with the server's own request id.
/// The client POSTs its answer (202), and the same stream then carries the tool's result and
/// ends.
#[test]
fn legacy_ask_streams_the_request_and_the_result() {
    each(|shim| {
        let addr = serve(shim, server(), HttpConfig::default());
        let sid = legacy_session(addr, &json!({"elicitation": {}}))?;
        let mut call = connect(addr)?;
        call.send(&in_session(Req::post(CALL), &sid).to_bytes()).map_err(|e| e.to_string())?;
        let head = call.head()?;
        ensure(head.status == 200 && head.header("content-type") == Some("text/event-stream"), || {
            format!("tools/call: {head:?}")
        })?;
        let priming = call.event()?.ok_or("the stream ended before its priming event")?;
        let lines: Vec<&str> = priming.lines().collect();
        ensure(
            lines.len() == 3
                && lines[0].starts_with("id: ")
                && lines[1].starts_with("retry: ")
                && lines[2] == "data:",
            || format!("priming event: {priming:?}"),
        )?;

        let asked = next_message(&mut call, "elicitation/create")?;
        ensure(
            asked["method"] == "elicitation/create" && asked["params"]["message"] == "What is your name?",
            || format!("the request: {asked}"),
        )?;
        ensure(asked["params"].get("mode").is_none(), || format!("form mode carries no mode: {asked}"))?;
        let id = asked.get("id").filter(|id| id.is_number() || id.is_string());
        let id = id.ok_or_else(|| format!("the request has no id: {asked}"))?;

        let reply = json!({"jsonrpc": "2.0", "id": id, "result": answer()});
        let resp = connect(addr)?.request(&in_session(Req::post(reply.to_string()), &sid))?;
        expect_status(&resp, 202, "the client's answer")?;
        ensure(resp.body.is_empty(), || "202 with a body".to_owned())?;

        let result = next_message(&mut call, "the tool result")?;
        ensure(
            result
                == json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "hello Ada"}]}}),
            || format!("the tool result: {result}"),
        )?;
        ensure(call.event()?.is_none(), || "the stream went on after the result".to_owned())?;
        // The connection carries the next request.
        Ok(())
    });
}

/// A client that cannot be asked (it declared no elicitation, or this request of its accepts
/// only a JSON answer, which cannot carry a request) is seen to be so up front by the handler,
/// and the call is answered with plain JSON, no stream.
#[test]
fn legacy_client_that_cannot_be_asked_is_not_asked() {
    each(|shim| {
        let addr = serve(shim, server(), HttpConfig::default());
        let undeclared = legacy_session(addr, &json!({}))?;
        let declared = legacy_session(addr, &json!({"elicitation": {}}))?;
        let json_only = |req: Req| req.without("Accept").header("Accept", "application/json");
        for (what, req) in [
            ("no elicitation declared", in_session(Req::post(CALL), &undeclared)),
            ("Accept: application/json only", json_only(in_session(Req::post(CALL), &declared))),
        ] {
            let resp = connect(addr)?.request(&req)?;
            expect_status(&resp, 200, what)?;
            ensure(resp.header("content-type") == Some("application/json"), || format!("{what}: not JSON"))?;
            let reply = resp.json()?;
            ensure(reply["result"]["content"][0]["text"] == "cannot ask", || format!("{what}: {reply}"))?;
        }
        Ok(())
    });
}

/// A handler that asks without looking first, and passes any refusal on (`?`).
async fn blunt(call: ToolCall) -> Result<ToolOutput, HandlerError> {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    let request = InputRequest::elicit("Name?", schema).map_err(|e| HandlerError::private(e.to_string()))?;
    let answer = call.ctx.ask_one("k", request).await?;
    Ok(ToolOutput::text(format!("hello {}", answer["content"]["name"])))
}

/// Seed 000's `confirmation_required`: a legacy client that cannot answer the form a tool
/// asks for gets a tool failure the model and the user read, not a JSON-RPC error; a
/// 2026-07-28 client gets the -32021 SEP-2575 requires (the spec wins over the seed).
#[test]
fn a_client_that_cannot_answer_gets_confirmation_required_or_the_spec_error() {
    each(|shim| {
        let server = Server::builder("interactions", "1.0.0")
            .tool(Tool::new("blunt", "Asks regardless", json!({"type": "object"})), blunt)
            .build()
            .map_err(|e| e.to_string())?;
        let addr = serve(shim, server, HttpConfig::default());
        let undeclared = legacy_session(addr, &json!({}))?;
        let call =
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"blunt","arguments":{}}}"#;
        let resp = connect(addr)?.request(&in_session(Req::post(call), &undeclared))?;
        expect_status(&resp, 200, "legacy")?;
        let reply = resp.json()?;
        let text = reply["result"]["content"][0]["text"].as_str().unwrap_or_default();
        ensure(reply["result"]["isError"] == true && text.starts_with("confirmation_required: "), || {
            format!("legacy: {reply}")
        })?;
        ensure(text.contains(r#"{"elicitation":{}}"#), || format!("names what to declare: {text}"))?;

        let meta = json!({"io.modelcontextprotocol/protocolVersion": MODERN,
                          "io.modelcontextprotocol/clientCapabilities": {}});
        let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                          "params": {"name": "blunt", "arguments": {}, "_meta": meta}});
        let req = Req::post(body.to_string())
            .header("MCP-Protocol-Version", MODERN)
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", "blunt");
        let resp = connect(addr)?.request(&req)?;
        expect_status(&resp, 400, "2026-07-28")?;
        let reply = resp.json()?;
        ensure(reply["error"]["code"] == -32021, || format!("2026-07-28: {reply}"))?;
        ensure(reply["error"]["data"]["requiredCapabilities"] == json!({"elicitation": {}}), || {
            format!("2026-07-28: {reply}")
        })
    });
}

/// [`server`] with a `hang` tool whose handler never returns, small bounds so the scenario
/// crosses them quickly: 4 calls in flight, asks that give up after `ask_timeout`, sessions
/// idle after 2 s, dropped streams waiting 200 ms to be resumed.
fn bounded_server(ask_timeout: Duration) -> Server {
    let mut builder = Server::builder("interactions", "1.0.0");
    let limits = &mut builder.config_mut().limits;
    limits
        .max_in_flight(IN_FLIGHT)
        .ask_timeout(ask_timeout)
        .session_idle(Duration::from_secs(2))
        .resume_window(Duration::from_millis(200));
    let hang = Tool::new("hang", "Never returns", json!({"type": "object"}));
    builder = builder.tool(ask_tool(), ask).tool(hang, |_call: ToolCall| async move {
        std::future::pending::<()>().await;
        Ok::<_, HandlerError>(ToolOutput::text("unreachable"))
    });
    builder.build().unwrap_or_else(|e| panic!("the test server is valid: {e}"))
}

const IN_FLIGHT: usize = 4;

fn call_of(id: usize, tool: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
        .to_string()
}

/// Sends `tools/call` `id` of the `ask` tool and reads its stream up to `elicitation/create`.
fn call_until_asked(addr: SocketAddr, sid: &str, id: usize) -> Result<(Client, Value), String> {
    let mut client = connect(addr)?;
    client.send(&in_session(Req::post(call_of(id, "ask")), sid).to_bytes()).map_err(|e| e.to_string())?;
    let head = client.head()?;
    ensure(head.status == 200 && head.header("content-type") == Some("text/event-stream"), || {
        format!("call {id}: {head:?}")
    })?;
    let asked = next_message(&mut client, "elicitation/create")?;
    ensure(asked["method"] == "elicitation/create", || format!("call {id}: {asked}"))?;
    Ok((client, asked))
}

/// Issue 10 over real sockets. More calls than the in-flight bound each wait on an ask whose
/// POST stream the client drops: each is cancelled once the stream is not resumed within the
/// resume window (long before the ask's deadline), so the next call on the session is still
/// served. A call that never returns, on a
/// stream the client dropped, does not keep the session alive: it idles out and the call is
/// cancelled.
#[test]
fn legacy_asks_whose_streams_are_dropped_end_and_free_the_session() {
    each(|shim| {
        let server = bounded_server(Duration::from_secs(3600));
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sid = legacy_session(addr, &json!({"elicitation": {}}))?;
        for id in 0..=IN_FLIGHT {
            let (client, _) = call_until_asked(addr, &sid, 100 + id)?;
            drop(client);
            poll_until("the stranded call to be cancelled", TIMEOUT, || {
                let st = server.status();
                Ok((st.in_flight == 0 && st.running_handlers == 0).then_some(()))
            })?;
        }
        // The session still serves a call, which the client answers.
        let (mut client, asked) = call_until_asked(addr, &sid, 7)?;
        let reply = json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer()});
        let resp = connect(addr)?.request(&in_session(Req::post(reply.to_string()), &sid))?;
        expect_status(&resp, 202, "answer")?;
        let result = next_message(&mut client, "the tool result")?;
        ensure(result["result"]["content"][0]["text"] == "hello Ada", || {
            format!("the tool result: {result}")
        })?;

        // A handler that never returns, its stream dropped: the session idles out anyway.
        let mut hang = connect(addr)?;
        hang.send(&in_session(Req::post(call_of(9, "hang")), &sid).to_bytes()).map_err(|e| e.to_string())?;
        poll_until("the hanging call to run", TIMEOUT, || {
            Ok((server.status().running_handlers == 1).then_some(()))
        })?;
        drop(hang);
        poll_until("the session to idle out", TIMEOUT, || {
            let st = server.status();
            Ok((st.sessions == 0 && st.in_flight == 0 && st.running_handlers == 0).then_some(()))
        })?;
        let list = r#"{"jsonrpc":"2.0","id":10,"method":"tools/list"}"#;
        expect_status(
            &connect(addr)?.request(&in_session(Req::post(list), &sid))?,
            404,
            "the expired session",
        )
    });
}

/// An ask left unanswered on an open stream gives up at its deadline: the stream carries
/// `notifications/cancelled` for the server's request, then the call's failure, and the slot is
/// free again.
#[test]
fn legacy_ask_left_unanswered_times_out() {
    each(|shim| {
        let server = bounded_server(Duration::from_millis(300));
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sid = legacy_session(addr, &json!({"elicitation": {}}))?;
        let (mut client, asked) = call_until_asked(addr, &sid, 8)?;
        let note = next_message(&mut client, "notifications/cancelled")?;
        ensure(
            note["method"] == "notifications/cancelled" && note["params"]["requestId"] == asked["id"],
            || format!("the cancellation: {note}"),
        )?;
        let failed = next_message(&mut client, "the call's failure")?;
        ensure(failed["id"] == 8 && failed["error"]["code"] == -32603, || format!("the failure: {failed}"))?;
        poll_until("the slot to be freed", TIMEOUT, || Ok((server.status().in_flight == 0).then_some(())))
    });
}

/// The `id:` of an SSE event, if it has one.
fn event_id(event: &str) -> Option<&str> {
    event.lines().find_map(|l| l.strip_prefix("id: "))
}

/// The client loses a call's POST stream while the call waits on its answer, and resumes it
/// with a GET carrying `Last-Event-ID` (the priming event's id): the question is replayed with
/// its id, the client answers, and the resumed stream carries the result and ends.
#[test]
fn a_dropped_legacy_post_stream_resumes_with_last_event_id() {
    each(|shim| {
        let server = server();
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sid = legacy_session(addr, &json!({"elicitation": {}}))?;
        let mut call = connect(addr)?;
        call.send(&in_session(Req::post(CALL), &sid).to_bytes()).map_err(|e| e.to_string())?;
        let head = call.head()?;
        ensure(head.status == 200, || format!("tools/call: {head:?}"))?;
        let priming = call.event()?.ok_or("the stream ended before its priming event")?;
        let primed = event_id(&priming).ok_or_else(|| format!("priming event: {priming:?}"))?.to_owned();
        let question = call.event()?.ok_or("the stream ended before the question")?;
        let asked = event_data(&question).ok_or_else(|| format!("the question: {question:?}"))?;
        drop(call);
        // Resumed only once the server saw the stream go, so the stream is resumed from the
        // store rather than taken over while the server still writes to it.
        poll_until("the server to see the stream go", TIMEOUT, || {
            let st = server.status();
            Ok((st.connections == 0).then_some(()))
        })?;
        ensure(server.status().in_flight == 1, || "the call is still in flight".to_owned())?;

        let mut back = connect(addr)?;
        let get = in_session(Req::new("GET", "/mcp"), &sid)
            .header("Accept", "text/event-stream")
            .header("Last-Event-ID", &primed);
        back.send(&get.to_bytes()).map_err(|e| e.to_string())?;
        let head = back.head()?;
        ensure(head.status == 200 && head.header("content-type") == Some("text/event-stream"), || {
            format!("the resuming GET: {head:?}")
        })?;
        let replayed = back.event()?.ok_or("the resumed stream ended at once")?;
        ensure(
            event_id(&replayed) == event_id(&question) && event_data(&replayed) == Some(asked.clone()),
            || format!("replayed {replayed:?}, expected {question:?}"),
        )?;

        let reply = json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer()});
        let resp = connect(addr)?.request(&in_session(Req::post(reply.to_string()), &sid))?;
        expect_status(&resp, 202, "the client's answer")?;
        let result = next_message(&mut back, "the tool result")?;
        ensure(result["id"] == 7 && result["result"]["content"][0]["text"] == "hello Ada", || {
            format!("the tool result: {result}")
        })?;
        ensure(back.event()?.is_none(), || "the resumed stream went on after the result".to_owned())
    });
}

// ---------------------------------------------------------------------------------------------
// 2026-07-28 over HTTP
// ---------------------------------------------------------------------------------------------

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN,
           "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
}

/// A stateless `tools/call` of `ask` with the headers 2026-07-28 requires; `extra` goes into
/// `params` (`inputResponses`, `requestState`).
fn modern_call(id: u64, extra: Value) -> Req {
    let mut params = json!({"name": "ask", "arguments": {}, "_meta": modern_meta()});
    if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
        params.extend(extra);
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    Req::post(body.to_string())
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "ask")
}

/// Checks an `input_required` result asking for the name under `k`; returns the state.
/// The 2026-07-28 retry (request id 2) completed with the handler's greeting.
fn expect_completed_retry(reply: &Value) -> Outcome {
    ensure(
        reply["id"] == 2
            && reply["result"]["resultType"] == "complete"
            && reply["result"]["content"] == json!([{"type": "text", "text": "hello Ada"}]),
        || format!("the retry: {reply}"),
    )
}

fn expect_input_required(reply: &Value, id: u64) -> Result<String, String> {
    let result = &reply["result"];
    ensure(reply["id"] == id && result["resultType"] == "input_required", || {
        format!("not input_required: {reply}")
    })?;
    let asked = &result["inputRequests"]["k"];
    ensure(
        asked["method"] == "elicitation/create"
            && asked["params"]["message"] == "What is your name?"
            && asked.get("id").is_none()
            && asked.get("jsonrpc").is_none(),
        || format!("inputRequests: {}", result["inputRequests"]),
    )?;
    result["requestState"].as_str().map(str::to_owned).ok_or_else(|| format!("no requestState: {reply}"))
}

/// The stateless wire: the call answers `input_required` (plain JSON, no stream, no session),
/// the retry with `inputResponses` and the state completes it, and a tampered state is refused
/// with `-32602` and HTTP 400 before anything runs.
#[test]
fn modern_ask_requires_input_then_completes_on_retry() {
    each(|shim| {
        let addr = serve(shim, server(), HttpConfig::default());
        let mut client = connect(addr)?;
        let resp = client.request(&modern_call(1, json!({})))?;
        expect_status(&resp, 200, "the first round")?;
        ensure(resp.header("content-type") == Some("application/json"), || {
            "the first round: not JSON".to_owned()
        })?;
        ensure(resp.header("mcp-session-id").is_none(), || "2026 minted a session".to_owned())?;
        let state = expect_input_required(&resp.json()?, 1)?;

        let retry = json!({"inputResponses": {"k": answer()}, "requestState": state});
        let resp = client.request(&modern_call(2, retry))?;
        expect_status(&resp, 200, "the retry")?;
        let reply = resp.json()?;
        expect_completed_retry(&reply)?;

        // One character of the state changed: the seal no longer holds.
        let mut tampered = state.clone().into_bytes();
        let at = tampered.len() / 2;
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).map_err(|e| e.to_string())?;
        let retry = json!({"inputResponses": {"k": answer()}, "requestState": tampered});
        let resp = client.request(&modern_call(3, retry))?;
        expect_status(&resp, 400, "a tampered state")?;
        let reply = resp.json()?;
        ensure(reply["id"] == 3 && reply["error"]["code"] == -32602, || format!("a tampered state: {reply}"))
    });
}

// ---------------------------------------------------------------------------------------------
// stdio
// ---------------------------------------------------------------------------------------------

/// A legacy stdio session: `elicitation/create` goes out as a line with the server's own id,
/// the answer line comes back, and the call is answered.
#[test]
fn stdio_legacy_ask_round_trip() {
    each(|shim| {
        let mut s = Lines::serve(shim, server())?;
        s.send(&initialize(&json!({"elicitation": {}})))?;
        let init = s.next("initialize")?;
        ensure(init["result"]["protocolVersion"] == LEGACY, || format!("initialize: {init}"))?;
        s.send(INITIALIZED)?;
        s.send(CALL)?;
        let asked = s.next("elicitation/create")?;
        ensure(asked["method"] == "elicitation/create", || format!("the request: {asked}"))?;
        let id = asked.get("id").cloned().ok_or_else(|| format!("the request has no id: {asked}"))?;
        s.send(&json!({"jsonrpc": "2.0", "id": id, "result": answer()}).to_string())?;
        let result = s.next("the tool result")?;
        ensure(
            result
                == json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "hello Ada"}]}}),
            || format!("the tool result: {result}"),
        )?;
        s.finish()
    });
}

/// 2026-07-28 requests over stdio: `input_required`, then the retry completes.
#[test]
fn stdio_modern_ask_round_trip() {
    each(|shim| {
        let mut s = Lines::serve(shim, server())?;
        let call = |id: u64, extra: Value| {
            let mut params = json!({"name": "ask", "arguments": {}, "_meta": modern_meta()});
            if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
                params.extend(extra);
            }
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
        };
        s.send(&call(1, json!({})))?;
        let state = expect_input_required(&s.next("the first round")?, 1)?;
        s.send(&call(2, json!({"inputResponses": {"k": answer()}, "requestState": state})))?;
        let reply = s.next("the retry")?;
        expect_completed_retry(&reply)?;
        s.finish()
    });
}

// ---------------------------------------------------------------------------------------------
// Typed asks (`RequestContext::elicit`)
// ---------------------------------------------------------------------------------------------

/// A name the form writes as any string, which this type refuses when empty: an answer the
/// form admits and the type does not.
#[derive(serde::Deserialize)]
#[serde(try_from = "String")]
struct Name(String);

impl TryFrom<String> for Name {
    type Error = &'static str;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        if s.is_empty() {
            return Err("a name cannot be empty");
        }
        Ok(Name(s))
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Person {
    #[schemars(with = "String")]
    name: Name,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Confirm {
    ok: bool,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Street {
    #[allow(dead_code)]
    street: String,
}

/// No form: a nested struct.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Address {
    #[allow(dead_code)]
    home: Street,
}

/// `welcome` asks two typed forms in turn (a name, then a confirmation); `nested` asks for a
/// type that is no form.
fn typed_server() -> Server {
    let no_args = || json!({"type": "object"});
    Server::builder("typed-asks", "1.0.0")
        .tool(Tool::new("welcome", "Asks a name, then a confirmation", no_args()), welcome)
        .tool(Tool::new("nested", "Asks for an address", no_args()), |call: ToolCall| async move {
            call.ctx.elicit::<Address>("Where do you live?").await?;
            Ok::<_, HandlerError>("unreachable: the form was refused")
        })
        .build()
        .unwrap_or_else(|e| panic!("the test server is valid: {e}"))
}

async fn welcome(call: ToolCall) -> Result<String, HandlerError> {
    let person = match call.ctx.elicit::<Person>("What is your name?").await? {
        Elicited::Accepted(p) => p,
        Elicited::Declined => return Ok("declined".into()),
        Elicited::Cancelled => return Ok("cancelled".into()),
    };
    Ok(match call.ctx.elicit::<Confirm>("Send the welcome?").await? {
        Elicited::Accepted(Confirm { ok: true }) => format!("welcome {}", person.name.0),
        _ => "not sent".into(),
    })
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

/// The `elicitation/create` of the name's form, as derived from `Person`.
fn expect_name_form(asked: &Value) -> Outcome {
    ensure(
        asked["method"] == "elicitation/create"
            && asked["params"]["message"] == "What is your name?"
            && asked["params"]["requestedSchema"]["properties"] == json!({"name": {"type": "string"}})
            && asked["params"]["requestedSchema"]["required"] == json!(["name"]),
        || format!("the name's form: {asked}"),
    )
}

fn expect_text(reply: &Value, id: u64, text: &str) -> Outcome {
    ensure(reply["id"] == id && reply["result"]["content"] == json!([{"type": "text", "text": text}]), || {
        format!("expected {text:?}: {reply}")
    })
}

/// An answer the form admits and `Person` refuses is `-32602`, as an answer outside the form is.
fn expect_undecodable(reply: &Value, id: u64) -> Outcome {
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    ensure(
        reply["id"] == id
            && reply["error"]["code"] == -32602
            && message.contains("invalid input response")
            && message.contains("a name cannot be empty"),
        || format!("an undecodable answer: {reply}"),
    )
}

/// A type that is no form is the handler's bug: the generic internal error, nothing asked.
fn expect_refused_form(reply: &Value, id: u64) -> Outcome {
    ensure(reply["id"] == id && reply["error"]["code"] == -32603 && reply.get("result").is_none(), || {
        format!("a form that cannot be: {reply}")
    })
}

/// A legacy session: each typed form is a real `elicitation/create` with the derived schema,
/// the two forms go out in turn, and each answer comes back typed: accepted, declined,
/// cancelled, or fitting the form but not the type.
#[test]
fn legacy_typed_elicit_reads_each_action() {
    each(|shim| {
        let mut s = Lines::serve(shim, typed_server())?;
        s.send(&initialize(&json!({"elicitation": {}})))?;
        s.next("initialize")?;
        s.send(INITIALIZED)?;
        let call = |id: u64, tool: &str| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
                .to_string()
        };
        let answer = |s: &mut Lines, asked: &Value, result: Value| {
            let id = asked.get("id").cloned().ok_or_else(|| format!("the request has no id: {asked}"))?;
            s.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
        };

        s.send(&call(10, "welcome"))?;
        let asked = s.next("the name's form")?;
        expect_name_form(&asked)?;
        answer(&mut s, &asked, accept(json!({"name": "Ada"})))?;
        let asked = s.next("the confirmation")?;
        ensure(
            asked["params"]["message"] == "Send the welcome?"
                && asked["params"]["requestedSchema"]["properties"] == json!({"ok": {"type": "boolean"}}),
            || format!("the confirmation: {asked}"),
        )?;
        answer(&mut s, &asked, accept(json!({"ok": true})))?;
        expect_text(&s.next("the welcome")?, 10, "welcome Ada")?;

        for (id, action, text) in [(11, "decline", "declined"), (12, "cancel", "cancelled")] {
            s.send(&call(id, "welcome"))?;
            let asked = s.next("the name's form")?;
            answer(&mut s, &asked, json!({"action": action}))?;
            expect_text(&s.next(action)?, id, text)?;
        }

        s.send(&call(13, "welcome"))?;
        let asked = s.next("the name's form")?;
        answer(&mut s, &asked, accept(json!({"name": ""})))?;
        expect_undecodable(&s.next("an empty name")?, 13)?;

        s.send(&call(14, "nested"))?;
        expect_refused_form(&s.next("nested")?, 14)?;
        s.finish()
    });
}

/// A stateless 2026-07-28 `tools/call` of `tool` whose client declared elicitation; `extra`
/// goes into `params`.
fn modern_tool_call(id: u64, tool: &str, extra: Value) -> Req {
    let mut params = json!({"name": tool, "arguments": {}, "_meta": modern_meta()});
    if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
        params.extend(extra);
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    Req::post(body.to_string())
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
}

/// The `input_required` of a round asking only under `key`: its request and the state.
fn expect_asked(reply: &Value, key: &str) -> Result<(Value, String), String> {
    let result = &reply["result"];
    let asked = result["inputRequests"].as_object().filter(|r| r.len() == 1).and_then(|r| r.get(key));
    let asked = asked.cloned().ok_or_else(|| format!("not input_required for {key} alone: {reply}"))?;
    let state = result["requestState"].as_str().ok_or_else(|| format!("no requestState: {reply}"))?;
    Ok((asked, state.to_owned()))
}

/// 2026-07-28: each typed form is a round of `input_required`; the handler runs again on each
/// retry, and the same `elicit` returns the answer the retry brought, so the second form is
/// asked only once the first is answered, under a key of its own. Declined, cancelled and
/// undecodable answers, and a type that is no form, as on a legacy session.
#[test]
fn modern_typed_elicit_suspends_and_returns_the_answer_on_retry() {
    each(|shim| {
        let addr = serve(shim, typed_server(), HttpConfig::default());
        let mut client = connect(addr)?;
        let mut round = |id: u64, tool: &str, extra: Value| -> Result<Value, String> {
            client.request(&modern_tool_call(id, tool, extra))?.json()
        };

        let (asked, state) = expect_asked(&round(1, "welcome", json!({}))?, "elicit-1")?;
        expect_name_form(&asked)?;
        let retry =
            json!({"inputResponses": {"elicit-1": accept(json!({"name": "Ada"}))}, "requestState": state});
        let (asked, state) = expect_asked(&round(2, "welcome", retry)?, "elicit-2")?;
        ensure(asked["params"]["message"] == "Send the welcome?", || format!("the second round: {asked}"))?;
        let retry =
            json!({"inputResponses": {"elicit-2": accept(json!({"ok": true}))}, "requestState": state});
        let reply = round(3, "welcome", retry)?;
        ensure(reply["result"]["resultType"] == "complete", || format!("the last round: {reply}"))?;
        expect_text(&reply, 3, "welcome Ada")?;

        for (id, action, text) in [(4, "decline", "declined"), (6, "cancel", "cancelled")] {
            let (_, state) = expect_asked(&round(id, "welcome", json!({}))?, "elicit-1")?;
            let retry = json!({"inputResponses": {"elicit-1": {"action": action}}, "requestState": state});
            expect_text(&round(id + 1, "welcome", retry)?, id + 1, text)?;
        }

        let (_, state) = expect_asked(&round(8, "welcome", json!({}))?, "elicit-1")?;
        let retry =
            json!({"inputResponses": {"elicit-1": accept(json!({"name": ""}))}, "requestState": state});
        expect_undecodable(&round(9, "welcome", retry)?, 9)?;

        expect_refused_form(&round(10, "nested", json!({}))?, 10)
    });
}
