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
//! - hands the engine the [`Caller`](mcp_proto::Caller) the token makes (its subject, client
//!   id, scopes as roles and chosen claims), so the per-caller gates, shares and bindings work
//!   on verified identities. A `Caller` an application middleware put in the request's
//!   extensions is replaced: with authorization on, only the token speaks for the caller.
//!
//! The checks themselves are pure and live in [`mcp_proto::auth`]; this module adds what needs
//! crypto and I/O: signatures with `ring` ([`verify_jwt`], [`verifies`]) and the fetching of the
//! authorization server's metadata and keys through the shim's runtime ([`JwtVerifier`]). The
//! raw token is never logged and never sent anywhere but to the configured verifier.

mod fetch;
mod gate;
mod jwt;
mod verify;

use std::sync::Arc;

use mcp_proto::auth::token::AccessToken;
use mcp_proto::auth::{Denial, ProtectedResource};

use crate::handler::BoxFuture;
use crate::runtime::Runtime;

pub use fetch::FetchError;
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
}

impl std::fmt::Debug for TokenCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token never reaches a log.
        f.debug_struct("TokenCheck").field("now", &self.now).finish_non_exhaustive()
    }
}

/// Decides whether an access token is good for this resource, and what it says about its
/// bearer. [`JwtVerifier`] checks JWT access tokens (RFC 9068) against the authorization
/// server's published keys; implement this for anything else (a token format of your own, an
/// introspection endpoint with its own client authentication).
///
/// An implementation must check the audience: a token issued for another resource is refused
/// (RFC 8707), or any service trusted by the same authorization server could replay its
/// tokens here. It answers [`Denial::InvalidToken`] for a bad token and
/// [`Denial::Unavailable`] when it cannot tell now (its authorization server unreachable): the
/// request is refused either way.
pub trait TokenVerifier: Send + Sync + 'static {
    /// The verified token, or why it is refused.
    fn verify(&self, check: TokenCheck) -> BoxFuture<Result<AccessToken, Denial>>;
}

/// A server's authorization: the resource it protects (the metadata document and the
/// challenges name it), the verifier of its tokens, and the claims kept for the caller.
#[derive(Clone)]
pub struct Authorization {
    pub(crate) resource: Arc<ProtectedResource>,
    pub(crate) document: bytes::Bytes,
    pub(crate) verifier: Arc<dyn TokenVerifier>,
    pub(crate) keep: Arc<[String]>,
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
        Self { resource: Arc::new(resource), document, verifier: Arc::new(verifier), keep: Arc::new([]) }
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
}
