//! Streamable HTTP over hyper, for any runtime: the transport half of the MCP endpoint.
//!
//! See [`HttpService`] for what this layer does and why it is all transport.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::BufMut;
use futures_util::future::{select, Either};
use http::{Request, Response};
use http_body::Body;

#[cfg(feature = "auth")]
use crate::auth::Forwarded;
use crate::driver::{Cut, HttpItem, HttpQueue, State};
use crate::runtime::Runtime;
use crate::server::Server;
use crate::status::HttpRefused;
use mcp_proto::http::{
    check_body_len, check_head, check_peer, named, HttpConfig, HttpRefusal, Named, RequestHead, Route,
};
use mcp_proto::{Caller, ConnId, HttpRequest, HttpRequestHead};

mod body;
mod card;
mod first_bytes;
mod identify;
mod peers;
pub(crate) mod refusal;
mod secure;
mod service;

pub use body::McpBody;
use body::{Busy, CloseGuard, Kind};
use first_bytes::First;
pub(crate) use identify::Identify;
pub use identify::{Identified, IdentityRefusal};
use peers::{Peers, Turned};
use refusal::{closing, counted_as, error_response, refused, response, share_taken, unavailable, Refusal};
pub use service::{HttpRuntime, McpService};

/// How long the accept loop waits after an error that is not about one connection (typically
/// too many open files) before accepting again: long enough for connections to finish and free
/// descriptors, short enough not to be noticed. The same second axum's `serve` waits. Not a
/// [`Limits`](mcp_proto::Limits) field: it bounds nothing a client can do, only how fast the
/// server retries its own failing accept.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The client's address, as a request extension: how an application that mounts an
/// [`HttpService`] tells it who is connected, so that the loopback-only rule
/// ([`HttpConfig::loopback_only`]) can be applied and the [`Caller`]'s `peer` filled in.
///
/// Without it (and without the runtime's own convention, [`HttpRuntime::peer_addr`], such as
/// axum's `ConnectInfo` on tokio) the peer is unknown and the loopback-only rule is **not** applied; the `Host`
/// and `Origin` rules still are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerAddr(pub SocketAddr);

/// A source of accepted TCP connections, implemented by each shim over its runtime's listener.
pub trait Listener: Send + 'static {
    /// An accepted connection, adapted to hyper's I/O traits.
    type Io: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static;

    /// Waits for the next connection and returns it with the client's address. The
    /// implementation sets `TCP_NODELAY` on it: SSE events and small JSON responses must leave
    /// at once, not wait for the previous segment's acknowledgement.
    fn accept(&self) -> impl Future<Output = io::Result<(Self::Io, SocketAddr)>> + Send;
}

/// What [`HttpService::serve`] does after a failed accept: `None` to accept again at once (the
/// failure concerned one connection, which the client abandoned), otherwise wait that long
/// (resources are exhausted, typically too many open files, and retrying at once would spin).
fn accept_backoff(error: &io::Error) -> Option<Duration> {
    match error.kind() {
        io::ErrorKind::ConnectionAborted
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionRefused
        | io::ErrorKind::Interrupted
        | io::ErrorKind::WouldBlock => None,
        _ => Some(ACCEPT_BACKOFF),
    }
}

/// The MCP endpoint over HTTP: admits requests, feeds them to the server's engine and streams
/// its answers back. Cheap to clone; every clone serves the same [`Server`].
///
/// The engine decides everything protocol-level ([`Engine::handle_http`](mcp_proto::Engine::handle_http):
/// sessions, status codes, JSON or SSE, keep-alive comments); the pure request rules live in
/// [`mcp_proto::http`]. What is left, and lives here once for both shims, is transport:
///
/// 1. build a [`RequestHead`] view of hyper's parsed head, refuse a non-loopback peer
///    ([`check_peer`]) and a bad head ([`check_head`]);
/// 2. read a `POST` body, at most [`Limits::max_frame_bytes`](mcp_proto::Limits::max_frame_bytes)
///    and within [`Limits::body_read_timeout`](mcp_proto::Limits::body_read_timeout) (408). A
///    body over the bound (declared, or found while reading) is refused with 413 and
///    `Connection: close`, after the rest of it is read and dropped (at most
///    [`Limits::max_discard_bytes`](mcp_proto::Limits::max_discard_bytes) more, for at most
///    [`Limits::discard_timeout`](mcp_proto::Limits::discard_timeout); past either the
///    connection is closed unread), so that a client that writes its whole body before reading
///    sees the 413 rather than a reset. A client that sent `Expect: 100-continue` is refused before it sends the
///    body;
/// 3. resolve the [`Caller`], before the body is read: the verified token's (feature `auth`), or
///    the one the server's identify hook names
///    ([`ServerBuilder::identify`](crate::ServerBuilder::identify)), else a `Caller` the
///    application's middleware put in the request's extensions, else anonymous; its `peer` is
///    the client's IP address unless already set;
/// 4. hand the request to the engine and answer what it says: at once, or through the exchange's
///    bounded queue (one JSON response, or an SSE head followed by ready-to-write bytes);
/// 5. when the client goes away before the exchange ends, tell the engine
///    ([`Engine::close`](mcp_proto::Engine::close)), which decides what that means for the calls
///    it was answering (for 2026-07-28, closing the response cancels the request).
///
/// A shim supplies a [`Listener`] over its runtime's TCP listener (setting `TCP_NODELAY` on every
/// accepted socket, so a small SSE event is not held back by Nagle's algorithm) and hyper's
/// timer; [`HttpService::serve`] does the rest. [`McpService`] is the same endpoint as a
/// [`tower_service::Service`], to mount inside an existing hyper, tower or axum application.
///
/// Only HTTP/1.1 is served by [`HttpService::serve`] (hyper's `http1` server). An HTTP/2 front
/// (a proxy, or an application's own hyper server) may still call [`HttpService::handle`]; the
/// `:authority` then stands in for `Host`.
///
/// Use [`serve`](Self::serve) (through a shim's `serve_http`) for a standalone server, or mount
/// it in an existing application as an [`McpService`]. Either way each request runs
/// [`handle`](Self::handle).
///
/// Its policy is an [`HttpConfig`]; every bound and timeout it enforces is the server's
/// [`Limits`](mcp_proto::Limits) ([`Server::limits`]), in its "HTTP transport" group.
#[derive(Clone)]
pub struct HttpService {
    inner: Arc<Inner>,
    /// Every shard's endpoint, this one's among them, when this endpoint serves
    /// [`Shards`](crate::Shards) ([`HttpService::sharded`]).
    shards: Option<Arc<[Arc<Inner>]>>,
}

