//! Unit tests of asking the client, both eras.

use super::*;
use crate::caller::Caller;
use crate::content::ToolOutput;
use crate::cursor::KeyRing;
use crate::engine::test_support::frame;
use crate::engine::{Config, ConnKind, Implementation, Invocation, Reply};
use crate::registry::Tool;
use serde_json::json;
use std::time::Duration;

struct Rig {
    engine: Engine<u32>,
    conn: ConnId,
    now: Instant,
}

impl Rig {
    fn new(caller: Caller) -> Self {
        Self::with_config(caller, Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32])))
    }

    fn with_config(caller: Caller, config: Config) -> Self {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut engine = Engine::new(config, now);
        engine.registry_mut(now).add_tool(Tool::new("ask", "Asks", json!({"type": "object"})), 1).unwrap();
        let conn = engine.open(now, ConnKind::Stdio, caller).unwrap();
        Self { engine, conn, now }
    }

    fn send(&mut self, frame: Value) -> Vec<Output<u32>> {
        self.engine.handle_frame(self.now, self.conn, frame.to_string().as_bytes());
        std::iter::from_fn(|| self.engine.poll_output()).collect()
    }

    fn legacy(caps: Value) -> Self {
        Self::legacy_with(caps, Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32])))
    }

    fn legacy_with(caps: Value, config: Config) -> Self {
        let mut rig = Self::with_config(Caller::anonymous(), config);
        rig.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "c", "version": "1"}}}));
        rig.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        rig
    }

    fn invoke(&mut self, params: Value) -> (Vec<Output<u32>>, Option<Invocation<u32>>) {
        let outs = self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}));
        let mut rest = Vec::new();
        let mut inv = None;
        for o in outs {
            match o {
                Output::Invoke(i) => inv = Some(i),
                o => rest.push(o),
            }
        }
        (rest, inv)
    }

    fn drain(&mut self) -> Vec<Output<u32>> {
        std::iter::from_fn(|| self.engine.poll_output()).collect()
    }
}

fn name_form() -> InputRequest {
    InputRequest::elicit("Name?", json!({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}, "required": ["name"]})).unwrap()
}

// Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
#[cfg(feature = "exact-json")]
#[test]
fn legacy_ask_round_trip_keeps_exact_numbers() {
    let mut rig = Rig::legacy(json!({"elicitation": {}}));
    let (_, inv) = rig.invoke(json!({"name": "ask"}));
    let call = inv.unwrap().ticket.call();
    assert_eq!(rig.engine.ask(rig.now, call, vec![("who".into(), name_form())]), Ok(Asked::Pending));
    let req = frame(&rig.drain());
    assert_eq!(req["method"], "elicitation/create");
    assert_eq!(req["params"]["requestedSchema"]["required"], json!(["name"]));
    // A second ask while the first waits is refused.
    assert_eq!(rig.engine.ask(rig.now, call, vec![("x".into(), name_form())]), Err(AskError::Busy));
    let answer = r#"{"jsonrpc":"2.0","id":ID,"result":{"action":"accept","content":{"name":"Ada","n":123456789012345678901234567890}}}"#
        .replace("ID", &req["id"].to_string());
    rig.engine.handle_frame(rig.now, rig.conn, answer.as_bytes());
    let outs = rig.drain();
    let Some(Output::Answer { call: c, answers: Ok(answers) }) = outs.into_iter().next() else {
        panic!("no answer")
    };
    assert_eq!(c, call);
    assert_eq!(answers["who"]["content"]["n"].to_string(), "123456789012345678901234567890");
    // A late duplicate is ignored.
    rig.engine.handle_frame(rig.now, rig.conn, answer.as_bytes());
    assert!(rig.drain().is_empty());
}

