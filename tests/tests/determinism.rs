//! The engine is deterministic: replaying the whole transcript corpus twice, each run on a fresh
//! engine with the same configuration, gives the same outputs byte for byte and in the same
//! order (frames, invocations, cancellations, closes, answers, HTTP responses and SSE streams
//! with their session ids), and the same failures.
//!
//! Within one process each run's hash maps get fresh random keys, so an output whose order came
//! from iterating one (cancellations of a connection closed with calls in flight did) differs
//! between the two runs.

use std::path::PathBuf;

use mcp_tests::replay;

/// Inputs no transcript of the corpus has: connections closed (and shut down) with many calls in
/// flight under peer-chosen ids, whose cancellations must come in one order. Only the inputs
/// matter here; the recorded outputs of two runs are compared with each other.
const CLOSE_MANY_IN_FLIGHT: &str = r#"! tools slow
! open 2 anonymous
> {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
> {"jsonrpc":"2.0","method":"notifications/initialized"}
>2 {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
>2 {"jsonrpc":"2.0","method":"notifications/initialized"}
> {"jsonrpc":"2.0","id":"zeta","method":"tools/call","params":{"name":"slow"}}
> {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}
> {"jsonrpc":"2.0","id":"alpha","method":"tools/call","params":{"name":"slow"}}
> {"jsonrpc":"2.0","id":"m-3","method":"tools/call","params":{"name":"slow"}}
> {"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"slow"}}
> {"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"slow"}}
> {"jsonrpc":"2.0","id":-4,"method":"tools/call","params":{"name":"slow"}}
> {"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"slow"}}
>2 {"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"slow"}}
>2 {"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"slow"}}
>2 {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow"}}
>2 {"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"slow"}}
! close
! close-input 2
"#;

/// Tasks of several callers fighting over a full table (`max_tasks` 4): which ended task makes
/// room is chosen among callers tied on their counts, which a hash map holds; then a shutdown
/// with tasks still running. Only the inputs matter, as above.
const TASKS_UNDER_PRESSURE: &str = r#"! tools task_job
! max-tasks 6
! open 2 bob
! open 3 carol
! open 4 erin
> {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"task_job","arguments":{"n":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}
> {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task_job","arguments":{"n":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}
>2 {"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"task_job","arguments":{"n":3},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}
>2 {"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"task_job","arguments":{"n":4},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}
>3 {"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"task_job","arguments":{"n":5},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}
>3 {"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"task_job","arguments":{"n":6},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}
! complete #3 text "done"
! complete #4 text "done"
! complete #5 text "done"
! complete #6 text "done"
>4 {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"task_job","arguments":{"n":7},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}
>4 {"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"task_job","arguments":{"n":8},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}
> {"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"task_job","arguments":{"n":9},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}
! shutdown
! complete #1 text "late"
! complete #2 text "late"
! complete 7 text "late"
"#;

/// Every transcript's recorded output (what the engine emitted after each input, in transcript
/// syntax: exact frame bytes, `= cancel <id>`, `= close ...`, `= invoke ...`) and failures.
fn corpus_run(files: &[PathBuf]) -> Vec<(String, String)> {
    let mut sources: Vec<(String, String)> = files
        .iter()
        .map(|path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, source)
        })
        .collect();
    sources.push(("(inline) close-many-in-flight".to_owned(), CLOSE_MANY_IN_FLIGHT.to_owned()));
    sources.push(("(inline) tasks-under-pressure".to_owned(), TASKS_UNDER_PRESSURE.to_owned()));
    sources
        .into_iter()
        .map(|(name, source)| {
            let (report, recorded) = replay::record(&source);
            (name, format!("{recorded}\n-- failures --\n{report}"))
        })
        .collect()
}

#[test]
fn the_corpus_replays_identically_twice() {
    let files = replay::transcript_files();
    assert!(files.len() >= 25, "only {} transcripts found", files.len());
    let first = corpus_run(&files);
    let second = corpus_run(&files);
    let mut differ = Vec::new();
    for ((name, a), (_, b)) in first.iter().zip(&second) {
        if a == b {
            continue;
        }
        let at = a.bytes().zip(b.bytes()).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
        let line = a[..at].matches('\n').count() + 1;
        let show = |s: &str| s.lines().nth(line - 1).unwrap_or("(end)").to_owned();
        differ.push(format!(
            "── {name}: first difference at byte {at} (recorded line {line})\n  first:  {}\n  second: {}",
            show(a),
            show(b)
        ));
    }
    assert!(differ.is_empty(), "{} transcript(s) replayed differently:\n{}", differ.len(), differ.join("\n"));
    // The runs must exercise what this test guards: a close that cancels several calls.
    let many_cancels = first.iter().any(|(_, text)| {
        let lines: Vec<&str> = text.lines().collect();
        lines.windows(8).any(|w| w.iter().all(|l| l.starts_with("= cancel")))
    });
    assert!(many_cancels, "nothing cancels 8 calls in a row; the order check is vacuous");
    // And tasks: made, refused for room, and made in an ended task's place.
    let tasks =
        first.iter().find(|(name, _)| name.ends_with("tasks-under-pressure")).map(|(_, t)| t.as_str());
    let tasks = tasks.unwrap_or_default();
    for what in [r#""resultType":"task""#, "too many tasks"] {
        assert!(
            tasks.contains(what),
            "the tasks run records no {what:?}; the task check is vacuous:\n{tasks}"
        );
    }
    // And HTTP: session ids minted from the seed, SSE event ids, streams replaced and closed.
    let http = |what: &str| first.iter().any(|(name, text)| name.starts_with("http-") && text.contains(what));
    for what in ["Mcp-Session-Id: ", "<<3 | id: 0-1", "close replaced"] {
        assert!(http(what), "no http-* transcript records {what:?}; the HTTP replay is not covered");
    }
}
