//! The protocol state machine.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::caller::{admits, Caller, Gate};
use crate::content::{Completion, Content, HandlerError, PromptOutput, ResourceContents, ToolOutput};
use crate::cursor::{self, KeyRing};
use crate::frame::Decoded;
use crate::items::{Prompt, Resource, ResourceTemplate};
use crate::json::{DecodeError, RawEnvelope, RawFrame, RawFrameItem};
use crate::jsonrpc::{encode_error, encode_result, ErrorCode, RequestId, RpcError};
use crate::limits::Limits;
use crate::registry::{describe_errors, Registry, RegistryError, Tool};
use crate::slab::{Key, Slab};
use crate::version::ProtocolVersion;

const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

mod ask;
mod calls;
#[cfg(test)]
mod determinism;
mod features;
mod http;
mod notify;
mod sessions;
mod subscriptions;
mod timers;

pub use ask::{AskError, Asked};

pub use http::{HttpHead, HttpReply, HttpRequest};

use calls::{Call, CallKind, Calls, ConnCalls};
pub use features::Introspection;
pub use notify::{LogLevel, ProgressOutcome};
use timers::Timer;

/// `Implementation`: the server's name and version as peers see them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Display title (sent to 2025-06-18 and later peers).
    pub title: Option<String>,
    /// Description (sent to 2025-11-25 and later peers).
    pub description: Option<String>,
    /// Website (sent to 2025-11-25 and later peers).
    pub website_url: Option<String>,
}

impl Implementation {
    /// Name and version only.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self { name: name.into(), version: version.into(), title: None, description: None, website_url: None }
    }

    fn to_json(&self, v: ProtocolVersion) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), self.name.clone().into());
        m.insert("version".into(), self.version.clone().into());
        if v.implementation_has_title() {
            if let Some(t) = &self.title {
                m.insert("title".into(), t.clone().into());
            }
        }
        if v.implementation_has_description() {
            if let Some(d) = &self.description {
                m.insert("description".into(), d.clone().into());
            }
            if let Some(w) = &self.website_url {
                m.insert("websiteUrl".into(), w.clone().into());
            }
        }
        Value::Object(m)
    }
}

/// Everything an [`Engine`] is built from.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server's `Implementation`.
    pub server_info: Implementation,
    /// `instructions` for the model, sent in `initialize` and `server/discover` results.
    pub instructions: Option<String>,
    /// Every bound.
    pub limits: Limits,
    /// Keys that sign cursors (and, later, request state). Shims draw a random one by default.
    pub keys: KeyRing,
    /// How long a handler may run before its call is cancelled and answered with a timeout
    /// failure. Default: none.
    pub call_timeout: Option<Duration>,
    /// `ttlMs` on 2026-07-28 cacheable results. Default 60 000.
    pub cache_ttl_ms: u64,
    /// The wall-clock time, in unix milliseconds, at the `now` the engine was made with. Sealed
    /// 2026-07-28 request states carry an expiry in wall-clock time so that replicas sharing the
    /// key ring agree on it; the engine itself never reads a clock. Default 0 (expiries then
    /// count from the engine's start, which only this engine understands); the server layer
    /// sets it from the system clock.
    pub unix_ms_at_start: u64,
    /// How long a sealed request state stays valid. Default 10 minutes.
    pub state_ttl: Duration,
    /// Most rounds of input one call may ask for (2026-07-28 `input_required` retries, legacy
    /// server→client requests). Default 10; the next ask fails with `interaction_limit`.
    pub max_input_rounds: u32,
    /// The engine's only entropy: legacy HTTP session ids are derived from it (see [`Seed`]).
    /// The shim draws it from the OS's randomness once, at construction (the server layer does
    /// when this is `None`); a fixed seed makes runs reproducible, for tests and fuzzing. Default
    /// `None`: the engine cannot mint session ids, and a legacy HTTP `initialize` is answered
    /// with 500 rather than with a guessable id.
    pub seed: Option<Seed>,
}

/// The engine's entropy seed: 32 bytes that must be secret and random for session ids to be
/// unguessable, since each id is a keyed PRF (HMAC-SHA256) of the seed and a counter.
/// `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Seed(pub [u8; 32]);

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seed(..)")
    }
}

impl From<[u8; 32]> for Seed {
    fn from(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
}

impl Config {
    /// A configuration with default limits.
    pub fn new(server_info: Implementation, keys: KeyRing) -> Self {
        Self {
            server_info,
            instructions: None,
            limits: Limits::default(),
            keys,
            call_timeout: None,
            cache_ttl_ms: 60_000,
            unix_ms_at_start: 0,
            state_ttl: Duration::from_millis(crate::interaction::DEFAULT_STATE_TTL_MS),
            max_input_rounds: crate::interaction::DEFAULT_MAX_ROUNDS,
            seed: None,
        }
    }
}

/// A connection: a stdio session, an HTTP exchange or an SSE stream. Generational, so a handle
/// to a closed connection never reaches a newer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(Key);

/// One call in flight: the copyable id progress, cancellation and input requests travel by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId(Key);

/// The right to answer one call, consumed by [`Engine::complete`] so a call cannot be answered
/// twice.
///
/// Pass every ticket to [`Engine::complete`], even after [`Output::Cancel`] (it is then
/// [`Stale`]), or give it up with [`abandon`](Self::abandon). Dropping the ticket of a call that
/// is still in flight leaks the call: it holds an in-flight slot until its connection closes or
/// [`Config::call_timeout`] fires.
///
/// Debug builds warn on such a drop (a drop warner, as quinn's `IncomingImproperDropWarner`).
/// The warning is an `eprintln!`, not a panic: a ticket lives inside a handler's future, and an
/// executor tearing down its tasks drops them from wherever it is (a panic there aborts the
/// process or is swallowed by the executor), and the engine has no logging dependency. It fires
/// only for calls still in flight, so tickets of cancelled or timed-out calls drop silently.
#[must_use = "a call stays in flight until its ticket is passed to Engine::complete"]
#[derive(Debug)]
pub struct Ticket {
    call: CallId,
    #[cfg(debug_assertions)]
    live: Arc<std::sync::atomic::AtomicBool>,
}

impl PartialEq for Ticket {
    fn eq(&self, other: &Self) -> bool {
        self.call == other.call
    }
}

impl Eq for Ticket {}

impl Ticket {
    /// The call this ticket answers.
    pub fn call(&self) -> CallId {
        self.call
    }

    /// Gives up the right to answer without a drop warning. The engine is not told: the call
    /// stays in flight until it is cancelled, times out or its connection closes. For harnesses
    /// that model handlers which never return.
    pub fn abandon(self) {
        self.settle();
    }

    /// Disarms the drop warner.
    fn settle(self) -> CallId {
        #[cfg(debug_assertions)]
        self.live.store(false, std::sync::atomic::Ordering::Relaxed);
        self.call
    }
}

#[cfg(debug_assertions)]
impl Drop for Ticket {
    fn drop(&mut self) {
        if self.live.load(std::sync::atomic::Ordering::Relaxed) && !std::thread::panicking() {
            eprintln!(
                "mcp_proto::Ticket of {:?} dropped while its call is in flight: pass it to \
                 Engine::complete or Ticket::abandon (the call holds an in-flight slot until its \
                 connection closes or it times out)",
                self.call
            );
        }
    }
}

/// The engine's half of a ticket's drop warner: marks the call finished when the engine drops
/// its record of it (answered, cancelled, timed out, closed, or the engine itself dropped).
#[cfg(debug_assertions)]
#[derive(Debug)]
struct Live(Arc<std::sync::atomic::AtomicBool>);

#[cfg(debug_assertions)]
impl Drop for Live {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What kind of transport a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnKind {
    /// A long-lived byte stream of newline-delimited frames (stdio, or any custom stream).
    Stdio,
}

/// Why [`Engine::open`] refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenError {
    /// [`Limits::max_connections`] connections are already open.
    TooManyConnections,
    /// The engine is shutting down ([`Engine::shutdown`]).
    ShuttingDown,
}

/// What [`Engine::handle_frame`] decided at once, before any handler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameOutcome {
    /// Exactly one frame will answer this input (now or after handlers complete).
    Reply,
    /// Nothing will answer it: it held only notifications or responses (HTTP: 202).
    NoReply,
    /// The connection is not open; nothing was done.
    UnknownConnection,
}

