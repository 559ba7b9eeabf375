//! A long run of HTTP load on the everything example with the debris a real deployment sees,
//! sampling the server's resident set every interval: the data behind the soak curve of
//! docs/benchmarks.md (`bash bench/run.sh soak`).
//!
//! ```sh
//! cargo build --profile dist -p mcp-tokio --example everything
//! cargo run --release -p mcp-tests --bin soak -- target/dist/examples/everything 600 10
//! ```
//!
//! Arguments: the server binary, the run's length in seconds (600) and the sampling interval
//! (10). The server is started as `SERVER --http 127.0.0.1:0 --session-idle 10` with its whole
//! catalogue and otherwise default limits. Meanwhile:
//!
//! - `CLIENTS` (16) threads open a legacy session, make `CALLS_PER_SESSION` `echo` calls on it
//!   and abandon it (no `DELETE`), over and over, each session from a new caller address
//!   (127.x.y.z): the server holds an abandoned session until it has been idle 10 s (so a few
//!   hundred are held at any time, under the table's 1024), and a caller that abandoned 64
//!   would be refused;
//! - one thread opens a session and a `GET` stream on it, holds it for a moment and drops the
//!   connection, over and over;
//! - one thread starts a `slow_compute` task (2026-07-28, tasks extension) every 500 ms and never
//!   reads it back, so ended tasks pile up until the task time-to-live (5 min) expires them
//!   (about 600 held, under the 1024 the store holds).
//!
//! Every task and stream round also comes from a new address. One line per sample on stdout,
//! `t_s= rss_kb= rps= sessions= streams= tasks= errors=` (rps over the interval, the others
//! cumulative), in the format bench/charts.py reads. A failed round is counted (the first few
//! printed on stderr) and the thread goes on; the probe fails if the server exits.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_tests::http::{Client, Req};
use serde_json::json;

const CLIENTS: u8 = 16;
const CALLS_PER_SESSION: u64 = 1000;
/// How long the server keeps an abandoned session (`--session-idle`): short enough that the
/// abandoned ones of a run expire inside it, and fewer than the 1024 the table holds.
const SESSION_IDLE_SECS: &str = "10";
const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const ECHO: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}}"#;

#[derive(Default)]
struct Counts {
    calls: AtomicU64,
    sessions: AtomicU64,
    streams: AtomicU64,
    tasks: AtomicU64,
    errors: AtomicU64,
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()
}

/// `initialize` + `notifications/initialized` on `c`; the session's id.
fn open_session(c: &mut Client) -> Result<String, String> {
    let r = c.request(&Req::post(INIT))?;
    let sid = r.header("mcp-session-id").ok_or_else(|| format!("initialize: {}", r.status()))?.to_owned();
    let r = c.request(&Req::post(INITIALIZED).header("Mcp-Session-Id", &sid))?;
    if r.status() != 202 {
        return Err(format!("initialized: {}", r.status()));
    }
    Ok(sid)
}

