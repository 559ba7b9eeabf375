//! The engine-wide call table ([`Limits::max_calls`](crate::limits::Limits::max_calls)) and its fair
//! shares, through the engine's public API.

use std::time::Instant;

use serde_json::{json, Value};

use crate::caller::Caller;
use crate::cursor::KeyRing;
use crate::engine::{Config, ConnId, ConnKind, Engine, Implementation, Output, Seed};
use crate::registry::Tool;

struct Rig {
    engine: Engine<u32>,
    now: Instant,
    next_id: u64,
}

impl Rig {
    fn new(max_calls: usize) -> Self {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([7; 32]));
        config.limits.max_calls(max_calls);
        config.seed = Some(Seed([9; 32]));
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut engine = Engine::new(config, now);
        engine.registry_mut(now).add_tool(Tool::new("echo", "Echoes", json!({"type": "object"})), 1).unwrap();
        let _ = std::iter::from_fn(|| engine.poll_output()).count();
        Self { engine, now, next_id: 10 }
    }

    /// A stdio connection of `who` past its handshake.
    fn conn(&mut self, who: &str) -> ConnId {
        let conn = self.engine.open(self.now, ConnKind::Stdio, Caller::identified(who)).unwrap();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}});
        self.engine.handle_frame(self.now, conn, init.to_string().as_bytes());
        self.engine.handle_frame(
            self.now,
            conn,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        let _ = std::iter::from_fn(|| self.engine.poll_output()).count();
        conn
    }

    /// A `tools/call` on `conn`: admitted (a handler runs), or the error it was answered with.
    fn call(&mut self, conn: ConnId) -> Result<(), Value> {
        self.next_id += 1;
        let req = json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {}}});
        self.engine.handle_frame(self.now, conn, req.to_string().as_bytes());
        let outs: Vec<Output<u32>> = std::iter::from_fn(|| self.engine.poll_output()).collect();
        let mut refused = None;
        for o in outs {
            match o {
                // Held, unanswered: the call stays in flight for the test.
                Output::Invoke(inv) => {
                    inv.ticket.abandon();
                    return Ok(());
                }
                Output::Frame { bytes, .. } => refused = serde_json::from_slice(&bytes).ok(),
                _ => {}
            }
        }
        Err(refused.unwrap_or(Value::Null))
    }
}

/// One caller with many connections fills the table and is then refused, while a second
/// caller still gets its share; past twice the bound nobody gets in.
#[test]
fn a_full_call_table_admits_only_callers_below_their_share() {
    let mut rig = Rig::new(4);
    // Four connections of `greedy`, one call each: the per-connection bound never bites.
    let greedy: Vec<ConnId> = (0..5).map(|_| rig.conn("greedy")).collect();
    for conn in &greedy[..4] {
        rig.call(*conn).unwrap();
    }
    // Full, and greedy holds all 4 (its share alone): refused, on a fresh connection too.
    let refused = rig.call(greedy[4]).unwrap_err();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("share 4"), "{refused}");
    // `modest` is below its share (4 / 2 callers = 2): admitted twice, then refused.
    let modest = rig.conn("modest");
    rig.call(modest).unwrap();
    rig.call(modest).unwrap();
    let refused = rig.call(modest).unwrap_err();
    assert!(refused["error"]["message"].as_str().unwrap().contains("share 2"), "{refused}");
    assert_eq!(rig.engine.status().in_flight, 6);
    // Newcomers each get in below their share (now 1) until twice the bound: then nobody.
    let third = rig.conn("third");
    rig.call(third).unwrap();
    let fourth = rig.conn("fourth");
    rig.call(fourth).unwrap();
    assert_eq!(rig.engine.status().in_flight, 8);
    let fifth = rig.conn("fifth");
    let refused = rig.call(fifth).unwrap_err();
    assert_eq!(refused["error"]["code"], -32603, "capacity: {refused}");
    // A finished call frees its place and its caller's count: greedy's connection closed.
    rig.engine.close(rig.now, greedy[0]);
    let _ = std::iter::from_fn(|| rig.engine.poll_output()).count();
    assert_eq!(rig.engine.status().in_flight, 7);
    rig.call(fifth).unwrap();
    assert!(rig.call(greedy[4]).is_err(), "greedy is still above its share");
}
