//! [`RedisCluster`]: a [`Cluster`] on a Redis server (feature `redis`); its layout and failure
//! behaviour are described on the type.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use mcp_proto::{Change, ChangedList, HandlerError, HeldKind, SharedOutcome, TaskRecord};
use serde_json::{json, Map, Value};

use crate::cluster::{Cluster, ClusterError, ClusterEvent, ClusterHealth, EventKind, Located, SharedKeys};
use crate::handler::BoxFuture;
use crate::runtime::Runtime;
use crate::tasks::{StoreError, TaskStore};

/// A [`Cluster`] on Redis. Cheap to clone: clones share the connection and the queue.
///
/// # Layout and failures
///
/// Layout, for a cluster named `N`:
///
/// - events go over pub/sub on the channel `mcp:N:events`, one JSON message each
///   (`{"origin", "event": "tools"|"resources"|"prompts"|"updated"|"keys"|"epoch", "uri"?,
///   "epoch"?}`);
/// - the continuation epoch is the integer key `mcp:N:epoch` (absent: 0), read by a joining
///   replica and moved by `INCR` ([`Cluster::move_epoch`]), so two moves at once give two
///   epochs;
/// - the key ring is the string key `mcp:N:keys`: the keys in hex, comma-separated, the signing
///   key first. The first replica to start creates it (`SET NX`, so two replicas starting at
///   once still agree); [`Cluster::rotate_keys`] rewrites it (two rotations at the same moment:
///   the last write wins, and both replicas then read that one);
/// - an ended task is the key `mcp:N:task:["owner","id"]` holding its record as JSON, with
///   the record's TTL (`PX`): Redis forgets it when the engine would. What ended tasks may take
///   is bounded ([`RedisCluster::with_task_budget`], 64 MiB by default, shared fairly among
///   callers as the [`TaskStore`](crate::TaskStore#bounds) docs say), in bookkeeping written with each
///   record by one script (`EVAL`), so replicas writing at once still keep to it: the sorted
///   set `mcp:N:task:index` (each record's `["owner","id"]` by expiry), one per owner
///   `mcp:N:task:of:<owner>` (the same, for its oldest), the sorted set `mcp:N:task:owners`
///   (bytes held by owner), the hash `mcp:N:task:sizes` and the counter `mcp:N:task:total`.
///   The script forgets what expired (by the writing replica's clock: replicas' clocks are
///   taken to agree within a few seconds) and makes room by the fair-share rule, or refuses
///   the record (`put` then fails with [`StoreError::Full`](crate::StoreError::Full)); the
///   bookkeeping keys expire with the longest-lived record they count. The script names keys
///   of other owners it was not passed, which a standalone Redis allows (Redis Cluster is not
///   supported). A record Redis itself evicts (`maxmemory`) stays counted until its expiry;
/// - the replay ledger is one key per claimed request state, `mcp:N:ledger:<digest>` (the
///   state's SHA-256 digest in hex), holding an encoded `SharedOutcome` (a few bytes for the
///   running marker, the answer's bytes for a kept outcome). A claim is
///   `SET key <running> NX PXAT <lease>`, then `GET key` when it was taken; a renewal is
///   `PEXPIREAT` if the key still holds the running marker (one `EVAL`); a record is
///   `SET key <outcome> PXAT <expiry of the state>`; a claim given back deletes the key if it
///   still holds the running marker (one `EVAL`). Redis forgets each key when its state
///   expires, so the ledger needs no pruning. A claim that fails or takes longer than
///   [`RedisCluster::TIMEOUT`] runs the retry on the replica it reached;
/// - the directory (routing to the holder): a replica's advertisement is the key
///   `mcp:N:replica:<replica>` holding its URL with the heartbeat TTL (`PX`), and who holds a
///   legacy session or a running task is the key `mcp:N:held:session:<id>` or
///   `mcp:N:held:task:<id>` holding the replica id with the entry TTL (`PX`). A lookup is one
///   `GET` of the entry and one of the replica it names.
///
/// The runtime Redis runs on is the one the shim's `redis` feature turns on (mcp-tokio: tokio,
/// mcp-smol: smol); with both compiled in, the `redis` crate uses tokio inside a tokio runtime
/// and smol elsewhere.
///
/// # Failure
///
/// Every command waits at most [`RedisCluster::TIMEOUT`] (500 ms). When Redis cannot be
/// reached, or does not answer in time, the replica keeps serving: its own listeners hear of
/// its own changes at once, `Status::cluster` reports [`ClusterHealth::Degraded`], and a
/// background task reconnects with backoff (100 ms doubling to 5 s). Changes raised meanwhile
/// wait in a queue of [`RedisCluster::QUEUE_CAPACITY`] (1024) events, equal ones coalesced,
/// and are published once Redis is back; past the bound the oldest waiting event is dropped
/// and counted ([`RedisCluster::dropped`]), and the other replicas' listeners miss it. Events
/// published by others while this replica's subscription was down are lost to it (pub/sub
/// keeps nothing): once it is back, it tells its own listeners that every list changed, so
/// they re-list; a `resources/updated` it missed is not repeated. A task that ends while Redis
/// is down is not stored (`put` fails with [`StoreError::Unavailable`](crate::StoreError::Unavailable)):
/// its directory entry stays, so the other replicas forward a `tasks/get` for it to the engine
/// that ran it, which answers for it until its TTL.
#[derive(Clone)]
pub struct RedisCluster {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    channel: String,
    keys_key: String,
    /// The shared continuation epoch, an integer (absent: 0).
    epoch_key: String,
    task_prefix: String,
    /// `mcp:N:` : the directory's keys follow it.
    prefix: String,
    /// The command connection, made on first use and dropped on any failure.
    conn: futures_util::lock::Mutex<Option<redis::aio::MultiplexedConnection>>,
    /// Events waiting to be published, oldest first.
    queue: Mutex<VecDeque<ClusterEvent>>,
    /// Rung when an event is queued.
    wake: (async_channel::Sender<()>, async_channel::Receiver<()>),
    subscribers: Mutex<Vec<async_channel::Sender<ClusterEvent>>>,
    publishing_ok: AtomicBool,
    subscribed_ok: AtomicBool,
    dropped: AtomicU64,
    rt: OnceLock<Arc<dyn Runtime>>,
    /// `mcp:N:ledger:`, before a state's digest.
    ledger_prefix: String,
    /// Bytes of ended tasks the cluster keeps in Redis ([`RedisCluster::with_task_budget`]).
    task_budget: AtomicU64,
}

