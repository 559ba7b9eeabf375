//! The runtime-independent application layer both shims share (feature `server`).
//!
//! The [`Engine`](crate::Engine) decides; this layer does what it asks, for any async runtime
//! that implements [`Runtime`]: it keeps the engine behind one lock, routes frames to
//! per-connection bounded queues, runs handlers (a handler that is ready at once is answered
//! inline, without spawning a task), aborts cancelled ones, turns panics into the generic
//! internal error, and drives the engine's timer. `mcp-tokio` and `mcp-smol` only supply the
//! runtime and the byte streams, so the two read as mirror images and behave identically.

mod handler;
mod stdio;

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_util::future::{AbortHandle, Abortable};
use futures_util::FutureExt;
use serde::de::DeserializeOwned;

pub use handler::{typed_tool, BoxFuture, Handler, IntoToolResult, ToolCall, ToolResult};
pub use stdio::{serve_lines, StdioEnd};

use handler::{ClosureTool, HandlerKind, TypedTool};

use crate::{
    CallId, Caller, Config, ConnId, ConnKind, Engine, HandlerError, Implementation, Invocation, KeyRing,
    OpenError, Output, RegistryError, Reply, Request, Tool,
};

/// What a shim supplies: spawning, sleeping and the clock.
pub trait Runtime: Clone + Send + Sync + 'static {
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
}

struct State {
    engine: Engine<Handler>,
    sinks: HashMap<ConnId, async_channel::Sender<Vec<u8>>>,
    tasks: HashMap<CallId, AbortHandle>,
    timer_started: bool,
    armed: Option<Instant>,
}

/// Builds a [`Server`].
pub struct ServerBuilder {
    config: Config,
    keys_set: bool,
    tools: Vec<(Tool, Handler)>,
}

/// Why [`ServerBuilder::build`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A tool could not be registered.
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
        R: IntoToolResult,
    {
        self.tools.push((tool, Handler(HandlerKind::Tool(Arc::new(ClosureTool(f))))));
        self
    }

    /// Adds a typed tool: the input schema is derived from `A`, and the handler receives the
    /// arguments deserialized.
    pub fn typed_tool<A, F, Fut, R>(mut self, name: &str, description: &str, f: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult,
    {
        let tool = typed_tool::<A>(name, description);
        self.tools.push((tool, typed_handler(f)));
        self
    }

    /// Builds the server, refusing the first tool that cannot be registered. Unless
    /// [`keys`](Self::keys) gave one, the cursor key is drawn from the operating system.
    pub fn build(mut self) -> Result<Server, BuildError> {
        if !self.keys_set {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(BuildError::Random)?;
            self.config.keys = KeyRing::new(key);
        }
        let server = Server::from_config(self.config);
        for (tool, handler) in self.tools {
            server.lock().engine.registry_mut().add_tool(tool, handler).map_err(BuildError::Registry)?;
        }
        Ok(server)
    }
}

fn typed_handler<A, F, Fut, R>(f: F) -> Handler
where
    A: DeserializeOwned + Send + 'static,
    F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoToolResult,
{
    Handler(HandlerKind::Tool(Arc::new(TypedTool { f, _args: std::marker::PhantomData })))
}

