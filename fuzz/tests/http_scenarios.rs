//! Hand-written operation lists through the `http` target's checks: proof that the harness
//! reaches deep states (each test asserts on the run's [`Report`]), and reproducers for what
//! fuzzing found.
//!
//! `cargo test` in fuzz/ (no sanitizer or nightly flags needed). `MCP_FUZZ_TRACE=1` prints every
//! request and output.

use mcp_fuzz::http_ops::{
    run, AcceptSpec, AnswerSpec, AskSpec, Body, CallerSpec, Checks, Defect, HttpSpec, Input, LastEventId,
    LegacyVersion, Meta, Msg, MsgKind, Op, RegionArg, Report, SessionSpec, Tick,
};
use mcp_fuzz::ReplyKind;
use mcp_proto::CloseReason;

fn post(m: Msg) -> Op {
    Op::Http(HttpSpec::post(Body::Message(m)))
}

fn send(spec: HttpSpec) -> Op {
    Op::Http(spec)
}

fn init(version: LegacyVersion, elicitation: bool) -> Msg {
    Msg::request(0, MsgKind::Initialize { version, elicitation })
}

/// `initialize` and `notifications/initialized` on a new session of the anonymous caller.
fn session(version: LegacyVersion, elicitation: bool) -> Vec<Op> {
    vec![post(init(version, elicitation)), post(Msg::notification(MsgKind::Initialized))]
}

fn echo(id: u8) -> Msg {
    Msg::request(id, MsgKind::Echo { text: id })
}

/// A 2026-07-28 request: `_meta`, version header, matching mirror headers.
fn modern(m: Msg) -> Op {
    post(m.meta(Meta::Modern))
}

fn complete(call: u8) -> Op {
    Op::Complete { call, reply: ReplyKind::Natural }
}

/// With the fuzz target's checks plus the ones `strict` turns on.
fn with(strict: impl FnOnce(&mut Checks), ops: Vec<Op>) -> Report {
    let mut checks = Checks::FUZZ;
    strict(&mut checks);
    run(&Input { evict: true, ops }, checks)
}

fn fuzzed(evict: bool, ops: Vec<Op>) -> Report {
    run(&Input { evict, ops }, Checks::FUZZ)
}

#[test]
fn legacy_session_lifecycle() {
    let mut ops = session(LegacyVersion::V20251125, false);
    ops.extend([
        post(Msg::request(1, MsgKind::ToolsList { cursor: false })),
        post(Msg::request(2, MsgKind::ToolsList { cursor: true })),
        post(echo(3)),
        // Progress turns the answer into a stream.
        post(Msg { progress: true, ..echo(4) }),
        Op::Progress { call: 1 },
        Op::Log { call: 1 },
        complete(1),
        complete(0),
        post(Msg::request(5, MsgKind::Region { arg: RegionArg::Both(1) })),
        send(HttpSpec::delete()),
        // The DELETE answered the call's exchange; the late completion is Stale.
        complete(0),
        post(echo(6)),
    ]);
    let r = fuzzed(false, ops);
    assert_eq!(r.sessions, 1, "{r:?}");
    assert!(r.full.contains(&202) && r.full.contains(&200) && r.full.contains(&404), "{r:?}");
    assert!(r.responded.contains(&200) && r.responded.contains(&204), "{r:?}");
    assert!(r.closes.contains(&CloseReason::EndOfInput), "{r:?}");
    assert_eq!((r.invokes, r.stale), (3, 1), "{r:?}");
}

#[test]
fn batches_on_2025_03_26() {
    let mut ops = session(LegacyVersion::V20250326, false);
    ops.extend([
        Op::Http(HttpSpec::post(Body::Batch(vec![echo(1), Msg::request(2, MsgKind::Ping), echo(3)]))),
        complete(0),
        Op::Tick(Tick::CallTimeout),
        Op::Http(HttpSpec::post(Body::Batch(vec![Msg::notification(MsgKind::Initialized)]))),
    ]);
    let r = fuzzed(false, ops);
    assert_eq!(r.invokes, 2, "{r:?}");
    assert!(r.cancels >= 1, "the second call timed out: {r:?}");
}

