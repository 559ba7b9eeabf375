//! Observability: the `mcp::request` and `mcp::session` spans a real stdio session and a real
//! HTTP endpoint produce (captured by a small recording `Layer`), and the status snapshot's
//! refusal counters, the HTTP layer's included (over real sockets).
//!
//! Each test runs on a current-thread runtime with its own recorder as the thread's default
//! subscriber, so every handler task and the driver of its server record into it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_proto::{Caller, ErrorCode, HandlerError, RpcError, Tool, ToolOutput};
use mcp_server::{Server, ToolCall};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One span as the recorder saw it.
#[derive(Debug, Clone, Default)]
struct Seen {
    target: String,
    name: String,
    parent: Option<u64>,
    fields: HashMap<String, String>,
    closed: bool,
}

/// Records every span's target, name, parent and fields (as text), and whether it closed.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<HashMap<u64, Seen>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S> Layer<S> for Recorder
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut seen = Seen {
            target: attrs.metadata().target().to_owned(),
            name: attrs.metadata().name().to_owned(),
            parent: ctx.span_scope(id).and_then(|mut s| s.nth(1)).map(|p| p.id().into_u64()),
            ..Seen::default()
        };
        attrs.record(&mut Fields(&mut seen.fields));
        self.0.lock().unwrap().insert(id.into_u64(), seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(seen) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        if let Some(seen) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            seen.closed = true;
        }
    }
}

impl Recorder {
    fn spans(&self, target: &str) -> Vec<(u64, Seen)> {
        let all = self.0.lock().unwrap();
        let mut v: Vec<(u64, Seen)> =
            all.iter().filter(|(_, s)| s.target == target).map(|(id, s)| (*id, s.clone())).collect();
        v.sort_by_key(|(id, _)| *id);
        v
    }

