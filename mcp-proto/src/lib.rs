//! A sans-I/O Model Context Protocol (MCP) server engine.
//!
//! This crate does no I/O, reads no clock, spawns nothing and draws no randomness. It is given
//! bytes and the current time, and it returns bytes to write and requests for application work.
//! Runtime shims (`mcp-tokio`, `mcp-smol`) drive it over stdio and HTTP; you can drive it from
//! your own event loop just as well.
//!
//! # The run loop
//!
//! Mutate, then drain. Every input is one method call taking the current time:
//!
//! | input | when |
//! |---|---|
//! | [`Engine::open`] | a connection (stdio session) starts |
//! | [`Engine::handle_frame`], or [`Decoded::new`] then [`Engine::handle_decoded`] | a frame arrived (decode on the connection's own thread or task, so a huge frame holds up nobody else) |
//! | [`Engine::handle_oversized_frame`] | a stdio line over the frame limit arrived |
//! | [`Engine::handle_http`], or [`Engine::handle_http_decoded`] | an HTTP request passed [`http::check_head`] |
//! | [`Engine::complete`] | a handler finished: hand back its [`Ticket`] with the reply |
//! | [`Engine::handle_timeout`] | the deadline [`Engine::poll_timeout`] gave has passed |
//! | [`Engine::close_input`], [`Engine::close`] | a connection's input ended; a connection is gone |
//! | [`Engine::registry_mut`], [`Engine::notify_resource_updated`] | the application changed what it serves |
//! | [`Engine::progress`], [`Engine::log`], [`Engine::ask`] | a running handler reports progress, logs, asks the client |
//! | [`Engine::shutdown`], [`Engine::close_all`] | the server stops |
//!
//! After each input, drain [`Engine::poll_output`] until it returns `None` (frames to write,
//! handlers to run, calls to cancel, connections to close, and, for a shim with a cluster, a
//! task store or a tracer, what they are owed: one queue for every kind of output, in the
//! order the engine decided), then call [`Engine::poll_timeout`]
//! and arrange to call [`Engine::handle_timeout`] at that instant (or sooner: an early call is
//! harmless). The deadline only moves after an input, so asking once per drained input is
//! enough. Debug builds panic on an input made while notifications an earlier input raised are
//! still waiting for that drain (see [`Engine::registry_mut`]); answering invocations after the
//! drain, as below, is always safe.
//!
//! Inside, the engine is grouped in wings (owned state on the ground floor, then the
//! transport, the protocol's methods, the extensions and the replica), each calling only
//! itself and the wings below it; the engine module's documentation draws the plan.
//!
//! The same inputs (bytes, times, [`Config::keys`], [`Config::seed`]) always give the same
//! output bytes in the same order: a test can pin the engine's behaviour byte for byte.
//!
//! The repository README ("Driving the engine from your own event loop") shows the same loop
//! as a program; `mcp-server` is a complete driver for async runtimes.
//! ```
//! use std::time::Instant;
//! use mcp_proto::{Caller, Config, ConnKind, Engine, Implementation, KeyRing, Output, Reply, Request, Tool, ToolOutput};
//!
//! let now = Instant::now();
//! let mut engine: Engine<&'static str> =
//!     Engine::new(Config::new(Implementation::new("demo", "1.0.0"), KeyRing::new([7; 32])), now);
//! let schema = serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}});
//! engine.registry_mut(now).add_tool(Tool::new("echo", "Echoes text", schema), "echo").unwrap();
//! let conn = engine.open(now, ConnKind::Stdio, Caller::anonymous()).unwrap();
//!
//! let frames = [
//!     r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
//!     r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
//!     r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
//! ];
//! let mut written = Vec::new();
//! let mut invoked = Vec::new();
//! for frame in frames {
//!     engine.handle_frame(now, conn, frame.as_bytes());
//!     loop {
//!         while let Some(out) = engine.poll_output() {
//!             match out {
//!                 Output::Frame { bytes, .. } => written.push(String::from_utf8(bytes).unwrap()),
//!                 // A real shim spawns the handler (`inv.handler`) and completes later.
//!                 Output::Invoke(inv) => invoked.push(inv),
//!                 _ => {}
//!             }
//!         }
//!         let Some(inv) = invoked.pop() else { break };
//!         let Request::CallTool { arguments, .. } = &inv.request else { unreachable!() };
//!         let text = arguments["text"].as_str().unwrap_or_default().to_owned();
//!         engine.complete(now, inv.ticket, Reply::Tool(Ok(ToolOutput::text(text)))).unwrap();
//!     }
//! }
//! assert_eq!(written[1], r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hi"}]}}"#);
//! ```
//!
//! # Guarantees
//!
//! - Every request frame gets exactly one reply; notifications get none.
//! - JSON is strict and lossless: repeated or case-folded keys are refused, ids keep their exact
//!   text, and no number is silently rounded: with `exact-json` every number keeps its exact
//!   text; without it, one that an `i64`, `u64` or `f64` would not carry exactly is refused.
//! - Every bound is in [`Limits`]; crossing one is a specific error, never a panic.
//! - Every error names who is to blame ([`Blame`]: malformed input, a misbehaving or
//!   incompatible peer, a bound, the application, API misuse, shutdown), and its HTTP status
//!   comes from that blame in one table ([`Blame::http_status`]), never from re-reading bytes.
//!
//! # Features
//!
//! Both off by default, so that depending on this crate changes nothing else in a binary.
//!
//! - `validation`: tool arguments and outputs checked against their JSON Schemas with
//!   `jsonschema` (and its regex engines: more than half of a small server's build). Without it,
//!   see [`schema`] for what is still checked.
//! - `exact-json`: every number kept exactly as sent and object keys in the order sent, through
//!   serde_json's `arbitrary_precision` and `preserve_order` (and jsonschema's
//!   `arbitrary-precision`). Cargo turns those on for every crate of the binary, where they
//!   change how serde_json parses (an `#[serde(untagged)]` enum no longer reads a number) and
//!   orders maps, hence the opt-in. Without it, a number an `i64`, `u64` or `f64` would not carry
//!   exactly (`12345678901234567890123`, `0.1000000000000000000001`, `1e400`) is refused, as
//!   invalid params when inside `params` (the message names it and this feature), and the
//!   engine's own objects are written with their keys sorted (serde_json's default `Map`).
#![forbid(unsafe_code)]
#![deny(unused_must_use)]