#[cfg(not(feature = "exact-json"))]
#[test]
fn legacy_ask_answer_with_a_number_this_build_would_round_is_refused() {
    let mut rig = Rig::legacy(json!({"elicitation": {}}));
    let (_, inv) = rig.invoke(json!({"name": "ask"}));
    let call = inv.unwrap().ticket.call();
    assert_eq!(rig.engine.ask(rig.now, call, vec![("who".into(), name_form())]), Ok(Asked::Pending));
    let req = frame(&rig.drain());
    let answer = r#"{"jsonrpc":"2.0","id":ID,"result":{"action":"accept","content":{"name":"Ada","n":123456789012345678901234567890}}}"#
        .replace("ID", &req["id"].to_string());
    rig.engine.handle_frame(rig.now, rig.conn, answer.as_bytes());
    let outs = rig.drain();
    let Some(Output::Answer { call: c, answers: Err(AskError::Invalid(e)) }) = outs.into_iter().next() else {
        panic!("not refused")
    };
    assert_eq!(c, call);
    assert!(e.message().starts_with("result: the number 123456789012345678901234567890 "), "{e}");
    assert!(e.message().contains("`exact-json`"), "{e}");
}

#[test]
fn closing_a_connection_forgets_the_requests_it_was_sent() {
    let mut rig = Rig::legacy(json!({"elicitation": {}}));
    let (_, inv) = rig.invoke(json!({"name": "ask"}));
    let call = inv.unwrap().ticket.call();
    rig.engine.ask(rig.now, call, vec![("who".into(), name_form())]).unwrap();
    rig.drain();
    assert_eq!(rig.engine.outbound.len(), 1);
    rig.engine.close(rig.now, rig.conn);
    rig.drain();
    assert_eq!(rig.engine.outbound.len(), 0, "an unanswerable request is still awaited");
}

#[test]
fn a_legacy_ask_gives_up_at_its_deadline_and_a_modern_one_waits_for_nothing() {
    let mut rig = Rig::legacy(json!({"elicitation": {}}));
    let (_, inv) = rig.invoke(json!({"name": "ask"}));
    let call = inv.unwrap().ticket.call();
    rig.engine.ask(rig.now, call, vec![("a".into(), name_form()), ("b".into(), name_form())]).unwrap();
    let ids: Vec<Value> = rig
        .drain()
        .iter()
        .filter_map(|o| match o {
            Output::Frame { bytes, .. } => serde_json::from_slice::<Value>(bytes).ok(),
            _ => None,
        })
        .map(|f| f["id"].clone())
        .collect();
    assert_eq!(ids.len(), 2);
    // One answer comes; the other never does.
    let answer = json!({"jsonrpc": "2.0", "id": ids[0], "result": {"action": "decline"}});
    rig.engine.handle_frame(rig.now, rig.conn, answer.to_string().as_bytes());
    assert!(rig.drain().is_empty());
    assert_eq!(rig.engine.poll_timeout(), Some(rig.now + Duration::from_secs(60)));
    rig.now += Duration::from_secs(60);
    rig.engine.handle_timeout(rig.now);
    let outs = rig.drain();
    let [Output::Frame { bytes, .. }, Output::Answer { call: c, answers: Err(AskError::TimedOut) }] =
        outs.as_slice()
    else {
        panic!("{outs:?}")
    };
    assert_eq!(*c, call);
    let note: Value = serde_json::from_slice(bytes).unwrap();
    assert_eq!(note["method"], "notifications/cancelled");
    assert_eq!(note["params"]["requestId"], ids[1], "only the unanswered request is cancelled");
    assert_eq!(rig.engine.outbound.len(), 0);
    assert_eq!(rig.engine.poll_timeout(), None);
    // The late answer is dropped; the handler may ask again.
    let late = json!({"jsonrpc": "2.0", "id": ids[1], "result": {"action": "decline"}});
    rig.engine.handle_frame(rig.now, rig.conn, late.to_string().as_bytes());
    assert!(rig.drain().is_empty());
    assert_eq!(rig.engine.ask(rig.now, call, vec![("c".into(), name_form())]), Ok(Asked::Pending));
    // 2026-07-28: the ask ends the call with input_required; nothing waits, no deadline.
    let mut rig = Rig::new(Caller::identified("ada"));
    let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
    let call = inv.unwrap().ticket.call();
    assert_eq!(rig.engine.ask(rig.now, call, vec![("k".into(), name_form())]), Err(AskError::Suspended));
    rig.drain();
    assert_eq!(rig.engine.poll_timeout(), None);
    assert_eq!(rig.engine.status().in_flight, 0);
}