struct Inner {
    server: Server,
    rt: Arc<dyn Runtime>,
    http: HttpConfig,
    /// Connections [`HttpService::serve`] is serving now (one count for all shards).
    open: Arc<AtomicUsize>,
    /// The connections [`HttpService::serve`] admitted, by client address: what the
    /// per-address shares are judged by (one table for all shards).
    peers: Arc<Mutex<Peers>>,
    /// What this shard holds, as its cluster membership records it (synchronously, as the
    /// engine reports it): read to route a request to its shard without taking any engine's
    /// lock. `None` unless sharded.
    held: Option<Held>,
    /// The shard the next accepted connection goes to (read on the first shard only).
    turn: AtomicUsize,
}

/// A shard's holdings ([`Inner::held`]).
type Held = Arc<Mutex<std::collections::HashSet<(mcp_proto::HeldKind, String)>>>;

impl fmt::Debug for HttpService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpService")
            .field("http", &self.inner.http)
            .field("connections", &self.inner.open.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// One admitted connection's place under
/// [`Limits::max_http_connections`](mcp_proto::Limits::max_http_connections), given back when
/// dropped.
#[must_use = "the connection's place is given back as soon as the permit is dropped"]
#[derive(Debug)]
pub struct ConnectionPermit {
    inner: Arc<Inner>,
    /// The number it is held under, for a connection admitted by address.
    held: Option<u64>,
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        // A displaced connection gave its place back when it was displaced.
        let counted = match self.held {
            None => true,
            Some(id) => self.inner.peers().forget(id).is_some(),
        };
        if counted {
            self.inner.open.fetch_sub(1, Ordering::AcqRel);
        }
        self.inner.server.shared.http_connections.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Inner {
    fn peers(&self) -> std::sync::MutexGuard<'_, Peers> {
        // The table is consistent after every statement that changes it: a panic elsewhere
        // while it was held leaves nothing half-done.
        self.peers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HttpService")
    }
}

impl HttpService {
    /// An endpoint for `server` on runtime `rt`, with the policy `http`. The server's handlers
    /// and timers run on the first runtime any connection or endpoint brought it.
    ///
    /// The bounds are the server's [`Limits`](mcp_proto::Limits): a body is never read past its
    /// frame size, the one bound the engine holds frames to, so there is no second body bound
    /// that could disagree with it.
    pub fn new<R: Runtime + Clone>(server: Server, rt: R, http: HttpConfig) -> Self {
        server.attach(&rt);
        let rt: Arc<dyn Runtime> = Arc::new(rt);
        let (open, peers) = (Arc::default(), Arc::default());
        let inner = Inner { server, rt, http, open, peers, held: None, turn: AtomicUsize::new(0) };
        Self { inner: Arc::new(inner), shards: None }
    }

    /// One endpoint for every shard of `shards` (see [`Shards`](crate::Shards)): each
    /// connection [`serve`](Self::serve) accepts goes to the next shard in turn, and a request
    /// naming a legacy session or a task another shard holds is answered by that shard's
    /// engine, directly. The connection bounds and per-address shares
    /// ([`Limits::max_http_connections`](mcp_proto::Limits::max_http_connections) and the
    /// others of the HTTP transport group) are counted once, for all shards, under the first
    /// shard's limits. [`server`](Self::server) is the first shard.
    ///
    /// [`handle`](Self::handle) called directly (a mounted [`McpService`]) answers on the first
    /// shard, except for what another shard holds: spreading connections is
    /// [`serve`](Self::serve)'s.
    pub fn sharded<R: Runtime + Clone>(shards: &crate::Shards, rt: R, http: HttpConfig) -> Self {
        let (open, peers): (Arc<AtomicUsize>, Arc<Mutex<Peers>>) = (Arc::default(), Arc::default());
        let inners: Vec<Arc<Inner>> = shards
            .servers()
            .iter()
            .map(|server| {
                server.attach(&rt);
                let held = (shards.len() > 1).then(|| server.membership().map(|m| m.held)).flatten();
                Arc::new(Inner {
                    server: server.clone(),
                    rt: Arc::new(rt.clone()),
                    http: http.clone(),
                    open: open.clone(),
                    peers: peers.clone(),
                    held,
                    turn: AtomicUsize::new(0),
                })
            })
            .collect();
        let inner = match inners.first() {
            Some(first) => first.clone(),
            // `Shards` always has a first server; this builds its endpoint all the same.
            None => return Self::new(shards.first().clone(), rt, http),
        };
        let shards: Arc<[Arc<Inner>]> = Arc::from(inners);
        Self { inner, shards: (shards.len() > 1).then_some(shards) }
    }

    /// The endpoint of the shard the next connection goes to: this one when not sharded.
    fn next_shard(&self) -> HttpService {
        let Some(shards) = &self.shards else { return self.clone() };
        let turn = self.inner.turn.fetch_add(1, Ordering::Relaxed);
        match shards.get(turn % shards.len()) {
            Some(inner) => HttpService { inner: inner.clone(), shards: self.shards.clone() },
            None => self.clone(),
        }
    }

    /// The endpoint of the other shard holding what `named` names, when this one does not hold
    /// it and another does.
    fn shard_holding(&self, named: Option<Named<'_>>) -> Option<HttpService> {
        let (shards, named) = (self.shards.as_ref()?, named?);
        let key = (named.kind(), named.id().to_owned());
        let holds = |inner: &Inner| {
            inner
                .held
                .as_ref()
                .is_some_and(|h| h.lock().unwrap_or_else(PoisonError::into_inner).contains(&key))
        };
        if holds(&self.inner) {
            return None;
        }
        let other = shards.iter().find(|s| !Arc::ptr_eq(s, &self.inner) && holds(s))?;
        Some(HttpService { inner: other.clone(), shards: self.shards.clone() })
    }

    /// The policy: endpoint path, allowed hosts and origins, keep-alive.
    pub fn config(&self) -> &HttpConfig {
        &self.inner.http
    }

    /// The server this endpoint feeds.
    pub fn server(&self) -> &Server {
        &self.inner.server
    }

    /// Takes a place for one more connection, or `None` when
    /// [`Limits::max_http_connections`](mcp_proto::Limits::max_http_connections) are being
    /// served: the caller then closes the connection unread.
    pub fn admit(&self) -> Option<ConnectionPermit> {
        let max = self.inner.server.limits().http_connections();
        let taken =
            self.inner.open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1));
        if taken.is_err() {
            self.inner.server.http_refused(HttpRefused::Connections);
        }
        taken.ok().map(|_| {
            self.inner.server.shared.http_connections.fetch_add(1, Ordering::AcqRel);
            ConnectionPermit { inner: self.inner.clone(), held: None }
        })
    }

    /// [`admit`](Self::admit) for a connection from `addr`, sharing the places fairly among
    /// addresses (see
    /// [`Limits::max_http_connections_per_peer`](mcp_proto::Limits::max_http_connections_per_peer)).
    /// A connection displaced to make room is cut (through its `cut` switch) and has already
    /// given its place back.
    fn admit_from(
        &self,
        addr: IpAddr,
        busy: Arc<AtomicUsize>,
        cut: async_channel::Sender<()>,
    ) -> Result<ConnectionPermit, Turned> {
        let limits = self.inner.server.limits();
        let (max, per) = (limits.http_connections(), limits.http_connections_per_peer());
        let mut peers = self.inner.peers();
        let open = self.inner.open.load(Ordering::Acquire);
        let (id, displaced) = peers.admit(addr, open, max, per, busy, cut)?;
        if displaced.is_none() {
            self.inner.open.fetch_add(1, Ordering::AcqRel);
        }
        drop(peers);
        if let Some(gone) = displaced {
            self.inner.server.http_refused(HttpRefused::Displaced);
            tracing::debug!(%addr, "connection limit reached; displaced a connection of an address above its share");
            // A switch already thrown, or a connection already ending, needs nothing more.
            let _ = gone.cut.try_send(());
        }
        self.inner.server.shared.http_connections.fetch_add(1, Ordering::AcqRel);
        Ok(ConnectionPermit { inner: self.inner.clone(), held: Some(id) })
    }

    /// Accepts connections from `listener` and serves each on a task of its own, until the
    /// server shuts down ([`Server::shutdown`]); then returns `Ok`, while connections already
    /// accepted finish what they were doing.
    ///
    /// Past [`Limits::max_http_connections`](mcp_proto::Limits::max_http_connections) a new
    /// connection displaces one of an address above its share, or is closed at once (see
    /// [`Limits::max_http_connections_per_peer`](mcp_proto::Limits::max_http_connections_per_peer)).
    /// A failed accept
    /// is retried at once when it concerned one connection, and after a second otherwise, so running out of file descriptors slows the
    /// server down instead of stopping it. `timer` is the runtime's hyper timer, which enforces
    /// [`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout).
    pub async fn serve<L, T>(&self, listener: L, timer: T) -> io::Result<()>
    where
        L: Listener,
        T: hyper::rt::Timer + Clone + Send + Sync + 'static,
    {
        self.accept_loop(listener, timer, None).await
    }

    /// [`serve`](Self::serve), each connection first through `secure`'s handshake when given.
    async fn accept_loop<L, T>(&self, listener: L, timer: T, secure: Option<secure::Secure>) -> io::Result<()>
    where
        L: Listener,
        T: hyper::rt::Timer + Clone + Send + Sync + 'static,
    {
        if !self.inner.http.is_loopback_only() && !self.inner.server.identifies() {
            self.inner.server.shared.warnings.raise(crate::Warning::Unauthenticated);
        }
        let mut closing = pin!(self.inner.server.closing());
        loop {
            let accepted = match select(pin!(listener.accept()), closing.as_mut()).await {
                Either::Left((accepted, _)) => accepted,
                Either::Right(((), _)) => return Ok(()),
            };
            let (io, peer) = match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    if let Some(wait) = accept_backoff(&e) {
                        tracing::warn!(error = %e, "accept failed; retrying in {wait:?}");
                        crate::runtime::sleep_until(
                            self.inner.rt.as_ref(),
                            self.inner.rt.now().checked_add(wait),
                        )
                        .await;
                    }
                    continue;
                }
            };
            let busy = Arc::new(AtomicUsize::new(0));
            let (cut, cut_off) = async_channel::bounded::<()>(1);
            let svc = self.next_shard();
            let permit = match svc.admit_from(peer.ip(), busy.clone(), cut.clone()) {
                Ok(permit) => permit,
                Err(why) => {
                    self.inner.server.http_refused(match why {
                        Turned::PerPeer => HttpRefused::PerPeer,
                        Turned::Full => HttpRefused::Connections,
                    });
                    tracing::debug!(%peer, ?why, "connection limit reached; closing the new connection");
                    drop(io);
                    continue;
                }
            };
            let timer = timer.clone();
            let seat = permit.held.map(Seat);
            // Without `tls` it is an `Option<Infallible>`, always `None`.
            #[cfg_attr(not(feature = "tls"), allow(clippy::clone_on_copy))]
            let secure = secure.clone();
            self.inner.rt.spawn(Box::pin(async move {
                let switch = Switch { busy, cut, cut_off, seat, chain: None };
                match secure {
                    #[cfg(feature = "tls")]
                    // Boxed: inline, a TLS connection's state would size every connection's task.
                    Some(secure) => Box::pin(svc.serve_secure(io, timer, peer, switch, &secure)).await,
                    #[cfg(not(feature = "tls"))]
                    Some(never) => match never {},
                    None => svc.serve_admitted(io, timer, peer, switch).await,
                }
                drop(permit);
            }));
        }
    }

    /// Serves one accepted connection with hyper's HTTP/1.1 server until it closes.
    ///
    /// hyper enforces the head bounds
    /// ([`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout), and a head
    /// larger than its buffer is answered 431), keep-alive and `Expect: 100-continue`; every
    /// request goes to [`handle`](Self::handle).
    pub async fn serve_connection<I, T>(&self, io: I, timer: T, peer: SocketAddr)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
        T: hyper::rt::Timer + Send + Sync + 'static,
    {
        let (cut, cut_off) = async_channel::bounded::<()>(1);
        let switch = Switch { busy: Arc::new(AtomicUsize::new(0)), cut, cut_off, seat: None, chain: None };
        self.serve_admitted(io, timer, peer, switch).await;
    }

    /// [`serve_connection`](Self::serve_connection) for a connection whose busy counter and cut
    /// switch the accept loop holds.
    async fn serve_admitted<I, T>(&self, io: I, timer: T, peer: SocketAddr, switch: Switch)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
        T: hyper::rt::Timer + Send + Sync + 'static,
    {
        let limits = self.inner.server.limits();
        let cut_off = switch.cut_off.clone();
        // hyper is handed the connection only once it has sent something (first_bytes.rs: an
        // idle connection then costs no buffers); the wait and hyper's read of the rest of the
        // head share one header read timeout.
        let began = self.inner.rt.now();
        let wait = header_timeout(began, limits.header_timeout());
        let io = match select(pin!(first_bytes::first_bytes(io, &timer, wait)), pin!(cut_off.recv())).await {
            Either::Left((First::Bytes(io), _)) => io,
            Either::Left((First::Closed, _)) => return self.connection_ended(peer, Some(None)),
            Either::Left((First::Late, _)) => {
                self.inner.server.http_refused(HttpRefused::HeadTimeout);
                tracing::debug!(%peer, "HTTP connection sent nothing within header_read_timeout; closed it");
                return;
            }
            Either::Right(_) => return self.connection_ended(peer, None),
        };
        let rest = first_bytes::rest_of(wait, self.inner.rt.now().saturating_duration_since(began));
        let service = self.connection_service(peer, switch);
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(timer)
            .header_read_timeout(rest)
            .keep_alive(self.inner.http.is_keep_alive())
            // hyper's own bound on the head is a backstop a little above ours, so that heads
            // near the limit reach `check_head` and get its 431 with a JSON-RPC body.
            .max_buf_size(hyper_buf_size(limits.head_bytes()));
        // Boxed, so that a connection still waiting for its first bytes holds a task the size of
        // that wait, not of hyper's connection state.
        Box::pin(self.until_cut(peer, builder.serve_connection(io, service), cut_off)).await;
    }

    /// Runs hyper's connection `conn` until it ends or the connection's switch is thrown, then
    /// records how it ended.
    pub(in crate::http) async fn until_cut(
        &self,
        peer: SocketAddr,
        conn: impl Future<Output = Result<(), hyper::Error>>,
        cut_off: async_channel::Receiver<()>,
    ) {
        let ended = match select(pin!(conn), pin!(cut_off.recv())).await {
            Either::Left((result, _)) => Some(result.err()),
            Either::Right(_) => None,
        };
        self.connection_ended(peer, ended);
    }

    /// The hyper service of one connection from `peer`: each request goes to
    /// [`handle`](Self::handle), tagged with the connection's switch and seat, and counted busy
    /// until its response body is dropped.
    fn connection_service(
        &self,
        peer: SocketAddr,
        switch: Switch,
    ) -> impl hyper::service::Service<
        Request<hyper::body::Incoming>,
        Response = Response<McpBody>,
        Error = Infallible,
        Future = impl Future<Output = Result<Response<McpBody>, Infallible>> + Send,
    > + Clone
           + Send
           + 'static {
        let svc = self.clone();
        let Switch { busy, cut, seat, chain, .. } = switch;
        let cut = Cut(cut);
        // Printed once for the connection rather than for each of its requests.
        let peer_text: Arc<str> = peer.ip().to_string().into();
        hyper::service::service_fn(move |mut req: Request<hyper::body::Incoming>| {
            let svc = svc.clone();
            req.extensions_mut().insert(cut.clone());
            if let Some(seat) = seat {
                req.extensions_mut().insert(seat);
            }
            if let Some(chain) = &chain {
                req.extensions_mut().insert(chain.clone());
            }
            // Counted from the complete head until hyper drops the response body (written, or
            // the connection gone): until then the connection is not reading a head.
            let busy = Busy::enter(busy.clone());
            let peer_text = peer_text.clone();
            async move {
                let mut resp = svc.handle_from(req, Some((peer, Some(&peer_text)))).await;
                resp.body_mut().busy = Some(busy);
                Ok::<_, Infallible>(resp)
            }
        })
    }

    /// Records how a connection ended: `Some(error)` from hyper (timeouts, resets and malformed
    /// requests: the connection's business, not the server's), or `None` when it closed or
    /// was cut.
    fn connection_ended(&self, peer: SocketAddr, error: Option<Option<hyper::Error>>) {
        match error {
            Some(Some(e)) => {
                if e.is_timeout() {
                    self.inner.server.http_refused(HttpRefused::HeadTimeout);
                } else if e.is_parse_too_large() {
                    self.inner.server.http_refused(HttpRefused::HeadTooLarge);
                }
                tracing::debug!(%peer, error = %e, "HTTP connection ended with an error")
            }
            Some(None) => {}
            // Dropping the connection closes the socket, whatever it still had to write.
            None => tracing::debug!(%peer, "cut the connection (a reader that fell behind, or displaced)"),
        }
    }

    /// Answers one request: the whole transport pipeline in the [type docs](Self).
    ///
    /// `peer` is the client's address when known; with it the loopback-only rule applies and
    /// the [`Caller`]'s `peer` is filled in. The caller the engine sees is, in this order: the
    /// verified token's (feature `auth`), the one the server's identify hook names
    /// ([`ServerBuilder::identify`](crate::ServerBuilder::identify); a refusal is answered at
    /// once, the body unread), a `Caller` in the request's extensions (put there by the
    /// application's authentication middleware), else anonymous.
    pub async fn handle<B>(&self, req: Request<B>, peer: Option<SocketAddr>) -> Response<McpBody>
    where
        B: Body,
    {
        self.handle_from(req, peer.map(|p| (p, None))).await
    }

    /// [`handle`](Self::handle), with the peer's address as text when the connection has
    /// printed it once already (for the caller's `peer`, which every request of it carries).
    async fn handle_from<B>(
        &self,
        req: Request<B>,
        from: Option<(SocketAddr, Option<&str>)>,
    ) -> Response<McpBody>
    where
        B: Body,
    {
        let peer = from.map(|(p, _)| p);
        let cfg = &self.inner.http;
        let limits = self.inner.server.limits();
        if let Some(peer) = peer {
            if let Err(refusal) = check_peer(cfg, peer.ip()) {
                self.inner.server.http_refused(HttpRefused::HeadRejected);
                return refused(&refusal);
            }
        }
        let (parts, body) = req.into_parts();
        if let Some(resp) = self.card(&parts.method, parts.uri.path(), &parts.headers) {
            return resp;
        }
        #[cfg(feature = "auth")]
        let authorization = self.inner.server.shared.authorization.get();
        #[cfg(feature = "auth")]
        if let Some(resp) = authorization.and_then(|a| a.metadata(&parts.method, parts.uri.path())) {
            return resp;
        }
        let headers = head_lines(&parts);
        let target = request_target(&parts);
        let head = request_head(&parts, &headers, &target);
        let route = match check_head(cfg, limits, &head) {
            Ok(route) => HeldRoute::of(&route),
            // A declared length over the bound. Reading the body of a client that waits for
            // `100 Continue` would invite the upload the 413 refuses: it is told at once.
            Err(refusal)
                if counted_as(&refusal) == HttpRefused::BodyTooLarge
                    && !parts.headers.contains_key(http::header::EXPECT) =>
            {
                self.inner.server.http_refused(HttpRefused::BodyTooLarge);
                self.discard(pin!(body)).await;
                return closing(refused(&refusal));
            }
            Err(refusal) => {
                self.inner.server.http_refused(counted_as(&refusal));
                return refused(&refusal);
            }
        };
        // What the request names that one replica holds: where it is forwarded, and what a
        // forwarded peer's token is bound to.
        let named = named(&head);
        // A request another replica of the cluster forwarded: the client address it vouches
        // for. Its token is single-use, so it is read once, here.
        let vouched = self.forwarded_peer(&parts.method, &parts.headers, named);
        // The token is checked before the body is read: a request without one costs its head.
        #[cfg(feature = "auth")]
        let verified = match authorization {
            Some(auth) => {
                let client =
                    vouched.as_deref().and_then(|v| v.parse::<IpAddr>().ok()).or(peer.map(|p| p.ip()));
                let from = if vouched.is_some() { Forwarded::Vouched } else { Forwarded::Not };
                match auth.caller(&parts, &self.inner.rt, client, from).await {
                    Ok(caller) => Some(caller),
                    Err(denied) => {
                        self.inner.server.http_refused(
                            if denied.status() == http::StatusCode::SERVICE_UNAVAILABLE {
                                HttpRefused::AuthUnavailable
                            } else {
                                HttpRefused::Unauthorized
                            },
                        );
                        // The body is read and dropped (bounded), so that the client reads the
                        // refusal rather than a reset.
                        self.discard(pin!(body)).await;
                        return denied;
                    }
                }
            }
            None => None,
        };
        // The hook's head is the one handlers read: one copy serves both.
        let mut exposed = None;
        let identified = match self.inner.server.shared.identify.get() {
            Some(hook) => {
                let head = Arc::new(exposed_head(&parts, peer, false));
                let identified = self.identify(hook, &head).await;
                exposed = Some(head);
                match identified {
                    Ok(caller) => caller,
                    Err(refusal) => {
                        // As for a refused token: the body is dropped unread (bounded), so the
                        // client reads the refusal rather than a reset, and one that waits for
                        // `100 Continue` is told at once instead.
                        if !parts.headers.contains_key(http::header::EXPECT) {
                            self.discard(pin!(body)).await;
                        }
                        return refusal;
                    }
                }
            }
            None => None,
        };
        let (body, decoded) = if matches!(route.kind, HeldKind::Post(_)) {
            match self.read_body(body).await {
                // Decoded here, on this request's task: a large body costs its sender only.
                Ok(bytes) => {
                    let decoded = self.inner.server.decode(&bytes);
                    (bytes, Some(decoded))
                }
                Err(response) => return response,
            }
        } else {
            // A body on GET or DELETE means nothing; hyper drains or discards it.
            (Vec::new(), None)
        };
        let mut caller = identified.or_else(|| parts.extensions.get::<Caller>().cloned()).unwrap_or_default();
        #[cfg(feature = "auth")]
        let token_verified = verified.is_some();
        #[cfg(not(feature = "auth"))]
        let token_verified = false;
        #[cfg(feature = "auth")]
        if let Some(verified) = verified {
            // Only the token speaks for the caller; the connection still says where it is.
            caller = verified;
        }
        // Held until the response is dropped: while it is, the connection counts against the
        // forwarded client's address.
        let mut reseated = None;
        if caller.peer.is_none() {
            if let Some(vouched) = vouched {
                reseated = match self.reseat(&parts, &vouched) {
                    Ok(reseated) => reseated,
                    Err(_) => return share_taken(),
                };
                caller.peer = Some(vouched);
            }
        }
        if caller.peer.is_none() {
            caller.peer = from.map(|(p, text)| text.map_or_else(|| p.ip().to_string(), str::to_owned));
        }
        caller.http = Some(exposed.unwrap_or_else(|| Arc::new(exposed_head(&parts, peer, token_verified))));
        // A shard holding what the request names answers it; what this one holds needs no
        // lookup in the cluster's directory.
        let shard = self.shard_holding(named);
        if shard.is_none() && (self.shards.is_none() || !self.holds_here(named)) {
            if let Some(resp) = self.try_forward(&parts, &body, caller.peer.clone(), named).await {
                return resp;
            }
        }
        let answering = Answering { parts, route, body, decoded, caller, reseated };
        match shard {
            Some(shard) => shard.answer(answering).await,
            None => self.answer(answering).await,
        }
    }

    /// Whether this shard's membership records holding what `named` names.
    fn holds_here(&self, named: Option<Named<'_>>) -> bool {
        let (Some(held), Some(named)) = (&self.inner.held, named) else { return false };
        held.lock().unwrap_or_else(PoisonError::into_inner).contains(&(named.kind(), named.id().to_owned()))
    }

    /// The end of [`handle`](Self::handle): the request to this endpoint's engine, and its
    /// answer.
    async fn answer(&self, answering: Answering) -> Response<McpBody> {
        let Answering { parts, route, body, decoded, caller, reseated } = answering;
        let cut = parts.extensions.get::<Cut>().cloned();
        let answer = self
            .inner
            .server
            .request(move |_: &Server, st: &mut State, now: Instant| {
                let headers = head_lines(&parts);
                let target = request_target(&parts);
                let head = request_head(&parts, &headers, &target);
                // Checked in `handle` already, and not again here, under the engine's lock.
                let req = HttpRequest { head: &head, route: route.route(), body: &body, caller };
                st.exchange(now, req, decoded, cut)
            })
            .await;
        let resp = match answer {
            Some(Ok((head, body))) => {
                self.registered(&head.holds).await;
                response(head.status, &head.headers, McpBody::full(body))
            }
            Some(Err((conn, queue))) => self.pending(conn, queue).await,
            None => error_response(&Refusal::EngineGone.error()),
        };
        let mut resp = resp;
        resp.body_mut().reseated = reseated;
        resp
    }
}

