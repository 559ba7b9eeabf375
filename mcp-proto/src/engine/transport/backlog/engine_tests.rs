//! Pacing through the engine's public API: bursts, full queues, stalls, and what is dropped.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::caller::Caller;
use crate::cursor::KeyRing;
use crate::engine::{CloseReason, Config, ConnId, ConnKind, Engine, HttpReply, Implementation, Output};
use crate::engine::{HttpRequest, LogLevel};
use crate::engine::{ProgressOutcome, Seed};
use crate::http::{check_head, HttpConfig, RequestHead};
use crate::items::Prompt;
use crate::limits::Limits;
use crate::registry::Tool;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

struct Rig {
    engine: Engine<u32>,
    now: Instant,
    /// Tools added so far, to name the next one.
    tools: usize,
}

impl Rig {
    fn new(limits: impl FnOnce(&mut Limits)) -> Self {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([7; 32]));
        limits(&mut config.limits);
        config.seed = Some(Seed([9; 32]));
        // The tests log through a full queue.
        config.logging = true;
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut engine = Engine::new(config, now);
        let mut reg = engine.registry_mut(now);
        reg.add_tool(Tool::new("echo", "Echoes", json!({"type": "object"})), 1).unwrap();
        reg.add_prompt(Prompt::new("greet"), 2, None).unwrap();
        let mut rig = Self { engine, now, tools: 0 };
        rig.drain();
        rig
    }

    fn http(&mut self, method: &str, sid: Option<&str>, body: &str) -> HttpReply {
        let mut all: Vec<(&str, &[u8])> = vec![("Host", b"localhost:3000")];
        if method == "POST" {
            all.push(("Content-Type", b"application/json"));
            all.push(("Accept", b"application/json, text/event-stream"));
        } else {
            all.push(("Accept", b"text/event-stream"));
        }
        if let Some(sid) = sid {
            all.push(("Mcp-Session-Id", sid.as_bytes()));
        }
        let head = RequestHead { method, path: "/mcp", headers: &all };
        let route = check_head(&HttpConfig::default(), &Limits::default(), &head).unwrap();
        let req = HttpRequest { head: &head, route, body: body.as_bytes(), caller: Caller::anonymous() };
        self.engine.handle_http(self.now, req)
    }

    /// A legacy session past its handshake, and its `GET` stream, paced when `paced`.
    fn stream(&mut self, paced: bool) -> ConnId {
        let HttpReply::Full { head, .. } = self.http("POST", None, INIT) else { panic!("pending") };
        let sid = head.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")).unwrap();
        let sid = sid.1.clone();
        assert!(matches!(self.http("POST", Some(&sid), INITIALIZED), HttpReply::Full { .. }));
        let HttpReply::Pending(get) = self.http("GET", Some(&sid), "") else { panic!("no stream") };
        if paced {
            self.engine.pace(get);
        }
        get
    }

    fn drain(&mut self) -> Vec<Output<u32>> {
        std::iter::from_fn(|| self.engine.poll_output()).collect()
    }

    /// One tool added, as a `test_trigger_tool_change` call does, and the output drained.
    fn change_tools(&mut self) -> Vec<Output<u32>> {
        self.tools += 1;
        let tool = Tool::new(format!("t{}", self.tools), "Added", json!({"type": "object"}));
        self.engine.registry_mut(self.now).add_tool(tool, 3).unwrap();
        self.drain()
    }

    fn advance(&mut self, by: Duration) -> Vec<Output<u32>> {
        self.now += by;
        self.engine.handle_timeout(self.now);
        self.drain()
    }
}

/// The frames of `conn` among `outs`, as text.
fn frames(outs: &[Output<u32>], conn: ConnId) -> Vec<String> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Frame { conn: c, bytes } if *c == conn => {
                Some(String::from_utf8_lossy(bytes).into_owned())
            }
            _ => None,
        })
        .collect()
}

