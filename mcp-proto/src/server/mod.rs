//! The runtime-independent application layer both shims share (feature `server`).
//!
//! The [`Engine`] decides; this layer does what it asks, for any async runtime
//! that implements [`Runtime`]: it keeps the engine behind one lock, routes frames to
//! per-connection bounded queues, runs handlers (a handler that is ready at once is answered
//! inline, without spawning a task), aborts cancelled ones, turns panics into the generic
//! internal error, and drives the engine's timer. `mcp-tokio` and `mcp-smol` only supply the
//! runtime and the byte streams (stdio, TCP sockets), so the two read as mirror images and
//! behave identically.

mod handler;
mod http;
mod stdio;

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_util::future::{AbortHandle, Abortable};
use futures_util::FutureExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use handler::{
    typed_tool, BoxFuture, Complete, GetPrompt, Handler, IntoToolResult, ReadResource, RequestContext,
    ToolCall, ToolResult,
};
pub use http::{
    ConnectionPermit, HttpOptions, HttpRuntime, HttpService, Listener, McpBody, McpService, PeerAddr,
    StreamDropped, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};
pub use stdio::{serve_lines, StdioEnd};

use handler::{completion_fn, prompt_fn, resource_fn, tool_fn, typed_tool_fn, HandlerKind};

use crate::{
    CallId, Caller, Completion, Config, ConnId, ConnKind, Engine, Gate, HandlerError, HttpHead, HttpReply,
    HttpRequest, Implementation, Invocation, KeyRing, LogLevel, OpenError, Output, Prompt, PromptOutput,
    RegistryError, Reply, Request, Resource, ResourceContents, ResourceTemplate, Tool,
};

/// What a shim supplies: spawning, sleeping and the clock.
pub trait Runtime: Send + Sync + 'static {
    /// Runs `fut` to completion in the background. Dropping what this returns must not cancel
    /// it; cancellation goes through an abort handle the server layer keeps.
    fn spawn(&self, fut: BoxFuture<()>);
    /// Completes at `deadline`.
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()>;
    /// The current time.
    fn now(&self) -> Instant;
}

/// An MCP server: an engine, its handlers, and the connections it serves. Cheap to clone.
#[derive(Clone)]
pub struct Server {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Rung when the engine's next deadline may have moved earlier.
    timer_bell: (async_channel::Sender<()>, async_channel::Receiver<()>),
    /// The runtime of the first connection; handlers and timers run there.
    rt: OnceLock<Arc<dyn Runtime>>,
    /// Never sent on: closed when shutdown begins, which wakes every accept loop.
    stop_accepting: (async_channel::Sender<()>, async_channel::Receiver<()>),
}

struct State {
    engine: Engine<Handler>,
    sinks: HashMap<ConnId, Sink>,
    tasks: HashMap<CallId, AbortHandle>,
    /// Handlers waiting for the client's answers ([`RequestContext::ask`]).
    asks: HashMap<CallId, async_channel::Sender<Answers>>,
    armed: Option<Instant>,
}

/// What an ask comes back with.
type Answers = Result<serde_json::Map<String, Value>, crate::AskError>;

/// Where a connection's output goes: a bounded queue read by its writer.
enum Sink {
    /// A line stream (stdio): each frame is one line.
    Lines(async_channel::Sender<Vec<u8>>),
    /// An HTTP exchange or stream: the response head, then (for a stream) SSE bytes. The flag
    /// is raised when the reader fell behind and was dropped, so its body ends in an error and
    /// the connection is cut, rather than waiting for a peer that does not read to take the rest.
    Http(async_channel::Sender<HttpItem>, Arc<std::sync::atomic::AtomicBool>, Option<Cut>),
}

/// Cuts the HTTP connection an exchange arrived on. hyper stops polling a response body while
/// the socket will not take more, so a reader that stopped reading never sees its body end:
/// the connection itself has to go.
#[derive(Clone, Debug)]
pub(crate) struct Cut(pub(crate) async_channel::Sender<()>);