/// A request admitted, read and identified: what [`HttpService::answer`] takes to the engine.
struct Answering {
    parts: http::request::Parts,
    route: HeldRoute,
    body: Vec<u8>,
    decoded: Option<mcp_proto::Decoded>,
    caller: Caller,
    reseated: Option<Reseated>,
}

/// A [`Route`] that [`check_head`] gave, owned, so that it goes to the engine with the request
/// (whose head it borrowed) rather than being checked again there, under the engine's lock.
struct HeldRoute {
    kind: HeldKind,
    session_id: Option<String>,
    protocol_version: Option<String>,
}

enum HeldKind {
    Post(mcp_proto::http::Accepts),
    Get { last_event_id: Option<String> },
    Delete,
}

impl HeldRoute {
    fn of(route: &Route<'_>) -> Self {
        let headers = route.headers();
        let kind = match *route {
            Route::Post { accepts, .. } => HeldKind::Post(accepts),
            Route::Get { last_event_id, .. } => {
                HeldKind::Get { last_event_id: last_event_id.map(str::to_owned) }
            }
            Route::Delete { .. } => HeldKind::Delete,
        };
        Self {
            kind,
            session_id: headers.session_id.map(str::to_owned),
            protocol_version: headers.protocol_version.map(str::to_owned),
        }
    }

