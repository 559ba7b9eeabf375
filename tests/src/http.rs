//! Streamable HTTP over real loopback sockets, the same on both runtimes: a server started on a
//! runtime of the test's choosing ([`serve`]) and a small blocking HTTP/1.1 client ([`Client`])
//! that can also misbehave (send half a head, a body that never ends, nothing at all).
//!
//! The client parses response heads with `httparse` and decodes `Content-Length` and chunked
//! bodies; it reads chunk by chunk so an SSE stream can be followed event by event. Every read
//! waits at most [`TIMEOUT`]: timing only ever turns a hang into a failure.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use mcp_proto::http::HttpConfig;
use mcp_proto::Limits;
use mcp_server::Server;
use serde_json::Value;

use crate::stdio_server::{build_with_limits, Options};

/// How long a read may wait before the test calls it a hang.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The shim a server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shim {
    /// `mcp_tokio::serve_http` on a multi-threaded tokio runtime.
    Tokio,
    /// `mcp_smol::serve_http` on smol's global executor.
    Smol,
}

/// Both shims, for tests that run every scenario on each.
pub const SHIMS: [Shim; 2] = [Shim::Tokio, Shim::Smol];

/// The replay test tools (see [`crate::stdio_server`]) on `shim`'s timer.
pub fn test_server(shim: Shim) -> Server {
    test_server_with(shim, Limits::default())
}

/// [`test_server`] with every bound and timeout taken from `limits`.
pub fn test_server_with(shim: Shim, limits: Limits) -> Server {
    let built = match shim {
        Shim::Tokio => build_with_limits(&Options::default(), limits, |d| Box::pin(tokio::time::sleep(d))),
        Shim::Smol => build_with_limits(&Options::default(), limits, |d| {
            Box::pin(async move {
                smol::Timer::after(d).await;
            })
        }),
    };
    built.unwrap_or_else(|e| panic!("the test tools are valid: {e}"))
}

/// A two-worker tokio runtime for a server thread of a test.
pub fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}

/// Serves `server` over HTTP on `shim` with the policy `opts`, on a loopback port of its own, from a thread that lives
/// as long as the test process. Returns the address once the listener is bound.
/// `server` is a [`Server`] or [`Shards`](mcp_server::Shards).
pub fn serve(shim: Shim, server: impl Into<mcp_server::Shards>, opts: HttpConfig) -> SocketAddr {
    serve_maybe_tls(shim, server.into(), opts, None)
}

/// [`serve`] over TLS with `tls` (`serve_https`).
pub fn serve_tls(shim: Shim, server: Server, opts: HttpConfig, tls: mcp_tokio::TlsConfig) -> SocketAddr {
    serve_maybe_tls(shim, server, opts, Some(tls))
}

fn serve_maybe_tls(
    shim: Shim,
    server: impl Into<mcp_server::Shards>,
    opts: HttpConfig,
    tls: Option<mcp_tokio::TlsConfig>,
) -> SocketAddr {
    let server: mcp_server::Shards = server.into();
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new().name(format!("http-{shim:?}"));
    let spawned = match shim {
        Shim::Tokio => thread.spawn(move || {
            let rt = tokio_runtime();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let _ = tx.send(listener.local_addr()?);
                match tls {
                    Some(tls) => mcp_tokio::serve_https(listener, server, opts, tls).await,
                    None => mcp_tokio::serve_http(listener, server, opts).await,
                }
            })
        }),
        Shim::Smol => thread.spawn(move || {
            smol::block_on(async move {
                let listener = smol::net::TcpListener::bind("127.0.0.1:0").await?;
                let _ = tx.send(listener.local_addr()?);
                match tls {
                    Some(tls) => mcp_smol::serve_https(listener, server, opts, tls).await,
                    None => mcp_smol::serve_http(listener, server, opts).await,
                }
            })
        }),
    };
    let _thread = spawned.unwrap_or_else(|e| panic!("server thread: {e}"));
    rx.recv_timeout(TIMEOUT).unwrap_or_else(|e| panic!("{shim:?}: the server did not bind: {e}"))
}

