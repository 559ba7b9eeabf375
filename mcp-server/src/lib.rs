//! The runtime-independent server layer both shims share.
//!
//! The [`Engine`] decides; this layer does what it asks, for any async runtime that implements
//! [`Runtime`]. Its shape is quinn's: one **driver** task owns the engine's hot path and is fed
//! through channels. A connection's task decodes each frame itself ([`Decoded::new`], the strict
//! parse with every check) and queues it for the driver, so a huge or hostile frame costs its
//! sender only; the driver takes a bounded batch of commands per wake (handler completions
//! before new frames), drains the engine's output after each (frames to per-connection bounded
//! queues, cancellations to abort handles) and sleeps until the next command or the engine's
//! next deadline. When nothing is queued and the engine is free this instant, the task that
//! brings a command runs it at once instead (never waiting for the engine: it takes it only if
//! no one holds it), which spares a quiet server the hop to the driver. Every handler runs as
//! its own task, started there, so not even its synchronous
//! part runs on the driver or a connection; panics become the generic internal error. The
//! synchronous operator calls (registry edits, status, a handler's progress and logs) lock the
//! engine briefly, as quinn's handles do. `mcp-tokio` and `mcp-smol` only supply the runtime and
//! the byte streams (stdio, TCP sockets), so the two read as mirror images and behave identically.
//!
//! # Tracing and status
//!
//! This layer reports through `tracing` (the engine itself does not log; it says how each call
//! ended through its outputs). Targets:
//!
//! - `mcp::request`: an `INFO` span `request` per request, over stdio and HTTP. Fields: `method`;
//!   `name` (the tool, URI, prompt or completed argument); `id` (the JSON-RPC id); `caller`
//!   (identity, else peer address, else `anonymous`); `session` (a handle of the stdio
//!   connection or legacy HTTP session, never the `Mcp-Session-Id`); then at the end `outcome`
//!   (`ok`, `error` with `error_code`, or why it ended unanswered: a
//!   [`CancelReason`](mcp_proto::CancelReason) name such as `cancelled`, `timed_out`, `closed`,
//!   `shutdown`) and `duration_us`. A request a handler serves (`tools/call`, `resources/read`,
//!   `prompts/get`, `completion/complete`) has its span entered while the handler runs, so the
//!   handler's own events nest under it. A request the engine answers itself (`initialize`,
//!   `ping`, the lists, `logging/setLevel`, subscriptions, and every error answered at once: an
//!   unknown method, invalid params, a refusal for a bound or a shutdown, an HTTP request refused
//!   before it reached a session) gets its span as it is answered, with the same fields; its
//!   `duration_us` is the engine's work on the input that carried it, and a method the engine
//!   does not know is `method = "unknown"`, never the peer's text. Notifications have none. The
//!   engine keeps [`AnsweredRequest`](mcp_proto::AnsweredRequest) records for these spans only
//!   while some subscriber wants this target (re-checked each time the engine is worked, so a
//!   subscriber or filter set later takes effect at once); otherwise it keeps nothing.
//! - `mcp::session`: an `INFO` span `session` per stdio (line) session, from open to close, the
//!   parent of its requests' spans. Fields: `session`, `caller`, `transport`, then
//!   `close_reason` (a [`CloseReason`], or the [`OpenError`] of a refused connection) and
//!   `duration_us`. HTTP legacy sessions have none yet (their requests carry `session`).
//! - `mcp_server` (`ERROR` events): a handler's panic or private failure, a missing random seed.
//! - `mcp_server::http`, `mcp_server::handler`: HTTP connection limits (`DEBUG`), accept
//!   failures (`WARN`), response headers HTTP cannot carry and blocking-thread failures
//!   (`ERROR`).
//!
//! When no subscriber wants these spans, a request costs the callsites' interest checks: no
//! field is formatted, nothing is allocated or kept. [`Server::status`] is the metrics view: a
//! [`Status`] snapshot of gauges (connections, handlers, calls in flight, queued work) and
//! counters of refusals by reason: the engine's ([`Refusals`]) and the HTTP layer's, made before
//! the engine sees a request ([`HttpRefusals`]: connection bounds, head and body bounds and
//! timeouts), listed as name/value pairs by [`Status::metrics`].

mod apps;
pub mod cluster;
#[cfg(feature = "redis")]
mod cluster_redis;
mod epoch;
#[cfg(feature = "http")]
mod forward;
mod handler;
#[cfg(feature = "http")]
mod http;
mod skills;
mod stdio;
mod tasks;
mod trace;
pub mod widget;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::future::{AbortHandle, Abortable, Either};
use futures_util::FutureExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use cluster::{
    Cluster, ClusterError, ClusterEvent, ClusterHealth, EventKind, InMemoryCluster, Located, SharedKeys,
};
#[cfg(feature = "redis")]
pub use cluster_redis::RedisCluster;
#[cfg(feature = "http")]
pub use forward::{
    BoxIo, ForwardIo, FORWARDED_BY, FORWARDED_PEER, FORWARD_IDLE_TIMEOUT, LOOKUP_TIMEOUT, MAX_IDLE_FORWARDS,
    MAX_IDLE_PER_HOLDER, MAX_PEER_NONCES, PEER_TOKEN_TTL_MS, SERVED_BY,
};
pub use handler::{
    typed_tool, BoxFuture, Complete, GetPrompt, Handler, IntoToolResult, Json, ReadResource, RequestContext,
    ToolCall, ToolResult,
};
#[cfg(feature = "http")]
pub use http::{
    ConnectionPermit, HttpRuntime, HttpService, Listener, McpBody, McpService, PeerAddr, StreamDropped,
};
pub use stdio::{serve_lines, StdioEnd};
pub use tasks::{InMemoryTaskStore, StoreError, TaskStore};

use handler::{
    blocking_tool_fn, blocking_typed_tool_fn, completion_fn, prompt_fn, resource_fn, tool_fn, typed_tool_fn,
    HandlerKind,
};

use mcp_proto::{
    CallId, Caller, CloseReason, Completion, Config, ConnId, ConnKind, Decoded, Engine, Extension, Gate,
    HandlerError, HttpHead, Implementation, Invocation, KeyRing, LogLevel, OpenError, Output, Prompt,
    PromptOutput, Refusals, RegistryError, Reply, Request, Resource, ResourceContents, ResourceTemplate,
    Tool,
};
#[cfg(feature = "http")]
use mcp_proto::{HttpReply, HttpRequest};

/// What a shim supplies: spawning, sleeping and the clock.
pub trait Runtime: Send + Sync + 'static {
    /// Runs `fut` to completion in the background. Dropping what this returns must not cancel
    /// it; cancellation goes through an abort handle the server layer keeps.
    fn spawn(&self, fut: BoxFuture<()>);
    /// Completes at `deadline`.
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()>;
    /// The current time.
    fn now(&self) -> Instant;
    /// Runs `f`, which may block or compute for long, off the threads that run tasks (on the
    /// runtime's blocking pool), and completes once it returned. Dropping what this returns
    /// does not stop `f`: a blocking closure cannot be interrupted.
    ///
    /// The default runs `f` on a new thread, for runtimes without a blocking pool.
    fn spawn_blocking(&self, f: Box<dyn FnOnce() + Send + 'static>) -> BoxFuture<()> {
        handler::on_thread(f)
    }

    /// Lets the runtime's other ready tasks run before the caller goes on: the stdio reader
    /// calls it between frames of one read, so the handlers those frames started and the
    /// writer run before more frames are admitted. The default wakes the caller at once and is
    /// pending once, which puts it behind the tasks already queued; a runtime with a yield of
    /// its own that does better overrides it.
    fn yield_now(&self) -> BoxFuture<()> {
        Box::pin(YieldOnce(false))
    }

    /// Opens a TCP connection to `host` (a name or an address) on `port`, with `TCP_NODELAY`
    /// set, for forwarding a request to the replica of a cluster that holds its session or
    /// task (see the [`cluster`] module). The shims implement it over their runtime's socket;
    /// the default fails (`Unsupported`), and a server on such a runtime answers here what it
    /// would otherwise forward.
    #[cfg(feature = "http")]
    fn connect(&self, host: String, port: u16) -> BoxFuture<std::io::Result<BoxIo>> {
        let _ = (host, port);
        forward::no_connector()
    }
}

/// Pending once, after waking its task: the default [`Runtime::yield_now`]. Holds whether it
/// already yielded.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// An MCP server: an engine, its handlers, and the connections it serves. Cheap to clone.
#[derive(Clone)]
pub struct Server {
    shared: Arc<Shared>,
}

struct Shared {
    /// The engine and what serves it. Only the driver works the engine on the hot path; the
    /// synchronous operator calls (registry edits, status, a handler's progress and logs) lock
    /// it briefly too, as quinn's connection handles lock the state their driver owns.
    state: Mutex<State>,
    /// Frames and per-connection commands, in arrival order. Bounded, so a reader that sends
    /// faster than the driver takes frames waits for it (back-pressure on its own connection).
    inbox: (async_channel::Sender<Command>, async_channel::Receiver<Command>),
    /// Handler completions, closes from drop guards and wake-ups: never refused (each is bounded
    /// elsewhere: by the calls in flight, the connections open), and taken before the inbox, so
    /// finishing work comes before admitting more.
    control: (async_channel::Sender<Command>, async_channel::Receiver<Command>),
    /// Commands queued for the driver or in its hands, not yet run: while there are any, new
    /// commands queue behind them rather than run inline (see [`Server::run_inline`]).
    queued: AtomicUsize,
    /// Connections [`HttpService::serve`] accepted for this server that are still open: what
    /// [`Server::shutdown_and_close`] waits for.
    http_connections: AtomicUsize,
    /// What the HTTP layer turned away before the engine saw it ([`Status::http_refusals`]).
    http_refusals: HttpCounters,
    /// Ended tasks the task store did not keep ([`Status::task_store_failures`]).
    task_store_failures: Arc<StoreFailures>,
    /// The engine's limits (fixed once built), for the work done before the driver: decoding.
    limits: mcp_proto::Limits,
    /// The runtime of the first connection; the driver and the handlers run there.
    rt: OnceLock<Arc<dyn Runtime>>,
    /// Never sent on: closed when shutdown begins, which wakes every accept loop.
    stop_accepting: (async_channel::Sender<()>, async_channel::Receiver<()>),
}

