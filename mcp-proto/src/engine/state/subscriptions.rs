//! What connections are owed notifications of, and who subscribes to what: the state behind
//! change notifications and resource subscriptions (legacy and `subscriptions/listen`).
//!
//! Pending notifications are flags and a URI set per connection, not queues: a burst of
//! registrations costs nothing until the shim drains, and then becomes one notification per
//! connection and list. [`Notifications`] is the only writer of [`Pending`], so it knows when
//! some connection is owed something and a drain must generate notifications.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value};

/// The three lists that change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum List {
    Tools,
    Resources,
    Prompts,
}

impl List {
    pub(in crate::engine) const ALL: [List; 3] = [List::Tools, List::Resources, List::Prompts];

    pub(in crate::engine) fn method(self) -> &'static str {
        match self {
            List::Tools => "notifications/tools/list_changed",
            List::Resources => "notifications/resources/list_changed",
            List::Prompts => "notifications/prompts/list_changed",
        }
    }

    pub(in crate::engine) fn index(self) -> usize {
        self as usize
    }
}

/// A `SubscriptionFilter`, as honoured.
#[derive(Debug, Clone, Default)]
pub(in crate::engine) struct Filter {
    lists: [bool; 3],
    /// Resources whose updates it follows, in order (echoed back in that order).
    pub(in crate::engine) uris: BTreeSet<String>,
    /// Tasks (Tasks extension) whose status changes it follows, in order.
    pub(in crate::engine) tasks: BTreeSet<String>,
}

impl Filter {
    /// A filter for these lists (by [`List::index`]) and no resources yet.
    pub(in crate::engine) fn new(lists: [bool; 3]) -> Self {
        Self { lists, uris: BTreeSet::new(), tasks: BTreeSet::new() }
    }

    /// The lists it follows, by [`List::index`].
    pub(in crate::engine) fn lists(&self) -> [bool; 3] {
        self.lists
    }

    /// Follows `list`.
    pub(in crate::engine) fn wants(&self, list: List) -> bool {
        self.lists.get(list.index()).copied().unwrap_or(false)
    }
}

/// Notifications owed to one connection. Only [`Notifications`] adds to it, so that the engine
/// knows some connection is owed something.
#[derive(Debug, Default)]
pub(in crate::engine) struct Pending {
    lists: [bool; 3],
    updated: BTreeSet<String>,
    /// Tasks owed a `notifications/tasks`, by id, with the task as it was last changed: a
    /// burst of changes between two drains is one notification of the latest status.
    tasks: BTreeMap<String, Map<String, Value>>,
}

impl Pending {
    pub(in crate::engine) fn is_empty(&self) -> bool {
        !self.lists.iter().any(|b| *b) && self.updated.is_empty() && self.tasks.is_empty()
    }

    /// Tasks owed a status notification, in id order, with what it says.
    pub(in crate::engine) fn tasks(&self) -> impl Iterator<Item = (&String, &Map<String, Value>)> {
        self.tasks.iter()
    }

    /// Owed a `list_changed` for `list`.
    pub(in crate::engine) fn has(&self, list: List) -> bool {
        self.lists.get(list.index()).copied().unwrap_or(false)
    }

    /// Resources owed a `resources/updated`, in order.
    pub(in crate::engine) fn updated(&self) -> impl Iterator<Item = &String> {
        self.updated.iter()
    }
}

/// Legacy `resources/subscribe` state: refcounts per caller and URI, with global bounds.
#[derive(Debug, Default)]
pub(in crate::engine) struct Subscriptions {
    pairs: HashMap<(String, String), u32>,
    /// Callers subscribed, per URI.
    uris: HashMap<String, usize>,
    /// Open connections, per caller: a caller's subscriptions go when its last connection does.
    conns: HashMap<String, usize>,
}

impl Subscriptions {
    pub(in crate::engine) fn conn_opened(&mut self, binding: &str) {
        *self.conns.entry(binding.to_owned()).or_default() += 1;
    }

    pub(in crate::engine) fn conn_closed(&mut self, binding: &str) {
        let Some(n) = self.conns.get_mut(binding) else { return };
        *n -= 1;
        if *n > 0 {
            return;
        }
        self.conns.remove(binding);
        let uris = &mut self.uris;
        self.pairs.retain(|(b, uri), _| {
            if b != binding {
                return true;
            }
            release(uris, uri);
            false
        });
    }

    fn subscribe(
        &mut self,
        binding: &str,
        uri: &str,
        max_uris: usize,
        max_pairs: usize,
    ) -> Result<(), String> {
        let key = (binding.to_owned(), uri.to_owned());
        if let Some(n) = self.pairs.get_mut(&key) {
            // Re-subscribing to what the caller holds always works.
            *n = n.saturating_add(1);
            return Ok(());
        }
        if self.pairs.len() >= max_pairs {
            return Err(format!("subscription limit reached ({max_pairs} caller/URI pairs)"));
        }
        if !self.uris.contains_key(uri) && self.uris.len() >= max_uris {
            return Err(format!("subscription limit reached ({max_uris} distinct URIs)"));
        }
        self.pairs.insert(key, 1);
        *self.uris.entry(uri.to_owned()).or_default() += 1;
        Ok(())
    }

    fn unsubscribe(&mut self, binding: &str, uri: &str) {
        let key = (binding.to_owned(), uri.to_owned());
        let Some(n) = self.pairs.get_mut(&key) else { return };
        *n -= 1;
        if *n > 0 {
            return;
        }
        self.pairs.remove(&key);
        release(&mut self.uris, uri);
    }

