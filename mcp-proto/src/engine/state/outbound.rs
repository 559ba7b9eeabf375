//! Server→client requests awaiting the client's response (legacy sessions): their ids, and the
//! ask slot each one answers.

use std::collections::HashMap;

use crate::engine::state::ids::{CallId, ConnId};

/// The requests in flight towards clients.
#[derive(Debug)]
pub(in crate::engine) struct Outbound {
    /// (connection that owns the call, request id) → (call, slot in its ask).
    waiting: HashMap<(ConnId, u64), (CallId, usize)>,
    /// The id of the next request: unique over the engine, so a late response to a forgotten
    /// request can never answer a newer one.
    next: u64,
}

impl Default for Outbound {
    fn default() -> Self {
        Self { waiting: HashMap::new(), next: 1 }
    }
}

impl Outbound {
    /// A new request, sent through `owner`, whose answer fills `slot` of `call`'s ask: its id.
    pub(in crate::engine) fn issue(&mut self, owner: ConnId, call: CallId, slot: usize) -> u64 {
        let id = self.next;
        self.next += 1;
        self.waiting.insert((owner, id), (call, slot));
        id
    }

    /// The call and slot a response of `owner` with this id answers, which is then no longer
    /// awaited.
    pub(in crate::engine) fn answered(&mut self, owner: ConnId, id: u64) -> Option<(CallId, usize)> {
        self.waiting.remove(&(owner, id))
    }

    /// Stops waiting for these requests of `owner`: late responses are then ignored.
    pub(in crate::engine) fn forget(&mut self, owner: ConnId, ids: impl IntoIterator<Item = u64>) {
        for id in ids {
            self.waiting.remove(&(owner, id));
        }
    }

    /// Stops waiting for every request sent through `owner`, which is gone: nothing can answer
    /// them any more, and keeping them would leak one entry per unanswered ask.
    pub(in crate::engine) fn forget_owner(&mut self, owner: ConnId) {
        self.waiting.retain(|(o, _), _| *o != owner);
    }

    /// Requests still awaited, over every connection.
    #[cfg(test)]
    pub(in crate::engine) fn len(&self) -> usize {
        self.waiting.len()
    }
}
