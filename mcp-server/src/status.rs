//! What the server reports about itself: [`Status`] (gauges and refusal counters), the HTTP
//! layer's refusal counters ([`HttpRefusals`]) and their name/value listing for metrics.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use mcp_proto::Refusals;

use crate::cluster::ClusterHealth;
use crate::server::Server;
use crate::warnings::Warnings;

impl Server {
    /// A snapshot of what the server is doing and what it turned away: connections open,
    /// handlers running, work queued, refusals by reason. Cheap (a brief lock and a walk over
    /// the open connections), so a metrics endpoint may call it on every scrape;
    /// [`Status::metrics`] lists it as name/value pairs.
    pub fn status(&self) -> Status {
        let queued_commands = self.shared.queued.load(AtomicOrdering::Acquire);
        let st = self.lock();
        let engine = st.engine.status();
        Status {
            connections: st.sinks.len(),
            running_handlers: st.tasks.len(),
            in_flight: engine.in_flight,
            listens: engine.listens,
            sessions: engine.sessions,
            streams: engine.streams,
            shutting_down: engine.shutting_down,
            dropped_notifications: engine.dropped_notifications,
            queued_commands,
            engine_busy: std::time::Duration::from_nanos(
                self.shared.engine_busy.load(AtomicOrdering::Relaxed),
            ),
            parked_frames: st.parked.values().map(|p| p.frames.len()).sum(),
            http_connections: self.shared.http_connections.load(AtomicOrdering::Acquire),
            blocking_handlers: self.shared.blocking.load(AtomicOrdering::Acquire),
            refusals: engine.refusals,
            http_refusals: self.shared.http_refusals.snapshot(),
            dropped_records: engine.dropped_records,
            cluster: st.cluster.as_ref().map_or(ClusterHealth::Standalone, |m| m.cluster.health()),
            task_store_failures: self.shared.task_store_failures.count.load(AtomicOrdering::Relaxed),
            warnings: self.shared.warnings.snapshot(),
        }
    }

    /// Why the task store last failed to keep an ended task ([`TaskStore::put`](crate::TaskStore::put)), if it ever
    /// did: the text of its [`StoreError`](crate::StoreError). Each failure is also logged (`tracing`, warn) and
    /// counted in [`Status::task_store_failures`].
    pub fn last_task_store_error(&self) -> Option<String> {
        self.shared.task_store_failures.last.lock().ok().and_then(|l| l.clone())
    }
}

/// What the server is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// Connections open.
    pub connections: usize,
    /// Handler tasks running.
    pub running_handlers: usize,
    /// Requests awaiting an answer.
    pub in_flight: usize,
    /// `subscriptions/listen` streams open.
    pub listens: usize,
    /// Legacy HTTP sessions alive.
    pub sessions: usize,
    /// Held SSE streams (legacy `GET` streams and HTTP listen streams).
    pub streams: usize,
    /// [`Server::shutdown`] has begun.
    pub shutting_down: bool,
    /// Progress and log notifications dropped because the stream they were for had a full
    /// queue (see [`Engine::pace`](mcp_proto::Engine::pace)).
    pub dropped_notifications: u64,
    /// Frames and completions waiting for the driver (see the crate docs): a backlog that
    /// stays high means the driver cannot keep up.
    pub queued_commands: usize,
    /// Time the engine was worked (commands, timeouts and the routing of its output, under its
    /// lock, by the driver or inline) since the server started. Its growth over an interval
    /// divided by the interval is the share of one core the engine takes: the one part of a
    /// server that does not spread over threads, so the load at which it nears 1 is what one
    /// server (one [`Shards`](crate::Shards) shard) can carry.
    pub engine_busy: std::time::Duration,
    /// Frames of line connections held back while their connection is at its in-flight limit
    /// ([`Limits::max_parked_frames`](mcp_proto::Limits::max_parked_frames) each).
    pub parked_frames: usize,
    /// HTTP (TCP) connections `HttpService::serve` accepted that are still open.
    pub http_connections: usize,
    /// Closures of blocking handlers ([`ServerBuilder::blocking_tool`](crate::ServerBuilder::blocking_tool))
    /// still running, their calls' among them when those were cancelled: a blocking closure
    /// cannot be stopped, and runs to its end.
    pub blocking_handlers: usize,
    /// Work the engine turned away since the server started, by reason (counters).
    pub refusals: Refusals,
    /// Connections and requests the HTTP layer turned away before the engine saw them, by
    /// reason (counters; all zero for a server that serves no HTTP).
    pub http_refusals: HttpRefusals,
    /// Records of requests the engine answered itself that were dropped before the server
    /// traced them ([`EngineStatus::dropped_records`](mcp_proto::EngineStatus::dropped_records));
    /// it stays 0 while the driver drains them after every input, as it does.
    pub dropped_records: u64,
    /// Whether this replica is in touch with its cluster ([`ServerBuilder::cluster`](crate::ServerBuilder::cluster)):
    /// [`ClusterHealth::Standalone`] for a server in none.
    pub cluster: ClusterHealth,
    /// Ended tasks the task store did not keep ([`TaskStore::put`](crate::TaskStore::put) failed, or had not finished
    /// when the task expired), since the server started (a counter). Such a task stays
    /// reachable on this replica until its TTL (its directory entry is kept); the last error
    /// is [`Server::last_task_store_error`].
    pub task_store_failures: u64,
    /// The safety [`Warning`](crate::Warning)s the server raised since it started: each a
    /// protection its configuration leaves off (also logged, and printed on stderr when no
    /// `tracing` subscriber records it). Empty for a server configured safely.
    pub warnings: Warnings,
}

