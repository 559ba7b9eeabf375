use super::*;
use crate::caller::Gate;
use crate::content::{HandlerError, ToolOutput};
use crate::cursor::KeyRing;
use crate::engine::{Config, Implementation, Invocation, ProgressOutcome, Reply, Seed, Stale};
use crate::http::{check_head, HttpConfig};
use crate::limits::Limits;
use crate::registry::Tool;
use serde_json::json;
use std::time::Duration;

struct Rig {
    engine: Engine<u32>,
    now: Instant,
}

struct Resp {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}})
}

impl Rig {
    fn new(limits: impl FnOnce(&mut Limits)) -> Self {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([7; 32]));
        limits(&mut config.limits);
        config.seed = Some(Seed([9; 32]));
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut engine = Engine::new(config, now);
        let tool = Tool::new("echo", "Echoes", json!({"type": "object"}));
        engine.registry_mut(now).add_tool(tool, 1).unwrap();
        Self { engine, now }
    }

    fn request(
        &mut self,
        method: &str,
        headers: &[(&'static str, &str)],
        body: &str,
        caller: Caller,
    ) -> HttpReply {
        let mut all: Vec<(&str, &[u8])> = vec![("Host", b"localhost:3000")];
        let own_accept = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("accept"));
        if method == "POST" {
            all.push(("Content-Type", b"application/json"));
            if !own_accept {
                all.push(("Accept", b"application/json, text/event-stream"));
            }
        } else if method == "GET" {
            all.push(("Accept", b"text/event-stream"));
        }
        all.extend(headers.iter().map(|(k, v)| (*k, v.as_bytes())));
        let head = RequestHead { method, path: "/mcp", headers: &all };
        let route = check_head(&HttpConfig::default(), &crate::limits::Limits::default(), &head).unwrap();
        let req = HttpRequest { head: &head, route, body: body.as_bytes(), caller };
        self.engine.handle_http(self.now, req)
    }

    fn post(&mut self, headers: &[(&'static str, &str)], body: &str) -> HttpReply {
        self.request("POST", headers, body, Caller::anonymous())
    }

    fn full(reply: HttpReply) -> Resp {
        match reply {
            HttpReply::Full { head, body } => Resp { status: head.status, headers: head.headers, body },
            HttpReply::Pending(c) => panic!("pending {c:?}"),
        }
    }

    fn session(&mut self) -> String {
        let r = Self::full(self.post(&[], INIT));
        assert_eq!(r.status, 200);
        let sid = r.header("Mcp-Session-Id").unwrap().to_owned();
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let r = Self::full(self.post(&[("Mcp-Session-Id", &sid)], note));
        assert_eq!(r.status, 202);
        assert!(r.body.is_empty());
        sid
    }

    fn drain(&mut self) -> Vec<Output<u32>> {
        std::iter::from_fn(|| self.engine.poll_output()).collect()
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        self.engine.handle_timeout(self.now);
    }
}

fn call(id: u32, tool: &str, meta: Option<Value>) -> String {
    let mut params = json!({"name": tool, "arguments": {}});
    if let Some(m) = meta {
        params["_meta"] = m;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

fn frames_text(outs: &[Output<u32>], conn: ConnId) -> String {
    outs.iter()
        .filter_map(|o| match o {
            Output::Frame { conn: c, bytes } if *c == conn => {
                Some(String::from_utf8_lossy(bytes).into_owned())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn legacy_session_lifecycle() {
    let mut rig = Rig::new(|_| {});
    let sid = rig.session();
    assert_eq!(rig.engine.status().sessions, 1);
    // An answer the engine knows at once comes back without a trip through the queue.
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let r = Rig::full(rig.post(&[("Mcp-Session-Id", &sid), ("MCP-Protocol-Version", "2025-11-25")], list));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(r.json()["result"]["tools"][0]["name"], "echo");
    // 2025-03-26 is accepted on any session; another mismatching version is not.
    let r = Rig::full(rig.post(&[("Mcp-Session-Id", &sid), ("MCP-Protocol-Version", "2025-03-26")], list));
    assert_eq!(r.status, 200);
    let r = Rig::full(rig.post(&[("Mcp-Session-Id", &sid), ("MCP-Protocol-Version", "2025-06-18")], list));
    assert_eq!(r.status, 400);
    // No session id, an unknown one, or someone else's: 400, 404, 404.
    assert_eq!(Rig::full(rig.post(&[], list)).status, 400);
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", "nope")], list)).status, 404);
    let other = Caller::identified("mallory");
    let r = Rig::full(rig.request("POST", &[("Mcp-Session-Id", &sid)], list, other));
    assert_eq!(r.status, 404);
    // DELETE ends it.
    let r = Rig::full(rig.request("DELETE", &[("Mcp-Session-Id", &sid)], "", Caller::anonymous()));
    assert_eq!(r.status, 200);
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", &sid)], list)).status, 404);
    assert_eq!(rig.engine.status().sessions, 0);
    rig.drain();
    assert_eq!(rig.engine.status().connections, 0);
}

#[test]
fn failed_initialize_leaves_no_session() {
    let mut rig = Rig::new(|_| {});
    let bad = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
    let r = Rig::full(rig.post(&[], bad));
    assert!(r.header("Mcp-Session-Id").is_none());
    assert_eq!(r.json()["error"]["code"], -32602);
    assert_eq!(rig.engine.status().sessions, 0);
    assert_eq!(rig.engine.status().connections, 0);
}

#[test]
fn calls_answer_as_json_unless_something_comes_first() {
    let mut rig = Rig::new(|_| {});
    let sid = rig.session();
    let HttpReply::Pending(ex) = rig.post(&[("Mcp-Session-Id", &sid)], &call(3, "echo", None)) else {
        panic!("expected pending")
    };
    let outs = rig.drain();
    let Some(Output::Invoke(inv)) = outs.into_iter().next() else { panic!("no invoke") };
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("hi")))).unwrap();
    let outs = rig.drain();
    match outs.as_slice() {
        [Output::Respond { conn, head, body }] => {
            assert_eq!(*conn, ex);
            assert_eq!(head.status, 200);
            let v: Value = serde_json::from_slice(body).unwrap();
            assert_eq!(v["result"]["content"][0]["text"], "hi");
        }
        other => panic!("{other:?}"),
    }
    // With progress, the answer turns into a stream: priming event first (2025-11-25), then
    // the notification and the result, then the end.
    let meta = json!({"progressToken": "p"});
    let HttpReply::Pending(ex) = rig.post(&[("Mcp-Session-Id", &sid)], &call(4, "echo", Some(meta))) else {
        panic!("expected pending")
    };
    let Some(Output::Invoke(inv)) = rig.drain().into_iter().next() else { panic!("no invoke") };
    rig.engine.progress(rig.now, inv.ticket.call(), 1.into(), None, None).unwrap();
    let mut outs = rig.drain();
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("done")))).unwrap();
    outs.extend(rig.drain());
    assert!(matches!(outs.first(), Some(Output::Stream { conn, head }) if *conn == ex && head.status == 200));
    let text = frames_text(&outs, ex);
    let stream =
        text.strip_prefix("id: ").and_then(|t| t.split_once("-0\nretry: 3000\ndata:\n\n")).unwrap().0;
    assert!(
        text.contains(&format!(
            "id: {stream}-1\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\""
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("id: {stream}-2\ndata: {{\"jsonrpc\":\"2.0\",\"id\":4,\"result\"")),
        "{text}"
    );
    assert!(
        matches!(outs.last(), Some(Output::Close { conn, reason: CloseReason::EndOfInput }) if *conn == ex)
    );
}

#[test]
fn cancelled_call_ends_its_exchange() {
    let mut rig = Rig::new(|_| {});
    let sid = rig.session();
    let HttpReply::Pending(ex) = rig.post(&[("Mcp-Session-Id", &sid)], &call(5, "echo", None)) else {
        panic!("expected pending")
    };
    rig.drain();
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#;
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", &sid)], cancel)).status, 202);
    let outs = rig.drain();
    assert!(outs.iter().any(|o| matches!(o, Output::Cancel { .. })));
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::Respond { conn, head, .. } if *conn == ex && head.status == 204)));
    // Deleting a session with a call in flight ends that call's exchange too.
    let HttpReply::Pending(ex) = rig.post(&[("Mcp-Session-Id", &sid)], &call(6, "echo", None)) else {
        panic!("expected pending")
    };
    rig.drain();
    rig.request("DELETE", &[("Mcp-Session-Id", &sid)], "", Caller::anonymous());
    let outs = rig.drain();
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::Respond { conn, head, .. } if *conn == ex && head.status == 204)));
}

