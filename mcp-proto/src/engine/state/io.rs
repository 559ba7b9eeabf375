//! What crosses the engine's boundary: the inputs a shim hands it ([`Reply`], [`Ticket`],
//! [`ConnKind`]) and the outputs it drains ([`Output`], [`Invocation`], [`Request`]), with the
//! outcomes of each call.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

// For the intra-doc links to the engine's methods.
use crate::blame::{Blame, Bound};
use crate::caller::Caller;
use crate::content::{Completion, HandlerError, PromptOutput, ResourceContents, ToolOutput};
use crate::engine::state::ids::{CallId, ConnId};
use crate::engine::state::messages::{Change, Claim, HeldKind, Holding, Record};
#[cfg(doc)]
use crate::engine::Engine;
use crate::interaction::{InvalidAnswer, Unsupported};
use crate::jsonrpc::{ErrorCode, RpcError};
use crate::version::ProtocolVersion;

/// The right to answer one call, consumed by [`Engine::complete`] so a call cannot be answered
/// twice.
///
/// Pass every ticket to [`Engine::complete`], even after [`Output::Cancel`] (it is then
/// [`Stale`]), or give it up with [`abandon`](Self::abandon). Dropping the ticket of a call that
/// is still in flight leaks the call: it holds an in-flight slot until its connection closes or
/// [`Limits::call_timeout`](crate::limits::Limits::call_timeout) fires.
///
/// Debug builds warn on such a drop (a drop warner, as quinn's `IncomingImproperDropWarner`).
/// The warning is an `eprintln!`, not a panic: a ticket lives inside a handler's future, and an
/// executor tearing down its tasks drops them from wherever it is (a panic there aborts the
/// process or is swallowed by the executor), and the engine has no logging dependency. It fires
/// only for calls still in flight, so tickets of cancelled or timed-out calls drop silently.
#[must_use = "a call stays in flight until its ticket is passed to Engine::complete"]
#[derive(Debug)]
pub struct Ticket {
    pub(in crate::engine) call: CallId,
    #[cfg(debug_assertions)]
    pub(in crate::engine) live: Arc<std::sync::atomic::AtomicBool>,
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
    pub(in crate::engine) fn settle(self) -> CallId {
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
pub(in crate::engine) struct Live(pub(in crate::engine) Arc<std::sync::atomic::AtomicBool>);

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
    /// [`Limits::max_connections`](crate::limits::Limits::max_connections) connections are already open.
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
    /// A frame over [`Limits::max_frame_bytes`](crate::limits::Limits::max_frame_bytes) arrived on a stream that cannot resynchronise.
    FrameTooLarge,
    /// The server is shutting down ([`Engine::shutdown`]) and the connection's calls are done.
    Shutdown,
    /// A legacy HTTP session went idle past [`Limits::session_idle`](crate::limits::Limits::session_idle), or never finished its
    /// handshake within [`Limits::session_handshake`](crate::limits::Limits::session_handshake).
    Expired,
    /// The client ended its legacy HTTP session with `DELETE`.
    Deleted,
    /// The caller opened a stream past its seat cap under [`crate::limits::SeatPolicy::EvictOldest`]:
    /// this, its oldest stream, made room.
    Evicted,
    /// The server-wide gate no longer admits the stream's caller (checked at every keep-alive),
    /// or the application's re-check
    /// ([`RegistryMut::set_recheck`](crate::engine::RegistryMut::set_recheck)) said, before a
    /// delivery, that the caller is gone or is someone else.
    Revoked,
    /// A newer `GET` stream of the same legacy session took this one's place.
    Replaced,
    /// A full table (sessions, connections, held streams) made room for a caller below its
    /// fair share by displacing this entry of a caller above its share, or a caller at its
    /// bound replaced its own unfinished handshake (see the per-caller shares of
    /// [`Limits`](crate::limits::Limits)).
    Displaced,
    /// A paced stream ([`Engine::pace`]) sat with a full queue and its reader took nothing for
    /// [`Limits::stall_timeout`](crate::limits::Limits::stall_timeout).
    Stalled,
}

/// Why a call ended before its handler answered ([`Output::Cancel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelReason {
    /// The peer cancelled it (`notifications/cancelled`); nothing answers it.
    Peer,
    /// It ran past [`Limits::call_timeout`](crate::limits::Limits::call_timeout) and was answered
    /// `-32603` "request timed out".
    TimedOut,
    /// Its connection closed (any [`CloseReason`]), or the stream it was waiting on for the
    /// client's answers did.
    Closed,
    /// The engine answered it with an error on the handler's behalf: an ask it could not make
    /// ([`Engine::ask`]: a missing client capability, an answer that does not fit, the round
    /// limit).
    Refused,
    /// A shutdown's budget ran out ([`Engine::close_all`]): answered "server is shutting down".
    Shutdown,
    /// The engine answered it on the handler's behalf: a 2026-07-28 call that asked the client
    /// for input was answered `input_required`, and the client's retry runs the handler again.
    Suspended,
    /// It ran as a task of a caller above its fair share of the task table, and was cancelled
    /// to make room for the task of a caller below its share
    /// ([`Limits::max_tasks`](crate::limits::Limits::max_tasks)); the task ended `cancelled`.
    Displaced,
}

