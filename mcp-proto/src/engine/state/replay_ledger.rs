//! The replay ledger: what became of each 2026-07-28 request state that was used.
//!
//! A modern retry carries the `requestState` an earlier round issued. Its handler runs with
//! whatever side effects it has, and a client may send the same retry again: Streamable HTTP
//! tells it to when the response stream breaks, and a stateless server cannot tell that copy
//! from the first. So the engine remembers, for each state whose call it admitted, what the call
//! answered, until the state expires, and answers a copy from the record instead of running the
//! handler again (the seed's "completed replays enter recovery-only dispatch"). The rules, as
//! [`Engine::ask`](crate::engine::Engine::ask) documents them under "Replays":
//!
//! - a state whose call is still running: `-32602` "requestState already used",
//!   `data.reason: "in_progress"` (retry a moment later to get the recorded outcome);
//! - a state whose call answered: that answer (result or error), byte for byte, under the new
//!   request id; the `input_required` of an unfinished dialogue included, so a replay gets the
//!   same next prompt and the same next state;
//! - a state whose call ended without an answer (cancelled, its connection closed): `-32602`,
//!   `data.reason: "interrupted"`;
//! - a state whose answer was too large to keep: `-32602`, `data.reason: "outcome_too_large"`;
//! - a state the ledger may have forgotten (its caller had an entry expiring no earlier
//!   evicted): `-32602`, `data.reason: "evicted"`, even if it was never used, because the engine
//!   can no longer tell.
//!
//! The ledger is consulted only where a fresh round would admit its call, after the gates and
//! the argument check, and a recorded answer goes out only if the copy's capabilities allow it
//! (`replay.rs`): a copy from a caller that lost its access, or without a capability the record
//! needs, is refused as a fresh round would be, and the record stays.
//!
//! In every refused case the client starts the call again without a state. A retry refused for
//! what it brought itself (an invalid answer) is not recorded: its handler got no answer, and a
//! corrected copy may still use the state. A first round
//! carries no state, so a copy of it cannot be recognised and runs again: only retries are
//! protected. The ledger is this engine's own; replicas of one cluster also share one through
//! their backend when [`Engine::set_shared_ledger`](crate::engine::Engine::set_shared_ledger) is on
//! (`shared.rs`): a retry this ledger has not seen is claimed there before it runs, so a copy
//! sent to another replica is answered from the record rather than run again.
//!
//! # Shares
//!
//! One caller must not cost another anything, so records are held per caller
//! ([`Caller::binding`](crate::caller::Caller::binding), which every state is bound to) and the ledger
//! follows the fair-share rule of [`Limits::fair_share`]: with `n` callers holding records (the
//! one recording counted), each is entitled to `max_ledger_entries / n` entries and
//! `max_ledger_bytes / n` bytes. When a record does not fit:
//!
//! - a caller at or past its share (counting the new record) evicts its own record that expires
//!   first;
//! - otherwise the caller holding the most entries, if it is past its share, else the caller
//!   holding the most bytes, if it is past its share, else the caller holding the most entries,
//!   gives up its record that expires first. So a caller below its share is never evicted while
//!   another is above its share. An answer past the caller's share of bytes by itself, when
//!   nobody is past theirs, is not kept: its replay is refused as `outcome_too_large`.
//!
//! An eviction raises the *evicted caller's* floor: its states expiring no later than the evicted
//! record that the ledger does not hold are refused as `evicted`; other callers' states are not.
//! A caller whose last record was evicted keeps its floor, which takes one entry of the bound
//! (no bytes), until the floor's time passes; callers with neither records nor a floor that
//! still matters are forgotten, so the bookkeeping is bounded by `max_ledger_entries`. Only when
//! more callers than `max_ledger_entries` hold a place at once must one of those floors be given
//! up; it then becomes a floor for every caller (the only way one caller can cost another here,
//! and only when the entries are fewer than the callers), as it does when nothing can be kept at
//! all (`max_ledger_entries` 0, or a bytes bound below one entry's bookkeeping).
//!
//! Entries are keyed by a SHA-256 digest of the state token (looked up only after the token
//! verified and matched the caller, so nobody can read another's recorded outcome), callers by
//! a SHA-256 digest of their binding, ordered by expiry and load in `BTreeMap`s and `BTreeSet`s
//! so that output never depends on hash order, and every operation is O(log n) per record
//! pruned or evicted.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::blame::Blame;
use crate::jsonrpc::{Encoded, ErrorCode, RequestId, RpcError};
use crate::limits::Limits;

