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
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_CHUNK].into_boxed_slice());
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
        let inner = &mut self.get_mut().inner;
        SCRATCH.with(|scratch| {
            // A stream that reads another `FuturesIo` from inside its own read (none of ours
            // does) finds the buffer taken and reads into one of its own.
            let mut own;
            let mut taken = scratch.try_borrow_mut();
            let dst: &mut [u8] = match taken.as_deref_mut() {
                Ok(shared) => shared,
                Err(_) => {
                    own = vec![0; want];
                    &mut own
                }
            };
            let dst = dst.get_mut(..want).unwrap_or_default();
            match Pin::new(inner).poll_read(cx, dst) {
                Poll::Ready(Ok(n)) => {
                    buf.put_slice(dst.get(..n).unwrap_or_default());
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        })
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

    #[test]
    fn a_read_from_inside_a_read_gets_a_buffer_of_its_own() {
        // Holding the thread's buffer, as a stream reading another FuturesIo would.
        SCRATCH.with(|scratch| {
            let _held = scratch.borrow_mut();
            let mut io = FuturesIo::new(Cursor::new(b"nested".to_vec()));
            assert_eq!(read_all(&mut io, 64), b"nested");
        });
    }
}
