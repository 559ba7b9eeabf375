//! Routing to the holder: a request for a legacy session or a running task that another replica
//! holds is sent to that replica, and its response streamed back as is.
//!
//! A legacy session (its SSE streams, its calls in flight, its pending asks) and a running task
//! live where they began. Each replica reports what it holds to its cluster's directory
//! ([`Cluster::register`]) and advertises where it is reached ([`Cluster::advertise`]). When a
//! request names an `Mcp-Session-Id` this replica's engine does not hold, or is a 2026-07-28
//! `tasks/get`, `tasks/update` or `tasks/cancel` whose task id (the `Mcp-Name` header, which the
//! engine checks against the body) it does not hold (what a request names is mcp-proto's
//! [`named`](mcp_proto::http::named)), the endpoint looks the id up
//! ([`Cluster::locate`]); when a live replica holds it, the request goes there unchanged
//! (method, headers, body; to the holder's advertised URL) with two headers added:
//!
//! - `Mcp-Forwarded-By: <replica>`: a request carrying it is never forwarded again (no loops;
//!   the holder answers it from its own engine, as it would any request);
//! - `Mcp-Forwarded-Peer: <token>`: the client's address, signed with the cluster's shared key
//!   ring, so the holder sees the same caller as if the client had come directly (an anonymous
//!   caller is bound to its address). The token is bound to the request it was made for (its
//!   HTTP method and the session or task it names) and carries a random nonce the holder
//!   accepts once ([`MAX_PEER_NONCES`] remembered for [`PEER_TOKEN_TTL_MS`]). A token that
//!   does not verify, is older than [`PEER_TOKEN_TTL_MS`] (10 s), names another request, or was
//!   used before is ignored: the holder then sees the forwarding replica's address. So a token
//!   seen on the network between replicas vouches for nothing more.
//!
//! The response (status, headers, body) comes back as the holder sends it, an SSE stream event
//! by event; closing either side closes the other. It carries `Mcp-Served-By: <holder>`.
//!
//! Costs: an id this replica holds costs nothing more; any other id costs one directory lookup
//! (a random session id never costs more: nothing is forwarded without a live entry). A
//! forwarded request's body was read within the same bounds as a local one, and costs the
//! holder what it would cost sent directly. Connections to a holder are kept alive (HTTP/1.1)
//! and reused: a connection whose response was read to its end waits in this replica's pool
//! for the next forward to the same holder, for at most [`FORWARD_IDLE_TIMEOUT`] (4 s, and
//! never more than half this replica's own
//! [`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout), which the holder
//! closes an idle connection at), and at most [`MAX_IDLE_PER_HOLDER`] (8) per holder and
//! [`MAX_IDLE_FORWARDS`] (64) in all wait; a connection past either bound is closed instead.
//! So sequential forwards to one holder share one connection, and one left idle is closed
//! here before the holder would close it. A response the client stops reading before its
//! end (an SSE stream it drops) closes its connection, as before, so the holder sees the
//! client go; a stream holds its connection for as long as it lasts. A kept connection the
//! holder closed is never used again; a request that could not be written on a kept one
//! (it closed meanwhile) is sent once more on a new connection, and one that may have
//! reached the holder is never sent again.
//!
//! # When it fails
//!
//! - A lookup that fails, or takes longer than [`LOOKUP_TIMEOUT`] (the backend is slow or
//!   down), is answered 503 with `Retry-After` (a JSON-RPC error, `data.reason:
//!   "unavailable"`, "the session directory could not be reached"): the session may well be
//!   live on its holder, and a 404 would make the client drop it.
//! - A forward that fails (the holder refused the connection, closed it unread because it is at
//!   a bound, or did not take the request within
//!   [`Limits::forward_timeout`](mcp_proto::Limits::forward_timeout)) drops nothing. The id is
//!   looked up again: while its holder still advertises, the client is answered 503 with
//!   `Retry-After` (the holder is busy or slow, or died less than
//!   [`ADVERTISE_TTL`](crate::cluster::ADVERTISE_TTL) ago); once its advertisement has
//!   expired the holder is gone, and the request is answered here as one for an unknown
//!   session (404) or task (`-32602`). A replica never deletes another's entries: a gone
//!   holder's entries stop resolving with its advertisement and expire with their TTL, and a
//!   busy holder keeps them.
//! - Whatever the holder answers (a 503 or 429 of its own included) goes back as it is.
//!
//! # Shares on the holder
//!
//! Every forward reaches the holder from its replica's address, so the holder does not count a
//! connection carrying a forwarded request against that address: while it answers a request
//! whose `Mcp-Forwarded-Peer` verifies, the connection counts against the address the token
//! vouches for ([`Limits::max_http_connections_per_peer`](mcp_proto::Limits::max_http_connections_per_peer)),
//! and against the forwarder's again once the response is done. One caller's slow calls
//! through a replica thus take that caller's share, and its forward past the share is answered
//! 429 with `Retry-After`, as its own connection would have been turned away; other callers'
//! forwards through the same replica are not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::{AbortHandle, Abortable};
use http::{HeaderName, HeaderValue, Request, Response};
use mcp_proto::http::Named;
use mcp_proto::{HeldKind, KeyRing};

