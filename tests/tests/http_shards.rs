//! Sharded servers (`mcp_server::Shards`) over real loopback sockets on both shims: one endpoint
//! spreads connections over several engines, and whatever a client began on one shard (a
//! legacy session, its GET stream, a task, a cursor) is served on every connection, whichever
//! shard that connection went to. Every request here is sent on a connection of its own, so
//! consecutive requests reach the shards in turn.

use std::net::SocketAddr;
use std::time::Duration;

use mcp_proto::http::HttpConfig;
use mcp_proto::{TaskSupport, Tool, ToolOutput};
use mcp_server::{Server, ServerBuilder, Shards, ToolCall};
use mcp_tests::http::{block_on, each, ensure, event_data, poll_until, serve, Client, Req, Response, Shim};
use serde_json::{json, Value};

const LEGACY: &str = "2025-11-25";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Five tools on pages of two, and `job`, a task-capable tool that sleeps `ms` on `shim`'s timer.
fn builder(shim: Shim) -> ServerBuilder {
    let mut b = Server::builder("shards-test", "1");
    for i in 0..5 {
        b = b.tool(Tool::new(format!("t{i}"), "d", json!({"type": "object"})), |_: ToolCall| async {
            Ok::<_, mcp_proto::HandlerError>(ToolOutput::text("ok"))
        });
    }
    let job =
        Tool::new("job", "Sleeps ms", json!({"type": "object", "properties": {"ms": {"type": "integer"}}}))
            .task_support(TaskSupport::Optional);
    b = b.tool(job, move |call: ToolCall| async move {
        let ms = call.arguments.get("ms").and_then(Value::as_u64).unwrap_or(0);
        match shim {
            Shim::Tokio => tokio::time::sleep(Duration::from_millis(ms)).await,
            Shim::Smol => {
                smol::Timer::after(Duration::from_millis(ms)).await;
            }
        }
        ToolOutput::text(format!("done {ms}"))
    });
    b.config_mut().limits.page_size(2);
    b
}

fn shards(shim: Shim, count: usize) -> Result<Shards, String> {
    block_on(shim, builder(shim).build_shards(Some(count))).map_err(|e| format!("build_shards: {e}"))
}

fn send(addr: SocketAddr, req: &Req) -> Result<Response, String> {
    Client::connect(addr).map_err(|e| format!("connect: {e}"))?.request(req)
}

fn legacy(sid: &str, body: &Value) -> Req {
    Req::post(body.to_string()).header("MCP-Protocol-Version", LEGACY).header("Mcp-Session-Id", sid)
}

/// The JSON-RPC answer of a response, whether JSON or an SSE stream.
fn message(resp: &Response) -> Result<Value, String> {
    if resp.header("content-type").is_some_and(|t| t.starts_with("text/event-stream")) {
        let text = String::from_utf8_lossy(&resp.body);
        return text
            .split("\n\n")
            .filter_map(event_data)
            .find(|v| v.get("id").is_some())
            .ok_or_else(|| format!("no answer in the stream: {text}"));
    }
    resp.json()
}

/// A legacy session, handshake done, on one connection (so on one shard's turn): its id.
fn initialize(addr: SocketAddr) -> Result<String, String> {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "shards-test", "version": "1"}}});
    let mut conn = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let resp = conn.request(&Req::post(init.to_string()))?;
    ensure(resp.status() == 200, || format!("initialize: {resp:?}"))?;
    let sid =
        resp.header("mcp-session-id").map(str::to_owned).ok_or_else(|| format!("no session id: {resp:?}"))?;
    let done =
        conn.request(&legacy(&sid, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})))?;
    ensure(done.status() == 202, || format!("initialized: {done:?}"))?;
    Ok(sid)
}

/// A stateless 2026-07-28 request (declaring the Tasks extension), with its headers.
fn modern(id: u64, method: &str, mut params: Value) -> Req {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}
    });
    let name = params["name"].as_str().or(params["taskId"].as_str()).map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let req =
        Req::post(body.to_string()).header("MCP-Protocol-Version", "2026-07-28").header("Mcp-Method", method);
    match name {
        Some(name) => req.header("Mcp-Name", &name),
        None => req,
    }
}

#[test]
fn connections_are_spread_and_a_session_is_served_on_every_shard() {
    each(|shim| {
        let shards = shards(shim, 2)?;
        let addr = serve(shim, shards.clone(), HttpConfig::default());
        // Four sessions, each made on a connection of its own: two per shard.
        let sids: Vec<String> = (0..4).map(|_| initialize(addr)).collect::<Result<_, _>>()?;
        let held: Vec<usize> = shards.servers().iter().map(|s| s.status().sessions).collect();
        ensure(held == [2, 2], || format!("sessions per shard: {held:?}"))?;
        // Every session answers on any connection, whichever shard that one went to.
        for sid in &sids {
            for id in 0..2 {
                let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "t1", "arguments": {}}});
                let answer = message(&send(addr, &legacy(sid, &call))?)?;
                ensure(answer["result"]["content"][0]["text"] == "ok", || format!("{sid}: {answer}"))?;
            }
        }
        // A GET stream opened through either shard hears a change made through the other.
        let sid = &sids[0];
        let mut stream = Client::connect(addr).map_err(|e| e.to_string())?;
        let get = Req::new("GET", "/mcp")
            .header("Accept", "text/event-stream")
            .header("MCP-Protocol-Version", LEGACY)
            .header("Mcp-Session-Id", sid);
        stream.send(&get.to_bytes()).map_err(|e| e.to_string())?;
        let head = stream.head()?;
        ensure(head.status == 200, || format!("GET: {head:?}"))?;
        poll_until("the GET stream", Duration::from_secs(10), || {
            Ok((shards.servers().iter().map(|s| s.status().streams).sum::<usize>() == 1).then_some(()))
        })?;
        let last = shards.servers().last().ok_or("no shards")?;
        ensure(last.remove_tool("t4"), || "t4 was registered".to_owned())?;
        let heard = loop {
            match stream.event()? {
                Some(event) => match event_data(&event) {
                    Some(v) if v["method"] == "notifications/tools/list_changed" => break v,
                    _ => continue,
                },
                None => return Err("the stream ended before the notification".into()),
            }
        };
        ensure(heard["jsonrpc"] == "2.0", || format!("{heard}"))?;
        // The shards share one catalogue: the tool is gone from every one.
        for s in shards.servers() {
            ensure(s.introspect().tools.iter().all(|t| t.name() != "t4"), || {
                "t4 outlived its removal".into()
            })?;
        }
        // DELETE on any connection ends the session everywhere.
        let del =
            Req::new("DELETE", "/mcp").header("MCP-Protocol-Version", LEGACY).header("Mcp-Session-Id", sid);
        let resp = send(addr, &del)?;
        ensure(matches!(resp.status(), 200 | 204), || format!("DELETE: {resp:?}"))?;
        let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
        for _ in 0..2 {
            let gone = send(addr, &legacy(sid, &call))?;
            ensure(gone.status() == 404, || format!("after DELETE: {gone:?}"))?;
        }
        ensure(stream.event()?.is_none(), || "the GET stream outlived its session".to_owned())
    });
}