/// Work for the driver: runs with the engine in hand, at the time given.
type Command = Box<dyn FnOnce(&Server, &mut State, Instant) + Send>;

/// A command that only needs the engine.
fn command(f: impl FnOnce(&mut Engine<Handler>, Instant) + Send + 'static) -> Command {
    Box::new(move |_: &Server, st: &mut State, now: Instant| f(&mut st.engine, now))
}

/// Commands one wake of the driver takes before it lets other tasks run: bounded work per wake,
/// as quinn's connection driver does. Not a [`Limits`](mcp_proto::Limits) field: it is
/// scheduling fairness, and no client can make the server hold more because of it.
const DRIVER_BATCH: usize = 64;

/// Frames waiting for the driver, over every connection, before readers wait. Not a
/// [`Limits`](mcp_proto::Limits) field: what it holds is already bounded per connection (a stdio
/// reader waits on its own frame, an HTTP connection carries one request at a time), so it only
/// decides when readers start waiting, not how much memory clients can claim.
const INBOX_LEN: usize = 1024;

struct State {
    engine: Engine<Handler>,
    sinks: HashMap<ConnId, Sink>,
    tasks: HashMap<CallId, AbortHandle>,
    /// Handlers waiting for the client's answers ([`RequestContext::ask`]).
    asks: HashMap<CallId, async_channel::Sender<Answers>>,
    /// The deadline the driver sleeps until.
    armed: Option<Instant>,
    /// Frames of line connections held back while their connection is at its in-flight limit,
    /// in arrival order (see [`Server::send_line_frame`]).
    parked: BTreeMap<ConnId, Parked>,
    /// The `tracing` spans of requests and sessions some subscriber wants.
    traces: trace::Traces,
    /// When the engine's current input began: the start of the spans of the requests it
    /// answers itself.
    input_at: Instant,
    /// Where ended tasks are written ([`ServerBuilder::task_store`]).
    task_store: Option<Arc<dyn TaskStore>>,
    /// The cluster this server is a replica of ([`ServerBuilder::cluster`]).
    cluster: Option<cluster::Membership>,
}

/// A line connection's frames waiting for room in the engine.
struct Parked {
    frames: VecDeque<Decoded>,
    room: Arc<Room>,
}

/// How many of a line connection's frames wait in the driver, shared with its reader, which
/// stops reading while too many do.
pub(crate) struct Room {
    parked: AtomicUsize,
    /// Rung whenever a parked frame goes to the engine.
    freed: (async_channel::Sender<()>, async_channel::Receiver<()>),
}

impl Room {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self { parked: AtomicUsize::new(0), freed: async_channel::bounded(1) })
    }

    /// Waits while `max` or more frames are parked.
    pub(crate) async fn wait_below(&self, max: usize) {
        while self.parked.load(AtomicOrdering::Acquire) >= max {
            if self.freed.1.recv().await.is_err() {
                return;
            }
        }
    }
}

impl State {
    /// Hands one admitted HTTP request to the engine. A pending answer gets its queue
    /// registered before the engine's output is drained, so nothing the request causes is lost.
    /// The engine paces it ([`Engine::pace`]): the body reports every frame it takes, and the
    /// engine keeps the queue near [`Limits::stream_queue_len`](mcp_proto::Limits::stream_queue_len)
    /// (coalescing change notifications, dropping progress and logs while it is full, never
    /// responses) and cuts a reader that stalls, so the queue itself needs no bound here.
    #[cfg(feature = "http")]
    fn exchange(
        &mut self,
        now: Instant,
        req: HttpRequest<'_>,
        decoded: Option<Decoded>,
        cut: Option<Cut>,
    ) -> Result<(HttpHead, Vec<u8>), (ConnId, HttpQueue)> {
        match self.engine.handle_http_decoded(now, req, decoded) {
            HttpReply::Full { head, body } => Ok((head, body)),
            HttpReply::Pending(conn) => {
                self.engine.pace(conn);
                let (tx, rx) = capped(usize::MAX);
                let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
                self.sinks.insert(conn, Sink::Http(tx, dropped.clone(), cut));
                Err((conn, HttpQueue { rx, dropped }))
            }
        }
    }
}

/// What an ask comes back with.
type Answers = Result<serde_json::Map<String, Value>, mcp_proto::AskError>;

/// The sending end of a queue bounded at `cap` items, for the driver (its only sender).
///
/// The queue itself is unbounded and the bound is checked on each send: `async_channel::bounded`
/// allocates every slot of its capacity up front, so a bound taken from [`Limits`](mcp_proto::Limits)
/// (where `usize::MAX` is a valid "no bound") would abort the process instead of bounding it.
struct Capped<T> {
    tx: async_channel::Sender<T>,
    cap: usize,
}

impl<T> Capped<T> {
    /// Queues `item`, or gives it back when `cap` items are already waiting (the reader fell
    /// behind) or the reader is gone.
    fn try_send(&self, item: T) -> Result<(), T> {
        if self.tx.len() >= self.cap {
            return Err(item);
        }
        self.tx.try_send(item).map_err(async_channel::TrySendError::into_inner)
    }
}

/// A queue holding at most `cap` items; see [`Capped`].
fn capped<T>(cap: usize) -> (Capped<T>, async_channel::Receiver<T>) {
    let (tx, rx) = async_channel::unbounded();
    (Capped { tx, cap }, rx)
}

/// Where a connection's output goes: a bounded queue read by its writer.
enum Sink {
    /// A line stream (stdio): each frame is one line.
    Lines(Capped<Vec<u8>>),
    /// An HTTP exchange or stream: the response head, then (for a stream) SSE bytes. The flag
    /// is raised when the engine cut a reader that stalled ([`CloseReason::Stalled`]), so its
    /// body ends in an error and the connection is cut, rather than waiting for a peer that
    /// does not read to take the rest.
    // Without the `http` feature nothing opens an HTTP exchange, but the driver's output routing
    // keeps its arms: one build of the hot path, not two that could drift apart.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Http(Capped<HttpItem>, Arc<std::sync::atomic::AtomicBool>, Option<Cut>),
}

/// Cuts the HTTP connection an exchange arrived on. hyper stops polling a response body while
/// the socket will not take more, so a reader that stopped reading never sees its body end:
/// the connection itself has to go.
#[derive(Clone, Debug)]
pub(crate) struct Cut(pub(crate) async_channel::Sender<()>);

/// The reading end of an HTTP exchange's queue.
#[cfg(feature = "http")]
pub(crate) struct HttpQueue {
    pub(crate) rx: async_channel::Receiver<HttpItem>,
    /// Raised when the engine cut this reader for stalling.
    pub(crate) dropped: Arc<std::sync::atomic::AtomicBool>,
}

/// One item for an HTTP exchange's writer, in the order the engine produced them.
#[derive(Debug)]
#[cfg_attr(not(feature = "http"), allow(dead_code))] // Read by the HTTP service only; see `Sink::Http`.
pub(crate) enum HttpItem {
    /// The whole (JSON) response; nothing follows.
    Respond(HttpHead, Vec<u8>),
    /// The head of an SSE response; [`HttpItem::Frame`]s follow until the queue ends.
    Stream(HttpHead),
    /// Ready-to-write SSE bytes.
    Frame(Vec<u8>),
}

/// Something registered before the server is built.
#[derive(Clone)]
enum Item {
    /// Boxed: a tool's declaration is by far the largest item.
    Tool(Box<Tool>, Handler),
    Resource(Resource, Handler),
    Template(ResourceTemplate, Handler, Option<Handler>),
    Prompt(Prompt, Handler, Option<Handler>),
    Gate(Gate),
    Extension(Extension),
    /// An MCP App ([`ServerBuilder::app`]), registered before every other item.
    App(mcp_proto::App),
    /// The compact apps shell ([`ServerBuilder::apps_shell`]), registered with the apps.
    Shell(mcp_proto::App),
    Skill(mcp_proto::Skill),
    /// A tool refused before registration (its handler's output type has no object schema);
    /// [`ServerBuilder::build`] reports it.
    Refused(RegistryError),
}

/// The item for `tool` served by `handler`, with the output schema its return type `R` declares.
fn tool_item<R: IntoToolResult>(tool: Tool, handler: Handler) -> Item {
    match handler::with_output::<R>(tool) {
        Ok(tool) => Item::Tool(Box::new(tool), handler),
        Err(e) => Item::Refused(e),
    }
}

/// Builds a [`Server`].
///
/// Cloning a builder copies its definitions and shares its handlers: one catalogue can be built
/// into several servers, for instance one per publication mode
/// (`builder.clone().mode(Mode::Compact).build()` beside `builder.build()`). Each server then
/// owns its registry (the engine owns all its state); a tool added or removed at run time is
/// added to or removed from each server it should change.
#[derive(Clone)]
pub struct ServerBuilder {
    config: Config,
    keys_set: bool,
    items: Vec<Item>,
    task_store: Option<Arc<dyn TaskStore>>,
    cluster: Option<cluster::Membership>,
    /// [`ServerBuilder::cluster_advertise`].
    advertise: Option<Arc<str>>,
}

