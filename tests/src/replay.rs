//! Replay transcripts: a text file of frames in, exact frames out and clock steps, fed to a bare
//! [`Engine`] with a fixed configuration and compared byte for byte.
//!
//! # Format
//!
//! One item per line; blank lines and lines starting with `#` are ignored.
//!
//! | line | meaning |
//! |------|---------|
//! | `> {json}` | a frame in, on the one connection (the bytes after `> `, exactly) |
//! | `< {json}` | the next output must be exactly this frame |
//! | `@ +15s`, `@ +250ms` | advance the virtual clock, then call `handle_timeout` |
//! | `= invoke tools/call <tool> <id>` | the next output is an `Invoke` of `<tool>` for request `<id>` |
//! | `= cancel <id>` | the next output is an `Output::Cancel` of the call for request `<id>` |
//! | `= close end-of-input` / `closed` / `frame-too-large` | the next output is `Output::Close` |
//! | `= stale` | the last `! complete` was refused as `Stale` (nothing sent) |
//! | `= unknown-connection` | `handle_frame` answered `UnknownConnection` (the connection is gone) |
//! | `! <directive>` | see below |
//!
//! Every output must be matched by an expectation line before the next input line, and every
//! expectation must be met: nothing is implied, nothing may be left over. `<id>` is a JSON
//! request id (`3`, `"abc"`), compared as a JSON value.
//!
//! Inside `>` and `<` lines, `{{repeat N "text"}}` stands for `text` repeated `N` times (the
//! text is a JSON string literal, so `"\\"` is one backslash), to keep long frames readable.
//!
//! ## Directives
//!
//! Configuration, only before the first input (the engine is built at the first input):
//!
//! - `! page-size N`, `! max-frame-bytes N`, `! max-id-bytes N`, `! max-method-bytes N`,
//!   `! max-depth N`, `! max-in-flight N`, `! max-batch-len N`, `! max-response-bytes N`:
//!   the [`Limits`] setters;
//! - `! call-timeout 10s` (or `ms`), `! cache-ttl-ms N`, `! instructions "text"`;
//! - `! server-info full`: adds a title, description and website to the server's
//!   `Implementation` (default: only name `replay`, version `1.0.0`);
//! - `! tools echo add ...`: register only these test tools (default: all, see
//!   [`crate::tools`]);
//! - `! known-bug <text>`: this transcript documents an engine bug and is expected to fail
//!   until the engine is fixed; when it passes, the suite fails so that the marker is removed.
//!   Such transcripts are named `bug-*.txt` and say in comments what is wrong and where.
//!
//! Actions, anywhere:
//!
//! - `! auto` / `! manual`: in auto mode every `Invoke` of a tool with an automatic behaviour
//!   is completed at once with it and is not shown; `slow` never is. In manual mode (the
//!   default) every `Invoke` is an output to expect with `= invoke`.
//! - `! complete <ref> <reply>`: completes a held invocation. `<ref>` is the request id as JSON
//!   (`3`, `"abc"`; the oldest held call with that id) or `#N`, the N-th invocation of the
//!   transcript (from 1). `<reply>` is one of:
//!   `text "..."`, `error-text "..."` (a result with `isError: true`), `structured {json}`,
//!   `result {"content":[...],"structuredContent":..,"isError":..,"_meta":{..}}` (content blocks
//!   `text`, `image`, `audio`, `resource_link`, `resource`), `public-error CODE "message" [{data}]`,
//!   `private-error "detail"`, `panic`, `cancelled` (the handler's future was dropped), or `auto`
//!   (the tool's built-in behaviour).
//! - `! close-input` (`Engine::close_input`), `! close` (`Engine::close`).
//!
//! # Invariants checked on every run
//!
//! Beside the exact comparison, the runner checks, independently of the expectation lines:
//!
//! - every request gets exactly one reply and notifications and responses get none. The runner
//!   classifies each frame itself (JSON-RPC 2.0: an object with an `id` member is a request, one
//!   with `method` and no `id` a notification, one with `result`/`error` and no `method` a
//!   response; a frame serde_json cannot decode, a non-object, a refused batch, or an
//!   unreadable, ambiguous or over-long id is answered once with a `null` id), and counts
//!   replies by id, matching requests that share an id in the order they came; a request may
//!   go unanswered only if its call was cancelled;
//! - `handle_frame`'s [`FrameOutcome`] agrees with that classification;
//! - no request is still in flight when the transcript ends;
//! - every reply fits in `max_response_bytes`;
//! - every emitted frame is valid against the wire schema of the version in force (see
//!   [`crate::wire`]): the version of the request it answers (2026-07-28 for a request carrying
//!   `_meta["io.modelcontextprotocol/protocolVersion"]`, else the version the session
//!   negotiated, else 2025-11-25).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mcp_proto::{
    CallId, Caller, CloseReason, Config, ConnId, ConnKind, Content, Engine, FrameOutcome, HandlerError,
    Implementation, KeyRing, Limits, Output, ProtocolVersion, Reply, Request, ResourceContents, ResourceLink,
    RpcError, Ticket, ToolOutput,
};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::tools::{all_tools, auto_reply, TestHandler};
use crate::wire;

