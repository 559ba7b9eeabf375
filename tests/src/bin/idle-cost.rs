//! Measures what an idle HTTP connection, an idle legacy session and an idle SSE stream cost a
//! server, as the growth of its resident set over N of each:
//!
//! ```sh
//! ulimit -n 20000
//! cargo build --profile dist -p mcp-tokio --example everything
//! cargo run --release -p mcp-tests --bin idle-cost -- target/dist/examples/everything 10000
//! cargo run --release -p mcp-tests --bin idle-cost -- --rmcp path/to/rmcp-peer 10000
//! ```
//!
//! (The `dist` profile, fat LTO and one codegen unit, is what a deployed server is built with;
//! its resident set is smaller than a `release` build's, since at rest it is mostly code.)
//!
//! This library's servers are started as `SERVER --http 127.0.0.1:0 --bench --capacity N+128`
//! (the capacity flag lifts the session table and the per-caller caps to N, all from one
//! address here); with `--rmcp`, the server is ../shared/bench's rmcp peer, started as
//! `SERVER http PORT` on a free port, with rmcp's defaults. Two processes per server, so that
//! memory one measure freed is not reused by the next:
//!
//! - connections: N TCP connections, opened and left without a byte sent
//!   (this library's servers close them when their header read timeout, 10 s by default,
//!   passes: all N are opened and measured within it, and checked still open);
//! - sessions, then streams: N sessions opened (`initialize` + `notifications/initialized` over
//!   one keep-alive connection), then one `GET` stream per session, each on its own connection
//!   and left unread.
//!
//! Prints bytes per connection, per session and per stream. Linux only (it reads
//! `/proc/PID/status`).

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// Which server is measured, and how it is started.
enum Kind {
    Ours,
    Rmcp,
}

/// A server process that is killed when dropped: left running, it would hold the caller's
/// pipes open.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(kind: &Kind, binary: &str, n: usize) -> Result<Server, String> {
    match kind {
        Kind::Ours => {
            let mut child = Command::new(binary)
                .args(["--http", "127.0.0.1:0", "--bench", "--capacity", &(n + 128).to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("{binary}: {e}"))?;
            let stderr = child.stderr.take().ok_or("no stderr")?;
            let mut line = String::new();
            BufReader::new(stderr).read_line(&mut line).map_err(|e| e.to_string())?;
            let parsed = line
                .trim()
                .strip_prefix("listening on http://")
                .ok_or(format!("unexpected: {line}"))
                .and_then(|url| url.trim_end_matches("/mcp").parse().map_err(|e| format!("{url}: {e}")));
            match parsed {
                Ok(addr) => Ok(Server { child, addr }),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    Err(e)
                }
            }
        }
        Kind::Rmcp => {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("a free port: {e}"))?
                .port();
            let child = Command::new(binary)
                .args(["http", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("{binary}: {e}"))?;
            let server = Server { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while TcpStream::connect(server.addr).is_err() {
                if Instant::now() > deadline {
                    return Err(format!("{binary} did not listen on {}", server.addr));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(server)
        }
    }
}

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let kind = if args.first().is_some_and(|a| a == "--rmcp") {
        args.remove(0);
        Kind::Rmcp
    } else {
        Kind::Ours
    };
    let mut args = args.into_iter();
    let binary = args.next().ok_or("usage: idle-cost [--rmcp] SERVER_BINARY [N]")?;
    let n: usize = args.next().map_or(Ok(10_000), |s| s.parse()).map_err(|e| format!("N: {e}"))?;

    let server = start(&kind, &binary, n)?;
    let (conn_base, with_conns) = connections(&server, n)?;
    drop(server);
    let server = start(&kind, &binary, n)?;
    let (base, with_sessions, with_streams) = sessions_then_streams(&server, n)?;
    drop(server);

    let per = |more: u64, less: u64| more.saturating_sub(less) as f64 * 1024.0 / n as f64;
    println!(
        "server={binary} n={n} rss_base_kib={base} rss_sessions_kib={with_sessions} rss_streams_kib={with_streams} rss_conn_base_kib={conn_base} rss_conns_kib={with_conns}"
    );
    println!(
        "bytes_per_idle_connection={:.0} bytes_per_idle_session={:.0} bytes_per_idle_stream={:.0}",
        per(with_conns, conn_base),
        per(with_sessions, base),
        per(with_streams, with_sessions)
    );
    Ok(())
}

fn open_session(c: &mut Client) -> Result<String, String> {
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
}

/// The server's resident set (KiB) at rest and with `n` idle connections.
fn connections(server: &Server, n: usize) -> Result<(u64, u64), String> {
    let pid = server.child.id();
    // Warm up allocator arenas and lazily made tables before the baseline: a few connections
    // that carried a session.
    let mut control = Client::connect(server.addr).map_err(|e| e.to_string())?;
    for _ in 0..64 {
        open_session(&mut control)?;
    }
    let warm: Vec<TcpStream> = (0..64)
        .map(|_| TcpStream::connect(server.addr))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    drop(warm);
    settle();
    let base = rss_kib(pid);
    // This library's servers close a connection that sends nothing within their header read
    // timeout (10 s by default), so all N must be open, and measured, well within it.
    let opened = Instant::now();
    let conns = open_many(server.addr, n)?;
    eprintln!("idle-cost: {n} connections opened in {:?}", opened.elapsed());
    settle();
    let with_conns = rss_kib(pid);
    // Still open: had the server dropped them, the figure would not be what it claims.
    let alive = conns.iter().filter(|c| is_open(c)).count();
    if alive != n {
        return Err(format!("the server closed {} of {n} idle connections within the measure", n - alive));
    }
    Ok((base, with_conns))
}

/// `n` TCP connections to `addr`, one after another with a pause after every 64: a connect
/// completes in the kernel before the server accepts it, so a client that never pauses
/// overflows the accept queue and waits out a SYN retry (a second) for each dropped one. The
/// queue is 128 deep for a listener bound the usual way (tokio's and smol's `bind`, as std's),
/// so a batch stays well under it.
fn open_many(addr: SocketAddr, n: usize) -> Result<Vec<TcpStream>, String> {
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        if i % 64 == 63 {
            std::thread::sleep(Duration::from_millis(20));
        }
        conns.push(connect_from(addr, source(i)).map_err(|e| format!("connect: {e}"))?);
    }
    Ok(conns)
}

