//! Blocking tools (`ServerBuilder::blocking_tool`) run on the runtime's blocking pool, so calls
//! that block do not starve the connections: on both runtimes, over real sockets, while four
//! calls sit blocked in their closures (more than tokio's two test workers and smol's single
//! executor thread), other clients are answered. A cancelled call is answered at once even
//! though its closure cannot be interrupted. Nothing here is timed: the blocked closures cannot
//! return before the test opens their gate, so the other client being served at all is the proof.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use mcp_proto::http::HttpConfig;
use mcp_proto::{Tool, ToolOutput};
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{each, ensure, modern, poll_until, serve, serve_watched, Client, TIMEOUT};
use serde_json::json;

/// Calls held at once: more than the threads that run tasks on either runtime under test.
const HELD: u64 = 4;

/// A gate the blocked closures wait at (a plain std `Condvar`: they block their thread).
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    /// Closures that reached the gate.
    waiting: AtomicUsize,
}

impl Gate {
    /// Blocks until the gate opens (or, so that a failing test still ends, for [`TIMEOUT`]).
    fn pass(&self) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let (open, _) =
            self.opened.wait_timeout_while(open, TIMEOUT, |open| !*open).unwrap_or_else(|p| p.into_inner());
        *open
    }

    fn open(&self) {
        *self.open.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.opened.notify_all();
    }
}

fn connect(addr: std::net::SocketAddr) -> Result<Client, String> {
    Client::connect(addr).map_err(|e| format!("connect: {e}"))
}

