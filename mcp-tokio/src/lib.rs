//! Serve an MCP server on tokio.
//!
//! The protocol lives in [`mcp_proto`]; the handler API and the drivers live in the runtime-independent
//! [`mcp_server`] layer. This crate only supplies tokio: the task spawner, the timer, the
//! clock, the standard streams and TCP sockets. `mcp-smol` is its mirror image.
//!
//! Serve stdio with [`serve_stdio`], Streamable HTTP with `serve_http`, or mount the HTTP
//! endpoint in an axum (or any tower/hyper) application with `McpService`. Stop gracefully on
//! SIGINT or SIGTERM with [`shutdown_on_signal`].
//! Test a server in memory, with no socket and no clock, through [`testing`]'s client under
//! `#[tokio::test]`.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use mcp_tokio::{Server, ToolOutput};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Echo { text: String }
//!
//! let server = Server::builder("demo", "1.0.0")
//!     .typed_tool("echo", "Echoes its text", |args: Echo, _call| async move { ToolOutput::text(args.text) })
//!     .build()
//!     .expect("valid tools");
//! mcp_tokio::serve_stdio(&server).await?;
//! # Ok(()) }
//! ```
//!
//! # Features
//!
//! - `http` (on by default): Streamable HTTP, that is `serve_http`, `McpService` and
//!   `HttpService`, over hyper. A stdio-only server turns it off with `default-features = false`
//!   and compiles none of hyper, http, http-body or tower-service.
//! - `axum` (on by default, implies `http`): `McpService` reads the client address from
//!   axum's `ConnectInfo<SocketAddr>`.
//! - `validation` (off by default): arguments and outputs checked against their JSON Schemas
//!   with `jsonschema` and its regex engines, which more than double a small server's first
//!   build and its binary. Without it typed tools are still checked by serde; see
//!   `mcp_proto::schema` for exactly what is and is not checked.
//! - `exact-json` (off by default): every number reaches handlers (and comes back) exactly as
//!   sent, and objects keep their keys in the order sent. It turns on serde_json's
//!   `arbitrary_precision` and `preserve_order`, which Cargo turns on for every crate of the
//!   binary: the project's own `#[serde(untagged)]` enums then no longer read numbers, and its
//!   maps stop sorting their keys. Without it a number an `i64`, `u64` or `f64` would not carry
//!   exactly is refused (invalid params, naming it), never rounded.
//!
//! - `macros` (off by default): `#[mcp_tokio::tool]` makes a tool of an async fn and
//!   `#[mcp_tokio::tools]` tools of an impl block's methods, expanding to the builder's calls (see
//!   [`ServerBuilder::register`]). The generated code names everything through this crate, so
//!   a project needs no dependency on `mcp-server`, `serde` or `schemars` for it.
//!
//! # Re-exports
//!
//! [`serde`], [`serde_json`] and [`schemars`] are the versions this crate is built with, so a
//! project needs no dependency of its own on them; derive through them by naming the path:
//! `#[serde(crate = "mcp_tokio::serde")]` and
//! `#[schemars(crate = "mcp_tokio::schemars")]` (see mcp-tokio's `examples/hello.rs`).
#![forbid(unsafe_code)]

use std::io;
#[cfg(feature = "http")]
use std::net::SocketAddr;
use std::time::{Duration, Instant};

// The names both shims re-export, from one list (`mcp_server::__shim`), so that they stay the same.
pub use mcp_server;
pub use mcp_server::__shim::*;

/// Makes a tool of an async fn (feature `macros`): `#[mcp_tokio::tool]`, naming everything it
/// generates through this crate. See [`ServerBuilder::register`] and the `mcp-macros` crate.
#[cfg(feature = "macros")]
pub use mcp_server::__macros::tool_tokio as tool;
/// Makes tools of the methods of an impl block marked `#[tool]` (feature `macros`):
/// `#[mcp_tokio::tools]`. See [`ServerBuilder::register`] and the `mcp-macros` crate.
#[cfg(feature = "macros")]
pub use mcp_server::__macros::tools_tokio as tools;
// The path the code `#[tool]` generates names its items by (`::mcp_tokio::__macros::...`).
#[cfg(feature = "macros")]
#[doc(hidden)]
pub use mcp_server::__macros;

