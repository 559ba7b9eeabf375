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

/// A demo server serving HTTP on a loopback port of its own, killed when dropped.
pub struct HttpExample {
    /// The server process.
    pub child: std::process::Child,
    /// Where it listens (`/mcp` on this address).
    pub addr: std::net::SocketAddr,
}

impl Drop for HttpExample {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts example `name` with `--http 127.0.0.1:0` and reads the address from its first stderr
/// line (`listening on http://HOST:PORT/mcp`, the line scripts and CI parse). `Ok(None)` when the
/// binary was not built; the rest of stderr is drained so the server never blocks on it.
pub fn serve_http_example(name: &str) -> Result<Option<HttpExample>, String> {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let Some(path) = example(name) else { return Ok(None) };
    let mut child = Command::new(&path)
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    // Owned from here, so an early return below still kills it.
    let mut served = HttpExample { child, addr: std::net::SocketAddr::from(([127, 0, 0, 1], 0)) };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stderr).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = tx.send(line);
        }
        for _ in lines {}
    });
    let line =
        rx.recv_timeout(crate::http::TIMEOUT).map_err(|e| format!("{name}: no line on stderr: {e}"))?;
    served.addr = line
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .and_then(|addr| addr.parse().ok())
        .ok_or_else(|| format!("{name}: unexpected first line {line:?}"))?;
    Ok(Some(served))
}
