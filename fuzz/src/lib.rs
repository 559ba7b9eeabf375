//! Shared harness for the mcp-proto fuzz targets. The engine setup, the stand-in handlers and
//! the output checker are the workspace's one test-support crate, `mcp-testkit` (re-exported
//! here); this crate adds the structured operations of the `engine` and `http` targets.
//!
//! Everything panics on a broken invariant: a panic is how libFuzzer learns of a finding.

pub mod http_ops;
pub mod ops;

use std::time::Instant;

use mcp_proto::{Caller, ConnId, ConnKind, Engine};
pub use mcp_testkit::check::{
    answerable_ids, canon_id, check_frame, check_message, folds_to_id, no_repeated_keys, Checked,
};
pub use mcp_testkit::standin::{
    base_time, config, object, register, reply, ReplyKind, SmallJson, StandIn, TOOLS,
};

/// Opens an anonymous stdio connection.
pub fn open(engine: &mut Engine<()>, now: Instant, caller: Caller) -> Option<ConnId> {
    engine.open(now, ConnKind::Stdio, caller).ok()
}