#[cfg(feature = "http")]
use hyper_util::rt::{TokioIo, TokioTimer};
#[cfg(feature = "http")]
use mcp_server::{HttpRuntime, Listener};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The tokio [`Runtime`]: spawns on the current runtime and uses tokio's clock, so tests with
/// paused time stay deterministic.
#[derive(Debug, Clone)]
pub struct TokioRuntime {
    handle: tokio::runtime::Handle,
}

impl TokioRuntime {
    /// The runtime this is called from.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn current() -> Self {
        Self { handle: tokio::runtime::Handle::current() }
    }
}

impl Runtime for TokioRuntime {
    fn spawn(&self, fut: BoxFuture<()>) {
        self.handle.spawn(fut);
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        // Made inside the runtime, the timer belongs to its driver, so the sleep may be awaited
        // from any executor (a shutdown awaited under `smol::block_on`, say).
        let _inside = self.handle.enter();
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    /// `tokio::task::yield_now`: the caller is woken only once the runtime ran out of ready
    /// tasks, so the tasks the ones already queued wake (a handler waking the writer) run first.
    fn yield_now(&self) -> BoxFuture<()> {
        Box::pin(tokio::task::yield_now())
    }

    /// A tokio `TcpStream` (resolving `host` with tokio's resolver), `TCP_NODELAY` set, in
    /// hyper's I/O traits. Connected on the runtime itself, so it may be awaited from any
    /// executor.
    #[cfg(feature = "http")]
    fn connect(&self, host: String, port: u16) -> BoxFuture<io::Result<mcp_server::BoxIo>> {
        let task = self.handle.spawn(async move {
            let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            // Forwarded SSE events must leave at once, as on accepted connections.
            let _ = stream.set_nodelay(true);
            Ok::<mcp_server::BoxIo, io::Error>(Box::new(TokioIo::new(stream)))
        });
        Box::pin(async move { task.await.map_err(io::Error::other)? })
    }

    /// On tokio's blocking pool (`spawn_blocking`, at most 512 threads by default).
    fn spawn_blocking(&self, f: Box<dyn FnOnce() + Send + 'static>) -> BoxFuture<()> {
        let task = self.handle.spawn_blocking(f);
        Box::pin(async move {
            // A panic is reported through the caller's own channel; the join error adds nothing.
            let _ = task.await;
        })
    }
}

/// Serves one session on stdin/stdout until stdin ends, for an anonymous caller. Only protocol
/// bytes go to stdout.
pub async fn serve_stdio(server: &Server) -> io::Result<StdioEnd> {
    serve_stdio_as(server, Caller::anonymous()).await
}

/// [`serve_stdio`] for a given caller: whoever launched the process decides who it is (for
/// example from a command-line flag), and the server's gates see that caller.
///
/// When stdin or stdout is a pipe (as when an MCP client launches the server), it is read or
/// written through the runtime's reactor, in non-blocking mode for the session (blocking mode
/// is restored after it): a line costs no hand-off to another thread. Anything else (a
/// terminal, a file) is read or written on a thread of its own.
///
/// The session runs as a task of its own on the current runtime (aborted if this future is
/// dropped): a handler's answer then wakes a task, which tokio runs at once, rather than the
/// future its `block_on` polls, which it polls only after a look at the reactor, one
/// `epoll_wait` more per request on a quiet session.
pub async fn serve_stdio_as(server: &Server, caller: Caller) -> io::Result<StdioEnd> {
    let (stdin, stdout, writer) = stdio_ends()?;
    let session = {
        let server = server.clone();
        AbortOnDrop(tokio::spawn(async move { serve_lines(&server, caller, stdin, stdout).await }))
    };
    let end = match (&mut *std::pin::pin!(session)).await {
        Ok(end) => end,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(io::Error::other(e)),
    };
    // The output is dropped with the session; wait until the thread has written all of it, so
    // a process that exits next loses no reply. (A pipe's writes are in the kernel already.)
    if let Some(writer) = writer {
        let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    }
    end
}

/// A task that is aborted when its handle is dropped, so that dropping the future awaiting it
/// ends it as dropping the work itself would.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The session's stdin and stdout: pipes through the reactor where they are pipes, else
/// threads (whose writer is returned, to be joined).
fn stdio_ends() -> io::Result<(StdinSource, StdoutSink, Option<std::thread::JoinHandle<()>>)> {
    #[cfg(unix)]
    let (input, output) = (pipe_in(), pipe_out());
    #[cfg(unix)]
    let (stdin, pipe_out) = match input {
        Some(pipe) => (StdinSource::Pipe(RestoreOnDrop(Some(pipe))), output),
        None => (StdinSource::Thread(StdinThread::spawn()), output),
    };
    #[cfg(not(unix))]
    let (stdin, pipe_out) = (StdinSource::Thread(StdinThread::spawn()), None::<std::convert::Infallible>);
    Ok(match pipe_out {
        #[cfg(unix)]
        Some(pipe) => (stdin, StdoutSink::Pipe(RestoreOnDrop(Some(pipe))), None),
        #[cfg(not(unix))]
        Some(never) => match never {},
        None => {
            let (thread, writer) = StdoutThread::spawn()?;
            (stdin, StdoutSink::Thread(thread), Some(writer))
        }
    })
}

/// Stdin as a reactor-driven pipe, if it is one.
#[cfg(unix)]
fn pipe_in() -> Option<tokio::net::unix::pipe::Receiver> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    // Refuses anything but a FIFO with read access.
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok()
}