/// Why a connection closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The peer ended its input and every call it made has been answered.
    EndOfInput,
    /// The shim (or application) closed it.
    Closed,
    /// A frame over [`Limits::max_frame_bytes`] arrived on a stream that cannot resynchronise.
    FrameTooLarge,
    /// The server is shutting down ([`Engine::shutdown`]) and the connection's calls are done.
    Shutdown,
    /// A legacy HTTP session went idle past [`Limits::session_idle`], or never finished its
    /// handshake within [`Limits::session_handshake`].
    Expired,
    /// The client ended its legacy HTTP session with `DELETE`.
    Deleted,
    /// The caller opened a stream past its seat cap under [`crate::SeatPolicy::EvictOldest`]:
    /// this, its oldest stream, made room.
    Evicted,
    /// The server-wide gate no longer admits the stream's caller (checked at every keep-alive).
    Revoked,
    /// A newer `GET` stream of the same legacy session took this one's place.
    Replaced,
}

/// An answer to an [`Invocation`], passed to [`Engine::complete`]. Its kind must match the
/// request's; a mismatch is answered with the generic internal error.
#[derive(Debug)]
#[non_exhaustive]
pub enum Reply {
    /// The outcome of a `tools/call` handler.
    Tool(Result<ToolOutput, HandlerError>),
    /// The contents of a `resources/read` (never empty: an empty list is answered as "not
    /// found").
    Resource(Result<Vec<ResourceContents>, HandlerError>),
    /// The messages of a `prompts/get`.
    Prompt(Result<PromptOutput, HandlerError>),
    /// The values of a `completion/complete`.
    Completion(Result<Completion, HandlerError>),
}

/// What a `completion/complete` request completes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompletionRef {
    /// An argument of the named prompt.
    Prompt(String),
    /// A variable of the resource template with this `uriTemplate`.
    Template(String),
}

/// A call of application code the engine asks the shim to run.
#[derive(Debug)]
#[non_exhaustive]
pub enum Request {
    /// `tools/call`, with arguments already validated against the tool's input schema.
    CallTool {
        /// The tool's name.
        name: String,
        /// The arguments (`{}` when the request had none).
        arguments: Map<String, Value>,
    },
    /// `resources/read` of a registered resource, or of a URI matching a template.
    ReadResource {
        /// The URI asked for.
        uri: String,
        /// The matching template's `uriTemplate`, when it was not an exact resource.
        template: Option<String>,
        /// The template's variables, in template order (raw, not percent-decoded).
        variables: Vec<(String, String)>,
    },
    /// `prompts/get`, with required arguments present and every argument a string.
    GetPrompt {
        /// The prompt's name.
        name: String,
        /// The arguments.
        arguments: BTreeMap<String, String>,
    },
    /// `completion/complete` for a prompt argument or template variable.
    Complete {
        /// What is being completed.
        reference: CompletionRef,
        /// The argument's name.
        argument: String,
        /// What the user typed so far.
        value: String,
        /// Arguments already resolved (2025-06-18 and later).
        context: BTreeMap<String, String>,
    },
}

/// Run this handler and pass the result to [`Engine::complete`] with the ticket.
#[derive(Debug)]
#[non_exhaustive]
pub struct Invocation<H> {
    /// Consumed by [`Engine::complete`].
    pub ticket: Ticket,
    /// The connection the request arrived on.
    pub conn: ConnId,
    /// Who is calling.
    pub caller: Arc<Caller>,
    /// The protocol version the request speaks.
    pub version: ProtocolVersion,
    /// What to do.
    pub request: Request,
    /// The registered handler.
    pub handler: H,
}

/// Something for the shim to do. See [`Engine::poll_output`].
#[derive(Debug)]
pub enum Output<H> {
    /// Write these bytes on `conn` (without a trailing newline; stdio adds one).
    Frame {
        /// Where.
        conn: ConnId,
        /// One complete JSON-RPC message or batch.
        bytes: Vec<u8>,
    },
    /// Run application code.
    Invoke(Invocation<H>),
    /// Stop the handler of this call; its answer, if it still comes, is [`Stale`].
    Cancel {
        /// The call.
        call: CallId,
    },
    /// The complete response of an HTTP exchange ([`HttpReply::Pending`]): write it and end
    /// the response. Nothing more follows for `conn` (no [`Output::Close`]).
    Respond {
        /// Which exchange.
        conn: ConnId,
        /// Status and headers.
        head: HttpHead,
        /// The body (a JSON-RPC message, or empty).
        body: Vec<u8>,
    },
    /// Start an SSE response on `conn` with this head. [`Output::Frame`]s for `conn` then carry
    /// ready-to-write SSE bytes (events and comments, written as they are), until
    /// [`Output::Close`].
    Stream {
        /// Which exchange or stream.
        conn: ConnId,
        /// Status and headers.
        head: HttpHead,
    },
    /// The client answered what the handler of `call` asked with [`Engine::ask`] (legacy
    /// sessions), or the asking failed. Resume the handler with it.
    Answer {
        /// Whose ask.
        call: CallId,
        /// The answers by key, exact as the client wrote them, or why there are none.
        answers: Result<Map<String, Value>, AskError>,
    },
    /// Close the transport of `conn`; the engine has forgotten it.
    Close {
        /// Which.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
}

/// What an engine is doing; see [`Engine::status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineStatus {
    /// Connections open.
    pub connections: usize,
    /// Requests awaiting an answer, over all connections.
    pub in_flight: usize,
    /// `subscriptions/listen` streams open.
    pub listens: usize,
    /// Legacy HTTP sessions alive.
    pub sessions: usize,
    /// Held SSE streams (legacy `GET` streams and HTTP listen streams), each holding a seat.
    pub streams: usize,
    /// [`Engine::shutdown`] has been called.
    pub shutting_down: bool,
}

/// An answer for a call that is no longer in flight (cancelled, timed out, or its connection
/// closed): a normal race, safe to ignore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale;

struct Session {
    version: ProtocolVersion,
    initialized: bool,
    /// From `logging/setLevel`; `None` sends every level.
    log_level: Option<LogLevel>,
    /// The lists whose capability the session was offered: capabilities are fixed for a session,
    /// so a list it was never told of never notifies it.
    lists: [bool; 3],
    /// What the client declared in `initialize`: what the server may ask it for.
    client_caps: Value,
}

/// A `subscriptions/listen` stream open on a connection (2026-07-28).
struct Listen {
    id: RequestId,
    filter: subscriptions::Filter,
}

struct Conn {
    transport: http::Transport,
    /// Holds a stream seat (see [`Limits::max_streams`]).
    seated: bool,
    caller: Arc<Caller>,
    session: Option<Session>,
    /// Requests awaiting an answer.
    calls: ConnCalls,
    draining: bool,
    listens: Vec<Listen>,
    /// Notifications owed to this connection, coalesced.
    pending: subscriptions::Pending,
}

/// How one request will be answered.
enum Answer<H> {
    Now(Vec<u8>),
    Later(Invocation<H>),
    /// The request stays open and answers later by itself (a listen stream); what it had to
    /// say at once is already sent.
    Open,
}

/// The per-request facts every method handler needs.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    conn: ConnId,
    id: &'a RequestId,
    version: ProtocolVersion,
    /// The modern request's `_meta` logLevel.
    log_level: Option<LogLevel>,
    /// Set once a gate has shaped what this request sees.
    private: bool,
    /// `_meta.progressToken`, when valid.
    progress: Option<&'a RequestId>,
    /// The modern request's `_meta` clientCapabilities.
    client_caps: Option<&'a Value>,
    /// The modern request's answers so far (`requestState` and `inputResponses`).
    mrtr: Option<&'a ask::Mrtr>,
}

