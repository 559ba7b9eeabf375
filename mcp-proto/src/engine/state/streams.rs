//! What an HTTP connection is: a legacy session's state (its `GET` stream, event numbering,
//! replay buffer and idleness), a `POST` exchange's response state (what it owes, whether it has
//! turned into SSE, its event ids), and how a connection's frames travel.
//!
//! The request handling that drives them is `http.rs`'s; this part owns their fields and the
//! rules for their counters, so event ids and expiry follow from one place.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::engine::state::ids::{CallId, ConnId};
use crate::engine::state::messages::HeldKind;
use crate::engine::state::post_store::{Attachment, PostStreams};
use crate::http::Accepts;
use crate::sse::{self, EventId, ReplayBuffer};

/// How a connection's frames travel.
pub(in crate::engine) enum Transport {
    /// Newline-delimited frames on a byte stream (stdio or any custom stream).
    Line,
    /// A legacy Streamable HTTP session: it owns the calls and the session state; its frames go
    /// to the exchanges that asked, or to its `GET` stream.
    Session(Box<SessionState>),
    /// The response to one `POST`.
    Exchange(Exchange),
    /// A legacy session's `GET` stream, for messages not tied to a request.
    Standalone {
        /// The session it belongs to.
        session: ConnId,
    },
}

/// A legacy session.
pub(in crate::engine) struct SessionState {
    id: String,
    last_active: Instant,
    /// Something followed `initialize`: the handshake finished (or the client skipped it).
    established: bool,
    get: Option<ConnId>,
    /// SSE stream numbers for this session's `POST` responses; 0 is the `GET` stream.
    next_stream: u64,
    /// The next event sequence number of the `GET` stream, continuous across reconnects.
    get_seq: u64,
    /// Recent `GET` stream events, made on first use so an idle session costs nothing for it.
    replay: Option<ReplayBuffer>,
    /// Recent events of its `POST` response streams, for resuming them.
    posts: PostStreams,
}

/// What a session's expiry timer finds.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::engine) enum Expiry {
    /// The session is over.
    Expire,
    /// Look again `idle` past this instant.
    RearmFrom(Instant),
}

impl SessionState {
    /// A session just minted as `id` by an `initialize` at `now`.
    pub(in crate::engine) fn new(id: String, now: Instant) -> Self {
        Self {
            id,
            last_active: now,
            established: false,
            get: None,
            next_stream: 1,
            get_seq: 0,
            replay: None,
            posts: PostStreams::default(),
        }
    }

    /// Its `POST` response streams' kept events.
    pub(in crate::engine) fn posts(&self) -> &PostStreams {
        &self.posts
    }

    /// Its `POST` response streams' kept events, to change.
    pub(in crate::engine) fn posts_mut(&mut self) -> &mut PostStreams {
        &mut self.posts
    }

    /// Its `Mcp-Session-Id`.
    pub(in crate::engine) fn id(&self) -> &str {
        &self.id
    }

    /// Its `GET` stream, if one is open.
    pub(in crate::engine) fn get(&self) -> Option<ConnId> {
        self.get
    }

    /// Whether something followed its `initialize` (the handshake finished).
    pub(in crate::engine) fn is_established(&self) -> bool {
        self.established
    }

    /// When it last saw a request or a stream of its end.
    pub(in crate::engine) fn last_active(&self) -> Instant {
        self.last_active
    }

    /// A `POST` arrived at `now`, not the `initialize` that minted the session when `minted`
    /// is false: the stream number its response takes, and whether this request finished the
    /// handshake.
    pub(in crate::engine) fn request(&mut self, now: Instant, minted: bool) -> (u64, bool) {
        self.last_active = now;
        let established_now = !minted && !self.established;
        self.established |= established_now;
        let stream_no = self.next_stream;
        self.next_stream += 1;
        (stream_no, established_now)
    }