#[test]
fn blocked_calls_starve_no_other_client() {
    each(|shim| {
        let gate = Arc::new(Gate::default());
        let held = gate.clone();
        let server = Server::builder("blocking", "1")
            .blocking_tool(
                Tool::new(
                    "hold",
                    "Blocks its thread until the test opens the gate",
                    json!({"type": "object"}),
                ),
                move |_: ToolCall| {
                    if held.pass() {
                        ToolOutput::text("released")
                    } else {
                        ToolOutput::error("the gate never opened")
                    }
                },
            )
            .tool(Tool::new("echo", "Echoes", json!({"type": "object"})), |call: ToolCall| async move {
                ToolOutput::text(call.arguments["text"].as_str().unwrap_or_default().to_owned())
            })
            .build()
            .map_err(|e| e.to_string())?;
        let addr = serve(shim, server.clone(), HttpConfig::default());

        let mut holders = Vec::new();
        for id in 1..=HELD {
            let mut holder = connect(addr)?;
            let hold = modern(id, "tools/call", json!({"name": "hold", "arguments": {}}));
            holder.send(&hold.to_bytes()).map_err(|e| e.to_string())?;
            holders.push(holder);
        }
        poll_until("every held call blocks its thread", TIMEOUT, || {
            Ok((gate.waiting.load(Ordering::SeqCst) == HELD as usize).then_some(()))
        })?;

        let mut other = connect(addr)?;
        let list = other.request(&modern(10, "tools/list", json!({})))?;
        ensure(list.json()?["result"]["tools"].is_array(), || "tools/list beside blocked calls".to_owned())?;
        let echo =
            other.request(&modern(11, "tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})))?;
        ensure(echo.json()?["result"]["content"][0]["text"] == "hi", || {
            "echo beside blocked calls".to_owned()
        })?;

        // A client that goes away cancels its call (2026-07-28): the engine forgets it at once,
        // though its closure is still blocked, and its late answer goes nowhere.
        drop(holders.remove(0));
        poll_until("the abandoned call is cancelled", TIMEOUT, || {
            Ok((server.status().in_flight == HELD as usize - 1).then_some(()))
        })?;
        ensure(gate.waiting.load(Ordering::SeqCst) == HELD as usize, || {
            "a closure returned early".to_owned()
        })?;

        gate.open();
        for mut holder in holders {
            let resp = holder.response()?;
            ensure(resp.json()?["result"]["content"][0]["text"] == "released", || {
                format!("a held call: {}", String::from_utf8_lossy(&resp.body))
            })?;
        }
        poll_until("nothing is left running", Duration::from_secs(5), || {
            let status = server.status();
            Ok((status.in_flight == 0 && status.running_handlers == 0).then_some(()))
        })
    });
}

/// A panic in a blocking closure is the generic internal error, as in an async handler, and
/// the typed flavour deserializes its arguments before calling the closure.
#[test]
fn blocking_panics_and_typed_arguments() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Twice {
        n: u32,
    }
    each(|shim| {
        let server = Server::builder("blocking", "1")
            .blocking_tool(
                Tool::new("panic", "Panics", json!({"type": "object"})),
                |_: ToolCall| -> ToolOutput { panic!("a blocking handler panicked") },
            )
            .blocking_typed_tool("twice", "Doubles n", |a: Twice, _: ToolCall| {
                ToolOutput::text((u64::from(a.n) * 2).to_string())
            })
            .build()
            .map_err(|e| e.to_string())?;
        let addr = serve(shim, server, HttpConfig::default());
        let mut client = connect(addr)?;
        let resp = client.request(&modern(1, "tools/call", json!({"name": "panic", "arguments": {}})))?;
        let reply = resp.json()?;
        ensure(reply["error"]["code"] == -32603, || format!("panic: {reply}"))?;
        let resp =
            client.request(&modern(2, "tools/call", json!({"name": "twice", "arguments": {"n": 21}})))?;
        let reply = resp.json()?;
        ensure(reply["result"]["content"][0]["text"] == "42", || format!("twice: {reply}"))
    });
}

/// Shutdown and blocking closures (seed 000, Hosting: "a timeout returns cleanup_failed"):
/// a call cancelled at the end of the budget leaves its closure running, which the report
/// counts in `cleanup_failed` and `Status::blocking_handlers` goes on counting until it
/// returns; a closure whose call the client abandoned before is waited for within the budget,
/// and a shutdown that saw it return is clean.
#[test]
fn shutdown_reports_blocking_closures_it_could_not_wait_for() {
    each(|shim| {
        let gate = Arc::new(Gate::default());
        let build = |held: Arc<Gate>| {
            Server::builder("blocking", "1")
                .blocking_tool(
                    Tool::new("hold", "Blocks until the test opens the gate", json!({"type": "object"})),
                    move |_: ToolCall| {
                        held.pass();
                        ToolOutput::text("released")
                    },
                )
                .build()
                .map_err(|e| e.to_string())
        };
        // A server whose one call blocks at `gate`: the server and the client holding the call.
        let blocked = |gate: &Arc<Gate>| -> Result<(Server, Client), String> {
            let server = build(gate.clone())?;
            // Its runtime outlives the listener, as an application's does while it shuts down.
            let (addr, _served) = serve_watched(shim, server.clone(), HttpConfig::default());
            let mut holder = connect(addr)?;
            holder
                .send(&modern(1, "tools/call", json!({"name": "hold"})).to_bytes())
                .map_err(|e| e.to_string())?;
            poll_until("the call blocks its thread", TIMEOUT, || {
                Ok((gate.waiting.load(Ordering::SeqCst) == 1).then_some(()))
            })?;
            Ok((server, holder))
        };
        let (server, _holder) = blocked(&gate)?;
        let report = mcp_tests::http::block_on(shim, server.shutdown(Duration::from_millis(50)));
        ensure(report.cancelled == 1 && report.cleanup_failed == 1 && !report.is_clean(), || {
            format!("{report:?}")
        })?;
        ensure(server.status().blocking_handlers == 1, || format!("{:?}", server.status()))?;
        gate.open();
        poll_until("the closure returns", TIMEOUT, || {
            Ok((server.status().blocking_handlers == 0).then_some(()))
        })?;

        // The client goes away first: nothing is in flight, but the closure runs on, and
        // shutdown waits for it (the budget is long; the gate opens while it waits).
        let gate = Arc::new(Gate::default());
        let (server, holder) = blocked(&gate)?;
        drop(holder);
        poll_until("the abandoned call is cancelled", TIMEOUT, || {
            Ok((server.status().in_flight == 0).then_some(()))
        })?;
        let opener = {
            let (gate, server) = (gate.clone(), server.clone());
            std::thread::spawn(move || {
                // Opens only once shutdown has begun waiting.
                while !server.status().shutting_down {
                    std::thread::sleep(Duration::from_millis(5));
                }
                gate.open();
            })
        };
        let report = mcp_tests::http::block_on(shim, server.shutdown(TIMEOUT));
        let _ = opener.join();
        ensure(report.is_clean(), || format!("the closure returned within the budget: {report:?}"))?;
        ensure(server.status().blocking_handlers == 0, || format!("{:?}", server.status()))
    });
}