impl CancelReason {
    /// A short stable name for logs and metrics: `cancelled`, `timed_out`, `closed`,
    /// `refused`, `shutdown`, `suspended` or `displaced`.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::Peer => "cancelled",
            CancelReason::TimedOut => "timed_out",
            CancelReason::Closed => "closed",
            CancelReason::Shutdown => "shutdown",
            CancelReason::Suspended => "suspended",
            CancelReason::Refused => "refused",
            CancelReason::Displaced => "displaced",
        }
    }
}

/// How [`Engine::complete`] answered a call: what the peer was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Answered {
    /// The JSON-RPC error the answer carries, or `None` for a result (a tool result with
    /// `isError: true` is a result). Set also when the engine replaced the handler's answer
    /// (a reply of the wrong kind, a result over
    /// [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes), an output that breaks
    /// the tool's schema).
    pub error: Option<ErrorCode>,
}

/// Work the engine turned away since it started, by reason. Each counter only grows (a
/// Prometheus counter); the engine counts with plain integer additions, nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Refusals {
    /// Connections, sessions and requests refused because a server-wide table was full
    /// ([`Bound::Capacity`](crate::blame::Bound::Capacity)):
    /// [`Limits::max_connections`](crate::limits::Limits::max_connections), the session table, twice
    /// [`Limits::max_calls`](crate::limits::Limits::max_calls).
    pub capacity: u64,
    /// Requests, sessions and streams refused because their caller or connection was at its
    /// share ([`Bound::Share`](crate::blame::Bound::Share)): requests in flight on a connection, the
    /// caller's fair share of `max_calls`, sessions or held streams per caller, listen
    /// streams, subscriptions, input rounds of one call.
    pub share: u64,
    /// Frames, bodies and parts of messages over their size bound
    /// ([`Bound::Size`](crate::blame::Bound::Size)), answered with an error (a stdio frame that also
    /// closed its connection is counted here and in `frame_too_large`).
    pub size: u64,
    /// Requests refused because the server is shutting down.
    pub shutting_down: u64,
    /// Calls that ran past [`Limits::call_timeout`](crate::limits::Limits::call_timeout).
    pub timed_out: u64,
    /// Entries closed to make room for a caller below its fair share
    /// ([`CloseReason::Displaced`]), and running tasks cancelled for one
    /// ([`CancelReason::Displaced`]).
    pub displaced: u64,
    /// Streams closed to make room for a newer one of the same caller
    /// ([`CloseReason::Evicted`]).
    pub evicted: u64,
    /// Paced streams cut because their reader stalled ([`CloseReason::Stalled`]).
    pub stalled: u64,
    /// Legacy sessions expired idle or with an unfinished handshake ([`CloseReason::Expired`]).
    pub expired: u64,
    /// Streams closed because the gate no longer admits their caller, or the re-check no longer
    /// finds it ([`CloseReason::Revoked`]).
    pub revoked: u64,
    /// Streams replaced by a newer `GET` stream of their session ([`CloseReason::Replaced`]).
    pub replaced: u64,
    /// Stdio connections closed for a frame over
    /// [`Limits::max_frame_bytes`](crate::limits::Limits::max_frame_bytes) ([`CloseReason::FrameTooLarge`]).
    pub frame_too_large: u64,
}

