//! Every `Limits` value is safe: with every field at zero, and with every field at its type's
//! maximum, a stdio session and an HTTP session end in a clear answer (a refusal naming the
//! bound, or normal service) and nothing panics, on both runtimes.

use std::time::Duration;

use futures_util::io::Cursor;
use mcp_proto::http::HttpConfig;
use mcp_proto::{Caller, Limits};
use mcp_server::{Runtime, Server, StdioEnd};
use mcp_tests::http::{each, ensure, serve, test_server_with, Client, Req, Shim, TIMEOUT};
use serde_json::{json, Value};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"extremes","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const PING: &str = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
const ECHO: &str =
    r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;

/// Every setter of `Limits` called with `n`, `d`, `rounds`: the list to extend when a field is
/// added, so that no field escapes these tests.
fn every(n: usize, d: Duration, rounds: u32) -> Limits {
    let mut l = Limits::default();
    // Engine.
    l.max_frame_bytes(n)
        .max_id_bytes(n)
        .max_method_bytes(n)
        .max_depth(n)
        .max_in_flight(n)
        .max_batch_len(n)
        .max_response_bytes(n)
        .max_connections(n)
        .page_size(n)
        .max_queued_frames(n)
        .max_uri_bytes(n)
        .max_subscribed_uris(n)
        .max_subscriptions(n)
        .max_listens(n)
        .progress_interval(d)
        .max_progress_bytes(n)
        .max_sessions(n)
        .session_idle(d)
        .session_handshake(d)
        .max_streams(Some(n))
        .max_streams_per_caller(Some(n))
        .stream_queue(n)
        .keepalive(d)
        .sse_retry(d)
        .replay_events(n)
        .call_timeout(Some(d))
        .max_input_rounds(rounds)
        .state_ttl(d)
        .replay_bytes(n);
    // HTTP transport.
    l.max_head_bytes(n)
        .header_read_timeout(d)
        .body_read_timeout(d)
        .max_http_connections(n)
        .max_discard_bytes(n)
        .discard_timeout(d);
    // Server layer.
    l.drain_timeout(d).max_parked_frames(n).forward_timeout(d).claim_lease(d);
    // Slow readers and the engine-wide call table.
    l.stall_timeout(d).max_calls(n);
    l
}

fn zero() -> Limits {
    every(0, Duration::ZERO, 0)
}

fn max() -> Limits {
    every(usize::MAX, Duration::MAX, u32::MAX)
}

fn server(limits: Limits) -> Server {
    let mut builder = Server::builder("extremes", "1");
    builder.config_mut().limits = limits;
    builder.build().unwrap_or_else(|e| panic!("build: {e}"))
}

/// Serves `input` as one stdio session of `server`; returns how it ended and the lines written.
async fn stdio<R: Runtime + Clone>(
    server: &Server,
    rt: R,
    input: &str,
) -> (std::io::Result<StdioEnd>, Vec<Value>) {
    let mut written = Vec::new();
    let end = mcp_server::serve_lines(
        server,
        rt,
        Caller::anonymous(),
        Cursor::new(input.as_bytes().to_vec()),
        Cursor::new(&mut written),
    )
    .await;
    let lines = String::from_utf8_lossy(&written)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    (end, lines)
}