const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Every failure, each starting with its line number.
    pub failures: Vec<String>,
    /// The text of `! known-bug`, if the transcript carries one.
    pub known_bug: Option<String>,
}

impl Report {
    /// No failure.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for fail in &self.failures {
            writeln!(f, "{fail}")?;
        }
        Ok(())
    }
}

/// Runs a transcript and reports every failure.
pub fn run(source: &str) -> Report {
    Runner::new(false).run(source).0
}

/// Runs only the inputs of a transcript and writes what the engine emitted, in transcript
/// syntax, after each input: a starting point for a new transcript, to be checked line by line
/// against the spec, never accepted blindly.
pub fn record(source: &str) -> (Report, String) {
    Runner::new(true).run(source)
}

/// Something the engine did, as a transcript states it.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Frame(Vec<u8>),
    Invoke { name: String, id: Value },
    Cancel { id: Value },
    Close(&'static str),
    Stale,
    UnknownConnection,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Frame(b) => write!(f, "< {}", String::from_utf8_lossy(b)),
            Event::Invoke { name, id } => write!(f, "= invoke tools/call {name} {id}"),
            Event::Cancel { id } => write!(f, "= cancel {id}"),
            Event::Close(r) => write!(f, "= close {r}"),
            Event::Stale => f.write_str("= stale"),
            Event::UnknownConnection => f.write_str("= unknown-connection"),
        }
    }
}

fn close_reason(r: CloseReason) -> &'static str {
    match r {
        CloseReason::EndOfInput => "end-of-input",
        CloseReason::Closed => "closed",
        CloseReason::FrameTooLarge => "frame-too-large",
        _ => "other",
    }
}

/// The configuration directives, gathered before the engine is built.
#[derive(Debug, Clone)]
struct Settings {
    limits: Limits,
    call_timeout: Option<Duration>,
    cache_ttl_ms: Option<u64>,
    instructions: Option<String>,
    full_info: bool,
    tools: Option<Vec<String>>,
    /// Mirrors of the limits `Limits` has no getter for.
    max_batch_len: usize,
    max_depth: usize,
    max_id_bytes: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            call_timeout: None,
            cache_ttl_ms: None,
            instructions: None,
            full_info: false,
            tools: None,
            max_batch_len: 64,
            max_depth: 64,
            max_id_bytes: 256,
        }
    }
}

/// One invocation the runner has seen.
struct Held {
    index: usize,
    call: CallId,
    ticket: Option<Ticket>,
    id: Value,
    handler: TestHandler,
    arguments: Map<String, Value>,
    cancelled: bool,
}

/// A `tools/call` request of the current input, waiting to be matched with its `Invoke`.
struct Candidate {
    id: Value,
    name: String,
    arguments: Value,
}

/// What one request expects, for the reply accounting.
struct Awaiting {
    method: String,
    version: Option<ProtocolVersion>,
}

/// The process-wide start of virtual time: taken once, then only ever advanced.
fn epoch() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

struct Runner {
    record: bool,
    recorded: String,
    settings: Settings,
    known_bug: Option<String>,
    engine: Option<(Engine<TestHandler>, ConnId)>,
    now: Instant,
    auto: bool,
    held: Vec<Held>,
    invocations: usize,
    candidates: Vec<Candidate>,
    observed: VecDeque<Event>,
    /// The line that caused the observed events (for messages).
    cause: usize,
    /// Requests awaiting a reply, by canonical id.
    awaiting: HashMap<String, VecDeque<Awaiting>>,
    /// Replies with a `null` id still owed.
    awaiting_null: usize,
    /// Cancelled calls, by canonical id: each excuses one missing reply.
    excused: HashMap<String, usize>,
    session: Option<ProtocolVersion>,
    failures: Vec<String>,
}

fn key(id: &Value) -> String {
    id.to_string()
}

impl Runner {
    fn new(record: bool) -> Self {
        Self {
            record,
            recorded: String::new(),
            settings: Settings::default(),
            known_bug: None,
            engine: None,
            now: epoch(),
            auto: false,
            held: Vec::new(),
            invocations: 0,
            candidates: Vec::new(),
            observed: VecDeque::new(),
            cause: 0,
            awaiting: HashMap::new(),
            awaiting_null: 0,
            excused: HashMap::new(),
            session: None,
            failures: Vec::new(),
        }
    }

