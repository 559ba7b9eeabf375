//! Observability: the `mcp::request` and `mcp::session` spans a real stdio session produces
//! (captured by a small recording `Layer`), and the status snapshot's refusal counters.
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
            .filter(|s| s.fields.get("id").map(String::as_str) == Some(id))
            .collect();
        assert_eq!(found.len(), 1, "one request span with id {id}: {found:#?}");
        found.into_iter().next().unwrap()
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

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
    // Engine-answered requests (ping, lists) reach no handler and get no request span.
    s.send(r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#).await;
    assert_eq!(s.reply().await["id"], 6);
    drop(s.to_server);
    assert_eq!(s.served.await.unwrap().unwrap(), mcp_server::StdioEnd::EndOfInput);

    let sessions = recorder.spans("mcp::session");
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    let (session_span, session) = &sessions[0];
    assert_eq!(session.name, "session");
    assert_eq!(session.fields["caller"], "alice");
    assert_eq!(session.fields["transport"], "stdio");
    assert_eq!(session.fields["close_reason"], "EndOfInput");
    assert!(
        session.fields["session"].starts_with('c') && session.fields["session"].contains('.'),
        "{session:?}"
    );
    assert!(session.fields.contains_key("duration_us"));
    assert!(session.closed);

    let requests = recorder.spans("mcp::request");
    assert_eq!(requests.len(), 4, "one span per handled request: {requests:#?}");
    for (id, outcome, name) in
        [("2", "ok", "echo"), ("3", "error", "quota"), ("4", "cancelled", "hang"), ("5", "timed_out", "hang")]
    {
        let r = recorder.request(id);
        assert_eq!(r.name, "request");
        assert_eq!(r.fields["method"], "tools/call", "{r:?}");
        assert_eq!(r.fields["name"], name, "{r:?}");
        assert_eq!(r.fields["caller"], "alice", "{r:?}");
        assert_eq!(r.fields["session"], session.fields["session"], "{r:?}");
        assert_eq!(r.fields["outcome"], outcome, "{r:?}");
        assert!(r.fields["duration_us"].parse::<u64>().is_ok(), "{r:?}");
        assert_eq!(r.parent, Some(*session_span), "a child of its session: {r:?}");
        assert!(r.closed, "{r:?}");
    }
    assert_eq!(recorder.request("3").fields["error_code"], "-32050");
    assert!(!recorder.request("2").fields.contains_key("error_code"));
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
    assert!(!refused[0].fields.contains_key("session"), "it never got a session");

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
