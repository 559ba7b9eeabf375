//! Every duration the server layer takes is safe at its extremes: `Duration::MAX` means "no
//! deadline", never an `Instant` overflow (which panics). On both runtimes.

use std::time::Duration;

use futures_util::io::Cursor;
use mcp_proto::Caller;
use mcp_server::{Runtime, Server, StdioEnd};

const PING: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";

fn server() -> Server {
    let mut builder = Server::builder("durations", "1");
    builder.config_mut().limits.drain_timeout(Duration::MAX);
    builder.build().unwrap_or_else(|e| panic!("build: {e}"))
}

/// One ping then end of input, drained with `Duration::MAX`, then a shutdown with the same budget.
async fn scenario<R: Runtime + Clone>(rt: R) {
    let server = server();
    let mut written = Vec::new();
    let end = mcp_server::serve_lines(
        &server,
        rt,
        Caller::anonymous(),
        Cursor::new(PING),
        Cursor::new(&mut written),
    )
    .await
    .unwrap_or_else(|e| panic!("serve_lines: {e}"));
    assert_eq!(end, StdioEnd::EndOfInput);
    assert_eq!(String::from_utf8_lossy(&written), "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    assert_eq!(server.shutdown(Duration::MAX).await.cancelled, 0);
}

#[test]
fn tokio_duration_max_drain_and_shutdown() {
    let rt = mcp_tests::http::tokio_runtime();
    rt.block_on(async { scenario(mcp_tokio::TokioRuntime::current()).await });
}

#[test]
fn smol_duration_max_drain_and_shutdown() {
    smol::block_on(scenario(mcp_smol::SmolRuntime));
}
