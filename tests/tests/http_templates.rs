//! Resource template variables through a real server on both runtimes: the handler's
//! `ReadResource::var` is percent-decoded and `raw_var` is the URI's own spelling, and a
//! variable that does not decode is refused before any handler runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mcp_proto::http::HttpConfig;
use mcp_proto::{ResourceContents, ResourceTemplate};
use mcp_server::{ReadResource, Server};
use mcp_tests::http::{each, ensure, modern, serve, Client, Outcome, Shim};
use serde_json::{json, Value};

fn read(addr: std::net::SocketAddr, id: u64, uri: &str) -> Result<Value, String> {
    let req = modern(id, "resources/read", json!({ "uri": uri })).header("Mcp-Name", uri);
    Client::connect(addr).map_err(|e| format!("connect: {e}"))?.request(&req)?.json()
}

fn decoded_and_raw(shim: Shim) -> Outcome {
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = runs.clone();
    let template = ResourceTemplate::new("notes://{folder}/{+path}", "notes");
    let server = Server::builder("templates", "1")
        .template(template, move |r: ReadResource| {
            seen.fetch_add(1, Ordering::SeqCst);
            let body = json!({
                "folder": r.var("folder"), "folder_raw": r.raw_var("folder"),
                "path": r.var("path"), "path_raw": r.raw_var("path"),
            });
            async move { Ok(vec![ResourceContents::text(&r.uri, "application/json", body.to_string())]) }
        })
        .build()
        .map_err(|e| e.to_string())?;
    let addr = serve(shim, server, HttpConfig::default());

    let uri = "notes://my%20notes/a%2Fb/c%C3%A9";
    let answer = read(addr, 1, uri)?;
    let text = answer["result"]["contents"][0]["text"].as_str().ok_or_else(|| answer.to_string())?;
    let got: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let want = json!({
        "folder": "my notes", "folder_raw": "my%20notes",
        "path": "a/b/cé", "path_raw": "a%2Fb/c%C3%A9",
    });
    ensure(got == want, || format!("{got}"))?;

    for (id, bad, why) in [(2, "notes://%FF/x", "UTF-8"), (3, "notes://a/b%2", "two hex digits")] {
        let answer = read(addr, id, bad)?;
        let msg = answer["error"]["message"].as_str().unwrap_or_default();
        ensure(answer["error"]["code"] == -32602 && msg.contains(why), || answer.to_string())?;
    }
    ensure(runs.load(Ordering::SeqCst) == 1, || "the refused reads ran no handler".into())
}

#[test]
fn template_variables_are_decoded_with_their_raw_form() {
    each(decoded_and_raw);
}
