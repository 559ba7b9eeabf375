//! One session over a pair of byte streams of newline-delimited frames (stdio, or any pipe).

use std::future::Future;
use std::io;
use std::task::Poll;
use std::time::Instant;

use futures_util::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::driver::{command, Room, State};
use crate::handler::BoxFuture;
use crate::runtime::{sleep_until, Runtime};
use crate::server::Server;
use mcp_proto::stdio::LineFramer;
use mcp_proto::{Caller, CloseReason, ConnKind};

/// How a line session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StdioEnd {
    /// The input ended and every call in flight was answered.
    EndOfInput,
    /// The input ended and calls still running after the drain budget were cancelled.
    Drained {
        /// How many were cancelled.
        cancelled: usize,
    },
    /// A line over the frame limit arrived; it was answered with an error and the session ended.
    FrameTooLarge,
    /// The output could not be written (the peer closed it); the session ended.
    OutputClosed,
    /// The server closed the session: [`Server::shutdown`], or a peer that stopped reading its
    /// replies until the connection's queue was full.
    Closed,
    /// Replies were waiting and the peer took none of their bytes for
    /// [`Limits::stall_timeout`](mcp_proto::Limits::stall_timeout); the session was closed (its
    /// calls cancelled) rather than wait for ever on a peer that writes without reading.
    Stalled,
}

/// How the writer stopped.
enum WriteEnd {
    /// The queue ended (the server closed the connection, or every reply was written).
    Done,
    /// The output failed.
    Failed,
    /// The peer took nothing for the stall timeout while replies waited.
    Stalled,
}

