//! Several replicas as one server: a [`Cluster`] backend shares what one process cannot keep
//! to itself.
//!
//! A cluster carries these things between the replicas of one deployment:
//!
//! - **Changes.** A replica that changes its registry (an ungated tool, resource or prompt
//!   added or removed) or calls [`Server::notify_resource_updated`] publishes the change; every
//!   other replica tells its own listeners (`list_changed` and `resources/updated` on
//!   `subscriptions/listen` streams and legacy sessions). The engine queues local changes as
//!   output ([`Engine::poll_change`](mcp_proto::Engine::poll_change)) and takes remote ones as
//!   input ([`Engine::apply_remote_change`](mcp_proto::Engine::apply_remote_change)), which it
//!   never queues again; the server layer connects the two to the bus, and tags each event
//!   with its replica's id so that it also drops its own events coming back. A change to a
//!   gated item stays on its replica (see `mcp_proto`'s `Change`).
//! - **The key ring.** Cursors and request states verify on any replica only if all sign with
//!   the same keys: [`ServerBuilder::join`](crate::ServerBuilder::join) fetches the ring (the first replica to start
//!   creates it), and [`Cluster::rotate_keys`] puts a new signing key first; every replica is
//!   told and re-reads the ring, and the keys it kept still verify what they signed.
//! - **The continuation epoch.** A `requestState` is sealed in an epoch and refused in any
//!   other ([`Config::state_epoch`](mcp_proto::Config::state_epoch)). A replica that joins
//!   takes the cluster's ([`Cluster::epoch`]), and [`Server::move_epoch`] moves it on for
//!   every replica ([`Cluster::move_epoch`], [`EventKind::EpochMoved`]): after a deploy that
//!   changes what a dialogue means, or a key compromise, no outstanding state is accepted
//!   anywhere. Shutting one replica down moves only its own epoch (see [`Server::shutdown`]).
//! - **Ended tasks.** [`Cluster::task_store`] is the [`TaskStore`] every replica writes ended
//!   tasks to, so a `tasks/get` is answered wherever it lands. A task leaves the directory
//!   only once its record is stored: one the store did not keep ([`TaskStore::put`] failed)
//!   keeps its entry until its TTL, so it is forwarded to the replica that ran it, which still
//!   holds it.
//! - **A directory.** Legacy HTTP sessions and running tasks cannot move (live streams, calls in
//!   flight, pending asks), so they are routed to their holder: each replica reports what it
//!   holds ([`Cluster::register`], from the engine's
//!   [`Engine::poll_holding`](mcp_proto::Engine::poll_holding)) and advertises where it is
//!   reached ([`ServerBuilder::cluster_advertise`](crate::ServerBuilder::cluster_advertise), [`Cluster::advertise`], every
//!   [`ADVERTISE_EVERY`] with [`ADVERTISE_TTL`]), and the HTTP endpoint forwards a request for
//!   a session or running task another live replica holds to it ([`Cluster::locate`]; the
//!   rules, headers and bounds are in the HTTP layer's `forward` module docs, and
//!   [`Limits::forward_timeout`](mcp_proto::Limits::forward_timeout)). Stickiness on
//!   `Mcp-Session-Id` at the load balancer only saves the hop.
//! - **The replay ledger.** A 2026-07-28 retry (one carrying a `requestState`) runs its handler
//!   once per cluster: before it runs, the replica claims the state ([`Cluster::claim`]); the
//!   replica that wins runs it and keeps its outcome under the state's key until the state
//!   expires ([`Cluster::record`]), and a copy sent to any other replica is answered from that
//!   record (or `in_progress` while it runs) without its handler running. The key is the
//!   SHA-256 digest of the state, looked up only after the state verified and matched its
//!   caller, so a record is only ever replayed to that caller. A claim the backend does not
//!   answer within [`CLAIM_TIMEOUT`] (500 ms) runs the retry on the replica it reached: the
//!   replica keeps serving while the backend is away, and a copy may then run once per
//!   replica. A claim is taken for [`Limits::claim_lease`](mcp_proto::Limits::claim_lease)
//!   (30 s) at a time and renewed while its call runs ([`Cluster::renew`]): a replica that
//!   dies mid-call frees its claims within a lease, and a copy then runs on another replica
//!   (the call's effects, if it had any before dying, may then happen twice).
//!
//! Not shared: a change to a gated item (see above), told only on the replica that made it.
//!
//! [`InMemoryCluster`] is the default kind, for several [`Server`]s in one process (and tests);
//! `RedisCluster` (feature `redis`) spans processes.

#[cfg(feature = "http")]
pub(crate) mod forward;
#[cfg(feature = "http")]
pub(crate) mod nonces;
#[cfg(feature = "http")]
pub(crate) mod pool;
#[cfg(feature = "redis")]
pub(crate) mod redis;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::stream::BoxStream;
use mcp_proto::{Change, ClaimResult, HeldKind, KeyRing, SharedOutcome};

use crate::handler::BoxFuture;
use crate::runtime::Runtime;
use crate::server::Server;
use crate::tasks::{InMemoryTaskStore, TaskStore};

/// What one replica tells the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterEvent {
    /// The id of the replica that raised it ([`ServerBuilder::cluster`](crate::ServerBuilder::cluster)): a replica ignores
    /// its own events when the bus hands them back.
    pub origin: Arc<str>,
    /// What happened.
    pub kind: EventKind,
}