#[test]
fn legacy_ask_failures() {
    // No capability: nothing is sent.
    let mut rig = Rig::legacy(json!({}));
    let (_, inv) = rig.invoke(json!({"name": "ask"}));
    let inv_ticket = inv.unwrap().ticket;
    let call = inv_ticket.call();
    let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 5})).unwrap();
    let Err(AskError::Unsupported(u)) = rig.engine.ask(rig.now, call, vec![("s".into(), sample)]) else {
        panic!()
    };
    assert_eq!(u.required_capabilities(), &json!({"sampling": {}}));
    assert!(rig.drain().is_empty());
    // A handler passing that on (`?`) fails the tool call with confirmation_required.
    let ticket = inv_ticket;
    rig.engine.complete(rig.now, ticket, Reply::Tool(Err(AskError::Unsupported(u).into()))).unwrap();
    let r = frame(&rig.drain());
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("confirmation_required: "), "{text}");
    // An invalid answer and an error answer both reach the handler as failures.
    let mut rig = Rig::legacy(json!({"elicitation": {}}));
    let (_, inv) = rig.invoke(json!({"name": "ask"}));
    let call = inv.unwrap().ticket.call();
    rig.engine.ask(rig.now, call, vec![("who".into(), name_form())]).unwrap();
    let id = frame(&rig.drain())["id"].clone();
    let bad = json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": {"name": 5}}});
    rig.engine.handle_frame(rig.now, rig.conn, bad.to_string().as_bytes());
    assert!(matches!(rig.drain().as_slice(), [Output::Answer { answers: Err(AskError::Invalid(_)), .. }]));
    rig.engine.ask(rig.now, call, vec![("who".into(), name_form())]).unwrap();
    let id = frame(&rig.drain())["id"].clone();
    let err = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -1, "message": "user closed"}});
    rig.engine.handle_frame(rig.now, rig.conn, err.to_string().as_bytes());
    assert!(matches!(rig.drain().as_slice(), [Output::Answer { answers: Err(AskError::Rejected(_)), .. }]));
}

