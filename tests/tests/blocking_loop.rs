//! `mcp-proto`'s `blocking_loop` example (the bare engine on std threads) as a user runs it: a
//! session piped through the built binary over real stdio. Like the other example tests, it
//! needs the binary `cargo test --workspace` builds (or
//! `cargo build -p mcp-proto --example blocking_loop`), and skips without it; the example's own
//! tests (`cargo test -p mcp-proto --example blocking_loop`) run its loop in-process.

use mcp_tests::examples::example;
use mcp_tests::pipe::{protocol_line, Process, TIMEOUT};
use serde_json::{json, Value};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn start(args: &[&str]) -> Option<Process> {
    let path = example("blocking_loop")?;
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let mut p = Process::spawn(path.to_str()?, &args).unwrap_or_else(|e| panic!("{e}"));
    p.send_line(INITIALIZE.as_bytes());
    let init = reply(&mut p);
    assert_eq!(init["result"]["serverInfo"]["name"], "blocking-loop", "{init}");
    p.send_line(INITIALIZED.as_bytes());
    Some(p)
}

fn reply(p: &mut Process) -> Value {
    let line = p.next_line(TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    let line = line.unwrap_or_else(|| panic!("{}", p.fail("stdout closed")));
    protocol_line(&line).unwrap_or_else(|e| panic!("{}", p.fail(e)))
}

#[test]
fn serves_a_session_over_stdio_and_exits_cleanly() {
    let Some(mut p) = start(&["--call-timeout-ms", "200"]) else { return };
    p.send_line(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    let list = reply(&mut p);
    let names: Vec<&str> =
        list["result"]["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["add", "sleep"], "{list}");
    p.send_line(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":-2,"b":44}}}"#);
    assert_eq!(
        reply(&mut p),
        json!({"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"42"}]}})
    );
    // The engine's timer answers a call whose handler still blocks the worker.
    p.send_line(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":5000}}}"#);
    let timed_out = reply(&mut p);
    assert_eq!(
        (timed_out["id"].clone(), timed_out["error"]["message"].clone()),
        (json!(3), json!("request timed out"))
    );
    p.close_and_expect_clean_exit().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn an_oversized_line_ends_the_session_with_status_2() {
    let Some(mut p) = start(&["--max-frame-bytes", "512"]) else { return };
    p.send_line("x".repeat(4096).as_bytes());
    let refused = reply(&mut p);
    assert_eq!(
        (refused["id"].clone(), refused["error"]["code"].clone()),
        (Value::Null, json!(-32600)),
        "{refused}"
    );
    let status = p.wait(TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status.code(), Some(2));
}
