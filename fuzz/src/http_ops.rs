//! Structured fuzzing of Streamable HTTP: an `Arbitrary` list of operations applied to one
//! engine with small limits (3 sessions, 4 streams and 2 per caller, 32 connections, 500 ms
//! handshake, 2 s idle, 300 ms keep-alive, 1 s call timeout), checked after every step.
//!
//! Operations: HTTP requests from a vocabulary (method; `Accept`; session header; caller;
//! `Last-Event-ID`; a body of raw bytes, a batch, or one JSON-RPC message: `initialize`,
//! `notifications/initialized`, `ping`, `tools/list`, `tools/call` of `echo` or of `region`
//! (whose arguments are mirrored into `Mcp-Param-*`), `resources/read`, `subscriptions/listen`,
//! `resources/subscribe`, `logging/setLevel`, `server/discover`, `notifications/cancelled`, a
//! response to a server request seen on a stream, a 2026 retry carrying a captured
//! `requestState`, with or without 2026 `_meta`; and at most one head defect: `Host`
//! foreign/missing/twice, `Origin`, `Content-Type`, `Accept`, session id unknown/malformed,
//! `MCP-Protocol-Version` legacy/2026/unknown/malformed/missing, `Mcp-Method`/`Mcp-Name`/
//! `Mcp-Param-*` missing, base64-encoded or wrong); a whole handshake; completions; asks
//! ([`Engine::ask`] with one or two elicitations, or sampling); progress; logs; clock steps;
//! client disconnects ([`Engine::close`]); registry and gate changes; resource updates;
//! [`Engine::shutdown`]. What the vocabulary leaves `Auto` follows from the body (see
//! [`HttpSpec`]), so that most requests reach the engine's deep states rather than its refusals.
//!
//! Each request goes through [`check_head`] first, as a shim would (a refusal is just a
//! refusal, checked for shape), then through [`Engine::handle_http`]. The harness plays the shim:
//! it holds every [`HttpReply::Pending`] connection, follows its lifecycle through
//! [`Engine::poll_output`], runs the invocations it is handed, and fires a timer that is due.
//!
//! Invariants, after every step (those [`Checks`] names can be turned off, for known findings):
//! - no panic; at most [`OUTPUT_BOUND`] outputs per step;
//! - `Frame`, `Stream`, `Respond` and `Close` name a connection some `Pending` reply handed out
//!   ([`Checks::session_close`]), and nothing names one after its `Respond` or `Close`;
//! - a pending connection's first output is `Respond` (then nothing) or `Stream` (then only
//!   `Frame`s, then one `Close`); a `Close` with nothing before it answers only the harness's
//!   own [`Engine::close`] ([`Checks::unstarted_close`]); a `GET` stream starts in the step that
//!   opened it; a client that does not accept SSE never gets a stream, one that does not accept
//!   JSON never gets a JSON body;
//! - every `Full`/`Respond` body is empty (204, 202, or a `Full` without content type) or
//!   JSON-RPC under a JSON content type (valid JSON, no repeated keys, one result or error per
//!   response), with a known status; a `POST` exchange carries at most one response, and
//!   exactly one when it ends with `EndOfInput`; a session id is minted only for `initialize`;
//! - every SSE frame is one well-formed event or comment (`field: value` lines or `:` comments,
//!   LF only, ending in the only blank line); its data is JSON-RPC; event ids are
//!   `<stream>-<seq>`, one stream number per connection, sequence numbers strictly increasing;
//! - a successful `initialize` reaches the client only in a `Full` reply carrying its new
//!   `Mcp-Session-Id` ([`Checks::initialize_on_stream`]);
//! - `status()`: sessions ≤ `max_sessions` and equal to the harness's count (made by `Full`
//!   replies, ended by session `Close`s); streams ≤ `max_streams` and ≤ the pending connections
//!   held; connections ≤ `max_connections` ([`Checks::connection_cap`]); `in_flight` equals the
//!   uncancelled calls the harness holds; no live call outlives its deadline; a step that gave
//!   the engine `now` arms no timer at or before it ([`Checks::stale_clock`]), and once due
//!   timers fired `poll_timeout()` is after now;
//! - `Cancel` names a call the harness holds, once; `complete`, `progress` and `log` are `Stale`
//!   exactly when it was cancelled; `Answer` comes once per pending legacy ask and never for a
//!   cancelled call; `ask` is `Stale` exactly for cancelled calls, `Busy` exactly while a legacy
//!   ask waits, `Pending` only for legacy calls (and a server request went out in that step),
//!   `Suspended` and `Answered` only for 2026 calls (a suspension cancels the call); after
//!   `shutdown` no invocation and no session is made;
//! - at the end every call is completed; then what is still open must be exactly the held
//!   streams ([`Checks::legacy_listen`]); it is closed, the clock passes every timeout, and the
//!   engine must hold no connection, session, stream, call or listen, have no output, and
//!   `poll_timeout()` must be `None`.
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use mcp_proto::http::{check_body_len, check_head, HttpConfig, RequestHead, Route};
use mcp_proto::interaction::InputRequest;
use mcp_proto::sse::EventId;
use mcp_proto::{
    AskError, Asked, CallId, Caller, CloseReason, ConnId, Engine, HttpHead, HttpReply, HttpRequest, Limits,
    LogLevel, Output, Request, SeatPolicy, Ticket, Tool,
};
use serde_json::{json, Map, Value};

use crate::{base_time, check_message, config, register, reply, ReplyKind, SmallJson};

const MAX_SESSIONS: usize = 3;
const MAX_STREAMS: usize = 4;
const STREAMS_PER_CALLER: usize = 2;
const MAX_CONNECTIONS: usize = 32;
const MAX_IN_FLIGHT: usize = 4;
const MAX_LISTENS: usize = 2;
const MAX_BATCH: usize = 4;
const MAX_FRAME: usize = 4096;
const MAX_RESPONSE: usize = 8192;
/// A batch reply holds up to `MAX_BATCH` responses, each within `MAX_RESPONSE`.
const BODY_CEILING: usize = MAX_RESPONSE * (MAX_BATCH + 1);
const SESSION_IDLE: Duration = Duration::from_secs(2);
const HANDSHAKE: Duration = Duration::from_millis(500);
const KEEPALIVE: Duration = Duration::from_millis(300);
const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Small, so that a resuming `GET` can miss more than the buffer holds.
const REPLAY_EVENTS: usize = 4;
/// Most outputs one step may produce.
pub const OUTPUT_BOUND: usize = 256;
/// Ops applied per run.
const MAX_OPS: usize = 256;
/// Captured ids, states, cursors and event ids kept per run.
const KEEP: usize = 16;

/// HTTP statuses the engine or `check_head` may answer with.
const STATUSES: [u16; 14] = [200, 202, 204, 400, 403, 404, 405, 406, 413, 415, 429, 431, 500, 503];

/// One fuzz input: which seat policy the engine runs with, and the operations.
#[derive(Arbitrary, Debug, Clone)]
pub struct Input {
    /// [`SeatPolicy::EvictOldest`] instead of [`SeatPolicy::Refuse`].
    pub evict: bool,
    /// Applied in order (at most 256).
    pub ops: Vec<Op>,
}

/// Picks an index with the given relative weights (the vocabulary leans towards what reaches
/// deep states: well-formed requests on the session or wire the body implies).
fn weighted(u: &mut Unstructured<'_>, weights: &[u32]) -> arbitrary::Result<usize> {
    let total: u32 = weights.iter().sum();
    let mut x = u.int_in_range(0..=total.saturating_sub(1))?;
    for (i, w) in weights.iter().enumerate() {
        if x < *w {
            return Ok(i);
        }
        x -= w;
    }
    Ok(weights.len().saturating_sub(1))
}

/// `Some` one time in four.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rare<T>(pub Option<T>);

impl<'a, T: Arbitrary<'a>> Arbitrary<'a> for Rare<T> {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Rare(if u.ratio(1u8, 4u8)? { Some(T::arbitrary(u)?) } else { None }))
    }
}

