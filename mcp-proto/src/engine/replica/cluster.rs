//! Changes shared between replicas: what the engine gives a cluster to publish, and what it
//! takes from one.
//!
//! The engine does no I/O, so a cluster is two queues at its edge. A local change (a registry
//! edit, [`Engine::notify_resource_updated`]) is an output: while
//! [`Engine::set_publishing`] is on it is queued for [`Engine::poll_change`], and the shim
//! hands it to its bus. A change another replica made is an input,
//! [`Engine::apply_remote_change`]: the engine tells its own listeners (legacy sessions and
//! `subscriptions/listen` streams) as it tells them of a local change, and queues nothing to
//! publish, so a change never travels back.
//!
//! A change to an item behind a gate is not published: a gate is code in this process, and
//! another replica cannot tell whom it admits, so it would have to tell every caller (and
//! leak that a hidden item changed) or none. Such a change reaches this engine's listeners
//! only.

use std::time::Instant;

use crate::caller::Gate;
use crate::cursor::KeyRing;
use crate::engine::state::capped::Capped;
use crate::engine::state::subscriptions::List;
use crate::engine::Engine;

/// A list whose membership changed: which `notifications/*/list_changed` it raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangedList {
    /// `notifications/tools/list_changed`.
    Tools,
    /// `notifications/resources/list_changed` (resources and templates).
    Resources,
    /// `notifications/prompts/list_changed`.
    Prompts,
}

impl ChangedList {
    /// A stable name (`tools`, `resources`, `prompts`), for a wire format between replicas.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangedList::Tools => "tools",
            ChangedList::Resources => "resources",
            ChangedList::Prompts => "prompts",
        }
    }

    /// The list named `name` by [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "tools" => Some(ChangedList::Tools),
            "resources" => Some(ChangedList::Resources),
            "prompts" => Some(ChangedList::Prompts),
            _ => None,
        }
    }

    fn list(self) -> List {
        match self {
            ChangedList::Tools => List::Tools,
            ChangedList::Resources => List::Resources,
            ChangedList::Prompts => List::Prompts,
        }
    }

    fn of(list: List) -> Self {
        match list {
            List::Tools => ChangedList::Tools,
            List::Resources => ChangedList::Resources,
            List::Prompts => ChangedList::Prompts,
        }
    }
}

/// A change one replica tells the others of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Change {
    /// An ungated item was added to or removed from a list.
    ListChanged(ChangedList),
    /// The resource at this URI changed (`notifications/resources/updated`).
    ResourceUpdated(String),
}

/// Changes queued for [`Engine::poll_change`] at most: 1024. Changes coalesce (a change equal
/// to one still queued is not queued again), so only that many distinct resource URIs
/// updated between two drains reach it; past it the newest change is dropped and counted in
/// [`EngineStatus::dropped_changes`](crate::engine::EngineStatus::dropped_changes). A shim that
/// drains after every input, as the server layer does, never comes near it.
pub const MAX_PENDING_CHANGES: usize = 1024;

/// The changes awaiting [`Engine::poll_change`], while publishing is on.
#[derive(Debug)]
pub(in crate::engine) struct Outbox {
    on: bool,
    pub(in crate::engine) queue: Capped<Change>,
}

impl Default for Outbox {
    fn default() -> Self {
        Self { on: false, queue: Capped::new(MAX_PENDING_CHANGES) }
    }
}

impl Outbox {
    fn push(&mut self, change: Change) {
        if self.on && !self.queue.contains(&change) {
            self.queue.push(change);
        }
    }
}

impl<H: Clone> Engine<H> {
    /// Whether local changes are queued for [`poll_change`](Self::poll_change), for a shim
    /// that shares them with other replicas. Default off: nothing is queued. Turning it off
    /// drops what is queued.
    pub fn set_publishing(&mut self, on: bool) {
        self.outbox.on = on;
        if !on {
            self.outbox.queue.clear();
        }
    }

    /// The next local change to publish, oldest first (see the module docs and
    /// [`MAX_PENDING_CHANGES`]). Drain it after every input, as [`poll_output`](Self::poll_output).
    pub fn poll_change(&mut self) -> Option<Change> {
        self.outbox.queue.pop()
    }