#[test]
fn modern_call_cancelled_by_close() {
    let ops = vec![
        modern(echo(1)),
        modern(Msg::request(2, MsgKind::Region { arg: RegionArg::Str(2) })),
        // The client goes away: the call is cancelled, the late answer is Stale.
        Op::Disconnect { conn: 0 },
        complete(1),
        complete(0),
    ];
    let r = fuzzed(false, ops);
    assert_eq!((r.invokes, r.cancels, r.stale), (2, 1, 1), "{r:?}");
    assert_eq!(r.closes, vec![CloseReason::Closed], "{r:?}");
    assert_eq!(r.responded, vec![200], "{r:?}");
}

#[test]
fn modern_header_mismatches_are_refused() {
    let call = |defect| send(HttpSpec::post(Body::Message(echo(1).meta(Meta::Modern))).defect(defect));
    let region = |defect| {
        let m = Msg::request(1, MsgKind::Region { arg: RegionArg::Both(0) }).meta(Meta::Modern);
        send(HttpSpec::post(Body::Message(m)).defect(defect))
    };
    let ops = vec![
        call(Defect::WrongMethod),
        call(Defect::WrongName),
        call(Defect::NoMirror),
        region(Defect::WrongParam),
        region(Defect::EncodedMirror),
        complete(0),
    ];
    let r = fuzzed(false, ops);
    assert_eq!(r.full, vec![400, 400, 400, 400], "{r:?}");
    assert_eq!(r.invokes, 1, "{r:?}");
}

#[test]
fn get_stream_replaced_then_resumed() {
    let mut ops = session(LegacyVersion::V20251125, false);
    ops.extend([
        send(HttpSpec::get()),
        Op::ToggleTool,
        Op::Tick(Tick::KeepAlive),
        // A second GET replaces the first; resuming from an id seen replays what followed.
        send(HttpSpec::get().last_event_id(LastEventId::Seen(0))),
        Op::ToggleTool,
        Op::Touch,
        send(HttpSpec::get().last_event_id(LastEventId::Future)),
        send(HttpSpec::get().last_event_id(LastEventId::Garbage)),
    ]);
    let r = fuzzed(false, ops);
    let replaced = r.closes.iter().filter(|c| **c == CloseReason::Replaced).count();
    assert_eq!(replaced, 3, "{r:?}");
    assert!(r.frames >= 6, "{r:?}");
}

/// Caller 0 opens three listen streams: refused at the third under `Refuse`, evicting the
/// oldest under `EvictOldest`.
fn listens() -> Vec<Op> {
    let listen = |id| modern(Msg::request(id, MsgKind::Listen { tools: true, resource: true }));
    vec![listen(1), listen(2), Op::ToggleTool, listen(3), Op::Touch, Op::Tick(Tick::KeepAlive)]
}

#[test]
fn listen_streams_refused_past_the_seat_cap() {
    let r = fuzzed(false, listens());
    assert!(r.full.contains(&429), "{r:?}");
    assert_eq!(r.max_streams, 2, "{r:?}");
}

#[test]
fn listen_streams_evict_the_oldest() {
    let r = fuzzed(true, listens());
    assert_eq!(r.closes.iter().filter(|c| **c == CloseReason::Evicted).count(), 1, "{r:?}");
    assert_eq!(r.max_streams, 2, "{r:?}");
}

#[test]
fn get_streams_evict_across_sessions() {
    // Two sessions of one caller, three GET streams: the global and per-caller caps.
    let mut ops = session(LegacyVersion::V20250618, false);
    ops.push(send(HttpSpec::get()));
    ops.extend(session(LegacyVersion::V20251125, false));
    ops.push(send(HttpSpec::get()));
    ops.push(modern(Msg::request(1, MsgKind::Listen { tools: true, resource: false })));
    let r = fuzzed(true, ops);
    assert_eq!(r.closes.iter().filter(|c| **c == CloseReason::Evicted).count(), 1, "{r:?}");
    assert_eq!(r.max_streams, 2, "{r:?}");
}

#[test]
fn sessions_expire() {
    let ops = vec![
        // Initialized and walked away: gone after the handshake time.
        post(init(LegacyVersion::V20250618, false)),
        Op::Tick(Tick::Handshake),
        post(Msg::request(1, MsgKind::Ping)),
        // A session that finished its handshake lives until it idles out.
        post(init(LegacyVersion::V20250618, false)),
        post(Msg::notification(MsgKind::Initialized)),
        Op::Tick(Tick::KeepAlive),
        post(Msg::request(2, MsgKind::Ping)),
        Op::Tick(Tick::Idle),
        post(Msg::request(3, MsgKind::Ping)),
    ];
    let r = fuzzed(false, ops);
    assert_eq!(r.sessions, 2, "{r:?}");
    assert_eq!(r.full.iter().filter(|s| **s == 404).count(), 2, "{r:?}");
}

