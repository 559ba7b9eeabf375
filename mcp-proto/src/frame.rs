//! Decoding a frame, apart from the engine.
//!
//! The strict parse of a frame (and every check it makes) needs nothing of the engine's state but
//! its [`Limits`], so a shim can run it on the connection's own task, before the frame reaches
//! whatever owns the engine: a huge or hostile frame then costs its sender, not every client
//! waiting for the engine. [`Engine::handle_frame`](crate::engine::Engine::handle_frame) is exactly
//! [`Decoded::new`] followed by [`Engine::handle_decoded`](crate::engine::Engine::handle_decoded).

use crate::json::{self, DecodeError, RawFrame};
use crate::limits::Limits;

/// A frame after the strict parse, ready for [`Engine::handle_decoded`](crate::engine::Engine::handle_decoded)
/// or [`Engine::handle_http_decoded`](crate::engine::Engine::handle_http_decoded). Owns everything it
/// needs, so it can be sent to another task or thread. A frame that did not decode is carried
/// too: the engine answers it with the right error for the connection it arrived on.
#[derive(Debug)]
pub struct Decoded {
    pub(crate) len: usize,
    /// `None`: over the frame limit, not parsed.
    pub(crate) frame: Option<Result<RawFrame, DecodeError>>,
}

impl Decoded {
    /// Parses `bytes` under `limits` (frame size and nesting depth). Linear in `bytes`; never
    /// panics. A frame over [`Limits::max_frame_bytes`] is not parsed at all.
    pub fn new(limits: &Limits, bytes: &[u8]) -> Self {
        let frame = (bytes.len() <= limits.max_frame_bytes).then(|| json::decode(bytes, limits.max_depth));
        Self { len: bytes.len(), frame }
    }

    /// The frame's length in bytes, as received.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the frame was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