impl std::fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCluster").field("channel", &self.inner.channel).finish_non_exhaustive()
    }
}

fn err(e: impl std::fmt::Display) -> ClusterError {
    ClusterError(format!("redis: {e}"))
}

impl RedisCluster {
    /// How long one Redis command may take before Redis counts as unreachable: 500 ms.
    pub const TIMEOUT: Duration = Duration::from_millis(500);
    /// Events that may wait to be published: 1024 (see the module docs for what happens
    /// past it).
    pub const QUEUE_CAPACITY: usize = 1024;
    /// Events each local subscriber may have waiting: 1024; past it an event is dropped for
    /// that subscriber and counted in [`dropped`](Self::dropped).
    pub const FEED_CAPACITY: usize = 1024;
    const BACKOFF_FIRST: Duration = Duration::from_millis(100);
    const BACKOFF_MAX: Duration = Duration::from_secs(5);
    /// How often an idle publisher checks that Redis still answers.
    const HEARTBEAT: Duration = Duration::from_secs(1);

    /// The cluster `name` on the Redis server at `url` (`redis://HOST:PORT`). Connects
    /// nothing yet: a bad URL fails here, an unreachable server on first use.
    pub fn new(url: &str, name: &str) -> Result<Self, ClusterError> {
        let client = redis::Client::open(url).map_err(err)?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                channel: format!("mcp:{name}:events"),
                keys_key: format!("mcp:{name}:keys"),
                epoch_key: format!("mcp:{name}:epoch"),
                task_prefix: format!("mcp:{name}:task:"),
                prefix: format!("mcp:{name}:"),
                conn: futures_util::lock::Mutex::new(None),
                queue: Mutex::new(VecDeque::new()),
                wake: async_channel::bounded(1),
                subscribers: Mutex::new(Vec::new()),
                publishing_ok: AtomicBool::new(true),
                subscribed_ok: AtomicBool::new(true),
                dropped: AtomicU64::new(0),
                rt: OnceLock::new(),
                ledger_prefix: format!("mcp:{name}:ledger:"),
                task_budget: AtomicU64::new(Self::DEFAULT_TASK_BUDGET),
            }),
        })
    }

    /// Bytes of ended tasks kept in Redis by default: 64 MiB ([`with_task_budget`](Self::with_task_budget)).
    pub const DEFAULT_TASK_BUDGET: u64 = 64 << 20;
    /// What each ended task costs in Redis beyond its record's JSON and four copies of its key
    /// (the record, and its places in the index, the per-owner index and the sizes): 256 bytes.
    pub const TASK_OVERHEAD: usize = 256;

    /// The same cluster keeping at most `bytes` of ended tasks in Redis, over all its
    /// replicas, each record counted as its JSON, four times its key and
    /// [`TASK_OVERHEAD`](Self::TASK_OVERHEAD); shared among callers as the
    /// [`TaskStore`] docs say, by one script run with each write (its keys are listed in
    /// `docs/replicas.md`). Every replica of a
    /// cluster should be given the same budget: each enforces its own on its writes. Default
    /// [`DEFAULT_TASK_BUDGET`](Self::DEFAULT_TASK_BUDGET); with 0 no task is stored.
    pub fn with_task_budget(self, bytes: u64) -> Self {
        self.inner.task_budget.store(bytes, Ordering::Relaxed);
        self
    }

    /// Events dropped: past [`QUEUE_CAPACITY`](Self::QUEUE_CAPACITY) while Redis was away, or
    /// for a local subscriber whose queue was full.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }
}

