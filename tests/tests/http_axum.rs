//! The MCP endpoint mounted in an existing axum application (`mcp-tokio`'s `axum_mount`
//! example, compiled in here): the application's own routes still work, the bearer-token
//! middleware's `Caller` is who the gates see, and axum's `ConnectInfo` feeds the loopback rule.
//! The endpoint serves whatever path the router mounts it at (`route_service` and
//! `nest_service`), and an application that gives it no client address is warned once.

#[path = "../../mcp-tokio/examples/axum_mount.rs"]
#[allow(dead_code)]
mod axum_mount;

use std::net::SocketAddr;

use mcp_tests::http::{Client, Req, TIMEOUT};
use serde_json::{json, Value};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"axum-test","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// Serves the example application on a loopback port, from a runtime on a thread of its own.
fn start() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
        let rt = rt.unwrap_or_else(|e| panic!("tokio runtime: {e}"));
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let _ = tx.send(listener.local_addr()?);
            let app = axum_mount::app(axum_mount::server());
            axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
        })
    });
    rx.recv_timeout(TIMEOUT).unwrap_or_else(|e| panic!("the application did not bind: {e}"))
}

/// A client holding a session opened with `token` (or none).
struct Session {
    client: Client,
    token: Option<&'static str>,
    id: String,
}

impl Session {
    fn open(addr: SocketAddr, token: Option<&'static str>) -> Self {
        let mut client = Client::connect(addr).expect("connect");
        let resp = client.request(&authorized(Req::post(INITIALIZE), token)).expect("initialize");
        assert_eq!(resp.status(), 200, "initialize: {}", String::from_utf8_lossy(&resp.body));
        let id = resp.header("mcp-session-id").expect("a session id").to_owned();
        let mut session = Session { client, token, id };
        let resp = session.post(INITIALIZED);
        assert_eq!(resp.status(), 202);
        session
    }

    fn post(&mut self, body: &str) -> mcp_tests::http::Response {
        let req = authorized(Req::post(body), self.token)
            .header("Mcp-Session-Id", &self.id)
            .header("MCP-Protocol-Version", "2025-11-25");
        self.client.request(&req).expect("a response")
    }

    fn tool_names(&mut self) -> Vec<String> {
        let resp = self.post(TOOLS_LIST);
        assert_eq!(resp.status(), 200);
        let list = resp.json().expect("JSON");
        let tools = list["result"]["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
    }
}

fn authorized(req: Req, token: Option<&str>) -> Req {
    match token {
        Some(token) => req.header("Authorization", &format!("Bearer {token}")),
        None => req,
    }
}

#[test]
fn the_application_keeps_its_routes() {
    let addr = start();
    let resp = Client::connect(addr).expect("connect").request(&Req::new("GET", "/")).expect("GET /");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.body, b"an existing application\n");
}

#[test]
fn the_bearer_token_is_the_caller() {
    let addr = start();
    let mut alice = Session::open(addr, Some("alice-token"));
    assert_eq!(alice.tool_names(), ["admin_echo", "whoami"]);
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}"#;
    let reply: Value = alice.post(call).json().expect("JSON");
    assert_eq!(reply["result"]["content"], json!([{"type": "text", "text": "alice (admin)"}]));

    let mut bob = Session::open(addr, Some("bob-token"));
    assert_eq!(bob.tool_names(), ["whoami"], "admin_echo is gated to admins");
    let reply: Value = bob.post(call).json().expect("JSON");
    assert_eq!(reply["result"]["content"], json!([{"type": "text", "text": "bob (reader)"}]));
}

#[test]
fn unknown_tokens_are_refused_by_the_middleware() {
    let addr = start();
    let req = authorized(Req::post(INITIALIZE), Some("forged"));
    let resp = Client::connect(addr).expect("connect").request(&req).expect("a response");
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.header("www-authenticate"), Some("Bearer"));
}

#[test]
fn anonymous_callers_are_refused_by_the_server_gate() {
    let addr = start();
    let mut client = Client::connect(addr).expect("connect");
    let resp = client.request(&Req::post(INITIALIZE)).expect("initialize");
    let listed = match resp.header("mcp-session-id") {
        // Refused at once.
        None => resp,
        // Or admitted to the handshake and refused the data methods.
        Some(id) => {
            let req = Req::post(TOOLS_LIST)
                .header("Mcp-Session-Id", id)
                .header("MCP-Protocol-Version", "2025-11-25");
            client.request(&req).expect("tools/list")
        }
    };
    let body = listed.json().unwrap_or(Value::Null);
    assert!(
        listed.status() != 200 || body.get("error").is_some(),
        "an anonymous caller was served a tool list: {} {body}",
        listed.status()
    );
}