/// [`serve`] on the already bound `listener` (for a server that must know its address before
/// it is built, such as a cluster replica advertising its URL).
pub fn serve_on(shim: Shim, listener: std::net::TcpListener, server: Server, opts: HttpConfig) {
    listener.set_nonblocking(true).unwrap_or_else(|e| panic!("nonblocking: {e}"));
    let spawned = std::thread::Builder::new().name(format!("http-{shim:?}-on")).spawn(move || match shim {
        Shim::Tokio => {
            let rt = tokio_runtime();
            let _ = rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                mcp_tokio::serve_http(listener, server, opts).await
            });
        }
        Shim::Smol => {
            let _ = smol::block_on(async move {
                let listener = smol::net::TcpListener::try_from(listener)?;
                mcp_smol::serve_http(listener, server, opts).await
            });
        }
    });
    spawned.unwrap_or_else(|e| panic!("server thread: {e}"));
}

/// [`serve`], and also reports what `serve_http` returned: the receiver gets its result once it
/// returns (after [`Server::shutdown`] began). The runtime outlives that return, as an
/// application's would while it awaits the shutdown, so connections already accepted and
/// handlers still running carry on.
pub fn serve_watched(
    shim: Shim,
    server: Server,
    opts: HttpConfig,
) -> (SocketAddr, std::sync::mpsc::Receiver<io::Result<()>>) {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new().name(format!("http-{shim:?}-watched"));
    let spawned = match shim {
        Shim::Tokio => thread.spawn(move || {
            let rt = tokio_runtime();
            let served = rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let _ = addr_tx.send(listener.local_addr()?);
                mcp_tokio::serve_http(listener, server, opts).await
            });
            let _ = done_tx.send(served);
            // The worker threads keep serving the spawned connections and handlers while `rt`
            // lives: as long as the test process.
            loop {
                std::thread::park();
            }
        }),
        Shim::Smol => thread.spawn(move || {
            let served = smol::block_on(async move {
                let listener = smol::net::TcpListener::bind("127.0.0.1:0").await?;
                let _ = addr_tx.send(listener.local_addr()?);
                mcp_smol::serve_http(listener, server, opts).await
            });
            // smol's global executor keeps running the spawned tasks.
            let _ = done_tx.send(served);
        }),
    };
    let _thread = spawned.unwrap_or_else(|e| panic!("server thread: {e}"));
    let addr =
        addr_rx.recv_timeout(TIMEOUT).unwrap_or_else(|e| panic!("{shim:?}: the server did not bind: {e}"));
    (addr, done_rx)
}

/// Runs `fut` to completion on a runtime of `shim`'s kind, from a thread outside any runtime:
/// what a test calls the server's async API (such as [`Server::shutdown`]) with.
pub fn block_on<T>(shim: Shim, fut: impl std::future::Future<Output = T>) -> T {
    match shim {
        Shim::Tokio => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
            .block_on(fut),
        Shim::Smol => smol::block_on(fut),
    }
}

/// The JSON of an SSE event's `data` (its `data:` lines joined), or `None` for an event
/// without data (a comment) or with empty data (a priming event).
pub fn event_data(event: &str) -> Option<Value> {
    let data: Vec<&str> = event
        .lines()
        .filter_map(|l| l.strip_prefix("data:").map(|d| d.strip_prefix(' ').unwrap_or(d)))
        .collect();
    let data = data.join("\n");
    if data.is_empty() {
        return None;
    }
    serde_json::from_str(&data).ok()
}

/// A scenario's result: `Err` says what went wrong.
pub type Outcome = Result<(), String>;

