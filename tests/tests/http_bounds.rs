//! The Streamable HTTP bounds of [`Limits`] through both shims, over real loopback sockets:
//! session expiry and the session table, stream seats, slow subscribers, keep-alive re-checks
//! of the server-wide gate, and shutdown with work in flight.
//!
//! Each test runs its scenario on tokio and on smol. Limits are configured short (a few hundred
//! milliseconds) where a timeout is the subject; the client then polls for the outcome until a
//! generous deadline ([`SETTLE`]), so a slow machine makes a test slower, never wrong. Where the
//! subject is that something does *not* happen (a session with an open stream is kept), the
//! test waits several periods and checks: a late server timer can only make that check weaker.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use mcp_proto::http::HttpConfig;
use mcp_proto::{Gate, Limits, Resource, ResourceContents, SeatPolicy, Tool, ToolOutput};
use mcp_server::{Server, ToolCall};
use mcp_tests::http::{
    each, ensure, event_data, poll_until, serve, serve_watched, Client, Req, Response, Shim, TIMEOUT,
};
use serde_json::{json, Value};

type Outcome = mcp_tests::http::Outcome;

/// How long a test waits for the server to reach a state it must reach on its own (a session
/// reclaimed, a stream closed). The configured periods are 200 to 500 ms.
const SETTLE: Duration = Duration::from_secs(10);

const VERSION: &str = "2025-11-25";
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bounds-test","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// A server with one tool, `slow` (sleeps `arguments.ms` on the server's runtime), the limits
/// `limits` sets, and `gate` as the server-wide gate.
fn build(limits: impl FnOnce(&mut Limits), gate: Option<Gate>) -> Server {
    builder(limits, gate).build().unwrap_or_else(|e| panic!("the test server is valid: {e}"))
}

fn builder(limits: impl FnOnce(&mut Limits), gate: Option<Gate>) -> mcp_server::ServerBuilder {
    // Some tests subscribe to resources: the server reports their changes.
    let mut b = Server::builder("bounds", "1.0.0").resource_subscriptions();
    limits(&mut b.config_mut().limits);
    let slow = Tool::new(
        "slow",
        "Sleeps for ms milliseconds",
        json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}}),
    );
    let b = b.tool(slow, |call: ToolCall| async move {
        let ms = call.arguments.get("ms").and_then(Value::as_u64).unwrap_or(100);
        call.ctx.sleep(Duration::from_millis(ms)).await;
        ToolOutput::text(format!("slept {ms}ms"))
    });
    match gate {
        Some(gate) => b.server_gate(gate),
        None => b,
    }
}

fn connect(addr: SocketAddr) -> Result<Client, String> {
    Client::connect(addr).map_err(|e| format!("connect: {e}"))
}

fn expect_status(resp: &Response, status: u16, what: &str) -> Outcome {
    ensure(resp.status() == status, || {
        format!("{what}: expected {status}, got {} {}", resp.status(), String::from_utf8_lossy(&resp.body))
    })
}

fn in_session(req: Req, sid: &str) -> Req {
    req.header("Mcp-Session-Id", sid).header("MCP-Protocol-Version", VERSION)
}

fn get(sid: &str) -> Req {
    in_session(Req::new("GET", "/mcp").header("Accept", "text/event-stream"), sid)
}

/// `initialize` on a connection of its own: the new session's id, or the refusal.
fn initialize(addr: SocketAddr) -> Result<Result<String, Response>, String> {
    let resp = connect(addr)?.request(&Req::post(INITIALIZE))?;
    if resp.status() != 200 {
        return Ok(Err(resp));
    }
    let sid = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?;
    Ok(Ok(sid.to_owned()))
}

/// A session through its handshake.
fn session(addr: SocketAddr) -> Result<String, String> {
    let sid = initialize(addr)?.map_err(|r| format!("initialize: {} {:?}", r.status(), r.json()))?;
    let resp = connect(addr)?.request(&in_session(Req::post(INITIALIZED), &sid))?;
    expect_status(&resp, 202, "notifications/initialized")?;
    Ok(sid)
}

/// The status of a `tools/list` in session `sid` (200 while it lives, 404 once forgotten).
fn list_status(addr: SocketAddr, sid: &str) -> Result<u16, String> {
    Ok(connect(addr)?.request(&in_session(Req::post(LIST), sid))?.status())
}