/// Why [`ServerBuilder::build`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// An item could not be registered.
    Registry(RegistryError),
    /// No cursor key was given and the operating system's random source failed; the server
    /// refuses to start with a guessable key.
    Random(getrandom::Error),
    /// [`ServerBuilder::join`] could not read the cluster's shared key ring.
    Cluster(ClusterError),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Registry(e) => e.fmt(f),
            BuildError::Random(e) => write!(f, "cannot draw a random cursor key: {e}"),
            BuildError::Cluster(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BuildError {}

impl ServerBuilder {
    /// The engine configuration, to adjust limits, instructions or keys.
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// Sets the `instructions` sent to clients.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.config.instructions = Some(text.into());
        self
    }

    /// Uses this key ring for cursors instead of a random key (share it between replicas).
    pub fn keys(mut self, keys: KeyRing) -> Self {
        self.config.keys = keys;
        self.keys_set = true;
        self
    }

    /// Adds a tool served by an async closure. A handler that returns [`Json<T>`](Json) declares
    /// `T`'s schema as the tool's `outputSchema`, unless `tool` declares one.
    pub fn tool<F, Fut, R>(mut self, tool: Tool, f: F) -> Self
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        self.items.push(tool_item::<R>(tool, tool_fn(f)));
        self
    }

    /// Adds a typed tool: the input schema is derived from `A`, and the handler receives the
    /// arguments deserialized. A handler that returns [`Json<T>`](Json) (or a `Result` of it)
    /// has typed output too: `T`'s schema becomes the `outputSchema` and each value the
    /// result's `structuredContent`.
    pub fn typed_tool<A, F, Fut, R>(mut self, name: &str, description: &str, f: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        self.items.push(tool_item::<R>(typed_tool::<A>(name, description), typed_tool_fn(f)));
        self
    }

    /// Adds a tool served by a blocking closure, for handlers that compute for long or block
    /// (file or database I/O through a synchronous API): each call runs on the runtime's
    /// blocking pool ([`Runtime::spawn_blocking`]: tokio's `spawn_blocking`, smol's `unblock`),
    /// so no handler can hold up the threads that serve the connections. An async tool that
    /// blocks starves them instead: smol's executor has one thread by default.
    ///
    /// Cancellation (by the client, a timeout, or [`Server::shutdown`]) answers the call at
    /// once and drops whatever `f` returns later; `f` itself cannot be interrupted and runs to
    /// its end. Bound the work a call can ask for in `f`'s arguments.
    pub fn blocking_tool<F, R>(mut self, tool: Tool, f: F) -> Self
    where
        F: Fn(ToolCall) -> R + Send + Sync + 'static,
        R: IntoToolResult + 'static,
    {
        self.items.push(tool_item::<R>(tool, blocking_tool_fn(f)));
        self
    }

    /// [`blocking_tool`](Self::blocking_tool) with typed arguments, as
    /// [`typed_tool`](Self::typed_tool): the input schema is derived from `A`, and `f`
    /// receives the arguments deserialized (on the blocking pool too).
    pub fn blocking_typed_tool<A, F, R>(mut self, name: &str, description: &str, f: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + 'static,
        F: Fn(A, ToolCall) -> R + Send + Sync + 'static,
        R: IntoToolResult + 'static,
    {
        self.items.push(tool_item::<R>(typed_tool::<A>(name, description), blocking_typed_tool_fn(f)));
        self
    }

    /// Adds a resource read by an async closure.
    pub fn resource<F, Fut>(mut self, resource: Resource, f: F) -> Self
    where
        F: Fn(ReadResource) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<ResourceContents>, HandlerError>> + Send + 'static,
    {
        self.items.push(Item::Resource(resource, resource_fn(f)));
        self
    }

    /// Adds a resource template read by an async closure.
    pub fn template<F, Fut>(mut self, template: ResourceTemplate, f: F) -> Self
    where
        F: Fn(ReadResource) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<ResourceContents>, HandlerError>> + Send + 'static,
    {
        self.items.push(Item::Template(template, resource_fn(f), None));
        self
    }

    /// Adds a prompt rendered by an async closure.
    pub fn prompt<F, Fut>(mut self, prompt: Prompt, f: F) -> Self
    where
        F: Fn(GetPrompt) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PromptOutput, HandlerError>> + Send + 'static,
    {
        self.items.push(Item::Prompt(prompt, prompt_fn(f), None));
        self
    }

    /// Gives the item added last (a prompt or a template) a `completion/complete` handler.
    /// Ignored after any other item.
    pub fn completion<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(Complete) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Completion, HandlerError>> + Send + 'static,
    {
        if let Some(Item::Prompt(_, _, c) | Item::Template(_, _, c)) = self.items.last_mut() {
            *c = Some(completion_fn(f));
        }
        self
    }

    /// Declares that handlers log to clients ([`RequestContext::log`]): the server advertises
    /// the `logging` capability and serves `logging/setLevel`. Off by default, since whether a
    /// handler logs cannot be known from its type; without it `logging/setLevel` is answered
    /// `-32601` (method not found) and `RequestContext::log` sends nothing (the first such call
    /// logs a `tracing` warning naming this method). See [`Config::logging`].
    pub fn logging(mut self) -> Self {
        self.config.logging = true;
        self
    }

    /// Declares that the application reports resource changes ([`Server::notify_resource_updated`]):
    /// the server advertises `resources.subscribe` and serves `resources/subscribe` and
    /// `resources/unsubscribe` (and `resourceSubscriptions` in a 2026-07-28 listen). Off by
    /// default, since a subscription nobody notifies promises updates that never come; without
    /// it those methods are answered `-32601`. See [`Config::resource_subscriptions`].
    pub fn resource_subscriptions(mut self) -> Self {
        self.config.resource_subscriptions = true;
        self
    }

    /// Declares a protocol extension to every caller: `id` (such as
    /// `io.modelcontextprotocol/ui` or an application's own `com.example/audit`) goes under
    /// `capabilities.extensions` with `settings`, a JSON object (`json!({})` for none), in the
    /// `initialize` result of 2025-11-25 sessions and in `server/discover` on 2026-07-28; older
    /// versions have no such field and are not told. A malformed id, settings that are not an
    /// object, or an id declared twice make [`build`](Self::build) fail with
    /// [`RegistryError::InvalidExtension`] (or `Duplicate`). Declaring an extension promises
    /// what its specification asks of a server; the engine implements none by itself.
    ///
    /// ```
    /// # use mcp_server::Server;
    /// let server = Server::builder("demo", "1.0.0")
    ///     .extension("io.modelcontextprotocol/ui", serde_json::json!({}))
    ///     .extension("com.example/audit", serde_json::json!({"level": "full"}))
    ///     .build();
    /// assert!(server.is_ok());
    /// assert!(Server::builder("demo", "1.0.0").extension("audit", serde_json::json!({})).build().is_err());
    /// ```
    pub fn extension(mut self, id: impl Into<String>, settings: Value) -> Self {
        self.items.push(Item::Extension(Extension::new(id, settings)));
        self
    }

    /// [`extension`](Self::extension), declared only to the callers `gate` admits: to the
    /// others it does not exist, as a gated tool does not.
    pub fn gated_extension(mut self, id: impl Into<String>, settings: Value, gate: Gate) -> Self {
        self.items.push(Item::Extension(Extension::new(id, settings).gate(gate)));
        self
    }

    /// Whether tool results carry the value/failure envelope (see
    /// [`Config::envelopes`](mcp_proto::Config::envelopes) for the wire form). Default `false`:
    /// results are the MCP norm, and a [`ToolFailure`](mcp_proto::ToolFailure) is sent as
    /// `isError: true` with its message as text. On, structured output is sent as
    /// `{"value": ...}` and a failure as `{"failure": {"code", "message", "retryable",
    /// "diagnostics"?}}`, each with its JSON text copy in `content`, so a program can tell a
    /// value from a failure without parsing prose. Fixed for the server's life.
    ///
    /// A tool's published `outputSchema` is then its schema wrapped
    /// ([`mcp_proto::wrap`]): the union of `{"value": <schema>}` and the failure envelope.
    /// The wrapper is prepared on the tool's first authorized use and kept; a schema it refuses
    /// (a draft-04, draft-06 or 2019-09 dialect, say) makes that tool unpublishable: the page
    /// that would list it and a call to it answer `-32603` with `data.reason` `"unpublishable"`
    /// and the tool's name, and [`build`](Self::build) logs a warning naming it and why.
    pub fn envelopes(mut self, on: bool) -> Self {
        self.config.envelopes = on;
        self
    }

    /// How the server publishes its tools: [`Mode::Direct`](mcp_proto::Mode::Direct) (the
    /// default and the MCP norm: each tool is a native tool) or
    /// [`Mode::Compact`](mcp_proto::Mode::Compact) (`tools/list` is `search_tools`,
    /// `get_tool_details` and `call_tool`, and results are always enveloped; see the variant
    /// for the wire form). Fixed for the server's life. Each server owns its registry, so two
    /// servers given the same tools may publish them in different modes.
    pub fn mode(mut self, mode: mcp_proto::Mode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Where ended tasks of the Tasks extension go beyond the engine (see [`TaskStore`]):
    /// each task that ends is written there, and a `tasks/get` for an id the engine does not
    /// hold is answered from it. Default an [`InMemoryTaskStore`] of 4096 records and 64 MiB; `None`
    /// keeps tasks in the engine's table only.
    pub fn task_store(mut self, store: Option<Arc<dyn TaskStore>>) -> Self {
        self.task_store = store;
        self
    }

    /// Sets the server-wide gate over the data methods.
    pub fn gate(mut self, gate: Gate) -> Self {
        self.items.push(Item::Gate(gate));
        self
    }

    /// Builds the server, refusing the first item that cannot be registered. Unless
    /// [`keys`](Self::keys) gave one, the cursor key is drawn from the operating system.
    pub fn build(mut self) -> Result<Server, BuildError> {
        if !self.keys_set {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(BuildError::Random)?;
            self.config.keys = KeyRing::new(key);
        }
        let envelopes = self.config.envelopes;
        // Apps first (a stable sort keeps every other order), so that tools may link to them
        // wherever they were added.
        self.items.sort_by_key(|i| !matches!(i, Item::App(_) | Item::Shell(_)));
        let server = Server::from_config(self.config);
        {
            let mut st = server.lock();
            let now = server.now();
            let mut reg = st.engine.registry_mut(now);
            for item in self.items {
                match item {
                    Item::Tool(t, h) => {
                        if envelopes {
                            warn_unwrappable(&t);
                        }
                        reg.add_tool(*t, h)
                    }
                    Item::Resource(r, h) => reg.add_resource(r, h),
                    Item::Template(t, h, c) => reg.add_template(t, h, c),
                    Item::Prompt(p, h, c) => reg.add_prompt(p, h, c),
                    Item::Extension(e) => reg.add_extension(e),
                    Item::App(app) => ServerBuilder::register_app(&mut reg, app, false),
                    Item::Shell(app) => ServerBuilder::register_app(&mut reg, app, true),
                    Item::Skill(s) => reg.add_skill(s),
                    Item::Gate(g) => {
                        reg.set_gate(Some(g));
                        Ok(())
                    }
                    Item::Refused(e) => Err(e),
                }
                .map_err(BuildError::Registry)?;
            }
            let lookup = self.task_store.clone().map(|store| Handler(HandlerKind::TaskStore(store)));
            reg.set_task_lookup(lookup);
            st.task_store = self.task_store;
            // After the items: registering them is no change the other replicas need to hear of.
            st.engine.set_publishing(self.cluster.is_some());
            st.engine.set_shared_ledger(self.cluster.is_some());
            st.engine.set_reporting_holdings(self.cluster.is_some());
            st.cluster = self.cluster.map(|mut m| {
                m.advertise = self.advertise;
                m
            });
        }
        Ok(server)
    }
}

impl Server {
    /// A builder with default limits; [`build`](ServerBuilder::build) draws a random cursor key
    /// unless one is given, so cursors cannot be forged by anyone who was not handed a key.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        // Replaced in `build`; an all-zero key is never used to sign.
        let config = Config::new(Implementation::new(name, version), KeyRing::new([0; 32]));
        ServerBuilder {
            config,
            keys_set: false,
            items: Vec::new(),
            task_store: Some(tasks::default_store()),
            cluster: None,
            advertise: None,
        }
    }

    /// A server from a complete configuration. Unless it sets [`Config::seed`], the seed is
    /// drawn from the operating system's random source.
    pub fn from_config(mut config: Config) -> Self {
        if config.unix_ms_at_start == 0 {
            config.unix_ms_at_start = unix_ms();
        }
        if config.seed.is_none() {
            let mut seed = [0u8; 32];
            // Without a seed the engine refuses to mint session ids (legacy `initialize` gets
            // 500): unreachable sessions rather than guessable ones.
            match getrandom::fill(&mut seed) {
                Ok(()) => config.seed = Some(mcp_proto::Seed(seed)),
                Err(e) => tracing::error!(error = %e, "cannot draw a random entropy seed"),
            }
        }
        Server {
            shared: Arc::new(Shared {
                limits: config.limits.clone(),
                http_connections: AtomicUsize::new(0),
                http_refusals: HttpCounters::default(),
                task_store_failures: Arc::default(),
                queued: AtomicUsize::new(0),
                state: Mutex::new(State {
                    engine: Engine::new(config, clock()),
                    sinks: HashMap::new(),
                    tasks: HashMap::new(),
                    asks: HashMap::new(),
                    armed: None,
                    parked: BTreeMap::new(),
                    traces: trace::Traces::default(),
                    input_at: clock(),
                    task_store: None,
                    cluster: None,
                }),
                inbox: async_channel::bounded(INBOX_LEN),
                control: async_channel::unbounded(),
                rt: OnceLock::new(),
                stop_accepting: async_channel::bounded(1),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock can only come from engine code, which does not panic on
        // input; recovering the guard keeps the other connections served.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> Instant {
        self.shared.rt.get().map_or_else(clock, |rt| rt.now())
    }

    /// Applies a registry change and delivers what it caused.
    fn registry<T>(&self, f: impl FnOnce(&mut mcp_proto::RegistryMut<'_, Handler>) -> T) -> T {
        let mut st = self.lock();
        let now = self.now();
        let t = f(&mut st.engine.registry_mut(now));
        self.release(st);
        t
    }

    /// Registers a tool served by an async closure, at any time; listening clients are told.
    /// A handler returning [`Json<T>`](Json) declares `T`'s schema as the `outputSchema`, as
    /// with [`ServerBuilder::tool`].
    pub fn add_tool<F, Fut, R>(&self, tool: Tool, f: F) -> Result<(), RegistryError>
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        let tool = handler::with_output::<R>(tool)?;
        self.registry(|r| r.add_tool(tool, tool_fn(f)))
    }

    /// Registers a typed tool, at any time.
    pub fn add_typed_tool<A, F, Fut, R>(
        &self,
        name: &str,
        description: &str,
        f: F,
    ) -> Result<(), RegistryError>
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        let tool = handler::with_output::<R>(typed_tool::<A>(name, description))?;
        self.registry(|r| r.add_tool(tool, typed_tool_fn(f)))
    }

    /// Registers a tool served by a blocking closure, at any time (see
    /// [`ServerBuilder::blocking_tool`]).
    pub fn add_blocking_tool<F, R>(&self, tool: Tool, f: F) -> Result<(), RegistryError>
    where
        F: Fn(ToolCall) -> R + Send + Sync + 'static,
        R: IntoToolResult + 'static,
    {
        let tool = handler::with_output::<R>(tool)?;
        self.registry(|r| r.add_tool(tool, blocking_tool_fn(f)))
    }

    /// Unregisters a tool; whether it was registered.
    pub fn remove_tool(&self, name: &str) -> bool {
        self.registry(|r| r.remove_tool(name).is_some())
    }

    /// Registers a resource, at any time.
    pub fn add_resource<F, Fut>(&self, resource: Resource, f: F) -> Result<(), RegistryError>
    where
        F: Fn(ReadResource) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<ResourceContents>, HandlerError>> + Send + 'static,
    {
        self.registry(|r| r.add_resource(resource, resource_fn(f)))
    }

    /// Unregisters a resource; whether it was registered.
    pub fn remove_resource(&self, uri: &str) -> bool {
        self.registry(|r| r.remove_resource(uri).is_some())
    }

    /// Registers a prompt, at any time.
    pub fn add_prompt<F, Fut>(&self, prompt: Prompt, f: F) -> Result<(), RegistryError>
    where
        F: Fn(GetPrompt) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PromptOutput, HandlerError>> + Send + 'static,
    {
        self.registry(|r| r.add_prompt(prompt, prompt_fn(f), None))
    }

    /// Unregisters a prompt; whether it was registered.
    pub fn remove_prompt(&self, name: &str) -> bool {
        self.registry(|r| r.remove_prompt(name).is_some())
    }

    /// Tells subscribed clients that the resource at `uri` changed.
    pub fn notify_resource_updated(&self, uri: &str) {
        let mut st = self.lock();
        let now = self.now();
        st.engine.notify_resource_updated(now, uri);
        self.release(st);
    }

    fn progress(
        &self,
        call: CallId,
        progress: serde_json::Number,
        total: Option<serde_json::Number>,
        message: Option<&str>,
    ) -> mcp_proto::ProgressOutcome {
        let mut st = self.lock();
        let now = self.now();
        let outcome = st.engine.progress(now, call, progress, total, message);
        self.release(st);
        // Stale: the call already ended; nothing more goes out for it.
        outcome.unwrap_or(mcp_proto::ProgressOutcome::NoToken)
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<()> {
        match self.shared.rt.get() {
            Some(rt) => sleep_until(rt.as_ref(), rt.now().checked_add(duration)),
            None => Box::pin(std::future::ready(())),
        }
    }

    fn can_ask(&self, call: CallId, request: &mcp_proto::interaction::InputRequest) -> bool {
        self.lock().engine.can_ask(call, request).is_ok()
    }

    async fn ask(
        &self,
        call: CallId,
        requests: Vec<(String, mcp_proto::interaction::InputRequest)>,
    ) -> Result<serde_json::Map<String, Value>, mcp_proto::AskError> {
        let rx = {
            let mut st = self.lock();
            let now = self.now();
            let asked = st.engine.ask(now, call, requests);
            let rx = match asked {
                Ok(mcp_proto::Asked::Pending) => {
                    let (tx, rx) = async_channel::bounded(1);
                    st.asks.insert(call, tx);
                    Ok(rx)
                }
                Ok(mcp_proto::Asked::Answered(answers)) => Err(Ok(answers)),
                Err(e) => Err(Err(e)),
            };
            self.release(st);
            rx
        };
        match rx {
            // The sender goes when the call ends without answers (cancelled, timed out).
            Ok(rx) => rx.recv().await.unwrap_or(Err(mcp_proto::AskError::Stale)),
            Err(done) => done,
        }
    }

    fn log(&self, call: CallId, level: LogLevel, logger: Option<&str>, data: Value) {
        let mut st = self.lock();
        if !st.engine.config().logging {
            static TOLD: std::sync::Once = std::sync::Once::new();
            TOLD.call_once(|| {
                tracing::warn!(
                    "RequestContext::log called, but this server does not log to clients; \
                     enable it with ServerBuilder::logging()"
                )
            });
        }
        let now = self.now();
        // Stale: the call ended; a late log line has nowhere to go.
        let _ = st.engine.log(now, call, level, logger, data);
        self.release(st);
    }

    /// Calls a tool in-process as `caller`, through the same gates (server-wide and the tool's)
    /// and argument validation as a remote `tools/call`, without any connection.
    pub async fn call_tool_as(
        &self,
        caller: Caller,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> ToolResult {
        let handler = self.lock().engine.authorize_tool_call(&caller, name, &arguments)?;
        let HandlerKind::Tool(f) = handler.0 else { return Err(HandlerError::Panicked) };
        let ctx = RequestContext {
            caller: Arc::new(caller),
            version: mcp_proto::ProtocolVersion::V2026_07_28,
            call: None,
            server: self.clone(),
            client_extensions: Arc::default(),
        };
        let call = ToolCall { name: name.to_owned(), arguments, ctx };
        let reply = guarded(format!("tool {name}"), move || f(call), Reply::Tool).await;
        match reply {
            Reply::Tool(result) => result,
            _ => Err(HandlerError::Panicked),
        }
    }

    /// What `caller` is shown by the list methods, gates applied.
    pub fn visible_to(&self, caller: &Caller) -> mcp_proto::Introspection {
        self.lock().engine.visible_to(caller)
    }

    /// Everything registered, ignoring gates. **Never serve this to a remote caller**; see
    /// [`Introspection`](mcp_proto::Introspection).
    pub fn introspect(&self) -> mcp_proto::Introspection {
        self.lock().engine.introspect()
    }

    /// Shuts down gracefully: new requests are refused ("server is shutting down"), listen
    /// streams end, connections close as their calls finish, and calls still running after
    /// `budget` are cancelled and answered with that same refusal (`-32603`,
    /// `data.reason: "shutting_down"`). Returns what did not finish in time. Sessions being served by
    /// `serve_stdio` then end with [`StdioEnd::Closed`]; HTTP listeners stop accepting at once
    /// ([`HttpService::serve`] returns), and HTTP exchanges still open are closed with the rest.
    /// The continuation epoch of this server moves on ([`Engine::shutdown`](mcp_proto::Engine::shutdown)):
    /// in a cluster only this replica's, so a rolling restart ends no other replica's
    /// dialogues; [`move_epoch`](Self::move_epoch) first to end them everywhere.
    pub async fn shutdown(&self, budget: Duration) -> ShutdownReport {
        self.shared.stop_accepting.0.close();
        let deadline = {
            let mut st = self.lock();
            let now = self.now();
            st.engine.shutdown(now);
            self.release(st);
            // Past what `Instant` can hold (`Duration::MAX`): no deadline, wait for every call.
            now.checked_add(budget)
        };
        loop {
            let in_flight = self.lock().engine.status().in_flight;
            if in_flight == 0 {
                return ShutdownReport { cancelled: 0 };
            }
            let Some(rt) = self.shared.rt.get() else { break };
            let now = rt.now();
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            // Polled rather than signalled: shutdown is rare and the budget coarse.
            let tick = now.checked_add(Duration::from_millis(10)).unwrap_or(now);
            rt.sleep_until(deadline.map_or(tick, |d| tick.min(d))).await;
        }
        let mut st = self.lock();
        let now = self.now();
        let cancelled = st.engine.status().in_flight;
        // Every connection, HTTP sessions (which own their calls but have no sink) included.
        st.engine.close_all(now);
        self.release(st);
        ShutdownReport { cancelled }
    }

    /// [`shutdown`](Self::shutdown), then waits for the HTTP connections
    /// [`HttpService::serve`] accepted to close, so the last answers reach their clients before
    /// the process exits: at most what is left of `budget`, and no longer than `cut_short`
    /// (a second signal, say) takes. A keep-alive client that stays connected holds this until
    /// then.
    pub async fn shutdown_and_close(
        &self,
        budget: Duration,
        cut_short: impl Future<Output = ()>,
    ) -> ShutdownReport {
        let started = self.now();
        let report = self.shutdown(budget).await;
        let Some(rt) = self.shared.rt.get().cloned() else { return report };
        let deadline = started.checked_add(budget);
        let closed = async {
            while self.shared.http_connections.load(AtomicOrdering::Acquire) > 0 {
                if deadline.is_some_and(|d| rt.now() >= d) {
                    return;
                }
                // Polled rather than signalled: this runs once, at exit.
                sleep_until(rt.as_ref(), rt.now().checked_add(Duration::from_millis(10))).await;
            }
        };
        futures_util::future::select(pin!(closed), pin!(cut_short)).await;
        report
    }

    /// A snapshot of what the server is doing and what it turned away: connections open,
    /// handlers running, work queued, refusals by reason. Cheap (a brief lock and a walk over
    /// the open connections), so a metrics endpoint may call it on every scrape;
    /// [`Status::metrics`] lists it as name/value pairs.
    pub fn status(&self) -> Status {
        let queued_commands = self.shared.queued.load(AtomicOrdering::Acquire);
        let st = self.lock();
        let engine = st.engine.status();
        Status {
            connections: st.sinks.len(),
            running_handlers: st.tasks.len(),
            in_flight: engine.in_flight,
            listens: engine.listens,
            sessions: engine.sessions,
            streams: engine.streams,
            shutting_down: engine.shutting_down,
            dropped_notifications: engine.dropped_notifications,
            queued_commands,
            parked_frames: st.parked.values().map(|p| p.frames.len()).sum(),
            http_connections: self.shared.http_connections.load(AtomicOrdering::Acquire),
            refusals: engine.refusals,
            http_refusals: self.shared.http_refusals.snapshot(),
            dropped_records: engine.dropped_records,
            cluster: st.cluster.as_ref().map_or(ClusterHealth::Standalone, |m| m.cluster.health()),
            task_store_failures: self.shared.task_store_failures.count.load(AtomicOrdering::Relaxed),
        }
    }

    /// Why the task store last failed to keep an ended task ([`TaskStore::put`]), if it ever
    /// did: the text of its [`StoreError`]. Each failure is also logged (`tracing`, warn) and
    /// counted in [`Status::task_store_failures`].
    pub fn last_task_store_error(&self) -> Option<String> {
        self.shared.task_store_failures.last.lock().ok().and_then(|l| l.clone())
    }

    /// Opens a connection whose frames go to a bounded queue; the receiver is the writer's.
    pub(crate) fn open<R: Runtime + Clone>(
        &self,
        rt: &R,
        kind: ConnKind,
        caller: Caller,
    ) -> Result<(ConnId, async_channel::Receiver<Vec<u8>>), OpenError> {
        self.attach(rt);
        let span = trace::Traces::session_starting(&caller);
        let mut st = self.lock();
        let opened = st.engine.open(self.now(), kind, caller);
        if let Some(span) = span {
            st.traces.session_opened(span, opened, || self.now());
        }
        let conn = opened?;
        let (tx, rx) = capped(st.engine.config().limits.queued_frames());
        st.sinks.insert(conn, Sink::Lines(tx));
        Ok((conn, rx))
    }

    /// Makes `rt` the server's runtime unless it already has one, and starts the driver on it.
    /// The first runtime wins: the driver and the handlers of every connection run there.
    pub(crate) fn attach<R: Runtime + Clone>(&self, rt: &R) {
        if self.shared.rt.set(Arc::new(rt.clone())).is_ok() {
            rt.spawn(Box::pin(self.clone().drive()));
            if let Some(rt) = self.shared.rt.get() {
                self.join_cluster(rt);
            }
        }
    }

    /// Queues `cmd` behind the frames already waiting, waiting while the inbox is full. Returns
    /// false once the server is gone (never, while a `Server` is alive).
    pub(crate) async fn send(&self, cmd: Command) -> bool {
        let Err(cmd) = self.run_inline(cmd) else { return true };
        self.shared.queued.fetch_add(1, AtomicOrdering::AcqRel);
        if self.shared.inbox.0.send(cmd).await.is_ok() {
            return true;
        }
        self.shared.queued.fetch_sub(1, AtomicOrdering::AcqRel);
        false
    }

    /// Queues `cmd` ahead of the frames waiting; never waits. For completions and for what must
    /// happen from synchronous code (drop guards).
    pub(crate) fn submit(&self, cmd: Command) {
        if let Err(cmd) = self.run_inline(cmd) {
            self.enqueue_control(cmd);
        }
    }

    fn enqueue_control(&self, cmd: Command) {
        self.shared.queued.fetch_add(1, AtomicOrdering::AcqRel);
        // The receiver lives in `Shared`, beside this sender: the channel never closes.
        let _ = self.shared.control.0.try_send(cmd);
    }

    /// Wakes the driver so it looks at the engine's deadline again.
    fn wake_driver(&self) {
        self.enqueue_control(Box::new(|_: &Server, _: &mut State, _: Instant| {}));
    }

    /// Runs `cmd` at once on the calling task when that delays nobody and reorders nothing:
    /// when no command is queued or in the driver's hands, and the engine is free this instant
    /// (never waited for). Otherwise hands it back, to be queued. This spares the hop to the
    /// driver when the server is quiet (the latency of one request alone), while a busy server
    /// is worked by the driver in batches; either way the work done is bounded engine work,
    /// never a handler and never a decode.
    fn run_inline(&self, cmd: Command) -> Result<(), Command> {
        if self.shared.queued.load(AtomicOrdering::Acquire) != 0 {
            return Err(cmd);
        }
        let Ok(mut st) = self.shared.state.try_lock() else { return Err(cmd) };
        // Checked again with the engine in hand: whatever was queued meanwhile goes first.
        if self.shared.queued.load(AtomicOrdering::Acquire) != 0 {
            return Err(cmd);
        }
        let now = self.now();
        st.engine.set_recording(trace::wants_requests());
        st.input_at = now;
        cmd(self, &mut st, now);
        self.pump(&mut st);
        if !st.parked.is_empty() {
            self.unpark(&mut st, now);
        }
        self.release(st);
        Ok(())
    }

    /// Runs `f` on the driver, in order with the frames queued before it, and returns what it
    /// returned. `None` only when the driver never runs it (the server is going away).
    pub(crate) async fn request<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Server, &mut State, Instant) -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = async_channel::bounded(1);
        let sent = self
            .send(Box::new(move |server: &Server, st: &mut State, now: Instant| {
                let _ = tx.try_send(f(server, st, now));
            }))
            .await;
        if !sent {
            return None;
        }
        rx.recv().await.ok()
    }

    /// Decodes a frame under the engine's limits, on the caller's task.
    pub(crate) fn decode(&self, bytes: &[u8]) -> Decoded {
        Decoded::new(&self.shared.limits, bytes)
    }

    /// The server's limits: every bound and timeout of its engine, its HTTP endpoints and its
    /// stdio sessions (fixed once built).
    pub fn limits(&self) -> &mcp_proto::Limits {
        &self.shared.limits
    }

    /// Hands one decoded frame of line connection `conn` to the driver, behind the frames queued
    /// before it. A pipelining client can send requests faster than handlers finish: rather
    /// than have the engine refuse what is over the connection's in-flight limit, the driver
    /// holds such frames back (in order) until calls finish, and the reader stops reading while
    /// `room` says too many are held, so the client feels back-pressure, not errors.
    pub(crate) async fn send_line_frame(&self, conn: ConnId, frame: Decoded, room: &Arc<Room>) {
        let room = room.clone();
        self.send(Box::new(move |_: &Server, st: &mut State, now: Instant| {
            let full = st.engine.in_flight(conn) >= st.engine.config().limits.in_flight();
            match st.parked.get_mut(&conn) {
                Some(parked) => parked.frames.push_back(frame),
                None if full => {
                    let frames = VecDeque::from([frame]);
                    st.parked.insert(conn, Parked { frames, room: room.clone() });
                }
                None => {
                    st.engine.handle_decoded(now, conn, frame);
                    return;
                }
            }
            room.parked.fetch_add(1, AtomicOrdering::AcqRel);
        }))
        .await;
    }

    /// Hands parked frames to the engine while their connections have room.
    fn unpark(&self, st: &mut State, now: Instant) {
        let limit = st.engine.config().limits.in_flight();
        let conns: Vec<ConnId> = st.parked.keys().copied().collect();
        for conn in conns {
            while st.engine.in_flight(conn) < limit {
                let Some(parked) = st.parked.get_mut(&conn) else { break };
                let Some(frame) = parked.frames.pop_front() else {
                    st.parked.remove(&conn);
                    break;
                };
                parked.room.parked.fetch_sub(1, AtomicOrdering::AcqRel);
                let _ = parked.room.freed.0.try_send(());
                st.engine.handle_decoded(now, conn, frame);
                self.pump(st);
            }
            if st.parked.get(&conn).is_some_and(|p| p.frames.is_empty()) {
                st.parked.remove(&conn);
            }
        }
    }

    /// Completes once [`shutdown`](Self::shutdown) has begun: listeners stop accepting then.
    #[cfg(feature = "http")]
    pub(crate) fn closing(&self) -> impl Future<Output = ()> + Send + 'static {
        let signal = self.shared.stop_accepting.1.clone();
        async move {
            // Nothing is ever sent: this returns when the channel is closed.
            let _ = signal.recv().await;
        }
    }

    /// Runs `f` against the engine at once, outside the driver (a synchronous operator call),
    /// then does everything it asked for.
    pub(crate) fn with_engine<T>(&self, f: impl FnOnce(&mut Engine<Handler>, Instant) -> T) -> T {
        let mut st = self.lock();
        let now = self.now();
        let t = f(&mut st.engine, now);
        self.release(st);
        t
    }

    /// Ends a synchronous call into the engine: drains what it caused, and wakes the driver when
    /// the engine's next deadline moved earlier than the one the driver sleeps until.
    fn release(&self, mut st: MutexGuard<'_, State>) {
        self.pump(&mut st);
        let next = st.engine.poll_timeout();
        if next.is_some() && (st.armed.is_none() || next < st.armed) {
            st.armed = next;
            drop(st);
            self.wake_driver();
        }
    }

    /// The driver: the one task that works the engine for the connections. It sleeps until a
    /// command arrives or the engine's deadline passes, then takes up to [`DRIVER_BATCH`]
    /// commands (completions first), draining the engine's output after each, and yields.
    async fn drive(self) {
        let Some(rt) = self.shared.rt.get().cloned() else { return };
        let control = self.shared.control.1.clone();
        let inbox = self.shared.inbox.1.clone();
        loop {
            let armed = self.lock().armed;
            let first = {
                let (from_control, from_inbox) = (pin!(control.recv()), pin!(inbox.recv()));
                let next = futures_util::future::select(from_control, from_inbox);
                let woke = match armed {
                    Some(deadline) => {
                        match futures_util::future::select(next, rt.sleep_until(deadline)).await {
                            Either::Left((either, _)) => Some(either.factor_first().0),
                            Either::Right(_) => None,
                        }
                    }
                    None => Some(next.await.factor_first().0),
                };
                match woke {
                    Some(Ok(cmd)) => Some(cmd),
                    // Both channels live in `Shared`, which this task holds: they never close.
                    Some(Err(_)) => return,
                    None => None,
                }
            };
            {
                let mut st = self.lock();
                st.engine.set_recording(trace::wants_requests());
                let now = rt.now();
                st.input_at = now;
                match first {
                    Some(cmd) => {
                        cmd(&self, &mut st, now);
                        self.pump(&mut st);
                        self.shared.queued.fetch_sub(1, AtomicOrdering::AcqRel);
                    }
                    None => {
                        st.armed = None;
                        st.engine.handle_timeout(rt.now());
                        self.pump(&mut st);
                    }
                }
                for _ in 1..DRIVER_BATCH {
                    let Ok(cmd) = control.try_recv().or_else(|_| inbox.try_recv()) else { break };
                    let now = rt.now();
                    st.input_at = now;
                    cmd(&self, &mut st, now);
                    self.pump(&mut st);
                    self.shared.queued.fetch_sub(1, AtomicOrdering::AcqRel);
                }
                if !st.parked.is_empty() {
                    let now = rt.now();
                    st.input_at = now;
                    self.unpark(&mut st, now);
                }
                st.armed = st.engine.poll_timeout();
            }
            // Let connection tasks and handlers run between batches.
            yield_now().await;
        }
    }

    /// Drains the engine's output: frames to their queues, invocations spawned as tasks,
    /// cancellations to abort handles. Loops until the engine is quiet. Never runs a handler.
    fn pump(&self, st: &mut State) {
        loop {
            let mut overflowed = Vec::new();
            let mut orphans = Vec::new();
            while let Some(out) = st.engine.poll_output() {
                match out {
                    Output::Frame { conn, bytes } => {
                        let sent = match st.sinks.get(&conn) {
                            Some(Sink::Lines(tx)) => tx.try_send(bytes).is_ok(),
                            Some(Sink::Http(tx, ..)) => tx.try_send(HttpItem::Frame(bytes)).is_ok(),
                            None => true,
                        };
                        if !sent {
                            overflowed.push(conn);
                        }
                    }
                    Output::Respond { conn, head, body } => {
                        // The exchange is over for the engine: nothing more comes for `conn`.
                        if let Some(Sink::Http(tx, ..)) = st.sinks.remove(&conn) {
                            let _ = tx.try_send(HttpItem::Respond(head, body));
                        }
                    }
                    Output::Stream { conn, head } => {
                        if let Some(Sink::Http(tx, ..)) = st.sinks.get(&conn) {
                            if tx.try_send(HttpItem::Stream(head)).is_err() {
                                overflowed.push(conn);
                            }
                        }
                    }
                    Output::Invoke(inv) => match self.shared.rt.get() {
                        Some(rt) => self.spawn_handler(st, rt.as_ref(), inv),
                        None => orphans.push(inv.ticket),
                    },
                    Output::Answer { call, answers } => {
                        if let Some(tx) = st.asks.remove(&call) {
                            let _ = tx.try_send(answers);
                        }
                    }
                    Output::Cancel { call, reason } => {
                        st.traces.request_cancelled(call, reason, || self.now());
                        st.asks.remove(&call);
                        if let Some(h) = st.tasks.remove(&call) {
                            h.abort();
                        }
                    }
                    Output::Close { conn, reason: CloseReason::Stalled } => overflowed.push(conn),
                    Output::Close { conn, reason } => {
                        st.traces.session_closed(conn, reason, || self.now());
                        // Dropping the sender lets the writer flush what is queued, then stop.
                        st.sinks.remove(&conn);
                    }
                }
            }
            // Before the ended tasks: a task begun and ended within one input is registered
            // before it is unregistered.
            self.report_holdings(st);
            while let Some(record) = st.engine.poll_ended_task() {
                if let (Some(store), Some(rt)) = (&st.task_store, self.shared.rt.get()) {
                    let stored = store_ended_task(
                        rt.clone(),
                        store.as_ref(),
                        record,
                        st.cluster.clone(),
                        self.shared.task_store_failures.clone(),
                    );
                    rt.spawn(stored);
                }
            }
            self.publish_changes(st);
            let answered_claims = self.share_ledger(st);
            if st.engine.is_recording() {
                let now = self.now();
                while let Some(rec) = st.engine.poll_answered() {
                    st.traces.request_answered_here(rec, st.input_at, now);
                }
            }
            if overflowed.is_empty() && orphans.is_empty() {
                if answered_claims {
                    continue;
                }
                break;
            }
            let now = self.now();
            // A peer that does not read its replies loses its connection, not everyone's (a
            // stalled one is already closed in the engine; closing again does nothing).
            for conn in overflowed {
                if let Some(Sink::Http(_, dropped, cut)) = st.sinks.remove(&conn) {
                    dropped.store(true, std::sync::atomic::Ordering::Release);
                    if let Some(Cut(cut)) = cut {
                        let _ = cut.try_send(());
                    }
                }
                st.engine.close(now, conn);
            }
            // No runtime to run them on (nothing attached one): answered, not stranded.
            for ticket in orphans {
                let _ = st.engine.complete(now, ticket, Reply::Tool(Err(HandlerError::Panicked)));
            }
        }
    }

    /// Spawns an invocation's handler as its own task, abortable through `st.tasks`; its
    /// completion comes back to the driver as a command.
    fn spawn_handler(&self, st: &mut State, rt: &dyn Runtime, inv: Invocation<Handler>) {
        let call = inv.ticket.call();
        let id = st.engine.request_id(call);
        let session = st.engine.session_of(inv.conn);
        let span = st.traces.request_started(call, id, session, &inv.caller, &inv.request, || rt.now());
        let (ticket, fut) = self.run(inv);
        let fut = match span {
            Some(span) => Box::pin(tracing::Instrument::instrument(fut, span)),
            None => fut,
        };
        let (handle, registration) = AbortHandle::new_pair();
        st.tasks.insert(call, handle);
        let server = self.clone();
        let task = Abortable::new(
            async move {
                let reply = fut.await;
                server.submit(Box::new(move |_: &Server, st: &mut State, now: Instant| {
                    st.tasks.remove(&call);
                    // Stale: cancelled meanwhile, nothing to send.
                    let answered = st.engine.complete(now, ticket, reply);
                    st.traces.request_answered(call, answered, now);
                }));
            },
            registration,
        );
        rt.spawn(Box::pin(task.map(|_| ())));
    }

    /// Prepares an invocation's handler. Nothing of the handler runs here: the future starts it
    /// when first polled, on its own task, and catches panics so one bad handler cannot take the
    /// connection down; private failures are logged, never shown to the peer.
    fn run(&self, inv: Invocation<Handler>) -> (mcp_proto::Ticket, BoxFuture<Reply>) {
        let Invocation { ticket, caller, version, request, handler, client_extensions, .. } = inv;
        let ctx = RequestContext {
            caller,
            version,
            call: Some(ticket.call()),
            server: self.clone(),
            client_extensions: Arc::new(client_extensions),
        };
        let fut: BoxFuture<Reply> = match (handler.0, request) {
            (HandlerKind::Tool(f), Request::CallTool { name, arguments }) => {
                let what = format!("tool {name}");
                guarded(what, move || f(ToolCall { name, arguments, ctx }), Reply::Tool)
            }
            (HandlerKind::Resource(f), Request::ReadResource { uri, template, variables }) => {
                let what = format!("resource {uri}");
                guarded(what, move || f(ReadResource { uri, template, variables, ctx }), Reply::Resource)
            }
            (HandlerKind::Prompt(f), Request::GetPrompt { name, arguments }) => {
                let what = format!("prompt {name}");
                guarded(what, move || f(GetPrompt { name, arguments, ctx }), Reply::Prompt)
            }
            (HandlerKind::Completion(f), Request::Complete { reference, argument, value, context }) => {
                let what = format!("completion of {argument}");
                let req = Complete { reference, argument, value, context, ctx };
                guarded(what, move || f(req), Reply::Completion)
            }
            (HandlerKind::TaskStore(store), Request::GetTask { task_id }) => {
                let owner = ctx.caller.binding().to_owned();
                guarded(
                    format!("task store lookup of {task_id}"),
                    move || store.get(owner, task_id),
                    Reply::Task,
                )
            }
            // The engine pairs each request with the handler registered for it; anything else is
            // answered with the generic internal error.
            _ => Box::pin(std::future::ready(Reply::Tool(Err(HandlerError::Panicked)))),
        };
        (ticket, fut)
    }
}

/// Gives other tasks a turn: pending once, waking itself at once.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await;
}

