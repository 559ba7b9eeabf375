//! Every bound the engine enforces, in one place.
//!
//! Defaults come from the reference servers this project must match (see the seeds: 2 MiB ingress,
//! 16 MiB responses, 256-byte ids and method names). Each field says what crossing it does; none
//! of them ever panics or stalls the engine.

/// The bounds of one [`Engine`](crate::Engine).
///
/// Build with [`Limits::default`] and adjust with the `&mut Self` setters, which chain:
///
/// ```
/// let mut limits = mcp_proto::Limits::default();
/// limits.max_frame_bytes(1 << 20).max_in_flight(32);
/// assert_eq!(limits.frame_bytes(), 1 << 20);
/// ```
#[derive(Debug, Clone)]
pub struct Limits {
    pub(crate) max_frame_bytes: usize,
    pub(crate) max_id_bytes: usize,
    pub(crate) max_method_bytes: usize,
    pub(crate) max_depth: usize,
    pub(crate) max_in_flight: usize,
    pub(crate) max_batch_len: usize,
    pub(crate) max_response_bytes: usize,
    pub(crate) max_connections: usize,
    pub(crate) page_size: usize,
    pub(crate) max_queued_frames: usize,
    pub(crate) max_uri_bytes: usize,
    pub(crate) max_subscribed_uris: usize,
    pub(crate) max_subscriptions: usize,
    pub(crate) max_listens: usize,
    pub(crate) progress_interval: std::time::Duration,
    pub(crate) max_progress_bytes: usize,
    pub(crate) max_sessions: usize,
    pub(crate) session_idle: std::time::Duration,
    pub(crate) session_handshake: std::time::Duration,
    pub(crate) max_streams: Option<usize>,
    pub(crate) max_streams_per_caller: Option<usize>,
    pub(crate) seat_policy: SeatPolicy,
    pub(crate) stream_queue: usize,
    pub(crate) keepalive: std::time::Duration,
    pub(crate) sse_retry: std::time::Duration,
    pub(crate) replay_events: usize,
    // Per-caller shares of the global tables (issue 10). Kept together at the end while the
    // fields above are being regrouped.
    pub(crate) max_sessions_per_caller: Option<usize>,
    pub(crate) max_http_connections_per_peer: Option<usize>,
}

/// What happens when a caller already holds [`Limits::max_streams_per_caller`] streams and
/// opens another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SeatPolicy {
    /// Refuse the new stream with HTTP 429 (the default): a caller cannot push out its own
    /// streams by accident.
    #[default]
    Refuse,
    /// Close the caller's oldest stream and seat the new one: kinder to clients that reconnect
    /// without closing what they had, which would otherwise lock themselves out.
    EvictOldest,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_bytes: 2 * 1024 * 1024,
            max_id_bytes: 256,
            max_method_bytes: 256,
            max_depth: 64,
            max_in_flight: 64,
            max_batch_len: 64,
            max_response_bytes: 16 * 1024 * 1024,
            max_connections: 4096,
            page_size: 100,
            max_queued_frames: 1024,
            max_uri_bytes: 2048,
            max_subscribed_uris: 1024,
            max_subscriptions: 4096,
            max_listens: 16,
            progress_interval: std::time::Duration::from_millis(100),
            max_progress_bytes: 8 * 1024,
            max_sessions: 1024,
            session_idle: std::time::Duration::from_secs(15 * 60),
            session_handshake: std::time::Duration::from_secs(30),
            max_streams: Some(1024),
            max_streams_per_caller: Some(16),
            seat_policy: SeatPolicy::Refuse,
            stream_queue: 16,
            keepalive: std::time::Duration::from_secs(15),
            sse_retry: std::time::Duration::from_secs(3),
            replay_events: 64,
            // Per-caller shares.
            max_sessions_per_caller: Some(64),
            max_http_connections_per_peer: Some(256),
        }
    }
}

