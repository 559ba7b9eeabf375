//! Authorization for the HTTP transport (feature `auth`): what `mcp_proto::auth` leaves to a
//! layer with crypto and I/O.
//!
//! So far: verifying the signature of a JWT access token or a DPoP proof with `ring`
//! ([`verify_jwt`], [`verifies`]), the key and algorithm chosen by `mcp_proto::auth` (from the
//! key, never from the token).

mod verify;

pub use verify::{verifies, verify_jwt};
