//! Extensions: Tasks, MCP Apps, compact publication, Skills, and the policy on replayed requests.

pub(super) mod apps;
pub(super) mod compact;
pub(super) mod replay;
pub(super) mod skills;
pub(super) mod tasks;
