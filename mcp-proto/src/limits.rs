//! Every bound and timeout of the engine and of the server layer, in one place.
//!
//! Defaults come from the reference servers this project must match (see the seeds: 2 MiB ingress,
//! 16 MiB responses, 256-byte ids and method names). Each setter says its default and what crossing
//! the bound does; every value of every setter, zero and the type's maximum included, is safe: it
//! may refuse everything or bound nothing, but it never panics, overflows or stalls the engine.

use std::time::Duration;

/// The bounds and timeouts of one [`Engine`](crate::Engine) and of the server layer and HTTP
/// transport that drive it.
///
/// Build with [`Limits::default`] and adjust with the `&mut Self` setters, which chain:
///
/// ```
/// let mut limits = mcp_proto::Limits::default();
/// limits.max_frame_bytes(1 << 20).max_in_flight(32);
/// assert_eq!(limits.frame_bytes(), 1 << 20);
/// ```
///
/// # Engine
///
/// Enforced by the engine on every transport.
///
/// - Frames and messages: [`max_frame_bytes`](Self::max_frame_bytes) (also the HTTP body
///   bound), [`max_id_bytes`](Self::max_id_bytes), [`max_method_bytes`](Self::max_method_bytes),
///   [`max_depth`](Self::max_depth), [`max_batch_len`](Self::max_batch_len),
///   [`max_response_bytes`](Self::max_response_bytes), [`max_uri_bytes`](Self::max_uri_bytes).
/// - Concurrency: [`max_connections`](Self::max_connections), [`max_in_flight`](Self::max_in_flight),
///   [`max_queued_frames`](Self::max_queued_frames), [`max_listens`](Self::max_listens).
/// - Calls and interactions: [`call_timeout`](Self::call_timeout),
///   [`ask_timeout`](Self::ask_timeout), [`max_input_rounds`](Self::max_input_rounds), [`state_ttl`](Self::state_ttl),
///   [`cache_ttl`](Self::cache_ttl), [`progress_interval`](Self::progress_interval),
///   [`max_progress_bytes`](Self::max_progress_bytes), [`page_size`](Self::page_size).
/// - Subscriptions: [`max_subscribed_uris`](Self::max_subscribed_uris),
///   [`max_subscriptions`](Self::max_subscriptions).
/// - Slow readers and the engine-wide call table (the last block):
///   [`stall_timeout`](Self::stall_timeout), [`max_calls`](Self::max_calls).
/// - Tasks (the `io.modelcontextprotocol/tasks` extension): [`max_tasks`](Self::max_tasks),
///   [`task_ttl`](Self::task_ttl), [`task_poll_interval`](Self::task_poll_interval).
/// - HTTP sessions and streams: [`max_sessions`](Self::max_sessions),
///   [`session_idle`](Self::session_idle), [`session_handshake`](Self::session_handshake),
///   [`max_streams`](Self::max_streams), [`max_streams_per_caller`](Self::max_streams_per_caller),
///   [`seat_policy`](Self::seat_policy), [`stream_queue`](Self::stream_queue),
///   [`keepalive`](Self::keepalive), [`sse_retry`](Self::sse_retry),
///   [`replay_events`](Self::replay_events), [`replay_bytes`](Self::replay_bytes).
/// - Resuming a legacy `POST` response stream: [`resume_window`](Self::resume_window),
///   [`resume_bytes`](Self::resume_bytes) (each stream is also bounded by
///   [`replay_events`](Self::replay_events) and [`replay_bytes`](Self::replay_bytes)).
///
/// # HTTP transport
///
/// Enforced before the engine sees a request ([`http::check_head`](crate::http::check_head),
/// [`http::check_body_len`](crate::http::check_body_len)) or by the server layer's HTTP endpoint:
/// [`max_head_bytes`](Self::max_head_bytes), [`header_read_timeout`](Self::header_read_timeout),
/// [`body_read_timeout`](Self::body_read_timeout),
/// [`max_http_connections`](Self::max_http_connections),
/// [`max_http_connections_per_peer`](Self::max_http_connections_per_peer),
/// [`max_discard_bytes`](Self::max_discard_bytes), [`discard_timeout`](Self::discard_timeout).
/// The body bound is [`max_frame_bytes`](Self::max_frame_bytes): a body is one frame.
///
/// # Server layer
///
/// Enforced by `mcp-server`'s driver and stdio loop: [`drain_timeout`](Self::drain_timeout),
/// [`max_parked_frames`](Self::max_parked_frames); by its HTTP endpoint when it forwards a
/// request to the replica holding its session or task: [`forward_timeout`](Self::forward_timeout).
///
/// # Replay ledger
///
/// Enforced by the engine on 2026-07-28 retries that carry a `requestState`:
/// [`max_ledger_entries`](Self::max_ledger_entries), [`max_ledger_bytes`](Self::max_ledger_bytes).
/// Both are shared fairly among callers, like the session and connection tables: a caller that
/// fills the ledger evicts its own records, and the `evicted` refusals that follow are its own.
///
/// Bounds that are protocol rules rather than policy (the 128-byte `Mcp-Session-Id`, the 100
/// completion values, the 128-character tool name) are constants, not fields here.
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
    pub(crate) progress_interval: Duration,
    pub(crate) max_progress_bytes: usize,
    pub(crate) max_sessions: usize,
    pub(crate) session_idle: Duration,
    pub(crate) session_handshake: Duration,
    pub(crate) max_streams: Option<usize>,
    pub(crate) max_streams_per_caller: Option<usize>,
    pub(crate) seat_policy: SeatPolicy,
    pub(crate) stream_queue: usize,
    pub(crate) keepalive: Duration,
    pub(crate) sse_retry: Duration,
    pub(crate) replay_events: usize,

    // Engine: calls and interactions.
    pub(crate) call_timeout: Option<Duration>,
    pub(crate) max_input_rounds: u32,
    pub(crate) state_ttl: Duration,
    pub(crate) cache_ttl: Duration,
    pub(crate) replay_bytes: usize,

    // HTTP transport.
    pub(crate) max_head_bytes: usize,
    pub(crate) header_read_timeout: Duration,
    pub(crate) body_read_timeout: Duration,
    pub(crate) max_http_connections: usize,
    pub(crate) max_discard_bytes: usize,
    pub(crate) discard_timeout: Duration,

    // Server layer.
    pub(crate) drain_timeout: Duration,
    pub(crate) max_parked_frames: usize,
    pub(crate) forward_timeout: Duration,

    // Asking the client (legacy server→client requests).
    pub(crate) ask_timeout: Duration,

    // Per-caller shares of the global tables.
    pub(crate) max_sessions_per_caller: Option<usize>,
    pub(crate) max_http_connections_per_peer: Option<usize>,

    // Resuming legacy POST response streams.
    pub(crate) resume_window: Duration,
    pub(crate) resume_bytes: usize,

    // Replay ledger (2026-07-28 request states already used).
    pub(crate) max_ledger_entries: usize,
    pub(crate) max_ledger_bytes: usize,

    // Slow readers and the engine-wide call table.
    pub(crate) stall_timeout: Duration,
    pub(crate) max_calls: usize,

    // Tasks extension (io.modelcontextprotocol/tasks).
    pub(crate) max_tasks: usize,
    pub(crate) task_ttl: Duration,
    pub(crate) task_poll_interval: Duration,
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
            progress_interval: Duration::from_millis(100),
            max_progress_bytes: 8 * 1024,
            max_sessions: 1024,
            session_idle: Duration::from_secs(15 * 60),
            session_handshake: Duration::from_secs(30),
            max_streams: Some(1024),
            max_streams_per_caller: Some(16),
            seat_policy: SeatPolicy::Refuse,
            stream_queue: 16,
            keepalive: Duration::from_secs(15),
            sse_retry: Duration::from_secs(3),
            replay_events: 64,

            call_timeout: None,
            max_input_rounds: 10,
            state_ttl: Duration::from_secs(10 * 60),
            cache_ttl: Duration::from_secs(60),
            replay_bytes: crate::sse::DEFAULT_REPLAY_BYTES,

            max_head_bytes: 8 * 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_http_connections: 1024,
            max_discard_bytes: 16 * 1024 * 1024,
            discard_timeout: Duration::from_secs(5),

            drain_timeout: Duration::from_secs(10),
            max_parked_frames: 16,
            forward_timeout: Duration::from_secs(5),

            // Asking the client.
            ask_timeout: Duration::from_secs(60),

            // Per-caller shares.
            max_sessions_per_caller: Some(64),
            max_http_connections_per_peer: Some(256),

            // Resuming legacy POST response streams.
            resume_window: Duration::from_secs(30),
            resume_bytes: 8 * 1024 * 1024,

            // Replay ledger.
            max_ledger_entries: 4096,
            max_ledger_bytes: 8 * 1024 * 1024,

            // Slow readers and the engine-wide call table.
            stall_timeout: Duration::from_secs(10),
            max_calls: 4096,

            // Tasks.
            max_tasks: 1024,
            task_ttl: Duration::from_secs(5 * 60),
            task_poll_interval: Duration::from_millis(500),
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
    pub fn progress_interval(&mut self, interval: Duration) -> &mut Self {
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

    /// How long a legacy HTTP session may go without a request while no stream of it is open
    /// (its `GET` stream, or the response stream of a call in flight). Default 15 minutes.
    ///
    /// After that the session is forgotten, its calls still in flight are cancelled, and its id
    /// answers 404, which tells the client to initialize again. A call whose response stream
    /// the client dropped does not keep the session alive: its answer can reach nobody.
    pub fn session_idle(&mut self, idle: Duration) -> &mut Self {
        self.session_idle = idle;
        self
    }

    /// How long after `initialize` a legacy HTTP session has to send its next message
    /// (`notifications/initialized` or any request). Default 30 s.
    ///
    /// A session that sends nothing more in that time is forgotten, so clients that initialize
    /// and walk away cannot fill the session table.
    pub fn session_handshake(&mut self, timeout: Duration) -> &mut Self {
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

    /// Frames an HTTP response stream may have queued and unwritten. Default 16; values below
    /// 1 count as 1.
    ///
    /// Enforced by the engine on streams whose shim reports its writes
    /// ([`Engine::pace`](crate::Engine::pace); `mcp-server` does for every HTTP stream). A full
    /// stream is not cut for being full: change notifications wait (coalesced, one per kind),
    /// progress and log notifications are dropped (counted in
    /// [`EngineStatus::dropped_notifications`](crate::EngineStatus::dropped_notifications)),
    /// responses and requests to the client are queued past it. Only a reader that stays full
    /// and takes nothing for [`stall_timeout`](Self::stall_timeout) is cut.
    pub fn stream_queue(&mut self, frames: usize) -> &mut Self {
        self.stream_queue = frames;
        self
    }

    /// Interval of the `: keep-alive` comment on a held SSE stream. Default 15 s.
    ///
    /// Each one first re-checks the caller against the server-wide gate: a caller it now refuses
    /// has its stream closed within one interval, and a half-open connection fails the write and
    /// frees its seat.
    pub fn keepalive(&mut self, interval: Duration) -> &mut Self {
        self.keepalive = interval;
        self
    }

    /// The `retry:` a 2025-11-25 SSE stream's priming event asks a reconnecting client to wait.
    /// Default 3 s.
    pub fn sse_retry(&mut self, delay: Duration) -> &mut Self {
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

    // Asking the client (legacy server→client requests).

    /// How long a legacy ask ([`Engine::ask`](crate::Engine::ask) on a 2025-03-26 .. 2025-11-25
    /// session) waits for the client's answers. Default 60 s; `Duration::MAX` waits for ever.
    ///
    /// Past it the handler's ask resolves as [`AskError::TimedOut`](crate::AskError::TimedOut)
    /// (the call itself goes on: the handler decides what to answer), the engine sends the
    /// client `notifications/cancelled` for each request still unanswered on the call's stream,
    /// and a late answer is ignored. A client that never answers thus holds an in-flight slot
    /// ([`max_in_flight`](Self::max_in_flight)) for this long at most, not for ever.
    /// 2026-07-28 asks are unaffected: they end the call with `input_required` and wait for
    /// nothing.
    pub fn ask_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.ask_timeout = timeout;
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

    // -----------------------------------------------------------------------------------------
    // Resuming legacy POST response streams
    //
    // The events of a legacy session's `POST` response stream (its priming event, progress,
    // log messages, server→client requests, the response) are kept, as its `GET` stream's are,
    // so that a client whose stream broke can resume it with a `GET` carrying `Last-Event-ID`.
    // Each stream keeps at most [`replay_events`](Self::replay_events) events and
    // [`replay_bytes`](Self::replay_bytes) bytes; past either its oldest events go first, and a
    // client resuming from before them is sent what is left (the rest of the call, its
    // response included).
    // -----------------------------------------------------------------------------------------

    /// How long a legacy `POST` response stream the client dropped while its call was running
    /// waits to be resumed, and how long the events of one whose call finished meanwhile are
    /// kept for the client to fetch. Default 30 s (ten times the default
    /// [`sse_retry`](Self::sse_retry)); `Duration::MAX` waits for as long as the session lives.
    ///
    /// Past it without a resume, a call of the stream still waiting on the client
    /// ([`Engine::ask`](crate::Engine::ask)) has its ask fail as
    /// [`AskError::Unreachable`](crate::AskError::Unreachable) and is cancelled; a call not
    /// asking keeps running, can no longer ask, and its response goes to the kept events (still
    /// resumable) for this long again; a finished stream's events are dropped, and a resume then
    /// opens a fresh `GET` stream instead. `Duration::ZERO` turns resumption of `POST` streams
    /// off: a dropped stream is forgotten at once, its asks failing at once.
    pub fn resume_window(&mut self, window: Duration) -> &mut Self {
        self.resume_window = window;
        self
    }

    /// Bytes of `POST` response stream events one legacy session keeps for resumption, over all
    /// its streams. Default 8 MiB.
    ///
    /// An event that would cross it evicts the oldest events of its own stream (never another
    /// stream's), and is itself not kept when even that is not enough; a client resuming that
    /// stream is sent what is left. At most [`max_in_flight`](Self::max_in_flight) finished
    /// streams are kept per session, the oldest dropped first.
    pub fn resume_bytes(&mut self, bytes: usize) -> &mut Self {
        self.resume_bytes = bytes;
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

    /// The current [`stream_queue`](Self::stream_queue), at least 1.
    pub fn stream_queue_len(&self) -> usize {
        self.stream_queue.max(1)
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

    // Calls and interactions.

    /// How long a handler may run before its call is cancelled and answered with a timeout
    /// failure. Default `None`: no bound.
    ///
    /// Past it the handler is told to stop and the caller gets the timeout failure at once. Zero
    /// times a call out as soon as the engine next handles a timeout; a duration too large to
    /// add to the current instant (such as `Duration::MAX`) means no bound.
    pub fn call_timeout(&mut self, timeout: Option<Duration>) -> &mut Self {
        self.call_timeout = timeout;
        self
    }

    /// Most rounds of input one call may ask for (2026-07-28 `input_required` retries, legacy
    /// server→client requests). Default 10.
    ///
    /// SEP-2322 gives no bound, and every round costs the client a full request; ten is far
    /// more than any sensible dialogue and keeps a handler that asks in a loop from pinning a
    /// client for ever. The ask past it fails the call with the error `interaction_limit`
    /// instead of another round; with 0 every ask fails so.
    pub fn max_input_rounds(&mut self, rounds: u32) -> &mut Self {
        self.max_input_rounds = rounds;
        self
    }

    /// How long a sealed 2026-07-28 request state stays valid after it is issued. Default 10
    /// minutes.
    ///
    /// Long enough for a person to read a form and answer it, short enough that a state copied
    /// out of a log is soon useless. An older state is refused (`-32602`), and the client has to
    /// start the call again without one. The expiry saturates, so `Duration::MAX` never expires.
    pub fn state_ttl(&mut self, ttl: Duration) -> &mut Self {
        self.state_ttl = ttl;
        self
    }

    /// The `ttlMs` a 2026-07-28 list result (`tools/list`, `resources/list`,
    /// `resources/templates/list`, `prompts/list`) tells the client to reuse it for. Default
    /// 60 s. `resources/read` and `server/discover` follow their own
    /// [`CacheHint`](crate::CacheHint)s instead (default private, TTL 0).
    ///
    /// Advisory: nothing is refused; a client may serve the cached result for that long without
    /// asking again. Sent in whole milliseconds, saturating at `u64::MAX`.
    pub fn cache_ttl(&mut self, ttl: Duration) -> &mut Self {
        self.cache_ttl = ttl;
        self
    }

    /// Bytes of events a legacy session's `GET` stream keeps for `Last-Event-ID` replay, on top
    /// of [`replay_events`](Self::replay_events). Default 4 MiB
    /// ([`sse::DEFAULT_REPLAY_BYTES`](crate::sse::DEFAULT_REPLAY_BYTES)).
    ///
    /// Past it the oldest events are forgotten, with the same outcome as
    /// [`replay_events`](Self::replay_events): a client that missed them is told every list
    /// changed.
    pub fn replay_bytes(&mut self, bytes: usize) -> &mut Self {
        self.replay_bytes = bytes;
        self
    }

    // HTTP transport.

    /// Largest HTTP request head, in bytes, as HTTP/1.1 would serialise it (request line, every
    /// `name: value` line, the blank line). Default 8 KiB, the limit common HTTP servers use
    /// (Apache's 8190 bytes, nginx's 8 KiB `large_client_header_buffers`).
    ///
    /// A larger head is refused with 431 before anything else is looked at. The server layer
    /// sets hyper's read buffer a little above it, so heads near the bound still get the 431.
    pub fn max_head_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_head_bytes = bytes;
        self
    }

    /// How long an HTTP client has to send a complete request head, counted from when the server
    /// starts waiting for it. Default 10 s.
    ///
    /// This is the slow-loris bound: a connection whose head is not complete in time is closed
    /// without an answer. It also bounds how long an idle keep-alive connection is kept, since
    /// waiting for the next request is waiting for its head. Zero closes every connection before
    /// its first request; a duration too large to add to the current instant means no bound.
    /// Enforced by the server layer's own listener; a mounted endpoint relies on its host's.
    pub fn header_read_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.header_read_timeout = timeout;
        self
    }

    /// How long the whole body of an HTTP `POST` may take to arrive, counted from when its head
    /// was admitted. Default 30 s.
    ///
    /// When it runs out the request is answered with 408 (and `Connection: close`, since the
    /// rest of the body was not read), and the engine never sees it. 30 s passes a 2 MiB body at
    /// about 70 KB/s; raise it for slower clients or larger bodies.
    pub fn body_read_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.body_read_timeout = timeout;
        self
    }

    /// Most TCP connections the server layer's HTTP listener serves at once. Default 1024.
    ///
    /// The places are shared fairly among client addresses: when all are taken, a connection
    /// from an address holding less than its fair share (this bound divided by the addresses
    /// holding connections, itself included) takes the place of the oldest connection still
    /// reading its request head (an idle keep-alive or a slow head) of an address above its
    /// share, else of the oldest connection of the address holding the most, which is cut. Any
    /// other connection accepted past it, or past
    /// [`max_http_connections_per_peer`](Self::max_http_connections_per_peer) for its address,
    /// is closed at once, before a byte is read: the client sees the connection reset or closed
    /// and may retry. Keep-alive connections and open SSE streams count until they end. A
    /// mounted endpoint relies on its host server's bound instead.
    pub fn max_http_connections(&mut self, connections: usize) -> &mut Self {
        self.max_http_connections = connections;
        self
    }

    /// Bytes of an HTTP body refused with 413 that are read and dropped before the refusal is
    /// sent. Default 16 MiB.
    ///
    /// Most clients write their whole body before they read anything, and a socket closed with
    /// unread bytes is reset, destroying the 413 before the client reads it. Past this many
    /// bytes the connection is closed with the rest unread, and such a client sees the reset.
    pub fn max_discard_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_discard_bytes = bytes;
        self
    }

    /// How long the rest of an HTTP body refused with 413 is read and dropped at most. Default
    /// 5 s.
    ///
    /// Past it the connection is closed with the rest unread (see
    /// [`max_discard_bytes`](Self::max_discard_bytes)).
    pub fn discard_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.discard_timeout = timeout;
        self
    }

    // Server layer.

    /// How long a stdio session whose input ended waits for its calls in flight before
    /// cancelling them. Default 10 s.
    ///
    /// Calls still running then are cancelled and the session ends. The examples also use it as
    /// their shutdown budget.
    pub fn drain_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.drain_timeout = timeout;
        self
    }

    /// Frames a stdio connection may have held back by the driver (the connection being at its
    /// [`max_in_flight`](Self::max_in_flight) bound) before its reader stops reading. Default 16;
    /// values below 1 count as 1.
    ///
    /// Past it no more input is read until a call finishes, so a client that pipelines requests
    /// costs at most this many frames of memory, not as many as it can write.
    pub fn max_parked_frames(&mut self, frames: usize) -> &mut Self {
        self.max_parked_frames = frames.max(1);
        self
    }

    /// How long a replica waits for the replica holding a legacy session or a running task to
    /// take a request it forwards (see `mcp_server::cluster`): to connect, and, for a request
    /// that is answered at once (a `GET` stream, a `DELETE`, `tasks/*`), to send the response
    /// head. Default 5 s.
    ///
    /// Past it the holder counts as unreachable: its directory entry is dropped and the request
    /// is answered as one for an unknown session (404) or task (`-32602`). A legacy `POST` whose
    /// answer waits for a call is not bounded beyond the connect: it may take as long as the
    /// call would take on the holder, whose own bounds ([`call_timeout`](Self::call_timeout))
    /// apply. Zero refuses every forward; a duration too large to add to the current instant
    /// means no bound.
    pub fn forward_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.forward_timeout = timeout;
        self
    }

    /// The current [`forward_timeout`](Self::forward_timeout).
    pub fn forward_time(&self) -> Duration {
        self.forward_timeout
    }

    /// The current [`max_head_bytes`](Self::max_head_bytes).
    pub fn head_bytes(&self) -> usize {
        self.max_head_bytes
    }

    /// The current [`header_read_timeout`](Self::header_read_timeout).
    pub fn header_timeout(&self) -> Duration {
        self.header_read_timeout
    }

    /// The current [`body_read_timeout`](Self::body_read_timeout).
    pub fn body_timeout(&self) -> Duration {
        self.body_read_timeout
    }

    /// The current [`max_http_connections`](Self::max_http_connections).
    pub fn http_connections(&self) -> usize {
        self.max_http_connections
    }

    /// The current [`max_discard_bytes`](Self::max_discard_bytes).
    pub fn discard_bytes(&self) -> usize {
        self.max_discard_bytes
    }

    /// The current [`discard_timeout`](Self::discard_timeout).
    pub fn discard_time(&self) -> Duration {
        self.discard_timeout
    }

    /// The current [`drain_timeout`](Self::drain_timeout).
    pub fn drain_time(&self) -> Duration {
        self.drain_timeout
    }

    /// The current [`max_parked_frames`](Self::max_parked_frames).
    pub fn parked_frames(&self) -> usize {
        self.max_parked_frames
    }

    // -----------------------------------------------------------------------------------------
    // Replay ledger
    //
    // A 2026-07-28 retry carrying a `requestState` runs a handler with side effects; a client
    // that re-sends it (as Streamable HTTP tells it to when a response stream breaks) must not
    // run that handler again. The engine records what each used state's call answered until the
    // state expires, and answers a replay from the record (see `Engine::ask`, "Replays").
    // -----------------------------------------------------------------------------------------

    /// Most outcomes of used 2026-07-28 request states the engine keeps for replays. Default
    /// 4096.
    ///
    /// An entry lives until its state expires ([`state_ttl`](Self::state_ttl) after it was
    /// issued). The bound is shared fairly among callers ([`Caller::binding`](crate::Caller::binding),
    /// as [`fair_share`](Self::fair_share) computes it among those holding entries): past it, a
    /// caller at or above its share forgets its own entry whose state expires first; a caller
    /// below its share takes the place of the first-expiring entry of the caller holding the
    /// most (above its share whenever anyone is), never of one below its share. From then on
    /// every state *of the caller that lost the entry* expiring no later than it that the ledger
    /// does not hold is refused with `-32602` "requestState already used"
    /// (`data.reason: "evicted"`) rather than run: the engine can no longer tell a first use
    /// from a replay, and a refused client starts the call again without a state. Other
    /// callers' states are unaffected, so a caller flooding the ledger evicts and refuses only
    /// its own. A caller whose every entry was evicted keeps that refusal as one entry of the
    /// bound until the time passes; only when more callers than the bound hold one at once does
    /// such a refusal, pushed out, apply to every caller. Size it to the modern retries a
    /// server completes within one `state_ttl` (the default covers about 7 per second for 10
    /// minutes). Calls still running are not counted: they are bounded by
    /// [`max_in_flight`](Self::max_in_flight). With 0 nothing is kept and every replay (and every
    /// state expiring no later than one used) is refused as evicted.
    pub fn max_ledger_entries(&mut self, entries: usize) -> &mut Self {
        self.max_ledger_entries = entries;
        self
    }

    /// Most bytes of recorded outcomes the replay ledger keeps (each entry counts its encoded
    /// answer plus 64 bytes of bookkeeping). Default 8 MiB.
    ///
    /// Past it entries are forgotten as for [`max_ledger_entries`](Self::max_ledger_entries),
    /// with the same fair share per caller, in bytes: a caller below its share of bytes takes
    /// the place of an entry of one above its share (the caller with the most entries if it is
    /// above its share of entries, else the one with the most bytes), and a caller at or above
    /// its share forgets its own; the refusals that follow are that caller's alone. An outcome
    /// past its caller's share of bytes by itself, while nobody is past theirs, is kept only as
    /// too large (`outcome_too_large`) rather than pushing out a caller within its share.
    /// One outcome larger than a sixteenth of this bound (512 KiB by default) is not kept at
    /// all, so that one large answer cannot flush the ledger: its replay is refused with
    /// `-32602` "requestState already used" (`data.reason: "outcome_too_large"`), still
    /// without running the handler again.
    pub fn max_ledger_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_ledger_bytes = bytes;
        self
    }

    /// The current [`max_ledger_entries`](Self::max_ledger_entries).
    pub fn ledger_entries(&self) -> usize {
        self.max_ledger_entries
    }

    /// The current [`max_ledger_bytes`](Self::max_ledger_bytes).
    pub fn ledger_bytes(&self) -> usize {
        self.max_ledger_bytes
    }

    // -----------------------------------------------------------------------------------------
    // Slow readers and the engine-wide call table
    // -----------------------------------------------------------------------------------------

    /// How long a paced stream ([`Engine::pace`](crate::Engine::pace): every HTTP stream
    /// `mcp-server` serves) may sit with a full queue ([`stream_queue`](Self::stream_queue))
    /// while its reader takes nothing, before it is cut. Default 10 s.
    ///
    /// The clock runs from the later of the reader's last progress and the moment the queue
    /// went from empty to holding something, so a stream idle for an hour and then filled by a
    /// burst still has the whole period to read. Past it the stream closes with
    /// [`CloseReason::Stalled`](crate::CloseReason::Stalled) (its calls are cancelled, its
    /// seat freed, and the server layer cuts its connection). A reader merely behind by a burst
    /// keeps taking frames and is never cut. Zero cuts a full stream at the next timer step;
    /// a duration too large to add to the current instant (such as `Duration::MAX`) never cuts.
    pub fn stall_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.stall_timeout = timeout;
        self
    }

    /// Calls in flight over the whole engine, every connection and session together. Default
    /// 4096.
    ///
    /// [`max_in_flight`](Self::max_in_flight) bounds one connection; a caller holding many
    /// sessions would otherwise hold that many times as many calls. When this many are in
    /// flight, a call of a caller holding less than its fair share (this bound divided by the
    /// callers with calls in flight, itself included) is still admitted; any other is answered
    /// at once with `-32600` ("too many requests in flight", a share limit) and never reaches a
    /// handler. A call in flight is never displaced. Admissions below share can take the table
    /// past this bound, but never past twice it: at that point every call is refused.
    pub fn max_calls(&mut self, calls: usize) -> &mut Self {
        self.max_calls = calls;
        self
    }

    /// The current [`stall_timeout`](Self::stall_timeout).
    pub fn stall_time(&self) -> Duration {
        self.stall_timeout
    }

    /// The current [`max_calls`](Self::max_calls).
    pub fn calls(&self) -> usize {
        self.max_calls
    }

    // -----------------------------------------------------------------------------------------
    // Tasks (the io.modelcontextprotocol/tasks extension, 2026-07-28)
    // -----------------------------------------------------------------------------------------

    /// Most tasks the engine holds at once, running and ended together. Default 1024.
    ///
    /// The table is shared fairly among callers ([`fair_share`](Self::fair_share) over the
    /// callers holding tasks, the asking caller counted). When it is full, a new task first
    /// takes the place of the asking caller's own oldest ended task; failing that, a caller below
    /// its share takes the place of the oldest ended task of the caller holding the most tasks,
    /// if that caller is above its share. Running tasks are never displaced. When no place can
    /// be made the `tools/call` is refused at once and its handler never runs: `-32600` "too
    /// many tasks" (a share limit) when the caller holds its share or more, `-32603` (a capacity
    /// limit) when the table is full of running tasks and ended ones of callers within their
    /// share. An ended task that made room is gone from the engine: a `tasks/get` for it is
    /// answered `-32602` "unknown task", unless a task store kept beyond the engine
    /// ([`RegistryMut::set_task_lookup`](crate::RegistryMut::set_task_lookup)) still holds it.
    /// With 0 every task is refused.
    pub fn max_tasks(&mut self, tasks: usize) -> &mut Self {
        self.max_tasks = tasks;
        self
    }

    /// How long an ended task (completed, failed or cancelled) stays readable through
    /// `tasks/get`, counted from when it ended; sent to clients as `ttlMs`. Default 5 minutes.
    ///
    /// Past it the task is forgotten and `tasks/get` answers `-32602` "unknown task" (unless
    /// the server layer's task store still holds its record).
    /// A running task does not expire: it ends by itself, by `tasks/cancel`, or by
    /// [`call_timeout`](Self::call_timeout). Zero forgets an ended task at the next timer step
    /// (a client is then told `ttlMs: 1`, the smallest positive value); a duration too large to
    /// add to the current instant keeps ended tasks until [`max_tasks`](Self::max_tasks) makes
    /// room.
    pub fn task_ttl(&mut self, ttl: Duration) -> &mut Self {
        self.task_ttl = ttl;
        self
    }

    /// The polling interval suggested to clients of a task (`pollIntervalMs`). Default 500 ms.
    ///
    /// Only advice: a client polling faster is served all the same (bound its rate with the
    /// transport's limits). Zero is sent as 1 ms, the smallest positive value the field allows.
    pub fn task_poll_interval(&mut self, interval: Duration) -> &mut Self {
        self.task_poll_interval = interval;
        self
    }

    /// The current [`max_tasks`](Self::max_tasks).
    pub fn tasks(&self) -> usize {
        self.max_tasks
    }
}
