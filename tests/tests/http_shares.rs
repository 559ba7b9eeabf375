//! Per-caller shares of the global tables through both shims, over real loopback sockets: one
//! client (127.0.0.2) floods a table, another (127.0.0.1) must initialize and call a tool
//! successfully throughout. Linux loopback answers the whole of 127/8, so the two are told apart
//! by their peer address alone, as the server does when no middleware sets an identity.
//!
//! The tables are made small (8 sessions, 16 connections) so that a flood fills them quickly;
//! the rules scale with the bounds.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_proto::http::HttpConfig;
use mcp_proto::{Limits, Tool, ToolOutput};
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{each, ensure, poll_until, Client, Req, Response};
use serde_json::{json, Value};

type Outcome = mcp_tests::http::Outcome;

const FLOOD: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));

const VERSION: &str = "2025-11-25";
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"shares-test","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const CALL: &str =
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;

/// The session table's bound in these tests.
const SESSIONS: usize = 8;

/// A server with one tool, `echo`, and the limits `limits` sets.
fn build(limits: impl FnOnce(&mut Limits)) -> Server {
    let mut b = Server::builder("shares", "1.0.0");
    limits(&mut b.config_mut().limits);
    let echo = Tool::new(
        "echo",
        "Echoes text",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
    );
    b.tool(echo, |call: ToolCall| async move {
        ToolOutput::text(call.arguments.get("text").and_then(Value::as_str).unwrap_or_default().to_owned())
    })
    .build()
    .unwrap_or_else(|e| panic!("the test server is valid: {e}"))
}

fn connect(addr: SocketAddr, from: IpAddr) -> Result<Client, String> {
    Client::connect_from(addr, from).map_err(|e| format!("connect from {from}: {e}"))
}

fn in_session(req: Req, sid: &str) -> Req {
    req.header("Mcp-Session-Id", sid).header("MCP-Protocol-Version", VERSION)
}

fn describe(resp: &Response) -> String {
    format!("{} {}", resp.status(), String::from_utf8_lossy(&resp.body))
}

/// `initialize` from `from` on a connection of its own: the session id, or the refusal.
fn initialize(addr: SocketAddr, from: IpAddr) -> Result<Result<String, Response>, String> {
    let resp = connect(addr, from)?.request(&Req::post(INITIALIZE))?;
    match resp.header("mcp-session-id") {
        Some(sid) if resp.status() == 200 => Ok(Ok(sid.to_owned())),
        _ => Ok(Err(resp)),
    }
}

/// Finishes the handshake of `sid`.
fn initialized(addr: SocketAddr, from: IpAddr, sid: &str) -> Outcome {
    let resp = connect(addr, from)?.request(&in_session(Req::post(INITIALIZED), sid))?;
    ensure(resp.status() == 202, || format!("notifications/initialized: {}", describe(&resp)))
}

/// The status of a `tools/list` in `sid` (200 while it lives, 404 once it is gone).
fn list_status(addr: SocketAddr, from: IpAddr, sid: &str) -> Result<u16, String> {
    Ok(connect(addr, from)?.request(&in_session(Req::post(LIST), sid))?.status())
}

/// What the well-behaved client does: initialize, finish the handshake, call `echo`.
fn initialize_and_call(addr: SocketAddr, from: IpAddr) -> Result<String, String> {
    let sid = initialize(addr, from)?.map_err(|r| format!("initialize: {}", describe(&r)))?;
    initialized(addr, from, &sid)?;
    let resp = connect(addr, from)?.request(&in_session(Req::post(CALL), &sid))?;
    let body = resp.json()?;
    ensure(resp.status() == 200 && body["result"]["content"][0]["text"] == "hi", || {
        format!("tools/call: {}", describe(&resp))
    })?;
    Ok(sid)
}