    /// The route again, as `of` was given it.
    fn route(&self) -> Route<'_> {
        let headers = mcp_proto::http::RouteHeaders {
            session_id: self.session_id.as_deref(),
            protocol_version: self.protocol_version.as_deref(),
        };
        match &self.kind {
            HeldKind::Post(accepts) => Route::Post { headers, accepts: *accepts },
            HeldKind::Get { last_event_id } => {
                Route::Get { headers, last_event_id: last_event_id.as_deref() }
            }
            HeldKind::Delete => Route::Delete { headers },
        }
    }
}

impl HttpService {
    /// Counts the connection `parts` came on against `vouched` (the client address a verified
    /// `Mcp-Forwarded-Peer` names) until the guard returned is dropped; an address that holds
    /// its [`Limits::max_http_connections_per_peer`](mcp_proto::Limits::max_http_connections_per_peer)
    /// already is refused 429 (with `Retry-After`), as its own connection would have been.
    /// Nothing to do for a connection the accept loop did not admit (a mounted service), or a
    /// vouched peer that is not an IP address (a middleware's own naming).
    fn reseat(&self, parts: &http::request::Parts, vouched: &str) -> Result<Option<Reseated>, Turned> {
        let Some(Seat(id)) = parts.extensions.get::<Seat>().copied() else { return Ok(None) };
        let Ok(to) = vouched.parse::<IpAddr>() else { return Ok(None) };
        let per = self.inner.server.limits().http_connections_per_peer();
        let moved = self.inner.peers().seat(id, to, per);
        match moved {
            Ok(from) => Ok(from.map(|back| Reseated { inner: self.inner.clone(), id, back })),
            Err(why) => {
                self.inner.server.http_refused(HttpRefused::PerPeer);
                tracing::debug!(peer = %to, "a forwarded request's client holds its connection share; refused 429");
                Err(why)
            }
        }
    }

