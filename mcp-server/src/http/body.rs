//! The body of every response the HTTP service gives ([`McpBody`]): a complete buffer, an SSE
//! stream fed by the engine or a forwarded response, and what it keeps counted while it lives
//! (its connection's work, its exchange in the engine).

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures_util::stream::Stream;
use http_body::{Body, Frame, SizeHint};

use super::Reseated;
use crate::body::StreamDropped;
use crate::driver::{HttpItem, State};
use crate::server::Server;
use mcp_proto::ConnId;

/// One request of a connection being answered, until dropped.
#[derive(Debug)]
pub(crate) struct Busy(Arc<AtomicUsize>);

impl Busy {
    pub(crate) fn enter(count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Busy(count)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Closes `conn` in the engine when dropped while still armed.
pub(crate) struct CloseGuard {
    pub(crate) server: Server,
    pub(crate) conn: Option<ConnId>,
}

impl CloseGuard {
    /// The engine has already forgotten the exchange.
    pub(crate) fn disarm(&mut self) {
        self.conn = None;
    }
}

impl CloseGuard {
    /// Tells the engine the body took one more frame ([`Engine::written`](mcp_proto::Engine::written)),
    /// before handing it on. Synchronously, as the operator calls lock the engine: the engine
    /// folds a change notification into an identical one it believes unwritten, so it must
    /// never believe that of one the client may already have read (a queued report would let
    /// a change made just after the client read its notification vanish).
    pub(crate) fn report_taken(&self) {
        if let Some(conn) = self.conn {
            self.server.with_engine(|engine, now| engine.written(now, conn, 1));
        }
    }
}

impl Drop for CloseGuard {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.server.submit(Box::new(move |_: &Server, st: &mut State, now: Instant| {
                st.engine.close(now, conn);
            }));
        }
    }
}

/// The body of every response [`HttpService`](crate::HttpService) gives: a complete buffer, or an SSE stream fed by
/// the engine.
///
/// A stream yields each queued chunk as its own frame, so hyper writes (and flushes) an event as
/// soon as the engine produces it. Dropping a stream before its end (the client disconnected)
/// closes the exchange in the engine, which cancels the calls it was waiting for.
pub struct McpBody {
    pub(crate) kind: Kind,
    /// The request it answers, counted as its connection's work until the body is dropped.
    pub(crate) busy: Option<Busy>,
    /// For a forwarded request, its connection counted against the forwarded client's
    /// address until the body is dropped.
    pub(crate) reseated: Option<Reseated>,
}

pub(crate) enum Kind {
    Full(Option<Bytes>),
    /// A response another replica gave to a request forwarded to it.
    Forwarded(Pin<Box<crate::body::Forwarded>>),
    Stream {
        queue: Pin<Box<async_channel::Receiver<HttpItem>>>,
        guard: CloseGuard,
        dropped: Arc<std::sync::atomic::AtomicBool>,
    },
}

impl McpBody {
    /// A complete body.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        Self { kind: Kind::Full(Some(bytes).filter(|b| !b.is_empty())), busy: None, reseated: None }
    }

    /// An empty body.
    pub fn empty() -> Self {
        Self { kind: Kind::Full(None), busy: None, reseated: None }
    }

    /// The body of a response forwarded from the replica that holds the session or task.
    pub(crate) fn forwarded(body: crate::body::Forwarded) -> Self {
        Self { kind: Kind::Forwarded(Box::pin(body)), busy: None, reseated: None }
    }
}

impl fmt::Debug for McpBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Full(bytes) => {
                f.debug_struct("McpBody").field("len", &bytes.as_ref().map_or(0, Bytes::len)).finish()
            }
            Kind::Stream { .. } => f.write_str("McpBody(stream)"),
            Kind::Forwarded(_) => f.write_str("McpBody(forwarded)"),
        }
    }
}

impl Body for McpBody {
    type Data = Bytes;
    type Error = StreamDropped;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StreamDropped>>> {
        match &mut self.get_mut().kind {
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Forwarded(body) => body.as_mut().poll_frame(cx),
            Kind::Stream { queue, guard, dropped } => loop {
                match queue.as_mut().poll_next(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(HttpItem::Frame(bytes))) => {
                        guard.report_taken();
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(bytes)))));
                    }
                    // Only bytes follow a stream's head.
                    Poll::Ready(Some(_)) => continue,
                    Poll::Ready(None) => {
                        // The engine closed the stream (or dropped a subscriber that fell behind,
                        // and closed it): it has already forgotten the exchange.
                        guard.disarm();
                        if dropped.load(std::sync::atomic::Ordering::Acquire) {
                            // Ending it gracefully would wait for a peer that does not read to
                            // take the rest; an error makes hyper cut the connection now.
                            return Poll::Ready(Some(Err(StreamDropped)));
                        }
                        return Poll::Ready(None);
                    }
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Forwarded(body) => body.is_end_stream(),
            kind => matches!(kind, Kind::Full(None)),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Forwarded(body) => body.size_hint(),
            Kind::Stream { .. } => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_bodies_report_their_length() {
        let body = McpBody::full(&b"{}"[..]);
        assert_eq!(body.size_hint().exact(), Some(2));
        assert!(!body.is_end_stream());
        assert!(McpBody::full(Vec::new()).is_end_stream());
        assert_eq!(McpBody::empty().size_hint().exact(), Some(0));
    }
}