    fn run(mut self, source: &str) -> (Report, String) {
        let mut stopped = false;
        for (i, raw) in source.lines().enumerate() {
            let line = i + 1;
            let text = raw.trim_end();
            if self.record {
                let is_expectation = text.starts_with("< ") || text.starts_with("= ") || text == "<";
                if !is_expectation {
                    // Outputs are drained synchronously after each input, so everything the
                    // previous input caused is already observed.
                    self.flush_recorded();
                    self.recorded.push_str(raw);
                    self.recorded.push('\n');
                }
            }
            if let Err(e) = self.line(line, text) {
                self.failures.push(format!("line {line}: {e}"));
                stopped = true;
                break;
            }
        }
        if !stopped {
            if self.record {
                self.flush_recorded();
            }
            self.finish();
        }
        let report = Report { failures: self.failures, known_bug: self.known_bug };
        (report, self.recorded)
    }

    fn flush_recorded(&mut self) {
        while let Some(e) = self.observed.pop_front() {
            self.recorded.push_str(&e.to_string());
            self.recorded.push('\n');
        }
    }

    /// Fails when outputs of the previous input were not all expected.
    fn settle(&mut self) -> Result<(), String> {
        if self.record || self.observed.is_empty() {
            return Ok(());
        }
        let rest: Vec<String> = self.observed.iter().map(|e| format!("  {e}")).collect();
        Err(format!(
            "the engine emitted output that no line expects (after line {}):\n{}",
            self.cause,
            rest.join("\n")
        ))
    }

    fn line(&mut self, line: usize, text: &str) -> Result<(), String> {
        if text.is_empty() || text.starts_with('#') {
            return Ok(());
        }
        if let Some(frame) = text.strip_prefix("> ") {
            self.settle()?;
            let frame = expand(frame)?;
            self.cause = line;
            return self.frame_in(frame.as_bytes());
        }
        if let Some(expected) = text.strip_prefix("< ") {
            let expected = Event::Frame(expand(expected)?.into_bytes());
            return self.expect(expected);
        }
        if let Some(rest) = text.strip_prefix("= ") {
            let expected = parse_event(rest)?;
            return self.expect(expected);
        }
        if let Some(step) = text.strip_prefix("@ ") {
            self.settle()?;
            let d = parse_duration(
                step.trim().strip_prefix('+').ok_or("a clock step is `@ +<n>s` or `@ +<n>ms`")?,
            )?;
            self.start()?;
            self.cause = line;
            self.now += d;
            let now = self.now;
            if let Some((engine, _)) = self.engine.as_mut() {
                engine.handle_timeout(now);
            }
            return self.drain();
        }
        if let Some(d) = text.strip_prefix("! ") {
            return self.directive(line, d.trim());
        }
        Err(format!("cannot read this line: {text:?}"))
    }

    fn expect(&mut self, expected: Event) -> Result<(), String> {
        if self.record {
            return Ok(());
        }
        match self.observed.pop_front() {
            None => Err(format!("expected\n  {expected}\nbut the engine emitted nothing more")),
            Some(actual) if actual == expected => Ok(()),
            Some(actual) => Err(format!(
                "expected\n  {expected}\nbut the engine emitted\n  {actual}{}",
                diff(&expected, &actual)
            )),
        }
    }

    fn directive(&mut self, line: usize, d: &str) -> Result<(), String> {
        let (name, rest) = d.split_once(' ').map_or((d, ""), |(a, b)| (a, b.trim()));
        let config = |s: &mut Self| -> Result<(), String> {
            if s.engine.is_some() {
                Err(format!("`! {name}` configures the engine and must come before the first input"))
            } else {
                Ok(())
            }
        };
        let number = || rest.parse::<usize>().map_err(|_| format!("`! {name}` takes a number, not {rest:?}"));
        match name {
            "page-size" => {
                config(self)?;
                self.settings.limits.page_size(number()?);
            }
            "max-frame-bytes" => {
                config(self)?;
                self.settings.limits.max_frame_bytes(number()?);
            }
            "max-id-bytes" => {
                config(self)?;
                let n = number()?;
                self.settings.limits.max_id_bytes(n);
                self.settings.max_id_bytes = n;
            }
            "max-method-bytes" => {
                config(self)?;
                self.settings.limits.max_method_bytes(number()?);
            }
            "max-depth" => {
                config(self)?;
                let n = number()?;
                self.settings.limits.max_depth(n);
                self.settings.max_depth = n;
            }
            "max-in-flight" => {
                config(self)?;
                self.settings.limits.max_in_flight(number()?);
            }
            "max-batch-len" => {
                config(self)?;
                let n = number()?;
                self.settings.limits.max_batch_len(n);
                self.settings.max_batch_len = n;
            }
            "max-response-bytes" => {
                config(self)?;
                self.settings.limits.max_response_bytes(number()?);
            }
            "call-timeout" => {
                config(self)?;
                self.settings.call_timeout = Some(parse_duration(rest)?);
            }
            "cache-ttl-ms" => {
                config(self)?;
                self.settings.cache_ttl_ms = Some(number()? as u64);
            }
            "instructions" => {
                config(self)?;
                let (s, _) = json_string(rest)?;
                self.settings.instructions = Some(s);
            }
            "server-info" => {
                config(self)?;
                if rest != "full" {
                    return Err("`! server-info` takes `full`".into());
                }
                self.settings.full_info = true;
            }
            "tools" => {
                config(self)?;
                self.settings.tools = Some(rest.split_whitespace().map(str::to_owned).collect());
            }
            "known-bug" => self.known_bug = Some(rest.to_owned()),
            "auto" => self.auto = true,
            "manual" => self.auto = false,
            "complete" => {
                self.settle()?;
                self.start()?;
                self.cause = line;
                self.complete(rest)?;
            }
            "close-input" | "close" => {
                self.settle()?;
                self.start()?;
                self.cause = line;
                let now = self.now;
                if let Some((engine, conn)) = self.engine.as_mut() {
                    if name == "close" {
                        engine.close(now, *conn);
                    } else {
                        engine.close_input(now, *conn);
                    }
                }
                self.drain()?;
            }
            _ => return Err(format!("unknown directive `! {name}`")),
        }
        Ok(())
    }

