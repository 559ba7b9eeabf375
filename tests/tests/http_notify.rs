//! Notification bursts and slow readers on `GET` streams, through both shims over real loopback
//! sockets (issue 10): a burst of list changes does not cut a stream that reads, and a stream
//! that never reads is cut once it has stalled for `Limits::stall_timeout`, not before.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_proto::http::HttpConfig;
use mcp_proto::{Resource, ResourceContents, Tool, ToolOutput};
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{each, ensure, event_data, poll_until, serve, Client, Req};
use serde_json::{json, Value};

/// How long a test waits for the server to reach a state it must reach on its own.
const SETTLE: Duration = Duration::from_secs(10);

fn initialize_body(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "notify-test", "version": "1"}}})
    .to_string()
}

fn in_session(req: Req, sid: &str, version: &str) -> Req {
    req.header("Mcp-Session-Id", sid).header("MCP-Protocol-Version", version)
}

/// A session at `version` through its handshake.
fn session(addr: SocketAddr, version: &str) -> Result<String, String> {
    let mut c = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let resp = c.request(&Req::post(initialize_body(version)))?;
    ensure(resp.status() == 200, || format!("initialize: {}", resp.status()))?;
    let sid = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?.to_owned();
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let resp = c.request(&in_session(Req::post(note), &sid, version))?;
    ensure(resp.status() == 202, || format!("initialized: {}", resp.status()))?;
    Ok(sid)
}

/// The session's `GET` stream, its head read.
fn open_stream(addr: SocketAddr, sid: &str, version: &str) -> Result<Client, String> {
    let mut c = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let get = in_session(Req::new("GET", "/mcp").header("Accept", "text/event-stream"), sid, version);
    c.send(&get.to_bytes()).map_err(|e| format!("GET: {e}"))?;
    let head = c.head()?;
    ensure(head.status == 200, || format!("GET: {head:?}"))?;
    Ok(c)
}

/// A server with the everything example's `test_trigger_tool_change`: each call adds or removes
/// `test_dynamic_tool`, and so changes the tool list.
fn trigger_server() -> Server {
    let no_args = json!({"type": "object"});
    // Held across the remove-then-add: the batch's calls run at once, and two of them could
    // otherwise both find the tool absent and both add it.
    let toggle = Arc::new(std::sync::Mutex::new(()));
    Server::builder("notify", "1.0.0")
        .tool(
            Tool::new("test_trigger_tool_change", "Adds or removes test_dynamic_tool", no_args.clone()),
            move |call: ToolCall| {
                let no_args = no_args.clone();
                let toggle = toggle.clone();
                async move {
                    let _one_at_a_time = toggle.lock().unwrap_or_else(|p| p.into_inner());
                    let server = call.ctx.server();
                    if server.remove_tool("test_dynamic_tool") {
                        return ToolOutput::text("removed");
                    }
                    let tool = Tool::new("test_dynamic_tool", "Comes and goes", no_args);
                    match server.add_tool(tool, |_| async { ToolOutput::text("dynamic") }) {
                        Ok(()) => ToolOutput::text("added"),
                        Err(e) => ToolOutput::error(e.to_string()),
                    }
                }
            },
        )
        .build()
        .unwrap_or_else(|e| panic!("the test server is valid: {e}"))
}

