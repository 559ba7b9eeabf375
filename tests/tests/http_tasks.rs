//! The Tasks extension through both shims over real loopback sockets, and the task store that
//! lets tasks outlive the engine that ran them: two servers share one [`InMemoryTaskStore`]
//! (as replicas would share a Redis-backed store); a task made and ended on one is read on the
//! other, by the caller that made it only. Callers are told apart by their peer address
//! (127.0.0.1 and 127.0.0.2; Linux loopback answers the whole of 127/8).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mcp_proto::http::HttpConfig;
use mcp_proto::{TaskSupport, Tool, ToolOutput};
use mcp_server::{InMemoryTaskStore, Server, TaskStore, ToolCall};
use mcp_tests::http::{each, ensure, poll_until, serve, Client, Req, Response, Shim};
use serde_json::{json, Value};

const ALICE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const BOB: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// A server with one task-capable tool, `job`, which sleeps `ms` then answers `done <ms>` (or,
/// given `size`, a text of that many bytes), on `shim`'s timer, writing ended tasks to `store`.
fn build(shim: Shim, store: Option<Arc<dyn TaskStore>>) -> Server {
    bounded(shim, store, |_| {})
}

/// [`build`] under `limits`.
fn bounded(
    shim: Shim,
    store: Option<Arc<dyn TaskStore>>,
    limits: impl FnOnce(&mut mcp_proto::Limits),
) -> Server {
    let tool = Tool::new(
        "job",
        "Sleeps ms, then answers",
        json!({"type": "object", "properties": {"ms": {"type": "integer"}, "size": {"type": "integer"}}}),
    )
    .task_support(TaskSupport::Optional);
    let mut builder = Server::builder("tasks", "1.0.0").task_store(store);
    limits(&mut builder.config_mut().limits);
    builder
        .tool(tool, move |call: ToolCall| async move {
            let ms = call.arguments.get("ms").and_then(Value::as_u64).unwrap_or(0);
            match shim {
                Shim::Tokio => tokio::time::sleep(Duration::from_millis(ms)).await,
                Shim::Smol => {
                    smol::Timer::after(Duration::from_millis(ms)).await;
                }
            }
            match call.arguments.get("size").and_then(Value::as_u64) {
                Some(size) => ToolOutput::text("x".repeat(usize::try_from(size).unwrap_or(0))),
                None => ToolOutput::text(format!("done {ms}")),
            }
        })
        .build()
        .unwrap_or_else(|e| panic!("the test server is valid: {e}"))
}

/// A 2026-07-28 request declaring the extension, with the headers that version requires.
fn request(id: u64, method: &str, mut params: Value) -> Req {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}}
    });
    let name = params["name"].as_str().or(params["taskId"].as_str()).map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let req = Req::post(body.to_string())
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .header("Accept", "application/json, text/event-stream");
    match name {
        Some(name) => req.header("Mcp-Name", &name),
        None => req,
    }
}

/// Sends `req` to `addr` from `from` and returns the JSON-RPC response.
fn send(addr: SocketAddr, from: IpAddr, req: &Req) -> Result<Value, String> {
    let mut client = Client::connect_from(addr, from).map_err(|e| format!("connect from {from}: {e}"))?;
    let resp: Response = client.request(req)?;
    resp.json()
}

fn get(addr: SocketAddr, from: IpAddr, task: &str) -> Result<Value, String> {
    send(addr, from, &request(9, "tasks/get", json!({"taskId": task})))
}

/// Starts a `job` task on `addr` as `from`; returns its id.
fn start(addr: SocketAddr, from: IpAddr, ms: u64) -> Result<String, String> {
    let created =
        send(addr, from, &request(1, "tools/call", json!({"name": "job", "arguments": {"ms": ms}})))?;
    ensure(created["result"]["resultType"] == "task", || format!("not a task: {created}"))?;
    created["result"]["taskId"].as_str().map(str::to_owned).ok_or_else(|| format!("no taskId: {created}"))
}

/// Polls `tasks/get` on `addr` until the task reaches `status`.
fn until(addr: SocketAddr, from: IpAddr, task: &str, status: &str) -> Result<Value, String> {
    poll_until(&format!("task {task} {status} on {addr}"), Duration::from_secs(10), || {
        let got = get(addr, from, task)?;
        Ok((got["result"]["status"] == status).then_some(got))
    })
}