    /// Waits (at most [`Limits::forward_timeout`](mcp_proto::Limits::forward_timeout) each)
    /// until what an answer made the engine hold ([`HttpHead::holds`](mcp_proto::HttpHead::holds):
    /// the session its `initialize` minted, the task its `tools/call` started) is in the
    /// cluster's directory, so that the client's next request for it may reach any replica.
    /// Only this answer waits, and only for its own entries.
    async fn registered(&self, holds: &[(mcp_proto::HeldKind, String)]) {
        if holds.is_empty() {
            return;
        }
        let Some(m) = self.inner.server.membership() else { return };
        for (kind, id) in holds {
            m.registered(&self.inner.rt, *kind, id, self.inner.server.limits().forward_time()).await;
        }
    }

    // Routing to the holder (see the `forward` module).

    /// The client address another replica of the cluster vouches for, on a request it
    /// forwarded here.
    fn forwarded_peer(
        &self,
        method: &http::Method,
        headers: &http::HeaderMap,
        named: Option<Named<'_>>,
    ) -> Option<String> {
        headers.get(crate::cluster::forward::FORWARDED_BY)?;
        let token = headers.get(crate::cluster::forward::FORWARDED_PEER)?.to_str().ok()?;
        let server = &self.inner.server;
        let m = server.membership()?;
        crate::cluster::forward::verified_peer(
            &server.key_ring(),
            token,
            &crate::cluster::forward::binding(method, named),
            &m.peer_nonces,
        )
    }

