//! Determinism as a checked contract: two fresh engines with the same configuration and seed,
//! given the same seeded random sequence of operations (frames, completions, closes with calls
//! in flight, clock steps, registry edits, HTTP sessions), emit the same outputs, byte for byte
//! and in the same order (`Cancel`, `Close` and `Invoke` included).

use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::content::ToolOutput;
use crate::cursor::KeyRing;
use crate::http::{check_head, HttpConfig, RequestHead};
use crate::registry::Tool;

/// xorshift64*: small, seedable, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // Never zero: xorshift would stay at zero forever.
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const HTTP_INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// The workspace's independent output checker (`mcp-testkit`): JSON-RPC shape, no repeated
/// keys, judged with serde_json alone.
fn output_checker(bytes: &[u8]) {
    if let Err(e) = mcp_testkit::check::try_message(bytes, usize::MAX, true) {
        panic!("output checker: {e}");
    }
}

struct Sim {
    engine: Engine<u32>,
    now: Instant,
    rng: Rng,
    conns: Vec<ConnId>,
    pending: Vec<Ticket>,
    next_id: u64,
    log: Vec<String>,
}

impl Sim {
    fn new(seed: u64, origin: Instant) -> Self {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([5; 32]));
        config.seed = Some(Seed([seed as u8; 32]));
        config.limits.call_timeout(Some(Duration::from_millis(700)));
        config.limits.max_connections(16).max_in_flight(64);
        let mut engine = Engine::new(config, origin);
        let tool = Tool::new("echo", "Echoes", json!({"type": "object"}));
        engine.registry_mut(origin).add_tool(tool, 1).unwrap();
        let mut sim = Self {
            engine,
            now: origin,
            rng: Rng::new(seed),
            conns: Vec::new(),
            pending: Vec::new(),
            next_id: 0,
            log: Vec::new(),
        };
        sim.drain();
        sim
    }

    /// Takes every output, as text, keeping invocations to answer later.
    fn drain(&mut self) {
        let mut stale = Vec::new();
        while let Some(out) = self.engine.poll_output() {
            let line = match out {
                Output::Frame { conn, bytes } => {
                    // Stdio frames are JSON-RPC; SSE frames (HTTP streams) are event text.
                    if matches!(bytes.first(), Some(b'{' | b'[')) {
                        output_checker(&bytes);
                    }
                    format!("frame {conn:?} {}", String::from_utf8_lossy(&bytes))
                }
                Output::Invoke(inv) => {
                    let line = format!("invoke {:?} on {:?} {:?}", inv.ticket.call(), inv.conn, inv.request);
                    self.pending.push(inv.ticket);
                    line
                }
                Output::Cancel { call, .. } => {
                    if let Some(i) = self.pending.iter().position(|t| t.call() == call) {
                        stale.push(self.pending.remove(i));
                    }
                    format!("cancel {call:?}")
                }
                Output::Close { conn, reason } => {
                    self.conns.retain(|c| *c != conn);
                    format!("close {conn:?} {reason:?}")
                }
                Output::Respond { conn, head, body } => {
                    if !body.is_empty() {
                        output_checker(&body);
                    }
                    format!("respond {conn:?} {head:?} {}", String::from_utf8_lossy(&body))
                }
                Output::Stream { conn, head } => format!("stream {conn:?} {head:?}"),
                Output::Answer { call, answers } => format!("answer {call:?} {answers:?}"),
                // The cluster's, a task store's and a tracer's outputs: in the log too, so their
                // order is checked as everything else's.
                other => format!("{other:?}"),
            };
            self.log.push(line);
        }
        // A cancelled call's ticket is stale: completing it (after the drain, as every input)
        // must say so and send nothing.
        for t in stale {
            assert_eq!(
                self.engine.complete(self.now, t, Reply::Tool(Ok(ToolOutput::text("late")))),
                Err(Stale)
            );
            assert!(self.engine.poll_output().is_none(), "a stale completion sent something");
        }
    }

    fn frame(&mut self, conn: ConnId, text: &str) {
        let outcome = self.engine.handle_frame(self.now, conn, text.as_bytes());
        self.log.push(format!("> {conn:?} {outcome:?}"));
        self.drain();
    }

    /// A request id the peer chose: strings of varied shape, so a hash map keyed by them has no
    /// order to lean on.
    fn request_id(&mut self) -> String {
        self.next_id += 1;
        match self.rng.below(3) {
            0 => self.next_id.to_string(),
            1 => format!("\"r{:x}\"", self.rng.next()),
            _ => format!("\"{}-{}\"", self.rng.next() % 1000, self.next_id),
        }
    }

    fn call(&mut self, conn: ConnId) {
        let id = self.request_id();
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"n":{}}}}}}}"#,
            self.rng.below(100)
        );
        self.frame(conn, &text);
    }

    fn open(&mut self) {
        match self.engine.open(self.now, ConnKind::Stdio, Caller::anonymous()) {
            Ok(conn) => {
                self.log.push(format!("open {conn:?}"));
                self.drain();
                self.conns.push(conn);
                self.frame(conn, INIT);
                self.frame(conn, INITIALIZED);
            }
            Err(e) => {
                self.log.push(format!("open refused {e:?}"));
                self.drain();
            }
        }
    }

    fn http_initialize(&mut self) {
        let headers: [(&str, &[u8]); 3] = [
            ("Host", b"localhost:3000"),
            ("Content-Type", b"application/json"),
            ("Accept", b"application/json, text/event-stream"),
        ];
        let head = RequestHead { method: "POST", path: "/mcp", headers: &headers };
        let route = check_head(&HttpConfig::default(), &crate::limits::Limits::default(), &head).unwrap();
        let req = HttpRequest { head: &head, route, body: HTTP_INIT.as_bytes(), caller: Caller::anonymous() };
        let line = match self.engine.handle_http(self.now, req) {
            HttpReply::Full { head, body } => format!("http {head:?} {}", String::from_utf8_lossy(&body)),
            HttpReply::Pending(conn) => format!("http pending {conn:?}"),
        };
        self.log.push(line);
        self.drain();
    }

    fn step(&mut self) {
        let conn = (!self.conns.is_empty()).then(|| self.conns[self.rng.below(self.conns.len())]);
        match (self.rng.below(12), conn) {
            (0, _) | (_, None) => self.open(),
            (1..=3, Some(c)) => self.call(c),
            (4, Some(c)) => {
                // Closing with several calls in flight: their cancellations must come in one order.
                for _ in 0..3 + self.rng.below(4) {
                    self.call(c);
                }
                self.engine.close(self.now, c);
                self.log.push(format!("close {c:?}"));
                self.drain();
            }
            (5 | 6, _) if !self.pending.is_empty() => {
                let t = self.pending.remove(self.rng.below(self.pending.len()));
                let text = format!("done {}", self.rng.below(100));
                let r = self.engine.complete(self.now, t, Reply::Tool(Ok(ToolOutput::text(text))));
                self.log.push(format!("complete {r:?}"));
                self.drain();
            }
            (7, _) => {
                self.now += Duration::from_millis(self.rng.below(400) as u64);
                self.engine.handle_timeout(self.now);
                self.log.push(format!("timeout {:?}", self.engine.poll_timeout().map(|t| t - self.now)));
                self.drain();
            }
            (8, Some(c)) => {
                self.engine.close_input(self.now, c);
                self.log.push(format!("close_input {c:?}"));
                self.drain();
            }
            (9, _) => {
                let mut reg = self.engine.registry_mut(self.now);
                if reg.has_tool("extra") {
                    reg.remove_tool("extra");
                } else {
                    let tool = Tool::new("extra", "Extra", json!({"type": "object"}));
                    reg.add_tool(tool, 2).unwrap();
                }
                self.log.push("registry".into());
                self.drain();
            }
            (10, _) => self.http_initialize(),
            (_, Some(c)) => {
                // A progress or log line for a call in flight, when there is one.
                if let Some(t) = self.pending.first() {
                    let call = t.call();
                    let r = self.engine.log(self.now, call, LogLevel::Info, None, json!("working"));
                    self.log.push(format!("log {r:?}"));
                    self.drain();
                } else {
                    self.call(c);
                }
            }
        }
    }

    fn run(seed: u64, origin: Instant, steps: usize) -> Vec<String> {
        let mut sim = Sim::new(seed, origin);
        for _ in 0..steps {
            sim.step();
        }
        sim.engine.close_all(sim.now);
        sim.drain();
        for t in sim.pending.drain(..) {
            t.abandon();
        }
        sim.log
    }
}

