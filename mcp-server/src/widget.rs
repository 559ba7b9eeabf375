//! The widget half of MCP Apps: the JavaScript client a widget runs inside the host's sandboxed
//! iframe, and the document that carries it.
//!
//! A host renders an app's HTML (the `ui://` resource) in a sandboxed frame and talks to it with
//! JSON-RPC 2.0 over `postMessage`: the ext-apps protocol, stable version 2026-01-26. The client
//! ([`widget_client_js`]) speaks the widget's side of it, with no imports and no network access,
//! and exposes itself as `window.mcpApp`:
//!
//! - `connect({appInfo, appCapabilities, timeoutMs, autoResize})`, or positionally
//!   `connect(appCapabilities, timeoutMs?, appInfo?)`, sends `ui/initialize` (`appInfo` defaults
//!   to `mcp-app` / `0.0.0`, `protocolVersion` is `"2026-01-26"`), resolves with the host's
//!   result (`protocolVersion`, `hostCapabilities`, `hostInfo`, `hostContext`), then sends
//!   `ui/notifications/initialized` and, unless `autoResize: false`, starts sending
//!   `ui/notifications/size-changed` whenever the content's size changes. A failed handshake may
//!   be retried. The forms are told apart by the first argument's keys: one with any of the four
//!   option keys is the options object (and may then hold nothing else, with no second or third
//!   argument); any other object, `undefined` or `null` is `appCapabilities` (whose keys,
//!   `experimental`, `tools` and `availableDisplayModes`, are none of the option keys), so
//!   `connect({availableDisplayModes: ["inline"]})` declares that capability. A call that fits
//!   neither form (option keys beside others, a non-object first argument, a timeout that is not
//!   a positive number, a non-object `appInfo`, a non-boolean `autoResize`, a fourth argument)
//!   is refused with `E_ARGS` before anything is posted.
//! - Requests through the host: `callTool` (`tools/call`), `readResource` (`resources/read`),
//!   `openLink` (`ui/open-link`), `message` (`ui/message`), `requestDisplayMode`
//!   (`ui/request-display-mode`), `updateModelContext` (`ui/update-model-context`),
//!   `downloadFile` (`ui/download-file`) and `request(method, params)` for any other; each takes
//!   the spec's `params` object and an optional timeout in milliseconds.
//! - Notifications to the host: `sizeChanged`, `log` (`notifications/message`),
//!   `requestTeardown` (`ui/notifications/request-teardown`), `notify(method, params)`.
//! - From the host: `onToolInput`, `onToolInputPartial`, `onToolResult`, `onToolCancelled`,
//!   `onHostContextChanged`, `onMessage` (the host's `notifications/message` log messages) and
//!   `on(method, handler)` (each returns an unsubscribe function; a
//!   handler that throws is logged and the others still run); `onResourceTeardown(handler)` for
//!   the one host request, `ui/resource-teardown`, answered once the handler's promise settled
//!   (`{}`, or error -32603 if it threw); `ping` is answered by the client.
//!
//! Every request returns a promise that rejects with an `McpAppError`: the host's JSON-RPC error
//! (numeric `code`, `message`, `data`) or one of the client's own codes: `E_TIMEOUT` (no answer
//! within the timeout, 30 s by default; the client then sends `notifications/cancelled` for it),
//! `E_SATURATED` (64 requests already in flight: the 65th is refused before it is posted),
//! `E_SEND` (`postMessage` threw, usually on params that are not structured-cloneable) and
//! `E_TEARDOWN` (the widget was torn down or its page hidden: nothing in flight will be
//! answered, and after a teardown no new request is posted); `connect` also rejects with
//! `E_ARGS` (arguments it cannot read, above). An answer that comes after its
//! request timed out or was torn down is dropped by id. Messages are accepted only from
//! `window.parent` (by `event.source`: a sandboxed widget's origin is opaque) and only with
//! `jsonrpc: "2.0"`.
//!
//! The client applies the host's theme before any handler sees it, on connect and on every
//! `ui/notifications/host-context-changed` (partial updates merged into the running context):
//! `theme` as `<html data-theme>` and `color-scheme`, `styles.variables` as custom properties on
//! the root element, `styles.css.fonts` as one `<style id="__mcp-host-fonts">`, replaced on each
//! update. `mcpApp.hostContext()` returns a copy of the merged context.
//!
//! The client must be inlined: the host renders the HTML in a frame on its own origin, so a
//! `<script src>` would resolve against the host and never load. [`widget_document`] builds a
//! page with the client ahead of the app's script.

