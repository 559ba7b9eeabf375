//! What a forwarded response's body is made of, below both the HTTP service and the forwarding
//! that produce it: [`Forwarded`], the body streamed from the holder (its connection leased from
//! the pool), and [`StreamDropped`], the error a response body ends with when it is cut.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::cluster::pool::Lease;

/// Why an SSE body ended in an error: its reader kept its queue
/// ([`Limits::stream_queue_len`](mcp_proto::Limits::stream_queue_len) frames) full and took
/// nothing for [`Limits::stall_time`](mcp_proto::Limits::stall_time), and was cut
/// ([`CloseReason::Stalled`](mcp_proto::CloseReason::Stalled)). The connection is cut too,
/// which frees its place at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamDropped;

impl fmt::Display for StreamDropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the client stopped reading its event stream and was cut")
    }
}

impl std::error::Error for StreamDropped {}

/// The body of a forwarded response, streamed from the holder.
pub(crate) struct Forwarded {
    pub(crate) body: hyper::body::Incoming,
    /// Its connection: back to the pool when the body was read to its end, else closed.
    pub(crate) lease: Option<Lease>,
    /// Whether the body reported its end.
    pub(crate) ended: bool,
}

impl Drop for Forwarded {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else { return };
        // A body dropped before its end leaves the rest unread on the connection: closing it
        // (dropping the lease) is also what tells the holder the client went.
        if self.ended || self.body.is_end_stream() {
            lease.release();
        }
    }
}

impl Forwarded {
    pub(crate) fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StreamDropped>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                this.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            // The holder went away mid-body: cutting the client's connection tells it so.
            Poll::Ready(Some(Err(e))) => {
                tracing::debug!(error = %e, "a forwarded response broke off");
                Poll::Ready(Some(Err(StreamDropped)))
            }
        }
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
