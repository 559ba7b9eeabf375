//! Authorization for the HTTP transport (feature `auth`): an OAuth 2.1 resource server
//! (the MCP specification's Authorization section, 2025-06-18 onward) in front of the engine.
//!
//! [`ServerBuilder::authorization`](crate::ServerBuilder::authorization) puts an
//! [`Authorization`] on a server; every HTTP service of it then
//! - serves the Protected Resource Metadata (RFC 9728) at the path-inserted well-known URL of the
//!   endpoint and at the root;
//! - takes the access token from the `Authorization` header only (a token in the query is
//!   refused), checks it with the [`TokenVerifier`] and answers a missing or bad one with the
//!   RFC 6750 challenge (`401`, `400`, or `503` when it cannot be checked now: it fails closed);
//! - when the resource lists DPoP algorithms ([`ProtectedResource::dpop`]), takes DPoP-bound
//!   tokens (RFC 9449) under the `DPoP` scheme too: the request's proof must be for this
//!   method and URL, within [`PROOF_WINDOW`], bound to the token (`ath`), signed by the key the
//!   token's `cnf.jkt` names, never seen before ([`REPLAY_CAPACITY`]; in a cluster, on no
//!   replica: proofs are claimed in its shared replay ledger) and, when
//!   [`Authorization::dpop_nonces`] asks, carry a nonce this server issued. A bound token sent
//!   as a bearer token is refused, and so is a bearer token sent as a bound one;
//! - hands the engine the [`Caller`](mcp_proto::Caller) the token makes (its subject, client
//!   id, scopes as roles and chosen claims), so the per-caller gates, shares and bindings work
//!   on verified identities. A `Caller` an application middleware put in the request's
//!   extensions is replaced: with authorization on, only the token speaks for the caller.
//!
//! The checks themselves are pure and live in [`mcp_proto::auth`]; this module adds what needs
//! crypto and I/O: signatures with `ring` ([`verify_jwt`], [`verifies`]) and the fetching of the
//! authorization server's metadata and keys through the shim's runtime ([`JwtVerifier`]). The
//! raw token is never logged and never sent anywhere but to the configured verifier.

mod dpop;
mod fetch;
mod gate;
mod introspect;
mod jwt;
mod verify;

use std::sync::Arc;
use std::time::Duration;

use mcp_proto::auth::token::AccessToken;
use mcp_proto::auth::{Denial, ProtectedResource};

use crate::handler::BoxFuture;
use crate::runtime::Runtime;

pub use dpop::{PROOF_WINDOW, REPLAY_CAPACITY};
pub use fetch::FetchError;
pub(crate) use gate::Forwarded;
pub use introspect::{IntrospectionVerifier, INTROSPECTION_IN_FLIGHT, INTROSPECTION_PER_PEER};
pub use jwt::{JwtVerifier, FETCH_TIMEOUT, TOKEN_CACHE};
pub use verify::{verifies, verify_jwt};

/// A token to check, and what to check it with.
#[derive(Clone)]
#[non_exhaustive]
pub struct TokenCheck {
    /// The access token, as the `Authorization` header carried it (without the scheme).
    pub token: Arc<str>,
    /// The wall-clock time, in seconds since the Unix epoch, that expiry is judged at.
    pub now: u64,
    /// The server's runtime: for fetching keys or asking an introspection endpoint, and for
    /// timing such a request out.
    pub runtime: Arc<dyn Runtime>,
    /// The address of the connection the token came on (a proxy's, behind one): what a
    /// verifier shares its costly work out by.
    pub peer: Option<std::net::IpAddr>,
}

impl std::fmt::Debug for TokenCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token never reaches a log.
        f.debug_struct("TokenCheck").field("now", &self.now).finish_non_exhaustive()
    }
}

/// Decides whether an access token is good for this resource, and what it says about its
/// bearer. [`JwtVerifier`] checks JWT access tokens (RFC 9068) against the authorization
/// server's published keys, [`IntrospectionVerifier`] asks its introspection endpoint;
/// implement this for anything else (a token format of your own, a client authentication
/// other than a secret).
///
/// An implementation must check the audience: a token issued for another resource is refused
/// (RFC 8707), or any service trusted by the same authorization server could replay its
/// tokens here. It answers [`Denial::InvalidToken`] for a bad token and
/// [`Denial::Unavailable`] when it cannot tell now (its authorization server unreachable): the
/// request is refused either way.
pub trait TokenVerifier: Send + Sync + 'static {
    /// The verified token, or why it is refused.
    ///
    /// Shared, so that a verifier answering from a cache hands out what it keeps without
    /// copying its claims.
    fn verify(&self, check: TokenCheck) -> BoxFuture<Result<Arc<AccessToken>, Denial>>;
}

