//! Shared harness for the mcp-proto fuzz targets: a fixed engine setup (deterministic keys, a
//! few tools, a resource, a template and a prompt), deterministic stand-in handlers, and the
//! checks every emitted frame must pass.
//!
//! Everything here panics on a broken invariant: a panic is how libFuzzer learns of a finding.

pub mod http_ops;
pub mod ops;

use std::collections::HashSet;
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use mcp_proto::{
    Caller, Completion, Config, ConnId, ConnKind, Content, Engine, ErrorCode, HandlerError, Implementation,
    KeyRing, Limits, Prompt, PromptArgument, PromptMessage, PromptOutput, Reply, Request, Resource,
    ResourceContents, ResourceTemplate, RpcError, Tool, ToolOutput,
};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
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

/// Opens an anonymous stdio connection.
pub fn open(engine: &mut Engine<()>, now: Instant, caller: Caller) -> Option<ConnId> {
    engine.open(now, ConnKind::Stdio, caller).ok()
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

/// The identity a request id denotes, as the engine compares ids: strings by decoded value,
/// integers by their digits. `None` for anything that is not a usable id.
pub fn canon_id(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(format!("s:{s}")),
        Value::Number(n) => {
            let t = n.to_string();
            let digits = t.strip_prefix('-').unwrap_or(&t);
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| format!("n:{t}"))
        }
        _ => None,
    }
}

/// Whether `key` case-folds onto `"id"`.
pub fn folds_to_id(key: &str) -> bool {
    key.chars().flat_map(char::to_lowercase).eq("id".chars())
}

/// What one emitted frame said.
#[derive(Debug, Default)]
pub struct Checked {
    /// One entry per response in the frame (one, or one per batch member): its id's identity,
    /// `None` for a `null` id.
    pub answers: Vec<Option<String>>,
    /// Server-to-client notifications in the frame.
    pub notifications: usize,
    /// `nextCursor` values seen in results.
    pub cursors: Vec<String>,
    /// `protocolVersion` of `initialize` results: the session this frame set up.
    pub sessions: Vec<String>,
    /// Ids of server-to-client requests in the frame (only where [`check_message`] allows them).
    pub requests: Vec<Value>,
}

/// Checks one emitted frame: valid JSON without repeated keys, within `ceiling` bytes, and
/// shaped as JSON-RPC (a response has `"jsonrpc":"2.0"`, an `id` and exactly one of `result`
/// and `error`; an error has an integer `code` and a string `message`).
pub fn check_frame(bytes: &[u8], ceiling: usize) -> Checked {
    check_message(bytes, ceiling, false)
}

/// [`check_frame`], except that with `requests_ok` a message with both `id` and `method` (a
/// server-to-client request, as an HTTP stream may carry) is allowed and its id collected.
pub fn check_message(bytes: &[u8], ceiling: usize, requests_ok: bool) -> Checked {
    assert!(
        bytes.len() <= ceiling,
        "emitted frame of {} bytes exceeds the {ceiling}-byte response ceiling: {}",
        bytes.len(),
        String::from_utf8_lossy(bytes.get(..512).unwrap_or(bytes))
    );
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => panic!("emitted frame is not JSON ({e}): {}", String::from_utf8_lossy(bytes)),
    };
    if let Err(e) = no_repeated_keys(bytes) {
        panic!("emitted frame repeats a key ({e}): {}", String::from_utf8_lossy(bytes));
    }
    let mut checked = Checked::default();
    let show = || String::from_utf8_lossy(bytes).into_owned();
    let messages = match &value {
        Value::Array(items) => {
            assert!(!items.is_empty(), "emitted an empty batch: {}", show());
            items.iter().collect::<Vec<_>>()
        }
        other => vec![other],
    };
    for m in messages {
        let Value::Object(m) = m else { panic!("emitted a non-object message: {}", show()) };
        assert_eq!(m.get("jsonrpc"), Some(&json!("2.0")), "missing jsonrpc 2.0: {}", show());
        if m.contains_key("method") {
            assert!(m.get("method").is_some_and(Value::is_string), "non-string method: {}", show());
            if let Some(id) = m.get("id") {
                assert!(requests_ok, "the engine sent a request, which nothing here answers: {}", show());
                assert!(
                    canon_id(id).is_some(),
                    "a request id is neither a string nor an integer: {}",
                    show()
                );
                checked.requests.push(id.clone());
                continue;
            }
            checked.notifications += 1;
            continue;
        }
        let id = m.get("id").unwrap_or_else(|| panic!("response without id: {}", show()));
        assert!(
            id.is_null() || canon_id(id).is_some(),
            "response id is neither null, a string nor an integer: {}",
            show()
        );
        match (m.get("result"), m.get("error")) {
            (Some(result), None) => {
                assert!(result.is_object(), "result is not an object: {}", show());
                if let Some(c) = result.get("nextCursor") {
                    let c = c.as_str().unwrap_or_else(|| panic!("nextCursor not a string: {}", show()));
                    checked.cursors.push(c.to_owned());
                }
                if result.get("serverInfo").is_some() {
                    if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                        checked.sessions.push(v.to_owned());
                    }
                }
            }
            (None, Some(error)) => {
                assert!(error.get("code").is_some_and(|c| c.as_i64().is_some()), "error code: {}", show());
                assert!(error.get("message").is_some_and(Value::is_string), "error message: {}", show());
            }
            _ => panic!("a response needs exactly one of result and error: {}", show()),
        }
        assert!(m.len() == 3, "unexpected members in a response: {}", show());
        checked.answers.push(canon_id(id));
    }
    checked
}

