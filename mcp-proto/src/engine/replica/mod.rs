//! Replicas: what the engine tells its cluster (changes, holdings) and the replay ledger shared between replicas.

pub(super) mod cluster;
pub(super) mod directory;
pub(super) mod shared;
