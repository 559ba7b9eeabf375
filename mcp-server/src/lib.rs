//! The runtime-independent server layer both shims share.
//!
//! The [`Engine`](mcp_proto::Engine) decides; this layer does what it asks, for any async runtime that implements
//! [`Runtime`]. Its shape is quinn's: one **driver** task owns the engine's hot path and is fed
//! through channels. A connection's task decodes each frame itself ([`Decoded::new`](mcp_proto::Decoded::new), the strict
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
//! - `mcp::request`: an `INFO` span `request` per request, over stdio and HTTP, its fields
//!   named as OpenTelemetry's semantic conventions for MCP name them, so that
//!   `tracing-opentelemetry` exports a server span users' dashboards already know:
//!   `otel.name` (`{method} {tool or prompt}`, or the method alone), `otel.kind = "server"`,
//!   `mcp.method.name`, `gen_ai.operation.name` (`execute_tool` for `tools/call`),
//!   `gen_ai.tool.name`, `gen_ai.prompt.name` or `mcp.resource.uri` (what the request names),
//!   `jsonrpc.request.id`, `mcp.protocol.version` (requests a handler serves), `mcp.session.id` (a
//!   handle of the stdio connection or legacy HTTP session, never the `Mcp-Session-Id`, which is
//!   a credential), `user.id` (the caller's identity) or else `client.address` (its peer), and
//!   `network.transport` (`pipe` for stdio, `tcp` for HTTP); then at the end `outcome` (this
//!   library's own: `ok`, `error`, or why it ended unanswered: a
//!   [`CancelReason`](mcp_proto::CancelReason) name such as `cancelled`, `timed_out`, `closed`,
//!   `shutdown`), and for a failure `error.type` (the JSON-RPC code, or that reason),
//!   `rpc.response.status_code` (the code) and `otel.status_code = "ERROR"`, and `duration_us`.
//!   A tool result with `isError: true` is a result here (the engine does not read results). A
//!   request a handler serves (`tools/call`, `resources/read`,
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
//!   parent of its requests' spans. Fields: `mcp.session.id`, `user.id` or `client.address`,
//!   `network.transport = "pipe"`, then
//!   `close_reason` (a [`CloseReason`](mcp_proto::CloseReason), or the [`OpenError`](mcp_proto::OpenError) of a refused connection) and
//!   `duration_us`. HTTP legacy sessions have none yet (their requests carry `mcp.session.id`).
//! - `mcp_server` (`ERROR` events): a handler's panic or private failure, a missing random seed.
//! - `mcp_server::http`, `mcp_server::handler`: HTTP connection limits (`DEBUG`), accept
//!   failures (`WARN`), response headers HTTP cannot carry and blocking-thread failures
//!   (`ERROR`), an identify hook that panicked (`ERROR`) or timed out (`WARN`).
//! - `mcp_server::warnings` (`WARN`): the safety [`Warning`]s, a protection the configuration
//!   leaves off. Each is also kept in [`Status::warnings`], and printed on stderr once per
//!   process when no subscriber would record it.
//!
//! When no subscriber wants these spans, a request costs the callsites' interest checks: no
//! field is formatted, nothing is allocated or kept. [`Server::status`] is the metrics view: a
//! [`Status`] snapshot of gauges (connections, handlers, calls in flight, queued work) and
//! counters of refusals by reason: the engine's ([`Refusals`](mcp_proto::Refusals)) and the HTTP layer's, made before
//! the engine sees a request ([`HttpRefusals`]: connection bounds, head and body bounds and
//! timeouts), listed as name/value pairs by [`Status::metrics`].

mod apps;
#[cfg(feature = "auth")]
pub mod auth;
#[cfg(feature = "http")]
mod body;
mod builder;
mod catalogue;
pub mod cluster;
mod driver;
mod epoch;
#[cfg(feature = "http")]
mod futures_io;
mod handler;
#[cfg(feature = "http")]
mod http;
mod invoke;
mod panics;
mod runtime;
mod server;
mod shards;
mod skills;
mod status;
mod stdio;
mod tasks;
pub mod testing;
#[cfg(feature = "tls")]
pub mod tls;
mod trace;
mod warnings;
pub mod widget;

