//! The demo servers' binaries (`mcp-tokio`'s `everything` and `mcp-smol`'s `everything-smol`),
//! for tests that drive the examples themselves as a user would run them.
//!
//! Cargo builds example binaries for `cargo test --workspace` (the README's command, and CI's),
//! next to the test binaries; a run limited to this crate does not, and such tests then have
//! nothing to start (build them with
//! `cargo build -p mcp-tokio --example everything -p mcp-smol --example everything-smol`).

use std::path::PathBuf;

/// Both demo servers: tokio's, then smol's.
pub const EVERYTHING: [&str; 2] = ["everything", "everything-smol"];

/// `target/<profile>/examples/<name>`, from this test binary's `target/<profile>/deps/`, or
/// `None` (with a note on stderr) when it was not built.
pub fn example(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile = exe.parent().and_then(|deps| deps.parent())?;
    let path = profile.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: {} is not built (run `cargo test --workspace`)", path.display());
        None
    }
}
