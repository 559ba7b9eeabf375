//! Every bound and timeout of the engine and of the server layer, in one place.
//!
//! Defaults come from the reference servers this project must match (see the seeds: 2 MiB ingress,
//! 16 MiB responses, 256-byte ids and method names). Each setter says its default and what crossing
//! the bound does; every value of every setter, zero and the type's maximum included, is safe: it
//! may refuse everything or bound nothing, but it never panics, overflows or stalls the engine.

use std::time::Duration;

mod outer;

/// The bounds and timeouts of one [`Engine`](crate::engine::Engine) and of the server layer and HTTP
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
///   [`progress_interval`](Self::progress_interval),
///   [`max_progress_bytes`](Self::max_progress_bytes), [`page_size`](Self::page_size).
/// - Subscriptions: [`max_subscribed_uris`](Self::max_subscribed_uris),
///   [`max_subscriptions`](Self::max_subscriptions).
/// - Slow readers and the engine-wide call table (the last block):
///   [`stall_timeout`](Self::stall_timeout), [`max_calls`](Self::max_calls).
/// - Tasks (the `io.modelcontextprotocol/tasks` extension): [`max_tasks`](Self::max_tasks),
///   [`task_ttl`](Self::task_ttl), [`task_poll_interval`](Self::task_poll_interval),
///   [`max_task_result_bytes`](Self::max_task_result_bytes),
///   [`max_ended_task_bytes`](Self::max_ended_task_bytes).
/// - HTTP sessions and streams: [`max_sessions`](Self::max_sessions),
///   [`session_idle`](Self::session_idle), [`session_handshake`](Self::session_handshake),
///   [`max_streams`](Self::max_streams), [`max_streams_per_caller`](Self::max_streams_per_caller),
///   [`seat_policy`](Self::seat_policy), [`stream_queue`](Self::stream_queue),
///   [`keepalive`](Self::keepalive), [`sse_retry`](Self::sse_retry),
///   [`replay_events`](Self::replay_events), [`replay_bytes`](Self::replay_bytes).
/// - Compact publication's `search_tools`:
///   [`max_search_query_bytes`](Self::max_search_query_bytes),
///   [`max_search_query_words`](Self::max_search_query_words).
/// - Resuming a legacy `POST` response stream: [`resume_window`](Self::resume_window),
///   [`resume_bytes`](Self::resume_bytes), [`max_resume_bytes`](Self::max_resume_bytes) (each stream is also bounded by
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
/// request to the replica holding its session or task: [`forward_timeout`](Self::forward_timeout);
/// by its cluster membership when it claims a retry in the shared replay ledger:
/// [`claim_lease`](Self::claim_lease).
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
    pub(crate) claim_lease: Duration,

    // Asking the client (legacy server→client requests).
    pub(crate) ask_timeout: Duration,

    // Per-caller shares of the global tables.
    pub(crate) max_sessions_per_caller: Option<usize>,
    pub(crate) max_http_connections_per_peer: Option<usize>,

    // Resuming legacy POST response streams.
    pub(crate) resume_window: Duration,
    pub(crate) resume_bytes: usize,
    pub(crate) max_resume_bytes: usize,

    // Compact publication's `search_tools`.
    pub(crate) max_search_query_bytes: usize,
    pub(crate) max_search_query_words: usize,

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
    pub(crate) max_task_result_bytes: usize,
    pub(crate) max_ended_task_bytes: usize,
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
            claim_lease: Duration::from_secs(30),

            // Asking the client.
            ask_timeout: Duration::from_secs(60),

            // Per-caller shares.
            max_sessions_per_caller: Some(64),
            max_http_connections_per_peer: Some(256),

            // Resuming legacy POST response streams.
            resume_window: Duration::from_secs(30),
            resume_bytes: 8 * 1024 * 1024,
            max_resume_bytes: 64 * 1024 * 1024,

            // Compact publication's search.
            max_search_query_bytes: 1024,
            max_search_query_words: 64,

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
            max_task_result_bytes: 4 * 1024 * 1024,
            max_ended_task_bytes: 32 * 1024 * 1024,
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
    /// `isError: true`) of bounded size; any other oversized result becomes `-32603`. A log
    /// notification over it is not sent. What a handler's
    /// [`Engine::ask`](crate::engine::Engine::ask) would send the client (a legacy
    /// `elicitation/create`, `sampling/createMessage` or `roots/list` request, a 2026-07-28
    /// `input_required` result) is held to it too: over it nothing is sent and the ask fails
    /// with [`AskError::TooLarge`](crate::engine::AskError::TooLarge), the call still in flight.
    pub fn max_response_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Connections (stdio sessions, HTTP exchanges, streams) open at once. Default 4096.
    ///
    /// [`Engine::open`](crate::engine::Engine::open) beyond it returns
    /// [`OpenError::TooManyConnections`](crate::engine::OpenError::TooManyConnections), and an HTTP
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
    /// ([`Engine::pace`](crate::engine::Engine::pace); `mcp-server` does for every HTTP stream). A full
    /// stream is not cut for being full: change notifications wait (coalesced, one per kind),
    /// progress and log notifications are dropped (counted in
    /// [`EngineStatus::dropped_notifications`](crate::engine::EngineStatus::dropped_notifications)),
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

    /// How long a legacy ask ([`Engine::ask`](crate::engine::Engine::ask) on a 2025-03-26 .. 2025-11-25
    /// session) waits for the client's answers. Default 60 s; `Duration::MAX` waits for ever.
    ///
    /// Past it the handler's ask resolves as [`AskError::TimedOut`](crate::engine::AskError::TimedOut)
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
    // [`Caller::binding`](crate::caller::Caller::binding): the identity the middleware set, else the
    // peer address. Displaced entries close with
    // [`CloseReason::Displaced`](crate::engine::CloseReason::Displaced).
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
    /// ([`Engine::ask`](crate::engine::Engine::ask)) has its ask fail as
    /// [`AskError::Unreachable`](crate::engine::AskError::Unreachable) and is cancelled; a call not
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

    /// Bytes of `POST` response stream events kept for resumption over all legacy sessions.
    /// Default 64 MiB.
    ///
    /// Each caller's part of it is its fair share ([`fair_share`](Self::fair_share) of this
    /// among the callers keeping any): a caller alone may fill it, and one that keeps more than
    /// its share while the total is reached loses its own oldest events first. An event that
    /// would cross it evicts, oldest first, the events of the caller recording it when that
    /// caller is at or over its share (its other streams' too, and the event itself when
    /// nothing older is left); otherwise those of the caller keeping the most. A caller below
    /// its share thus keeps its events whatever another caller records, and a client resuming
    /// a stream that lost events is sent what is left (as for [`resume_bytes`](Self::resume_bytes)).
    pub fn max_resume_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_resume_bytes = bytes;
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

    /// These limits for one of `parts` engines that serve one endpoint together (the shards of
    /// a sharded server): every table the engine bounds as a whole, and every per-caller share
    /// of one, is divided among them, rounded up, so that the process as a whole stays within
    /// the bound documented here and a hostile caller spread over every shard still holds no
    /// more than its one share. Divided: [`max_connections`](Self::max_connections),
    /// [`max_sessions`](Self::max_sessions), [`max_sessions_per_caller`](Self::max_sessions_per_caller),
    /// [`max_streams`](Self::max_streams), [`max_streams_per_caller`](Self::max_streams_per_caller),
    /// [`max_subscribed_uris`](Self::max_subscribed_uris), [`max_subscriptions`](Self::max_subscriptions),
    /// [`max_calls`](Self::max_calls), [`max_tasks`](Self::max_tasks),
    /// [`max_resume_bytes`](Self::max_resume_bytes), [`max_ledger_entries`](Self::max_ledger_entries),
    /// [`max_ledger_bytes`](Self::max_ledger_bytes). A divided bound that was at least 1 stays at
    /// least 1 (0 still refuses everything). Everything per frame, per request, per connection
    /// or per stream, every timeout, and the HTTP transport's bounds (which the shards' shared
    /// endpoint enforces once for all) are unchanged. `parts` of 0 counts as 1.
    ///
    /// Rounding up lets the whole exceed a bound by less than `parts` places. A caller whose
    /// sessions all land on one shard gets that shard's part of its share, not the whole.
    ///
    /// ```
    /// let mut limits = mcp_proto::Limits::default();
    /// limits.max_sessions(1024).max_sessions_per_caller(Some(5));
    /// let part = limits.split(2);
    /// assert_eq!(part.sessions(), 512);
    /// assert_eq!(part.sessions_per_caller(), Some(3));
    /// ```
    pub fn split(&self, parts: usize) -> Limits {
        let parts = parts.max(1);
        let div = |bound: usize| if bound == usize::MAX { bound } else { bound.div_ceil(parts) };
        let mut l = self.clone();
        l.max_connections = div(l.max_connections);
        l.max_sessions = div(l.max_sessions);
        l.max_sessions_per_caller = l.max_sessions_per_caller.map(div);
        l.max_streams = l.max_streams.map(div);
        l.max_streams_per_caller = l.max_streams_per_caller.map(div);
        l.max_subscribed_uris = div(l.max_subscribed_uris);
        l.max_subscriptions = div(l.max_subscriptions);
        l.max_calls = div(l.max_calls);
        l.max_tasks = div(l.max_tasks);
        l.max_resume_bytes = div(l.max_resume_bytes);
        l.max_ledger_entries = div(l.max_ledger_entries);
        l.max_ledger_bytes = div(l.max_ledger_bytes);
        l
    }

    /// The current [`max_sessions`](Self::max_sessions).
    pub fn sessions(&self) -> usize {
        self.max_sessions
    }

    /// The current [`max_sessions_per_caller`](Self::max_sessions_per_caller).
    pub fn sessions_per_caller(&self) -> Option<usize> {
        self.max_sessions_per_caller
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

    // Compact publication's `search_tools`.

    /// Longest `query` a compact-mode `search_tools` accepts, in bytes of its UTF-8. Default
    /// 1 KiB: a search is a few words, and a query a hundred times longer than any sensible one
    /// could only be a way to make the server work.
    ///
    /// A longer query is refused with `-32602` naming this bound (a size limit) before a word of
    /// it is read, so a frame-sized query costs what parsing the frame cost and no more.
    pub fn max_search_query_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_search_query_bytes = bytes;
        self
    }

    /// Most words (runs of letters and digits, camel case split: the tokens the search ranks
    /// by) in a compact-mode `search_tools` `query`. Default 64; only the first 16 distinct
    /// ones are ranked by in any case.
    ///
    /// A query with more is refused with `-32602` naming this bound (a size limit), the words
    /// being read only up to the first one past it. Refusing rather than truncating tells the
    /// caller its query was not the one searched for.
    pub fn max_search_query_words(&mut self, words: usize) -> &mut Self {
        self.max_search_query_words = words;
        self
    }
}
