//! Measures what an idle legacy HTTP session and an idle SSE stream cost the server, as the
//! growth of its resident set over N of each:
//!
//! ```sh
//! ulimit -n 20000
//! cargo build --profile dist -p mcp-tokio --example everything
//! cargo run --release -p mcp-tests --bin idle-cost -- target/dist/examples/everything 10000
//! ```
//!
//! (The `dist` profile, fat LTO and one codegen unit, is what a deployed server is built with;
//! its resident set is smaller than a `release` build's, since at rest it is mostly code.)
//!
//! The server is started as `SERVER --http 127.0.0.1:0 --bench --capacity N+128`. N sessions are
//! opened (`initialize` + `notifications/initialized` over one keep-alive connection), then one
//! `GET` stream per session, each on its own connection and left unread. Prints bytes per session
//! and per stream. Linux only (it reads `/proc/PID/status`).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_tests::http::{Client, Req};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"idle-cost","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn settle() {
    std::thread::sleep(Duration::from_millis(500));
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let server = args.next().ok_or("usage: idle-cost SERVER_BINARY [N]")?;
    let n: usize = args.next().map_or(Ok(10_000), |s| s.parse()).map_err(|e| format!("N: {e}"))?;
    let mut child = Command::new(&server)
        .args(["--http", "127.0.0.1:0", "--bench", "--capacity", &(n + 128).to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{server}: {e}"))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).map_err(|e| e.to_string())?;
    let url = line.trim().strip_prefix("listening on http://").ok_or(format!("unexpected: {line}"))?;
    let addr: SocketAddr = url.trim_end_matches("/mcp").parse().map_err(|e| format!("{url}: {e}"))?;
    let pid = child.id();

    let mut control = Client::connect(addr).map_err(|e| e.to_string())?;
    let open_session = |c: &mut Client| -> Result<String, String> {
        let r = c.request(&Req::post(INIT))?;
        let sid = r
            .header("mcp-session-id")
            .ok_or_else(|| format!("no session id: {} {}", r.status(), String::from_utf8_lossy(&r.body)))?
            .to_owned();
        let r = c.request(&Req::post(INITIALIZED).header("Mcp-Session-Id", &sid))?;
        if r.status() != 202 {
            return Err(format!("initialized: {}", r.status()));
        }
        Ok(sid)
    };
    // Warm up allocator arenas and lazily made tables before the baseline.
    for _ in 0..64 {
        open_session(&mut control)?;
    }
    settle();
    let base = rss_kib(pid);
    let mut sessions = Vec::with_capacity(n);
    for _ in 0..n {
        sessions.push(open_session(&mut control)?);
    }
    settle();
    let with_sessions = rss_kib(pid);
    let mut streams = Vec::with_capacity(n);
    for sid in &sessions {
        let mut c = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
        let get = Req::new("GET", "/mcp").header("Accept", "text/event-stream").header("Mcp-Session-Id", sid);
        c.send(&get.to_bytes()).map_err(|e| e.to_string())?;
        let head = c.head()?;
        if head.status != 200 {
            return Err(format!("GET: {}", head.status));
        }
        streams.push(c);
    }
    settle();
    let with_streams = rss_kib(pid);
    let _ = child.kill();
    let _ = child.wait();
    let per = |kib: u64| kib as f64 * 1024.0 / n as f64;
    println!(
        "server={server} n={n} rss_base_kib={base} rss_sessions_kib={with_sessions} rss_streams_kib={with_streams}"
    );
    println!(
        "bytes_per_idle_session={:.0} bytes_per_idle_stream={:.0}",
        per(with_sessions.saturating_sub(base)),
        per(with_streams.saturating_sub(with_sessions))
    );
    Ok(())
}