/// What one entry costs beside its answer: the key twice, the expiry, the map nodes. An
/// estimate, so that a flood of tiny answers is bounded by bytes as well as by count.
const ENTRY_OVERHEAD: usize = 64;

/// One use of a sealed state: which state, whose, and until when a record of it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) struct StateUse {
    digest: [u8; 32],
    caller: [u8; 32],
    expires_at_ms: u64,
}

impl StateUse {
    /// The use of `token`, bound to the caller `binding` ([`Caller::binding`](crate::caller::Caller::binding)),
    /// which expires at `expires_at_ms` (unix milliseconds).
    pub(in crate::engine) fn new(token: &str, binding: &str, expires_at_ms: u64) -> Self {
        let mut h = Sha256::new();
        h.update(b"mcp-request-state-use-v1\n");
        h.update(token.as_bytes());
        let mut c = Sha256::new();
        c.update(b"mcp-ledger-caller-v1\n");
        c.update(binding.as_bytes());
        Self { digest: h.finalize().into(), caller: c.finalize().into(), expires_at_ms }
    }

    /// The key of this use in a shared ledger: the state's digest in hex (64 characters).
    /// The digest and never the token, so a backend that leaks its keys leaks nothing that
    /// opens a state; and looked up only after the token verified and matched the caller, so
    /// a shared record is only ever replayed to the caller the state was issued to.
    pub(in crate::engine) fn key(&self) -> String {
        use std::fmt::Write;
        let mut hex = String::with_capacity(64);
        for b in self.digest {
            let _ = write!(hex, "{b:02x}");
        }
        hex
    }