/// Stdout as a reactor-driven pipe, if it is one.
#[cfg(unix)]
fn pipe_out() -> Option<tokio::net::unix::pipe::Sender> {
    use std::os::fd::AsFd;
    let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    tokio::net::unix::pipe::Sender::from_owned_fd(fd).ok()
}

#[cfg(unix)]
/// A pipe end that puts its file description back in blocking mode when dropped: the
/// description is shared with the process's own stdin or stdout, which code after the session
/// may use with blocking calls (`println!` fails on a non-blocking pipe that is full).
struct RestoreOnDrop<P: IntoBlocking>(Option<P>);

#[cfg(unix)]
trait IntoBlocking {
    fn into_blocking(self);
}

#[cfg(unix)]
impl IntoBlocking for tokio::net::unix::pipe::Receiver {
    fn into_blocking(self) {
        let _ = self.into_blocking_fd();
    }
}

#[cfg(unix)]
impl IntoBlocking for tokio::net::unix::pipe::Sender {
    fn into_blocking(self) {
        let _ = self.into_blocking_fd();
    }
}

#[cfg(unix)]
impl<P: IntoBlocking> Drop for RestoreOnDrop<P> {
    fn drop(&mut self) {
        if let Some(pipe) = self.0.take() {
            pipe.into_blocking();
        }
    }
}

/// Where the session's stdin comes from.
enum StdinSource {
    #[cfg(unix)]
    Pipe(RestoreOnDrop<tokio::net::unix::pipe::Receiver>),
    Thread(StdinThread),
}

impl tokio::io::AsyncRead for StdinSource {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            #[cfg(unix)]
            StdinSource::Pipe(RestoreOnDrop(Some(pipe))) => std::pin::Pin::new(pipe).poll_read(cx, buf),
            #[cfg(unix)]
            StdinSource::Pipe(RestoreOnDrop(None)) => std::task::Poll::Ready(Ok(())),
            StdinSource::Thread(thread) => std::pin::Pin::new(thread).poll_read(cx, buf),
        }
    }
}

/// Where the session's stdout goes.
enum StdoutSink {
    #[cfg(unix)]
    Pipe(RestoreOnDrop<tokio::net::unix::pipe::Sender>),
    Thread(StdoutThread),
}

impl StdoutSink {
    fn pin(&mut self) -> std::pin::Pin<&mut (dyn tokio::io::AsyncWrite + Unpin)> {
        match self {
            #[cfg(unix)]
            StdoutSink::Pipe(RestoreOnDrop(Some(pipe))) => std::pin::Pin::new(pipe),
            #[cfg(unix)]
            // Only while being dropped; `Closed` is zero-sized, so leaking one allocates nothing.
            StdoutSink::Pipe(RestoreOnDrop(None)) => std::pin::Pin::new(Box::leak(Box::new(Closed))),
            StdoutSink::Thread(thread) => std::pin::Pin::new(thread),
        }
    }
}

/// A sink whose writes all fail: a pipe already given back.
#[cfg(unix)]
struct Closed;