fn modern(params: Value) -> Value {
    let mut p = params;
    p["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    p
}

#[test]
fn modern_ask_suspends_and_resumes_from_sealed_state() {
    let mut rig = Rig::new(Caller::identified("ada"));
    let (_, inv) = rig.invoke(modern(json!({"name": "ask", "arguments": {"x": 1}})));
    let call = inv.unwrap().ticket.call();
    assert_eq!(
        rig.engine.ask(rig.now, call, vec![("user_name".into(), name_form())]),
        Err(AskError::Suspended)
    );
    let outs = rig.drain();
    assert!(outs.iter().any(|o| matches!(o, Output::Cancel { call: c, .. } if *c == call)));
    let r = frame(&outs);
    assert_eq!(r["result"]["resultType"], "input_required");
    assert_eq!(r["result"]["inputRequests"]["user_name"]["method"], "elicitation/create");
    let state = r["result"]["requestState"].as_str().unwrap().to_owned();
    // The retry brings the answer (plus one nobody asked for): the handler's ask is answered
    // at once.
    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    let retry = modern(json!({"name": "ask", "arguments": {"x": 1}, "requestState": state,
        "inputResponses": {"user_name": answer, "extra": 1}}));
    let (_, inv) = rig.invoke(retry.clone());
    let call = inv.unwrap().ticket.call();
    let Ok(Asked::Answered(got)) = rig.engine.ask(rig.now, call, vec![("user_name".into(), name_form())])
    else {
        panic!()
    };
    assert_eq!(got["user_name"], answer);
    // A second question takes another round; its state carries the first answer.
    let age =
        InputRequest::elicit("Age?", json!({"type": "object", "properties": {"age": {"type": "integer"}}}))
            .unwrap();
    assert_eq!(rig.engine.ask(rig.now, call, vec![("age".into(), age.clone())]), Err(AskError::Suspended));
    let r = frame(&rig.drain());
    let state2 = r["result"]["requestState"].as_str().unwrap().to_owned();
    assert_ne!(state2, state);
    let retry2 = modern(json!({"name": "ask", "arguments": {"x": 1}, "requestState": state2,
        "inputResponses": {"age": {"action": "accept", "content": {"age": 36}}}}));
    let (_, inv) = rig.invoke(retry2);
    let call = inv.unwrap().ticket.call();
    let Ok(Asked::Answered(first)) = rig.engine.ask(rig.now, call, vec![("user_name".into(), name_form())])
    else {
        panic!()
    };
    assert_eq!(first["user_name"], answer);
    assert!(matches!(rig.engine.ask(rig.now, call, vec![("age".into(), age)]), Ok(Asked::Answered(_))));
}

#[test]
fn handler_state_rides_in_the_sealed_state() {
    let mut rig = Rig::new(Caller::identified("ada"));
    let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
    let call = inv.unwrap().ticket.call();
    assert_eq!(rig.engine.carried_state(call), None);
    rig.engine.carry_state(call, Some("step-1".into())).unwrap();
    rig.engine.ask(rig.now, call, vec![("k".into(), name_form())]).unwrap_err();
    let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
    let retry = modern(json!({"name": "ask", "requestState": state}));
    let (_, inv) = rig.invoke(retry);
    assert_eq!(rig.engine.carried_state(inv.unwrap().ticket.call()), Some("step-1"));
}

#[test]
fn modern_state_is_bound_and_sealed() {
    let mut rig = Rig::new(Caller::identified("ada"));
    let (_, inv) = rig.invoke(modern(json!({"name": "ask", "arguments": {"x": 1}})));
    rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
    let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
    let fails = |rig: &mut Rig, params: Value| {
        let (outs, inv) = rig.invoke(modern(params));
        assert!(inv.is_none(), "nothing runs");
        frame(&outs)["error"]["code"].as_i64()
    };
    let tampered = format!("{state}-TAMPERED");
    assert_eq!(
        fails(&mut rig, json!({"name": "ask", "arguments": {"x": 1}, "requestState": tampered})),
        Some(-32602)
    );
    assert_eq!(
        fails(&mut rig, json!({"name": "ask", "arguments": {"x": 2}, "requestState": state})),
        Some(-32602)
    );
    let mut other = Rig::new(Caller::identified("eve"));
    assert_eq!(
        fails(&mut other, json!({"name": "ask", "arguments": {"x": 1}, "requestState": state})),
        Some(-32602)
    );
    rig.now += rig.engine.config.limits.state_ttl + Duration::from_secs(1);
    assert_eq!(
        fails(&mut rig, json!({"name": "ask", "arguments": {"x": 1}, "requestState": state})),
        Some(-32602)
    );
}

/// A first round that asks, and the retry that answers it: the retry's call, and the
/// params a copy of it re-sends.
fn answered_retry(rig: &mut Rig) -> (Invocation<u32>, Value) {
    let (_, inv) = rig.invoke(modern(json!({"name": "ask", "arguments": {"x": 1}})));
    rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
    let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
    let retry = modern(json!({"name": "ask", "arguments": {"x": 1}, "requestState": state,
        "inputResponses": {"k": {"action": "accept", "content": {"name": "Ada"}}}}));
    let (_, inv) = rig.invoke(retry.clone());
    (inv.expect("the first use runs"), retry)
}

fn send_as(rig: &mut Rig, id: u32, params: &Value) -> Vec<Output<u32>> {
    rig.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
}

#[test]
fn a_replayed_retry_gets_the_recorded_outcome_and_never_runs_again() {
    let mut rig = Rig::new(Caller::identified("ada"));
    let (inv, retry) = answered_retry(&mut rig);
    // A copy while the first still runs: in progress, nothing runs.
    let outs = send_as(&mut rig, 2, &retry);
    assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
    let r = frame(&outs);
    assert_eq!((r["id"].clone(), r["error"]["code"].clone()), (json!(2), json!(-32602)));
    assert_eq!(r["error"]["data"]["reason"], "in_progress");
    let done = Reply::Tool(Ok(ToolOutput::text("charged once")));
    rig.engine.complete(rig.now, inv.ticket, done).unwrap();
    let first = frame(&rig.drain());
    assert_eq!(first["result"]["content"][0]["text"], "charged once");
    // Copies after it answered: the same answer under their own ids, no handler.
    for id in [3, 4] {
        let outs = send_as(&mut rig, id, &retry);
        assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
        let mut again = frame(&outs);
        assert_eq!(again["id"], id);
        again["id"] = first["id"].clone();
        assert_eq!(again, first);
    }
    // Once the state expired, it is refused as expired, like any other.
    rig.now += rig.engine.config.limits.state_ttl;
    let r = frame(&send_as(&mut rig, 5, &retry));
    assert_eq!(r["error"]["message"], "requestState expired; retry the request without requestState");
}

#[test]
fn a_replay_of_a_retry_that_asked_again_gets_the_same_next_prompt() {
    let mut rig = Rig::new(Caller::identified("ada"));
    let (inv, retry) = answered_retry(&mut rig);
    let age =
        InputRequest::elicit("Age?", json!({"type": "object", "properties": {"age": {"type": "integer"}}}))
            .unwrap();
    rig.engine.ask(rig.now, inv.ticket.call(), vec![("age".into(), age)]).unwrap_err();
    let first = frame(&rig.drain());
    assert_eq!(first["result"]["resultType"], "input_required");
    let mut again = frame(&send_as(&mut rig, 1, &retry));
    again["id"] = first["id"].clone();
    assert_eq!(again, first, "the same question and the same next state");
    inv.ticket.abandon();
}

#[test]
fn a_replay_of_an_interrupted_retry_is_refused() {
    let mut rig = Rig::new(Caller::identified("ada"));
    let (inv, retry) = answered_retry(&mut rig);
    rig.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}));
    assert_eq!(
        rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("late")))),
        Err(Stale)
    );
    let outs = send_as(&mut rig, 2, &retry);
    assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
    assert_eq!(frame(&outs)["error"]["data"]["reason"], "interrupted");
    // The same when the connection carrying it closes.
    let mut rig = Rig::new(Caller::identified("ada"));
    let (inv, retry) = answered_retry(&mut rig);
    inv.ticket.abandon();
    rig.engine.close(rig.now, rig.conn);
    rig.drain();
    rig.conn = rig.engine.open(rig.now, ConnKind::Stdio, Caller::identified("ada")).unwrap();
    let outs = send_as(&mut rig, 2, &retry);
    assert_eq!(frame(&outs)["error"]["data"]["reason"], "interrupted", "{outs:?}");
}