#[test]
fn get_stream_carries_notifications_and_resumes() {
    let mut rig = Rig::new(|_| {});
    let sid = rig.session();
    // A change while no stream is open is kept for the stream.
    rig.engine.registry_mut(rig.now).add_tool(Tool::new("two", "Two", json!({"type": "object"})), 2).unwrap();
    rig.drain();
    let HttpReply::Pending(get) = rig.request("GET", &[("Mcp-Session-Id", &sid)], "", Caller::anonymous())
    else {
        panic!("expected a stream")
    };
    let outs = rig.drain();
    assert!(matches!(outs.first(), Some(Output::Stream { .. })));
    let text = frames_text(&outs, get);
    assert!(text.starts_with("id: 0-0\nretry: 3000\ndata:\n\n"), "{text}");
    assert!(
        text.contains("id: 0-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}")
    );
    assert_eq!(rig.engine.status().streams, 1);
    rig.engine.registry_mut(rig.now).remove_tool("two");
    let text = frames_text(&rig.drain(), get);
    assert!(text.starts_with("id: 0-2\n"), "{text}");
    // The client reconnects having seen 0-1: it is replayed 0-2, and the old stream closes.
    let HttpReply::Pending(again) =
        rig.request("GET", &[("Mcp-Session-Id", &sid), ("Last-Event-ID", "0-1")], "", Caller::anonymous())
    else {
        panic!("expected a stream")
    };
    let outs = rig.drain();
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::Close { conn, reason: CloseReason::Replaced } if *conn == get)));
    let text = frames_text(&outs, again);
    assert!(
        text.starts_with(
            "id: 0-2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}"
        ),
        "{text}"
    );
    assert_eq!(rig.engine.status().streams, 1);
    // Keep-alives re-check the gate: a revoked caller's stream closes.
    rig.advance(Duration::from_secs(15));
    assert!(frames_text(&rig.drain(), again).contains(": keep-alive"));
    rig.engine.registry_mut(rig.now).set_gate(Some(Gate::identified()));
    rig.drain();
    rig.advance(Duration::from_secs(15));
    let outs = rig.drain();
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::Close { conn, reason: CloseReason::Revoked } if *conn == again)));
    assert_eq!(rig.engine.status().streams, 0);
    // And a caller the server-wide gate refuses cannot open one.
    let r = Rig::full(rig.request("GET", &[("Mcp-Session-Id", &sid)], "", Caller::anonymous()));
    assert_eq!(r.status, 403);
}

#[test]
fn a_call_deadline_fires_before_a_session_timer_due_in_the_same_step() {
    // Timers fire calls first, then HTTP timers, each in time order. Here the session's idle
    // check falls due (at 10 s) before the call's deadline (at 20 s), but one step handles both:
    // the call times out first, so the session is idle when its timer looks and expires. Firing
    // in time order instead would find the call still running and keep the session.
    let mut rig = Rig::new(|l| {
        l.session_idle(Duration::from_secs(10)).session_handshake(Duration::from_secs(10));
    });
    rig.engine.config.limits.call_timeout(Some(Duration::from_secs(20)));
    let sid = rig.session();
    let HttpReply::Pending(ex) = rig.post(&[("Mcp-Session-Id", &sid)], &call(3, "echo", None)) else {
        panic!("expected pending")
    };
    rig.drain();
    rig.advance(Duration::from_secs(25));
    let outs = rig.drain();
    assert!(outs.iter().any(|o| matches!(o, Output::Cancel { .. })));
    assert!(outs.iter().any(|o| matches!(o, Output::Respond { conn, .. } if *conn == ex)));
    assert_eq!(rig.engine.status().sessions, 0);
}

#[test]
fn sessions_expire() {
    let mut rig = Rig::new(|l| {
        l.session_idle(Duration::from_secs(60)).session_handshake(Duration::from_secs(5)).max_sessions(2);
    });
    // Initialized and walked away: reclaimed after the handshake time.
    let r = Rig::full(rig.post(&[], INIT));
    let lost = r.header("Mcp-Session-Id").unwrap().to_owned();
    let kept = rig.session();
    rig.advance(Duration::from_secs(5));
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", &lost)], list)).status, 404);
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", &kept)], list)).status, 200);
    rig.advance(Duration::from_secs(59));
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", &kept)], list)).status, 200);
    rig.advance(Duration::from_secs(61));
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", &kept)], list)).status, 404);
    assert_eq!(rig.engine.status().sessions, 0);
    rig.drain();
    assert_eq!(rig.engine.status().connections, 0);
}

fn modern_post(rig: &mut Rig, extra: &[(&'static str, &str)], body: &Value) -> HttpReply {
    let method = body["method"].as_str().unwrap().to_owned();
    let mut headers: Vec<(&'static str, &str)> = vec![("MCP-Protocol-Version", "2026-07-28")];
    headers.push(("Mcp-Method", &method));
    let name = body["params"]["name"].as_str().map(str::to_owned);
    if let Some(n) = name.as_deref() {
        headers.push(("Mcp-Name", n));
    }
    headers.extend_from_slice(extra);
    let headers: Vec<(&'static str, String)> = headers.into_iter().map(|(k, v)| (k, v.to_owned())).collect();
    let refs: Vec<(&'static str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    rig.post(&refs, &body.to_string())
}

#[test]
fn stateless_wire() {
    let mut rig = Rig::new(|_| {});
    let discover =
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta()}});
    let r = Rig::full(modern_post(&mut rig, &[], &discover));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["result"]["resultType"], "complete");
    assert!(r.header("Mcp-Session-Id").is_none());
    // Header rules come before the version: a body naming v999 under a 2026 header is a
    // mismatch.
    let mut v999 = discover.clone();
    v999["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999.0.0".into();
    let r = Rig::full(modern_post(&mut rig, &[], &v999));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32020)));
    assert_eq!(r.json()["id"], 1);
    let r =
        Rig::full(rig.post(
            &[("MCP-Protocol-Version", "v999.0.0"), ("Mcp-Method", "server/discover")],
            &v999.to_string(),
        ));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32022)));
    let empty_meta =
        json!({"jsonrpc": "2.0", "id": 101, "method": "server/discover", "params": {"_meta": {}}});
    let r = Rig::full(modern_post(&mut rig, &[], &empty_meta));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32602)));
    let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"_meta": modern_meta()}});
    let r = Rig::full(modern_post(&mut rig, &[], &ping));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (404, Some(-32601)));
    // A wrong Mcp-Name is refused before anything runs.
    let c: Value = serde_json::from_str(&call(8, "echo", Some(modern_meta()))).unwrap();
    let r = Rig::full(rig.post(
        &[("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "other")],
        &c.to_string(),
    ));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32020)));
    // GET and DELETE belong to the legacy wire.
    let r = Rig::full(rig.request("GET", &[("MCP-Protocol-Version", "2026-07-28")], "", Caller::anonymous()));
    assert_eq!(r.status, 405);
    rig.drain();
    assert_eq!(rig.engine.status().connections, 0, "nothing is held after answered requests");
}

#[test]
fn stateless_call_cancelled_by_closing_the_stream() {
    let mut rig = Rig::new(|_| {});
    let c: Value = serde_json::from_str(&call(9, "echo", Some(modern_meta()))).unwrap();
    let HttpReply::Pending(ex) = modern_post(&mut rig, &[], &c) else { panic!("expected pending") };
    let Some(Output::Invoke(inv)) = rig.drain().into_iter().next() else { panic!("no invoke") };
    rig.engine.close(rig.now, ex);
    let outs = rig.drain();
    assert!(outs.iter().any(|o| matches!(o, Output::Cancel { call, .. } if *call == inv.ticket.call())));
    assert_eq!(
        rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("late")))),
        Err(Stale)
    );
    assert!(rig.drain().is_empty());
}

#[test]
fn listen_streams_hold_seats() {
    let mut rig = Rig::new(|l| {
        l.max_streams_per_caller(Some(2));
    });
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": true}}});
    let mut held = Vec::new();
    for _ in 0..2 {
        let HttpReply::Pending(ex) = modern_post(&mut rig, &[], &listen) else { panic!("expected a stream") };
        let outs = rig.drain();
        assert!(matches!(outs.first(), Some(Output::Stream { .. })));
        assert!(frames_text(&outs, ex).contains("notifications/subscriptions/acknowledged"));
        held.push(ex);
    }
    let r = Rig::full(modern_post(&mut rig, &[], &listen));
    assert_eq!(r.status, 429);
    rig.engine.registry_mut(rig.now).add_tool(Tool::new("two", "Two", json!({"type": "object"})), 2).unwrap();
    let outs = rig.drain();
    for ex in &held {
        assert!(frames_text(&outs, *ex).contains("notifications/tools/list_changed"));
    }
    // Evict-oldest seats the newcomer and closes the first stream.
    rig.engine.config.limits.seat_policy(crate::limits::SeatPolicy::EvictOldest);
    let HttpReply::Pending(_) = modern_post(&mut rig, &[], &listen) else { panic!("expected a stream") };
    let outs = rig.drain();
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::Close { conn, reason: CloseReason::Evicted } if *conn == held[0])));
    assert_eq!(rig.engine.status().streams, 2);
    // A closed stream frees its seat.
    rig.engine.close(rig.now, held[1]);
    rig.drain();
    assert_eq!(rig.engine.status().streams, 1);
}