/// A server's authorization: the resource it protects (the metadata document and the
/// challenges name it), the verifier of its tokens, and the claims kept for the caller.
#[derive(Clone)]
pub struct Authorization {
    pub(crate) resource: Arc<ProtectedResource>,
    pub(crate) document: bytes::Bytes,
    pub(crate) verifier: Arc<dyn TokenVerifier>,
    pub(crate) keep: Arc<[String]>,
    pub(crate) proofs: Arc<dpop::Proofs>,
    window: Duration,
    replay_capacity: usize,
    nonce_period: Option<Duration>,
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization")
            .field("resource", &self.resource.resource().as_str())
            .field("keep", &self.keep)
            .finish_non_exhaustive()
    }
}

impl Authorization {
    /// Protects `resource` (its canonical URL must be the MCP endpoint's: the audience tokens
    /// are checked against and the metadata's `resource`) with `verifier`.
    pub fn new(resource: ProtectedResource, verifier: impl TokenVerifier) -> Self {
        let document = bytes::Bytes::from(resource.document());
        Self {
            resource: Arc::new(resource),
            document,
            verifier: Arc::new(verifier),
            keep: Arc::new([]),
            proofs: Arc::new(dpop::Proofs::new(PROOF_WINDOW, REPLAY_CAPACITY, None, None)),
            window: PROOF_WINDOW,
            replay_capacity: REPLAY_CAPACITY,
            nonce_period: None,
        }
    }

    /// Keeps the claims `names` of every verified token as attributes of its
    /// [`Caller`](mcp_proto::Caller) (strings and numbers only), for gates that look at them.
    /// Default none; `client_id` is always kept.
    pub fn keep_claims(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.keep = names.into_iter().map(Into::into).collect();
        self
    }

    /// The protected resource.
    pub fn resource(&self) -> &ProtectedResource {
        &self.resource
    }

    /// How far a DPoP proof's `iat` may be from now, either way: [`PROOF_WINDOW`] (60 s) by
    /// default. Only used when the resource takes DPoP-bound tokens
    /// ([`ProtectedResource::dpop`]).
    pub fn dpop_window(mut self, window: Duration) -> Self {
        self.window = window;
        self.renew_proofs(None, None);
        self
    }

    /// How many DPoP proofs are remembered against replay: [`REPLAY_CAPACITY`] (65,536) by
    /// default (see there for what a full cache does).
    pub fn dpop_replay_capacity(mut self, capacity: usize) -> Self {
        self.replay_capacity = capacity;
        self.renew_proofs(None, None);
        self
    }

    /// Requires every DPoP proof to carry a nonce this server issued (RFC 9449 §8), each good
    /// for one to two `period`s (at least 1 s). A proof without one, or with a stale one, is
    /// refused `401 use_dpop_nonce` with a fresh nonce in `DPoP-Nonce`. Nonces are sealed with
    /// the server's key ring and kept nowhere, so replicas sharing the ring accept each
    /// other's. Default off: a proof's freshness rests on its `iat` and the replay cache.
    pub fn dpop_nonces(mut self, period: Duration) -> Self {
        self.nonce_period = Some(period);
        self
    }

    /// Seals the nonces (when required) with the server's key ring, and claims DPoP proofs in
    /// the replay ledger of its cluster (when it is a replica), once both are known.
    pub(crate) fn for_server(
        mut self,
        keys: &mcp_proto::KeyRing,
        cluster: Option<Arc<dyn crate::cluster::Cluster>>,
    ) -> Self {
        let nonces = self.nonce_period.map(|period| mcp_proto::auth::dpop::Nonces::new(keys.clone(), period));
        self.renew_proofs(nonces, cluster);
        self
    }

    fn renew_proofs(
        &mut self,
        nonces: Option<mcp_proto::auth::dpop::Nonces>,
        cluster: Option<Arc<dyn crate::cluster::Cluster>>,
    ) {
        self.proofs = Arc::new(dpop::Proofs::new(self.window, self.replay_capacity, nonces, cluster));
    }
}