/// Sleeps until `deadline`, or forever when there is none (a duration too long for `Instant`,
/// such as `Duration::MAX`, means "never").
pub(crate) fn sleep_until(rt: &dyn Runtime, deadline: Option<Instant>) -> BoxFuture<()> {
    match deadline {
        Some(deadline) => rt.sleep_until(deadline),
        None => Box::pin(std::future::pending()),
    }
}

/// The wall-clock time in unix milliseconds, which sealed request states expire by.
#[allow(clippy::disallowed_methods)] // the server layer is the shim side: it may read the clock
pub(crate) fn unix_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// The clock of a server that has no runtime yet (nothing is timed before the first connection).
#[allow(clippy::disallowed_methods)] // the server layer is the shim side: it may read the clock
fn clock() -> Instant {
    Instant::now()
}

/// Runs a handler with panics caught and private failures logged.
fn guarded<T: Send + 'static>(
    what: String,
    start: impl FnOnce() -> BoxFuture<Result<T, HandlerError>> + Send + 'static,
    wrap: fn(Result<T, HandlerError>) -> Reply,
) -> BoxFuture<Reply> {
    Box::pin(async move {
        // Called here, on the handler's task: even the synchronous part of a handler never
        // runs on the driver.
        let started = std::panic::catch_unwind(AssertUnwindSafe(start));
        let result = match started {
            Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        let result = result.unwrap_or_else(|panic| {
            tracing::error!(handler = what, panic = panic_text(&*panic), "handler panicked");
            Err(HandlerError::Panicked)
        });
        match &result {
            Err(HandlerError::Private(e)) => {
                // The detail stays in the server's log; the peer gets the generic error.
                tracing::error!(handler = what, error = %e, "handler failed");
            }
            Err(HandlerError::Failure(f)) => {
                // A typed failure is the tool's answer, not the server's fault; its cause, if
                // any, is the part the peer never sees.
                match f.cause() {
                    Some(cause) => {
                        tracing::warn!(handler = what, code = f.code, cause = %cause, "tool failed")
                    }
                    None => tracing::debug!(handler = what, code = f.code, "tool failed"),
                }
            }
            _ => {}
        }
        wrap(result)
    })
}

/// Tells the operator at start-up of a tool that envelopes make unpublishable: its output
/// schema is one the wrapper refuses, so every page that would list it fails (see
/// [`ServerBuilder::envelopes`]). The engine finds the same on first use; this says why.
fn warn_unwrappable(tool: &Tool) {
    let Some(schema) = tool.declared_output_schema() else { return };
    if let Err(e) = mcp_proto::wrap::prepare(schema, tool.declared_diagnostics_schema()) {
        tracing::warn!(tool = tool.name(), error = %e, "the tool's output schema cannot be wrapped for envelopes: it will not be published");
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(non-string panic payload)")
}

/// Writes an ended task to the store, then drops its directory entry: only once it is stored,
/// since until then the replica that ran it is the only one that can answer for it. A write
/// that fails (or has not finished when the task expires) is logged and counted
/// ([`Status::task_store_failures`]); the entry then stays, refreshed by the heartbeat, until
/// the task's TTL passes, when the engine forgets the task too.
fn store_ended_task(
    rt: Arc<dyn Runtime>,
    store: &dyn TaskStore,
    record: mcp_proto::TaskRecord,
    cluster: Option<cluster::Membership>,
    failures: Arc<StoreFailures>,
) -> BoxFuture<()> {
    let id = record.task_id.clone();
    let expires_ms = record.ended_unix_ms.saturating_add(record.ttl_ms);
    let until_expiry = move |rt: &dyn Runtime| {
        let left = Duration::from_millis(expires_ms.saturating_sub(unix_ms()));
        sleep_until(rt, rt.now().checked_add(left))
    };
    let put = store.put(record);
    Box::pin(async move {
        let expired = until_expiry(rt.as_ref());
        let outcome = match futures_util::future::select(put, expired).await {
            futures_util::future::Either::Left((outcome, _)) => outcome,
            futures_util::future::Either::Right(_) => {
                Err(StoreError::Unavailable("the write had not finished when the task expired".into()))
            }
        };
        if let Err(e) = outcome {
            let replica = cluster.as_ref().map(|m| m.replica.clone());
            tracing::warn!(task = %id, replica = ?replica, error = %e,
                "cannot store an ended task; the replica that ran it answers for it until its TTL");
            failures.record(&e);
            if cluster.is_some() {
                until_expiry(rt.as_ref()).await;
            }
        }
        if let Some(m) = cluster {
            m.forget(mcp_proto::HeldKind::Task, &id).await;
        }
    })
}

/// Writes to the task store that failed ([`Status::task_store_failures`],
/// [`Server::last_task_store_error`]).
#[derive(Default)]
struct StoreFailures {
    count: AtomicU64,
    last: Mutex<Option<String>>,
}

impl StoreFailures {
    fn record(&self, e: &StoreError) {
        self.count.fetch_add(1, AtomicOrdering::Relaxed);
        if let Ok(mut last) = self.last.lock() {
            *last = Some(e.to_string());
        }
    }
}

/// What [`Server::shutdown`] could not finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Calls still running when the budget ran out, cancelled.
    pub cancelled: usize,
}

/// What the server is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// Connections open.
    pub connections: usize,
    /// Handler tasks running.
    pub running_handlers: usize,
    /// Requests awaiting an answer.
    pub in_flight: usize,
    /// `subscriptions/listen` streams open.
    pub listens: usize,
    /// Legacy HTTP sessions alive.
    pub sessions: usize,
    /// Held SSE streams (legacy `GET` streams and HTTP listen streams).
    pub streams: usize,
    /// [`Server::shutdown`] has begun.
    pub shutting_down: bool,
    /// Progress and log notifications dropped because the stream they were for had a full
    /// queue (see [`Engine::pace`]).
    pub dropped_notifications: u64,
    /// Frames and completions waiting for the driver (see the crate docs): a backlog that
    /// stays high means the driver cannot keep up.
    pub queued_commands: usize,
    /// Frames of line connections held back while their connection is at its in-flight limit
    /// ([`Limits::max_parked_frames`](mcp_proto::Limits::max_parked_frames) each).
    pub parked_frames: usize,
    /// HTTP (TCP) connections [`HttpService::serve`] accepted that are still open.
    pub http_connections: usize,
    /// Work the engine turned away since the server started, by reason (counters).
    pub refusals: Refusals,
    /// Connections and requests the HTTP layer turned away before the engine saw them, by
    /// reason (counters; all zero for a server that serves no HTTP).
    pub http_refusals: HttpRefusals,
    /// Records of requests the engine answered itself that were dropped before the server
    /// traced them ([`EngineStatus::dropped_records`](mcp_proto::EngineStatus::dropped_records));
    /// it stays 0 while the driver drains them after every input, as it does.
    pub dropped_records: u64,
    /// Whether this replica is in touch with its cluster ([`ServerBuilder::cluster`]):
    /// [`ClusterHealth::Standalone`] for a server in none.
    pub cluster: ClusterHealth,
    /// Ended tasks the task store did not keep ([`TaskStore::put`] failed, or had not finished
    /// when the task expired), since the server started (a counter). Such a task stays
    /// reachable on this replica until its TTL (its directory entry is kept); the last error
    /// is [`Server::last_task_store_error`].
    pub task_store_failures: u64,
}