#[test]
fn clients_that_list_sse_first_get_streams() {
    let mut rig = Rig::new(|_| {});
    let sid = rig.session();
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let HttpReply::Pending(ex) =
        rig.post(&[("Mcp-Session-Id", &sid), ("Accept", "text/event-stream, application/json")], list)
    else {
        panic!("expected a stream")
    };
    let outs = rig.drain();
    assert!(matches!(outs.first(), Some(Output::Stream { conn, .. }) if *conn == ex));
    let text = frames_text(&outs, ex);
    assert!(text.contains("-0\nretry: 3000\ndata:\n\n"), "{text}");
    assert!(text.contains("\"tools\":["), "{text}");
    assert!(matches!(outs.last(), Some(Output::Close { conn, .. }) if *conn == ex));
    // A client that takes only JSON never gets a stream, and loses what cannot precede the
    // answer in JSON.
    let meta = json!({"progressToken": 1});
    let HttpReply::Pending(ex) =
        rig.post(&[("Mcp-Session-Id", &sid), ("Accept", "application/json")], &call(3, "echo", Some(meta)))
    else {
        panic!("expected pending")
    };
    let Some(Output::Invoke(inv)) = rig.drain().into_iter().next() else { panic!("no invoke") };
    rig.engine.progress(rig.now, inv.ticket.call(), 1.into(), None, None).unwrap();
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("ok")))).unwrap();
    let outs = rig.drain();
    assert!(
        matches!(outs.as_slice(), [Output::Respond { conn, head, .. }] if *conn == ex && head.status == 200)
    );
}

/// A handler's answer on 2026-07-28: status from the error's blame, whatever its code or id
/// says. An application's `-32601` is its own error (200), not "method not found" (404); the
/// engine's own misuse error stays 200; a handler that blames the client gets 400; a shutdown
/// refusal is 503.
#[test]
fn modern_statuses_follow_blame_not_bytes() {
    let mut rig = Rig::new(|_| {});
    let answered = |rig: &mut Rig, id: &str, reply: Reply| -> (u16, Value) {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "echo", "arguments": {}, "_meta": modern_meta()}});
        let HttpReply::Pending(ex) = modern_post(rig, &[], &body) else { panic!("expected pending") };
        let Some(Output::Invoke(inv)) = rig.drain().into_iter().next() else { panic!("no invoke") };
        rig.engine.complete(rig.now, inv.ticket, reply).unwrap();
        match rig.drain().as_slice() {
            [Output::Respond { conn, head, body }] if *conn == ex => {
                (head.status, serde_json::from_slice(body).unwrap())
            }
            other => panic!("{other:?}"),
        }
    };
    // An id that spells an error key must not sway the status either.
    let tricky = r#"a,"error":{"code":-32601"#;
    let app = RpcError::new(ErrorCode::MethodNotFound, "no such thing in my domain");
    let (status, body) = answered(&mut rig, tricky, Reply::Tool(Err(HandlerError::Public(app))));
    assert_eq!(
        (status, body["error"]["code"].as_i64(), body["id"].as_str()),
        (200, Some(-32601), Some(tricky))
    );
    let blamed = RpcError::invalid_params("\"n\" must be positive");
    let (status, body) = answered(&mut rig, "b", Reply::Tool(Err(HandlerError::Public(blamed))));
    assert_eq!((status, body["error"]["code"].as_i64()), (400, Some(-32602)));
    let (status, body) =
        answered(&mut rig, "c", Reply::Prompt(Ok(crate::content::PromptOutput::messages(Vec::new()))));
    assert_eq!((status, body["error"]["code"].as_i64()), (200, Some(-32603)), "a reply of the wrong kind");
    rig.engine.shutdown(rig.now);
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": modern_meta()}});
    let r = Rig::full(modern_post(&mut rig, &[], &body));
    assert_eq!((r.status, r.json()["error"]["data"]["reason"].as_str()), (503, Some("shutting_down")));
}

/// Refusals before any exchange: each status comes from its blame (VERSIONS.md §5b/§5c).
#[test]
fn transport_refusals_by_blame() {
    let mut rig = Rig::new(|l| {
        l.max_connections(3);
    });
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let r = Rig::full(rig.post(&[], list));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32600)), "no session id");
    let r = Rig::full(rig.post(&[("Mcp-Session-Id", "nope")], list));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (404, Some(-32001)), "unknown session");
    let r = Rig::full(rig.post(&[], "{"));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32700)), "not JSON");
    let _a = rig.session();
    let _b = rig.session();
    let r = Rig::full(rig.post(&[], INIT));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (503, Some(-32603)), "tables full");
}

const INIT_ELICIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}"#;

fn name_form() -> crate::interaction::InputRequest {
    crate::interaction::InputRequest::elicit(
        "Name?",
        json!({"type": "object", "properties": {"name": {"type": "string"}}}),
    )
    .unwrap()
}

impl Rig {
    /// An initialized 2025-11-25 session whose client declared form elicitation.
    fn asking_session(&mut self) -> String {
        let r = Self::full(self.post(&[], INIT_ELICIT));
        let sid = r.header("Mcp-Session-Id").unwrap().to_owned();
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(Self::full(self.post(&[("Mcp-Session-Id", &sid)], note)).status, 202);
        sid
    }

    /// POSTs `tools/call` `id` on the session: its exchange and the invocation.
    fn call_on(&mut self, sid: &str, id: u32) -> (ConnId, Invocation<u32>) {
        let HttpReply::Pending(ex) = self.post(&[("Mcp-Session-Id", sid)], &call(id, "echo", None)) else {
            panic!("call {id} was not admitted")
        };
        let Some(Output::Invoke(inv)) = self.drain().into_iter().next() else { panic!("no invoke") };
        (ex, inv)
    }

    /// `call_on`, then the handler asks the client for a name: the exchange turns into a stream
    /// carrying `elicitation/create`, whose id is returned.
    fn call_and_ask(&mut self, sid: &str, id: u32) -> (ConnId, Invocation<u32>, Value) {
        let (ex, inv) = self.call_on(sid, id);
        let asked = self.engine.ask(self.now, inv.ticket.call(), vec![("who".into(), name_form())]);
        assert_eq!(asked, Ok(crate::engine::Asked::Pending));
        let text = frames_text(&self.drain(), ex);
        let data = text.lines().find_map(|l| l.strip_prefix("data: ")).expect("the question");
        let question: Value = serde_json::from_str(data).unwrap();
        assert_eq!(question["method"], "elicitation/create");
        (ex, inv, question["id"].clone())
    }
}

#[test]
fn dropping_the_stream_of_a_waiting_ask_cancels_its_call() {
    // The issue: each call waits on an ask whose POST stream the client dropped. Its answer
    // could never reach the client, yet it held an in-flight slot for ever: after 64 of them
    // every call on the session was refused, and the session never idled out. Now each stream
    // waits the resume window for the client to come back, then its call is cancelled.
    let mut rig = Rig::new(|l| {
        l.session_idle(Duration::from_secs(60));
    });
    let sid = rig.asking_session();
    let mut tickets = Vec::new();
    let mut questions = Vec::new();
    let mut calls = Vec::new();
    for id in 0..64 {
        let (ex, inv, question) = rig.call_and_ask(&sid, 100 + id);
        rig.engine.close(rig.now, ex);
        let outs = rig.drain();
        assert!(
            matches!(outs.as_slice(), [Output::Close { conn, reason: CloseReason::Closed }] if *conn == ex),
            "{outs:?}"
        );
        calls.push(inv.ticket.call());
        tickets.push(inv.ticket);
        questions.push(question);
    }
    assert_eq!(rig.engine.status().in_flight, 64, "each waits for a resume");
    rig.advance(Duration::from_secs(29));
    assert!(rig.drain().is_empty());
    rig.advance(Duration::from_secs(1));
    let outs = rig.drain();
    assert_eq!(outs.len(), 128, "{outs:?}");
    for (pair, call) in outs.chunks(2).zip(&calls) {
        assert!(
            matches!(pair, [
                Output::Answer { call: a, answers: Err(crate::engine::AskError::Unreachable) },
                Output::Cancel { call: c, .. },
            ] if a == call && c == call),
            "{pair:?}"
        );
    }
    assert_eq!(rig.engine.status().in_flight, 0);
    for ticket in tickets {
        assert_eq!(
            rig.engine.complete(rig.now, ticket, Reply::Tool(Ok(ToolOutput::text("late")))),
            Err(Stale)
        );
    }
    // A late answer to one of the questions is accepted and ignored.
    let late = json!({"jsonrpc": "2.0", "id": questions[0], "result": {"action": "accept", "content": {"name": "Ada"}}});
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", &sid)], &late.to_string())).status, 202);
    assert!(rig.drain().is_empty());
    // The session still takes calls.
    let (ex, inv) = rig.call_on(&sid, 500);
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("hi")))).unwrap();
    assert!(
        matches!(rig.drain().as_slice(), [Output::Respond { conn, head, .. }] if *conn == ex && head.status == 200)
    );
    // And, left alone, it idles out.
    rig.advance(Duration::from_secs(61));
    assert_eq!(rig.engine.status().sessions, 0);
    assert_eq!(rig.engine.status().connections, 0);
}

