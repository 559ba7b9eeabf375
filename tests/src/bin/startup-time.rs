//! Times a stdio MCP server's start: from just before the exec to having the whole answer to
//! its first `initialize`, in milliseconds (printed with two decimals), as bench/run.sh's
//! `startup` reports it for every peer:
//!
//! ```sh
//! cargo run --release -p mcp-tests --bin startup-time -- target/dist/examples/everything --bench
//! ```
//!
//! The request is written before the child is even running, so the figure is the server's
//! start-up plus one exchange, the way a client that launches a server sees it. The child's
//! stdin is then closed and it gets a second to exit before it is killed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"startup-time","version":"1"}}}"#;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let program = args.next().ok_or("usage: startup-time SERVER [ARGS...]")?;
    let started = Instant::now();
    let mut child = Command::new(&program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    stdin.write_all(INIT.as_bytes()).and_then(|()| stdin.write_all(b"\n")).map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).map_err(|e| e.to_string())?;
    let took = started.elapsed();
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
    if answer["id"] != 1 || answer.get("result").is_none() {
        let _ = child.kill();
        return Err(format!("{program}: not an answer to initialize: {line:?}"));
    }
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    println!("{:.2}", took.as_secs_f64() * 1000.0);
    Ok(())
}