/// What the HTTP layer ([`HttpService`], and the accept loop of [`HttpService::serve`]) turned
/// away before the engine saw it, by reason, since the server started. Each counter only grows
/// (a Prometheus counter); the refusals the engine makes of HTTP requests (a full session
/// table, a stream seat, a frame over its bound once read) are in [`Refusals`] instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HttpRefusals {
    /// Connections closed unread because
    /// [`Limits::max_http_connections`](mcp_proto::Limits::max_http_connections) were open and
    /// their address held at least its fair share (or [`HttpService::admit`] said no).
    pub connections: u64,
    /// Connections closed unread because their address already held
    /// [`Limits::max_http_connections_per_peer`](mcp_proto::Limits::max_http_connections_per_peer),
    /// and forwarded requests refused (429) because the address another replica vouched for held
    /// it.
    pub per_peer: u64,
    /// Connections cut to make room for an address below its fair share of
    /// `max_http_connections`.
    pub displaced: u64,
    /// Connections closed because a request head did not arrive within
    /// [`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout) (hyper's own
    /// timeout: an idle keep-alive connection that it ends this way counts too).
    pub head_timeout: u64,
    /// Requests whose head exceeded
    /// [`Limits::max_head_bytes`](mcp_proto::Limits::max_head_bytes) (431), or hyper's buffer
    /// just above it (the connection closed).
    pub head_too_large: u64,
    /// Requests whose head broke a transport rule: a peer outside loopback under
    /// [`HttpConfig::loopback_only`](mcp_proto::http::HttpConfig::loopback_only), another path
    /// (404), a `Host` or `Origin` not allowed (403), a method (405), `Accept` (406) or
    /// `Content-Type` (415) not served, a malformed header (400), a transfer coding not
    /// implemented (501).
    pub head_rejected: u64,
    /// `POST` bodies over [`Limits::max_frame_bytes`](mcp_proto::Limits::max_frame_bytes),
    /// declared or found while reading (413).
    pub body_too_large: u64,
    /// `POST` bodies not read within
    /// [`Limits::body_read_timeout`](mcp_proto::Limits::body_read_timeout) (408).
    pub body_timeout: u64,
    /// `POST` bodies that ended early or could not be read (400).
    pub body_broken: u64,
}