#[test]
fn same_seed_same_output() {
    #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
    let origin = Instant::now();
    let mut closes_with_calls = 0;
    for seed in 1..=40 {
        let a = Sim::run(seed, origin, 250);
        let b = Sim::run(seed, origin, 250);
        if let Some(i) = a.iter().zip(&b).position(|(x, y)| x != y) {
            panic!("seed {seed}: the runs differ at output {i}:\n  first:  {}\n  second: {}", a[i], b[i]);
        }
        assert_eq!(a.len(), b.len(), "seed {seed}: one run emitted more");
        // The sequence must reach what it is meant to test: closes that cancel several calls.
        closes_with_calls += a
            .windows(4)
            .filter(|w| w.iter().take(3).all(|l| l.starts_with("cancel ")) && w[3].starts_with("close "))
            .count();
    }
    assert!(closes_with_calls >= 40, "only {closes_with_calls} closes cancelled 3 or more calls");
}

#[test]
fn session_ids_come_from_the_seed() {
    #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
    let origin = Instant::now();
    let ids = |seed: u64| -> Vec<String> {
        let mut sim = Sim::new(seed, origin);
        for _ in 0..3 {
            sim.http_initialize();
        }
        sim.log
            .iter()
            .filter_map(|l| l.split("\"Mcp-Session-Id\", \"").nth(1))
            .filter_map(|rest| rest.split('"').next())
            .map(str::to_owned)
            .collect()
    };
    let a = ids(1);
    assert_eq!(a.len(), 3, "{a:?}");
    for id in &a {
        assert!(crate::http::is_valid_session_id(id), "{id}");
        assert_eq!(id.len(), 43, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{id}");
    }
    assert!(a[0] != a[1] && a[1] != a[2] && a[0] != a[2], "{a:?}");
    assert_eq!(a, ids(1), "the same seed minted other ids");
    assert!(ids(2).iter().all(|id| !a.contains(id)), "another seed minted the same ids");
}

#[test]
fn no_seed_no_session() {
    #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
    let origin = Instant::now();
    let mut sim = Sim::new(1, origin);
    sim.engine.config.seed = None;
    sim.http_initialize();
    assert!(
        sim.log.last().is_some_and(|l| l.starts_with("http HttpHead { status: 500")),
        "{:?}",
        sim.log.last()
    );
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "before poll_output returned None")]
fn an_input_while_notifications_wait_for_the_drain_panics_in_debug_builds() {
    #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
    let origin = Instant::now();
    let mut sim = Sim::new(1, origin);
    sim.open();
    let tool = Tool::new("extra", "Extra", json!({"type": "object"}));
    sim.engine.registry_mut(origin).add_tool(tool, 2).unwrap();
    // Drained now, the list_changed would go out before the ping's answer; drained after, it
    // would follow it: the order would depend on the shim's schedule.
    let conn = sim.conns[0];
    sim.engine.handle_frame(origin, conn, br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#);
}

#[test]
fn answers_may_be_given_before_the_drain() {
    // Output without pending notifications is a FIFO: answering two calls in a row, then
    // draining, gives what draining between them gives.
    #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
    let origin = Instant::now();
    let run = |drain_between: bool| -> Vec<String> {
        let mut sim = Sim::new(1, origin);
        sim.open();
        let conn = sim.conns[0];
        sim.call(conn);
        sim.call(conn);
        let tickets: Vec<Ticket> = sim.pending.drain(..).collect();
        assert_eq!(tickets.len(), 2);
        for t in tickets {
            sim.engine.complete(origin, t, Reply::Tool(Ok(ToolOutput::text("x")))).unwrap();
            if drain_between {
                sim.drain();
            }
        }
        sim.drain();
        sim.log
    };
    assert_eq!(run(true), run(false));
}

#[test]
#[cfg(debug_assertions)]
fn the_drop_warner_arms_only_while_the_call_is_in_flight() {
    use std::sync::atomic::Ordering::Relaxed;
    #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
    let origin = Instant::now();
    let mut sim = Sim::new(1, origin);
    sim.open();
    let conn = sim.conns[0];
    sim.call(conn);
    sim.call(conn);
    let second = sim.pending.pop().unwrap();
    let first = sim.pending.pop().unwrap();
    let (a, b) = (first.live.clone(), second.live.clone());
    assert!(a.load(Relaxed) && b.load(Relaxed), "a ticket of a call in flight must warn when dropped");
    // Answered: consumed. Cancelled by a close: the engine forgot the call, so a drop is silent.
    sim.engine.complete(origin, first, Reply::Tool(Ok(ToolOutput::text("x")))).unwrap();
    sim.drain();
    assert!(!a.load(Relaxed));
    sim.engine.close(origin, conn);
    sim.drain();
    assert!(!b.load(Relaxed), "the ticket of a cancelled call still warns");
    drop(second);
}