/// The reading end of an HTTP exchange's queue.
pub(crate) struct HttpQueue {
    pub(crate) rx: async_channel::Receiver<HttpItem>,
    /// Raised when the engine dropped this reader for falling behind.
    pub(crate) dropped: Arc<std::sync::atomic::AtomicBool>,
}

/// One item for an HTTP exchange's writer, in the order the engine produced them.
#[derive(Debug)]
pub(crate) enum HttpItem {
    /// The whole (JSON) response; nothing follows.
    Respond(HttpHead, Vec<u8>),
    /// The head of an SSE response; [`HttpItem::Frame`]s follow until the queue ends.
    Stream(HttpHead),
    /// Ready-to-write SSE bytes.
    Frame(Vec<u8>),
}

/// Something registered before the server is built.
enum Item {
    Tool(Tool, Handler),
    Resource(Resource, Handler),
    Template(ResourceTemplate, Handler, Option<Handler>),
    Prompt(Prompt, Handler, Option<Handler>),
    Gate(Gate),
}

/// Builds a [`Server`].
pub struct ServerBuilder {
    config: Config,
    keys_set: bool,
    items: Vec<Item>,
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
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Registry(e) => e.fmt(f),
            BuildError::Random(e) => write!(f, "cannot draw a random cursor key: {e}"),
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