/// The local address of the probe's `i`th connection: one of 127/8 per thousand. From one
/// address, ten thousand connections (and the TIME_WAIT that earlier runs left on it) make the
/// kernel's search for a free port the slowest part of the measure, by tens of seconds.
fn source(i: usize) -> IpAddr {
    IpAddr::from([127, run_byte(), (i / 1000 / 250) as u8, (i / 1000 % 250) as u8 + 2])
}

/// The second byte of this run's local addresses, so that one run meets none of the TIME_WAIT
/// an earlier one left.
fn run_byte() -> u8 {
    (std::process::id() % 250) as u8 + 2
}

/// A TCP connection to `addr` from `from` (any port).
fn connect_from(addr: SocketAddr, from: IpAddr) -> std::io::Result<TcpStream> {
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect(&addr.into())?;
    Ok(socket.into())
}

/// Whether the peer has not closed `conn` (a non-blocking peek that finds no end of stream).
fn is_open(conn: &TcpStream) -> bool {
    if conn.set_nonblocking(true).is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    let open = match conn.peek(&mut byte) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
    };
    let _ = conn.set_nonblocking(false);
    open
}

/// The server's resident set (KiB) at rest, with `n` idle sessions, and with a `GET` stream on
/// each of them too.
fn sessions_then_streams(server: &Server, n: usize) -> Result<(u64, u64, u64), String> {
    let (addr, pid) = (server.addr, server.child.id());
    // A session is its opener's: every GET comes from the address that opened the sessions.
    let from = IpAddr::from([127, run_byte(), 255, 1]);
    let mut control = Client::connect_from(addr, from).map_err(|e| e.to_string())?;
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
        let mut c = Client::connect_from(addr, from).map_err(|e| format!("connect: {e}"))?;
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
    drop(streams);
    Ok((base, with_sessions, with_streams))
}