#[test]
fn an_ask_the_client_leaves_unanswered_times_out() {
    let mut rig = Rig::new(|l| {
        l.ask_timeout(Duration::from_secs(30));
    });
    let sid = rig.asking_session();
    let (ex, inv, question) = rig.call_and_ask(&sid, 7);
    let call = inv.ticket.call();
    rig.advance(Duration::from_secs(29));
    let outs = rig.drain();
    assert!(!frames_text(&outs, ex).contains("notifications/cancelled"));
    assert!(!outs.iter().any(|o| matches!(o, Output::Answer { .. })));
    rig.advance(Duration::from_secs(1));
    let outs = rig.drain();
    let text = frames_text(&outs, ex);
    let note: Value =
        serde_json::from_str(text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap();
    assert_eq!(note["method"], "notifications/cancelled");
    assert_eq!(note["params"]["requestId"], question);
    assert!(matches!(
        outs.last(),
        Some(Output::Answer { call: c, answers: Err(crate::engine::AskError::TimedOut) }) if *c == call
    ));
    // The answer after the deadline is ignored; the call goes on and answers on its stream.
    let late =
        json!({"jsonrpc": "2.0", "id": question, "result": {"action": "accept", "content": {"name": "Ada"}}});
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", &sid)], &late.to_string())).status, 202);
    assert!(rig.drain().is_empty());
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("nobody")))).unwrap();
    let outs = rig.drain();
    assert!(frames_text(&outs, ex).contains("\"text\":\"nobody\""));
    assert!(matches!(outs.last(), Some(Output::Close { conn, .. }) if *conn == ex));
    // An ask answered in time leaves no deadline behind.
    let (_, inv, question) = rig.call_and_ask(&sid, 8);
    let answer = json!({"jsonrpc": "2.0", "id": question, "result": {"action": "decline"}});
    rig.post(&[("Mcp-Session-Id", &sid)], &answer.to_string());
    assert!(matches!(rig.drain().as_slice(), [Output::Answer { answers: Ok(_), .. }]));
    let at = rig.now + Duration::from_secs(30);
    assert!(rig.engine.timers.expired(at).all(|t| !matches!(t, Timer::Ask(_))));
    inv.ticket.abandon();
}

#[test]
fn sixty_four_unanswered_asks_on_open_streams_free_their_slots_at_the_deadline() {
    let mut rig = Rig::new(|_| {});
    let sid = rig.asking_session();
    let mut held = Vec::new();
    for id in 0..64 {
        held.push(rig.call_and_ask(&sid, id));
    }
    let refused = Rig::full(rig.post(&[("Mcp-Session-Id", &sid)], &call(64, "echo", None)));
    assert_eq!(refused.json()["error"]["code"], -32600, "the bound holds meanwhile");
    rig.advance(Duration::from_secs(60));
    let timed_out = rig
        .drain()
        .into_iter()
        .filter(|o| matches!(o, Output::Answer { answers: Err(crate::engine::AskError::TimedOut), .. }))
        .count();
    assert_eq!(timed_out, 64);
    // Each handler, told so, answers; the session takes calls again.
    for (_, inv, _) in held {
        let e = crate::content::HandlerError::from(crate::engine::AskError::TimedOut);
        rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Err(e))).unwrap();
    }
    rig.drain();
    assert_eq!(rig.engine.status().in_flight, 0);
    let (_, inv) = rig.call_on(&sid, 65);
    inv.ticket.abandon();
}

#[test]
fn a_call_whose_stream_is_gone_does_not_keep_its_session_alive() {
    // A handler that never returns (no call timeout) on a stream the client dropped: nothing
    // it does can reach the client, so it must not hold the session for ever. The session
    // idles out, which cancels the call.
    let mut rig = Rig::new(|l| {
        l.session_idle(Duration::from_secs(60));
    });
    let sid = rig.session();
    let (ex, inv) = rig.call_on(&sid, 3);
    let call = inv.ticket.call();
    inv.ticket.abandon();
    // While the client holds the stream, the session is busy however long the call runs.
    rig.advance(Duration::from_secs(61));
    rig.advance(Duration::from_secs(61));
    assert_eq!(rig.engine.status().sessions, 1);
    rig.engine.close(rig.now, ex);
    rig.drain();
    assert_eq!(rig.engine.status().in_flight, 1, "a disconnect is not a cancellation");
    rig.advance(Duration::from_secs(61));
    let outs = rig.drain();
    assert!(outs.iter().any(|o| matches!(o, Output::Cancel { call: c, .. } if *c == call)), "{outs:?}");
    assert_eq!(rig.engine.status().sessions, 0);
    assert_eq!(rig.engine.status().in_flight, 0);
}

/// A caller known by its peer address alone, as the HTTP layer fills it in.
fn peer(addr: &str) -> Caller {
    Caller { peer: Some(addr.to_owned()), ..Caller::default() }
}

const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

impl Rig {
    /// `initialize` from `who`: the session id, or the refusal's status.
    fn init_as(&mut self, who: &Caller) -> Result<String, u16> {
        let r = Self::full(self.request("POST", &[], INIT, who.clone()));
        match r.header("Mcp-Session-Id") {
            Some(sid) if r.status == 200 => Ok(sid.to_owned()),
            _ => Err(r.status),
        }
    }

    /// A session of `who` through its handshake.
    fn session_as(&mut self, who: &Caller) -> String {
        let sid = self.init_as(who).unwrap();
        let r = Self::full(self.request("POST", &[("Mcp-Session-Id", &sid)], INITIALIZED, who.clone()));
        assert_eq!(r.status, 202);
        sid
    }

    /// The status of a `tools/list` in `sid` from `who` (404 once the session is gone).
    fn list_as(&mut self, who: &Caller, sid: &str) -> u16 {
        Self::full(self.request("POST", &[("Mcp-Session-Id", sid)], LIST, who.clone())).status
    }

    fn tick(&mut self) {
        self.now += Duration::from_millis(10);
    }
}

#[test]
fn a_full_table_first_displaces_its_callers_stalest_handshake() {
    let mut rig = Rig::new(|l| {
        l.max_sessions(2);
    });
    let x = peer("10.0.0.2");
    let stale = rig.init_as(&x).unwrap();
    rig.tick();
    let fresh = rig.init_as(&x).unwrap();
    rig.tick();
    // Full, and x holds the whole table (its share): its least recently active handshake goes.
    let third = rig.init_as(&x).unwrap();
    assert!(rig.drain().is_empty(), "a session has no transport to close");
    assert_eq!(rig.list_as(&x, &stale), 404);
    for sid in [&fresh, &third] {
        let r = Rig::full(rig.request("POST", &[("Mcp-Session-Id", sid)], INITIALIZED, x.clone()));
        assert_eq!(r.status, 202);
    }
    // Every session is past its handshake: nothing of x's own may go, so x is refused.
    assert_eq!(rig.init_as(&x), Err(503));
    assert_eq!(rig.list_as(&x, &fresh), 200);
    assert_eq!(rig.engine.status().sessions, 2);
}

#[test]
fn a_caller_below_its_share_displaces_one_above_it() {
    let mut rig = Rig::new(|l| {
        l.max_sessions(4);
    });
    let (flood, other) = (peer("10.0.0.2"), peer("10.0.0.1"));
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(rig.session_as(&flood));
        rig.tick();
    }
    // The flooder keeps its sessions busy with requests, newest last.
    for sid in held.iter().rev() {
        assert_eq!(rig.list_as(&flood, sid), 200);
        rig.tick();
    }
    assert_eq!(rig.init_as(&flood), Err(503), "the flooder holds the whole table");
    // The other caller holds nothing, below its share of 2: the flooder's least recently
    // active session makes room, then the next.
    let first = rig.session_as(&other);
    assert_eq!(rig.list_as(&flood, &held[3]), 404);
    let second = rig.session_as(&other);
    assert_eq!(rig.list_as(&flood, &held[2]), 404);
    // Both hold their share now: neither displaces the other.
    assert_eq!(rig.init_as(&other), Err(503));
    assert_eq!(rig.init_as(&flood), Err(503));
    for sid in [&first, &second] {
        assert_eq!(rig.list_as(&other, sid), 200);
    }
    for sid in &held[..2] {
        assert_eq!(rig.list_as(&flood, sid), 200);
    }
}

#[test]
fn a_handshake_flood_displaces_only_itself() {
    let mut rig = Rig::new(|l| {
        l.max_sessions(8).session_handshake(Duration::from_secs(30));
    });
    let (flood, other) = (peer("10.0.0.2"), peer("10.0.0.1"));
    let mut flooded = Vec::new();
    for _ in 0..8 {
        flooded.push(rig.init_as(&flood).unwrap());
        rig.tick();
    }
    // Half-way through the other caller's handshake, the flood goes on.
    let sid = rig.init_as(&other).unwrap();
    for _ in 0..40 {
        flooded.push(rig.init_as(&flood).unwrap());
        rig.tick();
    }
    let r = Rig::full(rig.request("POST", &[("Mcp-Session-Id", &sid)], INITIALIZED, other.clone()));
    assert_eq!(r.status, 202, "the other caller's handshake survived the flood");
    assert_eq!(rig.list_as(&other, &sid), 200);
    // The flood displaced its own handshakes, least recently active first.
    let alive: Vec<usize> =
        (0..flooded.len()).filter(|i| rig.list_as(&flood, &flooded[*i].clone()) != 404).collect();
    assert_eq!(alive, (41..48).collect::<Vec<_>>());
    assert_eq!(rig.engine.status().sessions, 8);
}

