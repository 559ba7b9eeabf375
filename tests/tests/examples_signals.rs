//! The demo servers stop gracefully on SIGTERM, on both runtimes: a call in flight when the
//! signal arrives still gets its answer, then the process exits with status 0 within the
//! shutdown budget (`mcp_tokio::shutdown_on_signal` / `mcp_smol::shutdown_on_signal`).
//!
//! Runs the example binaries, which `cargo test --workspace` builds (see `mcp_tests::examples`).
//! Unix only: the signal is sent with `kill -TERM`.
#![cfg(unix)]

use std::process::Command;
use std::time::{Duration, Instant};

use mcp_tests::examples::{serve_http_example, EVERYTHING};
use mcp_tests::http::{Client, Req};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"signals-test","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
/// Reports progress at once, then twice more 110 ms apart, then answers: with a progress token
/// its response is a stream, whose first event says the call is running.
const SLOW_CALL: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p"}}}"#;
/// The examples' shutdown budget (`Limits::drain_timeout`, 10 s), plus room for a loaded machine.
const EXIT_WITHIN: Duration = Duration::from_secs(15);

fn call_in_flight_is_answered_on_sigterm(name: &str) -> Result<(), String> {
    let Some(mut served) = serve_http_example(name)? else { return Ok(()) };
    let (addr, pid) = (served.addr, served.child.id().to_string());
    let mut client = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let resp = client.request(&Req::post(INITIALIZE))?;
    let session = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?.to_owned();
    let in_session =
        |req: Req| req.header("Mcp-Session-Id", &session).header("MCP-Protocol-Version", "2025-11-25");
    client.request(&in_session(Req::post(INITIALIZED)))?;

    client.send(&in_session(Req::post(SLOW_CALL)).to_bytes()).map_err(|e| e.to_string())?;
    let head = client.head()?;
    if head.status != 200 || head.header("content-type") != Some("text/event-stream") {
        return Err(format!("{name}: the slow call: {head:?}"));
    }
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        let chunk = client.chunk()?.ok_or("the stream ended before the first progress")?;
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    // The call is running; it answers some 220 ms from now.
    let status = Command::new("kill").args(["-TERM", &pid]).status().map_err(|e| format!("kill: {e}"))?;
    if !status.success() {
        return Err(format!("kill -TERM {pid}: {status}"));
    }
    let signalled = Instant::now();
    while !seen.contains(r#""id":2"#) {
        match client.chunk() {
            Ok(Some(chunk)) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(None) => return Err(format!("{name}: the stream ended without the answer: {seen}")),
            Err(e) => return Err(format!("{name}: the answer was lost ({e}): {seen}")),
        }
    }
    if !seen.contains("Progress tool finished") {
        return Err(format!("{name}: not the tool's answer: {seen}"));
    }
    // The client hangs up, as a client that got its answer does; the server has nothing left.
    drop(client);
    loop {
        match served.child.try_wait().map_err(|e| e.to_string())? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => return Err(format!("{name}: exited with {status} after SIGTERM")),
            None if signalled.elapsed() > EXIT_WITHIN => {
                return Err(format!("{name}: still running {EXIT_WITHIN:?} after SIGTERM"))
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

#[test]
fn examples_answer_calls_in_flight_and_exit_0_on_sigterm() {
    let failures: Vec<String> =
        EVERYTHING.iter().filter_map(|name| call_in_flight_is_answered_on_sigterm(name).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