use crate::body::Forwarded;
use crate::cluster::nonces::{PeerNonces, PEER_TOKEN_TTL_MS};
use crate::cluster::pool::{AbortOnDrop, Conn, Full, Holder, Lease};
use crate::cluster::{Located, Membership};
use crate::runtime::{unix_ms, Runtime};
use crate::server::Server;

/// The header a forwarded request carries: the id of the replica that forwarded it.
pub const FORWARDED_BY: &str = "mcp-forwarded-by";
/// The header a forwarded request carries: the client's address, signed (see the module docs).
pub const FORWARDED_PEER: &str = "mcp-forwarded-peer";
/// The header a forwarded response carries: the id of the replica that answered it.
pub const SERVED_BY: &str = "mcp-served-by";

/// The `Retry-After` of a 503 for a session or task out of reach: 1 s, a third of
/// [`ADVERTISE_TTL`](crate::cluster::ADVERTISE_TTL), so that a retry after a holder died finds
/// its advertisement expired within a few tries (and is answered 404).
pub(crate) const RETRY_AFTER_SECS: u32 = 1;

/// How long a directory lookup may take before it counts as failed: 1 s (a Redis lookup is
/// two commands of at most 500 ms each). A lookup that fails or takes longer is answered 503,
/// never as an unknown session or task: the session may well be live on its holder.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(1);

/// [`Cluster::locate`](crate::Cluster::locate) of `id`, within [`LOOKUP_TIMEOUT`].
pub(crate) async fn locate(
    rt: &Arc<dyn Runtime>,
    m: &Membership,
    kind: HeldKind,
    id: &str,
) -> Result<Option<Located>, String> {
    let deadline = rt.now().checked_add(LOOKUP_TIMEOUT);
    match crate::runtime::within(rt.as_ref(), deadline, m.cluster.locate(kind, id)).await {
        Some(found) => found.map_err(|e| e.to_string()),
        None => Err(format!("timed out after {LOOKUP_TIMEOUT:?}")),
    }
}

/// The key-ring domain of `Mcp-Forwarded-Peer` tokens.
const PEER_DOMAIN: &str = "mcp-forwarded-peer/v2";

/// Headers that belong to one connection (RFC 9110 §7.6.1) and are never passed on.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
];

/// What a `Mcp-Forwarded-Peer` token is bound to: the request's HTTP method and the session or
/// task it names ([`mcp_proto::http::named`]), so a token taken from one request vouches for no
/// other.
pub(crate) fn binding(method: &http::Method, named: Option<Named<'_>>) -> String {
    let named = named.map(|n| format!("{}:{}", n.kind().as_str(), n.id())).unwrap_or_default();
    format!("{method} {named}")
}