impl HttpRefusals {
    /// Every counter with a stable snake_case name, for a metrics exporter.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("connections", self.connections),
            ("per_peer", self.per_peer),
            ("displaced", self.displaced),
            ("head_timeout", self.head_timeout),
            ("head_too_large", self.head_too_large),
            ("head_rejected", self.head_rejected),
            ("body_too_large", self.body_too_large),
            ("body_timeout", self.body_timeout),
            ("body_broken", self.body_broken),
        ]
        .into_iter()
    }
}

/// A reason the HTTP layer turned something away: one [`HttpRefusals`] counter each.
#[cfg(feature = "http")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HttpRefused {
    Connections,
    PerPeer,
    Displaced,
    HeadTimeout,
    HeadTooLarge,
    HeadRejected,
    BodyTooLarge,
    BodyTimeout,
    BodyBroken,
}

/// The live [`HttpRefusals`]: one relaxed atomic increment per refusal, from any task.
#[derive(Default)]
struct HttpCounters {
    connections: AtomicU64,
    per_peer: AtomicU64,
    displaced: AtomicU64,
    head_timeout: AtomicU64,
    head_too_large: AtomicU64,
    head_rejected: AtomicU64,
    body_too_large: AtomicU64,
    body_timeout: AtomicU64,
    body_broken: AtomicU64,
}