#[derive(Debug, Clone)]
pub enum Op {
    /// One HTTP request.
    Http(HttpSpec),
    /// `initialize` then (if it made a session) `notifications/initialized`.
    Session { version: LegacyVersion, elicitation: bool, caller: CallerSpec, accept: AcceptSpec },
    /// Completes the invocation at this index (modulo the number held).
    Complete { call: u8, reply: ReplyKind },
    /// The handler of this invocation asks the client instead of answering.
    Ask { call: u8, ask: AskSpec },
    /// The handler reports progress.
    Progress { call: u8 },
    /// The handler logs.
    Log { call: u8 },
    /// Moves the clock, firing what is due.
    Tick(Tick),
    /// The client of this pending connection goes away: [`Engine::close`].
    Disconnect { conn: u8 },
    /// Unregisters or re-registers a tool (`list_changed` fan-out).
    ToggleTool,
    /// `notify_resource_updated` for the static resource.
    Touch,
    /// Sets the server-wide gate to admit only identified callers, or clears it.
    Gate(bool),
    /// [`Engine::shutdown`].
    Shutdown,
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match weighted(u, &[40, 6, 12, 8, 3, 2, 9, 5, 3, 2, 2, 1])? {
            0 => Op::Http(u.arbitrary()?),
            1 => Op::Session {
                version: u.arbitrary()?,
                elicitation: u.arbitrary()?,
                caller: u.arbitrary()?,
                accept: u.arbitrary()?,
            },
            2 => Op::Complete { call: u.arbitrary()?, reply: u.arbitrary()? },
            3 => Op::Ask { call: u.arbitrary()?, ask: u.arbitrary()? },
            4 => Op::Progress { call: u.arbitrary()? },
            5 => Op::Log { call: u.arbitrary()? },
            6 => Op::Tick(u.arbitrary()?),
            7 => Op::Disconnect { conn: u.arbitrary()? },
            8 => Op::ToggleTool,
            9 => Op::Touch,
            10 => Op::Gate(u.arbitrary()?),
            _ => Op::Shutdown,
        })
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Tick {
    Ms(u8),
    KeepAlive,
    Handshake,
    Idle,
    CallTimeout,
    /// `handle_timeout` at the current time, whether or not anything is due.
    Spurious,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum AskSpec {
    /// One form elicitation under key `who`.
    Elicit,
    /// Two, under `who` and `who2`.
    Two,
    /// Sampling (no client here declares it).
    Sample,
}

/// One HTTP request. What is `Auto` follows from the body: a 2026-07-28 `_meta` gets the
/// version header and no session, `initialize` no session, a response the session (and caller)
/// of the stream that carried the request, a retry the caller its state is bound to, anything
/// else the latest session and its caller.
#[derive(Arbitrary, Debug, Clone)]
pub struct HttpSpec {
    pub method: Method,
    pub accept: AcceptSpec,
    pub session: SessionSpec,
    pub caller: CallerSpec,
    pub last_event_id: LastEventId,
    pub body: Body,
    /// At most one thing wrong with the head.
    pub defect: Rare<Defect>,
}

impl HttpSpec {
    /// A well-formed `POST` of `body`, everything `Auto`.
    pub fn post(body: Body) -> Self {
        Self {
            method: Method::Post,
            accept: AcceptSpec::Both,
            session: SessionSpec::Auto,
            caller: CallerSpec::Auto,
            last_event_id: LastEventId::Absent,
            body,
            defect: Rare(None),
        }
    }

    /// A `GET` stream for the latest session.
    pub fn get() -> Self {
        Self { method: Method::Get, accept: AcceptSpec::Sse, ..Self::post(Body::Empty) }
    }

    /// A `DELETE` of the latest session.
    pub fn delete() -> Self {
        Self { method: Method::Delete, ..Self::post(Body::Empty) }
    }

    /// With this `Accept`.
    pub fn accept(mut self, accept: AcceptSpec) -> Self {
        self.accept = accept;
        self
    }

    /// As this caller.
    pub fn caller(mut self, caller: CallerSpec) -> Self {
        self.caller = caller;
        self
    }

    /// With this session header.
    pub fn session(mut self, session: SessionSpec) -> Self {
        self.session = session;
        self
    }

    /// With this `Last-Event-ID`.
    pub fn last_event_id(mut self, id: LastEventId) -> Self {
        self.last_event_id = id;
        self
    }

    /// With this defect.
    pub fn defect(mut self, defect: Defect) -> Self {
        self.defect = Rare(Some(defect));
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Post,
    Get,
    Delete,
    Other,
}

impl<'a> Arbitrary<'a> for Method {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok([Method::Post, Method::Get, Method::Delete, Method::Other][weighted(u, &[16, 5, 2, 1])?])
    }
}

#[derive(Debug, Clone, Copy)]
pub enum AcceptSpec {
    Json,
    Sse,
    Both,
    SseFirst,
    Wildcard,
}

impl<'a> Arbitrary<'a> for AcceptSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        use AcceptSpec::*;
        Ok([Both, Json, Sse, SseFirst, Wildcard][weighted(u, &[8, 2, 2, 2, 1])?])
    }
}

#[derive(Debug, Clone, Copy)]
pub enum SessionSpec {
    /// As the body implies (see [`HttpSpec`]).
    Auto,
    Absent,
    /// One of the ids minted so far.
    Minted(u8),
}

impl<'a> Arbitrary<'a> for SessionSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match weighted(u, &[8, 1, 1])? {
            0 => SessionSpec::Auto,
            1 => SessionSpec::Absent,
            _ => SessionSpec::Minted(u.arbitrary()?),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerSpec {
    /// As the request implies (see [`HttpSpec`]); anonymous otherwise.
    Auto,
    Anonymous,
    Alice,
    Bob,
}

impl<'a> Arbitrary<'a> for CallerSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        use CallerSpec::*;
        Ok([Auto, Anonymous, Alice, Bob][weighted(u, &[6, 1, 1, 1])?])
    }
}

impl CallerSpec {
    fn caller(self) -> Caller {
        match self {
            CallerSpec::Auto | CallerSpec::Anonymous => Caller::anonymous(),
            CallerSpec::Alice => Caller::identified("alice"),
            CallerSpec::Bob => Caller::identified("bob"),
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyVersion {
    V20250326,
    V20250618,
    V20251125,
}

impl LegacyVersion {
    fn as_str(self) -> &'static str {
        match self {
            LegacyVersion::V20250326 => "2025-03-26",
            LegacyVersion::V20250618 => "2025-06-18",
            LegacyVersion::V20251125 => "2025-11-25",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum LastEventId {
    Absent,
    /// One of the event ids seen so far.
    Seen(u8),
    /// Well formed, beyond anything sent.
    Future,
    Garbage,
}

impl<'a> Arbitrary<'a> for LastEventId {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match weighted(u, &[6, 4, 1, 1])? {
            0 => LastEventId::Absent,
            1 => LastEventId::Seen(u.arbitrary()?),
            2 => LastEventId::Future,
            _ => LastEventId::Garbage,
        })
    }
}

/// One thing wrong with (or unusual about) a request head.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Defect {
    ForeignHost,
    LoopbackHost,
    MissingHost,
    TwoHosts,
    SameOrigin,
    ForeignOrigin,
    TextContentType,
    NoContentType,
    CharsetContentType,
    NoAccept,
    AcceptNeither,
    UnknownSession,
    MalformedSession,
    /// This legacy version in `MCP-Protocol-Version`, whatever the body says.
    LegacyVersion(LegacyVersion),
    ModernVersion,
    UnknownVersion,
    MalformedVersion,
    NoVersion,
    /// No `Mcp-Method`, `Mcp-Name` or `Mcp-Param-*` headers.
    NoMirror,
    /// The mirror headers base64-encoded.
    EncodedMirror,
    WrongMethod,
    WrongName,
    WrongParam,
}

#[derive(Debug, Clone)]
pub enum Body {
    Empty,
    Raw(Vec<u8>),
    Message(Msg),
    Batch(Vec<Msg>),
}

impl<'a> Arbitrary<'a> for Body {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match weighted(u, &[1, 1, 16, 2])? {
            0 => Body::Empty,
            1 => Body::Raw(u.arbitrary()?),
            2 => Body::Message(u.arbitrary()?),
            _ => Body::Batch(u.arbitrary()?),
        })
    }
}

#[derive(Arbitrary, Debug, Clone)]
pub struct Msg {
    /// `None`: a notification. Otherwise `% 8`.
    pub id: Option<u8>,
    pub kind: MsgKind,
    pub meta: Meta,
    /// Adds `_meta.progressToken`.
    pub progress: bool,
}

impl Msg {
    /// A request with this id and no `_meta`.
    pub fn request(id: u8, kind: MsgKind) -> Self {
        Self { id: Some(id), kind, meta: Meta::None, progress: false }
    }

    /// A notification.
    pub fn notification(kind: MsgKind) -> Self {
        Self { id: None, kind, meta: Meta::None, progress: false }
    }

