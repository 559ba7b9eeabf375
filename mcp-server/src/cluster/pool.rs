//! The kept-alive connections of a replica to the holders it forwards to ([`ForwardPool`]), held
//! by its cluster membership, and the lease a forwarded response's body keeps on its connection.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::{select, AbortHandle, Either};
use http_body::{Body, Frame, SizeHint};
use hyper::client::conn::http1::SendRequest;

use crate::handler::BoxFuture;
use crate::runtime::Runtime;

/// Idle kept-alive connections a replica keeps at most to one holder: 8. A connection whose
/// response was read to its end is kept for the next forward to its holder; past this many
/// waiting for the same holder it is closed instead. Sequential forwards need one; more serve
/// bursts of concurrent ones, and every kept connection also counts against this replica's
/// address on the holder
/// ([`Limits::max_http_connections_per_peer`](mcp_proto::Limits::max_http_connections_per_peer),
/// 256 by default) while it waits.
pub const MAX_IDLE_PER_HOLDER: usize = 8;

/// Idle kept-alive connections a replica keeps at most to all holders together: 64. Past it a
/// connection whose response was read to its end is closed instead of kept, so a replica
/// forwarding to many holders keeps no more sockets idle than this.
pub const MAX_IDLE_FORWARDS: usize = 64;

/// How long a kept-alive connection to a holder waits for the next forward at most: 4 s, and
/// never more than half this replica's own
/// [`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout) (10 s by default).
/// The holder closes a connection that idles past its header read timeout; one closed there
/// while a request is being written on it would fail that request, which cannot be sent again
/// (it may have reached the holder). Replicas of one cluster normally share their limits, so
/// closing here first, well before the holder would, leaves that race to a holder configured
/// apart. A connection idle for longer is closed.
pub const FORWARD_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// How long a kept connection waits for its next forward on a replica whose header read
/// timeout is `header_timeout` (see [`FORWARD_IDLE_TIMEOUT`]).
pub(crate) fn idle_for(header_timeout: Duration) -> Duration {
    FORWARD_IDLE_TIMEOUT.min(header_timeout / 2)
}