/// What the HTTP layer (`HttpService`, and the accept loop of `HttpService::serve`) turned
/// away before the engine saw it, by reason, since the server started. Each counter only grows
/// (a Prometheus counter); the refusals the engine makes of HTTP requests (a full session
/// table, a stream seat, a frame over its bound once read) are in [`Refusals`] instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HttpRefusals {
    /// Connections closed unread because
    /// [`Limits::max_http_connections`](mcp_proto::Limits::max_http_connections) were open and
    /// their address held at least its fair share (or `HttpService::admit` said no).
    pub connections: u64,
    /// Connections closed unread because their address already held
    /// [`Limits::max_http_connections_per_peer`](mcp_proto::Limits::max_http_connections_per_peer),
    /// and forwarded requests refused (429) because the address another replica vouched for held
    /// it.
    pub per_peer: u64,
    /// Connections cut to make room for an address below its fair share of
    /// `max_http_connections`.
    pub displaced: u64,
    /// Connections closed because a request head did not arrive within
    /// [`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout) (hyper's own
    /// timeout: an idle keep-alive connection that it ends this way counts too).
    pub head_timeout: u64,
    /// Requests whose head exceeded
    /// [`Limits::max_head_bytes`](mcp_proto::Limits::max_head_bytes) (431), or hyper's buffer
    /// just above it (the connection closed).
    pub head_too_large: u64,
    /// Requests whose head broke a transport rule: a peer outside loopback under
    /// [`HttpConfig::loopback_only`](mcp_proto::http::HttpConfig::loopback_only), another path
    /// (404), a `Host` or `Origin` not allowed (403), a method (405), `Accept` (406) or
    /// `Content-Type` (415) not served, a malformed header (400), a transfer coding not
    /// implemented (501).
    pub head_rejected: u64,
    /// `POST` bodies over [`Limits::max_frame_bytes`](mcp_proto::Limits::max_frame_bytes),
    /// declared or found while reading (413).
    pub body_too_large: u64,
    /// `POST` bodies not read within
    /// [`Limits::body_read_timeout`](mcp_proto::Limits::body_read_timeout) (408).
    pub body_timeout: u64,
    /// `POST` bodies that ended early or could not be read (400).
    pub body_broken: u64,
    /// Requests the resource server refused (feature `auth`): no token, a bad or expired one,
    /// or malformed credentials (401, 400).
    pub unauthorized: u64,
    /// Requests refused `503` because their token could not be checked: the authorization
    /// server's keys or introspection endpoint out of reach (feature `auth`).
    pub auth_unavailable: u64,
    /// Requests the application's identify hook refused
    /// (`ServerBuilder::identify`): 401 or 403, as it chose.
    pub unidentified: u64,
    /// Requests refused because the identify hook failed: it panicked (500) or did not answer
    /// within [`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout) (503).
    pub identify_failed: u64,
}

impl HttpRefusals {
    /// Every counter with a stable snake_case name, for a metrics exporter.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("connections", self.connections),
            ("per_peer", self.per_peer),
            ("displaced", self.displaced),
            ("head_timeout", self.head_timeout),
            ("head_too_large", self.head_too_large),
            ("head_rejected", self.head_rejected),
            ("body_too_large", self.body_too_large),
            ("body_timeout", self.body_timeout),
            ("body_broken", self.body_broken),
            ("unauthorized", self.unauthorized),
            ("auth_unavailable", self.auth_unavailable),
            ("unidentified", self.unidentified),
            ("identify_failed", self.identify_failed),
        ]
        .into_iter()
    }
}

/// A reason the HTTP layer turned something away: one [`HttpRefusals`] counter each.
#[cfg(feature = "http")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HttpRefused {
    Connections,
    PerPeer,
    Displaced,
    HeadTimeout,
    HeadTooLarge,
    HeadRejected,
    BodyTooLarge,
    BodyTimeout,
    BodyBroken,
    #[cfg(feature = "auth")]
    Unauthorized,
    #[cfg(feature = "auth")]
    AuthUnavailable,
    Unidentified,
    IdentifyFailed,
}

/// The live [`HttpRefusals`]: one relaxed atomic increment per refusal, from any task.
#[derive(Default)]
pub(crate) struct HttpCounters {
    pub(crate) connections: AtomicU64,
    pub(crate) per_peer: AtomicU64,
    pub(crate) displaced: AtomicU64,
    pub(crate) head_timeout: AtomicU64,
    pub(crate) head_too_large: AtomicU64,
    pub(crate) head_rejected: AtomicU64,
    pub(crate) body_too_large: AtomicU64,
    pub(crate) body_timeout: AtomicU64,
    pub(crate) body_broken: AtomicU64,
    pub(crate) unauthorized: AtomicU64,
    pub(crate) auth_unavailable: AtomicU64,
    pub(crate) unidentified: AtomicU64,
    pub(crate) identify_failed: AtomicU64,
}

