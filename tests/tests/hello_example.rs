//! `mcp-tokio`'s `hello` example, the README's install example, run as a user would: launched
//! as a command, one session over its stdin and stdout.
//!
//! Only what needs the process is here: the session over real standard streams and the exit at
//! end of input. What the tool does (its derived schema, its answers) is tested in memory in the
//! example itself (`examples/hello.rs`, through `mcp_tokio::testing`).
//!
//! The example binary is built by `cargo test --workspace` next to this test's own binary
//! (`target/<profile>/examples/`); a run of this crate alone skips this test.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use mcp_tests::examples::example;
use serde_json::Value;

const SESSION: [&str; 4] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"hello-test","version":"1"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}"#,
];

#[test]
fn hello_greets_over_stdio_and_exits_at_end_of_input() {
    let Some(path) = example("hello") else { return };
    let mut child = Command::new(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut stdin = child.stdin.take().expect("stdin");
    for line in SESSION {
        writeln!(stdin, "{line}").expect("write a line");
    }
    // End of input ends the session once its calls are answered, and the process with it.
    drop(stdin);
    let mut out = String::new();
    child.stdout.take().expect("stdout").read_to_string(&mut out).expect("read stdout");
    let status = child.wait().expect("wait");
    assert!(status.success(), "hello exited with {status}; its output:\n{out}");

    let replies: Vec<Value> =
        out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    assert_eq!(replies.len(), 3, "one reply per request: {out}");
    assert_eq!(replies[0]["result"]["serverInfo"]["name"], "hello", "{out}");
    assert_eq!(replies[1]["result"]["tools"][0]["name"], "greet", "{out}");
    assert_eq!(replies[2]["id"], 3, "{out}");
    assert_eq!(replies[2]["result"]["content"][0]["text"], "Hello, Ada!", "{out}");
}
