//! A test-only MCP Apps server for the browser proof (tests/browser/run.sh): one `ui://` app
//! whose HTML is read from a file at start, so the harness can serve a page it bundled itself
//! (the official ext-apps `App` class), the tool that opens it, and `echo` for the page to call.
//!
//! Usage: `apps-probe --html FILE [--http ADDR]` (ADDR defaults to 127.0.0.1:0); prints
//! `listening on http://HOST:PORT/mcp` on stderr once bound, as the example servers do.

use std::process::ExitCode;

use mcp_tokio::{ReadResource, Resource, ResourceContents, Server, Tool, ToolCall, ToolOutput};
use serde_json::{json, Map, Value};

/// The app's URI and the MIME type the ext-apps spec requires of it.
const URI: &str = "ui://apps-probe/official-app";
const MIME: &str = "text/html;profile=mcp-app";

fn ui(value: Value) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("ui".into(), value);
    meta
}

fn build(html: String) -> Result<Server, String> {
    let echo_schema =
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    Server::builder("mcp-rs-apps-probe", env!("CARGO_PKG_VERSION"))
        .resource(
            Resource::new(URI, "official-app").mime_type(MIME).meta(ui(json!({"prefersBorder": true}))),
            move |r: ReadResource| {
                let html = html.clone();
                async move {
                    let mut contents = ResourceContents::text(r.uri, MIME, html);
                    contents.meta = Some(ui(json!({"prefersBorder": true})));
                    Ok(vec![contents])
                }
            },
        )
        .tool(
            Tool::new("open_probe_app", "Opens the probe app", json!({"type": "object"}))
                .meta(ui(json!({"resourceUri": URI, "visibility": ["model", "app"]}))),
            |_: ToolCall| async { ToolOutput::text("The probe app is open.") },
        )
        .tool(Tool::new("echo", "Echoes back the given text", echo_schema), |call: ToolCall| async move {
            match call.arguments.get("text").and_then(Value::as_str) {
                Some(text) => ToolOutput::text(format!("echo: {text}")),
                None => ToolOutput::error("`text` must be a string"),
            }
        })
        .build()
        .map_err(|e| e.to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut html_path = None;
    let mut addr = "127.0.0.1:0".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--html", Some(p)) => html_path = Some(p),
            ("--http", Some(v)) => addr = v,
            _ => {
                eprintln!("usage: apps-probe --html FILE [--http ADDR]");
                return ExitCode::from(2);
            }
        }
    }
    let Some(path) = html_path else {
        eprintln!("usage: apps-probe --html FILE [--http ADDR]");
        return ExitCode::from(2);
    };
    let server = match std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}")).and_then(build) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("apps-probe: {e}");
            return ExitCode::from(2);
        }
    };
    let served = async {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        eprintln!("listening on http://{}/mcp", listener.local_addr()?);
        mcp_tokio::serve_http(listener, server, mcp_tokio::HttpConfig::default()).await
    };
    match served.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("apps-probe: {addr}: {e}");
            ExitCode::from(1)
        }
    }
}
