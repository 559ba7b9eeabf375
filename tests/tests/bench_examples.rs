//! The bench examples (`mcp-tokio`'s `bench`, `mcp-smol`'s `bench-smol`): what bench/run.sh
//! measures as `tokio` and `smol`. Each serves the everything example's `--bench` catalogue and
//! nothing else, on stdio or with `--http ADDR`, and refuses any other command line.
//!
//! Built by `cargo test --workspace` next to this test's binary; a run of this crate alone skips
//! these tests.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use mcp_tests::examples::{example, serve_http_example};
use mcp_tests::http::{Client, Req};
use serde_json::{json, Value};

const BENCH: [&str; 2] = ["bench", "bench-smol"];
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench-test","version":"1"}}}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
const ECHO: &str =
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;

/// The catalogue of ../shared/bench's peers, as `tools/list` carries it.
fn catalogue(list: &Value) -> Vec<(String, String)> {
    let tools = list["result"]["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .map(|t| {
            (t["name"].as_str().unwrap_or("").to_owned(), t["description"].as_str().unwrap_or("").to_owned())
        })
        .collect()
}

fn expected() -> Vec<(String, String)> {
    // In name order, as the server lists its tools.
    vec![("add".into(), "Add two numbers".into()), ("echo".into(), "Echo the given text".into())]
}

#[test]
fn bench_examples_serve_the_catalogue_on_stdio() {
    for name in BENCH {
        let Some(path) = example(name) else { continue };
        let mut child = Command::new(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut stdin = child.stdin.take().expect("stdin");
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        writeln!(stdin, "{INITIALIZE}\n{initialized}\n{LIST}\n{ECHO}").expect("write");
        drop(stdin);
        let replies: Vec<Value> = BufReader::new(child.stdout.take().expect("stdout"))
            .lines()
            .map(|l| serde_json::from_str(&l.expect("line")).expect("JSON"))
            .collect();
        assert!(child.wait().expect("wait").success(), "{name}: exits 0 at end of input");
        assert_eq!(replies.len(), 3, "{name}: {replies:?}");
        assert_eq!(replies[0]["result"]["serverInfo"]["name"], "mcp-rs-everything", "{name}");
        assert_eq!(catalogue(&replies[1]), expected(), "{name}");
        assert_eq!(replies[2]["result"]["content"], json!([{"type": "text", "text": "hi"}]), "{name}");
    }
}

#[test]
fn bench_examples_serve_the_catalogue_over_http() {
    for name in BENCH {
        let Some(served) = serve_http_example(name).unwrap_or_else(|e| panic!("{e}")) else { continue };
        let mut client = Client::connect(served.addr).expect("connect");
        let resp = client.request(&Req::post(INITIALIZE)).expect("initialize");
        assert_eq!(resp.status(), 200, "{name}: {}", String::from_utf8_lossy(&resp.body));
        let session = resp.header("mcp-session-id").expect("a session").to_owned();
        let list =
            Req::post(LIST).header("mcp-session-id", &session).header("mcp-protocol-version", "2025-11-25");
        let resp = client.request(&list).expect("tools/list");
        assert_eq!(catalogue(&resp.json().expect("JSON")), expected(), "{name}");
    }
}

#[test]
fn bench_examples_refuse_other_arguments() {
    for name in BENCH {
        let Some(path) = example(name) else { continue };
        for args in [&["--bench"][..], &["--http"], &["--http", "127.0.0.1:0", "extra"]] {
            let out = Command::new(&path).args(args).stdin(Stdio::null()).output().expect("run");
            assert_eq!(out.status.code(), Some(2), "{name} {args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(&format!("usage: {name} [--http ADDR]")), "{name} {args:?}: {err}");
        }
    }
}