#[test]
fn sessions_per_caller_are_bounded() {
    let mut rig = Rig::new(|l| {
        l.max_sessions_per_caller(Some(2));
    });
    let (x, y) = (peer("10.0.0.2"), peer("10.0.0.1"));
    let stale = rig.init_as(&x).unwrap();
    rig.tick();
    let kept = rig.session_as(&x);
    // At its bound, x's own unfinished handshake makes room...
    let third = rig.session_as(&x);
    assert_eq!(rig.list_as(&x, &stale), 404);
    // ...and with none left x is refused, while others are not.
    let r = Rig::full(rig.request("POST", &[], INIT, x.clone()));
    assert_eq!(r.status, 429);
    assert!(r.header("Mcp-Session-Id").is_none());
    assert_eq!(r.json()["error"]["code"], -32600);
    rig.session_as(&y);
    // An identity is one caller from any address.
    let id = |addr: &str| Caller { identity: Some("alice".into()), ..peer(addr) };
    rig.session_as(&id("10.0.0.3"));
    rig.session_as(&id("10.0.0.4"));
    assert_eq!(rig.init_as(&id("10.0.0.5")), Err(429));
    for sid in [&kept, &third] {
        assert_eq!(rig.list_as(&x, sid), 200);
    }
    // Each refusal is counted by its reason, and so is the handshake that made room.
    let refusals = rig.engine.status().refusals;
    assert_eq!((refusals.share, refusals.displaced, refusals.capacity), (2, 1, 0));
}

#[test]
fn a_caller_below_its_share_of_connections_displaces_idle_sessions() {
    let mut rig = Rig::new(|l| {
        l.max_connections(4);
    });
    let (flood, other) = (peer("10.0.0.2"), peer("10.0.0.1"));
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(rig.session_as(&flood));
        rig.tick();
    }
    // An initialize needs two connections (the session and its exchange): three sessions leave
    // room for none, and the flooder holds the whole table.
    assert_eq!(rig.init_as(&flood), Err(503));
    // The other caller holds nothing, below its share of 2: the flooder's least recently active
    // idle session makes room.
    let sid = rig.session_as(&other);
    assert_eq!(rig.list_as(&flood, &held[0]), 404);
    assert_eq!(rig.list_as(&flood, &held[1]), 200);
    assert_eq!(rig.list_as(&other, &sid), 200);
    assert_eq!(rig.engine.status().sessions, 3);
    let refusals = rig.engine.status().refusals;
    assert_eq!((refusals.capacity, refusals.displaced, refusals.share), (1, 1, 0));
}

// ---------------------------------------------------------------------------------------------
// Resuming legacy POST response streams
// ---------------------------------------------------------------------------------------------

/// The SSE events (id, data) in `outs` for `conn`, in order.
fn events(outs: &[Output<u32>], conn: ConnId) -> Vec<(String, String)> {
    let text = frames_text(outs, conn);
    text.split("\n\n")
        .filter(|e| !e.is_empty() && !e.starts_with(':'))
        .map(|e| {
            let id = e.lines().find_map(|l| l.strip_prefix("id: ")).unwrap_or_default().to_owned();
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or_default().to_owned();
            (id, data)
        })
        .collect()
}

fn closed(outs: &[Output<u32>], conn: ConnId, why: CloseReason) -> bool {
    outs.iter().any(|o| matches!(o, Output::Close { conn: c, reason } if *c == conn && *reason == why))
}

impl Rig {
    /// A call with a progress token whose stream carried its priming event and one progress
    /// notification: the exchange, the invocation and the stream's number.
    fn streaming_call(&mut self, sid: &str, id: u32) -> (ConnId, Invocation<u32>, u64) {
        self.streaming_call_as(&Caller::anonymous(), sid, id)
    }

    /// [`Rig::streaming_call`] from `who`.
    fn streaming_call_as(&mut self, who: &Caller, sid: &str, id: u32) -> (ConnId, Invocation<u32>, u64) {
        let meta = json!({"progressToken": format!("p{id}")});
        let body = call(id, "echo", Some(meta));
        let HttpReply::Pending(ex) = self.request("POST", &[("Mcp-Session-Id", sid)], &body, who.clone())
        else {
            panic!("call {id} was not admitted")
        };
        let Some(Output::Invoke(inv)) = self.drain().into_iter().next() else { panic!("no invoke") };
        self.engine.progress(self.now, inv.ticket.call(), 1.into(), None, None).unwrap();
        let evs = events(&self.drain(), ex);
        let stream = crate::sse::EventId::parse(&evs[0].0).unwrap().stream;
        assert_eq!(evs.len(), 2, "{evs:?}");
        assert_eq!(evs[1].0, format!("{stream}-1"));
        (ex, inv, stream)
    }

    /// Progress `n` on `inv`'s call, after the progress interval.
    fn progress(&mut self, inv: &Invocation<u32>, n: u32) -> Vec<Output<u32>> {
        self.advance(Duration::from_secs(1));
        self.engine.progress(self.now, inv.ticket.call(), n.into(), None, None).unwrap();
        self.drain()
    }

    fn resume(&mut self, sid: &str, last: &str, who: Caller) -> HttpReply {
        self.request("GET", &[("Mcp-Session-Id", sid), ("Last-Event-ID", last)], "", who)
    }
}

#[test]
fn a_dropped_post_stream_resumes_with_last_event_id() {
    let mut rig = Rig::new(|_| {});
    let sid = rig.session();
    let (ex, inv, s) = rig.streaming_call(&sid, 3);
    // The client drops the stream: the shim is told it closed, the call goes on.
    rig.engine.close(rig.now, ex);
    let outs = rig.drain();
    assert!(matches!(outs.as_slice(), [Output::Close { conn, reason: CloseReason::Closed }] if *conn == ex));
    assert_eq!(rig.engine.status().in_flight, 1);
    // What the call sends meanwhile is kept, not written; closing again changes nothing.
    assert!(rig.progress(&inv, 2).is_empty());
    rig.engine.close(rig.now, ex);
    assert!(rig.drain().is_empty());
    // Keep-alives are not written to it either.
    rig.advance(Duration::from_secs(15));
    assert!(rig.drain().is_empty());
    // The client resumes after the first progress: it gets the second, then the rest.
    let HttpReply::Pending(back) = rig.resume(&sid, &format!("{s}-1"), Caller::anonymous()) else {
        panic!("expected the stream back")
    };
    let outs = rig.drain();
    assert!(
        matches!(outs.first(), Some(Output::Stream { conn, head }) if *conn == back && head.status == 200)
    );
    let evs = events(&outs, back);
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0].0, format!("{s}-2"));
    assert!(evs[0].1.contains("\"progress\":2"), "{evs:?}");
    assert_eq!(rig.engine.status().streams, 0, "no GET stream was opened");
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("done")))).unwrap();
    let outs = rig.drain();
    let evs = events(&outs, back);
    assert_eq!(evs[0].0, format!("{s}-3"));
    assert!(evs[0].1.contains("\"id\":3,\"result\""), "{evs:?}");
    assert!(
        matches!(outs.last(), Some(Output::Close { conn, reason: CloseReason::EndOfInput }) if *conn == back)
    );
    // Replayed to the end, the stream is forgotten: its id now opens a fresh GET stream.
    let HttpReply::Pending(get) = rig.resume(&sid, &format!("{s}-1"), Caller::anonymous()) else {
        panic!("expected a stream")
    };
    let evs = events(&rig.drain(), get);
    assert_eq!(evs[0].0, "0-0", "{evs:?}");
    assert!(evs.iter().all(|(id, _)| id.starts_with("0-")), "{evs:?}");
    assert_eq!(rig.engine.status().streams, 1);
    assert_eq!(rig.engine.status().connections, 2, "the session and its GET stream");
}

impl Rig {
    /// A paced call stream of `sid` whose queue (two frames) is full: the exchange, the
    /// invocation and the stream's number. Its priming event and first progress update fill
    /// the queue; the second update was dropped.
    fn full_paced_call(&mut self, sid: &str, id: u32) -> (ConnId, Invocation<u32>, u64) {
        let body = call(id, "echo", Some(json!({"progressToken": "p"})));
        let HttpReply::Pending(ex) =
            self.request("POST", &[("Mcp-Session-Id", sid)], &body, Caller::anonymous())
        else {
            panic!("call {id} was not admitted")
        };
        self.engine.pace(ex);
        let Some(Output::Invoke(inv)) = self.drain().into_iter().next() else { panic!("no invoke") };
        let call = inv.ticket.call();
        assert_eq!(self.engine.progress(self.now, call, 1.into(), None, None), Ok(ProgressOutcome::Sent));
        assert_eq!(self.engine.progress(self.now, call, 2.into(), None, None), Ok(ProgressOutcome::Dropped));
        let evs = events(&self.drain(), ex);
        assert_eq!(evs.len(), 2, "priming and one update: {evs:?}");
        let stream = crate::sse::EventId::parse(&evs[0].0).unwrap().stream;
        (ex, inv, stream)
    }
}

