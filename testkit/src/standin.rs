//! One shim stand-in: a fixed engine setup, deterministic stand-in handlers, and [`StandIn`],
//! which drives an engine the way a shim must (drain the output after every input, run what it
//! is asked to, answer every ticket) and checks the shim contract as it goes.

use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use mcp_proto::{
    Caller, CloseReason, Completion, Config, ConnId, ConnKind, Content, Engine, ErrorCode, HandlerError,
    Implementation, KeyRing, Limits, Output, Prompt, PromptArgument, PromptMessage, PromptOutput, Reply,
    Request, Resource, ResourceContents, ResourceTemplate, RpcError, Tool, ToolOutput,
};
use serde_json::{json, Map, Value};

/// One `Instant` for the whole process, so runs differ only by the offsets the input chooses.
pub fn base_time() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// A configuration with a fixed MAC key and entropy seed (cursors and session ids are
/// reproducible) and the given limits.
pub fn config(limits: Limits, call_timeout: Option<Duration>) -> Config {
    let mut c = Config::new(Implementation::new("fuzz", "0.0.0"), KeyRing::new([0x5a; 32]));
    c.seed = Some(mcp_proto::Seed([0xa5; 32]));
    // Every capability on, so the targets reach logging and subscription paths too.
    c.logging = true;
    c.resource_subscriptions = true;
    c.limits = limits;
    c.limits.call_timeout(call_timeout);
    c
}

/// Tools every target registers.
pub const TOOLS: [&str; 4] = ["echo", "structured", "big", "array_out"];

/// Registers the tools, a static resource, a template and a prompt, plus `fillers` extra tools
/// so that `tools/list` spans several pages when the page size is small.
pub fn register(engine: &mut Engine<()>, fillers: usize) {
    let mut r = engine.registry_mut(base_time());
    let echo = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}, "fail": {"type": "string"}},
        "required": ["text"]
    });
    r.add_tool(Tool::new("echo", "Echoes text", echo), ()).expect("echo");
    let structured =
        Tool::new("structured", "Structured output", json!({"type": "object"})).output_schema(json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"]
        }));
    r.add_tool(structured, ()).expect("structured");
    let big = json!({"type": "object", "properties": {"size": {"type": "integer", "minimum": 0}}});
    r.add_tool(Tool::new("big", "Returns size bytes", big), ()).expect("big");
    // Legal only on 2026-07-28 (non-object output schema): hidden from older sessions.
    let array_out = Tool::new("array_out", "Array output", json!({"type": "object"}))
        .output_schema(json!({"type": "array", "items": {"type": "integer"}}));
    r.add_tool(array_out, ()).expect("array_out");
    for i in 0..fillers {
        r.add_tool(Tool::new(format!("t{i}"), "filler", json!({"type": "object"})), ()).expect("filler");
    }
    r.add_resource(Resource::new("test://static", "static").mime_type("text/plain"), ()).expect("resource");
    r.add_template(ResourceTemplate::new("test://items/{id}", "items"), (), Some(())).expect("template");
    let greet = Prompt::new("greet").argument(PromptArgument::required("name", "who"));
    r.add_prompt(greet, (), Some(())).expect("prompt");
}

/// A small JSON value built from fuzz input.
#[derive(Arbitrary, Debug, Clone)]
pub enum SmallJson {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<SmallJson>),
    /// An object (repeated keys collapse).
    Obj(Vec<(String, SmallJson)>),
}

impl SmallJson {
    /// As a `Value`.
    pub fn to_value(&self) -> Value {
        match self {
            SmallJson::Null => Value::Null,
            SmallJson::Bool(b) => Value::Bool(*b),
            SmallJson::Int(i) => Value::from(*i),
            SmallJson::Str(s) => Value::String(s.clone()),
            SmallJson::Arr(a) => Value::Array(a.iter().map(SmallJson::to_value).collect()),
            SmallJson::Obj(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), v.to_value())).collect()),
        }
    }
}

/// How a stand-in handler answers an invocation.
#[derive(Arbitrary, Debug, Clone)]
pub enum ReplyKind {
    /// What a correct handler would return for the request (see [`reply`]).
    Natural,
    /// A text result.
    Text(String),
    /// `structuredContent` (checked against the tool's output schema, if any).
    Structured(SmallJson),
    /// A text result of this many bytes (times 16), to cross the response ceiling.
    Big(u16),
    /// A tool-level failure (`isError: true`).
    ToolError(String),
    /// A public JSON-RPC error with this code and message.
    Public(i32, String),
    /// A private failure.
    Private,
    /// The handler panicked.
    Panicked,
    /// The handler was cancelled.
    Cancelled,
    /// A reply of the wrong kind for the request (a shim bug the engine must absorb).
    WrongKind,
}

