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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use mcp_proto::{HandlerError, Limits, TaskRecord};
use serde_json::{Map, Value};

use crate::handler::BoxFuture;

/// A store of ended tasks shared beyond one engine. Object-safe: the server holds an
/// `Arc<dyn TaskStore>` ([`ServerBuilder::task_store`](crate::ServerBuilder::task_store)).
///
/// # Bounds
///
/// A store holds what callers' tasks returned, so it bounds it: [`InMemoryTaskStore`] and the
/// Redis store (`RedisCluster`) keep at most a budget of bytes in total, shared fairly among the
/// callers holding records (a caller's share is the budget divided by the callers holding
/// records, itself included: [`Limits::fair_share`](mcp_proto::Limits::fair_share)). When a
/// record does not fit, a caller at or above its share loses its own oldest records first; a
/// caller below its share takes the place of the oldest record of the caller holding the most,
/// who is then above its share; nobody below its share loses a record to make room for another
/// caller. A record that still cannot be kept (one larger than its caller's share by itself)
/// is refused: [`TaskStore::put`] fails with [`StoreError::Full`], and the server keeps the
/// task reachable on the replica that ran it until its TTL (see [`TaskStore::put`]). "Oldest"
/// is the first stored in memory, the soonest to expire in Redis (the same for tasks of one
/// TTL). A store of one's own should bound what it keeps likewise: whatever it keeps, a caller
/// can make it keep, for as long as a task's TTL.
pub trait TaskStore: Send + Sync + 'static {
    /// Keeps the record of a task that just ended, for at least `record.ttl_ms` after
    /// `record.ended_unix_ms`. Called once per ended task, in the order they ended, on a task
    /// of its own: nothing waits for it.
    ///
    /// An error says the record was not kept (a store that is full for this caller, see the
    /// [bounds](TaskStore#bounds), or one that cannot be reached). The server logs it, counts it in
    /// [`Status::task_store_failures`](crate::Status::task_store_failures), and keeps the
    /// task reachable where it ran: in a cluster its directory entry stays (other replicas
    /// forward `tasks/get` to the engine that ran it, which answers for it until its TTL
    /// passes), where after a successful `put` it is dropped and the store answers instead.
    fn put(&self, record: TaskRecord) -> BoxFuture<Result<(), StoreError>>;

    /// The record of the task `task_id` of the caller whose
    /// [`binding`](mcp_proto::Caller::binding) is `owner`, if the store holds it. An error
    /// answers the `tasks/get` as a handler error does (the generic internal error unless it is
    /// [`HandlerError::Public`]).
    fn get(&self, owner: String, task_id: String) -> BoxFuture<Result<Option<TaskRecord>, HandlerError>>;
}