/// A stream the client drops while its queue is full is no longer paced: what the call sends
/// is kept for the resume, not dropped as if a reader were behind, and the stall check that the
/// full queue armed does not cut the stream the client is coming back for.
#[test]
fn a_stream_dropped_with_a_full_queue_keeps_what_follows_and_is_not_cut_as_stalled() {
    let mut rig = Rig::new(|l| {
        l.stream_queue(2).progress_interval(Duration::ZERO).stall_timeout(Duration::from_secs(10));
    });
    let sid = rig.session();
    let (ex, inv, s) = rig.full_paced_call(&sid, 3);
    rig.engine.close(rig.now, ex);
    assert!(closed(&rig.drain(), ex, CloseReason::Closed));
    let outcome = rig.engine.progress(rig.now, inv.ticket.call(), 3.into(), None, None);
    assert_eq!(outcome, Ok(ProgressOutcome::Sent), "kept for the resume");
    rig.advance(Duration::from_secs(11));
    assert!(rig.drain().is_empty(), "the parked stream is not cut");
    assert_eq!(rig.engine.status().refusals.stalled, 0);
    let HttpReply::Pending(back) = rig.resume(&sid, &format!("{s}-1"), Caller::anonymous()) else {
        panic!("expected the stream back")
    };
    let evs = events(&rig.drain(), back);
    assert!(evs.len() == 1 && evs[0].1.contains("\"progress\":3"), "{evs:?}");
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("done")))).unwrap();
    let evs = events(&rig.drain(), back);
    assert!(evs.len() == 1 && evs[0].1.contains("\"id\":3,\"result\""), "{evs:?}");
}

/// A reader that sits on a full resumable stream is cut as stalled, but the stream is kept as
/// if the client had dropped it: the call goes on and the client resumes it with its response.
#[test]
fn a_stalled_post_stream_is_cut_and_stays_resumable() {
    let mut rig = Rig::new(|l| {
        l.stream_queue(2).progress_interval(Duration::ZERO).stall_timeout(Duration::from_secs(10));
    });
    let sid = rig.session();
    let (ex, inv, s) = rig.full_paced_call(&sid, 3);
    rig.advance(Duration::from_secs(9));
    assert!(!closed(&rig.drain(), ex, CloseReason::Stalled), "not yet");
    rig.advance(Duration::from_secs(2));
    assert!(closed(&rig.drain(), ex, CloseReason::Stalled));
    let status = rig.engine.status();
    assert_eq!((status.refusals.stalled, status.in_flight), (1, 1), "cut, and the call goes on");
    let outcome = rig.engine.progress(rig.now, inv.ticket.call(), 3.into(), None, None);
    assert_eq!(outcome, Ok(ProgressOutcome::Sent));
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("done")))).unwrap();
    assert!(rig.drain().is_empty(), "nothing is written to the cut stream");
    let HttpReply::Pending(back) = rig.resume(&sid, &format!("{s}-0"), Caller::anonymous()) else {
        panic!("expected the stream back")
    };
    let evs = events(&rig.drain(), back);
    let ids: Vec<_> = evs.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids, [format!("{s}-1"), format!("{s}-2"), format!("{s}-3")]);
    assert!(evs[1].1.contains("\"progress\":3"), "{evs:?}");
    assert!(evs[2].1.contains("\"id\":3,\"result\""), "{evs:?}");
}

#[test]
fn a_response_made_while_the_stream_is_dropped_waits_one_window() {
    let mut rig = Rig::new(|l| {
        l.resume_window(Duration::from_secs(10));
    });
    let sid = rig.session();
    // Finished while dropped, resumed in time: everything after the id, then the end.
    let (ex, inv, s) = rig.streaming_call(&sid, 3);
    rig.engine.close(rig.now, ex);
    rig.drain();
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("kept")))).unwrap();
    assert!(rig.drain().is_empty());
    assert_eq!((rig.engine.status().in_flight, rig.engine.status().connections), (0, 1));
    rig.advance(Duration::from_secs(9));
    let HttpReply::Pending(back) = rig.resume(&sid, &format!("{s}-0"), Caller::anonymous()) else {
        panic!("expected the stream back")
    };
    let outs = rig.drain();
    let evs = events(&outs, back);
    assert_eq!(
        evs.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        [format!("{s}-1"), format!("{s}-2")]
    );
    assert!(evs[1].1.contains("\"text\":\"kept\""), "{evs:?}");
    assert!(closed(&outs, back, CloseReason::EndOfInput));
    assert_eq!(rig.engine.status().connections, 1);
    // Not resumed in time: dropped at the end of the window.
    let (ex, inv, s) = rig.streaming_call(&sid, 4);
    rig.engine.close(rig.now, ex);
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("lost")))).unwrap();
    rig.drain();
    rig.advance(Duration::from_secs(10));
    let HttpReply::Pending(get) = rig.resume(&sid, &format!("{s}-0"), Caller::anonymous()) else {
        panic!("expected a stream")
    };
    let text = frames_text(&rig.drain(), get);
    assert!(text.starts_with("id: 0-0\n") && !text.contains("lost"), "{text}");
}

#[test]
fn a_call_running_past_the_window_stays_resumable_but_cannot_ask() {
    let mut rig = Rig::new(|l| {
        l.resume_window(Duration::from_secs(10)).session_idle(Duration::from_secs(60));
    });
    let sid = rig.asking_session();
    let (ex, inv, s) = rig.streaming_call(&sid, 3);
    rig.engine.close(rig.now, ex);
    rig.drain();
    // Within the window the call may still ask: the question waits for the resume.
    rig.advance(Duration::from_secs(5));
    assert_eq!(rig.engine.can_ask(inv.ticket.call(), &name_form()), Ok(()));
    rig.advance(Duration::from_secs(5));
    assert!(rig.drain().is_empty(), "a call not asking is not cancelled");
    assert_eq!(rig.engine.status().in_flight, 1);
    let asked = rig.engine.ask(rig.now, inv.ticket.call(), vec![("who".into(), name_form())]);
    assert_eq!(asked, Err(crate::engine::AskError::Unreachable));
    // Its response still goes to the kept events, for a window more.
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("late")))).unwrap();
    assert!(rig.drain().is_empty());
    rig.advance(Duration::from_secs(9));
    let HttpReply::Pending(back) = rig.resume(&sid, &format!("{s}-1"), Caller::anonymous()) else {
        panic!("expected the stream back")
    };
    let outs = rig.drain();
    let evs = events(&outs, back);
    assert_eq!(evs.len(), 1);
    assert!(evs[0].1.contains("\"text\":\"late\""), "{evs:?}");
    assert!(closed(&outs, back, CloseReason::EndOfInput));
    // A handler that never returns on a dropped stream does not keep the session alive.
    let (ex, inv, _) = rig.streaming_call(&sid, 4);
    let call = inv.ticket.call();
    inv.ticket.abandon();
    rig.engine.close(rig.now, ex);
    rig.drain();
    rig.advance(Duration::from_secs(61));
    let outs = rig.drain();
    assert!(outs.iter().any(|o| matches!(o, Output::Cancel { call: c, .. } if *c == call)), "{outs:?}");
    assert_eq!(rig.engine.status().sessions, 0);
    assert_eq!(rig.engine.status().connections, 0);
}

#[test]
fn a_question_asked_before_the_drop_is_replayed_and_answered() {
    let mut rig = Rig::new(|_| {});
    let sid = rig.asking_session();
    let (ex, inv, question) = rig.call_and_ask(&sid, 7);
    rig.engine.close(rig.now, ex);
    rig.drain();
    let HttpReply::Pending(back) = rig.resume(&sid, &stream_of(&rig, ex), Caller::anonymous()) else {
        panic!("expected the stream back")
    };
    let evs = events(&rig.drain(), back);
    let asked: Value = serde_json::from_str(&evs[0].1).unwrap();
    assert_eq!((asked["method"].as_str(), &asked["id"]), (Some("elicitation/create"), &question));
    let answer =
        json!({"jsonrpc": "2.0", "id": question, "result": {"action": "accept", "content": {"name": "Ada"}}});
    assert_eq!(Rig::full(rig.post(&[("Mcp-Session-Id", &sid)], &answer.to_string())).status, 202);
    assert!(matches!(rig.drain().as_slice(), [Output::Answer { answers: Ok(_), .. }]));
    // The window passing no longer matters: the stream is read again.
    rig.advance(Duration::from_secs(31));
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("hello Ada")))).unwrap();
    let outs = rig.drain();
    assert!(frames_text(&outs, back).contains("hello Ada"));
    assert!(closed(&outs, back, CloseReason::EndOfInput));
}

/// The priming id of `ex`'s stream (`<stream>-0`), read from the engine's state.
fn stream_of(rig: &Rig, ex: ConnId) -> String {
    let stream = match rig.engine.conns.get(ex.0).map(|c| &c.transport) {
        Some(Transport::Exchange(x)) => x.stream_no(),
        _ => panic!("not an exchange"),
    };
    format!("{stream}-0")
}