    /// Builds the engine on first use.
    fn start(&mut self) -> Result<(), String> {
        if self.engine.is_some() {
            return Ok(());
        }
        let s = &self.settings;
        let mut info = Implementation::new("replay", "1.0.0");
        if s.full_info {
            info.title = Some("Replay Server".into());
            info.description = Some("Replays transcripts".into());
            info.website_url = Some("https://example.com/replay".into());
        }
        let mut config = Config::new(info, KeyRing::new([7; 32]));
        config.limits = s.limits.clone();
        config.call_timeout = s.call_timeout;
        if let Some(t) = s.cache_ttl_ms {
            config.cache_ttl_ms = t;
        }
        config.instructions = s.instructions.clone();
        let mut engine = Engine::new(config, self.now);
        let wanted = s.tools.clone();
        let all = all_tools();
        if let Some(w) = &wanted {
            if let Some(bad) = w.iter().find(|n| !all.iter().any(|(t, _)| t.name() == n.as_str())) {
                return Err(format!("`! tools`: no test tool named {bad:?}"));
            }
        }
        for (tool, handler) in all {
            if wanted.as_ref().is_none_or(|w| w.iter().any(|n| n == tool.name())) {
                let name = tool.name().to_owned();
                engine
                    .registry_mut()
                    .add_tool(tool, handler)
                    .map_err(|e| format!("registering {name}: {e}"))?;
            }
        }
        let conn =
            engine.open(self.now, ConnKind::Stdio, Caller::anonymous()).map_err(|e| format!("{e:?}"))?;
        self.engine = Some((engine, conn));
        Ok(())
    }

    fn frame_in(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.start()?;
        let plan = self.classify(bytes);
        let now = self.now;
        let Some((engine, conn)) = self.engine.as_mut() else { return Err("no engine".into()) };
        let outcome = engine.handle_frame(now, *conn, bytes);
        match outcome {
            FrameOutcome::UnknownConnection => {
                self.observed.push_back(Event::UnknownConnection);
                return Ok(());
            }
            FrameOutcome::Reply | FrameOutcome::NoReply => {}
        }
        let replies = plan.nulls + plan.requests.len();
        if (outcome == FrameOutcome::Reply) != (replies > 0) {
            self.invariant(format!(
                "handle_frame returned {outcome:?}, but the frame holds {} request(s) and {} unreadable message(s)",
                plan.requests.len(),
                plan.nulls
            ));
        }
        self.awaiting_null += plan.nulls;
        for (id, method, version) in plan.requests {
            self.awaiting.entry(key(&id)).or_default().push_back(Awaiting { method, version });
        }
        self.candidates = plan.calls;
        self.drain()
    }

    fn invariant(&mut self, msg: String) {
        self.failures.push(format!("line {}: invariant: {msg}", self.cause));
    }

    /// Drains `poll_output`, completing auto invocations as they come.
    fn drain(&mut self) -> Result<(), String> {
        loop {
            let Some((engine, _)) = self.engine.as_mut() else { return Ok(()) };
            let Some(out) = engine.poll_output() else { return Ok(()) };
            match out {
                Output::Frame { conn, bytes, .. } => {
                    if Some(conn) != self.engine.as_ref().map(|e| e.1) {
                        self.invariant("a frame for a connection the transcript never opened".into());
                    }
                    self.check_frame(&bytes);
                    self.observed.push_back(Event::Frame(bytes));
                }
                Output::Invoke(inv) => self.invoked(inv)?,
                Output::Cancel { call, .. } => {
                    let Some(h) = self.held.iter_mut().find(|h| h.call == call) else {
                        self.invariant(format!("Cancel of a call the engine never invoked: {call:?}"));
                        continue;
                    };
                    h.cancelled = true;
                    let id = h.id.clone();
                    *self.excused.entry(key(&id)).or_default() += 1;
                    self.observed.push_back(Event::Cancel { id });
                }
                Output::Close { reason, .. } => self.observed.push_back(Event::Close(close_reason(reason))),
                _ => self.invariant("an output kind this runner does not know".into()),
            }
        }
    }