    /// With this `_meta`.
    pub fn meta(mut self, meta: Meta) -> Self {
        self.meta = meta;
        self
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Meta {
    None,
    /// 2026-07-28 with client capabilities that declare elicitation.
    Modern,
    /// 2026-07-28 with empty client capabilities.
    ModernBare,
    /// 2026-07-28 without client capabilities (refused).
    ModernNoCaps,
    /// 2026-07-28 with `logLevel: debug`.
    ModernLogging,
    /// A legacy version in `_meta` (refused: legacy versions are negotiated).
    LegacyVersion,
    NotAnObject,
}

impl<'a> Arbitrary<'a> for Meta {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        use Meta::*;
        let all = [None, Modern, ModernBare, ModernNoCaps, ModernLogging, LegacyVersion, NotAnObject];
        Ok(all[weighted(u, &[10, 7, 1, 1, 1, 1, 1])?])
    }
}

impl Meta {
    fn modern(self) -> bool {
        matches!(self, Meta::Modern | Meta::ModernBare | Meta::ModernNoCaps | Meta::ModernLogging)
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum MsgKind {
    Initialize {
        version: LegacyVersion,
        elicitation: bool,
    },
    Initialized,
    Ping,
    ToolsList {
        cursor: bool,
    },
    Echo {
        text: u8,
    },
    /// The tool whose arguments are mirrored into `Mcp-Param-Region` and `Mcp-Param-N`.
    Region {
        arg: RegionArg,
    },
    Read,
    Listen {
        tools: bool,
        resource: bool,
    },
    Subscribe,
    SetLevel,
    Discover,
    Cancel {
        target: u8,
    },
    /// A response to one of the server requests seen so far.
    Response {
        to: u8,
        answer: AnswerSpec,
    },
    /// A retry of a call answered with `input_required`, with its `requestState` and an
    /// answer under `who` (and `who2` when `both`).
    Retry {
        state: u8,
        answer: AnswerSpec,
        both: bool,
    },
    Unknown,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum RegionArg {
    Absent,
    Null,
    Str(u8),
    Int(u8),
    Both(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum AnswerSpec {
    Accept,
    /// Accepted with content that does not fit the form.
    Invalid,
    Decline,
    /// A JSON-RPC error (a legacy response only; a retry sends `{}`).
    Error,
}

fn answer_value(a: AnswerSpec) -> Value {
    match a {
        AnswerSpec::Accept => json!({"action": "accept", "content": {"name": "Ada"}}),
        AnswerSpec::Invalid => json!({"action": "accept", "content": {"name": 5}}),
        AnswerSpec::Decline => json!({"action": "decline"}),
        AnswerSpec::Error => json!({}),
    }
}

/// What the body implies about the head (see [`HttpSpec`]).
#[derive(Debug, Default, Clone, Copy)]
struct Hint {
    modern: bool,
    initialize: bool,
    /// A response: the session whose stream carried the request (index into `minted`).
    response_session: Option<Option<usize>>,
    /// A retry: the caller its state is bound to.
    retry_caller: Option<CallerSpec>,
}

/// Which checks are enforced. [`Checks::STRICT`] is everything the engine should guarantee;
/// [`Checks::FUZZ`] may leave out a known engine finding while it is being fixed, so that fuzzing
/// can go past it (today it is [`Checks::STRICT`]: every finding so far is fixed).
#[derive(Debug, Clone, Copy)]
pub struct Checks {
    /// No `Close` for a connection no `Pending` reply named (a legacy session's own).
    pub session_close: bool,
    /// A successful `initialize` arrives on a stream only when the stream's head carries its session id.
    pub initialize_on_stream: bool,
    /// Once every call is answered, only held streams (seats) stay open, counting the stream
    /// of a `subscriptions/listen` sent inside a legacy session too (when off, such exchanges are
    /// left out of the count).
    pub legacy_listen: bool,
    /// No `Close` for a connection that never got its `Stream`, except the harness's own
    /// [`Engine::close`]; when off, a `subscriptions/listen` from a client that accepts only JSON
    /// may end that way.
    pub unstarted_close: bool,
    /// `status().connections` never exceeds `max_connections`; when off, only a bound that
    /// also counts what the legacy paths admit without that check (a session's pending
    /// exchanges, `GET` streams).
    pub connection_cap: bool,
    /// A step that passed `now` to the engine arms no timer at or before it; when off, `log`
    /// and `notify_resource_updated` may (they ignore their `now`). Registry changes take no
    /// `now`, so a stream they start is timed from the last `now` the engine saw, by design.
    pub stale_clock: bool,
}

impl Checks {
    /// Every check.
    pub const STRICT: Checks = Checks {
        session_close: true,
        initialize_on_stream: true,
        legacy_listen: true,
        unstarted_close: true,
        connection_cap: true,
        stale_clock: true,
    };
    /// What the fuzz target runs with.
    pub const FUZZ: Checks = Checks::STRICT;
}

/// What a run reached: for scenario tests to prove the harness went where they meant it to.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Every `Close` of a pending connection, by reason.
    pub closes: Vec<CloseReason>,
    /// `Close`s of connections no reply named (legacy sessions).
    pub session_closes: Vec<CloseReason>,
    /// Statuses of `Full` replies.
    pub full: Vec<u16>,
    /// Statuses of `Respond` outputs.
    pub responded: Vec<u16>,
    /// `check_head` refusals.
    pub refused: Vec<u16>,
    /// Sessions made (a `Full` reply carried a new `Mcp-Session-Id`).
    pub sessions: usize,
    /// `Stream` outputs.
    pub streams: usize,
    /// SSE frames.
    pub frames: usize,
    /// Invocations.
    pub invokes: usize,
    /// `Cancel` outputs.
    pub cancels: usize,
    /// `Answer` outputs.
    pub answers: usize,
    /// `Answer` outputs that carried answers.
    pub answered_ok: usize,
    /// `ask` outcomes, as `Debug` text.
    pub asks: Vec<String>,
    /// Server requests seen on streams.
    pub server_requests: usize,
    /// `input_required` results seen.
    pub input_required: usize,
    /// Completions that were `Stale`.
    pub stale: usize,
    /// Most seats held at once.
    pub max_streams: usize,
}

/// Prints a line to stderr when `MCP_FUZZ_TRACE` is set.
fn trace(line: impl FnOnce() -> String) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("MCP_FUZZ_TRACE").is_some()) {
        eprintln!("{}", line());
    }
}

fn limits(evict: bool) -> Limits {
    let mut limits = Limits::default();
    limits
        .max_sessions(MAX_SESSIONS)
        .max_streams(Some(MAX_STREAMS))
        .max_streams_per_caller(Some(STREAMS_PER_CALLER))
        .seat_policy(if evict { SeatPolicy::EvictOldest } else { SeatPolicy::Refuse })
        .max_connections(MAX_CONNECTIONS)
        .max_in_flight(MAX_IN_FLIGHT)
        .max_listens(MAX_LISTENS)
        .max_batch_len(MAX_BATCH)
        .max_frame_bytes(MAX_FRAME)
        .max_response_bytes(MAX_RESPONSE)
        .session_idle(SESSION_IDLE)
        .session_handshake(HANDSHAKE)
        .keepalive(KEEPALIVE)
        .replay_events(REPLAY_EVENTS)
        .progress_interval(Duration::from_millis(10))
        .stream_queue(4)
        .page_size(2);
    limits
}

/// The tool whose arguments travel in `Mcp-Param-*` headers too.
fn region_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"}
        }
    });
    Tool::new("region", "Mirrored arguments", schema)
}

fn engine(evict: bool) -> Engine<()> {
    let mut engine = Engine::new(config(limits(evict), Some(CALL_TIMEOUT)), base_time());
    register(&mut engine, 2);
    engine.registry_mut(base_time()).add_tool(region_tool(), ()).expect("region");
    engine
}

/// Runs one fuzz input with [`Checks::FUZZ`].
pub fn fuzz(input: &Input) {
    run(input, Checks::FUZZ);
}

/// Runs `input` on a fresh engine for its seat policy, with `checks`, so that a finding
/// reproduces from its input alone.
pub fn run(input: &Input, checks: Checks) -> Report {
    let mut engine = engine(input.evict);
    let http = HttpConfig::default();
    let mut sim = Sim::new(&mut engine, &http, base_time(), checks);
    for op in input.ops.iter().take(MAX_OPS) {
        sim.op(op);
    }
    sim.finish();
    std::mem::take(&mut sim.report)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Handed out, nothing emitted yet.
    Waiting,
    /// `Stream` emitted.
    Streaming,
    /// `Respond` or `Close` emitted.
    Done,
}

