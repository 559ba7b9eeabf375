//! Throughput of the engine on hostile frames, next to plain frames of the same size.
//!
//! Every row is one frame through `Engine::handle_frame` on the stdio connection of a fresh
//! engine (initialized at 2025-06-18), every output drained with `poll_output`, and any tool call
//! completed at once. Criterion reports bytes per second; a hostile row should stay within a
//! small factor (about 3x) of the plain row of its shape, or some per-element work is not O(1).
//!
//! Rows, each at every size (default 1 MiB and 2 MiB, the default frame limit):
//! - `plain_string`: `tools/call` of `echo` whose `text` argument is one long ASCII string,
//!   echoed back. The cheapest frame per byte: one string scan.
//! - `plain_objects`: `tools/call` of `sink` with an array of small objects
//!   (`{"id":…,"name":…}`). The plain frame for the structural rows below.
//! - `casefold_pairs`: `arguments` of `"K000000":0,"k000000":0,…`. Every second key case-folds
//!   onto the one before; the frame is answered with the first fault.
//! - `distinct_keys`: `arguments` of distinct keys `"k0000000":0,…` (about 100k per MiB),
//!   decoded, validated and handed to the tool.
//! - `deep_within_limit`: arrays nested as deep as [`Limits::max_depth`] allows, side by side.
//! - `deep_past_limit`: one array nested as deep as the frame is long (about half a million
//!   levels per MiB); the engine skips what is past the limit and answers with the fault.
//! - `escaped_string`: the echo's `text` as `\u20ac` escapes only: the most decoding work a
//!   string can ask per byte.
//!
//! Each row but `deep_past_limit` has a `<row>/serde_json_value` twin: the same frame through
//! `serde_json::from_slice::<Value>` alone, the floor any decoder that keeps the values pays.
//!
//! Runs short, so pass `--warm-up-time 1 --measurement-time 3` (or longer). Sizes can be
//! changed with `HOSTILE_SIZES` (bytes, comma-separated), for example to measure a slower engine
//! at smaller frames: `HOSTILE_SIZES=65536,262144 cargo bench -p mcp-proto --bench hostile --
//! casefold`.
// A benchmark is a shim: it owns the clock and may stop on a broken setup. `criterion_group!`
// generates undocumented public functions.
#![allow(missing_docs, clippy::disallowed_methods, clippy::expect_used, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mcp_proto::{Config, ConnId, Implementation, KeyRing, Tool};
use mcp_testkit::StandIn;
use serde_json::{json, Value};

/// The default `Limits::max_depth`; the envelope is level 1 and `params` level 2.
const MAX_DEPTH: usize = 64;

/// A fresh engine with `echo` (one string) and `sink` (any object), one stdio connection, driven
/// by the workspace's shim stand-in (`echo` echoes its text, `sink` answers "ok").
fn setup() -> (StandIn, ConnId) {
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
    registry
        .add_tool(Tool::new("sink", "Takes anything", json!({"type": "object"})), ())
        .expect("sink registers");
    shim.drain();
    let conn = shim.stdio(Some("2025-06-18"));
    (shim, conn)
}

/// A `tools/call` of `tool` whose `arguments` object is `open`, `n` generated members and
/// `close`, with members added until the frame reaches `size` bytes.
fn call(
    tool: &str,
    size: usize,
    open: &str,
    close: &str,
    mut member: impl FnMut(usize) -> String,
) -> Vec<u8> {
    let head =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":"#);
    let tail = "}}";
    let mut s = format!("{head}{open}");
    let budget = size.saturating_sub(close.len() + tail.len());
    let mut i = 0;
    loop {
        let m = member(i);
        if s.len() + m.len() + 1 > budget {
            break;
        }
        if i > 0 {
            s.push(',');
        }
        s.push_str(&m);
        i += 1;
    }
    s.push_str(close);
    s.push_str(tail);
    s.into_bytes()
}

/// One JSON string argument of about `size` bytes, built from `unit` repeated.
fn string_call(size: usize, unit: &str) -> Vec<u8> {
    let head =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#;
    let tail = r#""}}}"#;
    let n = size.saturating_sub(head.len() + tail.len()) / unit.len();
    format!("{head}{}{tail}", unit.repeat(n)).into_bytes()
}

/// Every row: its name, the frame, and a fragment the response must contain.
fn rows(size: usize) -> Vec<(&'static str, Vec<u8>, &'static str)> {
    // Arrays nested to the deepest level the limit allows: the envelope is 1, `params` 2,
    // `arguments` 3, its array 4; each element adds the rest.
    let within = MAX_DEPTH - 4;
    let nest = format!("{}0{}", "[".repeat(within), "]".repeat(within));
    let past = {
        let head =
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sink","arguments":{"d":"#;
        let tail = "}}}";
        let n = size.saturating_sub(head.len() + tail.len()) / 2;
        format!("{head}{}{}{tail}", "[".repeat(n), "]".repeat(n)).into_bytes()
    };
    vec![
        ("plain_string", string_call(size, "abcdefgh"), r#""result""#),
        (
            "plain_objects",
            call("sink", size, r#"{"items":["#, "]}", |i| format!(r#"{{"id":{i},"name":"item"}}"#)),
            r#""result""#,
        ),
        (
            "casefold_pairs",
            call("sink", size, "{", "}", |i| {
                let c = if i % 2 == 0 { 'K' } else { 'k' };
                format!(r#""{c}{:06}":0"#, i / 2)
            }),
            "differ only by case",
        ),
        ("distinct_keys", call("sink", size, "{", "}", |i| format!(r#""k{i:07}":0"#)), r#""result""#),
        ("deep_within_limit", call("sink", size, r#"{"d":["#, "]}", |_| nest.clone()), r#""result""#),
        ("deep_past_limit", past, "nested deeper than"),
        ("escaped_string", string_call(size, "\\u20ac"), r#""result""#),
    ]
}

fn sizes() -> Vec<usize> {
    match std::env::var("HOSTILE_SIZES") {
        Ok(list) => list.split(',').map(|s| s.trim().parse().expect("HOSTILE_SIZES: byte counts")).collect(),
        Err(_) => vec![1 << 20, 2 << 20],
    }
}

fn hostile(c: &mut Criterion) {
    for size in sizes() {
        let mut group = c.benchmark_group(format!("hostile_{}KiB", size / 1024));
        for (name, frame, expect) in rows(size) {
            assert!(frame.len() <= size && frame.len() + 256 >= size, "{name}: {} bytes", frame.len());
            let (mut shim, conn) = setup();
            // The row must exercise what it claims: a plain frame succeeds, a hostile one gets
            // its fault, never some unrelated refusal.
            let response = shim.answer(conn, &frame);
            let text = String::from_utf8_lossy(&response);
            assert!(
                text.contains(expect),
                "{name}: unexpected response {}",
                text.chars().take(300).collect::<String>()
            );
            group.throughput(Throughput::Bytes(frame.len() as u64));
            group.bench_with_input(BenchmarkId::new(name, frame.len()), &frame, |b, frame| {
                b.iter(|| shim.answer(conn, black_box(frame)))
            });
            // What building serde_json's own tree of the same frame costs: the floor a decoder
            // that keeps every value pays. (serde_json refuses nesting past 128, so the row past
            // the limit has no such floor.)
            if name != "deep_past_limit" {
                group.bench_with_input(
                    BenchmarkId::new(format!("{name}/serde_json_value"), frame.len()),
                    &frame,
                    |b, frame| {
                        b.iter(|| serde_json::from_slice::<Value>(black_box(frame)).expect("valid JSON"))
                    },
                );
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    targets = hostile
}
criterion_main!(benches);
