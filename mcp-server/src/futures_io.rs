//! hyper's I/O traits over a futures-io stream (smol's sockets, futures-rustls's TLS streams).
//!
//! hyper hands its reader the spare capacity of its read buffer, uninitialised: 8 KiB at first,
//! more after reads that fill it. futures-io reads into initialised bytes only, so an adapter
//! must initialise that capacity before each read. `smol_hyper::rt::FuturesIo` zeroes all of it,
//! which writes every page of every connection's buffer although a request is a few hundred
//! bytes: on ../shared/bench's idle run that was 4.4 KB more per open SSE stream on smol than
//! on tokio, whose sockets read into uninitialised memory. Here the stream reads into one
//! per-thread buffer and only the bytes it read are copied into hyper's, so hyper's buffer is
//! touched where bytes land, as under tokio, and no unsafe code is needed for it.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::io::{AsyncRead, AsyncWrite};
use hyper::rt::ReadBufCursor;

/// The most one read takes: hyper's first read buffer is 8 KiB and grows after reads that fill
/// it, so reads of large bodies come in pieces of this size (one more `read` per 16 KiB beyond
/// the first), and each thread that reads holds one buffer of this size.
const READ_CHUNK: usize = 16 * 1024;

thread_local! {
    /// Read buffers free for the next read on this thread. A read takes one and gives it back,
    /// so a read nested in another (TLS on smol: the TLS stream reads the socket's `FuturesIo`
    /// from inside its own) takes a second: the pool holds as many as reads ever nest, two.
    static SCRATCH: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

/// A futures-io stream (`AsyncRead + AsyncWrite`) in hyper's I/O traits, which the smol shim's
/// connections and every TLS stream are served through. Reads go through a per-thread buffer
/// of 16 KiB, so that the connection's own read buffer is only written where bytes arrive;
/// writes go straight through, vectored writes included.
#[derive(Debug)]
pub struct FuturesIo<T> {
    inner: T,
}

impl<T> FuturesIo<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        FuturesIo { inner }
    }

    /// The stream inside.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// Unwraps the stream.
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: AsyncRead + Unpin> hyper::rt::Read for FuturesIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let want = buf.remaining().min(READ_CHUNK);
        if want == 0 {
            return Poll::Ready(Ok(()));
        }
        let taken = SCRATCH.try_with(|pool| pool.borrow_mut().pop()).ok().flatten();
        let mut scratch = taken.unwrap_or_else(|| vec![0; READ_CHUNK].into_boxed_slice());
        let dst = scratch.get_mut(..want).unwrap_or_default();
        let polled = match Pin::new(&mut self.get_mut().inner).poll_read(cx, dst) {
            Poll::Ready(Ok(n)) => {
                buf.put_slice(dst.get(..n).unwrap_or_default());
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        };
        // A thread whose locals are being torn down drops the buffer instead.
        let _ = SCRATCH.try_with(|pool| pool.borrow_mut().push(scratch));
        polled
    }
}

impl<T: AsyncWrite + Unpin> hyper::rt::Write for FuturesIo<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_close(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::io::Cursor;
    use std::future::poll_fn;

    fn read_all(io: &mut FuturesIo<Cursor<Vec<u8>>>, cap: usize) -> Vec<u8> {
        let mut got = Vec::new();
        loop {
            let mut storage = vec![0u8; cap];
            let mut buf = hyper::rt::ReadBuf::new(&mut storage);
            let polled = futures_util::FutureExt::now_or_never(poll_fn(|cx| {
                hyper::rt::Read::poll_read(Pin::new(&mut *io), cx, buf.unfilled())
            }));
            assert!(matches!(polled, Some(Ok(()))), "a cursor is always ready");
            if buf.filled().is_empty() {
                return got;
            }
            got.extend_from_slice(buf.filled());
        }
    }

    #[test]
    fn reads_every_byte_in_order_whatever_the_buffer_hyper_offers() {
        let data: Vec<u8> = (0..READ_CHUNK * 3 + 17).map(|i| (i % 251) as u8).collect();
        for cap in [1, 7, 4096, READ_CHUNK, READ_CHUNK * 4] {
            let mut io = FuturesIo::new(Cursor::new(data.clone()));
            assert_eq!(read_all(&mut io, cap), data, "buffer of {cap} bytes");
        }
    }

    #[test]
    fn a_read_takes_at_most_one_chunk_and_never_more_than_offered() {
        let data = vec![7u8; READ_CHUNK * 2];
        let mut io = FuturesIo::new(Cursor::new(data));
        let mut storage = vec![0u8; READ_CHUNK * 2];
        let mut buf = hyper::rt::ReadBuf::new(&mut storage);
        let polled = futures_util::FutureExt::now_or_never(poll_fn(|cx| {
            hyper::rt::Read::poll_read(Pin::new(&mut io), cx, buf.unfilled())
        }));
        assert!(matches!(polled, Some(Ok(()))));
        assert_eq!(buf.filled().len(), READ_CHUNK);
        assert_eq!(io.get_ref().position(), READ_CHUNK as u64);
    }

    /// A stream that reads through a `FuturesIo` from inside its own read, as futures-rustls
    /// does over a smol socket.
    struct Nested(FuturesIo<Cursor<Vec<u8>>>);

    impl AsyncRead for Nested {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
            let mut read = hyper::rt::ReadBuf::new(buf);
            match hyper::rt::Read::poll_read(Pin::new(&mut self.get_mut().0), cx, read.unfilled()) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(read.filled().len())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        }
    }

    #[test]
    fn a_read_from_inside_a_read_gets_a_buffer_of_its_own() {
        let data: Vec<u8> = (0..READ_CHUNK * 2 + 5).map(|i| (i % 13) as u8).collect();
        let mut io = FuturesIo::new(Nested(FuturesIo::new(Cursor::new(data.clone()))));
        let mut got = Vec::new();
        loop {
            let mut storage = vec![0u8; 4096];
            let mut buf = hyper::rt::ReadBuf::new(&mut storage);
            let polled = futures_util::FutureExt::now_or_never(poll_fn(|cx| {
                hyper::rt::Read::poll_read(Pin::new(&mut io), cx, buf.unfilled())
            }));
            assert!(matches!(polled, Some(Ok(()))), "a cursor is always ready");
            if buf.filled().is_empty() {
                break;
            }
            got.extend_from_slice(buf.filled());
        }
        assert_eq!(got, data);
        // Every read gave its buffer back: one per level of nesting, however many reads.
        assert_eq!(SCRATCH.with(|pool| pool.borrow().len()), 2);
    }
}
