//! Shim behaviour over real stdio pipes, written once and run against both runtimes (the
//! `stdio-tokio` and `stdio-smol` binaries, see `mcp_tests::stdio_server`).
//!
//! Timing never decides a result: "concurrent" means a call that sleeps for a minute does not
//! hold back one sent after it, and timeouts ([`pipe::TIMEOUT`]) only turn hangs into failures.

use std::collections::BTreeMap;

use mcp_tests::pipe::{self, protocol_line, Process, TIMEOUT};
use serde_json::{json, Value};

const TOKIO: &str = env!("CARGO_BIN_EXE_stdio-tokio");
const SMOL: &str = env!("CARGO_BIN_EXE_stdio-smol");

/// The binaries' exit status for a line over the frame limit (`stdio_server::exit_code`).
const EXIT_FRAME_TOO_LARGE: i32 = 4;
/// The binaries' exit status when stdout was closed under them.
const EXIT_OUTPUT_CLOSED: i32 = 5;
/// `Limits::default().frame_bytes()`.
const FRAME_LIMIT: usize = 2 * 1024 * 1024;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const INTERNAL_ERROR: &str = r#"{"code":-32603,"message":"internal error"}"#;

type Outcome = Result<(), String>;

/// Starts `program` and completes the handshake. (The exact initialize result, capabilities
/// included, is the transcripts' business; here it only has to be a successful one.)
fn session(program: &str) -> Result<Process, String> {
    let mut p = Process::spawn(program, &[])?;
    p.send_line(INITIALIZE.as_bytes());
    let line = p.next_line(TIMEOUT)?.ok_or_else(|| p.fail("stdout closed before the initialize reply"))?;
    let reply = protocol_line(&line).map_err(|e| p.fail(e))?;
    ensure(
        reply.get("id").and_then(Value::as_str) == Some("init")
            && reply.pointer("/result/protocolVersion").and_then(Value::as_str) == Some("2025-06-18")
            && reply.pointer("/result/serverInfo/name").and_then(Value::as_str) == Some("replay"),
        &p,
        format!("not a successful initialize reply: {reply}"),
    )?;
    p.send_line(INITIALIZED.as_bytes());
    Ok(p)
}

fn call(id: impl Into<Value>, tool: &str, arguments: Value) -> Vec<u8> {
    let frame = json!({"jsonrpc": "2.0", "id": id.into(), "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    frame.to_string().into_bytes()
}

fn ping(id: u64) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).into_bytes()
}

fn ping_reply(id: u64) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#).into_bytes()
}

fn text_reply(id: u64, text: &str) -> Vec<u8> {
    let text = Value::String(text.to_owned());
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":{text}}}]}}}}"#)
        .into_bytes()
}

fn cancel(id: u64) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#)
        .into_bytes()
}

fn ensure(cond: bool, p: &Process, msg: impl std::fmt::Display) -> Outcome {
    if cond {
        Ok(())
    } else {
        Err(p.fail(msg))
    }
}

