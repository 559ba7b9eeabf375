//! Waiting for a connection's first bytes before hyper takes it.
//!
//! hyper's HTTP/1.1 connection allocates its buffers when it is made and first polled: 8 KiB
//! for the heads it writes and 8 KiB for what it reads, reserved before the first read. A
//! connection that has sent nothing yet (a client's pool opening ahead, a port scan, a
//! slowloris) would hold both for as long as the header read timeout lets it. Reading the
//! first few bytes into a small inline buffer first, and only then handing hyper the
//! connection with those bytes put back in front, makes an idle connection cost its socket and
//! one small task.
//!
//! The bytes put back are given together with what the connection has ready behind them, in one
//! read: hyper's read buffer grows by doubling when a read leaves it less than 8 KiB of room,
//! so a first read of only the few bytes kept here would have it grow to 16 KiB for the rest
//! of the head, and keep that for the connection's life (an open SSE stream included).

use std::io;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::{poll_fn, select, Either};
use hyper::rt::{Read, ReadBuf, ReadBufCursor, Write};

/// How many bytes the first read takes at most: enough for a request line's start, small
/// enough to live in the connection's task.
const FIRST: usize = 16;

/// How much of what follows the first bytes the read that gives them back takes at most: a
/// request head of the usual size, copied through the stack once per connection.
const BEHIND: usize = 4096;

/// How the wait for a connection's first bytes ended.
pub(super) enum First<I> {
    /// Bytes arrived: the connection, with them to be read again first.
    Bytes(Prefixed<I>),
    /// The peer closed the connection (or it failed) before sending a byte.
    Closed,
    /// Nothing arrived within the wait.
    Late,
}

/// Reads the first bytes of `io`, waiting at most `wait` (`None`: without a bound) measured by
/// `timer`.
pub(super) async fn first_bytes<I, T>(mut io: I, timer: &T, wait: Option<Duration>) -> First<I>
where
    I: Read + Unpin,
    T: hyper::rt::Timer,
{
    let mut bytes = [0u8; FIRST];
    let read = poll_fn(|cx| {
        let mut buf = ReadBuf::new(&mut bytes);
        match Pin::new(&mut io).poll_read(cx, buf.unfilled()) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    });
    let got = match wait {
        Some(wait) => match select(pin!(read), timer.sleep(wait)).await {
            Either::Left((got, _)) => got,
            Either::Right(_) => return First::Late,
        },
        None => read.await,
    };
    match got {
        Ok(0) | Err(_) => First::Closed,
        Ok(len) => First::Bytes(Prefixed { io, bytes, at: 0, len: len.min(FIRST), failed: None }),
    }
}

/// A connection whose first bytes were read already: they are read again first.
pub(super) struct Prefixed<I> {
    io: I,
    bytes: [u8; FIRST],
    /// The next of `bytes` to give back, up to `len`.
    at: usize,
    len: usize,
    /// The error the connection gave while the read that returned the first bytes looked for
    /// more: the next read's.
    failed: Option<io::Error>,
}