impl Refusals {
    /// Every counter with a stable snake_case name, for a metrics exporter.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("capacity", self.capacity),
            ("share", self.share),
            ("size", self.size),
            ("shutting_down", self.shutting_down),
            ("timed_out", self.timed_out),
            ("displaced", self.displaced),
            ("evicted", self.evicted),
            ("stalled", self.stalled),
            ("expired", self.expired),
            ("revoked", self.revoked),
            ("replaced", self.replaced),
            ("frame_too_large", self.frame_too_large),
        ]
        .into_iter()
    }

    /// Counts an error answer or refusal by its blame: bounds and shutdown count, the rest
    /// (the peer's mistakes, the application's errors) are not refusals.
    pub(in crate::engine) fn blamed(&mut self, blame: Blame) {
        match blame {
            Blame::Limit(Bound::Capacity) => self.capacity += 1,
            Blame::Limit(Bound::Share) => self.share += 1,
            Blame::Limit(Bound::Size) => self.size += 1,
            Blame::ShuttingDown => self.shutting_down += 1,
            _ => {}
        }
    }

    /// Counts a connection the engine closed on its own initiative.
    pub(in crate::engine) fn closed(&mut self, reason: CloseReason) {
        match reason {
            CloseReason::Displaced => self.displaced += 1,
            CloseReason::Evicted => self.evicted += 1,
            CloseReason::Stalled => self.stalled += 1,
            CloseReason::Expired => self.expired += 1,
            CloseReason::Revoked => self.revoked += 1,
            CloseReason::Replaced => self.replaced += 1,
            CloseReason::FrameTooLarge => self.frame_too_large += 1,
            CloseReason::EndOfInput | CloseReason::Closed | CloseReason::Shutdown | CloseReason::Deleted => {}
        }
    }
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
    /// What a task store holds for a [`Request::GetTask`]: the record, or `None` when it holds
    /// none for that caller. A record of another caller, of another id, or past its TTL is
    /// answered as none.
    Task(Result<Option<TaskRecord>, HandlerError>),
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
    /// `tasks/get` of a task this engine does not hold: look it up in the task store the
    /// application keeps beyond the engine (see [`RegistryMut::set_task_lookup`]), for the
    /// [`Invocation::caller`], and answer [`Reply::Task`].
    ///
    /// [`RegistryMut::set_task_lookup`]: crate::engine::RegistryMut::set_task_lookup
    GetTask {
        /// The id asked for.
        task_id: String,
    },
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
        /// The template's variables, in template order, percent-decoded with their raw forms.
        variables: Vec<crate::TemplateVar>,
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

