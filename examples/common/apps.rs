//! The `everything` server's MCP App: `ui://everything/sum`, the "Exact sum" widget
//! (`app.html`, with the crate's widget client inlined), linked to the `add` tool. A host that
//! shows `add`'s results renders it; inside it, the user sums other numbers through `add` again.

use mcp_proto::apps::App;
use mcp_server::ServerBuilder;

/// The app's URI, which `add` links to.
pub(crate) const SUM_URI: &str = "ui://everything/sum";

/// Where `app.html` wants the widget client: a host renders the app in a sandboxed frame on its
/// own origin, so the client must be inline (a `<script src>` would resolve against the host).
const CLIENT_SLOT: &str = "<!-- mcp-app client -->";

/// Adds the app; `add` links to it (see `demo_tools`).
pub(crate) fn apps(builder: ServerBuilder) -> ServerBuilder {
    let client = format!("<script>{}</script>", mcp_server::widget::widget_client_js());
    let html = include_str!("app.html").replacen(CLIENT_SLOT, &client, 1);
    let app = App::new(SUM_URI, "exact-sum", html)
        .title("Exact sum")
        .description("Sums two numbers with the add tool, in exact decimal arithmetic, and shows the result")
        .prefers_border(true);
    builder.app(app)
}
