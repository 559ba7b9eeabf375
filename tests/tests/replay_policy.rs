//! Policy on replays and the continuation epoch, through both shims over real loopback HTTP.
//!
//! - A copy of a used 2026-07-28 `requestState` is answered from the replay ledger only after
//!   every check a fresh round runs: a caller whose access was revoked gets the refusal a fresh
//!   round gets, and a copy without the capability the recorded prompt needs gets `-32021`
//!   (seed 000: "each resume rechecks policy"; "capability withdrawal is respected on replay").
//! - `Server::move_epoch` moves the continuation epoch for every replica of a cluster: a state
//!   sealed before is refused on each; `Server::shutdown` moves the server's own epoch.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_proto::http::HttpConfig;
use mcp_proto::interaction::InputRequest;
use mcp_proto::{AskError, Gate, HandlerError, Tool, ToolOutput};
use mcp_server::{Cluster, InMemoryCluster, Server, ServerBuilder, ToolCall};
use mcp_tests::http::{block_on, each, ensure, poll_until, serve, Client, Req};
use serde_json::{json, Value};

/// A server whose `charge` tool asks for a confirmation, then asks again (`receipt?`) and counts
/// the runs that got past the first question; `open` is its gate.
fn builder(runs: Arc<AtomicUsize>, open: Arc<AtomicBool>) -> ServerBuilder {
    let gate = Gate::new(move |_| open.load(Ordering::SeqCst));
    Server::builder("replay-policy", "1")
        .tool(Tool::new("other", "Ungated", json!({"type": "object"})), |_: ToolCall| async {
            ToolOutput::text("other")
        })
        .tool(
            Tool::new("charge", "Charges once confirmed", json!({"type": "object"})).gate(gate),
            move |call: ToolCall| {
                let runs = runs.clone();
                async move {
                    let form = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
                    let ask = |q: &str| {
                        InputRequest::elicit(q, form.clone())
                            .map_err(|e| HandlerError::private(e.to_string()))
                    };
                    match call.ctx.ask_one("confirm", ask("Charge?")?).await {
                        Ok(_) => {}
                        Err(AskError::Suspended) => return Err(HandlerError::Cancelled),
                        Err(e) => return Err(e.into()),
                    }
                    runs.fetch_add(1, Ordering::SeqCst);
                    match call.ctx.ask_one("receipt", ask("Receipt?")?).await {
                        Err(AskError::Suspended) => Err(HandlerError::Cancelled),
                        Ok(_) => Ok(ToolOutput::text("charged")),
                        Err(e) => Err(e.into()),
                    }
                }
            },
        )
}

/// A 2026-07-28 `tools/call` of `charge` with client capabilities `caps` and `extra` params.
fn call(id: u64, caps: Value, extra: Value) -> Req {
    let mut params = json!({"name": "charge", "arguments": {"amount": 5},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps}});
    if let (Some(p), Value::Object(extra)) = (params.as_object_mut(), extra) {
        p.extend(extra);
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    Req::post(body.to_string())
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "charge")
        .header("Accept", "application/json, text/event-stream")
}

fn send(addr: SocketAddr, req: &Req) -> Result<Value, String> {
    let mut client = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    client.request(req)?.json()
}

fn elicitation() -> Value {
    json!({"elicitation": {}})
}

/// Round 1 on `addr`: the state it issued.
fn first_state(addr: SocketAddr) -> Result<String, String> {
    let first = send(addr, &call(1, elicitation(), json!({})))?;
    ensure(first["result"]["resultType"] == "input_required", || format!("round 1: {first}"))?;
    first["result"]["requestState"].as_str().map(str::to_owned).ok_or_else(|| format!("no state: {first}"))
}

