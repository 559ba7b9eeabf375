//! The continuation epoch at run time: [`Server::epoch`] and [`Server::move_epoch`].
//!
//! A 2026-07-28 `requestState` is sealed in the engine's epoch and refused in any other
//! ([`Config::state_epoch`](mcp_proto::Config::state_epoch)): moving the epoch on ends every
//! outstanding dialogue at once, and their clients start their calls again. An operator does
//! so on a deploy that changes what a dialogue means, or when a key may have leaked (with
//! [`Server::rotate_cluster_keys`] in a cluster). [`Server::shutdown`] moves this server's own
//! epoch too, so a state a call seals while the server drains is accepted nowhere.

use crate::cluster::ClusterError;
use crate::server::Server;

impl Server {
    /// The continuation epoch `requestState`s are sealed in now.
    pub fn epoch(&self) -> u64 {
        self.lock().engine.epoch()
    }

    /// Moves the continuation epoch on: every `requestState` sealed before is refused from now
    /// on (`-32602` "requestState expired", `data.reason: "epoch"`), and the replay records of
    /// the old epoch are dropped. In a cluster whose backend keeps an epoch
    /// ([`Cluster::move_epoch`](crate::cluster::Cluster::move_epoch)) it moves for every
    /// replica: here at once, on the others as the event reaches them; the backend's error
    /// (unreachable, or keeping no epoch) changes nothing here. Outside a cluster only this
    /// server's epoch moves. Returns the new epoch.
    pub async fn move_epoch(&self) -> Result<u64, ClusterError> {
        let cluster = self.lock().cluster.clone();
        let next = match cluster {
            Some(m) => Some(m.cluster.move_epoch().await?),
            None => None,
        };
        Ok(match next {
            Some(epoch) => self.adopt_epoch(epoch),
            None => {
                let mut st = self.lock();
                let now = self.now();
                let epoch = st.engine.bump_epoch(now);
                self.release(st);
                epoch
            }
        })
    }

    /// Makes the cluster's `epoch` this server's, unless it holds a later one already: epochs
    /// only move forward in a cluster, so a late event or a move that lost a race never moves
    /// one back. Returns the epoch held now.
    pub(crate) fn adopt_epoch(&self, epoch: u64) -> u64 {
        let mut st = self.lock();
        if epoch > st.engine.epoch() {
            let now = self.now();
            st.engine.set_epoch(now, epoch);
            tracing::info!(epoch, "continuation epoch moved");
        }
        let held = st.engine.epoch();
        self.release(st);
        held
    }
}
