//! What a shim supplies ([`Runtime`]: spawning, sleeping, the clock, sockets) and the small
//! time and scheduling helpers the rest of the layer builds on it.

use std::time::Instant;

use crate::handler::{self, BoxFuture};

/// What a shim supplies: spawning, sleeping and the clock.
pub trait Runtime: Send + Sync + 'static {
    /// Runs `fut` to completion in the background. Dropping what this returns must not cancel
    /// it; cancellation goes through an abort handle the server layer keeps.
    fn spawn(&self, fut: BoxFuture<()>);
    /// Completes at `deadline`.
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<()>;
    /// The current time.
    fn now(&self) -> Instant;
    /// Runs `f`, which may block or compute for long, off the threads that run tasks (on the
    /// runtime's blocking pool), and completes once it returned. Dropping what this returns
    /// does not stop `f`: a blocking closure cannot be interrupted.
    ///
    /// The default runs `f` on a new thread, for runtimes without a blocking pool.
    fn spawn_blocking(&self, f: Box<dyn FnOnce() + Send + 'static>) -> BoxFuture<()> {
        handler::on_thread(f)
    }

    /// Lets the runtime's other ready tasks run before the caller goes on: the stdio reader
    /// calls it between frames of one read, so the handlers those frames started and the
    /// writer run before more frames are admitted. The default wakes the caller at once and is
    /// pending once, which puts it behind the tasks already queued; a runtime with a yield of
    /// its own that does better overrides it.
    fn yield_now(&self) -> BoxFuture<()> {
        Box::pin(YieldOnce(false))
    }

    /// How many frames of one read the stdio reader takes between two calls of
    /// [`yield_now`](Runtime::yield_now); 0 counts as 1. Without hand-overs a 64 KiB read of
    /// pipelined requests is all admitted before the first answer is written, so a pipelining
    /// client waits for the whole batch and then the server waits for the client's next one:
    /// the two sides take turns instead of working at once. Each hand-over lets the writer make one
    /// more write, and costs the runtime one more turn of its I/O driver if it has nothing else
    /// to do, so the best count depends on what such a turn costs.
    ///
    /// The default, 2, measured best on tokio's current-thread runtime (2 cores,
    /// ../shared/bench, stdio at 16 requests in flight: 2 frames ≈347k echo calls/s against
    /// ≈283k for 4 and ≈150k for 8; pings did better at 1 frame, ≈670k against ≈530k, where
    /// echo fell to ≈280k).
    fn frames_per_turn(&self) -> usize {
        2
    }

    /// Opens a TCP connection to `host` (a name or an address) on `port`, with `TCP_NODELAY`
    /// set, for forwarding a request to the replica of a cluster that holds its session or
    /// task (see the [`cluster`](crate::cluster) module). The shims implement it over their runtime's socket;
    /// the default fails (`Unsupported`), and a server on such a runtime answers here what it
    /// would otherwise forward.
    #[cfg(feature = "http")]
    fn connect(&self, host: String, port: u16) -> BoxFuture<std::io::Result<BoxIo>> {
        let _ = (host, port);
        no_connector()
    }
}

/// Pending once, after waking its task: the default [`Runtime::yield_now`]. Holds whether it
/// already yielded.
pub(crate) struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// Gives other tasks a turn: pending once, waking itself at once.
pub(crate) async fn yield_now() {
    YieldOnce(false).await;
}

/// Sleeps until `deadline`, or forever when there is none (a duration too long for `Instant`,
/// such as `Duration::MAX`, means "never").
pub(crate) fn sleep_until(rt: &dyn Runtime, deadline: Option<Instant>) -> BoxFuture<()> {
    match deadline {
        Some(deadline) => rt.sleep_until(deadline),
        None => Box::pin(std::future::pending()),
    }
}

/// What `fut` gives, unless `deadline` passes first (`None`; no deadline waits as long as
/// `fut` takes).
#[cfg(feature = "http")]
pub(crate) async fn within<T>(
    rt: &dyn Runtime,
    deadline: Option<Instant>,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    use futures_util::future::{select, Either};
    match select(std::pin::pin!(fut), sleep_until(rt, deadline)).await {
        Either::Left((out, _)) => Some(out),
        Either::Right(_) => None,
    }
}

/// The wall-clock time in unix milliseconds, which sealed request states expire by.
#[allow(clippy::disallowed_methods)] // the server layer is the shim side: it may read the clock
pub(crate) fn unix_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// The clock of a server that has no runtime yet (nothing is timed before the first connection).
#[allow(clippy::disallowed_methods)] // the server layer is the shim side: it may read the clock
pub(crate) fn clock() -> Instant {
    Instant::now()
}

/// A connection to a replica, as the runtime opens it ([`Runtime::connect`]).
#[cfg(feature = "http")]
pub trait ForwardIo: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static {}

#[cfg(feature = "http")]
impl<T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static> ForwardIo for T {}

/// What [`Runtime::connect`] gives.
#[cfg(feature = "http")]
pub type BoxIo = Box<dyn ForwardIo>;

/// Opens a TCP connection for [`Runtime::connect`]'s default: none.
#[cfg(feature = "http")]
pub(crate) fn no_connector() -> BoxFuture<std::io::Result<BoxIo>> {
    Box::pin(std::future::ready(Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "this runtime opens no connections: requests cannot be forwarded",
    ))))
}
