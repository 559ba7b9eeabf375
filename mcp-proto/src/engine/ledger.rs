//! The replay ledger: what became of each 2026-07-28 request state that was used.
//!
//! A modern retry carries the `requestState` an earlier round issued. Its handler runs with
//! whatever side effects it has, and a client may send the same retry again: Streamable HTTP
//! tells it to when the response stream breaks, and a stateless server cannot tell that copy
//! from the first. So the engine remembers, for each state whose call it admitted, what the call
//! answered, until the state expires, and answers a copy from the record instead of running the
//! handler again (the seed's "completed replays enter recovery-only dispatch"). The rules, as
//! [`Engine::ask`](super::Engine::ask) documents them under "Replays":
//!
//! - a state whose call is still running: `-32602` "requestState already used",
//!   `data.reason: "in_progress"` (retry a moment later to get the recorded outcome);
//! - a state whose call answered: that answer (result or error), byte for byte, under the new
//!   request id; the `input_required` of an unfinished dialogue included, so a replay gets the
//!   same next prompt and the same next state;
//! - a state whose call ended without an answer (cancelled, its connection closed): `-32602`,
//!   `data.reason: "interrupted"`;
//! - a state whose answer was too large to keep: `-32602`, `data.reason: "outcome_too_large"`;
//! - a state the ledger may have forgotten (an entry expiring no earlier was evicted): `-32602`,
//!   `data.reason: "evicted"`, even if it was never used, because the engine can no longer tell.
//!
//! In every refused case the client starts the call again without a state. A retry refused for
//! what it brought itself (an invalid answer) is not recorded: its handler got no answer, and a
//! corrected copy may still use the state. A first round
//! carries no state, so a copy of it cannot be recognised and runs again: only retries are
//! protected. The ledger is this engine's own: a replica that shares the key ring but not the
//! ledger runs a copy sent to it.
//!
//! Entries are keyed by a SHA-256 digest of the state token (looked up only after the token
//! verified and matched the caller, so nobody can read another's recorded outcome), ordered by
//! expiry in a `BTreeMap` so that output never depends on hash order, and every operation is
//! O(log n).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::blame::Blame;
use crate::jsonrpc::{Encoded, ErrorCode, RequestId, RpcError};
use crate::limits::Limits;

/// What one entry costs beside its answer: the key twice, the expiry, the map nodes. An
/// estimate, so that a flood of tiny answers is bounded by bytes as well as by count.
const ENTRY_OVERHEAD: usize = 64;

/// One use of a sealed state: which state, and until when a record of it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StateUse {
    digest: [u8; 32],
    expires_at_ms: u64,
}

impl StateUse {
    /// The use of `token`, which expires at `expires_at_ms` (unix milliseconds).
    pub(super) fn new(token: &str, expires_at_ms: u64) -> Self {
        let mut h = Sha256::new();
        h.update(b"mcp-request-state-use-v1\n");
        h.update(token.as_bytes());
        Self { digest: h.finalize().into(), expires_at_ms }
    }
}

enum Outcome {
    /// The answer after the request id, and what its HTTP status follows from.
    Kept {
        tail: Vec<u8>,
        fault: Option<(Blame, ErrorCode)>,
    },
    TooLarge,
    Interrupted,
}

struct Entry {
    expires_at_ms: u64,
    outcome: Outcome,
    cost: usize,
}

/// What the ledger says about a retry.
pub(super) enum Seen {
    /// Never used as far as the ledger can tell: run it.
    Fresh,
    /// Used: this is the answer.
    Replay(Encoded),
}

/// The record of used request states; see the module docs.
#[derive(Default)]
pub(super) struct Ledger {
    /// States whose call is in flight. Not bounded here: each is a call, and calls are bounded
    /// by the in-flight and connection limits.
    running: BTreeSet<[u8; 32]>,
    done: BTreeMap<[u8; 32], Entry>,
    /// `done`, by expiry: what expires first is pruned and evicted first.
    by_expiry: BTreeSet<(u64, [u8; 32])>,
    /// Bytes `done` holds, by the entries' costs.
    bytes: usize,
    /// The latest expiry of an entry evicted before it expired: a state expiring no later that
    /// the ledger does not hold may be one it forgot.
    floor: Option<u64>,
}

