//! The driver: the engine behind its lock, the commands that reach it (inline or through the
//! driver task), [`pump`](Server::pump) draining the engine's output to the connections'
//! queues, and the per-connection sinks those outputs go to.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::future::{AbortHandle, Either};
use serde_json::Value;

use mcp_proto::{
    CallId, Caller, CloseReason, ConnId, ConnKind, Decoded, Engine, HandlerError, HttpHead, OpenError,
    Output, Reply,
};
#[cfg(feature = "http")]
use mcp_proto::{HttpReply, HttpRequest};

use crate::handler::{BoxFuture, Handler};
use crate::runtime::{sleep_until, unix_ms, yield_now, Runtime};
use crate::server::Server;
use crate::tasks::{StoreError, TaskStore};
use crate::{cluster, trace};

/// Work for the driver: runs with the engine in hand, at the time given.
pub(crate) type Command = Box<dyn FnOnce(&Server, &mut State, Instant) + Send>;

/// A command that only needs the engine.
pub(crate) fn command(f: impl FnOnce(&mut Engine<Handler>, Instant) + Send + 'static) -> Command {
    Box::new(move |_: &Server, st: &mut State, now: Instant| f(&mut st.engine, now))
}

/// Commands one wake of the driver takes before it lets other tasks run: bounded work per wake,
/// as quinn's connection driver does. Not a [`Limits`](mcp_proto::Limits) field: it is
/// scheduling fairness, and no client can make the server hold more because of it.
pub(crate) const DRIVER_BATCH: usize = 64;

/// Rounds the driver may take back to back without yielding when each one drained its queue
/// (commands sent from other threads meanwhile): a bound on how long it can hold its thread.
const DRIVER_ROUNDS_UNYIELDED: u32 = 8;

/// Frames waiting for the driver, over every connection, before readers wait. Not a
/// [`Limits`](mcp_proto::Limits) field: what it holds is already bounded per connection (a stdio
/// reader waits on its own frame, an HTTP connection carries one request at a time), so it only
/// decides when readers start waiting, not how much memory clients can claim.
pub(crate) const INBOX_LEN: usize = 1024;

pub(crate) struct State {
    pub(crate) engine: Engine<Handler>,
    pub(crate) sinks: HashMap<ConnId, Sink>,
    pub(crate) tasks: HashMap<CallId, AbortHandle>,
    /// Handlers waiting for the client's answers ([`RequestContext::ask`]).
    pub(crate) asks: HashMap<CallId, async_channel::Sender<Answers>>,
    /// The deadline the driver sleeps until.
    pub(crate) armed: Option<Instant>,
    /// Frames of line connections held back while their connection is at its in-flight limit,
    /// in arrival order (see [`Server::send_line_frame`]).
    pub(crate) parked: BTreeMap<ConnId, Parked>,
    /// The `tracing` spans of requests and sessions some subscriber wants.
    pub(crate) traces: trace::Traces,
    /// When the engine's current input began: the start of the spans of the requests it
    /// answers itself.
    pub(crate) input_at: Instant,
    /// Where ended tasks are written ([`ServerBuilder::task_store`]).
    pub(crate) task_store: Option<Arc<dyn TaskStore>>,
    /// The cluster this server is a replica of ([`ServerBuilder::cluster`]).
    pub(crate) cluster: Option<cluster::Membership>,
}

/// A line connection's frames waiting for room in the engine.
pub(crate) struct Parked {
    pub(crate) frames: VecDeque<Decoded>,
    pub(crate) room: Arc<Room>,
}

/// How many of a line connection's frames wait in the driver, shared with its reader, which
/// stops reading while too many do.
pub(crate) struct Room {
    pub(crate) parked: AtomicUsize,
    /// Rung whenever a parked frame goes to the engine.
    pub(crate) freed: (async_channel::Sender<()>, async_channel::Receiver<()>),
}