/// The MCP server protocol engine. See the crate docs for the run loop.
pub struct Engine<H> {
    config: Config,
    registry: Registry<H>,
    conns: Slab<Conn>,
    /// Calls in flight and batches awaiting replies.
    calls: Calls,
    /// Every deadline: call timeouts, session expiry, keep-alives.
    timers: timers::Timers,
    out: VecDeque<Output<H>>,
    /// Draining connections whose last call just finished, closed once its answer is queued.
    pending_close: Vec<ConnId>,
    /// [`Engine::shutdown`] was called: no new work is admitted.
    shutting_down: bool,
    /// `_meta.serverInfo` of modern results, serialised once.
    server_info_modern: Value,
    /// Subscriptions, and whether notifications are owed.
    notes: subscriptions::Notifications,
    /// Legacy HTTP sessions by id, and stream seats.
    sessions: sessions::Sessions,
    /// While an HTTP request is dispatched: the exchange its replies go to.
    reply_to: Option<ConnId>,
    /// While an HTTP request is dispatched: its exchange, and its response if it completed
    /// before `handle_http` returned (answered without a round trip through the output queue).
    immediate: Option<(ConnId, Option<http::Ready>)>,
    /// Server→client requests awaiting the client's response: (owner, id) → (call, slot).
    outbound: HashMap<(ConnId, u64), (CallId, usize)>,
    /// The id of the next server→client request.
    next_outbound: u64,
    /// The `now` the engine was made with, the origin of [`Config::unix_ms_at_start`].
    started: Instant,
    /// The latest `now` an input gave (every input records it, see `input`). Only for work done
    /// where no input is being handled, so it is always the `now` of the input that caused it:
    /// a keep-alive armed by a stream that starts while [`Engine::poll_output`] flushes
    /// notifications, and the end of a session's `GET` stream closed deep inside another
    /// input's teardown.
    clock: Instant,
}

impl<H: Clone> Engine<H> {
    /// A new engine. `now` is the current time; nothing in the engine reads a clock.
    pub fn new(config: Config, now: Instant) -> Self {
        let server_info_modern = config.server_info.to_json(ProtocolVersion::V2026_07_28);
        Self {
            config,
            registry: Registry::default(),
            conns: Slab::default(),
            calls: Calls::default(),
            timers: timers::Timers::default(),
            out: VecDeque::new(),
            pending_close: Vec::new(),
            shutting_down: false,
            server_info_modern,
            notes: subscriptions::Notifications::default(),
            sessions: sessions::Sessions::default(),
            reply_to: None,
            immediate: None,
            outbound: HashMap::new(),
            next_outbound: 1,
            started: now,
            clock: now,
        }
    }

    /// Every input starts here: it records `now` and, in debug builds, checks that the output of
    /// earlier inputs was drained where it matters.
    ///
    /// Output is a function of the inputs alone when the shim drains
    /// [`poll_output`](Self::poll_output) until `None` after each input. Most output is a FIFO,
    /// so taking it a little later changes nothing (the server layer answers several ready
    /// handlers in a row before draining, and may). Notifications are the exception: they are
    /// generated when the queue runs empty, from the state at that moment, so an input made
    /// while some are still pending would coalesce with them, reorder them or suppress them.
    /// Debug builds panic on exactly that (as quinn and str0m do on API misuse: tests and
    /// fuzzing find it); a release build carries on, with output that then depends on when the
    /// shim drained. A warning would be read by nobody; the panic cannot fire in a shim that
    /// follows the run loop.
    fn input(&mut self, now: Instant) {
        debug_assert!(
            !self.notes.is_dirty(),
            "mcp_proto::Engine: an input arrived before poll_output returned None after an input \
             that raised notifications"
        );
        self.clock = self.clock.max(now);
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Registers and unregisters items: one input, however many edits are made through the
    /// view. Edits raise `list_changed` notifications, which may start streams and arm their
    /// timers, so they take the current time like every other input.
    ///
    /// Follow with [`poll_output`](Self::poll_output) once the view is dropped.
    pub fn registry_mut(&mut self, now: Instant) -> RegistryMut<'_, H> {
        self.input(now);
        RegistryMut { engine: self }
    }

    /// Opens a connection for `caller`.
    pub fn open(&mut self, now: Instant, kind: ConnKind, caller: Caller) -> Result<ConnId, OpenError> {
        self.input(now);
        if self.shutting_down {
            return Err(OpenError::ShuttingDown);
        }
        if self.conns.len() >= self.config.limits.max_connections {
            return Err(OpenError::TooManyConnections);
        }
        let ConnKind::Stdio = kind;
        Ok(self.insert_conn(http::Transport::Line, Arc::new(caller)))
    }

    fn insert_conn(&mut self, transport: http::Transport, caller: Arc<Caller>) -> ConnId {
        self.notes.conn_opened(caller.binding());
        ConnId(self.conns.insert(Conn {
            transport,
            seated: false,
            caller,
            session: None,
            calls: ConnCalls::default(),
            draining: false,
            listens: Vec::new(),
            pending: subscriptions::Pending::default(),
        }))
    }

    /// Number of requests of `conn` awaiting an answer.
    pub fn in_flight(&self, conn: ConnId) -> usize {
        self.conns.get(conn.0).map_or(0, |c| c.calls.in_flight())
    }

    /// The peer will send nothing more on `conn`. Once every call it made is answered the
    /// engine emits [`Output::Close`] with [`CloseReason::EndOfInput`].
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn close_input(&mut self, now: Instant, conn: ConnId) {
        self.input(now);
        let Some(c) = self.conns.get_mut(conn.0) else { return };
        c.draining = true;
        // Nobody is left to read a listen stream: end them rather than wait for them.
        c.listens.clear();
        if c.calls.in_flight() == 0 {
            self.forget(conn, CloseReason::EndOfInput);
        }
    }