/// Sends a `GET` for `sid`'s stream and reads the response head: the connection (an SSE body
/// follows on 200) and the head's status, or the whole refusal.
fn open_stream(addr: SocketAddr, sid: &str) -> Result<Result<Client, Response>, String> {
    let mut client = connect(addr)?;
    client.send(&get(sid).to_bytes()).map_err(|e| format!("GET: {e}"))?;
    let head = client.head()?;
    if head.status != 200 {
        let body = client.body(&head)?;
        return Ok(Err(Response { head, body }));
    }
    ensure(head.header("content-type") == Some("text/event-stream"), || format!("GET: not SSE: {head:?}"))?;
    Ok(Ok(client))
}

/// A `GET` stream that must be granted, with its priming event read.
fn stream(addr: SocketAddr, sid: &str) -> Result<Client, String> {
    let mut client = open_stream(addr, sid)?
        .map_err(|r| format!("GET: {} {}", r.status(), String::from_utf8_lossy(&r.body)))?;
    let first = client.event()?.ok_or("GET: the stream ended before its priming event")?;
    ensure(first.starts_with("id: ") && first.contains("retry: "), || {
        format!("GET: priming event {first:?}")
    })?;
    Ok(client)
}

/// A `GET` that must be refused with `status` and a JSON-RPC error without an id.
fn expect_stream_refused(addr: SocketAddr, sid: &str, status: u16, what: &str) -> Outcome {
    match open_stream(addr, sid)? {
        Ok(_) => Err(format!("{what}: the stream was granted")),
        Err(resp) => {
            expect_status(&resp, status, what)?;
            let body = resp.json()?;
            ensure(body["id"].is_null() && body["error"]["code"].is_i64(), || format!("{what}: body {body}"))
        }
    }
}

/// Reads events until the stream ends; fails on a JSON-RPC message (only comments and priming
/// events may come before the end here).
fn expect_stream_end(client: &mut Client, what: &str) -> Outcome {
    while let Some(event) = client.event().map_err(|e| format!("{what}: {e}"))? {
        ensure(event_data(&event).is_none(), || format!("{what}: unexpected event {event:?}"))?;
    }
    Ok(())
}

/// Polls `initialize` until the session table has room (503 until then): the slot freed.
fn initialize_when_room(addr: SocketAddr, what: &str) -> Result<String, String> {
    poll_until(what, SETTLE, || match initialize(addr)? {
        Ok(sid) => Ok(Some(sid)),
        Err(resp) if resp.status() == 503 => Ok(None),
        Err(resp) => Err(format!("{what}: initialize answered {} {:?}", resp.status(), resp.json())),
    })
}

fn no_connections_left(server: &Server, what: &str) -> Outcome {
    poll_until(what, SETTLE, || {
        let status = server.status();
        Ok((status.connections == 0 && status.in_flight == 0 && status.streams == 0).then_some(()))
    })
}

/// Checks the server's count of live sessions and held streams ([`Server::status`]).
fn expect_counts(server: &Server, sessions: usize, streams: usize, what: &str) -> Outcome {
    let status = server.status();
    ensure(status.sessions == sessions && status.streams == streams, || {
        format!("{what}: expected {sessions} sessions and {streams} streams, status {status:?}")
    })
}

/// Polls until the server counts `sessions` live sessions.
fn sessions_become(server: &Server, sessions: usize, what: &str) -> Outcome {
    poll_until(what, SETTLE, || Ok((server.status().sessions == sessions).then_some(())))
        .map_err(|e| format!("{e}; {:?}", server.status()))
}

// ---------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------

/// A client that initializes and sends nothing more loses its session after
/// `session_handshake`: its place in a full table frees, and its id answers 404.
#[test]
fn unfinished_handshake_is_reclaimed() {
    each(|shim| {
        let server = build(
            |l| {
                l.session_handshake(Duration::from_millis(200)).max_sessions(1);
            },
            None,
        );
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let walked_away = initialize(addr)?.map_err(|r| format!("initialize: {}", r.status()))?;
        sessions_become(&server, 0, "the walked-away session reclaimed")?;
        ensure(list_status(addr, &walked_away)? == 404, || "the reclaimed id still answers".to_owned())?;
        // Its place in the full table is free again.
        let next = initialize(addr)?.map_err(|r| format!("initialize after the reclaim: {}", r.status()))?;
        ensure(next != walked_away, || "the same session id twice".to_owned())?;
        no_connections_left(&server, "nothing held")
    });
}

