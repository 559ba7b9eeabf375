//! Transport: how answers leave (HTTP sessions and exchanges, streams, resumption, back-pressure, per-caller shares).

pub(super) mod backlog;
pub(super) mod fair_shares;
pub(super) mod http;
pub(super) mod resume;
