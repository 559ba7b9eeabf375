//! A read that holds many pipelined requests is answered as its frames are served, not once all
//! of them were admitted: the first answers are written while later frames are still waiting in
//! the read buffer, so a pipelining client can work on them meanwhile. Checked on both runtimes
//! with in-memory streams, by counting the writes the session made and where the first one
//! stood. The order of tasks on a single-threaded executor is deterministic, so no clock is
//! involved.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_util::io::{AsyncWrite, Cursor};
use mcp_proto::Caller;
use mcp_server::{Runtime, StdioEnd};
use serde_json::{json, Value};

const CALLS: usize = 40;

/// What the session wrote, one entry per flush.
#[derive(Clone, Default)]
struct Flushes(Arc<Mutex<Written>>);

/// Bytes written since the last flush, then what each flush carried.
type Written = (Vec<u8>, Vec<Vec<u8>>);

impl AsyncWrite for Flushes {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        inner.0.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let pending = std::mem::take(&mut inner.0);
        if !pending.is_empty() {
            inner.1.push(pending);
        }
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

async fn scenario<R: Runtime + Clone>(rt: R) {
    let mut input = String::new();
    input.push_str(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#);
    input.push('\n');
    input.push_str(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    input.push('\n');
    for id in 0..CALLS {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": format!("t{id}")}}});
        input.push_str(&format!("{call}\n"));
    }
    // Under the reader's 64 KiB read, so the whole input arrives in one read.
    assert!(input.len() < 64 * 1024, "the input must fit one read ({} bytes)", input.len());
    let server = mcp_tests::echo_server("pipelining", mcp_proto::Limits::default());
    let out = Flushes::default();
    let end = mcp_server::serve_lines(
        &server,
        rt,
        Caller::anonymous(),
        Cursor::new(input.into_bytes()),
        out.clone(),
    )
    .await;
    assert_eq!(end.unwrap_or_else(|e| panic!("serve_lines: {e}")), StdioEnd::EndOfInput);

    let flushes = std::mem::take(&mut out.0.lock().unwrap_or_else(|e| e.into_inner()).1);
    let lines: Vec<Value> = flushes
        .iter()
        .flat_map(|f| f.split(|b| *b == b'\n').filter(|l| !l.is_empty()))
        .map(|l| serde_json::from_slice(l).unwrap_or_else(|e| panic!("not JSON: {e}")))
        .collect();
    // Every call answered once, with its own text.
    let mut answered: Vec<u64> = lines.iter().filter_map(|l| l["id"].as_u64()).collect();
    answered.sort_unstable();
    assert_eq!(answered, (0..CALLS as u64).collect::<Vec<_>>(), "{lines:?}");
    for l in &lines {
        if let Some(id) = l["id"].as_u64() {
            assert_eq!(l["result"]["content"][0]["text"], format!("t{id}"), "{l}");
        }
    }
    // Answered as served: the first answers went out in a write of their own, long before the
    // last frame of the read was admitted, and the answers took many writes. Admitting the
    // whole read first puts all of them in one or two writes.
    let first_calls = flushes
        .iter()
        .find(|f| f.windows(7).any(|w| w == br#""id":0,"#))
        .map(|f| f.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count());
    assert!(first_calls.is_some_and(|n| n <= 4), "the first answer came in a write of {first_calls:?} lines");
    assert!(flushes.len() >= CALLS / 4, "{} answers took only {} writes", CALLS, flushes.len());
    assert_eq!(server.shutdown(std::time::Duration::ZERO).await.cancelled, 0);
}

#[test]
fn tokio_answers_a_pipelined_read_as_it_is_served() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
    rt.block_on(async { scenario(mcp_tokio::TokioRuntime::current()).await });
}

#[test]
fn smol_answers_a_pipelined_read_as_it_is_served() {
    // On the global executor, where the handlers run too: its one thread makes the order of
    // tasks as deterministic as tokio's current-thread runtime.
    smol::block_on(smol::spawn(scenario(mcp_smol::SmolRuntime)));
}