/// An established session that goes quiet expires after `session_idle`.
#[test]
fn idle_session_expires() {
    each(|shim| {
        let server = build(
            |l| {
                // The handshake bound is generous enough for `notifications/initialized` to
                // arrive in time on a loaded machine; see `idle_shorter_than_handshake_still_expires`
                // for why the idle bound is not shorter.
                l.session_handshake(Duration::from_millis(500))
                    .session_idle(Duration::from_millis(500))
                    .max_sessions(1);
            },
            None,
        );
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let idle = session(addr)?;
        ensure(list_status(addr, &idle)? == 200, || "a live session refused tools/list".to_owned())?;
        sessions_become(&server, 0, "the idle session expired")?;
        ensure(list_status(addr, &idle)? == 404, || "the expired id still answers".to_owned())?;
        initialize(addr)?.map_err(|r| format!("initialize after the expiry: {}", r.status()))?;
        no_connections_left(&server, "nothing held")
    });
}

/// `session_idle` shorter than `session_handshake` must still be how long an established session
/// may stay quiet.
#[test]
fn idle_shorter_than_handshake_still_expires() {
    each(|shim| {
        let server = build(
            |l| {
                l.session_handshake(Duration::from_secs(30))
                    .session_idle(Duration::from_millis(200))
                    .max_sessions(1);
            },
            None,
        );
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let idle = session(addr)?;
        sessions_become(&server, 0, "the idle session expired")?;
        ensure(list_status(addr, &idle)? == 404, || "the expired id still answers".to_owned())
    });
}

/// A session whose `GET` stream is open is not idle, however long nothing else comes; once the
/// stream closes it expires like any other.
#[test]
fn open_stream_keeps_its_session() {
    each(|shim| {
        let server = build(
            |l| {
                l.session_handshake(Duration::from_millis(500))
                    .session_idle(Duration::from_millis(300))
                    .max_sessions(1);
            },
            None,
        );
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sid = session(addr)?;
        let held = stream(addr, &sid)?;
        // Five idle periods with nothing but the open stream.
        sleep(Duration::from_millis(1500));
        match initialize(addr)? {
            Err(resp) if resp.status() == 503 => {}
            other => return Err(format!("the session with a stream was reclaimed: {:?}", other.map(|_| ()))),
        }
        expect_counts(&server, 1, 1, "a session with its stream, after five idle periods")?;
        ensure(list_status(addr, &sid)? == 200, || "the session with a stream expired".to_owned())?;
        drop(held);
        sessions_become(&server, 0, "the session expired after its stream closed")?;
        expect_counts(&server, 0, 0, "after the expiry")?;
        ensure(list_status(addr, &sid)? == 404, || "the expired id still answers".to_owned())?;
        initialize_when_room(addr, "a place in the table after the expiry")?;
        no_connections_left(&server, "nothing held")
    });
}

/// `max_sessions` refuses `initialize` with 503 (and no session id) when the table is full;
/// DELETE frees a place at once.
#[test]
fn session_table_is_bounded() {
    each(|shim| {
        let server = build(
            |l| {
                l.max_sessions(2);
            },
            None,
        );
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let first = session(addr)?;
        let _second = session(addr)?;
        expect_counts(&server, 2, 0, "two sessions")?;
        let resp = match initialize(addr)? {
            Ok(sid) => return Err(format!("a third session {sid} past max_sessions 2")),
            Err(resp) => resp,
        };
        expect_status(&resp, 503, "initialize past max_sessions")?;
        ensure(resp.header("mcp-session-id").is_none(), || "a refused initialize minted an id".to_owned())?;
        let body = resp.json()?;
        ensure(body["id"].is_null() && body["error"]["code"] == json!(-32603), || {
            format!("503 body: {body}")
        })?;

        let resp = connect(addr)?.request(&in_session(Req::new("DELETE", "/mcp"), &first))?;
        expect_status(&resp, 200, "DELETE")?;
        expect_counts(&server, 1, 0, "after DELETE")?;
        let third = initialize(addr)?.map_err(|r| format!("initialize after DELETE: {}", r.status()))?;
        ensure(list_status(addr, &first)? == 404, || "a deleted session still answers".to_owned())?;
        let resp = connect(addr)?.request(&in_session(Req::post(INITIALIZED), &third))?;
        expect_status(&resp, 202, "the new session's handshake")?;
        match initialize(addr)? {
            Err(resp) if resp.status() == 503 => {}
            other => return Err(format!("full again, yet: {:?}", other.map(|_| ()))),
        }
        expect_counts(&server, 2, 0, "full again")?;
        no_connections_left(&server, "nothing held")
    });
}