impl HttpCounters {
    #[cfg(feature = "http")]
    fn counter(&self, why: HttpRefused) -> &AtomicU64 {
        match why {
            HttpRefused::Connections => &self.connections,
            HttpRefused::PerPeer => &self.per_peer,
            HttpRefused::Displaced => &self.displaced,
            HttpRefused::HeadTimeout => &self.head_timeout,
            HttpRefused::HeadTooLarge => &self.head_too_large,
            HttpRefused::HeadRejected => &self.head_rejected,
            HttpRefused::BodyTooLarge => &self.body_too_large,
            HttpRefused::BodyTimeout => &self.body_timeout,
            HttpRefused::BodyBroken => &self.body_broken,
        }
    }

    fn snapshot(&self) -> HttpRefusals {
        let read = |c: &AtomicU64| c.load(AtomicOrdering::Relaxed);
        HttpRefusals {
            connections: read(&self.connections),
            per_peer: read(&self.per_peer),
            displaced: read(&self.displaced),
            head_timeout: read(&self.head_timeout),
            head_too_large: read(&self.head_too_large),
            head_rejected: read(&self.head_rejected),
            body_too_large: read(&self.body_too_large),
            body_timeout: read(&self.body_timeout),
            body_broken: read(&self.body_broken),
        }
    }
}