async fn stdio_scenario<R: Runtime + Clone>(rt: R) {
    // All zero: not even one connection may open, and the error says which bound refused it.
    let s = server(zero());
    let (end, lines) = stdio(&s, rt.clone(), &format!("{PING}\n")).await;
    let err = end.err().unwrap_or_else(|| panic!("a session opened past a connection bound of 0"));
    assert!(err.to_string().contains("TooManyConnections"), "{err}");
    assert!(lines.is_empty(), "{lines:?}");
    assert_eq!(s.shutdown(Duration::ZERO).await.cancelled, 0);

    // All zero but the one connection: every frame is over the frame bound, which the answer
    // says, and the session ends since a line reader cannot skip an unread line.
    let mut limits = zero();
    limits.max_connections(1);
    let s = server(limits);
    let (end, lines) = stdio(&s, rt.clone(), &format!("{PING}\n")).await;
    assert_eq!(end.unwrap_or_else(|e| panic!("serve_lines: {e}")), StdioEnd::FrameTooLarge);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["id"], Value::Null);
    assert_eq!(lines[0]["error"]["code"], -32600);
    let message = lines[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("exceeds the 0-byte limit"), "{message}");
    assert_eq!(s.shutdown(Duration::ZERO).await.cancelled, 0);

    // All at their maximum: nothing is bounded, and a session is served as usual.
    let s = mcp_tests::echo_server("extremes", max());
    let input = format!("{INITIALIZE}\n{INITIALIZED}\n{PING}\n{LIST}\n{ECHO}\n");
    let (end, lines) = stdio(&s, rt, &input).await;
    assert_eq!(end.unwrap_or_else(|e| panic!("serve_lines: {e}")), StdioEnd::EndOfInput);
    let ids: Vec<&Value> = lines.iter().map(|l| &l["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &json!(3), &json!(4)], "{lines:?}");
    assert!(lines.iter().all(|l| l.get("result").is_some()), "{lines:?}");
    assert_eq!(lines[3]["result"]["content"][0]["text"], "hi", "{lines:?}");
    assert_eq!(s.shutdown(Duration::MAX).await.cancelled, 0);
}

#[test]
fn tokio_stdio_at_zero_and_max() {
    let rt = mcp_tests::http::tokio_runtime();
    rt.block_on(async { stdio_scenario(mcp_tokio::TokioRuntime::current()).await });
}

#[test]
fn smol_stdio_at_zero_and_max() {
    smol::block_on(stdio_scenario(mcp_smol::SmolRuntime));
}

fn connect(addr: std::net::SocketAddr) -> Result<Client, String> {
    Client::connect(addr).map_err(|e| format!("connect: {e}"))
}

#[test]
fn http_at_zero() {
    each(|shim: Shim| {
        // All zero: no connection is served; it is closed before a byte is read.
        let addr = serve(shim, test_server_with(shim, zero()), HttpConfig::default());
        let mut client = connect(addr)?;
        let _ = client.send(&Req::post(INITIALIZE).to_bytes());
        ensure(client.closed_within(TIMEOUT), || "a connection past a bound of 0 was served".to_owned())?;
        ensure(client.unread().is_empty(), || "a connection past a bound of 0 got bytes".to_owned())?;

        // All zero but one connection and time to send a head: the head is over its bound of
        // 0 bytes, and the refusal says so.
        let mut limits = zero();
        limits.max_http_connections(1).header_read_timeout(TIMEOUT);
        let addr = serve(shim, test_server_with(shim, limits), HttpConfig::default());
        let resp = connect(addr)?.request(&Req::post(INITIALIZE))?;
        ensure(resp.status() == 431, || format!("status {} instead of 431", resp.status()))?;
        let body = resp.json()?;
        ensure(body["error"]["message"] == "request head too large", || format!("refusal {body}"))
    });
}

#[test]
fn http_at_max() {
    each(|shim: Shim| {
        let server = test_server_with(shim, max());
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let mut client = connect(addr)?;
        let resp = client.request(&Req::post(INITIALIZE))?;
        ensure(resp.status() == 200, || format!("initialize: status {}", resp.status()))?;
        let sid = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?.to_owned();
        let in_session = |body: &str| {
            Req::post(body.to_owned())
                .header("Mcp-Session-Id", &sid)
                .header("MCP-Protocol-Version", "2025-11-25")
        };
        let resp = client.request(&in_session(INITIALIZED))?;
        ensure(resp.status() == 202, || format!("initialized: status {}", resp.status()))?;
        for (what, body) in [("ping", PING), ("tools/list", LIST), ("tools/call", ECHO)] {
            let resp = client.request(&in_session(body))?;
            ensure(resp.status() == 200, || format!("{what}: status {}", resp.status()))?;
            let answer = resp.json()?;
            ensure(answer.get("result").is_some(), || format!("{what}: {answer}"))?;
        }
        mcp_tests::http::block_on(shim, server.shutdown(Duration::MAX));
        Ok(())
    });
}

/// An output whose peer takes the first `cap` bytes (what a pipe's buffer holds) and then
/// never reads again: every later write stays pending, and nothing wakes it.
struct NeverRead {
    taken: usize,
    cap: usize,
}

impl futures_util::io::AsyncWrite for NeverRead {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let n = buf.len().min(self.cap - self.taken);
        if n == 0 {
            return std::task::Poll::Pending;
        }
        self.taken += n;
        std::task::Poll::Ready(Ok(n))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// An output whose peer reads slowly but always reads: at most `per_read` bytes at a time, each
/// read followed by a pause of `pause` (a thread wakes the writer after it).
struct SlowReader {
    written: Vec<u8>,
    per_read: usize,
    pause: Duration,
    ready: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl futures_util::io::AsyncWrite for SlowReader {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::sync::atomic::Ordering;
        if !self.ready.swap(false, Ordering::SeqCst) {
            let (ready, waker, pause) = (self.ready.clone(), cx.waker().clone(), self.pause);
            std::thread::spawn(move || {
                std::thread::sleep(pause);
                ready.store(true, Ordering::SeqCst);
                waker.wake();
            });
            return std::task::Poll::Pending;
        }
        let n = buf.len().min(self.per_read);
        self.written.extend_from_slice(&buf[..n]);
        std::task::Poll::Ready(Ok(n))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// `fut`, or a panic naming `what` if it is not done within a minute (a guard against a hang,
/// not a measure).
async fn guarded<R: Runtime, T>(rt: &R, what: &str, fut: impl std::future::Future<Output = T>) -> T {
    let guard = rt.sleep_until(rt.now() + Duration::from_secs(60));
    futures_util::pin_mut!(fut);
    match futures_util::future::select(fut, guard).await {
        futures_util::future::Either::Left((out, _)) => out,
        futures_util::future::Either::Right(_) => panic!("{what}: still blocked after 60 s"),
    }
}

fn pings(n: u64) -> String {
    (0..n).map(|i| format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n")).collect()
}

/// Issue 23, item 8: a client that writes 20 000 lines before reading anything has the session
/// closed once it has read nothing for the stall timeout, instead of blocking it for ever; a
/// client that reads, however slowly, gets every answer.
async fn write_before_read_scenario<R: Runtime + Clone>(rt: R) {
    let mut limits = Limits::default();
    limits.stall_timeout(Duration::from_millis(300));
    let s = mcp_tests::echo_server("stall", limits.clone());
    let input = Cursor::new(pings(20_000).into_bytes());
    let output = NeverRead { taken: 0, cap: 64 * 1024 };
    let end = guarded(&rt, "a client that never reads", async {
        mcp_server::serve_lines(&s, rt.clone(), Caller::anonymous(), input, output).await
    })
    .await;
    assert_eq!(end.unwrap_or_else(|e| panic!("serve_lines: {e}")), StdioEnd::Stalled);
    assert_eq!(s.shutdown(Duration::ZERO).await.cancelled, 0, "the stalled session is gone");

    // Each pause is far below the stall timeout; the whole takes far longer than it.
    limits.stall_timeout(Duration::from_secs(1));
    let s = mcp_tests::echo_server("slow", limits);
    let n = 20_000;
    let input = Cursor::new(pings(n).into_bytes());
    let mut output = SlowReader {
        written: Vec::new(),
        per_read: 2 * 1024,
        pause: Duration::from_millis(5),
        ready: Default::default(),
    };
    let end = guarded(&rt, "a slow reader", async {
        mcp_server::serve_lines(&s, rt.clone(), Caller::anonymous(), input, &mut output).await
    })
    .await;
    assert_eq!(end.unwrap_or_else(|e| panic!("serve_lines: {e}")), StdioEnd::EndOfInput);
    let mut ids: Vec<u64> = String::from_utf8_lossy(&output.written)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .map(|v| v["id"].as_u64().unwrap_or_else(|| panic!("no id: {v}")))
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..n).collect::<Vec<_>>(), "every ping answered once");
    assert_eq!(s.shutdown(Duration::ZERO).await.cancelled, 0);
}

#[test]
fn tokio_write_before_read_is_cut_and_a_slow_reader_is_served() {
    let rt = mcp_tests::http::tokio_runtime();
    rt.block_on(async { write_before_read_scenario(mcp_tokio::TokioRuntime::current()).await });
}

#[test]
fn smol_write_before_read_is_cut_and_a_slow_reader_is_served() {
    smol::block_on(write_before_read_scenario(mcp_smol::SmolRuntime));
}