/// The signed client address for `Mcp-Forwarded-Peer`, bound to the request `bound` describes
/// ([`binding`]) and to a fresh nonce; `None` when no random nonce can be drawn (the request
/// then goes without one, and the holder sees this replica's address).
pub(crate) fn peer_token(keys: &KeyRing, peer: &str, bound: &str) -> Option<String> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).ok()?;
    let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    let payload = format!("{}\0{nonce}\0{bound}\0{peer}", unix_ms());
    Some(keys.sign_token(PEER_DOMAIN, payload.as_bytes()))
}

/// The client address a `Mcp-Forwarded-Peer` token vouches for, if it verifies, is recent, was
/// made for the request `bound` describes ([`binding`]) and was not used before (`nonces`).
pub(crate) fn verified_peer(keys: &KeyRing, token: &str, bound: &str, nonces: &PeerNonces) -> Option<String> {
    let payload = keys.verify_token(PEER_DOMAIN, token)?;
    let text = String::from_utf8(payload).ok()?;
    let mut fields = text.splitn(4, '\0');
    let (at, nonce, made_for, peer) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    let at: u64 = at.parse().ok()?;
    let now = unix_ms();
    // A little clock skew between replicas is tolerated either way.
    let recent = at <= now.saturating_add(PEER_TOKEN_TTL_MS) && now.saturating_sub(at) <= PEER_TOKEN_TTL_MS;
    (recent && made_for == bound && nonces.take(nonce, at, now)).then(|| peer.to_owned())
}

/// Why a forward failed: the holder counts as unreachable.
#[derive(Debug)]
pub(crate) struct Unreachable(pub(crate) String);

/// One request on its way to the holder.
pub(crate) struct Forward<'a> {
    pub(crate) rt: &'a Arc<dyn Runtime>,
    pub(crate) membership: &'a Membership,
    pub(crate) to: &'a Located,
    pub(crate) parts: &'a http::request::Parts,
    /// The session or task the request names, which the holder holds.
    pub(crate) named: Named<'a>,
    pub(crate) body: Vec<u8>,
    /// The client's address, vouched for to the holder.
    pub(crate) peer: Option<String>,
    pub(crate) keys: KeyRing,
    /// Whether the response head must come within the timeout too (see
    /// [`Limits::forward_timeout`](mcp_proto::Limits::forward_timeout)).
    pub(crate) head_bounded: bool,
    pub(crate) timeout: std::time::Duration,
    /// How long the connection may wait in the pool once its response is read ([`idle_for`]).
    pub(crate) idle_for: Duration,
}

