//! Graceful shutdown on smol over real OS pipes: calls drain within the budget, the rest are
//! cancelled and answered with the shutdown refusal, and the session ends.

use std::time::Duration;

use mcp_smol::{Caller, StdioEnd};
use smol::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use smol::stream::StreamExt;

use mcp_smol as shim;

#[path = "../../tests/common/sleep_server.rs"]
mod sleep_server;
use sleep_server::{call, server, INIT};

#[test]
fn calls_drain_or_are_cancelled_and_the_session_ends() {
    smol::block_on(async {
        let server = server();
        let (server_in, to_server) = std::io::pipe().expect("pipe");
        let (from_server, server_out) = std::io::pipe().expect("pipe");
        let session = {
            let server = server.clone();
            smol::spawn(async move {
                let input = smol::Unblock::new(server_in);
                let output = smol::Unblock::new(server_out);
                mcp_smol::serve_lines(&server, Caller::anonymous(), input, output).await
            })
        };
        let mut client_write = smol::Unblock::new(to_server);
        let mut lines = BufReader::new(smol::Unblock::new(from_server)).lines();
        let requests = format!("{INIT}\n{}\n{}\n", call(1, 20), call(2, 60_000));
        client_write.write_all(requests.as_bytes()).await.expect("write");
        client_write.flush().await.expect("flush");
        let init = lines.next().await.expect("a line").expect("initialize reply");
        assert!(init.contains(r#""id":0"#), "{init}");
        while server.status().in_flight < 2 {
            smol::Timer::after(Duration::from_millis(5)).await;
        }
        let report = server.shutdown(Duration::from_millis(500)).await;
        assert_eq!(report.cancelled, 1, "the 60 s call cannot finish within the budget");
        let done = lines.next().await.expect("a line").expect("the short call's reply");
        assert!(done.contains(r#""id":1"#) && done.contains("slept 20"), "{done}");
        let cut = lines.next().await.expect("a line").expect("the long call's refusal");
        assert!(cut.contains(r#""id":2"#) && cut.contains(r#""reason":"shutting_down""#), "{cut}");
        assert_eq!(session.await.expect("session"), StdioEnd::Closed);
        assert!(server.status().shutting_down);
    });
}