/// Writes all of `buf`, failing with [`WriteEnd::Stalled`] when no byte of it is taken for
/// `stall` (the clock restarting at every write that takes some): a slow reader that reads is
/// waited for however long the whole takes.
async fn write_within<R: Runtime, O: AsyncWrite + Unpin>(
    rt: &R,
    output: &mut O,
    mut buf: &[u8],
    stall: std::time::Duration,
) -> Result<(), WriteEnd> {
    while !buf.is_empty() {
        match unless_stalled(rt, stall, output.write(buf)).await {
            Some(Ok(0)) => return Err(WriteEnd::Failed),
            Some(Ok(n)) => buf = buf.get(n..).unwrap_or_default(),
            Some(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Some(Err(_)) => return Err(WriteEnd::Failed),
            None => return Err(WriteEnd::Stalled),
        }
    }
    match unless_stalled(rt, stall, output.flush()).await {
        Some(Ok(())) => Ok(()),
        Some(Err(_)) => Err(WriteEnd::Failed),
        None => Err(WriteEnd::Stalled),
    }
}

/// What `fut` gives, unless it stays pending for `stall` (`None`). The clock is armed only
/// when `fut` first returns pending: a pipe that takes a reply at once (nearly every write)
/// costs no timer, which a reply at a time would otherwise pay twice (write and flush), each
/// a registration, a cancellation and a read of the clock.
async fn unless_stalled<R: Runtime, F: Future>(
    rt: &R,
    stall: std::time::Duration,
    fut: F,
) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut clock: Option<BoxFuture<()>> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        let clock = clock.get_or_insert_with(|| sleep_until(rt, rt.now().checked_add(stall)));
        clock.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// Largest single read; lines longer than this arrive over several reads. Not a
/// [`Limits`](mcp_proto::Limits) field: it sizes a buffer, and bounds nothing a peer can send
/// ([`Limits::max_frame_bytes`](mcp_proto::Limits::max_frame_bytes) does).
const READ_CHUNK: usize = 64 * 1024;
/// Replies are gathered up to this many bytes before one write, so a burst costs one syscall.
/// Not a [`Limits`](mcp_proto::Limits) field for the same reason: throughput tuning, not a bound.
const WRITE_BATCH: usize = 64 * 1024;

/// Serves one session over `input`/`output` until the input ends.
///
/// Requests run concurrently up to the in-flight limit, replies are written as they complete,
/// and notifications get no line. At end of input the session waits up to the server's
/// [`Limits::drain_timeout`](mcp_proto::Limits::drain_timeout) for calls in flight, then cancels
/// the rest. While the connection is at its in-flight limit, at most
/// [`Limits::max_parked_frames`](mcp_proto::Limits::max_parked_frames) further frames are read
/// ahead. Only protocol bytes are written to `output`.
///
/// A peer that writes without reading is not waited on for ever: once replies wait and the peer
/// takes none of their bytes for [`Limits::stall_timeout`](mcp_proto::Limits::stall_timeout),
/// the session is closed and ends with [`StdioEnd::Stalled`]. (The reader stops taking frames
/// while half of [`Limits::max_queued_frames`](mcp_proto::Limits::max_queued_frames) replies
/// are queued, so such a peer is cut by this clock, not by the queue overflowing.)
pub async fn serve_lines<R, I, O>(
    server: &Server,
    rt: R,
    caller: Caller,
    input: I,
    output: O,
) -> io::Result<StdioEnd>
where
    R: Runtime + Clone,
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
{
    let (conn, queue) = server
        .open(&rt, ConnKind::Stdio, caller)
        .map_err(|e| io::Error::other(format!("cannot open a connection: {e:?}")))?;
    let limits = server.limits();
    let (max_frame, queue_cap) = (limits.frame_bytes(), limits.queued_frames());
    let (parked_max, drain, stall) = (limits.parked_frames(), limits.drain_time(), limits.stall_time());
    // Back-pressure: past this many queued replies the reader stops taking frames until the
    // writer has caught up, so a burst of requests can never overflow the connection's queue
    // (which would drop the connection).
    let high_water = (queue_cap / 2).max(1);
    let (drained_tx, drained_rx) = async_channel::bounded::<()>(1);

    let room = Room::new();
    // Frames taken from one read before the reader lets the handlers they started and the
    // writer run (see `Runtime::frames_per_turn`).
    let per_turn = rt.frames_per_turn().max(1);
    let read = async {
        let mut input = input;
        let mut framer = LineFramer::new(max_frame);
        loop {
            let spare = framer.spare(READ_CHUNK);
            let n = match input.read(spare).await {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    framer.commit(READ_CHUNK, 0);
                    continue;
                }
                // A read error ends the input like end of file: nothing more can arrive.
                Err(_) => 0,
            };
            framer.commit(READ_CHUNK, n);
            if n == 0 {
                // A last line without its newline is still a frame.
                let rest = framer.remainder().to_vec();
                if !rest.iter().all(u8::is_ascii_whitespace) {
                    server.send_line_frame(conn, server.decode(&rest), &room).await;
                }
                break None;
            }
            let mut taken = 0usize;
            while let Some(line) = framer.next_line() {
                match line {
                    Ok(frame) => {
                        // Decoded here, on this connection's task: a large or hostile frame
                        // costs this reader, never the driver every connection shares.
                        let decoded = server.decode(frame);
                        server.send_line_frame(conn, decoded, &room).await;
                        taken += 1;
                        if taken % per_turn == 0 {
                            rt.yield_now().await;
                        }
                        room.wait_below(parked_max).await;
                        while queue.len() >= high_water {
                            if drained_rx.recv().await.is_err() {
                                break;
                            }
                        }
                    }
                    Err(too_long) => {
                        let seen = too_long.seen;
                        // After every frame before it, parked ones included.
                        room.wait_below(1).await;
                        server.send(command(move |e, now| e.handle_oversized_frame(now, conn, seen))).await;
                        return Some(CloseReason::FrameTooLarge);
                    }
                }
            }
        }
    };

    let write = async {
        let mut output = output;
        let mut buf = Vec::with_capacity(WRITE_BATCH);
        let rt = rt.clone();
        while let Ok(frame) = queue.recv().await {
            buf.extend_from_slice(&frame);
            buf.push(b'\n');
            while buf.len() < WRITE_BATCH {
                match queue.try_recv() {
                    Ok(frame) => {
                        buf.extend_from_slice(&frame);
                        buf.push(b'\n');
                    }
                    Err(_) => break,
                }
            }
            if let Err(end) = write_within(&rt, &mut output, &buf, stall).await {
                return end;
            }
            buf.clear();
            let _ = drained_tx.try_send(());
        }
        WriteEnd::Done
    };
    futures_util::pin_mut!(write);

    // Read until the input ends (or a frame is too long) while writing concurrently.
    // A writer that stalled after the reader ended leaves the connection open in the engine:
    // closing it cancels its calls, as a stall while reading does.
    let close_if_stalled = |written: &WriteEnd| {
        let stalled = matches!(written, WriteEnd::Stalled);
        async move {
            if stalled {
                server.send(command(move |e, now| e.close(now, conn))).await;
            }
        }
    };
    let read_end = match futures_util::future::select(Box::pin(read), write.as_mut()).await {
        futures_util::future::Either::Left((end, _)) => end,
        futures_util::future::Either::Right((written, _)) => {
            // The writer stops early only when the output failed or stalled, or the server
            // closed the connection (its queue ended).
            server.send(command(move |e, now| e.close(now, conn))).await;
            return Ok(ended(written, StdioEnd::Closed));
        }
    };
    if let Some(CloseReason::FrameTooLarge) = read_end {
        let written = write.await;
        close_if_stalled(&written).await;
        return Ok(ended(written, StdioEnd::FrameTooLarge));
    }

    // End of input comes after every frame that was read, parked ones included.
    room.wait_below(1).await;
    server.send(command(move |e, now| e.close_input(now, conn))).await;
    // `Duration::MAX` (or anything past what `Instant` holds) waits for every call.
    let deadline = rt.now().checked_add(drain);
    let finished = futures_util::future::select(write.as_mut(), sleep_until(&rt, deadline)).await;
    match finished {
        futures_util::future::Either::Left((written, _)) => {
            close_if_stalled(&written).await;
            Ok(ended(written, StdioEnd::EndOfInput))
        }
        futures_util::future::Either::Right(_) => {
            let cancelled = server
                .request(move |_: &Server, st: &mut State, now: Instant| {
                    let n = st.engine.in_flight(conn);
                    st.engine.close(now, conn);
                    n
                })
                .await
                .unwrap_or(0);
            Ok(ended(write.await, StdioEnd::Drained { cancelled }))
        }
    }
}

/// How the session ended, given how the writer stopped and what a writer that wrote everything
/// makes of it.
fn ended(written: WriteEnd, done: StdioEnd) -> StdioEnd {
    match written {
        WriteEnd::Done => done,
        WriteEnd::Failed => StdioEnd::OutputClosed,
        WriteEnd::Stalled => StdioEnd::Stalled,
    }
}
