//! Throughput of the engine on the hot paths, next to a bare serde_json reference.
//!
//! - `tools_call_echo/engine`: one `tools/call` echo frame (64-byte text) in, the `Invoke`
//!   completed at once with `ToolOutput::text`, the response frame out. Per element: one
//!   request answered.
//! - `tools_call_echo/serde_json_reference`: the same frame through
//!   `serde_json::from_slice::<Value>`, the response built as a `Value`, `serde_json::to_vec`.
//!   The floor any JSON-RPC server pays; the engine's extra is strict decoding (repeated and
//!   case-folded keys, exact numbers), schema validation, the in-flight table and the ticket.
//! - `tools_list/engine`: one `tools/list` over ten registered tools (one page).
//! - `tools_list_page/<n>/<start|middle|end>`: one `tools/list` page (the default page size)
//!   of a catalogue of `n` tools (10,000 and 100,000), the first page, the page at the middle
//!   and the last page, each from a cursor the engine handed out. Per element: one page
//!   answered. Flat across positions and sizes when a page costs O(page size + log n).
//!
//! Runs short (`~3 s` per bench) so `cargo bench -p mcp-proto` stays under two minutes on a
//! two-core machine; pass criterion flags after `--` for longer runs, e.g.
//! `cargo bench -p mcp-proto -- --measurement-time 10`.
// A benchmark is a shim: it owns the clock and may stop on a broken setup. `criterion_group!`
// generates undocumented public functions.
#![allow(missing_docs, clippy::disallowed_methods, clippy::expect_used, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcp_proto::{Config, ConnId, Implementation, KeyRing, Tool};
use mcp_testkit::StandIn;
use serde_json::{json, Value};

/// 64 bytes of text, no escapes.
const TEXT: &str = "The quick brown fox jumps over the lazy dog, again and again ok.";

const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#;

fn echo_frame() -> Vec<u8> {
    assert_eq!(TEXT.len(), 64);
    format!(
        r#"{{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{TEXT}"}}}}}}"#
    )
    .into_bytes()
}

fn expected_echo_response() -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":42,"result":{{"content":[{{"type":"text","text":"{TEXT}"}}]}}}}"#)
        .into_bytes()
}

/// An engine with `extra` tools beside `echo`, one stdio connection, initialized at 2025-06-18,
/// driven by the workspace's shim stand-in (whose `echo` handler echoes `text`).
fn setup(extra: usize) -> (StandIn, ConnId) {
    let config = Config::new(Implementation::new("bench", "1.0.0"), KeyRing::new([7; 32]));
    let mut shim = StandIn::bare(config);
    let now = shim.now;
    let echo = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": false
    });
    let mut registry = shim.engine.registry_mut(now);
    registry.add_tool(Tool::new("echo", "Echoes its text", echo), ()).expect("echo registers");
    for i in 0..extra {
        let schema = json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["query"]
        });
        let tool = Tool::new(format!("tool_{i}"), format!("Tool number {i}, which does a thing"), schema)
            .title(format!("Tool {i}"));
        registry.add_tool(tool, ()).expect("tool registers");
    }
    shim.drain();
    let conn = shim.stdio(Some("2025-06-18"));
    (shim, conn)
}

/// The same work with nothing but serde_json: decode, build the result, encode.
fn reference_echo(frame: &[u8]) -> Vec<u8> {
    let request: Value = serde_json::from_slice(frame).expect("valid JSON");
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let text = request
        .get("params")
        .and_then(|p| p.get("arguments"))
        .and_then(|a| a.get("text"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let response = json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": text}]}
    });
    serde_json::to_vec(&response).expect("encodes")
}

fn tools_call(c: &mut Criterion) {
    let frame = echo_frame();
    let (mut shim, conn) = setup(0);
    // Both sides must produce the same bytes, or the comparison means nothing.
    assert_eq!(shim.answer(conn, &frame), expected_echo_response());
    assert_eq!(reference_echo(&frame), expected_echo_response());

    let mut group = c.benchmark_group("tools_call_echo");
    group.throughput(Throughput::Elements(1));
    group.bench_function("engine", |b| b.iter(|| shim.answer(conn, black_box(&frame))));
    group.bench_function("serde_json_reference", |b| b.iter(|| reference_echo(black_box(&frame))));
    group.finish();
}

fn tools_list(c: &mut Criterion) {
    let (mut shim, conn) = setup(9);
    let first: Value = serde_json::from_slice(&shim.answer(conn, TOOLS_LIST.as_bytes())).expect("valid JSON");
    let tools = first.pointer("/result/tools").and_then(Value::as_array).map_or(0, Vec::len);
    assert_eq!(tools, 10, "every tool on one page");

    let mut group = c.benchmark_group("tools_list");
    group.throughput(Throughput::Elements(1));
    group.bench_function("engine_10_tools", |b| {
        b.iter(|| shim.answer(conn, black_box(TOOLS_LIST.as_bytes())))
    });
    group.finish();
}

/// A `tools/list` request, from `cursor` when given.
fn list_frame(cursor: Option<&str>) -> Vec<u8> {
    match cursor {
        None => TOOLS_LIST.as_bytes().to_vec(),
        Some(c) => {
            let c = Value::String(c.to_owned());
            format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{{"cursor":{c}}}}}"#)
                .into_bytes()
        }
    }
}

fn tools_list_pages(c: &mut Criterion) {
    let mut group = c.benchmark_group("tools_list_page");
    group.throughput(Throughput::Elements(1));
    for size in [10_000usize, 100_000] {
        let (mut shim, conn) = setup(size - 1);
        // Walk the whole list once, keeping the request of the first, middle and last pages.
        let mut frames = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = 0;
        loop {
            let frame = list_frame(cursor.as_deref());
            let page: Value = serde_json::from_slice(&shim.answer(conn, &frame)).expect("JSON");
            let n = page.pointer("/result/tools").and_then(Value::as_array).map_or(0, Vec::len);
            assert!(n > 0, "every page holds tools");
            if seen == 0 || (seen < size / 2 && seen + n >= size / 2) {
                frames.push(frame.clone());
            }
            seen += n;
            cursor = page.pointer("/result/nextCursor").and_then(Value::as_str).map(str::to_owned);
            if cursor.is_none() {
                frames.push(frame);
                break;
            }
        }
        assert_eq!(seen, size, "the walk sees every tool once");
        assert_eq!(frames.len(), 3, "first, middle and last pages");
        for (at, frame) in ["start", "middle", "end"].into_iter().zip(&frames) {
            group.bench_function(format!("{size}/{at}"), |b| b.iter(|| shim.answer(conn, black_box(frame))));
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    targets = tools_call, tools_list, tools_list_pages
}
criterion_main!(benches);
