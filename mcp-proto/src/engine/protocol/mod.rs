//! Protocol methods: the feature methods, notifications, server-to-client requests, result encoding and registry edits.

pub(super) mod ask;
pub(super) mod encode;
pub(super) mod features;
pub(super) mod notify;
pub(super) mod recheck;
pub(super) mod records;
pub(super) mod registry_mut;
pub(super) mod scopes;
