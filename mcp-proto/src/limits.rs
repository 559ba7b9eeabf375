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
    /// [`OpenError::TooManyConnections`](crate::OpenError::TooManyConnections).
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
