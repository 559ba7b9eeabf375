//! Resuming a legacy session's `POST` response streams (Streamable HTTP 2025-03-26 ..
//! 2025-11-25, "Resumability and Redelivery").
//!
//! Every event of such a stream (ids `<stream>-<seq>`, the stream number being the session's
//! count of its `POST`s) is kept in the session's store, bounded per stream
//! ([`Limits::replay_events`], [`Limits::replay_bytes`]), per session
//! ([`Limits::resume_bytes`]) and over every session ([`Limits::max_resume_bytes`], of which
//! each caller keeping events has a fair share: past the total, a caller at or over its share
//! loses its own oldest events, and a caller below it takes the greediest caller's oldest). The
//! rules:
//!
//! - **The client drops the stream** ([`Engine::close`]) while a call of it is still running:
//!   the stream is *parked*. The shim is told it closed ([`Output::Close`]) and nothing more is
//!   written for that connection, but the calls keep sending to it, and what they send (progress,
//!   log messages, server→client requests, the response) goes to the store only. The connection
//!   stays in the engine's table (it counts in [`Limits::max_connections`]) until its calls end.
//! - **A `GET` with `Last-Event-ID: <stream>-<n>`** on the same session (so from the same
//!   caller: a session is its creator's, and another caller is answered 404 as for any unknown
//!   session) naming one of its `POST` streams gets that stream back: the kept events after
//!   `n`, then the rest of the stream's calls as they come, then the end, as the `POST`
//!   response would have. Stream numbers are per session, so an id from another session names
//!   nothing here. Events evicted by the bounds are skipped: the client is sent what is left,
//!   the response included when it is kept.
//! - **Resuming a stream that is still open** (the original response, or an earlier resume,
//!   that the server has not yet seen go): the newer request wins. The older connection closes
//!   with [`CloseReason::Replaced`], as a second `GET` stream replaces the first, so a client
//!   whose connection died without a word is never locked out of its own call.
//! - **No resume within [`Limits::resume_window`]**: a call of the stream still waiting on the
//!   client has its ask fail as [`AskError::Unreachable`](crate::engine::AskError::Unreachable) and is
//!   cancelled (see [`Engine::ask`]); a call not asking keeps running, but the stream can no
//!   longer carry new asks; when the stream's calls are over, its events are kept for the
//!   window again, then dropped.
//! - **A finished stream** whose events were all replayed on a resume is dropped; so is one
//!   whose last event went out on a stream the client was still reading.
//! - **An id the engine cannot place** (a stream it never had, or no longer keeps, or a
//!   sequence number it never issued): the spec lets a server decline to replay, and a `GET`
//!   opens the session's standalone stream. So it does here, as for a `GET` stream gap: the
//!   client is told that every list may have changed, and the lost response stays lost (the
//!   client's request times out on its side).
//!
//! [`Limits::replay_events`]: crate::limits::Limits::replay_events
//! [`Limits::replay_bytes`]: crate::limits::Limits::replay_bytes
//! [`Limits::resume_bytes`]: crate::limits::Limits::resume_bytes
//! [`Limits::max_resume_bytes`]: crate::limits::Limits::max_resume_bytes
//! [`Limits::resume_window`]: crate::limits::Limits::resume_window
//! [`Limits::max_connections`]: crate::limits::Limits::max_connections

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::caller::Caller;
use crate::engine::state::post_store::{Attachment, PostStream, PostStreams};
use crate::engine::state::streams::{Exchange, Transport};
use crate::engine::state::timers::Timer;
use crate::engine::transport::http::sse_head;
use crate::engine::HttpReply;
use crate::engine::{CloseReason, ConnId, Engine, Output};
use crate::sse::{EventId, ReplayBuffer};

impl<H: Clone> Engine<H> {
    /// `f` applied to `session`'s kept streams, the bytes they keep counted for its caller
    /// ([`Limits::max_resume_bytes`]): every change to a session's store goes through here.
    ///
    /// [`Limits::max_resume_bytes`]: crate::limits::Limits::max_resume_bytes
    fn edit_posts<R>(&mut self, session: ConnId, f: impl FnOnce(&mut PostStreams) -> R) -> Option<R> {
        let c = self.conns.get_mut(session.0)?;
        let Transport::Session(s) = &mut c.transport else { return None };
        let posts = s.posts_mut();
        let before = posts.bytes;
        let out = f(posts);
        self.sessions.kept.moved(c.caller.binding(), before, posts.bytes);
        Some(out)
    }

    fn posts(&self, session: ConnId) -> Option<&PostStreams> {
        match self.conns.get(session.0).map(|c| &c.transport) {
            Some(Transport::Session(s)) => Some(s.posts()),
            _ => None,
        }
    }

