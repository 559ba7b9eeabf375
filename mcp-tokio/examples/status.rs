//! Observability: an MCP server over Streamable HTTP whose status is exposed for Prometheus,
//! and whose requests are traced.
//!
//! ```sh
//! RUST_LOG=mcp=info cargo run -p mcp-tokio --example status
//! curl http://127.0.0.1:9100/metrics
//! ```
//!
//! MCP is served on `http://127.0.0.1:3000/mcp`; any request to `127.0.0.1:9100` is answered
//! with [`Server::status`] in the Prometheus text format (every name prefixed `mcp_`, counters
//! ending in `_total`). With `RUST_LOG=mcp=info` every handled request's `mcp::request` span is
//! printed when it closes, with its method, id, caller, outcome and duration. Arguments:
//! `[MCP_ADDR [METRICS_ADDR]]`.

use std::fmt::Write as _;

use mcp_tokio::{Server, Tool, ToolCall, ToolOutput};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing_subscriber::fmt::format::FmtSpan;

/// The status in the Prometheus text exposition format.
fn prometheus(server: &Server) -> String {
    let mut text = String::new();
    for (name, value) in server.status().metrics() {
        let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
        let _ = writeln!(text, "# TYPE mcp_{name} {kind}\nmcp_{name} {value}");
    }
    text
}

/// Answers every connection on `listener` with the metrics, then closes it: enough HTTP for a
/// scraper, not a general server (the request itself is read up to 8 KiB and ignored).
async fn serve_metrics(listener: tokio::net::TcpListener, server: Server) -> std::io::Result<()> {
    loop {
        let (mut socket, _) = listener.accept().await?;
        let server = server.clone();
        tokio::spawn(async move {
            let mut head = vec![0u8; 8192];
            let mut read = 0;
            while read < head.len() && !head[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut head[read..]).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => read += n,
                }
            }
            let body = prometheus(&server);
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        });
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        // A request's fields are complete when its span closes: print it then.
        .with_span_events(FmtSpan::CLOSE)
        .init();
    let mut args = std::env::args().skip(1);
    let mcp_addr = args.next().unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    let metrics_addr = args.next().unwrap_or_else(|| "127.0.0.1:9100".to_owned());

    let server = Server::builder("status-demo", "1.0.0")
        .tool(
            Tool::new(
                "echo",
                "Echoes text",
                json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            ),
            |call: ToolCall| async move {
                ToolOutput::text(call.arguments.get("text").and_then(|t| t.as_str()).unwrap_or_default())
            },
        )
        .build()
        .map_err(std::io::Error::other)?;

    let mcp = tokio::net::TcpListener::bind(&mcp_addr).await?;
    let metrics = tokio::net::TcpListener::bind(&metrics_addr).await?;
    eprintln!("listening on http://{}/mcp", mcp.local_addr()?);
    eprintln!("metrics on http://{}/metrics", metrics.local_addr()?);
    tokio::spawn(serve_metrics(metrics, server.clone()));
    mcp_tokio::serve_http(mcp, server, mcp_tokio::HttpConfig::default()).await
}
