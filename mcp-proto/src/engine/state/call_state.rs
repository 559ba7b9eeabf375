//! What a call in flight carries besides its identity: its side of asking the client and its
//! progress channel. Kept apart from `ask` and `notify`, which act on them, so that the call
//! table (`calls`) holds them without importing the modules that import it.

use std::time::Instant;

use serde_json::{Map, Value};

use crate::engine::state::ids::ConnId;
use crate::engine::state::io::LogLevel;
use crate::engine::state::replay_ledger::StateUse;
use crate::interaction::InputRequest;
use crate::jsonrpc::RequestId;
use crate::version::ProtocolVersion;

/// A modern request's answers so far.
#[derive(Debug, Clone, Default)]
pub(in crate::engine) struct Mrtr {
    pub(in crate::engine) round: u32,
    /// From the state (already validated) and the retry's `inputResponses` (not yet).
    pub(in crate::engine) answers: Map<String, Value>,
    pub(in crate::engine) digest: [u8; 32],
    pub(in crate::engine) method: String,
    pub(in crate::engine) data: Option<String>,
    /// The state this retry carried, for the replay ledger; `None` on a first round.
    pub(in crate::engine) used: Option<StateUse>,
}

/// A call's side of asking.
#[derive(Debug)]
pub(in crate::engine) struct CallInput {
    /// Rounds asked so far (legacy), or the round the state says (modern).
    pub(in crate::engine) rounds: u32,
    /// Modern: what the retry brought, and the capabilities of this request.
    pub(in crate::engine) mrtr: Option<(Mrtr, Value)>,
    /// Modern: answers this invocation asked for and validated, carried into the next state.
    pub(in crate::engine) used: Map<String, Value>,
    /// Legacy: the ask in flight.
    pub(in crate::engine) asking: Option<Asking>,
    /// What the handler carries into the next round's sealed state (2026-07-28); starts as
    /// what the previous round's state carried.
    pub(in crate::engine) carry: Option<String>,
}

#[derive(Debug)]
pub(in crate::engine) struct Asking {
    pub(in crate::engine) slots: Vec<(u64, String, InputRequest)>,
    pub(in crate::engine) answers: Map<String, Value>,
    pub(in crate::engine) remaining: usize,
    /// When the ask gives up ([`crate::limits::Limits::ask_timeout`]); `None` when that is too far for
    /// the clock to express (never).
    pub(in crate::engine) deadline: Option<Instant>,
}

impl CallInput {
    pub(in crate::engine) fn new(ctx: Ctx<'_>) -> Option<Box<Self>> {
        let mrtr = ctx.mrtr.map(|m| (m.clone(), ctx.client_caps.cloned().unwrap_or_default()));
        let carry = mrtr.as_ref().and_then(|(m, _)| m.data.clone());
        Some(Box::new(Self {
            rounds: mrtr.as_ref().map_or(0, |(m, _)| m.round),
            mrtr,
            used: Map::new(),
            asking: None,
            carry,
        }))
    }

    /// Whether the modern request carried answers (`inputResponses`, or a state holding some).
    pub(in crate::engine) fn retried(&self) -> bool {
        self.mrtr.as_ref().is_some_and(|(m, _)| m.round > 0 || !m.answers.is_empty())
    }

    /// The deadline of the legacy ask in flight, if any: its timer is disarmed with the call.
    pub(in crate::engine) fn ask_deadline(&self) -> Option<Instant> {
        self.asking.as_ref().and_then(|a| a.deadline)
    }
}

/// A call's progress channel: its token and what was last sent.
#[derive(Debug, Clone)]
pub(in crate::engine) struct Progress {
    pub(in crate::engine) token: RequestId,
    pub(in crate::engine) last: Option<(Instant, f64)>,
}

impl Progress {
    pub(in crate::engine) fn new(token: RequestId) -> Self {
        Self { token, last: None }
    }
}

/// The per-request facts every method handler needs.
#[derive(Clone, Copy)]
pub(in crate::engine) struct Ctx<'a> {
    pub(in crate::engine) conn: ConnId,
    pub(in crate::engine) id: &'a RequestId,
    pub(in crate::engine) version: ProtocolVersion,
    /// The modern request's `_meta` logLevel.
    pub(in crate::engine) log_level: Option<LogLevel>,
    /// Set once a gate has shaped what this request sees.
    pub(in crate::engine) private: bool,
    /// `_meta.progressToken`, when valid.
    pub(in crate::engine) progress: Option<&'a RequestId>,
    /// The modern request's `_meta` clientCapabilities.
    pub(in crate::engine) client_caps: Option<&'a Value>,
    /// The modern request's answers so far (`requestState` and `inputResponses`).
    pub(in crate::engine) mrtr: Option<&'a Mrtr>,
}