    fn invoked(&mut self, inv: mcp_proto::Invocation<TestHandler>) -> Result<(), String> {
        let Request::CallTool { name, arguments, .. } = &inv.request else {
            return Err("an invocation that is not a tool call".into());
        };
        let args = Value::Object(arguments.clone());
        let pos = self.candidates.iter().position(|c| c.name == *name && c.arguments == args);
        let Some(pos) = pos else {
            return Err(format!(
                "an Invoke of {name} with arguments {args} matches no tools/call of this input"
            ));
        };
        let cand = self.candidates.remove(pos);
        self.invocations += 1;
        let handler = inv.handler;
        let arguments = arguments.clone();
        let call = inv.ticket.call();
        if self.auto {
            if let Some(reply) = auto_reply(handler, &arguments) {
                self.held.push(Held {
                    index: self.invocations,
                    call,
                    ticket: None,
                    id: cand.id,
                    handler,
                    arguments,
                    cancelled: false,
                });
                let now = self.now;
                if let Some((engine, _)) = self.engine.as_mut() {
                    if engine.complete(now, inv.ticket, Reply::Tool(reply)).is_err() {
                        return Err(format!("auto completion of {name} was Stale"));
                    }
                }
                return Ok(());
            }
        }
        self.observed.push_back(Event::Invoke { name: name.clone(), id: cand.id.clone() });
        self.held.push(Held {
            index: self.invocations,
            call,
            ticket: Some(inv.ticket),
            id: cand.id,
            handler,
            arguments,
            cancelled: false,
        });
        Ok(())
    }

    fn complete(&mut self, spec: &str) -> Result<(), String> {
        let (reference, rest) = split_token(spec)?;
        let pos = if let Some(n) = reference.strip_prefix('#') {
            let n: usize = n.parse().map_err(|_| format!("bad invocation number {reference}"))?;
            self.held.iter().position(|h| h.index == n && h.ticket.is_some())
        } else {
            let id: Value =
                serde_json::from_str(reference).map_err(|e| format!("bad request id {reference}: {e}"))?;
            self.held.iter().position(|h| h.id == id && h.ticket.is_some())
        };
        let Some(pos) = pos else { return Err(format!("no held invocation {reference} to complete")) };
        let h = self.held.get_mut(pos).ok_or("no such invocation")?;
        let reply = parse_reply(rest.trim(), h.handler, &h.arguments)?;
        let ticket = h.ticket.take().ok_or("already completed")?;
        let now = self.now;
        let Some((engine, _)) = self.engine.as_mut() else { return Err("no engine".into()) };
        if engine.complete(now, ticket, Reply::Tool(reply)).is_err() {
            self.observed.push_back(Event::Stale);
        }
        self.drain()
    }