struct Conn {
    id: ConnId,
    st: St,
    get: bool,
    json_ok: bool,
    sse_ok: bool,
    /// The harness is closing it: a `Close` may come before any `Stream`.
    closing: bool,
    /// JSON-RPC responses (or batch replies) delivered.
    responses: usize,
    /// Its stream's head carried a new session's id (an SSE-only `initialize`).
    head_session: bool,
    /// Its request was an `initialize` without a session: the only request that makes one.
    mints: bool,
    /// Stream number and last sequence number of its event ids.
    ids: Option<(u64, u64)>,
    /// A single `tools/call`'s params, for retries after `input_required`.
    params: Option<Value>,
    /// A `subscriptions/listen` sent on a legacy session (see [`Checks::legacy_listen`]).
    legacy_listen: bool,
    /// The session its request named (index into `minted`), for answers to what it carries.
    session: Option<usize>,
    /// Its request's caller, which a retry of its `input_required` must be.
    caller: CallerSpec,
    /// A `subscriptions/listen` from a client that does not accept SSE (see
    /// [`Checks::unstarted_close`]).
    json_listen: bool,
}

struct Call {
    call: CallId,
    /// The exchange its request came on.
    conn: ConnId,
    ticket: Ticket,
    request: Request,
    modern: bool,
    cancelled: bool,
    asking: bool,
    deadline: Instant,
    progress: u32,
}

struct Sim<'e> {
    engine: &'e mut Engine<()>,
    http: &'e HttpConfig,
    checks: Checks,
    now: Instant,
    conns: Vec<Conn>,
    by_id: HashMap<ConnId, usize>,
    calls: Vec<Call>,
    /// Every session id the engine handed out this run, with the caller it was minted for.
    minted: Vec<(String, CallerSpec)>,
    /// Live sessions as the harness can tell: made by `Full` replies, ended by `Close`s of
    /// connections no reply named.
    sessions: usize,
    /// Connections no reply named that were closed (legacy sessions).
    closed_unknown: HashSet<ConnId>,
    /// Ids of server requests seen on streams, with the session of the stream.
    outbound: Vec<(Value, Option<usize>)>,
    /// `(params, requestState, caller)` of `input_required` results.
    states: Vec<(Value, String, CallerSpec)>,
    event_ids: Vec<String>,
    cursors: Vec<String>,
    tool_removed: bool,
    gated: bool,
    shut: bool,
    /// Server requests seen so far (for `ask` checks).
    requests_seen: usize,
    report: Report,
}

impl<'e> Sim<'e> {
    fn new(engine: &'e mut Engine<()>, http: &'e HttpConfig, now: Instant, checks: Checks) -> Self {
        assert!(engine.poll_output().is_none(), "the previous run left output behind");
        assert!(engine.poll_timeout().is_none(), "the previous run left a timer behind");
        Sim {
            engine,
            http,
            checks,
            now,
            conns: Vec::new(),
            by_id: HashMap::new(),
            calls: Vec::new(),
            minted: Vec::new(),
            sessions: 0,
            closed_unknown: HashSet::new(),
            outbound: Vec::new(),
            states: Vec::new(),
            event_ids: Vec::new(),
            cursors: Vec::new(),
            tool_removed: false,
            gated: false,
            shut: false,
            requests_seen: 0,
            report: Report::default(),
        }
    }

    fn op(&mut self, op: &Op) {
        match op {
            Op::Http(spec) => self.request(spec),
            Op::Session { version, elicitation, caller, accept } => {
                let init =
                    Msg::request(0, MsgKind::Initialize { version: *version, elicitation: *elicitation });
                let before = self.report.sessions;
                let spec = HttpSpec::post(Body::Message(init)).caller(*caller).accept(*accept);
                self.request(&spec);
                if self.report.sessions > before {
                    let done = HttpSpec::post(Body::Message(Msg::notification(MsgKind::Initialized)));
                    self.check_status();
                    self.request(&done.accept(*accept));
                }
            }
            Op::Complete { call, reply } => self.complete(*call, reply),
            Op::Ask { call, ask } => self.ask(*call, *ask),
            Op::Progress { call } => self.progress(*call),
            Op::Log { call } => self.log(*call),
            Op::Tick(t) => self.tick(*t),
            Op::Disconnect { conn } => self.disconnect(*conn),
            Op::ToggleTool => {
                self.toggle_tool();
                self.drain();
            }
            Op::Touch => {
                self.engine.notify_resource_updated(self.now, "test://static");
                self.drain();
            }
            Op::Gate(on) => {
                self.gated = *on;
                self.engine.registry_mut(self.now).set_gate(on.then(mcp_proto::Gate::identified));
                self.drain();
            }
            Op::Shutdown => {
                self.engine.shutdown(self.now);
                self.shut = true;
                self.drain();
            }
        }
        if self.engine.poll_timeout().is_some_and(|at| at <= self.now) {
            let stale = matches!(op, Op::ToggleTool)
                || (!self.checks.stale_clock && matches!(op, Op::Log { .. } | Op::Touch));
            assert!(stale, "a step that passed `now` armed a timer at or before it");
            // The shim's timer fires at once.
            self.engine.handle_timeout(self.now);
            self.drain();
        }
        self.check_status();
    }

    // -----------------------------------------------------------------------------------------
    // Requests

    /// A response head carried the id of a session the engine just made (from its seed).
    fn minted_now(&mut self, sid: &str, initialize_without_session: bool, caller: CallerSpec) {
        assert!(initialize_without_session, "a session id was minted for something else than initialize");
        assert!(!self.shut, "a session was made after shutdown");
        assert!(mcp_proto::http::is_valid_session_id(sid), "an invalid session id {sid:?}");
        assert!(!self.minted.iter().any(|(m, _)| m == sid), "a session id was minted twice: {sid}");
        // Kept whole (one per op at most): connections and server requests index it.
        self.minted.push((sid.to_owned(), caller));
    }

