//! A server's place in its cluster ([`Membership`]): joining, advertising, publishing changes,
//! the shared replay ledger's claims and the directory of what it holds, as the server's side
//! of `impl Server` and `impl ServerBuilder` for clusters.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_proto::{ClaimResult, HeldKind, SharedOutcome};

#[cfg(feature = "http")]
use super::{nonces, pool, ADVERTISE_EVERY, ADVERTISE_TTL, ENTRY_REFRESH};
use super::{Cluster, ClusterError, ClusterEvent, EventKind, SharedKeys, ENTRY_TTL};
use crate::runtime::Runtime;
use crate::server::Server;

/// `d` in whole milliseconds, saturating.
pub(crate) fn ms(d: Duration) -> u64 {
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
    /// Registrations of sessions and tasks spawned and not yet done: the answer that made one
    /// waits for its own ([`Membership::registered`]), so the client's next request finds it
    /// through any replica; no other request waits for it.
    pub(crate) registering: Registering,
    /// The shared-ledger claims this replica won and renews while their calls run, by key:
    /// a claim leaves when its record goes out ([`Server::share_record`]), which ends its
    /// renewals ([`Limits::claim_lease`](mcp_proto::Limits::claim_lease)).
    pub(crate) leases: Arc<Mutex<std::collections::HashSet<String>>>,
    /// The other shards of this replica's [`Shards`](crate::Shards): they share its catalogue,
    /// so their list changes are already this replica's, and are not applied again when the
    /// bus brings them.
    pub(crate) siblings: Arc<[Arc<str>]>,
    /// The nonces of the `Mcp-Forwarded-Peer` tokens this replica accepted: each is accepted
    /// once (see the `forward` module).
    #[cfg(feature = "http")]
    pub(crate) peer_nonces: Arc<nonces::PeerNonces>,
    /// The kept-alive connections to the holders this replica forwards to (see "Costs" in the
    /// `forward` module).
    #[cfg(feature = "http")]
    pub(crate) forward_pool: Arc<pool::ForwardPool>,
}

/// Registrations under way, by what they register. The channel carries nothing: it closes when
/// its registration is done (its sender dropped).
pub(crate) type Registering = Arc<Mutex<HashMap<(HeldKind, String), async_channel::Receiver<()>>>>;

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
    /// Waits until the registration of the session or task `id` spawned so far is done, for at
    /// most `within`: one in-memory write or one backend round trip. Returns at once for one
    /// whose registration is done or was never spawned here.
    pub(crate) async fn registered(&self, rt: &Arc<dyn Runtime>, kind: HeldKind, id: &str, within: Duration) {
        let pending = self.registering.lock().ok().and_then(|r| r.get(&(kind, id.to_owned())).cloned());
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
    pub(crate) async fn heartbeat(self, rt: Arc<dyn Runtime>, stop: impl std::future::Future<Output = ()>) {
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
    /// Publishes a change the engine made ([`Output::Change`](mcp_proto::Output::Change)).
    pub(crate) fn publish_change(&self, st: &crate::driver::State, change: mcp_proto::Change) {
        let Some(m) = &st.cluster else { return };
        m.cluster.publish(ClusterEvent { origin: m.replica.clone(), kind: EventKind::Change(change) });
    }

    /// Asks the shared replay ledger for a claim ([`Output::Claim`](mcp_proto::Output::Claim))
    /// on its own task, bounded by [`CLAIM_TIMEOUT`]; its result goes back to the engine
    /// through the control channel as a handler's completion does. `Err` gives the claim back
    /// when there is no runtime to ask on (nothing can be claimed, so the caller answers it
    /// [`ClaimResult::Unavailable`] once the output is drained).
    pub(crate) fn claim(
        &self,
        st: &crate::driver::State,
        claim: mcp_proto::Claim,
    ) -> Result<(), mcp_proto::Claim> {
        let (Some(m), Some(rt)) = (st.cluster.clone(), self.shared.rt.get().cloned()) else {
            return Err(claim);
        };
        let lease = self.limits().claim_lease_time();
        let server = self.clone();
        // The engine's lease is the longest the claim may hold; it is taken for one
        // `claim_lease` at a time and renewed while the call runs, so that a replica dying
        // mid-call frees it soon.
        let first = claim.lease_until_ms.min(crate::runtime::unix_ms().saturating_add(ms(lease)));
        let asked = m.cluster.claim(&claim.key, first);
        let deadline = crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(CLAIM_TIMEOUT));
        let replica = m.replica.clone();
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
        Ok(())
    }

    /// Writes what the shared replay ledger keeps for a state
    /// ([`Output::Record`](mcp_proto::Output::Record)), bounded by [`CLAIM_TIMEOUT`].
    pub(crate) fn share_record(&self, st: &crate::driver::State, record: mcp_proto::Record) {
        let (Some(m), Some(rt)) = (&st.cluster, self.shared.rt.get()) else { return };
        if let Ok(mut leases) = m.leases.lock() {
            leases.remove(&record.key);
        }
        let write = m.cluster.record(&record.key, record.outcome.map(|o| o.encode()), record.expires_at_ms);
        let deadline = crate::runtime::sleep_until(rt.as_ref(), rt.now().checked_add(CLAIM_TIMEOUT));
        rt.spawn(Box::pin(async move {
            futures_util::future::select(write, deadline).await;
        }));
    }

    /// Reports to the directory what the engine began or stopped holding
    /// ([`Output::Holding`](mcp_proto::Output::Holding)).
    pub(crate) fn report_holding(&self, st: &crate::driver::State, h: mcp_proto::Holding) {
        let (Some(m), Some(rt)) = (st.cluster.clone(), self.shared.rt.get()) else { return };
        if h.held {
            if let Ok(mut held) = m.held.lock() {
                held.insert((h.kind, h.id.clone()));
            }
            // The answer that made it waits for its entry ([`Membership::registered`]).
            let (tx, rx) = async_channel::bounded::<()>(1);
            if let Ok(mut r) = m.registering.lock() {
                r.insert((h.kind, h.id.clone()), rx);
            }
            rt.spawn(Box::pin(async move {
                m.hold(h.kind, &h.id).await;
                if let Ok(mut r) = m.registering.lock() {
                    r.remove(&(h.kind, h.id.clone()));
                }
                drop(tx);
            }));
        } else if h.kind == HeldKind::Session || st.task_store.is_none() {
            // An ended task with a store is forgotten once stored (see `store_ended_task`).
            rt.spawn(Box::pin(async move { m.forget(h.kind, &h.id).await }));
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
                let listed = matches!(event.kind, EventKind::Change(mcp_proto::Change::ListChanged(_)));
                if listed && m.siblings.contains(&event.origin) {
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
            siblings: Arc::from([]),
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
