//! The demo servers' `--http ADDR` flag, on both runtimes: the process binds, prints exactly
//! `listening on http://HOST:PORT/mcp` on stderr (the line scripts and CI parse), and serves MCP
//! there.
//!
//! The example binaries are built by `cargo test --workspace` next to this test's own binary
//! (`target/<profile>/examples/`); a run of this crate alone skips these tests.

use mcp_tests::examples::serve_http_example;
use mcp_tests::http::{Client, Req};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"examples-test","version":"1"}}}"#;

fn serves_http(name: &str) {
    let served = serve_http_example(name).unwrap_or_else(|e| panic!("{e}"));
    // `cargo test --workspace` (the README's command, and CI's) builds every example; a run
    // limited to this crate does not, and has nothing to start.
    let Some(served) = served else { return };
    let addr = served.addr;
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{name}: {addr}");

    let mut client = Client::connect(addr).expect("connect");
    let resp = client.request(&Req::post(INITIALIZE)).expect("initialize");
    assert_eq!(resp.status(), 200, "{name}: {}", String::from_utf8_lossy(&resp.body));
    let reply = resp.json().expect("JSON");
    assert_eq!(reply["result"]["serverInfo"]["name"], "mcp-rs-everything", "{name}: {reply}");
    assert!(resp.header("mcp-session-id").is_some(), "{name}: no session id");
}

#[test]
fn tokio_example_serves_http() {
    serves_http("everything");
}

#[test]
fn smol_example_serves_http() {
    serves_http("everything-smol");
}