impl HttpCounters {
    #[cfg(feature = "http")]
    pub(crate) fn counter(&self, why: HttpRefused) -> &AtomicU64 {
        match why {
            HttpRefused::Connections => &self.connections,
            HttpRefused::PerPeer => &self.per_peer,
            HttpRefused::Displaced => &self.displaced,
            HttpRefused::HeadTimeout => &self.head_timeout,
            HttpRefused::HeadTooLarge => &self.head_too_large,
            HttpRefused::HeadRejected => &self.head_rejected,
            HttpRefused::BodyTooLarge => &self.body_too_large,
            HttpRefused::BodyTimeout => &self.body_timeout,
            HttpRefused::BodyBroken => &self.body_broken,
            #[cfg(feature = "auth")]
            HttpRefused::Unauthorized => &self.unauthorized,
            #[cfg(feature = "auth")]
            HttpRefused::AuthUnavailable => &self.auth_unavailable,
            HttpRefused::Unidentified => &self.unidentified,
            HttpRefused::IdentifyFailed => &self.identify_failed,
        }
    }

    pub(crate) fn snapshot(&self) -> HttpRefusals {
        let read = |c: &AtomicU64| c.load(AtomicOrdering::Relaxed);
        HttpRefusals {
            connections: read(&self.connections),
            per_peer: read(&self.per_peer),
            displaced: read(&self.displaced),
            head_timeout: read(&self.head_timeout),
            head_too_large: read(&self.head_too_large),
            head_rejected: read(&self.head_rejected),
            body_too_large: read(&self.body_too_large),
            body_timeout: read(&self.body_timeout),
            body_broken: read(&self.body_broken),
            unauthorized: read(&self.unauthorized),
            auth_unavailable: read(&self.auth_unavailable),
            unidentified: read(&self.unidentified),
            identify_failed: read(&self.identify_failed),
        }
    }
}

#[cfg(feature = "http")]
impl Server {
    /// Counts one refusal of the HTTP layer.
    pub(crate) fn http_refused(&self, why: HttpRefused) {
        // Counters only: no ordering with anything else is needed.
        self.shared.http_refusals.counter(why).fetch_add(1, AtomicOrdering::Relaxed);
    }
}

impl Status {
    /// Every value as a `(name, value)` pair with a stable snake_case name, for a metrics
    /// exporter: gauges first (`connections`, `running_handlers`, `in_flight`, `listens`,
    /// `sessions`, `streams`, `queued_commands`, `parked_frames`, `http_connections`, `blocking_handlers`,
    /// `shutting_down` as 0 or 1, `cluster_degraded` as 0 or 1, `cluster_queued`), then counters (`dropped_notifications_total`, `engine_busy_ns_total` and one
    /// `refused_<reason>_total` per [`Refusals`] field, such as `refused_capacity_total`, one
    /// `http_refused_<reason>_total` per [`HttpRefusals`] field, such as
    /// `http_refused_per_peer_total`, `dropped_records_total` and `task_store_failures_total`),
    /// then one `warning_<name>` gauge (0 or 1) per [`Warning`](crate::Warning), such as
    /// `warning_no_peer_address`.
    pub fn metrics(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let gauges = [
            ("connections", wide(self.connections)),
            ("running_handlers", wide(self.running_handlers)),
            ("in_flight", wide(self.in_flight)),
            ("listens", wide(self.listens)),
            ("sessions", wide(self.sessions)),
            ("streams", wide(self.streams)),
            ("queued_commands", wide(self.queued_commands)),
            ("parked_frames", wide(self.parked_frames)),
            ("http_connections", wide(self.http_connections)),
            ("blocking_handlers", wide(self.blocking_handlers)),
            ("shutting_down", u64::from(self.shutting_down)),
            ("cluster_degraded", u64::from(matches!(self.cluster, ClusterHealth::Degraded { .. }))),
            (
                "cluster_queued",
                match self.cluster {
                    ClusterHealth::Degraded { queued } => wide(queued),
                    _ => 0,
                },
            ),
            ("dropped_notifications_total", self.dropped_notifications),
            ("engine_busy_ns_total", u64::try_from(self.engine_busy.as_nanos()).unwrap_or(u64::MAX)),
        ];
        gauges
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .chain(self.refusals.iter().map(|(reason, value)| (format!("refused_{reason}_total"), value)))
            .chain(
                self.http_refusals
                    .iter()
                    .map(|(reason, value)| (format!("http_refused_{reason}_total"), value)),
            )
            .chain(std::iter::once(("dropped_records_total".to_owned(), self.dropped_records)))
            .chain(std::iter::once(("task_store_failures_total".to_owned(), self.task_store_failures)))
            .chain(
                crate::Warning::ALL
                    .into_iter()
                    .map(|w| (format!("warning_{}", w.name()), u64::from(self.warnings.contains(w)))),
            )
    }
}