#[test]
fn only_the_streams_own_session_and_caller_resume_it_and_the_newest_resume_wins() {
    let mut rig = Rig::new(|_| {});
    let sid = rig.session();
    let other = rig.session();
    let (ex, inv, s) = rig.streaming_call(&sid, 3);
    rig.engine.close(rig.now, ex);
    rig.drain();
    // Another caller holding the session id: 404, as for any session not its own.
    let r = Rig::full(rig.resume(&sid, &format!("{s}-0"), Caller::identified("mallory")));
    assert_eq!(r.status, 404);
    // Another session of the same caller: its ids name its own streams only; it gets its own
    // fresh GET stream, and the parked stream is untouched.
    let HttpReply::Pending(get) = rig.resume(&other, &format!("{s}-0"), Caller::anonymous()) else {
        panic!("expected a stream")
    };
    let text = frames_text(&rig.drain(), get);
    assert!(text.starts_with("id: 0-0\n") && !text.contains("progress"), "{text}");
    // An id never issued, or not ours at all: a fresh GET stream too.
    for bogus in [format!("{s}-99"), "99-0".to_owned(), "x".to_owned()] {
        let HttpReply::Pending(get) = rig.resume(&sid, &bogus, Caller::anonymous()) else {
            panic!("{bogus}")
        };
        let text = frames_text(&rig.drain(), get);
        assert!(!text.contains("progress"), "{bogus}: {text}");
    }
    assert_eq!(rig.engine.status().in_flight, 1);
    // Resumed twice: the older resumed stream is replaced, the newer replays from its own id.
    let HttpReply::Pending(first) = rig.resume(&sid, &format!("{s}-0"), Caller::anonymous()) else {
        panic!()
    };
    assert_eq!(events(&rig.drain(), first).len(), 1);
    let HttpReply::Pending(second) = rig.resume(&sid, &format!("{s}-0"), Caller::anonymous()) else {
        panic!()
    };
    let outs = rig.drain();
    assert!(closed(&outs, first, CloseReason::Replaced), "{outs:?}");
    assert_eq!(events(&outs, second).len(), 1);
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("once")))).unwrap();
    let outs = rig.drain();
    assert!(frames_text(&outs, first).is_empty());
    assert!(frames_text(&outs, second).contains("once"));
    assert!(closed(&outs, second, CloseReason::EndOfInput));
    // A stream the server still writes to (the client thinks it is dead) is replaced too.
    let (ex, inv, s) = rig.streaming_call(&sid, 4);
    let HttpReply::Pending(back) = rig.resume(&sid, &format!("{s}-1"), Caller::anonymous()) else { panic!() };
    let outs = rig.drain();
    assert!(closed(&outs, ex, CloseReason::Replaced));
    assert!(events(&outs, back).is_empty());
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("moved")))).unwrap();
    let outs = rig.drain();
    assert!(frames_text(&outs, ex).is_empty());
    assert!(frames_text(&outs, back).contains("moved"));
}

#[test]
fn a_zero_resume_window_forgets_a_dropped_stream_at_once() {
    let mut rig = Rig::new(|l| {
        l.resume_window(Duration::ZERO);
    });
    let sid = rig.asking_session();
    let (ex, inv, _) = rig.call_and_ask(&sid, 7);
    let call = inv.ticket.call();
    rig.engine.close(rig.now, ex);
    let outs = rig.drain();
    assert!(
        matches!(outs.as_slice(), [
            Output::Close { conn, reason: CloseReason::Closed },
            Output::Answer { call: a, answers: Err(crate::engine::AskError::Unreachable) },
            Output::Cancel { call: c, .. },
        ] if *conn == ex && *a == call && *c == call),
        "{outs:?}"
    );
    inv.ticket.abandon();
}

#[test]
fn kept_events_are_bounded_per_stream_and_per_session() {
    let mut rig = Rig::new(|l| {
        l.replay_events(3).resume_bytes(100_000);
    });
    let sid = rig.session();
    let (ex, inv, s) = rig.streaming_call(&sid, 3);
    rig.engine.close(rig.now, ex);
    rig.drain();
    for n in 2..=6 {
        rig.progress(&inv, n);
    }
    // Events 0..=6 were made, 3 are kept: a resume from 0 gets what is left.
    let HttpReply::Pending(back) = rig.resume(&sid, &format!("{s}-0"), Caller::anonymous()) else { panic!() };
    let ids: Vec<String> = events(&rig.drain(), back).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, [format!("{s}-4"), format!("{s}-5"), format!("{s}-6")]);
    inv.ticket.abandon();
    // A session's total: a stream's events past it are not kept.
    let mut rig = Rig::new(|l| {
        l.resume_bytes(200);
    });
    let sid = rig.session();
    let (ex, inv, s) = rig.streaming_call(&sid, 3);
    rig.engine.close(rig.now, ex);
    rig.drain();
    let big = "x".repeat(300);
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text(big)))).unwrap();
    rig.drain();
    let HttpReply::Pending(back) = rig.resume(&sid, &format!("{s}-1"), Caller::anonymous()) else { panic!() };
    let outs = rig.drain();
    assert!(events(&outs, back).is_empty());
    assert!(closed(&outs, back, CloseReason::EndOfInput));
}

#[test]
fn kept_events_are_bounded_in_total_and_a_caller_below_its_share_keeps_its_own() {
    let mut rig = Rig::new(|l| {
        l.replay_events(10_000).resume_bytes(1 << 20).max_resume_bytes(4000).resume_window(Duration::MAX);
    });
    let (flood, other) = (peer("10.0.0.2"), peer("10.0.0.1"));
    // Alone, the flooder may fill the whole total, and no more: its oldest events go first.
    let fsid = rig.session_as(&flood);
    let (fex, finv, fs) = rig.streaming_call_as(&flood, &fsid, 3);
    rig.engine.close(rig.now, fex);
    rig.drain();
    for n in 2..=80 {
        rig.progress(&finv, n);
    }
    let held = rig.engine.sessions.kept.total();
    assert!(held <= 4000 && held > 3000, "{held}");
    assert_eq!(rig.engine.sessions.kept.of(flood.binding()), held);
    // The other caller's stream, kept beside it, takes the flooder's oldest events...
    let osid = rig.session_as(&other);
    let (oex, oinv, os) = rig.streaming_call_as(&other, &osid, 4);
    rig.engine.close(rig.now, oex);
    rig.drain();
    for n in 2..=6 {
        rig.progress(&oinv, n);
    }
    // ... and keeps them whatever the flooder, now over its share, records after.
    for n in 81..=400 {
        rig.progress(&finv, n);
    }
    assert!(rig.engine.sessions.kept.total() <= 4000);
    assert!(
        rig.engine.sessions.kept.of(flood.binding()) <= 4000 - rig.engine.sessions.kept.of(other.binding())
    );
    let HttpReply::Pending(back) = rig.resume(&osid, &format!("{os}-0"), other.clone()) else { panic!() };
    let ids: Vec<String> = events(&rig.drain(), back).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, (1..=6).map(|n| format!("{os}-{n}")).collect::<Vec<_>>());
    // The flooder's resume is sent what is left of its own: the newest events.
    let HttpReply::Pending(fback) = rig.resume(&fsid, &format!("{fs}-0"), flood.clone()) else { panic!() };
    let ids: Vec<String> = events(&rig.drain(), fback).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids.last(), Some(&format!("{fs}-400")));
    assert!(ids.len() < 40, "{}", ids.len());
    // A session that goes takes its bytes out of the count.
    oinv.ticket.abandon();
    finv.ticket.abandon();
    rig.engine.close(rig.now, back);
    rig.engine.close(rig.now, fback);
    rig.drain();
    let r = Rig::full(rig.request("DELETE", &[("Mcp-Session-Id", &osid)], "", other.clone()));
    assert_eq!(r.status, 200);
    rig.drain();
    assert_eq!(rig.engine.sessions.kept.of(other.binding()), 0);
}

#[test]
fn an_answer_names_what_it_made_the_engine_hold() {
    let mut rig = Rig::new(|_| {});
    // An `initialize` that mints a session: its head names the session.
    let HttpReply::Full { head, .. } = rig.post(&[], INIT) else { panic!("a JSON answer") };
    let sid = head.headers.iter().find(|(k, _)| *k == "Mcp-Session-Id").map(|(_, v)| v.clone()).unwrap();
    assert_eq!(head.holds, [(crate::engine::HeldKind::Session, sid.clone())]);
    // Another request of the session holds nothing new.
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let HttpReply::Full { head, .. } = rig.post(&[("Mcp-Session-Id", &sid)], note) else { panic!() };
    assert!(head.holds.is_empty());
    // A 2026-07-28 `tools/call` answered with a task: its head names the task.
    let job = crate::registry::Tool::new("job", "A task", json!({"type": "object"}))
        .task_support(crate::registry::TaskSupport::Optional);
    rig.engine.registry_mut(rig.now).add_tool(job, 2).unwrap();
    rig.drain();
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "job", "arguments": {}, "_meta": meta}});
    let HttpReply::Full { head, body } = modern_post(&mut rig, &[], &body) else { panic!("a JSON answer") };
    let answer: Value = serde_json::from_slice(&body).unwrap();
    let task = answer["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {answer}"));
    assert_eq!(head.holds, [(crate::engine::HeldKind::Task, task.to_owned())]);
    for o in rig.drain() {
        if let Output::Invoke(inv) = o {
            inv.ticket.abandon();
        }
    }
}

