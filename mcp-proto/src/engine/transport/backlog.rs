//! Back-pressure for paced connections ([`Engine::pace`](crate::engine::Engine::pace)): the frames
//! handed to the shim that its writer has not taken yet, which of them are change notifications
//! a later one like it can ride on, and since when the reader has sat on them.
//!
//! The queue that overflows under a notification burst is the shim's (one bounded channel per
//! response body), not the engine's: the engine coalesces what is owed between two drains, but
//! every drain of a busy server (each handler completion, each registry edit) hands the shim a
//! fresh `list_changed`. Mirroring that queue here lets the engine stop adding what the reader
//! will learn anyway, and tell a reader that is behind from one that is gone.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::engine::state::streams::Transport;
use crate::engine::state::timers::Timer;
use crate::engine::{CloseReason, ConnId, Engine, Output};

/// One paced connection's frames in the shim's queue, oldest first.
#[derive(Debug)]
pub(in crate::engine) struct Backlog {
    /// [`Limits::stream_queue`](crate::limits::Limits::stream_queue), at least 1.
    cap: usize,
    /// One entry per frame handed out and not yet taken: the notification it carries when a
    /// later identical one may be folded into it.
    frames: VecDeque<Option<Box<[u8]>>>,
    /// How many of `frames` carry each such notification.
    notes: HashMap<Box<[u8]>, usize>,
    /// Since when the reader has had something to read and taken nothing.
    waiting_since: Instant,
    /// A stall check is armed.
    armed: bool,
}

impl Backlog {
    /// An empty backlog of at most `cap` frames (at least 1) before it counts as full.
    pub(in crate::engine) fn new(cap: usize, now: Instant) -> Self {
        Self {
            cap: cap.max(1),
            frames: VecDeque::new(),
            notes: HashMap::new(),
            waiting_since: now,
            armed: false,
        }
    }

    /// Frames handed out and not yet taken.
    pub(in crate::engine) fn len(&self) -> usize {
        self.frames.len()
    }

    /// As many frames are waiting as the queue holds: only what must not be lost goes on.
    pub(in crate::engine) fn is_full(&self) -> bool {
        self.frames.len() >= self.cap
    }

    /// Whether this notification is still waiting to be taken, so a new one would say nothing
    /// the reader will not learn from it.
    pub(in crate::engine) fn holds(&self, note: &[u8]) -> bool {
        self.notes.contains_key(note)
    }

    /// A frame was handed out at `now`, carrying `note` if it may stand for later ones like it.
    pub(in crate::engine) fn push(&mut self, now: Instant, note: Option<Box<[u8]>>) {
        if self.frames.is_empty() {
            self.waiting_since = now;
        }
        if let Some(n) = &note {
            *self.notes.entry(n.clone()).or_default() += 1;
        }
        self.frames.push_back(note);
    }

    /// Marks the newest frame as carrying `note` (it was handed out by a path that does not
    /// know what it carries).
    pub(in crate::engine) fn tag_newest(&mut self, note: Box<[u8]>) {
        let Some(slot) = self.frames.back_mut() else { return };
        let old = slot.replace(note.clone());
        *self.notes.entry(note).or_default() += 1;
        if let Some(old) = old {
            self.forget(&old);
        }
    }

    /// The writer took `frames` frames at `now` (more than are waiting counts as all).
    pub(in crate::engine) fn taken(&mut self, now: Instant, frames: usize) {
        let n = frames.min(self.frames.len());
        for _ in 0..n {
            if let Some(Some(note)) = self.frames.pop_front() {
                self.forget(&note);
            }
        }
        if n > 0 {
            self.waiting_since = now;
        }
    }

    fn forget(&mut self, note: &[u8]) {
        if let Some(count) = self.notes.get_mut(note) {
            *count -= 1;
            if *count == 0 {
                self.notes.remove(note);
            }
        }
    }

    /// When the reader counts as stalled if it takes nothing before then: `stall` past the
    /// later of its last progress and the moment it was given something to read. `None` while
    /// it is not full, or when that instant is past what the clock can express.
    pub(in crate::engine) fn stalls_at(&self, stall: Duration) -> Option<Instant> {
        if !self.is_full() {
            return None;
        }
        self.waiting_since.checked_add(stall)
    }

    /// Records whether a stall check is armed; returns whether one was.
    pub(in crate::engine) fn set_armed(&mut self, armed: bool) -> bool {
        std::mem::replace(&mut self.armed, armed)
    }
}

