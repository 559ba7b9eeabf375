//! The replay transcripts through real stdio pipes, on both runtimes: every transcript that only
//! uses what a real process can honour (frames in, exact frames out, automatic completion,
//! `! tools`) is replayed against the `stdio-tokio` and `stdio-smol` binaries; the selection
//! rules are [`mcp_tests::pipe::script`]'s, and each run prints what it ran and what it skipped.

use mcp_tests::pipe;

const TOKIO: &str = env!("CARGO_BIN_EXE_stdio-tokio");
const SMOL: &str = env!("CARGO_BIN_EXE_stdio-smol");

/// Fewer selected transcripts than this means the selection rules (or the transcripts) drifted.
const AT_LEAST: usize = 30;

fn transcripts() -> Vec<(String, String)> {
    mcp_tests::replay::transcript_files()
        .into_iter()
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let source = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, source)
        })
        .collect()
}

fn replay_all(program: &str, runtime: &str) {
    replay_all_with(program, &[], runtime);
}

fn replay_all_with(program: &str, options: &[&str], runtime: &str) {
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    let mut failed = Vec::new();
    for (name, source) in transcripts() {
        match pipe::script(&source) {
            Err(why) => skipped.push(format!("{name} ({why})")),
            Ok(script) => {
                if let Err(e) = pipe::replay_with(program, options, &script) {
                    failed.push(format!("── {name}\n{e}"));
                }
                ran.push(name);
            }
        }
    }
    println!("{runtime}: {} transcript(s) replayed over stdio pipes, {} skipped", ran.len(), skipped.len());
    println!("{runtime}: replayed: {}", ran.join(", "));
    for s in &skipped {
        println!("{runtime}: skipped {s}");
    }
    assert!(
        failed.is_empty(),
        "{runtime}: {} of {} transcripts failed:\n{}",
        failed.len(),
        ran.len(),
        failed.join("\n")
    );
    assert!(
        ran.len() >= AT_LEAST,
        "{runtime}: only {} transcripts selected (expected at least {AT_LEAST})",
        ran.len()
    );
}

#[test]
fn transcripts_over_tokio_stdio() {
    replay_all(TOKIO, "tokio");
}

#[test]
fn transcripts_over_smol_stdio() {
    replay_all(SMOL, "smol");
}

// The same, with every handler spawned as a task (it yields once) instead of answered inline.

#[test]
fn transcripts_over_tokio_stdio_spawned_handlers() {
    replay_all_with(TOKIO, &["--yield"], "tokio --yield");
}

#[test]
fn transcripts_over_smol_stdio_spawned_handlers() {
    replay_all_with(SMOL, &["--yield"], "smol --yield");
}

#[test]
fn selection_rules() {
    let ok =
        pipe::script("! auto\n! tools echo\n> {\"a\":1}\n< {\"b\":2}\n").expect("a pipe can replay this");
    assert_eq!(ok.tools, Some(vec!["echo".to_owned()]));
    assert_eq!(ok.steps.len(), 2);
    for (text, why) in [
        ("> x\n= invoke tools/call slow 1\n", "engine-only expectation `= invoke`"),
        ("@ +1s\n", "clock step"),
        ("! complete 1 auto\n", "manual completion"),
        ("! max-frame-bytes 10\n", "configuration `! max-frame-bytes`"),
        ("! close-input\n", "engine close"),
        ("! known-bug x\n", "known engine bug"),
        ("> {{repeat 2 \"\\n\"}}\n", "cannot carry"),
    ] {
        let err = pipe::script(text).expect_err(text);
        assert!(err.contains(why), "{text:?}: {err}");
    }
}
