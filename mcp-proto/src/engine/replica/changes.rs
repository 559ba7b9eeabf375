//! Changes shared between replicas: what the engine gives a cluster to publish, and what it
//! takes from one.
//!
//! The engine does no I/O, so a cluster is two queues at its edge. A local change (a registry
//! edit, [`Engine::notify_resource_updated`]) is an output: while
//! [`Engine::set_publishing`] is on it is queued for [`Output::Change`](crate::engine::Output::Change), and the shim
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
use crate::engine::state::messages::{Change, ChangedList};
use crate::engine::state::outputs::Bounded;
use crate::engine::state::subscriptions::List;
use crate::engine::{Engine, Output};

/// Changes queued for [`Output::Change`](crate::engine::Output::Change) at most: 1024. Changes coalesce (a change equal
/// to one still queued is not queued again), so only that many distinct resource URIs
/// updated between two drains reach it; past it the newest change is dropped and counted in
/// [`EngineStatus::dropped_changes`](crate::engine::EngineStatus::dropped_changes). A shim that
/// drains after every input, as the server layer does, never comes near it.
pub const MAX_PENDING_CHANGES: usize = 1024;

/// Whether local changes are published ([`Engine::set_publishing`]).
#[derive(Debug, Default)]
pub(in crate::engine) struct Outbox {
    on: bool,
}

impl<H: Clone> Engine<H> {
    /// Whether local changes are queued for [`Output::Change`](crate::engine::Output::Change), for a shim
    /// that shares them with other replicas. Default off: nothing is queued. Turning it off
    /// drops what is queued.
    pub fn set_publishing(&mut self, on: bool) {
        self.outbox.on = on;
        if !on {
            self.out.clear(Bounded::Change);
        }
    }

    /// Queues `change` for the other replicas ([`Output::Change`]) while publishing is on,
    /// unless an equal one waits already.
    fn publish(&mut self, change: Change) {
        let waiting = self.out.iter().any(|o| matches!(o, Output::Change(c) if *c == change));
        if self.outbox.on && !waiting {
            self.out.push_bounded(Output::Change(change), MAX_PENDING_CHANGES);
        }
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

    /// Tells every listener the server-wide gate admits that `list` changed, and publishes
    /// the change to the other replicas (while publishing is on), when nothing in the registry
    /// changed but what a gate answers did: a role granted or revoked, a tenant's plan
    /// changed. Clients then list again and see what the gates now let them.
    ///
    /// Every listener is told, whatever its item gates: the engine cannot know whose view
    /// changed, and a list change carries nothing but its kind. Legacy sessions that declared
    /// nothing for the list are told only if the server offered `listChanged` for it (it does
    /// whenever it has such items), as for a registry edit.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn notify_list_changed(&mut self, now: Instant, list: ChangedList) {
        self.input(now);
        self.changed(list.list(), None);
    }

    /// Replaces the key ring that signs and verifies cursors and request states, as a shared
    /// ring rotates: what the old ring signed still verifies if the new ring holds its key.
    pub fn set_keys(&mut self, keys: KeyRing) {
        self.config.keys = keys;
    }

    /// A local list change: told here, and published unless the item is gated.
    pub(in crate::engine) fn changed(&mut self, list: List, gate: Option<&Gate>) {
        if gate.is_none() {
            self.publish(Change::ListChanged(ChangedList::of(list)));
        }
        self.tell_changed(list, gate);
    }

    /// A local resource update, to publish.
    pub(in crate::engine) fn publish_updated(&mut self, uri: &str) {
        self.publish(Change::ResourceUpdated(uri.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller::{Caller, Gate};
    use crate::engine::test_support::{drain, picked};
    use crate::engine::Config;
    use crate::engine::{ConnId, ConnKind, Implementation};
    use crate::registry::Tool;
    use serde_json::json;

    fn engine(now: Instant) -> Engine<u32> {
        Engine::new(Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32])), now)
    }