#[cfg(unix)]
impl tokio::io::AsyncWrite for Closed {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::task::Poll::Ready(Err(stdout_closed()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for StdoutSink {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        self.get_mut().pin().poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.get_mut().pin().poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.get_mut().pin().poll_shutdown(cx)
    }
}

/// Standard output written on a thread of its own: a write is a hand-off to that thread, not a
/// trip through tokio's blocking pool and back. A flush waits for the thread to report the bytes
/// written, so a closed stdout is noticed at once.
struct StdoutThread {
    chunks: tokio_util::sync::PollSender<Vec<u8>>,
    /// Chunks written by the thread, reported after each flush of the real stdout.
    written: tokio::sync::mpsc::UnboundedReceiver<usize>,
    unacknowledged: usize,
}

impl StdoutThread {
    fn spawn() -> io::Result<(Self, std::thread::JoinHandle<()>)> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
        let (ack, written) = tokio::sync::mpsc::unbounded_channel();
        let writer = std::thread::Builder::new().name("mcp-stdout".into()).spawn(move || {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            while let Some(chunk) = rx.blocking_recv() {
                let mut n = 1;
                let mut ok = stdout.write_all(&chunk).is_ok();
                while ok {
                    let Ok(more) = rx.try_recv() else { break };
                    n += 1;
                    ok = stdout.write_all(&more).is_ok();
                }
                // Returning drops both channels: the session sees its output is gone.
                if !ok || stdout.flush().is_err() || ack.send(n).is_err() {
                    return;
                }
            }
        })?;
        let chunks = tokio_util::sync::PollSender::new(tx);
        Ok((Self { chunks, written, unacknowledged: 0 }, writer))
    }
}

fn stdout_closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "standard output is closed")
}

impl tokio::io::AsyncWrite for StdoutThread {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        use std::task::Poll;
        match self.chunks.poll_reserve(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(_)) => Poll::Ready(Err(stdout_closed())),
            Poll::Ready(Ok(())) => match self.chunks.send_item(buf.to_vec()) {
                Ok(()) => {
                    self.unacknowledged += 1;
                    Poll::Ready(Ok(buf.len()))
                }
                Err(_) => Poll::Ready(Err(stdout_closed())),
            },
        }
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        use std::task::Poll;
        while self.unacknowledged > 0 {
            match self.written.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(Err(stdout_closed())),
                Poll::Ready(Some(n)) => self.unacknowledged = self.unacknowledged.saturating_sub(n),
            }
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.chunks.close();
        std::task::Poll::Ready(Ok(()))
    }
}

/// Standard input read on a thread of its own.
///
/// `tokio::io::stdin` reads on tokio's blocking pool, and a read there cannot be cancelled, so a
/// runtime shutting down waits for one more line that may never come (a client that closed our
/// stdout but not our stdin). A detached thread can simply be abandoned when the session ends.
struct StdinThread {
    chunks: tokio::sync::mpsc::Receiver<io::Result<Vec<u8>>>,
    pending: Vec<u8>,
    offset: usize,
}

impl StdinThread {
    fn spawn() -> Self {
        // A few chunks of read-ahead keep the pipe busy without buffering without bound.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let spawned = std::thread::Builder::new().name("mcp-stdin".into()).spawn(move || {
            use std::io::Read;
            let mut stdin = std::io::stdin().lock();
            loop {
                let mut buf = vec![0u8; 64 * 1024];
                let chunk = match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        buf.truncate(n);
                        Ok(buf)
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
                let failed = chunk.is_err();
                if tx.blocking_send(chunk).is_err() || failed {
                    break;
                }
            }
        });
        if let Err(e) = spawned {
            // Without the thread there is no input: report it as the first read's error.
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let _ = tx.try_send(Err(e));
            return Self { chunks: rx, pending: Vec::new(), offset: 0 };
        }
        Self { chunks: rx, pending: Vec::new(), offset: 0 }
    }
}

impl tokio::io::AsyncRead for StdinThread {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        use std::task::Poll;
        let this = &mut *self;
        if this.offset >= this.pending.len() {
            match this.chunks.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                // The thread ended: end of input.
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(Some(Ok(chunk))) => {
                    this.pending = chunk;
                    this.offset = 0;
                }
            }
        }
        let rest = this.pending.get(this.offset..).unwrap_or_default();
        let n = rest.len().min(buf.remaining());
        buf.put_slice(rest.get(..n).unwrap_or_default());
        this.offset += n;
        Poll::Ready(Ok(()))
    }
}