#[test]
fn session_table_fills_up() {
    let mut ops = Vec::new();
    for _ in 0..4 {
        ops.extend(session(LegacyVersion::V20251125, false));
    }
    let r = fuzzed(false, ops);
    assert_eq!(r.sessions, 3, "{r:?}");
    assert!(r.full.contains(&503), "{r:?}");
}

#[test]
fn legacy_ask_round_trip() {
    let mut ops = session(LegacyVersion::V20251125, true);
    ops.extend([
        post(echo(1)),
        Op::Ask { call: 0, ask: AskSpec::Two },
        Op::Ask { call: 0, ask: AskSpec::Elicit },
        post(Msg::notification(MsgKind::Response { to: 0, answer: AnswerSpec::Accept })),
        post(Msg::notification(MsgKind::Response { to: 1, answer: AnswerSpec::Accept })),
        Op::Ask { call: 0, ask: AskSpec::Elicit },
        post(Msg::notification(MsgKind::Response { to: 2, answer: AnswerSpec::Error })),
        Op::Ask { call: 0, ask: AskSpec::Sample },
        complete(0),
        // A JSON-only client cannot be asked.
        send(HttpSpec::post(Body::Message(echo(2))).accept(AcceptSpec::Json)),
        Op::Ask { call: 0, ask: AskSpec::Elicit },
        complete(0),
    ]);
    let r = fuzzed(false, ops);
    assert_eq!(r.server_requests, 3, "{r:?}");
    assert_eq!((r.answers, r.answered_ok), (2, 1), "{r:?}");
    assert!(r.asks.iter().any(|a| a.contains("Busy")), "{r:?}");
    assert!(r.asks.iter().any(|a| a.contains("Unsupported")), "{r:?}");
    assert!(r.asks.iter().any(|a| a.contains("Unreachable")), "{r:?}");
}

#[test]
fn modern_ask_and_retry() {
    let retry = |id, state, answer, both| modern(Msg::request(id, MsgKind::Retry { state, answer, both }));
    let ops = vec![
        modern(echo(1)),
        // The call ends with input_required and is cancelled; finishing it is Stale.
        Op::Ask { call: 0, ask: AskSpec::Elicit },
        complete(0),
        // The retry answers `who`; asking for `who2` as well takes a second round.
        retry(2, 0, AnswerSpec::Accept, false),
        Op::Ask { call: 0, ask: AskSpec::Two },
        complete(0),
        // The second state carries `who`: answering `who2` is enough.
        retry(3, 1, AnswerSpec::Accept, true),
        Op::Ask { call: 0, ask: AskSpec::Two },
        complete(0),
        // A used state is a replay now (answered from the ledger), so the invalid answer goes
        // with a fresh one: a third call asks, and its state (the third) is retried.
        modern(echo(6)),
        Op::Ask { call: 0, ask: AskSpec::Elicit },
        complete(0),
        // An answer that does not fit the form, and a request the client cannot take.
        retry(4, 2, AnswerSpec::Invalid, false),
        Op::Ask { call: 0, ask: AskSpec::Elicit },
        complete(0),
        modern(echo(5)),
        Op::Ask { call: 0, ask: AskSpec::Sample },
        complete(0),
    ];
    let r = fuzzed(false, ops);
    assert_eq!(r.input_required, 3, "{r:?}");
    assert_eq!(r.asks.iter().filter(|a| a.contains("Suspended")).count(), 5, "{r:?}");
    assert!(r.asks.iter().any(|a| a.starts_with("Ok(Answered")), "{r:?}");
    assert_eq!(r.stale, 5, "{r:?}");
    assert_eq!(r.responded, vec![200, 200, 200, 200, 400, 400], "{r:?}");
}

