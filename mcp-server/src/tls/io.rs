//! hyper's I/O traits seen as futures-io's, so that futures-rustls runs over whatever
//! connection a shim hands the server layer (its listener's, or `Runtime::connect`'s).
//! The other way round is [`crate::FuturesIo`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A hyper connection as a futures-io stream.
pub(crate) struct HyperStream<T>(pub(crate) T);

impl<T: hyper::rt::Read + Unpin> futures_util::io::AsyncRead for HyperStream<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut read = hyper::rt::ReadBuf::new(buf);
        match Pin::new(&mut self.get_mut().0).poll_read(cx, read.unfilled()) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(read.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: hyper::rt::Write + Unpin> futures_util::io::AsyncWrite for HyperStream<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