/// 127.0.0.2 opens sessions (handshake and all) until it is refused, and keeps them; 127.0.0.1
/// then initializes and calls a tool, again and again while the flooder tries for more.
#[test]
fn a_session_flood_leaves_room_for_another_caller() {
    each(|shim| {
        let server = build(|l| {
            l.max_sessions(SESSIONS);
        });
        let addr = mcp_tests::http::serve(shim, server.clone(), HttpConfig::default());
        let mut flooded = Vec::new();
        let refusal = loop {
            match initialize(addr, FLOOD)? {
                Ok(sid) => {
                    initialized(addr, FLOOD, &sid)?;
                    flooded.push(sid);
                }
                Err(resp) => break resp,
            }
            ensure(flooded.len() <= SESSIONS, || format!("{} sessions past max_sessions", flooded.len()))?;
        };
        ensure(flooded.len() == SESSIONS && refusal.status() == 503, || {
            format!("the flooder got {} sessions, then {}", flooded.len(), describe(&refusal))
        })?;
        for round in 0..3 {
            initialize_and_call(addr, OTHER).map_err(|e| format!("round {round}: {e}"))?;
            match initialize(addr, FLOOD)? {
                Err(resp) if resp.status() == 503 => {}
                other => return Err(format!("round {round}: the flooder above its share got {other:?}")),
            }
        }
        // The flooder lost the places the other caller took (its least recently active
        // sessions) and kept the rest.
        let mut alive = 0;
        for sid in &flooded {
            alive += usize::from(list_status(addr, FLOOD, sid)? == 200);
        }
        ensure(alive == SESSIONS - 3, || format!("{shim:?}: the flooder kept {alive} sessions"))?;
        ensure(server.status().sessions == SESSIONS, || format!("status: {:?}", server.status()))
    });
}