impl Request {
    /// The JSON-RPC method that made this request, and what it names (the tool, the URI, the
    /// prompt, the argument completed, the task): for logs and traces, so that no layer above
    /// the engine spells method names itself.
    ///
    /// ```
    /// let r = mcp_proto::Request::GetTask { task_id: "t1".into() };
    /// assert_eq!(r.method(), ("tasks/get", "t1"));
    /// ```
    pub fn method(&self) -> (&'static str, &str) {
        match self {
            Request::CallTool { name, .. } => ("tools/call", name),
            Request::ReadResource { uri, .. } => ("resources/read", uri),
            Request::GetPrompt { name, .. } => ("prompts/get", name),
            Request::Complete { argument, .. } => ("completion/complete", argument),
            Request::GetTask { task_id } => ("tasks/get", task_id),
        }
    }
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
    /// The extensions the client declared (`capabilities.extensions`: in `initialize` on a
    /// legacy session, in this request's `_meta` on 2026-07-28), by id, settings as sent;
    /// empty when it declared none (or sent something other than an object).
    pub client_extensions: Map<String, Value>,
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
        /// Why it ended without its handler's answer.
        reason: CancelReason,
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
    /// A change to publish to the other replicas, while
    /// [`Engine::set_publishing`] is on: a list changed or a resource was updated here
    /// ([`RegistryMut`](crate::engine::RegistryMut) edits,
    /// [`Engine::notify_resource_updated`]). Never for a change another replica published
    /// ([`Engine::apply_remote_change`]), and never twice while one waits. At most
    /// [`MAX_PENDING_CHANGES`](crate::engine::MAX_PENDING_CHANGES) wait.
    Change(Change),
    /// This engine began or stopped holding a legacy session or a running task, while
    /// [`Engine::set_reporting_holdings`] is on: an `initialize` that made a session, a session
    /// that ended, a task started by a `tools/call` and one forgotten. For the cluster's
    /// directory (see `replica/holdings.rs`). At most
    /// [`MAX_PENDING_HOLDINGS`](crate::engine::MAX_PENDING_HOLDINGS) wait.
    Holding(Holding),
    /// A retry to claim in the shared replay ledger before its handler runs, while
    /// [`Engine::set_shared_ledger`] is on: a 2026-07-28 request whose `requestState` the local
    /// ledger has not seen. Answer with [`Engine::claim_result`]. At most
    /// [`MAX_PENDING_CLAIMS`](crate::engine::MAX_PENDING_CLAIMS) wait.
    Claim(Claim),
    /// What the shared replay ledger should keep for a state, while
    /// [`Engine::set_shared_ledger`] is on: a claimed call ended here (its answer, or that it
    /// had none). At most [`MAX_PENDING_RECORDS`](crate::engine::MAX_PENDING_RECORDS) wait.
    Record(Record),
    /// A task ended (completed, failed, cancelled; see [`Engine::complete`] and `tasks/cancel`):
    /// its record, for a store that keeps tasks beyond this engine. Its `task` serializes to at
    /// most [`Limits::max_task_result_bytes`](crate::limits::Limits::max_task_result_bytes)
    /// bytes. At most 1024 wait, holding at most
    /// [`Limits::max_ended_task_bytes`](crate::limits::Limits::max_ended_task_bytes) together:
    /// past either the oldest waiting is dropped.
    TaskEnded(TaskRecord),
    /// A request the engine answered itself, while [`Engine::set_recording`] is on (a list, a
    /// refusal, a replay: anything no handler served). At most
    /// [`AnsweredRequest::QUEUE_CAP`] wait, the oldest dropped past that.
    Answered(AnsweredRequest),
}

/// A request the engine answered itself, with no handler: `initialize`, `ping`, the lists,
/// `logging/setLevel`, subscriptions, and every request it answered with an error at once
/// (unknown method, invalid params, refused for a bound or a shutdown, a frame that did not
/// parse). Kept only while [`Engine::set_recording`] is on, and drained with
/// [`Output::Answered`](crate::engine::Output::Answered), so a shim can trace these requests as it traces the ones its
/// handlers serve. Notifications and responses are not requests and are never recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnsweredRequest {
    /// The connection the request arrived on: a line connection, a legacy HTTP session, or a
    /// 2026-07-28 exchange (already closed by the time the record is drained). `None` for an
    /// HTTP request refused before it became an exchange (a full connection table, an unknown
    /// session, a header mismatch, a body that did not parse).
    pub conn: Option<ConnId>,
    /// The session `conn` belongs to, as [`Engine::session_of`] said while it was open.
    pub session: Option<ConnId>,
    /// Who asked.
    pub caller: Arc<Caller>,
    /// The JSON-RPC method, when it is one the engine knows; otherwise `"unknown"` (also when
    /// no method could be read). Never the peer's own text, so a record stays small whatever
    /// was sent.
    pub method: &'static str,
    /// What the request names, where its method names something (`tools/call` and
    /// `prompts/get`: `name`; `resources/read`, `resources/subscribe` and
    /// `resources/unsubscribe`: `uri`), when it is a string of at most
    /// [`NAME_BYTES`](Self::NAME_BYTES) bytes.
    pub name: Option<String>,
    /// The JSON-RPC id, when the request had a valid one within
    /// [`Limits::max_id_bytes`](crate::limits::Limits::max_id_bytes).
    pub id: Option<crate::jsonrpc::RequestId>,
    /// The JSON-RPC error code of the answer, or `None` for a result.
    pub error_code: Option<i64>,
}

