//! Raw bytes into the strict decoder and the engine.
//!
//! Input: one selector byte, then one frame. The selector picks the session the frame meets:
//! `% 4` = 0 none (fresh connection), 1 `2025-03-26` (batches allowed), 2 `2025-06-18`,
//! 3 `2025-11-25`, each set up with `initialize` + `notifications/initialized`. Stateless
//! 2026-07-28 requests need no session: they carry their version in `params._meta`.
//!
//! Each input gets a fresh engine (so a run cannot depend on what an earlier input left behind,
//! and a crash reproduces from its input alone), driven by the workspace's shim stand-in
//! (`mcp_testkit::StandIn`): it drains the engine, runs every invocation it was handed to
//! completion at once, and repeats until the engine is quiet. The run ends by closing the
//! connection and checking that the close leaves nothing behind.
//! Invariants:
//! - no panic;
//! - a frame that serde_json reads as an object with `"id"` and `"method"` is answered by
//!   exactly one frame; an object with `"method"` and no member that could be an id (no key
//!   case-folding onto `"id"`) gets no frame at all, unless it is over the frame limit (such a
//!   frame is refused unread);
//! - every request id is answered at most once; and exactly once when the frame is valid JSON
//!   under the frame limit, cancels nothing (`notifications/cancelled`) and is not a batch the
//!   session refuses whole;
//! - the immediate `FrameOutcome` agrees with what follows: `Reply` means exactly one frame,
//!   `NoReply` none;
//! - a `Cancel` names a call the shim has been handed and not yet finished, and finishing a
//!   cancelled call is `Stale` (and only then);
//! - every emitted frame is JSON without repeated keys, shaped as JSON-RPC, and no larger than
//!   `Limits::max_response_bytes`.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use mcp_fuzz::{answerable_ids, check_frame, config, folds_to_id, StandIn};
use mcp_proto::{CloseReason, FrameOutcome, Limits, Output};
use serde_json::Value;

/// Small enough that libFuzzer's default `-max_len` (4096) reaches the frame limit, large enough
/// that every honest answer fits under the response ceiling.
const MAX_FRAME: usize = 2048;
const MAX_RESPONSE: usize = 16 * 1024;
const MAX_BATCH: usize = 16;
const MAX_ID_BYTES: usize = 256;

const VERSIONS: [Option<&str>; 4] = [None, Some("2025-03-26"), Some("2025-06-18"), Some("2025-11-25")];

fn standin() -> StandIn {
    let mut limits = Limits::default();
    limits
        .max_frame_bytes(MAX_FRAME)
        .max_response_bytes(MAX_RESPONSE)
        .max_batch_len(MAX_BATCH)
        .max_id_bytes(MAX_ID_BYTES)
        .page_size(3);
    StandIn::new(config(limits, None), 4)
}

/// The answered ids (`None` for a `null` id) and the number of frames in `drained`, each frame
/// passing the output checker.
fn answers(drained: &mcp_testkit::Drained) -> (Vec<Option<String>>, usize) {
    let answers = drained.bytes().flat_map(|b| check_frame(b, MAX_RESPONSE).answers).collect();
    (answers, drained.frames.len())
}

fn is_cancel(v: &Value) -> bool {
    v.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
}

fuzz_target!(|data: &[u8]| run(data));

fn run(data: &[u8]) {
    let Some((&selector, frame)) = data.split_first() else { return };
    let mut sim = standin();
    let now = sim.now;
    let conn = sim.stdio(None);
    let session = VERSIONS[usize::from(selector % 4)];

    if let Some(version) = session {
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"fuzz","version":"0"}}}}}}"#
        );
        assert_eq!(sim.engine.handle_frame(now, conn, init.as_bytes()), FrameOutcome::Reply);
        assert_eq!(answers(&sim.drain()), (vec![Some("n:0".to_owned())], 1), "initialize is answered once");
        let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(sim.engine.handle_frame(now, conn, initialized), FrameOutcome::NoReply);
        assert_eq!(sim.drain().frames.len(), 0, "notifications/initialized is not answered");
    }

    let shown = || String::from_utf8_lossy(frame).into_owned();
    let parsed = (frame.len() <= MAX_FRAME).then(|| serde_json::from_slice::<Value>(frame).ok()).flatten();
    let asked = answerable_ids(frame, MAX_ID_BYTES);

    let outcome = sim.engine.handle_frame(now, conn, frame);
    let (answers, frames) = answers(&sim.drain());

    match outcome {
        FrameOutcome::Reply => assert_eq!(frames, 1, "Reply promised one frame: {}", shown()),
        FrameOutcome::NoReply => assert_eq!(frames, 0, "NoReply, yet {frames} frame(s): {}", shown()),
        FrameOutcome::UnknownConnection => panic!("the connection is open"),
    }
    match &parsed {
        Some(Value::Object(m)) if m.contains_key("id") && m.contains_key("method") => {
            assert_eq!(frames, 1, "a request gets exactly one frame: {}", shown());
        }
        Some(Value::Object(m)) if m.contains_key("method") && !m.keys().any(|k| folds_to_id(k)) => {
            assert_eq!(frames, 0, "a notification got an answer: {}", shown());
        }
        _ => {}
    }

    let mut owed: HashMap<String, i64> = HashMap::new();
    for id in asked {
        *owed.entry(id).or_default() += 1;
    }
    for id in answers.into_iter().flatten() {
        let o = owed.entry(id.clone()).or_default();
        *o -= 1;
        assert!(*o >= 0, "id {id} answered more often than asked: {}", shown());
    }
    let refused_batch = match &parsed {
        Some(Value::Array(items)) => {
            session != Some("2025-03-26") || items.is_empty() || items.len() > MAX_BATCH
        }
        _ => false,
    };
    let cancels = match &parsed {
        Some(Value::Array(items)) => items.iter().any(is_cancel),
        Some(v) => is_cancel(v),
        None => false,
    };
    if parsed.is_some() && !refused_batch && !cancels {
        for (id, o) in &owed {
            assert_eq!(*o, 0, "request {id} was never answered: {}", shown());
        }
    }
    assert_eq!(sim.engine.in_flight(conn), 0, "every call was completed");

    sim.engine.close(now, conn);
    match sim.engine.poll_output() {
        Some(Output::Close { conn: c, reason: CloseReason::Closed }) if c == conn => {}
        other => panic!("close of an idle connection: expected only Close, got {other:?}"),
    }
    assert!(sim.engine.poll_output().is_none(), "close of an idle connection emitted more than Close");
}