/// What a [`ClusterEvent`] says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// A list or resource changed on the origin replica.
    Change(Change),
    /// The shared key ring changed ([`Cluster::rotate_keys`]): read it again.
    KeysRotated,
    /// The continuation epoch moved to this one ([`Cluster::move_epoch`]): every replica
    /// makes it its own, so `requestState`s sealed in an older epoch are refused everywhere.
    EpochMoved(u64),
}

/// The keys of a shared [`KeyRing`], the signing key first.
#[derive(Clone, PartialEq, Eq)]
pub struct SharedKeys(Vec<[u8; 32]>);

impl std::fmt::Debug for SharedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedKeys({} keys)", self.0.len())
    }
}

impl SharedKeys {
    /// Keys a ring is made of, the first signing; `None` when `keys` is empty.
    pub fn new(keys: Vec<[u8; 32]>) -> Option<Self> {
        (!keys.is_empty()).then_some(Self(keys))
    }

    /// A fresh ring of one key from the operating system's random source.
    pub fn random() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(Self(vec![key]))
    }

    /// The keys, the signing key first.
    pub fn keys(&self) -> &[[u8; 32]] {
        &self.0
    }

    /// `new` signs from now on; of the keys before it, the first `keep` still verify (what they
    /// signed stays valid) and the rest are dropped (what they signed is refused from now on).
    pub fn rotated(&self, new: [u8; 32], keep: usize) -> Self {
        let mut keys = vec![new];
        keys.extend(self.0.iter().take(keep).copied());
        Self(keys)
    }

    /// The engine's key ring.
    pub fn ring(&self) -> KeyRing {
        let mut keys = self.0.iter();
        let mut ring = KeyRing::new(keys.next().copied().unwrap_or([0; 32]));
        for k in keys {
            ring = ring.with_verify_key(*k);
        }
        ring
    }
}

/// Why a cluster call failed.
#[derive(Debug)]
pub struct ClusterError(pub String);

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cluster: {}", self.0)
    }
}

impl std::error::Error for ClusterError {}

/// Whether a replica is in touch with its cluster ([`Status::cluster`](crate::Status::cluster)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ClusterHealth {
    /// The server belongs to no cluster.
    #[default]
    Standalone,
    /// Events go out and come in.
    Connected,
    /// The backend cannot be reached: the replica serves on locally, its listeners hear only
    /// of its own changes, and the changes it raises wait (`queued` of them) to be published
    /// once it is back.
    Degraded {
        /// Changes waiting to be published.
        queued: usize,
    },
}