// ---------------------------------------------------------------------------------------------
// Seats
// ---------------------------------------------------------------------------------------------

/// Three sessions of one anonymous caller (all from 127.0.0.1) and a per-caller bound of two
/// streams: the third `GET` is refused with 429 while two are open, and granted once one closes.
#[test]
fn seats_refuse_past_the_per_caller_bound() {
    each(|shim| {
        let server = build(
            |l| {
                l.max_streams_per_caller(Some(2)).seat_policy(SeatPolicy::Refuse);
            },
            None,
        );
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sids = [session(addr)?, session(addr)?, session(addr)?];
        let first = stream(addr, &sids[0])?;
        let _second = stream(addr, &sids[1])?;
        expect_stream_refused(addr, &sids[2], 429, "a third stream under Refuse")?;
        expect_counts(&server, 3, 2, "after the refusal")?;
        drop(first);
        let _third =
            poll_until("the closed stream's seat freed", SETTLE, || Ok(open_stream(addr, &sids[2])?.ok()))?;
        expect_counts(&server, 3, 2, "after the third stream")
    });
}

/// Under `EvictOldest` the third stream is served and the oldest one is closed: its body ends.
/// The survivors keep receiving notifications.
#[test]
fn seats_evict_the_oldest() {
    each(|shim| {
        let server = build(
            |l| {
                l.max_streams_per_caller(Some(2)).seat_policy(SeatPolicy::EvictOldest);
            },
            None,
        );
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sids = [session(addr)?, session(addr)?, session(addr)?];
        let mut oldest = stream(addr, &sids[0])?;
        let mut second = stream(addr, &sids[1])?;
        let mut third = stream(addr, &sids[2])?;
        expect_stream_end(&mut oldest, "the evicted stream")?;
        expect_counts(&server, 3, 2, "after the eviction")?;
        // The seated streams still carry what happens.
        let tool = Tool::new("added", "Added while streaming", json!({"type": "object"}));
        server.add_tool(tool, |_| async { "ok" }).map_err(|e| e.to_string())?;
        for (what, client) in [("second", &mut second), ("third", &mut third)] {
            let event = client.event()?.ok_or_else(|| format!("{what}: the stream ended"))?;
            let data = event_data(&event).ok_or_else(|| format!("{what}: {event:?}"))?;
            ensure(data["method"] == "notifications/tools/list_changed", || format!("{what}: {data}"))?;
        }
        Ok(())
    });
}