#[test]
fn moving_the_epoch_on_refuses_every_outstanding_state() {
    let mut rig = Rig::new(Caller::identified("ada"));
    let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
    rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
    let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
    assert_eq!(rig.engine.epoch(), 0);
    assert_eq!(rig.engine.bump_epoch(rig.now), 1);
    let (outs, inv) = rig.invoke(modern(json!({"name": "ask", "requestState": state})));
    assert!(inv.is_none(), "nothing runs");
    let r = frame(&outs);
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(r["error"]["message"], "requestState expired; retry the request without requestState");
    assert_eq!(r["error"]["data"], json!({"reason": "epoch"}));
    // Setting it back (a replica that moved on by mistake) accepts the state again.
    rig.engine.set_epoch(rig.now, 0);
    let (_, inv) = rig.invoke(modern(json!({"name": "ask", "requestState": state})));
    inv.expect("epoch 0 again").ticket.abandon();
    // A state sealed in the new epoch is accepted in it, and only there.
    let mut rig = Rig::new(Caller::identified("ada"));
    rig.engine.set_epoch(rig.now, 7);
    let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
    rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
    let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
    let (_, inv) = rig.invoke(modern(json!({"name": "ask", "requestState": state})));
    inv.expect("same epoch").ticket.abandon();
}

