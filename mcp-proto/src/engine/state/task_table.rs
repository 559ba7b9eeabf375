//! The task table of the Tasks extension: every task held, running and ended, by serial and by
//! id, and what each caller holds (its count under [`Limits::max_tasks`] and its ended bytes
//! under [`Limits::max_ended_task_bytes`]), with the fair-share choices of whose task gives
//! way. The rules for making, ending and showing tasks are the extension's (`extensions/tasks.rs`).
//!
//! [`Limits::max_tasks`]: crate::limits::Limits::max_tasks
//! [`Limits::max_ended_task_bytes`]: crate::limits::Limits::max_ended_task_bytes

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use serde_json::{Map, Value};

use crate::engine::state::ids::CallId;
use crate::engine::state::io::TaskStatus;
use crate::interaction::InputRequest;

/// One request for input of a task, as the client sees it and as the handler asked it.
pub(in crate::engine) struct Pending {
    /// The `inputRequests` key: the handler's key, made unique within the task.
    pub(in crate::engine) wire: String,
    /// The key the handler asked under, which its answers come back under.
    pub(in crate::engine) key: String,
    pub(in crate::engine) request: InputRequest,
}

pub(in crate::engine) struct Task {
    pub(in crate::engine) id: String,
    pub(in crate::engine) owner: String,
    pub(in crate::engine) status: TaskStatus,
    pub(in crate::engine) created_ms: u64,
    pub(in crate::engine) updated_ms: u64,
    /// The call running it, until it ends.
    pub(in crate::engine) call: Option<CallId>,
    pub(in crate::engine) version: crate::version::ProtocolVersion,
    /// `("result", ..)` or `("error", ..)` once ended (cancelled: none).
    pub(in crate::engine) outcome: Option<(&'static str, Value)>,
    /// Bytes of its JSON view once ended and kept (see [`Engine::measure`]), which it counts
    /// for under [`crate::limits::Limits::max_ended_task_bytes`]; 0 while it runs.
    pub(in crate::engine) bytes: usize,
    pub(in crate::engine) status_message: Option<String>,
    /// The requests its handler waits on, in the order asked.
    pub(in crate::engine) pending: Vec<Pending>,
    /// Answers of the current ask so far, by the handler's keys.
    pub(in crate::engine) answers: Map<String, Value>,
    /// Every `inputRequests` key used so far: never reused within a task.
    pub(in crate::engine) keys: BTreeSet<String>,
    pub(in crate::engine) rounds: u32,
    /// The current ask's deadline ([`crate::limits::Limits::ask_timeout`]).
    pub(in crate::engine) ask_deadline: Option<Instant>,
    /// When it is forgotten, once ended.
    pub(in crate::engine) expires: Option<Instant>,
}

/// What one caller holds in the task table.
#[derive(Default)]
pub(in crate::engine) struct Holding {
    /// Its tasks, running and ended: its count under [`crate::limits::Limits::max_tasks`].
    pub(in crate::engine) tasks: usize,
    /// Bytes of its ended tasks: its count under [`crate::limits::Limits::max_ended_task_bytes`].
    pub(in crate::engine) bytes: usize,
}

/// The task table.
#[derive(Default)]
pub(in crate::engine) struct Tasks {
    /// By serial: the order tasks were made in, which eviction follows.
    pub(in crate::engine) by_serial: BTreeMap<u64, Task>,
    pub(in crate::engine) by_id: HashMap<String, u64>,
    /// What each caller binding holds (only callers holding some task).
    pub(in crate::engine) held: HashMap<String, Holding>,
    /// Bytes of every ended task held.
    pub(in crate::engine) bytes: usize,
    /// Task ids minted so far: the counter of the id PRF.
    pub(in crate::engine) minted: u64,
}

impl Tasks {
    pub(in crate::engine) fn len(&self) -> usize {
        self.by_serial.len()
    }

    pub(in crate::engine) fn insert(&mut self, serial: u64, task: Task) {
        self.held.entry(task.owner.clone()).or_default().tasks += 1;
        self.by_id.insert(task.id.clone(), serial);
        self.by_serial.insert(serial, task);
    }

    pub(in crate::engine) fn remove(&mut self, serial: u64) -> Option<Task> {
        let task = self.by_serial.remove(&serial)?;
        self.by_id.remove(&task.id);
        self.bytes = self.bytes.saturating_sub(task.bytes);
        if let Some(h) = self.held.get_mut(&task.owner) {
            h.tasks = h.tasks.saturating_sub(1);
            h.bytes = h.bytes.saturating_sub(task.bytes);
            if h.tasks == 0 {
                self.held.remove(&task.owner);
            }
        }
        Some(task)
    }

    /// Counts the ended task `serial` as `bytes` from now on.
    pub(in crate::engine) fn keep(&mut self, serial: u64, bytes: usize) {
        let Some(t) = self.by_serial.get_mut(&serial) else { return };
        let before = std::mem::replace(&mut t.bytes, bytes);
        self.bytes = self.bytes.saturating_sub(before).saturating_add(bytes);
        if let Some(h) = self.held.get_mut(&t.owner) {
            h.bytes = h.bytes.saturating_sub(before).saturating_add(bytes);
        }
    }

    pub(in crate::engine) fn holding(&self, owner: &str) -> (usize, usize) {
        self.held.get(owner).map_or((0, 0), |h| (h.tasks, h.bytes))
    }

    /// The oldest ended task of `owner`, other than `except`.
    pub(in crate::engine) fn oldest_ended(&self, owner: &str, except: Option<u64>) -> Option<u64> {
        self.by_serial
            .iter()
            .find(|(s, t)| t.owner == owner && t.status.is_terminal() && Some(**s) != except)
            .map(|(s, _)| *s)
    }

    /// The newest running task of `owner`: of its tasks, the one that has done the least.
    pub(in crate::engine) fn newest_running(&self, owner: &str) -> Option<u64> {
        self.by_serial
            .iter()
            .rev()
            .find(|(_, t)| t.owner == owner && !t.status.is_terminal())
            .map(|(s, _)| *s)
    }

    /// The callers other than `owner` holding more than `share` by `count`, the most first
    /// (ties: the smallest binding, so the choice never depends on hash order).
    pub(in crate::engine) fn above(
        &self,
        owner: &str,
        share: usize,
        count: impl Fn(&Holding) -> usize,
    ) -> Vec<String> {
        let mut above: Vec<(&String, usize)> = self
            .held
            .iter()
            .map(|(b, h)| (b, count(h)))
            .filter(|(b, n)| *n > share && b.as_str() != owner)
            .collect();
        above.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        above.into_iter().map(|(b, _)| b.clone()).collect()
    }
}