    fn request(&mut self, spec: &HttpSpec) {
        let (body, single, hint) = self.body(&spec.body);
        let session = match spec.session {
            SessionSpec::Auto => match hint.response_session {
                Some(s) => s,
                None if spec.method == Method::Post && (hint.modern || hint.initialize) => None,
                None => self.minted.len().checked_sub(1),
            },
            SessionSpec::Absent => None,
            SessionSpec::Minted(i) => (!self.minted.is_empty()).then(|| usize::from(i) % self.minted.len()),
        };
        let caller = match spec.caller {
            CallerSpec::Auto => hint
                .retry_caller
                .or_else(|| session.map(|s| self.minted[s].1))
                .unwrap_or(CallerSpec::Anonymous),
            explicit => explicit,
        };
        let headers = self.headers(spec, &body, single.as_ref(), session, hint);
        let refs: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_slice())).collect();
        let method = match spec.method {
            Method::Post => "POST",
            Method::Get => "GET",
            Method::Delete => "DELETE",
            Method::Other => "PUT",
        };
        let head = RequestHead { method, path: "/mcp", headers: &refs };
        trace(|| {
            let shown = String::from_utf8_lossy(&body);
            format!("> {method} as {caller:?} {:?} {shown}", headers_text(&headers))
        });
        let route = match check_head(self.http, &self.engine.config().limits, &head) {
            Ok(route) => route,
            Err(refusal) => {
                trace(|| format!("< refused {refusal}"));
                assert!(STATUSES.contains(&refusal.status), "refusal with status {}", refusal.status);
                if let Some(b) = refusal.body() {
                    check_message(&b, BODY_CEILING, false);
                }
                self.report.refused.push(refusal.status);
                return;
            }
        };
        let body: &[u8] = match route {
            Route::Post { .. } => {
                if check_body_len(&self.engine.config().limits, body.len()).is_err() {
                    return;
                }
                &body
            }
            _ => &[],
        };
        let body_method = single.as_ref().and_then(|v| v.get("method")).and_then(Value::as_str);
        let (json_ok, sse_ok, initialize_without_session, legacy_listen) = match route {
            Route::Post { accepts, headers } => {
                let init = body_method == Some("initialize");
                let legacy_version = matches!(
                    headers.protocol_version,
                    None | Some("2025-03-26" | "2025-06-18" | "2025-11-25")
                );
                let legacy = headers.session_id.is_some() && legacy_version;
                let listen = body_method == Some("subscriptions/listen");
                (accepts.json, accepts.sse, init && headers.session_id.is_none(), listen && legacy)
            }
            _ => (false, true, false, false),
        };
        let req = HttpRequest { head: &head, route, body, caller: caller.caller() };
        let reply = self.engine.handle_http(self.now, req);
        match reply {
            HttpReply::Full { head, body } => {
                trace(|| {
                    format!("< Full {} {:?} {}", head.status, head.headers, String::from_utf8_lossy(&body))
                });
                self.report.full.push(head.status);
                let sid = header(&head, "Mcp-Session-Id");
                if let Some(sid) = sid {
                    self.minted_now(sid, initialize_without_session, caller);
                    self.sessions += 1;
                    self.report.sessions += 1;
                }
                let checked = self.check_body(&head, &body, None);
                if let Some(c) = checked {
                    if !c.sessions.is_empty() {
                        assert!(sid.is_some(), "initialize succeeded without a session id");
                    }
                }
            }
            HttpReply::Pending(id) => {
                trace(|| format!("< Pending {id:?}"));
                assert!(!self.by_id.contains_key(&id), "a Pending reply reused a connection id");
                assert!(!self.closed_unknown.contains(&id), "a Pending reply reused a session's id");
                let params = single
                    .as_ref()
                    .filter(|v| v.get("method").and_then(Value::as_str) == Some("tools/call"))
                    .and_then(|v| v.get("params"))
                    .map(strip_round_trip);
                // A `GET` naming an event of a legacy `POST` stream (stream number other than 0)
                // resumes that stream, which carries its call's response like the `POST` would.
                let resumes_post = match spec.last_event_id {
                    LastEventId::Seen(i) => pick(&self.event_ids, i)
                        .and_then(|id| id.split_once('-'))
                        .is_some_and(|(stream, _)| stream != "0"),
                    _ => false,
                };
                self.by_id.insert(id, self.conns.len());
                self.conns.push(Conn {
                    id,
                    st: St::Waiting,
                    get: spec.method == Method::Get && !resumes_post,
                    json_ok,
                    sse_ok,
                    closing: false,
                    head_session: false,
                    mints: initialize_without_session,
                    responses: 0,
                    ids: None,
                    params,
                    legacy_listen,
                    session,
                    caller,
                    json_listen: body_method == Some("subscriptions/listen") && !sse_ok,
                });
                let ci = self.conns.len() - 1;
                self.drain();
                if spec.method == Method::Get {
                    assert_ne!(self.conns[ci].st, St::Waiting, "a GET stream did not start at once");
                }
                return;
            }
        }
        self.drain();
    }

    /// Checks a `Full` or `Respond` body; returns what the JSON said.
    fn check_body(&mut self, head: &HttpHead, body: &[u8], ci: Option<usize>) -> Option<crate::Checked> {
        assert!(STATUSES.contains(&head.status), "unexpected status {}", head.status);
        if body.is_empty() {
            assert!(
                header(head, "Content-Type").is_none(),
                "a content type on an empty body: {:?}",
                head.headers
            );
            return None;
        }
        let ct = header(head, "Content-Type").unwrap_or_else(|| panic!("a body without Content-Type"));
        assert!(ct.starts_with("application/json"), "a body of type {ct}");
        let checked = check_message(body, BODY_CEILING, false);
        if let Ok(v) = serde_json::from_slice::<Value>(body) {
            self.capture(&v, ci);
        }
        Some(checked)
    }

    /// Keeps cursors and `input_required` states from a message.
    fn capture(&mut self, v: &Value, ci: Option<usize>) {
        let messages: Vec<&Value> = match v {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for m in messages {
            let Some(result) = m.get("result") else { continue };
            if let Some(c) = result.get("nextCursor").and_then(Value::as_str) {
                if self.cursors.len() < KEEP {
                    self.cursors.push(c.to_owned());
                }
            }
            if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
                self.report.input_required += 1;
                let state = result.get("requestState").and_then(Value::as_str);
                let params = ci.and_then(|ci| Some((self.conns[ci].params.clone()?, self.conns[ci].caller)));
                if let (Some(state), Some((params, caller))) = (state, params) {
                    if self.states.len() < KEEP {
                        self.states.push((params, state.to_owned(), caller));
                    }
                }
            }
        }
    }

    /// The body's bytes, the message when it is a single one, and what it implies for the head.
    fn body(&self, b: &Body) -> (Vec<u8>, Option<Value>, Hint) {
        match b {
            Body::Empty => (Vec::new(), None, Hint::default()),
            Body::Raw(bytes) => (bytes.clone(), None, Hint::default()),
            Body::Message(m) => {
                let (v, hint) = self.message(m);
                (v.to_string().into_bytes(), Some(v), hint)
            }
            Body::Batch(ms) => {
                let mut hint = Hint::default();
                let mut items = Vec::new();
                for m in ms.iter().take(2 * MAX_BATCH) {
                    let (v, h) = self.message(m);
                    hint.response_session = hint.response_session.or(h.response_session);
                    items.push(v);
                }
                (Value::Array(items).to_string().into_bytes(), None, hint)
            }
        }
    }

    fn message(&self, m: &Msg) -> (Value, Hint) {
        let mut obj = Map::new();
        let mut hint = Hint::default();
        obj.insert("jsonrpc".into(), "2.0".into());
        if let MsgKind::Response { to, answer } = m.kind {
            let (id, session) = pick(&self.outbound, to).cloned().unwrap_or((json!(999), None));
            hint.response_session = Some(session);
            obj.insert("id".into(), id);
            match answer {
                AnswerSpec::Error => {
                    obj.insert("error".into(), json!({"code": -1, "message": "declined"}));
                }
                other => {
                    obj.insert("result".into(), answer_value(other));
                }
            }
            return (Value::Object(obj), hint);
        }
        if let Some(id) = m.id {
            obj.insert("id".into(), (id % 8).into());
        }
        let mut meta_spec = m.meta;
        let (method, mut params) = match m.kind {
            MsgKind::Initialize { version, elicitation } => {
                let caps = if elicitation { json!({"elicitation": {}}) } else { json!({}) };
                let p = json!({"protocolVersion": version.as_str(), "capabilities": caps,
                    "clientInfo": {"name": "fuzz", "version": "0"}});
                hint.initialize = true;
                ("initialize", p)
            }
            MsgKind::Initialized => ("notifications/initialized", json!({})),
            MsgKind::Ping => ("ping", json!({})),
            MsgKind::ToolsList { cursor } => {
                let mut p = json!({});
                if let (true, Some(c)) = (cursor, self.cursors.last()) {
                    p["cursor"] = c.clone().into();
                }
                ("tools/list", p)
            }
            MsgKind::Echo { text } => {
                ("tools/call", json!({"name": "echo", "arguments": {"text": format!("t{text}")}}))
            }
            MsgKind::Region { arg } => {
                const REGIONS: [&str; 3] = ["us-west1", " padded ", "日本"];
                let args = match arg {
                    RegionArg::Absent => json!({}),
                    RegionArg::Null => json!({"region": null}),
                    RegionArg::Str(i) => json!({"region": REGIONS[usize::from(i) % 3]}),
                    RegionArg::Int(n) => json!({"n": n}),
                    RegionArg::Both(i) => json!({"region": REGIONS[usize::from(i) % 3], "n": i}),
                };
                ("tools/call", json!({"name": "region", "arguments": args}))
            }
            MsgKind::Read => ("resources/read", json!({"uri": "test://static"})),
            MsgKind::Listen { tools, resource } => {
                let mut filter = json!({"toolsListChanged": tools});
                if resource {
                    filter["resourceSubscriptions"] = json!(["test://static"]);
                }
                ("subscriptions/listen", json!({"notifications": filter}))
            }
            MsgKind::Subscribe => ("resources/subscribe", json!({"uri": "test://static"})),
            MsgKind::SetLevel => ("logging/setLevel", json!({"level": "debug"})),
            MsgKind::Discover => ("server/discover", json!({})),
            MsgKind::Cancel { target } => ("notifications/cancelled", json!({"requestId": target % 8})),
            MsgKind::Retry { state, answer, both } => {
                if matches!(meta_spec, Meta::None) {
                    meta_spec = Meta::Modern;
                }
                match pick(&self.states, state) {
                    Some((params, token, caller)) => {
                        hint.retry_caller = Some(*caller);
                        let mut p = params.clone();
                        p["requestState"] = token.clone().into();
                        let a = answer_value(answer);
                        p["inputResponses"] =
                            if both { json!({"who": a, "who2": a}) } else { json!({"who": a}) };
                        ("tools/call", p)
                    }
                    None => ("tools/call", json!({"name": "echo", "arguments": {"text": "retry"}})),
                }
            }
            MsgKind::Response { .. } => unreachable!("rendered above"),
            MsgKind::Unknown => ("bogus/method", json!({})),
        };
        let modern = |caps: Value| {
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                   "io.modelcontextprotocol/clientCapabilities": caps})
        };
        let mut meta = match meta_spec {
            Meta::None => Some(json!({})),
            Meta::Modern => Some(modern(json!({"elicitation": {}}))),
            Meta::ModernBare => Some(modern(json!({}))),
            Meta::ModernNoCaps => Some(json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})),
            Meta::ModernLogging => {
                let mut m = modern(json!({"elicitation": {}}));
                m["io.modelcontextprotocol/logLevel"] = "debug".into();
                Some(m)
            }
            Meta::LegacyVersion => Some(json!({"io.modelcontextprotocol/protocolVersion": "2025-06-18",
                "io.modelcontextprotocol/clientCapabilities": {}})),
            Meta::NotAnObject => None,
        };
        if m.progress {
            if let Some(meta) = meta.as_mut() {
                meta["progressToken"] = format!("p{}", m.id.unwrap_or(0)).into();
            }
        }
        match meta {
            Some(meta) if meta.as_object().is_some_and(Map::is_empty) => {}
            Some(meta) => params["_meta"] = meta,
            None => params["_meta"] = json!(3),
        }
        hint.modern = meta_spec.modern();
        obj.insert("method".into(), method.into());
        obj.insert("params".into(), params);
        (Value::Object(obj), hint)
    }

    fn headers(
        &self,
        spec: &HttpSpec,
        body: &[u8],
        single: Option<&Value>,
        session: Option<usize>,
        hint: Hint,
    ) -> Vec<(&'static str, Vec<u8>)> {
        let defect = spec.defect.0;
        let mut h: Vec<(&'static str, Vec<u8>)> = Vec::new();
        let mut add = |name: &'static str, value: &str| h.push((name, value.as_bytes().to_vec()));
        match defect {
            Some(Defect::ForeignHost) => add("Host", "evil.example:3000"),
            Some(Defect::LoopbackHost) => add("Host", "127.0.0.1"),
            Some(Defect::MissingHost) => {}
            Some(Defect::TwoHosts) => {
                add("Host", "localhost:3000");
                add("host", "localhost:3000");
            }
            _ => add("Host", "localhost:3000"),
        }
        match defect {
            Some(Defect::SameOrigin) => add("Origin", "http://localhost:3000"),
            Some(Defect::ForeignOrigin) => add("Origin", "http://evil.example"),
            _ => {}
        }
        match defect {
            Some(Defect::TextContentType) => add("Content-Type", "text/plain"),
            Some(Defect::NoContentType) => {}
            Some(Defect::CharsetContentType) => add("Content-Type", "application/json; charset=utf-8"),
            _ => add("Content-Type", "application/json"),
        }
        match (defect, spec.accept) {
            (Some(Defect::NoAccept), _) => {}
            (Some(Defect::AcceptNeither), _) => add("Accept", "text/html"),
            (_, AcceptSpec::Json) => add("Accept", "application/json"),
            (_, AcceptSpec::Sse) => add("Accept", "text/event-stream"),
            (_, AcceptSpec::Both) => add("Accept", "application/json, text/event-stream"),
            (_, AcceptSpec::SseFirst) => add("Accept", "text/event-stream, application/json"),
            (_, AcceptSpec::Wildcard) => add("Accept", "*/*"),
        }
        if spec.method == Method::Post {
            add("Content-Length", &body.len().to_string());
        }
        match defect {
            Some(Defect::UnknownSession) => add("Mcp-Session-Id", "sid-unknown"),
            Some(Defect::MalformedSession) => add("Mcp-Session-Id", "bad id"),
            _ => {
                if let Some(s) = session {
                    add("Mcp-Session-Id", &self.minted[s].0);
                }
            }
        }
        match defect {
            Some(Defect::LegacyVersion(v)) => add("MCP-Protocol-Version", v.as_str()),
            Some(Defect::ModernVersion) => add("MCP-Protocol-Version", "2026-07-28"),
            Some(Defect::UnknownVersion) => add("MCP-Protocol-Version", "1999-01-01"),
            Some(Defect::MalformedVersion) => add("MCP-Protocol-Version", "\u{7f}"),
            Some(Defect::NoVersion) => {}
            _ if hint.modern && spec.method == Method::Post => add("MCP-Protocol-Version", "2026-07-28"),
            _ => {}
        }
        match spec.last_event_id {
            LastEventId::Absent => {}
            LastEventId::Seen(i) => {
                add("Last-Event-ID", pick(&self.event_ids, i).map_or("0-0", String::as_str))
            }
            LastEventId::Future => add("Last-Event-ID", "0-999999"),
            LastEventId::Garbage => add("Last-Event-ID", "zz"),
        }
        if let Some(msg) = single {
            mirror(&mut h, defect, msg);
        }
        h
    }

    // -----------------------------------------------------------------------------------------
    // Outputs

    /// Drains the engine, checking every output against the connections' lifecycles.
    fn drain(&mut self) {
        let mut n = 0;
        while let Some(out) = self.engine.poll_output() {
            n += 1;
            assert!(n <= OUTPUT_BOUND, "one step produced more than {OUTPUT_BOUND} outputs");
            trace(|| match &out {
                Output::Frame { conn, bytes } => {
                    format!("< Frame {conn:?} {:?}", String::from_utf8_lossy(bytes))
                }
                Output::Invoke(inv) => {
                    format!("< Invoke {:?} on {:?} {:?}", inv.ticket.call(), inv.conn, inv.request)
                }
                other => format!("< {other:?}"),
            });
            match out {
                Output::Frame { conn, bytes } => {
                    let ci = self.known(conn, "Frame");
                    assert_eq!(self.conns[ci].st, St::Streaming, "a Frame for a connection not streaming");
                    self.report.frames += 1;
                    self.sse(ci, &bytes);
                }
                Output::Respond { conn, head, body } => {
                    let ci = self.known(conn, "Respond");
                    let c = &self.conns[ci];
                    assert_eq!(c.st, St::Waiting, "Respond after the response began");
                    assert!(!c.get, "a GET got a Respond");
                    self.report.responded.push(head.status);
                    let checked = self.check_body(&head, &body, Some(ci));
                    let c = &mut self.conns[ci];
                    c.st = St::Done;
                    match checked {
                        Some(checked) => {
                            assert!(c.json_ok, "a JSON body for a client that does not accept JSON");
                            assert!(!checked.answers.is_empty(), "a JSON Respond that is not a response");
                            c.responses += 1;
                            if self.checks.initialize_on_stream {
                                assert!(
                                    checked.sessions.is_empty(),
                                    "initialize answered where no session id can go"
                                );
                            }
                        }
                        None => assert!(
                            head.status == 204 || head.status == 202,
                            "an empty {} Respond",
                            head.status
                        ),
                    }
                }
                Output::Stream { conn, head } => {
                    let ci = self.known(conn, "Stream");
                    let c = &mut self.conns[ci];
                    assert_eq!(c.st, St::Waiting, "a second Stream, or a Stream after the end");
                    assert!(c.sse_ok, "a stream for a client that does not accept SSE");
                    assert_eq!(head.status, 200, "a stream with status {}", head.status);
                    assert_eq!(header(&head, "content-type"), Some("text/event-stream"));
                    c.st = St::Streaming;
                    self.report.streams += 1;
                    // A client that takes only SSE gets its new session's id on the stream's head.
                    if let Some(sid) = header(&head, "Mcp-Session-Id") {
                        let (mints, caller) = (c.mints, c.caller);
                        self.minted_now(sid, mints, caller);
                        self.conns[ci].head_session = true;
                        self.sessions += 1;
                        self.report.sessions += 1;
                    }
                }
                Output::Close { conn, reason } => match self.by_id.get(&conn).copied() {
                    Some(ci) => {
                        let c = &mut self.conns[ci];
                        match c.st {
                            St::Streaming => {}
                            St::Waiting => assert!(
                                c.closing || (c.json_listen && !self.checks.unstarted_close),
                                "Close ({reason:?}) of a response that never started"
                            ),
                            St::Done => panic!("Close after the end of {conn:?}"),
                        }
                        if reason == CloseReason::EndOfInput && !c.get {
                            assert_eq!(c.responses, 1, "an exchange ended without its response");
                        }
                        c.st = St::Done;
                        self.report.closes.push(reason);
                    }
                    None => {
                        assert!(
                            !self.checks.session_close,
                            "Close for {conn:?}, which no reply named ({reason:?})"
                        );
                        assert!(
                            matches!(
                                reason,
                                CloseReason::Deleted | CloseReason::Expired | CloseReason::Shutdown
                            ),
                            "a session closed for {reason:?}"
                        );
                        assert!(self.closed_unknown.insert(conn), "Close twice for {conn:?}");
                        self.sessions = self.sessions.checked_sub(1).expect("more sessions closed than made");
                        self.report.session_closes.push(reason);
                    }
                },
                Output::Invoke(inv) => {
                    assert!(!self.shut, "an invocation after shutdown");
                    match self.by_id.get(&inv.conn) {
                        Some(&ci) => {
                            assert_ne!(self.conns[ci].st, St::Done, "an invocation for a finished exchange")
                        }
                        None => assert!(
                            !self.closed_unknown.contains(&inv.conn),
                            "an invocation for a closed session"
                        ),
                    }
                    let call = inv.ticket.call();
                    assert!(!self.calls.iter().any(|c| c.call == call), "two invocations share a call id");
                    self.report.invokes += 1;
                    self.calls.push(Call {
                        call,
                        conn: inv.conn,
                        ticket: inv.ticket,
                        request: inv.request,
                        modern: inv.version.is_modern(),
                        cancelled: false,
                        asking: false,
                        deadline: self.now + CALL_TIMEOUT,
                        progress: 0,
                    });
                }
                Output::Cancel { call, .. } => {
                    let c = self.calls.iter_mut().find(|c| c.call == call);
                    let c =
                        c.unwrap_or_else(|| panic!("Cancel for {call:?}, which the harness does not hold"));
                    assert!(!c.cancelled, "Cancel twice for {call:?}");
                    c.cancelled = true;
                    c.asking = false;
                    self.report.cancels += 1;
                }
                Output::Answer { call, answers } => {
                    let c = self.calls.iter_mut().find(|c| c.call == call);
                    let c =
                        c.unwrap_or_else(|| panic!("Answer for {call:?}, which the harness does not hold"));
                    assert!(!c.cancelled, "Answer for a cancelled call");
                    assert!(c.asking, "Answer for a call that is not asking");
                    c.asking = false;
                    self.report.answers += 1;
                    if answers.is_ok() {
                        self.report.answered_ok += 1;
                    }
                }
                // No cluster, task store or tracer here: nothing on the wire.
                Output::Change(_)
                | Output::Holding(_)
                | Output::Claim(_)
                | Output::Record(_)
                | Output::TaskEnded(_)
                | Output::Answered(_) => {}
            }
        }
    }

    /// The index of a connection some reply named; fails for any other.
    fn known(&self, conn: ConnId, what: &str) -> usize {
        match self.by_id.get(&conn) {
            Some(&ci) => {
                assert_ne!(self.conns[ci].st, St::Done, "{what} after the end of {conn:?}");
                ci
            }
            None => panic!("{what} for {conn:?}, which no reply named"),
        }
    }

    /// Checks one SSE frame of connection `ci`.
    fn sse(&mut self, ci: usize, bytes: &[u8]) {
        let text =
            std::str::from_utf8(bytes).unwrap_or_else(|_| panic!("an SSE frame is not UTF-8: {bytes:?}"));
        assert!(!text.contains('\r'), "CR in an SSE frame: {text:?}");
        let lines = text
            .strip_suffix("\n\n")
            .unwrap_or_else(|| panic!("an SSE frame not ending in a blank line: {text:?}"));
        let mut data: Option<String> = None;
        let mut id: Option<&str> = None;
        for line in lines.split('\n') {
            assert!(!line.is_empty(), "a blank line inside an SSE frame: {text:?}");
            if line.starts_with(':') {
                continue;
            }
            let (name, value) =
                line.split_once(':').unwrap_or_else(|| panic!("an SSE line without a colon: {text:?}"));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match name {
                "data" => match data.as_mut() {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                "id" => {
                    assert!(id.is_none(), "two ids in one event: {text:?}");
                    assert!(!value.contains('\0'), "NUL in an event id");
                    id = Some(value);
                }
                "retry" => assert!(
                    !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()),
                    "retry is not a number: {text:?}"
                ),
                "event" => {}
                other => panic!("unknown SSE field {other:?}: {text:?}"),
            }
        }
        if let Some(id) = id {
            let e = EventId::parse(id).unwrap_or_else(|| panic!("event id {id:?} is not <stream>-<seq>"));
            let c = &mut self.conns[ci];
            if let Some((stream, seq)) = c.ids {
                assert_eq!(e.stream, stream, "one connection's events name two streams: {text:?}");
                assert!(e.seq > seq, "event ids do not increase: {seq} then {}", e.seq);
            }
            c.ids = Some((e.stream, e.seq));
            if self.event_ids.len() < KEEP {
                self.event_ids.push(id.to_owned());
            }
        }
        let Some(data) = data.filter(|d| !d.is_empty()) else { return };
        let checked = check_message(data.as_bytes(), BODY_CEILING, true);
        if !checked.answers.is_empty() {
            let c = &mut self.conns[ci];
            assert!(!c.get, "a response on a GET stream: {data}");
            c.responses += 1;
            assert!(c.responses <= 1, "a second response on one exchange: {data}");
        }
        if self.checks.initialize_on_stream && !self.conns[ci].head_session {
            assert!(
                checked.sessions.is_empty(),
                "initialize answered on a stream, where no session id can go: {data}"
            );
        }
        for r in checked.requests {
            self.requests_seen += 1;
            self.report.server_requests += 1;
            if self.outbound.len() < KEEP {
                self.outbound.push((r, self.conns[ci].session));
            }
        }
        if let Ok(v) = serde_json::from_str::<Value>(&data) {
            self.capture(&v, Some(ci));
        }
    }

    // -----------------------------------------------------------------------------------------
    // Handlers, time, clients

    fn call_index(&self, i: u8) -> Option<usize> {
        (!self.calls.is_empty()).then(|| usize::from(i) % self.calls.len())
    }

    fn complete(&mut self, i: u8, kind: &ReplyKind) {
        let Some(idx) = self.call_index(i) else { return };
        let c = self.calls.swap_remove(idx);
        // Output nested past serde_json's recursion limit (128) is the handler's to avoid: the
        // engine passes handler output through, and the checks could not read it back.
        let kind = match kind {
            ReplyKind::Structured(v) if depth(v) > 64 => &ReplyKind::Natural,
            other => other,
        };
        let result = self.engine.complete(self.now, c.ticket, reply(&c.request, kind));
        trace(|| format!("> complete {:?} -> {result:?}", c.call));
        assert_eq!(result.is_err(), c.cancelled, "complete is Stale exactly when the call was cancelled");
        if result.is_err() {
            self.report.stale += 1;
        }
        self.drain();
    }

    fn ask(&mut self, i: u8, spec: AskSpec) {
        let Some(idx) = self.call_index(i) else { return };
        let form = || {
            let schema =
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
            InputRequest::elicit("Name?", schema).expect("a valid form")
        };
        let requests = match spec {
            AskSpec::Elicit => vec![("who".to_owned(), form())],
            AskSpec::Two => vec![("who".to_owned(), form()), ("who2".to_owned(), form())],
            AskSpec::Sample => {
                let sample =
                    InputRequest::sample(json!({"messages": [], "maxTokens": 5})).expect("valid sampling");
                vec![("s".to_owned(), sample)]
            }
        };
        let (call, cancelled, asking, modern, conn) = {
            let c = &self.calls[idx];
            (c.call, c.cancelled, c.asking, c.modern, c.conn)
        };
        // A legacy POST stream the client dropped is parked for a resume: a question asked
        // meanwhile waits in the store, unseen until the stream is resumed.
        let parked = self.by_id.get(&conn).is_none_or(|&ci| self.conns[ci].st == St::Done);
        let before = self.requests_seen;
        let result = self.engine.ask(self.now, call, requests);
        trace(|| format!("> ask {call:?} -> {result:?}"));
        self.report.asks.push(format!("{result:?}"));
        self.drain();
        if cancelled {
            assert_eq!(result, Err(AskError::Stale), "ask on a cancelled call");
            return;
        }
        assert_ne!(result, Err(AskError::Stale), "ask on a live call was Stale");
        if asking && !modern {
            assert_eq!(result, Err(AskError::Busy), "a second ask while the first waits");
        }
        match result {
            Ok(Asked::Pending) => {
                assert!(!modern, "a 2026 ask was left pending");
                assert!(
                    self.requests_seen > before || parked,
                    "an ask went out, but no server request was seen"
                );
                self.calls[idx].asking = true;
            }
            Ok(Asked::Answered(_)) => assert!(modern, "a legacy ask answered at once"),
            Err(AskError::Suspended) => {
                assert!(modern, "a legacy call suspended");
                assert!(self.calls[idx].cancelled, "a suspended call was not cancelled");
            }
            Err(AskError::Busy) => assert!(asking && !modern, "Busy while not asking"),
            _ => {}
        }
    }

    fn progress(&mut self, i: u8) {
        let Some(idx) = self.call_index(i) else { return };
        let c = &mut self.calls[idx];
        c.progress += 1;
        let (call, n, cancelled) = (c.call, c.progress, c.cancelled);
        let result = self.engine.progress(self.now, call, n.into(), Some(100.into()), Some("working"));
        assert_eq!(result.is_err(), cancelled, "progress is Stale exactly when the call was cancelled");
        self.drain();
    }

    fn log(&mut self, i: u8) {
        let Some(idx) = self.call_index(i) else { return };
        let (call, cancelled) = (self.calls[idx].call, self.calls[idx].cancelled);
        let result =
            self.engine.log(self.now, call, LogLevel::Warning, Some("fuzz"), json!({"line": "x\ny"}));
        assert_eq!(result.is_err(), cancelled, "log is Stale exactly when the call was cancelled");
        self.drain();
    }

    fn tick(&mut self, t: Tick) {
        let by = match t {
            Tick::Ms(ms) => Duration::from_millis(u64::from(ms) + 1),
            Tick::KeepAlive => KEEPALIVE,
            Tick::Handshake => HANDSHAKE,
            Tick::Idle => SESSION_IDLE,
            Tick::CallTimeout => CALL_TIMEOUT,
            Tick::Spurious => Duration::ZERO,
        };
        self.now += by;
        let due = self.engine.poll_timeout().is_some_and(|at| at <= self.now);
        if due || matches!(t, Tick::Spurious) {
            self.engine.handle_timeout(self.now);
            self.drain();
        }
        for c in self.calls.iter().filter(|c| !c.cancelled) {
            assert!(c.deadline > self.now, "a call outlived its deadline");
        }
    }

    fn disconnect(&mut self, i: u8) {
        if self.conns.is_empty() {
            return;
        }
        let ci = usize::from(i) % self.conns.len();
        let open = self.conns[ci].st != St::Done;
        self.conns[ci].closing = true;
        let id = self.conns[ci].id;
        trace(|| format!("> close {id:?}"));
        self.engine.close(self.now, id);
        self.drain();
        self.conns[ci].closing = false;
        if open {
            assert_eq!(self.conns[ci].st, St::Done, "close of {id:?} emitted no Close");
        }
    }

    fn toggle_tool(&mut self) {
        if self.tool_removed {
            let t = Tool::new("t0", "filler", json!({"type": "object"}));
            self.engine.registry_mut(self.now).add_tool(t, ()).expect("re-adding t0");
        } else {
            assert!(self.engine.registry_mut(self.now).remove_tool("t0").is_some(), "t0 is registered");
        }
        self.tool_removed = !self.tool_removed;
    }

    fn check_status(&mut self) {
        let s = self.engine.status();
        assert!(s.sessions <= MAX_SESSIONS, "{} sessions", s.sessions);
        assert!(s.streams <= MAX_STREAMS, "{} streams", s.streams);
        let cap = if self.checks.connection_cap {
            MAX_CONNECTIONS
        } else {
            // Each session: its calls' exchanges and its (legacy-wire) listens' exchanges.
            MAX_CONNECTIONS + MAX_SESSIONS * (MAX_IN_FLIGHT + MAX_LISTENS) + MAX_STREAMS
        };
        assert!(s.connections <= cap, "{} connections, over {cap}", s.connections);
        if !self.checks.session_close {
            assert_eq!(
                s.sessions, self.sessions,
                "the engine's sessions disagree with the replies and closes"
            );
        }
        let open = self.conns.iter().filter(|c| c.st != St::Done).count();
        assert!(s.streams <= open, "{} seats, but only {open} pending connections are open", s.streams);
        let live = self.calls.iter().filter(|c| !c.cancelled).count();
        assert_eq!(s.in_flight, live, "in_flight disagrees with the calls the harness holds");
        if let Some(at) = self.engine.poll_timeout() {
            assert!(at > self.now, "a timer at or before now survived");
        }
        self.report.max_streams = self.report.max_streams.max(s.streams);
    }

    /// Answers every call, closes what is open, lets every timer fire, and checks that nothing
    /// is left.
    fn finish(&mut self) {
        trace(|| "> finish".to_owned());
        while let Some(c) = self.calls.pop() {
            let r = reply(&c.request, &ReplyKind::Natural);
            let result = self.engine.complete(self.now, c.ticket, r);
            assert_eq!(result.is_err(), c.cancelled, "complete is Stale exactly when the call was cancelled");
            self.drain();
        }
        self.check_status();
        let open: Vec<usize> = (0..self.conns.len()).filter(|&ci| self.conns[ci].st != St::Done).collect();
        let counted =
            open.iter().filter(|&&ci| self.checks.legacy_listen || !self.conns[ci].legacy_listen).count();
        let excused = open.len() - counted;
        assert_eq!(
            counted,
            self.engine.status().streams,
            "with every call answered, what stays open should be exactly the held streams ({} open, \
             {excused} of them excused)",
            open.len()
        );
        for ci in open {
            self.conns[ci].closing = true;
            let id = self.conns[ci].id;
            self.engine.close(self.now, id);
            self.drain();
            assert_eq!(self.conns[ci].st, St::Done, "close of {id:?} emitted no Close");
        }
        let longest =
            [SESSION_IDLE, HANDSHAKE, KEEPALIVE, CALL_TIMEOUT].into_iter().max().unwrap_or_default();
        self.now += longest + Duration::from_millis(1);
        self.engine.handle_timeout(self.now);
        self.drain();
        let s = self.engine.status();
        assert_eq!(
            (s.connections, s.sessions, s.streams, s.in_flight, s.listens),
            (0, 0, 0, 0, 0),
            "the engine holds something after every connection closed and every timer fired: {s:?}"
        );
        if !self.checks.session_close {
            assert_eq!(self.sessions, 0, "sessions ended without a Close");
        }
        assert!(self.engine.poll_timeout().is_none(), "a timer outlived everything");
        if self.tool_removed {
            self.toggle_tool();
            self.drain();
        }
        if self.gated {
            self.engine.registry_mut(self.now).set_gate(None);
            self.drain();
        }
        assert!(self.engine.poll_output().is_none(), "output left at the end");
    }
}

