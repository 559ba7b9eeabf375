//! Raw bytes into the strict decoder and the engine.
//!
//! Input: one selector byte, then one frame. The selector picks the session the frame meets:
//! `% 4` = 0 none (fresh connection), 1 `2025-03-26` (batches allowed), 2 `2025-06-18`,
//! 3 `2025-11-25`, each set up with `initialize` + `notifications/initialized`. Stateless
//! 2026-07-28 requests need no session: they carry their version in `params._meta`.
//!
//! One engine serves the whole process (registering tools compiles their schemas, which would
//! otherwise dominate every run); each input gets a fresh connection, closed at the end, and
//! the run checks that the close leaves nothing behind.
//!
//! The shim here drains the engine, then runs every invocation it was handed to completion at
//! once (the stand-in handlers of `mcp_fuzz`), and repeats until the engine is quiet.
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

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use libfuzzer_sys::fuzz_target;
use mcp_fuzz::{
    answerable_ids, base_time, check_frame, config, folds_to_id, open, register, reply, ReplyKind,
};
use mcp_proto::{Caller, CloseReason, Engine, FrameOutcome, Invocation, Limits, Output};
use serde_json::Value;

/// Small enough that libFuzzer's default `-max_len` (4096) reaches the frame limit, large enough
/// that every honest answer fits under the response ceiling.
const MAX_FRAME: usize = 2048;
const MAX_RESPONSE: usize = 16 * 1024;
const MAX_BATCH: usize = 16;
const MAX_ID_BYTES: usize = 256;

const VERSIONS: [Option<&str>; 4] = [None, Some("2025-03-26"), Some("2025-06-18"), Some("2025-11-25")];

thread_local! {
    static ENGINE: RefCell<Engine<()>> = RefCell::new(engine());
}

fn engine() -> Engine<()> {
    let mut limits = Limits::default();
    limits
        .max_frame_bytes(MAX_FRAME)
        .max_response_bytes(MAX_RESPONSE)
        .max_batch_len(MAX_BATCH)
        .max_id_bytes(MAX_ID_BYTES)
        .page_size(3);
    let mut engine = Engine::new(config(limits, None), base_time());
    register(&mut engine, 4);
    engine
}

/// Drains the engine, runs what it asked for, and repeats until it is quiet; returns the ids
/// answered (`None` for a `null` id) and the number of frames emitted.
fn drain(engine: &mut Engine<()>) -> (Vec<Option<String>>, usize) {
    let now = base_time();
    let mut answers = Vec::new();
    let mut frames = 0;
    loop {
        let mut handed: Vec<Invocation<()>> = Vec::new();
        let mut cancelled = HashSet::new();
        while let Some(out) = engine.poll_output() {
            match out {
                Output::Frame { bytes, .. } => {
                    frames += 1;
                    answers.extend(check_frame(&bytes, MAX_RESPONSE).answers);
                }
                Output::Invoke(inv) => handed.push(inv),
                Output::Cancel { call } => {
                    assert!(
                        handed.iter().any(|i| i.ticket.call() == call),
                        "Cancel for {call:?}, which the shim has not been handed (yet)"
                    );
                    assert!(cancelled.insert(call), "Cancel twice for {call:?}");
                }
                Output::Close { reason, .. } => panic!("the connection closed unasked: {reason:?}"),
                _ => {}
            }
        }
        if handed.is_empty() {
            return (answers, frames);
        }
        for inv in handed {
            let stale = cancelled.contains(&inv.ticket.call());
            let r = reply(&inv.request, &ReplyKind::Natural);
            let result = engine.complete(now, inv.ticket, r);
            assert_eq!(result.is_err(), stale, "complete is Stale exactly when the call was cancelled");
        }
    }
}

fn is_cancel(v: &Value) -> bool {
    v.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
}

fuzz_target!(|data: &[u8]| ENGINE.with(|e| run(&mut e.borrow_mut(), data)));

fn run(engine: &mut Engine<()>, data: &[u8]) {
    let Some((&selector, frame)) = data.split_first() else { return };
    let now = base_time();
    let conn = open(engine, now, Caller::anonymous()).expect("a connection opens");
    let session = VERSIONS[usize::from(selector % 4)];

    if let Some(version) = session {
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"fuzz","version":"0"}}}}}}"#
        );
        assert_eq!(engine.handle_frame(now, conn, init.as_bytes()), FrameOutcome::Reply);
        assert_eq!(drain(engine), (vec![Some("n:0".to_owned())], 1), "initialize is answered once");
        let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(engine.handle_frame(now, conn, initialized), FrameOutcome::NoReply);
        assert_eq!(drain(engine).1, 0, "notifications/initialized is not answered");
    }

    let shown = || String::from_utf8_lossy(frame).into_owned();
    let parsed = (frame.len() <= MAX_FRAME).then(|| serde_json::from_slice::<Value>(frame).ok()).flatten();
    let asked = answerable_ids(frame, MAX_ID_BYTES);

    let outcome = engine.handle_frame(now, conn, frame);
    let (answers, frames) = drain(engine);

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
    assert_eq!(engine.in_flight(conn), 0, "every call was completed");

    engine.close(now, conn);
    match engine.poll_output() {
        Some(Output::Close { conn: c, reason: CloseReason::Closed }) if c == conn => {}
        other => panic!("close of an idle connection: expected only Close, got {other:?}"),
    }
    assert!(engine.poll_output().is_none(), "close of an idle connection emitted more than Close");
}
