//! A body over the bound is answered 413, and the client sees that answer even when it writes
//! its whole body before reading anything (as Python's `http.client`, curl without
//! `Expect: 100-continue`, and most simple clients do). A server that answers and closes while
//! part of the body is still unread makes the kernel reset the connection, and the client gets
//! a broken pipe or a reset instead of its 413; the server therefore reads and discards the rest
//! of a refused body (within a bound) before it closes. On both runtimes, over real sockets.

use std::time::Duration;

use mcp_proto::http::HttpConfig;
use mcp_tests::http::{each, ensure, serve, test_server, Client, Outcome, Shim, TIMEOUT};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;

const MIB: usize = 1024 * 1024;

/// A POST head for `/mcp` with the headers the endpoint requires, and `framing` saying how the
/// body is delimited.
fn head(addr: std::net::SocketAddr, framing: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{framing}\r\n\r\n"
    )
}

/// A JSON-RPC request padded with spaces (valid JSON) to `len` bytes.
fn padded(len: usize) -> Vec<u8> {
    let mut body = INITIALIZE.as_bytes().to_vec();
    body.resize(len.max(body.len()), b' ');
    body
}

/// Writes `request` whole, in pieces of `piece` bytes `pause` apart (a client that writes
/// more slowly than a socket buffer fills, as an interpreter's does), then reads the response:
/// it must be a 413 that closes the connection cleanly, and no write may have failed.
fn refused_after_writing_it_all(
    addr: std::net::SocketAddr,
    what: &str,
    request: &[u8],
    piece: usize,
    pause: Duration,
) -> Outcome {
    let mut client = Client::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let mut written = Ok(());
    for part in request.chunks(piece) {
        written = client.send(part);
        if written.is_err() {
            break;
        }
        std::thread::sleep(pause);
    }
    let resp = client.response().map_err(|e| {
        let w = written.as_ref().err().map_or_else(String::new, |w| format!(" (writing it failed: {w})"));
        format!("{what}: no response after writing {} bytes{w}: {e}", request.len())
    })?;
    ensure(resp.status() == 413, || format!("{what}: status {} instead of 413", resp.status()))?;
    ensure(written.is_ok(), || format!("{what}: the 413 arrived, but writing the body failed: {written:?}"))?;
    ensure(resp.header("connection") == Some("close"), || format!("{what}: the 413 does not close"))?;
    // Closed with nothing unread: a reset here would have destroyed the 413 in a client that
    // had not read it yet.
    client.clean_close_within(TIMEOUT).map_err(|e| format!("{what}: after the 413: {e}"))
}

/// A declared length over the bound: refused from the head alone.
fn declared(shim: Shim, len: usize, piece: usize, pause: Duration) -> Outcome {
    let addr = serve(shim, test_server(shim), HttpConfig::default());
    let mut request = head(addr, &format!("Content-Length: {len}")).into_bytes();
    request.extend_from_slice(&padded(len));
    let what = format!("Content-Length {len} in pieces of {piece} bytes {pause:?} apart");
    refused_after_writing_it_all(addr, &what, &request, piece, pause)
}

/// Chunked (no declared length): the bound is found while reading.
fn chunked(shim: Shim, len: usize) -> Outcome {
    let addr = serve(shim, test_server(shim), HttpConfig::default());
    let mut request = head(addr, "Transfer-Encoding: chunked").into_bytes();
    for chunk in padded(len).chunks(64 * 1024) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    refused_after_writing_it_all(
        addr,
        &format!("chunked {len} bytes"),
        &request,
        64 * 1024,
        Duration::from_millis(1),
    )
}

#[test]
fn declared_3_mib_body_gets_its_413() {
    each(|shim| declared(shim, 3 * MIB, 64 * 1024, Duration::from_millis(1)));
}

#[test]
fn declared_8_mib_body_written_at_once_gets_its_413() {
    each(|shim| declared(shim, 8 * MIB, 8 * MIB, Duration::ZERO));
}

#[test]
fn chunked_3_mib_body_gets_its_413() {
    each(|shim| chunked(shim, 3 * MIB));
}