impl Ledger {
    /// What to do with a retry carrying the state of `used`, for request `id`, at `now_ms`.
    pub(super) fn check(&mut self, now_ms: u64, used: StateUse, id: &RequestId) -> Result<Seen, RpcError> {
        self.prune(now_ms);
        if self.running.contains(&used.digest) {
            return Err(already_used(
                "in_progress",
                "the call it continues is still running; send the same request again shortly",
            ));
        }
        if let Some(entry) = self.done.get(&used.digest) {
            return match &entry.outcome {
                Outcome::Kept { tail, fault } => Ok(Seen::Replay(Encoded::with_id(id, tail, *fault))),
                Outcome::TooLarge => Err(already_used(
                    "outcome_too_large",
                    "its outcome was too large to keep; start the call again without requestState",
                )),
                Outcome::Interrupted => Err(already_used(
                    "interrupted",
                    "the call it continued ended without an answer; start the call again without requestState",
                )),
            };
        }
        if self.floor.is_some_and(|floor| used.expires_at_ms <= floor) {
            return Err(already_used(
                "evicted",
                "its outcome is no longer kept; start the call again without requestState",
            ));
        }
        Ok(Seen::Fresh)
    }

    /// The call of `used` was admitted: until it ends, a copy is answered "in progress".
    pub(super) fn start(&mut self, used: StateUse) {
        self.running.insert(used.digest);
    }

    /// The call of `used` ended without using its state (see `Engine::ask`): forget it was
    /// running, record nothing.
    pub(super) fn release(&mut self, used: StateUse) {
        self.running.remove(&used.digest);
    }

    /// The call of `used`, request `id`, ended at `now_ms` with `answer`, or (`None`) without
    /// one. Records the outcome, evicting what expires first past the bounds of `limits`.
    pub(super) fn finish(
        &mut self,
        now_ms: u64,
        used: StateUse,
        id: &RequestId,
        answer: Option<&Encoded>,
        limits: &Limits,
    ) {
        self.running.remove(&used.digest);
        self.prune(now_ms);
        if used.expires_at_ms <= now_ms {
            // The state itself is refused from now on; nothing to remember.
            return;
        }
        let keep = limits.max_ledger_bytes / 16;
        let outcome = match answer.map(|a| (a.after_id(id), a.fault)) {
            None => Outcome::Interrupted,
            Some((Some(tail), fault)) if tail.len() <= keep => Outcome::Kept { tail: tail.to_vec(), fault },
            // Too large, or not a response to this id (never, for a call's own answer): the
            // replay is refused rather than answered with something else.
            Some(_) => Outcome::TooLarge,
        };
        let cost = ENTRY_OVERHEAD + if let Outcome::Kept { tail, .. } = &outcome { tail.len() } else { 0 };
        while !self.done.is_empty()
            && (self.done.len() >= limits.max_ledger_entries
                || self.bytes.saturating_add(cost) > limits.max_ledger_bytes)
        {
            self.evict_first();
        }
        if limits.max_ledger_entries == 0 || cost > limits.max_ledger_bytes {
            // No room at all: as if recorded and evicted at once.
            self.raise_floor(used.expires_at_ms);
            return;
        }
        if let Some(old) =
            self.done.insert(used.digest, Entry { expires_at_ms: used.expires_at_ms, outcome, cost })
        {
            // The same state answered twice: only possible if a copy ran after its record was
            // pruned, which `check` prevents. Keep the accounting right all the same.
            self.by_expiry.remove(&(old.expires_at_ms, used.digest));
            self.bytes = self.bytes.saturating_sub(old.cost);
        }
        self.by_expiry.insert((used.expires_at_ms, used.digest));
        self.bytes = self.bytes.saturating_add(cost);
    }

    /// Forgets every record: the states they are about can no longer be opened (the epoch
    /// moved on). Calls still running record their outcome when they end, harmlessly.
    pub(super) fn clear(&mut self) {
        self.done.clear();
        self.by_expiry.clear();
        self.bytes = 0;
    }

    /// Records kept, and the bytes they cost.
    #[cfg(test)]
    pub(super) fn held(&self) -> (usize, usize) {
        (self.done.len(), self.bytes)
    }

    /// Drops the records of states that expired: they are refused as expired before the ledger
    /// is asked, so their records can go without raising the floor.
    fn prune(&mut self, now_ms: u64) {
        while let Some(&(at, digest)) = self.by_expiry.first() {
            if at > now_ms {
                break;
            }
            self.by_expiry.pop_first();
            if let Some(e) = self.done.remove(&digest) {
                self.bytes = self.bytes.saturating_sub(e.cost);
            }
        }
    }

    fn evict_first(&mut self) {
        let Some((at, digest)) = self.by_expiry.pop_first() else { return };
        if let Some(e) = self.done.remove(&digest) {
            self.bytes = self.bytes.saturating_sub(e.cost);
        }
        self.raise_floor(at);
    }

    fn raise_floor(&mut self, at: u64) {
        self.floor = Some(self.floor.map_or(at, |f| f.max(at)));
    }
}