    /// Begins a graceful shutdown: from now on every new request is refused with `-32603`
    /// "server is shutting down" (`data.reason: "shutting_down"`) and never reaches a handler,
    /// open listen streams end with their final result, and each connection closes
    /// ([`CloseReason::Shutdown`]) as soon as its calls in flight are answered. Calls still running
    /// when the shim's budget runs out are ended with [`close`](Self::close).
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn shutdown(&mut self, now: Instant) {
        self.input(now);
        self.shutting_down = true;
        let keys: Vec<Key> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            let conn = ConnId(key);
            let Some(c) = self.conns.get_mut(key) else { continue };
            match &c.transport {
                // A legacy exchange ends with the reply its session's call owes it.
                http::Transport::Exchange(x) if x.session.is_some() => continue,
                http::Transport::Standalone { .. } => {
                    self.forget(conn, CloseReason::Shutdown);
                    continue;
                }
                _ => {}
            }
            c.draining = true;
            let listens = std::mem::take(&mut c.listens);
            let idle = c.calls.in_flight() == 0;
            for listen in listens {
                // SubscriptionsListenResult: the graceful end of a listen stream.
                let mut r = Map::new();
                let mut meta = Map::new();
                meta.insert(
                    META_SUBSCRIPTION_ID.into(),
                    serde_json::from_str(listen.id.as_json()).unwrap_or_default(),
                );
                meta.insert(META_SERVER_INFO.into(), self.server_info_modern.clone());
                r.insert("resultType".into(), "complete".into());
                r.insert("_meta".into(), Value::Object(meta));
                self.send(conn, encode_result(&listen.id, &r), true);
            }
            if idle {
                self.forget(conn, CloseReason::Shutdown);
            }
        }
    }

    /// Ends everything now, for a shutdown whose budget ran out: every call still in flight is
    /// cancelled ([`Output::Cancel`]) and answered with `-32603` "server is shutting down"
    /// (`data.reason: "shutting_down"`), then every connection, session and stream is closed
    /// ([`CloseReason::Shutdown`]).
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn close_all(&mut self, now: Instant) {
        self.input(now);
        let calls = self.calls.ids();
        for call in calls {
            if let Some(c) = self.finish_call(call) {
                self.out.push_back(Output::Cancel { call });
                let err = RpcError::new(ErrorCode::InternalError, "server is shutting down")
                    .with_data(serde_json::json!({ "reason": "shutting_down" }));
                let bytes = encode_error(Some(&c.id), &err);
                self.deliver(c, bytes);
            }
        }
        let conns: Vec<ConnId> = self.conns.iter().map(|(k, _)| ConnId(k)).collect();
        for conn in conns {
            self.forget(conn, CloseReason::Shutdown);
        }
    }

    /// Connections open, calls in flight and listen streams open: an operator's view.
    pub fn status(&self) -> EngineStatus {
        let mut s = EngineStatus {
            connections: self.conns.len(),
            in_flight: 0,
            listens: 0,
            shutting_down: self.shutting_down,
            sessions: self.sessions.len(),
            streams: self.sessions.streams(),
        };
        for (_, c) in self.conns.iter() {
            s.in_flight += c.calls.in_flight();
            s.listens += c.listens.len();
        }
        s
    }

    /// Closes `conn` now: every call in flight on it is cancelled ([`Output::Cancel`], in
    /// [`CallId`] order, whatever ids the peer chose) and the engine emits [`Output::Close`].
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn close(&mut self, now: Instant, conn: ConnId) {
        self.input(now);
        self.forget(conn, CloseReason::Closed);
    }

    fn forget(&mut self, conn: ConnId, reason: CloseReason) {
        let Some(c) = self.drop_conn(conn) else { return };
        let mut orphaned = Vec::new();
        // Cancelled in call order, not in the peer-chosen ids' hash order, so the output depends
        // on the inputs alone.
        for (call, reply_to) in self.calls.drop_all(c.calls, &mut self.timers) {
            if let Some(to) = reply_to.filter(|to| *to != conn) {
                orphaned.push(to);
            }
            self.out.push_back(Output::Cancel { call });
        }
        // Exchanges waiting for calls that will never answer are ended, not left hanging.
        for ex in orphaned {
            self.unowe(ex);
        }
        if let http::Transport::Session(s) = c.transport {
            if let Some(get) = s.get {
                self.forget(get, reason);
            }
            // A session has no transport of its own and its id was never handed to the shim:
            // there is nothing to close.
            return;
        }
        self.out.push_back(Output::Close { conn, reason });
    }

    /// Removes a connection from every index, without a word to the shim.
    fn drop_conn(&mut self, conn: ConnId) -> Option<Conn> {
        let c = self.conns.remove(conn.0)?;
        self.notes.conn_closed(c.caller.binding());
        if c.seated {
            self.sessions.unseat(c.caller.binding(), conn);
        }
        match &c.transport {
            http::Transport::Session(s) => {
                self.sessions.remove(&s.id);
            }
            http::Transport::Standalone { session } => {
                let clock = self.clock;
                if let Some(http::Transport::Session(s)) =
                    self.conns.get_mut(session.0).map(|s| &mut s.transport)
                {
                    s.stream_ended(conn, clock);
                }
            }
            _ => {}
        }
        Some(c)
    }

    /// A line longer than [`Limits::max_frame_bytes`] arrived on a stream (stdio) that cannot
    /// skip it: answers `-32600` with a `null` id, then closes `conn` with
    /// [`CloseReason::FrameTooLarge`], cancelling its calls.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn handle_oversized_frame(&mut self, now: Instant, conn: ConnId, seen: usize) {
        self.input(now);
        if self.conns.get(conn.0).is_none() {
            return;
        }
        let max = self.config.limits.max_frame_bytes;
        let err =
            RpcError::invalid_request(format!("frame of {seen} bytes or more exceeds the {max}-byte limit"));
        self.emit(conn, encode_error(None, &err));
        self.forget(conn, CloseReason::FrameTooLarge);
    }

    /// Handles one inbound frame (a stdio line, an HTTP body) from `conn`: [`Decoded::new`]
    /// then [`handle_decoded`](Self::handle_decoded).
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn handle_frame(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) -> FrameOutcome {
        let decoded = Decoded::new(&self.config.limits, bytes);
        self.handle_decoded(now, conn, decoded)
    }

    /// Handles one inbound frame from `conn` that was decoded beforehand (on the connection's
    /// own task, say, so that the parse of a large frame holds up nobody else). The engine's
    /// limits should be the ones the frame was decoded under ([`Config::limits`]).
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn handle_decoded(&mut self, now: Instant, conn: ConnId, decoded: Decoded) -> FrameOutcome {
        self.input(now);
        if self.conns.get(conn.0).is_none() {
            return FrameOutcome::UnknownConnection;
        }
        let frame = match decoded.frame {
            Some(Ok(f)) => f,
            Some(Err(e)) => {
                self.emit(conn, encode_error(None, &decode_error(e)));
                return FrameOutcome::Reply;
            }
            None => {
                let err = RpcError::invalid_request(format!(
                    "frame of {} bytes exceeds the {}-byte limit",
                    decoded.len, self.config.limits.max_frame_bytes
                ));
                self.emit(conn, encode_error(None, &err));
                return FrameOutcome::Reply;
            }
        };
        self.dispatch(now, conn, frame)
    }

    /// Answers a parsed frame from `conn`.
    fn dispatch(&mut self, now: Instant, conn: ConnId, frame: RawFrame) -> FrameOutcome {
        match frame {
            RawFrame::Single(env) => match self.message(now, conn, env, None) {
                Some(Answer::Now(bytes)) => {
                    self.emit(conn, bytes);
                    FrameOutcome::Reply
                }
                Some(Answer::Later(inv)) => {
                    self.out.push_back(Output::Invoke(inv));
                    FrameOutcome::Reply
                }
                Some(Answer::Open) => FrameOutcome::Reply,
                None => FrameOutcome::NoReply,
            },
            RawFrame::NotAnObject => {
                let err = RpcError::invalid_request("a JSON-RPC message must be an object");
                self.emit(conn, encode_error(None, &err));
                FrameOutcome::Reply
            }
            RawFrame::Batch(items) => self.batch(now, conn, items),
        }
    }

    fn batch(&mut self, now: Instant, conn: ConnId, items: Vec<RawFrameItem>) -> FrameOutcome {
        let allowed = self
            .conns
            .get(conn.0)
            .and_then(|c| c.session.as_ref())
            .is_some_and(|s| s.version.allows_batches());
        let refuse = if !allowed {
            Some("JSON-RPC batches are only accepted on a 2025-03-26 session".to_owned())
        } else if items.is_empty() {
            Some("empty batch".to_owned())
        } else if items.len() > self.config.limits.max_batch_len {
            Some(format!(
                "batch of {} messages exceeds the limit of {}",
                items.len(),
                self.config.limits.max_batch_len
            ))
        } else {
            None
        };
        if let Some(msg) = refuse {
            self.emit(conn, encode_error(None, &RpcError::invalid_request(msg)));
            return FrameOutcome::Reply;
        }
        let reply_to = self.reply_to.unwrap_or(conn);
        let batch = self.calls.open_batch(reply_to);
        let mut invocations = Vec::new();
        for item in items {
            let answer = match item {
                RawFrameItem::Message(env) => self.message(now, conn, env, Some(batch)),
                RawFrameItem::NotAnObject => Some(Answer::Now(encode_error(
                    None,
                    &RpcError::invalid_request("a JSON-RPC message must be an object"),
                ))),
            };
            match answer {
                Some(Answer::Now(bytes)) => self.calls.answered(batch, bytes),
                Some(Answer::Later(inv)) => {
                    // `admit` gave the call this slot: the next one.
                    self.calls.awaits(batch);
                    invocations.push(inv);
                }
                None | Some(Answer::Open) => {}
            }
        }
        let Some(replies) = self.calls.close_batch(batch) else { return FrameOutcome::NoReply };
        let outcome = if replies { FrameOutcome::Reply } else { FrameOutcome::NoReply };
        // A member cancelled by a later member is already answered (not at all): it never runs,
        // so the shim hears of neither an invocation nor its cancellation.
        let (live, dropped): (Vec<_>, Vec<_>) =
            invocations.into_iter().partition(|inv| self.calls.get(inv.ticket.call).is_some());
        if !dropped.is_empty() {
            let dropped: Vec<CallId> = dropped.iter().map(|inv| inv.ticket.call).collect();
            self.out.retain(|o| !matches!(o, Output::Cancel { call } if dropped.contains(call)));
        }
        self.out.extend(live.into_iter().map(Output::Invoke));
        self.flush_batch(batch);
        outcome
    }

    fn flush_batch(&mut self, batch: Key) {
        if let Some((to, bytes)) = self.calls.flush(batch) {
            self.send(to, bytes, true);
        }
    }

    /// Sends the reply to a request read from `conn` (or from the HTTP exchange being
    /// dispatched).
    fn emit(&mut self, conn: ConnId, bytes: Vec<u8>) {
        let to = self.reply_to.unwrap_or(conn);
        self.send(to, bytes, true);
    }

    /// Applies the envelope rules to one message and dispatches it. `None`: no reply.
    fn message(
        &mut self,
        now: Instant,
        conn: ConnId,
        env: RawEnvelope,
        batch: Option<Key>,
    ) -> Option<Answer<H>> {
        let limits = &self.config.limits;
        // A response (a result or an error, no method) is never answered, whatever is wrong
        // with it: two peers answering each other's bad responses would never stop. One that
        // answers a request of ours resumes the handler that asked; any other is dropped, as
        // JSON-RPC allows.
        if env.method.is_none() && (env.result.is_some() || env.error.is_some()) {
            self.response(conn, env);
            return None;
        }
        // A notification (a method, and nothing that could be an id) is never answered either,
        // even when malformed: nobody waits for it.
        let notification = env.id.is_none() && !env.id_like && env.method.is_some();
        let id = match env.id.as_deref() {
            _ if notification || env.id_ambiguous => None,
            None => None,
            Some(raw) if raw.get().len() > limits.max_id_bytes => {
                let msg =
                    format!("id of {} bytes exceeds the {}-byte limit", raw.get().len(), limits.max_id_bytes);
                return Some(Answer::Now(encode_error(None, &RpcError::invalid_request(msg))));
            }
            Some(raw) => match RequestId::from_json(raw.get()) {
                Some(id) => Some(id),
                None if raw.get().starts_with('"') => {
                    let err =
                        RpcError::new(ErrorCode::ParseError, "parse error: the id is not a valid string");
                    return Some(Answer::Now(encode_error(None, &err)));
                }
                None => {
                    let msg = "id must be a string or an integer";
                    return Some(Answer::Now(encode_error(None, &RpcError::invalid_request(msg))));
                }
            },
        };
        let fail = |err: RpcError| -> Option<Answer<H>> {
            (!notification).then(|| Answer::Now(encode_error(id.as_ref(), &err)))
        };
        if let Some(problem) = env.problem {
            return fail(RpcError::invalid_request(problem));
        }
        if env.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
            return fail(RpcError::invalid_request("\"jsonrpc\" must be \"2.0\""));
        }
        if let Some((fault, in_params)) = env.fault {
            return fail(if in_params {
                RpcError::invalid_params(format!("params: {fault}"))
            } else {
                RpcError::invalid_request(fault.to_string())
            });
        }
        let Some(method) = env.method else {
            return fail(RpcError::invalid_request("missing \"method\""));
        };
        let Value::String(method) = method else {
            return fail(RpcError::invalid_request("\"method\" must be a string"));
        };
        if method.len() > limits.max_method_bytes {
            let msg = format!(
                "method of {} bytes exceeds the {}-byte limit",
                method.len(),
                limits.max_method_bytes
            );
            return fail(RpcError::invalid_request(msg));
        }
        if env.result.is_some() || env.error.is_some() {
            return fail(RpcError::invalid_request("a request cannot carry \"result\" or \"error\""));
        }
        let params = match env.params {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return fail(RpcError::invalid_params("params must be an object")),
        };
        if notification {
            self.notification(now, conn, &method, params);
            return None;
        }
        match id {
            Some(id) => Some(self.request(now, conn, id, &method, params, batch)),
            // Unreachable in practice: an ambiguous or look-alike id is already a `problem`.
            None => fail(RpcError::invalid_request("the request's \"id\" is missing or ambiguous")),
        }
    }

    fn notification(&mut self, now: Instant, conn: ConnId, method: &str, params: Option<Map<String, Value>>) {
        match method {
            "notifications/initialized" => {
                if let Some(s) = self.conns.get_mut(conn.0).and_then(|c| c.session.as_mut()) {
                    s.initialized = true;
                }
            }
            "notifications/cancelled" => {
                let Some(raw) = params.as_ref().and_then(|p| p.get("requestId")) else { return };
                let Some(id) = serde_json::to_string(raw).ok().and_then(|s| RequestId::from_json(&s)) else {
                    return;
                };
                let call = self.conns.get(conn.0).and_then(|c| c.calls.get(&id));
                match call {
                    Some(call) => self.cancel(now, call),
                    None => {
                        self.end_listen(conn, &id);
                    }
                }
            }
            // Unknown notifications are ignored, as JSON-RPC requires.
            _ => {}
        }
    }

    /// Ends a call without an answer (the peer cancelled it).
    fn cancel(&mut self, _now: Instant, call: CallId) {
        if let Some(c) = self.finish_call(call) {
            match c.batch() {
                Some((b, _)) => {
                    self.calls.settle(b, None);
                    self.flush_batch(b);
                }
                None => self.unowe(c.reply_to),
            }
            self.out.push_back(Output::Cancel { call });
            self.close_drained();
        }
    }

    /// Removes a call from every index and releases its in-flight slot.
    fn finish_call(&mut self, call: CallId) -> Option<Call> {
        let c = self.calls.finish(call, &mut self.timers)?;
        self.forget_asks(&c);
        if let Some(conn) = self.conns.get_mut(c.conn.0) {
            conn.calls.release(&c.id);
            if conn.draining && conn.calls.in_flight() == 0 {
                // The caller queues this call's answer first; `close_drained` then closes.
                self.pending_close.push(c.conn);
            }
        }
        Some(c)
    }

    fn request(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: RequestId,
        method: &str,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Answer<H> {
        if self.shutting_down {
            let err = RpcError::new(ErrorCode::InternalError, "server is shutting down")
                .with_data(serde_json::json!({ "reason": "shutting_down" }));
            return Answer::Now(encode_error(Some(&id), &err));
        }
        let meta_version = params
            .as_ref()
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.as_object())
            .and_then(|m| m.get(META_PROTOCOL_VERSION));
        // A 2026-07-28 HTTP exchange speaks nothing else, even when `_meta` forgot to say so; a
        // legacy HTTP session speaks nothing else either (stdio may mix the two eras on one
        // stream, but an HTTP session's streams, seats and expiry are legacy machinery).
        let transport = self.conns.get(conn.0).map(|c| &c.transport);
        let stateless = matches!(transport, Some(http::Transport::Exchange(x)) if x.modern);
        if meta_version.is_some() && matches!(transport, Some(http::Transport::Session(_))) {
            let err = RpcError::invalid_request(
                "a 2026-07-28 request (with _meta protocolVersion) cannot be sent inside a legacy session",
            );
            return Answer::Now(encode_error(Some(&id), &err));
        }
        let result = if meta_version.is_some() || stateless {
            self.modern(now, conn, &id, method, params, batch)
        } else {
            self.legacy(now, conn, &id, method, params, batch)
        };
        match result {
            // Tool results are bounded on completion, with a tool-level failure; any other
            // result over the ceiling becomes the generic internal error.
            Ok(Answer::Now(bytes)) if bytes.len() > self.config.limits.max_response_bytes => {
                Answer::Now(encode_error(Some(&id), &RpcError::internal()))
            }
            Ok(answer) => answer,
            Err(err) => Answer::Now(encode_error(Some(&id), &err)),
        }
    }

    fn legacy(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: &RequestId,
        method: &str,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let session = self.conns.get(conn.0).and_then(|c| c.session.as_ref()).map(|s| s.version);
        match (method, session) {
            ("initialize", None) => {
                if batch.is_some() {
                    return Err(RpcError::invalid_request("initialize must not be part of a batch"));
                }
                self.initialize(conn, id, params).map(Answer::Now)
            }
            ("initialize", Some(_)) => Err(RpcError::invalid_request("the session is already initialized")),
            ("ping", _) => Ok(Answer::Now(encode_result(id, &Map::new()))),
            (_, None) => Err(RpcError::invalid_request(format!(
                "{method}: the session is not initialized; send initialize first"
            ))),
            (_, Some(version)) => {
                let progress = notify::progress_token(params.as_ref(), self.config.limits.max_id_bytes);
                let ctx = Ctx {
                    conn,
                    id,
                    version,
                    log_level: None,
                    private: false,
                    progress: progress.as_ref(),
                    client_caps: None,
                    mrtr: None,
                };
                match method {
                    "logging/setLevel" => self.set_level(ctx, params.as_ref()).map(Answer::Now),
                    "resources/subscribe" | "resources/unsubscribe"
                        if !self.offers(&self.caller(conn)).resources =>
                    {
                        Err(RpcError::method_not_found(method))
                    }
                    "resources/subscribe" => self.subscribe(ctx, params.as_ref()).map(Answer::Now),
                    "resources/unsubscribe" => self.unsubscribe(ctx, params.as_ref()).map(Answer::Now),
                    "subscriptions/listen" => Err(RpcError::method_not_found(method)),
                    _ => self.method(now, ctx, method, params, batch),
                }
            }
        }
    }

    fn modern(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: &RequestId,
        method: &str,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let meta = params.as_ref().and_then(|p| p.get("_meta")).and_then(Value::as_object);
        let requested = meta.and_then(|m| m.get(META_PROTOCOL_VERSION));
        let Some(Value::String(requested)) = requested else {
            return Err(RpcError::invalid_params(format!(
                "_meta[\"{META_PROTOCOL_VERSION}\"] must be a string"
            )));
        };
        if !meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).is_some_and(Value::is_object) {
            return Err(RpcError::invalid_params(format!(
                "_meta[\"{META_CLIENT_CAPABILITIES}\"] is required and must be an object"
            )));
        }
        let version = match ProtocolVersion::parse(requested) {
            Some(v) if v.is_modern() => v,
            _ => {
                let supported: Vec<&str> = ProtocolVersion::ALL.iter().map(|v| v.as_str()).collect();
                let msg = if ProtocolVersion::parse(requested).is_some() {
                    format!("protocol version {requested} is negotiated through initialize, not per-request _meta")
                } else {
                    format!("unsupported protocol version {requested:?}")
                };
                return Err(RpcError::new(ErrorCode::UnsupportedProtocolVersion, msg)
                    .with_data(serde_json::json!({ "supported": supported, "requested": requested })));
            }
        };
        let log_level = match meta.and_then(|m| m.get(META_LOG_LEVEL)) {
            None => None,
            Some(level) => Some(LogLevel::from_json(level).ok_or_else(|| {
                RpcError::invalid_params(format!("_meta[\"{META_LOG_LEVEL}\"] is not a logging level"))
            })?),
        };
        let progress = notify::progress_token(params.as_ref(), self.config.limits.max_id_bytes);
        let client_caps = meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).cloned();
        let mrtr = match method {
            "tools/call" | "prompts/get" | "resources/read" => {
                Some(self.mrtr_input(now, conn, method, params.as_ref())?)
            }
            _ => None,
        };
        let ctx = Ctx {
            conn,
            id,
            version,
            log_level,
            private: false,
            progress: progress.as_ref(),
            client_caps: client_caps.as_ref(),
            mrtr: mrtr.as_ref(),
        };
        match method {
            "server/discover" => Ok(Answer::Now(self.discover(ctx))),
            // Removed in 2026-07-28.
            "initialize" | "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
                Err(RpcError::method_not_found(method))
            }
            "subscriptions/listen" => self.listen(ctx, params.as_ref(), batch),
            _ => self.method(now, ctx, method, params, batch),
        }
    }

    /// Methods both eras share.
    fn method(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        method: &str,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let known = matches!(
            method,
            "tools/list"
                | "tools/call"
                | "resources/list"
                | "resources/templates/list"
                | "resources/read"
                | "prompts/list"
                | "prompts/get"
                | "completion/complete"
        );
        if !known || !self.offers(&self.caller(ctx.conn)).method(method) {
            return Err(RpcError::method_not_found(method));
        }
        self.check_server_gate(ctx)?;
        let mut ctx = ctx;
        ctx.private = self.registry.gate.is_some();
        match method {
            "tools/list" => self.list_tools(ctx, params.as_ref()).map(Answer::Now),
            "tools/call" => self.call_tool(now, ctx, params, batch),
            "resources/list" => self.list_resources(ctx, params.as_ref()).map(Answer::Now),
            "resources/templates/list" => self.list_templates(ctx, params.as_ref()).map(Answer::Now),
            "resources/read" => self.read_resource(now, ctx, params.as_ref(), batch),
            "prompts/list" => self.list_prompts(ctx, params.as_ref()).map(Answer::Now),
            "prompts/get" => self.get_prompt(now, ctx, params.as_ref(), batch),
            _ => self.complete_request(now, ctx, params.as_ref(), batch),
        }
    }

    /// The capabilities `caller` is offered: derived from the items its gates let it see, so a
    /// gated item that is the only one of its kind does not betray the kind.
    fn capabilities(&self, caller: &Caller) -> Value {
        let offers = self.offers(caller);
        let listed = || serde_json::json!({ "listChanged": true });
        let mut caps = Map::new();
        if offers.tools {
            caps.insert("tools".into(), listed());
        }
        if offers.resources {
            caps.insert("resources".into(), serde_json::json!({ "subscribe": true, "listChanged": true }));
        }
        if offers.prompts {
            caps.insert("prompts".into(), listed());
        }
        if offers.completions {
            caps.insert("completions".into(), Value::Object(Map::new()));
        }
        caps.insert("logging".into(), Value::Object(Map::new()));
        Value::Object(caps)
    }

    fn initialize(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        params: Option<Map<String, Value>>,
    ) -> Result<Vec<u8>, RpcError> {
        let params = params.unwrap_or_default();
        let Some(Value::String(requested)) = params.get("protocolVersion") else {
            return Err(RpcError::invalid_params("initialize: \"protocolVersion\" must be a string"));
        };
        for field in ["capabilities", "clientInfo"] {
            if !params.get(field).is_some_and(Value::is_object) {
                return Err(RpcError::invalid_params(format!("initialize: \"{field}\" must be an object")));
            }
        }
        // Echo a supported legacy version, otherwise offer the newest legacy one: the spec's
        // negotiation rule, which leaves it to the client to disconnect.
        let version = ProtocolVersion::parse(requested)
            .filter(|v| !v.is_modern())
            .unwrap_or(ProtocolVersion::NEWEST_LEGACY);
        let offers = self.offers(&self.caller(conn));
        if let Some(c) = self.conns.get_mut(conn.0) {
            c.session = Some(Session {
                version,
                initialized: false,
                log_level: None,
                lists: offers.lists(),
                client_caps: params.get("capabilities").cloned().unwrap_or_default(),
            });
        }
        let mut r = Map::new();
        r.insert("protocolVersion".into(), version.as_str().into());
        let caller = self.caller(conn);
        r.insert("capabilities".into(), self.capabilities(&caller));
        r.insert("serverInfo".into(), self.config.server_info.to_json(version));
        if let Some(i) = &self.config.instructions {
            r.insert("instructions".into(), i.clone().into());
        }
        Ok(encode_result(id, &r))
    }

    fn discover(&self, ctx: Ctx<'_>) -> Vec<u8> {
        let mut r = Map::new();
        let versions: Vec<&str> = ProtocolVersion::ALL.iter().map(|v| v.as_str()).collect();
        r.insert("supportedVersions".into(), versions.into());
        r.insert("capabilities".into(), self.capabilities(&self.caller(ctx.conn)));
        if let Some(i) = &self.config.instructions {
            r.insert("instructions".into(), i.clone().into());
        }
        self.cacheable(&mut r, ctx.version, false);
        self.finish(&mut r, ctx.version);
        encode_result(ctx.id, &r)
    }

    /// Adds `ttlMs` and `cacheScope` on a modern cacheable result.
    fn cacheable(&self, r: &mut Map<String, Value>, v: ProtocolVersion, private: bool) {
        if v.is_modern() {
            r.insert("ttlMs".into(), self.config.cache_ttl_ms.into());
            r.insert("cacheScope".into(), if private { "private" } else { "public" }.into());
        }
    }

    /// Adds `resultType` and the serverInfo `_meta` every modern result carries.
    fn finish(&self, r: &mut Map<String, Value>, v: ProtocolVersion) {
        if v.is_modern() {
            r.insert("resultType".into(), "complete".into());
            let meta = r.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = meta {
                m.insert(META_SERVER_INFO.into(), self.server_info_modern.clone());
            }
        }
    }

    /// Where a list page starts: `None` for the first page, else the key its cursor names
    /// (at most `max_key` bytes), after which the page begins.
    fn page_bounds(
        &self,
        ctx: Ctx<'_>,
        method: &str,
        params: Option<&Map<String, Value>>,
        max_key: usize,
    ) -> Result<Option<String>, RpcError> {
        match params.and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(c)) => {
                let caller = self.conns.get(ctx.conn.0).map(|c| c.caller.clone()).unwrap_or_default();
                cursor::read(&self.config.keys, c, method, caller.binding(), max_key)
                    .map(Some)
                    .ok_or_else(|| RpcError::invalid_params("invalid cursor"))
            }
            Some(_) => Err(RpcError::invalid_params("invalid cursor")),
        }
    }

    fn list_tools(&self, ctx: Ctx<'_>, params: Option<&Map<String, Value>>) -> Result<Vec<u8>, RpcError> {
        let tools = &self.registry.tools;
        self.list_page(ctx, params, "tools/list", "tools", tools, crate::registry::MAX_TOOL_NAME)
    }

    fn call_tool(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let mut params = params.unwrap_or_default();
        let name = match params.remove("name") {
            Some(Value::String(n)) => n,
            Some(_) => return Err(RpcError::invalid_params("\"name\" must be a string")),
            None => return Err(RpcError::invalid_params("missing tool \"name\"")),
        };
        let caller = self.caller(ctx.conn);
        // A tool the caller's gate refuses is answered exactly as one never registered.
        let Some(entry) = self
            .registry
            .tools
            .get(&name)
            .filter(|t| t.visible_to(ctx.version) && admits(t.tool.gate.as_ref(), &caller))
        else {
            return Err(RpcError::invalid_params(format!("unknown tool: {name}")));
        };
        let arguments = match params.remove("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(RpcError::invalid_params("\"arguments\" must be an object")),
        };
        if let Some(validator) = &entry.input {
            if let Some(errors) = describe_errors(validator, &arguments) {
                let text = format!("invalid arguments for tool {name}: {}", errors.join("; "));
                if ctx.version.argument_errors_as_results() {
                    let out = ToolOutput::error(text);
                    return Ok(Answer::Now(self.encode_tool_result(ctx.id, ctx.version, &out)));
                }
                return Err(RpcError::invalid_params(text).with_data(serde_json::json!({ "errors": errors })));
            }
        }
        let Value::Object(arguments) = arguments else { return Err(RpcError::internal()) };
        let handler = entry.handler.clone();
        self.invoke(
            now,
            ctx,
            CallKind::Tool(name.clone()),
            batch,
            Request::CallTool { name, arguments },
            handler,
        )
    }

    /// Admits a call and asks the shim to run its handler.
    fn invoke(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        kind: CallKind,
        batch: Option<Key>,
        request: Request,
        handler: H,
    ) -> Result<Answer<H>, RpcError> {
        let call = self.admit(now, ctx, kind, batch)?;
        let ticket = Ticket {
            call,
            #[cfg(debug_assertions)]
            live: self.calls.get(call).map(|c| c.live.0.clone()).unwrap_or_default(),
        };
        Ok(Answer::Later(Invocation {
            ticket,
            conn: ctx.conn,
            caller: self.caller(ctx.conn),
            version: ctx.version,
            request,
            handler,
        }))
    }

    /// Records a call that a handler will answer, enforcing the in-flight bound and id
    /// uniqueness.
    fn admit(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        kind: CallKind,
        batch: Option<Key>,
    ) -> Result<CallId, RpcError> {
        let max = self.config.limits.max_in_flight;
        let conn = self.conns.get_mut(ctx.conn.0).ok_or_else(RpcError::internal)?;
        let listening = conn.listens.iter().any(|l| &l.id == ctx.id);
        // A timeout too long for the clock to express is no timeout.
        let deadline = self.config.call_timeout.and_then(|t| now.checked_add(t));
        let call = Call::new(ctx, self.reply_to.unwrap_or(ctx.conn), kind, deadline);
        self.calls.admit(&mut conn.calls, call, batch, max, listening, &mut self.timers)
    }

    /// Answers the call of `ticket` with `reply`.
    ///
    /// Returns [`Stale`] when the call is no longer in flight (cancelled, timed out, or its
    /// connection closed); that is a normal race and nothing is sent. Follow with
    /// [`poll_output`](Self::poll_output).
    pub fn complete(&mut self, now: Instant, ticket: Ticket, reply: Reply) -> Result<(), Stale> {
        self.input(now);
        let call = self.finish_call(ticket.settle()).ok_or(Stale)?;
        let bytes = match (reply, &call.kind) {
            (Reply::Tool(Ok(out)), CallKind::Tool(_)) => self.tool_result(&call, out),
            (Reply::Resource(Ok(contents)), CallKind::Resource(uri)) => {
                self.read_result(&call, uri, &contents)
            }
            (Reply::Prompt(Ok(out)), CallKind::Prompt) => self.prompt_result(&call, &out),
            (Reply::Completion(Ok(c)), CallKind::Complete) => self.completion_result(&call, c),
            (
                Reply::Tool(Err(e))
                | Reply::Resource(Err(e))
                | Reply::Prompt(Err(e))
                | Reply::Completion(Err(e)),
                _,
            ) => encode_error(Some(&call.id), &public_error(e)),
            // A reply of the wrong kind is the shim's bug; the peer learns only that it failed.
            _ => encode_error(Some(&call.id), &RpcError::internal()),
        };
        let bytes = if bytes.len() > self.config.limits.max_response_bytes {
            encode_error(Some(&call.id), &RpcError::internal())
        } else {
            bytes
        };
        self.deliver(call, bytes);
        Ok(())
    }

    fn deliver(&mut self, call: Call, bytes: Vec<u8>) {
        match call.batch() {
            Some((b, slot)) => {
                self.calls.settle(b, Some((slot, bytes)));
                self.flush_batch(b);
            }
            None => self.send(call.reply_to, bytes, true),
        }
        self.close_drained();
    }

    fn close_drained(&mut self) {
        while let Some(conn) = self.pending_close.pop() {
            let drained = self.conns.get(conn.0).is_some_and(|c| c.draining && c.calls.in_flight() == 0);
            if drained {
                let reason = if self.shutting_down { CloseReason::Shutdown } else { CloseReason::EndOfInput };
                self.forget(conn, reason);
            }
        }
    }

    fn tool_result(&self, call: &Call, mut out: ToolOutput) -> Vec<u8> {
        let entry = match &call.kind {
            CallKind::Tool(name) => self.registry.tools.get(name),
            _ => None,
        };
        if let Some(validator) = entry.and_then(|e| e.output.as_ref()) {
            if !out.is_error {
                let ok = out.structured.as_ref().is_some_and(|s| validator.is_valid(s));
                if !ok {
                    // The application broke its own contract; the peer learns only that the
                    // server failed.
                    return encode_error(Some(&call.id), &RpcError::internal());
                }
            }
        }
        if let Some(s) = &out.structured {
            if out.content.is_empty() {
                out.content.push(Content::text(s.to_string()));
            }
        }
        let bytes = self.encode_tool_result(&call.id, call.version, &out);
        let max = self.config.limits.max_response_bytes;
        if bytes.len() <= max {
            return bytes;
        }
        let msg = format!(
            "result_too_large: the tool's result of {} bytes exceeds the {max}-byte response limit",
            bytes.len()
        );
        self.encode_tool_result(&call.id, call.version, &ToolOutput::error(msg))
    }

    fn encode_tool_result(&self, id: &RequestId, v: ProtocolVersion, out: &ToolOutput) -> Vec<u8> {
        let modern = v.is_modern().then_some(&self.server_info_modern);
        encode_result(id, &ToolResultWire { out, v, server_info: modern })
    }

    /// The next thing for the shim to do, or `None` when there is nothing.
    ///
    /// Call it until it returns `None` after every [`handle_frame`](Self::handle_frame),
    /// [`complete`](Self::complete), [`handle_timeout`](Self::handle_timeout),
    /// [`close`](Self::close), [`close_input`](Self::close_input) and registry change.
    pub fn poll_output(&mut self) -> Option<Output<H>> {
        if self.out.is_empty() && self.notes.is_dirty() {
            // Notifications are generated only when everything else has been taken, so a burst
            // of registry changes between two drains is one notification per connection.
            self.flush_notifications();
        }
        self.out.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called, if ever.
    ///
    /// Ask again after every call that may add a deadline: [`handle_frame`](Self::handle_frame)
    /// and [`handle_timeout`](Self::handle_timeout).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Expires every deadline at or before `now`: a timed-out call is cancelled
    /// ([`Output::Cancel`]) and answered with `-32603` "request timed out".
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.input(now);
        let due: Vec<Timer> = self.timers.expired(now).collect();
        for timer in due {
            match timer {
                Timer::Call(call) => self.call_timeout(call),
                Timer::Session(conn) => self.session_timer(now, conn),
                Timer::KeepAlive(conn) => self.keepalive(now, conn),
            }
        }
    }

    /// `call` ran past [`Config::call_timeout`]: stop it and answer that it timed out.
    fn call_timeout(&mut self, call: CallId) {
        if let Some(c) = self.finish_call(call) {
            self.out.push_back(Output::Cancel { call });
            let err = RpcError::new(ErrorCode::InternalError, "request timed out");
            let bytes = encode_error(Some(&c.id), &err);
            self.deliver(c, bytes);
        }
    }
}

