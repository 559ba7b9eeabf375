//! Depending on `mcp-tokio` with its default features leaves the user's own serde_json as it
//! is without it: no `arbitrary_precision` (which makes untagged enums and `f64` in buffered
//! content refuse every number) and no `preserve_order` (serde_json's default `Map` sorts its
//! keys). The server below is served in the same binary, so the dependency is real.

use mcp_tokio::{schemars, Caller, Server, ToolOutput};
use serde::Deserialize;
use serde_json::Value;

/// The user's own type, with serde's own derive and the user's own serde_json.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum Amount {
    Num(f64),
    Text(String),
}

#[derive(Debug, Deserialize)]
struct Payment {
    amount: Amount,
}

#[test]
fn an_untagged_enum_reads_a_number() {
    let p: Payment = serde_json::from_str(r#"{"amount":2.5}"#).expect("{\"amount\":2.5} parses");
    assert_eq!(p.amount, Amount::Num(2.5));
    let p: Payment = serde_json::from_str(r#"{"amount":"2.5 EUR"}"#).expect("a string parses");
    assert_eq!(p.amount, Amount::Text("2.5 EUR".into()));
}

#[test]
fn maps_keep_serde_json_default_key_order() {
    let v: Value = serde_json::from_str(r#"{"b":1,"a":2}"#).expect("an object parses");
    // Sorted: the default `BTreeMap`-backed `Map`, not the order of the text.
    assert_eq!(v.to_string(), r#"{"a":2,"b":1}"#);
}

/// A tool taking the user's type: arguments reach it through the engine's own decoder.
#[derive(mcp_tokio::serde::Deserialize, schemars::JsonSchema)]
#[serde(crate = "mcp_tokio::serde")]
#[schemars(crate = "mcp_tokio::schemars")]
struct Pay {
    amount: f64,
}

/// One stdio session: `lines` in, the server's lines out.
async fn session(server: &Server, lines: &str) -> Vec<Value> {
    let mut out = Vec::new();
    mcp_tokio::serve_lines(server, Caller::anonymous(), lines.as_bytes(), &mut out).await.expect("session");
    String::from_utf8(out)
        .expect("UTF-8 output")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each output line is JSON"))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_in_the_same_binary_serves_numbers() {
    let server = Server::builder("pay", "1.0.0")
        .typed_tool("pay", "Pays an amount", |args: Pay, _call| async move {
            ToolOutput::text(format!("paid {}", args.amount))
        })
        .build()
        .expect("server builds");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let lines = format!(
        "{init}\n{}\n{}\n{}\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pay","arguments":{"amount":2.5}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pay","arguments":{"amount":0.1000000000000000000001}}}"#,
    );
    let replies = session(&server, &lines).await;
    let by_id = |id: u64| {
        replies.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no reply to {id}: {replies:?}"))
    };
    assert_eq!(by_id(2)["result"]["content"][0]["text"], "paid 2.5", "{replies:?}");
    // A number a default build cannot carry exactly is refused, naming it and the feature that
    // would carry it, rather than rounded to 0.1 on its way to the handler.
    let refused = &by_id(3)["error"];
    assert_eq!(refused["code"], -32602, "{replies:?}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains("0.1000000000000000000001") && message.contains("exact-json"), "{message}");
}