/// Why a [`TaskStore`] did not keep a record ([`TaskStore::put`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The record does not fit the store's bounds: it is larger than its caller's share of the
    /// store by itself (`bytes` as the store counts them, over `share`), or the store keeps
    /// nothing at all (a share of 0).
    Full {
        /// The record's size as the store counts it.
        bytes: u64,
        /// The most its caller may hold now.
        share: u64,
    },
    /// The store failed or could not be reached; the text says why.
    Unavailable(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Full { bytes, share } => {
                write!(f, "task store full: a record of {bytes} bytes, over its caller's share of {share}")
            }
            StoreError::Unavailable(why) => write!(f, "task store unavailable: {why}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// The default [`TaskStore`]: ended tasks in this process's memory, at most
/// [`capacity`](Self::new) records and [`max_bytes`](Self::with_max_bytes) bytes, shared among
/// callers as the [`TaskStore`] docs say.
///
/// It lets a task outlive its place in the engine's table (made room for under
/// [`Limits::max_tasks`](mcp_proto::Limits::max_tasks)) until its TTL passes, but it is not
/// shared: replicas need a store of their own kind. Each record is kept as its task's JSON
/// text (parsed again when read), so what it holds is what it counts: a record costs the
/// length of that text, its owner and id, plus [`RECORD_OVERHEAD`](Self::RECORD_OVERHEAD).
#[derive(Debug)]
pub struct InMemoryTaskStore {
    capacity: usize,
    max_bytes: usize,
    inner: Mutex<Inner>,
}

/// A record's key: its owner's binding and its task id.
type Key = (String, String);

#[derive(Debug, Default)]
struct Inner {
    /// Serial of the next record kept: the order records arrive in, which eviction follows.
    serial: u64,
    records: HashMap<Key, Kept>,
    by_serial: BTreeMap<u64, Key>,
    /// (expiry in Unix ms, serial): what the sweep takes first.
    by_expiry: BTreeSet<(u64, u64)>,
    owners: HashMap<String, Holder>,
    /// (bytes, owner) and (records, owner) of every holder: who holds the most.
    by_bytes: BTreeSet<(usize, String)>,
    by_count: BTreeSet<(usize, String)>,
    bytes: usize,
}

#[derive(Debug)]
struct Kept {
    serial: u64,
    bytes: usize,
    task: Box<str>,
    ended_unix_ms: u64,
    ttl_ms: u64,
}

#[derive(Debug, Default)]
struct Holder {
    bytes: usize,
    /// Serials of its records, oldest first.
    serials: BTreeSet<u64>,
}

impl Inner {
    /// Moves `owner` in the rankings after `change` updates its holding; an owner left with
    /// nothing is dropped.
    fn update(&mut self, owner: &str, change: impl FnOnce(&mut Holder)) {
        let holder = self.owners.entry(owner.to_owned()).or_default();
        let before = (holder.bytes, holder.serials.len());
        change(holder);
        let after = (holder.bytes, holder.serials.len());
        if after.1 == 0 {
            self.owners.remove(owner);
        }
        if before.1 > 0 {
            self.by_bytes.remove(&(before.0, owner.to_owned()));
            self.by_count.remove(&(before.1, owner.to_owned()));
        }
        if after.1 > 0 {
            self.by_bytes.insert((after.0, owner.to_owned()));
            self.by_count.insert((after.1, owner.to_owned()));
        }
    }

    fn remove(&mut self, key: &Key) {
        let Some(kept) = self.records.remove(key) else { return };
        self.by_serial.remove(&kept.serial);
        self.by_expiry.remove(&(kept.ended_unix_ms.saturating_add(kept.ttl_ms), kept.serial));
        self.bytes = self.bytes.saturating_sub(kept.bytes);
        self.update(&key.0, |h| {
            h.bytes = h.bytes.saturating_sub(kept.bytes);
            h.serials.remove(&kept.serial);
        });
    }

    /// Forgets the oldest record of `owner`; false when it holds none.
    fn evict_oldest_of(&mut self, owner: &str) -> bool {
        let oldest = self.owners.get(owner).and_then(|h| h.serials.first().copied());
        let Some(key) = oldest.and_then(|s| self.by_serial.get(&s).cloned()) else { return false };
        self.remove(&key);
        true
    }

    fn held_by(&self, owner: &str) -> (usize, usize) {
        self.owners.get(owner).map_or((0, 0), |h| (h.bytes, h.serials.len()))
    }
}

impl InMemoryTaskStore {
    /// Records kept by [`Default`]: 4096.
    pub const DEFAULT_CAPACITY: usize = 4096;
    /// Bytes kept by [`Default`] and [`new`](Self::new): 64 MiB (with 1 MiB results, 64 of them
    /// when one caller holds them all, 32 each for two callers).
    pub const DEFAULT_MAX_BYTES: usize = 64 << 20;
    /// What each record costs beyond its text, owner and id: 128 bytes (its place in the maps).
    pub const RECORD_OVERHEAD: usize = 128;

    /// A store of at most `capacity` records and [`DEFAULT_MAX_BYTES`](Self::DEFAULT_MAX_BYTES)
    /// bytes. Past either bound records are forgotten as the [`TaskStore`] docs say (and a
    /// `tasks/get` for one, if the engine no longer holds it either, is answered `-32602`);
    /// records past their TTL are dropped as newer ones arrive. With 0 nothing is kept (every
    /// `put` fails with [`StoreError::Full`]).
    pub fn new(capacity: usize) -> Self {
        Self { capacity, max_bytes: Self::DEFAULT_MAX_BYTES, inner: Mutex::new(Inner::default()) }
    }

    /// The same store bounded to `max_bytes` bytes in total instead, each record counted as
    /// the type docs say. With 0 nothing is kept.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Records held now.
    pub fn len(&self) -> usize {
        self.inner.lock().map_or(0, |i| i.records.len())
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held now, counted as the type docs say.
    pub fn bytes(&self) -> usize {
        self.inner.lock().map_or(0, |i| i.bytes)
    }

    /// Bytes held now by the caller whose binding is `owner`.
    pub fn bytes_of(&self, owner: &str) -> usize {
        self.inner.lock().map_or(0, |i| i.held_by(owner).0)
    }

    fn keep(&self, record: TaskRecord) -> Result<(), StoreError> {
        let mut inner =
            self.inner.lock().map_err(|_| StoreError::Unavailable("the store's lock is poisoned".into()))?;
        let now = record.ended_unix_ms;
        // Records end in order, so the newest one's end time is the store's clock.
        while let Some(&(expires, serial)) = inner.by_expiry.first() {
            if expires > now {
                break;
            }
            match inner.by_serial.get(&serial).cloned() {
                Some(key) => inner.remove(&key),
                None => {
                    inner.by_expiry.pop_first();
                }
            }
        }
        let key = (record.owner, record.task_id);
        // A record written again replaces itself.
        inner.remove(&key);
        let task = Value::Object(record.task).to_string();
        let bytes = task.len() + key.0.len() + key.1.len() + Self::RECORD_OVERHEAD;
        make_room(&mut inner, &key.0, bytes, self.capacity, self.max_bytes)?;
        let serial = inner.serial;
        inner.serial += 1;
        inner.by_serial.insert(serial, key.clone());
        inner.by_expiry.insert((record.ended_unix_ms.saturating_add(record.ttl_ms), serial));
        inner.bytes += bytes;
        inner.update(&key.0, |h| {
            h.bytes += bytes;
            h.serials.insert(serial);
        });
        let kept = Kept {
            serial,
            bytes,
            task: task.into(),
            ended_unix_ms: record.ended_unix_ms,
            ttl_ms: record.ttl_ms,
        };
        inner.records.insert(key, kept);
        Ok(())
    }
}

/// Makes room for a record of `bytes` of `owner` (see [`TaskStore`]'s bounds), or says why not.
fn make_room(
    inner: &mut Inner,
    owner: &str,
    bytes: usize,
    capacity: usize,
    max_bytes: usize,
) -> Result<(), StoreError> {
    let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    loop {
        let room_for_one = inner.records.len() < capacity;
        let room_for_bytes = inner.bytes.saturating_add(bytes) <= max_bytes;
        if room_for_one && room_for_bytes {
            return Ok(());
        }
        let (mine, count) = inner.held_by(owner);
        let holders = inner.owners.len() + usize::from(count == 0);
        let (byte_share, count_share) = if capacity == 0 || max_bytes == 0 {
            (0, 0)
        } else {
            (Limits::fair_share(max_bytes, holders), Limits::fair_share(capacity, holders))
        };
        let at_share = mine.saturating_add(bytes) > byte_share || count + 1 > count_share;
        let victim = if at_share {
            // Its own oldest, and when it holds none the record alone is too much.
            Some(owner.to_owned())
        } else if !room_for_bytes {
            // Below its share while the bytes are used up: whoever holds the most is above
            // theirs (the others cannot all be within their shares and fill the store).
            inner.by_bytes.last().map(|(_, o)| o.clone())
        } else {
            inner.by_count.last().map(|(_, o)| o.clone())
        };
        if !victim.is_some_and(|v| inner.evict_oldest_of(&v)) {
            return Err(StoreError::Full { bytes: wide(bytes), share: wide(byte_share) });
        }
    }
}

impl Default for InMemoryTaskStore {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAPACITY)
    }
}

impl TaskStore for InMemoryTaskStore {
    fn put(&self, record: TaskRecord) -> BoxFuture<Result<(), StoreError>> {
        let kept = if record.ttl_ms == 0 { Ok(()) } else { self.keep(record) };
        Box::pin(std::future::ready(kept))
    }

    fn get(&self, owner: String, task_id: String) -> BoxFuture<Result<Option<TaskRecord>, HandlerError>> {
        let found = self.inner.lock().ok().and_then(|i| {
            let kept = i.records.get(&(owner.clone(), task_id.clone()))?;
            let task = serde_json::from_str::<Map<String, Value>>(&kept.task).ok()?;
            Some(TaskRecord { task_id, owner, task, ended_unix_ms: kept.ended_unix_ms, ttl_ms: kept.ttl_ms })
        });
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
    use serde_json::json;

    fn record(owner: &str, id: &str, ended: u64, ttl: u64) -> TaskRecord {
        TaskRecord {
            task_id: id.into(),
            owner: owner.into(),
            task: Map::new(),
            ended_unix_ms: ended,
            ttl_ms: ttl,
        }
    }

    /// A record whose result text is `len` bytes long.
    fn sized(owner: &str, id: &str, ended: u64, len: usize) -> TaskRecord {
        let mut r = record(owner, id, ended, 60_000);
        r.task.insert("result".into(), json!("x".repeat(len)));
        r
    }

    fn get(store: &InMemoryTaskStore, owner: &str, id: &str) -> Option<TaskRecord> {
        ready(store.get(owner.into(), id.into())).ok().flatten()
    }

    /// The in-memory store's futures are ready at once.
    fn ready<T>(mut fut: BoxFuture<T>) -> T {
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
        let mut r = record("alice", "t1", 1_000, 60_000);
        r.task.insert("status".into(), json!("completed"));
        ready(store.put(r.clone())).unwrap();
        assert_eq!(get(&store, "alice", "t1"), Some(r));
        assert!(get(&store, "bob", "t1").is_none());
        assert!(get(&store, "alice", "t2").is_none());
    }

    #[test]
    fn the_oldest_goes_past_capacity_and_expired_ones_as_newer_arrive() {
        let store = InMemoryTaskStore::new(2);
        ready(store.put(record("a", "1", 1_000, 60_000))).unwrap();
        ready(store.put(record("a", "2", 2_000, 60_000))).unwrap();
        ready(store.put(record("a", "3", 3_000, 60_000))).unwrap();
        assert_eq!(store.len(), 2);
        assert!(get(&store, "a", "1").is_none());
        // "2" and "3" expire at 62 s and 63 s: a record ending at 62.5 s drops "2".
        ready(store.put(record("a", "4", 62_500, 60_000))).unwrap();
        assert!(get(&store, "a", "2").is_none());
        assert!(get(&store, "a", "3").is_some() && get(&store, "a", "4").is_some());
        let none = InMemoryTaskStore::new(0);
        assert!(matches!(ready(none.put(record("a", "1", 1_000, 60_000))), Err(StoreError::Full { .. })));
        assert!(none.is_empty());
    }

    /// One caller filling the store holds at most its bytes, loses its own oldest first, and
    /// never pushes out a caller below its share; a record larger than its share alone is
    /// refused with an error.
    #[test]
    fn bytes_are_bounded_in_total_and_shared_fairly_among_callers() {
        let probe = InMemoryTaskStore::new(8);
        ready(probe.put(sized("alice", "p00", 0, 1_000))).unwrap();
        let one = probe.bytes();
        assert!(one > 1_000 && one < 1_000 + 256, "a record counts its text: {one}");

        let store = InMemoryTaskStore::new(1_000).with_max_bytes(4 * one);
        for i in 0..20 {
            ready(store.put(sized("alice", &format!("a{i:02}"), i, 1_000))).unwrap();
            assert!(store.bytes() <= 4 * one, "over the budget at {i}: {}", store.bytes());
        }
        assert_eq!(store.len(), 4, "the budget holds four such records");
        assert!(get(&store, "alice", "a15").is_none() && get(&store, "alice", "a16").is_some());

        // Bobby is below his share (half of the store): he takes the place of alice's oldest.
        ready(store.put(sized("bobby", "b00", 30, 1_000))).unwrap();
        ready(store.put(sized("bobby", "b01", 31, 1_000))).unwrap();
        assert!(get(&store, "bobby", "b00").is_some() && get(&store, "bobby", "b01").is_some());
        assert_eq!(store.bytes_of("alice"), 2 * one);
        assert!(get(&store, "alice", "a17").is_none() && get(&store, "alice", "a18").is_some());

        // At her share now, alice loses her own oldest, never bobby's.
        for i in 40..50 {
            ready(store.put(sized("alice", &format!("a{i:02}"), i, 1_000))).unwrap();
        }
        assert!(get(&store, "bobby", "b00").is_some() && get(&store, "bobby", "b01").is_some());
        assert_eq!(store.bytes_of("alice"), 2 * one);
        assert!(get(&store, "alice", "a48").is_some() && get(&store, "alice", "a49").is_some());
        // So does bobby, at his.
        ready(store.put(sized("bobby", "b02", 60, 1_000))).unwrap();
        assert!(get(&store, "bobby", "b00").is_none() && get(&store, "bobby", "b02").is_some());
        assert_eq!(store.bytes_of("alice"), 2 * one);

        // A record over its caller's share by itself is refused, and pushes nobody out.
        let huge = ready(store.put(sized("carol", "c00", 70, 3 * one)));
        assert!(matches!(huge, Err(StoreError::Full { .. })), "{huge:?}");
        assert!(get(&store, "carol", "c00").is_none());
        assert_eq!(store.bytes(), 4 * one);
        assert!(store.bytes() <= 4 * one);
    }
}
