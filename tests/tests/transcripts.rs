//! Every transcript in `tests/transcripts/` as its own test, named after its file: run one with
//! `cargo test -p mcp-tests --test transcripts -- ping`, list them with `-- --list`.
//!
//! A transcript marked `! known-bug` documents an engine bug: it is expected to fail and is
//! reported as ignored (with the failure printed); once it passes, the test fails until the
//! marker goes. See `tests/README.md` for the format and how to record one.

use std::path::Path;

use libtest_mimic::{Arguments, Failed, Trial};
use mcp_tests::replay;

fn run(path: &Path) -> Result<(), Failed> {
    let source = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let report = replay::run(&source);
    match (&report.known_bug, report.passed()) {
        (None, true) => Ok(()),
        (None, false) => Err(report.to_string().into()),
        (Some(bug), false) => {
            eprintln!("known engine bug ({bug}):\n{report}");
            Ok(())
        }
        (Some(bug), true) => {
            Err(format!("passes but is marked `! known-bug {bug}`: the bug is fixed, remove the marker")
                .into())
        }
    }
}

fn main() {
    let args = Arguments::from_args();
    let files = replay::transcript_files();
    assert!(files.len() >= 25, "only {} transcripts found", files.len());
    let trials = files
        .into_iter()
        .map(|path| {
            let name = path.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            Trial::test(name, move || run(&path))
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
