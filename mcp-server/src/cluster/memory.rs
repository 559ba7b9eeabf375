//! The default cluster backend: [`InMemoryCluster`], replicas of one process sharing one value,
//! with its directory and shared replay ledger in memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::stream::BoxStream;
use mcp_proto::{HeldKind, SharedOutcome};

use super::{Cluster, ClusterError, ClusterEvent, EventKind, Located, SharedKeys, ADVERTISE_EVERY};
use crate::handler::BoxFuture;
use crate::runtime::Runtime;
use crate::tasks::{InMemoryTaskStore, TaskStore};

/// The default [`Cluster`]: the replicas are [`Server`](crate::Server)s of one process that share this
/// value (one `Arc`). Events are handed over through memory, the key ring is made on first
/// use, and tasks are an [`InMemoryTaskStore`].
///
/// Each subscriber has a queue of [`InMemoryCluster::FEED_CAPACITY`] events; an event for a
/// subscriber whose queue is full is dropped for it and counted ([`dropped`](Self::dropped)):
/// its listeners miss that change (a later one tells them to re-list all the same).
pub struct InMemoryCluster {
    pub(crate) subscribers: Mutex<Vec<async_channel::Sender<ClusterEvent>>>,
    pub(crate) keys: Mutex<Option<SharedKeys>>,
    /// The shared continuation epoch ([`Cluster::epoch`]).
    pub(crate) epoch: std::sync::atomic::AtomicU64,
    pub(crate) tasks: Arc<InMemoryTaskStore>,
    pub(crate) dropped: std::sync::atomic::AtomicU64,
    /// The shared replay ledger: each state's key, what is kept under it, and until when.
    pub(crate) ledger: Mutex<LedgerMap>,
    /// The directory: replicas' addresses and who holds what, each with its expiry.
    pub(crate) directory: Mutex<Directory>,
    /// The clock expiries are measured on: the first server's runtime ([`Cluster::start`]).
    pub(crate) clock: OnceLock<Arc<dyn Runtime>>,
}

/// [`InMemoryCluster`]'s directory.
#[derive(Default)]
pub(crate) struct Directory {
    pub(crate) replicas: HashMap<Arc<str>, (String, Instant)>,
    pub(crate) entries: HashMap<(HeldKind, String), (Arc<str>, Instant)>,
    /// When expired entries were last dropped ([`InMemoryCluster::sweep`]).
    pub(crate) swept: Option<Instant>,
}

impl std::fmt::Debug for InMemoryCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryCluster").field("tasks", &self.tasks.len()).finish_non_exhaustive()
    }
}

impl Default for InMemoryCluster {
    fn default() -> Self {
        Self {
            subscribers: Mutex::new(Vec::new()),
            keys: Mutex::new(None),
            epoch: std::sync::atomic::AtomicU64::new(0),
            tasks: Arc::new(InMemoryTaskStore::default()),
            dropped: std::sync::atomic::AtomicU64::new(0),
            ledger: Mutex::new(LedgerMap::default()),
            directory: Mutex::new(Directory::default()),
            clock: OnceLock::new(),
        }
    }
}

impl InMemoryCluster {
    /// Events each subscriber may have waiting: 1024.
    pub const FEED_CAPACITY: usize = 1024;

    /// Events dropped for a subscriber whose queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Now on the runtime's clock, once a server started the cluster; before that (no server
    /// serves yet) the system's.
    pub(crate) fn now(&self) -> Instant {
        match self.clock.get() {
            Some(rt) => rt.now(),
            None => Instant::now(),
        }
    }

    /// Runs `f` on the directory; a poisoned lock (a panic while it was held) is an error.
    pub(crate) fn with_directory<T>(
        &self,
        f: impl FnOnce(&mut Directory, Instant) -> T,
    ) -> Result<T, ClusterError> {
        let now = self.now();
        let mut d = self.directory.lock().map_err(|_| ClusterError("directory lock poisoned".into()))?;
        Ok(f(&mut d, now))
    }

