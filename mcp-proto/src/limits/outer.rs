//! The bounds enforced around the engine rather than in it (the HTTP transport and the server
//! layer), and the engine's shared tables (the replay ledger, the call table, tasks): the
//! second half of [`Limits`]'s setters and getters, kept apart so that neither file is a wall.

use std::time::Duration;

use super::Limits;

impl Limits {
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
    ///
    /// The same time bounds the server layer's identify hook (`ServerBuilder::identify` in
    /// `mcp-server`), which turns a head into a caller, on every endpoint, mounted or not: a
    /// hook that has not answered in time is dropped and its request refused with 503 and
    /// `Retry-After`.
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
    /// Past it the request is not forwarded: while the holder still advertises itself (it may be
    /// busy or slow) the client is answered 503 with `Retry-After` and the holder keeps its
    /// directory entry; once its advertisement has expired (it is gone) the request is answered
    /// as one for an unknown session (404) or task (`-32602`). A legacy `POST` whose
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

    /// How long a replica's claim on a retry in a cluster's shared replay ledger holds before it
    /// must be renewed (see `mcp_server::cluster`), while the retry runs. Default 30 s.
    ///
    /// The replica running the retry renews the claim every third of this, until the call ends
    /// and its outcome replaces the claim. A replica that dies mid-call renews nothing, so its
    /// claim lapses within this and a copy of the retry sent to another replica runs there
    /// (until then copies are refused `in_progress`). Shorter frees a dead replica's retries
    /// sooner, at one backend write per claim per third; zero claims nothing for longer than
    /// the claim takes (every copy then may run once per replica). A lease never outlives the
    /// state it claims, nor the call's deadline by more than
    /// [`CLAIM_MARGIN_MS`](crate::engine::CLAIM_MARGIN_MS).
    pub fn claim_lease(&mut self, lease: Duration) -> &mut Self {
        self.claim_lease = lease;
        self
    }

    /// The current [`claim_lease`](Self::claim_lease).
    pub fn claim_lease_time(&self) -> Duration {
        self.claim_lease
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
    /// issued). The bound is shared fairly among callers ([`Caller::binding`](crate::caller::Caller::binding),
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

    /// How long a paced stream ([`Engine::pace`](crate::engine::Engine::pace): every HTTP stream
    /// `mcp-server` serves) may sit with a full queue ([`stream_queue`](Self::stream_queue))
    /// while its reader takes nothing, before it is cut. Default 10 s.
    ///
    /// The clock runs from the later of the reader's last progress and the moment the queue
    /// went from empty to holding something, so a stream idle for an hour and then filled by a
    /// burst still has the whole period to read. Past it the stream closes with
    /// [`CloseReason::Stalled`](crate::engine::CloseReason::Stalled) (its calls are cancelled, its
    /// seat freed, and the server layer cuts its connection; a legacy session's resumable `POST`
    /// stream is kept instead, as when its client drops it, so the call goes on and the client
    /// may resume it within [`resume_window`](Self::resume_window)). A reader merely behind by a burst
    /// keeps taking frames and is never cut. Zero cuts a full stream at the next timer step;
    /// a duration too large to add to the current instant (such as `Duration::MAX`) never cuts.
    ///
    /// The stdio driver of `mcp-server` applies the same period to its peer: when a write of
    /// replies takes no byte for this long (a client that writes and never reads, so the pipe
    /// stays full), the session closes and `serve_lines` returns `StdioEnd::Stalled`, rather than
    /// the reader and writer waiting on each other for ever. The clock restarts at every write
    /// that takes bytes, so a slow reader gets every answer.
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
    /// callers holding tasks, running or ended, the asking caller counted). When it is full, a
    /// new task first takes the place of the asking caller's own oldest ended task. Failing
    /// that, a caller at or above its share is refused; a caller below its share takes the
    /// place of the oldest ended task of the caller holding the most tasks among those above
    /// their share that hold one, else of the newest running task of the caller holding the
    /// most tasks (above its share: one always is when the asking caller is below its share).
    /// That running task is cancelled as `tasks/cancel` would cancel it (its handler is told
    /// to stop, with [`CancelReason::Displaced`](crate::engine::CancelReason::Displaced)), ends
    /// `cancelled` with the status message "cancelled by the server to make room for another
    /// caller's task" (what its caller's listen streams and the task store are told), and is
    /// forgotten; it counts in
    /// [`Refusals::displaced`](crate::engine::Refusals::displaced). A task of a caller at or below its
    /// share never makes room for another caller's. When no place can be made the `tools/call`
    /// is refused at once and its handler never runs: `-32600` "too many tasks" (a share limit)
    /// when the caller holds its share or more, `-32603` (a capacity limit) when every caller
    /// holding tasks is within its share (more callers than places). An ended task that made
    /// room is gone from the engine: a `tasks/get` for it is answered `-32602` "unknown task",
    /// unless a task store kept beyond the engine
    /// ([`RegistryMut::set_task_lookup`](crate::engine::RegistryMut::set_task_lookup)) still holds it.
    /// With 0 every task is refused.
    ///
    /// There is no separate bound on one caller's running tasks: a running task is a call in
    /// flight, counted under [`max_calls`](Self::max_calls) and its fair share like any other
    /// call, and the share rule above takes a lone caller's tasks back, newest first, as other
    /// callers come.
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

    /// Largest ended task the engine keeps, in bytes of its JSON as `tasks/get` shows it
    /// without `resultType` and `_meta`: the task's `result` or `error`, plus its id, status,
    /// status message and times (about 250 bytes). Default 4 MiB.
    ///
    /// A task whose result (or error) makes it larger ends `failed` instead, with the error
    /// `-32603` "task result of N bytes exceeds the M-byte limit" (`data`: `reason:
    /// "result_too_large"`, `bytes` and `limit`); that is what `tasks/get`, the caller's listen
    /// streams and the task store are shown, and the handler's result is dropped. So the `task`
    /// of every [`TaskRecord`](crate::engine::TaskRecord) the engine hands a task store
    /// ([`Output::TaskEnded`](crate::engine::Output::TaskEnded)) serializes to at most this
    /// many bytes. A bound too small even for that failure, or for a task without a result (a
    /// cancelled one), keeps no ended task: each is forgotten as it ends, with no record for
    /// the store, and `tasks/get` answers `-32602` "unknown task". Tool results are first
    /// bounded by [`max_response_bytes`](Self::max_response_bytes), as for any call.
    pub fn max_task_result_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_task_result_bytes = bytes;
        self
    }

