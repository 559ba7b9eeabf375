//! The protocol state machine.
//!
//! # Wings
//!
//! The engine is one type, [`Engine`], composed of parts grouped by concern. From the ground
//! up:
//!
//! - `state/`: the ground floor. Owned state with its own rules, none naming `Engine`: the handles
//!   (`ids.rs`) and the boundary's data types (`io.rs`), calls in flight (`calls.rs`), timers, server→client
//!   requests (`outbound.rs`), subscriptions, sessions and their kept streams, the local replay
//!   ledger, the messages a cluster exchanges (`messages.rs`) and the one output queue
//!   (`outputs.rs`).
//! - `mod.rs` (this file): the composition, `Engine`'s fields, its connection table and the
//!   input surface: opening and closing connections, frames, completions, timeouts, shutdown,
//!   [`Engine::poll_output`] and [`Engine::poll_timeout`].
//! - `transport/`: how answers leave. Streamable HTTP sessions and exchanges, resumable
//!   `POST` streams, back-pressure on paced connections, per-caller shares.
//! - `protocol/`: the protocol's methods and what they send: features (lists, reads,
//!   prompts, completion), notifications, asking the client, result encoding, registry edits,
//!   records of answered requests.
//! - `extensions/`: Tasks, MCP Apps, compact publication, Skills, and the policy on replayed
//!   2026-07-28 requests.
//! - `replica/`: what the engine tells its cluster and takes from it: the changes it
//!   publishes (`changes.rs`), the sessions and tasks it holds (`holdings.rs`), and the replay
//!   ledger shared between replicas (`shared_ledger.rs`; the engine's own is
//!   `state/replay_ledger.rs`, and per-caller fair shares are `transport/fair_shares.rs`).
//! - `dispatch.rs`: the envelope rules and the method tables of both protocol eras, which
//!   route each request to the wing that answers it.
//!
//! **The rule:** a file imports (and calls into) only its own wing and the wings below it; the
//! ground floor imports nothing of the engine above it. A new feature gets a room of its own in
//! the wing it belongs to, with its state in `state/` when that state has rules of its own, not
//! more fields and methods spread over `Engine`.
//!
//! **Where the code does not keep it yet** (each a call up, to be moved down rather than
//! copied): `mod.rs` keeps the connection lifecycle (closing a connection cancels its calls,
//! ends its tasks, forgets its holdings and parks its streams), so it calls into every wing;
//! `invoke` and `run_tool`, which `protocol/` and `extensions/` call to admit a call, still
//! live in `dispatch.rs` (they weigh the replay policy and the replica's hold, so they cannot
//! simply move down); `transport/http.rs` dispatches the messages of a `POST` and records
//! what it answered (`protocol/records.rs`);
//! `protocol/` asks `extensions/` about tasks, apps and compact mode where a method's answer
//! depends on them; and `extensions/tasks.rs` reports holdings and settles replay states in
//! `replica/`.
//!
//! # One output surface
//!
//! Everything the engine emits goes into one queue, in the order the engine decided, drained
//! with [`Engine::poll_output`]: frames, responses and streams, invocations, cancellations,
//! answers to asks, closes, and the outputs for a cluster ([`Output::Change`],
//! [`Output::Holding`], [`Output::Claim`], [`Output::Record`]), a task store
//! ([`Output::TaskEnded`]) and a tracer ([`Output::Answered`]). A shim acts on each as it comes,
//! with no ordering rule of its own; each variant documents the inputs that produce it.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use crate::blame::Bound;
use crate::caller::Caller;
use crate::content::HandlerError;
use crate::frame::Decoded;
use crate::jsonrpc::{encode_result, Encoded, RequestId, RpcError};
use crate::registry::Registry;
use crate::slab::{Key, Slab};
use crate::version::ProtocolVersion;

const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

#[cfg(test)]
mod determinism;
mod dispatch;
mod extensions;
mod protocol;
mod replica;
mod state;
#[cfg(test)]
mod status_tests;
#[cfg(test)]
mod test_support;
mod transport;