/// 127.0.0.2 initializes without ever finishing the handshake, as fast as it can, from a
/// thread of its own; 127.0.0.1 initializes, finishes its handshake and calls a tool each time.
/// The flood displaces its own least recently active handshakes, never the other caller's.
#[test]
fn a_handshake_flood_displaces_its_own_stalest_handshakes() {
    each(|shim| {
        let server = build(|l| {
            l.max_sessions(SESSIONS).session_handshake(Duration::from_secs(60));
        });
        let addr = mcp_tests::http::serve(shim, server.clone(), HttpConfig::default());
        let mut first = Vec::new();
        for _ in 0..SESSIONS {
            first.push(initialize(addr, FLOOD)?.map_err(|r| format!("initialize: {}", describe(&r)))?);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (made, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let flood = {
            let (stop, made, refused) = (stop.clone(), made.clone(), refused.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match initialize(addr, FLOOD) {
                        Ok(Ok(_)) => made.fetch_add(1, Ordering::Relaxed),
                        _ => refused.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        };
        let outcome = (|| -> Outcome {
            for round in 0..10 {
                let sid = initialize_and_call(addr, OTHER).map_err(|e| format!("round {round}: {e}"))?;
                // A client done with its session ends it, or it would soon hold its share.
                let resp = connect(addr, OTHER)?.request(&in_session(Req::new("DELETE", "/mcp"), &sid))?;
                ensure(resp.status() == 200, || format!("round {round}: DELETE: {}", describe(&resp)))?;
            }
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        flood.join().map_err(|_| "the flood thread panicked".to_owned())?;
        outcome?;
        let (made, refused) = (made.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
        eprintln!("{shim:?}: the flood made {made} handshakes ({refused} refused) during 10 rounds");
        ensure(made > 0, || "the flood never got a handshake in".to_owned())?;
        // Its first handshakes, the least recently active, went first.
        for sid in &first {
            let status = list_status(addr, FLOOD, sid)?;
            ensure(status == 404, || format!("an early flood handshake still answers {status}"))?;
        }
        Ok(())
    });
}

/// Holds `count` connections from 127.0.0.2 that send half a request head and never finish
/// it, reconnecting each one the server cuts, until `stop`.
/// `opened` is raised once the first `count` are connected.
fn slow_heads(
    addr: SocketAddr,
    count: usize,
    opened: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    cuts: Arc<AtomicUsize>,
) -> Outcome {
    let half_head = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: appl";
    let open = || -> Result<Client, String> {
        let mut c = connect(addr, FLOOD)?;
        c.send(half_head).map_err(|e| format!("half a head: {e}"))?;
        Ok(c)
    };
    let mut held = (0..count).map(|_| open()).collect::<Result<Vec<_>, _>>()?;
    opened.store(true, Ordering::Relaxed);
    while !stop.load(Ordering::Relaxed) {
        for slot in &mut held {
            if slot.closed_within(Duration::from_millis(1)) {
                cuts.fetch_add(1, Ordering::Relaxed);
                *slot = open()?;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// 127.0.0.2 holds every connection the server serves with heads that never complete, and
/// reconnects each one as soon as it is cut; 127.0.0.1 initializes and calls a tool on every
/// one of its tries. That the other client got in by displacing slow heads, not through a place
/// left free, is read from the server's own counter: the flood thread's count of the cuts it saw
/// is only reported, since a thread starved on a loaded machine may see them after the test.
#[test]
fn slow_heads_leave_room_for_another_client() {
    const CONNECTIONS: usize = 16;
    const TRIES: usize = 30;
    each(|shim| {
        let server = build(|l| {
            // No slow head times out, however loaded the machine: a place comes free only
            // when one is displaced.
            l.max_http_connections(CONNECTIONS).header_read_timeout(Duration::from_secs(600));
        });
        let addr = mcp_tests::http::serve(shim, server.clone(), HttpConfig::default());
        let opened = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let cuts = Arc::new(AtomicUsize::new(0));
        let flood = {
            let (opened, stop, cuts) = (opened.clone(), stop.clone(), cuts.clone());
            std::thread::spawn(move || slow_heads(addr, CONNECTIONS, opened, stop, cuts))
        };
        // The flooder's connections are all in before the other client tries: it connected them
        // all, nothing else connected, and the server serves as many.
        let full =
            mcp_tests::http::poll_until("the flooder fills the server", Duration::from_secs(10), || {
                let all = opened.load(Ordering::Relaxed) && server.status().http_connections == CONNECTIONS;
                Ok(all.then_some(()))
            });
        let outcome = full.and_then(|()| {
            let mut failures = Vec::new();
            for n in 0..TRIES {
                if let Err(e) = initialize_and_call(addr, OTHER) {
                    failures.push(format!("try {n}: {e}"));
                }
            }
            ensure(failures.is_empty(), || {
                format!("{} of {TRIES} tries failed: {}", failures.len(), failures.join("; "))
            })
        });
        stop.store(true, Ordering::Relaxed);
        let flooded = flood.join().map_err(|_| "the flood thread panicked".to_owned())?;
        outcome?;
        flooded?;
        let displaced = server.status().http_refusals.displaced;
        let cuts = cuts.load(Ordering::Relaxed);
        eprintln!(
            "{shim:?}: {displaced} slow heads displaced; the flooder saw {cuts} of its connections closed"
        );
        ensure(displaced > 0, || {
            "no slow head was ever displaced: the flood did not fill the server".to_owned()
        })
    });
}

/// Resumable `POST` streams of legacy sessions, bounded in total
/// ([`Limits::max_resume_bytes`]): 127.0.0.2 drops a stream whose call sends hundreds of
/// progress events; 127.0.0.1 drops one whose call sends five. The flooder's stream keeps only
/// its newest events, within the total, and the other caller, below its share, resumes with
/// every event and the response.
#[test]
fn resumable_streams_are_bounded_in_total_and_another_callers_stream_keeps_its_events() {
    use std::collections::HashMap;
    use std::sync::Mutex;

    const TOTAL: usize = 16 * 1024;
    each(|shim| {
        let sent = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
        let gates = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
        let mut b = Server::builder("resume", "1.0.0");
        b.config_mut()
            .limits
            .progress_interval(Duration::ZERO)
            .replay_events(100_000)
            .replay_bytes(1 << 20)
            .resume_window(Duration::from_secs(600))
            .max_resume_bytes(TOTAL);
        let chatty =
            Tool::new("chatty", "Sends progress, then waits for its gate", json!({"type": "object"}));
        let (counts, waits) = (sent.clone(), gates.clone());
        let server = b
            .tool(chatty, move |call: ToolCall| {
                let (counts, waits) = (counts.clone(), waits.clone());
                async move {
                    let n = call.arguments.get("n").and_then(Value::as_u64).unwrap_or(0);
                    let rounds = call.arguments.get("rounds").and_then(Value::as_u64).unwrap_or(1);
                    let gate =
                        call.arguments.get("gate").and_then(Value::as_str).unwrap_or_default().to_owned();
                    let padding = "x".repeat(200);
                    let mut step = 0.0;
                    for round in 0..rounds {
                        for _ in 0..n {
                            step += 1.0;
                            // Until the server sees the client go, the burst may fill the
                            // stream's queue (a loaded machine drains it late): such an update is
                            // dropped, not kept, so it is sent again until the stream is kept for
                            // resuming, so that the flooder always records its whole burst.
                            let mut outcome = call.ctx.progress(step, None, Some(&padding));
                            while outcome == mcp_proto::ProgressOutcome::Dropped {
                                call.ctx.sleep(Duration::from_millis(2)).await;
                                outcome = call.ctx.progress(step, None, Some(&padding));
                            }
                            let sent = outcome == mcp_proto::ProgressOutcome::Sent;
                            *counts.lock().unwrap().entry(gate.clone()).or_default() += usize::from(sent);
                        }
                        *counts.lock().unwrap().entry(format!("{gate}-rounds")).or_default() += 1;
                        while waits.lock().unwrap().get(&gate).copied().unwrap_or(0) <= round as usize {
                            call.ctx.sleep(Duration::from_millis(5)).await;
                        }
                    }
                    ToolOutput::text("done")
                }
            })
            .build()
            .unwrap_or_else(|e| panic!("the test server is valid: {e}"));
        let addr = mcp_tests::http::serve(shim, server.clone(), HttpConfig::default());
        let open = |from: IpAddr, gate: &str, n: u64, rounds: u64| -> Result<(String, String), String> {
            let sid = initialize(addr, from)?.map_err(|r| format!("initialize: {}", describe(&r)))?;
            initialized(addr, from, &sid)?;
            let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "chatty", "arguments": {"n": n, "rounds": rounds, "gate": gate},
                "_meta": {"progressToken": gate}}});
            let mut c = connect(addr, from)?;
            c.send(&in_session(Req::post(body.to_string()), &sid).to_bytes()).map_err(|e| e.to_string())?;
            let head = c.head()?;
            ensure(head.status == 200, || format!("tools/call: {}", head.status))?;
            let prime = c.event()?.ok_or("no priming event")?;
            let id = prime.lines().find_map(|l| l.strip_prefix("id: ")).ok_or("priming without id")?;
            // The client drops the stream here; the call goes on.
            Ok((sid, id.to_owned()))
        };
        let rounds_done = |gate: &str, n: usize| {
            poll_until(&format!("{gate} round {n}"), Duration::from_secs(30), || {
                Ok((sent.lock().unwrap().get(&format!("{gate}-rounds")).copied().unwrap_or(0) >= n)
                    .then_some(()))
            })
        };
        let open_gate = |gate: &str| *gates.lock().unwrap().entry(gate.to_owned()).or_default() += 1;
        // Resumes `sid` after `last`: the events before the response, then the response.
        let resume =
            |from: IpAddr, sid: &str, last: &str, gate: &str| -> Result<(Vec<String>, Value), String> {
                let mut c = connect(addr, from)?;
                let req = in_session(Req::new("GET", "/mcp"), sid)
                    .header("Accept", "text/event-stream")
                    .header("Last-Event-ID", last);
                c.send(&req.to_bytes()).map_err(|e| e.to_string())?;
                let head = c.head()?;
                ensure(head.status == 200, || format!("resume: {}", head.status))?;
                let mut before = Vec::new();
                let mut opened = false;
                while let Some(event) = c.event()? {
                    let Some(data) = mcp_tests::http::event_data(&event) else { continue };
                    if data.get("result").is_some() {
                        return Ok((before, data));
                    }
                    before.push(event);
                    // Everything kept has come once the call's next event would be new: let it end.
                    if !opened {
                        opened = true;
                        open_gate(gate);
                    }
                }
                Err(format!("the resumed stream ended without a response after {} events", before.len()))
            };
        let (fsid, fprime) = open(FLOOD, "flood", 400, 2)?;
        rounds_done("flood", 1)?;
        let (osid, oprime) = open(OTHER, "other", 5, 1)?;
        rounds_done("other", 1)?;
        // The flooder, over its share, records as much again after the other caller's events.
        open_gate("flood");
        rounds_done("flood", 2)?;
        let (theirs, answer) = resume(OTHER, &osid, &oprime, "other")?;
        let progress = theirs.iter().filter(|e| e.contains("notifications/progress")).count();
        ensure(progress == 5 && answer["result"]["content"][0]["text"] == "done", || {
            format!("the other caller resumed {progress} of its 5 progress events, then {answer}")
        })?;
        let (flooded, answer) = resume(FLOOD, &fsid, &fprime, "flood")?;
        let sent_by_flood = sent.lock().unwrap().get("flood").copied().unwrap_or(0);
        let kept: usize = flooded.iter().map(|e| e.len()).sum();
        ensure(sent_by_flood > 2 * TOTAL / 300 && flooded.len() < sent_by_flood && kept <= TOTAL, || {
            format!("the flooder sent {sent_by_flood} events and resumed {} ({kept} bytes)", flooded.len())
        })?;
        ensure(answer["result"]["content"][0]["text"] == "done", || format!("flooder's response: {answer}"))
    });
}