/// The error answering a frame that did not parse.
fn decode_error(e: DecodeError) -> RpcError {
    match e {
        DecodeError::Syntax(msg) => RpcError::new(ErrorCode::ParseError, format!("parse error: {msg}")),
        DecodeError::TooDeep => RpcError::invalid_request("JSON nested deeper than 128 levels"),
    }
}

/// What a handler failure becomes on the wire: public errors as they are, anything else as the
/// generic internal error.
fn public_error(e: HandlerError) -> RpcError {
    match e {
        HandlerError::Public(e) => e,
        HandlerError::Private(_) | HandlerError::Panicked | HandlerError::Cancelled => RpcError::internal(),
    }
}

/// Registers and unregisters items; see [`Engine::registry_mut`].
pub struct RegistryMut<'a, H> {
    engine: &'a mut Engine<H>,
}

impl<H: Clone> RegistryMut<'_, H> {
    /// Registers a tool. Its schemas are compiled now; a tool that cannot be served is refused
    /// here rather than failing at call time. Connections the tool's gate admits are told
    /// `notifications/tools/list_changed`.
    pub fn add_tool(&mut self, tool: Tool, handler: H) -> Result<(), RegistryError> {
        let gate = tool.gate.clone();
        self.engine.registry.add_tool(tool, handler)?;
        self.engine.changed(subscriptions::List::Tools, gate.as_ref());
        Ok(())
    }

    /// Unregisters a tool, returning its declaration if it was registered.
    pub fn remove_tool(&mut self, name: &str) -> Option<Tool> {
        let tool = self.engine.registry.remove_tool(name)?;
        self.engine.changed(subscriptions::List::Tools, tool.gate.as_ref());
        Some(tool)
    }

    /// Whether a tool of that name is registered (whatever its gate).
    pub fn has_tool(&self, name: &str) -> bool {
        self.engine.registry.tools.contains_key(name)
    }

    /// Registers a resource read by exact URI.
    pub fn add_resource(&mut self, resource: Resource, handler: H) -> Result<(), RegistryError> {
        let gate = resource.gate.clone();
        let max = self.engine.config.limits.max_uri_bytes;
        self.engine.registry.add_resource(resource, handler, max)?;
        self.engine.changed(subscriptions::List::Resources, gate.as_ref());
        Ok(())
    }

    /// Unregisters a resource.
    pub fn remove_resource(&mut self, uri: &str) -> Option<Resource> {
        let entry = self.engine.registry.resources.remove(uri)?;
        self.engine.changed(subscriptions::List::Resources, entry.resource.gate.as_ref());
        Some(entry.resource)
    }

    /// Registers a resource template: reads of matching URIs go to `handler`, and
    /// `completion/complete` for its variables to `completion` (an empty answer without one).
    pub fn add_template(
        &mut self,
        template: ResourceTemplate,
        handler: H,
        completion: Option<H>,
    ) -> Result<(), RegistryError> {
        let gate = template.gate.clone();
        self.engine.registry.add_template(template, handler, completion)?;
        self.engine.changed(subscriptions::List::Resources, gate.as_ref());
        Ok(())
    }

    /// Unregisters a template.
    pub fn remove_template(&mut self, uri_template: &str) -> Option<ResourceTemplate> {
        let entry = self.engine.registry.templates.remove(uri_template)?;
        self.engine.changed(subscriptions::List::Resources, entry.template.gate.as_ref());
        Some(entry.template)
    }

    /// Registers a prompt, with an optional completion handler for its arguments.
    pub fn add_prompt(
        &mut self,
        prompt: Prompt,
        handler: H,
        completion: Option<H>,
    ) -> Result<(), RegistryError> {
        let gate = prompt.gate.clone();
        self.engine.registry.add_prompt(prompt, handler, completion)?;
        self.engine.changed(subscriptions::List::Prompts, gate.as_ref());
        Ok(())
    }

    /// Unregisters a prompt.
    pub fn remove_prompt(&mut self, name: &str) -> Option<Prompt> {
        let entry = self.engine.registry.prompts.remove(name)?;
        self.engine.changed(subscriptions::List::Prompts, entry.prompt.gate.as_ref());
        Some(entry.prompt)
    }

    /// Sets (or with `None` clears) the server-wide gate over the data methods (every method but
    /// `initialize`, `ping`, `server/discover` and notifications). A refused caller gets
    /// `-32602` "forbidden" and no change notifications.
    pub fn set_gate(&mut self, gate: Option<Gate>) {
        self.engine.registry.gate = gate;
    }
}