pub mod apps;
pub mod auth;
mod blame;
mod caller;
pub mod card;
mod content;
mod cursor;
mod engine;
mod extensions;
mod frame;
pub mod http;
pub mod interaction;
mod items;
mod json;
mod jsonrpc;
mod limits;
mod registry;
mod registry_error;
pub mod schema;
mod search;
pub mod skills;
mod slab;
pub mod sse;
pub mod stdio;
mod tool;
mod version;
pub mod wrap;

pub use apps::{App, AppCsp, AppError, AppPermissions, Visibility};
pub use blame::{Blame, Bound, Era};
pub use caller::{Caller, Gate, GatePanicked, Recheck};
pub use content::{
    Completion, Content, HandlerError, PromptMessage, PromptOutput, ResourceBody, ResourceContents,
    ResourceLink, Role, ToolFailure, ToolOutput,
};
pub use cursor::KeyRing;
pub use engine::{
    Answered, AnsweredRequest, AskError, Asked, CallId, CancelReason, Change, ChangedList, CloseReason,
    CompletionRef, Config, ConnId, ConnKind, Engine, EngineStatus, FrameOutcome, HttpHead, HttpReply,
    HttpRequest, IdentityTooLarge, Implementation, Introspection, Invocation, LogLevel, Mode, OpenError,
    Output, ProgressOutcome, Refusals, RegistryMut, Reply, Request, Seed, Stale, TaskError, TaskRecord,
    TaskStatus, Ticket, MAX_IDENTITY_BYTES, MAX_PENDING_CHANGES, TASKS_EXTENSION,
};
pub use engine::{
    Claim, ClaimResult, Record, SharedOutcome, CLAIM_MARGIN_MS, MAX_PENDING_CLAIMS, MAX_PENDING_RECORDS,
};
pub use engine::{HeldKind, Holding, MAX_PENDING_HOLDINGS};
pub use extensions::Extension;
pub use frame::Decoded;
pub use http::HttpRequestHead;
pub use items::{CacheHint, Prompt, PromptArgument, Resource, ResourceTemplate, TemplateVar};
pub use jsonrpc::{ErrorCode, RequestId, RpcError};
pub use limits::{Limits, SeatPolicy};
pub use registry_error::RegistryError;
pub use skills::Skill;
pub use tool::{TaskSupport, Tool};
pub use version::ProtocolVersion;
pub use wrap::{wrap_output_schema, WrapError};