impl Inner {
    /// Runs `cmd` on the command connection, connecting first if need be, within
    /// [`RedisCluster::TIMEOUT`] each. The lock is held only to take a handle on the
    /// connection (or to make it): commands run concurrently on the one multiplexed
    /// connection, so a slow command never holds up another.
    async fn run<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, ClusterError> {
        let mut conn = {
            let mut slot = self.conn.lock().await;
            match &*slot {
                Some(c) => c.clone(),
                None => {
                    let config = redis::AsyncConnectionConfig::new()
                        .set_connection_timeout(RedisCluster::TIMEOUT)
                        .set_response_timeout(RedisCluster::TIMEOUT);
                    let c = self
                        .client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                        .map_err(err)?;
                    slot.insert(c).clone()
                }
            }
        };
        let out = cmd.query_async(&mut conn).await;
        if out.is_err() {
            // Any failure makes the next command reconnect.
            *self.conn.lock().await = None;
        }
        out.map_err(err)
    }

    fn queued(&self) -> usize {
        self.queue.lock().map_or(0, |q| q.len())
    }

    fn fan_out(&self, event: &ClusterEvent) {
        let Ok(mut subs) = self.subscribers.lock() else { return };
        subs.retain(|tx| match tx.try_send(event.clone()) {
            Ok(()) => true,
            Err(async_channel::TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(async_channel::TrySendError::Closed(_)) => false,
        });
    }

    /// Publishes what is queued, oldest first; stops at the first failure, leaving the rest
    /// (that one included) queued.
    async fn drain(&self) -> Result<(), ClusterError> {
        loop {
            let Some(event) = self.queue.lock().ok().and_then(|q| q.front().cloned()) else {
                return Ok(());
            };
            let cmd = redis::cmd("PUBLISH").arg(&self.channel).arg(encode(&event)).to_owned();
            self.run::<i64>(&cmd).await?;
            if let Ok(mut q) = self.queue.lock() {
                if q.front() == Some(&event) {
                    q.pop_front();
                }
            }
        }
    }

    async fn publisher(self: Arc<Self>, rt: Arc<dyn Runtime>) {
        let mut backoff = RedisCluster::BACKOFF_FIRST;
        loop {
            let ok = match self.drain().await {
                Ok(()) => self.run::<String>(&redis::cmd("PING")).await.map(|_| ()),
                Err(e) => Err(e),
            };
            match ok {
                Ok(()) => {
                    if !self.publishing_ok.swap(true, Ordering::AcqRel) {
                        tracing::info!(channel = %self.channel, "cluster: publishing to redis again");
                    }
                    backoff = RedisCluster::BACKOFF_FIRST;
                    let idle = crate::runtime::sleep_until(
                        rt.as_ref(),
                        rt.now().checked_add(RedisCluster::HEARTBEAT),
                    );
                    let woken = self.wake.1.recv();
                    futures_util::future::select(idle, Box::pin(woken)).await;
                }
                Err(e) => {
                    if self.publishing_ok.swap(false, Ordering::AcqRel) {
                        tracing::warn!(channel = %self.channel, error = %e, queued = self.queued(), "cluster degraded: cannot publish to redis");
                    }
                    crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(backoff)).await;
                    backoff = (backoff * 2).min(RedisCluster::BACKOFF_MAX);
                }
            }
        }
    }