/// Serves one session over any pair of tokio byte streams (a pipe, a socket, a duplex).
pub async fn serve_lines<I, O>(server: &Server, caller: Caller, input: I, output: O) -> io::Result<StdioEnd>
where
    I: tokio::io::AsyncRead + Unpin,
    O: tokio::io::AsyncWrite + Unpin,
{
    let rt = TokioRuntime::current();
    mcp_server::serve_lines(server, rt, caller, input.compat(), output.compat_write()).await
}

/// An in-process client for a test of a server: [`connect`](testing::connect) it to a [`Server`]
/// in memory and call tools, read resources, answer asks and see notifications, on this runtime
/// (see [`mcp_server::testing`]). No socket and no clock: drive the test with `#[tokio::test]`.
pub mod testing {
    pub use mcp_server::testing::{
        Client, ClientBuilder, ClientError, ErrorResponse, Notification, PromptReply, ResourceReply,
        ToolReply,
    };

    use super::{Server, TokioRuntime};

    /// A new anonymous line session of `server` at the newest session-based version, initialized.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn connect(server: &Server) -> Result<Client, ClientError> {
        connect_with(server, Client::builder()).await
    }

    /// A new line session of `server` as `options` say (version, caller, capabilities,
    /// answerers), initialized.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn connect_with(server: &Server, options: ClientBuilder) -> Result<Client, ClientError> {
        options.connect(server, TokioRuntime::current()).await
    }
}

#[cfg(feature = "http")]
/// Serves the MCP endpoint (Streamable HTTP over HTTP/1.1) on `listener` until the server
/// shuts down ([`Server::shutdown`]): each connection on a task of its own, with the policy `http`
/// and within the server's [`Limits`] (its "HTTP transport" group; past
/// [`Limits::max_http_connections`] a new connection is closed at once).
///
/// `server` is a [`Server`] or [`Shards`] (several engines, one per core by default, from
/// [`ServerBuilder::build_shards`](mcp_server::ServerBuilder::build_shards)): connections are
/// spread over the shards in turn, and a request naming a session or task goes to the shard
/// that holds it.
///
/// Bind to a loopback address unless the endpoint is meant to be reachable from the network;
/// the default [`HttpConfig`] refuses non-loopback peers and `Host` names anyway.
///
/// ```no_run
/// # async fn demo(server: mcp_tokio::Server) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// mcp_tokio::serve_http(listener, server, mcp_tokio::HttpConfig::default()).await
/// # }
/// ```
///
/// # Panics
/// Outside a tokio runtime.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    server: impl Into<Shards>,
    http: HttpConfig,
) -> io::Result<()> {
    let http = HttpService::sharded(&server.into(), TokioRuntime::current(), http);
    http.serve(TcpListener(listener), TokioTimer::new()).await
}

/// [`serve_http`] over TLS (feature `tls`): HTTPS with the certificate and key of `tls`,
/// HTTP/2 for clients that offer it by ALPN and HTTP/1.1 for the others, under the same
/// limits; a handshake must complete within [`TlsConfig::handshake_timeout`]. Reload the
/// certificate with [`TlsConfig::reload`] on a clone of `tls` while this runs.
///
/// ```no_run
/// # async fn demo(server: mcp_tokio::Server) -> Result<(), Box<dyn std::error::Error>> {
/// let tls = mcp_tokio::TlsConfig::from_pem_files("cert.pem", "key.pem")?;
/// let listener = tokio::net::TcpListener::bind("0.0.0.0:443").await?;
/// mcp_tokio::serve_https(listener, server, mcp_tokio::HttpConfig::default(), tls).await?;
/// # Ok(()) }
/// ```
///
/// # Panics
/// Outside a tokio runtime.
#[cfg(feature = "tls")]
pub async fn serve_https(
    listener: tokio::net::TcpListener,
    server: impl Into<Shards>,
    http: HttpConfig,
    tls: TlsConfig,
) -> io::Result<()> {
    let http = HttpService::sharded(&server.into(), TokioRuntime::current(), http);
    http.serve_tls(TcpListener(listener), TokioTimer::new(), tls).await
}

/// tokio's listener as the server layer's [`Listener`].
#[cfg(feature = "http")]
struct TcpListener(tokio::net::TcpListener);