pub use extensions::tasks::{TaskError, TASKS_EXTENSION};
pub use protocol::ask::Asked;
pub use replica::changes::MAX_PENDING_CHANGES;
pub use replica::holdings::MAX_PENDING_HOLDINGS;
pub use replica::shared_ledger::{CLAIM_MARGIN_MS, MAX_PENDING_CLAIMS, MAX_PENDING_RECORDS};
use state::messages::HeldKind as Held;
pub use state::messages::{
    Change, ChangedList, Claim, ClaimResult, HeldKind, Holding, Record, SharedOutcome,
};

pub use state::ids::{CallId, ConnId};
pub use state::io::{
    Answered, AnsweredRequest, AskError, CancelReason, CloseReason, CompletionRef, ConnKind, EngineStatus,
    FrameOutcome, HttpHead, HttpReply, Invocation, LogLevel, OpenError, Output, Refusals, Reply, Request,
    Stale, TaskRecord, TaskStatus, Ticket,
};
pub use transport::http::HttpRequest;

use protocol::encode::{decode_error, public_error, ToolOutcome};
pub use protocol::features::Introspection;
pub use protocol::notify::ProgressOutcome;
use protocol::records::{Peek, Records};
pub use protocol::registry_mut::RegistryMut;
use state::call_state::Ctx;
use state::calls::{Call, CallKind, Calls, ConnCalls};
pub use state::config::{Config, IdentityTooLarge, Implementation, Mode, Seed, MAX_IDENTITY_BYTES};
use state::outputs::Bounded;
use state::timers::Timer;

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
    filter: state::subscriptions::Filter,
}

struct Conn {
    transport: state::streams::Transport,
    /// Holds a stream seat (see [`Limits::max_streams`](crate::limits::Limits::max_streams)).
    seated: bool,
    caller: Arc<Caller>,
    session: Option<Session>,
    /// Requests awaiting an answer.
    calls: ConnCalls,
    draining: bool,
    listens: Vec<Listen>,
    /// Notifications owed to this connection, coalesced.
    pending: state::subscriptions::Pending,
    /// Its shim reports what its writer takes ([`Engine::pace`]): what is still queued.
    backlog: Option<transport::backlog::Backlog>,
    /// The input (`Engine::inputs`) in which the application's re-check last confirmed
    /// `caller`: it is asked once per input, however many deliveries the input makes.
    rechecked: Option<u64>,
}

/// How one request will be answered.
enum Answer<H> {
    /// The answer (a result or an error, with its blame) is known at once.
    Now(Encoded),
    Later(Invocation<H>),
    /// A handler will answer, once the shared ledger says it may run here: the invocation is
    /// held (see `replica/shared_ledger.rs`).
    Held(CallId),
    /// The request stays open and answers later by itself (a listen stream); what it had to
    /// say at once is already sent.
    Open,
}