    /// Adds a tool served by an async closure.
    pub fn tool<F, Fut, R>(mut self, tool: Tool, f: F) -> Self
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        self.items.push(Item::Tool(tool, tool_fn(f)));
        self
    }

    /// Adds a typed tool: the input schema is derived from `A`, and the handler receives the
    /// arguments deserialized.
    pub fn typed_tool<A, F, Fut, R>(mut self, name: &str, description: &str, f: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        self.items.push(Item::Tool(typed_tool::<A>(name, description), typed_tool_fn(f)));
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
        let server = Server::from_config(self.config);
        {
            let mut st = server.lock();
            let now = server.now();
            let mut reg = st.engine.registry_mut(now);
            for item in self.items {
                match item {
                    Item::Tool(t, h) => reg.add_tool(t, h),
                    Item::Resource(r, h) => reg.add_resource(r, h),
                    Item::Template(t, h, c) => reg.add_template(t, h, c),
                    Item::Prompt(p, h, c) => reg.add_prompt(p, h, c),
                    Item::Gate(g) => {
                        reg.set_gate(Some(g));
                        Ok(())
                    }
                }
                .map_err(BuildError::Registry)?;
            }
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
        ServerBuilder { config, keys_set: false, items: Vec::new() }
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
                Ok(()) => config.seed = Some(crate::Seed(seed)),
                Err(e) => tracing::error!(error = %e, "cannot draw a random entropy seed"),
            }
        }
        Server {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    engine: Engine::new(config, clock()),
                    sinks: HashMap::new(),
                    tasks: HashMap::new(),
                    asks: HashMap::new(),
                    armed: None,
                }),
                timer_bell: async_channel::bounded(1),
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
    fn registry<T>(&self, f: impl FnOnce(&mut crate::RegistryMut<'_, Handler>) -> T) -> T {
        let mut st = self.lock();
        let now = self.now();
        let t = f(&mut st.engine.registry_mut(now));
        self.pump(st);
        t
    }

    /// Registers a tool served by an async closure, at any time; listening clients are told.
    pub fn add_tool<F, Fut, R>(&self, tool: Tool, f: F) -> Result<(), RegistryError>
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
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
        let tool = typed_tool::<A>(name, description);
        self.registry(|r| r.add_tool(tool, typed_tool_fn(f)))
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
        self.pump(st);
    }

    fn progress(
        &self,
        call: CallId,
        progress: serde_json::Number,
        total: Option<serde_json::Number>,
        message: Option<&str>,
    ) -> crate::ProgressOutcome {
        let mut st = self.lock();
        let now = self.now();
        let outcome = st.engine.progress(now, call, progress, total, message);
        self.pump(st);
        // Stale: the call already ended; nothing more goes out for it.
        outcome.unwrap_or(crate::ProgressOutcome::NoToken)
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<()> {
        match self.shared.rt.get() {
            Some(rt) => rt.sleep_until(rt.now() + duration),
            None => Box::pin(std::future::ready(())),
        }
    }

    fn can_ask(&self, call: CallId, request: &crate::interaction::InputRequest) -> bool {
        self.lock().engine.can_ask(call, request).is_ok()
    }

    async fn ask(
        &self,
        call: CallId,
        requests: Vec<(String, crate::interaction::InputRequest)>,
    ) -> Result<serde_json::Map<String, Value>, crate::AskError> {
        let rx = {
            let mut st = self.lock();
            let now = self.now();
            let asked = st.engine.ask(now, call, requests);
            let rx = match asked {
                Ok(crate::Asked::Pending) => {
                    let (tx, rx) = async_channel::bounded(1);
                    st.asks.insert(call, tx);
                    Ok(rx)
                }
                Ok(crate::Asked::Answered(answers)) => Err(Ok(answers)),
                Err(e) => Err(Err(e)),
            };
            self.pump(st);
            rx
        };
        match rx {
            // The sender goes when the call ends without answers (cancelled, timed out).
            Ok(rx) => rx.recv().await.unwrap_or(Err(crate::AskError::Stale)),
            Err(done) => done,
        }
    }

    fn log(&self, call: CallId, level: LogLevel, logger: Option<&str>, data: Value) {
        let mut st = self.lock();
        let now = self.now();
        // Stale: the call ended; a late log line has nowhere to go.
        let _ = st.engine.log(now, call, level, logger, data);
        self.pump(st);
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
            version: crate::ProtocolVersion::V2026_07_28,
            call: None,
            server: self.clone(),
        };
        let call = ToolCall { name: name.to_owned(), arguments, ctx };
        let reply = guarded(format!("tool {name}"), move || f(call), Reply::Tool).await;
        match reply {
            Reply::Tool(result) => result,
            _ => Err(HandlerError::Panicked),
        }
    }

    /// What `caller` is shown by the list methods, gates applied.
    pub fn visible_to(&self, caller: &Caller) -> crate::Introspection {
        self.lock().engine.visible_to(caller)
    }

    /// Everything registered, ignoring gates. **Never serve this to a remote caller**; see
    /// [`Introspection`](crate::Introspection).
    pub fn introspect(&self) -> crate::Introspection {
        self.lock().engine.introspect()
    }

    /// Shuts down gracefully: new requests are refused ("server is shutting down"), listen
    /// streams end, connections close as their calls finish, and calls still running after
    /// `budget` are cancelled and answered with that same refusal (`-32603`,
    /// `data.reason: "shutting_down"`). Returns what did not finish in time. Sessions being served by
    /// `serve_stdio` then end with [`StdioEnd::Closed`]; HTTP listeners stop accepting at once
    /// ([`HttpService::serve`] returns), and HTTP exchanges still open are closed with the rest.
    pub async fn shutdown(&self, budget: Duration) -> ShutdownReport {
        self.shared.stop_accepting.0.close();
        let deadline = {
            let mut st = self.lock();
            let now = self.now();
            st.engine.shutdown(now);
            self.pump(st);
            now + budget
        };
        loop {
            let in_flight = self.lock().engine.status().in_flight;
            if in_flight == 0 {
                return ShutdownReport { cancelled: 0 };
            }
            let Some(rt) = self.shared.rt.get() else { break };
            let now = rt.now();
            if now >= deadline {
                break;
            }
            // Polled rather than signalled: shutdown is rare and the budget coarse.
            rt.sleep_until((now + Duration::from_millis(10)).min(deadline)).await;
        }
        let mut st = self.lock();
        let now = self.now();
        let cancelled = st.engine.status().in_flight;
        // Every connection, HTTP sessions (which own their calls but have no sink) included.
        st.engine.close_all(now);
        self.pump(st);
        ShutdownReport { cancelled }
    }

    /// Connections open and handlers running: an operator's view.
    pub fn status(&self) -> Status {
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
        }
    }

    /// Opens a connection whose frames go to a bounded queue; the receiver is the writer's.
    pub(crate) fn open<R: Runtime + Clone>(
        &self,
        rt: &R,
        kind: ConnKind,
        caller: Caller,
    ) -> Result<(ConnId, async_channel::Receiver<Vec<u8>>), OpenError> {
        self.attach(rt);
        let mut st = self.lock();
        let conn = st.engine.open(self.now(), kind, caller)?;
        let (tx, rx) = async_channel::bounded(st.engine.config().limits.queued_frames());
        st.sinks.insert(conn, Sink::Lines(tx));
        Ok((conn, rx))
    }

    /// Makes `rt` the server's runtime unless it already has one, and starts the engine's timer
    /// on it. The first runtime wins: handlers and timers of every connection run there.
    pub(crate) fn attach<R: Runtime + Clone>(&self, rt: &R) {
        if self.shared.rt.set(Arc::new(rt.clone())).is_ok() {
            rt.spawn(Box::pin(self.clone().timer()));
        }
    }

    /// Hands one admitted HTTP request to the engine. A pending answer gets its queue (bounded by
    /// [`Limits::stream_queue_len`](crate::Limits::stream_queue_len), plus the head) registered
    /// before anything is pumped, so nothing the request causes can be lost.
    pub(crate) fn http_exchange(
        &self,
        req: HttpRequest<'_>,
        cut: Option<Cut>,
    ) -> Result<(HttpHead, Vec<u8>), (ConnId, HttpQueue)> {
        let mut st = self.lock();
        let now = self.now();
        let pending = match st.engine.handle_http(now, req) {
            HttpReply::Full { head, body } => Ok((head, body)),
            HttpReply::Pending(conn) => {
                let cap = st.engine.config().limits.stream_queue_len().saturating_add(1);
                let (tx, rx) = async_channel::bounded(cap);
                let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
                st.sinks.insert(conn, Sink::Http(tx, dropped.clone(), cut));
                Err((conn, HttpQueue { rx, dropped }))
            }
        };
        self.pump(st);
        pending
    }

    /// Completes once [`shutdown`](Self::shutdown) has begun: listeners stop accepting then.
    pub(crate) fn closing(&self) -> impl Future<Output = ()> + Send + 'static {
        let signal = self.shared.stop_accepting.1.clone();
        async move {
            // Nothing is ever sent: this returns when the channel is closed.
            let _ = signal.recv().await;
        }
    }

    /// Runs `f` against the engine, then does everything it asked for.
    pub(crate) fn with_engine<T>(&self, f: impl FnOnce(&mut Engine<Handler>, Instant) -> T) -> T {
        let mut st = self.lock();
        let now = self.now();
        let t = f(&mut st.engine, now);
        self.pump(st);
        t
    }

    /// Drains the engine's output: frames to their queues, invocations run (inline when they
    /// finish at once), cancellations to abort handles. Loops until the engine is quiet.
    fn pump<'a>(&'a self, mut st: MutexGuard<'a, State>) {
        loop {
            let mut invocations = Vec::new();
            let mut overflowed = Vec::new();
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
                    Output::Invoke(inv) => invocations.push(inv),
                    Output::Answer { call, answers } => {
                        if let Some(tx) = st.asks.remove(&call) {
                            let _ = tx.try_send(answers);
                        }
                    }
                    Output::Cancel { call } => {
                        st.asks.remove(&call);
                        if let Some(h) = st.tasks.remove(&call) {
                            h.abort();
                        }
                    }
                    Output::Close { conn, .. } => {
                        // Dropping the sender lets the writer flush what is queued, then stop.
                        st.sinks.remove(&conn);
                    }
                }
            }
            if !overflowed.is_empty() {
                // A peer that does not read its replies loses its connection, not everyone's.
                let now = self.now();
                for conn in overflowed {
                    if let Some(Sink::Http(_, dropped, cut)) = st.sinks.remove(&conn) {
                        dropped.store(true, std::sync::atomic::Ordering::Release);
                        if let Some(Cut(cut)) = cut {
                            let _ = cut.try_send(());
                        }
                    }
                    st.engine.close(now, conn);
                }
                continue;
            }
            let Some(rt) = self.shared.rt.get().filter(|_| !invocations.is_empty()) else { break };
            drop(st);
            let mut ready = Vec::new();
            let mut pending = Vec::new();
            for inv in invocations {
                let call = inv.ticket.call();
                let (ticket, mut fut) = self.run(inv);
                match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                    Poll::Ready(reply) => ready.push((ticket, reply)),
                    Poll::Pending => pending.push((call, ticket, fut)),
                }
            }
            st = self.lock();
            let now = self.now();
            for (ticket, reply) in ready {
                // Stale: cancelled meanwhile, nothing to send.
                let _ = st.engine.complete(now, ticket, reply);
            }
            for (call, ticket, fut) in pending {
                let (handle, registration) = AbortHandle::new_pair();
                st.tasks.insert(call, handle);
                let server = self.clone();
                let task = Abortable::new(
                    async move {
                        let reply = fut.await;
                        let mut st = server.lock();
                        st.tasks.remove(&call);
                        let now = server.now();
                        let _ = st.engine.complete(now, ticket, reply);
                        server.pump(st);
                    },
                    registration,
                );
                rt.spawn(Box::pin(task.map(|_| ())));
            }
        }
        let next = st.engine.poll_timeout();
        if next.is_some() && (st.armed.is_none() || next < st.armed) {
            st.armed = next;
            let _ = self.shared.timer_bell.0.try_send(());
        }
    }

    /// Sleeps until the engine's next deadline, re-arming whenever `pump` moves it earlier.
    async fn timer(self) {
        let bell = self.shared.timer_bell.1.clone();
        loop {
            let next = self.lock().armed;
            let (Some(deadline), Some(rt)) = (next, self.shared.rt.get()) else {
                if bell.recv().await.is_err() {
                    return;
                }
                continue;
            };
            let woke = futures_util::future::select(Box::pin(bell.recv()), rt.sleep_until(deadline)).await;
            if let futures_util::future::Either::Right(_) = woke {
                let mut st = self.lock();
                let now = self.now();
                st.engine.handle_timeout(now);
                st.armed = None;
                self.pump(st);
            }
        }
    }

    /// Starts an invocation's handler; the future catches panics so one bad handler cannot take
    /// the connection down, and logs private failures, which the peer never sees.
    fn run(&self, inv: Invocation<Handler>) -> (crate::Ticket, BoxFuture<Reply>) {
        let Invocation { ticket, caller, version, request, handler, .. } = inv;
        let ctx = RequestContext { caller, version, call: Some(ticket.call()), server: self.clone() };
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
            // The engine pairs each request with the handler registered for it; anything else is
            // answered with the generic internal error.
            _ => Box::pin(std::future::ready(Reply::Tool(Err(HandlerError::Panicked)))),
        };
        (ticket, fut)
    }
}

/// The wall-clock time in unix milliseconds, which sealed request states expire by.
#[allow(clippy::disallowed_methods)] // the server layer is the shim side: it may read the clock
fn unix_ms() -> u64 {
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
    start: impl FnOnce() -> BoxFuture<Result<T, HandlerError>>,
    wrap: fn(Result<T, HandlerError>) -> Reply,
) -> BoxFuture<Reply> {
    let started = std::panic::catch_unwind(AssertUnwindSafe(start));
    Box::pin(async move {
        let result = match started {
            Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        let result = result.unwrap_or_else(|panic| {
            tracing::error!(handler = what, panic = panic_text(&*panic), "handler panicked");
            Err(HandlerError::Panicked)
        });
        if let Err(HandlerError::Private(e)) = &result {
            // The detail stays in the server's log; the peer gets the generic error.
            tracing::error!(handler = what, error = %e, "handler failed");
        }
        wrap(result)
    })
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(non-string panic payload)")
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
    /// Handlers running in the background (handlers that finished at once are not counted).
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
}

/// How long end of input waits for calls in flight before cancelling them. Default 10 s.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(10);
