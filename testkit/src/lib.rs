//! Test support for the mcp-rs workspace, shared by the replay runner (`tests/`), the fuzz
//! targets (`fuzz/`), unit tests and the engine benches (`mcp-proto/benches/`), so that each
//! drives the engine and judges its output the same way:
//!
//! - [`standin`]: one shim stand-in: a fixed engine setup (deterministic keys and seed, a few
//!   tools, a resource, a template and a prompt), deterministic stand-in handlers, and
//!   [`StandIn`], which feeds an engine, runs what it asks for and collects what it emits,
//!   checking the shim contract (`Cancel` only for a call handed out; `complete` is `Stale`
//!   exactly when the call was cancelled) as it goes;
//! - [`check`]: one independent output checker: every emitted frame is JSON without repeated
//!   keys, within the response ceiling, and shaped as JSON-RPC; read with serde_json, never with
//!   the engine's own decoder;
//! - [`wire`]: validation of emitted frames against the official JSON Schema of each protocol
//!   version (the schemas are copied into `testkit/fixtures/schemas/`);
//! - [`card`]: validation of server cards (SEP-2127) against the extension's JSON Schema.
//!
//! Everything here reports a broken invariant loudly: the `check_*` functions and [`StandIn`]
//! panic, which is how libFuzzer and the test harness learn of a finding; [`check::try_message`]
//! and [`wire`] return the reason instead, for runners that report failures themselves.

pub mod card;
pub mod check;
pub mod standin;
pub mod wire;

pub use check::{
    answerable_ids, canon_id, check_frame, check_message, folds_to_id, no_repeated_keys, Checked,
};
pub use standin::{
    base_time, config, object, register, reply, Drained, ReplyKind, SmallJson, StandIn, TOOLS,
};