impl Server {
    /// A builder with default limits; [`build`](ServerBuilder::build) draws a random cursor key
    /// unless one is given, so cursors cannot be forged by anyone who was not handed a key.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        // Replaced in `build`; an all-zero key is never used to sign.
        let config = Config::new(Implementation::new(name, version), KeyRing::new([0; 32]));
        ServerBuilder { config, keys_set: false, tools: Vec::new() }
    }

    /// A server from a complete configuration.
    pub fn from_config(config: Config) -> Self {
        #[allow(clippy::disallowed_methods)] // the server layer is the shim side: it owns the clock
        let now = Instant::now();
        Server {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    engine: Engine::new(config, now),
                    sinks: HashMap::new(),
                    tasks: HashMap::new(),
                    timer_started: false,
                    armed: None,
                }),
                timer_bell: async_channel::bounded(1),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock can only come from engine code, which does not panic on
        // input; recovering the guard keeps the other connections served.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a tool served by an async closure, at any time.
    pub fn add_tool<F, Fut, R>(&self, tool: Tool, f: F) -> Result<(), RegistryError>
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult,
    {
        let handler = Handler(HandlerKind::Tool(Arc::new(ClosureTool(f))));
        self.lock().engine.registry_mut().add_tool(tool, handler)
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
        R: IntoToolResult,
    {
        let tool = typed_tool::<A>(name, description);
        self.lock().engine.registry_mut().add_tool(tool, typed_handler(f))
    }

    /// Unregisters a tool; whether it was registered.
    pub fn remove_tool(&self, name: &str) -> bool {
        self.lock().engine.registry_mut().remove_tool(name).is_some()
    }

    /// Requests in flight on every connection, and connections open: an operator's view.
    pub fn status(&self) -> Status {
        let st = self.lock();
        Status { connections: st.sinks.len(), running_handlers: st.tasks.len() }
    }

    /// Opens a connection whose frames go to a bounded queue; the receiver is the writer's.
    pub(crate) fn open(
        &self,
        rt: &impl Runtime,
        kind: ConnKind,
        caller: Caller,
    ) -> Result<(ConnId, async_channel::Receiver<Vec<u8>>), OpenError> {
        let mut st = self.lock();
        let conn = st.engine.open(rt.now(), kind, caller)?;
        let (tx, rx) = async_channel::bounded(st.engine.config().limits.queued_frames());
        st.sinks.insert(conn, tx);
        if !st.timer_started {
            st.timer_started = true;
            rt.spawn(Box::pin(self.clone().timer(rt.clone())));
        }
        Ok((conn, rx))
    }

    /// Runs `f` against the engine, then does everything it asked for.
    pub(crate) fn with_engine<T>(
        &self,
        rt: &impl Runtime,
        f: impl FnOnce(&mut Engine<Handler>, Instant) -> T,
    ) -> T {
        let mut st = self.lock();
        let t = f(&mut st.engine, rt.now());
        self.pump(rt, st);
        t
    }

    /// Drains the engine's output: frames to their queues, invocations run (inline when they
    /// finish at once), cancellations to abort handles. Loops until the engine is quiet.
    fn pump<'a>(&'a self, rt: &impl Runtime, mut st: MutexGuard<'a, State>) {
        loop {
            let mut invocations = Vec::new();
            let mut overflowed = Vec::new();
            while let Some(out) = st.engine.poll_output() {
                match out {
                    Output::Frame { conn, bytes } => {
                        if let Some(sink) = st.sinks.get(&conn) {
                            if sink.try_send(bytes).is_err() {
                                overflowed.push(conn);
                            }
                        }
                    }
                    Output::Invoke(inv) => invocations.push(inv),
                    Output::Cancel { call } => {
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
                let now = rt.now();
                for conn in overflowed {
                    st.sinks.remove(&conn);
                    st.engine.close(now, conn);
                }
                continue;
            }
            if invocations.is_empty() {
                break;
            }
            drop(st);
            let mut ready = Vec::new();
            let mut pending = Vec::new();
            for inv in invocations {
                let ticket_call = inv.ticket.call();
                let (ticket, mut fut) = run(inv);
                let waker = Waker::noop();
                match fut.as_mut().poll(&mut Context::from_waker(waker)) {
                    Poll::Ready(reply) => ready.push((ticket, reply)),
                    Poll::Pending => pending.push((ticket_call, ticket, fut)),
                }
            }
            st = self.lock();
            let now = rt.now();
            for (ticket, reply) in ready {
                // Stale: cancelled meanwhile, nothing to send.
                let _ = st.engine.complete(now, ticket, reply);
            }
            for (call, ticket, fut) in pending {
                let (handle, registration) = AbortHandle::new_pair();
                st.tasks.insert(call, handle);
                let server = self.clone();
                let rt2 = rt.clone();
                let task = Abortable::new(
                    async move {
                        let reply = fut.await;
                        let mut st = server.lock();
                        st.tasks.remove(&call);
                        let now = rt2.now();
                        let _ = st.engine.complete(now, ticket, reply);
                        server.pump(&rt2, st);
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
    async fn timer(self, rt: impl Runtime) {
        let bell = self.shared.timer_bell.1.clone();
        loop {
            let next = self.lock().armed;
            match next {
                None => {
                    if bell.recv().await.is_err() {
                        return;
                    }
                }
                Some(deadline) => {
                    let woke =
                        futures_util::future::select(Box::pin(bell.recv()), rt.sleep_until(deadline)).await;
                    if let futures_util::future::Either::Right(_) = woke {
                        let mut st = self.lock();
                        let now = rt.now();
                        st.engine.handle_timeout(now);
                        st.armed = None;
                        self.pump(&rt, st);
                    }
                }
            }
        }
    }
}

/// What the server is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// Connections open.
    pub connections: usize,
    /// Handlers running in the background (handlers that finished at once are not counted).
    pub running_handlers: usize,
}

/// Starts an invocation's handler; the future catches panics so one bad handler cannot take
/// the connection down.
fn run(inv: Invocation<Handler>) -> (crate::Ticket, BoxFuture<Reply>) {
    let Invocation { ticket, caller, version, request, handler, .. } = inv;
    let call_id = ticket.call();
    let fut: BoxFuture<Reply> = match (handler.0, request) {
        (HandlerKind::Tool(f), Request::CallTool { name, arguments }) => {
            let call = ToolCall { name, arguments, caller, version, call: call_id };
            match std::panic::catch_unwind(AssertUnwindSafe(|| f.call(call))) {
                Ok(fut) => Box::pin(
                    AssertUnwindSafe(fut)
                        .catch_unwind()
                        .map(|r| Reply::Tool(r.unwrap_or(Err(HandlerError::Panicked)))),
                ),
                Err(_) => Box::pin(std::future::ready(Reply::Tool(Err(HandlerError::Panicked)))),
            }
        }
    };
    (ticket, fut)
}

/// How long end of input waits for calls in flight before cancelling them. Default 10 s.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(10);
