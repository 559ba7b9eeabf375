//! Runs every transcript in `tests/transcripts/` against a bare engine.
//!
//! A transcript marked `! known-bug` documents an engine bug: it is expected to fail and is
//! reported, not counted as a failure; once it passes the suite fails until the marker goes.
//!
//! To see what the engine emits for a transcript's inputs (a starting point when writing a new
//! one; check every line against the spec before keeping it):
//! `REPLAY_RECORD=tests/transcripts/ping.txt cargo test -p mcp-tests --test replay record -- --ignored --nocapture`

use std::path::{Path, PathBuf};

use mcp_tests::replay;

fn transcripts() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_transcript() {
    let files = transcripts();
    assert!(files.len() >= 25, "only {} transcripts found", files.len());
    let mut failed = Vec::new();
    let mut known = Vec::new();
    for path in &files {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let report = replay::run(&source);
        match (&report.known_bug, report.passed()) {
            (None, true) => {}
            (None, false) => failed.push(format!("── {name}\n{report}")),
            (Some(bug), false) => known.push(format!("── {name} (known engine bug: {bug})\n{report}")),
            (Some(bug), true) => failed.push(format!(
                "── {name} passes but is marked `! known-bug {bug}`: the bug is fixed, remove the marker"
            )),
        }
    }
    if !known.is_empty() {
        eprintln!("{} transcript(s) document known engine bugs:\n{}", known.len(), known.join("\n"));
    }
    assert!(
        failed.is_empty(),
        "{} of {} transcripts failed:\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
}

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