    /// Drops what expired, at most once per [`ADVERTISE_EVERY`]: a sweep walks the whole
    /// directory, so sweeping on every write would make each write cost the directory's size.
    /// Called on every write, so the maps hold at most what was written within the longest TTL
    /// and one interval (lookups check expiry themselves).
    pub(crate) fn sweep(d: &mut Directory, now: Instant) {
        if d.swept.is_some_and(|at| now.saturating_duration_since(at) < ADVERTISE_EVERY) {
            return;
        }
        d.swept = Some(now);
        d.replicas.retain(|_, (_, until)| *until > now);
        d.entries.retain(|_, (_, until)| *until > now);
    }
}

impl Cluster for InMemoryCluster {
    fn publish(&self, event: ClusterEvent) {
        let Ok(mut subs) = self.subscribers.lock() else { return };
        subs.retain(|tx| match tx.try_send(event.clone()) {
            Ok(()) => true,
            Err(async_channel::TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                true
            }
            Err(async_channel::TrySendError::Closed(_)) => false,
        });
    }

    fn subscribe(&self) -> BoxStream<'static, ClusterEvent> {
        let (tx, rx) = async_channel::bounded(Self::FEED_CAPACITY);
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.push(tx);
        }
        Box::pin(rx)
    }

    fn key_ring(&self) -> BoxFuture<Result<SharedKeys, ClusterError>> {
        let keys = match self.keys.lock() {
            Ok(mut keys) => match &*keys {
                Some(k) => Ok(k.clone()),
                None => SharedKeys::random()
                    .map(|k| keys.insert(k).clone())
                    .map_err(|e| ClusterError(format!("cannot draw a random key: {e}"))),
            },
            Err(_) => Err(ClusterError("key ring lock poisoned".into())),
        };
        Box::pin(std::future::ready(keys))
    }

    fn rotate_keys(&self, new: [u8; 32], keep: usize) -> BoxFuture<Result<SharedKeys, ClusterError>> {
        let rotated = match self.keys.lock() {
            Ok(mut keys) => {
                let next = match &*keys {
                    Some(k) => k.rotated(new, keep),
                    None => SharedKeys(vec![new]),
                };
                *keys = Some(next.clone());
                Ok(next)
            }
            Err(_) => Err(ClusterError("key ring lock poisoned".into())),
        };
        if rotated.is_ok() {
            self.publish(ClusterEvent { origin: Arc::from(""), kind: EventKind::KeysRotated });
        }
        Box::pin(std::future::ready(rotated))
    }

    fn epoch(&self) -> BoxFuture<Result<Option<u64>, ClusterError>> {
        Box::pin(std::future::ready(Ok(Some(self.epoch.load(std::sync::atomic::Ordering::Acquire)))))
    }

    fn move_epoch(&self) -> BoxFuture<Result<u64, ClusterError>> {
        let next = self.epoch.fetch_add(1, std::sync::atomic::Ordering::AcqRel).wrapping_add(1);
        self.publish(ClusterEvent { origin: Arc::from(""), kind: EventKind::EpochMoved(next) });
        Box::pin(std::future::ready(Ok(next)))
    }

    fn task_store(&self) -> Arc<dyn TaskStore> {
        self.tasks.clone()
    }

    fn claim(&self, key: &str, lease_until_ms: u64) -> BoxFuture<Result<Option<Vec<u8>>, ClusterError>> {
        let claimed = match self.ledger.lock() {
            Ok(mut ledger) => Ok(ledger.claim(crate::runtime::unix_ms(), key, lease_until_ms)),
            Err(_) => Err(ClusterError("ledger lock poisoned".into())),
        };
        Box::pin(std::future::ready(claimed))
    }

    fn record(&self, key: &str, outcome: Option<Vec<u8>>, expires_at_ms: u64) -> BoxFuture<()> {
        if let Ok(mut ledger) = self.ledger.lock() {
            ledger.record(crate::runtime::unix_ms(), key, outcome, expires_at_ms);
        }
        Box::pin(std::future::ready(()))
    }

    fn renew(&self, key: &str, lease_until_ms: u64) -> BoxFuture<Result<bool, ClusterError>> {
        let renewed = match self.ledger.lock() {
            Ok(mut ledger) => Ok(ledger.renew(crate::runtime::unix_ms(), key, lease_until_ms)),
            Err(_) => Err(ClusterError("ledger lock poisoned".into())),
        };
        Box::pin(std::future::ready(renewed))
    }

    fn start(&self, rt: Arc<dyn Runtime>) {
        // The first server's runtime: every server of one process shares its clock.
        let _ = self.clock.set(rt);
    }

    // Directory.

    fn advertise(&self, replica: &str, url: &str, ttl: Duration) -> BoxFuture<Result<(), ClusterError>> {
        let done = self.with_directory(|d, now| {
            Self::sweep(d, now);
            let until = now.checked_add(ttl).unwrap_or(now);
            d.replicas.insert(Arc::from(replica), (url.to_owned(), until));
        });
        Box::pin(std::future::ready(done))
    }

    fn register(
        &self,
        kind: HeldKind,
        id: &str,
        replica: &str,
        ttl: Duration,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let done = self.with_directory(|d, now| {
            Self::sweep(d, now);
            let until = now.checked_add(ttl).unwrap_or(now);
            d.entries.insert((kind, id.to_owned()), (Arc::from(replica), until));
        });
        Box::pin(std::future::ready(done))
    }

    fn unregister(&self, kind: HeldKind, id: &str) -> BoxFuture<Result<(), ClusterError>> {
        let done = self.with_directory(|d, _| {
            d.entries.remove(&(kind, id.to_owned()));
        });
        Box::pin(std::future::ready(done))
    }

    fn locate(&self, kind: HeldKind, id: &str) -> BoxFuture<Result<Option<Located>, ClusterError>> {
        let found = self.with_directory(|d, now| {
            let (replica, until) = d.entries.get(&(kind, id.to_owned()))?;
            if *until <= now {
                return None;
            }
            let (url, live_until) = d.replicas.get(replica)?;
            (*live_until > now).then(|| Located { replica: replica.clone(), url: url.clone() })
        });
        Box::pin(std::future::ready(found))
    }
}

