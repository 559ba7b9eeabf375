//! The [`Server`] handle and its public API: building, registry edits at run time, in-process
//! calls, introspection and shutdown. The driver's side of `impl Server` is in `driver.rs`, the
//! calls a running handler makes back in `invoke.rs`, the status view in `status.rs`.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::Value;

use mcp_proto::{
    Caller, Config, Engine, HandlerError, Implementation, KeyRing, Prompt, PromptOutput, RegistryError,
    Reply, Resource, ResourceContents, Tool,
};

use crate::builder::ServerBuilder;
use crate::catalogue::Catalogue;
use crate::driver::{Command, State, StoreFailures, INBOX_LEN};
use crate::handler::{
    self, blocking_tool_fn, blocking_typed_tool_fn, prompt_fn, resource_fn, tool_fn, typed_tool,
    typed_tool_fn, GetPrompt, Handler, HandlerKind, IntoToolResult, ReadResource, RequestContext, ToolCall,
    ToolResult,
};
use crate::invoke::guarded;
use crate::panics::Gated;
use crate::runtime::{clock, sleep_until, unix_ms, Runtime};
use crate::status::HttpCounters;
use crate::{tasks, trace};

/// An MCP server: an engine, its handlers, and the connections it serves. Cheap to clone.
#[derive(Clone)]
pub struct Server {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    /// The engine and what serves it. Only the driver works the engine on the hot path; the
    /// synchronous operator calls (registry edits, status, a handler's progress and logs) lock
    /// it briefly too, as quinn's connection handles lock the state their driver owns.
    pub(crate) state: Mutex<State>,
    /// Frames and per-connection commands, in arrival order. Bounded, so a reader that sends
    /// faster than the driver takes frames waits for it (back-pressure on its own connection).
    pub(crate) inbox: (async_channel::Sender<Command>, async_channel::Receiver<Command>),
    /// Handler completions, closes from drop guards and wake-ups: never refused (each is bounded
    /// elsewhere: by the calls in flight, the connections open), and taken before the inbox, so
    /// finishing work comes before admitting more.
    pub(crate) control: (async_channel::Sender<Command>, async_channel::Receiver<Command>),
    /// Commands queued for the driver or in its hands, not yet run: while there are any, new
    /// commands queue behind them rather than run inline (see [`Server::run_inline`]).
    pub(crate) queued: AtomicUsize,
    /// Nanoseconds the engine's lock was held to work it, by the driver and inline
    /// ([`Status::engine_busy`]).
    pub(crate) engine_busy: std::sync::atomic::AtomicU64,
    /// Connections [`HttpService::serve`] accepted for this server that are still open: what
    /// [`Server::shutdown_and_close`] waits for.
    pub(crate) http_connections: AtomicUsize,
    /// Blocking handlers' closures still running ([`Status::blocking_handlers`]): what
    /// [`Server::shutdown`] waits for after it cancelled their calls.
    pub(crate) blocking: Arc<AtomicUsize>,
    /// What the HTTP layer turned away before the engine saw it ([`Status::http_refusals`]).
    pub(crate) http_refusals: HttpCounters,
    /// Ended tasks the task store did not keep ([`Status::task_store_failures`]).
    pub(crate) task_store_failures: Arc<StoreFailures>,
    /// The engine's limits (fixed once built), for the work done before the driver: decoding.
    pub(crate) limits: mcp_proto::Limits,
    /// The runtime of the first connection; the driver and the handlers run there.
    pub(crate) rt: OnceLock<Arc<dyn Runtime>>,
    /// Never sent on: closed when shutdown begins, which wakes every accept loop.
    pub(crate) stop_accepting: (async_channel::Sender<()>, async_channel::Receiver<()>),
    /// The resource server in front of the HTTP services ([`ServerBuilder::authorization`](crate::ServerBuilder::authorization)).
    #[cfg(feature = "auth")]
    pub(crate) authorization: OnceLock<crate::auth::Authorization>,
    /// The server card the HTTP services answer at `<endpoint>/server-card`
    /// ([`ServerBuilder::server_card`](crate::ServerBuilder::server_card)), built once.
    #[cfg(feature = "http")]
    pub(crate) card: OnceLock<mcp_proto::card::Card>,
    /// The catalogue this server shares ([`ServerBuilder::shared_catalogue`]), set when it
    /// joins at build time: registry edits then go through it to every member.
    pub(crate) catalogue: OnceLock<Catalogue>,
    /// The safety warnings raised ([`Status::warnings`](crate::Status::warnings)).
    pub(crate) warnings: crate::warnings::Raised,
    /// The application's identify hook ([`ServerBuilder::identify`]), set at build.
    #[cfg(feature = "http")]
    pub(crate) identify: OnceLock<crate::http::Identify>,
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
            #[cfg(feature = "auth")]
            authorization: None,
            #[cfg(feature = "http")]
            card: None,
            #[cfg(feature = "http")]
            identify: None,
            items: Vec::new(),
            task_store: Some(tasks::default_store()),
            cluster: None,
            advertise: None,
            catalogue: None,
        }
    }

    /// A server from a complete configuration. Unless it sets [`Config::seed`], the seed is
    /// drawn from the operating system's random source. The configuration is taken as it is:
    /// unlike [`ServerBuilder::build`](crate::ServerBuilder::build), this does not refuse an
    /// identity over [`MAX_IDENTITY_BYTES`](mcp_proto::MAX_IDENTITY_BYTES); run
    /// [`Implementation::check`](mcp_proto::Implementation::check) first.
    ///
    /// Installs the panic hook that gives a panicking handler's log its stack (see
    /// [`ServerBuilder::build`](crate::ServerBuilder::build)).
    pub fn from_config(mut config: Config) -> Self {
        crate::panics::install_hook();
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
                blocking: Arc::default(),
                http_refusals: HttpCounters::default(),
                task_store_failures: Arc::default(),
                queued: AtomicUsize::new(0),
                engine_busy: std::sync::atomic::AtomicU64::new(0),
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
                #[cfg(feature = "auth")]
                authorization: OnceLock::new(),
                #[cfg(feature = "http")]
                card: OnceLock::new(),
                catalogue: OnceLock::new(),
                warnings: crate::warnings::Raised::default(),
                #[cfg(feature = "http")]
                identify: OnceLock::new(),
                rt: OnceLock::new(),
                stop_accepting: async_channel::bounded(1),
            }),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock can only come from engine code, which does not panic on
        // input; recovering the guard keeps the other connections served.
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn now(&self) -> Instant {
        self.shared.rt.get().map_or_else(clock, |rt| rt.now())
    }

    /// Applies a registry change and delivers what it caused.
    pub(crate) fn registry<T>(&self, f: impl FnOnce(&mut mcp_proto::RegistryMut<'_, Handler>) -> T) -> T {
        let mut st = self.lock();
        let now = self.now();
        let t = f(&mut st.engine.registry_mut(now));
        self.release(st);
        t
    }

    /// Registers `tool` served by `handler` on this server, or on every server of its
    /// [`Catalogue`], all or none.
    fn add_tool_item(&self, tool: Tool, handler: Handler) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        self.add_item(
            |r| r.add_tool(tool.clone(), handler.clone()),
            |r| {
                r.remove_tool(&name);
            },
        )
    }

    /// Registers a tool served by an async closure, at any time; listening clients are told.
    /// A handler returning [`Json<T>`](crate::Json) declares `T`'s schema as the `outputSchema`, as
    /// with [`ServerBuilder::tool`]. On a server that shares a [`Catalogue`] the tool is
    /// registered on every server sharing it, or, when one refuses it, on none; so is every
    /// other `add_*` and `remove_*` of the registry.
    pub fn add_tool<F, Fut, R>(&self, tool: Tool, f: F) -> Result<(), RegistryError>
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        let tool = handler::with_output::<R>(tool)?;
        self.add_tool_item(tool.observed(), tool_fn(f))
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
        self.add_tool_item(tool.observed(), typed_tool_fn(f))
    }

    /// Registers a typed tool on a declaration of your own, at any time: its input schema
    /// becomes `A`'s unless it declares one (see [`ServerBuilder::typed_tool_with`]).
    pub fn add_typed_tool_with<A, F, Fut, R>(&self, tool: Tool, f: F) -> Result<(), RegistryError>
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        let tool = handler::with_output::<R>(handler::with_input::<A>(tool))?;
        self.add_tool_item(tool.observed(), typed_tool_fn(f))
    }

    /// Registers a blocking typed tool on a declaration of your own, at any time (see
    /// [`ServerBuilder::blocking_typed_tool_with`]).
    pub fn add_blocking_typed_tool_with<A, F, R>(&self, tool: Tool, f: F) -> Result<(), RegistryError>
    where
        A: DeserializeOwned + schemars::JsonSchema + 'static,
        F: Fn(A, ToolCall) -> R + Send + Sync + 'static,
        R: IntoToolResult + 'static,
    {
        let tool = handler::with_output::<R>(handler::with_input::<A>(tool))?;
        self.add_tool_item(tool.observed(), blocking_typed_tool_fn(f))
    }

    /// Registers a tool served by a blocking closure, at any time (see
    /// [`ServerBuilder::blocking_tool`]).
    pub fn add_blocking_tool<F, R>(&self, tool: Tool, f: F) -> Result<(), RegistryError>
    where
        F: Fn(ToolCall) -> R + Send + Sync + 'static,
        R: IntoToolResult + 'static,
    {
        let tool = handler::with_output::<R>(tool)?;
        self.add_tool_item(tool.observed(), blocking_tool_fn(f))
    }

    /// Unregisters a tool; whether it was registered.
    pub fn remove_tool(&self, name: &str) -> bool {
        self.remove_item(|r| r.remove_tool(name).is_some())
    }

    /// Registers a resource, at any time.
    pub fn add_resource<F, Fut>(&self, resource: Resource, f: F) -> Result<(), RegistryError>
    where
        F: Fn(ReadResource) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<ResourceContents>, HandlerError>> + Send + 'static,
    {
        let resource = resource.observed();
        let handler = resource_fn(f);
        let uri = resource.uri().to_owned();
        self.add_item(
            |r| r.add_resource(resource.clone(), handler.clone()),
            |r| {
                r.remove_resource(&uri);
            },
        )
    }

    /// Unregisters a resource; whether it was registered.
    pub fn remove_resource(&self, uri: &str) -> bool {
        self.remove_item(|r| r.remove_resource(uri).is_some())
    }

    /// Registers a prompt, at any time.
    pub fn add_prompt<F, Fut>(&self, prompt: Prompt, f: F) -> Result<(), RegistryError>
    where
        F: Fn(GetPrompt) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PromptOutput, HandlerError>> + Send + 'static,
    {
        let prompt = prompt.observed();
        let handler = prompt_fn(f);
        let name = prompt.name().to_owned();
        self.add_item(
            |r| r.add_prompt(prompt.clone(), handler.clone(), None),
            |r| {
                r.remove_prompt(&name);
            },
        )
    }

    /// Unregisters a prompt; whether it was registered.
    pub fn remove_prompt(&self, name: &str) -> bool {
        self.remove_item(|r| r.remove_prompt(name).is_some())
    }

    /// Tells subscribed clients that the resource at `uri` changed.
    pub fn notify_resource_updated(&self, uri: &str) {
        let mut st = self.lock();
        let now = self.now();
        st.engine.notify_resource_updated(now, uri);
        self.release(st);
    }

    /// Tells clients that `list` changed when only what a gate answers did (a role granted
    /// or revoked, say), so that they list again: every listener the server-wide gate admits,
    /// on every protocol version, on this replica and (in a cluster) on every other. An edit
    /// of the registry ([`add_tool`](Self::add_tool) and its kind) tells them already.
    pub fn notify_list_changed(&self, list: mcp_proto::ChangedList) {
        let mut st = self.lock();
        let now = self.now();
        st.engine.notify_list_changed(now, list);
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
            progress_told: Arc::default(),
            elicits: Default::default(),
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
    /// `data.reason: "shutting_down"`). Waits, within the same `budget`, for the closures of
    /// blocking handlers to return too (a cancelled async handler stops at once; a blocking
    /// closure cannot be stopped). Returns what did not finish in time: the calls it
    /// cancelled, and in [`ShutdownReport::cleanup_failed`] the blocking closures still
    /// running, which [`Status::blocking_handlers`](crate::Status::blocking_handlers) goes on
    /// counting until they return: the application's work to resolve. Sessions being served by
    /// `serve_stdio` then end with [`StdioEnd::Closed`](crate::StdioEnd::Closed); HTTP listeners stop accepting at once
    /// (`HttpService::serve` returns), and HTTP exchanges still open are closed with the rest.
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
        let blocking = || self.shared.blocking.load(AtomicOrdering::Acquire);
        loop {
            let in_flight = self.lock().engine.status().in_flight;
            if in_flight == 0 && blocking() == 0 {
                return ShutdownReport { cancelled: 0, cleanup_failed: 0 };
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
        ShutdownReport { cancelled, cleanup_failed: blocking() }
    }

    /// [`shutdown`](Self::shutdown), then waits for the HTTP connections
    /// `HttpService::serve` accepted to close, so the last answers reach their clients before
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

    /// The server's limits: every bound and timeout of its engine, its HTTP endpoints and its
    /// stdio sessions (fixed once built).
    pub fn limits(&self) -> &mcp_proto::Limits {
        &self.shared.limits
    }
}

/// What [`Server::shutdown`] could not finish.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Calls still running when the budget ran out, cancelled.
    pub cancelled: usize,
    /// Blocking handlers' closures still running when the budget ran out (seed 000's
    /// `cleanup_failed`): their calls are answered, but the work goes on until they return.
    pub cleanup_failed: usize,
}

impl ShutdownReport {
    /// Whether everything stopped within the budget: no call was cancelled, and no blocking
    /// closure is still running.
    pub fn is_clean(&self) -> bool {
        self.cancelled == 0 && self.cleanup_failed == 0
    }
}