#[cfg(feature = "http")]
impl Listener for TcpListener {
    type Io = TokioIo<tokio::net::TcpStream>;

    async fn accept(&self) -> io::Result<(Self::Io, SocketAddr)> {
        let (stream, peer) = self.0.accept().await?;
        // Only fails on a socket that is already dead, which the first read will report.
        let _ = stream.set_nodelay(true);
        Ok((TokioIo::new(stream), peer))
    }
}

/// Completes when the process is asked to stop: on SIGINT (Ctrl-C) or SIGTERM on unix, on
/// Ctrl-C elsewhere. Fails when the handlers cannot be installed.
///
/// # Panics
/// Outside a tokio runtime.
pub async fn shutdown_signal() -> io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

/// Shuts `server` down gracefully when the process is asked to stop ([`shutdown_signal`]): new
/// requests are refused, calls in flight get up to `budget` to finish and their answers are
/// sent ([`Server::shutdown`]), then this waits for the connections `serve_http` accepted to
/// close, until `budget` (counted from the signal) runs out or a second signal comes. Returns
/// what did not finish; the caller then returns from `main`, and the process exits 0.
///
/// Start it before serving; `serve_http` returns as soon as the shutdown begins, so await this
/// after it (a stdio session ends by itself once its calls are answered):
///
/// ```no_run
/// # #[cfg(feature = "http")]
/// # async fn demo(server: mcp_tokio::Server) -> std::io::Result<()> {
/// use std::time::Duration;
/// let stop = tokio::spawn(mcp_tokio::shutdown_on_signal(server.clone(), Duration::from_secs(10)));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// mcp_tokio::serve_http(listener, server, mcp_tokio::HttpConfig::default()).await?;
/// let report = stop.await.map_err(std::io::Error::other)??;
/// eprintln!("stopped; {} call(s) cancelled", report.cancelled);
/// # Ok(()) }
/// ```
///
/// # Panics
/// Outside a tokio runtime.
pub async fn shutdown_on_signal(server: impl Into<Shards>, budget: Duration) -> io::Result<ShutdownReport> {
    shutdown_signal().await?;
    // A second signal cuts the wait for connections to close short.
    let again = async {
        let _ = shutdown_signal().await;
    };
    let report = server.into().shutdown_and_close(budget, again).await;
    Ok(report)
}

/// The MCP endpoint as a `tower_service::Service`, to mount in an existing application (see
/// [`mcp_server::McpService`] for what it does and does not enforce):
///
/// ```no_run
/// # async fn demo(server: mcp_tokio::Server) -> std::io::Result<()> {
/// use std::net::SocketAddr;
/// let app = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hello" }))
///     .route_service("/mcp", mcp_tokio::McpService::new(server, mcp_tokio::HttpConfig::default()));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
/// # }
/// ```
///
/// The client's address comes from a [`PeerAddr`] extension or (feature `axum`, on by default)
/// axum's `ConnectInfo<SocketAddr>`, as `into_make_service_with_connect_info` records it.
/// [`McpService::new`](mcp_server::McpService::new) panics outside a tokio runtime.
#[cfg(feature = "http")]
pub type McpService = mcp_server::McpService<TokioRuntime>;

#[cfg(feature = "http")]
impl HttpRuntime for TokioRuntime {
    fn current() -> Self {
        TokioRuntime::current()
    }

    #[cfg(feature = "axum")]
    fn peer_addr(extensions: &http::Extensions) -> Option<SocketAddr> {
        extensions.get::<axum::extract::ConnectInfo<SocketAddr>>().map(|info| info.0)
    }
}

// Only the HTTP accept step is tested here; without `http` there is nothing of it.
#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;

    /// The accept step of `serve_http` hands out sockets with Nagle's algorithm off.
    #[tokio::test]
    async fn accepted_sockets_have_nodelay() {
        let listener = TcpListener(tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind"));
        let addr = listener.0.local_addr().expect("address");
        let client = tokio::spawn(tokio::net::TcpStream::connect(addr));
        let (io, peer) = listener.accept().await.expect("accept");
        assert!(io.inner().nodelay().expect("nodelay readable"), "TCP_NODELAY is set");
        let client = client.await.expect("join").expect("connect");
        assert_eq!(peer, client.local_addr().expect("client address"));
    }
}

// The README's examples are compiled and run as doctests, so they cannot rot.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
