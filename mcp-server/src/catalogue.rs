//! One catalogue served by several servers ([`ServerBuilder::shared_catalogue`]): a run-time
//! registry edit made through any of them is applied to every one, all or none. Each server
//! keeps its own engine and lock, so the request path never touches the catalogue; only an edit
//! takes its lock, to walk its members.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use mcp_proto::{RegistryError, RegistryMut};

use crate::builder::{BuildError, ServerBuilder};
use crate::driver::State;
use crate::handler::Handler;
use crate::server::{Server, Shared};

/// The servers that share one catalogue: every server built from a builder after
/// [`ServerBuilder::shared_catalogue`] (and from its clones), reached from any of them with
/// [`Server::catalogue`]. Cheap to clone; each clone is the same catalogue.
///
/// A registry edit at run time ([`Server::add_tool`], [`Server::remove_tool`] and the other
/// `add_*` and `remove_*` methods) through any member is applied to every member that is still
/// alive, one engine after the other, each server's listening clients told as usual. An
/// addition is all or nothing: when one member refuses it (a name or URI that member's own
/// items already take, a URI over its [`Limits::max_uri_bytes`](mcp_proto::Limits::max_uri_bytes), say), the members that took it remove it again and the edit returns that
/// member's error. The members' engines are all held while an edit is applied, so no request
/// on any of them sees a change before every member has it, nor one that is then undone; a
/// listener of a member that took a refused addition may still be told to list again, and
/// finds its list as it was.
///
/// The catalogue holds its servers weakly: a server whose last handle is dropped leaves it,
/// and a catalogue keeps no server alive.
///
/// A server joins when it is built, with the builder's items. Once an edit has changed the
/// catalogue at run time those items are no longer its contents, so a later
/// [`build`](ServerBuilder::build) from the builder is refused with
/// [`BuildError::CatalogueChanged`]: build every server that shares a catalogue before
/// serving any of them.
#[derive(Clone)]
pub struct Catalogue {
    members: Arc<Mutex<Members>>,
}

#[derive(Default)]
struct Members {
    servers: Vec<Weak<Shared>>,
    /// Whether an edit changed the catalogue since its servers were built: joining is refused
    /// from then on.
    changed: bool,
}

