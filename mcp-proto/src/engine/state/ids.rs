//! The engine's handles: a connection ([`ConnId`]) and a call in flight ([`CallId`]).

use crate::slab::Key;

/// A connection: a stdio session, an HTTP exchange or an SSE stream. Generational, so a handle
/// to a closed connection never reaches a newer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub(in crate::engine) Key);

/// Short forms for logs: `c3.1` is slot 3 in its first reuse; the generation keeps a reused slot
/// apart from the connection that held it before.
impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{}.{}", self.0.idx, self.0.gen)
    }
}

/// One call in flight: the copyable id progress, cancellation and input requests travel by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId(pub(in crate::engine) Key);

/// Short form for logs, as [`ConnId`]'s: `k12.0`.
impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "k{}.{}", self.0.idx, self.0.gen)
    }
}
