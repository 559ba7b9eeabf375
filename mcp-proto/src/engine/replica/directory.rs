//! What this engine holds that another replica cannot serve: legacy HTTP sessions and running
//! tasks, reported as output so that a cluster's directory can route requests for them here.
//!
//! A legacy session (its SSE streams, its calls in flight, its pending asks) and a running task
//! (its handler, the input it waits for) live where they began and cannot be moved or shared.
//! A replica that receives a request for one forwards it to the replica holding it; for that,
//! each replica tells the cluster what it holds. The engine does no I/O, so this is a queue at
//! its edge, like [`Engine::poll_change`]: while [`Engine::set_reporting_holdings`] is on, a
//! session minted by `initialize` or a task begun is queued as held, and a session that ends
//! or a task that ends as no longer held, for [`Engine::poll_holding`]. A task ends (held no
//! more) when it reaches a terminal status, after its record was queued for
//! [`Engine::poll_ended_task`]: from then on the task store answers for it anywhere.
//!
//! [`Engine::holds`] answers whether a request for an id can be served here, which is what a
//! shim asks before it looks the id up in the directory.

use crate::engine::state::capped::Capped;
use crate::engine::Engine;

/// What a [`Holding`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeldKind {
    /// A legacy (pre-2026) Streamable HTTP session, by its `Mcp-Session-Id`.
    Session,
    /// A task of the Tasks extension while it runs, by its task id.
    Task,
}

impl HeldKind {
    /// A stable name (`session`, `task`), for a wire format or a storage key.
    pub fn as_str(self) -> &'static str {
        match self {
            HeldKind::Session => "session",
            HeldKind::Task => "task",
        }
    }

    /// The kind named `name` by [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "session" => Some(HeldKind::Session),
            "task" => Some(HeldKind::Task),
            _ => None,
        }
    }
}

/// This engine began or stopped holding a session or a running task
/// ([`Engine::poll_holding`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Holding {
    /// A session or a task.
    pub kind: HeldKind,
    /// Its `Mcp-Session-Id` or task id.
    pub id: String,
    /// Whether it is held from now on (`true`) or no longer (`false`).
    pub held: bool,
}

/// Holdings queued for [`Engine::poll_holding`] at most: 4096. A shim that drains after every
/// input, as the server layer does, never comes near it (one input begins or ends a few).
/// Past it the newest is dropped and counted ([`Engine::dropped_holdings`]): a dropped "held"
/// leaves the session or task reachable on this replica only, a dropped "no longer held"
/// leaves a directory entry that other replicas find stale when they forward to it.
pub const MAX_PENDING_HOLDINGS: usize = 4096;

/// The holdings awaiting [`Engine::poll_holding`], while reporting is on.
#[derive(Debug)]
pub(in crate::engine) struct Holdings {
    on: bool,
    queue: Capped<Holding>,
}

impl Default for Holdings {
    fn default() -> Self {
        Self { on: false, queue: Capped::new(MAX_PENDING_HOLDINGS) }
    }
}

impl<H: Clone> Engine<H> {
    /// Whether sessions and running tasks are reported to [`poll_holding`](Self::poll_holding),
    /// for a shim whose cluster routes requests to the replica holding them. Default off:
    /// nothing is queued. Turning it off drops what is queued.
    pub fn set_reporting_holdings(&mut self, on: bool) {
        self.holdings.on = on;
        if !on {
            self.holdings.queue.clear();
        }
    }

    /// The next session or task this engine began or stopped holding, oldest first (see the
    /// module docs and [`MAX_PENDING_HOLDINGS`]). Drain it after every input, as
    /// [`poll_output`](Self::poll_output).
    pub fn poll_holding(&mut self) -> Option<Holding> {
        self.holdings.queue.pop()
    }

    /// Holdings dropped because [`MAX_PENDING_HOLDINGS`] were already waiting.
    pub fn dropped_holdings(&self) -> u64 {
        self.holdings.queue.dropped()
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
            self.holdings.queue.push(Holding { kind, id: id.to_owned(), held });
        }
    }
}