impl Forward<'_> {
    /// Sends the request and returns the holder's response, its body streaming: on a kept
    /// connection to the holder when the pool has one, else on a new one.
    pub(crate) async fn send(self) -> Result<Response<Forwarded>, Unreachable> {
        let uri: http::Uri = self
            .to
            .url
            .parse()
            .map_err(|e| Unreachable(format!("bad advertised URL {}: {e}", self.to.url)))?;
        if uri.scheme_str().is_some_and(|s| s != "http") {
            return Err(Unreachable(format!("only http:// URLs are forwarded to, not {}", self.to.url)));
        }
        let host = uri.host().ok_or_else(|| Unreachable(format!("no host in {}", self.to.url)))?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        let holder: Holder = (host, uri.port_u16().unwrap_or(80));
        let mut path = uri.path().to_owned();
        if let Some(q) = self.parts.uri.query() {
            path.push('?');
            path.push_str(q);
        }
        let deadline = self.rt.now().checked_add(self.timeout);
        let pool = &self.membership.forward_pool;
        let mut request = self.request(path)?;
        let mut kept = pool.take(&holder, self.rt.now());
        let (resp, conn) = loop {
            let reused = kept.is_some();
            let conn = match kept.take() {
                Some(conn) => conn,
                None => self.connect(&holder, deadline).await?,
            };
            match self.exchange(conn, request, deadline).await? {
                Ok(answered) => break answered,
                // Not written: the kept connection closed meanwhile (the holder closed it idle).
                // Nothing reached the holder, so the request goes once more, on a new connection.
                Err(back) if reused => request = back,
                Err(_) => {
                    return Err(Unreachable("request: the new connection closed before it was sent".into()))
                }
            }
        };
        let (parts, body) = resp.into_parts();
        let lease = Lease { conn, holder, pool: pool.clone(), rt: self.rt.clone(), idle_for: self.idle_for };
        let mut out = Response::new(Forwarded { body, lease: Some(lease), ended: false });
        *out.status_mut() = parts.status;
        for (name, value) in &parts.headers {
            if !HOP_BY_HOP.contains(&name.as_str()) {
                out.headers_mut().append(name.clone(), value.clone());
            }
        }
        if let Ok(v) = HeaderValue::from_str(&self.to.replica) {
            out.headers_mut().insert(HeaderName::from_static(SERVED_BY), v);
        }
        Ok(out)
    }

    /// A new connection to `holder`, within `deadline`, its task running.
    async fn connect(&self, holder: &Holder, deadline: Option<Instant>) -> Result<Conn, Unreachable> {
        let rt = self.rt.clone();
        let (host, port) = holder.clone();
        let connect = async move {
            let io = rt.connect(host, port).await.map_err(|e| Unreachable(format!("connect: {e}")))?;
            hyper::client::conn::http1::handshake::<_, Full>(io)
                .await
                .map_err(|e| Unreachable(format!("handshake: {e}")))
        };
        let (sender, conn) = within(self.rt, deadline, connect).await?;
        // The connection runs on its own task until it is dropped (its response body dropped
        // before its end, or the pool closing it): that aborts the task, which closes the
        // socket, so the holder sees the client go.
        let (abort, registration) = AbortHandle::new_pair();
        self.rt.spawn(Box::pin(async move {
            let _ = Abortable::new(conn, registration).await;
        }));
        Ok(Conn { sender, _task: AbortOnDrop(abort) })
    }

    /// Sends `req` on `conn`: the response head and the connection, or the request back when
    /// it was not written (the connection had closed), so it may be sent on another.
    async fn exchange(
        &self,
        mut conn: Conn,
        req: Request<Full>,
        deadline: Option<Instant>,
    ) -> Result<Result<(Response<hyper::body::Incoming>, Conn), Request<Full>>, Unreachable> {
        let sent = conn.sender.try_send_request(req);
        let answered = if self.head_bounded {
            within(self.rt, deadline, async { Ok(sent.await) }).await?
        } else {
            sent.await
        };
        match answered {
            Ok(resp) => Ok(Ok((resp, conn))),
            Err(mut e) => match e.take_message() {
                Some(req) => {
                    tracing::debug!(error = %e.error(), "a forward's connection closed before the request was written");
                    Ok(Err(req))
                }
                None => Err(Unreachable(format!("request: {}", e.error()))),
            },
        }
    }

    fn request(&self, path: String) -> Result<Request<Full>, Unreachable> {
        let mut req = Request::new(Full(Some(Bytes::from(self.body.clone()))));
        *req.method_mut() = self.parts.method.clone();
        *req.uri_mut() = path.parse().map_err(|e| Unreachable(format!("bad path {path}: {e}")))?;
        let headers = req.headers_mut();
        for (name, value) in &self.parts.headers {
            if !HOP_BY_HOP.contains(&name.as_str()) && name != http::header::CONTENT_LENGTH {
                headers.append(name.clone(), value.clone());
            }
        }
        if !headers.contains_key(http::header::HOST) {
            // An HTTP/2 request carries its host in the URI only.
            if let Some(v) = self.parts.uri.authority().and_then(|a| HeaderValue::from_str(a.as_str()).ok()) {
                headers.insert(http::header::HOST, v);
            }
        }
        if !self.body.is_empty() || self.parts.method == http::Method::POST {
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(self.body.len()));
        }
        if let Ok(v) = HeaderValue::from_str(&self.membership.replica) {
            headers.insert(HeaderName::from_static(FORWARDED_BY), v);
        }
        if let Some(peer) = &self.peer {
            let bound = binding(&self.parts.method, Some(self.named));
            if let Some(v) = peer_token(&self.keys, peer, &bound).and_then(|t| HeaderValue::from_str(&t).ok())
            {
                headers.insert(HeaderName::from_static(FORWARDED_PEER), v);
            }
        }
        Ok(req)
    }
}