/// The reply the stand-in handler gives to `request`.
pub fn reply(request: &Request, kind: &ReplyKind) -> Reply {
    let err = |e: HandlerError| match request {
        Request::ReadResource { .. } => Reply::Resource(Err(e)),
        Request::GetPrompt { .. } => Reply::Prompt(Err(e)),
        Request::Complete { .. } => Reply::Completion(Err(e)),
        _ => Reply::Tool(Err(e)),
    };
    match kind {
        ReplyKind::Natural => natural(request),
        ReplyKind::Text(t) => Reply::Tool(Ok(ToolOutput::text(t.clone()))),
        ReplyKind::Structured(v) => Reply::Tool(Ok(ToolOutput::structured(v.to_value()))),
        ReplyKind::Big(n) => Reply::Tool(Ok(ToolOutput::text("x".repeat(usize::from(*n) * 16)))),
        ReplyKind::ToolError(t) => Reply::Tool(Ok(ToolOutput::error(t.clone()))),
        ReplyKind::Public(code, msg) => {
            err(HandlerError::Public(RpcError::new(ErrorCode::Other(i64::from(*code)), msg.clone())))
        }
        ReplyKind::Private => err(HandlerError::private("private detail that must not leak")),
        ReplyKind::Panicked => err(HandlerError::Panicked),
        ReplyKind::Cancelled => err(HandlerError::Cancelled),
        ReplyKind::WrongKind => match request {
            Request::CallTool { .. } => Reply::Resource(Ok(Vec::new())),
            _ => Reply::Tool(Ok(ToolOutput::text("wrong kind"))),
        },
    }
}

/// What a correct handler returns. `echo` also honours `"fail"` in its arguments, so that raw
/// frames alone can reach every completion path.
fn natural(request: &Request) -> Reply {
    match request {
        Request::CallTool { name, arguments } => {
            let fail = arguments.get("fail").and_then(Value::as_str);
            let kind = match fail {
                Some("public") => ReplyKind::Public(-1, "public failure".into()),
                Some("private") => ReplyKind::Private,
                Some("panic") => ReplyKind::Panicked,
                Some("cancel") => ReplyKind::Cancelled,
                Some("tool") => ReplyKind::ToolError("tool failure".into()),
                Some("wrong") => ReplyKind::WrongKind,
                _ => ReplyKind::Natural,
            };
            if !matches!(kind, ReplyKind::Natural) {
                return reply(request, &kind);
            }
            let out = match name.as_str() {
                "echo" => ToolOutput::text(arguments.get("text").and_then(Value::as_str).unwrap_or_default()),
                "structured" => {
                    ToolOutput::structured(arguments.get("value").cloned().unwrap_or(json!({"n": 1})))
                }
                "big" => {
                    let size = arguments.get("size").and_then(Value::as_u64).unwrap_or(0).min(1 << 20);
                    ToolOutput::text("x".repeat(usize::try_from(size).unwrap_or(0)))
                }
                "array_out" => ToolOutput::structured(json!([1, 2, 3])),
                _ => ToolOutput::text("ok"),
            };
            Reply::Tool(Ok(out))
        }
        Request::ReadResource { uri, .. } => {
            Reply::Resource(Ok(vec![ResourceContents::text(uri.clone(), "text/plain", "contents")]))
        }
        Request::GetPrompt { arguments, .. } => {
            let name = arguments.get("name").cloned().unwrap_or_default();
            Reply::Prompt(Ok(PromptOutput::messages(vec![PromptMessage::user(Content::text(format!(
                "Hi {name}"
            )))])))
        }
        Request::Complete { value, .. } => {
            Reply::Completion(Ok(Completion::values(vec![format!("{value}1")])))
        }
        _ => Reply::Tool(Err(HandlerError::Panicked)),
    }
}

