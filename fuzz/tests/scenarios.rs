//! Hand-written operation lists through the `engine` target's checks: proof that the harness
//! reaches deep states, and reproducers for findings that random inputs reach only rarely.
//!
//! `cargo test` in fuzz/ (no sanitizer or nightly flags needed).

use mcp_fuzz::ops::{
    fuzz, ArgsSpec, EnvelopeSpec, FrameSpec, IdSpec, MetaSpec, MethodSpec, Msg, Op, ToolSpec, VersionSpec,
};
use mcp_fuzz::ReplyKind;

fn msg(id: IdSpec, method: MethodSpec) -> Msg {
    Msg { id, method, meta: MetaSpec::None, envelope: EnvelopeSpec::Valid }
}

fn send(m: Msg) -> Op {
    Op::Frame { conn: 0, frame: FrameSpec::Message(m) }
}

fn batch(ms: Vec<Msg>) -> Op {
    Op::Frame { conn: 0, frame: FrameSpec::Batch(ms) }
}

fn echo(id: u8) -> Msg {
    msg(IdSpec::Int(id), MethodSpec::ToolsCall { tool: ToolSpec::Echo, args: ArgsSpec::Text("hi".into()) })
}

/// A 2025-03-26 session, where batches are allowed.
fn session() -> Vec<Op> {
    vec![
        send(msg(IdSpec::Int(0), MethodSpec::Initialize { version: VersionSpec::V20250326, complete: true })),
        send(msg(IdSpec::None, MethodSpec::Initialized)),
    ]
}

#[test]
fn batches_completions_and_timeouts() {
    let mut ops = session();
    ops.extend([
        batch(vec![echo(1), msg(IdSpec::Int(2), MethodSpec::Ping), echo(3)]),
        Op::Complete { ticket: 0, reply: ReplyKind::Natural },
        Op::AdvanceClock { ms: 50 },
        Op::Complete { ticket: 0, reply: ReplyKind::Panicked },
        send(echo(4)),
        // Past the 100 ms call timeout: answered with an error, the late completion is Stale.
        Op::AdvanceClock { ms: 150 },
        Op::Complete { ticket: 0, reply: ReplyKind::Natural },
        send(echo(5)),
        Op::CloseInput { conn: 0 },
        Op::Complete { ticket: 0, reply: ReplyKind::Big(4000) },
    ]);
    fuzz(&ops);
}

#[test]
fn cancel_of_a_call_outside_its_batch() {
    let mut ops = session();
    ops.extend([
        batch(vec![echo(1), echo(2)]),
        send(msg(IdSpec::None, MethodSpec::Cancelled { target: IdSpec::Int(1) })),
        Op::Complete { ticket: 0, reply: ReplyKind::Natural },
        Op::Complete { ticket: 0, reply: ReplyKind::Natural },
    ]);
    fuzz(&ops);
}

/// Regression (fixed in mcp-proto 0209cf7): a `notifications/cancelled` inside a batch, naming
/// a call of the same batch, made the engine flush and forget the batch mid-assembly, so later
/// members went unanswered (a ping dropped; a tools/call left in flight without an `Invoke`),
/// a `Cancel` named a call the shim was never handed, and the outcome could say `NoReply`
/// while a frame was emitted.
#[test]
fn cancel_inside_a_batch_answers_the_other_members() {
    let mut ops = session();
    ops.push(batch(vec![
        msg(IdSpec::Int(5), MethodSpec::Ping),
        echo(1),
        msg(IdSpec::None, MethodSpec::Cancelled { target: IdSpec::Int(1) }),
        msg(IdSpec::Int(2), MethodSpec::Ping),
    ]));
    ops.push(batch(vec![
        echo(1),
        msg(IdSpec::None, MethodSpec::Cancelled { target: IdSpec::Int(1) }),
        echo(3),
    ]));
    ops.push(Op::CloseInput { conn: 0 });
    ops.push(Op::Complete { ticket: 0, reply: ReplyKind::Natural });
    fuzz(&ops);
}