impl Room {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self { parked: AtomicUsize::new(0), freed: async_channel::bounded(1) })
    }

    /// Waits while `max` or more frames are parked.
    pub(crate) async fn wait_below(&self, max: usize) {
        while self.parked.load(AtomicOrdering::Acquire) >= max {
            if self.freed.1.recv().await.is_err() {
                return;
            }
        }
    }
}

impl State {
    /// Hands one admitted HTTP request to the engine. A pending answer gets its queue
    /// registered before the engine's output is drained, so nothing the request causes is lost.
    /// The engine paces it ([`Engine::pace`]): the body reports every frame it takes, and the
    /// engine keeps the queue near [`Limits::stream_queue_len`](mcp_proto::Limits::stream_queue_len)
    /// (coalescing change notifications, dropping progress and logs while it is full, never
    /// responses) and cuts a reader that stalls, so the queue itself needs no bound here.
    #[cfg(feature = "http")]
    pub(crate) fn exchange(
        &mut self,
        now: Instant,
        req: HttpRequest<'_>,
        decoded: Option<Decoded>,
        cut: Option<Cut>,
    ) -> Result<(HttpHead, Vec<u8>), (ConnId, HttpQueue)> {
        match self.engine.handle_http_decoded(now, req, decoded) {
            HttpReply::Full { head, body } => Ok((head, body)),
            HttpReply::Pending(conn) => {
                self.engine.pace(conn);
                let (tx, rx) = capped(usize::MAX);
                let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
                self.sinks.insert(conn, Sink::Http(tx, dropped.clone(), cut));
                Err((conn, HttpQueue { rx, dropped }))
            }
        }
    }
}

/// What an ask comes back with.
pub(crate) type Answers = Result<serde_json::Map<String, Value>, mcp_proto::AskError>;

/// The sending end of a queue bounded at `cap` items, for the driver (its only sender).
///
/// The queue itself is unbounded and the bound is checked on each send: `async_channel::bounded`
/// allocates every slot of its capacity up front, so a bound taken from [`Limits`](mcp_proto::Limits)
/// (where `usize::MAX` is a valid "no bound") would abort the process instead of bounding it.
pub(crate) struct Capped<T> {
    pub(crate) tx: async_channel::Sender<T>,
    pub(crate) cap: usize,
}

impl<T> Capped<T> {
    /// Queues `item`, or gives it back when `cap` items are already waiting (the reader fell
    /// behind) or the reader is gone.
    pub(crate) fn try_send(&self, item: T) -> Result<(), T> {
        if self.tx.len() >= self.cap {
            return Err(item);
        }
        self.tx.try_send(item).map_err(async_channel::TrySendError::into_inner)
    }
}

/// A queue holding at most `cap` items; see [`Capped`].
pub(crate) fn capped<T>(cap: usize) -> (Capped<T>, async_channel::Receiver<T>) {
    let (tx, rx) = async_channel::unbounded();
    (Capped { tx, cap }, rx)
}

/// Where a connection's output goes: a bounded queue read by its writer.
pub(crate) enum Sink {
    /// A line stream (stdio): each frame is one line.
    Lines(Capped<Vec<u8>>),
    /// An HTTP exchange or stream: the response head, then (for a stream) SSE bytes. The flag
    /// is raised when the engine cut a reader that stalled ([`CloseReason::Stalled`]), so its
    /// body ends in an error and the connection is cut, rather than waiting for a peer that
    /// does not read to take the rest.
    // Without the `http` feature nothing opens an HTTP exchange, but the driver's output routing
    // keeps its arms: one build of the hot path, not two that could drift apart.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Http(Capped<HttpItem>, Arc<std::sync::atomic::AtomicBool>, Option<Cut>),
}

/// Cuts the HTTP connection an exchange arrived on. hyper stops polling a response body while
/// the socket will not take more, so a reader that stopped reading never sees its body end:
/// the connection itself has to go.
#[derive(Clone, Debug)]
pub(crate) struct Cut(pub(crate) async_channel::Sender<()>);

