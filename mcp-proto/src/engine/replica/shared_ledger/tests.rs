//! Unit tests of the shared replay ledger: two engines with one key ring play two replicas,
//! and the test plays the backend between them.

use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::caller::Caller;
use crate::content::ToolOutput;
use crate::cursor::KeyRing;
use crate::engine::test_support::frame;
use crate::engine::{Config, ConnId, ConnKind, Implementation, Reply};
use crate::interaction::InputRequest;
use crate::registry::Tool;

struct Replica {
    engine: Engine<u32>,
    conn: ConnId,
    /// Claims and records drained but not yet looked at.
    claims: Vec<Claim>,
    records: Vec<Record>,
}

impl Replica {
    fn new(now: Instant, shared: bool) -> Self {
        let config = Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32]));
        let mut engine = Engine::new(config, now);
        engine.registry_mut(now).add_tool(Tool::new("ask", "Asks", json!({"type": "object"})), 1).unwrap();
        engine.set_shared_ledger(shared);
        let conn = engine.open(now, ConnKind::Stdio, Caller::identified("ada")).unwrap();
        Self { engine, conn, claims: Vec::new(), records: Vec::new() }
    }

    fn send(&mut self, now: Instant, id: u32, params: &Value) -> Vec<Output<u32>> {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        self.engine.handle_frame(now, self.conn, frame.to_string().as_bytes());
        self.drain()
    }

    /// The outputs waiting, but for the claims and records, which are set aside for
    /// [`claims`](Self::claims) and [`records`](Self::records).
    fn drain(&mut self) -> Vec<Output<u32>> {
        let mut rest = Vec::new();
        while let Some(o) = self.engine.poll_output() {
            match o {
                Output::Claim(c) => self.claims.push(c),
                Output::Record(r) => self.records.push(r),
                o => rest.push(o),
            }
        }
        rest
    }

    /// The claims emitted since the last call, in order.
    fn claims(&mut self) -> Vec<Claim> {
        self.drain();
        std::mem::take(&mut self.claims)
    }

    /// The records emitted since the last call, in order.
    fn records(&mut self) -> Vec<Record> {
        self.drain();
        std::mem::take(&mut self.records)
    }
}