impl Limits {
    /// Largest inbound frame (one stdio line or one HTTP body), in bytes. Default 2 MiB.
    ///
    /// A larger frame is answered with `-32600` and a `null` id without being parsed; over stdio
    /// the session then ends, because a line reader cannot resynchronise inside an unread line.
    pub fn max_frame_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_frame_bytes = bytes;
        self
    }

    /// Largest request `id`, as encoded JSON bytes (quotes and escapes included). Default 256.
    ///
    /// A longer id is answered with `-32600` and a `null` id, since echoing it would let a peer
    /// amplify its own bytes into every error reply.
    pub fn max_id_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_id_bytes = bytes;
        self
    }

    /// Largest `method` name, in bytes of its decoded UTF-8. Default 256.
    ///
    /// A longer method is answered with `-32600` (the id is echoed).
    pub fn max_method_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_method_bytes = bytes;
        self
    }

    /// Deepest nesting of arrays and objects in a frame, the envelope counting as level 1.
    /// Default 64.
    ///
    /// Deeper input is answered with `-32600` (in the envelope) or `-32602` (inside `params`),
    /// echoing the id when it was readable. Independently, serde_json refuses anything deeper than
    /// 128 levels; such a frame is answered `-32600` with a `null` id.
    pub fn max_depth(&mut self, depth: usize) -> &mut Self {
        self.max_depth = depth;
        self
    }

    /// Requests one connection may have awaiting an answer at once. Default 64.
    ///
    /// A request beyond it is answered at once with `-32600` ("too many requests in flight")
    /// and never reaches a handler; the requests already in flight are unaffected.
    pub fn max_in_flight(&mut self, requests: usize) -> &mut Self {
        self.max_in_flight = requests;
        self
    }

    /// Most messages in one JSON-RPC batch (2025-03-26 sessions only). Default 64.
    ///
    /// A longer batch is refused whole with one `-32600` error carrying a `null` id.
    pub fn max_batch_len(&mut self, messages: usize) -> &mut Self {
        self.max_batch_len = messages;
        self
    }

    /// Largest encoded response, in bytes. Default 16 MiB.
    ///
    /// A tool result over it is replaced by a `result_too_large` tool failure (a result with
    /// `isError: true`) of bounded size; any other oversized result becomes `-32603`.
    pub fn max_response_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Connections (stdio sessions, HTTP exchanges, streams) open at once. Default 4096.
    ///
    /// [`Engine::open`](crate::Engine::open) beyond it returns
    /// [`OpenError::TooManyConnections`](crate::OpenError::TooManyConnections), and an HTTP
    /// request beyond it is answered with 503, unless the caller holds less than its fair share
    /// (see the per-caller shares below): then a legacy session of a caller above its share
    /// (an unfinished handshake first, else an idle one) is displaced to make room.
    pub fn max_connections(&mut self, connections: usize) -> &mut Self {
        self.max_connections = connections;
        self
    }

    /// Items per page of every list method. Default 100; values below 1 count as 1.
    pub fn page_size(&mut self, items: usize) -> &mut Self {
        self.page_size = items.max(1);
        self
    }

    /// Frames a shim may queue for one connection that is not reading them. Default 1024.
    ///
    /// Past it the connection is closed rather than let one slow reader grow memory or stall the
    /// others. Replies alone never reach it under the default in-flight limit.
    pub fn max_queued_frames(&mut self, frames: usize) -> &mut Self {
        self.max_queued_frames = frames.max(1);
        self
    }

    /// Longest resource URI accepted in `resources/read`, `resources/subscribe` and a listen
    /// filter, and in registrations. Default 2048 bytes.
    ///
    /// A longer URI is refused with `-32602` (or, at registration, `RegistryError::InvalidUri`).
    pub fn max_uri_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_uri_bytes = bytes;
        self
    }

    /// Distinct resource URIs with at least one legacy `resources/subscribe`, across all callers.
    /// Default 1024.
    ///
    /// A subscription that would add one more is refused with `-32602`; re-subscribing to a URI
    /// the caller already holds always works.
    pub fn max_subscribed_uris(&mut self, uris: usize) -> &mut Self {
        self.max_subscribed_uris = uris;
        self
    }

    /// Caller/URI subscription pairs across all callers. Default 4096.
    ///
    /// A subscription that would add one more pair is refused with `-32602`; re-subscribing to a
    /// URI the caller already holds always works.
    pub fn max_subscriptions(&mut self, pairs: usize) -> &mut Self {
        self.max_subscriptions = pairs;
        self
    }

    /// `subscriptions/listen` streams open at once on one connection (2026-07-28). Default 16.
    ///
    /// One more is refused with `-32600`; the open ones are unaffected.
    pub fn max_listens(&mut self, listens: usize) -> &mut Self {
        self.max_listens = listens;
        self
    }

    /// Least time between two progress notifications of one call. Default 100 ms.
    ///
    /// An update sooner than that after the last one sent is dropped (progress is advisory; the
    /// next update carries the newer value).
    pub fn progress_interval(&mut self, interval: std::time::Duration) -> &mut Self {
        self.progress_interval = interval;
        self
    }

    /// Largest encoded progress notification. Default 8 KiB.
    ///
    /// A larger one (a long `message`) is dropped.
    pub fn max_progress_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_progress_bytes = bytes;
        self
    }

    /// Most legacy Streamable HTTP sessions (`Mcp-Session-Id`) alive at once. Default 1024.
    ///
    /// An `initialize` past it displaces a session when the per-caller shares allow it (see
    /// [`max_sessions_per_caller`](Self::max_sessions_per_caller)); otherwise it is answered
    /// with HTTP 503 and no session is made. Sessions that expire or are deleted free their
    /// places.
    pub fn max_sessions(&mut self, sessions: usize) -> &mut Self {
        self.max_sessions = sessions;
        self
    }

    /// How long a legacy HTTP session may go without a request while no call and no stream of
    /// it is open. Default 15 minutes.
    ///
    /// After that the session is forgotten and its id answers 404, which tells the client to
    /// initialize again.
    pub fn session_idle(&mut self, idle: std::time::Duration) -> &mut Self {
        self.session_idle = idle;
        self
    }

    /// How long after `initialize` a legacy HTTP session has to send its next message
    /// (`notifications/initialized` or any request). Default 30 s.
    ///
    /// A session that sends nothing more in that time is forgotten, so clients that initialize
    /// and walk away cannot fill the session table.
    pub fn session_handshake(&mut self, timeout: std::time::Duration) -> &mut Self {
        self.session_handshake = timeout;
        self
    }

    /// Most held SSE streams (legacy `GET` streams and 2026 `subscriptions/listen` streams) over
    /// all callers. Default 1024; `None` lifts the bound.
    ///
    /// A stream past it of a caller holding less than its fair share of the bound displaces the
    /// oldest stream of the caller holding the most (if that is more than its share); any other
    /// stream past it is refused with HTTP 429, whatever the [`SeatPolicy`].
    pub fn max_streams(&mut self, streams: Option<usize>) -> &mut Self {
        self.max_streams = streams;
        self
    }

    /// Most held SSE streams per caller (its identity, else its peer address). Default 16;
    /// `None` lifts the bound.
    ///
    /// A stream past it is refused with HTTP 429, or evicts the caller's oldest stream, as the
    /// [`seat_policy`](Self::seat_policy) says.
    pub fn max_streams_per_caller(&mut self, streams: Option<usize>) -> &mut Self {
        self.max_streams_per_caller = streams;
        self
    }

    /// What a caller past [`max_streams_per_caller`](Self::max_streams_per_caller) gets.
    /// Default [`SeatPolicy::Refuse`].
    pub fn seat_policy(&mut self, policy: SeatPolicy) -> &mut Self {
        self.seat_policy = policy;
        self
    }

    /// Frames an HTTP response stream may have queued and unwritten. Default 16.
    ///
    /// A shim that finds the queue full drops that subscriber (it stopped reading) and closes its
    /// stream, so one slow reader never stalls the notifier or other streams.
    pub fn stream_queue(&mut self, frames: usize) -> &mut Self {
        self.stream_queue = frames;
        self
    }

    /// Interval of the `: keep-alive` comment on a held SSE stream. Default 15 s.
    ///
    /// Each one first re-checks the caller against the server-wide gate: a caller it now refuses
    /// has its stream closed within one interval, and a half-open connection fails the write and
    /// frees its seat.
    pub fn keepalive(&mut self, interval: std::time::Duration) -> &mut Self {
        self.keepalive = interval;
        self
    }

    /// The `retry:` a 2025-11-25 SSE stream's priming event asks a reconnecting client to wait.
    /// Default 3 s.
    pub fn sse_retry(&mut self, delay: std::time::Duration) -> &mut Self {
        self.sse_retry = delay;
        self
    }

    /// Events of a legacy session's `GET` stream kept for `Last-Event-ID` replay. Default 64.
    ///
    /// A client that reconnects after missing more than that cannot be replayed to; it is told
    /// every list changed instead, so it re-lists and is correct again.
    pub fn replay_events(&mut self, events: usize) -> &mut Self {
        self.replay_events = events;
        self
    }

    // -----------------------------------------------------------------------------------------
    // Per-caller shares
    //
    // Every table above with a server-wide bound (sessions, connections, held streams) is also
    // shared fairly: when it is full, a caller holding less than its *fair share* (the bound
    // divided by the number of callers holding entries, itself included, and at least 1) takes
    // the place of an entry of a caller holding more than its share, so one caller filling a
    // table never locks the others out. A caller at or above its share can only displace its
    // own oldest unfinished work (a handshake not yet finished, a connection still sending its
    // head); otherwise it is refused as before. Callers are told apart by
    // [`Caller::binding`](crate::Caller::binding): the identity the middleware set, else the
    // peer address. Displaced entries close with
    // [`CloseReason::Displaced`](crate::CloseReason::Displaced).
    // -----------------------------------------------------------------------------------------

    /// Most legacy HTTP sessions one caller (its identity, else its peer address) may hold at
    /// once, whatever room the table has. Default 64; `None` lifts the bound.
    ///
    /// An `initialize` past it first displaces that caller's own least recently active session
    /// still in its handshake (it answers 404 from then on); when there is none the
    /// `initialize` is answered with HTTP 429 and no session is made.
    ///
    /// Independently, when [`max_sessions`](Self::max_sessions) are alive an `initialize` of a
    /// caller below its fair share displaces a session of a caller above its share: that
    /// caller's least recently active unfinished handshake, else its least recently active
    /// session, idle ones (no call in flight, no `GET` stream) first. A caller at or above its
    /// share displaces only its own unfinished handshakes, else gets 503.
    ///
    /// Callers with neither an identity nor a peer address (a mounted service that is told
    /// neither) are all one caller here, as they are for stream seats: give such a service a
    /// `PeerAddr` or an identity, or lift the bound.
    pub fn max_sessions_per_caller(&mut self, sessions: Option<usize>) -> &mut Self {
        self.max_sessions_per_caller = sessions;
        self
    }

    /// Most TCP connections one client address may hold open at once on an HTTP listener
    /// served by `mcp_server::HttpService::serve`. Default 256; `None` lifts the bound.
    ///
    /// A connection accepted past it is closed at once, before a byte is read. The listener's
    /// own connection bound is shared the same way as the tables here: when it is full, a
    /// connection from an address below its fair share takes the place of the oldest
    /// connection still reading its request head (an idle keep-alive, or a slow head) of an
    /// address above its share, else of the address holding the most; an address at or above
    /// its share replaces only its own oldest connection still reading its head, else its new
    /// connection is closed at once. The engine does not enforce this; a mounted service relies
    /// on the host server's bounds. Behind a reverse proxy every connection comes from the
    /// proxy's address: lift the bound there.
    pub fn max_http_connections_per_peer(&mut self, connections: Option<usize>) -> &mut Self {
        self.max_http_connections_per_peer = connections;
        self
    }

    /// A caller's fair share of a table of `capacity` places held among `holders` callers (the
    /// caller asking counted among them): `capacity / holders`, and at least 1. The rule every
    /// per-caller share here follows, for layers that keep tables of their own.
    ///
    /// ```
    /// assert_eq!(mcp_proto::Limits::fair_share(1024, 2), 512);
    /// assert_eq!(mcp_proto::Limits::fair_share(3, 5), 1);
    /// ```
    pub fn fair_share(capacity: usize, holders: usize) -> usize {
        (capacity / holders.max(1)).max(1)
    }

    /// The current [`max_http_connections_per_peer`](Self::max_http_connections_per_peer).
    pub fn http_connections_per_peer(&self) -> Option<usize> {
        self.max_http_connections_per_peer
    }

    /// The current [`stream_queue`](Self::stream_queue).
    pub fn stream_queue_len(&self) -> usize {
        self.stream_queue
    }

    /// The current [`max_queued_frames`](Self::max_queued_frames).
    pub fn queued_frames(&self) -> usize {
        self.max_queued_frames
    }

    /// The current [`max_frame_bytes`](Self::max_frame_bytes).
    pub fn frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// The current [`max_in_flight`](Self::max_in_flight).
    pub fn in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// The current [`max_response_bytes`](Self::max_response_bytes).
    pub fn response_bytes(&self) -> usize {
        self.max_response_bytes
    }
}