/// The MCP server protocol engine. See the crate docs for the run loop.
pub struct Engine<H> {
    config: Config,
    registry: Registry<H>,
    /// The three tools compact mode publishes; `None` in direct mode.
    published: Option<crate::registry::Catalogue<extensions::compact::Published>>,
    conns: Slab<Conn>,
    /// Calls in flight and batches awaiting replies.
    calls: Calls,
    /// Every deadline: call timeouts, session expiry, keep-alives.
    timers: state::timers::Timers,
    /// Everything emitted, in order ([`Engine::poll_output`]).
    out: state::outputs::Outputs<H>,
    /// Draining connections whose last call just finished, closed once its answer is queued.
    pending_close: Vec<ConnId>,
    /// [`Engine::shutdown`] was called: no new work is admitted.
    shutting_down: bool,
    /// `_meta.serverInfo` of modern results, serialised once.
    server_info_modern: Value,
    /// Subscriptions, and whether notifications are owed.
    notes: state::subscriptions::Notifications,
    /// Legacy HTTP sessions by id, and stream seats.
    sessions: state::sessions::Sessions,
    /// While an HTTP request is dispatched: the exchange its replies go to.
    reply_to: Option<ConnId>,
    /// While an HTTP request is dispatched: its exchange, and its response if it completed
    /// before `handle_http` returned (answered without a round trip through the output queue).
    immediate: Option<(ConnId, Option<transport::http::Ready>)>,
    /// Server→client requests awaiting the client's response.
    outbound: state::outbound::Outbound,
    /// The `now` the engine was made with, the origin of [`Config::unix_ms_at_start`].
    started: Instant,
    /// What became of each 2026-07-28 request state already used (see `state/replay_ledger.rs`).
    ledger: state::replay_ledger::Ledger,
    /// The latest `now` an input gave (every input records it, see `input`). Only for work done
    /// where no input is being handled, so it is always the `now` of the input that caused it:
    /// a keep-alive armed by a stream that starts while [`Engine::poll_output`] flushes
    /// notifications, and the end of a session's `GET` stream closed deep inside another
    /// input's teardown.
    clock: Instant,
    /// Progress and log notifications dropped for a full paced stream.
    dropped_notes: u64,
    /// Work turned away, by reason ([`EngineStatus::refusals`]).
    refusals: Refusals,
    /// Requests the engine answered itself, while a shim wants them ([`Engine::set_recording`]).
    records: Records,
    /// Tasks of the Tasks extension, running and ended.
    tasks: state::task_table::Tasks,
    /// Local changes to publish to other replicas ([`Output::Change`](crate::engine::Output::Change)).
    outbox: replica::changes::Outbox,
    /// Retries waiting for the shared ledger, and what to tell it ([`Output::Claim`](crate::engine::Output::Claim)).
    shared: replica::shared_ledger::Shared<H>,
    /// Sessions and running tasks begun or ended, for a cluster's directory
    /// ([`Output::Holding`](crate::engine::Output::Holding)).
    holdings: replica::holdings::Holdings,
    /// Inputs taken so far: what a held stream's re-check said holds for the rest of its input.
    inputs: u64,
}

