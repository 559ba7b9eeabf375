//! The ground floor: state the engine owns, each part with its own rules, none naming `Engine`.

pub(super) mod call_state;
pub(super) mod calls;
pub(super) mod config;
pub(super) mod ids;
pub(super) mod io;
pub(super) mod messages;
pub(super) mod outbound;
pub(super) mod outputs;
pub(super) mod post_store;
pub(super) mod replay_ledger;
pub(super) mod sessions;
pub(super) mod streams;
pub(super) mod subscriptions;
pub(super) mod task_table;
pub(super) mod timers;