    /// Sends the request to the replica holding its session or task, when another one does;
    /// `None` to answer it here.
    async fn try_forward(
        &self,
        parts: &http::request::Parts,
        body: &[u8],
        peer: Option<String>,
        named: Option<Named<'_>>,
    ) -> Option<Response<McpBody>> {
        if parts.headers.contains_key(crate::cluster::forward::FORWARDED_BY) {
            return None;
        }
        let named = named?;
        let (kind, id) = (named.kind(), named.id().to_owned());
        let server = &self.inner.server;
        let m = server.membership()?;
        if server.holds(kind, &id) {
            return None;
        }
        let located = match crate::cluster::forward::locate(&self.inner.rt, &m, kind, &id).await {
            Ok(Some(located)) => located,
            Ok(None) => return None,
            Err(why) => {
                tracing::warn!(replica = %m.replica, kind = kind.as_str(), error = %why, "cannot look up the cluster directory; answered 503");
                return Some(unavailable(kind, "directory could not be reached"));
            }
        };
        if located.replica == m.replica {
            // An entry naming this replica for what it no longer holds.
            m.forget(kind, &id).await;
            return None;
        }
        let forward = crate::cluster::forward::Forward {
            rt: &self.inner.rt,
            membership: &m,
            to: &located,
            parts,
            named,
            body: body.to_vec(),
            peer,
            keys: server.key_ring(),
            // A legacy POST may wait for a call before its head: as long as it would on the
            // holder.
            head_bounded: !(kind == mcp_proto::HeldKind::Session && parts.method == http::Method::POST),
            timeout: server.limits().forward_time(),
            idle_for: crate::cluster::pool::idle_for(server.limits().header_timeout()),
        };
        let why = match forward.send().await {
            Ok(resp) => {
                tracing::debug!(replica = %m.replica, holder = %located.replica, kind = kind.as_str(), "forwarded a request to its holder");
                return Some(resp.map(McpBody::forwarded));
            }
            Err(crate::cluster::forward::Unreachable(why)) => why,
        };
        // A holder that refused the connection, or did not answer in time, may be busy (its
        // share of connections for this replica's address taken) or slow, not gone: only one
        // whose advertisement expired is gone. Its entry is never dropped here (a live holder
        // would lose a live session; a gone one's entries stop resolving with its
        // advertisement, and expire with their TTL).
        match crate::cluster::forward::locate(&self.inner.rt, &m, kind, &id).await {
            Ok(None) => {
                tracing::info!(replica = %m.replica, holder = %located.replica, kind = kind.as_str(), error = %why,
                    "the holder is gone (no live advertisement); answered here");
                None
            }
            Ok(Some(_)) => {
                tracing::warn!(replica = %m.replica, holder = %located.replica, url = %located.url, kind = kind.as_str(), error = %why,
                    "the holder is live but did not take the request; answered 503");
                Some(unavailable(kind, "holder is busy or unreachable"))
            }
            Err(e) => {
                tracing::warn!(replica = %m.replica, holder = %located.replica, kind = kind.as_str(), error = %why, lookup = %e,
                    "the holder did not take the request and the directory could not be reached; answered 503");
                Some(unavailable(kind, "directory could not be reached"))
            }
        }
    }