impl<I: Read + Unpin> Read for Prefixed<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(e) = this.failed.take() {
            return Poll::Ready(Err(e));
        }
        let left = this.bytes.get(this.at..this.len).unwrap_or_default();
        if left.is_empty() {
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let n = left.len().min(buf.remaining());
        buf.put_slice(left.get(..n).unwrap_or_default());
        this.at += n;
        if this.at < this.len || buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        // What the connection has ready behind them, in the same read (see the module's note).
        let mut behind = [0u8; BEHIND];
        let room = buf.remaining().min(BEHIND);
        let mut more = ReadBuf::new(behind.get_mut(..room).unwrap_or_default());
        match Pin::new(&mut this.io).poll_read(cx, more.unfilled()) {
            Poll::Ready(Ok(())) => buf.put_slice(more.filled()),
            // The bytes given are this read's answer; the error is the next one's.
            Poll::Ready(Err(e)) => this.failed = Some(e),
            Poll::Pending => {}
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: Write + Unpin> Write for Prefixed<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// What is left of `wait` once `spent` of it is gone (`None` stays without a bound).
pub(super) fn rest_of(wait: Option<Duration>, spent: Duration) -> Option<Duration> {
    wait.map(|wait| wait.saturating_sub(spent))
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;

    /// A connection that gives its bytes a few at a time, then ends (or, with `fails`, fails).
    struct Script {
        data: Vec<u8>,
        at: usize,
        step: usize,
        fails: bool,
    }

    impl Script {
        fn new(data: &[u8], step: usize) -> Self {
            Self { data: data.to_vec(), at: 0, step, fails: false }
        }
    }

    impl Read for Script {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            mut buf: ReadBufCursor<'_>,
        ) -> Poll<io::Result<()>> {
            let this = &mut *self;
            if this.fails && this.at == this.data.len() {
                return Poll::Ready(Err(io::Error::from(io::ErrorKind::ConnectionReset)));
            }
            let end = (this.at + this.step).min(this.data.len());
            let n = (end - this.at).min(buf.remaining());
            buf.put_slice(&this.data[this.at..this.at + n]);
            this.at += n;
            Poll::Ready(Ok(()))
        }
    }

    /// A timer whose every sleep is over at once (`Timer(true)`) or never (`Timer(false)`).
    struct Timer(bool);

    impl hyper::rt::Timer for Timer {
        fn sleep(&self, _: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
            Box::pin(Sleep(self.0))
        }
        fn sleep_until(&self, _: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
            Box::pin(Sleep(self.0))
        }
    }

    /// A connection that never sends.
    struct Silent;

    impl Read for Silent {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: ReadBufCursor<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Pending
        }
    }

    /// A sleep that is over (`true`) or never ends (`false`).
    struct Sleep(bool);

    impl Future for Sleep {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }
    }

    impl hyper::rt::Sleep for Sleep {}

    /// One read of at most `size` bytes; the script never waits.
    fn read_once(io: &mut (impl Read + Unpin), size: usize) -> io::Result<Vec<u8>> {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut bytes = vec![0u8; size];
        let mut buf = ReadBuf::new(&mut bytes);
        match Pin::new(io).poll_read(&mut cx, buf.unfilled()) {
            Poll::Ready(Ok(())) => Ok(buf.filled().to_vec()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => panic!("the script never waits"),
        }
    }

    fn read_all(mut io: impl Read + Unpin, chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            match read_once(&mut io, chunk) {
                Ok(bytes) if bytes.is_empty() => return out,
                Ok(bytes) => out.extend_from_slice(&bytes),
                Err(e) => panic!("unexpected {e}"),
            }
        }
    }

    fn now<F: Future>(f: F) -> F::Output {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut f = pin!(f);
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("the script never waits"),
        }
    }

    #[test]
    fn the_first_bytes_are_read_again_in_order_whatever_the_reader_asks_for() {
        let data = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}".to_vec();
        for step in [1, 3, 16, 64] {
            for chunk in [1, 5, 16, 4096] {
                let io = Script::new(&data, step);
                let First::Bytes(io) = now(first_bytes(io, &Timer(false), Some(Duration::from_secs(1))))
                else {
                    panic!("bytes were there");
                };
                assert_eq!(read_all(io, chunk), data, "step {step}, chunk {chunk}");
            }
        }
    }

    /// One read gives hyper the kept bytes and what is ready behind them, so that its buffer
    /// never has to grow for the rest of a head that arrived whole.
    #[test]
    fn the_first_read_gives_the_kept_bytes_with_what_is_ready_behind_them() {
        let data = [b'x'; 200];
        let First::Bytes(mut io) = now(first_bytes(Script::new(&data, 100), &Timer(false), None)) else {
            panic!("bytes were there");
        };
        // The 16 kept, then the 100 the script gives its next read.
        assert_eq!(read_once(&mut io, 8192).map(|b| b.len()).ok(), Some(FIRST + 100));
    }

    /// A connection that fails while the first read looks behind the kept bytes: they are
    /// given, and the error is the next read's.
    #[test]
    fn an_error_behind_the_kept_bytes_is_the_next_reads() {
        // All the script has is kept, so the read behind it is the one that fails.
        let io = Script { fails: true, ..Script::new(b"GET / HT", 8) };
        let First::Bytes(mut io) = now(first_bytes(io, &Timer(false), None)) else {
            panic!("bytes were there");
        };
        let mut got = Vec::new();
        let failed = loop {
            match read_once(&mut io, 64) {
                Ok(bytes) => got.extend_from_slice(&bytes),
                Err(e) => break e,
            }
        };
        assert_eq!(failed.kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(got, b"GET / HT");
    }

    #[test]
    fn a_connection_closed_before_its_first_byte_is_closed() {
        let io = Script::new(&[], 4);
        assert!(matches!(now(first_bytes(io, &Timer(false), None)), First::Closed));
    }

    #[test]
    fn a_connection_that_sends_nothing_within_the_wait_is_late() {
        assert!(matches!(now(first_bytes(Silent, &Timer(true), Some(Duration::from_secs(1)))), First::Late));
    }

    #[test]
    fn what_is_left_of_the_wait_never_goes_below_zero() {
        let wait = Some(Duration::from_secs(10));
        assert_eq!(rest_of(wait, Duration::from_secs(4)), Some(Duration::from_secs(6)));
        assert_eq!(rest_of(wait, Duration::from_secs(40)), Some(Duration::ZERO));
        assert_eq!(rest_of(None, Duration::from_secs(4)), None);
    }
}
