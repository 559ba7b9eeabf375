//! Serve an MCP server on smol.
//!
//! The protocol lives in [`mcp_proto`]; the handler API and the drivers live in the runtime-independent
//! [`mcp_server`] layer. This crate only supplies smol: the task spawner, the timer, the
//! clock, the standard streams and TCP sockets. `mcp-tokio` is its mirror image.
//!
//! Serve stdio with [`serve_stdio`], Streamable HTTP with `serve_http`, or mount the HTTP
//! endpoint in a tower/hyper application with `McpService`. Stop gracefully on SIGINT or
//! SIGTERM with [`shutdown_on_signal`] (unix).
//! Test a server in memory, with no socket and no clock, through [`testing`]'s client under
//! `smol::block_on`.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use mcp_smol::{Server, ToolOutput};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Echo { text: String }
//!
//! let server = Server::builder("demo", "1.0.0")
//!     .typed_tool("echo", "Echoes its text", |args: Echo, _call| async move { ToolOutput::text(args.text) })
//!     .build()
//!     .expect("valid tools");
//! mcp_smol::serve_stdio(&server).await?;
//! # Ok(()) }
//! ```
//!
//! # Features
//!
//! - `http` (on by default): Streamable HTTP, that is `serve_http`, `McpService` and
//!   `HttpService`, over hyper. A stdio-only server turns it off with `default-features = false`
//!   and compiles none of hyper, http, http-body or tower-service.
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
//! - `macros` (off by default): `#[mcp_smol::tool]` makes a tool of an async fn and
//!   `#[mcp_smol::tools]` tools of an impl block's methods, expanding to the builder's calls (see
//!   [`ServerBuilder::register`]). The generated code names everything through this crate, so
//!   a project needs no dependency on `mcp-server`, `serde` or `schemars` for it.
//!
//! # Re-exports
//!
//! [`serde`], [`serde_json`] and [`schemars`] are the versions this crate is built with, so a
//! project needs no dependency of its own on them; derive through them by naming the path:
//! `#[serde(crate = "mcp_smol::serde")]` and
//! `#[schemars(crate = "mcp_smol::schemars")]` (see mcp-tokio's `examples/hello.rs`).
#![forbid(unsafe_code)]

use std::io;
#[cfg(feature = "http")]
use std::net::SocketAddr;
use std::time::{Duration, Instant};

// The names both shims re-export, from one list (`mcp_server::__shim`), so that they stay the same.
pub use mcp_server;
pub use mcp_server::__shim::*;

/// Makes a tool of an async fn (feature `macros`): `#[mcp_smol::tool]`, naming everything it
/// generates through this crate. See [`ServerBuilder::register`] and the `mcp-macros` crate.
#[cfg(feature = "macros")]
pub use mcp_server::__macros::tool_smol as tool;
/// Makes tools of the methods of an impl block marked `#[tool]` (feature `macros`):
/// `#[mcp_smol::tools]`. See [`ServerBuilder::register`] and the `mcp-macros` crate.
#[cfg(feature = "macros")]
pub use mcp_server::__macros::tools_smol as tools;
// The path the code `#[tool]` generates names its items by (`::mcp_smol::__macros::...`).
#[cfg(feature = "macros")]
#[doc(hidden)]
pub use mcp_server::__macros;

#[cfg(feature = "http")]
use mcp_server::FuturesIo;
#[cfg(feature = "http")]
use mcp_server::{HttpRuntime, Listener};
#[cfg(feature = "http")]
use smol_hyper::rt::SmolTimer;

/// The smol [`Runtime`]: spawns on smol's global executor (or, on a thread inside
/// [`block_on`], on that thread's own executor) and sleeps on async-io timers.
#[derive(Debug, Clone, Default)]
pub struct SmolRuntime;