#[test]
fn an_ended_task_is_read_on_another_server_sharing_the_store() {
    each(|shim| {
        let store: Arc<dyn TaskStore> = Arc::new(InMemoryTaskStore::new(16));
        let a = serve(shim, build(shim, Some(store.clone())), HttpConfig::default());
        let b = serve(shim, build(shim, Some(store)), HttpConfig::default());
        let lonely = serve(shim, build(shim, None), HttpConfig::default());
        let task = start(a, ALICE, 50)?;
        let ended = until(a, ALICE, &task, "completed")?;
        ensure(ended["result"]["result"]["content"][0]["text"] == "done 50", || format!("{ended}"))?;
        // B never ran it: the store answers, once A's write is in.
        let there = until(b, ALICE, &task, "completed")?;
        ensure(there["result"]["result"] == ended["result"]["result"], || format!("{there} vs {ended}"))?;
        ensure(there["result"]["resultType"] == "complete", || format!("{there}"))?;
        // Another caller, or a server with no store, knows nothing of it.
        let foreign = get(b, BOB, &task)?;
        ensure(foreign["error"]["code"] == -32602, || format!("another caller: {foreign}"))?;
        let unshared = get(lonely, ALICE, &task)?;
        ensure(unshared["error"]["code"] == -32602, || format!("no store: {unshared}"))
    });
}

#[test]
fn a_cancelled_task_stops_and_is_stored_cancelled() {
    each(|shim| {
        let store: Arc<dyn TaskStore> = Arc::new(InMemoryTaskStore::new(16));
        let a = serve(shim, build(shim, Some(store.clone())), HttpConfig::default());
        let b = serve(shim, build(shim, Some(store)), HttpConfig::default());
        let task = start(a, BOB, 60_000)?;
        let working = get(a, BOB, &task)?;
        ensure(working["result"]["status"] == "working", || format!("{working}"))?;
        // Cancelling is served by the engine that runs the task only.
        let elsewhere = send(b, BOB, &request(2, "tasks/cancel", json!({"taskId": task})))?;
        ensure(elsewhere["error"]["code"] == -32602, || format!("cancel on b: {elsewhere}"))?;
        let ack = send(a, BOB, &request(3, "tasks/cancel", json!({"taskId": task})))?;
        ensure(ack["result"] == json!({"resultType": "complete", "_meta": ack["result"]["_meta"]}), || {
            format!("ack: {ack}")
        })?;
        until(a, BOB, &task, "cancelled")?;
        until(b, BOB, &task, "cancelled").map(|_| ())
    });
}

fn start_job(addr: SocketAddr, from: IpAddr, id: u64, args: Value) -> Result<Value, String> {
    send(addr, from, &request(id, "tools/call", json!({"name": "job", "arguments": args})))
}

#[test]
fn a_caller_flooding_the_task_table_with_running_tasks_leaves_room_for_another() {
    each(|shim| {
        let addr = serve(
            shim,
            bounded(shim, None, |l| {
                l.max_tasks(8);
            }),
            HttpConfig::default(),
        );
        // Bob fills the whole table with tasks that never end (an hour each).
        let mut bobs = Vec::new();
        for id in 0..8 {
            let r = start_job(addr, BOB, id, json!({"ms": 3_600_000}))?;
            let task = r["result"]["taskId"].as_str().ok_or_else(|| format!("bob's task {id}: {r}"))?;
            bobs.push(task.to_owned());
        }
        let more = start_job(addr, BOB, 100, json!({"ms": 3_600_000}))?;
        ensure(more["error"]["code"] == -32600, || format!("bob past his share: {more}"))?;
        // Alice still gets hers, and it runs to the end; bob's newest gave way.
        let r = start_job(addr, ALICE, 1, json!({"ms": 10, "size": 3}))?;
        let task =
            r["result"]["taskId"].as_str().ok_or_else(|| format!("alice was refused: {r}"))?.to_owned();
        let done = until(addr, ALICE, &task, "completed")?;
        ensure(done["result"]["result"]["content"][0]["text"] == "xxx", || format!("{done}"))?;
        let gone = get(addr, BOB, &bobs[7])?;
        ensure(gone["error"]["code"] == -32602, || format!("bob's newest: {gone}"))?;
        let kept = get(addr, BOB, &bobs[0])?;
        ensure(kept["result"]["status"] == "working", || format!("bob's oldest: {kept}"))
    });
}

#[test]
fn a_task_result_past_the_byte_bound_ends_as_the_documented_failure() {
    each(|shim| {
        let addr = serve(
            shim,
            bounded(shim, None, |l| {
                l.max_task_result_bytes(4096);
            }),
            HttpConfig::default(),
        );
        let r = start_job(addr, ALICE, 1, json!({"size": 100_000}))?;
        let task = r["result"]["taskId"].as_str().ok_or_else(|| format!("no task: {r}"))?.to_owned();
        let failed = until(addr, ALICE, &task, "failed")?;
        let error = &failed["result"]["error"];
        ensure(error["code"] == -32603 && error["data"]["reason"] == "result_too_large", || {
            format!("{failed}")
        })?;
        ensure(error["data"]["limit"] == 4096, || format!("{failed}"))?;
        let small = start_job(addr, ALICE, 2, json!({"size": 10}))?;
        let task = small["result"]["taskId"].as_str().ok_or_else(|| format!("no task: {small}"))?.to_owned();
        until(addr, ALICE, &task, "completed").map(|_| ())
    });
}