/// The widget client's source (about 18 KiB), to inline in an app's HTML inside a `<script>`
/// element. It contains no `</script` and no `<!--`, so it can be placed between `<script>` and
/// `</script>` as it is.
pub fn widget_client_js() -> &'static str {
    include_str!("../assets/mcp-app.js")
}

/// A complete HTML document for an app: `head` (markup for `<head>`: a title, styles), `body`
/// (the widget's markup) and `script` (the app's JavaScript, run at the end of the body, after
/// the client, so `window.mcpApp` is there).
///
/// `head` and `body` are inserted as they are: they are the app author's markup. `script` is
/// escaped so that nothing in it can end its `<script>` element early: every `</script` (in any
/// letter case) and every `<!--` has its `<` written as `\x3C`. That spelling means the same
/// inside string, template and regular-expression literals and comments, where such text occurs
/// in practice; a script that spells `</script` as code (`a </script/`) is changed in meaning.
pub fn widget_document(head: &str, body: &str, script: &str) -> String {
    let client = widget_client_js();
    let script = escape_script(script);
    let mut doc = String::with_capacity(200 + head.len() + body.len() + client.len() + script.len());
    doc.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    doc.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    doc.push_str(head);
    doc.push_str("\n<script>\n");
    doc.push_str(client);
    doc.push_str("</script>\n</head>\n<body>\n");
    doc.push_str(body);
    doc.push_str("\n<script>\n");
    doc.push_str(&script);
    doc.push_str("\n</script>\n</body>\n</html>\n");
    doc
}

/// `js` with `<` written as `\x3C` wherever it starts `</script` (any case) or `<!--`: the two
/// sequences that end a script element or make the HTML tokenizer look for a nested one.
fn escape_script(js: &str) -> String {
    let bytes = js.as_bytes();
    let mut out = String::with_capacity(js.len());
    let mut copied = 0;
    for (i, _) in js.match_indices('<') {
        let rest = &bytes[i + 1..];
        let closes = rest.len() >= 7 && rest[..7].eq_ignore_ascii_case(b"/script");
        if closes || rest.starts_with(b"!--") {
            out.push_str(&js[copied..i]);
            out.push_str("\\x3C");
            copied = i + 1;
        }
    }
    out.push_str(&js[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_needs_no_escaping_and_imports_nothing() {
        let js = widget_client_js();
        assert_eq!(escape_script(js), js);
        assert!(!js.contains("import ") && !js.contains("http://") && !js.contains("https://"));
        for method in [
            "ui/initialize",
            "ui/notifications/initialized",
            "ui/notifications/size-changed",
            "ui/resource-teardown",
            "ui/notifications/host-context-changed",
            "ui/notifications/tool-input-partial",
            "ui/notifications/tool-cancelled",
            "ui/update-model-context",
            "ui/request-display-mode",
            "notifications/message",
        ] {
            assert!(js.contains(&format!("\"{method}\"")), "{method}");
        }
    }

    #[test]
    fn script_endings_are_escaped_in_any_case() {
        assert_eq!(escape_script("a = '</script>';"), "a = '\\x3C/script>';");
        assert_eq!(escape_script("'</SCRIPT >' + '</ScRiPt/'"), "'\\x3C/SCRIPT >' + '\\x3C/ScRiPt/'");
        assert_eq!(escape_script("s = '<!-- <script>'"), "s = '\\x3C!-- <script>'");
        // Near misses stay as they are, including at the very end.
        assert_eq!(escape_script("a < b; '</scrip' + '<!-' + '</"), "a < b; '</scrip' + '<!-' + '</");
        // Multibyte text around an escape is kept whole.
        assert_eq!(escape_script("'é</script>ü'"), "'é\\x3C/script>ü'");
    }

    #[test]
    fn the_document_puts_the_client_before_the_app_script() {
        let doc = widget_document("<title>t</title>", "<p id=x>hi</p>", "mcpApp.connect(); // </script>");
        let client = doc.find("window.mcpApp =").expect("client inlined");
        let body = doc.find("<p id=x>hi</p>").expect("body");
        let app = doc.find("mcpApp.connect(); // \\x3C/script>").expect("escaped app script");
        assert!(doc.starts_with("<!DOCTYPE html>"));
        assert!(doc.find("<title>t</title>").expect("head") < client);
        assert!(client < body && body < app);
        // Exactly the two script elements it opened: nothing in the app script closed one early.
        assert_eq!(doc.matches("</script>").count(), 2);
    }
}