    /// Accounting, size bound and schema validation of one emitted frame.
    fn check_frame(&mut self, bytes: &[u8]) {
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => return self.invariant(format!("the engine emitted a frame that is not JSON: {e}")),
        };
        if bytes.contains(&b'\n') {
            self.invariant("an emitted frame contains a raw newline".into());
        }
        let max = self.settings.limits.response_bytes();
        match &value {
            Value::Array(items) => {
                let v = self.session.unwrap_or(ProtocolVersion::NEWEST_LEGACY);
                if let Err(e) = wire::validate_batch(v, &value) {
                    self.invariant(format!("schema: {e}"));
                }
                if items.is_empty() {
                    self.invariant("an empty batch reply".into());
                }
                for item in items {
                    if item.to_string().len() > max {
                        self.invariant(format!("a batch member over max_response_bytes ({max})"));
                    }
                    self.reply(item);
                }
            }
            _ => {
                if bytes.len() > max {
                    self.invariant(format!(
                        "a reply of {} bytes, over max_response_bytes ({max})",
                        bytes.len()
                    ));
                }
                self.reply(&value);
            }
        }
    }

    fn reply(&mut self, frame: &Value) {
        let Some(obj) = frame.as_object() else {
            return self.invariant(format!("an emitted message that is not an object: {frame}"));
        };
        if obj.contains_key("method") {
            let v = self.session.unwrap_or(ProtocolVersion::NEWEST_LEGACY);
            if let Err(e) = wire::validate_response(v, None, frame) {
                self.invariant(format!("schema: {e}"));
            }
            return;
        }
        let (version, method) = match obj.get("id") {
            None => return self.invariant(format!("a reply without an id: {frame}")),
            Some(Value::Null) => {
                if self.awaiting_null == 0 {
                    self.invariant(format!("a null-id reply, but no unreadable message awaits one: {frame}"));
                } else {
                    self.awaiting_null -= 1;
                }
                (self.session.unwrap_or(ProtocolVersion::NEWEST_LEGACY), None)
            }
            Some(id) => {
                let Some(a) = self.awaiting.get_mut(&key(id)).and_then(VecDeque::pop_front) else {
                    return self.invariant(format!("a reply for id {id}, which awaits no reply (a second reply, or an id never sent): {frame}"));
                };
                let mut version = a.version.or(self.session).unwrap_or(ProtocolVersion::NEWEST_LEGACY);
                if a.method == "initialize" && a.version.is_none() {
                    let negotiated = obj
                        .get("result")
                        .and_then(|r| r.get("protocolVersion"))
                        .and_then(Value::as_str)
                        .and_then(ProtocolVersion::parse);
                    if let Some(n) = negotiated {
                        version = n;
                        self.session = Some(n);
                    }
                }
                (version, Some(a.method))
            }
        };
        if let Err(e) = wire::validate_response(version, method.as_deref(), frame) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
    }

    fn finish(&mut self) {
        if self.record {
            return;
        }
        if let Err(e) = self.settle() {
            self.failures.push(format!("end: {e}"));
            return;
        }
        self.cause = usize::MAX;
        let mut owed: Vec<String> = Vec::new();
        for (id, list) in &self.awaiting {
            let excused = self.excused.get(id).copied().unwrap_or(0);
            if list.len() > excused {
                owed.push(id.clone());
            }
        }
        owed.sort();
        for id in owed {
            self.failures.push(format!("end: invariant: request {id} never got a reply"));
        }
        if self.awaiting_null > 0 {
            self.failures.push(format!("end: invariant: {} null-id replies never came", self.awaiting_null));
        }
        let held: Vec<String> = self
            .held
            .iter()
            .filter(|h| h.ticket.is_some() && !h.cancelled)
            .map(|h| h.id.to_string())
            .collect();
        if !held.is_empty() {
            self.failures.push(format!(
                "end: the transcript ends with call(s) {} in flight: complete them or close",
                held.join(", ")
            ));
        }
    }

    /// What a frame must produce, decided from the bytes alone.
    fn classify(&self, bytes: &[u8]) -> Plan {
        let mut plan = Plan::default();
        let limits = &self.settings.limits;
        if bytes.len() > limits.frame_bytes() {
            plan.nulls = 1;
            return plan;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            plan.nulls = 1;
            return plan;
        };
        // serde_json's recursion limit (128) makes a frame unreadable for the engine when its
        // own max_depth lets it descend that far (below it, the rest is skipped unparsed).
        // Otherwise a frame is readable when serde_json can decode all of it (escapes included).
        let readable = if nesting(text) > 128 {
            self.settings.max_depth < 128
        } else {
            serde_json::from_str::<Value>(text).is_ok()
        };
        let raw = match serde_json::from_str::<&RawValue>(text) {
            Ok(raw) if readable => raw,
            _ => {
                plan.nulls = 1;
                return plan;
            }
        };
        let t = raw.get().trim_start();
        if t.starts_with('[') {
            let items: Vec<&RawValue> = serde_json::from_str(raw.get()).unwrap_or_default();
            let allowed = self.session.is_some_and(ProtocolVersion::allows_batches);
            if !allowed || items.is_empty() || items.len() > self.settings.max_batch_len {
                plan.nulls = 1;
                return plan;
            }
            for item in items {
                self.classify_message(item, &mut plan);
            }
        } else {
            self.classify_message(raw, &mut plan);
        }
        plan
    }

    fn classify_message(&self, raw: &RawValue, plan: &mut Plan) {
        let Some(members) = members(raw.get()) else {
            plan.nulls += 1;
            return;
        };
        let ids: Vec<&(String, Box<RawValue>)> = members.iter().filter(|(k, _)| k == "id").collect();
        let folded_ids = members.iter().filter(|(k, _)| k.eq_ignore_ascii_case("id")).count();
        let has = |name: &str| members.iter().any(|(k, _)| k == name);
        let is_response = !has("method") && (has("result") || has("error"));
        if is_response {
            // A response (to a server-to-client request) is never answered.
            return;
        }
        let Some((_, id_raw)) = ids.first() else {
            if !has("method") || folded_ids > 0 {
                // Neither a request, a notification nor a response; or a member that case-folds
                // onto "id" ("Id"), which may be a request whose sender waits for an answer.
                plan.nulls += 1;
            }
            // A notification: never answered, even when malformed.
            return;
        };
        let id_text = id_raw.get();
        let well_formed = is_request_id(id_text);
        if ids.len() > 1 || folded_ids > 1 || !well_formed || id_text.len() > self.settings.max_id_bytes {
            plan.nulls += 1;
            return;
        }
        let Ok(id) = serde_json::from_str::<Value>(id_text) else {
            plan.nulls += 1;
            return;
        };
        let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
        let method = value.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        let params = value.get("params");
        let modern = params
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(META_PROTOCOL_VERSION));
        let version = modern.then_some(ProtocolVersion::V2026_07_28);
        if method == "tools/call" {
            if let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) {
                let arguments = match params.and_then(|p| p.get("arguments")) {
                    None | Some(Value::Null) => Value::Object(Map::new()),
                    Some(a) => a.clone(),
                };
                plan.calls.push(Candidate { id: id.clone(), name: name.to_owned(), arguments });
            }
        }
        plan.requests.push((id, method, version));
    }
}

