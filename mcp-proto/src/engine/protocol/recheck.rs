//! Re-resolving a held stream's caller before a delivery to it
//! ([`RegistryMut::set_recheck`](crate::engine::RegistryMut::set_recheck)).
//!
//! A stream outlives the request that resolved its caller. When the application supplies a
//! re-check, the engine asks it for the caller's current form before it delivers to the stream,
//! and decides the gates against that; without one nothing here runs.

use std::sync::Arc;

use crate::caller::Caller;
use crate::engine::state::streams::Transport;
use crate::engine::state::subscriptions::List;
use crate::engine::{CloseReason, ConnId, Engine};
use crate::slab::Key;

impl<H: Clone> Engine<H> {
    /// Whether the application supplied a re-check: every path here is skipped without one.
    pub(in crate::engine) fn rechecks(&self) -> bool {
        self.registry.recheck.is_some()
    }

    /// The held stream what `conn` is owed goes to, whose caller a re-check is about: a legacy
    /// session's `GET` stream, or a connection's own `subscriptions/listen` stream. `None` for
    /// everything else (a line connection, a session with no stream open, a plain exchange).
    pub(in crate::engine) fn held_stream(&self, conn: ConnId) -> Option<ConnId> {
        let c = self.conns.get(conn.0)?;
        match &c.transport {
            Transport::Session(s) => s.get(),
            Transport::Exchange(_) if !c.listens.is_empty() => Some(conn),
            _ => None,
        }
    }

    /// Whether a change of `list` would be delivered to `key` at all: its session was offered
    /// the list's notifications, or one of its listen streams asked for them.
    pub(in crate::engine) fn wants_list(&self, key: Key, list: List) -> bool {
        let Some(c) = self.conns.get(key) else { return false };
        let offered = c
            .session
            .as_ref()
            .is_some_and(|s| s.initialized && s.lists.get(list.index()).copied().unwrap_or(false));
        offered || c.listens.iter().any(|l| l.filter.wants(list))
    }

    /// The current caller of the held stream `stream`, as the application's re-check says, asked
    /// at most once per input; `None` once the stream is closed. A caller that is gone, or that
    /// the re-check binds to someone else (a stream is its creator's), closes the stream
    /// ([`CloseReason::Revoked`]); otherwise the answer becomes the stream's stored caller.
    /// Without a re-check, the stored caller.
    pub(in crate::engine) fn rechecked(&mut self, stream: ConnId) -> Option<Arc<Caller>> {
        let input = self.inputs;
        let c = self.conns.get_mut(stream.0)?;
        let Some(recheck) = self.registry.recheck.as_ref() else { return Some(c.caller.clone()) };
        if c.rechecked == Some(input) {
            return Some(c.caller.clone());
        }
        match recheck.current(&c.caller) {
            Some(current) if current.binding() == c.caller.binding() => {
                if current != *c.caller {
                    c.caller = Arc::new(current);
                }
                c.rechecked = Some(input);
                Some(c.caller.clone())
            }
            _ => {
                self.turn_away(stream, CloseReason::Revoked);
                None
            }
        }
    }
}