impl Runtime for SmolRuntime {
    fn spawn(&self, fut: BoxFuture<()>) {
        match local::current() {
            Some(executor) => executor.spawn(fut).detach(),
            None => smol::spawn(fut).detach(),
        }
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()> {
        Box::pin(async move {
            smol::Timer::at(deadline).await;
        })
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    /// A smol `TcpStream` (resolving `host` on smol's blocking pool), `TCP_NODELAY` set, in
    /// hyper's I/O traits.
    #[cfg(feature = "http")]
    fn connect(&self, host: String, port: u16) -> BoxFuture<io::Result<mcp_server::BoxIo>> {
        Box::pin(async move {
            let stream = smol::net::TcpStream::connect((host.as_str(), port)).await?;
            // Forwarded SSE events must leave at once, as on accepted connections.
            let _ = stream.set_nodelay(true);
            Ok::<mcp_server::BoxIo, io::Error>(Box::new(FuturesIo::new(stream)))
        })
    }

    /// On smol's blocking pool (`smol::unblock`, at most 500 threads by default).
    fn spawn_blocking(&self, f: Box<dyn FnOnce() + Send + 'static>) -> BoxFuture<()> {
        Box::pin(smol::unblock(f))
    }
}

/// Runs `fut` to completion on the calling thread, and with it every task the server spawns
/// from this thread meanwhile (the engine's driver, handlers, connections): smol's answer to
/// tokio's current-thread runtime. The thread also drives async-io's reactor while it waits, so
/// a request read, handled and answered never changes thread.
///
/// Why: under `smol::block_on` a session runs on the calling thread while what it spawns runs
/// on smol's global executor threads, so every request crosses threads twice (to its handler
/// and back); measured with `echo` over stdio at one client on 2 cores, smol made 77% of
/// tokio's throughput with that hand-off and 88% without it. CPU-bound handlers belong on the blocking pool (`blocking_tool`) under
/// either, as they would block every session of the thread.
///
/// Tasks spawned here belong to the thread: they make progress only while the thread is inside
/// this function, and go on where they stood when it enters it again. Code that leaves it for
/// good (or never enters it) keeps `smol::block_on` and the global executor, which work as
/// before. Do not call it from inside another `block_on`.
///
/// ```no_run
/// # async fn serve(server: mcp_smol::Server) -> std::io::Result<()> {
/// #     mcp_smol::serve_stdio(&server).await.map(drop) }
/// # fn demo(server: mcp_smol::Server) -> std::io::Result<()> {
/// mcp_smol::block_on(serve(server))
/// # }
/// ```
pub fn block_on<T>(fut: impl std::future::Future<Output = T>) -> T {
    let (executor, _inside) = local::enter();
    smol::block_on(executor.run(fut))
}

/// The executor of each thread that entered [`block_on`], and whether it is inside it now.
mod local {
    use std::cell::{Cell, RefCell};
    use std::sync::Arc;

    use smol::Executor;

    thread_local! {
        // Kept after `block_on` returns: tasks it spawned wait there for the next one.
        static EXECUTOR: RefCell<Option<Arc<Executor<'static>>>> = const { RefCell::new(None) };
        static INSIDE: Cell<bool> = const { Cell::new(false) };
    }

    /// The executor of this thread when it is inside `block_on`.
    pub(crate) fn current() -> Option<Arc<Executor<'static>>> {
        if INSIDE.with(Cell::get) {
            EXECUTOR.with(|e| e.borrow().clone())
        } else {
            None
        }
    }

    /// Marks the thread inside `block_on` until the guard drops (also on unwind).
    pub(crate) struct Inside(bool);

    impl Drop for Inside {
        fn drop(&mut self) {
            INSIDE.with(|i| i.set(self.0));
        }
    }

    /// Runs `fut` as a task of this thread's executor when the thread is inside `block_on`,
    /// else in place.
    ///
    /// Why: the future `block_on` runs is polled by async-io's `block_on` itself, which turns
    /// the reactor (five system calls) each time that future wakes itself, so every hand-over
    /// of the stdio reader (`Runtime::yield_now`) cost a reactor turn. A task that yields goes
    /// back on the executor's queue instead, as under tokio's current-thread runtime. Measured
    /// with ../shared/bench, stdio at 16 requests in flight on 2 cores (calls/s, 2 alternating
    /// runs): ping 348k-396k in place against 405k-709k as a task, echo 278k-285k against
    /// 286k-321k, tokio 318k-352k; at one request in flight no change.
    pub(crate) async fn as_task<F>(fut: F) -> F::Output
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send,
    {
        match current() {
            Some(executor) => executor.spawn(fut).await,
            None => fut.await,
        }
    }

    pub(crate) fn enter() -> (Arc<Executor<'static>>, Inside) {
        let executor =
            EXECUTOR.with(|e| e.borrow_mut().get_or_insert_with(|| Arc::new(Executor::new())).clone());
        let was = INSIDE.with(|i| i.replace(true));
        (executor, Inside(was))
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
/// written through async-io's reactor, in non-blocking mode for the session (blocking mode is
/// restored after it): a line costs no hand-off to another thread. Anything else (a terminal,
/// a file) goes through smol's blocking pool ([`smol::Unblock`]).
pub async fn serve_stdio_as(server: &Server, caller: Caller) -> io::Result<StdioEnd> {
    let server = server.clone();
    local::as_task(async move { stdio_session(&server, caller).await }).await
}

async fn stdio_session(server: &Server, caller: Caller) -> io::Result<StdioEnd> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let stdin = pipe::Pipe::new(std::io::stdin().as_fd());
        let stdout = pipe::Pipe::new(std::io::stdout().as_fd());
        match (stdin, stdout) {
            (Some(i), Some(o)) => serve_lines(server, caller, i, o).await,
            (Some(i), None) => serve_lines(server, caller, i, smol::Unblock::new(std::io::stdout())).await,
            (None, Some(o)) => serve_lines(server, caller, smol::Unblock::new(std::io::stdin()), o).await,
            (None, None) => {
                let (i, o) = (smol::Unblock::new(std::io::stdin()), smol::Unblock::new(std::io::stdout()));
                serve_lines(server, caller, i, o).await
            }
        }
    }
    #[cfg(not(unix))]
    {
        let (i, o) = (smol::Unblock::new(std::io::stdin()), smol::Unblock::new(std::io::stdout()));
        serve_lines(server, caller, i, o).await
    }
}

#[cfg(unix)]
mod pipe {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd};
    use std::os::unix::fs::FileTypeExt;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use smol::Async;