#[derive(Default)]
struct Plan {
    /// Replies with a `null` id this frame must produce.
    nulls: usize,
    /// Requests with a readable id: (id, method, version if modern).
    requests: Vec<(Value, String, Option<ProtocolVersion>)>,
    /// `tools/call` requests that may become invocations.
    calls: Vec<Candidate>,
}

/// The deepest nesting of arrays and objects in JSON text.
fn nesting(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A JSON string or integer literal (no fraction, no exponent).
fn is_request_id(raw: &str) -> bool {
    let b = raw.as_bytes();
    match b.first() {
        Some(b'"') => true,
        Some(b'-') => b.len() > 1 && b.iter().skip(1).all(u8::is_ascii_digit),
        Some(c) if c.is_ascii_digit() => b.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// The members of a JSON object in order, repeated keys included; `None` for a non-object.
fn members(raw: &str) -> Option<Vec<(String, Box<RawValue>)>> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<(String, Box<RawValue>)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(k) = map.next_key::<String>()? {
                out.push((k, map.next_value::<Box<RawValue>>()?));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(raw);
    let r: Result<_, serde_json::Error> = (&mut de).deserialize_map(V);
    r.ok()
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (n, unit) = s.find(|c: char| !c.is_ascii_digit()).map_or((s, ""), |i| s.split_at(i));
    let n: u64 = n.parse().map_err(|_| format!("bad duration {s:?}"))?;
    match unit {
        "s" => Ok(Duration::from_secs(n)),
        "ms" => Ok(Duration::from_millis(n)),
        _ => Err(format!("bad duration {s:?}: use s or ms")),
    }
}

/// Reads a JSON string literal at the start of `s`; returns it and the rest.
fn json_string(s: &str) -> Result<(String, &str), String> {
    let s = s.trim_start();
    if !s.starts_with('"') {
        return Err(format!("expected a JSON string at {s:?}"));
    }
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => {
                let (lit, rest) = s.split_at(i + 1);
                let v: String = serde_json::from_str(lit).map_err(|e| format!("bad string {lit}: {e}"))?;
                return Ok((v, rest));
            }
            _ => {}
        }
    }
    Err(format!("unterminated string {s:?}"))
}

/// The first token of `s`: a JSON string literal (raw) or a run of non-space characters.
fn split_token(s: &str) -> Result<(&str, &str), String> {
    let s = s.trim_start();
    if s.starts_with('"') {
        let (_, rest) = json_string(s)?;
        let len = s.len() - rest.len();
        return Ok((s.split_at(len).0, rest));
    }
    Ok(s.split_once(' ').unwrap_or((s, "")))
}

/// Expands `{{repeat N "text"}}` in the text of a `>` or `<` line exactly as this runner does,
/// for other runners of the same transcripts (see [`crate::pipe`]).
pub fn expand_frame(line: &str) -> Result<String, String> {
    expand(line)
}

/// Expands `{{repeat N "text"}}`.
fn expand(line: &str) -> Result<String, String> {
    const OPEN: &str = "{{repeat ";
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(OPEN) {
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        let after = after.split_at(OPEN.len()).1;
        let (n, after) = after.split_once(' ').ok_or("`{{repeat N \"text\"}}` needs a count")?;
        let n: usize = n.parse().map_err(|_| format!("bad repeat count {n:?}"))?;
        let (text, after) = json_string(after)?;
        let after = after.strip_prefix("}}").ok_or("`{{repeat` must end with `}}`")?;
        out.push_str(&text.repeat(n));
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

fn parse_event(s: &str) -> Result<Event, String> {
    let words: Vec<&str> = s.split_whitespace().collect();
    match words.as_slice() {
        ["invoke", "tools/call", name, id @ ..] if !id.is_empty() => {
            let id = id.join(" ");
            let id = serde_json::from_str(&id).map_err(|e| format!("bad id {id}: {e}"))?;
            Ok(Event::Invoke { name: (*name).to_owned(), id })
        }
        ["cancel", id @ ..] if !id.is_empty() => {
            let id = id.join(" ");
            Ok(Event::Cancel { id: serde_json::from_str(&id).map_err(|e| format!("bad id {id}: {e}"))? })
        }
        ["close", "end-of-input"] => Ok(Event::Close("end-of-input")),
        ["close", "closed"] => Ok(Event::Close("closed")),
        ["close", "frame-too-large"] => Ok(Event::Close("frame-too-large")),
        ["stale"] => Ok(Event::Stale),
        ["unknown-connection"] => Ok(Event::UnknownConnection),
        _ => Err(format!("unknown expectation `= {s}`")),
    }
}

fn parse_reply(
    s: &str,
    handler: TestHandler,
    arguments: &Map<String, Value>,
) -> Result<Result<ToolOutput, HandlerError>, String> {
    let (kind, rest) = s.split_once(' ').map_or((s, ""), |(a, b)| (a, b.trim()));
    Ok(match kind {
        "text" => Ok(ToolOutput::text(json_string(rest)?.0)),
        "error-text" => Ok(ToolOutput::error(json_string(rest)?.0)),
        "structured" => {
            Ok(ToolOutput::structured(serde_json::from_str(rest).map_err(|e| format!("structured: {e}"))?))
        }
        "result" => Ok(tool_output(&serde_json::from_str(rest).map_err(|e| format!("result: {e}"))?)?),
        "public-error" => {
            let (code, rest) = rest.split_once(' ').ok_or("public-error CODE \"message\" [{data}]")?;
            let code: i64 = code.parse().map_err(|_| format!("bad code {code}"))?;
            let (message, rest) = json_string(rest)?;
            let mut e = RpcError::new(mcp_proto::ErrorCode::Other(code), message);
            if !rest.trim().is_empty() {
                e = e.with_data(serde_json::from_str(rest.trim()).map_err(|e| format!("data: {e}"))?);
            }
            Err(HandlerError::Public(e))
        }
        "private-error" => Err(HandlerError::private(json_string(rest).map(|x| x.0).unwrap_or_default())),
        "panic" => Err(HandlerError::Panicked),
        "cancelled" => Err(HandlerError::Cancelled),
        "auto" => auto_reply(handler, arguments).ok_or("this tool has no automatic behaviour")?,
        _ => return Err(format!("unknown reply kind {kind:?}")),
    })
}

/// A `CallToolResult`-shaped JSON object as a [`ToolOutput`].
fn tool_output(v: &Value) -> Result<ToolOutput, String> {
    let mut out = ToolOutput::default();
    for block in v.get("content").and_then(Value::as_array).into_iter().flatten() {
        out.content.push(content_block(block)?);
    }
    out.structured = v.get("structuredContent").cloned();
    out.is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
    out.meta = v.get("_meta").and_then(Value::as_object).cloned();
    Ok(out)
}

fn content_block(b: &Value) -> Result<Content, String> {
    let s = |k: &str| b.get(k).and_then(Value::as_str).map(str::to_owned);
    let need = |k: &str| s(k).ok_or_else(|| format!("content block {b} needs {k:?}"));
    let annotations = b.get("annotations").and_then(Value::as_object).cloned();
    Ok(match s("type").as_deref() {
        Some("text") => Content::Text { text: need("text")?, annotations },
        Some("image") => Content::Image { data: need("data")?, mime_type: need("mimeType")?, annotations },
        Some("audio") => Content::Audio { data: need("data")?, mime_type: need("mimeType")?, annotations },
        Some("resource_link") => Content::ResourceLink(ResourceLink {
            uri: need("uri")?,
            name: need("name")?,
            title: s("title"),
            description: s("description"),
            mime_type: s("mimeType"),
            size: b.get("size").and_then(Value::as_u64),
        }),
        Some("resource") => {
            let r = b.get("resource").ok_or("a resource block needs \"resource\"")?;
            let rs = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
            let uri = rs("uri").ok_or("resource needs uri")?;
            let mut contents = match (rs("text"), rs("blob")) {
                (Some(t), _) => ResourceContents::text(uri, "", t),
                (None, Some(bl)) => ResourceContents::blob(uri, "", bl),
                _ => return Err("resource needs text or blob".into()),
            };
            contents.mime_type = rs("mimeType");
            contents.meta = r.get("_meta").and_then(Value::as_object).cloned();
            Content::Resource { resource: contents, annotations }
        }
        _ => return Err(format!("unknown content block {b}")),
    })
}

/// Where two frames first differ, with a little context.
fn diff(expected: &Event, actual: &Event) -> String {
    let (Event::Frame(e), Event::Frame(a)) = (expected, actual) else { return String::new() };
    let at = e.iter().zip(a.iter()).position(|(x, y)| x != y).unwrap_or(e.len().min(a.len()));
    let from = at.saturating_sub(30);
    let show = |b: &[u8]| {
        let end = (at + 40).min(b.len());
        String::from_utf8_lossy(b.get(from..end).unwrap_or_default()).into_owned()
    };
    let byte = |b: &[u8]| b.get(at).map_or("end".to_owned(), |x| format!("0x{x:02x}"));
    format!(
        "\n  first difference at byte {at} (expected {}, actual {}):\n    expected …{}…\n    actual   …{}…",
        byte(e),
        byte(a),
        show(e),
        show(a)
    )
}