#[test]
fn cursors_and_tasks_of_one_shard_are_good_on_the_others() {
    each(|shim| {
        let shards = shards(shim, 2)?;
        let addr = serve(shim, shards.clone(), HttpConfig::default());
        // Page after page, each on the next shard: the shards sign with one key ring.
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 0..10 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let r = send(addr, &modern(page, "tools/list", params))?.json()?;
            let tools = r["result"]["tools"].as_array().ok_or_else(|| format!("page {page}: {r}"))?;
            names.extend(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)));
            match r["result"]["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        ensure(names == ["job", "t0", "t1", "t2", "t3", "t4"], || format!("paged: {names:?}"))?;

        // A task runs on the shard it was made on; it is read and cancelled on every connection.
        let made = send(addr, &modern(1, "tools/call", json!({"name": "job", "arguments": {"ms": 60_000}})))?
            .json()?;
        let task = made["result"]["taskId"].as_str().ok_or_else(|| format!("not a task: {made}"))?.to_owned();
        for id in 2..4 {
            let got = send(addr, &modern(id, "tasks/get", json!({"taskId": task})))?.json()?;
            ensure(got["result"]["status"] == "working", || format!("tasks/get: {got}"))?;
        }
        let cancelled = send(addr, &modern(5, "tasks/cancel", json!({"taskId": task})))?.json()?;
        ensure(cancelled.get("result").is_some(), || format!("tasks/cancel: {cancelled}"))?;
        for id in 6..8 {
            let got = poll_until("the cancelled task", Duration::from_secs(10), || {
                let got = send(addr, &modern(id, "tasks/get", json!({"taskId": task})))?.json()?;
                Ok((got["result"]["status"] == "cancelled").then_some(got))
            })?;
            ensure(got["result"]["status"] == "cancelled", || format!("{got}"))?;
        }
        // A short one ends, and its result is read through both shards.
        let made =
            send(addr, &modern(8, "tools/call", json!({"name": "job", "arguments": {"ms": 5}})))?.json()?;
        let task = made["result"]["taskId"].as_str().ok_or_else(|| format!("not a task: {made}"))?.to_owned();
        for id in 9..11 {
            let done = poll_until("the short task", Duration::from_secs(10), || {
                let got = send(addr, &modern(id, "tasks/get", json!({"taskId": task})))?.json()?;
                Ok((got["result"]["status"] == "completed").then_some(got))
            })?;
            ensure(done["result"]["result"]["content"][0]["text"] == "done 5", || format!("{done}"))?;
        }
        Ok(())
    });
}

#[test]
fn each_shard_takes_its_part_of_the_bounds_and_all_shut_down() {
    each(|shim| {
        let mut b = builder(shim);
        b.config_mut().limits.max_sessions(5).max_sessions_per_caller(Some(3));
        let shards = block_on(shim, b.build_shards(Some(2))).map_err(|e| format!("{e}"))?;
        ensure(shards.len() == 2, || format!("{} shards", shards.len()))?;
        for s in shards.servers() {
            let l = s.limits();
            ensure(l.sessions() == 3 && l.sessions_per_caller() == Some(2), || {
                format!("{:?} {:?}", l.sessions(), l.sessions_per_caller())
            })?;
        }
        // The caller's whole share is 3 and then some rounding (2 per shard), never 3 per shard.
        let addr = serve(shim, shards.clone(), HttpConfig::default());
        let made = (0..8).filter(|_| initialize(addr).is_ok()).count();
        ensure(made == 4, || format!("{made} sessions of one caller across 2 shards"))?;
        // One shutdown stops every shard.
        let report = block_on(shim, shards.shutdown(Duration::from_secs(5)));
        ensure(report.is_clean(), || format!("{report:?}"))?;
        ensure(shards.servers().iter().all(|s| s.status().shutting_down), || "a shard still serves".into())
    });
}

#[test]
fn one_shard_is_a_plain_server() {
    each(|shim| {
        let shards = shards(shim, 1)?;
        ensure(shards.len() == 1 && shards.first().replica().is_none(), || {
            "one shard joined a cluster".into()
        })?;
        let addr = serve(shim, shards, HttpConfig::default());
        initialize(addr).map(|_| ())
    });
}