    /// A stdio connection with an initialized 2025-06-18 session, its output drained.
    fn session(e: &mut Engine<u32>, now: Instant) -> ConnId {
        session_of(e, now, "alice")
    }

    /// [`session`] of the caller `who`.
    fn session_of(e: &mut Engine<u32>, now: Instant, who: &str) -> ConnId {
        let conn = e.open(now, ConnKind::Stdio, Caller::identified(who)).unwrap();
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

    #[test]
    fn local_changes_are_queued_once_and_gated_ones_never() {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut e = engine(now);
        e.registry_mut(now).add_tool(Tool::new("quiet", "d", json!({"type": "object"})), 0).unwrap();
        let changes =
            |outs: &[Output<u32>]| picked(outs, |o| if let Output::Change(c) = o { Some(c) } else { None });
        assert_eq!(changes(&drain(&mut e)), [], "nothing is queued while publishing is off");
        e.set_publishing(true);
        e.registry_mut(now).add_tool(Tool::new("a", "d", json!({"type": "object"})), 0).unwrap();
        e.registry_mut(now).add_tool(Tool::new("b", "d", json!({"type": "object"})), 0).unwrap();
        let hidden = Tool::new("h", "d", json!({"type": "object"})).gate(Gate::role("admin"));
        e.registry_mut(now).add_tool(hidden, 0).unwrap();
        e.notify_resource_updated(now, "test://x");
        e.notify_resource_updated(now, "test://x");
        assert_eq!(
            changes(&drain(&mut e)),
            [Change::ListChanged(ChangedList::Tools), Change::ResourceUpdated("test://x".into())]
        );
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
        let outs = drain(&mut e);
        assert!(
            !outs.iter().any(|o| matches!(o, Output::Change(_))),
            "a remote change must not loop back to the bus"
        );
        let out: Vec<String> = outs
            .iter()
            .filter_map(|o| match o {
                Output::Frame { bytes, .. } => Some(String::from_utf8_lossy(bytes).into_owned()),
                _ => None,
            })
            .collect();
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].contains("notifications/tools/list_changed"), "{out:?}");
    }

    #[test]
    fn a_list_change_without_an_edit_is_told_to_those_the_server_gate_admits_and_published() {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut e = engine(now);
        let gate = Gate::new(|c: &Caller| c.identity.as_deref() != Some("mallory"));
        e.registry_mut(now).set_gate(Some(gate));
        e.registry_mut(now).add_tool(Tool::new("a", "d", json!({"type": "object"})), 0).unwrap();
        let _ = drain(&mut e);
        e.set_publishing(true);
        let alice = session(&mut e, now);
        let mallory = session_of(&mut e, now, "mallory");
        e.notify_list_changed(now, ChangedList::Tools);
        let outs = drain(&mut e);
        let told: Vec<(ConnId, String)> = outs
            .iter()
            .filter_map(|o| match o {
                Output::Frame { conn, bytes } => Some((*conn, String::from_utf8_lossy(bytes).into_owned())),
                _ => None,
            })
            .collect();
        assert_eq!(told.len(), 1, "{told:?}");
        assert_eq!(told[0].0, alice);
        assert!(told[0].1.contains("notifications/tools/list_changed"), "{told:?}");
        assert!(told.iter().all(|(c, _)| *c != mallory));
        let changes = picked(&outs, |o| if let Output::Change(c) = o { Some(c) } else { None });
        assert_eq!(changes, [Change::ListChanged(ChangedList::Tools)], "the other replicas are told too");
    }

    #[test]
    fn the_outbox_is_bounded() {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut e = engine(now);
        e.set_publishing(true);
        // A shim that never drains: past the bound the newest changes are dropped, counted.
        for i in 0..MAX_PENDING_CHANGES + 5 {
            e.notify_resource_updated(now, &format!("test://{i}"));
        }
        assert_eq!(e.status().dropped_changes, 5);
        let outs = drain(&mut e);
        assert_eq!(outs.iter().filter(|o| matches!(o, Output::Change(_))).count(), MAX_PENDING_CHANGES);
    }
}