    fn request(&self, id: &str) -> Seen {
        let found: Vec<Seen> = self
            .spans("mcp::request")
            .into_iter()
            .map(|(_, s)| s)
            .filter(|s| s.fields.get("jsonrpc.request.id").map(String::as_str) == Some(id))
            .collect();
        assert_eq!(found.len(), 1, "one request span with id {id}: {found:#?}");
        found.into_iter().next().unwrap()
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

fn call(id: u64, tool: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
        .to_string()
}

fn server(limits: impl FnOnce(&mut mcp_proto::Limits)) -> Server {
    let schema = json!({"type": "object"});
    let mut builder = Server::builder("obs", "1")
        .tool(Tool::new("echo", "Answers at once", schema.clone()), |_: ToolCall| async {
            ToolOutput::text("hi")
        })
        .tool(Tool::new("quota", "Fails with a public error", schema.clone()), |_: ToolCall| async {
            Err::<ToolOutput, _>(HandlerError::Public(RpcError::new(ErrorCode::Other(-32050), "over quota")))
        })
        .tool(Tool::new("hang", "Never answers", schema), |_: ToolCall| async {
            std::future::pending::<ToolOutput>().await
        });
    limits(&mut builder.config_mut().limits);
    builder.build().unwrap()
}

/// A client end of an in-memory stdio session.
struct Session {
    to_server: tokio::io::DuplexStream,
    from_server: BufReader<tokio::io::DuplexStream>,
    served: tokio::task::JoinHandle<std::io::Result<mcp_server::StdioEnd>>,
}

impl Session {
    fn start(server: &Server, caller: Caller) -> Self {
        let (to_server, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, from_server) = tokio::io::duplex(1 << 16);
        let server = server.clone();
        let served =
            tokio::spawn(async move { mcp_tokio::serve_lines(&server, caller, server_in, server_out).await });
        Session { to_server, from_server: BufReader::new(from_server), served }
    }

    async fn send(&mut self, line: &str) {
        self.to_server.write_all(line.as_bytes()).await.unwrap();
        self.to_server.write_all(b"\n").await.unwrap();
    }

    async fn reply(&mut self) -> Value {
        let mut line = String::new();
        let read = tokio::time::timeout(Duration::from_secs(10), self.from_server.read_line(&mut line));
        read.await.expect("a reply within 10 s").unwrap();
        serde_json::from_str(&line).unwrap()
    }

    async fn handshake(&mut self) {
        self.send(INITIALIZE).await;
        assert_eq!(self.reply().await["id"], "init");
        self.send(INITIALIZED).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn request_and_session_spans_carry_their_fields_and_outcomes() {
    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(recorder.clone()));
    let server = server(|l| {
        l.call_timeout(Some(Duration::from_millis(200)));
    });
    let mut s = Session::start(&server, Caller::identified("alice"));
    s.handshake().await;

    s.send(&call(2, "echo")).await;
    assert_eq!(s.reply().await["result"]["content"][0]["text"], "hi");
    s.send(&call(3, "quota")).await;
    assert_eq!(s.reply().await["error"]["code"], -32050);
    s.send(&call(4, "hang")).await;
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}"#).await;
    s.send(&call(5, "hang")).await;
    let timed_out = s.reply().await;
    assert_eq!(
        (timed_out["id"].clone(), timed_out["error"]["message"].clone()),
        (json!(5), json!("request timed out"))
    );
    // An engine-answered request (no handler) gets its span too.
    s.send(r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#).await;
    assert_eq!(s.reply().await["id"], 6);
    drop(s.to_server);
    assert_eq!(s.served.await.unwrap().unwrap(), mcp_server::StdioEnd::EndOfInput);

    let sessions = recorder.spans("mcp::session");
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    let (session_span, session) = &sessions[0];
    assert_eq!(session.name, "session");
    assert_eq!(session.fields["user.id"], "alice");
    assert_eq!(session.fields["network.transport"], "pipe");
    assert_eq!(session.fields["close_reason"], "EndOfInput");
    assert!(
        session.fields["mcp.session.id"].starts_with('c') && session.fields["mcp.session.id"].contains('.'),
        "{session:?}"
    );
    assert!(session.fields.contains_key("duration_us"));
    assert!(session.closed);

    let requests = recorder.spans("mcp::request");
    assert_eq!(requests.len(), 6, "one span per request, initialize and ping too: {requests:#?}");
    for (id, method) in [("\"init\"", "initialize"), ("6", "ping")] {
        let r = recorder.request(id);
        assert_eq!(
            (r.fields["mcp.method.name"].as_str(), r.fields["outcome"].as_str()),
            (method, "ok"),
            "{r:?}"
        );
        assert_eq!(r.parent, Some(*session_span), "a child of its session: {r:?}");
        assert!(r.closed, "{r:?}");
    }
    for (id, outcome, name) in
        [("2", "ok", "echo"), ("3", "error", "quota"), ("4", "cancelled", "hang"), ("5", "timed_out", "hang")]
    {
        let r = recorder.request(id);
        assert_eq!(r.name, "request");
        assert_eq!(r.fields["mcp.method.name"], "tools/call", "{r:?}");
        assert_eq!(r.fields["gen_ai.tool.name"], name, "{r:?}");
        assert_eq!(r.fields["user.id"], "alice", "{r:?}");
        assert_eq!(r.fields["mcp.session.id"], session.fields["mcp.session.id"], "{r:?}");
        assert_eq!(r.fields["outcome"], outcome, "{r:?}");
        assert!(r.fields["duration_us"].parse::<u64>().is_ok(), "{r:?}");
        assert_eq!(r.parent, Some(*session_span), "a child of its session: {r:?}");
        assert!(r.closed, "{r:?}");
    }
    assert_eq!(recorder.request("3").fields["rpc.response.status_code"], "-32050");
    // The names OpenTelemetry's MCP conventions give, for tracing-opentelemetry to export as is.
    let echo = recorder.request("2");
    assert_eq!(echo.fields["otel.name"], "tools/call echo", "{echo:?}");
    assert_eq!(echo.fields["otel.kind"], "server");
    assert_eq!(echo.fields["gen_ai.operation.name"], "execute_tool");
    assert_eq!(echo.fields["mcp.protocol.version"], "2025-06-18");
    assert_eq!(echo.fields["network.transport"], "pipe");
    assert!(
        !echo.fields.contains_key("error.type") && !echo.fields.contains_key("otel.status_code"),
        "{echo:?}"
    );
    let quota = recorder.request("3");
    assert_eq!(
        (quota.fields["error.type"].as_str(), quota.fields["otel.status_code"].as_str()),
        ("-32050", "ERROR")
    );
    for (id, why) in [("4", "cancelled"), ("5", "timed_out")] {
        let r = recorder.request(id);
        assert_eq!(
            (r.fields["error.type"].as_str(), r.fields["otel.status_code"].as_str()),
            (why, "ERROR"),
            "{r:?}"
        );
        assert!(!r.fields.contains_key("rpc.response.status_code"), "{r:?}");
    }
    assert_eq!(recorder.request("6").fields["otel.name"], "ping");
    assert!(!recorder.request("2").fields.contains_key("rpc.response.status_code"));
    // The timed-out call ran for its timeout at least.
    assert!(recorder.request("5").fields["duration_us"].parse::<u64>().unwrap() >= 200_000);
}

#[tokio::test(flavor = "current_thread")]
async fn refusals_are_counted_by_reason() {
    // Recorded here too: tracing caches a callsite's interest, and a callsite first reached on
    // a thread with no subscriber could be cached as unwanted for the other test's thread.
    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(recorder.clone()));
    let server = server(|l| {
        l.max_connections(1).max_frame_bytes(1024).call_timeout(Some(Duration::from_millis(50)));
    });
    let before = server.status();
    assert_eq!(before.refusals, mcp_proto::Refusals::default());

    let mut first = Session::start(&server, Caller::anonymous());
    first.handshake().await;
    // The connection table is full: the second session is refused.
    let second = Session::start(&server, Caller::anonymous());
    assert!(second.served.await.unwrap().is_err(), "the second connection is refused");
    assert_eq!(server.status().refusals.capacity, 1);
    let refused: Vec<Seen> = recorder
        .spans("mcp::session")
        .into_iter()
        .map(|(_, s)| s)
        .filter(|s| s.fields.get("close_reason").map(String::as_str) == Some("TooManyConnections"))
        .collect();
    assert_eq!(refused.len(), 1, "the refused connection's session span says why");
    assert!(!refused[0].fields.contains_key("mcp.session.id"), "it never got a session");

    first.send(&call(2, "hang")).await;
    assert_eq!(first.reply().await["error"]["message"], "request timed out");
    assert_eq!(server.status().refusals.timed_out, 1);

    // A line over the frame limit ends the session.
    first.send(&"x".repeat(2048)).await;
    assert_eq!(first.reply().await["error"]["code"], -32600);
    assert_eq!(first.served.await.unwrap().unwrap(), mcp_server::StdioEnd::FrameTooLarge);

    let status = server.status();
    assert_eq!((status.refusals.size, status.refusals.frame_too_large), (1, 1));
    assert_eq!(status.connections, 0);
    let metrics: HashMap<String, u64> = status.metrics().collect();
    assert_eq!(metrics["refused_capacity_total"], 1);
    assert_eq!(metrics["refused_timed_out_total"], 1);
    assert_eq!(metrics["refused_frame_too_large_total"], 1);
    assert_eq!(metrics["refused_displaced_total"], 0);
    assert_eq!(metrics["connections"], 0);
    assert_eq!(metrics["shutting_down"], 0);
}

#[tokio::test(flavor = "current_thread")]
async fn requests_the_engine_answers_get_request_spans() {
    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(recorder.clone()));
    // One call in flight fills the server: the next is refused for its share.
    let server = server(|l| {
        l.max_calls(1).call_timeout(Some(Duration::from_millis(300)));
    });
    let mut s = Session::start(&server, Caller::identified("bob"));
    s.handshake().await;

    s.send(r#"{"jsonrpc":"2.0","id":10,"method":"tools/list"}"#).await;
    assert_eq!(s.reply().await["result"]["tools"].as_array().map(Vec::len), Some(3));
    s.send(r#"{"jsonrpc":"2.0","id":11,"method":"ping"}"#).await;
    assert_eq!(s.reply().await["id"], 11);
    s.send(r#"{"jsonrpc":"2.0","id":12,"method":"no/such/method"}"#).await;
    assert_eq!(s.reply().await["error"]["code"], -32601);
    s.send(&call(13, "hang")).await;
    s.send(&call(14, "echo")).await;
    let refused = s.reply().await;
    assert_eq!(refused["id"], 14, "{refused}");
    let refused_code = refused["error"]["code"].as_i64().expect("an error code");
    // Notifications are not requests.
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#).await;
    assert_eq!(s.reply().await["id"], 13, "the hanging call times out");
    drop(s.to_server);
    assert_eq!(s.served.await.unwrap().unwrap(), mcp_server::StdioEnd::EndOfInput);
    assert_eq!(server.status().refusals.share, 1);

    let (session_span, session) = recorder.spans("mcp::session").into_iter().next().expect("a session span");
    for (id, method, name, outcome, code) in [
        ("10", "tools/list", None, "ok", None),
        ("11", "ping", None, "ok", None),
        ("12", "unknown", None, "error", Some(-32601)),
        ("14", "tools/call", Some("echo"), "error", Some(refused_code)),
    ] {
        let r = recorder.request(id);
        assert_eq!(r.name, "request");
        assert_eq!(r.fields["mcp.method.name"], method, "{r:?}");
        assert_eq!(r.fields.get("gen_ai.tool.name").map(String::as_str), name, "{r:?}");
        assert_eq!(r.fields["user.id"], "bob", "{r:?}");
        assert_eq!(r.fields["mcp.session.id"], session.fields["mcp.session.id"], "{r:?}");
        assert_eq!(r.fields["outcome"], outcome, "{r:?}");
        assert_eq!(
            r.fields.get("rpc.response.status_code").map(String::as_str),
            code.map(|c| c.to_string()).as_deref(),
            "{r:?}"
        );
        assert!(r.fields["duration_us"].parse::<u64>().is_ok(), "{r:?}");
        assert_eq!(r.parent, Some(session_span), "a child of its session: {r:?}");
        assert!(r.closed, "{r:?}");
    }
    // The unknown method's name is not echoed anywhere in its span.
    assert!(!format!("{:?}", recorder.request("12")).contains("no/such"));
    // initialize, the four above and the timed-out call: nothing for the notifications.
    assert_eq!(recorder.spans("mcp::request").len(), 6, "{:#?}", recorder.spans("mcp::request"));
    assert_eq!(recorder.request("13").fields["outcome"], "timed_out");
}

/// HTTP: a request answered inside an exchange and one refused before it became one (an unknown
/// session) each get their span. The endpoint runs on a thread of its own, with the recorder as
/// that thread's subscriber.
#[test]
fn http_requests_the_engine_answers_get_request_spans() {
    use mcp_tests::http::{Client, Req};
    let recorder = Recorder::default();
    let server = server(|_| {});
    let (tx, rx) = std::sync::mpsc::channel();
    let layer = recorder.clone();
    std::thread::spawn(move || {
        let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            mcp_tokio::serve_http(listener, server, mcp_proto::http::HttpConfig::default()).await
        })
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let post = |req: Req| Client::connect(addr).unwrap().request(&req).unwrap();

    let init = post(Req::post(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
    ));
    assert_eq!(init.status(), 200);
    let sid = init.header("mcp-session-id").expect("a session").to_owned();
    let in_session = |body: &str| {
        Req::post(body.to_owned()).header("Mcp-Session-Id", &sid).header("MCP-Protocol-Version", "2025-06-18")
    };
    assert_eq!(post(in_session(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)).status(), 202);
    let list = post(in_session(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#));
    assert_eq!(list.status(), 200);
    let lost = Req::post(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}"#)
        .header("Mcp-Session-Id", "no-such-session")
        .header("MCP-Protocol-Version", "2025-06-18");
    assert_eq!(post(lost).status(), 404);

    // The spans close on the server's thread as it answers; the responses are already read.
    let spans = mcp_tests::http::poll_until("three request spans", Duration::from_secs(10), || {
        let closed = recorder.spans("mcp::request").into_iter().filter(|(_, s)| s.closed).count();
        Ok((closed >= 3).then_some(()))
    });
    assert!(spans.is_ok(), "{spans:?}: {:#?}", recorder.spans("mcp::request"));
    let init = recorder.request("1");
    let list = recorder.request("2");
    let lost = recorder.request("3");
    assert_eq!(
        (init.fields["mcp.method.name"].as_str(), init.fields["outcome"].as_str()),
        ("initialize", "ok")
    );
    assert_eq!(
        (list.fields["mcp.method.name"].as_str(), list.fields["outcome"].as_str()),
        ("tools/list", "ok")
    );
    assert_eq!(init.fields["mcp.session.id"], list.fields["mcp.session.id"], "both in the legacy session");
    assert_eq!(list.fields["client.address"], "127.0.0.1", "the peer address stands in for an identity");
    assert_eq!(
        (
            lost.fields["mcp.method.name"].as_str(),
            lost.fields["gen_ai.tool.name"].as_str(),
            lost.fields["outcome"].as_str()
        ),
        ("tools/call", "echo", "error")
    );
    assert_eq!(lost.fields["rpc.response.status_code"], "-32001");
    assert!(!lost.fields.contains_key("mcp.session.id"), "refused before it reached a session: {lost:?}");
    assert_eq!(list.fields["network.transport"], "tcp");
    assert_eq!(recorder.spans("mcp::request").len(), 3, "{:#?}", recorder.spans("mcp::request"));
}

/// Waits until the HTTP refusal counter `name` of `server` reaches `want`.
fn http_counter_reaches(server: &Server, name: &str, want: u64) -> Result<(), String> {
    let counter =
        |s: &Server| s.status().http_refusals.iter().find(|(n, _)| *n == name).map_or(u64::MAX, |(_, v)| v);
    mcp_tests::http::poll_until(name, Duration::from_secs(10), || {
        Ok((counter(server) >= want).then_some(()))
    })?;
    let got = counter(server);
    mcp_tests::http::ensure(got == want, || format!("{name}: {got}, expected {want}"))
}

/// The connection bounds of the accept loop, each refusal counted by reason: past the
/// per-address bound, past the total with no one above their share to displace, and the
/// connection displaced to make room.
#[test]
fn http_connection_refusals_are_counted_by_reason() {
    use mcp_tests::http::{each, ensure, serve, Client, Shim};
    use std::net::{IpAddr, Ipv4Addr};
    each(|shim: Shim| {
        let server = server(|l| {
            l.max_http_connections(2).max_http_connections_per_peer(Some(2));
        });
        let addr = serve(shim, server.clone(), mcp_proto::http::HttpConfig::default());
        let from = |last: u8| {
            let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, last));
            Client::connect_from(addr, ip).map_err(|e| format!("connect from {ip}: {e}"))
        };
        let a1 = from(1)?;
        let _a2 = from(1)?;
        // 127.0.0.1 holds its two: a third is closed unread.
        let mut a3 = from(1)?;
        ensure(a3.closed_within(Duration::from_secs(5)), || "a third connection of one address".into())?;
        http_counter_reaches(&server, "per_peer", 1)?;
        // Every place is taken; 127.0.0.2 is below its share: the oldest idle of .1 makes room.
        let _b1 = from(2)?;
        http_counter_reaches(&server, "displaced", 1)?;
        let mut a1 = a1;
        ensure(a1.closed_within(Duration::from_secs(5)), || "the displaced connection is cut".into())?;
        // Now .1 and .2 hold one each, their share: .3 finds no one to displace.
        let mut c1 = from(3)?;
        ensure(c1.closed_within(Duration::from_secs(5)), || "a connection past the total".into())?;
        http_counter_reaches(&server, "connections", 1)?;
        let metrics: HashMap<String, u64> = server.status().metrics().collect();
        ensure(
            (metrics["http_refused_per_peer_total"], metrics["http_refused_displaced_total"]) == (1, 1)
                && metrics["http_refused_connections_total"] == 1,
            || format!("metrics: {metrics:?}"),
        )
    });
}

/// What the HTTP layer refuses before the engine sees a request, each counted by reason: a head
/// that never completes, a head over its bound, a head for another path, a body declared over
/// the frame bound, a body that stops arriving, a body that cannot be read.
#[test]
fn http_request_refusals_are_counted_by_reason() {
    use mcp_tests::http::{each, ensure, serve, Client, Req, Shim};
    each(|shim: Shim| {
        let server = server(|l| {
            l.header_read_timeout(Duration::from_millis(300))
                .body_read_timeout(Duration::from_millis(300))
                .max_frame_bytes(4096);
        });
        let addr = serve(shim, server.clone(), mcp_proto::http::HttpConfig::default());
        let connect = || Client::connect(addr).map_err(|e| format!("connect: {e}"));
        let status = |req: Req| -> Result<u16, String> { Ok(connect()?.request(&req)?.status()) };

        // Half a head, then nothing.
        let mut idle = connect()?;
        idle.send(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n").map_err(|e| e.to_string())?;
        ensure(idle.closed_within(Duration::from_secs(5)), || "a head that never completes".into())?;
        http_counter_reaches(&server, "head_timeout", 1)?;
        drop(idle);

        let big = Req::post(LIST).header("X-Padding", &"p".repeat(10 * 1024));
        ensure(status(big)? == 431, || "a head over its bound: 431".into())?;
        http_counter_reaches(&server, "head_too_large", 1)?;

        ensure(status(Req::new("POST", "/elsewhere").body(LIST))? == 404, || "another path: 404".into())?;
        http_counter_reaches(&server, "head_rejected", 1)?;

        ensure(status(Req::post(vec![b' '; 8192]))? == 413, || "a body over the frame bound: 413".into())?;
        http_counter_reaches(&server, "body_too_large", 1)?;

        let mut slow = connect()?;
        let head = Req::post(LIST).without("content-length").header("Content-Length", "100");
        let mut bytes = head.to_bytes();
        bytes.truncate(bytes.len() - LIST.len() + 10);
        slow.send(&bytes).map_err(|e| e.to_string())?;
        let resp = slow.response()?;
        ensure(resp.status() == 408, || format!("a body that stops arriving: {}", resp.status()))?;
        http_counter_reaches(&server, "body_timeout", 1)?;

        let mut broken = connect()?;
        let head = Req::post(Vec::new()).without("content-length").header("Transfer-Encoding", "chunked");
        let mut bytes = head.to_bytes();
        bytes.extend_from_slice(b"zz\r\nnot a chunk\r\n");
        broken.send(&bytes).map_err(|e| e.to_string())?;
        let resp = broken.response()?;
        ensure(resp.status() == 400, || format!("a body that cannot be read: {}", resp.status()))?;
        http_counter_reaches(&server, "body_broken", 1)?;

        // None of it reached the engine; the layer's refusals are its own.
        ensure(server.status().refusals == mcp_proto::Refusals::default(), || "engine refusals".into())?;
        let metrics: HashMap<String, u64> = server.status().metrics().collect();
        let http: Vec<(String, u64)> = {
            let mut v: Vec<_> = metrics.into_iter().filter(|(k, _)| k.starts_with("http_refused_")).collect();
            v.sort();
            v
        };
        let want: Vec<(String, u64)> = [
            ("auth_unavailable", 0),
            ("body_broken", 1),
            ("body_timeout", 1),
            ("body_too_large", 1),
            ("connections", 0),
            ("displaced", 0),
            ("head_rejected", 1),
            ("head_timeout", 1),
            ("head_too_large", 1),
            ("identify_failed", 0),
            ("per_peer", 0),
            ("unauthorized", 0),
            ("unidentified", 0),
        ]
        .into_iter()
        .map(|(k, v)| (format!("http_refused_{k}_total"), v))
        .collect();
        ensure(http == want, || format!("{http:?}"))
    });
}