/// `fut`, unless `deadline` passes first.
async fn within<T>(
    rt: &Arc<dyn Runtime>,
    deadline: Option<std::time::Instant>,
    fut: impl std::future::Future<Output = Result<T, Unreachable>>,
) -> Result<T, Unreachable> {
    crate::runtime::within(rt.as_ref(), deadline, fut)
        .await
        .unwrap_or_else(|| Err(Unreachable("timed out".into())))
}

impl Server {
    /// The membership to forward with, when this server is in a cluster.
    pub(crate) fn membership(&self) -> Option<Membership> {
        self.lock().cluster.clone()
    }

    /// Whether this server's engine holds the session or task `id`.
    pub(crate) fn holds(&self, kind: HeldKind, id: &str) -> bool {
        self.lock().engine.holds(kind, id)
    }

    /// The key ring the engine signs with (shared by the cluster's replicas).
    pub(crate) fn key_ring(&self) -> KeyRing {
        self.lock().engine.config().keys.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_tokens_verify_with_the_ring_only_once_and_for_their_request() {
        let ring = KeyRing::new([5; 32]);
        let nonces = PeerNonces::default();
        let bound = "POST session:s1";
        let token = peer_token(&ring, "127.0.0.2", bound).unwrap();
        assert_eq!(verified_peer(&KeyRing::new([6; 32]), &token, bound, &nonces), None, "another ring");
        assert_eq!(verified_peer(&ring, &token, "GET session:s1", &nonces), None, "another method");
        assert_eq!(verified_peer(&ring, &token, "POST session:s2", &nonces), None, "another session");
        assert_eq!(verified_peer(&ring, &token, bound, &nonces).as_deref(), Some("127.0.0.2"));
        assert_eq!(verified_peer(&ring, &token, bound, &nonces), None, "a token is taken once");
        let again = peer_token(&ring, "127.0.0.2", bound).unwrap();
        assert_ne!(again, token, "each token has its own nonce");
        assert_eq!(verified_peer(&ring, &again, bound, &nonces).as_deref(), Some("127.0.0.2"));
        let at = unix_ms() - 2 * PEER_TOKEN_TTL_MS;
        let stale = ring.sign_token(PEER_DOMAIN, format!("{at}\0aa\0{bound}\0127.0.0.3").as_bytes());
        assert_eq!(verified_peer(&ring, &stale, bound, &nonces), None, "too old");
        // The version-1 layout (time and address only) vouches for nothing.
        let v1 = ring.sign_token(PEER_DOMAIN, format!("{}\0127.0.0.3", unix_ms()).as_bytes());
        assert_eq!(verified_peer(&ring, &v1, bound, &nonces), None);
    }

    #[test]
    fn a_binding_names_the_method_and_what_the_request_names() {
        assert_eq!(binding(&http::Method::POST, None), "POST ");
        assert_eq!(binding(&http::Method::DELETE, Some(Named::Session("s1"))), "DELETE session:s1");
        assert_eq!(binding(&http::Method::POST, Some(Named::Task("t1"))), "POST task:t1");
    }
}