/// A backend that makes several replicas one server (see the module docs). Object-safe: the
/// server holds an `Arc<dyn Cluster>` ([`ServerBuilder::cluster`](crate::ServerBuilder::cluster)).
pub trait Cluster: Send + Sync + 'static {
    /// Tells every other replica of `event`. Never waits: an implementation queues what it
    /// cannot send now (and says in its docs what it does with more than it can queue).
    fn publish(&self, event: ClusterEvent);

    /// The events of every replica (this one's too, which the server drops), from now on, for
    /// as long as the stream is held. Called once per server, when its runtime is known.
    fn subscribe(&self) -> BoxStream<'static, ClusterEvent>;

    /// The shared key ring; the first replica to ask creates it (a random key).
    fn key_ring(&self) -> BoxFuture<Result<SharedKeys, ClusterError>>;

    /// Makes `new` the signing key of the shared ring, keeping at most `keep` of the keys
    /// before it (see [`SharedKeys::rotated`]), and tells every replica
    /// ([`EventKind::KeysRotated`]). Returns the new ring.
    fn rotate_keys(&self, new: [u8; 32], keep: usize) -> BoxFuture<Result<SharedKeys, ClusterError>>;

    /// Where ended tasks go, shared by every replica.
    fn task_store(&self) -> Arc<dyn TaskStore>;

    /// The continuation epoch every replica seals `requestState`s in
    /// ([`Config::state_epoch`](mcp_proto::Config::state_epoch)), read when a replica joins
    /// ([`ServerBuilder::join`](crate::ServerBuilder::join)); `None` when the backend keeps
    /// none (then each replica keeps its configured one). A backend that has never moved it
    /// answers `Some(0)`. The default keeps none.
    fn epoch(&self) -> BoxFuture<Result<Option<u64>, ClusterError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Moves the shared continuation epoch on by one, atomically across replicas (two moves at
    /// once give two epochs), tells every replica ([`EventKind::EpochMoved`]) and returns the
    /// new epoch. The default keeps no epoch and answers an error.
    fn move_epoch(&self) -> BoxFuture<Result<u64, ClusterError>> {
        Box::pin(std::future::ready(Err(ClusterError("this cluster backend keeps no shared epoch".into()))))
    }

    /// Whether the backend is reachable now.
    fn health(&self) -> ClusterHealth {
        ClusterHealth::Connected
    }

    /// Called once the server has a runtime, before [`subscribe`](Self::subscribe): a backend
    /// that needs background work (reconnecting, draining a queue) starts it here. The
    /// default does nothing.
    fn start(&self, rt: Arc<dyn Runtime>) {
        let _ = rt;
    }

    /// Claims the request state `key` (its digest in hex) for this replica: if nothing is kept
    /// under `key`, puts the running marker there ([`SharedOutcome::Running`], encoded) until
    /// `lease_until_ms` (unix milliseconds) and answers `None` (won); otherwise answers what is
    /// there (the running marker or an encoded [`SharedOutcome`]). Atomic across replicas: of
    /// two claims at once, one wins. The default has no shared ledger and answers an error,
    /// which runs every retry on the replica it reached.
    fn claim(&self, key: &str, lease_until_ms: u64) -> BoxFuture<Result<Option<Vec<u8>>, ClusterError>> {
        let _ = (key, lease_until_ms);
        Box::pin(std::future::ready(Err(ClusterError("this backend shares no replay ledger".into()))))
    }

    /// Keeps `outcome` (an encoded [`SharedOutcome`]) under `key` until `expires_at_ms` (unix
    /// milliseconds), in place of the running marker this replica's claim put there; `None`
    /// gives the claim back (removes the key if it still holds the running marker). Best
    /// effort: a record lost leaves the running marker until its lease ends. The default does
    /// nothing.
    fn record(&self, key: &str, outcome: Option<Vec<u8>>, expires_at_ms: u64) -> BoxFuture<()> {
        let _ = (key, outcome, expires_at_ms);
        Box::pin(std::future::ready(()))
    }

    /// Extends this replica's claim on `key` until `lease_until_ms` (unix milliseconds), if
    /// `key` still holds the running marker; answers whether it did. The replica that won a
    /// claim renews it while its call runs ([`Limits::claim_lease`](mcp_proto::Limits::claim_lease)),
    /// so a backend that implements [`claim`](Self::claim) implements this too. The default
    /// renews nothing (`false`): a claim then lapses after its first lease.
    fn renew(&self, key: &str, lease_until_ms: u64) -> BoxFuture<Result<bool, ClusterError>> {
        let _ = (key, lease_until_ms);
        Box::pin(std::future::ready(Ok(false)))
    }

    // Directory: which replica holds a legacy session or a running task, and where each
    // replica is reached (see "Routing to the holder" in the module docs). The defaults keep
    // no directory: nothing is ever forwarded, as with a backend that predates it.

    /// Says that `replica` is reached at `url` (its MCP endpoint, such as
    /// `http://10.0.0.2:8080/mcp`) for `ttl` from now. Every replica that can be forwarded to
    /// repeats it well within `ttl` ([`ADVERTISE_EVERY`]): once it stops, its entries stop
    /// resolving ([`locate`](Self::locate)) when `ttl` runs out. The default does nothing.
    fn advertise(&self, replica: &str, url: &str, ttl: Duration) -> BoxFuture<Result<(), ClusterError>> {
        let _ = (replica, url, ttl);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Records that `replica` holds the session or task `id`, for `ttl` from now (the holder
    /// repeats it while it holds it, [`ENTRY_REFRESH`]). The default does nothing.
    fn register(
        &self,
        kind: HeldKind,
        id: &str,
        replica: &str,
        ttl: Duration,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let _ = (kind, id, replica, ttl);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Forgets who holds the session or task `id`: it ended (called by its holder only; a
    /// replica that cannot reach a holder drops nothing). The default does nothing.
    fn unregister(&self, kind: HeldKind, id: &str) -> BoxFuture<Result<(), ClusterError>> {
        let _ = (kind, id);
        Box::pin(std::future::ready(Ok(())))
    }

    /// The replica holding the session or task `id` and where it is reached, if an entry names
    /// one whose advertisement is still live; `None` when there is no such entry, or its
    /// replica's advertisement expired (it is gone). An error when the lookup could not be made:
    /// the request is then answered 503 to retry, never as for an unknown id. The default:
    /// always `None`.
    fn locate(&self, kind: HeldKind, id: &str) -> BoxFuture<Result<Option<Located>, ClusterError>> {
        let _ = (kind, id);
        Box::pin(std::future::ready(Ok(None)))
    }
}

/// Where a session or a task is held ([`Cluster::locate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The id of the replica holding it.
    pub replica: Arc<str>,
    /// The URL of that replica's MCP endpoint, as it advertised it.
    pub url: String,
}

/// How long a replica's advertisement lasts: 3 s. A replica that stops (crashes, is cut off
/// from the cluster) stops being forwarded to at most this long after its last heartbeat.
pub const ADVERTISE_TTL: Duration = Duration::from_secs(3);

/// How often a replica repeats its advertisement: every second, so that two missed heartbeats
/// still leave it live.
pub const ADVERTISE_EVERY: Duration = Duration::from_secs(1);

/// How long a directory entry lasts unless its holder repeats it: 10 minutes. Entries of a
/// replica that died without unregistering them (and whose advertisement therefore expired
/// already) are forgotten by then.
pub const ENTRY_TTL: Duration = Duration::from_secs(10 * 60);

/// How often a holder repeats the entries of what it still holds: every 4 minutes, well within
/// [`ENTRY_TTL`].
pub const ENTRY_REFRESH: Duration = Duration::from_secs(4 * 60);

/// The default [`Cluster`]: the replicas are [`Server`]s of one process that share this
/// value (one `Arc`). Events are handed over through memory, the key ring is made on first
/// use, and tasks are an [`InMemoryTaskStore`].
///
/// Each subscriber has a queue of [`InMemoryCluster::FEED_CAPACITY`] events; an event for a
/// subscriber whose queue is full is dropped for it and counted ([`dropped`](Self::dropped)):
/// its listeners miss that change (a later one tells them to re-list all the same).
pub struct InMemoryCluster {
    subscribers: Mutex<Vec<async_channel::Sender<ClusterEvent>>>,
    keys: Mutex<Option<SharedKeys>>,
    /// The shared continuation epoch ([`Cluster::epoch`]).
    epoch: std::sync::atomic::AtomicU64,
    tasks: Arc<InMemoryTaskStore>,
    dropped: std::sync::atomic::AtomicU64,
    /// The shared replay ledger: each state's key, what is kept under it, and until when.
    ledger: Mutex<LedgerMap>,
    /// The directory: replicas' addresses and who holds what, each with its expiry.
    directory: Mutex<Directory>,
    /// The clock expiries are measured on: the first server's runtime ([`Cluster::start`]).
    clock: OnceLock<Arc<dyn Runtime>>,
}

/// [`InMemoryCluster`]'s directory.
#[derive(Default)]
struct Directory {
    replicas: HashMap<Arc<str>, (String, Instant)>,
    entries: HashMap<(HeldKind, String), (Arc<str>, Instant)>,
    /// When expired entries were last dropped ([`InMemoryCluster::sweep`]).
    swept: Option<Instant>,
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
    fn now(&self) -> Instant {
        match self.clock.get() {
            Some(rt) => rt.now(),
            None => Instant::now(),
        }
    }

    /// Runs `f` on the directory; a poisoned lock (a panic while it was held) is an error.
    fn with_directory<T>(&self, f: impl FnOnce(&mut Directory, Instant) -> T) -> Result<T, ClusterError> {
        let now = self.now();
        let mut d = self.directory.lock().map_err(|_| ClusterError("directory lock poisoned".into()))?;
        Ok(f(&mut d, now))
    }

    /// Drops what expired, at most once per [`ADVERTISE_EVERY`]: a sweep walks the whole
    /// directory, so sweeping on every write would make each write cost the directory's size.
    /// Called on every write, so the maps hold at most what was written within the longest TTL
    /// and one interval (lookups check expiry themselves).
    fn sweep(d: &mut Directory, now: Instant) {
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
struct LedgerMap {
    values: BTreeMap<String, (Vec<u8>, u64)>,
    by_expiry: std::collections::BTreeSet<(u64, String)>,
}

impl LedgerMap {
    fn prune(&mut self, now_ms: u64) {
        while let Some((at, key)) = self.by_expiry.first().cloned() {
            if at > now_ms {
                break;
            }
            self.by_expiry.remove(&(at, key.clone()));
            self.values.remove(&key);
        }
    }

    fn put(&mut self, key: &str, value: Vec<u8>, until_ms: u64) {
        if let Some((_, at)) = self.values.insert(key.to_owned(), (value, until_ms)) {
            self.by_expiry.remove(&(at, key.to_owned()));
        }
        self.by_expiry.insert((until_ms, key.to_owned()));
    }

    fn claim(&mut self, now_ms: u64, key: &str, lease_until_ms: u64) -> Option<Vec<u8>> {
        self.prune(now_ms);
        if let Some((value, _)) = self.values.get(key) {
            return Some(value.clone());
        }
        if lease_until_ms > now_ms {
            self.put(key, SharedOutcome::Running.encode(), lease_until_ms);
        }
        None
    }

    fn renew(&mut self, now_ms: u64, key: &str, lease_until_ms: u64) -> bool {
        self.prune(now_ms);
        let running = SharedOutcome::Running.encode();
        if lease_until_ms <= now_ms || self.values.get(key).is_none_or(|(v, _)| *v != running) {
            return false;
        }
        self.put(key, running, lease_until_ms);
        true
    }

    fn record(&mut self, now_ms: u64, key: &str, outcome: Option<Vec<u8>>, expires_at_ms: u64) {
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

/// `d` in whole milliseconds, saturating.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How long a claim in the shared replay ledger may take: 500 ms, as every cluster command.
/// A backend slower than that, or failing, counts as [`ClaimResult::Unavailable`]: the retry
/// runs on the replica it reached. A record that takes longer is given up (the running marker
/// then stays until its lease ends).
pub const CLAIM_TIMEOUT: Duration = Duration::from_millis(500);

/// A server's place in its cluster.
#[derive(Clone)]
pub(crate) struct Membership {
    pub(crate) cluster: Arc<dyn Cluster>,
    pub(crate) replica: Arc<str>,
    /// The URL other replicas forward to ([`ServerBuilder::cluster_advertise`](crate::ServerBuilder::cluster_advertise)).
    pub(crate) advertise: Option<Arc<str>>,
    /// The sessions and running tasks this replica holds, as registered in the directory: what
    /// the heartbeat registers again ([`ENTRY_REFRESH`]).
    pub(crate) held: Arc<Mutex<std::collections::HashSet<(HeldKind, String)>>>,
    /// Registrations of tasks spawned and not yet done, by task id: the answer that names a new
    /// task waits for its own ([`Membership::registered`]), so the client's next request finds
    /// it through any replica; no other request waits for it. The channel carries nothing: it
    /// closes when its registration is done (its sender dropped).
    pub(crate) registering: Arc<Mutex<HashMap<String, async_channel::Receiver<()>>>>,
    /// The shared-ledger claims this replica won and renews while their calls run, by key:
    /// a claim leaves when its record goes out ([`Server::share_ledger`]), which ends its
    /// renewals ([`Limits::claim_lease`](mcp_proto::Limits::claim_lease)).
    pub(crate) leases: Arc<Mutex<std::collections::HashSet<String>>>,
    /// The nonces of the `Mcp-Forwarded-Peer` tokens this replica accepted: each is accepted
    /// once (see the `forward` module).
    #[cfg(feature = "http")]
    pub(crate) peer_nonces: Arc<nonces::PeerNonces>,
    /// The kept-alive connections to the holders this replica forwards to (see "Costs" in the
    /// `forward` module).
    #[cfg(feature = "http")]
    pub(crate) forward_pool: Arc<pool::ForwardPool>,
}

impl Membership {
    /// Registers `id` as held here, unless this replica is reached nowhere (no advertised
    /// URL: nothing could be forwarded to it). A failure is logged: the session or task is
    /// then served only where it is (the client's stickiness still finds it).
    pub(crate) async fn hold(&self, kind: HeldKind, id: &str) {
        if self.advertise.is_none() {
            return;
        }
        if let Err(e) = self.cluster.register(kind, id, &self.replica, ENTRY_TTL).await {
            tracing::warn!(replica = %self.replica, kind = kind.as_str(), error = %e, "cannot register in the cluster directory");
        }
    }

    #[cfg(feature = "http")]
    /// Waits until the registration of the task `task_id` spawned so far is done, for at most
    /// `within`: one in-memory write or one backend round trip. Returns at once for a task
    /// whose registration is done or was never spawned here.
    pub(crate) async fn registered(&self, rt: &Arc<dyn Runtime>, task_id: &str, within: Duration) {
        let pending = self.registering.lock().ok().and_then(|r| r.get(task_id).cloned());
        let Some(done) = pending else { return };
        let deadline = crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(within));
        futures_util::future::select(Box::pin(async move { done.recv().await }), deadline).await;
    }

    /// Renews the claim `key` every third of `lease` (by one `lease` each time, never past
    /// `until_ms`) until its record goes out (the key leaves [`Membership::leases`]), the
    /// backend says the claim is no longer held as this replica put it, or `until_ms` is
    /// reached. A renewal that fails or is slower than [`CLAIM_TIMEOUT`] is tried again at the
    /// next third: the lease still covers two of them.
    pub(crate) fn renew_claim(&self, rt: Arc<dyn Runtime>, key: String, until_ms: u64, lease: Duration) {
        if let Ok(mut leases) = self.leases.lock() {
            leases.insert(key.clone());
        }
        let m = self.clone();
        let every = (lease / 3).max(Duration::from_millis(1));
        rt.clone().spawn(Box::pin(async move {
            use futures_util::future::{select, Either};
            let held = |m: &Membership| m.leases.lock().is_ok_and(|l| l.contains(&key));
            loop {
                crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(every)).await;
                if !held(&m) {
                    return;
                }
                let to = until_ms.min(crate::runtime::unix_ms().saturating_add(ms(lease)));
                let timeout = crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(CLAIM_TIMEOUT));
                match select(m.cluster.renew(&key, to), timeout).await {
                    Either::Left((Ok(true), _)) if to < until_ms => {}
                    Either::Left((Ok(_), _)) => break,
                    Either::Left((Err(e), _)) => {
                        tracing::debug!(replica = %m.replica, error = %e, "cluster: cannot renew a claim; trying again")
                    }
                    Either::Right(_) => {
                        tracing::debug!(replica = %m.replica, "cluster: renewing a claim timed out; trying again")
                    }
                }
            }
            if let Ok(mut leases) = m.leases.lock() {
                leases.remove(&key);
            }
        }));
    }

    /// Drops the directory entry of `id` (a failure is logged; the entry expires anyway).
    pub(crate) async fn forget(&self, kind: HeldKind, id: &str) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(&(kind, id.to_owned()));
        }
        if let Err(e) = self.cluster.unregister(kind, id).await {
            tracing::warn!(replica = %self.replica, kind = kind.as_str(), error = %e, "cannot unregister from the cluster directory");
        }
    }

    #[cfg(feature = "http")]
    /// Advertises this replica, and every [`ENTRY_REFRESH`] registers again what it holds,
    /// until `stop` completes (the server shuts down): then its entries stop resolving within
    /// [`ADVERTISE_TTL`].
    async fn heartbeat(self, rt: Arc<dyn Runtime>, stop: impl std::future::Future<Output = ()>) {
        let Some(url) = self.advertise.clone() else { return };
        let beat = async {
            let mut refreshed = rt.now();
            loop {
                if let Err(e) = self.cluster.advertise(&self.replica, &url, ADVERTISE_TTL).await {
                    tracing::warn!(replica = %self.replica, error = %e, "cannot advertise in the cluster directory");
                }
                let now = rt.now();
                if now.saturating_duration_since(refreshed) >= ENTRY_REFRESH {
                    refreshed = now;
                    let held: Vec<_> =
                        self.held.lock().map(|h| h.iter().cloned().collect()).unwrap_or_default();
                    for (kind, id) in held {
                        self.hold(kind, &id).await;
                    }
                }
                crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(ADVERTISE_EVERY)).await;
            }
        };
        futures_util::future::select(std::pin::pin!(beat), std::pin::pin!(stop)).await;
    }
}

impl Server {
    /// Publishes what the engine queued to publish. Called wherever the engine's output is
    /// drained, so local changes leave in the order they were made.
    pub(crate) fn publish_changes(&self, st: &mut crate::driver::State) {
        let Some(m) = st.cluster.clone() else { return };
        while let Some(change) = st.engine.poll_change() {
            m.cluster.publish(ClusterEvent { origin: m.replica.clone(), kind: EventKind::Change(change) });
        }
    }

    /// Hands the engine's claims and records to the shared replay ledger: each claim runs on
    /// its own task, bounded by [`CLAIM_TIMEOUT`], and its result goes back to the engine
    /// through the control channel as a handler's completion does. Called wherever the
    /// engine's output is drained. True when it answered claims at once (no runtime), which
    /// leaves output to drain.
    pub(crate) fn share_ledger(&self, st: &mut crate::driver::State) -> bool {
        let Some(m) = st.cluster.clone() else {
            return false;
        };
        let Some(rt) = self.shared.rt.get().cloned() else {
            // No runtime yet: nothing can be claimed, so nothing waits. Such a server has no
            // connection either; this only keeps the engine's queues from stranding a call.
            let mut answered = false;
            while let Some(claim) = st.engine.poll_claim() {
                st.engine.claim_result(self.now(), claim.call, ClaimResult::Unavailable);
                answered = true;
            }
            while st.engine.poll_record().is_some() {}
            return answered;
        };
        let lease = self.limits().claim_lease_time();
        while let Some(claim) = st.engine.poll_claim() {
            let server = self.clone();
            // The engine's lease is the longest the claim may hold; it is taken for one
            // `claim_lease` at a time and renewed while the call runs, so that a replica dying
            // mid-call frees it soon.
            let first = claim.lease_until_ms.min(crate::runtime::unix_ms().saturating_add(ms(lease)));
            let asked = m.cluster.claim(&claim.key, first);
            let deadline = crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(CLAIM_TIMEOUT));
            let replica = m.replica.clone();
            let (m, rt) = (m.clone(), rt.clone());
            rt.clone().spawn(Box::pin(async move {
                use futures_util::future::{select, Either};
                let result = match select(asked, deadline).await {
                    Either::Left((Ok(None), _)) => {
                        if first < claim.lease_until_ms {
                            m.renew_claim(rt, claim.key.clone(), claim.lease_until_ms, lease);
                        }
                        ClaimResult::Won
                    }
                    Either::Left((Ok(Some(bytes)), _)) => match SharedOutcome::decode(&bytes) {
                        Some(outcome) => ClaimResult::Taken(outcome),
                        None => {
                            tracing::warn!(replica = %replica, key = %claim.key, "cluster: the replay ledger holds an unreadable record; the retry runs here");
                            ClaimResult::Unavailable
                        }
                    },
                    Either::Left((Err(e), _)) => {
                        tracing::debug!(replica = %replica, error = %e, "cluster: claim failed; the retry runs here");
                        ClaimResult::Unavailable
                    }
                    Either::Right(_) => {
                        tracing::debug!(replica = %replica, "cluster: claim timed out; the retry runs here");
                        ClaimResult::Unavailable
                    }
                };
                let call = claim.call;
                server.submit(Box::new(move |_: &Server, st: &mut crate::driver::State, now: std::time::Instant| {
                    st.engine.claim_result(now, call, result);
                }));
            }));
        }
        while let Some(record) = st.engine.poll_record() {
            if let Ok(mut leases) = m.leases.lock() {
                leases.remove(&record.key);
            }
            let write =
                m.cluster.record(&record.key, record.outcome.map(|o| o.encode()), record.expires_at_ms);
            let deadline = crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(CLAIM_TIMEOUT));
            rt.spawn(Box::pin(async move {
                futures_util::future::select(write, deadline).await;
            }));
        }
        false
    }

    /// Reports to the directory what the engine began or stopped holding.
    pub(crate) fn report_holdings(&self, st: &mut crate::driver::State) {
        let Some(m) = st.cluster.clone() else {
            while st.engine.poll_holding().is_some() {}
            return;
        };
        let Some(rt) = self.shared.rt.get() else { return };
        let has_store = st.task_store.is_some();
        while let Some(h) = st.engine.poll_holding() {
            let m = m.clone();
            if h.held {
                if let Ok(mut held) = m.held.lock() {
                    held.insert((h.kind, h.id.clone()));
                }
                // Only a task's answer waits for its entry: a session's is registered before
                // its `initialize` answer leaves (the HTTP layer's `register_minted`).
                let done = (h.kind == HeldKind::Task).then(|| {
                    let (tx, rx) = async_channel::bounded::<()>(1);
                    if let Ok(mut r) = m.registering.lock() {
                        r.insert(h.id.clone(), rx);
                    }
                    tx
                });
                rt.spawn(Box::pin(async move {
                    m.hold(h.kind, &h.id).await;
                    if done.is_some() {
                        if let Ok(mut r) = m.registering.lock() {
                            r.remove(&h.id);
                        }
                    }
                    drop(done);
                }));
            } else if h.kind == HeldKind::Session || !has_store {
                // An ended task with a store is forgotten once stored (see `pump`).
                rt.spawn(Box::pin(async move { m.forget(h.kind, &h.id).await }));
            }
        }
    }

    /// Starts the backend and the task that applies remote events, on the server's runtime.
    pub(crate) fn join_cluster(&self, rt: &Arc<dyn Runtime>) {
        let Some(m) = self.lock().cluster.clone() else { return };
        m.cluster.start(rt.clone());
        #[cfg(feature = "http")]
        rt.spawn(Box::pin(m.clone().heartbeat(rt.clone(), self.closing())));
        let mut feed = m.cluster.subscribe();
        let server = self.clone();
        rt.spawn(Box::pin(async move {
            use futures_util::StreamExt;
            while let Some(event) = feed.next().await {
                if event.origin == m.replica {
                    continue;
                }
                match event.kind {
                    EventKind::Change(change) => {
                        let mut st = server.lock();
                        let now = server.now();
                        st.engine.apply_remote_change(now, &change);
                        server.release(st);
                    }
                    EventKind::KeysRotated => match m.cluster.key_ring().await {
                        Ok(keys) => {
                            server.lock().engine.set_keys(keys.ring());
                            tracing::info!(replica = %m.replica, keys = keys.keys().len(), "key ring rotated");
                        }
                        Err(e) => tracing::warn!(replica = %m.replica, error = %e, "cannot read the rotated key ring"),
                    },
                    EventKind::EpochMoved(epoch) => {
                        server.adopt_epoch(epoch);
                    }
                }
            }
        }));
    }

    /// The replica id this server has in its cluster ([`ServerBuilder::cluster`](crate::ServerBuilder::cluster)), if any.
    pub fn replica(&self) -> Option<Arc<str>> {
        self.lock().cluster.as_ref().map(|m| m.replica.clone())
    }

    /// Rotates the cluster's shared key ring (see [`Cluster::rotate_keys`]) with a fresh random
    /// key, keeping `keep` older keys, and uses the new ring here at once (the other replicas
    /// as the event reaches them). An error when the server is in no cluster.
    pub async fn rotate_cluster_keys(&self, keep: usize) -> Result<(), ClusterError> {
        let Some(m) = self.lock().cluster.clone() else {
            return Err(ClusterError("this server is in no cluster".into()));
        };
        let fresh =
            SharedKeys::random().map_err(|e| ClusterError(format!("cannot draw a random key: {e}")))?;
        let keys = m.cluster.rotate_keys(fresh.0[0], keep).await?;
        self.lock().engine.set_keys(keys.ring());
        Ok(())
    }
}