fn modern(params: Value) -> Value {
    let mut p = params;
    p["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    p
}

fn invocation(outs: Vec<Output<u32>>) -> Option<Invocation<u32>> {
    outs.into_iter().find_map(|o| match o {
        Output::Invoke(i) => Some(i),
        _ => None,
    })
}

fn runs(outs: &[Output<u32>]) -> bool {
    outs.iter().any(|o| matches!(o, Output::Invoke(_)))
}

fn frame_bytes(outs: &[Output<u32>]) -> Vec<u8> {
    outs.iter()
        .find_map(|o| match o {
            Output::Frame { bytes, .. } => Some(bytes.to_vec()),
            _ => None,
        })
        .expect("a frame")
}

fn form() -> InputRequest {
    InputRequest::elicit("Name?", json!({"type": "object", "properties": {"name": {"type": "string"}}}))
        .unwrap()
}

/// Round 1 on `r` (a first round is never claimed: it carries no state), and the retry that
/// answers it.
fn retry_params(r: &mut Replica, now: Instant) -> Value {
    let inv = invocation(r.send(now, 1, &modern(json!({"name": "ask", "arguments": {"x": 1}}))));
    assert!(r.claims().is_empty(), "a first round is not claimed");
    r.engine.ask(now, inv.expect("round 1 runs").ticket.call(), vec![("k".into(), form())]).unwrap_err();
    let state = frame(&r.drain())["result"]["requestState"].as_str().unwrap().to_owned();
    modern(json!({"name": "ask", "arguments": {"x": 1}, "requestState": state,
        "inputResponses": {"k": {"action": "accept", "content": {"name": "Ada"}}}}))
}

/// Sends the retry to `r` and returns its claim: nothing runs yet.
fn claimed(r: &mut Replica, now: Instant, id: u32, retry: &Value) -> Claim {
    let outs = r.send(now, id, retry);
    assert!(invocation(outs).is_none(), "held until the claim is answered");
    let mut claims = r.claims();
    assert_eq!(claims.len(), 1, "{claims:?}");
    claims.remove(0)
}

fn reason(outs: &[Output<u32>]) -> Value {
    frame(outs)["error"]["data"]["reason"].clone()
}

#[allow(clippy::disallowed_methods)] // a test picks its own origin of time
fn origin() -> Instant {
    Instant::now()
}

#[test]
fn a_won_claim_runs_here_and_its_outcome_is_recorded_for_the_others() {
    let now = origin();
    let (mut a, mut b) = (Replica::new(now, true), Replica::new(now, true));
    let retry = retry_params(&mut a, now);
    let claim = claimed(&mut a, now, 2, &retry);
    assert_eq!(claim.key.len(), 64);
    assert!(claim.key.bytes().all(|c| c.is_ascii_hexdigit()));
    let expires =
        a.engine.unix_ms(now) + u64::try_from(a.engine.config.limits.state_ttl.as_millis()).unwrap();
    assert_eq!(claim.lease_until_ms, expires, "no deadline: leased until the state expires");
    a.engine.claim_result(now, claim.call, ClaimResult::Won);
    let inv = invocation(a.drain()).expect("won: the handler runs here");
    assert!(a.records().is_empty(), "nothing to record while it runs");
    // A local copy meanwhile is in progress, without asking the backend again.
    assert_eq!(reason(&a.send(now, 3, &retry)), "in_progress");
    assert!(a.claims().is_empty());
    a.engine.complete(now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("charged once")))).unwrap();
    let first = frame_bytes(&a.drain());
    let records = a.records();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!((record.key.as_str(), record.expires_at_ms), (claim.key.as_str(), expires));
    let Some(SharedOutcome::Kept { tail, fault: None }) = &record.outcome else { panic!("{record:?}") };
    assert!(first.ends_with(tail));
    // Replica B, same caller, same state: claimed, taken, answered from A's record byte for
    // byte under its own id; its handler never runs, and it records nothing.
    let claim_b = claimed(&mut b, now, 7, &retry);
    assert_eq!(claim_b.key, claim.key, "every replica names a state alike");
    let taken = SharedOutcome::decode(&record.outcome.as_ref().unwrap().encode()).unwrap();
    b.engine.claim_result(now, claim_b.call, ClaimResult::Taken(taken));
    let outs = b.drain();
    assert!(!runs(&outs));
    let again = frame_bytes(&outs);
    assert_eq!(
        String::from_utf8(again).unwrap(),
        String::from_utf8(first.clone()).unwrap().replacen("\"id\":2", "\"id\":7", 1)
    );
    assert!(b.records().is_empty(), "an answer from another replica's record is not recorded again");
    // B now answers a copy from its own ledger, without asking.
    let mut copy = frame(&b.send(now, 8, &retry));
    assert!(b.claims().is_empty());
    copy["id"] = json!(2);
    assert_eq!(copy, serde_json::from_slice::<Value>(&first).unwrap());
}

#[test]
fn taken_running_interrupted_and_too_large_are_refused_with_their_reasons() {
    let now = origin();
    let mut b = Replica::new(now, true);
    let retry = retry_params(&mut b, now);
    let claim = claimed(&mut b, now, 2, &retry);
    b.engine.claim_result(now, claim.call, ClaimResult::Taken(SharedOutcome::Running));
    let outs = b.drain();
    assert!(!runs(&outs));
    assert_eq!(frame(&outs)["id"], 2);
    assert_eq!(reason(&outs), "in_progress");
    // Running elsewhere is not remembered here: the next copy asks again.
    let claim = claimed(&mut b, now, 3, &retry);
    b.engine.claim_result(now, claim.call, ClaimResult::Taken(SharedOutcome::Interrupted));
    assert_eq!(reason(&b.drain()), "interrupted");
    // That one is final: answered here from now on.
    assert_eq!(reason(&b.send(now, 4, &retry)), "interrupted");
    assert!(b.claims().is_empty());
    assert!(b.records().is_empty());
    let mut c = Replica::new(now, true);
    let retry = retry_params(&mut c, now);
    let claim = claimed(&mut c, now, 2, &retry);
    c.engine.claim_result(now, claim.call, ClaimResult::Taken(SharedOutcome::TooLarge));
    assert_eq!(reason(&c.drain()), "outcome_too_large");
}

#[test]
fn an_unavailable_backend_runs_the_retry_here_and_still_records_it() {
    let now = origin();
    let mut a = Replica::new(now, true);
    let retry = retry_params(&mut a, now);
    let claim = claimed(&mut a, now, 2, &retry);
    a.engine.claim_result(now, claim.call, ClaimResult::Unavailable);
    let inv = invocation(a.drain()).expect("the replica keeps serving");
    let err = crate::jsonrpc::RpcError::invalid_params("no such account");
    a.engine.complete(now, inv.ticket, Reply::Tool(Err(err.clone().into()))).unwrap();
    let answered = a.drain();
    assert_eq!(frame(&answered)["error"]["message"], "no such account");
    let records = a.records();
    let Some(SharedOutcome::Kept { fault, .. }) = &records[0].outcome else { panic!("{records:?}") };
    assert_eq!(*fault, Some((err.blame, err.code)), "the fault sets the HTTP status elsewhere");
}

