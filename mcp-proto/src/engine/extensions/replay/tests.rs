//! A copy of a used `requestState` passes every check a fresh round passes before the replay
//! ledger answers it: the server gate, the item gate and the client's capabilities, through the
//! local ledger and through the shared one. Each test fails with the ledger consulted before
//! the gates (as it was before `replay.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use crate::caller::{Caller, Gate};
use crate::content::ToolOutput;
use crate::cursor::KeyRing;
use crate::engine::test_support::{frame, picked};
use crate::engine::ClaimResult;
use crate::engine::SharedOutcome;
use crate::engine::{Config, ConnId, ConnKind, Engine, Implementation, Invocation, Output, Reply, Seed};
use crate::interaction::InputRequest;
use crate::registry::{TaskSupport, Tool};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// One engine (a replica), one caller, and two switches its gates read: whether the server gate
/// and the tool's gate let the caller in.
struct Rig {
    engine: Engine<u32>,
    conn: ConnId,
    now: Instant,
    server_open: Arc<AtomicBool>,
    tool_open: Arc<AtomicBool>,
}

impl Rig {
    fn new(shared: bool) -> Self {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32]));
        config.seed = Some(Seed([9; 32]));
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut engine = Engine::new(config, now);
        let (server_open, tool_open) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(true)));
        let (s, t) = (server_open.clone(), tool_open.clone());
        let ask = Tool::new("ask", "Asks", json!({"type": "object"}))
            .gate(Gate::new(move |_| t.load(Ordering::SeqCst)))
            .task_support(TaskSupport::Optional);
        let mut registry = engine.registry_mut(now);
        registry.add_tool(ask, 1).unwrap();
        // Ungated: the caller keeps being offered tools when it loses `ask`.
        registry.add_tool(Tool::new("other", "Other", json!({"type": "object"})), 2).unwrap();
        registry.set_gate(Some(Gate::new(move |_| s.load(Ordering::SeqCst))));
        engine.set_shared_ledger(shared);
        let conn = engine.open(now, ConnKind::Stdio, Caller::identified("ada")).unwrap();
        Self { engine, conn, now, server_open, tool_open }
    }

    fn send(&mut self, id: u32, params: &Value) -> Vec<Output<u32>> {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        self.engine.handle_frame(self.now, self.conn, frame.to_string().as_bytes());
        self.drain()
    }

    fn drain(&mut self) -> Vec<Output<u32>> {
        std::iter::from_fn(|| self.engine.poll_output()).collect()
    }
}

/// `params` as a 2026-07-28 request with client capabilities `caps`.
fn modern(mut params: Value, caps: Value) -> Value {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps});
    params
}

fn elicitation() -> Value {
    json!({"elicitation": {}})
}

fn invocation(outs: Vec<Output<u32>>) -> Option<Invocation<u32>> {
    outs.into_iter().find_map(|o| match o {
        Output::Invoke(i) => Some(i),
        _ => None,
    })
}

fn form(name: &str) -> InputRequest {
    InputRequest::elicit(
        format!("{name}?"),
        json!({"type": "object", "properties": {name: {"type": "string"}}}),
    )
    .unwrap()
}

/// Round 1 (sent with `first_caps`) asks for a name; returns the params of the retry that
/// answers it, sent with `caps`.
fn retry_of_round_one(rig: &mut Rig, first_caps: Value, caps: Value) -> Value {
    let first = modern(json!({"name": "ask", "arguments": {"x": 1}}), first_caps);
    let inv = invocation(rig.send(1, &first)).expect("round 1 runs");
    rig.engine.ask(rig.now, inv.ticket.call(), vec![("name".into(), form("name"))]).unwrap_err();
    let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
    modern(
        json!({"name": "ask", "arguments": {"x": 1}, "requestState": state,
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}}),
        caps,
    )
}

/// The retry of round 1 (sent with `caps`) is used once on `rig`, whose handler then asks
/// again (an `input_required` to replay). Returns the retry and the recorded answer.
fn recorded_prompt(rig: &mut Rig, caps: Value) -> (Value, Value) {
    let retry = retry_of_round_one(rig, caps.clone(), caps);
    let inv = invocation(rig.send(2, &retry)).expect("the first use runs");
    rig.engine.ask(rig.now, inv.ticket.call(), vec![("age".into(), form("age"))]).unwrap_err();
    let recorded = frame(&rig.drain());
    assert_eq!(recorded["result"]["resultType"], "input_required", "{recorded}");
    (retry, recorded)
}

/// The same answer under another id.
fn same_answer(mut answer: Value, recorded: &Value) -> bool {
    answer["id"] = recorded["id"].clone();
    &answer == recorded
}

fn runs(outs: &[Output<u32>]) -> bool {
    outs.iter().any(|o| matches!(o, Output::Invoke(_)))
}

/// Closes the gate `switch` picks after a retry was recorded: a copy gets `refusal` (the
/// error a fresh round gets) and runs nothing; reopened, a copy gets the record, which stayed.
fn refused_while_closed(switch: impl Fn(&Rig) -> &AtomicBool, refusal: Value) {
    let mut rig = Rig::new(false);
    let (retry, recorded) = recorded_prompt(&mut rig, elicitation());
    switch(&rig).store(false, Ordering::SeqCst);
    let outs = rig.send(3, &retry);
    assert!(!runs(&outs));
    let r = frame(&outs);
    assert_eq!(r["error"], refusal, "{r}");
    switch(&rig).store(true, Ordering::SeqCst);
    assert!(same_answer(frame(&rig.send(4, &retry)), &recorded));
}