impl crate::ServerBuilder {
    /// Makes the server replica `replica` of `cluster` (see the [module docs](crate::cluster)):
    /// changes are shared with the other replicas, and ended tasks go to
    /// [`Cluster::task_store`] (replacing any [`task_store`](Self::task_store) set before).
    /// Build with [`join`](Self::join) to take the shared key ring too. `replica` names it in
    /// logs and [`Server::replica`]; give each replica its own.
    pub fn cluster(mut self, cluster: Arc<dyn Cluster>, replica: impl Into<String>) -> Self {
        self.task_store = Some(cluster.task_store());
        self.cluster = Some(Membership {
            cluster,
            replica: Arc::from(replica.into()),
            advertise: None,
            held: Arc::default(),
            registering: Arc::default(),
            leases: Arc::default(),
            #[cfg(feature = "http")]
            peer_nonces: Arc::default(),
            #[cfg(feature = "http")]
            forward_pool: Arc::default(),
        });
        self
    }

    /// The URL of this replica's MCP endpoint as the other replicas of its cluster reach it
    /// (`http://HOST:PORT/PATH`; plain HTTP only), so that they forward to it the requests for
    /// the legacy sessions and running tasks it holds (see "Routing to the holder" in the
    /// [module docs](crate::cluster)). Without it this replica still forwards to the others,
    /// but nothing is forwarded to it: its sessions and tasks are served only when requests
    /// reach it directly. Without a [`cluster`](Self::cluster) it means nothing.
    pub fn cluster_advertise(mut self, url: impl Into<String>) -> Self {
        self.advertise = Some(Arc::from(url.into()));
        self
    }