    /// A duplicate of stdin or stdout that is a FIFO, registered with the reactor. Dropping it
    /// puts the file description (shared with the process's own stdin or stdout) back in
    /// blocking mode, for code after the session that uses it with blocking calls.
    pub(crate) struct Pipe(Option<Async<File>>);

    impl Pipe {
        /// `None` unless `fd` is a pipe the reactor can watch.
        pub(crate) fn new(fd: BorrowedFd<'_>) -> Option<Self> {
            let file = File::from(fd.try_clone_to_owned().ok()?);
            if !file.metadata().ok()?.file_type().is_fifo() {
                return None;
            }
            Async::new(file).ok().map(|a| Pipe(Some(a)))
        }
    }

    impl Drop for Pipe {
        fn drop(&mut self) {
            if let Some(file) = self.0.take().and_then(|a| a.into_inner().ok()) {
                let _ = rustix::io::ioctl_fionbio(file.as_fd(), false);
            }
        }
    }

    fn gone() -> io::Error {
        io::Error::new(io::ErrorKind::BrokenPipe, "the pipe was given back")
    }

    impl smol::io::AsyncRead for Pipe {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
            match &mut self.get_mut().0 {
                Some(a) => Pin::new(a).poll_read(cx, buf),
                None => Poll::Ready(Err(gone())),
            }
        }
    }

    impl smol::io::AsyncWrite for Pipe {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            match &mut self.get_mut().0 {
                Some(a) => Pin::new(a).poll_write(cx, buf),
                None => Poll::Ready(Err(gone())),
            }
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            match &mut self.get_mut().0 {
                Some(a) => Pin::new(a).poll_flush(cx),
                None => Poll::Ready(Ok(())),
            }
        }

        fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            match &mut self.get_mut().0 {
                Some(a) => Pin::new(a).poll_close(cx),
                None => Poll::Ready(Ok(())),
            }
        }
    }
}

/// Serves one session over any pair of futures-io byte streams (a pipe, a socket).
pub async fn serve_lines<I, O>(server: &Server, caller: Caller, input: I, output: O) -> io::Result<StdioEnd>
where
    I: smol::io::AsyncRead + Unpin,
    O: smol::io::AsyncWrite + Unpin,
{
    mcp_server::serve_lines(server, SmolRuntime, caller, input, output).await
}