#[cfg(feature = "http")]
pub use body::StreamDropped;
pub use builder::{BuildError, ServerBuilder};
pub use catalogue::Catalogue;
#[cfg(feature = "http")]
pub use cluster::forward::{FORWARDED_BY, FORWARDED_PEER, LOOKUP_TIMEOUT, SERVED_BY};
#[cfg(feature = "http")]
pub use cluster::nonces::{MAX_PEER_NONCES, PEER_TOKEN_TTL_MS};
#[cfg(feature = "http")]
pub use cluster::pool::{FORWARD_IDLE_TIMEOUT, MAX_IDLE_FORWARDS, MAX_IDLE_PER_HOLDER};
#[cfg(feature = "redis")]
pub use cluster::redis::RedisCluster;
pub use cluster::{
    Cluster, ClusterError, ClusterEvent, ClusterHealth, EventKind, InMemoryCluster, Located, SharedKeys,
};
#[cfg(feature = "http")]
pub use futures_io::FuturesIo;
pub use handler::{
    typed_form, typed_tool, AsJson, BoxFuture, Complete, Elicited, GetPrompt, Handler, IntoToolResult, Json,
    ReadResource, RequestContext, ToolCall, ToolResult,
};
#[cfg(feature = "http")]
pub use http::{
    ConnectionPermit, HttpRuntime, HttpService, Identified, IdentityRefusal, Listener, McpBody, McpService,
    PeerAddr,
};
pub use runtime::Runtime;
#[cfg(feature = "http")]
pub use runtime::{BoxIo, ForwardIo};
pub use server::{Server, ShutdownReport};
pub use shards::{default_shards, Shards};
pub use status::{HttpRefusals, Status};
pub use stdio::{serve_lines, StdioEnd};
pub use tasks::{InMemoryTaskStore, StoreError, TaskStore};
pub use warnings::{Warning, Warnings};

/// The names mcp-tokio and mcp-smol both re-export at their roots, listed once so that the two
/// shims offer the same ones (each glob-imports this). Not an API of its own: name these
/// through a shim, or through this crate's root.
#[doc(hidden)]
pub mod __shim {
    #[cfg(feature = "tls")]
    pub use crate::tls::{ClientCertificates, TlsConfig};
    pub use crate::widget;
    pub use crate::{
        typed_form, typed_tool, BoxFuture, BuildError, Complete, Elicited, GetPrompt, HttpRefusals,
        IntoToolResult, Json, ReadResource, RequestContext, Runtime, Server, ServerBuilder, Shards,
        ShutdownReport, Status, StdioEnd, ToolCall, ToolResult, Warning, Warnings,
    };
    #[cfg(feature = "http")]
    pub use crate::{HttpService, Identified, IdentityRefusal, McpBody, PeerAddr};
    pub use mcp_proto;
    pub use mcp_proto::http::HttpConfig;
    pub use mcp_proto::interaction::InputRequest;
    pub use mcp_proto::{
        App, AppCsp, AppPermissions, AskError, Caller, Completion, Content, Extension, Gate, HandlerError,
        HttpRequestHead, Limits, LogLevel, Mode, Prompt, PromptArgument, PromptMessage, PromptOutput,
        Recheck, Resource, ResourceContents, ResourceTemplate, RpcError, Skill, TaskSupport, TemplateVar,
        Tool, ToolFailure, ToolOutput,
    };
    // What a user's own code needs beside a shim, at the versions it was built with:
    // `typed_tool` bounds its arguments by `serde::Deserialize` and `schemars::JsonSchema`, so a
    // project that picked another major version (schemars 0.8 against our 1.x) would get trait
    // errors far from the cause. Derive through these with `#[serde(crate = "...::serde")]` and
    // `#[schemars(crate = "...::schemars")]`.
    pub use {schemars, serde, serde_json};
}

/// Makes a tool of an async fn (feature `macros`); see [`ServerBuilder::register`].
#[cfg(feature = "macros")]
pub use mcp_macros::tool;
/// Makes tools of the methods of an impl block (feature `macros`); see
/// [`ServerBuilder::register`].
#[cfg(feature = "macros")]
pub use mcp_macros::tools;

/// What the code `#[tool]` and `#[tools]` generate names, at one path in each crate that offers
/// the macros (`mcp_server::__macros`, `mcp_tokio::__macros`, `mcp_smol::__macros`), so that the
/// code compiles whichever of them the user depends on. Not an API: it changes with the macros.
#[cfg(feature = "macros")]
#[doc(hidden)]
pub mod __macros {
    pub use crate::{typed_tool, ServerBuilder, ToolCall};
    pub use mcp_macros::{tool_smol, tool_tokio, tools_smol, tools_tokio};
    pub use mcp_proto::{TaskSupport, Visibility};
    pub use {schemars, serde, serde_json};

    /// What a tool parameter's type must be: a value deserialized from the call's arguments,
    /// with a schema for the tool's `inputSchema`.
    #[diagnostic::on_unimplemented(
        message = "the tool parameter type `{Self}` has no JSON Schema or cannot be deserialized",
        label = "this parameter's type",
        note = "derive both for it: `#[derive(serde::Deserialize, schemars::JsonSchema)]` (through the \
                re-exported `serde` and `schemars` of the crate you use, with `#[serde(crate = ...)]` \
                and `#[schemars(crate = ...)]`)"
    )]
    pub trait ToolParam: serde::de::DeserializeOwned + schemars::JsonSchema {}

    impl<T: serde::de::DeserializeOwned + schemars::JsonSchema> ToolParam for T {}

    /// Checks, where a parameter is declared, that its type is a [`ToolParam`]: the derive of
    /// the arguments struct would report it too, without saying what to do.
    pub fn assert_param<T: ToolParam>() {}
}
