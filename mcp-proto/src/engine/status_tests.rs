//! How calls end as the shim sees it ([`Output::Cancel`]'s reason, what [`Engine::complete`]
//! answered) and the refusal counters of [`Engine::status`], on a line connection.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Answered, CancelReason, Config, ConnId, ConnKind, Engine, Implementation, Output, Reply};
use crate::caller::Caller;
use crate::content::{HandlerError, ToolOutput};
use crate::cursor::KeyRing;
use crate::engine::Ticket;
use crate::jsonrpc::{ErrorCode, RpcError};
use crate::registry::Tool;

struct Rig {
    engine: Engine<u32>,
    now: Instant,
    conn: ConnId,
    answered: Vec<super::AnsweredRequest>,
}

impl Rig {
    fn new() -> Self {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([7; 32]));
        config.limits.call_timeout(Some(Duration::from_secs(5)));
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut engine = Engine::new(config, now);
        engine.registry_mut(now).add_tool(Tool::new("t", "T", json!({"type": "object"})), 1).unwrap();
        let conn = engine.open(now, ConnKind::Stdio, Caller::anonymous()).unwrap();
        let mut rig = Rig { engine, now, conn, answered: Vec::new() };
        rig.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#);
        rig.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        rig
    }

    /// Sends `frame`; the outputs, but for the records of requests answered at once, set
    /// aside for [`Rig::answered`].
    fn send(&mut self, frame: &str) -> Vec<Output<u32>> {
        self.engine.handle_frame(self.now, self.conn, frame.as_bytes());
        self.drain()
    }

    fn drain(&mut self) -> Vec<Output<u32>> {
        let mut rest = Vec::new();
        while let Some(o) = self.engine.poll_output() {
            match o {
                Output::Answered(r) => self.answered.push(r),
                o => rest.push(o),
            }
        }
        rest
    }

    /// The requests the engine answered itself since the last call.
    fn answered(&mut self) -> Vec<super::AnsweredRequest> {
        self.drain();
        std::mem::take(&mut self.answered)
    }

    /// Calls the tool; the ticket of its invocation.
    fn call(&mut self, id: u32) -> Ticket {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "t"}});
        let outs = self.send(&frame.to_string());
        outs.into_iter()
            .find_map(|o| match o {
                Output::Invoke(inv) => Some(inv.ticket),
                _ => None,
            })
            .unwrap()
    }
}

fn cancels(outs: &[Output<u32>]) -> Vec<CancelReason> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Cancel { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

#[test]
fn complete_says_what_was_answered() {
    let mut rig = Rig::new();
    let t = rig.call(1);
    assert_eq!(rig.engine.request_id(t.call()).map(|id| id.as_json().to_owned()), Some("1".to_owned()));
    assert_eq!(rig.engine.session_of(rig.conn), Some(rig.conn));
    let ok = rig.engine.complete(rig.now, t, Reply::Tool(Ok(ToolOutput::text("x"))));
    assert_eq!(ok, Ok(Answered { error: None }));
    let t = rig.call(2);
    let public = HandlerError::Public(RpcError::new(ErrorCode::Other(-32050), "quota"));
    let failed = rig.engine.complete(rig.now, t, Reply::Tool(Err(public)));
    assert_eq!(failed, Ok(Answered { error: Some(ErrorCode::Other(-32050)) }));
    // A reply of the wrong kind is replaced by the engine's own error.
    let t = rig.call(3);
    let wrong = rig.engine.complete(rig.now, t, Reply::Resource(Ok(Vec::new())));
    assert_eq!(wrong, Ok(Answered { error: Some(ErrorCode::InternalError) }));
    assert_eq!(rig.engine.status().refusals, super::Refusals::default());
}

#[test]
fn cancellations_say_why() {
    let mut rig = Rig::new();
    let peer = rig.call(1);
    let outs = rig.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
    assert_eq!(cancels(&outs), [CancelReason::Peer]);
    peer.abandon();

    let late = rig.call(2);
    rig.now += Duration::from_secs(6);
    rig.engine.handle_timeout(rig.now);
    let outs: Vec<_> = std::iter::from_fn(|| rig.engine.poll_output()).collect();
    assert_eq!(cancels(&outs), [CancelReason::TimedOut]);
    assert_eq!(rig.engine.status().refusals.timed_out, 1);
    late.abandon();

    let stuck = rig.call(3);
    rig.engine.close_all(rig.now);
    let outs: Vec<_> = std::iter::from_fn(|| rig.engine.poll_output()).collect();
    assert_eq!(cancels(&outs), [CancelReason::Shutdown]);
    stuck.abandon();

    let mut rig = Rig::new();
    let orphan = rig.call(1);
    rig.engine.close(rig.now, rig.conn);
    let outs: Vec<_> = std::iter::from_fn(|| rig.engine.poll_output()).collect();
    assert_eq!(cancels(&outs), [CancelReason::Closed]);
    orphan.abandon();
}

#[test]
fn refused_connections_and_oversized_frames_are_counted() {
    let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([7; 32]));
    config.limits.max_connections(1).max_frame_bytes(64);
    #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
    let now = Instant::now();
    let mut engine: Engine<u32> = Engine::new(config, now);
    let conn = engine.open(now, ConnKind::Stdio, Caller::anonymous()).unwrap();
    assert!(engine.open(now, ConnKind::Stdio, Caller::anonymous()).is_err());
    assert_eq!(engine.status().refusals.capacity, 1);
    engine.handle_frame(now, conn, &[b' '; 100]);
    assert_eq!((engine.status().refusals.size, engine.status().refusals.frame_too_large), (1, 0));
    engine.handle_oversized_frame(now, conn, 100);
    let r = engine.status().refusals;
    assert_eq!((r.size, r.frame_too_large), (2, 1));
    let names: Vec<&str> = r.iter().filter(|(_, n)| *n > 0).map(|(name, _)| name).collect();
    assert_eq!(names, ["capacity", "size", "frame_too_large"]);
}

