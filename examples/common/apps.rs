//! The `everything` server's MCP App: `ui://everything/counter`, a counter the server keeps,
//! shown by a small widget (`app.html`) and driven by the `counter` tool, which the widget calls
//! and whose results select the app's `counter` view.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use mcp_proto::apps::App;
use mcp_proto::{Content, Tool, ToolOutput};
use mcp_server::{ServerBuilder, ToolCall};
use serde_json::json;

/// The app's URI.
pub(crate) const COUNTER_URI: &str = "ui://everything/counter";

/// The widget: a complete HTML document, replaced as a whole when the widget changes.
const COUNTER_HTML: &str = include_str!("app.html");

/// The largest step one call may take, so the count stays far from `i64`'s ends.
const MAX_STEP: i64 = 1_000_000;

/// Adds the counter app and its tool.
pub(crate) fn apps(builder: ServerBuilder) -> ServerBuilder {
    let app = App::new(COUNTER_URI, "counter", COUNTER_HTML)
        .title("Counter")
        .description("A counter kept by the server; the counter tool adds to it")
        .view("counter")
        .prefers_border(true);
    let schema = json!({
        "type": "object",
        "properties": {
            "by": {"type": "integer", "minimum": -MAX_STEP, "maximum": MAX_STEP, "default": 1,
                   "description": "How much to add (negative to subtract)."}
        },
        "additionalProperties": false
    });
    let tool = Tool::new("counter", "Adds to the server's counter and shows it in the counter app", schema)
        .title("Counter");
    let count = Arc::new(AtomicI64::new(0));
    builder.app_tool(app, tool, move |call: ToolCall| {
        let count = count.clone();
        async move {
            // The schema bounds `by`; the engine checked it.
            let by = call.arguments.get("by").and_then(|b| b.as_i64()).unwrap_or(1);
            let now = count.fetch_add(by, Ordering::Relaxed).saturating_add(by);
            let mut out = ToolOutput::presentation("counter", json!({ "count": now }));
            out.content.push(Content::text(format!("The counter is now {now}.")));
            out
        }
    })
}
