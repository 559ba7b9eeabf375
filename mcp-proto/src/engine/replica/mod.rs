//! Replicas: what the engine tells its cluster (changes, holdings) and the replay ledger shared between replicas.

pub(super) mod changes;
pub(super) mod holdings;
pub(super) mod shared_ledger;