    async fn subscriber(self: Arc<Self>, rt: Arc<dyn Runtime>) {
        let mut backoff = RedisCluster::BACKOFF_FIRST;
        let mut first = true;
        loop {
            let connect = async {
                let mut pubsub = self.client.get_async_pubsub().await.map_err(err)?;
                pubsub.subscribe(&self.channel).await.map_err(err)?;
                Ok::<_, ClusterError>(pubsub)
            };
            let deadline =
                crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(RedisCluster::TIMEOUT));
            let connected = match futures_util::future::select(Box::pin(connect), deadline).await {
                futures_util::future::Either::Left((r, _)) => r,
                futures_util::future::Either::Right(_) => {
                    Err(ClusterError("redis: subscribe timed out".into()))
                }
            };
            match connected {
                Ok(pubsub) => {
                    self.subscribed_ok.store(true, Ordering::Release);
                    backoff = RedisCluster::BACKOFF_FIRST;
                    if !first {
                        tracing::info!(channel = %self.channel, "cluster: subscribed to redis again");
                        // What was published while the subscription was down is gone: every
                        // listener re-lists rather than keep a stale list.
                        for list in [ChangedList::Tools, ChangedList::Resources, ChangedList::Prompts] {
                            let kind = EventKind::Change(Change::ListChanged(list));
                            self.fan_out(&ClusterEvent { origin: Arc::from(""), kind });
                        }
                    }
                    first = false;
                    let mut messages = pubsub.into_on_message();
                    while let Some(msg) = messages.next().await {
                        match decode(msg.get_payload_bytes()) {
                            Some(event) => self.fan_out(&event),
                            None => {
                                tracing::warn!(channel = %self.channel, "cluster: ignored a malformed event")
                            }
                        }
                    }
                    self.subscribed_ok.store(false, Ordering::Release);
                    tracing::warn!(channel = %self.channel, "cluster degraded: the redis subscription ended");
                }
                Err(e) => {
                    if self.subscribed_ok.swap(false, Ordering::AcqRel) || first {
                        tracing::warn!(channel = %self.channel, error = %e, "cluster degraded: cannot subscribe on redis");
                    }
                    first = false;
                }
            }
            crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(backoff)).await;
            backoff = (backoff * 2).min(RedisCluster::BACKOFF_MAX);
        }
    }
}

impl Cluster for RedisCluster {
    fn publish(&self, event: ClusterEvent) {
        if let Ok(mut q) = self.inner.queue.lock() {
            if !q.contains(&event) {
                if q.len() >= Self::QUEUE_CAPACITY {
                    q.pop_front();
                    self.inner.dropped.fetch_add(1, Ordering::Relaxed);
                }
                q.push_back(event);
            }
        }
        let _ = self.inner.wake.0.try_send(());
    }

