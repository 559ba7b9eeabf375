//! The replay runner's own tests (every transcript in `tests/transcripts/` runs as its own test
//! in `transcripts.rs`).
//!
//! `gated_items_do_not_leak_to_refused_callers` drives two runs with
//! [`Live`] (one with gated items, one without), walking every list page through the cursors
//! the engine hands out, and compares everything a refused caller receives byte for byte.
//!
//! To see what the engine emits for a transcript's inputs (a starting point when writing a new
//! one; check every line against the spec before keeping it):
//! `REPLAY_RECORD=tests/transcripts/ping.txt cargo test -p mcp-tests --test replay record -- --ignored --nocapture`

use std::path::Path;

use mcp_tests::replay::{self, Live};
use serde_json::Value;

const PING: &str = r#"
> {"jsonrpc":"2.0","id":1,"method":"ping"}
< {"jsonrpc":"2.0","id":1,"result":{}}
"#;

#[test]
fn a_correct_transcript_passes() {
    let report = replay::run(PING);
    assert!(report.passed(), "{report}");
}

#[test]
fn a_wrong_expectation_fails_with_its_line_and_a_diff() {
    let wrong = PING.replace(r#""result":{}"#, r#""result":{"x":1}"#);
    let report = replay::run(&wrong);
    assert!(!report.passed());
    let text = report.to_string();
    assert!(text.contains("line 3:"), "{text}");
    assert!(text.contains("first difference at byte"), "{text}");
}

#[test]
fn missing_and_unexpected_outputs_fail() {
    // An expectation with nothing behind it.
    let report = replay::run(&format!("{PING}< {{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{{}}}}\n"));
    assert!(report.to_string().contains("emitted nothing more"), "{report}");
    // Output no line expects.
    let report = replay::run("> {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
    assert!(report.to_string().contains("no line expects"), "{report}");
    // A call left in flight.
    let report = replay::run(
        "> {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}\n\
         < {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{\"listChanged\":true},\"logging\":{}},\"serverInfo\":{\"name\":\"replay\",\"version\":\"1.0.0\"}}}\n\
         > {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\"}}\n\
         = invoke tools/call slow 2\n",
    );
    assert!(report.to_string().contains("in flight"), "{report}");
}

#[test]
fn invariants_catch_what_a_transcript_might_enshrine() {
    // Even a transcript that expects it cannot make a reply to a notification pass: the
    // accounting is independent of the expectation lines.
    let report = replay::run(
        "> {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\",\"extra\":1}\n\
         < {\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"unknown envelope member \\\"extra\\\"\"}}\n",
    );
    assert!(!report.passed(), "{report}");
}

const MODERN_META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// How the leak runs speak: a legacy session of this version, or 2026-07-28 requests.
#[derive(Clone, Copy)]
enum Speak {
    Legacy(&'static str),
    Modern,
}

impl Speak {
    /// `params` with the modern `_meta` added when modern (`inner` is the rest of the object).
    fn params(self, inner: &str) -> String {
        match (self, inner.is_empty()) {
            (Speak::Legacy(_), true) => "{}".to_owned(),
            (Speak::Legacy(_), false) => format!("{{{inner}}}"),
            (Speak::Modern, true) => format!("{{{MODERN_META}}}"),
            (Speak::Modern, false) => format!("{{{inner},{MODERN_META}}}"),
        }
    }
}

/// One leak run: an anonymous caller, page size 2, public items of every kind (skills
/// included), and (when `gated`) one item of every kind gated by role admin, placed so that it
/// would shift pages.
/// Returns every frame the engine emitted, in order.
fn leak_run(gated: bool, speak: Speak) -> Vec<String> {
    let extra = |name: &str| if gated { format!(" {name}") } else { String::new() };
    let setup = format!(
        "! page-size 2\n\
         ! tools add big echo{}\n\
         ! resources test://static-text test://static-binary test://rich test://watched-resource{}\n\
         ! templates test://template/{{id}}/data test://files/{{+path}}{}\n\
         ! prompts test_simple_prompt test_prompt_with_arguments{}\n\
         ! skills refunds pdf-processing{}\n\
         ! caller anonymous\n\
         ! auto\n\
         ! register template test://extra/{{x}}\n\
         ! register prompt test_extra_prompt\n\
         ! register skill extra-one\n",
        extra("admin_tool"),
        extra("test://admin/secret"),
        extra("test://private/{id}"),
        extra("test_admin_prompt"),
        extra("admin-audit"),
    );
    let mut live = Live::new(&setup).unwrap_or_else(|e| panic!("setup: {e}"));
    let mut frames = Vec::new();
    let mut id = 0u64;
    let mut send = |live: &mut Live, method: &str, inner: &str| -> Vec<String> {
        id += 1;
        let frame =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{}}}"#, speak.params(inner));
        live.send(1, &frame).unwrap_or_else(|e| panic!("{frame}: {e}"))
    };
    if let Speak::Legacy(v) = speak {
        frames.extend(send(
            &mut live,
            "initialize",
            &format!(
                r#""protocolVersion":"{v}","capabilities":{{}},"clientInfo":{{"name":"c","version":"1"}}"#
            ),
        ));
        frames.extend(live.send(1, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap());
    }
    // Skills exist for the versions that know extensions (2025-11-25 and 2026-07-28).
    let skills = matches!(speak, Speak::Modern | Speak::Legacy("2025-11-25"));
    let lists = ["tools/list", "resources/list", "resources/templates/list", "prompts/list", "skills/list"];
    for method in lists.into_iter().filter(|m| skills || *m != "skills/list") {
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let inner = cursor
                .as_ref()
                .map_or(String::new(), |c| format!(r#""cursor":{}"#, Value::String(c.clone())));
            let out = send(&mut live, method, &inner);
            assert_eq!(out.len(), 1, "{method}: {out:?}");
            let v: Value = serde_json::from_str(&out[0]).unwrap();
            cursor = v.pointer("/result/nextCursor").and_then(Value::as_str).map(str::to_owned);
            frames.extend(out);
            pages += 1;
            if cursor.is_none() {
                break;
            }
            assert!(pages < 10, "{method}: runaway pagination");
        }
        assert!(pages >= 2, "{method}: the walk must cross a page boundary");
    }
    // Reaching the gated items by name is refused exactly as reaching names never registered.
    for (method, inner) in [
        ("tools/call", r#""name":"admin_tool""#),
        ("resources/read", r#""uri":"test://admin/secret""#),
        ("resources/read", r#""uri":"test://private/7""#),
        ("resources/read", r#""uri":"test://static-text""#),
        ("prompts/get", r#""name":"test_admin_prompt""#),
        (
            "completion/complete",
            r#""ref":{"type":"ref/prompt","name":"test_admin_prompt"},"argument":{"name":"a","value":""}"#,
        ),
        (
            "completion/complete",
            r#""ref":{"type":"ref/resource","uri":"test://private/{id}"},"argument":{"name":"id","value":""}"#,
        ),
        ("skills/get", r#""uri":"skill://mcp-rs/admin-audit/SKILL.md""#),
        ("resources/read", r#""uri":"skill://mcp-rs/admin-audit/SKILL.md""#),
        ("resources/directory/read", r#""uri":"skill://mcp-rs/admin-audit""#),
    ] {
        frames.extend(send(&mut live, method, inner));
    }
    match speak {
        Speak::Legacy(_) => {
            frames.extend(send(&mut live, "resources/subscribe", r#""uri":"test://admin/secret""#));
        }
        Speak::Modern => {
            let filter = r#""notifications":{"toolsListChanged":true,"resourceSubscriptions":["test://static-text","test://admin/secret"]}"#;
            frames.extend(send(&mut live, "subscriptions/listen", filter));
        }
    }
    // Changes to gated items are not told to the refused caller: these lines emit nothing.
    if gated {
        for line in [
            "! unregister tool admin_tool",
            "! register tool admin_tool",
            "! notify-updated test://admin/secret",
            "! unregister skill admin-audit",
            "! register skill admin-audit",
        ] {
            frames.extend(live.line(line).unwrap());
        }
    }
    let report = live.finish();
    assert!(report.passed(), "invariants:\n{report}");
    frames
}

/// Gate leakage: what a refused caller sees, every list page (cursors included, walked through
/// them), every refusal, acknowledgement and notification, is byte for byte what it sees when
/// the gated items were never registered.
#[test]
fn gated_items_do_not_leak_to_refused_callers() {
    for v in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let with = leak_run(true, Speak::Legacy(v));
        let without = leak_run(false, Speak::Legacy(v));
        assert_eq!(with, without, "{v}: a refused caller can tell the gated items exist");
    }
    // 2026-07-28: the same. Lists, like reads, are private with TTL 0 by default
    // (Config::list_cache), so not even the cacheScope tells a gated list from an ungated one.
    // With a shared list hint a gated list goes private for every caller, which tells that the
    // list is gated, never what is in it (transcript cache-scope).
    let with = leak_run(true, Speak::Modern);
    let without = leak_run(false, Speak::Modern);
    assert!(with.iter().all(|f| !f.contains(r#""cacheScope":"public""#)));
    assert_eq!(with, without, "2026-07-28: a refused caller can tell the gated items exist");
}

#[test]
#[ignore = "a tool for writing transcripts: set REPLAY_RECORD to a transcript path"]
fn record() {
    let Ok(path) = std::env::var("REPLAY_RECORD") else { return };
    // Relative to the workspace root or to this crate, whichever names a file.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = [root.join("..").join(&path), root.join(&path)]
        .into_iter()
        .find(|p| p.exists())
        .map_or(path, |p| p.to_string_lossy().into_owned());
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (report, text) = replay::record(&source);
    println!("{text}");
    if !report.passed() {
        println!("# failures:\n{report}");
    }
}
