//! Structured fuzzing of the engine: an `Arbitrary` list of operations (frames, completions,
//! clock steps, closes, new connections, registry changes) applied to one engine with small
//! limits and a call timeout, checked after every step.
//!
//! Invariants:
//! - no panic;
//! - every request is answered at most once: per connection, answers for an id never outnumber
//!   the requests sent with it (ids compared by value, as the engine does);
//! - on a connection that only ever carried well-formed frames (no raw bytes, nothing over the
//!   frame limit), every request is answered exactly once by the end, except those excused:
//!   targets of `notifications/cancelled`, `subscriptions/listen` streams, and members of a
//!   batch the session refuses whole;
//! - `complete` is `Stale` exactly when the engine has emitted `Cancel` for that call, and a
//!   `Cancel` names a call the shim was asked to run and has not finished;
//! - nothing is emitted for a connection after its `Close`; `in_flight` equals the calls the
//!   shim holds for it; no call outlives its deadline once `handle_timeout` has run;
//! - output is bounded: every frame is valid JSON-RPC within `max_response_bytes`, and one
//!   input yields a bounded number of outputs.
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::{
    answerable_ids, base_time, canon_id, check_frame, config, register, reply, ReplyKind, SmallJson,
};
use arbitrary::Arbitrary;
use mcp_proto::{
    CallId, Caller, CloseReason, ConnId, Engine, FrameOutcome, Limits, Output, Request, Ticket, Tool,
};
use serde_json::{json, Map, Value};

const MAX_CONNECTIONS: usize = 3;
const MAX_IN_FLIGHT: usize = 4;
const MAX_BATCH: usize = 4;
const MAX_FRAME: usize = 4096;
const MAX_RESPONSE: usize = 8192;
const MAX_ID_BYTES: usize = 64;
const CALL_TIMEOUT: Duration = Duration::from_millis(100);

#[derive(Arbitrary, Debug)]
pub enum Op {
    Frame {
        conn: u8,
        frame: FrameSpec,
    },
    Complete {
        ticket: u8,
        reply: ReplyKind,
    },
    AdvanceClock {
        ms: u8,
    },
    /// A wakeup that may come early: it must change nothing that is not due.
    SpuriousTimeout,
    CloseInput {
        conn: u8,
    },
    Close {
        conn: u8,
    },
    /// A stdio line over the frame limit.
    Oversized {
        conn: u8,
    },
    OpenConn {
        identity: Option<u8>,
    },
    /// Unregisters or re-registers a tool (list-changed notifications).
    ToggleTool,
}

#[derive(Arbitrary, Debug)]
pub enum FrameSpec {
    Raw(Vec<u8>),
    Message(Msg),
    Batch(Vec<Msg>),
}

#[derive(Arbitrary, Debug)]
pub struct Msg {
    pub id: IdSpec,
    pub method: MethodSpec,
    pub meta: MetaSpec,
    pub envelope: EnvelopeSpec,
}

#[derive(Arbitrary, Debug)]
pub enum IdSpec {
    /// A notification.
    None,
    Int(u8),
    Neg(u8),
    Str(u8),
    /// The same id as `Str`, spelled with an escape.
    StrEscaped(u8),
    /// Past 2^53: must round-trip exactly.
    Big(u8),
    Null,
    Float,
    Bool,
    /// Over the id limit.
    Long,
}

