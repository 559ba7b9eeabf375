//! Several engines behind one endpoint, so that one process uses every core: [`Shards`].

use std::sync::Arc;
use std::time::Duration;

use crate::builder::{BuildError, ServerBuilder};
use crate::cluster::{Cluster, InMemoryCluster};
use crate::server::{Server, ShutdownReport};

/// Several engines behind one endpoint, so that one process uses every core.
///
/// A [`Server`] is one engine worked by one driver task: every request's engine work (never a
/// handler or a decode, but the encoding of its answer, which grows with the answer) is done in
/// order, under its lock. That is what makes the
/// engine's output order its own, and it caps what one server does at what one core can do for
/// its engine. [`Shards`] are several servers built from one builder, each with its own engine,
/// lock and driver (never one engine behind a shared lock), served by one HTTP endpoint
#[cfg_attr(
    feature = "http",
    doc = "([`HttpService::sharded`](crate::HttpService::sharded)) that spreads connections over them."
)]
#[cfg_attr(
    not(feature = "http"),
    doc = "(`HttpService::sharded`, feature `http`) that spreads connections over them."
)]
///
/// The shards are the replicas of one cluster ([`cluster`](crate::cluster)), in-process unless
/// the builder named one: they share the key ring and the continuation epoch (a cursor or a
/// `requestState` signed by one verifies on all), ended tasks (one task store), the replay
/// ledger (a 2026-07-28 retry runs its handler once, whichever shard it reaches) and changes
/// (`resources/updated` reaches every shard's listeners). They share one catalogue
/// ([`ServerBuilder::shared_catalogue`]): a tool added through any shard is added to all, and
/// each shard tells its own listeners once (a list change from a sibling shard on the
/// cluster's bus is not applied again; other replicas of a user's cluster still hear it). A
/// legacy session or a running task lives on the shard where it began; the endpoint sends a
/// request naming it to that shard directly, in-process (no forward, no lookup in the
/// cluster's directory).
///
/// Bounds: each shard's engine takes [`Limits::split`](mcp_proto::Limits::split) of the
/// builder's limits, so the process as a whole stays within every documented table bound and
/// per-caller share. The HTTP transport's bounds (connections, per-address shares) are the
/// endpoint's, enforced once for all shards.
///
/// Cheap to clone; every clone names the same servers.
#[derive(Clone)]
pub struct Shards {
    /// The first of `servers`, kept apart so that there always is one.
    first: Server,
    servers: Arc<[Server]>,
}

impl std::fmt::Debug for Shards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shards").field("count", &self.servers.len()).finish()
    }
}

/// The shard count [`ServerBuilder::build_shards`] takes when given none: the parallelism the
/// operating system reports for this process (its cores, or the CPUs it is allowed on), 1
/// when it cannot say.
pub fn default_shards() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl ServerBuilder {
    /// Builds `count` shards ([`default_shards`] when `None`; 0 counts as 1) from this
    /// builder: see [`Shards`]. Each shard is a clone of the builder with its part of the
    /// limits ([`Limits::split`](mcp_proto::Limits::split)), made replica `<name>-<i>` of the
    /// builder's cluster when it names one ([`cluster`](Self::cluster), `<name>` its replica
    /// name), else of a fresh [`InMemoryCluster`] (`shard-<i>`), and built with
    /// [`join`](Self::join). A [`task_store`](Self::task_store) set without a cluster stays the
    /// shards' store. A single shard without a cluster is a plain [`build`](Self::build): no
    /// cluster, nothing shared, nothing it would cost.
    pub async fn build_shards(self, count: Option<usize>) -> Result<Shards, BuildError> {
        let count = count.unwrap_or_else(default_shards).max(1);
        if count == 1 && self.cluster.is_none() {
            return Ok(Shards::from(self.build()?));
        }
        let mut base = if self.catalogue.is_some() { self } else { self.shared_catalogue() };
        let part = base.config_mut().limits.split(count);
        base.config_mut().limits = part;
        let (cluster, name, own_store) = match &base.cluster {
            Some(m) => (m.cluster.clone(), m.replica.to_string(), None),
            None => {
                let memory: Arc<dyn Cluster> = Arc::new(InMemoryCluster::default());
                (memory, String::from("shard"), base.task_store.clone())
            }
        };
        let names: Vec<Arc<str>> = (0..count).map(|i| Arc::from(format!("{name}-{i}"))).collect();
        let shard = |i: usize| {
            let own = names.get(i).cloned().unwrap_or_else(|| Arc::from(format!("{name}-{i}")));
            let mut shard = base.clone().cluster(cluster.clone(), own.to_string());
            if let Some(m) = shard.cluster.as_mut() {
                m.siblings = names.iter().filter(|n| **n != own).cloned().collect();
            }
            if own_store.is_some() {
                shard.task_store = own_store.clone();
            }
            shard.join()
        };
        let first = shard(0).await?;
        let mut servers = Vec::with_capacity(count);
        servers.push(first.clone());
        for i in 1..count {
            servers.push(shard(i).await?);
        }
        Ok(Shards { first, servers: Arc::from(servers) })
    }
}

impl Shards {
    /// The shards, in the order they were built. Each is a whole [`Server`]: its
    /// [`status`](Server::status) is its own engine's, and a registry edit through any of them
    /// reaches all (they share a catalogue).
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    #[cfg_attr(
        feature = "http",
        doc = "The first shard: the one [`HttpService::handle`](crate::HttpService::handle) answers on"
    )]
    #[cfg_attr(
        not(feature = "http"),
        doc = "The first shard: the one `HttpService::handle` (feature `http`) answers on"
    )]
    /// when called directly, and the only one of a server that is not sharded.
    pub fn first(&self) -> &Server {
        &self.first
    }

    /// How many shards there are (at least 1).
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Always false: there is at least one shard. Here because `len` is.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// [`Server::shutdown`] on every shard at once, each within `budget`: the endpoint stops
    /// accepting, and every shard finishes its calls. The reports are summed.
    pub async fn shutdown(&self, budget: Duration) -> ShutdownReport {
        sum(futures_util::future::join_all(self.servers.iter().map(|s| s.shutdown(budget))).await)
    }
}

impl Shards {
    /// [`Server::shutdown_and_close`] on every shard at once: each finishes its calls within
    /// `budget`, then waits for its HTTP connections to close until `budget` runs out or
    /// `cut_short` completes (for all of them). The reports are summed.
    pub async fn shutdown_and_close(
        &self,
        budget: Duration,
        cut_short: impl std::future::Future<Output = ()>,
    ) -> ShutdownReport {
        use futures_util::FutureExt;
        let cut_short = Box::pin(cut_short).shared();
        let each = self.servers.iter().map(|s| s.shutdown_and_close(budget, cut_short.clone()));
        sum(futures_util::future::join_all(each).await)
    }
}

/// The reports of several shards as one.
fn sum(reports: Vec<ShutdownReport>) -> ShutdownReport {
    reports.into_iter().fold(ShutdownReport::default(), |mut all, r| {
        all.cancelled += r.cancelled;
        all.cleanup_failed += r.cleanup_failed;
        all
    })
}

impl From<Server> for Shards {
    /// One server as one shard.
    fn from(server: Server) -> Self {
        Shards { first: server.clone(), servers: Arc::from([server]) }
    }
}