/// A handler that panics, inside its future or before returning one, is answered with the
/// generic internal error, and the session carries on.
fn panic_is_an_internal_error_and_the_session_goes_on(program: &str) -> Outcome {
    let mut p = session(program)?;
    p.send_line(&call(2, "panic", json!({})));
    p.expect_line(format!(r#"{{"jsonrpc":"2.0","id":2,"error":{INTERNAL_ERROR}}}"#).as_bytes())?;
    p.send_line(&call(3, "panic", json!({"when": "call"})));
    p.expect_line(format!(r#"{{"jsonrpc":"2.0","id":3,"error":{INTERNAL_ERROR}}}"#).as_bytes())?;
    p.send_line(&call(4, "echo", json!({"text": "still here"})));
    p.expect_line(&text_reply(4, "still here"))?;
    p.send_line(&ping(5));
    p.expect_line(&ping_reply(5))?;
    p.close_and_expect_clean_exit()
}

/// Handlers run concurrently: calls that sleep for a minute do not hold back an echo sent
/// after them. Cancelling them sends nothing for them and ends them, so end of input then
/// finishes at once (a handler still running would hold the exit for the 10 s drain).
fn handlers_run_concurrently(program: &str) -> Outcome {
    let mut p = session(program)?;
    for id in 2..=4 {
        p.send_line(&call(id, "slow", json!({"ms": 60_000})));
    }
    p.send_line(&call(5, "echo", json!({"text": "fast"})));
    p.expect_line(&text_reply(5, "fast"))?;
    for id in 2..=4 {
        p.send_line(&cancel(id));
    }
    p.send_line(&ping(6));
    p.expect_line(&ping_reply(6))?;
    p.close_and_expect_clean_exit()
}

/// A line of exactly the frame limit is an ordinary frame.
fn a_line_at_the_frame_limit_is_served(program: &str) -> Outcome {
    let mut p = session(program)?;
    let empty = call(2, "echo", json!({"text": ""}));
    let text = "x".repeat(FRAME_LIMIT - empty.len());
    let frame = call(2, "echo", json!({"text": text}));
    ensure(frame.len() == FRAME_LIMIT, &p, format!("built a frame of {} bytes", frame.len()))?;
    p.send_line(&frame);
    p.expect_line(&text_reply(2, &text))?;
    p.close_and_expect_clean_exit()
}

/// A line over the frame limit gets one `-32600` error with a `null` id; then the session ends:
/// stdout closes and the process exits, without a panic, although stdin stays open and more
/// requests follow the long line.
fn an_oversized_line_gets_one_error_then_the_process_exits(program: &str) -> Outcome {
    let mut p = session(program)?;
    p.send_line(&ping(2));
    let head =
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#;
    let mut long = head.to_vec();
    long.resize(FRAME_LIMIT + 1, b'x');
    long.extend_from_slice(b"\"}}}");
    p.send_line(&long);
    p.send_line(&ping(4));
    p.expect_line(&ping_reply(2))?;

    let line = p.next_line(TIMEOUT)?.ok_or_else(|| p.fail("stdout closed without an error line"))?;
    let error = protocol_line(&line).map_err(|e| p.fail(e))?;
    ensure(
        error.get("id") == Some(&Value::Null)
            && error.pointer("/error/code").and_then(Value::as_i64) == Some(-32600)
            && error.get("result").is_none(),
        &p,
        format!("expected one -32600 error with a null id, got {error}"),
    )?;
    let rest = p.rest(TIMEOUT)?;
    ensure(
        rest.is_empty(),
        &p,
        format!("{} line(s) after the error line (stdout should close)", rest.len()),
    )?;
    let status = p.wait(TIMEOUT)?;
    ensure(
        status.code() == Some(EXIT_FRAME_TOO_LARGE),
        &p,
        format!(
            "exited with {status}, expected status {EXIT_FRAME_TOO_LARGE} (session ended: frame too large)"
        ),
    )?;
    ensure(!p.stderr_text().contains("panicked"), &p, "the process panicked")
}

/// Notifications, responses and cancellations of unknown requests produce no line.
fn notifications_produce_no_line(program: &str) -> Outcome {
    let mut p = session(program)?;
    for frame in [
        INITIALIZED,
        r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/no-such-notification","params":{"x":1}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":404}}"#,
        r#"{"jsonrpc":"2.0","id":77,"result":{}}"#,
    ] {
        p.send_line(frame.as_bytes());
    }
    // Had any of them been answered, that line would come before this reply.
    p.send_line(&ping(2));
    p.expect_line(&ping_reply(2))?;
    p.close_and_expect_clean_exit()
}

/// End of input while calls are in flight: their replies are still written, then the process
/// exits cleanly.
fn end_of_input_waits_for_calls_in_flight(program: &str) -> Outcome {
    let mut p = session(program)?;
    p.send_line(&call(2, "slow", json!({"ms": 300})));
    p.send_line(&call(3, "slow", json!({"ms": 100})));
    p.close_stdin();
    let mut lines = p.rest(TIMEOUT)?;
    lines.sort();
    let mut expected = vec![text_reply(2, "slept 300ms"), text_reply(3, "slept 100ms")];
    expected.sort();
    ensure(
        lines == expected,
        &p,
        format!(
            "expected both replies then end of output, got:\n{}",
            lines.iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect::<Vec<_>>().join("\n")
        ),
    )?;
    let status = p.wait(TIMEOUT)?;
    ensure(status.success(), &p, format!("exited with {status}"))
}

/// Whatever happens (panics, private errors, garbage, batches), stdout carries only protocol
/// lines, one per request; logs and panic messages go to stderr.
fn stdout_carries_only_protocol_lines(program: &str) -> Outcome {
    let mut p = session(program)?;
    let frames: Vec<Vec<u8>> = vec![
        call(2, "panic", json!({})),
        call(3, "panic", json!({"when": "call"})),
        call(4, "boom", json!({})),
        call(5, "public_fail", json!({})),
        call(6, "echo", json!({"text": "line one\nline two\r\n\u{2028}"})),
        call(7, "no_such_tool", json!({})),
        call(8, "add", json!({"a": "x"})),
        b"{not json".to_vec(),
        b"[]".to_vec(),
        br#"[{"jsonrpc":"2.0","id":9,"method":"ping"}]"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":10,"method":"no/such/method"}"#.to_vec(),
        b"\"just a string\"".to_vec(),
        b"\xff\xfe".to_vec(),
        call(11, "slow", json!({"ms": 50})),
        ping(12),
    ];
    let count = frames.len();
    for f in &frames {
        p.send_line(f);
    }
    p.close_stdin();
    let lines = p.rest(TIMEOUT)?;
    for line in &lines {
        protocol_line(line).map_err(|e| p.fail(format!("stdout: {e}")))?;
    }
    ensure(
        lines.len() == count,
        &p,
        format!("{count} frames that each need one reply got {} lines", lines.len()),
    )?;
    let status = p.wait(TIMEOUT)?;
    ensure(status.success(), &p, format!("exited with {status}"))?;
    let stderr = p.stderr_text();
    ensure(stderr.contains("panics inside its future"), &p, "the panic message did not reach stderr")?;
    let leaked = lines.iter().any(|l| String::from_utf8_lossy(l).contains("hunter2"));
    ensure(!leaked, &p, "a private error detail reached stdout")
}

/// 200 requests written at once, without reading: every one answered exactly once, correctly.
fn pipelined_requests_are_answered_exactly_once(program: &str) -> Outcome {
    const N: u64 = 200;
    let mut p = session(program)?;
    let mut all = Vec::new();
    let mut expected = BTreeMap::new();
    for id in 1..=N {
        let (frame, reply) = match id % 4 {
            0 => (ping(id), ping_reply(id)),
            1 => (call(id, "echo", json!({"text": format!("#{id}")})), text_reply(id, &format!("#{id}"))),
            2 => (call(id, "add", json!({"a": id, "b": 0.5})), text_reply(id, &format!("{id}.5"))),
            _ => {
                let ms = id % 7;
                (call(id, "slow", json!({"ms": ms})), text_reply(id, &format!("slept {ms}ms")))
            }
        };
        all.extend_from_slice(&frame);
        all.push(b'\n');
        expected.insert(id, reply);
    }
    p.send_bytes(all);
    p.close_stdin();
    let lines = p.rest(TIMEOUT * 2)?;
    let mut seen: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for line in lines {
        let v = protocol_line(&line).map_err(|e| p.fail(e))?;
        let id = v
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| p.fail(format!("a reply without a numeric id: {v}")))?;
        if seen.insert(id, line).is_some() {
            return Err(p.fail(format!("request {id} was answered twice")));
        }
    }
    for (id, reply) in &expected {
        match seen.get(id) {
            None => return Err(p.fail(format!("request {id} was never answered"))),
            Some(line) if line != reply => {
                return Err(p.fail(format!(
                    "request {id}: expected {}, got {}",
                    String::from_utf8_lossy(reply),
                    String::from_utf8_lossy(line)
                )))
            }
            Some(_) => {}
        }
    }
    ensure(
        seen.len() == expected.len(),
        &p,
        format!("{} replies for {} requests", seen.len(), expected.len()),
    )?;
    let status = p.wait(TIMEOUT)?;
    ensure(status.success(), &p, format!("exited with {status}"))
}

/// A burst of more small requests than the output queue holds (`Limits::max_queued_frames`,
/// 1024), written at once by a client that reads all the while: every one is answered. The
/// queue bounds how far a peer may fall behind in reading, not how many requests may arrive in
/// one read.
fn a_burst_larger_than_the_output_queue_is_answered(program: &str) -> Outcome {
    const N: u64 = 2000;
    let mut p = session(program)?;
    let mut all = Vec::new();
    for id in 1..=N {
        all.extend_from_slice(&ping(id));
        all.push(b'\n');
    }
    p.send_bytes(all);
    p.close_stdin();
    let lines = p.rest(TIMEOUT * 2)?;
    let status = p.wait(TIMEOUT)?;
    let expected: Vec<Vec<u8>> = (1..=N).map(ping_reply).collect();
    ensure(
        lines == expected,
        &p,
        format!("{N} pings got {} replies (the process exited with {status})", lines.len()),
    )?;
    ensure(status.success(), &p, format!("exited with {status}"))
}

/// A peer that closes the server's stdout but keeps stdin open: the session ends (the reply
/// cannot be written) and the process exits.
fn closing_stdout_ends_the_process(program: &str) -> Outcome {
    let mut p = Process::spawn_with_stdout_closed(program, &[])?;
    p.send_line(INITIALIZE.as_bytes());
    let status = p.wait(TIMEOUT)?;
    ensure(
        status.code() == Some(EXIT_OUTPUT_CLOSED),
        &p,
        format!("exited with {status}, expected status {EXIT_OUTPUT_CLOSED} (session ended: output closed)"),
    )?;
    ensure(!p.stderr_text().contains("panicked"), &p, "the process panicked")
}

/// Stdin and stdout that are regular files, not pipes (`server < requests > replies`): the
/// shims read and write them on threads instead of through the reactor, and every request in
/// the file is answered, in the file.
fn files_instead_of_pipes_are_served(program: &str) -> Outcome {
    let dir = std::env::temp_dir().join(format!(
        "mcp-stdio-files-{}-{}",
        std::process::id(),
        program.rsplit('/').next().unwrap_or("server")
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{dir:?}: {e}"))?;
    let (input, output) = (dir.join("in.jsonl"), dir.join("out.jsonl"));
    let mut requests = format!("{INITIALIZE}\n{INITIALIZED}\n");
    for id in 1..=20 {
        requests.push_str(&String::from_utf8_lossy(&ping(id)));
        requests.push('\n');
    }
    std::fs::write(&input, requests).map_err(|e| format!("{input:?}: {e}"))?;
    let status = std::process::Command::new(program)
        .stdin(std::fs::File::open(&input).map_err(|e| e.to_string())?)
        .stdout(std::fs::File::create(&output).map_err(|e| e.to_string())?)
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("{program}: {e}"))?;
    let written = std::fs::read_to_string(&output).map_err(|e| format!("{output:?}: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    if !status.success() {
        return Err(format!("{program} exited with {status} after writing:\n{written}"));
    }
    let lines: Vec<&str> = written.lines().collect();
    if lines.len() != 21 {
        return Err(format!(
            "expected 21 replies (initialize and 20 pings), got {}:\n{written}",
            lines.len()
        ));
    }
    for id in 1..=20 {
        let reply = String::from_utf8_lossy(&ping_reply(id)).into_owned();
        if !lines.contains(&reply.as_str()) {
            return Err(format!("no reply {reply} in:\n{written}"));
        }
    }
    Ok(())
}

fn check(outcome: Outcome) {
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// Every behaviour above, as one test per runtime.
macro_rules! on_both_runtimes {
    ($($name:ident),* $(,)?) => {
        mod tokio {
            $(#[test]
            fn $name() {
                super::check(super::$name(super::TOKIO));
            })*
        }
        mod smol {
            $(#[test]
            fn $name() {
                super::check(super::$name(super::SMOL));
            })*
        }
    };
}

on_both_runtimes!(
    panic_is_an_internal_error_and_the_session_goes_on,
    handlers_run_concurrently,
    a_line_at_the_frame_limit_is_served,
    an_oversized_line_gets_one_error_then_the_process_exits,
    notifications_produce_no_line,
    end_of_input_waits_for_calls_in_flight,
    stdout_carries_only_protocol_lines,
    pipelined_requests_are_answered_exactly_once,
    files_instead_of_pipes_are_served,
);

#[test]
fn a_burst_larger_than_the_output_queue_is_answered_tokio() {
    check(a_burst_larger_than_the_output_queue_is_answered(TOKIO));
}

#[test]
fn a_burst_larger_than_the_output_queue_is_answered_smol() {
    check(a_burst_larger_than_the_output_queue_is_answered(SMOL));
}

#[test]
fn closing_stdout_ends_the_process_smol() {
    check(closing_stdout_ends_the_process(SMOL));
}

#[test]
fn closing_stdout_ends_the_process_tokio() {
    check(closing_stdout_ends_the_process(TOKIO));
}

#[test]
fn the_harness_catches_wrong_missing_and_extra_lines() {
    let script = |s: &str| pipe::script(s).expect("a pipe script");
    let ping = "> {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    for program in [TOKIO, SMOL] {
        let ok = format!("{ping}< {{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{}}}}\n");
        pipe::replay(program, &script(&ok)).unwrap_or_else(|e| panic!("{e}"));
        let wrong = ok.replace("{}}", "{\"x\":1}}");
        let e = pipe::replay(program, &script(&wrong)).expect_err("a wrong line");
        assert!(e.contains("line 2") && e.contains("first difference"), "{e}");
        let e = pipe::replay(program, &script(ping)).expect_err("an unexpected line");
        assert!(e.contains("nothing expects"), "{e}");
    }
    // A line that never comes fails after the timeout (once: it takes that long).
    let missing = "< {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n";
    let e = pipe::replay(SMOL, &script(missing)).expect_err("a missing line");
    assert!(e.contains("line 1") && e.contains("no line"), "{e}");
}