/// Issue 10: a 2025-03-26 batch of 20 `test_trigger_tool_change` calls, while a `GET` stream
/// reads as fast as it can. The stream used to be cut (20 notifications for a 16-frame queue);
/// now it stays open and learns that the tool list changed.
#[test]
fn a_burst_of_tool_changes_keeps_a_reading_stream() {
    const V: &str = "2025-03-26";
    each(|shim| {
        let server = trigger_server();
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sid = session(addr, V)?;
        let mut reader = open_stream(addr, &sid, V)?;
        let seen = Arc::new(AtomicUsize::new(0));
        let (done, ended) = std::sync::mpsc::channel();
        {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let read = (|| -> Result<(), String> {
                    while let Some(event) = reader.event()? {
                        if event_data(&event)
                            .is_some_and(|d| d["method"] == "notifications/tools/list_changed")
                        {
                            seen.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    Ok(())
                })();
                let _ = done.send(read);
            });
        }
        poll_until("the stream counted", SETTLE, || Ok((server.status().streams == 1).then_some(())))?;
        let batch: Vec<Value> = (0..20)
            .map(|i| {
                json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                       "params": {"name": "test_trigger_tool_change", "arguments": {}}})
            })
            .collect();
        let mut c = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
        let resp = c.request(&in_session(Req::post(Value::from(batch).to_string()), &sid, V))?;
        ensure(resp.status() == 200, || format!("batch: {}", resp.status()))?;
        let answers = resp.json()?;
        ensure(
            answers.as_array().is_some_and(|a| {
                a.len() == 20 && a.iter().all(|r| r["result"]["isError"] != true && r.get("error").is_none())
            }),
            || format!("batch answers: {answers}"),
        )?;
        poll_until("a tools/list_changed read", SETTLE, || {
            Ok((seen.load(Ordering::SeqCst) > 0).then_some(()))
        })?;
        // Settled: whatever the burst queued has been written, and the stream is still open.
        std::thread::sleep(Duration::from_millis(300));
        if let Ok(end) = ended.try_recv() {
            return Err(format!("the reading stream ended: {end:?}"));
        }
        ensure(server.status().streams == 1, || format!("the stream was dropped: {:?}", server.status()))?;
        eprintln!("{shim:?}: the reading stream saw {} tools/list_changed", seen.load(Ordering::SeqCst));
        // Ending the session ends the stream cleanly.
        let resp = c.request(&in_session(Req::new("DELETE", "/mcp"), &sid, V))?;
        ensure(resp.status() == 200, || format!("DELETE: {}", resp.status()))?;
        ended.recv_timeout(SETTLE).map_err(|_| "the stream did not end with its session".to_owned())?
    });
}

/// Bytes of a resource URI whose `resources/updated` fills socket buffers quickly.
const BIG_URI_BYTES: usize = 60_000;

/// A `GET` stream that never reads is cut once its socket buffers and its queue are full and
/// it has taken nothing for `stall_timeout`, while another session's stream keeps receiving.
#[test]
fn a_stream_that_never_reads_is_cut_after_the_stall_time() {
    const V: &str = "2025-11-25";
    const STALL: Duration = Duration::from_millis(500);
    each(|shim| {
        let mut uri = "test://big/".to_owned();
        uri.extend(std::iter::repeat_n('x', BIG_URI_BYTES - uri.len()));
        let server = {
            let mut b = Server::builder("notify", "1.0.0").resource_subscriptions();
            b.config_mut()
                .limits
                .stream_queue(2)
                .stall_timeout(STALL)
                .keepalive(Duration::from_millis(50))
                .max_uri_bytes(2 * BIG_URI_BYTES);
            let text_uri = uri.clone();
            b.resource(Resource::new(uri.clone(), "big"), move |_| {
                let uri = text_uri.clone();
                async move { Ok(vec![ResourceContents::text(uri, "text/plain", "big")]) }
            })
            .build()
            .map_err(|e| e.to_string())?
        };
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sids = [session(addr, V)?, session(addr, V)?];
        for sid in &sids {
            let body =
                json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": uri}});
            let mut c = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
            let resp = c.request(&in_session(Req::post(body.to_string()), sid, V))?;
            ensure(resp.status() == 200, || format!("subscribe: {}", resp.status()))?;
        }
        let _stalled = open_stream(addr, &sids[0], V)?;
        let mut fast = open_stream(addr, &sids[1], V)?;
        poll_until("two streams", SETTLE, || Ok((server.status().streams == 2).then_some(())))?;
        // Notify in lock step with the reading stream until the other one is cut.
        let started = Instant::now();
        let mut sent = 0usize;
        while server.status().streams == 2 {
            ensure(started.elapsed() < SETTLE, || {
                format!("the stream that never reads was kept after {sent} notifications")
            })?;
            server.notify_resource_updated(&uri);
            sent += 1;
            loop {
                let event = fast.event()?.ok_or("the reading stream ended")?;
                if event_data(&event).is_some_and(|d| d["method"] == "notifications/resources/updated") {
                    break;
                }
            }
        }
        let took = started.elapsed();
        eprintln!(
            "{shim:?}: the stream that never reads was cut {took:?} after the first of {sent} notifications"
        );
        ensure(took >= STALL, || format!("cut after {took:?}, before the stall time {STALL:?}"))?;
        // The other stream goes on.
        server.notify_resource_updated(&uri);
        loop {
            let event = fast.event()?.ok_or("the reading stream ended after the cut")?;
            if event_data(&event).is_some() {
                return Ok(());
            }
        }
    });
}