/// Params of a call without what a retry replaces.
fn strip_round_trip(params: &Value) -> Value {
    let mut p = params.clone();
    if let Some(m) = p.as_object_mut() {
        for k in ["_meta", "requestState", "inputResponses"] {
            m.remove(k);
        }
    }
    p
}

fn depth(v: &SmallJson) -> usize {
    match v {
        SmallJson::Arr(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        SmallJson::Obj(members) => 1 + members.iter().map(|(_, v)| depth(v)).max().unwrap_or(0),
        _ => 1,
    }
}

fn pick<T>(items: &[T], i: u8) -> Option<&T> {
    (!items.is_empty()).then(|| &items[usize::from(i) % items.len()])
}

fn header<'h>(head: &'h HttpHead, name: &str) -> Option<&'h str> {
    head.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

fn headers_text(h: &[(&'static str, Vec<u8>)]) -> Vec<(&'static str, String)> {
    h.iter().map(|(n, v)| (*n, String::from_utf8_lossy(v).into_owned())).collect()
}

/// Adds the 2026-07-28 mirror headers for `msg`, unless `defect` says otherwise.
fn mirror(h: &mut Vec<(&'static str, Vec<u8>)>, defect: Option<Defect>, msg: &Value) {
    if matches!(defect, Some(Defect::NoMirror)) {
        return;
    }
    let encoded = matches!(defect, Some(Defect::EncodedMirror));
    let value = |text: &str| -> Vec<u8> {
        let plain = text.bytes().all(|b| (0x20..=0x7e).contains(&b)) && text.trim() == text;
        if encoded || !plain {
            format!("=?base64?{}?=", base64(text.as_bytes())).into_bytes()
        } else {
            text.as_bytes().to_vec()
        }
    };
    let Some(method) = msg.get("method").and_then(Value::as_str) else { return };
    let method_header = match defect {
        Some(Defect::WrongMethod) if method == "tools/list" => "ping",
        Some(Defect::WrongMethod) => "tools/list",
        _ => method,
    };
    h.push(("Mcp-Method", value(method_header)));
    let params = msg.get("params");
    let name = mcp_proto::http::name_param(method)
        .and_then(|f| params.and_then(|p| p.get(f)))
        .and_then(Value::as_str);
    if let Some(name) = name {
        let name = if matches!(defect, Some(Defect::WrongName)) { "nope" } else { name };
        h.push(("Mcp-Name", value(name)));
    }
    let args = params.and_then(|p| p.get("arguments"));
    let wrong = matches!(defect, Some(Defect::WrongParam));
    if let Some(region) = args.and_then(|a| a.get("region")).and_then(Value::as_str) {
        h.push(("Mcp-Param-Region", value(if wrong { "nowhere" } else { region })));
    }
    if let Some(n) = args.and_then(|a| a.get("n")).filter(|n| n.is_number()) {
        let n = if wrong { "999".to_owned() } else { n.to_string() };
        h.push(("Mcp-Param-N", value(&n)));
    }
}

/// Standard padded base64, as SEP-2243 header values use.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
