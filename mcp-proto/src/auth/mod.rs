//! The rules of an OAuth 2.1 protected resource, as the MCP Authorization specification
//! (2025-06-18 onward) asks of a remote server: pure functions, no I/O, no clock.
//!
//! - [`ResourceUrl`]: the canonical URL of the MCP endpoint (RFC 8707), which is the audience
//!   tokens must be issued for, and the two paths its Protected Resource Metadata is served at.
//! - [`ProtectedResource`]: that metadata document (RFC 9728).
//! - [`credentials`]: the access token of a request, from its `Authorization` header only.
//! - [`Denial`]: why a request is refused, its status and its `WWW-Authenticate` challenge
//!   (RFC 6750 §3), which never echoes the token.
//! - [`token`]: a JWT access token (RFC 9068) taken apart within bounds, its header checked
//!   against the key that must have signed it, and its claims (issuer, times with a stated
//!   skew, audience) checked against the time the caller passes in.
//! - [`Scopes`]: what a token grants, and what an operation needs that it lacks.
//! - [`introspection`]: opaque tokens, the authorization server's answer about them held to the
//!   same rules, and a bounded cache of answers that never keeps a token.
//! - [`keys`]: where the authorization server's metadata is, what of it and of its key set is
//!   used, and when to fetch the keys again (a refetch floor against unknown-`kid` floods).
//! - [`dpop`]: proofs of possession (RFC 9449) held to their request, replays refused within a
//!   bounded memory, and stateless server nonces.
//!
//! Verifying a signature and fetching keys are not here: they need a crypto library and the
//! network, and belong to the layer above. What is here decides everything else, so that it
//! can be tested byte for byte.

mod challenge;
pub mod credentials;
pub mod dpop;
pub mod introspection;
pub mod keys;
mod resource;
mod scopes;
pub mod token;

pub use challenge::Denial;
pub use resource::{ProtectedResource, ResourceError, ResourceUrl, METADATA_PREFIX};
pub use scopes::{ScopeError, Scopes, MAX_SCOPES};
