//! Streamable HTTP through both shims over real loopback sockets: every status the transport
//! layer owns, its timeouts and connection bound, and end-to-end exchanges through the engine.
//!
//! Each test runs its scenario on tokio and on smol and reports both. Timing never decides a
//! result: short server-side timeouts are configured where a timeout is the subject, and the
//! client only waits (at most [`TIMEOUT`]) for what must happen.

use std::net::SocketAddr;
use std::thread::sleep;
use std::time::{Duration, Instant};

use mcp_proto::http::HttpConfig;
use mcp_proto::{Limits, Tool, ToolOutput};
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{modern, serve, test_server_with, Client, Req, Response, Shim, SHIMS, TIMEOUT};
use serde_json::json;

type Outcome = Result<(), String>;

/// Runs `scenario` on every shim and fails with every shim's failure.
fn each(scenario: impl Fn(Shim) -> Outcome) {
    let failures: Vec<String> =
        SHIMS.iter().filter_map(|&shim| scenario(shim).err().map(|e| format!("{shim:?}: {e}"))).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn start(shim: Shim, limits: Limits) -> (SocketAddr, Server) {
    let server = test_server_with(shim, limits);
    (serve(shim, server.clone(), HttpConfig::default()), server)
}

fn connect(addr: SocketAddr) -> Result<Client, String> {
    Client::connect(addr).map_err(|e| format!("connect: {e}"))
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Outcome {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

fn expect_status(resp: &Response, status: u16, what: &str) -> Outcome {
    ensure(resp.status() == status, || {
        format!(
            "{what}: expected {status}, got {} {:?} {}",
            resp.status(),
            resp.head.headers.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            String::from_utf8_lossy(&resp.body)
        )
    })
}

/// A transport refusal's body: a JSON-RPC error without an id, as JSON.
fn expect_refusal_body(resp: &Response, what: &str) -> Outcome {
    ensure(resp.header("content-type") == Some("application/json"), || format!("{what}: not JSON"))?;
    let body = resp.json()?;
    ensure(body["id"].is_null() && body["error"]["code"] == json!(-32600), || {
        format!("{what}: not a JSON-RPC error: {body}")
    })
}

/// Polls `probe` until it holds, for conditions the server reaches asynchronously.
fn eventually(what: &str, mut probe: impl FnMut() -> bool) -> Outcome {
    let deadline = Instant::now() + TIMEOUT;
    while !probe() {
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {TIMEOUT:?}"));
        }
        sleep(Duration::from_millis(10));
    }
    Ok(())
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"http-test","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

#[test]
fn transport_refusals() {
    each(|shim| {
        let (addr, _) = start(shim, Limits::default());
        let cases = [
            ("wrong path", Req::new("GET", "/other").header("Accept", "text/event-stream"), 404),
            ("PUT", Req::new("PUT", "/mcp"), 405),
            (
                "text/plain body",
                Req::post(INITIALIZE).without("Content-Type").header("Content-Type", "text/plain"),
                415,
            ),
            ("Accept: text/html", Req::post(INITIALIZE).without("Accept").header("Accept", "text/html"), 406),
            ("GET without SSE", Req::new("GET", "/mcp").header("Accept", "application/json"), 406),
            ("no Host", Req::post(INITIALIZE).without("Host"), 400),
            ("foreign Host", Req::post(INITIALIZE).without("Host").header("Host", "evil.example"), 403),
            ("foreign Origin", Req::post(INITIALIZE).header("Origin", "http://evil.example"), 403),
            ("head over 8 KiB", Req::post(INITIALIZE).header("X-Padding", &"a".repeat(9000)), 431),
            // Past hyper's own buffer: refused by hyper, without a JSON-RPC body.
            ("head over 64 KiB", Req::post(INITIALIZE).header("X-Padding", &"a".repeat(64 * 1024)), 431),
            ("malformed session id", Req::post(INITIALIZE).header("Mcp-Session-Id", "a b"), 400),
            // RFC 9112 §3.2.2: an absolute-form target's authority counts, not the Host header.
            (
                "absolute-form target of a foreign host",
                Req::new("POST", "http://evil.example/mcp")
                    .header("Content-Type", "application/json")
                    .header("Accept", "application/json, text/event-stream")
                    .body(INITIALIZE),
                403,
            ),
            // RFC 9112 §6.1: a transfer coding other than chunked cannot be read.
            (
                "Transfer-Encoding: gzip, chunked",
                Req::post(format!("{:x}\r\n{INITIALIZE}\r\n0\r\n\r\n", INITIALIZE.len()))
                    .without("Content-Length")
                    .header("Transfer-Encoding", "gzip, chunked"),
                501,
            ),
        ];
        for (what, req, status) in cases {
            let resp = connect(addr)?.request(&req).map_err(|e| format!("{what}: {e}"))?;
            expect_status(&resp, status, what)?;
            match status {
                404 => ensure(resp.body.is_empty(), || format!("{what}: a 404 has no JSON-RPC body"))?,
                431 if what == "head over 64 KiB" => {}
                405 => {
                    ensure(resp.header("allow") == Some("GET, POST, DELETE"), || format!("{what}: Allow"))?;
                    expect_refusal_body(&resp, what)?;
                }
                _ => expect_refusal_body(&resp, what)?,
            }
        }
        // An absolute-form target naming an allowed host is served like an origin-form one.
        let absolute = Req::new("POST", "http://localhost/mcp")
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(INITIALIZE);
        expect_status(&connect(addr)?.request(&absolute)?, 200, "absolute-form target of an allowed host")?;
        // A refusal leaves a keep-alive connection usable.
        let mut client = connect(addr)?;
        expect_status(&client.request(&Req::new("PUT", "/mcp"))?, 405, "first request")?;
        expect_status(&client.request(&Req::post(INITIALIZE))?, 200, "after a refusal")
    });
}

#[test]
fn body_bounds() {
    each(|shim| {
        let mut limits = Limits::default();
        limits.max_frame_bytes(1024);
        let (addr, _) = start(shim, limits);

        // A declared length over the bound is refused from the head: no byte of the body is sent.
        let mut client = connect(addr)?;
        let head = Req::post(Vec::new()).without("Content-Length").header("Content-Length", "2048");
        let resp = client.request(&head)?;
        expect_status(&resp, 413, "Content-Length over the bound")?;
        expect_refusal_body(&resp, "Content-Length over the bound")?;

        // A chunked body is cut off as soon as it grows past the bound, long before it ends (it
        // never does here): 413, and the connection closes since the rest was not read.
        let mut client = connect(addr)?;
        let head = Req::new("POST", "/mcp")
            .header("Content-Type", "application/json")
            .header("Transfer-Encoding", "chunked");
        client.send(&head.to_bytes()).map_err(|e| e.to_string())?;
        let chunk = [b"258\r\n".as_slice(), &[b' '; 600], b"\r\n"].concat();
        client.send(&chunk).map_err(|e| e.to_string())?;
        client.send(&chunk).map_err(|e| e.to_string())?;
        let resp = client.response()?;
        expect_status(&resp, 413, "chunked body over the bound")?;
        expect_refusal_body(&resp, "chunked body over the bound")?;
        ensure(resp.header("connection") == Some("close"), || "413 mid-body must close".to_owned())?;
        ensure(client.closed_within(TIMEOUT), || "the connection stayed open after 413".to_owned())?;

        // A body at the bound is read (and judged by the engine: here, not JSON).
        let resp = connect(addr)?.request(&Req::post(vec![b'x'; 1024]))?;
        ensure(resp.status() != 413, || "a body at the bound was refused".to_owned())
    });
}

#[test]
fn slow_body_is_answered_408() {
    each(|shim| {
        let mut limits = Limits::default();
        limits.body_read_timeout(Duration::from_millis(200));
        let (addr, _) = start(shim, limits);
        let mut client = connect(addr)?;
        let head = Req::post(Vec::new()).without("Content-Length").header("Content-Length", "100");
        client.send(&head.to_bytes()).map_err(|e| e.to_string())?;
        client.send(b"{\"jsonrpc\":").map_err(|e| e.to_string())?;
        let resp = client.response()?;
        expect_status(&resp, 408, "slow body")?;
        expect_refusal_body(&resp, "slow body")?;
        ensure(resp.header("connection") == Some("close"), || "408 must close".to_owned())?;
        ensure(client.closed_within(TIMEOUT), || "the connection stayed open after 408".to_owned())
    });
}

#[test]
fn slow_head_and_idle_connections_are_closed() {
    each(|shim| {
        let mut limits = Limits::default();
        limits.header_read_timeout(Duration::from_millis(200));
        let (addr, _) = start(shim, limits);

        // Slow loris: half a head, then nothing.
        let mut client = connect(addr)?;
        client.send(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n").map_err(|e| e.to_string())?;
        ensure(client.closed_within(TIMEOUT), || "a half-sent head kept its connection".to_owned())?;

        // A connection that never sends a byte is waiting for a head as well (the server waits
        // for its first bytes before hyper takes it, within the same timeout).
        let mut client = connect(addr)?;
        ensure(client.closed_within(TIMEOUT), || "a connection that sent nothing was kept".to_owned())?;

        // An idle keep-alive connection is waiting for a head too.
        let mut client = connect(addr)?;
        expect_status(&client.request(&Req::new("PUT", "/mcp"))?, 405, "first request")?;
        ensure(client.closed_within(TIMEOUT), || "an idle keep-alive connection was kept".to_owned())
    });
}

#[test]
fn connection_bound() {
    each(|shim| {
        let mut limits = Limits::default();
        limits.max_http_connections(2);
        let (addr, _) = start(shim, limits);
        let probe = Req::new("PUT", "/mcp");
        let mut first = connect(addr)?;
        let mut second = connect(addr)?;
        expect_status(&first.request(&probe)?, 405, "first connection")?;
        expect_status(&second.request(&probe)?, 405, "second connection")?;

        // The third is closed at once, unread and unanswered.
        let mut third = connect(addr)?;
        let _ = third.send(&probe.to_bytes());
        ensure(third.closed_within(TIMEOUT), || "a connection past the bound was served".to_owned())?;
        ensure(third.unread().is_empty(), || "a connection past the bound got bytes".to_owned())?;

        // A place comes back when a connection ends.
        drop(first);
        eventually("a new connection served after one closed", || {
            Client::connect(addr).is_ok_and(|mut c| c.request(&probe).is_ok_and(|r| r.status() == 405))
        })?;
        expect_status(&second.request(&probe)?, 405, "second connection still served")
    });
}

#[test]
fn legacy_session_end_to_end() {
    each(|shim| {
        let (addr, server) = start(shim, Limits::default());
        let mut client = connect(addr)?;
        let resp = client.request(&Req::post(INITIALIZE))?;
        expect_status(&resp, 200, "initialize")?;
        ensure(resp.header("content-type") == Some("application/json"), || {
            "initialize: not JSON".to_owned()
        })?;
        let init = resp.json()?;
        ensure(init["result"]["protocolVersion"] == json!("2025-11-25"), || format!("initialize: {init}"))?;
        let session = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?.to_owned();
        ensure(mcp_proto::http::is_valid_session_id(&session) && session.len() >= 32, || {
            format!("a weak session id: {session:?}")
        })?;
        let in_session =
            |req: Req| req.header("Mcp-Session-Id", &session).header("MCP-Protocol-Version", "2025-11-25");

        let resp = client.request(&in_session(Req::post(INITIALIZED)))?;
        expect_status(&resp, 202, "notifications/initialized")?;
        ensure(resp.body.is_empty(), || "202 with a body".to_owned())?;

        let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        let resp = client.request(&in_session(Req::post(list)))?;
        expect_status(&resp, 200, "tools/list")?;
        let tools = resp.json()?;
        ensure(
            tools["result"]["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "echo")),
            || format!("tools/list: {tools}"),
        )?;

        let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over http"}}}"#;
        let resp = client.request(&in_session(Req::post(call)))?;
        expect_status(&resp, 200, "tools/call")?;
        ensure(resp.header("content-type") == Some("application/json"), || {
            "tools/call: not JSON".to_owned()
        })?;
        let reply = resp.json()?;
        ensure(
            reply
                == json!({"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "over http"}]}}),
            || format!("tools/call: {reply}"),
        )?;

        // The standalone stream opens with SSE headers.
        let mut stream = connect(addr)?;
        let get = in_session(Req::new("GET", "/mcp").header("Accept", "text/event-stream"));
        stream.send(&get.to_bytes()).map_err(|e| e.to_string())?;
        let head = stream.head()?;
        ensure(head.status == 200, || format!("GET: status {}", head.status))?;
        ensure(head.header("content-type") == Some("text/event-stream"), || "GET: not SSE".to_owned())?;
        ensure(head.header("cache-control") == Some("no-cache"), || "GET: cacheable".to_owned())?;
        eventually("the stream is open", || server.status().connections == 1)?;
        // A client that goes away frees the stream.
        drop(stream);
        eventually("the stream is closed with its client", || server.status().connections == 0)?;

        // DELETE ends the session; its id is unknown afterwards.
        let resp = client.request(&in_session(Req::new("DELETE", "/mcp")))?;
        ensure((200..300).contains(&resp.status()), || format!("DELETE: {}", resp.status()))?;
        let resp = client.request(&in_session(Req::post(list)))?;
        expect_status(&resp, 404, "a deleted session")
    });
}

#[test]
fn stateless_2026_post() {
    each(|shim| {
        let (addr, _) = start(shim, Limits::default());
        let mut client = connect(addr)?;
        let resp = client.request(&modern(1, "tools/list", json!({})))?;
        expect_status(&resp, 200, "2026 tools/list")?;
        ensure(resp.header("mcp-session-id").is_none(), || "2026 minted a session".to_owned())?;
        let list = resp.json()?;
        ensure(list["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), || format!("{list}"))?;

        let resp =
            client.request(&modern(2, "tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})))?;
        expect_status(&resp, 200, "2026 tools/call")?;
        let reply = resp.json()?;
        ensure(reply["result"]["content"][0]["text"] == "hi", || format!("2026 tools/call: {reply}"))
    });
}

#[test]
fn closing_a_2026_response_cancels_the_call() {
    each(|shim| {
        let (addr, server) = start(shim, Limits::default());
        let mut client = connect(addr)?;
        let slow = modern(1, "tools/call", json!({"name": "slow", "arguments": {"ms": 600_000}}));
        client.send(&slow.to_bytes()).map_err(|e| e.to_string())?;
        eventually("the slow call is running", || server.status().in_flight == 1)?;
        drop(client);
        eventually("the call is cancelled when its client goes away", || {
            let status = server.status();
            status.in_flight == 0 && status.running_handlers == 0 && status.connections == 0
        })
    });
}

#[test]
fn shutdown_stops_accepting() {
    each(|shim| {
        let (addr, server) = start(shim, Limits::default());
        expect_status(&connect(addr)?.request(&Req::new("PUT", "/mcp"))?, 405, "before shutdown")?;
        let report = match shim {
            Shim::Tokio => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(server.shutdown(Duration::from_secs(1))),
            Shim::Smol => smol::block_on(server.shutdown(Duration::from_secs(1))),
        };
        ensure(report.cancelled == 0, || format!("{report:?}"))?;
        eventually("the listener is closed", || {
            !Client::connect(addr).is_ok_and(|mut c| c.request(&Req::new("PUT", "/mcp")).is_ok())
        })
    });
}

/// A request whose answer becomes an SSE stream delivers each event as the engine produces it:
/// the tool's log message arrives while the tool is still waiting, and the stream ends after
/// the response.
#[test]
fn request_stream_delivers_each_event_at_once() {
    each(|shim| {
        let (addr, server) = start(shim, Limits::default());
        let (release, released) = smol::channel::bounded::<()>(1);
        let tool =
            mcp_proto::Tool::new("log_then_wait", "Logs, then waits for the test", json!({"type": "object"}));
        server
            .add_tool(tool, move |call| {
                let released = released.clone();
                async move {
                    call.ctx.log(mcp_proto::LogLevel::Info, None, json!("started"));
                    let _ = released.recv().await;
                    mcp_proto::ToolOutput::text("done")
                }
            })
            .map_err(|e| e.to_string())?;
        let mut client = connect(addr)?;
        let resp = client.request(&Req::post(INITIALIZE))?;
        let session = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?.to_owned();
        let in_session =
            |req: Req| req.header("Mcp-Session-Id", &session).header("MCP-Protocol-Version", "2025-11-25");
        expect_status(&client.request(&in_session(Req::post(INITIALIZED)))?, 202, "initialized")?;

        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"log_then_wait","arguments":{}}}"#;
        client.send(&in_session(Req::post(call)).to_bytes()).map_err(|e| e.to_string())?;
        let head = client.head()?;
        ensure(head.status == 200 && head.header("content-type") == Some("text/event-stream"), || {
            format!("tools/call: {head:?}")
        })?;
        let mut seen = String::new();
        while !seen.contains("notifications/message") {
            let chunk = client.chunk()?.ok_or("the stream ended before the log message")?;
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        ensure(!seen.contains("\"id\":7"), || "the response came before the tool was released".to_owned())?;
        release.try_send(()).map_err(|e| e.to_string())?;
        while !seen.contains("\"id\":7") {
            let chunk = client.chunk()?.ok_or("the stream ended before the response")?;
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        ensure(seen.contains(r#""text":"done""#), || format!("the response: {seen}"))?;
        ensure(client.chunk()?.is_none(), || "the stream went on after the response".to_owned())?;
        // The connection is still good for the next request.
        expect_status(&client.request(&Req::new("PUT", "/mcp"))?, 405, "after the stream")
    });
}

/// No request waits on another: while one client's call sits in a handler that cannot finish
/// and another client's body is only half sent, a third client's `tools/list` and `tools/call` are
/// answered. Nothing here is timed: the held call cannot end before the test releases it, so
/// the third client being served at all is the proof.
#[test]
fn a_stuck_request_delays_no_other_client() {
    each(|shim| {
        let (release, held) = async_channel::bounded::<()>(1);
        let server = Server::builder("isolation", "1")
            .tool(
                Tool::new("hold", "Waits until the test releases it", json!({"type": "object"})),
                move |_| {
                    let held = held.clone();
                    async move {
                        let _ = held.recv().await;
                        ToolOutput::text("released")
                    }
                },
            )
            .tool(Tool::new("echo", "Echoes", json!({"type": "object"})), |call: ToolCall| async move {
                ToolOutput::text(call.arguments["text"].as_str().unwrap_or_default().to_owned())
            })
            .build()
            .map_err(|e| e.to_string())?;
        let addr = serve(shim, server.clone(), HttpConfig::default());

        let mut holder = connect(addr)?;
        let hold = modern(1, "tools/call", json!({"name": "hold", "arguments": {}}));
        holder.send(&hold.to_bytes()).map_err(|e| e.to_string())?;
        eventually("the held call is running", || server.status().in_flight == 1)?;

        // Half of a 1 MiB body: its reader waits for the rest on its own task.
        let mut half = connect(addr)?;
        let big =
            modern(2, "tools/call", json!({"name": "echo", "arguments": {"text": "x".repeat(1 << 20)}}));
        let bytes = big.to_bytes();
        half.send(&bytes[..bytes.len() / 2]).map_err(|e| e.to_string())?;

        let mut other = connect(addr)?;
        // 2026-07-28 has no `ping`; `tools/list` is its cheapest request.
        let list = other.request(&modern(3, "tools/list", json!({})))?;
        expect_status(&list, 200, "tools/list beside a held call")?;
        ensure(list.json()?["result"]["tools"].is_array(), || "tools/list: no tools".to_owned())?;
        let echo =
            other.request(&modern(4, "tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})))?;
        ensure(echo.json()?["result"]["content"][0]["text"] == "hi", || {
            "echo beside a held call".to_owned()
        })?;
        ensure(server.status().in_flight == 1, || "the held call ended on its own".to_owned())?;

        // Both stuck requests still complete once unblocked.
        half.send(&bytes[bytes.len() / 2..]).map_err(|e| e.to_string())?;
        let resp = half.response()?;
        ensure(
            resp.json()?["result"]["content"][0]["text"].as_str().is_some_and(|t| t.len() == 1 << 20),
            || "the half-sent call".to_owned(),
        )?;
        release.try_send(()).map_err(|e| e.to_string())?;
        let resp = holder.response()?;
        ensure(resp.json()?["result"]["content"][0]["text"] == "released", || "the held call".to_owned())
    });
}
