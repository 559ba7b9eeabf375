//! The demo servers' `--http ADDR` flag, on both runtimes: the process binds, prints exactly
//! `listening on http://HOST:PORT/mcp` on stderr (the line scripts and CI parse), and serves MCP
//! there.
//!
//! The example binaries are built by `cargo test --workspace` next to this test's own binary
//! (`target/<profile>/examples/`); a run of this crate alone skips these tests.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use mcp_tests::http::{Client, Req, TIMEOUT};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"examples-test","version":"1"}}}"#;

/// `target/<profile>/examples/<name>`, from this test binary's `target/<profile>/deps/`.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps");
    profile.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

/// Kills the server when the test ends, whatever happened.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serves_http(name: &str) {
    let path = example(name);
    if !path.exists() {
        // `cargo test --workspace` (the README's command, and CI's) builds every example; a run
        // limited to this crate does not, and has nothing to start.
        eprintln!("skipped: {} is not built (run `cargo test --workspace`)", path.display());
        return;
    }
    let mut child = Command::new(&path)
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let stderr = child.stderr.take().expect("piped stderr");
    let _child = Killed(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stderr).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(TIMEOUT).unwrap_or_else(|e| panic!("{name}: no line on stderr: {e}"));
    let addr = line
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.strip_suffix("/mcp\n"))
        .and_then(|addr| addr.parse::<SocketAddr>().ok())
        .unwrap_or_else(|| panic!("{name}: unexpected first line {line:?}"));
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
