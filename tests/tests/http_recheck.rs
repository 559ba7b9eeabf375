//! Held `GET` streams re-check their caller before each delivery (`ServerBuilder::recheck`,
//! seed 004's `RecheckPrincipal`), through both shims over real loopback sockets: a revoked
//! session's stream closes at its next notification instead of when its TCP connection ends,
//! and so does one whose re-check panics or names someone else, while the other streams carry
//! on; a role the re-check withdraws hides a gated tool's change from that stream.
//!
//! Callers are told apart by address (every 127/8 address is loopback): the server resolves
//! each to an anonymous caller whose binding is its peer, and the re-check looks that peer up
//! in the application's table of standings.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_proto::http::HttpConfig;
use mcp_proto::{Caller, ChangedList, Gate, Recheck, Resource, ResourceContents, Tool, ToolOutput};
use mcp_server::Server;
use mcp_tests::http::{each, ensure, event_data, poll_until, serve, Client, Req, TIMEOUT};
use serde_json::json;

/// How long a test waits for the server to reach a state it must reach on its own.
const SETTLE: Duration = Duration::from_secs(10);

/// 2025-03-26: a `GET` stream without a priming event, so every event is a notification.
const V: &str = "2025-03-26";

const ALICE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const BOB: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
const CAROL: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 4));
const DAVE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 5));

/// What the application currently holds about a caller, keyed by its address.
#[derive(Clone)]
enum Standing {
    /// Still signed in, with these roles.
    Roles(Vec<&'static str>),
    /// Signed out: the re-check finds nobody.
    Revoked,
    /// The application's lookup has a bug.
    Panics,
    /// The re-check resolves the caller to another principal (another tenant's user).
    Elsewhere,
}

type Standings = Arc<Mutex<HashMap<IpAddr, Standing>>>;

fn set(standings: &Standings, who: IpAddr, standing: Standing) {
    standings.lock().unwrap_or_else(|p| p.into_inner()).insert(who, standing);
}

/// The application's re-check: the caller's roles as `standings` holds them now.
fn recheck(standings: Standings) -> Recheck {
    Recheck::new(move |caller: &Caller| {
        let peer: IpAddr = caller.peer.as_deref()?.parse().ok()?;
        // Read and released before a panic, so the table stays usable.
        let standing = standings.lock().unwrap_or_else(|p| p.into_inner()).get(&peer).cloned();
        match standing? {
            Standing::Roles(roles) => {
                let mut current = caller.clone();
                current.roles = roles.into_iter().map(str::to_owned).collect();
                Some(current)
            }
            Standing::Revoked => None,
            Standing::Panics => panic!("the application's re-check failed for {peer}"),
            Standing::Elsewhere => {
                let mut other = Caller::identified("someone-else");
                other.peer = caller.peer.clone();
                Some(other)
            }
        }
    })
}

/// A server offering tool and resource list changes, with `standings` as its re-check.
fn server(standings: &Standings) -> Result<Server, String> {
    let no_args = json!({"type": "object"});
    Server::builder("recheck", "1.0.0")
        .tool(Tool::new("base", "Always there", no_args), |_| async { ToolOutput::text("base") })
        .resource(Resource::new("test://doc", "doc"), |_| async {
            Ok(vec![ResourceContents::text("test://doc", "text/plain", "doc")])
        })
        .recheck(recheck(standings.clone()))
        .build()
        .map_err(|e| e.to_string())
}

fn in_session(req: Req, sid: &str) -> Req {
    req.header("Mcp-Session-Id", sid).header("MCP-Protocol-Version", V)
}

/// A session of the caller at `from`, through its handshake, and its `GET` stream (head read).
fn session_stream(addr: SocketAddr, from: IpAddr) -> Result<Client, String> {
    let mut c = Client::connect_from(addr, from).map_err(|e| format!("connect from {from}: {e}"))?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "recheck-test", "version": "1"}}});
    let resp = c.request(&Req::post(init.to_string()))?;
    ensure(resp.status() == 200, || format!("initialize from {from}: {}", resp.status()))?;
    let sid = resp.header("mcp-session-id").ok_or("initialize: no Mcp-Session-Id")?.to_owned();
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let resp = c.request(&in_session(Req::post(note), &sid))?;
    ensure(resp.status() == 202, || format!("initialized from {from}: {}", resp.status()))?;
    let mut stream = Client::connect_from(addr, from).map_err(|e| format!("connect from {from}: {e}"))?;
    let get = in_session(Req::new("GET", "/mcp").header("Accept", "text/event-stream"), &sid);
    stream.send(&get.to_bytes()).map_err(|e| format!("GET from {from}: {e}"))?;
    let head = stream.head()?;
    ensure(head.status == 200, || format!("GET from {from}: {head:?}"))?;
    Ok(stream)
}