#[test]
fn a_claim_that_comes_back_after_the_call_ended_runs_nothing() {
    let now = origin();
    let mut a = Replica::new(now, true);
    let retry = retry_params(&mut a, now);
    let claim = claimed(&mut a, now, 2, &retry);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}});
    a.engine.handle_frame(now, a.conn, cancel.to_string().as_bytes());
    a.drain();
    assert!(a.records().is_empty(), "the claim is still out: it may not be ours to release");
    a.engine.claim_result(now, claim.call, ClaimResult::Won);
    assert!(invocation(a.drain()).is_none(), "an ended call never runs");
    let records = a.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, Some(SharedOutcome::Interrupted), "the won claim is given its fate");
    assert_eq!(reason(&a.send(now, 3, &retry)), "interrupted");
    // Lost instead: the winner's marker is left alone.
    let mut b = Replica::new(now, true);
    let retry = retry_params(&mut b, now);
    let claim = claimed(&mut b, now, 2, &retry);
    b.engine.close(now, b.conn);
    b.drain();
    b.engine.claim_result(now, claim.call, ClaimResult::Taken(SharedOutcome::Running));
    assert!(b.drain().is_empty());
    assert!(b.records().is_empty());
}

#[test]
fn a_deadline_shortens_the_lease_and_a_timed_out_claim_is_released() {
    let now = origin();
    let mut a = Replica::new(now, true);
    a.engine.config.limits.call_timeout(Some(Duration::from_secs(10)));
    let retry = retry_params(&mut a, now);
    let claim = claimed(&mut a, now, 2, &retry);
    assert_eq!(claim.lease_until_ms, a.engine.unix_ms(now) + 10_000 + CLAIM_MARGIN_MS);
    a.engine.handle_timeout(now + Duration::from_secs(11));
    let outs = a.drain();
    assert_eq!(frame(&outs)["error"]["message"], "request timed out");
    a.engine.claim_result(now + Duration::from_secs(11), claim.call, ClaimResult::Won);
    assert!(invocation(a.drain()).is_none());
    let records = a.records();
    assert_eq!(records.len(), 1);
    let Some(SharedOutcome::Kept { fault: Some(_), .. }) = &records[0].outcome else { panic!("{records:?}") };
}

#[test]
fn off_nothing_is_claimed_or_recorded() {
    let now = origin();
    let mut a = Replica::new(now, false);
    let retry = retry_params(&mut a, now);
    let inv = invocation(a.send(now, 2, &retry)).expect("runs at once");
    a.engine.complete(now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("ok")))).unwrap();
    a.drain();
    assert!(a.claims().is_empty() && a.records().is_empty());
    // Turned off while a claim is out: the call runs here.
    let mut b = Replica::new(now, true);
    let retry = retry_params(&mut b, now);
    claimed(&mut b, now, 2, &retry);
    b.engine.set_shared_ledger(false);
    let inv = invocation(b.drain()).expect("runs here");
    inv.ticket.abandon();
}

#[test]
fn the_same_inputs_give_the_same_outputs() {
    let run = |now: Instant| {
        let (mut a, mut b) = (Replica::new(now, true), Replica::new(now, true));
        let retry = retry_params(&mut a, now);
        let mut log = Vec::new();
        let claim = claimed(&mut a, now, 2, &retry);
        log.push(format!("{claim:?}"));
        a.engine.claim_result(now, claim.call, ClaimResult::Won);
        let inv = invocation(a.drain()).unwrap();
        a.engine.complete(now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("x")))).unwrap();
        log.push(String::from_utf8(frame_bytes(&a.drain())).unwrap());
        let record = a.records().remove(0);
        log.push(format!("{record:?}"));
        let claim = claimed(&mut b, now, 5, &retry);
        log.push(format!("{claim:?}"));
        b.engine.claim_result(now, claim.call, ClaimResult::Taken(record.outcome.unwrap()));
        log.push(String::from_utf8(frame_bytes(&b.drain())).unwrap());
        log
    };
    let now = origin();
    assert_eq!(run(now), run(now));
}