/// An in-process client for a test of a server: [`connect`](testing::connect) it to a [`Server`]
/// in memory and call tools, read resources, answer asks and see notifications, on this runtime
/// (see [`mcp_server::testing`]). No socket and no clock: drive the test with `smol::block_on`.
pub mod testing {
    pub use mcp_server::testing::{
        Client, ClientBuilder, ClientError, ErrorResponse, Notification, PromptReply, ResourceReply,
        ToolReply,
    };

    use super::{Server, SmolRuntime};

    /// A new anonymous line session of `server` at the newest session-based version, initialized.
    pub async fn connect(server: &Server) -> Result<Client, ClientError> {
        connect_with(server, Client::builder()).await
    }

    /// A new line session of `server` as `options` say (version, caller, capabilities,
    /// answerers), initialized.
    pub async fn connect_with(server: &Server, options: ClientBuilder) -> Result<Client, ClientError> {
        options.connect(server, SmolRuntime).await
    }
}

#[cfg(feature = "http")]
/// Serves the MCP endpoint (Streamable HTTP over HTTP/1.1) on `listener` until the server
/// shuts down ([`Server::shutdown`]): each connection on a task of its own, with the policy `http`
/// and within the server's [`Limits`] (its "HTTP transport" group; past
/// [`Limits::max_http_connections`] a new connection is closed at once).
///
/// `server` is a [`Server`] or [`Shards`] (several engines from
/// [`ServerBuilder::build_shards`](mcp_server::ServerBuilder::build_shards)): connections are
/// spread over the shards in turn, and a request naming a session or task goes to the shard
/// that holds it. The shards use as many cores as the threads that run this future's tasks:
/// under [`block_on`] that is one thread, so run it on several (`smol` executor threads, or one
/// `block_on` per thread) for the shards to pay off.
///
/// Bind to a loopback address unless the endpoint is meant to be reachable from the network;
/// the default [`HttpConfig`] refuses non-loopback peers and `Host` names anyway.
///
/// ```no_run
/// # async fn demo(server: mcp_smol::Server) -> std::io::Result<()> {
/// let listener = smol::net::TcpListener::bind("127.0.0.1:3000").await?;
/// mcp_smol::serve_http(listener, server, mcp_smol::HttpConfig::default()).await
/// # }
/// ```
pub async fn serve_http(
    listener: smol::net::TcpListener,
    server: impl Into<Shards>,
    http: HttpConfig,
) -> io::Result<()> {
    let http = HttpService::sharded(&server.into(), SmolRuntime, http);
    http.serve(TcpListener::from(listener), SmolTimer::new()).await
}

/// [`serve_http`] over TLS (feature `tls`): HTTPS with the certificate and key of `tls`,
/// HTTP/2 for clients that offer it by ALPN and HTTP/1.1 for the others, under the same
/// limits; a handshake must complete within [`TlsConfig::handshake_timeout`]. Reload the
/// certificate with [`TlsConfig::reload`] on a clone of `tls` while this runs.
///
/// ```no_run
/// # async fn demo(server: mcp_smol::Server) -> Result<(), Box<dyn std::error::Error>> {
/// let tls = mcp_smol::TlsConfig::from_pem_files("cert.pem", "key.pem")?;
/// let listener = smol::net::TcpListener::bind("0.0.0.0:443").await?;
/// mcp_smol::serve_https(listener, server, mcp_smol::HttpConfig::default(), tls).await?;
/// # Ok(()) }
/// ```
#[cfg(feature = "tls")]
pub async fn serve_https(
    listener: smol::net::TcpListener,
    server: impl Into<Shards>,
    http: HttpConfig,
    tls: TlsConfig,
) -> io::Result<()> {
    let http = HttpService::sharded(&server.into(), SmolRuntime, http);
    http.serve_tls(TcpListener::from(listener), SmolTimer::new(), tls).await
}

/// smol's listener as the server layer's [`Listener`].
///
/// It waits for readiness itself rather than through `smol::net::TcpListener::accept`, which
/// tries `accept` again each time its future is polled, woken by the listener or not. The
/// accept loop is the future `block_on` runs, which async-io polls after every reactor turn:
/// over ../shared/bench's HTTP echo at 16 clients that was one failed `accept4` per turn
/// (`perf trace`: 1,099 in 2 s, all `EAGAIN`).
#[cfg(feature = "http")]
struct TcpListener(std::sync::Arc<smol::Async<std::net::TcpListener>>);