/// The reading end of an HTTP exchange's queue.
#[cfg(feature = "http")]
pub(crate) struct HttpQueue {
    pub(crate) rx: async_channel::Receiver<HttpItem>,
    /// Raised when the engine cut this reader for stalling.
    pub(crate) dropped: Arc<std::sync::atomic::AtomicBool>,
}

/// One item for an HTTP exchange's writer, in the order the engine produced them. The heads
/// are boxed: the queue allocates its slots a block at a time and each slot is the size of
/// the largest item, so an idle stream's queue holds a block of small `Frame`-sized slots
/// rather than head-sized ones (about 1.3 KiB less per open stream, measured).
#[derive(Debug)]
#[cfg_attr(not(feature = "http"), allow(dead_code))] // Read by the HTTP service only; see `Sink::Http`.
pub(crate) enum HttpItem {
    /// The whole (JSON) response; nothing follows.
    Respond(Box<HttpHead>, Vec<u8>),
    /// The head of an SSE response; [`HttpItem::Frame`]s follow until the queue ends.
    Stream(Box<HttpHead>),
    /// Ready-to-write SSE bytes.
    Frame(Vec<u8>),
}

impl Server {
    /// Opens a connection whose frames go to a bounded queue; the receiver is the writer's.
    pub(crate) fn open<R: Runtime + Clone>(
        &self,
        rt: &R,
        kind: ConnKind,
        caller: Caller,
    ) -> Result<(ConnId, async_channel::Receiver<Vec<u8>>), OpenError> {
        self.attach(rt);
        let span = trace::Traces::session_starting(&caller);
        let mut st = self.lock();
        let opened = st.engine.open(self.now(), kind, caller);
        if let Some(span) = span {
            st.traces.session_opened(span, opened, || self.now());
        }
        let conn = opened?;
        let (tx, rx) = capped(st.engine.config().limits.queued_frames());
        st.sinks.insert(conn, Sink::Lines(tx));
        Ok((conn, rx))
    }

    /// Makes `rt` the server's runtime unless it already has one, and starts the driver on it.
    /// The first runtime wins: the driver and the handlers of every connection run there.
    pub(crate) fn attach<R: Runtime + Clone>(&self, rt: &R) {
        if self.shared.rt.set(Arc::new(rt.clone())).is_ok() {
            rt.spawn(Box::pin(self.clone().drive()));
            if let Some(rt) = self.shared.rt.get() {
                self.join_cluster(rt);
            }
        }
    }

    /// Queues `cmd` behind the frames already waiting, waiting while the inbox is full. Returns
    /// false once the server is gone (never, while a `Server` is alive).
    pub(crate) async fn send(&self, cmd: Command) -> bool {
        let Err(cmd) = self.run_inline(cmd) else { return true };
        self.shared.queued.fetch_add(1, AtomicOrdering::AcqRel);
        if self.shared.inbox.0.send(cmd).await.is_ok() {
            return true;
        }
        self.shared.queued.fetch_sub(1, AtomicOrdering::AcqRel);
        false
    }

    /// Queues `cmd` ahead of the frames waiting; never waits. For completions and for what must
    /// happen from synchronous code (drop guards).
    pub(crate) fn submit(&self, cmd: Command) {
        if let Err(cmd) = self.run_inline(cmd) {
            self.enqueue_control(cmd);
        }
    }

    pub(crate) fn enqueue_control(&self, cmd: Command) {
        self.shared.queued.fetch_add(1, AtomicOrdering::AcqRel);
        // The receiver lives in `Shared`, beside this sender: the channel never closes.
        let _ = self.shared.control.0.try_send(cmd);
    }

    /// Wakes the driver so it looks at the engine's deadline again.
    pub(crate) fn wake_driver(&self) {
        self.enqueue_control(Box::new(|_: &Server, _: &mut State, _: Instant| {}));
    }