#[test]
fn modern_capabilities_answers_and_round_limit() {
    let mut rig = Rig::new(Caller::anonymous());
    // Sampling without the capability: -32021 naming it (SEP-2575: the server MUST), even
    // from a handler that passes the refusal of `can_ask` on itself.
    let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
    let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 5})).unwrap();
    rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("s".into(), sample.clone())]).unwrap_err();
    let r = frame(&rig.drain());
    assert_eq!(r["error"]["code"], -32021);
    assert_eq!(r["error"]["data"]["requiredCapabilities"], json!({"sampling": {}}));
    let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
    let ticket = inv.unwrap().ticket;
    let Err(refused) = rig.engine.can_ask(ticket.call(), &sample) else {
        panic!("sampling was not declared")
    };
    rig.engine.complete(rig.now, ticket, Reply::Tool(Err(refused.into()))).unwrap();
    assert_eq!(frame(&rig.drain())["error"]["code"], -32021);
    // An answer that does not fit the form is refused.
    let (_, inv) = rig.invoke(modern(
        json!({"name": "ask", "inputResponses": {"k": {"action": "accept", "content": {"name": 12345}}}}),
    ));
    rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
    assert_eq!(frame(&rig.drain())["error"]["code"], -32602);
    // Ten rounds, then interaction_limit.
    let mut state: Option<String> = None;
    for round in 0..=10 {
        let mut p = json!({"name": "ask"});
        if let Some(s) = &state {
            p["requestState"] = s.clone().into();
        }
        let (_, inv) = rig.invoke(modern(p));
        let q = vec![(format!("q{round}"), name_form())];
        rig.engine.ask(rig.now, inv.unwrap().ticket.call(), q).unwrap_err();
        let r = frame(&rig.drain());
        if round < 10 {
            state = Some(r["result"]["requestState"].as_str().unwrap().to_owned());
        } else {
            assert_eq!(r["error"]["data"]["reason"], "interaction_limit", "{r}");
        }
    }
}

#[test]
fn one_caller_flooding_the_ledger_costs_only_itself() {
    let mut rig = Rig::new(Caller::identified("flood"));
    rig.engine.config.limits.max_ledger_entries(4);
    let a = rig.conn;
    let b = rig.engine.open(rig.now, ConnKind::Stdio, Caller::identified("bea")).unwrap();
    // B's first round comes first, so its state expires before any of A's.
    rig.conn = b;
    let (_, inv) = rig.invoke(modern(json!({"name": "ask", "arguments": {"x": 1}})));
    rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
    let b_state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
    let b_retry = modern(json!({"name": "ask", "arguments": {"x": 1}, "requestState": b_state,
        "inputResponses": {"k": {"action": "accept", "content": {"name": "Bea"}}}}));
    // A fills the ledger twice over with recorded retries, each state expiring later.
    rig.conn = a;
    let mut a_retries = Vec::new();
    let flood = |rig: &mut Rig, n: usize, into: &mut Vec<Value>| {
        for _ in 0..n {
            rig.now += Duration::from_millis(5);
            let (inv, retry) = answered_retry(rig);
            rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("a")))).unwrap();
            rig.drain();
            into.push(retry);
        }
    };
    flood(&mut rig, 8, &mut a_retries);
    // B's first retry runs, although A's evicted records expire later than B's state.
    rig.conn = b;
    let outs = send_as(&mut rig, 10, &b_retry);
    let inv = outs.into_iter().find_map(|o| match o {
        Output::Invoke(i) => Some(i),
        _ => None,
    });
    let done = Reply::Tool(Ok(ToolOutput::text("b once")));
    rig.engine.complete(rig.now, inv.expect("B's first use runs").ticket, done).unwrap();
    let first = frame(&rig.drain());
    assert_eq!(first["result"]["content"][0]["text"], "b once");
    // A floods on; B's record stays (B is below its share), A's own oldest go.
    rig.conn = a;
    flood(&mut rig, 8, &mut a_retries);
    rig.conn = b;
    let outs = send_as(&mut rig, 11, &b_retry);
    assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
    let mut again = frame(&outs);
    again["id"] = first["id"].clone();
    assert_eq!(again, first, "B's replay is answered from the ledger");
    rig.conn = a;
    let reasons: Vec<Value> = a_retries
        .iter()
        .map(|retry| {
            let outs = send_as(&mut rig, 12, retry);
            assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
            let r = frame(&outs);
            r["error"]["data"]["reason"].clone()
        })
        .collect();
    // A holds what is left beside B's one record: its three latest; the rest it evicted.
    let evicted = json!("evicted");
    assert!(reasons[..13].iter().all(|r| *r == evicted), "{reasons:?}");
    assert!(reasons[13..].iter().all(|r| r.is_null()), "{reasons:?}");
}