/// [`InMemoryCluster`]'s replay ledger: values by key, and keys by expiry so that what expired
/// is dropped first (on every claim and record), as Redis forgets a key past its `PXAT`. Its
/// size is bounded by the states of the cluster's engines that are still unexpired, which their
/// own ledgers bound.
#[derive(Default)]
pub(crate) struct LedgerMap {
    pub(crate) values: BTreeMap<String, (Vec<u8>, u64)>,
    pub(crate) by_expiry: std::collections::BTreeSet<(u64, String)>,
}

impl LedgerMap {
    pub(crate) fn prune(&mut self, now_ms: u64) {
        while let Some((at, key)) = self.by_expiry.first().cloned() {
            if at > now_ms {
                break;
            }
            self.by_expiry.remove(&(at, key.clone()));
            self.values.remove(&key);
        }
    }

    pub(crate) fn put(&mut self, key: &str, value: Vec<u8>, until_ms: u64) {
        if let Some((_, at)) = self.values.insert(key.to_owned(), (value, until_ms)) {
            self.by_expiry.remove(&(at, key.to_owned()));
        }
        self.by_expiry.insert((until_ms, key.to_owned()));
    }

    pub(crate) fn claim(&mut self, now_ms: u64, key: &str, lease_until_ms: u64) -> Option<Vec<u8>> {
        self.prune(now_ms);
        if let Some((value, _)) = self.values.get(key) {
            return Some(value.clone());
        }
        if lease_until_ms > now_ms {
            self.put(key, SharedOutcome::Running.encode(), lease_until_ms);
        }
        None
    }

    pub(crate) fn renew(&mut self, now_ms: u64, key: &str, lease_until_ms: u64) -> bool {
        self.prune(now_ms);
        let running = SharedOutcome::Running.encode();
        if lease_until_ms <= now_ms || self.values.get(key).is_none_or(|(v, _)| *v != running) {
            return false;
        }
        self.put(key, running, lease_until_ms);
        true
    }

    pub(crate) fn record(&mut self, now_ms: u64, key: &str, outcome: Option<Vec<u8>>, expires_at_ms: u64) {
        self.prune(now_ms);
        match outcome {
            Some(bytes) if expires_at_ms > now_ms => self.put(key, bytes, expires_at_ms),
            Some(_) => {}
            None => {
                let running = SharedOutcome::Running.encode();
                if self.values.get(key).is_some_and(|(v, _)| *v == running) {
                    if let Some((_, at)) = self.values.remove(key) {
                        self.by_expiry.remove(&(at, key.to_owned()));
                    }
                }
            }
        }
    }
}