struct ToolResultWire<'a> {
    out: &'a ToolOutput,
    v: ProtocolVersion,
    server_info: Option<&'a Value>,
}

impl Serialize for ToolResultWire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("content", &ContentList(&self.out.content, self.v))?;
        if let Some(st) = &self.out.structured {
            if self.v.structured_content_any_type() || (self.v.has_structured_output() && st.is_object()) {
                m.serialize_entry("structuredContent", st)?;
            }
        }
        if self.out.is_error {
            m.serialize_entry("isError", &true)?;
        }
        match (self.server_info, &self.out.meta) {
            (Some(info), meta) => {
                m.serialize_entry("_meta", &MetaWithInfo(meta.as_ref(), info))?;
                m.serialize_entry("resultType", "complete")?;
            }
            (None, Some(meta)) => m.serialize_entry("_meta", meta)?,
            (None, None) => {}
        }
        m.end()
    }
}

struct ContentList<'a>(&'a [Content], ProtocolVersion);

impl Serialize for ContentList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|c| c.for_version(self.1)))
    }
}

struct MetaWithInfo<'a>(Option<&'a Map<String, Value>>, &'a Value);

impl Serialize for MetaWithInfo<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.0.into_iter().flatten() {
            if k != META_SERVER_INFO {
                m.serialize_entry(k, v)?;
            }
        }
        m.serialize_entry(META_SERVER_INFO, self.1)?;
        m.end()
    }
}