impl IdSpec {
    fn raw(&self) -> Option<String> {
        Some(match self {
            IdSpec::None => return None,
            IdSpec::Int(n) => (n % 8).to_string(),
            IdSpec::Neg(n) => format!("-{}", n % 4 + 1),
            IdSpec::Str(n) => format!("\"s{}\"", n % 8),
            IdSpec::StrEscaped(n) => format!("\"\\u0073{}\"", n % 8),
            IdSpec::Big(n) => format!("900719925474099{}", n % 10),
            IdSpec::Null => "null".into(),
            IdSpec::Float => "1.5".into(),
            IdSpec::Bool => "true".into(),
            IdSpec::Long => format!("\"{}\"", "l".repeat(MAX_ID_BYTES + 1)),
        })
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum VersionSpec {
    V20250326,
    V20250618,
    V20251125,
    V20260728,
    Unknown,
}

impl VersionSpec {
    fn as_str(self) -> &'static str {
        match self {
            VersionSpec::V20250326 => "2025-03-26",
            VersionSpec::V20250618 => "2025-06-18",
            VersionSpec::V20251125 => "2025-11-25",
            VersionSpec::V20260728 => "2026-07-28",
            VersionSpec::Unknown => "1999-01-01",
        }
    }
}

#[derive(Arbitrary, Debug)]
pub enum MetaSpec {
    None,
    /// Stateless `_meta` with protocol version and client capabilities.
    Modern(VersionSpec),
    ModernWithoutCapabilities(VersionSpec),
    NotAnObject,
}

#[derive(Arbitrary, Debug)]
pub enum EnvelopeSpec {
    Valid,
    WrongJsonrpc,
    MissingJsonrpc,
    UnknownMember,
    RepeatedMethod,
    WithResult,
    ParamsNotObject,
}

#[derive(Arbitrary, Debug)]
pub enum MethodSpec {
    Initialize { version: VersionSpec, complete: bool },
    Initialized,
    Ping,
    ToolsList { cursor: CursorSpec },
    ToolsCall { tool: ToolSpec, args: ArgsSpec },
    ResourcesList { cursor: CursorSpec },
    TemplatesList { cursor: CursorSpec },
    ResourcesRead { uri: UriSpec },
    PromptsList { cursor: CursorSpec },
    PromptsGet { name: Option<String> },
    Complete { prompt: bool, value: String },
    Subscribe { uri: UriSpec },
    Unsubscribe { uri: UriSpec },
    SetLevel { level: u8 },
    Cancelled { target: IdSpec },
    Progress,
    Discover,
    Listen { tools: bool, uris: Vec<UriSpec> },
    Unknown(String),
    NonString(i64),
}

#[derive(Arbitrary, Debug)]
pub enum CursorSpec {
    None,
    Captured(u8),
    Garbage(String),
    NotAString,
}

#[derive(Arbitrary, Debug)]
pub enum ToolSpec {
    Echo,
    Structured,
    Big,
    ArrayOut,
    Filler(u8),
    Named(String),
}

#[derive(Arbitrary, Debug)]
pub enum ArgsSpec {
    Absent,
    Null,
    NotAnObject,
    Text(String),
    Value(SmallJson),
    Size(u16),
    RepeatedKey,
    CaseFoldedKey,
    Deep(u8),
}

#[derive(Arbitrary, Debug)]
pub enum UriSpec {
    Static,
    Item(u8),
    Named(String),
    Long,
}

impl UriSpec {
    fn value(&self) -> Value {
        match self {
            UriSpec::Static => json!("test://static"),
            UriSpec::Item(n) => json!(format!("test://items/{n}")),
            UriSpec::Named(s) => json!(s),
            UriSpec::Long => json!(format!("test://items/{}", "x".repeat(5000))),
        }
    }
}

/// Renders params as JSON text; raw text where serde_json could not write it (repeated keys,
/// depth).
fn render_params(method: &MethodSpec, cursors: &[String]) -> (String, Option<String>) {
    let cursor = |c: &CursorSpec| -> Option<Value> {
        match c {
            CursorSpec::None => None,
            CursorSpec::Captured(i) if !cursors.is_empty() => {
                Some(json!(cursors[usize::from(*i) % cursors.len()]))
            }
            CursorSpec::Captured(_) => None,
            CursorSpec::Garbage(s) => Some(json!(s)),
            CursorSpec::NotAString => Some(json!(7)),
        }
    };
    let with_cursor = |c: &CursorSpec| {
        let mut m = Map::new();
        if let Some(c) = cursor(c) {
            m.insert("cursor".into(), c);
        }
        Value::Object(m).to_string()
    };
    let name = |m: &str| m.to_owned();
    match method {
        MethodSpec::Initialize { version, complete } => {
            let mut p = json!({"protocolVersion": version.as_str(), "capabilities": {}});
            if *complete {
                p["clientInfo"] = json!({"name": "fuzz", "version": "0"});
            }
            (p.to_string(), Some(name("initialize")))
        }
        MethodSpec::Initialized => ("{}".into(), Some(name("notifications/initialized"))),
        MethodSpec::Ping => ("{}".into(), Some(name("ping"))),
        MethodSpec::ToolsList { cursor } => (with_cursor(cursor), Some(name("tools/list"))),
        MethodSpec::ResourcesList { cursor } => (with_cursor(cursor), Some(name("resources/list"))),
        MethodSpec::TemplatesList { cursor } => (with_cursor(cursor), Some(name("resources/templates/list"))),
        MethodSpec::PromptsList { cursor } => (with_cursor(cursor), Some(name("prompts/list"))),
        MethodSpec::ToolsCall { tool, args } => {
            let tool = match tool {
                ToolSpec::Echo => "echo".to_owned(),
                ToolSpec::Structured => "structured".to_owned(),
                ToolSpec::Big => "big".to_owned(),
                ToolSpec::ArrayOut => "array_out".to_owned(),
                ToolSpec::Filler(n) => format!("t{}", n % 4),
                ToolSpec::Named(s) => s.clone(),
            };
            let args = match args {
                ArgsSpec::Absent => None,
                ArgsSpec::Null => Some("null".to_owned()),
                ArgsSpec::NotAnObject => Some("[1]".to_owned()),
                ArgsSpec::Text(t) => Some(json!({"text": t}).to_string()),
                ArgsSpec::Value(v) => Some(json!({"text": "v", "value": v.to_value()}).to_string()),
                ArgsSpec::Size(n) => Some(json!({"size": n}).to_string()),
                ArgsSpec::RepeatedKey => Some(r#"{"text":"a","text":"b"}"#.to_owned()),
                ArgsSpec::CaseFoldedKey => Some(r#"{"text":"a","TEXT":"b"}"#.to_owned()),
                ArgsSpec::Deep(d) => {
                    let d = usize::from(*d);
                    Some(format!(r#"{{"text":"d","x":{}{}}}"#, "[".repeat(d), "]".repeat(d)))
                }
            };
            let mut p = format!(r#"{{"name":{}"#, json!(tool));
            if let Some(a) = args {
                p.push_str(r#","arguments":"#);
                p.push_str(&a);
            }
            p.push('}');
            (p, Some(name("tools/call")))
        }
        MethodSpec::ResourcesRead { uri } => {
            (json!({"uri": uri.value()}).to_string(), Some(name("resources/read")))
        }
        MethodSpec::PromptsGet { name: n } => {
            let mut p = json!({"name": "greet"});
            if let Some(n) = n {
                p["arguments"] = json!({"name": n});
            }
            (p.to_string(), Some(name("prompts/get")))
        }
        MethodSpec::Complete { prompt, value } => {
            let r = if *prompt {
                json!({"type": "ref/prompt", "name": "greet"})
            } else {
                json!({"type": "ref/resource", "uri": "test://items/{id}"})
            };
            let arg = if *prompt { "name" } else { "id" };
            let p = json!({"ref": r, "argument": {"name": arg, "value": value}});
            (p.to_string(), Some(name("completion/complete")))
        }
        MethodSpec::Subscribe { uri } => {
            (json!({"uri": uri.value()}).to_string(), Some(name("resources/subscribe")))
        }
        MethodSpec::Unsubscribe { uri } => {
            (json!({"uri": uri.value()}).to_string(), Some(name("resources/unsubscribe")))
        }
        MethodSpec::SetLevel { level } => {
            const LEVELS: [&str; 9] =
                ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency", "loud"];
            let l = LEVELS[usize::from(*level) % LEVELS.len()];
            (json!({"level": l}).to_string(), Some(name("logging/setLevel")))
        }
        MethodSpec::Cancelled { target } => {
            let id = target.raw().unwrap_or_else(|| "0".into());
            (format!(r#"{{"requestId":{id},"reason":"fuzz"}}"#), Some(name("notifications/cancelled")))
        }
        MethodSpec::Progress => {
            (r#"{"progressToken":1,"progress":1}"#.to_owned(), Some(name("notifications/progress")))
        }
        MethodSpec::Discover => ("{}".into(), Some(name("server/discover"))),
        MethodSpec::Listen { tools, uris } => {
            let uris: Vec<Value> = uris.iter().map(UriSpec::value).collect();
            let p = json!({"notifications": {"toolsListChanged": tools, "resourceSubscriptions": uris}});
            (p.to_string(), Some(name("subscriptions/listen")))
        }
        MethodSpec::Unknown(m) => ("{}".into(), Some(m.clone())),
        MethodSpec::NonString(_) => ("{}".into(), None),
    }
}

/// Renders one message as JSON text.
fn render(msg: &Msg, cursors: &[String]) -> String {
    let (mut params, method) = render_params(&msg.method, cursors);
    let meta = match &msg.meta {
        MetaSpec::None => None,
        MetaSpec::Modern(v) => Some(json!({
            "io.modelcontextprotocol/protocolVersion": v.as_str(),
            "io.modelcontextprotocol/clientCapabilities": {}
        })),
        MetaSpec::ModernWithoutCapabilities(v) => {
            Some(json!({"io.modelcontextprotocol/protocolVersion": v.as_str()}))
        }
        MetaSpec::NotAnObject => Some(json!(3)),
    };
    if let Some(meta) = meta {
        // params always renders as an object: splice `_meta` in first.
        let rest = params.strip_prefix('{').unwrap_or("}");
        let sep = if rest.starts_with('}') { "" } else { "," };
        params = format!(r#"{{"_meta":{meta}{sep}{rest}"#);
    }
    let mut out = String::from("{");
    match msg.envelope {
        EnvelopeSpec::MissingJsonrpc => {}
        EnvelopeSpec::WrongJsonrpc => out.push_str(r#""jsonrpc":"1.0","#),
        _ => out.push_str(r#""jsonrpc":"2.0","#),
    }
    if let Some(id) = msg.id.raw() {
        out.push_str(&format!(r#""id":{id},"#));
    }
    match &method {
        Some(m) => out.push_str(&format!(r#""method":{}"#, json!(m))),
        None => {
            let n = match msg.method {
                MethodSpec::NonString(n) => n,
                _ => 0,
            };
            out.push_str(&format!(r#""method":{n}"#));
        }
    }
    match msg.envelope {
        EnvelopeSpec::ParamsNotObject => out.push_str(r#","params":[1]"#),
        _ => out.push_str(&format!(r#","params":{params}"#)),
    }
    match msg.envelope {
        EnvelopeSpec::UnknownMember => out.push_str(r#","extra":true"#),
        EnvelopeSpec::RepeatedMethod => out.push_str(r#","method":"ping""#),
        EnvelopeSpec::WithResult => out.push_str(r#","result":{}"#),
        _ => {}
    }
    out.push('}');
    out
}

struct ConnState {
    id: ConnId,
    /// `Output::Close` seen (or `open` refused: never usable).
    closed: bool,
    /// Requests sent minus answers received, by id identity.
    owed: HashMap<String, i64>,
    /// Only well-formed requests so far: every one not excused must be answered by the end.
    exact: bool,
    /// Ids that may go unanswered: targets of `notifications/cancelled`, listen streams, and
    /// members of batches the session refuses whole.
    excused: HashSet<String>,
    /// The session's protocol version, from an `initialize` result.
    session: Option<String>,
}

struct Pending {
    ticket: Ticket,
    call: CallId,
    conn: usize,
    request: Request,
    deadline: Instant,
    cancelled: bool,
}

struct Sim<'e> {
    engine: &'e mut Engine<()>,
    now: Instant,
    conns: Vec<ConnState>,
    by_id: HashMap<ConnId, usize>,
    pending: Vec<Pending>,
    cursors: Vec<String>,
    filler_removed: bool,
}

/// A fresh engine for one run; [`Sim::finish`] checks that the run leaves nothing behind in it
/// (output, deadlines, calls), which is how a leak shows up.
fn engine() -> Engine<()> {
    let mut limits = Limits::default();
    limits
        .max_connections(MAX_CONNECTIONS)
        .max_in_flight(MAX_IN_FLIGHT)
        .max_batch_len(MAX_BATCH)
        .max_frame_bytes(MAX_FRAME)
        .max_response_bytes(MAX_RESPONSE)
        .max_id_bytes(MAX_ID_BYTES)
        .page_size(2);
    let mut engine = Engine::new(config(limits, Some(CALL_TIMEOUT)), base_time());
    register(&mut engine, 4);
    engine
}

impl<'e> Sim<'e> {
    fn new(engine: &'e mut Engine<()>, now: Instant) -> Self {
        assert!(engine.poll_output().is_none(), "the previous run left output behind");
        assert!(engine.poll_timeout().is_none(), "the previous run left a deadline behind");
        let mut sim = Sim {
            engine,
            now,
            conns: Vec::new(),
            by_id: HashMap::new(),
            pending: Vec::new(),
            cursors: Vec::new(),
            filler_removed: false,
        };
        sim.open(None);
        sim
    }

    fn open(&mut self, identity: Option<u8>) {
        let caller =
            identity.map_or_else(Caller::anonymous, |i| Caller::identified(format!("user{}", i % 2)));
        let open = self.conns.iter().filter(|c| !c.closed).count();
        match self.engine.open(self.now, mcp_proto::ConnKind::Stdio, caller) {
            Ok(id) => {
                assert!(open < MAX_CONNECTIONS, "open past max_connections");
                assert!(!self.by_id.contains_key(&id), "a new connection reused a live handle");
                self.by_id.insert(id, self.conns.len());
                self.conns.push(ConnState {
                    id,
                    closed: false,
                    owed: HashMap::new(),
                    exact: true,
                    excused: HashSet::new(),
                    session: None,
                });
            }
            Err(_) => assert_eq!(open, MAX_CONNECTIONS, "open refused below max_connections"),
        }
        self.drain(4);
    }

    fn conn(&self, i: u8) -> Option<usize> {
        (!self.conns.is_empty()).then(|| usize::from(i) % self.conns.len())
    }

    fn live_calls(&self, conn: usize) -> usize {
        self.pending.iter().filter(|p| p.conn == conn && !p.cancelled).count()
    }

    fn frame(&mut self, ci: usize, spec: &FrameSpec) {
        let c = &mut self.conns[ci];
        let (bytes, msgs): (Vec<u8>, Vec<&Msg>) = match spec {
            FrameSpec::Raw(b) => (b.clone(), Vec::new()),
            FrameSpec::Message(m) => (render(m, &self.cursors).into_bytes(), vec![m]),
            FrameSpec::Batch(ms) => {
                let parts: Vec<String> = ms.iter().map(|m| render(m, &self.cursors)).collect();
                (format!("[{}]", parts.join(",")).into_bytes(), ms.iter().collect())
            }
        };
        let asked = answerable_ids(&bytes, MAX_ID_BYTES);
        let plain = !matches!(spec, FrameSpec::Raw(_))
            && bytes.len() <= MAX_FRAME
            && serde_json::from_slice::<Value>(&bytes).is_ok();
        if !plain {
            c.exact = false;
        }
        let refused_batch = match spec {
            FrameSpec::Batch(ms) => {
                c.session.as_deref() != Some("2025-03-26") || ms.is_empty() || ms.len() > MAX_BATCH
            }
            _ => false,
        };
        if refused_batch {
            c.excused.extend(asked.iter().cloned());
        }
        for m in &msgs {
            match &m.method {
                MethodSpec::Cancelled { target } => {
                    c.excused.extend(target.raw().as_deref().and_then(canon_raw))
                }
                MethodSpec::Listen { .. } => c.excused.extend(m.id.raw().as_deref().and_then(canon_raw)),
                _ => {}
            }
        }
        if !c.closed {
            for id in asked {
                *c.owed.entry(id).or_default() += 1;
            }
        }
        let id = c.id;
        let closed = c.closed;
        let outcome = self.engine.handle_frame(self.now, id, &bytes);
        trace(|| format!("> conn {ci}: {} -> {outcome:?}", String::from_utf8_lossy(&bytes)));
        if closed {
            assert_eq!(outcome, FrameOutcome::UnknownConnection, "a closed connection took a frame");
        }
        if let (FrameSpec::Message(m), true, false) = (spec, plain, closed) {
            if m.id.raw().is_none() {
                assert_eq!(outcome, FrameOutcome::NoReply, "a notification promised a reply");
            } else {
                assert_eq!(outcome, FrameOutcome::Reply, "a request promised no reply");
            }
        }
        let bound = 2 * MAX_BATCH + MAX_IN_FLIGHT * MAX_CONNECTIONS + 4;
        self.drain(bound);
    }

    fn complete(&mut self, i: u8, kind: &ReplyKind) {
        if self.pending.is_empty() {
            return;
        }
        let p = self.pending.swap_remove(usize::from(i) % self.pending.len());
        let r = reply(&p.request, kind);
        let result = self.engine.complete(self.now, p.ticket, r);
        assert_eq!(result.is_err(), p.cancelled, "complete is Stale exactly when the call was cancelled");
        self.drain(MAX_CONNECTIONS + 4);
    }

    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        if self.engine.poll_timeout().is_some_and(|t| t <= self.now) {
            self.engine.handle_timeout(self.now);
            self.drain(3 * MAX_IN_FLIGHT * MAX_CONNECTIONS + MAX_CONNECTIONS + 4);
        }
        self.check_deadlines();
    }

    fn spurious_timeout(&mut self) {
        self.engine.handle_timeout(self.now);
        self.drain(3 * MAX_IN_FLIGHT * MAX_CONNECTIONS + MAX_CONNECTIONS + 4);
        self.check_deadlines();
    }

    fn check_deadlines(&self) {
        if let Some(t) = self.engine.poll_timeout() {
            assert!(t > self.now, "a deadline at or before now survived handle_timeout");
        }
        for p in self.pending.iter().filter(|p| !p.cancelled) {
            assert!(p.deadline > self.now, "a call outlived its deadline");
        }
    }

    /// Drains outputs, checking each; at most `bound` of them.
    fn drain(&mut self, bound: usize) {
        let mut n = 0;
        while let Some(out) = self.engine.poll_output() {
            n += 1;
            assert!(n <= bound, "one input produced more than {bound} outputs");
            trace(|| match &out {
                Output::Frame { bytes, .. } => format!("< {}", String::from_utf8_lossy(bytes)),
                Output::Invoke(inv) => format!("< Invoke {:?} {:?}", inv.ticket.call(), inv.request),
                other => format!("< {other:?}"),
            });
            match out {
                Output::Frame { conn, bytes } => {
                    let ci = *self.by_id.get(&conn).expect("a frame for a connection never opened");
                    let c = &mut self.conns[ci];
                    assert!(!c.closed, "a frame after Close");
                    let mut checked = check_frame(&bytes, MAX_RESPONSE);
                    for id in checked.answers.drain(..).flatten() {
                        let owed = c.owed.entry(id.clone()).or_default();
                        *owed -= 1;
                        assert!(
                            *owed >= 0,
                            "id {id} answered more often than asked: {}",
                            String::from_utf8_lossy(&bytes)
                        );
                    }
                    if let Some(v) = checked.sessions.pop() {
                        c.session = Some(v);
                    }
                    for cur in checked.cursors {
                        if self.cursors.len() < 16 {
                            self.cursors.push(cur);
                        }
                    }
                }
                Output::Invoke(inv) => {
                    let ci = *self.by_id.get(&inv.conn).expect("an invocation for a connection never opened");
                    assert!(!self.conns[ci].closed, "an invocation after Close");
                    assert!(
                        !self.pending.iter().any(|p| p.call == inv.ticket.call()),
                        "two invocations share a call id"
                    );
                    self.pending.push(Pending {
                        call: inv.ticket.call(),
                        ticket: inv.ticket,
                        conn: ci,
                        request: inv.request,
                        deadline: self.now + CALL_TIMEOUT,
                        cancelled: false,
                    });
                }
                Output::Cancel { call, .. } => {
                    let p = self.pending.iter_mut().find(|p| p.call == call);
                    let p = p.unwrap_or_else(|| {
                        panic!("Cancel for {call:?}, which the shim was never asked to run")
                    });
                    assert!(!p.cancelled, "Cancel twice for one call");
                    p.cancelled = true;
                }
                Output::Close { conn, reason } => {
                    let ci = *self.by_id.get(&conn).expect("Close for a connection never opened");
                    assert!(!self.conns[ci].closed, "Close twice");
                    assert_eq!(self.live_calls(ci), 0, "Close while calls run uncancelled");
                    let c = &mut self.conns[ci];
                    c.closed = true;
                    if reason == CloseReason::EndOfInput && c.exact {
                        assert_unowed(c);
                    }
                }
                _ => {}
            }
        }
        for (ci, c) in self.conns.iter().enumerate() {
            if !c.closed {
                assert_eq!(
                    self.engine.in_flight(c.id),
                    self.live_calls(ci),
                    "in_flight disagrees with the shim"
                );
            }
        }
    }

    fn toggle_tool(&mut self) {
        if self.filler_removed {
            let t = Tool::new("t0", "filler", json!({"type": "object"}));
            self.engine.registry_mut(self.now).add_tool(t, ()).expect("re-adding t0");
        } else {
            assert!(self.engine.registry_mut(self.now).remove_tool("t0").is_some());
        }
        self.filler_removed = !self.filler_removed;
        self.drain(4 * MAX_CONNECTIONS + 4);
    }

    /// Completes everything still running, then checks that every plain connection got every
    /// answer it was owed, and closes what is open.
    fn finish(&mut self) {
        while let Some(p) = self.pending.pop() {
            let r = reply(&p.request, &ReplyKind::Natural);
            let result = self.engine.complete(self.now, p.ticket, r);
            assert_eq!(result.is_err(), p.cancelled, "complete is Stale exactly when the call was cancelled");
            self.drain(MAX_CONNECTIONS + 4);
        }
        for c in self.conns.iter().filter(|c| !c.closed && c.exact) {
            assert_unowed(c);
        }
        for i in 0..self.conns.len() {
            if !self.conns[i].closed {
                let id = self.conns[i].id;
                self.engine.close(self.now, id);
                self.drain(MAX_IN_FLIGHT + 2);
                assert!(self.conns[i].closed, "close emitted no Close");
            }
        }
        if self.filler_removed {
            self.toggle_tool();
        }
        assert!(self.engine.poll_output().is_none(), "output left after the last close");
        assert!(self.engine.poll_timeout().is_none(), "a deadline outlived every connection");
    }
}

/// Prints a line to stderr when `MCP_FUZZ_TRACE` is set: every frame in and every output.
fn trace(line: impl FnOnce() -> String) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("MCP_FUZZ_TRACE").is_some()) {
        eprintln!("{}", line());
    }
}

fn assert_unowed(c: &ConnState) {
    for (id, owed) in &c.owed {
        if !c.excused.contains(id) {
            assert_eq!(*owed, 0, "request {id} was never answered");
        }
    }
}

/// The identity of a raw JSON id.
fn canon_raw(raw: &str) -> Option<String> {
    canon_id(&serde_json::from_str::<Value>(raw).ok()?)
}

/// Runs one fuzz input on a fresh engine, so that a finding reproduces from its input alone.
pub fn fuzz(ops: &[Op]) {
    run(&mut engine(), base_time(), ops);
}

/// Applies `ops` from time `now`; returns the time it ended at.
fn run(engine: &mut Engine<()>, now: Instant, ops: &[Op]) -> Instant {
    let mut sim = Sim::new(engine, now);
    for op in ops.iter().take(256) {
        match op {
            Op::Frame { conn, frame } => {
                if let Some(ci) = sim.conn(*conn) {
                    sim.frame(ci, frame);
                }
            }
            Op::Complete { ticket, reply } => sim.complete(*ticket, reply),
            Op::AdvanceClock { ms } => sim.advance(u64::from(*ms)),
            Op::SpuriousTimeout => sim.spurious_timeout(),
            Op::CloseInput { conn } => {
                if let Some(ci) = sim.conn(*conn) {
                    let id = sim.conns[ci].id;
                    sim.engine.close_input(sim.now, id);
                    sim.drain(MAX_IN_FLIGHT + 2);
                }
            }
            Op::Close { conn } => {
                if let Some(ci) = sim.conn(*conn) {
                    let id = sim.conns[ci].id;
                    sim.engine.close(sim.now, id);
                    sim.drain(MAX_IN_FLIGHT + 2);
                    assert!(sim.conns[ci].closed, "close emitted no Close");
                }
            }
            Op::Oversized { conn } => {
                if let Some(ci) = sim.conn(*conn) {
                    let id = sim.conns[ci].id;
                    sim.conns[ci].exact = false;
                    sim.engine.handle_oversized_frame(sim.now, id, MAX_FRAME + 1);
                    sim.drain(MAX_IN_FLIGHT + 3);
                    assert!(sim.conns[ci].closed, "an oversized line must close the stream");
                }
            }
            Op::OpenConn { identity } => sim.open(*identity),
            Op::ToggleTool => sim.toggle_tool(),
        }
    }
    sim.finish();
    sim.now
}