    fn subscribe(&self) -> BoxStream<'static, ClusterEvent> {
        let (tx, rx) = async_channel::bounded(Self::FEED_CAPACITY);
        if let Ok(mut subs) = self.inner.subscribers.lock() {
            subs.push(tx);
        }
        Box::pin(rx)
    }

    fn key_ring(&self) -> BoxFuture<Result<SharedKeys, ClusterError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let fresh =
                SharedKeys::random().map_err(|e| ClusterError(format!("cannot draw a random key: {e}")))?;
            let set = redis::cmd("SET").arg(&inner.keys_key).arg(encode_keys(&fresh)).arg("NX").to_owned();
            inner.run::<Option<String>>(&set).await?;
            let stored: Option<String> =
                inner.run(&redis::cmd("GET").arg(&inner.keys_key).to_owned()).await?;
            stored
                .as_deref()
                .and_then(decode_keys)
                .ok_or_else(|| ClusterError(format!("redis: {} does not hold a key ring", inner.keys_key)))
        })
    }

    fn rotate_keys(&self, new: [u8; 32], keep: usize) -> BoxFuture<Result<SharedKeys, ClusterError>> {
        let this = self.clone();
        Box::pin(async move {
            let inner = &this.inner;
            let stored: Option<String> =
                inner.run(&redis::cmd("GET").arg(&inner.keys_key).to_owned()).await?;
            let next = match stored.as_deref().and_then(decode_keys) {
                Some(keys) => keys.rotated(new, keep),
                None => SharedKeys::new(vec![new]).ok_or_else(|| ClusterError("no key".into()))?,
            };
            inner
                .run::<String>(&redis::cmd("SET").arg(&inner.keys_key).arg(encode_keys(&next)).to_owned())
                .await?;
            this.publish(ClusterEvent { origin: Arc::from(""), kind: EventKind::KeysRotated });
            Ok(next)
        })
    }

    fn epoch(&self) -> BoxFuture<Result<Option<u64>, ClusterError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let stored: Option<u64> = inner.run(&redis::cmd("GET").arg(&inner.epoch_key).to_owned()).await?;
            Ok(Some(stored.unwrap_or(0)))
        })
    }

    fn move_epoch(&self) -> BoxFuture<Result<u64, ClusterError>> {
        let this = self.clone();
        Box::pin(async move {
            let inner = &this.inner;
            let next: u64 = inner.run(&redis::cmd("INCR").arg(&inner.epoch_key).to_owned()).await?;
            this.publish(ClusterEvent { origin: Arc::from(""), kind: EventKind::EpochMoved(next) });
            Ok(next)
        })
    }

    fn task_store(&self) -> Arc<dyn TaskStore> {
        Arc::new(self.clone())
    }

    fn health(&self) -> ClusterHealth {
        let ok = self.inner.publishing_ok.load(Ordering::Acquire)
            && self.inner.subscribed_ok.load(Ordering::Acquire);
        if ok {
            ClusterHealth::Connected
        } else {
            ClusterHealth::Degraded { queued: self.inner.queued() }
        }
    }

    fn start(&self, rt: Arc<dyn Runtime>) {
        if self.inner.rt.set(rt.clone()).is_err() {
            // Another server sharing this value started it already.
            return;
        }
        rt.spawn(Box::pin(self.inner.clone().publisher(rt.clone())));
        rt.spawn(Box::pin(self.inner.clone().subscriber(rt.clone())));
    }

    fn claim(&self, key: &str, lease_until_ms: u64) -> BoxFuture<Result<Option<Vec<u8>>, ClusterError>> {
        let inner = self.inner.clone();
        let key = format!("{}{key}", inner.ledger_prefix);
        Box::pin(async move {
            let running = SharedOutcome::Running.encode();
            // Twice at most: a key that expires between the SET NX and the GET is free again.
            for _ in 0..2 {
                let set = redis::cmd("SET")
                    .arg(&key)
                    .arg(&running)
                    .arg("NX")
                    .arg("PXAT")
                    .arg(lease_until_ms)
                    .to_owned();
                if inner.run::<Option<String>>(&set).await?.is_some() {
                    return Ok(None);
                }
                let held: Option<Vec<u8>> = inner.run(&redis::cmd("GET").arg(&key).to_owned()).await?;
                if held.is_some() {
                    return Ok(held);
                }
            }
            Err(ClusterError(format!("redis: {key} neither claimed nor held")))
        })
    }

    fn record(&self, key: &str, outcome: Option<Vec<u8>>, expires_at_ms: u64) -> BoxFuture<()> {
        let inner = self.inner.clone();
        let key = format!("{}{key}", inner.ledger_prefix);
        Box::pin(async move {
            let done = match outcome {
                Some(bytes) => {
                    let set =
                        redis::cmd("SET").arg(&key).arg(bytes).arg("PXAT").arg(expires_at_ms).to_owned();
                    inner.run::<Option<String>>(&set).await.map(|_| ())
                }
                None => {
                    let give_back = redis::cmd("EVAL")
                        .arg(RELEASE_SCRIPT)
                        .arg(1)
                        .arg(&key)
                        .arg(SharedOutcome::Running.encode())
                        .to_owned();
                    inner.run::<i64>(&give_back).await.map(|_| ())
                }
            };
            if let Err(e) = done {
                // Other replicas answer copies `in_progress` until the claim's lease ends.
                tracing::warn!(key = %key, error = %e, "cluster: cannot record a replay outcome in redis");
            }
        })
    }
    fn renew(&self, key: &str, lease_until_ms: u64) -> BoxFuture<Result<bool, ClusterError>> {
        let inner = self.inner.clone();
        let key = format!("{}{key}", inner.ledger_prefix);
        Box::pin(async move {
            let renew = redis::cmd("EVAL")
                .arg(RENEW_SCRIPT)
                .arg(1)
                .arg(&key)
                .arg(SharedOutcome::Running.encode())
                .arg(lease_until_ms)
                .to_owned();
            inner.run::<i64>(&renew).await.map(|n| n == 1)
        })
    }

    // Directory.

    fn advertise(&self, replica: &str, url: &str, ttl: Duration) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        let cmd = redis::cmd("SET")
            .arg(format!("{}replica:{replica}", inner.prefix))
            .arg(url)
            .arg("PX")
            .arg(millis(ttl))
            .to_owned();
        Box::pin(async move { inner.run::<String>(&cmd).await.map(|_| ()) })
    }

    fn register(
        &self,
        kind: HeldKind,
        id: &str,
        replica: &str,
        ttl: Duration,
    ) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        let cmd = redis::cmd("SET")
            .arg(held_key(&inner.prefix, kind, id))
            .arg(replica)
            .arg("PX")
            .arg(millis(ttl))
            .to_owned();
        Box::pin(async move { inner.run::<String>(&cmd).await.map(|_| ()) })
    }

    fn unregister(&self, kind: HeldKind, id: &str) -> BoxFuture<Result<(), ClusterError>> {
        let inner = self.inner.clone();
        let cmd = redis::cmd("DEL").arg(held_key(&inner.prefix, kind, id)).to_owned();
        Box::pin(async move { inner.run::<i64>(&cmd).await.map(|_| ()) })
    }

    fn locate(&self, kind: HeldKind, id: &str) -> BoxFuture<Result<Option<Located>, ClusterError>> {
        let inner = self.inner.clone();
        let key = held_key(&inner.prefix, kind, id);
        Box::pin(async move {
            let replica: Option<String> = inner.run(&redis::cmd("GET").arg(key).to_owned()).await?;
            let Some(replica) = replica else { return Ok(None) };
            let url: Option<String> = inner
                .run(&redis::cmd("GET").arg(format!("{}replica:{replica}", inner.prefix)).to_owned())
                .await?;
            Ok(url.map(|url| Located { replica: Arc::from(replica), url }))
        })
    }
}