/// axum's `ConnectInfo` reaches the endpoint: a peer that is not loopback is refused (403)
/// under the default loopback-only rule, whatever its `Host`.
#[test]
fn connect_info_feeds_the_loopback_rule() {
    use tower_service::Service;

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let mut app = axum_mount::app(axum_mount::server());
        let call = |peer: &str| {
            let mut req = axum::http::Request::post("/mcp")
                .header("Host", "localhost")
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .header("Authorization", "Bearer alice-token")
                .body(axum::body::Body::from(INITIALIZE))
                .expect("a request");
            let peer: SocketAddr = peer.parse().expect("an address");
            req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            req
        };
        let remote = app.call(call("203.0.113.7:40000")).await.expect("infallible");
        assert_eq!(remote.status(), 403);
        let local = app.call(call("127.0.0.1:40000")).await.expect("infallible");
        assert_eq!(local.status(), 200);
    });
}

/// Serves the router `app` makes (on the runtime: an `McpService` needs one) on a loopback port
/// with `ConnectInfo`, from a runtime on a thread of its own.
fn serve_app(app: fn() -> axum::Router) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
        let rt = rt.unwrap_or_else(|e| panic!("tokio runtime: {e}"));
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let _ = tx.send(listener.local_addr()?);
            axum::serve(listener, app().into_make_service_with_connect_info::<SocketAddr>()).await
        })
    });
    rx.recv_timeout(TIMEOUT).unwrap_or_else(|e| panic!("the application did not bind: {e}"))
}

fn initialize_at(addr: SocketAddr, path: &str) -> mcp_tests::http::Response {
    let mut client = Client::connect(addr).expect("connect");
    let req = Req::new("POST", path)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(INITIALIZE);
    client.request(&req).expect("a response")
}

/// The endpoint answers at whatever path axum routes to it, with the default `HttpConfig`
/// (whose endpoint is `/mcp`): `route_service` keeps the full path, `nest_service` strips the
/// prefix, and both reach the same MCP endpoint; other paths stay the application's (404).
#[test]
fn the_endpoint_serves_any_mount_path() {
    use mcp_tokio::{HttpConfig, McpService};

    let addr = serve_app(|| {
        let server = axum_mount::server();
        axum::Router::new()
            .route_service("/api/mcp", McpService::new(server.clone(), HttpConfig::default()))
            .nest_service("/nested/mcp", McpService::new(server, HttpConfig::default()))
    });
    for path in ["/api/mcp", "/api/mcp?trace=1", "/nested/mcp", "/nested/mcp/"] {
        let resp = initialize_at(addr, path);
        let body = String::from_utf8_lossy(&resp.body).into_owned();
        assert_eq!(resp.status(), 200, "{path}: {body}");
        let reply = resp.json().expect("JSON");
        assert_eq!(reply["result"]["serverInfo"]["name"], "axum-mount", "{path}: {body}");
        assert!(resp.header("mcp-session-id").is_some(), "{path}: a session id");
    }
    for path in ["/mcp", "/api/other"] {
        assert_eq!(initialize_at(addr, path).status(), 404, "{path} is not mounted");
    }
}

/// What `tracing` warnings were logged, with their messages.
#[derive(Clone, Default)]
struct Warnings(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Warnings {
    fn taken(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap_or_else(|p| p.into_inner()).push(message.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A mounted endpoint told no client address (no `ConnectInfo`, no `PeerAddr`) cannot apply
/// the loopback-only rule: the first such request logs one warning naming the fix, later ones
/// none; requests that carry the address log nothing.
#[test]
fn a_missing_client_address_is_warned_about_once() {
    use tower_service::Service;

    let warnings = Warnings::default();
    let seen = warnings.clone();
    tracing::subscriber::with_default(warnings, || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let request = |peer: Option<&str>| {
                let mut req = axum::http::Request::post("/mcp")
                    .header("Host", "localhost")
                    .header("Content-Type", "application/json")
                    .header("Accept", "application/json, text/event-stream")
                    .header("Authorization", "Bearer alice-token")
                    .body(axum::body::Body::from(INITIALIZE))
                    .expect("a request");
                if let Some(peer) = peer {
                    let peer: SocketAddr = peer.parse().expect("an address");
                    req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
                }
                req
            };
            let mut told = axum_mount::app(axum_mount::server());
            for _ in 0..2 {
                assert_eq!(
                    told.call(request(Some("127.0.0.1:40000"))).await.expect("infallible").status(),
                    200
                );
            }
            assert_eq!(seen.taken(), Vec::<String>::new(), "an address was given");

            let mut untold = axum_mount::app(axum_mount::server());
            for _ in 0..3 {
                assert_eq!(untold.call(request(None)).await.expect("infallible").status(), 200);
            }
            let warned = seen.taken();
            assert_eq!(warned.len(), 1, "one warning per endpoint: {warned:?}");
            assert!(warned[0].contains("into_make_service_with_connect_info"), "{warned:?}");
        });
    });
}