    /// Bytes of ended tasks the engine keeps, over all callers, each task counted as for
    /// [`max_task_result_bytes`](Self::max_task_result_bytes). Default 32 MiB: eight tasks at
    /// the per-task bound, for the [`task_ttl`](Self::task_ttl) (in memory a kept result takes
    /// a small multiple of its JSON size).
    ///
    /// Shared fairly among the callers holding ended tasks ([`fair_share`](Self::fair_share)
    /// in bytes, the caller whose task ends counted). When a task that ends does not fit, a
    /// caller at or past its share (counting that task) forgets its own oldest ended tasks;
    /// otherwise, or once it has none left, the caller holding the most bytes above its share
    /// forgets its oldest ended task; and so on until the task fits. A caller within its share
    /// never forgets a task to make room for another caller's. A task past its caller's share
    /// by itself, while nobody else is past theirs, is not kept as it is: it ends `failed` as
    /// for [`max_task_result_bytes`](Self::max_task_result_bytes) (`limit` is then the
    /// caller's share). A forgotten ended task is answered as one that made room in
    /// [`max_tasks`](Self::max_tasks): from the task store if it holds it, else `-32602`
    /// "unknown task". The records waiting for the task store
    /// ([`Output::TaskEnded`](crate::engine::Output::TaskEnded)) are bounded by this too,
    /// the oldest dropped first.
    pub fn max_ended_task_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_ended_task_bytes = bytes;
        self
    }

    /// The current [`max_tasks`](Self::max_tasks).
    pub fn tasks(&self) -> usize {
        self.max_tasks
    }

    /// The current [`max_task_result_bytes`](Self::max_task_result_bytes): the most bytes the
    /// `task` of one [`TaskRecord`](crate::engine::TaskRecord) serializes to.
    pub fn task_result_bytes(&self) -> usize {
        self.max_task_result_bytes
    }

    /// The current [`max_ended_task_bytes`](Self::max_ended_task_bytes).
    pub fn ended_task_bytes(&self) -> usize {
        self.max_ended_task_bytes
    }
}