    /// Runs `cmd` at once on the calling task when that delays nobody and reorders nothing:
    /// when no command is queued or in the driver's hands, and the engine is free this instant
    /// (never waited for). Otherwise hands it back, to be queued. This spares the hop to the
    /// driver when the server is quiet (the latency of one request alone), while a busy server
    /// is worked by the driver in batches; either way the work done is engine work, never a
    /// handler and never a decode.
    pub(crate) fn run_inline(&self, cmd: Command) -> Result<(), Command> {
        if self.shared.queued.load(AtomicOrdering::Acquire) != 0 {
            return Err(cmd);
        }
        let Ok(mut st) = self.shared.state.try_lock() else { return Err(cmd) };
        // Checked again with the engine in hand: whatever was queued meanwhile goes first.
        if self.shared.queued.load(AtomicOrdering::Acquire) != 0 {
            return Err(cmd);
        }
        let now = self.now();
        st.engine.set_recording(trace::wants_requests());
        st.input_at = now;
        cmd(self, &mut st, now);
        self.pump(&mut st);
        if !st.parked.is_empty() {
            self.unpark(&mut st, now);
        }
        self.release(st);
        self.busy_since(now);
        Ok(())
    }

    /// Runs `f` on the driver, in order with the frames queued before it, and returns what it
    /// returned. `None` only when the driver never runs it (the server is going away).
    pub(crate) async fn request<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Server, &mut State, Instant) -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = futures_channel::oneshot::channel();
        let sent = self
            .send(Box::new(move |server: &Server, st: &mut State, now: Instant| {
                let _ = tx.send(f(server, st, now));
            }))
            .await;
        if !sent {
            return None;
        }
        rx.await.ok()
    }

    /// Decodes a frame under the engine's limits, on the caller's task.
    pub(crate) fn decode(&self, bytes: &[u8]) -> Decoded {
        Decoded::new(&self.shared.limits, bytes)
    }

    /// Hands one decoded frame of line connection `conn` to the driver, behind the frames queued
    /// before it. A pipelining client can send requests faster than handlers finish: rather
    /// than have the engine refuse what is over the connection's in-flight limit, the driver
    /// holds such frames back (in order) until calls finish, and the reader stops reading while
    /// `room` says too many are held, so the client feels back-pressure, not errors.
    pub(crate) async fn send_line_frame(&self, conn: ConnId, frame: Decoded, room: &Arc<Room>) {
        let room = room.clone();
        self.send(Box::new(move |_: &Server, st: &mut State, now: Instant| {
            let full = st.engine.in_flight(conn) >= st.engine.config().limits.in_flight();
            match st.parked.get_mut(&conn) {
                Some(parked) => parked.frames.push_back(frame),
                None if full => {
                    let frames = VecDeque::from([frame]);
                    st.parked.insert(conn, Parked { frames, room: room.clone() });
                }
                None => {
                    st.engine.handle_decoded(now, conn, frame);
                    return;
                }
            }
            room.parked.fetch_add(1, AtomicOrdering::AcqRel);
        }))
        .await;
    }

    /// Hands parked frames to the engine while their connections have room.
    pub(crate) fn unpark(&self, st: &mut State, now: Instant) {
        let limit = st.engine.config().limits.in_flight();
        let conns: Vec<ConnId> = st.parked.keys().copied().collect();
        for conn in conns {
            while st.engine.in_flight(conn) < limit {
                let Some(parked) = st.parked.get_mut(&conn) else { break };
                let Some(frame) = parked.frames.pop_front() else {
                    st.parked.remove(&conn);
                    break;
                };
                parked.room.parked.fetch_sub(1, AtomicOrdering::AcqRel);
                let _ = parked.room.freed.0.try_send(());
                st.engine.handle_decoded(now, conn, frame);
                self.pump(st);
            }
            if st.parked.get(&conn).is_some_and(|p| p.frames.is_empty()) {
                st.parked.remove(&conn);
            }
        }
    }

    /// Completes once [`shutdown`](Self::shutdown) has begun: listeners stop accepting then.
    #[cfg(feature = "http")]
    pub(crate) fn closing(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let signal = self.shared.stop_accepting.1.clone();
        async move {
            // Nothing is ever sent: this returns when the channel is closed.
            let _ = signal.recv().await;
        }
    }

    /// Runs `f` against the engine at once, outside the driver (a synchronous operator call),
    /// then does everything it asked for.
    pub(crate) fn with_engine<T>(&self, f: impl FnOnce(&mut Engine<Handler>, Instant) -> T) -> T {
        let mut st = self.lock();
        let now = self.now();
        let t = f(&mut st.engine, now);
        self.release(st);
        t
    }

    /// Ends a synchronous call into the engine: drains what it caused, and wakes the driver when
    /// the engine's next deadline moved earlier than the one the driver sleeps until.
    pub(crate) fn release(&self, mut st: MutexGuard<'_, State>) {
        self.pump(&mut st);
        let next = st.engine.poll_timeout();
        if next.is_some() && (st.armed.is_none() || next < st.armed) {
            st.armed = next;
            drop(st);
            self.wake_driver();
        }
    }

    /// The driver: the one task that works the engine for the connections. It sleeps until a
    /// command arrives or the engine's deadline passes, then takes up to [`DRIVER_BATCH`]
    /// commands (completions first), draining the engine's output after each, and yields.
    pub(crate) async fn drive(self) {
        let Some(rt) = self.shared.rt.get().cloned() else { return };
        let control = self.shared.control.1.clone();
        let inbox = self.shared.inbox.1.clone();
        let mut unyielded = 0;
        loop {
            let armed = self.lock().armed;
            let mut drained = false;
            let first = {
                let (from_control, from_inbox) = (pin!(control.recv()), pin!(inbox.recv()));
                let next = futures_util::future::select(from_control, from_inbox);
                let woke = match armed {
                    Some(deadline) => {
                        match futures_util::future::select(next, rt.sleep_until(deadline)).await {
                            Either::Left((either, _)) => Some(either.factor_first().0),
                            Either::Right(_) => None,
                        }
                    }
                    None => Some(next.await.factor_first().0),
                };
                match woke {
                    Some(Ok(cmd)) => Some(cmd),
                    // Both channels live in `Shared`, which this task holds: they never close.
                    Some(Err(_)) => return,
                    None => None,
                }
            };
            {
                let mut st = self.lock();
                st.engine.set_recording(trace::wants_requests());
                let now = rt.now();
                let began = now;
                st.input_at = now;
                match first {
                    Some(cmd) => {
                        cmd(&self, &mut st, now);
                        self.pump(&mut st);
                        self.shared.queued.fetch_sub(1, AtomicOrdering::AcqRel);
                    }
                    None => {
                        st.armed = None;
                        st.engine.handle_timeout(rt.now());
                        self.pump(&mut st);
                    }
                }
                for _ in 1..DRIVER_BATCH {
                    let Ok(cmd) = control.try_recv().or_else(|_| inbox.try_recv()) else {
                        drained = true;
                        break;
                    };
                    let now = rt.now();
                    st.input_at = now;
                    cmd(&self, &mut st, now);
                    self.pump(&mut st);
                    self.shared.queued.fetch_sub(1, AtomicOrdering::AcqRel);
                }
                if !st.parked.is_empty() {
                    let now = rt.now();
                    st.input_at = now;
                    self.unpark(&mut st, now);
                }
                st.armed = st.engine.poll_timeout();
                drop(st);
                self.busy_since(began);
            }
            // After a full batch, let connection tasks and handlers run before the next one. A
            // drained queue needs no yield: the next `recv` is pending and gives way by itself,
            // and a yield there costs every quiet request a scheduler round (on tokio, a
            // zero-timeout `epoll_wait` between reading a request and writing its answer). Other
            // threads can refill a drained queue as fast as it drains, so every few rounds
            // yields regardless.
            unyielded += 1;
            if !drained || unyielded >= DRIVER_ROUNDS_UNYIELDED {
                unyielded = 0;
                yield_now().await;
            }
        }
    }

    /// Adds the time since `began` to [`Status::engine_busy`](crate::Status::engine_busy).
    fn busy_since(&self, began: Instant) {
        let spent = u64::try_from(self.now().saturating_duration_since(began).as_nanos()).unwrap_or(u64::MAX);
        self.shared.engine_busy.fetch_add(spent, AtomicOrdering::Relaxed);
    }

    /// Drains the engine's output: frames to their queues, invocations spawned as tasks,
    /// cancellations to abort handles. Loops until the engine is quiet. Never runs a handler.
    pub(crate) fn pump(&self, st: &mut State) {
        loop {
            let mut overflowed = Vec::new();
            let mut orphans = Vec::new();
            let mut unclaimed = Vec::new();
            while let Some(out) = st.engine.poll_output() {
                match out {
                    Output::Frame { conn, bytes } => {
                        let sent = match st.sinks.get(&conn) {
                            Some(Sink::Lines(tx)) => tx.try_send(bytes).is_ok(),
                            Some(Sink::Http(tx, ..)) => tx.try_send(HttpItem::Frame(bytes)).is_ok(),
                            None => true,
                        };
                        if !sent {
                            overflowed.push(conn);
                        }
                    }
                    Output::Respond { conn, head, body } => {
                        // The exchange is over for the engine: nothing more comes for `conn`.
                        if let Some(Sink::Http(tx, ..)) = st.sinks.remove(&conn) {
                            let _ = tx.try_send(HttpItem::Respond(Box::new(head), body));
                        }
                    }
                    Output::Stream { conn, head } => {
                        if let Some(Sink::Http(tx, ..)) = st.sinks.get(&conn) {
                            if tx.try_send(HttpItem::Stream(Box::new(head))).is_err() {
                                overflowed.push(conn);
                            }
                        }
                    }
                    Output::Invoke(inv) => match self.shared.rt.get() {
                        Some(rt) => self.spawn_handler(st, rt.as_ref(), inv),
                        None => orphans.push(inv.ticket),
                    },
                    Output::Answer { call, answers } => {
                        if let Some(tx) = st.asks.remove(&call) {
                            let _ = tx.try_send(answers);
                        }
                    }
                    Output::Cancel { call, reason } => {
                        st.traces.request_cancelled(call, reason, || self.now());
                        st.asks.remove(&call);
                        if let Some(h) = st.tasks.remove(&call) {
                            h.abort();
                        }
                    }
                    Output::Close { conn, reason: CloseReason::Stalled } => overflowed.push(conn),
                    Output::Close { conn, reason } => {
                        st.traces.session_closed(conn, reason, || self.now());
                        // Dropping the sender lets the writer flush what is queued, then stop.
                        st.sinks.remove(&conn);
                    }
                    Output::Change(change) => self.publish_change(st, change),
                    Output::Holding(holding) => self.report_holding(st, holding),
                    Output::Claim(claim) => {
                        if let Err(claim) = self.claim(st, claim) {
                            unclaimed.push(claim);
                        }
                    }
                    Output::Record(record) => self.share_record(st, record),
                    Output::TaskEnded(record) => {
                        if let (Some(store), Some(rt)) = (&st.task_store, self.shared.rt.get()) {
                            let stored = store_ended_task(
                                rt.clone(),
                                store.as_ref(),
                                record,
                                st.cluster.clone(),
                                self.shared.task_store_failures.clone(),
                            );
                            rt.spawn(stored);
                        }
                    }
                    Output::Answered(rec) => st.traces.request_answered_here(rec, st.input_at, self.now()),
                }
            }
            if overflowed.is_empty() && orphans.is_empty() && unclaimed.is_empty() {
                break;
            }
            let now = self.now();
            // A peer that does not read its replies loses its connection, not everyone's (a
            // stalled one is already closed in the engine; closing again does nothing).
            for conn in overflowed {
                if let Some(Sink::Http(_, dropped, cut)) = st.sinks.remove(&conn) {
                    dropped.store(true, std::sync::atomic::Ordering::Release);
                    if let Some(Cut(cut)) = cut {
                        let _ = cut.try_send(());
                    }
                }
                st.engine.close(now, conn);
            }
            // No runtime to run them on (nothing attached one): answered, not stranded.
            for ticket in orphans {
                let _ = st.engine.complete(now, ticket, Reply::Tool(Err(HandlerError::Panicked)));
            }
            // Nothing to claim them on: they run here, as when the backend cannot say.
            for claim in unclaimed {
                st.engine.claim_result(now, claim.call, mcp_proto::ClaimResult::Unavailable);
            }
        }
    }
}