impl<H: Clone> Engine<H> {
    /// Paces `conn`: from now on the shim reports, with [`written`](Self::written), every frame
    /// of `conn` its writer takes off its queue, and the engine keeps that queue within
    /// [`Limits::stream_queue`](crate::limits::Limits::stream_queue) rather than let the shim find it
    /// overflowing:
    ///
    /// - a change notification (`notifications/*/list_changed`, or
    ///   `notifications/resources/updated` for one URI) identical to one still queued is not
    ///   queued again: the reader learns of the change from the one it has not read yet, and
    ///   lists (or reads) after reading it;
    /// - while the queue is full, change notifications wait, coalesced as ever (one per list
    ///   and URI), and go out as the reader takes frames, after what was queued before them;
    /// - while it is full, progress and log notifications are dropped and counted
    ///   ([`EngineStatus::dropped_notifications`](crate::engine::EngineStatus::dropped_notifications));
    ///   keep-alive comments are skipped;
    /// - responses, requests to the client and the stream's opening events are always queued,
    ///   past the bound if need be (they are bounded by the calls in flight and the replay
    ///   buffer), and never dropped;
    /// - a reader that keeps its queue full and takes nothing for
    ///   [`Limits::stall_timeout`](crate::limits::Limits::stall_timeout) is cut:
    ///   [`Output::Close`] with [`CloseReason::Stalled`]. A legacy session's resumable `POST`
    ///   stream is then kept as if the client had dropped it (its calls go on; the client may
    ///   resume it with `Last-Event-ID`);
    /// - once the client drops a resumable stream, it is no longer paced: what its calls send
    ///   is kept for the resume, whatever was queued when it went.
    ///
    /// Frames of `conn` already handed out or waiting in [`poll_output`](Self::poll_output)
    /// count as queued. A connection that is never paced is not bounded here (the shim
    /// bounds its own queue). Meant for HTTP streams and exchanges; pacing an unknown connection
    /// does nothing.
    pub fn pace(&mut self, conn: ConnId) {
        let queued =
            self.out.iter().filter(|o| matches!(o, Output::Frame { conn: c, .. } if *c == conn)).count();
        let (cap, clock) = (self.config.limits.stream_queue_len(), self.clock);
        let Some(c) = self.conns.get_mut(conn.0) else { return };
        let mut backlog = Backlog::new(cap, clock);
        for _ in 0..queued {
            backlog.push(clock, None);
        }
        c.backlog = Some(backlog);
        self.arm_stall(conn);
    }

    /// The writer of the paced connection `conn` took `frames` frames off its queue (wrote them,
    /// or handed them to its transport). Change notifications held back for it go out on the
    /// next [`poll_output`](Self::poll_output).
    ///
    /// Report a frame before it can reach the client, not after: until then the engine folds
    /// identical change notifications into it, and a change made after the client read it
    /// would otherwise be folded into a notification already read, and never announced.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn written(&mut self, now: Instant, conn: ConnId, frames: usize) {
        self.input(now);
        let Some(c) = self.conns.get_mut(conn.0) else { return };
        let Some(b) = c.backlog.as_mut() else { return };
        b.taken(now, frames);
        let owner = match &c.transport {
            Transport::Standalone { session } => *session,
            _ => conn,
        };
        if self.conns.get(owner.0).is_some_and(|o| !o.pending.is_empty()) {
            self.notes.wake();
        }
    }

    /// Where frames sent to `to` are queued: a legacy session's `GET` stream, else `to`.
    pub(in crate::engine) fn route(&self, to: ConnId) -> Option<ConnId> {
        match &self.conns.get(to.0)?.transport {
            Transport::Session(s) => s.get(),
            _ => Some(to),
        }
    }

    /// The backlog of `conn`, when it is paced.
    pub(in crate::engine) fn backlog(&self, conn: ConnId) -> Option<&Backlog> {
        self.conns.get(conn.0)?.backlog.as_ref()
    }

    /// Whether frames sent to `to` land in a full paced queue.
    pub(in crate::engine) fn lands_full(&self, to: ConnId) -> bool {
        self.route(to).and_then(|d| self.backlog(d)).is_some_and(Backlog::is_full)
    }

    /// Sends a notification that may be lost (progress, a log message): dropped, and counted,
    /// when it would land in a full paced queue.
    pub(in crate::engine) fn send_droppable(&mut self, to: ConnId, bytes: Vec<u8>) {
        if self.lands_full(to) {
            self.dropped_notes = self.dropped_notes.saturating_add(1);
            return;
        }
        self.send(to, bytes, false);
    }

    /// Hands the shim a frame for `conn`, recording it in `conn`'s backlog when it is paced.
    pub(in crate::engine) fn push_frame(&mut self, conn: ConnId, bytes: Vec<u8>) {
        self.out.push_back(Output::Frame { conn, bytes });
        let clock = self.clock;
        if let Some(b) = self.conns.get_mut(conn.0).and_then(|c| c.backlog.as_mut()) {
            b.push(clock, None);
            if b.is_full() {
                self.arm_stall(conn);
            }
        }
    }

    /// Marks the frame just handed to paced `dest` (if one was: `before` is its backlog's length
    /// before the send) as carrying the change notification `note`.
    pub(in crate::engine) fn tag_note(&mut self, dest: ConnId, before: usize, note: Vec<u8>) {
        if let Some(b) = self.conns.get_mut(dest.0).and_then(|c| c.backlog.as_mut()) {
            if b.len() == before.saturating_add(1) {
                b.tag_newest(note.into_boxed_slice());
            }
        }
    }

    /// Arms the stall check of `conn` if its queue is full and none is armed.
    fn arm_stall(&mut self, conn: ConnId) {
        let stall = self.config.limits.stall_timeout;
        let Some(b) = self.conns.get_mut(conn.0).and_then(|c| c.backlog.as_mut()) else { return };
        let Some(at) = b.stalls_at(stall) else { return };
        if !b.set_armed(true) {
            self.timers.arm(at, Timer::Stall(conn));
        }
    }

    /// The stall check of `conn` fell due: cut it if its reader is stalled, else look again
    /// when it would be.
    pub(in crate::engine) fn stall_check(&mut self, now: Instant, conn: ConnId) {
        let stall = self.config.limits.stall_timeout;
        let Some(b) = self.conns.get_mut(conn.0).and_then(|c| c.backlog.as_mut()) else { return };
        b.set_armed(false);
        match b.stalls_at(stall) {
            Some(at) if at <= now => {
                // A resumable stream is cut like one the client dropped: its calls go on and
                // the client may resume it; anything else is ended.
                if self.park_as(now, conn, CloseReason::Stalled) {
                    self.refusals.closed(CloseReason::Stalled);
                } else {
                    self.turn_away(conn, CloseReason::Stalled);
                }
            }
            Some(_) => self.arm_stall(conn),
            None => {}
        }
    }
}

#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod tests;