#[test]
fn nothing_is_recorded_unless_asked() {
    let mut rig = Rig::new();
    assert!(!rig.engine.is_recording());
    rig.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    rig.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    rig.send(r#"{"jsonrpc":"2.0","id":3,"method":"no/such"}"#);
    rig.send("{not json");
    assert_eq!(rig.answered(), Vec::new());
    assert_eq!(rig.engine.status().dropped_records, 0);
}

#[test]
fn requests_answered_at_once_are_recorded_with_method_name_id_and_code() {
    let mut rig = Rig::new();
    rig.engine.set_recording(true);
    rig.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    rig.send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
    let long = "x".repeat(4000);
    rig.send(&json!({"jsonrpc": "2.0", "id": 3, "method": long}).to_string());
    rig.send(&json!({"jsonrpc": "2.0", "id": 33, "method": "x".repeat(100)}).to_string());
    rig.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope"}}"#);
    rig.send(r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#);
    rig.send(r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":[]}"#);
    rig.send("{not json");
    // A call handed to its handler is the shim's to trace, not a record.
    let ticket = rig.call(6);
    let got: Vec<_> = rig
        .answered()
        .into_iter()
        .map(|r| {
            assert_eq!((r.conn, r.session), (Some(rig.conn), Some(rig.conn)));
            assert_eq!(r.caller.binding(), "");
            (r.method, r.name, r.id.map(|id| id.as_json().to_owned()), r.error_code)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("tools/list", None, Some("1".to_owned()), None),
            ("ping", None, Some("\"p\"".to_owned()), None),
            // Over the method bound, then merely unknown: neither is echoed.
            ("unknown", None, Some("3".to_owned()), Some(-32600)),
            ("unknown", None, Some("33".to_owned()), Some(-32601)),
            ("tools/call", Some("nope".to_owned()), Some("4".to_owned()), Some(-32602)),
            ("ping", None, Some("5".to_owned()), Some(-32602)),
            ("unknown", None, None, Some(-32700)),
        ]
    );
    let _ = rig.engine.complete(rig.now, ticket, Reply::Tool(Ok(ToolOutput::text("ok"))));
    assert_eq!(rig.answered(), Vec::new());

    rig.engine.set_recording(false);
    rig.send(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    assert_eq!(rig.answered(), Vec::new());
}

#[test]
fn records_past_the_cap_drop_the_oldest_and_are_counted() {
    let mut rig = Rig::new();
    rig.engine.set_recording(true);
    let cap = super::AnsweredRequest::QUEUE_CAP;
    // A shim that does not drain: past the cap the oldest records go, counted.
    for id in 0..cap + 3 {
        let frame = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        rig.engine.handle_frame(rig.now, rig.conn, frame.as_bytes());
    }
    let got = rig.answered();
    assert_eq!(got.len(), cap);
    assert_eq!(got[0].id.as_ref().map(|id| id.as_json()), Some("3"));
    assert_eq!(rig.engine.status().dropped_records, 3);
    // Turning recording off frees what was not drained.
    rig.engine.handle_frame(rig.now, rig.conn, br#"{"jsonrpc":"2.0","id":"last","method":"ping"}"#);
    rig.engine.set_recording(false);
    assert_eq!(rig.answered(), Vec::new());
}