#[cfg(feature = "http")]
impl From<smol::net::TcpListener> for TcpListener {
    fn from(listener: smol::net::TcpListener) -> Self {
        TcpListener(listener.into())
    }
}

#[cfg(feature = "http")]
impl Listener for TcpListener {
    type Io = FuturesIo<Accepted>;

    async fn accept(&self) -> io::Result<(Self::Io, SocketAddr)> {
        let (stream, peer) = loop {
            match self.0.get_ref().accept() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.0.readable().await?,
                accepted => break accepted?,
            }
        };
        // Only fails on a socket that is already dead, which the first read will report.
        let _ = stream.set_nodelay(true);
        let io = std::sync::Arc::new(smol::Async::new(stream)?);
        Ok((FuturesIo::new(Accepted { io, drained: false }), peer))
    }
}

/// An accepted connection. A read that fills less than its buffer took everything the socket
/// held, so the next read waits for readiness first instead of trying a `recv` that can only
/// fail with `EAGAIN` (tokio tracks readiness the same way). hyper polls its read side each
/// time the connection's task wakes for any reason (an answer ready to write, say): over
/// ../shared/bench's HTTP echo at 16 clients that was three failed `recv`s per request
/// (`perf trace`).
#[cfg(feature = "http")]
struct Accepted {
    io: std::sync::Arc<smol::Async<std::net::TcpStream>>,
    drained: bool,
}

#[cfg(feature = "http")]
impl smol::io::AsyncRead for Accepted {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<io::Result<usize>> {
        let this = self.get_mut();
        // A readiness error is the read's to report: the read goes ahead.
        if this.drained && this.io.poll_readable(cx).is_pending() {
            return std::task::Poll::Pending;
        }
        let read = std::pin::Pin::new(&mut &*this.io).poll_read(cx, buf);
        this.drained = matches!(read, std::task::Poll::Ready(Ok(n)) if n > 0 && n < buf.len());
        read
    }
}

#[cfg(feature = "http")]
impl smol::io::AsyncWrite for Accepted {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut &*self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut &*self.io).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut &*self.io).poll_flush(cx)
    }

    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut &*self.io).poll_close(cx)
    }
}

/// The signals that ask the process to stop: SIGINT (Ctrl-C) and SIGTERM, on unix.
#[cfg(unix)]
struct StopSignals(async_signal::Signals);

#[cfg(unix)]
impl StopSignals {
    fn new() -> io::Result<Self> {
        async_signal::Signals::new([async_signal::Signal::Int, async_signal::Signal::Term]).map(Self)
    }

    async fn next(&mut self) -> io::Result<()> {
        use smol::stream::StreamExt;
        match self.0.next().await {
            Some(received) => received.map(drop),
            None => Err(io::Error::other("the signal stream ended")),
        }
    }
}

/// Elsewhere no signal is watched: [`StopSignals::next`] never completes.
#[cfg(not(unix))]
struct StopSignals;

#[cfg(not(unix))]
impl StopSignals {
    fn new() -> io::Result<Self> {
        Ok(Self)
    }

    async fn next(&mut self) -> io::Result<()> {
        std::future::pending().await
    }
}

/// Completes when the process is asked to stop: on SIGINT (Ctrl-C) or SIGTERM. Unix only:
/// on other targets it never completes (stop the server with [`Server::shutdown`] there). Fails
/// when the handlers cannot be installed.
pub async fn shutdown_signal() -> io::Result<()> {
    StopSignals::new()?.next().await
}