/// `max_streams` over all callers refuses with 429 whatever the seat policy (eviction is only
/// among one caller's own streams), and a closed stream frees its place.
#[test]
fn global_stream_bound_refuses_under_every_policy() {
    for policy in [SeatPolicy::Refuse, SeatPolicy::EvictOldest] {
        each(|shim| {
            let server = build(
                |l| {
                    l.max_streams(Some(2)).max_streams_per_caller(None).seat_policy(policy);
                },
                None,
            );
            let addr = serve(shim, server.clone(), HttpConfig::default());
            let sids = [session(addr)?, session(addr)?, session(addr)?];
            let first = stream(addr, &sids[0])?;
            let mut second = stream(addr, &sids[1])?;
            expect_stream_refused(addr, &sids[2], 429, &format!("a third stream under {policy:?}"))?;
            // Nothing was evicted: both streams are still held (the second is read below).
            expect_counts(&server, 3, 2, "after the refusal")?;
            drop(first);
            let _third = poll_until("the closed stream's place freed", SETTLE, || {
                Ok(open_stream(addr, &sids[2])?.ok())
            })?;
            server
                .add_tool(Tool::new("t", "T", json!({"type": "object"})), |_| async { "ok" })
                .map_err(|e| e.to_string())?;
            let event = second.event()?.ok_or("the second stream ended")?;
            ensure(event.contains("notifications/tools/list_changed"), || format!("second: {event:?}"))
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Slow subscribers
// ---------------------------------------------------------------------------------------------

/// Bytes of the subscribed resource's URI, so that each `notifications/resources/updated`
/// is large and a subscriber that does not read fills the socket buffers in about a hundred
/// notifications instead of tens of thousands.
const BIG_URI_BYTES: usize = 60_000;
/// Notifications sent at most before the slow subscriber must have been dropped: about
/// `BIG_URI_BYTES * MAX_NOTIFICATIONS` = 240 MB, far past any loopback socket buffer.
const MAX_NOTIFICATIONS: usize = 4000;

fn big_uri() -> String {
    let mut uri = "test://big/".to_owned();
    uri.extend(std::iter::repeat_n('x', BIG_URI_BYTES - uri.len()));
    uri
}

/// The slow-subscriber server: a large resource to subscribe to, `stream_queue` 2, two seats
/// per caller, and a reader cut once it has stalled for 500 ms. Repeated updates of one URI fold
/// into the one still queued, so it is the 50 ms keep-alives that fill a stalled queue.
fn slow_subscriber_server(uri: &str, more: impl FnOnce(&mut Limits)) -> Server {
    let resource = Resource::new(uri, "big");
    let text_uri = uri.to_owned();
    builder(
        |l| {
            l.stream_queue(2)
                .max_uri_bytes(2 * BIG_URI_BYTES)
                .max_streams_per_caller(Some(2))
                .keepalive(Duration::from_millis(50))
                .stall_timeout(Duration::from_millis(500));
            more(l);
        },
        None,
    )
    .resource(resource, move |_| {
        let uri = text_uri.clone();
        async move { Ok(vec![ResourceContents::text(uri, "text/plain", "big")]) }
    })
    .build()
    .unwrap_or_else(|e| panic!("the test server is valid: {e}"))
}

fn subscribe(addr: SocketAddr, sid: &str, uri: &str) -> Outcome {
    subscribe_on(&mut connect(addr)?, sid, uri)
}

fn subscribe_on(client: &mut Client, sid: &str, uri: &str) -> Outcome {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": uri}});
    let resp = client.request(&in_session(Req::post(body.to_string()), sid))?;
    expect_status(&resp, 200, "resources/subscribe")?;
    let reply = resp.json()?;
    ensure(reply["result"] == json!({}), || format!("resources/subscribe: {reply}"))
}

/// Reads `client`'s stream until the next `notifications/resources/updated`.
fn next_update(client: &mut Client, what: &str) -> Outcome {
    loop {
        let event = client.event()?.ok_or_else(|| format!("{what}: the stream ended"))?;
        if let Some(data) = event_data(&event) {
            ensure(data["method"] == "notifications/resources/updated", || format!("{what}: {data}"))?;
            return Ok(());
        }
    }
}

/// Sets up two subscribed sessions with open streams, `slow` (which never reads after its
/// head) and `fast`, and notifies until the server drops `slow`, in lock step with `fast` so
/// only `slow` can fall behind. Returns the notifications it took.
fn notify_until_slow_dropped(server: &Server, uri: &str, fast: &mut Client) -> Result<usize, String> {
    let started = Instant::now();
    for sent in 1..=MAX_NOTIFICATIONS {
        server.notify_resource_updated(uri);
        next_update(fast, &format!("the reading stream, notification {sent}"))?;
        if server.status().streams == 1 {
            return Ok(sent);
        }
        if started.elapsed() > SETTLE {
            return Err(format!(
                "the stream that does not read was kept for {SETTLE:?}, {sent} notifications"
            ));
        }
    }
    // Past the socket buffers, the stall time (500 ms) is what it waits for.
    poll_until("the stream that does not read cut", SETTLE, || {
        Ok((server.status().streams == 1).then_some(()))
    })?;
    Ok(MAX_NOTIFICATIONS)
}

/// A `GET` stream whose client stops reading is cut once its queue (`stream_queue`) is full,
/// which happens when the socket buffers between it and the server are, and it has taken nothing
/// for `stall_timeout`: the server's stream count goes down and its seat frees, while another
/// session's stream keeps receiving every event.
/// When the slow client reads at last, its body ends after what was queued.
#[test]
fn slow_subscriber_is_dropped_and_others_keep_receiving() {
    each(|shim| {
        let uri = big_uri();
        let server = slow_subscriber_server(&uri, |_| {});
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sids = [session(addr)?, session(addr)?, session(addr)?];
        subscribe(addr, &sids[0], &uri)?;
        subscribe(addr, &sids[1], &uri)?;
        let mut slow = stream(addr, &sids[0])?;
        let mut fast = stream(addr, &sids[1])?;
        expect_counts(&server, 3, 2, "two streams")?;
        expect_stream_refused(addr, &sids[2], 429, "a third stream while two are seated")?;

        let took = notify_until_slow_dropped(&server, &uri, &mut fast)?;
        eprintln!(
            "{shim:?}: the slow subscriber was dropped after {took} notifications of {BIG_URI_BYTES} bytes"
        );
        // The other stream goes on receiving every notification.
        for n in 0..5 {
            server.notify_resource_updated(&uri);
            next_update(&mut fast, &format!("the reading stream after the drop, {n}"))?;
        }
        // The dropped stream's seat is free; its session lives on.
        expect_counts(&server, 3, 1, "after the drop")?;
        let _third = stream(addr, &sids[2])?;
        // The slow client, reading at last, gets what the socket still held, then the connection
        // is cut: its body never ends cleanly, and it misses what was sent after the drop.
        let mut updates = 0usize;
        let cut = loop {
            match slow.event() {
                Ok(Some(event)) => updates += usize::from(event_data(&event).is_some()),
                Ok(None) => break false,
                Err(_) => break true,
            }
        };
        ensure(cut, || "the dropped stream ended cleanly instead of being cut".to_owned())?;
        ensure(updates < took, || format!("the slow client got all {updates} of {took} notifications"))
    });
}

/// Once the engine has dropped a subscriber that does not read, the HTTP layer should let go of
/// its connection too: otherwise a peer that never reads holds a connection (and a place under
/// `Limits::max_http_connections`) for ever, beyond every seat bound, since its seat is free
/// again.
#[test]
fn dropped_slow_subscriber_releases_its_connection() {
    each(|shim| {
        let uri = big_uri();
        // The setup connection (kept open, and kept idle for as long as the test runs) and the
        // two streams fill the connection bound.
        let server = slow_subscriber_server(&uri, |l| {
            l.max_http_connections(3).header_read_timeout(Duration::from_secs(600));
        });
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let mut setup = connect(addr)?;
        let mut sids = Vec::new();
        for _ in 0..2 {
            let resp = setup.request(&Req::post(INITIALIZE))?;
            expect_status(&resp, 200, "initialize")?;
            let sid = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?.to_owned();
            expect_status(&setup.request(&in_session(Req::post(INITIALIZED), &sid))?, 202, "initialized")?;
            subscribe_on(&mut setup, &sid, &uri)?;
            sids.push(sid);
        }
        let _slow = stream(addr, &sids[0])?;
        let mut fast = stream(addr, &sids[1])?;
        notify_until_slow_dropped(&server, &uri, &mut fast)?;
        poll_until("the slow subscriber's connection released", SETTLE, || {
            let Ok(mut probe) = Client::connect(addr) else { return Ok(None) };
            Ok(probe.request(&Req::new("PUT", "/mcp")).ok().filter(|r| r.status() == 405).map(|_| ()))
        })
    });
}

// ---------------------------------------------------------------------------------------------
// Keep-alives
// ---------------------------------------------------------------------------------------------

/// A held stream gets a `: keep-alive` comment every `keepalive`, and each first re-checks the
/// caller against the server-wide gate: once the gate refuses the caller, the stream closes at
/// the next one.
#[test]
fn keepalive_rechecks_the_gate() {
    each(|shim| {
        let allowed = Arc::new(AtomicBool::new(true));
        let gate = {
            let allowed = allowed.clone();
            Gate::new(move |_| allowed.load(Ordering::SeqCst))
        };
        let server = build(
            |l| {
                l.keepalive(Duration::from_millis(200));
            },
            Some(gate),
        );
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let sid = session(addr)?;
        let mut held = stream(addr, &sid)?;
        for n in 0..3 {
            let event = held.event()?.ok_or_else(|| format!("the stream ended before keep-alive {n}"))?;
            ensure(event == ": keep-alive", || format!("keep-alive {n}: {event:?}"))?;
        }
        allowed.store(false, Ordering::SeqCst);
        let revoked = Instant::now();
        expect_stream_end(&mut held, "the revoked stream")?;
        let took = revoked.elapsed();
        eprintln!("{shim:?}: the revoked stream closed {took:?} after the gate changed (interval 200ms)");
        ensure(took < SETTLE, || format!("the revoked stream took {took:?} to close"))?;
        expect_stream_refused(addr, &sid, 403, "a new stream for a refused caller")?;
        expect_counts(&server, 1, 0, "after the revocation")?;
        no_connections_left(&server, "nothing held")
    });
}

// ---------------------------------------------------------------------------------------------
// Shutdown
// ---------------------------------------------------------------------------------------------

const SLOW_CALL: &str =
    r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":{"ms":MS}}}"#;

fn slow_call(ms: u64) -> String {
    SLOW_CALL.replace("MS", &ms.to_string())
}

/// `Server::shutdown` with a call in flight and a `GET` stream open: the stream ends at once,
/// new requests are refused, the call is answered within the budget, `serve_http` returns, and
/// the listener is gone.
#[test]
fn shutdown_drains_calls_and_ends_streams() {
    each(|shim| {
        let server = build(|_| {}, None);
        let (addr, served) = serve_watched(shim, server.clone(), HttpConfig::default());
        let sid = session(addr)?;
        let mut held = stream(addr, &sid)?;
        // A keep-alive connection opened before the shutdown, to ask again during it.
        let mut other = connect(addr)?;
        expect_status(&other.request(&in_session(Req::post(LIST), &sid))?, 200, "tools/list before")?;
        let mut call = connect(addr)?;
        call.send(&in_session(Req::post(slow_call(1500)), &sid).to_bytes()).map_err(|e| e.to_string())?;
        poll_until(
            "the slow call is running",
            SETTLE,
            || Ok((server.status().in_flight == 1).then_some(())),
        )?;

        let stopping = server.clone();
        let started = Instant::now();
        let shutdown = std::thread::spawn(move || {
            let report = mcp_tests::http::block_on(shim, stopping.shutdown(Duration::from_secs(20)));
            (report, started.elapsed())
        });
        poll_until("shutdown began", SETTLE, || Ok(server.status().shutting_down.then_some(())))?;
        expect_stream_end(&mut held, "the GET stream at shutdown")?;

        // A new request on a connection accepted before: refused, not served.
        let resp = other.request(&in_session(Req::post(LIST), &sid))?;
        eprintln!(
            "{shim:?}: a request during shutdown: {} {}",
            resp.status(),
            String::from_utf8_lossy(&resp.body)
        );
        let refused = match resp.status() {
            200 => resp.json()?["error"]["data"]["reason"] == "shutting_down",
            // The call may have finished already, and the drained session with it.
            status => status == 404 || status == 503,
        };
        ensure(refused, || format!("a request during shutdown: {} {:?}", resp.status(), resp.json()))?;

        let resp = call.response()?;
        expect_status(&resp, 200, "the call in flight")?;
        let reply = resp.json()?;
        ensure(reply["id"] == 9 && reply["result"]["content"][0]["text"] == "slept 1500ms", || {
            format!("the call in flight: {reply}")
        })?;
        let (report, took) = shutdown.join().map_err(|_| "shutdown panicked".to_owned())?;
        eprintln!("{shim:?}: shutdown returned after {took:?} ({report:?})");
        ensure(report.cancelled == 0, || format!("{report:?}"))?;
        let served = served.recv_timeout(TIMEOUT).map_err(|e| format!("serve_http did not return: {e}"))?;
        served.map_err(|e| format!("serve_http failed: {e}"))?;
        poll_until("the listener is closed", SETTLE, || {
            let served = Client::connect(addr).is_ok_and(|mut c| c.request(&Req::post(INITIALIZE)).is_ok());
            Ok((!served).then_some(()))
        })?;
        no_connections_left(&server, "nothing held after shutdown")?;
        expect_counts(&server, 0, 0, "after shutdown")
    });
}

/// A call still running when the budget runs out is counted as cancelled and answered with the
/// defined shutdown refusal (never left hanging), and `serve_http` returns.
#[test]
fn shutdown_ends_exchanges_past_the_budget() {
    each(|shim| {
        let server = build(|_| {}, None);
        let (addr, served) = serve_watched(shim, server.clone(), HttpConfig::default());
        let mut call = start_endless_call(addr, &server)?;
        let report = mcp_tests::http::block_on(shim, server.shutdown(Duration::from_millis(300)));
        ensure(report.cancelled == 1, || format!("{report:?}"))?;
        // The call is answered with the defined shutdown refusal, not left hanging.
        let resp = call.response()?;
        let body = resp.json()?;
        ensure(
            body["error"]["code"] == -32603 && body["error"]["data"]["reason"] == "shutting_down",
            || format!("the cut-off call: {} {body}", resp.status()),
        )?;
        served
            .recv_timeout(TIMEOUT)
            .map_err(|e| format!("serve_http did not return: {e}"))?
            .map_err(|e| format!("serve_http failed: {e}"))?;
        ensure(server.status().connections == 0 && server.status().streams == 0, || {
            format!("{:?}", server.status())
        })
    });
}

/// What the report counts as cancelled must really be cancelled: the handler aborted and the
/// call no longer in flight.
#[test]
fn shutdown_past_the_budget_stops_legacy_handlers() {
    each(|shim| {
        let server = build(|_| {}, None);
        let (addr, _served) = serve_watched(shim, server.clone(), HttpConfig::default());
        let _call = start_endless_call(addr, &server)?;
        let report = mcp_tests::http::block_on(shim, server.shutdown(Duration::from_millis(300)));
        ensure(report.cancelled == 1, || format!("{report:?}"))?;
        poll_until("the cancelled handler stopped", SETTLE, || {
            let status = server.status();
            Ok((status.running_handlers == 0 && status.in_flight == 0 && status.sessions == 0).then_some(()))
        })
        .map_err(|e| format!("{e}; {:?}", server.status()))
    });
}

/// A legacy session with a `slow` call of ten minutes in flight: the connection awaiting its
/// answer.
fn start_endless_call(addr: SocketAddr, server: &Server) -> Result<Client, String> {
    let sid = session(addr)?;
    let mut call = connect(addr)?;
    call.send(&in_session(Req::post(slow_call(600_000)), &sid).to_bytes()).map_err(|e| e.to_string())?;
    poll_until("the slow call is running", SETTLE, || {
        let status = server.status();
        Ok((status.in_flight == 1 && status.running_handlers == 1).then_some(()))
    })?;
    Ok(call)
}

/// `Server::shutdown` is runtime-independent API: awaiting it from an executor other than the
/// one serving (here the other shim's) must drain the call like any other caller.
#[test]
fn shutdown_awaited_from_another_executor() {
    each(|shim| {
        let server = build(|_| {}, None);
        let (addr, _served) = serve_watched(shim, server.clone(), HttpConfig::default());
        let sid = session(addr)?;
        let mut call = connect(addr)?;
        call.send(&in_session(Req::post(slow_call(300)), &sid).to_bytes()).map_err(|e| e.to_string())?;
        poll_until(
            "the slow call is running",
            SETTLE,
            || Ok((server.status().in_flight == 1).then_some(())),
        )?;
        let other = match shim {
            Shim::Tokio => Shim::Smol,
            Shim::Smol => Shim::Tokio,
        };
        let stopping = server.clone();
        let report = std::thread::spawn(move || {
            mcp_tests::http::block_on(other, stopping.shutdown(Duration::from_secs(20)))
        })
        .join()
        .map_err(|_| format!("shutdown awaited on {other:?} panicked"))?;
        ensure(report.cancelled == 0, || format!("{report:?}"))?;
        let resp = call.response()?;
        expect_status(&resp, 200, "the call in flight")
    });
}

/// The HTTP body cap follows the server's own frame limit, not the default one: a body over
/// `max_frame_bytes` is refused with 413 from its `Content-Length`, before a byte of it is sent
/// (the client here never sends it; reading it would wait out the body timeout instead).
#[test]
fn body_cap_follows_the_servers_frame_limit() {
    each(|shim| {
        let server = build(
            |l| {
                l.max_frame_bytes(1024);
            },
            None,
        );
        let addr = serve(shim, server, HttpConfig::default());
        let mut client = connect(addr)?;
        let head = Req::post(Vec::new()).without("Content-Length").header("Content-Length", "4096");
        client.send(&head.to_bytes()).map_err(|e| e.to_string())?;
        let resp = client.response()?;
        expect_status(&resp, 413, "a 4 KiB body under a 1 KiB frame limit")
    });
}