impl AnsweredRequest {
    /// Records kept before the oldest is dropped (and counted in
    /// [`EngineStatus::dropped_records`]): 1024. A shim that drains after every input never
    /// gets near it; it bounds what a shim that stops draining can cost.
    pub const QUEUE_CAP: usize = 1024;
    /// The longest [`name`](Self::name) kept, in bytes: 256. A longer one is left out rather
    /// than cut, so a record never echoes an unbounded string.
    pub const NAME_BYTES: usize = 256;
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
    /// Progress and log notifications dropped since the engine started because the paced
    /// stream they were for had a full queue ([`Limits::stream_queue`](crate::limits::Limits::stream_queue)).
    pub dropped_notifications: u64,
    /// Work turned away since the engine started, by reason.
    pub refusals: Refusals,
    /// [`AnsweredRequest`] records dropped because
    /// [`AnsweredRequest::QUEUE_CAP`] were already waiting to be drained.
    pub dropped_records: u64,
    /// Local changes not queued for publishing because
    /// [`MAX_PENDING_CHANGES`](crate::engine::MAX_PENDING_CHANGES) were already waiting
    /// ([`Output::Change`](crate::engine::Output::Change)).
    pub dropped_changes: u64,
    /// Retries run here without asking the shared ledger because
    /// [`MAX_PENDING_CLAIMS`](crate::engine::MAX_PENDING_CLAIMS) claims were already waiting
    /// ([`Output::Claim`](crate::engine::Output::Claim)).
    pub dropped_claims: u64,
    /// Records for the shared ledger not queued because
    /// [`MAX_PENDING_RECORDS`](crate::engine::MAX_PENDING_RECORDS) were already waiting
    /// ([`Output::Record`](crate::engine::Output::Record)).
    pub dropped_shared_records: u64,
}

/// An answer for a call that is no longer in flight (cancelled, timed out, or its connection
/// closed): a normal race, safe to ignore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale;

/// A syslog severity, as MCP's `LoggingLevel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warning`
    Warning,
    /// `error`
    Error,
    /// `critical`
    Critical,
    /// `alert`
    Alert,
    /// `emergency`
    Emergency,
}

impl LogLevel {
    const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    pub(crate) fn from_json(v: &Value) -> Option<Self> {
        let s = v.as_str()?;
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

/// Why an ask got no answers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AskError {
    /// The client did not declare what the request needs (or its version cannot express it);
    /// nothing was sent.
    Unsupported(Unsupported),
    /// The client answered with a JSON-RPC error.
    Rejected(RpcError),
    /// The client's answer does not fit the request (wrong shape, a value outside the form).
    Invalid(InvalidAnswer),
    /// The call already asked [`Limits::max_input_rounds`](crate::limits::Limits::max_input_rounds)
    /// times (`interaction_limit`).
    TooManyRounds,
    /// Nothing can reach the client: its stream is gone, or it accepts only JSON answers.
    Unreachable,
    /// The call is already waiting for answers; ask again once they arrive.
    Busy,
    /// The call is not in flight (answered, cancelled or timed out).
    Stale,
    /// 2026-07-28: the call was answered with `input_required`; the client will retry it and the
    /// handler runs again. The handler is being cancelled and should just return.
    Suspended,
    /// The client did not answer within [`Limits::ask_timeout`](crate::limits::Limits::ask_timeout);
    /// the engine told it the requests are cancelled. The call is still in flight: the handler
    /// decides what it answers.
    TimedOut,
    /// What the client would be sent for this ask (a legacy request frame, or a 2026-07-28
    /// `input_required` result) encodes to `size` bytes, over the
    /// [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes) ceiling `limit`:
    /// nothing was sent, and the call is still in flight, for the handler to answer.
    TooLarge {
        /// The encoded size of the largest frame, in bytes.
        size: usize,
        /// The ceiling it crossed, in bytes.
        limit: usize,
    },
    /// The handler's request cannot be sent at all (a typed elicitation whose type is no flat
    /// form, the offending property named): the handler's bug, found before anything was sent
    /// on either protocol era, so no round is spent on it.
    InvalidRequest(crate::interaction::InteractionError),
    /// The client's answer fits the form but not the handler's type (a custom `Deserialize`,
    /// a number outside the type's range): the form says less than the type, and the client
    /// could not know. The text says what `serde` refused, peer values clipped.
    Undecodable(String),
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskError::Unsupported(u) => write!(f, "the client cannot be asked this: {u}"),
            AskError::Rejected(e) => write!(f, "the client refused: {}", e.message),
            AskError::Invalid(e) => write!(f, "the client's answer is invalid: {e}"),
            AskError::TooManyRounds => f.write_str("interaction_limit: too many rounds of input"),
            AskError::Unreachable => f.write_str("the client cannot be reached for input"),
            AskError::Busy => f.write_str("the call is already waiting for input"),
            AskError::Stale => f.write_str("the call is no longer in flight"),
            AskError::Suspended => f.write_str("the call returned input_required and will be retried"),
            AskError::TimedOut => f.write_str("the client did not answer in time"),
            AskError::TooLarge { size, limit } => {
                write!(f, "the request for input of {size} bytes exceeds the {limit}-byte response limit")
            }
            AskError::InvalidRequest(e) => write!(f, "the request for input cannot be sent: {e}"),
            AskError::Undecodable(m) => write!(f, "the client's answer does not fit the expected type: {m}"),
        }
    }
}