impl Catalogue {
    fn new() -> Self {
        Catalogue { members: Arc::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Members> {
        // The list is consistent between statements: a panic elsewhere leaves it usable.
        self.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The servers sharing this catalogue that are still alive, in the order they were built.
    pub fn servers(&self) -> Vec<Server> {
        self.lock().live()
    }

    /// Adds `server` to the members, unless an edit has changed the catalogue already.
    pub(crate) fn join(&self, server: &Server) -> Result<(), BuildError> {
        let mut members = self.lock();
        if members.changed {
            return Err(BuildError::CatalogueChanged);
        }
        members.servers.retain(|s| s.strong_count() > 0);
        members.servers.push(Arc::downgrade(&server.shared));
        // Until the edit path sees the member, no edit reaches it: set inside the lock.
        let _ = server.shared.catalogue.set(self.clone());
        Ok(())
    }

    /// Applies `add` to every member, holding all their engines; when one refuses, `undo`
    /// takes it back from those that took it and that refusal is returned.
    fn add(
        &self,
        add: impl Fn(&mut RegistryMut<'_, Handler>) -> Result<(), RegistryError>,
        undo: impl Fn(&mut RegistryMut<'_, Handler>),
    ) -> Result<(), RegistryError> {
        let mut members = self.lock();
        let servers = members.live();
        let mut held: Vec<(&Server, MutexGuard<'_, State>)> = servers.iter().map(|s| (s, s.lock())).collect();
        let mut refused = None;
        let mut took = 0;
        for (server, st) in &mut held {
            let now = server.now();
            match add(&mut st.engine.registry_mut(now)) {
                Ok(()) => took += 1,
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        if refused.is_some() {
            for (server, st) in held.iter_mut().take(took) {
                // The engine takes no input before the output of the last is drained.
                server.pump(st);
                let now = server.now();
                undo(&mut st.engine.registry_mut(now));
            }
        } else {
            members.changed = true;
        }
        for (server, st) in held {
            server.release(st);
        }
        refused.map_or(Ok(()), Err)
    }

    /// Applies `remove` to every member; whether any of them held the item.
    fn remove(&self, remove: impl Fn(&mut RegistryMut<'_, Handler>) -> bool) -> bool {
        let mut members = self.lock();
        let servers = members.live();
        let mut held: Vec<(&Server, MutexGuard<'_, State>)> = servers.iter().map(|s| (s, s.lock())).collect();
        let mut removed = false;
        for (server, st) in &mut held {
            let now = server.now();
            removed |= remove(&mut st.engine.registry_mut(now));
        }
        members.changed |= removed;
        for (server, st) in held {
            server.release(st);
        }
        removed
    }
}

impl Members {
    /// The members still alive; forgets the others.
    fn live(&mut self) -> Vec<Server> {
        let mut live = Vec::with_capacity(self.servers.len());
        self.servers.retain(|s| match s.upgrade() {
            Some(shared) => {
                live.push(Server { shared });
                true
            }
            None => false,
        });
        live
    }
}

impl ServerBuilder {
    /// Makes every server built from this builder, and from the clones made of it from now on,
    /// share one [`Catalogue`]: a tool, resource, prompt, app or skill added or removed at run
    /// time through any of them is added to or removed from all, all or none (see
    /// [`Catalogue`]). The way to serve one catalogue in several publication modes
    /// (`builder.clone().mode(Mode::Compact).build()` beside `builder.build()`) without the
    /// modes drifting apart.
    ///
    /// Off by default: clones of a builder then copy its definitions and share its handlers,
    /// but each server owns its registry, and an edit changes the server it is made on only.
    /// Sharing is asked for, not implied by cloning, since a clone is also how one builds
    /// servers meant to differ. Calling this again starts a new catalogue for the servers built
    /// from then on; clones made before keep the one they had.
    ///
    /// A server joins its catalogue when built; once a run-time edit has changed the
    /// catalogue, a build from the builder fails with [`BuildError::CatalogueChanged`] rather
    /// than serve the builder's stale items beside the members' current ones.
    ///
    /// ```
    /// # use mcp_server::Server;
    /// use mcp_proto::{Mode, Tool};
    /// let builder = Server::builder("demo", "1.0.0").shared_catalogue();
    /// let compact = builder.clone().mode(Mode::Compact).build().unwrap();
    /// let direct = builder.clone().build().unwrap();
    /// let tool = Tool::new("shout", "Upper-cases text", serde_json::json!({"type": "object"}));
    /// compact.add_tool(tool, |_| async { "HI" }).unwrap();
    /// assert_eq!(direct.introspect().tools.len(), 1);
    /// assert!(direct.remove_tool("shout"));
    /// assert!(compact.introspect().tools.is_empty());
    /// assert!(builder.build().is_err(), "the catalogue changed since it was built");
    /// ```
    pub fn shared_catalogue(mut self) -> Self {
        self.catalogue = Some(Catalogue::new());
        self
    }
}

impl Server {
    /// The catalogue this server shares with others ([`ServerBuilder::shared_catalogue`]), if
    /// it was built to share one.
    pub fn catalogue(&self) -> Option<Catalogue> {
        self.shared.catalogue.get().cloned()
    }

    /// Applies a registry addition to this server, or to every member of its catalogue (all
    /// or none: `undo` takes it back from members that took it when another refuses it).
    pub(crate) fn add_item(
        &self,
        add: impl Fn(&mut RegistryMut<'_, Handler>) -> Result<(), RegistryError>,
        undo: impl Fn(&mut RegistryMut<'_, Handler>),
    ) -> Result<(), RegistryError> {
        match self.shared.catalogue.get() {
            Some(catalogue) => catalogue.add(add, undo),
            None => self.registry(|r| add(r)),
        }
    }

    /// Applies a registry removal to this server, or to every member of its catalogue;
    /// whether any held the item.
    pub(crate) fn remove_item(&self, remove: impl Fn(&mut RegistryMut<'_, Handler>) -> bool) -> bool {
        match self.shared.catalogue.get() {
            Some(catalogue) => catalogue.remove(remove),
            None => self.registry(|r| remove(r)),
        }
    }
}

#[cfg(test)]
mod tests {
    use mcp_proto::{Mode, Tool};
    use serde_json::json;

    use super::*;

    fn tool(name: &str) -> Tool {
        Tool::new(name, "T", json!({"type": "object"}))
    }

    #[test]
    fn a_dropped_server_leaves_its_catalogue() {
        let builder = Server::builder("t", "1").shared_catalogue();
        let kept = builder.clone().build().unwrap();
        let dropped = builder.clone().mode(Mode::Compact).build().unwrap();
        let Some(catalogue) = kept.catalogue() else { panic!("built to share a catalogue") };
        assert_eq!(catalogue.servers().len(), 2);
        let weak = Arc::downgrade(&dropped.shared);
        drop(dropped);
        assert!(weak.upgrade().is_none(), "the catalogue keeps no server alive");
        assert_eq!(catalogue.servers().len(), 1);
        assert_eq!(catalogue.lock().servers.len(), 1, "the dead member is forgotten, not kept");
        kept.add_tool(tool("late"), |_| async { "ok" }).unwrap();
        assert_eq!(kept.introspect().tools.len(), 1);
    }

    #[test]
    fn servers_that_do_not_opt_in_keep_their_own_registries() {
        let builder = Server::builder("t", "1");
        let a = builder.clone().build().unwrap();
        let b = builder.build().unwrap();
        assert!(a.catalogue().is_none());
        a.add_tool(tool("only_a"), |_| async { "ok" }).unwrap();
        assert!(b.introspect().tools.is_empty());
        assert!(!b.remove_tool("only_a"));
    }

    #[test]
    fn a_refused_addition_is_kept_by_no_member_and_a_build_after_a_change_is_refused() {
        let builder = Server::builder("t", "1").shared_catalogue();
        let direct = builder.clone().build().unwrap();
        // Built after the direct server, so the direct one takes the addition first and must
        // give it back when this one refuses it.
        let compact =
            builder.clone().mode(Mode::Compact).tool(tool("taken"), |_| async { "ok" }).build().unwrap();
        assert!(matches!(
            direct.add_tool(tool("taken"), |_| async { "ok" }),
            Err(RegistryError::Duplicate(name)) if name == "taken"
        ));
        assert!(direct.introspect().tools.is_empty(), "the direct server gave the refused tool back");
        assert_eq!(compact.introspect().tools.len(), 1);
        // A refused edit changed nothing: joining is still open.
        let third = builder.clone().build().unwrap();
        third.add_tool(tool("one"), |_| async { "ok" }).unwrap();
        assert!(matches!(builder.build(), Err(BuildError::CatalogueChanged)));
        assert_eq!(direct.introspect().tools.len(), 1);
        assert_eq!(compact.introspect().tools.len(), 2);
    }
}
