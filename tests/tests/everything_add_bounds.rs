//! The `everything` demo servers' exact-decimal `add` refuses addends it cannot sum cheaply,
//! over real stdio on both runtimes: `{"a":1e9000000000,"b":1}` (25 bytes of arguments) is
//! answered with a tool error naming the bound, at once, and the session goes on (a `ping`
//! sent after it is answered). Unbounded, that sum asks for nine billion digits: the call
//! never ends, and on smol nothing else on the session is answered either.
//!
//! Runs the example binaries, which `cargo test --workspace` builds (see `mcp_tests::examples`).

use mcp_tests::examples::{example, EVERYTHING};
use mcp_tests::pipe::{protocol_line, Process, TIMEOUT};
use serde_json::Value;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The next reply, as JSON.
fn reply(p: &mut Process) -> Result<Value, String> {
    let line = p.next_line(TIMEOUT)?.ok_or_else(|| p.fail("stdout closed"))?;
    protocol_line(&line).map_err(|e| p.fail(e))
}

fn add(id: u64, a: &str, b: &str) -> String {
    // Written out by hand: the numbers go on the wire exactly as a client would write them.
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"add","arguments":{{"a":{a},"b":{b}}}}}}}"#
    )
}

fn hostile_add_is_refused_and_the_session_goes_on(name: &str) -> Result<(), String> {
    let Some(path) = example(name) else { return Ok(()) };
    let mut p = Process::spawn(&path.to_string_lossy(), &[])?;
    p.send_line(INITIALIZE.as_bytes());
    let init = reply(&mut p)?;
    if init.pointer("/result/serverInfo/name").and_then(Value::as_str) != Some("mcp-rs-everything") {
        return Err(p.fail(format!("not the everything server's initialize reply: {init}")));
    }
    p.send_line(INITIALIZED.as_bytes());

    for (id, a, b) in [(2, "1e9000000000", "1"), (3, "1", "-1e-9000000000"), (4, &*"7".repeat(1001), "1")] {
        p.send_line(add(id, a, b).as_bytes());
        p.send_line(format!(r#"{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#, id + 100).as_bytes());
        // Either order: the call and the ping are concurrent requests.
        let (mut refused, mut pinged) = (false, false);
        for _ in 0..2 {
            let r = reply(&mut p)?;
            if r["id"] == id + 100 {
                pinged = r["result"] == serde_json::json!({});
            } else if r["id"] == id {
                let text = r.pointer("/result/content/0/text").and_then(Value::as_str).unwrap_or_default();
                refused = r.pointer("/result/isError") == Some(&Value::Bool(true))
                    && text.contains("out of bounds")
                    && text.contains("1000 significant digits");
                if !refused {
                    return Err(p.fail(format!("add({a:.20}, {b:.20}) was not refused as a tool error: {r}")));
                }
            } else {
                return Err(p.fail(format!("unexpected reply {r}")));
            }
        }
        if !(refused && pinged) {
            return Err(p.fail(format!("call {id}: refused {refused}, pinged {pinged}")));
        }
    }

    // Within the bounds, sums are still exact.
    p.send_line(add(5, "2", "3.5").as_bytes());
    let r = reply(&mut p)?;
    if r.pointer("/result/content/0/text").and_then(Value::as_str) != Some("5.5") {
        return Err(p.fail(format!("2 + 3.5: {r}")));
    }
    p.close_and_expect_clean_exit()
}

#[test]
fn hostile_add_is_refused_on_both_runtimes() {
    let failures: Vec<String> = EVERYTHING
        .iter()
        .filter_map(|name| hostile_add_is_refused_and_the_session_goes_on(name).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