/// Writes an ended task to the store, then drops its directory entry: only once it is stored,
/// since until then the replica that ran it is the only one that can answer for it. A write
/// that fails (or has not finished when the task expires) is logged and counted
/// ([`Status::task_store_failures`]); the entry then stays, refreshed by the heartbeat, until
/// the task's TTL passes, when the engine forgets the task too.
pub(crate) fn store_ended_task(
    rt: Arc<dyn Runtime>,
    store: &dyn TaskStore,
    record: mcp_proto::TaskRecord,
    cluster: Option<cluster::Membership>,
    failures: Arc<StoreFailures>,
) -> BoxFuture<()> {
    let id = record.task_id.clone();
    let expires_ms = record.ended_unix_ms.saturating_add(record.ttl_ms);
    let until_expiry = move |rt: &dyn Runtime| {
        let left = Duration::from_millis(expires_ms.saturating_sub(unix_ms()));
        sleep_until(rt, rt.now().checked_add(left))
    };
    let put = store.put(record);
    Box::pin(async move {
        let expired = until_expiry(rt.as_ref());
        let outcome = match futures_util::future::select(put, expired).await {
            futures_util::future::Either::Left((outcome, _)) => outcome,
            futures_util::future::Either::Right(_) => {
                Err(StoreError::Unavailable("the write had not finished when the task expired".into()))
            }
        };
        if let Err(e) = outcome {
            let replica = cluster.as_ref().map(|m| m.replica.clone());
            tracing::warn!(task = %id, replica = ?replica, error = %e,
                "cannot store an ended task; the replica that ran it answers for it until its TTL");
            failures.record(&e);
            if cluster.is_some() {
                until_expiry(rt.as_ref()).await;
            }
        }
        if let Some(m) = cluster {
            m.forget(mcp_proto::HeldKind::Task, &id).await;
        }
    })
}

/// Writes to the task store that failed ([`Status::task_store_failures`],
/// [`Server::last_task_store_error`]).
#[derive(Default)]
pub(crate) struct StoreFailures {
    pub(crate) count: AtomicU64,
    pub(crate) last: Mutex<Option<String>>,
}

impl StoreFailures {
    pub(crate) fn record(&self, e: &StoreError) {
        self.count.fetch_add(1, AtomicOrdering::Relaxed);
        if let Ok(mut last) = self.last.lock() {
            *last = Some(e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An open stream's queue holds a block of 31 slots the size of an item, for its whole life:
    /// items stay the size of a frame's bytes (a boxed head beside them).
    #[test]
    fn an_http_item_is_no_larger_than_a_frame_and_a_pointer() {
        assert!(
            std::mem::size_of::<HttpItem>() <= std::mem::size_of::<Vec<u8>>() + std::mem::size_of::<usize>()
        );
    }
}
