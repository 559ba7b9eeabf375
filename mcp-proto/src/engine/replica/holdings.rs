//! What this engine holds that another replica cannot serve: legacy HTTP sessions and running
//! tasks, reported as output so that a cluster's directory can route requests for them here.
//!
//! A legacy session (its SSE streams, its calls in flight, its pending asks) and a running task
//! (its handler, the input it waits for) live where they began and cannot be moved or shared.
//! A replica that receives a request for one forwards it to the replica holding it; for that,
//! each replica tells the cluster what it holds. The engine does no I/O, so this is a queue at
//! its edge, like [`Output::Change`](crate::engine::Output::Change): while [`Engine::set_reporting_holdings`] is on, a
//! session minted by `initialize` or a task begun is queued as held, and a session that ends
//! or a task that ends as no longer held, for [`Output::Holding`](crate::engine::Output::Holding). A task ends (held no
//! more) when it reaches a terminal status, after its record was queued for
//! [`Output::TaskEnded`](crate::engine::Output::TaskEnded): from then on the task store answers for it anywhere.
//!
//! [`Engine::holds`] answers whether a request for an id can be served here, which is what a
//! shim asks before it looks the id up in the directory.

use crate::engine::state::messages::{HeldKind, Holding};
use crate::engine::state::outputs::Bounded;
use crate::engine::{Engine, Output};

/// Holdings queued for [`Output::Holding`](crate::engine::Output::Holding) at most: 4096. A shim that drains after every
/// input, as the server layer does, never comes near it (one input begins or ends a few).
/// Past it the newest is dropped and counted ([`Engine::dropped_holdings`]): a dropped "held"
/// leaves the session or task reachable on this replica only, a dropped "no longer held"
/// leaves a directory entry that other replicas find stale when they forward to it.
pub const MAX_PENDING_HOLDINGS: usize = 4096;

/// Whether holdings are reported ([`Engine::set_reporting_holdings`]).
#[derive(Debug, Default)]
pub(in crate::engine) struct Holdings {
    on: bool,
}

impl<H: Clone> Engine<H> {
    /// Whether sessions and running tasks are reported to [`Output::Holding`](crate::engine::Output::Holding),
    /// for a shim whose cluster routes requests to the replica holding them. Default off:
    /// nothing is queued. Turning it off drops what is queued.
    pub fn set_reporting_holdings(&mut self, on: bool) {
        self.holdings.on = on;
        if !on {
            self.out.clear(Bounded::Holding);
        }
    }

    /// Holdings dropped because [`MAX_PENDING_HOLDINGS`] were already waiting.
    pub fn dropped_holdings(&self) -> u64 {
        self.out.dropped(Bounded::Holding)
    }

    /// Whether this engine holds the session `id` (alive) or the task `id` (running or ended,
    /// until it is forgotten), whoever the caller: a request for it is served here, and the
    /// engine checks whose it is.
    pub fn holds(&self, kind: HeldKind, id: &str) -> bool {
        match kind {
            HeldKind::Session => self.sessions.get(id).is_some(),
            HeldKind::Task => self.holds_task(id),
        }
    }

    /// Queues a holding, while reporting is on.
    pub(in crate::engine) fn report_holding(&mut self, kind: HeldKind, id: &str, held: bool) {
        if self.holdings.on {
            self.out.push_bounded(
                Output::Holding(Holding { kind, id: id.to_owned(), held }),
                MAX_PENDING_HOLDINGS,
            );
        }
    }
}
