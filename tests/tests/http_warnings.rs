//! Safety warnings reach an operator who installed no `tracing` subscriber: a mounted endpoint
//! told no client address (the loopback-only rule is off) and a standalone endpoint open to
//! any address with nothing identifying its callers are in `Status::warnings` (and the
//! metrics) on both runtimes, and printed on stderr once per process when no subscriber would
//! record them. No test here installs a global subscriber: that is the case under test.

use std::net::SocketAddr;
use std::process::Command;

use mcp_proto::http::HttpConfig;
use mcp_server::{Server, Warning};
use mcp_tests::http::{each, ensure, modern, poll_until, serve, test_server, Client, Shim, TIMEOUT};
use serde_json::json;
use tower_service::Service;

/// A stateless `tools/list` to a mounted service, with the client's address as axum's `ConnectInfo`
/// when `peer` is given.
fn list(peer: Option<SocketAddr>) -> axum::http::Request<axum::body::Body> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let mut req = axum::http::Request::post("/mcp")
        .header("Host", "localhost")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/list")
        .body(axum::body::Body::from(body.to_string()))
        .expect("a request");
    if let Some(peer) = peer {
        req.extensions_mut().insert(mcp_server::PeerAddr(peer));
    }
    req
}

/// Sends `reqs` in turn to a fresh `McpService` for `server` on `shim`'s runtime; their
/// statuses.
fn mounted(shim: Shim, server: &Server, reqs: Vec<axum::http::Request<axum::body::Body>>) -> Vec<u16> {
    let server = server.clone();
    match shim {
        Shim::Tokio => mcp_tests::http::tokio_runtime().block_on(async move {
            let mut svc = mcp_tokio::McpService::new(server, HttpConfig::default());
            let mut statuses = Vec::new();
            for req in reqs {
                statuses.push(svc.call(req).await.map_or(0, |r| r.status().as_u16()));
            }
            statuses
        }),
        Shim::Smol => smol::block_on(async move {
            let mut svc = mcp_smol::McpService::new(server, HttpConfig::default());
            let mut statuses = Vec::new();
            for req in reqs {
                statuses.push(svc.call(req).await.map_or(0, |r| r.status().as_u16()));
            }
            statuses
        }),
    }
}

/// A mounted endpoint given the client's address raises nothing; one given none raises
/// `NoPeerAddress`, seen in the status and the metrics, with no subscriber installed.
#[test]
fn a_mounted_endpoint_without_the_client_address_is_reported_in_the_status() {
    each(|shim| {
        let server = test_server(shim);
        let told = mounted(shim, &server, vec![list("127.0.0.1:40000".parse().ok())]);
        ensure(told == [200], || format!("with an address: {told:?}"))?;
        let warnings = server.status().warnings;
        ensure(warnings.is_empty(), || format!("raised with an address: {warnings:?}"))?;

        let untold = mounted(shim, &server, vec![list(None), list(None)]);
        ensure(untold == [200, 200], || format!("without an address: {untold:?}"))?;
        let status = server.status();
        let raised: Vec<Warning> = status.warnings.iter().collect();
        ensure(raised == [Warning::NoPeerAddress], || format!("raised: {raised:?}"))?;
        let gauge = status.metrics().find(|(name, _)| name == "warning_no_peer_address");
        ensure(gauge == Some(("warning_no_peer_address".to_owned(), 1)), || format!("gauge: {gauge:?}"))
    });
}

/// `serve_http` open to any address with nothing identifying callers raises `Unauthenticated`;
/// the same with an identify hook, or kept to loopback, raises nothing.
#[test]
fn an_open_endpoint_nobody_identifies_is_reported_in_the_status() {
    each(|shim| {
        let mut open = HttpConfig::default();
        open.loopback_only(false);
        let served = |server: &Server, http: HttpConfig| -> Result<(), String> {
            let addr = serve(shim, server.clone(), http);
            let mut c = Client::connect(addr).map_err(|e| e.to_string())?;
            let resp = c.request(&modern(1, "tools/list", json!({})))?;
            ensure(resp.status() == 200, || format!("tools/list: {resp:?}"))
        };
        let anonymous = test_server(shim);
        served(&anonymous, open.clone())?;
        poll_until("the warning", TIMEOUT, || {
            Ok(anonymous.status().warnings.contains(Warning::Unauthenticated).then_some(()))
        })?;

        let tool = mcp_proto::Tool::new("noop", "Does nothing", json!({"type": "object"}));
        let identified = Server::builder("identified", "1.0.0")
            .tool(tool, |_| async { mcp_proto::ToolOutput::text("") })
            .identify(|_| async { Ok(None) })
            .build();
        let identified = identified.map_err(|e| e.to_string())?;
        served(&identified, open)?;
        let loopback = test_server(shim);
        served(&loopback, HttpConfig::default())?;
        for (what, server) in [("with an identify hook", &identified), ("on loopback", &loopback)] {
            let warnings = server.status().warnings;
            ensure(warnings.is_empty(), || format!("{what}: {warnings:?}"))?;
        }
        Ok(())
    });
}

/// A warning nobody records is printed on stderr, once per process however many servers raise
/// it; one a subscriber records is not printed.
#[test]
fn a_warning_nobody_records_is_printed_once_on_stderr() {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args(["child_raises_warnings", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .output()
        .expect("the child test runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed: {stderr}");
    assert!(stderr.contains("(the subscriber was removed)"), "the child ran no test: {stderr}");
    let printed: Vec<&str> = stderr.lines().filter(|l| l.starts_with("mcp-server warning")).collect();
    assert_eq!(printed.len(), 1, "once per process: {stderr}");
    assert!(printed[0].contains("(no_peer_address)") && printed[0].contains("ConnectInfo"), "{stderr}");
    let (under, after) = (stderr.find("(the subscriber was removed)"), stderr.find(printed[0]));
    assert!(under < after, "printed while a subscriber recorded it: {stderr}");
}

/// Raises `NoPeerAddress` on a server under a scoped subscriber (recorded there, not printed),
/// then on two servers with none (printed once). Its stderr is judged by
/// [`a_warning_nobody_records_is_printed_once_on_stderr`], which runs it in a process of its
/// own: the once-per-process record must start empty.
#[test]
#[ignore = "run by a_warning_nobody_records_is_printed_once_on_stderr, in a process of its own"]
fn child_raises_warnings() {
    let recorded = tracing::subscriber::with_default(Recorder::default(), || {
        let server = test_server(Shim::Tokio);
        assert_eq!(mounted(Shim::Tokio, &server, vec![list(None)]), [200]);
        tracing::dispatcher::get_default(|d| d.downcast_ref::<Recorder>().map(Recorder::warnings))
    });
    assert_eq!(recorded, Some(1), "the subscriber records the warning");
    eprintln!("(the subscriber was removed)");
    for shim in [Shim::Tokio, Shim::Smol] {
        let server = test_server(shim);
        assert_eq!(mounted(shim, &server, vec![list(None)]), [200]);
        assert!(server.status().warnings.contains(Warning::NoPeerAddress));
    }
}

/// Counts `WARN` events.
#[derive(Default)]
struct Recorder(std::sync::atomic::AtomicUsize);

impl Recorder {
    fn warnings(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl tracing::Subscriber for Recorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