    /// Reads a `POST` body within the size and time bounds.
    async fn read_body<B: Body>(&self, body: B) -> Result<Vec<u8>, Response<McpBody>> {
        let rt = &self.inner.rt;
        let limits = self.inner.server.limits();
        let deadline = rt.now().checked_add(limits.body_timeout());
        let mut body = pin!(body);
        let outcome = crate::runtime::within(rt.as_ref(), deadline, read_capped(body.as_mut(), limits)).await;
        let server = &self.inner.server;
        match outcome {
            Some(Ok(bytes)) => Ok(bytes),
            Some(Err(BodyError::TooLarge(refusal))) => {
                server.http_refused(HttpRefused::BodyTooLarge);
                self.discard(body).await;
                Err(closing(refused(&refusal)))
            }
            Some(Err(BodyError::Broken)) => {
                server.http_refused(HttpRefused::BodyBroken);
                Err(closing(error_response(&Refusal::BrokenBody.error())))
            }
            None => {
                server.http_refused(HttpRefused::BodyTimeout);
                Err(closing(error_response(&Refusal::SlowBody.error())))
            }
        }
    }

    /// Reads and drops what is left of a body refused with 413, before the refusal is sent and
    /// the connection closed. Most clients write their whole body before they read anything;
    /// a socket closed with unread bytes in it is reset by the kernel, and the reset destroys
    /// the response the client has not read yet, so it would see a broken pipe instead of its
    /// 413. Bounded: at most [`Limits::max_discard_bytes`](mcp_proto::Limits::max_discard_bytes)
    /// more bytes, for at most [`Limits::discard_timeout`](mcp_proto::Limits::discard_timeout);
    /// past either the connection is closed with the rest unread, and such a client sees the
    /// reset.
    async fn discard<B: Body>(&self, mut body: Pin<&mut B>) {
        let rt = &self.inner.rt;
        let limits = self.inner.server.limits();
        let deadline = rt.now().checked_add(limits.discard_time());
        let drain = async {
            let mut left = limits.discard_bytes();
            while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
                let Ok(frame) = frame else { return };
                let Ok(data) = frame.into_data() else { continue };
                let Some(rest) = left.checked_sub(bytes::Buf::remaining(&data)) else { return };
                left = rest;
            }
        };
        select(pin!(drain), crate::runtime::sleep_until(rt.as_ref(), deadline)).await;
    }

    /// Waits for the engine's answer to a pending exchange: a JSON response, or an SSE head whose
    /// stream becomes the response body.
    async fn pending(&self, conn: ConnId, queue: HttpQueue) -> Response<McpBody> {
        let HttpQueue { rx: queue, dropped } = queue;
        // Dropped before the exchange ends (the client went away): the engine is told.
        let mut guard = CloseGuard { server: self.inner.server.clone(), conn: Some(conn) };
        match queue.recv().await {
            Ok(HttpItem::Respond(head, body)) => {
                guard.disarm();
                self.registered(&head.holds).await;
                response(head.status, &head.headers, McpBody::full(body))
            }
            Ok(HttpItem::Stream(head)) => {
                self.registered(&head.holds).await;
                let body = McpBody {
                    kind: Kind::Stream { queue: Box::pin(queue), guard, dropped },
                    busy: None,
                    reseated: None,
                };
                response(head.status, &head.headers, body)
            }
            Ok(HttpItem::Frame(_)) => {
                // The engine sends a stream's head before its bytes; the guard closes `conn`.
                tracing::error!("an HTTP exchange produced bytes before its head");
                error_response(&Refusal::Internal.error())
            }
            Err(_) => {
                // The engine closed the exchange without answering: the server is shutting
                // down, or the exchange was dropped.
                guard.disarm();
                error_response(&Refusal::EngineGone.error())
            }
        }
    }
}

/// hyper's header read timeout for `timeout`: none when `now + timeout` (with a year's margin
/// for the time that passes before hyper adds it) would overflow an `Instant`, since hyper adds
/// without checking and would panic. Such a timeout is "never" either way.
fn header_timeout(now: Instant, timeout: Duration) -> Option<Duration> {
    const MARGIN: Duration = Duration::from_secs(365 * 24 * 60 * 60);
    now.checked_add(timeout.saturating_add(MARGIN)).map(|_| timeout)
}

/// hyper's read buffer: the head bound plus room for the start of a body, never below hyper's
/// minimum of 8 KiB.
fn hyper_buf_size(head_bytes: usize) -> usize {
    head_bytes.saturating_add(16 * 1024).max(8 * 1024)
}

enum BodyError {
    TooLarge(HttpRefusal),
    Broken,
}

/// Reads `body` to its end, refusing it as soon as it grows past the configured bound; the rest
/// of a refused body is left in `body`.
async fn read_capped<B: Body>(
    mut body: Pin<&mut B>,
    limits: &mcp_proto::Limits,
) -> Result<Vec<u8>, BodyError> {
    // A declared length was already checked against the bound; start with a modest buffer either
    // way, so a client that declares much and sends little costs little.
    let hint = usize::try_from(body.size_hint().lower()).unwrap_or(usize::MAX);
    let mut bytes = Vec::with_capacity(hint.min(64 * 1024));
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let Ok(frame) = frame else { return Err(BodyError::Broken) };
        let Ok(data) = frame.into_data() else { continue };
        let len = bytes.len().saturating_add(bytes::Buf::remaining(&data));
        check_body_len(limits, len).map_err(BodyError::TooLarge)?;
        bytes.put(data);
    }
    Ok(bytes)
}