fn closed(outs: &[Output<u32>], conn: ConnId) -> Option<CloseReason> {
    outs.iter().find_map(|o| match o {
        Output::Close { conn: c, reason } if *c == conn => Some(*reason),
        _ => None,
    })
}

/// Issue 10: twenty tool-list changes, each drained on its own (twenty handlers finishing one
/// after the other), while the reader is behind by the burst. Unpaced, the stream is handed
/// twenty frames, past a 16-frame queue (the shim then cut it); paced, one `list_changed`
/// waits in the queue and the other nineteen fold into it.
#[test]
fn a_burst_of_list_changes_is_one_queued_entry_and_cuts_nobody() {
    let mut rig = Rig::new(|_| {});
    let paced = rig.stream(true);
    let unpaced = rig.stream(false);
    let opened = rig.drain();
    assert_eq!(frames(&opened, paced).len(), 1, "the priming event");
    let (mut to_paced, mut to_unpaced) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let outs = rig.change_tools();
        assert_eq!(closed(&outs, paced), None);
        to_paced.extend(frames(&outs, paced));
        to_unpaced.extend(frames(&outs, unpaced));
    }
    assert_eq!(to_unpaced.len(), 20, "the burst as the shim saw it before pacing");
    assert_eq!(to_paced.len(), 1, "{to_paced:?}");
    assert!(to_paced[0].contains("notifications/tools/list_changed"), "{to_paced:?}");
    // The reader takes what was queued: the next change is news again.
    rig.engine.written(rig.now, paced, 2);
    let outs = rig.drain();
    assert!(frames(&outs, paced).is_empty(), "nothing was held back: every change was folded");
    let outs = rig.change_tools();
    assert_eq!(frames(&outs, paced).len(), 1);
    // Behind by a burst for longer than the stall time, but reading: never cut.
    for _ in 0..5 {
        let outs = rig.advance(Duration::from_secs(15));
        assert_eq!(closed(&outs, paced), None);
        let n = frames(&outs, paced).len();
        rig.engine.written(rig.now, paced, n + 1);
        rig.drain();
    }
    assert_eq!(rig.engine.status().streams, 2);
}

/// A full queue holds change notifications back (coalesced) until the reader takes frames;
/// only a reader that takes nothing for `stall_timeout` while full is cut, and the clock starts
/// when it had something to read, not when it last read.
#[test]
fn a_full_queue_holds_changes_back_and_cuts_only_a_stalled_reader() {
    let mut rig = Rig::new(|l| {
        l.stream_queue(2).stall_timeout(Duration::from_secs(10)).keepalive(Duration::from_secs(3600));
    });
    let get = rig.stream(true);
    assert_eq!(frames(&rig.drain(), get).len(), 1, "the priming event");
    rig.engine.written(rig.now, get, 1);
    // Idle for a minute, then a burst fills the queue: the idle minute does not count.
    rig.advance(Duration::from_secs(60));
    assert_eq!(frames(&rig.change_tools(), get).len(), 1);
    assert_eq!(frames(&rig.change_tools(), get).len(), 0, "folded into the queued one");
    rig.engine.registry_mut(rig.now).add_prompt(Prompt::new("other"), 4, None).unwrap();
    let outs = rig.drain();
    assert_eq!(frames(&outs, get).len(), 1, "the prompts change fills the queue");
    rig.engine.registry_mut(rig.now).remove_tool("t1");
    assert!(frames(&rig.drain(), get).is_empty(), "folded: a tools change is still queued");
    assert_eq!(closed(&rig.advance(Duration::from_secs(9)), get), None);
    // The reader takes the tools change; the next one waits behind the prompts change.
    rig.engine.written(rig.now, get, 1);
    assert!(frames(&rig.drain(), get).is_empty(), "no change owed");
    rig.engine.registry_mut(rig.now).remove_tool("t2");
    assert_eq!(frames(&rig.drain(), get).len(), 1, "room for one");
    rig.engine.registry_mut(rig.now).remove_prompt("other");
    assert!(frames(&rig.drain(), get).is_empty(), "full: folded into the queued prompts change");
    assert!(frames(&rig.change_tools(), get).is_empty(), "full: folded into the queued tools change");
    // Full again; nine seconds since the reader last took something: kept.
    assert_eq!(closed(&rig.advance(Duration::from_secs(9)), get), None);
    assert_eq!(closed(&rig.advance(Duration::from_secs(2)), get), Some(CloseReason::Stalled));
    assert_eq!(rig.engine.status().streams, 0);
}