/// `-32602` "requestState already used", with `data.reason`.
fn already_used(reason: &str, why: &str) -> RpcError {
    RpcError::invalid_params(format!("requestState already used: {why}"))
        .with_data(serde_json::json!({ "reason": reason }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::encode_result;
    use serde_json::json;

    fn id(n: u32) -> RequestId {
        RequestId::from_json(&n.to_string()).unwrap()
    }

    fn answer(n: u32, text: &str) -> Encoded {
        encode_result(&id(n), &json!({ "text": text })).into()
    }

    fn reason(e: RpcError) -> String {
        e.data.unwrap()["reason"].as_str().unwrap().to_owned()
    }

    #[test]
    fn a_used_state_is_answered_from_the_record_under_the_new_id() {
        let (mut l, limits) = (Ledger::default(), Limits::default());
        let used = StateUse::new("v1.state", 10_000);
        assert!(matches!(l.check(0, used, &id(1)), Ok(Seen::Fresh)));
        l.start(used);
        assert_eq!(reason(l.check(1, used, &id(2)).err().unwrap()), "in_progress");
        l.finish(2, used, &id(1), Some(&answer(1, "done")), &limits);
        let Ok(Seen::Replay(again)) = l.check(3, used, &id(7)) else { panic!() };
        assert_eq!(again.bytes, br#"{"jsonrpc":"2.0","id":7,"result":{"text":"done"}}"#);
        // Another state is not a copy; once its own state expired the record goes.
        assert!(matches!(l.check(3, StateUse::new("v1.other", 10_000), &id(8)), Ok(Seen::Fresh)));
        assert!(matches!(l.check(10_000, used, &id(9)), Ok(Seen::Fresh)));
        assert_eq!(l.held(), (0, 0));
    }

    #[test]
    fn errors_interruptions_and_large_outcomes() {
        let (mut l, mut limits) = (Ledger::default(), Limits::default());
        limits.max_ledger_bytes(16 * 1024);
        let err = StateUse::new("e", 100);
        l.start(err);
        let refusal = RpcError::invalid_params("no").encode(Some(&id(1)));
        l.finish(0, err, &id(1), Some(&refusal), &limits);
        let Ok(Seen::Replay(again)) = l.check(0, err, &id(2)) else { panic!() };
        assert_eq!(again.fault, refusal.fault, "the HTTP status follows the recorded error");
        let cut = StateUse::new("cut", 100);
        l.start(cut);
        l.finish(0, cut, &id(3), None, &limits);
        assert_eq!(reason(l.check(0, cut, &id(4)).err().unwrap()), "interrupted");
        let big = StateUse::new("big", 100);
        l.finish(0, big, &id(5), Some(&answer(5, &"x".repeat(2000))), &limits);
        assert_eq!(reason(l.check(0, big, &id(6)).err().unwrap()), "outcome_too_large");
    }

    #[test]
    fn eviction_refuses_what_it_can_no_longer_tell_apart() {
        let (mut l, mut limits) = (Ledger::default(), Limits::default());
        limits.max_ledger_entries(2);
        let state = |n: u64| StateUse::new(&format!("s{n}"), 1000 + n);
        for n in [3, 1, 2] {
            l.finish(0, state(n), &id(1), Some(&answer(1, "ok")), &limits);
        }
        // s1 expires first and was evicted: it, and any unknown state expiring no later, is
        // refused; those expiring later are not.
        assert_eq!(l.held().0, 2);
        assert_eq!(reason(l.check(0, state(1), &id(2)).err().unwrap()), "evicted");
        assert_eq!(reason(l.check(0, state(0), &id(2)).err().unwrap()), "evicted");
        assert!(matches!(l.check(0, state(2), &id(2)), Ok(Seen::Replay(_))));
        assert!(matches!(l.check(0, state(9), &id(2)), Ok(Seen::Fresh)));
        // Bytes bound the ledger too.
        let mut tight = Limits::default();
        tight.max_ledger_bytes(3 * ENTRY_OVERHEAD + 200);
        let mut l = Ledger::default();
        for n in 0..10 {
            l.finish(0, state(n), &id(1), Some(&answer(1, "ok")), &tight);
            assert!(l.held().1 <= 3 * ENTRY_OVERHEAD + 200);
        }
        // Nothing kept at all: every copy is refused, never run.
        let mut none = Limits::default();
        none.max_ledger_entries(0);
        let mut l = Ledger::default();
        l.finish(0, state(5), &id(1), Some(&answer(1, "ok")), &none);
        assert_eq!(l.held(), (0, 0));
        assert_eq!(reason(l.check(0, state(5), &id(2)).err().unwrap()), "evicted");
    }
}