/// Runs `round` until `stop`, each time on a new connection from a new caller address of
/// `lane` (127.LANE.x.y): as many clients coming and going, which the per-caller session share
/// would otherwise refuse past its 64th abandoned session. Counts failures and goes on.
fn repeat(
    addr: SocketAddr,
    lane: u8,
    stop: &AtomicBool,
    counts: &Counts,
    mut round: impl FnMut(&mut Client, IpAddr) -> Result<(), String>,
) {
    let mut n: u32 = 0;
    while !stop.load(Relaxed) {
        n = n.wrapping_add(1);
        let [_, _, hi, lo] = (n % (256 * 250)).to_be_bytes();
        let lo = 1 + lo % 250;
        let from = IpAddr::V4(Ipv4Addr::new(127, lane, hi, lo));
        let result =
            Client::connect_from(addr, from).map_err(|e| e.to_string()).and_then(|mut c| round(&mut c, from));
        if let Err(e) = result {
            if stop.load(Relaxed) {
                break; // the server was stopped under this round
            }
            if counts.errors.fetch_add(1, Relaxed) < 5 {
                eprintln!("soak: {e}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let server = args.next().ok_or("usage: soak SERVER_BINARY [SECONDS [INTERVAL]]")?;
    let secs: u64 = args.next().map_or(Ok(600), |s| s.parse()).map_err(|e| format!("SECONDS: {e}"))?;
    let every: u64 = args.next().map_or(Ok(10), |s| s.parse()).map_err(|e| format!("INTERVAL: {e}"))?;
    if every == 0 {
        return Err("INTERVAL must be at least 1 second".into());
    }
    let mut child = Command::new(&server)
        .args(["--http", "127.0.0.1:0", "--session-idle", SESSION_IDLE_SECS])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{server}: {e}"))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let mut lines = BufReader::new(stderr);
    let mut line = String::new();
    lines.read_line(&mut line).map_err(|e| e.to_string())?;
    let url = line.trim().strip_prefix("listening on http://").ok_or(format!("unexpected: {line}"))?;
    let addr: SocketAddr = url.trim_end_matches("/mcp").parse().map_err(|e| format!("{url}: {e}"))?;
    // The server's log goes on; left unread, the pipe would fill and stall it.
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    let pid = child.id();

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let mut threads = Vec::new();
    for i in 0..CLIENTS {
        let (stop, counts) = (stop.clone(), counts.clone());
        threads.push(std::thread::spawn(move || {
            repeat(addr, 10 + i, &stop, &counts, |c, _| {
                let sid = open_session(c)?;
                counts.sessions.fetch_add(1, Relaxed);
                let call = Req::post(ECHO).header("Mcp-Session-Id", &sid);
                for _ in 0..CALLS_PER_SESSION {
                    let r = c.request(&call)?;
                    if r.status() != 200 || r.json()?.get("result").is_none() {
                        return Err(format!("echo: {}", r.status()));
                    }
                    counts.calls.fetch_add(1, Relaxed);
                }
                Ok(())
            });
        }));
    }
    {
        let (stop, counts) = (stop.clone(), counts.clone());
        threads.push(std::thread::spawn(move || {
            repeat(addr, 2, &stop, &counts, |c, from| {
                let sid = open_session(c)?;
                let mut stream = Client::connect_from(addr, from).map_err(|e| e.to_string())?;
                let get = Req::new("GET", "/mcp")
                    .header("Accept", "text/event-stream")
                    .header("Mcp-Session-Id", &sid);
                stream.send(&get.to_bytes()).map_err(|e| e.to_string())?;
                if stream.head()?.status != 200 {
                    return Err("GET stream refused".into());
                }
                counts.streams.fetch_add(1, Relaxed);
                std::thread::sleep(Duration::from_millis(100));
                Ok(()) // dropped: the connection closes under the open stream
            });
        }));
    }
    {
        let (stop, counts) = (stop.clone(), counts.clone());
        threads.push(std::thread::spawn(move || {
            let mut id = 0u64;
            repeat(addr, 3, &stop, &counts, |c, _| {
                id += 1;
                let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                    "name": "slow_compute", "arguments": {"seconds": 0.05, "label": "soak"},
                    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities":
                                  {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}});
                let req = Req::post(body.to_string())
                    .header("MCP-Protocol-Version", "2026-07-28")
                    .header("Mcp-Method", "tools/call")
                    .header("Mcp-Name", "slow_compute");
                let created = c.request(&req)?.json()?;
                if created["result"]["resultType"] != "task" {
                    return Err(format!("not a task: {created}"));
                }
                counts.tasks.fetch_add(1, Relaxed);
                std::thread::sleep(Duration::from_millis(500));
                Ok(())
            });
        }));
    }

    let started = Instant::now();
    let mut last_calls = 0;
    let mut result = Ok(());
    for n in 1..=secs / every {
        let due = started + Duration::from_secs(n * every);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        if let Ok(Some(status)) = child.try_wait() {
            result = Err(format!("the server exited: {status}"));
            break;
        }
        let calls = counts.calls.load(Relaxed);
        println!(
            "t_s={} rss_kb={} rps={:.0} sessions={} streams={} tasks={} errors={}",
            n * every,
            rss_kib(pid).map_or("na".into(), |k| k.to_string()),
            (calls - last_calls) as f64 / every as f64,
            counts.sessions.load(Relaxed),
            counts.streams.load(Relaxed),
            counts.tasks.load(Relaxed),
            counts.errors.load(Relaxed),
        );
        last_calls = calls;
    }
    stop.store(true, Relaxed);
    let _ = child.kill();
    let _ = child.wait();
    for t in threads {
        let _ = t.join();
    }
    result
}
