//! Graceful shutdown over an in-memory pipe: admission stops, calls drain within the budget,
//! the rest are cancelled, and the session ends.

use std::time::Duration;

use mcp_tokio::{Caller, Server, StdioEnd};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use mcp_tokio as shim;

#[path = "../../tests/common/sleep_server.rs"]
mod sleep_server;
use sleep_server::{call, server, INIT};

type Lines = tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>;
type Session = tokio::task::JoinHandle<std::io::Result<StdioEnd>>;

/// One session over an in-memory pipe: the client's reply lines, its writer, the session task.
fn serve(server: &Server) -> (Lines, tokio::io::WriteHalf<tokio::io::DuplexStream>, Session) {
    let (client, server_side) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_side);
    let (client_read, client_write) = tokio::io::split(client);
    let server = server.clone();
    let session = tokio::spawn(async move {
        mcp_tokio::serve_lines(&server, Caller::anonymous(), server_read, server_write).await
    });
    (BufReader::new(client_read).lines(), client_write, session)
}

#[tokio::test]
async fn calls_drain_or_are_cancelled_and_admission_stops() {
    let server = server();
    let (mut lines, mut client_write, session) = serve(&server);
    client_write
        .write_all(format!("{INIT}\n{}\n{}\n", call(1, 20), call(2, 60_000)).as_bytes())
        .await
        .unwrap();
    let init = lines.next_line().await.unwrap().expect("initialize reply");
    assert!(init.contains(r#""id":0"#), "{init}");
    // Wait until both calls are running.
    while server.status().in_flight < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let report = server.shutdown(Duration::from_millis(500)).await;
    assert_eq!(report.cancelled, 1, "the 60 s call cannot finish within the budget");

    // The short call finished within the budget; the long one was cancelled and answered with
    // the shutdown refusal.
    let mut rest = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        rest.push(line);
    }
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert!(rest[0].contains(r#""id":1"#) && rest[0].contains("slept 20"), "{rest:?}");
    assert!(rest[1].contains(r#""id":2"#) && rest[1].contains(r#""reason":"shutting_down""#), "{rest:?}");
    let end = session.await.unwrap().unwrap();
    assert_eq!(end, StdioEnd::Closed);
    assert!(server.status().shutting_down);
}

#[tokio::test]
async fn requests_after_shutdown_are_refused() {
    let server = server();
    let (mut lines, mut client_write, session) = serve(&server);
    client_write.write_all(format!("{INIT}\n{}\n", call(1, 300)).as_bytes()).await.unwrap();
    lines.next_line().await.unwrap().expect("initialize reply");
    while server.status().in_flight < 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let shutdown = {
        let server = server.clone();
        tokio::spawn(async move { server.shutdown(Duration::from_secs(30)).await })
    };
    while !server.status().shutting_down {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    client_write.write_all(format!("{}\n", call(2, 0)).as_bytes()).await.unwrap();
    let refused = lines.next_line().await.unwrap().expect("a refusal");
    assert_eq!(
        refused,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"server is shutting down","data":{"reason":"shutting_down"}}}"#
    );
    let done = lines.next_line().await.unwrap().expect("the call in flight drains");
    assert!(done.contains(r#""id":1"#), "{done}");
    assert_eq!(shutdown.await.unwrap().cancelled, 0);
    assert_eq!(session.await.unwrap().unwrap(), StdioEnd::Closed);
}