#[test]
fn shutdown_moves_the_epoch_once_so_a_state_sealed_while_draining_is_accepted_nowhere() {
    let mut rig = Rig::new(Caller::identified("ada"));
    let mut peer = Rig::new(Caller::identified("ada"));
    let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
    rig.engine.shutdown(rig.now);
    rig.engine.shutdown(rig.now);
    assert_eq!(rig.engine.epoch(), 1, "moved once, however often shutdown is called");
    // The call still running answers while the engine drains: its state is of the new epoch,
    // which a replica sharing the key ring (still in epoch 0) refuses.
    rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
    let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
    let (outs, inv) = peer.invoke(modern(json!({"name": "ask", "requestState": state})));
    assert!(inv.is_none(), "nothing runs");
    assert_eq!(frame(&outs)["error"]["data"], json!({"reason": "epoch"}));
}

/// A configuration whose response ceiling is `max` bytes.
fn ceiling(max: usize) -> Config {
    let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32]));
    config.limits.max_response_bytes(max);
    config
}

/// An elicitation whose message is `n` bytes long.
fn long_form(n: usize) -> InputRequest {
    InputRequest::elicit("x".repeat(n), json!({"type": "object", "properties": {}})).unwrap()
}

#[test]
fn a_legacy_round_with_a_frame_over_the_ceiling_sends_nothing_and_the_call_goes_on() {
    let mut rig = Rig::legacy_with(json!({"elicitation": {}, "roots": {}}), ceiling(400));
    let (_, inv) = rig.invoke(json!({"name": "ask"}));
    let ticket = inv.unwrap().ticket;
    let call = ticket.call();
    // The roots request fits; the elicitation beside it does not, so neither is sent.
    let round = vec![("r".into(), InputRequest::list_roots()), ("who".into(), long_form(1000))];
    let Err(AskError::TooLarge { size, limit: 400 }) = rig.engine.ask(rig.now, call, round) else {
        panic!("the round should be refused as too large")
    };
    assert!(size > 1000, "{size}");
    assert!(rig.drain().is_empty());
    // The ids of the unsent requests are not awaited: an answer to one is ignored.
    rig.engine.handle_frame(rig.now, rig.conn, br#"{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}"#);
    assert!(rig.drain().is_empty());
    // Not a round used, and not a call ended: a smaller ask goes out at once.
    assert_eq!(rig.engine.ask(rig.now, call, vec![("who".into(), long_form(10))]), Ok(Asked::Pending));
    let req = frame(&rig.drain());
    assert_eq!(req["method"], "elicitation/create");
    assert!(req.to_string().len() <= 400);
    // A handler that passes the error on (`?`) answers -32603 naming both sizes.
    let e = HandlerError::from(AskError::TooLarge { size, limit: 400 });
    let HandlerError::Public(rpc) = e else { panic!("{e:?}") };
    assert_eq!(rpc.code, ErrorCode::InternalError);
    assert_eq!(
        rpc.message,
        format!("the request for input of {size} bytes exceeds the 400-byte response limit")
    );
    let decline = json!({"jsonrpc": "2.0", "id": req["id"], "result": {"action": "decline"}});
    rig.engine.handle_frame(rig.now, rig.conn, decline.to_string().as_bytes());
    rig.drain();
    rig.engine.complete(rig.now, ticket, Reply::Tool(Err(HandlerError::Public(rpc)))).unwrap();
    let r = frame(&rig.drain());
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(
        r["error"]["message"],
        format!("the request for input of {size} bytes exceeds the 400-byte response limit")
    );
}

#[test]
fn a_modern_input_required_over_the_ceiling_is_not_sent_and_the_handler_answers() {
    let mut rig = Rig::with_config(Caller::identified("ada"), ceiling(2000));
    let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
    let ticket = inv.unwrap().ticket;
    let call = ticket.call();
    let Err(AskError::TooLarge { size, limit: 2000 }) =
        rig.engine.ask(rig.now, call, vec![("who".into(), long_form(3000))])
    else {
        panic!("the input_required result should be refused as too large")
    };
    assert!(size > 3000, "{size}");
    // Neither the result nor a cancellation: the handler still runs.
    assert!(rig.drain().is_empty());
    assert_eq!(rig.engine.status().in_flight, 1);
    rig.engine.complete(rig.now, ticket, Reply::Tool(Ok(ToolOutput::text("gave up")))).unwrap();
    let r = frame(&rig.drain());
    assert_eq!(r["result"]["content"][0]["text"], "gave up", "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
}