/// A change that finds the queue full of other notifications waits, owed, and goes out when
/// the reader takes a frame.
#[test]
fn a_change_held_back_goes_out_once_the_reader_takes_a_frame() {
    let mut rig = Rig::new(|l| {
        l.stream_queue(2).keepalive(Duration::from_secs(3600));
    });
    let get = rig.stream(true);
    assert_eq!(frames(&rig.drain(), get).len(), 1, "the priming event");
    rig.engine.registry_mut(rig.now).add_prompt(Prompt::new("other"), 4, None).unwrap();
    assert_eq!(frames(&rig.drain(), get).len(), 1, "priming and a prompts change fill the queue");
    assert!(frames(&rig.change_tools(), get).is_empty(), "held back");
    rig.engine.written(rig.now, get, 1);
    let sent = frames(&rig.drain(), get);
    assert!(sent.len() == 1 && sent[0].contains("tools/list_changed"), "{sent:?}");
}

/// While a paced connection's queue is full, progress and log notifications are dropped and
/// counted; the response still goes out, past the bound.
#[test]
fn a_full_queue_drops_progress_and_logs_never_responses() {
    let mut rig = Rig::new(|l| {
        l.stream_queue(2).progress_interval(Duration::ZERO);
    });
    let conn = rig.engine.open(rig.now, ConnKind::Stdio, Caller::anonymous()).unwrap();
    rig.engine.handle_frame(rig.now, conn, INIT.as_bytes());
    rig.engine.handle_frame(rig.now, conn, INITIALIZED.as_bytes());
    rig.drain();
    rig.engine.pace(conn);
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "echo", "arguments": {}, "_meta": {"progressToken": "p"}}});
    rig.engine.handle_frame(rig.now, conn, call.to_string().as_bytes());
    let Some(Output::Invoke(inv)) = rig.drain().into_iter().find(|o| matches!(o, Output::Invoke(_))) else {
        panic!("no invocation")
    };
    let id = inv.ticket.call();
    let progress = |rig: &mut Rig, n: u64| {
        rig.now += Duration::from_millis(1);
        rig.engine.progress(rig.now, id, n.into(), None, None).unwrap()
    };
    assert_eq!(progress(&mut rig, 1), ProgressOutcome::Sent);
    assert_eq!(progress(&mut rig, 2), ProgressOutcome::Sent);
    assert_eq!(progress(&mut rig, 3), ProgressOutcome::Dropped);
    rig.engine.log(rig.now, id, LogLevel::Error, None, Value::from("lost")).unwrap();
    assert_eq!(frames(&rig.drain(), conn).len(), 2);
    assert_eq!(rig.engine.status().dropped_notifications, 2);
    rig.engine.written(rig.now, conn, 1);
    assert_eq!(progress(&mut rig, 4), ProgressOutcome::Sent, "room again");
    assert_eq!(progress(&mut rig, 5), ProgressOutcome::Dropped);
    rig.engine
        .complete(
            rig.now,
            inv.ticket,
            crate::engine::Reply::Tool(Ok(crate::content::ToolOutput::text("done"))),
        )
        .unwrap();
    let sent = frames(&rig.drain(), conn);
    assert!(sent.len() == 2 && sent[1].contains("\"id\":5"), "{sent:?}");
    assert_eq!(rig.engine.status().dropped_notifications, 3);
}