/// The ids of `frame` that the engine will answer by id, as [`canon_id`] identities, one per
/// request (a batch may hold several).
///
/// This reads the frame as leniently as the engine's decoder does (unknown members skipped
/// unchecked), so it never misses an id the engine could echo; it may count one the engine
/// ends up answering with `null` (for instance when a later member is not valid JSON text).
pub fn answerable_ids(frame: &[u8], max_id_bytes: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(frame);
    let ok = FrameProbe { out: &mut out, member: false }.deserialize(&mut de).is_ok() && de.end().is_ok();
    if !ok {
        // Not JSON: answered with a parse error and a null id.
        return Vec::new();
    }
    out.into_iter()
        .filter(|p| p.answerable())
        .filter_map(|p| {
            let raw = p.id?;
            if raw.len() > max_id_bytes {
                return None;
            }
            canon_id(&serde_json::from_str::<Value>(&raw).ok()?)
        })
        .collect()
}

#[derive(Default)]
struct Probe {
    id: Option<String>,
    ids: usize,
    id_like: bool,
    method: bool,
    result_or_error: bool,
}

impl Probe {
    /// A single `id`, no case-folded twin, and not a response (which is never answered).
    fn answerable(&self) -> bool {
        let response = !self.method && self.result_or_error;
        self.ids == 1 && !self.id_like && !response
    }
}

/// Reads a frame's shape: a message, a batch of messages (one level: a batch member that is
/// itself an array is just not a message), or anything else.
struct FrameProbe<'a> {
    out: &'a mut Vec<Probe>,
    /// Inside a batch, where another array is a member that is not a message.
    member: bool,
}

impl<'de> DeserializeSeed<'de> for FrameProbe<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FrameProbe<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.member { "a batch member" } else { "a frame" })
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        self.out.push(probe_map(map)?);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.member {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
        } else {
            while seq.next_element_seed(FrameProbe { out: &mut *self.out, member: true })?.is_some() {}
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

fn probe_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Probe, A::Error> {
    let mut p = Probe::default();
    while let Some(key) = map.next_key::<String>()? {
        if key == "id" {
            p.ids += 1;
            let raw: &RawValue = map.next_value()?;
            p.id = Some(raw.get().to_owned());
            continue;
        }
        if folds_to_id(&key) {
            p.id_like = true;
        }
        match key.as_str() {
            "method" => p.method = true,
            "result" | "error" => p.result_or_error = true,
            _ => {}
        }
        map.next_value::<IgnoredAny>()?;
    }
    Ok(p)
}

/// Fails when some object in `bytes` repeats a key.
pub fn no_repeated_keys(bytes: &[u8]) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    NoRepeats.deserialize(&mut de).map_err(|e| e.to_string())
}

struct NoRepeats;

impl<'de> DeserializeSeed<'de> for NoRepeats {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NoRepeats {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("repeated key {key:?}")));
            }
            map.next_value_seed(NoRepeats)?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NoRepeats)?.is_some() {}
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Convenience: a `Map` from pairs.
pub fn object(pairs: Vec<(&str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}