/// Runs `scenario` on every shim and fails with every shim's failure.
pub fn each(scenario: impl Fn(Shim) -> Outcome) {
    let failures: Vec<String> =
        SHIMS.iter().filter_map(|&shim| scenario(shim).err().map(|e| format!("{shim:?}: {e}"))).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `Ok` when `ok` holds, else `what()`.
pub fn ensure(ok: bool, what: impl FnOnce() -> String) -> Outcome {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

/// Polls `probe` every 10 ms until it returns `Some`, for conditions the server reaches
/// asynchronously; fails after `within`.
pub fn poll_until<T>(
    what: &str,
    within: Duration,
    mut probe: impl FnMut() -> Result<Option<T>, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = probe()? {
            return Ok(found);
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {within:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A request to send, built up header by header.
#[derive(Debug, Clone)]
pub struct Req {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    content_length: bool,
}

impl Req {
    /// `METHOD path` with `Host: localhost` and nothing else.
    pub fn new(method: &str, path: &str) -> Self {
        Req {
            method: method.to_owned(),
            path: path.to_owned(),
            headers: vec![("Host".to_owned(), "localhost".to_owned())],
            body: Vec::new(),
            content_length: false,
        }
    }

    /// A JSON-RPC `POST` to `/mcp` as a well-behaved client sends it: JSON content type,
    /// `Accept` of both response kinds, and a `Content-Length`.
    pub fn post(body: impl Into<Vec<u8>>) -> Self {
        Req::new("POST", "/mcp")
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body)
    }

    /// Sends it to `path` (with any query) instead.
    pub fn path(mut self, path: &str) -> Self {
        self.path = path.to_owned();
        self
    }

    /// Adds a header (repeats allowed).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Removes every header called `name` (`Content-Length` included: then none is sent unless
    /// added back with [`header`](Self::header)).
    pub fn without(mut self, name: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        if name.eq_ignore_ascii_case("content-length") {
            self.content_length = false;
        }
        self
    }

    /// Sets the body and a matching `Content-Length`.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self.content_length = true;
        self
    }

    /// The request's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("{} {} HTTP/1.1\r\n", self.method, self.path).into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        if self.content_length {
            out.extend_from_slice(format!("Content-Length: {}\r\n", self.body.len()).as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }
}

/// A response head.
#[derive(Debug, Clone)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// Every header, names lower-cased.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Head {
    /// The first value of `name`, as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    fn chunked(&self) -> bool {
        self.header("transfer-encoding").is_some_and(|te| te.eq_ignore_ascii_case("chunked"))
    }
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status and headers.
    pub head: Head,
    /// The decoded body.
    pub body: Vec<u8>,
}

impl Response {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.head.status
    }

    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value, String> {
        serde_json::from_slice(&self.body)
            .map_err(|e| format!("body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// One client connection.
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Decoded SSE body bytes not yet returned as an event (see [`Client::event`]).
    sse: Vec<u8>,
}

impl Client {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> io::Result<Self> {
        Self::setup(TcpStream::connect_timeout(&addr, TIMEOUT)?)
    }

    /// Connects to `addr` from the local address `from` (any port): on Linux every address of
    /// 127/8 is loopback, so a test can play several clients that the server tells apart.
    pub fn connect_from(addr: SocketAddr, from: std::net::IpAddr) -> io::Result<Self> {
        let domain = socket2::Domain::for_address(addr);
        let socket = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
        socket.bind(&SocketAddr::new(from, 0).into())?;
        socket.connect_timeout(&addr.into(), TIMEOUT)?;
        Self::setup(socket.into())
    }

    fn setup(stream: TcpStream) -> io::Result<Self> {
        stream.set_read_timeout(Some(TIMEOUT))?;
        // A server that stops reading would otherwise leave a large write blocked for good.
        stream.set_write_timeout(Some(TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Client { stream, buf: Vec::new(), sse: Vec::new() })
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends `req` and reads the whole response.
    pub fn request(&mut self, req: &Req) -> Result<Response, String> {
        self.send(&req.to_bytes()).map_err(|e| format!("send: {e}"))?;
        self.response()
    }

    /// Reads a whole response (not an endless stream).
    pub fn response(&mut self) -> Result<Response, String> {
        let head = self.head()?;
        let body = self.body(&head)?;
        Ok(Response { head, body })
    }

    /// Reads the whole body that follows `head` (not an endless stream).
    pub fn body(&mut self, head: &Head) -> Result<Vec<u8>, String> {
        let body = if head.chunked() {
            let mut body = Vec::new();
            while let Some(chunk) = self.chunk()? {
                body.extend_from_slice(&chunk);
            }
            body
        } else {
            let len = head.header("content-length").map_or(Ok(0), str::parse::<usize>);
            let len = len.map_err(|e| format!("bad Content-Length: {e}"))?;
            self.fill(len)?;
            self.buf.drain(..len).collect()
        };
        Ok(body)
    }

    /// Reads a response head.
    pub fn head(&mut self) -> Result<Head, String> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(&self.buf).map_err(|e| format!("bad response head: {e}"))? {
                httparse::Status::Complete(len) => {
                    let head = Head {
                        status: parsed.code.unwrap_or_default(),
                        headers: parsed
                            .headers
                            .iter()
                            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
                            .collect(),
                    };
                    self.buf.drain(..len);
                    return Ok(head);
                }
                httparse::Status::Partial => {
                    if self.read_more()? == 0 {
                        return Err(format!(
                            "connection closed before a response head (had {:?})",
                            String::from_utf8_lossy(&self.buf)
                        ));
                    }
                }
            }
        }
    }

    /// The next chunk of a chunked body, or `None` at its end.
    pub fn chunk(&mut self) -> Result<Option<Vec<u8>>, String> {
        let line = self.line()?;
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16).map_err(|e| format!("bad chunk size {line:?}: {e}"))?;
        if size == 0 {
            // Trailers, if any, end with an empty line.
            while !self.line()?.is_empty() {}
            return Ok(None);
        }
        self.fill(size + 2)?;
        let chunk: Vec<u8> = self.buf.drain(..size).collect();
        self.buf.drain(..2);
        Ok(Some(chunk))
    }

    /// The next event of an SSE response body whose head was read: its lines (a comment such as
    /// `: keep-alive` counts as an event), without the blank line that ends it. `None` once the
    /// body has ended.
    pub fn event(&mut self) -> Result<Option<String>, String> {
        loop {
            if let Some(end) = self.sse.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.sse.drain(..end + 2).take(end).collect();
                return String::from_utf8(event).map(Some).map_err(|e| format!("event is not text: {e}"));
            }
            match self.chunk()? {
                Some(chunk) => self.sse.extend_from_slice(&chunk),
                None if self.sse.is_empty() => return Ok(None),
                None => {
                    return Err(format!(
                        "the stream ended in the middle of an event: {:?}",
                        String::from_utf8_lossy(&self.sse)
                    ))
                }
            }
        }
    }

    /// Whether the server closed the connection (end of file or reset) before `within`; `false`
    /// if it is still open then, or sent bytes instead.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut scratch = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stream.set_read_timeout(Some(left)).is_err() {
                return false;
            }
            match self.stream.read(&mut scratch) {
                Ok(0) => return true,
                Ok(n) => self.buf.extend_from_slice(scratch.get(..n).unwrap_or_default()),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return false
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
    }

    /// `Ok` when the server closes the connection cleanly (end of file, no bytes before it)
    /// within `within`; otherwise what happened instead: a reset, bytes, or nothing.
    pub fn clean_close_within(&mut self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        let mut scratch = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("still open after {within:?}"));
            }
            self.stream.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
            match self.stream.read(&mut scratch) {
                Ok(0) => return Ok(()),
                Ok(n) => return Err(format!("{n} more bytes instead of the end")),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("no clean close: {e}")),
            }
        }
    }

    /// Bytes read but not consumed yet.
    pub fn unread(&self) -> &[u8] {
        &self.buf
    }

    fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..end + 2).take(end).collect();
                return String::from_utf8(line).map_err(|e| format!("line is not text: {e}"));
            }
            if self.read_more()? == 0 {
                return Err("connection closed in the middle of a chunked body".to_owned());
            }
        }
    }

    fn fill(&mut self, len: usize) -> Result<(), String> {
        while self.buf.len() < len {
            if self.read_more()? == 0 {
                return Err(format!("connection closed with {} of {len} body bytes", self.buf.len()));
            }
        }
        Ok(())
    }

    fn read_more(&mut self) -> Result<usize, String> {
        let _ = self.stream.set_read_timeout(Some(TIMEOUT));
        let mut scratch = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut scratch) {
                Ok(n) => {
                    self.buf.extend_from_slice(scratch.get(..n).unwrap_or_default());
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(format!("no response within {TIMEOUT:?}"))
                }
                // A reset reads as the end of the connection.
                Err(_) => return Ok(0),
            }
        }
    }
}

/// A stateless 2026-07-28 `POST` of `method` with `params` (its `_meta` filled in with the
/// version and no client capabilities) and the headers that version requires (`Mcp-Name` from
/// `params.name`, when there is one).
pub fn modern(id: u64, method: &str, mut params: Value) -> Req {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let name = params["name"].as_str().map(str::to_owned);
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let req =
        Req::post(body.to_string()).header("MCP-Protocol-Version", "2026-07-28").header("Mcp-Method", method);
    match name {
        Some(name) => req.header("Mcp-Name", &name),
        None => req,
    }
}