    /// When the state expires (unix milliseconds): no record of it matters after that.
    pub(in crate::engine) fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

/// What a shared ledger is told a call of `id` ended with: the rule [`Ledger::finish`] starts
/// from (its fair shares may keep less locally, never more).
pub(in crate::engine) fn shared_outcome(
    id: &RequestId,
    answer: Option<&Encoded>,
    limits: &Limits,
) -> crate::engine::state::messages::SharedOutcome {
    use crate::engine::state::messages::SharedOutcome;
    let keep = limits.max_ledger_bytes / 16;
    match answer.map(|a| (a.after_id(id), a.fault)) {
        None => SharedOutcome::Interrupted,
        Some((Some(tail), fault)) if tail.len() <= keep => SharedOutcome::Kept { tail: tail.to_vec(), fault },
        Some(_) => SharedOutcome::TooLarge,
    }
}

/// The refusal a copy of a used state gets for `outcome`, or `None` when the outcome is an
/// answer to replay.
pub(in crate::engine) fn refusal(
    outcome: &crate::engine::state::messages::SharedOutcome,
) -> Option<RpcError> {
    use crate::engine::state::messages::SharedOutcome;
    match outcome {
        SharedOutcome::Kept { .. } => None,
        SharedOutcome::Running => Some(already_used(
            "in_progress",
            "the call it continues is still running; send the same request again shortly",
        )),
        SharedOutcome::TooLarge => Some(already_used(
            "outcome_too_large",
            "its outcome was too large to keep; start the call again without requestState",
        )),
        SharedOutcome::Interrupted => Some(already_used(
            "interrupted",
            "the call it continued ended without an answer; start the call again without requestState",
        )),
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
    caller: [u8; 32],
    outcome: Outcome,
    cost: usize,
}

/// One caller's part of the ledger.
#[derive(Default)]
struct Holder {
    /// Its entries in `done`, by expiry: its own are evicted first-expiring first.
    records: BTreeSet<(u64, [u8; 32])>,
    /// Bytes its entries cost.
    bytes: usize,
    /// The latest expiry of its entries evicted before they expired: a state of this caller
    /// expiring no later that the ledger does not hold may be one it forgot.
    floor: Option<u64>,
}

impl Holder {
    /// Entries of the bound it takes: a caller whose records are all gone but whose floor
    /// still matters takes one.
    fn places(&self) -> usize {
        self.records.len().max(1)
    }
}

/// What the ledger says about a retry.
pub(in crate::engine) enum Seen {
    /// Never used as far as the ledger can tell: run it.
    Fresh,
    /// Used: this is the answer.
    Replay(Encoded),
}

/// The record of used request states; see the module docs.
#[derive(Default)]
pub(in crate::engine) struct Ledger {
    /// States whose call is in flight. Not bounded here: each is a call, and calls are bounded
    /// by the in-flight and connection limits.
    running: BTreeSet<[u8; 32]>,
    done: BTreeMap<[u8; 32], Entry>,
    /// `done`, by expiry: what expires first is pruned first.
    by_expiry: BTreeSet<(u64, [u8; 32])>,
    /// Bytes `done` holds, by the entries' costs.
    bytes: usize,
    /// Callers with records, or with a floor that still matters.
    holders: BTreeMap<[u8; 32], Holder>,
    /// `holders` by places taken, then by bytes: the greediest last.
    by_places: BTreeSet<(usize, [u8; 32])>,
    by_bytes: BTreeSet<(usize, [u8; 32])>,
    /// Holders with no records (only a floor), by floor: forgotten once it passes.
    bare: BTreeSet<(u64, [u8; 32])>,
    /// A floor for every caller, raised only when a caller's own floor could not be kept (see
    /// the module docs).
    spill: Option<u64>,
}

impl Ledger {
    /// What to do with a retry carrying the state of `used`, for request `id`, at `now_ms`.
    pub(in crate::engine) fn check(
        &mut self,
        now_ms: u64,
        used: StateUse,
        id: &RequestId,
    ) -> Result<Seen, RpcError> {
        self.prune(now_ms);
        use crate::engine::state::messages::SharedOutcome;
        let refused = |o: SharedOutcome| refusal(&o).unwrap_or_else(RpcError::misuse);
        if self.running.contains(&used.digest) {
            return Err(refused(SharedOutcome::Running));
        }
        if let Some(entry) = self.done.get(&used.digest) {
            return match &entry.outcome {
                Outcome::Kept { tail, fault } => Ok(Seen::Replay(Encoded::with_id(id, tail, *fault))),
                Outcome::TooLarge => Err(refused(SharedOutcome::TooLarge)),
                Outcome::Interrupted => Err(refused(SharedOutcome::Interrupted)),
            };
        }
        let own = self.holders.get(&used.caller).and_then(|h| h.floor);
        if [own, self.spill].into_iter().flatten().any(|floor| used.expires_at_ms <= floor) {
            return Err(already_used(
                "evicted",
                "its outcome is no longer kept; start the call again without requestState",
            ));
        }
        Ok(Seen::Fresh)
    }

    /// The call of `used` was admitted: until it ends, a copy is answered "in progress".
    pub(in crate::engine) fn start(&mut self, used: StateUse) {
        self.running.insert(used.digest);
    }

    /// The call of `used` ended without using its state (see `Engine::ask`): forget it was
    /// running, record nothing.
    pub(in crate::engine) fn release(&mut self, used: StateUse) {
        self.running.remove(&used.digest);
    }

    /// The call of `used`, request `id`, ended at `now_ms` with `answer`, or (`None`) without
    /// one. Records the outcome, evicting past the bounds of `limits` as the module docs say.
    pub(in crate::engine) fn finish(
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
        let mut outcome = match answer.map(|a| (a.after_id(id), a.fault)) {
            None => Outcome::Interrupted,
            Some((Some(tail), fault)) if tail.len() <= keep => Outcome::Kept { tail: tail.to_vec(), fault },
            // Too large, or not a response to this id (never, for a call's own answer): the
            // replay is refused rather than answered with something else.
            Some(_) => Outcome::TooLarge,
        };
        let mut cost =
            ENTRY_OVERHEAD + if let Outcome::Kept { tail, .. } = &outcome { tail.len() } else { 0 };
        // The same state answered twice: only possible if a copy ran after its record was
        // pruned, which `check` prevents. Keep the accounting right all the same.
        self.drop_record(now_ms, used.digest, false);
        if limits.max_ledger_entries == 0 || cost > limits.max_ledger_bytes {
            // No room at all: as if recorded and evicted at once, and with no place for the
            // caller's own floor either.
            self.raise_spill(used.expires_at_ms);
            return;
        }
        loop {
            let (records, bytes, bare) = self
                .holders
                .get(&used.caller)
                .map_or((0, 0, false), |h| (h.records.len(), h.bytes, h.records.is_empty()));
            // A bare holder already takes the place its first record will.
            let places = self.places().saturating_add(usize::from(!bare));
            if places <= limits.max_ledger_entries
                && self.bytes.saturating_add(cost) <= limits.max_ledger_bytes
            {
                break;
            }
            let holders = self.holders.len() + usize::from(!self.holders.contains_key(&used.caller));
            let place_share = Limits::fair_share(limits.max_ledger_entries, holders);
            let byte_share = Limits::fair_share(limits.max_ledger_bytes, holders);
            let own = records > 0
                && (records.saturating_add(1) > place_share || bytes.saturating_add(cost) > byte_share);
            let victim = if own {
                Some(used.caller)
            } else {
                let most = self.by_places.last().copied();
                let heaviest = self.by_bytes.last().copied();
                let over =
                    most.filter(|(n, _)| *n > place_share).or(heaviest.filter(|(b, _)| *b > byte_share));
                if over.is_none() && cost > byte_share && matches!(outcome, Outcome::Kept { .. }) {
                    // This one answer is past the caller's share of bytes on its own, and
                    // nobody else is past theirs: keep only that it was too large, rather
                    // than evict a caller within its share for it.
                    outcome = Outcome::TooLarge;
                    cost = ENTRY_OVERHEAD;
                    continue;
                }
                over.or(most).map(|(_, caller)| caller)
            };
            // No victim means nothing is held, and then the record fits (checked above).
            let Some(victim) = victim else { break };
            self.evict_from(now_ms, victim);
        }
        let mut holder = self.take(&used.caller).unwrap_or_default();
        holder.records.insert((used.expires_at_ms, used.digest));
        holder.bytes = holder.bytes.saturating_add(cost);
        self.put(now_ms, used.caller, holder);
        let entry = Entry { expires_at_ms: used.expires_at_ms, caller: used.caller, outcome, cost };
        self.done.insert(used.digest, entry);
        self.by_expiry.insert((used.expires_at_ms, used.digest));
        self.bytes = self.bytes.saturating_add(cost);
    }

    /// Forgets every record and floor: the states they are about can no longer be opened (the
    /// epoch moved on), and no state of the new epoch was ever recorded. Calls still running
    /// record their outcome when they end, harmlessly.
    pub(in crate::engine) fn clear(&mut self) {
        self.done.clear();
        self.by_expiry.clear();
        self.bytes = 0;
        self.holders.clear();
        self.by_places.clear();
        self.by_bytes.clear();
        self.bare.clear();
        self.spill = None;
    }

    /// Records kept, and the bytes they cost.
    #[cfg(test)]
    pub(in crate::engine) fn held(&self) -> (usize, usize) {
        (self.done.len(), self.bytes)
    }

    /// Callers the ledger keeps anything for.
    #[cfg(test)]
    pub(in crate::engine) fn callers(&self) -> usize {
        self.holders.len()
    }

    /// Entries of `max_ledger_entries` taken: the records, and the floors kept without one.
    fn places(&self) -> usize {
        self.done.len().saturating_add(self.bare.len())
    }

    /// Drops the records of states that expired, and floors that passed: states are refused as
    /// expired before the ledger is asked, so these can go without raising any floor.
    fn prune(&mut self, now_ms: u64) {
        while let Some(&(at, digest)) = self.by_expiry.first() {
            if at > now_ms {
                break;
            }
            self.drop_record(now_ms, digest, false);
        }
        while let Some(&(at, caller)) = self.bare.first() {
            if at > now_ms {
                break;
            }
            self.take(&caller);
        }
        if self.spill.is_some_and(|at| at <= now_ms) {
            self.spill = None;
        }
    }

    /// Gives up one entry of `caller`: its record that expires first, raising its floor; or,
    /// when it has only a floor left, the floor, which then holds for every caller.
    fn evict_from(&mut self, now_ms: u64, caller: [u8; 32]) {
        let first = self.holders.get(&caller).and_then(|h| h.records.first().copied());
        match first {
            Some((_, digest)) => self.drop_record(now_ms, digest, true),
            None => {
                if let Some(floor) = self.take(&caller).and_then(|h| h.floor) {
                    self.raise_spill(floor);
                }
            }
        }
    }

    /// Removes the record of `digest`, if any; `evicted` raises its caller's floor to it.
    fn drop_record(&mut self, now_ms: u64, digest: [u8; 32], evicted: bool) {
        let Some(entry) = self.done.remove(&digest) else { return };
        self.by_expiry.remove(&(entry.expires_at_ms, digest));
        self.bytes = self.bytes.saturating_sub(entry.cost);
        let mut holder = self.take(&entry.caller).unwrap_or_default();
        holder.records.remove(&(entry.expires_at_ms, digest));
        holder.bytes = holder.bytes.saturating_sub(entry.cost);
        if evicted {
            holder.floor = Some(holder.floor.map_or(entry.expires_at_ms, |f| f.max(entry.expires_at_ms)));
        }
        self.put(now_ms, entry.caller, holder);
    }

    /// Takes `caller`'s holder out of the ledger and its indexes.
    fn take(&mut self, caller: &[u8; 32]) -> Option<Holder> {
        let holder = self.holders.remove(caller)?;
        self.by_places.remove(&(holder.places(), *caller));
        self.by_bytes.remove(&(holder.bytes, *caller));
        if let (true, Some(floor)) = (holder.records.is_empty(), holder.floor) {
            self.bare.remove(&(floor, *caller));
        }
        Some(holder)
    }

    /// Puts `caller`'s holder back, unless there is nothing left worth keeping at `now_ms`.
    fn put(&mut self, now_ms: u64, caller: [u8; 32], mut holder: Holder) {
        if holder.floor.is_some_and(|f| f <= now_ms) {
            holder.floor = None;
        }
        if holder.records.is_empty() {
            let Some(floor) = holder.floor else { return };
            self.bare.insert((floor, caller));
        }
        self.by_places.insert((holder.places(), caller));
        self.by_bytes.insert((holder.bytes, caller));
        self.holders.insert(caller, holder);
    }

    fn raise_spill(&mut self, at: u64) {
        self.spill = Some(self.spill.map_or(at, |f| f.max(at)));
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
        let used = StateUse::new("v1.state", "c", 10_000);
        assert!(matches!(l.check(0, used, &id(1)), Ok(Seen::Fresh)));
        l.start(used);
        assert_eq!(reason(l.check(1, used, &id(2)).err().unwrap()), "in_progress");
        l.finish(2, used, &id(1), Some(&answer(1, "done")), &limits);
        let Ok(Seen::Replay(again)) = l.check(3, used, &id(7)) else { panic!() };
        assert_eq!(again.bytes, br#"{"jsonrpc":"2.0","id":7,"result":{"text":"done"}}"#);
        // Another state is not a copy; once its own state expired the record goes.
        assert!(matches!(l.check(3, StateUse::new("v1.other", "c", 10_000), &id(8)), Ok(Seen::Fresh)));
        assert!(matches!(l.check(10_000, used, &id(9)), Ok(Seen::Fresh)));
        assert_eq!(l.held(), (0, 0));
    }

    #[test]
    fn errors_interruptions_and_large_outcomes() {
        let (mut l, mut limits) = (Ledger::default(), Limits::default());
        limits.max_ledger_bytes(16 * 1024);
        let err = StateUse::new("e", "c", 100);
        l.start(err);
        let refusal = RpcError::invalid_params("no").encode(Some(&id(1)));
        l.finish(0, err, &id(1), Some(&refusal), &limits);
        let Ok(Seen::Replay(again)) = l.check(0, err, &id(2)) else { panic!() };
        assert_eq!(again.fault, refusal.fault, "the HTTP status follows the recorded error");
        let cut = StateUse::new("cut", "c", 100);
        l.start(cut);
        l.finish(0, cut, &id(3), None, &limits);
        assert_eq!(reason(l.check(0, cut, &id(4)).err().unwrap()), "interrupted");
        let big = StateUse::new("big", "c", 100);
        l.finish(0, big, &id(5), Some(&answer(5, &"x".repeat(2000))), &limits);
        assert_eq!(reason(l.check(0, big, &id(6)).err().unwrap()), "outcome_too_large");
    }

    #[test]
    fn eviction_refuses_what_it_can_no_longer_tell_apart() {
        let (mut l, mut limits) = (Ledger::default(), Limits::default());
        limits.max_ledger_entries(2);
        let state = |n: u64| StateUse::new(&format!("s{n}"), "c", 1000 + n);
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

    #[test]
    fn a_flood_evicts_the_flooder_and_refuses_only_its_states() {
        let (mut l, mut limits) = (Ledger::default(), Limits::default());
        limits.max_ledger_entries(6);
        let of = |who: &str, n: u64| StateUse::new(&format!("{who}{n}"), who, 1000 + n);
        // B records one outcome early; A floods with states expiring later than all of B's.
        l.finish(0, of("b", 1), &id(1), Some(&answer(1, "b")), &limits);
        for n in 10..40 {
            l.finish(0, of("a", n), &id(1), Some(&answer(1, "a")), &limits);
            assert!(l.held().0 <= 6);
        }
        // B's record stayed, B's unknown states are still run, A's oldest are refused.
        assert!(matches!(l.check(0, of("b", 1), &id(2)), Ok(Seen::Replay(_))));
        assert!(matches!(l.check(0, of("b", 5), &id(2)), Ok(Seen::Fresh)));
        assert!(matches!(l.check(0, of("b", 30), &id(2)), Ok(Seen::Fresh)));
        assert_eq!(reason(l.check(0, of("a", 10), &id(2)).err().unwrap()), "evicted");
        assert_eq!(reason(l.check(0, of("a", 5), &id(2)).err().unwrap()), "evicted");
        assert!(matches!(l.check(0, of("a", 39), &id(2)), Ok(Seen::Replay(_))));
        // A newcomer below its share takes its place from A, never from B.
        l.finish(0, of("c", 2), &id(1), Some(&answer(1, "c")), &limits);
        assert!(matches!(l.check(0, of("b", 1), &id(2)), Ok(Seen::Replay(_))));
        assert!(matches!(l.check(0, of("c", 2), &id(2)), Ok(Seen::Replay(_))));
        assert_eq!(l.held().0, 6);
        // Callers at their share evict their own: C records up to its share of 2, then its own.
        for n in 3..6 {
            l.finish(0, of("c", n), &id(1), Some(&answer(1, "c")), &limits);
        }
        assert_eq!(reason(l.check(0, of("c", 3), &id(2)).err().unwrap()), "evicted");
        assert!(matches!(l.check(0, of("b", 1), &id(2)), Ok(Seen::Replay(_))));
        assert!(matches!(l.check(0, of("a", 39), &id(2)), Ok(Seen::Replay(_))));
    }

    #[test]
    fn a_caller_heavy_in_bytes_gives_way_to_one_below_its_share() {
        let (mut l, mut limits) = (Ledger::default(), Limits::default());
        limits.max_ledger_bytes(16 * 1024);
        let of = |who: &str, n: u64| StateUse::new(&format!("{who}{n}"), who, 1000 + n);
        let big = "x".repeat(900);
        for n in 10..40 {
            l.finish(0, of("h", n), &id(1), Some(&answer(1, &big)), &limits);
            assert!(l.held().1 <= 16 * 1024);
        }
        // Few entries, but past its share of bytes: the light caller's small records evict
        // the heavy one's, never each other.
        for n in 0..8 {
            l.finish(0, of("t", n), &id(1), Some(&answer(1, "t")), &limits);
        }
        for n in 0..8 {
            assert!(matches!(l.check(0, of("t", n), &id(2)), Ok(Seen::Replay(_))), "t{n}");
        }
        assert_eq!(reason(l.check(0, of("h", 10), &id(2)).err().unwrap()), "evicted");
        assert!(matches!(l.check(0, of("h", 39), &id(2)), Ok(Seen::Replay(_))));
    }

    #[test]
    fn bookkeeping_stays_bounded_and_is_forgotten_once_it_no_longer_matters() {
        let (mut l, mut limits) = (Ledger::default(), Limits::default());
        limits.max_ledger_entries(4);
        let of = |who: u64, n: u64| StateUse::new(&format!("{who}/{n}"), &format!("caller {who}"), n);
        // More callers than places: each keeps at most one place, records or floor.
        for who in 0..50 {
            l.finish(0, of(who, 1000 + who), &id(1), Some(&answer(1, "ok")), &limits);
            assert!(l.callers() <= 4 && l.held().0 <= 4, "{who}");
        }
        // A floor that had to be given up holds for everyone: the callers outnumber the places.
        assert_eq!(reason(l.check(0, of(7, 1000), &id(2)).err().unwrap()), "evicted");
        assert!(matches!(l.check(0, of(49, 1049), &id(2)), Ok(Seen::Replay(_))));
        assert!(matches!(l.check(0, of(7, 2000), &id(2)), Ok(Seen::Fresh)));
        // A caller whose last record was evicted keeps only its floor, until that passes.
        let mut l = Ledger::default();
        limits.max_ledger_entries(3);
        l.finish(0, of(1, 100), &id(1), Some(&answer(1, "ok")), &limits);
        for n in 200..204 {
            l.finish(0, of(2, n), &id(1), Some(&answer(1, "ok")), &limits);
        }
        // Caller 1 is below its share and keeps its record; 2 evicted its own.
        assert!(matches!(l.check(0, of(1, 100), &id(2)), Ok(Seen::Replay(_))));
        assert_eq!(l.callers(), 2);
        assert!(matches!(l.check(150, of(2, 300), &id(2)), Ok(Seen::Fresh)));
        assert_eq!(l.callers(), 1, "caller 1 had only an expired record");
        assert!(matches!(l.check(250, of(2, 300), &id(2)), Ok(Seen::Fresh)));
        assert_eq!((l.callers(), l.held().0), (0, 0), "all expired, the floors too");
    }

    #[test]
    fn an_answer_past_its_callers_share_of_bytes_does_not_push_out_others() {
        let (mut l, mut limits) = (Ledger::default(), Limits::default());
        limits.max_ledger_bytes(32 * 1024);
        let of = |who: u64, n: u64| StateUse::new(&format!("{who}/{n}"), &format!("caller {who}"), n);
        let mut probe = Ledger::default();
        probe.finish(0, of(0, 1), &id(1), Some(&answer(1, "")), &limits);
        let framing = probe.held().1;
        // 20 callers, each within its share once a 21st comes (32 KiB / 21 = 1560 bytes), and
        // together leaving less room than the newcomer's answer needs.
        let small = "x".repeat(1550 - framing);
        for who in 0..20 {
            l.finish(0, of(who, 1000), &id(1), Some(&answer(1, &small)), &limits);
        }
        let before = l.held();
        assert_eq!(before, (20, 20 * 1550));
        // Within the 2 KiB a single outcome may take, but past the newcomer's share.
        let large = "y".repeat(2040 + ENTRY_OVERHEAD - framing);
        l.finish(0, of(99, 1000), &id(1), Some(&answer(1, &large)), &limits);
        assert_eq!(reason(l.check(0, of(99, 1000), &id(2)).err().unwrap()), "outcome_too_large");
        for who in 0..20 {
            assert!(matches!(l.check(0, of(who, 1000), &id(2)), Ok(Seen::Replay(_))), "{who}");
        }
        assert_eq!(l.held(), (before.0 + 1, before.1 + ENTRY_OVERHEAD));
    }
}