#[test]
fn a_copy_from_a_caller_the_server_gate_now_refuses_is_refused() {
    let message = "forbidden: this caller may not use this server";
    refused_while_closed(|r| &r.server_open, json!({"code": -32602, "message": message}));
}

#[test]
fn a_copy_of_a_call_to_a_tool_the_caller_lost_is_answered_as_for_an_unknown_tool() {
    refused_while_closed(|r| &r.tool_open, json!({"code": -32602, "message": "unknown tool: ask"}));
}

#[test]
fn a_copy_without_the_capability_the_recorded_prompt_needs_gets_the_fresh_refusal() {
    let mut rig = Rig::new(false);
    let (retry, recorded) = recorded_prompt(&mut rig, elicitation());
    let mut bare = retry.clone();
    bare["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let outs = rig.send(3, &bare);
    assert!(!runs(&outs));
    let r = frame(&outs);
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert_eq!(r["error"]["data"]["requiredCapabilities"], json!({"elicitation": {}}));
    // URL-only elicitation does not cover a form either.
    bare["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {"url": {}}});
    assert_eq!(frame(&rig.send(4, &bare))["error"]["code"], -32021);
    // A copy that can receive it still gets the recorded prompt.
    assert!(same_answer(frame(&rig.send(5, &retry)), &recorded));
}

#[test]
fn a_copy_of_a_retry_that_made_a_task_needs_the_tasks_extension() {
    let mut rig = Rig::new(false);
    let caps = json!({"elicitation": {}, "extensions": {TASKS: {}}});
    // Round 1 runs as a call (a task cannot answer input_required on its request), and its
    // retry, declaring the extension, becomes a task.
    let retry = retry_of_round_one(&mut rig, elicitation(), caps);
    let outs = rig.send(2, &retry);
    let recorded = frame(&outs);
    assert_eq!(recorded["result"]["resultType"], "task", "{recorded}");
    let mut bare = retry.clone();
    bare["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let r = frame(&rig.send(3, &bare));
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert!(r["error"]["data"]["requiredCapabilities"]["extensions"].get(TASKS).is_some(), "{r}");
    assert!(same_answer(frame(&rig.send(4, &retry)), &recorded));
    if let Some(inv) = invocation(outs) {
        inv.ticket.abandon();
    }
}

/// The claims among `outs`.
fn claims(outs: &[Output<u32>]) -> Vec<crate::engine::Claim> {
    picked(outs, |o| if let Output::Claim(c) = o { Some(c) } else { None })
}

/// A record another replica kept, as the backend would hand it back: what follows its
/// `{"jsonrpc":"2.0","id":..` head, whatever order the build's maps keep.
fn kept(recorded: &Value) -> SharedOutcome {
    let rest: serde_json::Map<String, Value> = recorded
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "jsonrpc" | "id"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let rest = serde_json::to_vec(&rest).unwrap();
    let mut tail = b",".to_vec();
    tail.extend_from_slice(&rest[1..]);
    SharedOutcome::Kept { tail, fault: None }
}

#[test]
fn through_the_shared_ledger_a_refused_copy_is_never_claimed_and_a_record_is_rechecked() {
    // Replica A ran the retry; B sees copies of it for the first time.
    let mut a = Rig::new(false);
    let (retry, recorded) = recorded_prompt(&mut a, elicitation());
    let mut b = Rig::new(true);
    // Gates first: a caller B's gates refuse is refused before anything is claimed.
    b.tool_open.store(false, Ordering::SeqCst);
    let outs = b.send(3, &retry);
    let r = frame(&outs);
    assert_eq!(r["error"]["message"], "unknown tool: ask", "{r}");
    assert!(claims(&outs).is_empty(), "nothing asked of the backend");
    b.server_open.store(false, Ordering::SeqCst);
    b.tool_open.store(true, Ordering::SeqCst);
    let outs = b.send(4, &retry);
    assert_eq!(frame(&outs)["error"]["message"], "forbidden: this caller may not use this server");
    assert!(claims(&outs).is_empty());
    b.server_open.store(true, Ordering::SeqCst);
    // Capabilities: A's record is an elicitation; a copy that cannot receive one is refused.
    let mut bare = retry.clone();
    bare["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let outs = b.send(5, &bare);
    assert!(!runs(&outs));
    let claim = claims(&outs).pop().expect("a copy B never saw is claimed");
    b.engine.claim_result(b.now, claim.call, ClaimResult::Taken(kept(&recorded)));
    let outs = b.drain();
    assert!(!runs(&outs));
    let r = frame(&outs);
    assert_eq!((r["id"].clone(), r["error"]["code"].clone()), (json!(5), json!(-32021)), "{r}");
    // B kept the record all the same: a copy that can receive it gets it without asking.
    let outs = b.send(6, &retry);
    assert!(same_answer(frame(&outs), &recorded));
    assert!(claims(&outs).is_empty());
}

#[test]
fn a_recorded_result_that_needs_no_capability_is_replayed_to_any_copy() {
    let mut rig = Rig::new(false);
    let retry = retry_of_round_one(&mut rig, elicitation(), elicitation());
    let inv = invocation(rig.send(2, &retry)).expect("the first use runs");
    rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("done")))).unwrap();
    let recorded = frame(&rig.drain());
    let mut bare = retry.clone();
    bare["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let outs = rig.send(3, &bare);
    assert!(!runs(&outs));
    assert!(same_answer(frame(&outs), &recorded), "a final result needs nothing of the client");
}