    /// [`build`](Self::build) with the cluster's shared key ring ([`Cluster::key_ring`]) and
    /// continuation epoch ([`Cluster::epoch`], when the backend keeps one), so that every
    /// replica signs and verifies cursors and request states alike. Without a cluster it is
    /// `build`.
    pub async fn join(self) -> Result<Server, crate::BuildError> {
        let Some(m) = self.cluster.clone() else { return self.build() };
        let keys = m.cluster.key_ring().await.map_err(crate::BuildError::Cluster)?;
        let epoch = m.cluster.epoch().await.map_err(crate::BuildError::Cluster)?;
        let mut builder = self.keys(keys.ring());
        if let Some(epoch) = epoch {
            builder.config_mut().state_epoch = epoch;
        }
        builder.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[test]
    fn one_claim_wins_the_others_see_what_is_kept_until_it_expires() {
        let mut l = LedgerMap::default();
        let running = SharedOutcome::Running.encode();
        assert_eq!(l.claim(1000, "k", 5000), None, "the first claim wins");
        assert_eq!(l.claim(1001, "k", 5000), Some(running.clone()), "a second sees the marker");
        let kept = SharedOutcome::Kept { tail: b",\"result\":{}}".to_vec(), fault: None }.encode();
        l.record(1002, "k", Some(kept.clone()), 9000);
        assert_eq!(l.claim(4000, "k", 5000), Some(kept.clone()));
        assert_eq!(l.claim(8999, "k", 9500), Some(kept), "kept past the lease, until the state expires");
        assert_eq!(l.claim(9000, "k", 9500), None, "expired: forgotten, and claimed afresh");
        assert_eq!(l.values.len(), 1);
        assert_eq!(l.by_expiry.len(), 1);
        // A lease that lapsed without a record: claimable again.
        assert_eq!(l.claim(9500, "k", 20_000), None);
        // Given back: only the running marker goes, never an outcome.
        l.record(9600, "k", None, 20_000);
        assert_eq!(l.claim(9700, "k", 20_000), None);
        let interrupted = SharedOutcome::Interrupted.encode();
        l.record(9800, "k", Some(interrupted.clone()), 20_000);
        l.record(9900, "k", None, 20_000);
        assert_eq!(l.claim(9950, "k", 20_000), Some(interrupted));
        // A renewal extends a running claim only.
        assert_eq!(l.claim(10_000, "r", 11_000), None);
        assert!(l.renew(10_500, "r", 12_000));
        assert_eq!(l.claim(11_500, "r", 13_000), Some(running.clone()), "held past its first lease");
        assert!(!l.renew(11_600, "k", 20_000), "an outcome is not renewed");
        assert!(!l.renew(11_700, "nobody", 20_000));
        assert!(!l.renew(12_500, "r", 13_000), "a lapsed claim is not revived");
        // Nothing outlives its time.
        l.record(30_000, "other", Some(vec![1, 3]), 29_000);
        assert_eq!(l.claim(30_001, "x", 30_000), None, "a lease already over is not kept");
        assert!(l.values.is_empty() && l.by_expiry.is_empty());
    }

    #[test]
    fn the_in_memory_cluster_shares_claims_between_its_replicas() {
        let cluster = InMemoryCluster::default();
        let far = crate::runtime::unix_ms() + 60_000;
        let claim = |c: &InMemoryCluster| c.claim("state", far).now_or_never().unwrap().unwrap();
        assert_eq!(claim(&cluster), None);
        assert_eq!(claim(&cluster), Some(SharedOutcome::Running.encode()));
        let kept = SharedOutcome::TooLarge.encode();
        cluster.record("state", Some(kept.clone()), far).now_or_never().unwrap();
        assert_eq!(claim(&cluster), Some(kept));
    }

    /// A runtime whose clock the test moves; it runs nothing.
    struct Clock(Mutex<Instant>);

    impl Runtime for Clock {
        fn spawn(&self, _: BoxFuture<()>) {}
        fn sleep_until(&self, _: Instant) -> BoxFuture<()> {
            Box::pin(std::future::pending())
        }
        fn now(&self) -> Instant {
            *self.0.lock().unwrap()
        }
    }

    fn ready<T>(f: BoxFuture<T>) -> T {
        futures_util::FutureExt::now_or_never(f).expect("the in-memory directory never waits")
    }

    #[test]
    fn entries_resolve_while_their_replica_advertises_and_their_ttl_lasts() {
        let c = InMemoryCluster::default();
        let clock = Arc::new(Clock(Mutex::new(Instant::now())));
        c.start(clock.clone());
        let advance = |d: Duration| *clock.0.lock().unwrap() += d;
        ready(c.register(HeldKind::Session, "s1", "a", ENTRY_TTL)).unwrap();
        assert_eq!(ready(c.locate(HeldKind::Session, "s1")).unwrap(), None, "a has not advertised");
        ready(c.advertise("a", "http://a/mcp", ADVERTISE_TTL)).unwrap();
        let at_a = Some(Located { replica: Arc::from("a"), url: "http://a/mcp".into() });
        assert_eq!(ready(c.locate(HeldKind::Session, "s1")).unwrap(), at_a);
        assert_eq!(ready(c.locate(HeldKind::Task, "s1")).unwrap(), None, "kinds are apart");
        // a stops advertising: its entries stop resolving once the advertisement expires.
        advance(ADVERTISE_TTL + Duration::from_millis(1));
        assert_eq!(ready(c.locate(HeldKind::Session, "s1")).unwrap(), None);
        ready(c.advertise("a", "http://a/mcp", ADVERTISE_TTL)).unwrap();
        assert_eq!(ready(c.locate(HeldKind::Session, "s1")).unwrap(), at_a, "back once it advertises");
        ready(c.unregister(HeldKind::Session, "s1")).unwrap();
        assert_eq!(ready(c.locate(HeldKind::Session, "s1")).unwrap(), None);
        // An entry its holder does not repeat expires.
        ready(c.register(HeldKind::Task, "t1", "a", Duration::from_secs(2))).unwrap();
        advance(Duration::from_secs(1));
        ready(c.advertise("a", "http://a/mcp", ADVERTISE_TTL)).unwrap();
        assert!(ready(c.locate(HeldKind::Task, "t1")).unwrap().is_some());
        advance(Duration::from_secs(1));
        assert_eq!(ready(c.locate(HeldKind::Task, "t1")).unwrap(), None);
    }
}
