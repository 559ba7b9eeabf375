//! Workspace-level tests of the MCP engine: replay transcripts against a bare
//! [`mcp_proto::Engine`], and validation of every emitted frame against the official wire
//! schemas.
//!
//! - [`replay`]: the transcript format and its runner (transcripts live in `tests/transcripts/`);
//! - [`tools`]: the fixed test tools and their automatic behaviours;
//! - [`wire`]: JSON Schema validation of frames, per protocol version (from `mcp-testkit`);
//! - [`stdio_server`]: the test tools served by a real server, for the `stdio-tokio` and
//!   `stdio-smol` binaries;
//! - [`pipe`]: drives those binaries over real stdio pipes (transcripts and shim behaviour tests);
//! - [`http`]: serves the same tools over real loopback HTTP on either runtime, and a small
//!   HTTP/1.1 client that can also misbehave;
//! - [`examples`]: where the demo servers' binaries are, for tests that run them.

pub mod examples;
pub mod http;
pub mod pipe;
pub mod replay;
pub mod skills;
pub mod stdio_server;
pub mod tools;
pub use mcp_testkit::wire;
