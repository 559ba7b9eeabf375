//! Several replicas as one server: a [`Cluster`] backend shares what one process cannot keep
//! to itself.
//!
//! A cluster carries these things between the replicas of one deployment:
//!
//! - **Changes.** A replica that changes its registry (an ungated tool, resource or prompt
//!   added or removed) or calls [`Server::notify_resource_updated`](crate::Server::notify_resource_updated) publishes the change; every
//!   other replica tells its own listeners (`list_changed` and `resources/updated` on
//!   `subscriptions/listen` streams and legacy sessions). The engine queues local changes as
//!   output ([`Output::Change`](mcp_proto::Output::Change)) and takes remote ones as
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
//!   takes the cluster's ([`Cluster::epoch`]), and [`Server::move_epoch`](crate::Server::move_epoch) moves it on for
//!   every replica ([`Cluster::move_epoch`], [`EventKind::EpochMoved`]): after a deploy that
//!   changes what a dialogue means, or a key compromise, no outstanding state is accepted
//!   anywhere. Shutting one replica down moves only its own epoch (see [`Server::shutdown`](crate::Server::shutdown)).
//! - **Ended tasks.** [`Cluster::task_store`] is the [`TaskStore`] every replica writes ended
//!   tasks to, so a `tasks/get` is answered wherever it lands. A task leaves the directory
//!   only once its record is stored: one the store did not keep ([`TaskStore::put`] failed)
//!   keeps its entry until its TTL, so it is forwarded to the replica that ran it, which still
//!   holds it.
//! - **A directory.** Legacy HTTP sessions and running tasks cannot move (live streams, calls in
//!   flight, pending asks), so they are routed to their holder: each replica reports what it
//!   holds ([`Cluster::register`], from the engine's
//!   [`Output::Holding`](mcp_proto::Output::Holding)) and advertises where it is
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
//! [`InMemoryCluster`] is the default kind, for several [`Server`](crate::Server)s in one process (and tests);
//! `RedisCluster` (feature `redis`) spans processes.

#[cfg(feature = "http")]
pub(crate) mod forward;
mod membership;
mod memory;
#[cfg(feature = "http")]
pub(crate) mod nonces;
#[cfg(feature = "http")]
pub(crate) mod pool;
#[cfg(feature = "redis")]
pub(crate) mod redis;

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::BoxStream;
use mcp_proto::{Change, HeldKind, KeyRing};

use crate::handler::BoxFuture;
use crate::runtime::Runtime;
use crate::tasks::TaskStore;

pub(crate) use membership::Membership;
pub use membership::CLAIM_TIMEOUT;
pub use memory::InMemoryCluster;
#[cfg(test)]
use memory::LedgerMap;

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
    /// under `key`, puts the running marker there ([`SharedOutcome::Running`](mcp_proto::SharedOutcome::Running), encoded) until
    /// `lease_until_ms` (unix milliseconds) and answers `None` (won); otherwise answers what is
    /// there (the running marker or an encoded [`SharedOutcome`](mcp_proto::SharedOutcome)). Atomic across replicas: of
    /// two claims at once, one wins. The default has no shared ledger and answers an error,
    /// which runs every retry on the replica it reached.
    fn claim(&self, key: &str, lease_until_ms: u64) -> BoxFuture<Result<Option<Vec<u8>>, ClusterError>> {
        let _ = (key, lease_until_ms);
        Box::pin(std::future::ready(Err(ClusterError("this backend shares no replay ledger".into()))))
    }

    /// Keeps `outcome` (an encoded [`SharedOutcome`](mcp_proto::SharedOutcome)) under `key` until `expires_at_ms` (unix
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use mcp_proto::SharedOutcome;
    use std::sync::Mutex;
    use std::time::Instant;

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
