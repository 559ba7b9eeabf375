//! Where ended tasks of the Tasks extension (`io.modelcontextprotocol/tasks`) go beyond the
//! engine: a [`TaskStore`].
//!
//! The engine keeps every task it runs in its own bounded table, running and ended, for
//! [`Limits::task_ttl`](mcp_proto::Limits::task_ttl) after it ends. The store is for what that
//! table cannot answer: a task that ended on another replica (the scale-out case: back the
//! store with something shared, such as Redis), or one the table let go to make room. Each
//! task that ends is written to the store once ([`TaskStore::put`]); a `tasks/get` for an id
//! the engine does not hold is answered from [`TaskStore::get`]. Only ended tasks are stored:
//! a running task lives where its handler runs, so `tasks/get`, `tasks/update` and
//! `tasks/cancel` for it are served by that engine: in a cluster, another replica forwards them
//! there (see [`crate::cluster`]); a server in no cluster answers them `-32602` "unknown task".
//!
//! The engine checks what a store returns: a record of another caller, of another id, or past
//! its TTL is answered as an unknown task, so a store need not filter precisely.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use mcp_proto::{HandlerError, TaskRecord};

use crate::handler::BoxFuture;

/// A store of ended tasks shared beyond one engine. Object-safe: the server holds an
/// `Arc<dyn TaskStore>` ([`ServerBuilder::task_store`](crate::ServerBuilder::task_store)).
pub trait TaskStore: Send + Sync + 'static {
    /// Keeps the record of a task that just ended, for at least `record.ttl_ms` after
    /// `record.ended_unix_ms`. Called once per ended task, in the order they ended, on a task
    /// of its own: nothing waits for it. A failure is the store's to report (its own logs);
    /// the task is still served by the engine that ran it until its TTL passes.
    fn put(&self, record: TaskRecord) -> BoxFuture<()>;

    /// The record of the task `task_id` of the caller whose
    /// [`binding`](mcp_proto::Caller::binding) is `owner`, if the store holds it. An error
    /// answers the `tasks/get` as a handler error does (the generic internal error unless it is
    /// [`HandlerError::Public`]).
    fn get(&self, owner: String, task_id: String) -> BoxFuture<Result<Option<TaskRecord>, HandlerError>>;
}

/// The default [`TaskStore`]: the last `capacity` ended tasks, in this process's memory.
///
/// It lets a task outlive its place in the engine's table (made room for under
/// [`Limits::max_tasks`](mcp_proto::Limits::max_tasks)) until its TTL passes, but it is not
/// shared: replicas need a store of their own kind.
#[derive(Debug)]
pub struct InMemoryTaskStore {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Oldest first: the order they ended in.
    order: VecDeque<(String, String)>,
    records: HashMap<(String, String), TaskRecord>,
}

impl InMemoryTaskStore {
    /// Records kept by [`Default`]: 4096.
    pub const DEFAULT_CAPACITY: usize = 4096;

    /// A store of at most `capacity` records: past it the oldest is forgotten (and a
    /// `tasks/get` for it, if the engine no longer holds it either, is answered `-32602`).
    /// Records past their TTL are dropped as newer ones arrive. With 0 nothing is kept.
    pub fn new(capacity: usize) -> Self {
        Self { capacity, inner: Mutex::new(Inner::default()) }
    }

    /// Records held now.
    pub fn len(&self) -> usize {
        self.inner.lock().map_or(0, |i| i.records.len())
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn keep(&self, record: TaskRecord) {
        let Ok(mut inner) = self.inner.lock() else { return };
        let now = record.ended_unix_ms;
        // Records end in order, so the newest one's end time is the store's clock.
        while let Some(key) = inner.order.front().cloned() {
            let expired =
                inner.records.get(&key).is_none_or(|r| r.ended_unix_ms.saturating_add(r.ttl_ms) <= now);
            if !expired && inner.records.len() < self.capacity {
                break;
            }
            inner.order.pop_front();
            inner.records.remove(&key);
        }
        if self.capacity == 0 {
            return;
        }
        let key = (record.owner.clone(), record.task_id.clone());
        if inner.records.insert(key.clone(), record).is_none() {
            inner.order.push_back(key);
        }
    }
}

impl Default for InMemoryTaskStore {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAPACITY)
    }
}

impl TaskStore for InMemoryTaskStore {
    fn put(&self, record: TaskRecord) -> BoxFuture<()> {
        self.keep(record);
        Box::pin(std::future::ready(()))
    }

    fn get(&self, owner: String, task_id: String) -> BoxFuture<Result<Option<TaskRecord>, HandlerError>> {
        let found = self.inner.lock().ok().and_then(|i| i.records.get(&(owner, task_id)).cloned());
        Box::pin(std::future::ready(Ok(found)))
    }
}

/// The store a new server starts with.
pub(crate) fn default_store() -> Arc<dyn TaskStore> {
    Arc::new(InMemoryTaskStore::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn record(owner: &str, id: &str, ended: u64, ttl: u64) -> TaskRecord {
        TaskRecord {
            task_id: id.into(),
            owner: owner.into(),
            task: Map::new(),
            ended_unix_ms: ended,
            ttl_ms: ttl,
        }
    }

    fn get(store: &InMemoryTaskStore, owner: &str, id: &str) -> Option<TaskRecord> {
        futures_lite_ready(store.get(owner.into(), id.into())).ok().flatten()
    }

    /// The in-memory store's futures are ready at once.
    fn futures_lite_ready<T>(mut fut: BoxFuture<T>) -> T {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match fut.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(t) => t,
            std::task::Poll::Pending => panic!("the in-memory store never waits"),
        }
    }

    #[test]
    fn a_record_answers_its_owner_only() {
        let store = InMemoryTaskStore::new(8);
        futures_lite_ready(store.put(record("alice", "t1", 1_000, 60_000)));
        assert!(get(&store, "alice", "t1").is_some());
        assert!(get(&store, "bob", "t1").is_none());
        assert!(get(&store, "alice", "t2").is_none());
    }

    #[test]
    fn the_oldest_goes_past_capacity_and_expired_ones_as_newer_arrive() {
        let store = InMemoryTaskStore::new(2);
        futures_lite_ready(store.put(record("a", "1", 1_000, 60_000)));
        futures_lite_ready(store.put(record("a", "2", 2_000, 60_000)));
        futures_lite_ready(store.put(record("a", "3", 3_000, 60_000)));
        assert_eq!(store.len(), 2);
        assert!(get(&store, "a", "1").is_none());
        // "2" and "3" expire at 62 s and 63 s: a record ending at 62.5 s drops "2".
        futures_lite_ready(store.put(record("a", "4", 62_500, 60_000)));
        assert!(get(&store, "a", "2").is_none());
        assert!(get(&store, "a", "3").is_some() && get(&store, "a", "4").is_some());
        let none = InMemoryTaskStore::new(0);
        futures_lite_ready(none.put(record("a", "1", 1_000, 60_000)));
        assert!(none.is_empty());
    }
}