impl<H: Clone> Engine<H> {
    /// A new engine. `now` is the current time; nothing in the engine reads a clock.
    pub fn new(config: Config, now: Instant) -> Self {
        let server_info_modern = config.server_info.to_json(ProtocolVersion::V2026_07_28);
        let registry = Registry::new(config.mode == Mode::Compact);
        let published = (config.mode == Mode::Compact).then(|| extensions::compact::catalogue(None));
        Self {
            config,
            published,
            registry,
            conns: Slab::default(),
            calls: Calls::default(),
            timers: state::timers::Timers::default(),
            out: state::outputs::Outputs::default(),
            pending_close: Vec::new(),
            shutting_down: false,
            server_info_modern,
            notes: state::subscriptions::Notifications::default(),
            sessions: state::sessions::Sessions::default(),
            reply_to: None,
            immediate: None,
            outbound: state::outbound::Outbound::default(),
            started: now,
            ledger: state::replay_ledger::Ledger::default(),
            clock: now,
            dropped_notes: 0,
            refusals: Refusals::default(),
            records: Records::default(),
            tasks: state::task_table::Tasks::default(),
            outbox: replica::changes::Outbox::default(),
            shared: replica::shared_ledger::Shared::default(),
            holdings: replica::holdings::Holdings::default(),
            inputs: 0,
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
        self.inputs = self.inputs.wrapping_add(1);
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
        if !self.room_for_conns(&caller, 1) {
            self.refusals.capacity += 1;
            return Err(OpenError::TooManyConnections);
        }
        let ConnKind::Stdio = kind;
        Ok(self.insert_conn(state::streams::Transport::Line, Arc::new(caller)))
    }

    fn insert_conn(&mut self, transport: state::streams::Transport, caller: Arc<Caller>) -> ConnId {
        self.notes.conn_opened(caller.binding());
        ConnId(self.conns.insert(Conn {
            transport,
            seated: false,
            caller,
            session: None,
            calls: ConnCalls::default(),
            draining: false,
            listens: Vec::new(),
            pending: state::subscriptions::Pending::default(),
            backlog: None,
            rechecked: None,
        }))
    }

    /// Number of requests of `conn` awaiting an answer.
    pub fn in_flight(&self, conn: ConnId) -> usize {
        self.conns.get(conn.0).map_or(0, |c| c.calls.in_flight())
    }

    /// The JSON-RPC id of the request `call` answers, while it is in flight: for a shim's
    /// logs and traces, looked up only when wanted.
    pub fn request_id(&self, call: CallId) -> Option<&RequestId> {
        self.calls.get(call).map(|c| &c.id)
    }

    /// The session `conn` belongs to: the legacy HTTP session of an exchange or stream, or
    /// the connection itself for a line connection (whose session it is). `None` for a
    /// 2026-07-28 exchange (stateless) and for a connection that is not open. A handle for
    /// logs and traces, not the `Mcp-Session-Id`, which is a credential and never leaves the
    /// engine this way.
    pub fn session_of(&self, conn: ConnId) -> Option<ConnId> {
        let c = self.conns.get(conn.0)?;
        match &c.transport {
            state::streams::Transport::Line => Some(conn),
            state::streams::Transport::Session(_) => Some(conn),
            state::streams::Transport::Standalone { session } => Some(*session),
            state::streams::Transport::Exchange(x) => x.session(),
        }
    }

    /// Closes `conn` on the engine's own initiative (to make room, or to protect itself),
    /// counted in [`EngineStatus::refusals`].
    fn turn_away(&mut self, conn: ConnId, reason: CloseReason) {
        if self.conns.get(conn.0).is_some() {
            self.refusals.closed(reason);
        }
        self.forget(conn, reason);
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
    /// The continuation epoch moves on ([`bump_epoch`](Self::bump_epoch), once, however often
    /// this is called): this server's continuations end with it, and a `requestState` a call
    /// seals while it drains is accepted by no replica still in the old epoch. Replicas sharing
    /// the key ring keep their own epoch (a rolling restart does not end their dialogues);
    /// moving every replica's is the operator's `set_epoch` on each, or the server layer's
    /// cluster-wide move.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn shutdown(&mut self, now: Instant) {
        self.input(now);
        if !self.shutting_down {
            self.bump_epoch(now);
        }
        self.shutting_down = true;
        let keys: Vec<Key> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            let conn = ConnId(key);
            let Some(c) = self.conns.get_mut(key) else { continue };
            match &c.transport {
                // A legacy exchange ends with the reply its session's call owes it.
                state::streams::Transport::Exchange(x) if x.session().is_some() => continue,
                state::streams::Transport::Standalone { .. } => {
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
                self.out.push_back(Output::Cancel { call, reason: CancelReason::Shutdown });
                let answer = RpcError::shutting_down().encode(Some(&c.id));
                self.deliver(c, answer);
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
            dropped_notifications: self.dropped_notes,
            refusals: self.refusals,
            dropped_records: self.out.dropped(Bounded::Answered),
            dropped_changes: self.out.dropped(Bounded::Change),
            dropped_claims: self.out.dropped(Bounded::Claim),
            dropped_shared_records: self.out.dropped(Bounded::Record),
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
    /// A legacy session's `POST` response stream (an SSE response whose calls belong to the
    /// session) is the exception: its calls go on, and the stream waits for the client to
    /// resume it with `Last-Event-ID` for [`Limits::resume_window`](crate::limits::Limits::resume_window)
    /// (the engine still emits [`Output::Close`] for `conn` at once, and nothing more for it).
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn close(&mut self, now: Instant, conn: ConnId) {
        self.input(now);
        if self.park(now, conn) {
            return;
        }
        self.forget(conn, CloseReason::Closed);
    }

    fn forget(&mut self, conn: ConnId, reason: CloseReason) {
        // A stream the client dropped was already closed for the shim when it was parked.
        let told = self.detached(conn);
        let Some(c) = self.drop_conn(conn) else { return };
        // Calls of a legacy session that asked the client through this exchange: they outlive
        // it (the session owns them), but an ask of theirs still waiting may be stranded.
        let asked = match &c.transport {
            state::streams::Transport::Exchange(x) => x.asked(),
            _ => Vec::new(),
        };
        // Requests sent to a client that is gone will never be answered.
        self.outbound.forget_owner(conn);
        let mut orphaned = Vec::new();
        // Cancelled in call order, not in the peer-chosen ids' hash order, so the output depends
        // on the inputs alone.
        for (call, dropped) in self.calls.drop_all(c.calls, &mut self.timers) {
            if let Some(dropped) = dropped {
                self.interrupted(&dropped);
                if dropped.reply_to != conn {
                    orphaned.push(dropped.reply_to);
                }
            }
            self.out.push_back(Output::Cancel { call, reason: CancelReason::Closed });
        }
        // Exchanges waiting for calls that will never answer are ended, not left hanging.
        for ex in orphaned {
            self.unowe(ex);
        }
        if let state::streams::Transport::Session(s) = c.transport {
            if let Some(get) = s.get() {
                self.forget(get, reason);
            }
            // Dropped streams whose calls were not the session's to cancel: none should be left,
            // but none may outlive the session either.
            for ex in s.posts().carriers() {
                self.forget(ex, reason);
            }
            // A session has no transport of its own and its id was never handed to the shim:
            // there is nothing to close.
            return;
        }
        if !told {
            self.out.push_back(Output::Close { conn, reason });
        }
        self.strand_asks(self.clock, conn, asked);
    }

    /// Removes a connection from every index, without a word to the shim.
    fn drop_conn(&mut self, conn: ConnId) -> Option<Conn> {
        let c = self.conns.remove(conn.0)?;
        self.notes.conn_closed(c.caller.binding());
        if c.seated {
            self.sessions.unseat(c.caller.binding(), conn);
        }
        match &c.transport {
            state::streams::Transport::Session(s) => {
                self.sessions.remove(s.id(), c.caller.binding());
                self.report_holding(Held::Session, s.id(), false);
                // Its kept POST streams go with it, and so do their resume timers.
                self.sessions.kept.moved(c.caller.binding(), s.posts().bytes, 0);
                for (stream_no, at) in s.posts().armed() {
                    self.timers.disarm(at, Timer::Resume(conn, stream_no));
                }
            }
            state::streams::Transport::Standalone { session } => {
                let clock = self.clock;
                if let Some(state::streams::Transport::Session(s)) =
                    self.conns.get_mut(session.0).map(|s| &mut s.transport)
                {
                    s.stream_ended(conn, clock);
                }
            }
            state::streams::Transport::Exchange(x) => {
                if let Some(session) = x.session() {
                    self.post_stream_gone(session, x.stream_no(), conn, x.attachment());
                }
            }
            _ => {}
        }
        Some(c)
    }

    /// A line longer than [`Limits::max_frame_bytes`](crate::limits::Limits::max_frame_bytes) arrived on a stream (stdio) that cannot
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
        let err = RpcError::limit(
            Bound::Size,
            format!("frame of {seen} bytes or more exceeds the {max}-byte limit"),
        );
        self.emit(conn, err.encode(None));
        self.refusals.size += 1;
        self.turn_away(conn, CloseReason::FrameTooLarge);
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
                let answer = decode_error(e).encode(None);
                self.record_now(conn, Peek::unknown, &answer);
                self.emit(conn, answer);
                return FrameOutcome::Reply;
            }
            None => {
                let err = self.frame_over_limit(decoded.len);
                self.refusals.size += 1;
                let answer = err.encode(None);
                self.record_now(conn, Peek::unknown, &answer);
                self.emit(conn, answer);
                return FrameOutcome::Reply;
            }
        };
        self.dispatch(now, conn, frame)
    }

    /// The refusal of a decoded frame of `len` bytes that went past the frame limit unparsed:
    /// one wording for stdio and HTTP, which both answer it.
    pub(in crate::engine) fn frame_over_limit(&self, len: usize) -> RpcError {
        let max = self.config.limits.max_frame_bytes;
        RpcError::limit(Bound::Size, format!("frame of {len} bytes exceeds the {max}-byte limit"))
    }

    fn flush_batch(&mut self, batch: Key) {
        if let Some((to, bytes)) = self.calls.flush(batch) {
            self.send(to, bytes, true);
        }
    }

    /// Ends a call without an answer (the peer cancelled it, or the stream it waits on for
    /// the client's answers is gone).
    fn cancel(&mut self, _now: Instant, call: CallId, reason: CancelReason) {
        if let Some(c) = self.finish_call(call) {
            if let Some(serial) = c.task {
                self.task_interrupted(serial);
                self.out.push_back(Output::Cancel { call, reason });
                self.close_drained();
                return;
            }
            self.interrupted(&c);
            match c.batch() {
                Some((b, _)) => {
                    self.calls.settle(b, None);
                    self.flush_batch(b);
                }
                None => self.unowe(c.reply_to),
            }
            self.out.push_back(Output::Cancel { call, reason });
            self.close_drained();
        }
    }

    /// Removes a call from every index and releases its in-flight slot.
    fn finish_call(&mut self, call: CallId) -> Option<Call> {
        let c = self.calls.finish(call, &mut self.timers)?;
        if c.claiming {
            self.unhold(call, c.used);
        }
        self.forget_asks(&c, call);
        // A task's request was answered when it became one, and released then.
        if let Some(conn) = self.conns.get_mut(c.conn.0).filter(|_| c.task.is_none()) {
            conn.calls.release(&c.id);
            if conn.draining && conn.calls.in_flight() == 0 {
                // The caller queues this call's answer first; `close_drained` then closes.
                self.pending_close.push(c.conn);
            }
        }
        Some(c)
    }

    /// Answers the call of `ticket` with `reply`.
    ///
    /// Returns what the peer was sent ([`Answered`]: a result, or the error code the handler
    /// or the engine chose), or [`Stale`] when the call is no longer in flight (cancelled, timed
    /// out, or its connection closed); that is a normal race and nothing is sent. Follow with
    /// [`poll_output`](Self::poll_output).
    pub fn complete(&mut self, now: Instant, ticket: Ticket, reply: Reply) -> Result<Answered, Stale> {
        self.input(now);
        let call = self.finish_call(ticket.settle()).ok_or(Stale)?;
        // A task whose handler gave up (it was told to stop, or chose to) is cancelled, not
        // failed: nothing went wrong that an error could describe.
        if let (Some(serial), Reply::Tool(Err(HandlerError::Cancelled))) = (call.task, &reply) {
            self.task_interrupted(serial);
            self.close_drained();
            return Ok(Answered { error: None });
        }
        // An ask a legacy client could not take, passed on by the handler with `?`: the tool
        // call fails as one this client cannot go on with (seed 000's `confirmation_required`),
        // which the model and the user read; before 2026-07-28 there is no -32021 to send.
        // On 2026-07-28 the -32021 stays: SEP-2575 says the server MUST return it.
        let legacy_tool = matches!(call.kind, CallKind::Tool(..)) && !call.version.is_modern();
        let reply = match reply {
            Reply::Tool(Err(HandlerError::Public(e))) if legacy_tool => {
                match crate::interaction::Unsupported::of_error(&e) {
                    Some(u) => Reply::Tool(Err(u.tool_failure().into())),
                    None => Reply::Tool(Err(HandlerError::Public(e))),
                }
            }
            other => other,
        };
        let answer = match (reply, &call.kind) {
            (Reply::Tool(Ok(out)), CallKind::Tool(..)) => self.tool_result(&call, ToolOutcome::Output(out)),
            (Reply::Tool(Err(HandlerError::Failure(f))), CallKind::Tool(..)) => {
                self.tool_result(&call, ToolOutcome::Failure(*f))
            }
            (Reply::Resource(Ok(contents)), CallKind::Resource(uri, hint, template)) => {
                self.read_result(&call, uri, *hint, template.as_deref(), contents)
            }
            (Reply::Prompt(Ok(out)), CallKind::Prompt) => self.prompt_result(&call, &out).into(),
            (Reply::Completion(Ok(c)), CallKind::Complete) => self.completion_result(&call, c).into(),
            (Reply::Task(Ok(record)), CallKind::TaskLookup(id, owner)) => {
                self.looked_up_task(&call.id, id, owner, record)
            }
            (
                Reply::Tool(Err(e))
                | Reply::Resource(Err(e))
                | Reply::Prompt(Err(e))
                | Reply::Completion(Err(e))
                | Reply::Task(Err(e)),
                _,
            ) => public_error(e).encode(Some(&call.id)),
            // A reply of the wrong kind is the shim's bug; the peer learns only that it failed.
            _ => RpcError::misuse().encode(Some(&call.id)),
        };
        // Tool results are bounded in `tool_result`; any other answer over the ceiling is the
        // application's, and becomes the generic internal error.
        let answer = if answer.bytes.len() > self.config.limits.max_response_bytes {
            RpcError::internal().encode(Some(&call.id))
        } else {
            answer
        };
        let answered = Answered { error: answer.fault.map(|(_, code)| code) };
        self.deliver(call, answer);
        Ok(answered)
    }

    fn deliver(&mut self, call: Call, answer: Encoded) {
        if let Some(serial) = call.task {
            self.task_settled(serial, &answer);
            self.close_drained();
            return;
        }
        if let Some(used) = call.used {
            let now_ms = self.unix_ms(self.clock);
            self.settle_state(now_ms, used, &call.id, Some(&answer), call.claiming);
        }
        match call.batch() {
            Some((b, slot)) => {
                // Batches exist only on legacy sessions, whose answers (an array) are all 200.
                self.calls.settle(b, Some((slot, answer.bytes)));
                self.flush_batch(b);
            }
            None => self.send(call.reply_to, answer, true),
        }
        self.close_drained();
    }

    /// `call` ended without an answer: a copy of the retry it was must not run it again.
    fn interrupted(&mut self, call: &Call) {
        if let Some(used) = call.used {
            let now_ms = self.unix_ms(self.clock);
            self.settle_state(now_ms, used, &call.id, None, call.claiming);
        }
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
                Timer::Stall(conn) => self.stall_check(now, conn),
                Timer::Ask(call) => self.ask_expired(now, call),
                Timer::Session(conn) => self.session_timer(now, conn),
                Timer::KeepAlive(conn) => self.keepalive(now, conn),
                Timer::Resume(session, stream_no) => self.resume_timer(now, session, stream_no),
                Timer::Task(serial) => self.task_expired(now, serial),
            }
        }
    }

    /// `call` ran past [`Limits::call_timeout`](crate::limits::Limits::call_timeout): stop it and answer that it timed out.
    fn call_timeout(&mut self, call: CallId) {
        if let Some(c) = self.finish_call(call) {
            self.refusals.timed_out += 1;
            self.out.push_back(Output::Cancel { call, reason: CancelReason::TimedOut });
            // The handler did not answer in time: the application's doing, not the client's.
            let err = RpcError::new(crate::jsonrpc::ErrorCode::InternalError, "request timed out");
            let answer = err.encode(Some(&c.id));
            self.deliver(c, answer);
        }
    }
}