    /// `conn` opened at `now` as the `GET` stream, resuming after `last_event_id` if the
    /// client sent one: the events to write first (what it missed, then a priming event with
    /// `prime_retry_ms` when the session primes its streams), and whether nothing was lost.
    /// `replay_cap` is the replay buffer's bound in events and in bytes.
    pub(in crate::engine) fn open_get(
        &mut self,
        conn: ConnId,
        now: Instant,
        replay_cap: (usize, usize),
        last_event_id: Option<&str>,
        prime_retry_ms: Option<u64>,
    ) -> (Vec<Vec<u8>>, bool) {
        self.get = Some(conn);
        self.last_active = now;
        let replay = self.replay.get_or_insert_with(|| {
            let mut buf = ReplayBuffer::new(replay_cap.0);
            buf.max_bytes(replay_cap.1);
            buf
        });
        let mut events = Vec::new();
        // Resume: what the client missed, if the buffer still holds all of it.
        let resumed = match last_event_id.and_then(EventId::parse) {
            Some(EventId { stream: 0, seq }) => match replay.since(seq) {
                Some(missed) => {
                    events.extend(missed.map(<[u8]>::to_vec));
                    true
                }
                None => false,
            },
            _ => last_event_id.is_none(),
        };
        if let Some(retry_ms) = prime_retry_ms {
            let seq = self.get_seq;
            self.get_seq += 1;
            let event = sse::priming(&EventId { stream: 0, seq }.to_string(), Some(retry_ms));
            replay.push(seq, event.clone());
            events.push(event);
        }
        (events, resumed)
    }

    /// The next event of the `GET` stream, carrying `bytes`, kept for replay.
    pub(in crate::engine) fn get_event(&mut self, bytes: &[u8]) -> Vec<u8> {
        let seq = self.get_seq;
        self.get_seq += 1;
        let event = sse::event(Some(&EventId { stream: 0, seq }.to_string()), bytes);
        if let Some(replay) = self.replay.as_mut() {
            replay.push(seq, event.clone());
        }
        event
    }

    /// Its `GET` stream `conn` ended at `at`: holding a stream was activity, so idleness counts
    /// from its end.
    pub(in crate::engine) fn stream_ended(&mut self, conn: ConnId, at: Instant) {
        if self.get == Some(conn) {
            self.get = None;
            self.last_active = self.last_active.max(at);
        }
    }

    /// Whether the session ends at `now` after `idle` without activity. An unfinished
    /// handshake ends it; idleness counts from the last request, and not while the client
    /// waits on the session: its `GET` stream is open, or a call is in flight whose response
    /// stream is still open (`awaited`). A call whose stream the client dropped keeps nothing
    /// alive: its answer can no longer reach the client, so a handler that never returns would
    /// otherwise hold the session (and its calls) for ever.
    pub(in crate::engine) fn expiry(&self, now: Instant, idle: Duration, awaited: bool) -> Expiry {
        if !self.established {
            return Expiry::Expire;
        }
        let busy = awaited || self.get.is_some();
        let from = if busy { now } else { self.last_active };
        if !busy && from.checked_add(idle).is_some_and(|due| due <= now) {
            return Expiry::Expire;
        }
        Expiry::RearmFrom(from)
    }
}

/// The response to one `POST`.
pub(in crate::engine) struct Exchange {
    /// The legacy session the request belongs to; `None` on the 2026-07-28 wire, where the
    /// exchange owns its calls.
    session: Option<ConnId>,
    /// Replies still to send; the exchange ends when none are left.
    owed: usize,
    /// An SSE response has begun.
    started: bool,
    json_ok: bool,
    sse_ok: bool,
    /// The client listed SSE first: it is answered with a stream from the start.
    prefers_sse: bool,
    modern: bool,
    /// Open the stream with a priming event (sessions at 2025-11-25 and later).
    prime: bool,
    /// The id of the session this exchange's `initialize` made, for the response head.
    minted: Option<String>,
    /// The tasks its calls started, for the response head ([`HttpHead::holds`]).
    ///
    /// [`HttpHead::holds`]: crate::engine::HttpHead::holds
    holds: Vec<(HeldKind, String)>,
    stream_no: u64,
    seq: u64,
    /// Calls of its legacy session that sent server→client requests on it. At most the calls
    /// it carries (one, or a 2025-03-26 batch's members), in [`CallId`] order.
    asked: BTreeSet<CallId>,
    /// Whether the client still reads it (see [`Attachment`]).
    attachment: Attachment,
}

impl Exchange {
    /// A 2026-07-28 request's exchange: it owns its calls, and its events carry no ids.
    pub(in crate::engine) fn modern(accepts: Accepts) -> Self {
        Self {
            session: None,
            owed: 1,
            started: false,
            json_ok: accepts.json,
            sse_ok: accepts.sse,
            prefers_sse: accepts.prefers_sse && accepts.sse,
            modern: true,
            prime: false,
            minted: None,
            holds: Vec::new(),
            stream_no: 0,
            seq: 0,
            asked: BTreeSet::new(),
            attachment: Attachment::Live,
        }
    }