/// Shuts `server` down gracefully when the process is asked to stop ([`shutdown_signal`]; unix
/// only, never elsewhere): new requests are refused, calls in flight get up to `budget` to
/// finish and their answers are sent ([`Server::shutdown`]), then this waits for the
/// connections `serve_http` accepted to close, until `budget` (counted from the signal) runs
/// out or a second signal comes. Returns what did not finish; the caller then returns from
/// `main`, and the process exits 0.
///
/// Start it before serving; `serve_http` returns as soon as the shutdown begins, so await this
/// after it (a stdio session ends by itself once its calls are answered):
///
/// ```no_run
/// # #[cfg(feature = "http")]
/// # async fn demo(server: mcp_smol::Server) -> std::io::Result<()> {
/// use std::time::Duration;
/// let stop = smol::spawn(mcp_smol::shutdown_on_signal(server.clone(), Duration::from_secs(10)));
/// let listener = smol::net::TcpListener::bind("127.0.0.1:3000").await?;
/// mcp_smol::serve_http(listener, server, mcp_smol::HttpConfig::default()).await?;
/// let report = stop.await?;
/// eprintln!("stopped; {} call(s) cancelled", report.cancelled);
/// # Ok(()) }
/// ```
pub async fn shutdown_on_signal(server: impl Into<Shards>, budget: Duration) -> io::Result<ShutdownReport> {
    let mut signals = StopSignals::new()?;
    signals.next().await?;
    // A second signal cuts the wait for connections to close short.
    let again = async {
        let _ = signals.next().await;
    };
    let report = server.into().shutdown_and_close(budget, again).await;
    Ok(report)
}

/// The MCP endpoint as a `tower_service::Service`, to mount in an existing hyper or tower
/// application (see [`mcp_server::McpService`] for what it does and does not enforce).
///
/// The client's address comes from a [`PeerAddr`] extension.
#[cfg(feature = "http")]
pub type McpService = mcp_server::McpService<SmolRuntime>;

#[cfg(feature = "http")]
impl HttpRuntime for SmolRuntime {
    fn current() -> Self {
        SmolRuntime
    }
}