    fn holds(&self, binding: &str, uri: &str) -> bool {
        // Avoids allocating a key on the notification path when nobody subscribes to `uri`.
        self.uris.contains_key(uri) && self.pairs.contains_key(&(binding.to_owned(), uri.to_owned()))
    }
}

/// One caller fewer subscribes to `uri`: the last one takes it out of the count, so that
/// `uris` holds only URIs someone subscribes to (the distinct-URI bound counts its length).
fn release(uris: &mut HashMap<String, usize>, uri: &str) {
    if let Some(c) = uris.get_mut(uri) {
        *c -= 1;
        if *c == 0 {
            uris.remove(uri);
        }
    }
}

/// Subscriptions, and whether some connection is owed a notification.
#[derive(Debug, Default)]
pub(in crate::engine) struct Notifications {
    /// Legacy resource subscriptions.
    subs: Subscriptions,
    /// Some connection's [`Pending`] is not empty.
    dirty: bool,
}

impl Notifications {
    /// Some connection is owed a notification: the next drain generates them.
    pub(in crate::engine) fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Notifications are about to be generated from every connection's [`Pending`].
    pub(in crate::engine) fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Notifications held back for a full queue may go out now: the next drain looks again.
    pub(in crate::engine) fn wake(&mut self) {
        self.dirty = true;
    }

    /// `pending` is owed a `list_changed` for `list`.
    pub(in crate::engine) fn owe_list(&mut self, pending: &mut Pending, list: List) {
        if let Some(flag) = pending.lists.get_mut(list.index()) {
            *flag = true;
        }
        self.dirty = true;
    }

    /// `pending` is owed a `resources/updated` for `uri`, unless it already holds `max` URIs.
    pub(in crate::engine) fn owe_update(&mut self, pending: &mut Pending, uri: &str, max: usize) {
        if pending.updated.len() < max {
            pending.updated.insert(uri.to_owned());
            self.dirty = true;
        }
    }

    /// `pending` is owed a `notifications/tasks` saying `task` of task `id` (replacing what an
    /// earlier change of it owed), unless it already owes `max` other tasks.
    pub(in crate::engine) fn owe_task(
        &mut self,
        pending: &mut Pending,
        id: &str,
        task: Map<String, Value>,
        max: usize,
    ) {
        if pending.tasks.len() < max || pending.tasks.contains_key(id) {
            pending.tasks.insert(id.to_owned(), task);
            self.dirty = true;
        }
    }

    /// A stream opened for `pending`'s connection, which may have missed every list in `lost`
    /// (by [`List::index`]): those are owed, and whatever was kept for the stream goes out.
    pub(in crate::engine) fn stream_opened(&mut self, pending: &mut Pending, lost: [bool; 3]) {
        for (flag, on) in pending.lists.iter_mut().zip(lost) {
            *flag |= on;
        }
        if !pending.is_empty() {
            self.dirty = true;
        }
    }

    pub(in crate::engine) fn conn_opened(&mut self, binding: &str) {
        self.subs.conn_opened(binding);
    }

    pub(in crate::engine) fn conn_closed(&mut self, binding: &str) {
        self.subs.conn_closed(binding);
    }

    /// Connections `binding` holds open.
    pub(in crate::engine) fn conns_of(&self, binding: &str) -> usize {
        self.subs.conns.get(binding).copied().unwrap_or(0)
    }

    /// Callers holding connections, counting `binding` whether or not it holds any: the divisor
    /// of its fair share of the connection table.
    pub(in crate::engine) fn conn_holders_with(&self, binding: &str) -> usize {
        self.subs.conns.len() + usize::from(!self.subs.conns.contains_key(binding))
    }

    /// Subscribes `binding` to `uri`, within `max_uris` distinct URIs and `max_pairs`
    /// caller/URI pairs server-wide; the error says which bound refused it.
    pub(in crate::engine) fn subscribe(
        &mut self,
        binding: &str,
        uri: &str,
        max_uris: usize,
        max_pairs: usize,
    ) -> Result<(), String> {
        self.subs.subscribe(binding, uri, max_uris, max_pairs)
    }

    pub(in crate::engine) fn unsubscribe(&mut self, binding: &str, uri: &str) {
        self.subs.unsubscribe(binding, uri);
    }

    /// Whether `binding` subscribes to `uri`.
    pub(in crate::engine) fn holds(&self, binding: &str, uri: &str) -> bool {
        self.subs.holds(binding, uri)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_bounds() {
        let mut s = Subscriptions::default();
        s.conn_opened("a");
        assert!(s.subscribe("a", "u1", 1, 10).is_ok());
        assert!(s.subscribe("a", "u2", 1, 10).is_err());
        assert!(s.subscribe("a", "u1", 1, 10).is_ok());
        s.unsubscribe("a", "u1");
        assert!(s.holds("a", "u1"));
        s.unsubscribe("a", "u1");
        assert!(!s.holds("a", "u1"));
        assert!(s.subscribe("a", "u2", 1, 10).is_ok());
        s.conn_closed("a");
        assert!(!s.holds("a", "u2"));
        assert!(s.uris.is_empty());
    }

    #[test]
    fn only_owing_makes_a_drain_generate() {
        let mut n = Notifications::default();
        let mut p = Pending::default();
        n.stream_opened(&mut p, [false; 3]);
        assert!(!n.is_dirty());
        n.owe_update(&mut p, "u", 0);
        assert!(!n.is_dirty() && p.is_empty());
        n.owe_list(&mut p, List::Prompts);
        assert!(n.take_dirty() && !n.is_dirty());
        assert!(p.has(List::Prompts) && !p.has(List::Tools));
        n.stream_opened(&mut p, [false; 3]);
        assert!(n.is_dirty(), "what was kept for the stream goes out");
    }
}