    /// A request of the legacy `session`, answered as its stream number `stream_no`; `minted`
    /// is the session's id when this request is the `initialize` that made it.
    pub(in crate::engine) fn legacy(
        session: ConnId,
        accepts: Accepts,
        minted: Option<String>,
        prime: bool,
        stream_no: u64,
    ) -> Self {
        Self {
            session: Some(session),
            owed: 1,
            started: false,
            json_ok: accepts.json,
            sse_ok: accepts.sse,
            // The session id rides on the response head, which JSON gives at once.
            prefers_sse: accepts.prefers_sse && accepts.sse && minted.is_none(),
            modern: false,
            prime,
            minted,
            holds: Vec::new(),
            stream_no,
            seq: 0,
            asked: BTreeSet::new(),
            attachment: Attachment::Live,
        }
    }

    /// A legacy stream whose calls are over, opened only to replay its kept events to a
    /// resuming client (it owes nothing and ends once they are written).
    pub(in crate::engine) fn replay(session: ConnId, stream_no: u64) -> Self {
        let accepts = Accepts { json: false, sse: true, prefers_sse: true };
        let mut x = Self::legacy(session, accepts, None, false, stream_no);
        x.owed = 0;
        x.started = true;
        x
    }

    /// Its stream number within its session (0 on the 2026-07-28 wire).
    pub(in crate::engine) fn stream_no(&self) -> u64 {
        self.stream_no
    }

    /// Whether the client still reads it.
    pub(in crate::engine) fn attachment(&self) -> Attachment {
        self.attachment
    }

    /// The client dropped it, or resumed it, or the wait for a resume lapsed.
    pub(in crate::engine) fn attach(&mut self, attachment: Attachment) {
        self.attachment = attachment;
    }

    /// `call` sent a server→client request on it.
    pub(in crate::engine) fn carried_ask(&mut self, call: CallId) {
        self.asked.insert(call);
    }

    /// The calls that sent server→client requests on it, in [`CallId`] order.
    pub(in crate::engine) fn asked(&self) -> Vec<CallId> {
        self.asked.iter().copied().collect()
    }

    /// The legacy session it belongs to.
    pub(in crate::engine) fn session(&self) -> Option<ConnId> {
        self.session
    }

    /// It speaks the 2026-07-28 wire.
    pub(in crate::engine) fn is_modern(&self) -> bool {
        self.modern
    }

    /// Whether messages other than the answer can reach the client (it accepts SSE).
    pub(in crate::engine) fn can_stream(&self) -> bool {
        self.sse_ok
    }

    /// The client wants a stream from the start.
    pub(in crate::engine) fn prefers_sse(&self) -> bool {
        self.prefers_sse
    }

    /// Its SSE response has begun.
    pub(in crate::engine) fn started(&self) -> bool {
        self.started
    }

    /// A call it carries started the task `id`: its answer names it to the cluster.
    pub(in crate::engine) fn hold(&mut self, kind: HeldKind, id: String) {
        self.holds.push((kind, id));
    }

    /// What its calls made the engine hold so far.
    pub(in crate::engine) fn holds(&self) -> &[(HeldKind, String)] {
        &self.holds
    }

    /// The session id its `initialize` minted.
    pub(in crate::engine) fn minted(&self) -> Option<&String> {
        self.minted.as_ref()
    }

    /// One reply it owed was sent, or will never come: how many are still owed.
    pub(in crate::engine) fn settle_one(&mut self) -> usize {
        self.owed = self.owed.saturating_sub(1);
        self.owed
    }

    /// Replies still owed.
    pub(in crate::engine) fn owed(&self) -> usize {
        self.owed
    }

    /// Its last message can be the whole response, as JSON: nothing was streamed and the client
    /// takes JSON without asking for a stream first.
    pub(in crate::engine) fn answers_in_json(&self) -> bool {
        !self.started && self.json_ok && !self.prefers_sse
    }

    /// Turns it into an SSE response: `None` if it already is, else the id of the priming event
    /// to open the stream with, if it primes.
    pub(in crate::engine) fn start(&mut self) -> Option<Option<EventId>> {
        if self.started {
            return None;
        }
        self.started = true;
        if !self.prime {
            return Some(None);
        }
        self.seq = 1;
        Some(Some(EventId { stream: self.stream_no, seq: 0 }))
    }

    /// The id of its next event (none on the 2026-07-28 wire, whose streams do not resume).
    pub(in crate::engine) fn next_event_id(&mut self) -> Option<EventId> {
        let id = (!self.modern).then_some(EventId { stream: self.stream_no, seq: self.seq });
        self.seq += 1;
        id
    }
}