/// The directory key of a session or task: its id as given (the key is binary-safe; ids are
/// bounded by the request head).
fn held_key(prefix: &str, kind: HeldKind, id: &str) -> String {
    format!("{prefix}held:{}:{id}", kind.as_str())
}

/// A TTL in whole milliseconds, at least 1 (`PX 0` is an error to Redis).
fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Sets `KEYS[1]` to expire at `ARGV[2]` (unix milliseconds) if it holds `ARGV[1]` (the running
/// marker): a renewal must not extend an outcome, nor a claim given back. 1 if renewed.
const RENEW_SCRIPT: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIREAT', KEYS[1], ARGV[2]) else return 0 end";

/// Deletes `KEYS[1]` if it holds `ARGV[1]` (the running marker): a claim given back must not
/// remove an outcome another replica recorded after the lease ran out.
const RELEASE_SCRIPT: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

/// Stores an ended task within the byte budget, atomically (see the module docs): `KEYS` are
/// the index (members `["owner","id"]` by expiry), the owners (by bytes held), the sizes (by
/// member) and the total; `ARGV` the record key prefix, the per-owner index prefix, the owner,
/// the member, the record, its counted bytes, its TTL, the caller's clock (Unix ms) and the
/// budget. First the records expired by that clock are forgotten, and a record written again
/// replaces itself; then while the record does not fit, the oldest (soonest to expire) record
/// of the owner goes if the owner is at or above its fair share, else that of the owner holding
/// the most. 1 when stored, `-(share + 1)` when refused (the owner at its share holds nothing
/// more to give up). The bookkeeping keys expire with the longest-lived record they count.
const PUT_TASK_SCRIPT: &str = r"
local idx, owners, sizes, total = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local rec, of, owner, member, value = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local bytes, ttl, now, budget = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local function forget(m)
  local size = tonumber(redis.call('HGET', sizes, m) or '0')
  local o = cjson.decode(m)[1]
  redis.call('HDEL', sizes, m)
  redis.call('ZREM', idx, m)
  redis.call('ZREM', of .. o, m)
  if tonumber(redis.call('ZINCRBY', owners, -size, o)) <= 0 then redis.call('ZREM', owners, o) end
  redis.call('DECRBY', total, size)
  redis.call('DEL', rec .. m)
end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', idx, '-inf', now)) do forget(m) end
if redis.call('HEXISTS', sizes, member) == 1 then forget(member) end
while tonumber(redis.call('GET', total) or '0') + bytes > budget do
  local mine = tonumber(redis.call('ZSCORE', owners, owner) or '0')
  local holders = redis.call('ZCARD', owners)
  if mine == 0 then holders = holders + 1 end
  local share = 0
  if budget > 0 then share = math.max(1, math.floor(budget / holders)) end
  local victim = owner
  if mine + bytes <= share then victim = redis.call('ZRANGE', owners, -1, -1)[1] end
  local oldest = victim and redis.call('ZRANGE', of .. victim, 0, 0)[1]
  if not oldest then return -(share + 1) end
  forget(oldest)
end
local expires = now + ttl
redis.call('SET', rec .. member, value, 'PX', ttl)
redis.call('ZADD', idx, expires, member)
redis.call('ZADD', of .. owner, expires, member)
redis.call('HSET', sizes, member, bytes)
redis.call('ZINCRBY', owners, bytes, owner)
redis.call('INCRBY', total, bytes)
local last = tonumber(redis.call('ZRANGE', idx, -1, -1, 'WITHSCORES')[2])
for _, k in ipairs({idx, owners, sizes, total}) do redis.call('PEXPIRE', k, last - now + 1000) end
local mine = tonumber(redis.call('ZRANGE', of .. owner, -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIRE', of .. owner, mine - now + 1000)
return 1
";

impl TaskStore for RedisCluster {
    fn put(&self, record: TaskRecord) -> BoxFuture<Result<(), StoreError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            if record.ttl_ms == 0 {
                return Ok(());
            }
            let member = json!([record.owner, record.task_id]).to_string();
            let value = json!({
                "taskId": record.task_id, "owner": record.owner, "task": record.task,
                "endedUnixMs": record.ended_unix_ms, "ttlMs": record.ttl_ms,
            })
            .to_string();
            let bytes =
                value.len() + 4 * (inner.task_prefix.len() + member.len()) + RedisCluster::TASK_OVERHEAD;
            let p = &inner.task_prefix;
            let cmd = redis::cmd("EVAL")
                .arg(PUT_TASK_SCRIPT)
                .arg(4)
                .arg(format!("{p}index"))
                .arg(format!("{p}owners"))
                .arg(format!("{p}sizes"))
                .arg(format!("{p}total"))
                .arg(p)
                .arg(format!("{p}of:"))
                .arg(&record.owner)
                .arg(&member)
                .arg(value)
                .arg(bytes)
                .arg(record.ttl_ms)
                .arg(crate::runtime::unix_ms())
                .arg(inner.task_budget.load(Ordering::Relaxed))
                .to_owned();
            match inner.run::<i64>(&cmd).await {
                Ok(share) if share < 0 => {
                    let share = u64::try_from(-share - 1).unwrap_or(0);
                    let wide = u64::try_from(bytes).unwrap_or(u64::MAX);
                    Err(StoreError::Full { bytes: wide, share })
                }
                Ok(_) => Ok(()),
                Err(e) => Err(StoreError::Unavailable(e.to_string())),
            }
        })
    }

    fn get(&self, owner: String, task_id: String) -> BoxFuture<Result<Option<TaskRecord>, HandlerError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let key = task_key(&inner.task_prefix, &owner, &task_id);
            let stored: Option<String> = inner
                .run(&redis::cmd("GET").arg(key).to_owned())
                .await
                .map_err(|e| HandlerError::Private(e.to_string().into()))?;
            Ok(stored.as_deref().and_then(decode_task))
        })
    }
}

