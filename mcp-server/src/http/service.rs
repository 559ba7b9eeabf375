//! The tower service over [`HttpService`] ([`McpService`]) for web stacks (axum), and the
//! runtime it needs ([`HttpRuntime`]).

use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;

use super::{HttpService, McpBody, PeerAddr};
use crate::handler::BoxFuture;
use crate::runtime::Runtime;
use crate::server::Server;
use mcp_proto::http::HttpConfig;

/// A [`Runtime`] that can name itself, and knows where its web stack keeps the client's
/// address: what [`McpService::new`] needs to build an endpoint from a server and options alone.
pub trait HttpRuntime: Runtime + Clone {
    /// The runtime the caller is running on.
    fn current() -> Self;

    /// The client's address from request extensions that this runtime's web frameworks set (on
    /// tokio, axum's `ConnectInfo<SocketAddr>`), when no [`PeerAddr`] is present. Default: none.
    fn peer_addr(extensions: &http::Extensions) -> Option<SocketAddr> {
        let _ = extensions;
        None
    }
}

/// The MCP endpoint as a [`tower_service::Service`], to mount in an existing hyper, tower or
/// axum application; each shim names it for its runtime (`mcp_tokio::McpService`,
/// `mcp_smol::McpService`).
///
/// Every request the application routes to the service is for the MCP endpoint, whatever its
/// path: the router already chose, so the service can be mounted at any path, with axum's
/// `route_service("/api/mcp", ..)` (which keeps the full path) or `nest_service("/api/mcp", ..)`
/// (which strips it). The endpoint path in [`HttpConfig`] matters only to the standalone
/// listener ([`HttpService::serve`]), which answers any other path with 404.
///
/// A [`Caller`](mcp_proto::Caller) that the application's middleware puts in the request's extensions is
/// who the server's gates see, unless the server's identify hook
/// ([`ServerBuilder::identify`](crate::ServerBuilder::identify)), which runs here too, names
/// another. The client's address comes from a [`PeerAddr`] extension, else
/// from the runtime's convention ([`HttpRuntime::peer_addr`]: on tokio, axum's
/// `ConnectInfo<SocketAddr>`, which `into_make_service_with_connect_info::<SocketAddr>()`
/// provides); without either, the loopback-only rule cannot be applied and is skipped (the
/// `Host` and `Origin` rules still are), and the first such request raises
/// [`Warning::NoPeerAddress`](crate::Warning::NoPeerAddress) (logged, in
/// [`Status::warnings`](crate::Status::warnings), and on stderr when no `tracing` subscriber
/// records it). The host
/// server's own limits (head timeout, connection count, keep-alive) apply instead of the
/// server's [`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout) and
/// [`Limits::max_http_connections`](mcp_proto::Limits::max_http_connections); the head, body
/// and discard bounds, the body timeout and every request rule still apply.
pub struct McpService<R> {
    pub(crate) http: HttpService,
    pub(crate) runtime: PhantomData<fn() -> R>,
}

impl<R> Clone for McpService<R> {
    fn clone(&self) -> Self {
        Self { http: self.http.clone(), runtime: PhantomData }
    }
}

impl<R> fmt::Debug for McpService<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("McpService").field(&self.http).finish()
    }
}

impl<R: HttpRuntime> McpService<R> {
    /// The endpoint for `server` with the policy `http`, on the current runtime
    /// ([`HttpRuntime::current`], which may panic outside one).
    pub fn new(server: Server, http: HttpConfig) -> Self {
        Self { http: HttpService::new(server, R::current(), http), runtime: PhantomData }
    }

    /// The runtime-independent endpoint underneath.
    pub fn http(&self) -> &HttpService {
        &self.http
    }
}

impl<R, B> tower_service::Service<Request<B>> for McpService<R>
where
    R: HttpRuntime,
    B: Body + Send + 'static,
    B::Data: Send,
{
    type Response = Response<McpBody>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<McpBody>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    /// [`HttpService::handle`] for the endpoint path, with the peer from the request's
    /// extensions.
    fn call(&mut self, req: Request<B>) -> Self::Future {
        let peer = match req.extensions().get::<PeerAddr>() {
            Some(peer) => Some(peer.0),
            None => R::peer_addr(req.extensions()),
        };
        let cfg = self.http.config();
        if peer.is_none() && cfg.is_loopback_only() {
            self.http.server().shared.warnings.raise(crate::Warning::NoPeerAddress);
        }
        let req = at_endpoint(req, cfg.endpoint_path());
        let http = self.http.clone();
        Box::pin(async move { Ok(http.handle(req, peer).await) })
    }
}

/// `req` with its path replaced by `endpoint` (scheme, authority and query kept): a mounted
/// service serves whatever path its router sent it. An endpoint that is no valid URI path
/// leaves the request as it is, to be answered 404 like any request for another path.
pub(crate) fn at_endpoint<B>(mut req: Request<B>, endpoint: &str) -> Request<B> {
    if req.uri().path() == endpoint {
        return req;
    }
    let target = match req.uri().query() {
        Some(q) => format!("{endpoint}?{q}"),
        None => endpoint.to_owned(),
    };
    let mut parts = req.uri().clone().into_parts();
    if let Ok(pq) = http::uri::PathAndQuery::try_from(target) {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
    req
}