    /// A change another replica published: this engine's listeners are told as of a local
    /// change (a list change to every connection the server-wide gate admits, a resource
    /// update to those subscribed to the URI that may still read it), and nothing is queued
    /// to publish.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn apply_remote_change(&mut self, now: Instant, change: &Change) {
        self.input(now);
        match change {
            Change::ListChanged(list) => self.tell_changed(list.list(), None),
            Change::ResourceUpdated(uri) => self.tell_resource_updated(uri),
        }
    }

    /// Replaces the key ring that signs and verifies cursors and request states, as a shared
    /// ring rotates: what the old ring signed still verifies if the new ring holds its key.
    pub fn set_keys(&mut self, keys: KeyRing) {
        self.config.keys = keys;
    }

    /// A local list change: told here, and published unless the item is gated.
    pub(in crate::engine) fn changed(&mut self, list: List, gate: Option<&Gate>) {
        if gate.is_none() {
            self.outbox.push(Change::ListChanged(ChangedList::of(list)));
        }
        self.tell_changed(list, gate);
    }

    /// A local resource update, to publish.
    pub(in crate::engine) fn publish_updated(&mut self, uri: &str) {
        self.outbox.push(Change::ResourceUpdated(uri.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller::{Caller, Gate};
    use crate::engine::{Config, Output};
    use crate::engine::{ConnId, ConnKind, Implementation};
    use crate::registry::Tool;
    use serde_json::json;

    fn engine(now: Instant) -> Engine<u32> {
        Engine::new(Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32])), now)
    }

    /// A stdio connection with an initialized 2025-06-18 session, its output drained.
    fn session(e: &mut Engine<u32>, now: Instant) -> ConnId {
        let conn = e.open(now, ConnKind::Stdio, Caller::identified("alice")).unwrap();
        for frame in [
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ] {
            e.handle_frame(now, conn, frame.to_string().as_bytes());
            while e.poll_output().is_some() {}
        }
        conn
    }

    fn frames(e: &mut Engine<u32>) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(o) = e.poll_output() {
            if let Output::Frame { bytes, .. } = o {
                out.push(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        out
    }

    #[test]
    fn local_changes_are_queued_once_and_gated_ones_never() {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut e = engine(now);
        e.registry_mut(now).add_tool(Tool::new("quiet", "d", json!({"type": "object"})), 0).unwrap();
        assert_eq!(e.poll_change(), None, "nothing is queued while publishing is off");
        e.set_publishing(true);
        e.registry_mut(now).add_tool(Tool::new("a", "d", json!({"type": "object"})), 0).unwrap();
        e.registry_mut(now).add_tool(Tool::new("b", "d", json!({"type": "object"})), 0).unwrap();
        let hidden = Tool::new("h", "d", json!({"type": "object"})).gate(Gate::role("admin"));
        e.registry_mut(now).add_tool(hidden, 0).unwrap();
        e.notify_resource_updated(now, "test://x");
        e.notify_resource_updated(now, "test://x");
        while e.poll_output().is_some() {}
        assert_eq!(e.poll_change(), Some(Change::ListChanged(ChangedList::Tools)));
        assert_eq!(e.poll_change(), Some(Change::ResourceUpdated("test://x".into())));
        assert_eq!(e.poll_change(), None);
    }

    #[test]
    fn a_remote_change_is_told_to_listeners_and_not_published_again() {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut e = engine(now);
        // A session is offered `tools.listChanged` only by a server that has tools.
        e.registry_mut(now).add_tool(Tool::new("a", "d", json!({"type": "object"})), 0).unwrap();
        e.set_publishing(true);
        session(&mut e, now);
        e.apply_remote_change(now, &Change::ListChanged(ChangedList::Tools));
        let out = frames(&mut e);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].contains("notifications/tools/list_changed"), "{out:?}");
        assert_eq!(e.poll_change(), None, "a remote change must not loop back to the bus");
    }

    #[test]
    fn the_outbox_is_bounded() {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut e = engine(now);
        e.set_publishing(true);
        for i in 0..MAX_PENDING_CHANGES + 5 {
            e.notify_resource_updated(now, &format!("test://{i}"));
            while e.poll_output().is_some() {}
        }
        assert_eq!(e.status().dropped_changes, 5);
        assert_eq!(std::iter::from_fn(|| e.poll_change()).count(), MAX_PENDING_CHANGES);
    }
}