fn task_key(prefix: &str, owner: &str, id: &str) -> String {
    // JSON keeps an owner or id holding the separator from colliding with another pair.
    format!("{prefix}{}", json!([owner, id]))
}

fn decode_task(text: &str) -> Option<TaskRecord> {
    let v: Value = serde_json::from_str(text).ok()?;
    Some(TaskRecord {
        task_id: v.get("taskId")?.as_str()?.to_owned(),
        owner: v.get("owner")?.as_str()?.to_owned(),
        task: v.get("task")?.as_object()?.clone(),
        ended_unix_ms: v.get("endedUnixMs")?.as_u64()?,
        ttl_ms: v.get("ttlMs")?.as_u64()?,
    })
}

fn encode_keys(keys: &SharedKeys) -> String {
    let hex = |k: &[u8; 32]| k.iter().map(|b| format!("{b:02x}")).collect::<String>();
    keys.keys().iter().map(hex).collect::<Vec<_>>().join(",")
}

fn decode_keys(text: &str) -> Option<SharedKeys> {
    let key = |h: &str| -> Option<[u8; 32]> {
        let mut out = [0u8; 32];
        if h.len() != 64 {
            return None;
        }
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(h.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(out)
    };
    SharedKeys::new(text.split(',').map(key).collect::<Option<Vec<_>>>()?)
}

fn encode(event: &ClusterEvent) -> String {
    let mut m = Map::new();
    m.insert("origin".into(), Value::from(&*event.origin));
    let (name, uri) = match &event.kind {
        EventKind::Change(Change::ListChanged(list)) => (list.as_str(), None),
        EventKind::Change(Change::ResourceUpdated(uri)) => ("updated", Some(uri.clone())),
        EventKind::KeysRotated => ("keys", None),
        EventKind::EpochMoved(epoch) => {
            m.insert("epoch".into(), (*epoch).into());
            ("epoch", None)
        }
        // A change this build cannot name is sent as one every replica understands.
        EventKind::Change(_) => ("tools", None),
    };
    m.insert("event".into(), name.into());
    if let Some(uri) = uri {
        m.insert("uri".into(), uri.into());
    }
    Value::Object(m).to_string()
}

fn decode(bytes: &[u8]) -> Option<ClusterEvent> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let origin = Arc::from(v.get("origin")?.as_str()?);
    let kind = match v.get("event")?.as_str()? {
        "updated" => EventKind::Change(Change::ResourceUpdated(v.get("uri")?.as_str()?.to_owned())),
        "keys" => EventKind::KeysRotated,
        "epoch" => EventKind::EpochMoved(v.get("epoch")?.as_u64()?),
        name => EventKind::Change(Change::ListChanged(ChangedList::from_name(name)?)),
    };
    Some(ClusterEvent { origin, kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_keys_round_trip() {
        for kind in [
            EventKind::Change(Change::ListChanged(ChangedList::Prompts)),
            EventKind::Change(Change::ResourceUpdated("test://a,b".into())),
            EventKind::KeysRotated,
            EventKind::EpochMoved(u64::MAX),
        ] {
            let e = ClusterEvent { origin: Arc::from("r1"), kind };
            assert_eq!(decode(encode(&e).as_bytes()), Some(e));
        }
        let keys = SharedKeys::new(vec![[1; 32], [0xab; 32]]).unwrap();
        assert_eq!(decode_keys(&encode_keys(&keys)), Some(keys));
        assert_eq!(decode_keys("zz"), None);
    }
}