    /// The legacy exchange `ex` of `session` turned into its SSE stream `stream_no`: its events
    /// are kept from now on.
    pub(in crate::engine) fn post_stream_opened(&mut self, session: ConnId, stream_no: u64, ex: ConnId) {
        let (events, bytes) = (self.config.limits.replay_events, self.config.limits.replay_bytes);
        let mut buf = ReplayBuffer::new(events);
        buf.max_bytes(bytes);
        let stale = self.edit_posts(session, |posts| {
            let stale = posts.remove(stream_no);
            posts.streams.insert(stream_no, PostStream { events: buf, carrier: Some(ex), expires: None });
            stale
        });
        if let Some(at) = stale.flatten() {
            self.timers.disarm(at, Timer::Resume(session, stream_no));
        }
    }

    /// Keeps the event `id` of one of `session`'s `POST` streams, within the bounds of the
    /// module docs.
    pub(in crate::engine) fn record_post_event(&mut self, session: ConnId, id: EventId, bytes: &[u8]) {
        let limits = &self.config.limits;
        let (per_stream, total, cap) = (limits.replay_bytes, limits.resume_bytes, limits.max_resume_bytes);
        if self.edit_posts(session, |posts| posts.record(id, bytes, per_stream, total)).is_none() {
            return;
        }
        let Some(caller) = self.conns.get(session.0).map(|c| c.caller.clone()) else { return };
        // Over the total: the recording caller's own events go first when it keeps its share or
        // more (this session's before its others'), else the greediest caller's.
        while self.sessions.kept.total() > cap {
            let need = self.sessions.kept.total() - cap;
            let victim = self.sessions.kept.victim(caller.binding(), cap).to_owned();
            let mut freed = 0;
            if victim == caller.binding() {
                freed = self.edit_posts(session, |posts| posts.shed(need)).unwrap_or(0);
            }
            if freed < need {
                let theirs: Vec<ConnId> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| {
                        c.caller.binding() == victim && matches!(c.transport, Transport::Session(_))
                    })
                    .map(|(i, _)| ConnId(i))
                    .collect();
                for s in theirs {
                    if freed >= need {
                        break;
                    }
                    freed += self.edit_posts(s, |posts| posts.shed(need - freed)).unwrap_or(0);
                }
            }
            if freed == 0 {
                // Nothing left to evict: the accounting and the stores disagree. Stop rather
                // than spin; the bound is kept again by the next event's eviction.
                break;
            }
        }
    }

    /// The exchange `conn`, carrying `session`'s stream `stream_no`, left the engine's table:
    /// a stream the client read ends with it; a dropped one keeps its events for a resume
    /// within the window.
    pub(in crate::engine) fn post_stream_gone(
        &mut self,
        session: ConnId,
        stream_no: u64,
        conn: ConnId,
        attachment: Attachment,
    ) {
        let (window, max_finished, clock) =
            (self.config.limits.resume_window, self.config.limits.max_in_flight, self.clock);
        // Same rounding as every engine timer; a window too long for the clock never ends.
        let until = clock.checked_add(window.max(Duration::from_millis(1)));
        let live = attachment == Attachment::Live;
        let Some(Some(stale)) = self.edit_posts(session, |posts| {
            if posts.carrier(stream_no) != Some(Some(conn)) {
                return None;
            }
            if live {
                return Some(posts.remove(stream_no).map(|at| (stream_no, at)).into_iter().collect());
            }
            Some(posts.finish(stream_no, until, max_finished))
        }) else {
            return;
        };
        for (n, at) in stale {
            self.timers.disarm(at, Timer::Resume(session, n));
        }
        if let (false, Some(at)) = (live, until) {
            self.timers.arm(at, Timer::Resume(session, stream_no));
        }
    }

    /// The client dropped `conn` at `now`: if it is a legacy `POST` stream whose calls still
    /// run, it is parked for a resume (the shim is told it closed) and `true` is returned; also
    /// `true` for a stream already parked, which has nothing left to close.
    pub(in crate::engine) fn park(&mut self, now: Instant, conn: ConnId) -> bool {
        self.park_as(now, conn, CloseReason::Closed)
    }

    /// [`park`](Self::park), telling the shim `reason` (a reader cut for stalling may resume
    /// like one that left).
    pub(in crate::engine) fn park_as(&mut self, now: Instant, conn: ConnId, reason: CloseReason) -> bool {
        let window = self.config.limits.resume_window;
        let Some(Transport::Exchange(x)) = self.conns.get(conn.0).map(|c| &c.transport) else { return false };
        if x.attachment() != Attachment::Live {
            return true;
        }
        if window.is_zero() || !x.started() || x.owed() == 0 || x.is_modern() {
            return false;
        }
        let Some(session) = x.session() else { return false };
        let stream_no = x.stream_no();
        let until = now.checked_add(window);
        let Some(Some(stale)) = self.edit_posts(session, |posts| {
            let kept = posts.streams.get_mut(&stream_no).filter(|s| s.carrier == Some(conn))?;
            Some(std::mem::replace(&mut kept.expires, until))
        }) else {
            return false;
        };
        if let Some(at) = stale {
            self.timers.disarm(at, Timer::Resume(session, stream_no));
        }
        if let Some(at) = until {
            self.timers.arm(at, Timer::Resume(session, stream_no));
        }
        if let Some(c) = self.conns.get_mut(conn.0) {
            if let Transport::Exchange(x) = &mut c.transport {
                x.attach(Attachment::Parked);
            }
            // No writer is left to take what was queued: a backlog kept full would count the
            // parked stream's events as dropped and, at its stall check, cut the stream the
            // client is about to resume.
            c.backlog = None;
        }
        self.out.push_back(Output::Close { conn, reason });
        true
    }

    /// The resume window of `session`'s stream `stream_no` may have passed at `now`.
    pub(in crate::engine) fn resume_timer(&mut self, now: Instant, session: ConnId, stream_no: u64) {
        let Some(Some(ex)) = self.edit_posts(session, |posts| {
            let kept = posts.streams.get_mut(&stream_no)?;
            // Resumed, or given a later deadline, since this timer was armed.
            if kept.expires.is_none_or(|at| at > now) {
                return None;
            }
            // This timer is the one firing: nothing is left to disarm.
            kept.expires = None;
            if kept.carrier.is_none() {
                let _ = posts.remove(stream_no);
            }
            posts.carrier(stream_no).flatten()
        }) else {
            return;
        };
        let asked = match self.conns.get_mut(ex.0).map(|c| &mut c.transport) {
            Some(Transport::Exchange(x)) => {
                x.attach(Attachment::Lapsed);
                x.asked()
            }
            _ => Vec::new(),
        };
        self.strand_asks(now, ex, asked);
        // Its calls all ended with their asks: no response will come, so nothing is worth
        // keeping for a resume.
        self.edit_posts(session, |posts| {
            if posts.carrier(stream_no) == Some(None) {
                let _ = posts.remove(stream_no);
            }
        });
    }

    /// A `GET` of `caller` with `Last-Event-ID` `id` naming `session`'s `POST` stream: that
    /// stream, resumed after `id`, on a new connection; `None` when it is not one the engine
    /// can place (see the module docs).
    pub(in crate::engine) fn resume_post(
        &mut self,
        now: Instant,
        session: ConnId,
        caller: &Caller,
        id: EventId,
    ) -> Option<HttpReply> {
        let kept = self.posts(session)?.streams.get(&id.stream)?;
        let missed: Vec<Vec<u8>> = kept.events.kept_after(id.seq)?.map(<[u8]>::to_vec).collect();
        let carrier = kept.carrier;
        if carrier.is_none() && !self.room_for_conns(caller, 1) {
            return Some(self.busy(None, "server is busy"));
        }
        let (mut x, old) = match carrier {
            Some(old) => {
                let c = self.conns.get_mut(old.0)?;
                if !matches!(c.transport, Transport::Exchange(_)) {
                    return None;
                }
                // Taken out whole (its calls, asks and event numbering go on); the connection
                // left behind has nothing of the stream for `drop_conn` to end.
                let Transport::Exchange(x) = std::mem::replace(&mut c.transport, Transport::Line) else {
                    return None;
                };
                self.drop_conn(old);
                (x, Some(old))
            }
            None => (Exchange::replay(session, id.stream), None),
        };
        let was_live = x.attachment() == Attachment::Live;
        x.attach(Attachment::Live);
        let done = x.owed() == 0;
        let conn = self.insert_conn(Transport::Exchange(x), Arc::new(caller.clone()));
        if let Some(old) = old {
            if was_live {
                self.refusals.closed(CloseReason::Replaced);
                self.out.push_back(Output::Close { conn: old, reason: CloseReason::Replaced });
            }
            let calls: Vec<_> =
                self.conns.get(session.0).map(|s| s.calls.ids().collect()).unwrap_or_default();
            for call in calls {
                self.calls.redirect(call, old, conn);
            }
        }
        let stale = self
            .edit_posts(session, |p| {
                let kept = p.streams.get_mut(&id.stream)?;
                kept.carrier = Some(conn);
                kept.expires.take()
            })
            .flatten();
        if let Some(at) = stale {
            self.timers.disarm(at, Timer::Resume(session, id.stream));
        }
        self.out.push_back(Output::Stream { conn, head: sse_head() });
        // Through the pacing of `conn` (if its shim paces it), so that what the writer reports
        // taken matches what was queued.
        for bytes in missed {
            self.push_frame(conn, bytes);
        }
        if done {
            self.forget(conn, CloseReason::EndOfInput);
        } else {
            self.timers.arm_after(now, self.config.limits.keepalive, Timer::KeepAlive(conn));
        }
        Some(HttpReply::Pending(conn))
    }

    /// Whether `conn` is a `POST` stream the client no longer reads.
    pub(in crate::engine) fn detached(&self, conn: ConnId) -> bool {
        matches!(self.conns.get(conn.0).map(|c| &c.transport),
            Some(Transport::Exchange(x)) if x.attachment() != Attachment::Live)
    }
}