/// Aborts the forwarded connection's task when dropped.
pub(crate) struct AbortOnDrop(pub(crate) AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Where a holder is reached: the host and port of its advertised URL.
pub(crate) type Holder = (String, u16);

/// A connection to a holder: what sends requests on it, and its task. Dropping it aborts the
/// task, which closes the socket.
pub(crate) struct Conn {
    pub(crate) sender: SendRequest<http_body_util_full::Full>,
    pub(crate) _task: AbortOnDrop,
}

/// A kept connection waiting for its next forward, until `expires`.
struct Idle {
    conn: Conn,
    expires: Instant,
}

/// The kept-alive connections of a replica to the holders it forwards to, waiting for their
/// next forward: at most [`MAX_IDLE_PER_HOLDER`] per holder, [`MAX_IDLE_FORWARDS`] in all, each
/// for at most [`FORWARD_IDLE_TIMEOUT`] (see "Costs" in the module docs).
#[derive(Default)]
pub(crate) struct ForwardPool {
    inner: Mutex<PoolInner>,
}

#[derive(Default)]
struct PoolInner {
    /// By holder, the most recently kept last; no holder with none.
    by_holder: HashMap<Holder, Vec<Idle>>,
    /// The connections in `by_holder`, all holders together.
    total: usize,
    /// Whether a task is closing the connections that wait past their time ([`ForwardPool::reap`]).
    reaping: bool,
}

impl PoolInner {
    /// Closes the connections whose time is up at `now`, and forgets those the holder closed.
    fn prune(&mut self, now: Instant) {
        let mut total = 0;
        self.by_holder.retain(|_, idle| {
            idle.retain(|i| i.expires > now && !i.conn.sender.is_closed());
            total += idle.len();
            !idle.is_empty()
        });
        self.total = total;
    }
}

impl ForwardPool {
    /// A kept connection to `holder` ready for a request, the most recently kept first; those
    /// closed, not ready or past their time on the way are closed.
    pub(crate) fn take(&self, holder: &Holder, now: Instant) -> Option<Conn> {
        let mut inner = self.inner.lock().ok()?;
        let idle = inner.by_holder.get_mut(holder)?;
        let before = idle.len();
        let mut found = None;
        while let Some(i) = idle.pop() {
            if i.expires > now && i.conn.sender.is_ready() {
                found = Some(i.conn);
                break;
            }
        }
        let (taken, empty) = (before - idle.len(), idle.is_empty());
        if empty {
            inner.by_holder.remove(holder);
        }
        inner.total = inner.total.saturating_sub(taken);
        found
    }

    /// Keeps `conn` to `holder` until `expires`, unless that is past or a bound is reached:
    /// then it is dropped, which closes it.
    fn put(self: &Arc<Self>, rt: &Arc<dyn Runtime>, holder: Holder, conn: Conn, expires: Instant) {
        let now = rt.now();
        let Ok(mut inner) = self.inner.lock() else { return };
        inner.prune(now);
        if expires <= now || inner.total >= MAX_IDLE_FORWARDS {
            return;
        }
        let idle = inner.by_holder.entry(holder).or_default();
        if idle.len() >= MAX_IDLE_PER_HOLDER {
            return;
        }
        idle.push(Idle { conn, expires });
        inner.total += 1;
        if !inner.reaping {
            inner.reaping = true;
            rt.spawn(self.clone().reap(rt.clone()));
        }
    }

    /// Closes each kept connection when its time is up, until none is kept: an idle socket
    /// lives no longer than [`FORWARD_IDLE_TIMEOUT`] even when no forward comes.
    fn reap(self: Arc<Self>, rt: Arc<dyn Runtime>) -> BoxFuture<()> {
        Box::pin(async move {
            loop {
                let next = {
                    let Ok(mut inner) = self.inner.lock() else { return };
                    inner.prune(rt.now());
                    match inner.by_holder.values().flatten().map(|i| i.expires).min() {
                        Some(next) => next,
                        None => {
                            inner.reaping = false;
                            return;
                        }
                    }
                };
                rt.sleep_until(next).await;
            }
        })
    }
}

/// The connection a forwarded response came on, until its body is done with.
pub(crate) struct Lease {
    pub(crate) conn: Conn,
    pub(crate) holder: Holder,
    pub(crate) pool: Arc<ForwardPool>,
    pub(crate) rt: Arc<dyn Runtime>,
    pub(crate) idle_for: Duration,
}

impl Lease {
    /// Gives the connection, whose response was read to its end, back to the pool, once it is
    /// ready for another request; one the holder closes (a `Connection: close` answer) or
    /// that is not ready within its time is closed.
    pub(crate) fn release(self) {
        let Lease { mut conn, holder, pool, rt, idle_for } = self;
        let Some(expires) = rt.now().checked_add(idle_for) else { return };
        if conn.sender.is_ready() {
            pool.put(&rt, holder, conn, expires);
            return;
        }
        if conn.sender.is_closed() {
            return;
        }
        // The connection's task has yet to see the end of the response it read.
        rt.clone().spawn(Box::pin(async move {
            let ready = {
                let ready = std::pin::pin!(conn.sender.ready());
                matches!(select(ready, rt.sleep_until(expires)).await, Either::Left((Ok(()), _)))
            };
            if ready {
                pool.put(&rt, holder, conn, expires);
            }
        }));
    }
}

/// A one-buffer request body (hyper's client needs a `Body`; `http-body-util` is not a
/// dependency for this one type).
pub(crate) use http_body_util_full::Full;

mod http_body_util_full {
    use super::*;

    /// The whole body, sent as one frame.
    pub(crate) struct Full(pub(crate) Option<Bytes>);

    impl Body for Full {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.get_mut().0.take().filter(|b| !b.is_empty()).map(|b| Ok(Frame::data(b))))
        }

        fn is_end_stream(&self) -> bool {
            self.0.as_ref().is_none_or(Bytes::is_empty)
        }

        fn size_hint(&self) -> SizeHint {
            SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    struct Quiet;

    impl hyper::rt::Read for Quiet {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: hyper::rt::ReadBufCursor<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Pending
        }
    }

    impl hyper::rt::Write for Quiet {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// A runtime whose clock moves by hand and whose tasks never run.
    struct Still(Mutex<Instant>);

    impl Runtime for Still {
        fn spawn(&self, _: BoxFuture<()>) {}
        fn sleep_until(&self, _: Instant) -> BoxFuture<()> {
            Box::pin(std::future::pending())
        }
        fn now(&self) -> Instant {
            *self.0.lock().unwrap()
        }
    }

    type Task = Pin<Box<hyper::client::conn::http1::Connection<Quiet, http_body_util_full::Full>>>;

    /// A connection ready for a request, its task (polled once, kept by the caller: dropping
    /// it closes the connection) and the handle that tells whether it was closed.
    fn ready_conn() -> (Conn, Task, AbortHandle) {
        use futures_util::FutureExt;
        let (sender, task) = hyper::client::conn::http1::handshake::<_, http_body_util_full::Full>(Quiet)
            .now_or_never()
            .unwrap()
            .unwrap();
        let mut task = Box::pin(task);
        let _ = std::future::Future::poll(
            task.as_mut(),
            &mut Context::from_waker(futures_util::task::noop_waker_ref()),
        );
        assert!(sender.is_ready());
        let (abort, _) = AbortHandle::new_pair();
        (Conn { sender, _task: AbortOnDrop(abort.clone()) }, task, abort)
    }

    #[test]
    fn the_pool_keeps_a_bounded_number_of_connections_for_a_bounded_time() {
        let now = Instant::now();
        let clock = Arc::new(Still(Mutex::new(now)));
        let rt: Arc<dyn Runtime> = clock.clone();
        let pool = Arc::new(ForwardPool::default());
        let later = now + FORWARD_IDLE_TIMEOUT;
        let mut tasks = Vec::new();
        let mut put = |holder: &str, expires: Instant| {
            let (conn, task, abort) = ready_conn();
            tasks.push(task);
            pool.put(&rt, (holder.to_owned(), 80), conn, expires);
            abort
        };
        let a = ("a".to_owned(), 80);
        for _ in 0..MAX_IDLE_PER_HOLDER {
            assert!(!put("a", later).is_aborted());
        }
        assert!(put("a", later).is_aborted(), "one more for the holder is closed");
        // Other holders, up to the bound in all.
        for i in 0..MAX_IDLE_FORWARDS - MAX_IDLE_PER_HOLDER {
            assert!(!put(&format!("h{}", i / MAX_IDLE_PER_HOLDER), later).is_aborted());
        }
        assert!(put("one more", later).is_aborted(), "one more in all is closed");
        assert_eq!(pool.inner.lock().unwrap().total, MAX_IDLE_FORWARDS);
        assert!(put("a", now).is_aborted(), "a connection already past its time is closed");

        assert!(pool.take(&a, now).is_some());
        assert_eq!(pool.inner.lock().unwrap().total, MAX_IDLE_FORWARDS - 1);
        assert!(pool.take(&("nobody".to_owned(), 80), now).is_none());
        // Past their time, the kept connections are closed instead of taken.
        *clock.0.lock().unwrap() = later;
        assert!(pool.take(&a, later).is_none());
        pool.inner.lock().unwrap().prune(later);
        assert_eq!(pool.inner.lock().unwrap().total, 0);
        assert!(pool.inner.lock().unwrap().by_holder.is_empty());
    }

    #[test]
    fn a_kept_connection_waits_half_the_header_read_timeout_at_most() {
        assert_eq!(idle_for(Duration::from_secs(10)), FORWARD_IDLE_TIMEOUT);
        assert_eq!(idle_for(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(idle_for(Duration::ZERO), Duration::ZERO);
    }
}