/// The method of the stream's next event other than a keep-alive comment, `None` once the
/// stream has ended. Keep-alives would keep a stream that is never sent anything busy for
/// good, so this gives up after `TIMEOUT` of them.
fn next_method(stream: &mut Client) -> Result<Option<String>, String> {
    let deadline = Instant::now() + TIMEOUT;
    while let Some(event) = stream.event()? {
        if let Some(data) = event_data(&event) {
            return Ok(Some(data["method"].as_str().unwrap_or_default().to_owned()));
        }
        ensure(Instant::now() < deadline, || format!("only keep-alives for {TIMEOUT:?}"))?;
    }
    Ok(None)
}

/// Reads the stream to its end: `Ok` when it ended without another notification.
fn ends_unnotified(stream: &mut Client, who: &str) -> Result<(), String> {
    match next_method(stream)? {
        None => Ok(()),
        Some(method) => Err(format!("{who}'s stream was sent {method} instead of being closed")),
    }
}

fn expect_next(stream: &mut Client, who: &str, method: &str) -> Result<(), String> {
    match next_method(stream)? {
        Some(m) if m == method => Ok(()),
        other => Err(format!("{who}'s stream: expected {method}, got {other:?}")),
    }
}

/// A revoked session's stream, one whose re-check panics and one the re-check rebinds to
/// another principal are each closed at the next notification, without it, and counted as
/// revoked; the stream whose caller is still current receives it and stays open.
#[test]
fn streams_whose_caller_is_gone_close_at_the_next_notification() {
    each(|shim| {
        let standings = Standings::default();
        for who in [ALICE, BOB, CAROL, DAVE] {
            set(&standings, who, Standing::Roles(Vec::new()));
        }
        let server = server(&standings)?;
        let addr = serve(shim, server.clone(), HttpConfig::default());
        let mut alice = session_stream(addr, ALICE)?;
        let mut bob = session_stream(addr, BOB)?;
        let mut carol = session_stream(addr, CAROL)?;
        let mut dave = session_stream(addr, DAVE)?;
        poll_until("four streams", SETTLE, || Ok((server.status().streams == 4).then_some(())))?;
        set(&standings, BOB, Standing::Revoked);
        set(&standings, CAROL, Standing::Panics);
        set(&standings, DAVE, Standing::Elsewhere);
        let added = Tool::new("added", "Added at run time", json!({"type": "object"}));
        server.add_tool(added, |_| async { ToolOutput::text("added") }).map_err(|e| e.to_string())?;
        expect_next(&mut alice, "alice", "notifications/tools/list_changed")?;
        ends_unnotified(&mut bob, "bob (revoked)")?;
        ends_unnotified(&mut carol, "carol (panicking re-check)")?;
        ends_unnotified(&mut dave, "dave (another principal)")?;
        let status = server.status();
        ensure(status.streams == 1 && status.refusals.revoked == 3, || {
            format!("after the change: {status:?}")
        })?;
        // Alice's stream is still open and still delivers.
        server.notify_list_changed(ChangedList::Resources);
        expect_next(&mut alice, "alice", "notifications/resources/list_changed")
    });
}

/// The re-check's roles are what the item's gate decides against: a role granted since the
/// stream opened lets a gated tool's change through, and once it is withdrawn the next gated
/// change is hidden from that stream while another caller still holding it is told.
#[test]
fn a_role_the_recheck_withdraws_hides_a_gated_change() {
    each(|shim| {
        let standings = Standings::default();
        set(&standings, ALICE, Standing::Roles(vec!["admin"]));
        set(&standings, BOB, Standing::Roles(vec!["admin"]));
        let server = server(&standings)?;
        let addr = serve(shim, server.clone(), HttpConfig::default());
        // Both sessions were opened as anonymous callers with no roles at all.
        let mut alice = session_stream(addr, ALICE)?;
        let mut bob = session_stream(addr, BOB)?;
        poll_until("two streams", SETTLE, || Ok((server.status().streams == 2).then_some(())))?;
        let admin_tool = |name: &str| {
            Tool::new(name, "Only for admins", json!({"type": "object"})).gate(Gate::role("admin"))
        };
        let add = |name: &str| {
            server
                .add_tool(admin_tool(name), |_| async { ToolOutput::text("admin") })
                .map_err(|e| e.to_string())
        };
        add("first_admin_tool")?;
        expect_next(&mut alice, "alice", "notifications/tools/list_changed")?;
        expect_next(&mut bob, "bob", "notifications/tools/list_changed")?;
        set(&standings, BOB, Standing::Roles(Vec::new()));
        add("second_admin_tool")?;
        expect_next(&mut alice, "alice", "notifications/tools/list_changed")?;
        // Bob's stream is open, and what it is sent next is the ungated change raised after the
        // gated one: the gated one never reached it.
        server.notify_list_changed(ChangedList::Resources);
        expect_next(&mut bob, "bob", "notifications/resources/list_changed")?;
        expect_next(&mut alice, "alice", "notifications/resources/list_changed")?;
        let status = server.status();
        ensure(status.streams == 2 && status.refusals.revoked == 0, || format!("at the end: {status:?}"))
    });
}