/// Convenience: a `Map` from pairs.
pub fn object(pairs: Vec<(&str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// What one [`StandIn::drain`] saw, in the order the engine emitted it.
#[derive(Debug, Default)]
pub struct Drained {
    /// Every `Output::Frame`: where, and the bytes.
    pub frames: Vec<(ConnId, Vec<u8>)>,
    /// Every `Output::Close`.
    pub closes: Vec<(ConnId, CloseReason)>,
    /// How many invocations were handed out and answered.
    pub invoked: usize,
    /// How many of them the engine cancelled before they were answered.
    pub cancelled: usize,
}

impl Drained {
    /// The bytes of every frame, in order, wherever they went.
    pub fn bytes(&self) -> impl Iterator<Item = &[u8]> {
        self.frames.iter().map(|(_, b)| b.as_slice())
    }
}

/// A shim stand-in over one engine with unit handlers: the engine is fed, then drained; every
/// invocation it hands out is answered at once by a handler function (by default [`reply`] with
/// [`ReplyKind::Natural`]) and the engine drained again, until it is quiet.
///
/// Checked as it goes (a panic on a violation): a `Cancel` names a call handed out in the same
/// round and not cancelled before, and `complete` is `Stale` exactly when the call was cancelled.
/// HTTP outputs (`Respond`, `Stream`) are not expected on the stdio connections this drives.
pub struct StandIn {
    /// The engine, for inputs this type has no method for.
    pub engine: Engine<()>,
    /// The clock every input is given; advance it by hand.
    pub now: Instant,
}

impl StandIn {
    /// A fresh engine from `config`, at [`base_time`], its registry filled by [`register`] with
    /// `fillers` extra tools (no output is pending).
    pub fn new(config: Config, fillers: usize) -> Self {
        let now = base_time();
        let mut engine = Engine::new(config, now);
        register(&mut engine, fillers);
        let mut s = StandIn { engine, now };
        s.drain();
        s
    }

    /// A fresh engine from `config` with an empty registry.
    pub fn bare(config: Config) -> Self {
        let now = base_time();
        StandIn { engine: Engine::new(config, now), now }
    }

    /// Opens an anonymous stdio connection; with `version`, runs `initialize` (at that version)
    /// and `notifications/initialized` on it, discarding the answers.
    ///
    /// Panics when the engine refuses the connection (a setup error in a test).
    pub fn stdio(&mut self, version: Option<&str>) -> ConnId {
        let conn = match self.engine.open(self.now, ConnKind::Stdio, Caller::anonymous()) {
            Ok(conn) => conn,
            Err(e) => panic!("the stand-in's connection was refused: {e:?}"),
        };
        if let Some(v) = version {
            let init = format!(
                r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{v}","capabilities":{{}},"clientInfo":{{"name":"standin","version":"1"}}}}}}"#
            );
            self.frame(conn, init.as_bytes());
            self.frame(conn, br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        }
        conn
    }

    /// Feeds one frame on `conn` and drains with the natural handlers.
    pub fn frame(&mut self, conn: ConnId, bytes: &[u8]) -> Drained {
        self.engine.handle_frame(self.now, conn, bytes);
        self.drain()
    }

    /// Feeds one frame on `conn` and drains, answering invocations with `handler`.
    pub fn frame_with(
        &mut self,
        conn: ConnId,
        bytes: &[u8],
        handler: impl FnMut(&Request) -> Reply,
    ) -> Drained {
        self.engine.handle_frame(self.now, conn, bytes);
        self.drain_with(handler)
    }

    /// Feeds one frame and returns the single frame it was answered with.
    ///
    /// Panics unless exactly one frame came out (a setup error in a bench or test).
    pub fn answer(&mut self, conn: ConnId, bytes: &[u8]) -> Vec<u8> {
        let mut d = self.frame(conn, bytes);
        match (d.frames.pop(), d.frames.is_empty()) {
            (Some((_, bytes)), true) => bytes,
            _ => panic!("expected exactly one frame in answer to {}", String::from_utf8_lossy(bytes)),
        }
    }

    /// Drains with the natural handlers.
    pub fn drain(&mut self) -> Drained {
        self.drain_with(|r| reply(r, &ReplyKind::Natural))
    }

    /// Drains the engine, answers every invocation with `handler`, and repeats until quiet.
    pub fn drain_with(&mut self, mut handler: impl FnMut(&Request) -> Reply) -> Drained {
        let mut seen = Drained::default();
        loop {
            let mut handed = Vec::new();
            let mut cancelled = HashSet::new();
            while let Some(out) = self.engine.poll_output() {
                match out {
                    Output::Frame { conn, bytes } => seen.frames.push((conn, bytes)),
                    Output::Invoke(inv) => handed.push(inv),
                    Output::Cancel { call, .. } => {
                        assert!(
                            handed.iter().any(|i| i.ticket.call() == call),
                            "Cancel for {call:?}, which the shim has not been handed (yet)"
                        );
                        assert!(cancelled.insert(call), "Cancel twice for {call:?}");
                    }
                    Output::Close { conn, reason } => seen.closes.push((conn, reason)),
                    other => panic!("the stand-in drives stdio only; the engine emitted {other:?}"),
                }
            }
            if handed.is_empty() {
                return seen;
            }
            for inv in handed {
                let stale = cancelled.contains(&inv.ticket.call());
                let r = handler(&inv.request);
                let result = self.engine.complete(self.now, inv.ticket, r);
                assert_eq!(result.is_err(), stale, "complete is Stale exactly when the call was cancelled");
                seen.invoked += 1;
                seen.cancelled += usize::from(stale);
            }
        }
    }

    /// Advances the clock by `by` and fires what fell due, then drains.
    pub fn advance(&mut self, by: Duration) -> Drained {
        self.now += by;
        self.engine.handle_timeout(self.now);
        self.drain()
    }
}
