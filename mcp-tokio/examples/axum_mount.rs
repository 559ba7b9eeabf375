//! The MCP endpoint mounted in an existing axum application, behind bearer-token authentication:
//! `cargo run -p mcp-tokio --example axum_mount [ADDR]` (default `127.0.0.1:3000`).
//!
//! - The application keeps its own routes (`/` here); MCP lives at `/mcp` ([`McpService`]).
//! - A middleware turns `Authorization: Bearer <token>` into a [`Caller`] (identity and role) in
//!   the request's extensions, which is who the server's gates see. An unknown token is refused
//!   with 401 before MCP sees the request; no token leaves the caller anonymous. This is the
//!   tower `Layer` way: `middleware::from_fn` is a layer, and any other (`tower_http`'s, your
//!   own) that inserts a `Caller` works the same. Without axum, or when only MCP needs the
//!   check, `ServerBuilder::identify` does it on the server instead (and wins over this
//!   middleware's `Caller` when both name one).
//! - The server-wide gate admits identified callers only, so an anonymous request reaches the
//!   engine and is refused there; the `admin_echo` tool is visible to the `admin` role only.
//!
//! ```sh
//! curl -s localhost:3000/mcp -H 'Authorization: Bearer alice-token' \
//!   -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
//!   -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}'
//! ```

use std::net::SocketAddr;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use mcp_tokio::{Caller, Gate, HttpConfig, McpService, Server, Tool, ToolCall, ToolOutput};
use serde_json::json;

/// The tokens this demo accepts: token, identity, role. A real application verifies a signed
/// token or asks its session store; what matters here is only the `Caller` it produces.
pub const TOKENS: [(&str, &str, &str); 2] =
    [("alice-token", "alice", "admin"), ("bob-token", "bob", "reader")];

/// The MCP server: `whoami` (public) and `admin_echo` (admins only), behind a server-wide gate
/// that admits identified callers only.
pub fn server() -> Server {
    let text = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let none = json!({"type": "object"});
    Server::builder("axum-mount", "1.0.0")
        .tool(Tool::new("whoami", "Says who the caller is", none), |call: ToolCall| async move {
            let caller = &call.ctx.caller;
            ToolOutput::text(format!(
                "{} ({})",
                caller.identity.as_deref().unwrap_or("anonymous"),
                caller.roles.join(", ")
            ))
        })
        .tool(
            Tool::new("admin_echo", "Echoes, for admins", text).gate(Gate::role("admin")),
            |call| async move {
                ToolOutput::text(
                    call.arguments.get("text").and_then(|t| t.as_str()).unwrap_or_default().to_owned(),
                )
            },
        )
        .gate(Gate::identified())
        .build()
        .expect("the demo tools are valid")
}

/// The application: its own routes, the MCP endpoint at `/mcp`, and the authentication layer.
pub fn app(server: Server) -> Router {
    Router::new()
        .route("/", get(|| async { "an existing application\n" }))
        .route_service("/mcp", McpService::new(server, HttpConfig::default()))
        .layer(middleware::from_fn(bearer))
}

/// `Authorization: Bearer <token>` → a [`Caller`] in the request's extensions.
async fn bearer(mut req: Request, next: Next) -> Response {
    if let Some(value) = req.headers().get(header::AUTHORIZATION) {
        let token = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer "));
        let known = token.and_then(|t| TOKENS.iter().find(|(known, _, _)| *known == t));
        let Some((_, identity, role)) = known else {
            return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "unknown token\n")
                .into_response();
        };
        req.extensions_mut().insert(Caller::identified(*identity).with_role(*role));
    }
    next.run(req).await
}

#[allow(dead_code)] // the test that includes this file has its own entry point
#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("listening on http://{}/mcp", listener.local_addr()?);
    let server = server();
    // On SIGINT or SIGTERM the MCP server stops taking work and answers the calls in flight (for
    // up to its drain timeout, 10 s); axum then stops accepting and closes its connections as
    // they go idle.
    let stop = {
        let server = server.clone();
        let budget = server.limits().drain_time();
        async move {
            if let Err(e) = mcp_tokio::shutdown_on_signal(server, budget).await {
                eprintln!("axum_mount: cannot watch for signals: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    // `ConnectInfo` tells the MCP endpoint the client's address (for the loopback-only rule).
    axum::serve(listener, app(server).into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(stop)
        .await
}
