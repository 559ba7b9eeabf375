//! A line (stdio) session served in-process by either shim's `serve_lines`, for tests of what a
//! stdio session does without spawning a binary.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use mcp_proto::Caller;
use mcp_server::{Server, StdioEnd};
use serde_json::Value;

use crate::http::{ensure, Outcome, Shim, TIMEOUT};

/// The client's end of a line session served in-process by `shim`'s `serve_lines` over a Unix
/// socket pair; the receiver gets how the session ended.
pub struct Lines {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    ended: std::sync::mpsc::Receiver<std::io::Result<StdioEnd>>,
}

impl Lines {
    /// Serves `server` on a new line session, on a thread of its own running `shim`.
    pub fn serve(shim: Shim, server: Server) -> Result<Self, String> {
        let (ours, theirs) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        ours.set_read_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
        theirs.set_nonblocking(true).map_err(|e| e.to_string())?;
        let (tx, ended) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new().name(format!("lines-{shim:?}"));
        let spawned = match shim {
            Shim::Tokio => thread.spawn(move || {
                let rt = crate::http::tokio_runtime();
                let end = rt.block_on(async move {
                    let stream = tokio::net::UnixStream::from_std(theirs)?;
                    let (input, output) = tokio::io::split(stream);
                    mcp_tokio::serve_lines(&server, Caller::anonymous(), input, output).await
                });
                let _ = tx.send(end);
            }),
            Shim::Smol => thread.spawn(move || {
                let end = smol::block_on(async move {
                    let stream = smol::Async::new(theirs)?;
                    let (input, output) = smol::io::split(stream);
                    mcp_smol::serve_lines(&server, Caller::anonymous(), input, output).await
                });
                let _ = tx.send(end);
            }),
        };
        spawned.map_err(|e| format!("server thread: {e}"))?;
        let writer = ours.try_clone().map_err(|e| e.to_string())?;
        Ok(Lines { reader: BufReader::new(ours), writer, ended })
    }

    /// Sends one frame as a line.
    pub fn send(&mut self, frame: &str) -> Outcome {
        self.writer.write_all(format!("{frame}\n").as_bytes()).map_err(|e| format!("send: {e}"))
    }

    /// The next line, as JSON; `what` names it in errors.
    pub fn next(&mut self, what: &str) -> Result<Value, String> {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(|e| format!("{what}: read: {e}"))?;
        ensure(n > 0, || format!("{what}: the session closed its output"))?;
        serde_json::from_str(&line).map_err(|e| format!("{what}: not JSON ({e}): {line:?}"))
    }

    /// Ends input and checks the session ended cleanly.
    pub fn finish(self) -> Outcome {
        self.writer.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
        let end = self.ended.recv_timeout(TIMEOUT).map_err(|e| format!("the session did not end: {e}"))?;
        ensure(matches!(end, Ok(StdioEnd::EndOfInput)), || format!("the session ended with {end:?}"))
    }
}