#[test]
fn shutdown_with_work_in_flight() {
    let mut ops = session(LegacyVersion::V20251125, false);
    ops.extend([
        send(HttpSpec::get()),
        post(echo(1)),
        modern(echo(2)),
        modern(Msg::request(3, MsgKind::Listen { tools: true, resource: false })),
        Op::Shutdown,
        post(echo(4)),
        send(HttpSpec::get()),
        post(init(LegacyVersion::V20251125, false)),
        complete(0),
        complete(0),
    ]);
    let r = fuzzed(false, ops);
    assert!(r.closes.contains(&CloseReason::Shutdown), "{r:?}");
    assert!(r.full.contains(&503), "{r:?}");
    assert_eq!(r.invokes, 2, "{r:?}");
}

#[test]
fn refusals() {
    let ping = || HttpSpec::post(Body::Message(Msg::request(1, MsgKind::Ping)));
    let ops = vec![
        send(ping().defect(Defect::ForeignHost)),
        send(ping().defect(Defect::MissingHost)),
        send(ping().defect(Defect::ForeignOrigin)),
        send(ping().defect(Defect::TextContentType)),
        send(ping().defect(Defect::AcceptNeither)),
        send(HttpSpec { method: mcp_fuzz::http_ops::Method::Other, ..ping() }),
        send(ping().defect(Defect::MalformedSession)),
        send(ping().defect(Defect::MalformedVersion)),
        send(HttpSpec::post(Body::Raw(b"{".to_vec()))),
        send(HttpSpec::post(Body::Raw(vec![b' '; 5000]))),
        send(HttpSpec::get().accept(AcceptSpec::Json)),
        send(HttpSpec::get().defect(Defect::UnknownSession)),
    ];
    let r = fuzzed(false, ops);
    assert_eq!(r.refused, vec![403, 400, 403, 415, 406, 405, 400, 400, 413, 406], "{r:?}");
    assert_eq!(r.full, vec![400, 404], "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// Engine findings: each turns on the check the fuzz target leaves off for it, and fails until the
// engine is fixed. `Checks::STRICT` is every check at once.

/// Finding: ending a legacy session (`DELETE`, expiry, shutdown) emits `Output::Close` for the
/// session's own `ConnId`, which no `HttpReply::Pending` ever named. The shims ignore a `Close`
/// for a connection they do not hold, so nothing breaks, but `Output::Close` is documented as
/// "close the transport of `conn`", and the harness cannot tell such a `Close` from one for a
/// connection it was never given.
#[test]
fn session_end_emits_close_for_a_connection_never_handed_out() {
    let mut ops = session(LegacyVersion::V20251125, false);
    ops.push(send(HttpSpec::delete()));
    with(|c| c.session_close = true, ops);
}

/// Finding: a legacy `initialize` from a client that lists `text/event-stream` before
/// `application/json` is answered on an SSE stream (`Pending`), where no `Mcp-Session-Id`
/// header can go, and the session the engine made for it is dropped. The client receives a
/// successful `InitializeResult` but has no session: every later request is refused (400
/// "Mcp-Session-Id header is required").
#[test]
fn sse_first_initialize_gets_no_session() {
    let ops = vec![
        send(
            HttpSpec::post(Body::Message(init(LegacyVersion::V20251125, false))).accept(AcceptSpec::SseFirst),
        ),
        post(Msg::notification(MsgKind::Initialized)),
        post(echo(1)),
    ];
    with(|c| c.initialize_on_stream = true, ops);
}

/// Finding: a `subscriptions/listen` carrying 2026-07-28 `_meta`, POSTed inside a legacy
/// session (session header, no version header), is run as a 2026 request on the session's
/// connection: it is acknowledged on the POST's SSE stream, which then stays open forever. That
/// stream holds no seat (it escapes `max_streams` and `max_streams_per_caller`), never carries
/// the listen's notifications (they go to the session's `GET` stream, if any), and outlives the
/// session (`DELETE` does not end it). Only the client closing it frees the connection; the
/// listen itself stays on the session.
#[test]
fn legacy_session_listen_holds_an_unseated_stream() {
    let mut ops = session(LegacyVersion::V20251125, false);
    let listen = Msg::request(1, MsgKind::Listen { tools: true, resource: false }).meta(Meta::Modern);
    ops.push(send(
        HttpSpec::post(Body::Message(listen)).session(SessionSpec::Minted(0)).defect(Defect::NoVersion),
    ));
    ops.push(Op::ToggleTool);
    ops.push(send(HttpSpec::delete()));
    with(|c| c.legacy_listen = true, ops);
}

/// Finding: a 2026-07-28 `subscriptions/listen` from a client that accepts only JSON is
/// admitted and seated, but nothing can ever reach it (the acknowledgement and every
/// notification are dropped, and no keep-alive runs), and when it is evicted the engine emits
/// `Close` for an exchange that never got a `Respond` or a `Stream`: the client's request ends
/// with no HTTP response at all.
#[test]
fn json_only_listen_is_closed_without_a_response() {
    with(|c| c.unstarted_close = true, json_only_listens());
}

fn json_only_listens() -> Vec<Op> {
    let listen = || {
        let m = Msg::request(1, MsgKind::Listen { tools: true, resource: true }).meta(Meta::Modern);
        send(HttpSpec::post(Body::Message(m)).accept(AcceptSpec::Json))
    };
    vec![listen(), listen(), Op::ToggleTool, Op::Touch, Op::Tick(Tick::KeepAlive), listen()]
}

/// Finding: `Limits::max_connections` counts HTTP exchanges and streams, and the 2026 wire and
/// `initialize` are refused (503) at it, but a legacy session's `POST` exchanges and `GET`
/// streams are admitted past it: `status().connections` exceeds the limit.
#[test]
fn legacy_exchanges_and_streams_pass_max_connections() {
    with(|c| c.connection_cap = true, past_max_connections());
}

/// One session, then 2026 calls held open until the table is full (the harness's limit is 32
/// connections), then a legacy call and a `GET` stream on the session.
fn past_max_connections() -> Vec<Op> {
    let mut ops = session(LegacyVersion::V20251125, false);
    ops.extend((0..32).map(|i| modern(echo(i))));
    ops.push(post(echo(1)));
    ops.push(send(HttpSpec::get()));
    ops
}

/// Finding: `Engine::log` ignores its `now` (as `notify_resource_updated` does). When a log
/// message is the first thing a 2026 call's response must carry, the response turns into a
/// stream whose keep-alive is armed from the last `now` the engine was given: after time passed
/// without an engine call, `poll_timeout()` returns an instant already past.
#[test]
fn log_arms_a_keepalive_in_the_past() {
    with(|c| c.stale_clock = true, log_after_quiet_time());
}

fn log_after_quiet_time() -> Vec<Op> {
    let call = post(echo(1).meta(Meta::ModernLogging));
    vec![call, Op::Tick(Tick::KeepAlive), Op::Log { call: 0 }, complete(0)]
}

#[test]
fn sessions_belong_to_their_caller() {
    let ops = vec![
        Op::Session {
            version: LegacyVersion::V20250618,
            elicitation: false,
            caller: CallerSpec::Alice,
            accept: AcceptSpec::Both,
        },
        // Bob names Alice's session: it is not his.
        send(HttpSpec::post(Body::Message(Msg::request(1, MsgKind::Ping))).caller(CallerSpec::Bob)),
        send(HttpSpec::get().caller(CallerSpec::Bob)),
        // Alice's own requests and streams.
        post(Msg::request(2, MsgKind::Ping)),
        send(HttpSpec::get()),
        modern(Msg::request(3, MsgKind::Listen { tools: true, resource: false })),
    ];
    let r = fuzzed(false, ops);
    assert_eq!(r.full, vec![200, 202, 404, 404, 200], "{r:?}");
    assert_eq!(r.max_streams, 2, "{r:?}");
}

#[test]
fn gate_revokes_held_streams() {
    let listen = |caller| {
        let m = Msg::request(1, MsgKind::Listen { tools: true, resource: false }).meta(Meta::Modern);
        send(HttpSpec::post(Body::Message(m)).caller(caller))
    };
    let mut ops = session(LegacyVersion::V20251125, false);
    ops.extend([
        send(HttpSpec::get()),
        listen(CallerSpec::Alice),
        Op::Gate(true),
        // Refused while the gate stands; held streams close at their next keep-alive.
        send(HttpSpec::get()),
        listen(CallerSpec::Anonymous),
        Op::Tick(Tick::KeepAlive),
        Op::ToggleTool,
        Op::Gate(false),
        send(HttpSpec::get()),
    ]);
    let r = fuzzed(false, ops);
    assert_eq!(r.closes.iter().filter(|c| **c == CloseReason::Revoked).count(), 1, "{r:?}");
    assert!(r.full.contains(&403), "{r:?}");
    assert_eq!(r.streams, 3, "{r:?}");
}