/// The status line and headers of a response the engine decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpHead {
    /// The status code.
    pub status: u16,
    /// Headers to send, `Content-Type` included when there is a body.
    pub headers: Vec<(&'static str, String)>,
    /// What this answer made the engine hold: the legacy session its `initialize` minted, the
    /// task its `tools/call` started. Not sent: a cluster registers them in its directory
    /// before the answer leaves, so that the client's next request for them is routed here
    /// from any replica (see [`Output::Holding`]). Empty for most answers.
    pub holds: Vec<(HeldKind, String)>,
}

impl HttpHead {
    /// A head with `status` and `headers`, holding nothing.
    pub fn new(status: u16, headers: Vec<(&'static str, String)>) -> Self {
        Self { status, headers, holds: Vec::new() }
    }
}

/// What to answer an [`HttpRequest`](crate::engine::HttpRequest) with.
#[derive(Debug)]
pub enum HttpReply {
    /// The whole response, now.
    Full {
        /// Status and headers.
        head: HttpHead,
        /// The body (possibly empty).
        body: Vec<u8>,
    },
    /// The response comes later through [`Engine::poll_output`] for this connection: an
    /// [`Output::Respond`], or an [`Output::Stream`] then [`Output::Frame`]s and an
    /// [`Output::Close`]. If the client goes away first, call [`Engine::close`] with it.
    Pending(ConnId),
}

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskStatus {
    /// Its handler is running.
    Working,
    /// Its handler waits for the client's answers (`tasks/update`).
    InputRequired,
    /// Its handler answered: a result, possibly a tool error (`isError`).
    Completed,
    /// It ended with a protocol error (the handler's error, a panic, a timeout).
    Failed,
    /// The client cancelled it.
    Cancelled,
}

impl TaskStatus {
    /// The status as the wire spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the task has ended (completed, failed or cancelled).
    pub fn is_terminal(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled)
    }
}

/// An ended task, for a store that keeps tasks beyond this engine ([`Output::TaskEnded`](crate::engine::Output::TaskEnded)).
///
/// The engine hands over only records whose `task` serializes (as JSON) to at most
/// [`Limits::max_task_result_bytes`](crate::limits::Limits::max_task_result_bytes) bytes, so a store
/// may bound what it keeps by that; the `task_id` (43 bytes) and the `owner` (the caller's
/// identity or peer address) come on top.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// The task id.
    pub task_id: String,
    /// The binding ([`Caller::binding`](crate::caller::Caller::binding)) of the caller it belongs to:
    /// a store must answer it to that caller only.
    pub owner: String,
    /// The task as `tasks/get` shows it, without `resultType` and `_meta` (`taskId`, `status`,
    /// the times, `ttlMs`, and `result` or `error`).
    pub task: Map<String, Value>,
    /// When it ended, in Unix milliseconds (the engine's clock).
    pub ended_unix_ms: u64,
    /// How long after that it may be shown, in milliseconds (`ttlMs`).
    pub ttl_ms: u64,
}