/// The retry that answers round 1's question with `state`.
fn retry(id: u64, caps: Value, state: &str) -> Req {
    call(
        id,
        caps,
        json!({"requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}}),
    )
}

/// The same answer under another id.
fn same(mut a: Value, b: &Value) -> bool {
    a["id"] = b["id"].clone();
    &a == b
}

#[test]
fn a_copy_of_a_used_state_is_refused_once_policy_or_capabilities_refuse_it() {
    each(|shim| {
        let (runs, open) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(true)));
        let server = builder(runs.clone(), open.clone()).build().map_err(|e| e.to_string())?;
        let addr = serve(shim, server, HttpConfig::default());
        let state = first_state(addr)?;
        let recorded = send(addr, &retry(2, elicitation(), &state))?;
        ensure(recorded["result"]["resultType"] == "input_required", || format!("retry: {recorded}"))?;
        // A copy without the elicitation capability: the -32021 a fresh round gets.
        let bare = send(addr, &retry(3, json!({}), &state))?;
        ensure(bare["error"]["code"] == -32021, || format!("a copy without elicitation: {bare}"))?;
        // The caller loses the tool: its copy is answered as for an unknown tool.
        open.store(false, Ordering::SeqCst);
        let revoked = send(addr, &retry(4, elicitation(), &state))?;
        ensure(revoked["error"]["message"] == "unknown tool: charge", || format!("revoked: {revoked}"))?;
        // Let in again, with the capability: the recorded prompt, and the handler ran once.
        open.store(true, Ordering::SeqCst);
        let again = send(addr, &retry(5, elicitation(), &state))?;
        ensure(same(again.clone(), &recorded), || format!("{again} vs {recorded}"))?;
        ensure(runs.load(Ordering::SeqCst) == 1, || format!("runs: {}", runs.load(Ordering::SeqCst)))
    });
}

fn replica(cluster: &Arc<InMemoryCluster>, name: &str) -> ServerBuilder {
    builder(Arc::default(), Arc::new(AtomicBool::new(true)))
        .cluster(cluster.clone() as Arc<dyn Cluster>, name)
}

#[test]
fn moving_the_epoch_on_one_replica_refuses_older_states_on_every_replica() {
    each(|shim| {
        let cluster = Arc::new(InMemoryCluster::default());
        let a = block_on(shim, replica(&cluster, "a").join()).map_err(|e| e.to_string())?;
        let b = block_on(shim, replica(&cluster, "b").join()).map_err(|e| e.to_string())?;
        let (a_addr, b_addr) =
            (serve(shim, a.clone(), HttpConfig::default()), serve(shim, b.clone(), HttpConfig::default()));
        let (old_a, old_b) = (first_state(a_addr)?, first_state(a_addr)?);
        let moved = block_on(shim, a.move_epoch()).map_err(|e| e.to_string())?;
        ensure(moved == 1 && a.epoch() == 1, || format!("a moved to {moved}, holds {}", a.epoch()))?;
        poll_until("b in epoch 1", Duration::from_secs(10), || Ok((b.epoch() == 1).then_some(())))?;
        for (addr, state) in [(a_addr, &old_a), (b_addr, &old_b)] {
            let r = send(addr, &retry(2, elicitation(), state))?;
            ensure(r["error"]["data"]["reason"] == "epoch", || format!("an old state on {addr}: {r}"))?;
        }
        // A state sealed in the new epoch goes on anywhere, and a replica joining now takes it.
        let fresh = first_state(b_addr)?;
        let on_a = send(a_addr, &retry(3, elicitation(), &fresh))?;
        ensure(on_a["result"]["resultType"] == "input_required", || format!("a new state on a: {on_a}"))?;
        let c = block_on(shim, replica(&cluster, "c").join()).map_err(|e| e.to_string())?;
        ensure(c.epoch() == 1, || format!("c joined in epoch {}", c.epoch()))?;
        // Outside a cluster the epoch moves here only.
        let alone =
            builder(Arc::default(), Arc::new(AtomicBool::new(true))).build().map_err(|e| e.to_string())?;
        let next = block_on(shim, alone.move_epoch()).map_err(|e| e.to_string())?;
        ensure(next == 1 && b.epoch() == 1, || format!("alone moved to {next}; b holds {}", b.epoch()))
    });
}

#[test]
fn shutdown_moves_the_servers_own_epoch() {
    each(|shim| {
        let cluster = Arc::new(InMemoryCluster::default());
        let a = block_on(shim, replica(&cluster, "a").join()).map_err(|e| e.to_string())?;
        let b = block_on(shim, replica(&cluster, "b").join()).map_err(|e| e.to_string())?;
        let _ = serve(shim, a.clone(), HttpConfig::default());
        block_on(shim, a.shutdown(Duration::from_secs(1)));
        ensure(a.epoch() == 1, || format!("after shutdown a holds epoch {}", a.epoch()))?;
        // Only its own: a rolling restart ends no other replica's dialogues.
        std::thread::sleep(Duration::from_millis(50));
        ensure(b.epoch() == 0, || format!("b holds epoch {}", b.epoch()))
    });
}