/// A session of `who` and its `GET` stream, with what opening it emitted drained.
fn held_get(rig: &mut Rig, who: &Caller) -> ConnId {
    let sid = rig.session_as(who);
    let HttpReply::Pending(get) = rig.request("GET", &[("Mcp-Session-Id", &sid)], "", who.clone()) else {
        panic!("expected a stream")
    };
    rig.drain();
    get
}

fn revoked(outs: &[Output<u32>], stream: ConnId) -> bool {
    outs.iter().any(|o| matches!(o, Output::Close { conn, reason: CloseReason::Revoked } if *conn == stream))
}

/// A re-check that counts its calls and answers with `answer` of the stored caller.
fn counting_recheck(
    answer: impl Fn(&Caller) -> Option<Caller> + Send + Sync + 'static,
) -> (crate::caller::Recheck, Arc<std::sync::atomic::AtomicUsize>) {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let recheck = crate::caller::Recheck::new(move |c| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        answer(c)
    });
    (recheck, calls)
}

fn gated_tool(name: &str, role: &str) -> Tool {
    Tool::new(name, "Gated", json!({"type": "object"})).gate(Gate::role(role))
}

#[test]
fn a_recheck_that_binds_the_stream_to_someone_else_closes_it() {
    let mut rig = Rig::new(|_| {});
    // Alice's caller comes back with a role; Bob's comes back as another principal.
    let (recheck, calls) = counting_recheck(|c| match c.identity.as_deref() {
        Some("alice") => Some(c.clone().with_role("reader")),
        _ => Some(Caller::identified("mallory")),
    });
    rig.engine.registry_mut(rig.now).set_recheck(Some(recheck));
    let (alice, bob) = (Caller::identified("alice"), Caller::identified("bob"));
    let (a, b) = (held_get(&mut rig, &alice), held_get(&mut rig, &bob));
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0, "opening a stream delivers nothing");
    // Three gated edits in one input: each stream is re-checked once, not once per edit.
    {
        let mut reg = rig.engine.registry_mut(rig.now);
        for (i, name) in ["r1", "r2", "r3"].into_iter().enumerate() {
            reg.add_tool(gated_tool(name, "reader"), 10 + i as u32).unwrap();
        }
    }
    let outs = rig.drain();
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    // The role only the re-check granted let the gated change through to Alice.
    assert!(frames_text(&outs, a).contains("notifications/tools/list_changed"));
    assert!(!revoked(&outs, a));
    assert!(revoked(&outs, b));
    assert!(frames_text(&outs, b).is_empty());
    assert_eq!(rig.engine.status().streams, 1);
    assert_eq!(rig.engine.status().refusals.revoked, 1);
    // Bob's session outlives its stream; only the stream was his creator's to lose.
    assert_eq!(rig.engine.status().sessions, 2);
}

#[test]
fn a_withdrawn_role_hides_a_gated_change_and_a_gone_caller_closes_at_keepalive() {
    let mut rig = Rig::new(|_| {});
    let granted = Arc::new(std::sync::atomic::AtomicU8::new(2));
    let standing = granted.clone();
    // 2: holds "admin"; 1: signed in without it; 0: signed out.
    let (recheck, calls) =
        counting_recheck(move |c| match standing.load(std::sync::atomic::Ordering::SeqCst) {
            2 => Some(Caller::identified("alice").with_role("admin")).filter(|_| c.binding() == "alice"),
            1 => Some(Caller::identified("alice")),
            _ => None,
        });
    rig.engine.registry_mut(rig.now).set_recheck(Some(recheck));
    let a = held_get(&mut rig, &Caller::identified("alice"));
    rig.engine.registry_mut(rig.now).add_tool(gated_tool("one", "admin"), 2).unwrap();
    assert!(frames_text(&rig.drain(), a).contains("notifications/tools/list_changed"));
    granted.store(1, std::sync::atomic::Ordering::SeqCst);
    rig.engine.registry_mut(rig.now).add_tool(gated_tool("two", "admin"), 3).unwrap();
    let outs = rig.drain();
    assert!(frames_text(&outs, a).is_empty(), "{}", frames_text(&outs, a));
    assert!(!revoked(&outs, a));
    // A change nothing gates is still delivered, after the re-check.
    let before = calls.load(std::sync::atomic::Ordering::SeqCst);
    rig.engine.notify_list_changed(rig.now, crate::engine::ChangedList::Tools);
    assert!(frames_text(&rig.drain(), a).contains("notifications/tools/list_changed"));
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), before + 1);
    // A quiet stream whose caller is gone closes at its keep-alive, without the comment.
    granted.store(0, std::sync::atomic::Ordering::SeqCst);
    rig.advance(Duration::from_secs(15));
    let outs = rig.drain();
    assert!(revoked(&outs, a));
    assert!(!frames_text(&outs, a).contains("keep-alive"));
    assert_eq!(rig.engine.status().streams, 0);
}

#[test]
fn a_recheck_runs_only_where_something_is_delivered() {
    let mut rig = Rig::new(|_| {});
    let (recheck, calls) = counting_recheck(|_| None);
    rig.engine.registry_mut(rig.now).set_recheck(Some(recheck));
    // A session with no stream open: a change owed to it waits for a stream to carry it.
    rig.session_as(&Caller::identified("quiet"));
    rig.engine.registry_mut(rig.now).add_tool(gated_tool("g", "admin"), 2).unwrap();
    rig.drain();
    rig.engine.notify_resource_updated(rig.now, "test://nobody-subscribed");
    rig.drain();
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    // A listen stream is held: a change it listens for re-checks it, and closes it.
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": true}}});
    let HttpReply::Pending(ex) = modern_post(&mut rig, &[], &listen) else { panic!("expected a stream") };
    rig.drain();
    rig.engine.registry_mut(rig.now).add_tool(Tool::new("u", "U", json!({"type": "object"})), 3).unwrap();
    let outs = rig.drain();
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(revoked(&outs, ex));
    assert!(!frames_text(&outs, ex).contains("list_changed"));
}

#[test]
fn without_a_recheck_a_stream_keeps_the_caller_it_opened_as() {
    let mut rig = Rig::new(|_| {});
    let (recheck, calls) = counting_recheck(|_| None);
    rig.engine.registry_mut(rig.now).set_recheck(Some(recheck));
    rig.engine.registry_mut(rig.now).set_recheck(None);
    let a = held_get(&mut rig, &Caller::identified("alice").with_role("admin"));
    rig.engine.registry_mut(rig.now).add_tool(gated_tool("g", "admin"), 2).unwrap();
    let outs = rig.drain();
    assert!(frames_text(&outs, a).contains("notifications/tools/list_changed"));
    rig.advance(Duration::from_secs(15));
    let outs = rig.drain();
    assert!(frames_text(&outs, a).contains(": keep-alive"));
    assert!(!revoked(&outs, a));
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn a_resource_update_rechecks_its_subscribers_stream() {
    let mut rig = Rig::new(|_| {});
    rig.engine.config.resource_subscriptions = true;
    let uri = "test://doc";
    let doc = crate::items::Resource::new(uri, "doc").gate(Gate::role("reader"));
    rig.engine.registry_mut(rig.now).add_resource(doc, 2).unwrap();
    let standing = Arc::new(std::sync::atomic::AtomicU8::new(2));
    let now_standing = standing.clone();
    // 2: still a reader; 1: signed in without the role; 0: signed out.
    let (recheck, _) =
        counting_recheck(move |c| match now_standing.load(std::sync::atomic::Ordering::SeqCst) {
            2 => Some(c.clone()),
            1 => Some(Caller::identified("alice")),
            _ => None,
        });
    rig.engine.registry_mut(rig.now).set_recheck(Some(recheck));
    let alice = Caller::identified("alice").with_role("reader");
    let sid = rig.session_as(&alice);
    let subscribe =
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": uri}});
    let r =
        Rig::full(rig.request("POST", &[("Mcp-Session-Id", &sid)], &subscribe.to_string(), alice.clone()));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let HttpReply::Pending(get) = rig.request("GET", &[("Mcp-Session-Id", &sid)], "", alice.clone()) else {
        panic!("expected a stream")
    };
    rig.drain();
    rig.engine.notify_resource_updated(rig.now, uri);
    assert!(frames_text(&rig.drain(), get).contains("notifications/resources/updated"));
    // The role withdrawn: the resource's gate now refuses the stream's caller.
    standing.store(1, std::sync::atomic::Ordering::SeqCst);
    rig.engine.notify_resource_updated(rig.now, uri);
    let outs = rig.drain();
    assert!(frames_text(&outs, get).is_empty());
    assert!(!revoked(&outs, get));
    standing.store(0, std::sync::atomic::Ordering::SeqCst);
    rig.engine.notify_resource_updated(rig.now, uri);
    let outs = rig.drain();
    assert!(revoked(&outs, get));
    assert!(frames_text(&outs, get).is_empty());
}
