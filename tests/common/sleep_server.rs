//! The server both shims' shutdown tests drive (included with `#[path]`, the crate root naming
//! its shim `shim`): one `sleep` tool, so calls finish when the test says.

use std::time::Duration;

use crate::shim::{Server, Tool, ToolCall, ToolOutput};
use serde_json::json;

/// A server whose `sleep` tool sleeps `ms` milliseconds on the shim's runtime.
pub(crate) fn server() -> Server {
    let schema = json!({"type": "object", "properties": {"ms": {"type": "integer"}}});
    Server::builder("shutdown", "1.0.0")
        .tool(Tool::new("sleep", "Sleeps for ms milliseconds", schema), |call: ToolCall| async move {
            let ms = call.arguments.get("ms").and_then(|v| v.as_u64()).unwrap_or(0);
            call.ctx.sleep(Duration::from_millis(ms)).await;
            ToolOutput::text(format!("slept {ms}"))
        })
        .build()
        .expect("valid server")
}

pub(crate) const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// A `tools/call` of `sleep` for `ms` milliseconds with request id `id`.
pub(crate) fn call(id: u32, ms: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":{ms}}}}}}}"#
    )
}