#[cfg(feature = "http")]
impl Server {
    /// Counts one refusal of the HTTP layer.
    pub(crate) fn http_refused(&self, why: HttpRefused) {
        // Counters only: no ordering with anything else is needed.
        self.shared.http_refusals.counter(why).fetch_add(1, AtomicOrdering::Relaxed);
    }
}

impl Status {
    /// Every value as a `(name, value)` pair with a stable snake_case name, for a metrics
    /// exporter: gauges first (`connections`, `running_handlers`, `in_flight`, `listens`,
    /// `sessions`, `streams`, `queued_commands`, `parked_frames`, `http_connections`,
    /// `shutting_down` as 0 or 1, `cluster_degraded` as 0 or 1, `cluster_queued`), then counters (`dropped_notifications_total` and one
    /// `refused_<reason>_total` per [`Refusals`] field, such as `refused_capacity_total`, one
    /// `http_refused_<reason>_total` per [`HttpRefusals`] field, such as
    /// `http_refused_per_peer_total`, `dropped_records_total` and `task_store_failures_total`).
    pub fn metrics(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let gauges = [
            ("connections", wide(self.connections)),
            ("running_handlers", wide(self.running_handlers)),
            ("in_flight", wide(self.in_flight)),
            ("listens", wide(self.listens)),
            ("sessions", wide(self.sessions)),
            ("streams", wide(self.streams)),
            ("queued_commands", wide(self.queued_commands)),
            ("parked_frames", wide(self.parked_frames)),
            ("http_connections", wide(self.http_connections)),
            ("shutting_down", u64::from(self.shutting_down)),
            ("cluster_degraded", u64::from(matches!(self.cluster, ClusterHealth::Degraded { .. }))),
            (
                "cluster_queued",
                match self.cluster {
                    ClusterHealth::Degraded { queued } => wide(queued),
                    _ => 0,
                },
            ),
            ("dropped_notifications_total", self.dropped_notifications),
        ];
        gauges
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .chain(self.refusals.iter().map(|(reason, value)| (format!("refused_{reason}_total"), value)))
            .chain(
                self.http_refusals
                    .iter()
                    .map(|(reason, value)| (format!("http_refused_{reason}_total"), value)),
            )
            .chain(std::iter::once(("dropped_records_total".to_owned(), self.dropped_records)))
            .chain(std::iter::once(("task_store_failures_total".to_owned(), self.task_store_failures)))
    }
}