/// What the accept loop keeps of a connection it serves: whether it is answering a request,
/// and the switch that closes it.
struct Switch {
    busy: Arc<AtomicUsize>,
    cut: async_channel::Sender<()>,
    cut_off: async_channel::Receiver<()>,
    /// Its number in [`Peers`], when the accept loop admitted it by address.
    seat: Option<Seat>,
    /// The certificate chain a TLS client proved it holds (`TlsConfig::client_certificates`).
    chain: Option<ClientChain>,
}

/// A request extension: the verified certificate chain of the TLS client the request came from
/// ([`HttpRequestHead::peer_certificates`]). Private, so only this layer's own listener can set
/// it: a mounted service's request never carries one.
#[derive(Debug, Clone)]
pub(in crate::http) struct ClientChain(pub(in crate::http) Arc<[Vec<u8>]>);

/// A request extension: the number of the admitted connection the request came on, so that a
/// forwarded request counts against the address it was forwarded for ([`Peers::seat`]).
#[derive(Debug, Clone, Copy)]
struct Seat(u64);

/// Counts a connection against its own client's address again when dropped (with the response
/// to the forwarded request that counted it against another's).
pub(crate) struct Reseated {
    inner: Arc<Inner>,
    id: u64,
    back: IpAddr,
}

impl fmt::Debug for Reseated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reseated").field("id", &self.id).field("back", &self.back).finish()
    }
}

impl Drop for Reseated {
    fn drop(&mut self) {
        // Back where it was admitted, whatever that address holds now: it was counted there.
        let _ = self.inner.peers().seat(self.id, self.back, None);
    }
}

/// Every header line of a request head, for [`RequestHead`]. HTTP/2 and later carry the host as
/// `:authority`, which `http` keeps in the URI: it is passed on as `host`.
fn head_lines(parts: &::http::request::Parts) -> Vec<(&str, &[u8])> {
    each_head_line(parts).map(|(name, value)| (name.as_str(), value)).collect()
}

/// The lines of [`head_lines`], one at a time.
fn each_head_line(parts: &::http::request::Parts) -> impl Iterator<Item = (&::http::HeaderName, &[u8])> {
    let authority = (parts.version >= ::http::Version::HTTP_2
        && !parts.headers.contains_key(::http::header::HOST))
    .then(|| parts.uri.authority())
    .flatten()
    .map(|a| (&::http::header::HOST, a.as_str().as_bytes()));
    parts.headers.iter().map(|(name, value)| (name, value.as_bytes())).chain(authority)
}

/// The request target as the pure rules judge it: the whole URI when it names a scheme and
/// authority (absolute form, RFC 9112 §3.2.2, whose authority then counts instead of the Host
/// header), else the path and query.
fn request_target(parts: &::http::request::Parts) -> std::borrow::Cow<'_, str> {
    if parts.uri.scheme().is_some() {
        std::borrow::Cow::Owned(parts.uri.to_string())
    } else {
        std::borrow::Cow::Borrowed(parts.uri.path_and_query().map_or("/", |pq| pq.as_str()))
    }
}

/// The head handlers and gates read ([`Caller::http`]): the request's own lines, less what is
/// the server's business alone. The bearer token (and its DPoP proof) of a server that
/// verified it was issued for this server: the MCP spec forbids passing it through, so a
/// handler never holds it. A cluster's forwarding headers are between replicas.
fn exposed_head(parts: &::http::request::Parts, peer: Option<SocketAddr>, verified: bool) -> HttpRequestHead {
    let target = request_target(parts);
    let private = move |name: &::http::HeaderName| {
        (verified && (name == ::http::header::AUTHORIZATION || name.as_str() == "dpop"))
            || name.as_str() == crate::cluster::forward::FORWARDED_BY
            || name.as_str() == crate::cluster::forward::FORWARDED_PEER
    };
    let lines = || {
        each_head_line(parts)
            .filter(move |(name, _)| !private(name))
            .map(|(name, value)| (name.as_str(), value))
    };
    let (count, bytes) = lines().fold((0, 0), |(n, b), (name, value)| (n + 1, b + name.len() + value.len()));
    let mut head = HttpRequestHead::with_room(parts.method.as_str(), &target, peer, count, bytes);
    for (name, value) in lines() {
        head = head.with_header(name, value);
    }
    match parts.extensions.get::<ClientChain>() {
        Some(ClientChain(chain)) => head.with_peer_certificates(chain.clone()),
        None => head,
    }
}

/// The engine's view of a request head.
fn request_head<'a>(
    parts: &'a ::http::request::Parts,
    headers: &'a [(&'a str, &'a [u8])],
    target: &'a str,
) -> RequestHead<'a> {
    RequestHead { method: parts.method.as_str(), path: target, headers }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_route_is_the_route_it_was_made_of() {
        let headers =
            mcp_proto::http::RouteHeaders { session_id: Some("s-1"), protocol_version: Some("2025-11-25") };
        let accepts = mcp_proto::http::Accepts { json: true, sse: false, prefers_sse: false };
        let none = mcp_proto::http::RouteHeaders { session_id: None, protocol_version: None };
        let routes = [
            Route::Post { headers, accepts },
            Route::Post { headers: none, accepts },
            Route::Get { headers, last_event_id: Some("7") },
            Route::Get { headers: none, last_event_id: None },
            Route::Delete { headers },
        ];
        for route in routes {
            assert_eq!(HeldRoute::of(&route).route(), route);
        }
    }

    #[test]
    fn accept_errors() {
        assert_eq!(accept_backoff(&io::Error::from(io::ErrorKind::ConnectionAborted)), None);
        assert_eq!(accept_backoff(&io::Error::other("too many open files")), Some(ACCEPT_BACKOFF));
    }

    #[test]
    fn header_timeouts_too_long_to_add_mean_none() {
        let now = Instant::now();
        assert_eq!(header_timeout(now, Duration::ZERO), Some(Duration::ZERO));
        assert_eq!(header_timeout(now, Duration::from_secs(10)), Some(Duration::from_secs(10)));
        assert_eq!(header_timeout(now, Duration::MAX), None);
    }

    #[test]
    fn hyper_buffer_covers_the_head_bound() {
        assert_eq!(hyper_buf_size(8 * 1024), 24 * 1024);
        assert_eq!(hyper_buf_size(0), 16 * 1024);
    }
}
