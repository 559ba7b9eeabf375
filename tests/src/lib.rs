//! Workspace-level tests of the MCP engine: replay transcripts against a bare
//! [`mcp_proto::Engine`], and validation of every emitted frame against the official wire
//! schemas.
//!
//! - [`replay`]: the transcript format and its runner (transcripts live in `tests/transcripts/`);
//! - [`tools`]: the fixed test tools and their automatic behaviours;
//! - [`wire`]: JSON Schema validation of frames, per protocol version.

pub mod replay;
pub mod tools;
pub mod wire;
