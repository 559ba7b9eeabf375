//! Building a server: [`ServerBuilder`], the items registered before the build and
//! [`BuildError`].

use std::future::Future;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use mcp_proto::{
    Completion, Config, Extension, Gate, HandlerError, KeyRing, Prompt, PromptOutput, RegistryError,
    Resource, ResourceContents, ResourceTemplate, Tool,
};

use crate::cluster;
use crate::cluster::ClusterError;
use crate::handler::{
    self, blocking_tool_fn, blocking_typed_tool_fn, completion_fn, prompt_fn, resource_fn, tool_fn,
    typed_tool, typed_tool_fn, Complete, GetPrompt, Handler, HandlerKind, IntoToolResult, ReadResource,
    ToolCall,
};
use crate::panics::{self, Gated};
use crate::server::Server;
use crate::tasks::TaskStore;

#[derive(Clone)]
pub(crate) enum Item {
    /// Boxed: a tool's declaration is by far the largest item.
    Tool(Box<Tool>, Handler),
    Resource(Resource, Handler),
    Template(ResourceTemplate, Handler, Option<Handler>),
    Prompt(Prompt, Handler, Option<Handler>),
    Gate(Gate),
    /// The re-check of held streams' callers ([`ServerBuilder::recheck`]).
    Recheck(mcp_proto::Recheck),
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
pub(crate) fn tool_item<R: IntoToolResult>(tool: Tool, handler: Handler) -> Item {
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
/// owns its registry (the engine owns all its state): a tool added or removed at run time
/// changes the server it is added to or removed from, unless the servers share a catalogue
/// ([`shared_catalogue`](Self::shared_catalogue)), which applies it to all.
#[derive(Clone)]
pub struct ServerBuilder {
    pub(crate) config: Config,
    #[cfg(feature = "auth")]
    pub(crate) authorization: Option<crate::auth::Authorization>,
    /// [`ServerBuilder::server_card`].
    #[cfg(feature = "http")]
    pub(crate) card: Option<mcp_proto::card::ServerCard>,
    /// [`ServerBuilder::identify`].
    #[cfg(feature = "http")]
    pub(crate) identify: Option<crate::http::Identify>,
    pub(crate) keys_set: bool,
    pub(crate) items: Vec<Item>,
    pub(crate) task_store: Option<Arc<dyn TaskStore>>,
    pub(crate) cluster: Option<cluster::Membership>,
    /// [`ServerBuilder::cluster_advertise`].
    pub(crate) advertise: Option<Arc<str>>,
    /// [`ServerBuilder::shared_catalogue`]: the catalogue each server built joins.
    pub(crate) catalogue: Option<crate::Catalogue>,
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
    /// The server's identity (`config_mut().server_info`) encodes to more than
    /// [`MAX_IDENTITY_BYTES`](mcp_proto::MAX_IDENTITY_BYTES) (4 KiB): every 2026-07-28 result
    /// carries it, so the server does not start with one that large.
    Identity(mcp_proto::IdentityTooLarge),
    /// The server card ([`ServerBuilder::server_card`]) would break its schema: the server has
    /// no description, say.
    #[cfg(feature = "http")]
    Card(mcp_proto::card::CardError),
    /// The builder shares a catalogue ([`ServerBuilder::shared_catalogue`]) that a run-time
    /// edit has changed since: the builder's items are no longer its contents.
    CatalogueChanged,
    /// The builder has both an authorization ([`ServerBuilder::authorization`]) and an
    /// identify hook ([`ServerBuilder::identify`]): two answers to who a request is from, with
    /// no rule a reader could guess for when they disagree. Use one.
    #[cfg(feature = "auth")]
    IdentifyWithAuthorization,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Registry(e) => e.fmt(f),
            BuildError::Random(e) => write!(f, "cannot draw a random cursor key: {e}"),
            BuildError::Cluster(e) => e.fmt(f),
            BuildError::Identity(e) => e.fmt(f),
            #[cfg(feature = "http")]
            BuildError::Card(e) => e.fmt(f),
            BuildError::CatalogueChanged => f.write_str(
                "the shared catalogue was changed at run time: a server built now would serve the \
                 builder's items, not the catalogue's; build every server that shares it before \
                 changing it",
            ),
            #[cfg(feature = "auth")]
            BuildError::IdentifyWithAuthorization => f.write_str(
                "the server has both an authorization and an identify hook: a request's caller \
                 must come from one of them; identify API keys or cookies with the hook, or \
                 tokens with the authorization, not both",
            ),
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

    /// Adds a tool served by an async closure. A handler that returns [`Json<T>`](crate::Json) declares
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
    /// arguments deserialized. A handler that returns [`Json<T>`](crate::Json) (or a `Result` of it)
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

    /// [`typed_tool`](Self::typed_tool) on a declaration of your own, for a typed tool that is
    /// also annotated, gated by scopes, task-capable or linked to an app: `tool` keeps all of
    /// that, and its input schema becomes `A`'s, unless `tool` declares one of its own (see
    /// below).
    ///
    /// Declare the tool with the placeholder schema `{"type": "object"}` (`{}` and an empty
    /// `properties` are placeholders too), or start from
    /// [`typed_tool::<A>`](crate::typed_tool), which already carries `A`'s. Any other schema
    /// is kept as written, as a declared `outputSchema` is kept over [`Json<T>`](crate::Json)'s:
    /// for constraints schemars cannot express, or a schema whose exact bytes matter. It is
    /// the schema the engine checks arguments against; arguments it admits that `A` refuses
    /// fail the call with the tool failure `invalid arguments`, never reaching `f`. What
    /// `#[tool]` (feature `macros`) expands to.
    ///
    /// ```
    /// # use mcp_server::{Server, ToolCall};
    /// # use mcp_proto::{TaskSupport, Tool};
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Wipe { path: String }
    ///
    /// let wipe = Tool::new("wipe", "Deletes a file", serde_json::json!({"type": "object"}))
    ///     .annotations(serde_json::json!({"destructiveHint": true}).as_object().cloned().unwrap_or_default())
    ///     .task_support(TaskSupport::Optional);
    /// let server = Server::builder("demo", "1.0.0")
    ///     .typed_tool_with(wipe, |w: Wipe, _: ToolCall| async move { format!("wiped {}", w.path) })
    ///     .build();
    /// assert!(server.is_ok());
    /// ```
    pub fn typed_tool_with<A, F, Fut, R>(mut self, tool: Tool, f: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolResult + 'static,
    {
        self.items.push(tool_item::<R>(handler::with_input::<A>(tool), typed_tool_fn(f)));
        self
    }

    /// Applies `register` to the builder: for the registration functions `#[tool]` generates
    /// (`add_tool` beside `async fn add`) and `#[tools]` returns (`value.tools()`), so that
    /// tools made by the macros and by hand read as one chain (feature `macros`).
    ///
    /// ```
    /// # #[cfg(feature = "macros")] {
    /// # use mcp_server::{Json, Server};
    /// #[derive(serde::Serialize, schemars::JsonSchema)]
    /// struct Sum { sum: i64 }
    ///
    /// /// Adds two integers.
    /// #[mcp_server::tool(read_only)]
    /// async fn add(
    ///     /// The first term.
    ///     a: i64,
    ///     /// The second term.
    ///     b: i64,
    /// ) -> Json<Sum> {
    ///     Json(Sum { sum: a + b })
    /// }
    ///
    /// let server = Server::builder("calc", "1.0.0").register(add_tool).build();
    /// assert!(server.is_ok());
    /// # }
    /// ```
    pub fn register(self, register: impl FnOnce(Self) -> Self) -> Self {
        register(self)
    }

    /// Adds a tool served by a blocking closure, for handlers that compute for long or block
    /// (file or database I/O through a synchronous API): each call runs on the runtime's
    /// blocking pool ([`Runtime::spawn_blocking`](crate::Runtime::spawn_blocking): tokio's `spawn_blocking`, smol's `unblock`),
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

    /// [`blocking_typed_tool`](Self::blocking_typed_tool) on a declaration of your own, whose
    /// input schema becomes `A`'s unless it declares one, as with
    /// [`typed_tool_with`](Self::typed_tool_with).
    pub fn blocking_typed_tool_with<A, F, R>(mut self, tool: Tool, f: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema + 'static,
        F: Fn(A, ToolCall) -> R + Send + Sync + 'static,
        R: IntoToolResult + 'static,
    {
        self.items.push(tool_item::<R>(handler::with_input::<A>(tool), blocking_typed_tool_fn(f)));
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

    /// Declares that handlers log to clients ([`RequestContext::log`](crate::RequestContext::log)): the server advertises
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
    /// servers given the same tools may publish them in different modes (and share their
    /// run-time edits with [`shared_catalogue`](Self::shared_catalogue)).
    pub fn mode(mut self, mode: mcp_proto::Mode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Protects the server's HTTP services with `authorization` (feature `auth`; see the
    /// [`auth`](crate::auth) module): every request to the endpoint needs an access token the
    /// verifier accepts, and the metadata is served at the well-known paths. Default none: the
    /// services take whatever [`Caller`](mcp_proto::Caller) the application's middleware puts
    /// in the request's extensions, and anonymous requests otherwise. stdio is unaffected.
    #[cfg(feature = "auth")]
    pub fn authorization(mut self, authorization: crate::auth::Authorization) -> Self {
        self.authorization = Some(authorization);
        self
    }

    /// Identifies the callers of the server's HTTP services with `hook` (feature `http`): API
    /// keys, session cookies, a header a trusted proxy sets, whatever the application's scheme.
    /// Default none: callers are who the application's middleware says (a
    /// [`Caller`](mcp_proto::Caller) in the request's extensions), else anonymous.
    ///
    /// The hook is given the request head (every header, cookies, `Host`, target, the
    /// connection's peer: the [`HttpRequestHead`](mcp_proto::HttpRequestHead) handlers read
    /// later) after the transport rules passed it and before the body is read, on the request's
    /// own task, for every request to the endpoint of every HTTP service of the server
    /// (`serve_http`, `serve_https`, a mounted [`McpService`](crate::McpService)). It answers
    /// with:
    ///
    /// - `Ok(Some(caller))`: the request is `caller`'s (identity, roles, attributes), whatever a
    ///   middleware put in its extensions; its `peer` is filled in as for any caller, and its
    ///   binding ([`Caller::binding`](mcp_proto::Caller::binding)) keeps sessions, cursors and
    ///   subscriptions to it, so a legacy session opened by one identity is refused to another;
    /// - `Ok(None)`: nobody the hook knows; the request goes on as without a hook (a
    ///   middleware's `Caller`, else anonymous), for gates to judge;
    /// - `Err(refusal)`: answered at once with the refusal's 401 or 403, its message and its
    ///   `WWW-Authenticate` challenge ([`IdentityRefusal`](crate::IdentityRefusal)); the body is
    ///   never handed to anything (dropped unread, a bounded amount) and no handler runs.
    ///
    /// A slow hook delays only its own request, and is bounded: past
    /// [`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout) (10 s by
    /// default) the request is refused 503 with `Retry-After`. A hook that panics refuses only
    /// its request, with 500, and the panic is logged. Both are counted in
    /// [`HttpRefusals::identify_failed`](crate::HttpRefusals::identify_failed), refusals in
    /// [`HttpRefusals::unidentified`](crate::HttpRefusals::unidentified).
    ///
    /// With an authorization (feature `auth`: `ServerBuilder::authorization`) the token is the
    /// caller's identity, and [`build`](Self::build) refuses a builder with both
    /// (`BuildError::IdentifyWithAuthorization`). A request another replica of a cluster
    /// forwards is identified again where it is answered, from the same headers. stdio is
    /// unaffected (its caller is given to `serve_stdio_as`).
    ///
    /// ```
    /// use mcp_server::{IdentityRefusal, Server};
    /// use mcp_proto::Caller;
    ///
    /// let server = Server::builder("demo", "1.0.0")
    ///     .identify(|head| async move {
    ///         match head.header("x-api-key") {
    ///             None => Ok(None),
    ///             Some("k-alice") => Ok(Some(Caller::identified("alice").with_role("admin"))),
    ///             Some(_) => Err(IdentityRefusal::unauthorized("unknown API key")
    ///                 .with_challenge("ApiKey realm=\"mcp\"")),
    ///         }
    ///     })
    ///     .build();
    /// assert!(server.is_ok());
    /// ```
    ///
    /// Over `serve_https` with client certificates asked for (feature `tls`:
    /// `TlsConfig::client_certificates`), the head carries the chain the client proved it
    /// holds ([`HttpRequestHead::peer_certificates`](mcp_proto::HttpRequestHead::peer_certificates)),
    /// for the hook to map to a caller.
    #[cfg(feature = "http")]
    pub fn identify<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(Arc<mcp_proto::HttpRequestHead>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = crate::Identified> + Send + 'static,
    {
        self.identify = Some(crate::http::Identify::new(hook));
        self
    }

    /// Serves `card` (SEP-2127) at `<endpoint>/server-card` on every HTTP service of the server
    /// (`/mcp/server-card` for an endpoint at `/mcp`), as `application/mcp-server-card+json`,
    /// with a strong `ETag`, `If-None-Match`, open CORS, `Cache-Control: public, max-age=3600`,
    /// `HEAD` and a preflight `OPTIONS` (see [`Card::answer`](mcp_proto::card::Card::answer)).
    /// Default none: that path is the endpoint's like any other.
    ///
    /// The card's `version`, `description`, `title` and `websiteUrl` are the server's
    /// (`config_mut().server_info`), its protocol versions those `server/discover` lists; a card
    /// needs a description, so [`build`](Self::build) fails with [`BuildError::Card`] without
    /// one. With an authorization (feature `auth`: `ServerBuilder::authorization`) the card
    /// is the protected resource's
    /// ([`ServerCard::protected`](mcp_proto::card::ServerCard::protected)) and is
    /// served without a token, as its metadata is: clients read it before they have one. It
    /// holds nothing any gate decides (no tools, capabilities or extensions, by the SEP's
    /// design), so every caller gets the same card.
    #[cfg(feature = "http")]
    pub fn server_card(mut self, card: mcp_proto::card::ServerCard) -> Self {
        self.card = Some(card);
        self
    }

    /// Where ended tasks of the Tasks extension go beyond the engine (see [`TaskStore`]):
    /// each task that ends is written there, and a `tasks/get` for an id the engine does not
    /// hold is answered from it. Default an [`InMemoryTaskStore`](crate::InMemoryTaskStore) of 4096 records and 64 MiB; `None`
    /// keeps tasks in the engine's table only.
    pub fn task_store(mut self, store: Option<Arc<dyn TaskStore>>) -> Self {
        self.task_store = store;
        self
    }

    /// Sets the server-wide gate over the data methods (lists, calls, reads, gets): a caller it
    /// refuses is answered only that it is refused. Not the gate of the item added last: that
    /// is [`Tool::gate`](mcp_proto::Tool::gate) (and the other items' `gate`).
    ///
    /// Every gate the server is given, this one and those of its items (tools, resources,
    /// templates, prompts, extensions, skills), is watched: a gate that panics refuses the
    /// caller, and the server logs a `tracing` error naming the item (`gate`: `"server"`,
    /// `"tool <name>"`, `"prompt <name>"`, ...), the caller's binding, the panic's message
    /// with control characters escaped and, as for a panicking handler, its stack where
    /// available (see [`build`](Self::build)).
    pub fn server_gate(mut self, gate: Gate) -> Self {
        self.items.push(Item::Gate(gate));
        self
    }

    /// [`server_gate`](Self::server_gate), by its older name, which read as if it gated the
    /// item added last.
    pub fn gate(self, gate: Gate) -> Self {
        self.server_gate(gate)
    }

    /// Re-checks the caller of each held stream (a legacy session's `GET` stream, a
    /// `subscriptions/listen` stream, an SSE response kept open) before the server delivers to
    /// it. Default none: a stream is judged as the caller its request presented for as long as
    /// its connection lasts, so a revocation reaches it only through a [`gate`](Self::gate) that
    /// consults live state.
    ///
    /// `recheck` gets the stream's stored caller and returns its current form, or `None` when
    /// it is gone (a revoked session). It runs before each notification the stream is sent and
    /// at each keep-alive ([`Limits::keepalive`](mcp_proto::Limits::keepalive)), at most once per
    /// stream per engine input, and only for streams something is about to reach. On `None`, a
    /// panic, or a caller with another [`binding`](mcp_proto::Caller::binding) (another user or
    /// tenant: a stream is its creator's), the stream is closed without the notification
    /// ([`CloseReason::Revoked`](mcp_proto::CloseReason::Revoked)): the client sees its SSE
    /// response end. Otherwise the returned caller replaces the stored one, and the server-wide
    /// gate and the item's gate decide against it, so a role withdrawn at run time hides a gated
    /// tool's change from the stream.
    ///
    /// It runs on the engine's lock, like a gate: it must answer from memory the application
    /// keeps current, quickly and without blocking, or it holds up every connection.
    pub fn recheck(mut self, recheck: mcp_proto::Recheck) -> Self {
        self.items.push(Item::Recheck(recheck));
        self
    }

    /// Builds the server, refusing an identity over
    /// [`MAX_IDENTITY_BYTES`](mcp_proto::MAX_IDENTITY_BYTES) ([`BuildError::Identity`]) and the
    /// first item that cannot be registered. Unless [`keys`](Self::keys) gave one, the cursor key
    /// is drawn from the operating system.
    ///
    /// # Panics of handlers and gates
    ///
    /// A handler (or gate) that panics is caught: the client gets the generic internal error
    /// (a gate: a refusal), and the server logs a `tracing` error with the handler, the panic's
    /// message with control characters escaped and, where available, a `backtrace` field.
    /// Run with `RUST_BACKTRACE=1` (or `RUST_LIB_BACKTRACE=1`) to get the stack.
    ///
    /// The stack has to be taken where the panic happens, so the first server built (here or
    /// with [`Server::from_config`]) installs a panic hook, once per process. It chains to the
    /// hook installed before it, which still runs for every panic, so what a panic prints is
    /// unchanged; it records a stack only for panics inside this server's handler and gate
    /// calls. A hook the application installs after it replaces it (unless that one chains
    /// too): panics are then still caught and logged, without their stack.
    pub fn build(mut self) -> Result<Server, BuildError> {
        self.config.server_info.check().map_err(BuildError::Identity)?;
        if !self.keys_set {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(BuildError::Random)?;
            self.config.keys = KeyRing::new(key);
        }
        let envelopes = self.config.envelopes;
        // Apps first (a stable sort keeps every other order), so that tools may link to them
        // wherever they were added.
        self.items.sort_by_key(|i| !matches!(i, Item::App(_) | Item::Shell(_)));
        #[cfg(feature = "auth")]
        if let Some(auth) = &self.authorization {
            // The engine names the resource in its step-up refusals.
            self.config.protected = Some(auth.resource().clone());
        }
        #[cfg(feature = "auth")]
        if self.authorization.is_some() && self.identify.is_some() {
            return Err(BuildError::IdentifyWithAuthorization);
        }
        #[cfg(feature = "http")]
        let card = self.built_card()?;
        #[cfg(feature = "auth")]
        let keys = self.config.keys.clone();
        let server = Server::from_config(self.config);
        #[cfg(feature = "http")]
        if let Some(card) = card {
            let _ = server.shared.card.set(card);
        }
        #[cfg(feature = "http")]
        if let Some(hook) = self.identify {
            let _ = server.shared.identify.set(hook);
        }
        #[cfg(feature = "auth")]
        if let Some(auth) = self.authorization {
            let cluster = self.cluster.as_ref().map(|m| m.cluster.clone());
            let _ = server.shared.authorization.set(auth.for_server(&keys, cluster));
        }
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
                        reg.add_tool(t.observed(), h)
                    }
                    Item::Resource(r, h) => reg.add_resource(r.observed(), h),
                    Item::Template(t, h, c) => reg.add_template(t.observed(), h, c),
                    Item::Prompt(p, h, c) => reg.add_prompt(p.observed(), h, c),
                    Item::Extension(e) => reg.add_extension(e.observed()),
                    Item::App(app) => ServerBuilder::register_app(&mut reg, app, false),
                    Item::Shell(app) => ServerBuilder::register_app(&mut reg, app, true),
                    Item::Skill(s) => reg.add_skill(s.observed()),
                    Item::Gate(g) => {
                        reg.set_gate(Some(panics::observed_gate(&g, "server".to_owned())));
                        Ok(())
                    }
                    Item::Recheck(r) => {
                        reg.set_recheck(Some(r));
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
        if let Some(catalogue) = self.catalogue {
            catalogue.join(&server)?;
        }
        Ok(server)
    }
}

impl ServerBuilder {
    /// The card [`server_card`](Self::server_card) asked for, made from the server's identity
    /// and, with an authorization, its protected resource.
    #[cfg(feature = "http")]
    fn built_card(&self) -> Result<Option<mcp_proto::card::Card>, BuildError> {
        let Some(card) = self.card.clone() else { return Ok(None) };
        #[cfg(feature = "auth")]
        let card = match &self.authorization {
            Some(auth) => card.protected(auth.resource()),
            None => card,
        };
        card.build(&self.config.server_info).map(Some).map_err(BuildError::Card)
    }
}

/// Tells the operator at start-up of a tool that envelopes make unpublishable: its output
/// schema is one the wrapper refuses, so every page that would list it fails (see
/// [`ServerBuilder::envelopes`]). The engine finds the same on first use; this says why.
pub(crate) fn warn_unwrappable(tool: &Tool) {
    let Some(schema) = tool.declared_output_schema() else { return };
    if let Err(e) = mcp_proto::wrap::prepare(schema, tool.declared_diagnostics_schema()) {
        tracing::warn!(tool = tool.name(), error = %e, "the tool's output schema cannot be wrapped for envelopes: it will not be published");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_over_its_bound_is_refused_at_build() {
        let mut b = Server::builder("s", "1");
        b.config_mut().server_info.title = Some("t".repeat(mcp_proto::MAX_IDENTITY_BYTES));
        let Err(BuildError::Identity(e)) = b.build() else { panic!("a 4 KiB title should be refused") };
        assert_eq!(e.limit, mcp_proto::MAX_IDENTITY_BYTES);
        assert!(e.size > e.limit, "{e:?}");
        // Well inside the bound, the same builder starts.
        let mut b = Server::builder("s", "1");
        b.config_mut().server_info.title = Some("t".repeat(mcp_proto::MAX_IDENTITY_BYTES / 2));
        assert!(b.build().is_ok());
    }
}