// Only the HTTP accept step is tested here; without `http` there is nothing of it.
#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;

    /// One connection through the accept step of `serve_http`: what it handed out, the peer
    /// address it gave, and the client's end.
    async fn accepted() -> (Accepted, SocketAddr, smol::net::TcpStream) {
        let listener = TcpListener::from(smol::net::TcpListener::bind("127.0.0.1:0").await.expect("bind"));
        let addr = listener.0.get_ref().local_addr().expect("address");
        let client = smol::spawn(smol::net::TcpStream::connect(addr));
        let (io, peer) = listener.accept().await.expect("accept");
        (io.into_inner(), peer, client.await.expect("connect"))
    }

    /// The accept step of `serve_http` hands out sockets with Nagle's algorithm off.
    #[test]
    fn accepted_sockets_have_nodelay() {
        smol::block_on(async {
            let (server, peer, client) = accepted().await;
            assert!(server.io.get_ref().nodelay().expect("nodelay readable"), "TCP_NODELAY is set");
            assert_eq!(peer, client.local_addr().expect("client address"));
        });
    }

    /// The accept step waits for a connection that is not there yet, however often its future
    /// is polled meanwhile, and then takes each waiting connection in turn.
    #[test]
    fn accept_waits_for_connections_and_takes_each() {
        smol::block_on(async {
            let listener =
                TcpListener::from(smol::net::TcpListener::bind("127.0.0.1:0").await.expect("bind"));
            let addr = listener.0.get_ref().local_addr().expect("address");
            let mut accept = std::pin::pin!(listener.accept());
            for _ in 0..3 {
                assert!(smol::future::poll_once(accept.as_mut()).await.is_none(), "no connection yet");
            }
            let first = smol::net::TcpStream::connect(addr).await.expect("connect");
            let second = smol::net::TcpStream::connect(addr).await.expect("connect");
            let (_, peer) = accept.await.expect("accept");
            assert_eq!(peer, first.local_addr().expect("client address"));
            let (_, peer) = listener.accept().await.expect("accept");
            assert_eq!(peer, second.local_addr().expect("client address"));
        });
    }

    /// After a short read an accepted socket waits for readiness before it reads again: it
    /// still wakes for what arrives next, the end of the stream included, and never loses bytes.
    #[test]
    fn accepted_sockets_read_on_after_a_short_read() {
        use smol::io::{AsyncReadExt, AsyncWriteExt};
        smol::block_on(async {
            let (mut server, _, mut client) = accepted().await;
            let mut buf = [0u8; 16];
            client.write_all(b"abc").await.expect("write");
            assert_eq!(server.read(&mut buf).await.expect("read"), 3);
            assert!(server.drained, "a short read drains the socket");
            // Nothing has arrived: the read waits rather than fails.
            let waiting = smol::future::poll_once(server.read(&mut buf)).await;
            assert!(waiting.is_none(), "{waiting:?}");
            client.write_all(b"defg").await.expect("write");
            assert_eq!(server.read(&mut buf).await.expect("read"), 4);
            assert_eq!(buf.get(..4), Some(&b"defg"[..]));
            // A read that fills its buffer leaves the socket as it may still hold more.
            client.write_all(&[7u8; 20]).await.expect("write");
            server.read_exact(&mut buf).await.expect("read");
            assert!(!server.drained);
            server.read_exact(&mut buf[..4]).await.expect("read");
            assert_eq!(buf, [7u8; 16]);
            drop(client);
            assert_eq!(server.read(&mut buf).await.expect("read"), 0, "the end of the stream");
        });
    }

    /// Inside `block_on`, what the runtime spawns runs on the calling thread; outside it, on
    /// smol's global executor (another thread).
    #[test]
    fn block_on_keeps_spawned_tasks_on_the_calling_thread() {
        let here = std::thread::current().id();
        let (tx, rx) = std::sync::mpsc::channel();
        let on_thread = block_on(async {
            let (done_tx, done_rx) = smol::channel::bounded(1);
            SmolRuntime.spawn(Box::pin(async move {
                let _ = done_tx.send(std::thread::current().id()).await;
            }));
            done_rx.recv().await.expect("the spawned task ran")
        });
        assert_eq!(on_thread, here, "spawned inside block_on: same thread");

        SmolRuntime.spawn(Box::pin(async move {
            let _ = tx.send(std::thread::current().id());
        }));
        let elsewhere = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("global executor ran it");
        assert_ne!(elsewhere, here, "spawned outside block_on: the global executor's thread");
    }

    /// Inside `block_on` a stdio session runs as a task: its hand-overs go back on the
    /// executor's queue and do not wake the future `block_on` polls (each such wake costs a
    /// reactor turn). Outside it, the session runs in place.
    #[test]
    fn sessions_run_as_tasks_inside_block_on() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        /// Counts how often `block_on` polls the future it runs.
        struct Polls<F>(F, Arc<AtomicUsize>);
        impl<F: std::future::Future + Unpin> std::future::Future for Polls<F> {
            type Output = F::Output;
            fn poll(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<F::Output> {
                self.1.fetch_add(1, Ordering::Relaxed);
                std::pin::Pin::new(&mut self.0).poll(cx)
            }
        }
        let yielding = || async {
            for _ in 0..100 {
                SmolRuntime.yield_now().await;
            }
            std::thread::current().id()
        };
        let polls = Arc::new(AtomicUsize::new(0));
        let ran_on = block_on(Polls(Box::pin(local::as_task(yielding())), polls.clone()));
        assert_eq!(ran_on, std::thread::current().id(), "on the calling thread");
        let as_task = polls.load(Ordering::Relaxed);
        assert!(as_task < 10, "100 hand-overs woke block_on's future {as_task} times");
        let polls = Arc::new(AtomicUsize::new(0));
        smol::block_on(Polls(Box::pin(local::as_task(yielding())), polls.clone()));
        assert!(polls.load(Ordering::Relaxed) > 100, "outside block_on it runs in place");
    }

    /// A task spawned inside one `block_on` and left waiting goes on in the next one, and the
    /// flag that routes spawns is restored when `block_on` unwinds.
    #[test]
    fn block_on_resumes_tasks_and_restores_the_thread_on_panic() {
        let (tx, rx) = smol::channel::unbounded::<u32>();
        let (go_tx, go_rx) = smol::channel::bounded::<()>(1);
        block_on(async {
            SmolRuntime.spawn(Box::pin(async move {
                let _ = go_rx.recv().await;
                let _ = tx.send(7).await;
            }));
        });
        let got = block_on(async {
            go_tx.send(()).await.expect("task still waiting");
            rx.recv().await.expect("task resumed")
        });
        assert_eq!(got, 7);

        let unwound = std::panic::catch_unwind(|| block_on(async { panic!("inside") }));
        assert!(unwound.is_err());
        assert!(local::current().is_none(), "outside block_on again after the unwind");
    }
}
