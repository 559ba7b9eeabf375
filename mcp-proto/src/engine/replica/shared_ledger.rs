//! The replay ledger shared between replicas: what the engine asks a cluster before it runs a
//! retry, and what it tells the cluster once the retry ended.
//!
//! Each engine keeps its own ledger (`state/replay_ledger.rs`). Replicas behind a load balancer each see
//! some copies of a retry, so with only their own ledgers a retry sent to two replicas runs
//! its handler twice. With [`Engine::set_shared_ledger`] on, a retry the local ledger has not
//! seen is admitted as before (timeouts, cancellation and closes apply to it, and a local copy
//! gets `in_progress`), but its [`Invocation`] is held back and a [`Claim`] is queued instead
//! ([`Output::Claim`](crate::engine::Output::Claim)). The shim asks its backend to mark the state running unless some
//! replica already did, and answers with [`Engine::claim_result`]:
//!
//! - [`ClaimResult::Won`]: the handler runs here ([`Output::Invoke`], as it would have);
//! - [`ClaimResult::Taken`]: another replica ran it or runs it; the call is answered from
//!   what the backend holds ([`SharedOutcome`]), byte for byte under this request's id, and
//!   the handler never runs here;
//! - [`ClaimResult::Unavailable`]: the backend could not say; the handler runs here. The
//!   replica keeps serving while its backend is away, at a price: a retry then may run once
//!   per replica, as it would without sharing.
//!
//! When a call that ran here ends, a [`Record`] of what the local ledger records (the answer,
//! or that it was too large to keep, or that the call ended without one) is queued
//! ([`Output::Record`](crate::engine::Output::Record)) for the backend to keep until the state expires. A call answered
//! from another replica's record queues none. A call that ends while its claim is out
//! (cancelled, closed, timed out) is not run when the claim comes back; if the claim was won,
//! a record `Interrupted` then gives the state's fate to the other replicas, as the local
//! ledger keeps it.
//!
//! # Security
//!
//! The key is the SHA-256 digest the local ledger uses, looked up only after the state's token
//! verified and matched the caller it was issued to: a record is only ever replayed to that
//! caller, and a backend's keys open nothing.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::Value;

use crate::engine::state::messages::{Claim, ClaimResult, Record, SharedOutcome};
use crate::engine::state::outputs::Bounded;
use crate::engine::{state::replay_ledger, CallId, Engine, Invocation, Output};
use crate::jsonrpc::{Encoded, RpcError};

/// Claims queued for [`Output::Claim`](crate::engine::Output::Claim) at most: 1024. Past it a retry is not held: it runs
/// here at once, as if the backend were [`ClaimResult::Unavailable`], and the drop is counted in
/// [`EngineStatus::dropped_claims`](crate::engine::EngineStatus::dropped_claims). A shim that drains
/// after every input, as the server layer does, never comes near it.
pub const MAX_PENDING_CLAIMS: usize = 1024;

/// Records queued for [`Output::Record`](crate::engine::Output::Record) at most: 1024. Past it the newest record is
/// dropped and counted in [`EngineStatus::dropped_shared_records`](crate::engine::EngineStatus::dropped_shared_records):
/// other replicas then answer a copy `in_progress` until the claim's lease ends, and may run it
/// once more after that. A shim that drains after every input never comes near it.
pub const MAX_PENDING_RECORDS: usize = 1024;

/// How long past a call's deadline its claim is leased, in milliseconds: 5000. A claim is
/// leased until the state expires, or, when the call has a deadline
/// ([`Limits::call_timeout`](crate::limits::Limits::call_timeout)), until the deadline and this margin,
/// whichever is sooner: the call cannot run past its deadline, so a lease that outlived it
/// would only matter if this replica died before writing its record, and then every copy would
/// be refused `in_progress` until the state expired. The margin covers the record's trip to the
/// backend and the replicas' clocks disagreeing a little.
pub const CLAIM_MARGIN_MS: u64 = 5000;

/// A call whose invocation waits for its claim.
struct Held<H> {
    inv: Invocation<H>,
    /// The call becomes a task once it may run (its `CreateTaskResult` is what is recorded).
    task: bool,
}

/// The engine's side of the shared ledger: the held invocations (its claims and records wait
/// in the output queue).
pub(in crate::engine) struct Shared<H> {
    on: bool,
    held: BTreeMap<CallId, Held<H>>,
    /// Calls that ended while their claim was out: the record that gives the state's fate (as
    /// the local ledger keeps it) to the other replicas, should the claim come back won. At
    /// most [`MAX_PENDING_CLAIMS`]; past it the oldest is forgotten (a won claim of it then
    /// lapses with its lease).
    ended: BTreeMap<CallId, Record>,
}

impl<H> Default for Shared<H> {
    fn default() -> Self {
        Self { on: false, held: BTreeMap::new(), ended: BTreeMap::new() }
    }
}

impl<H: Clone> Engine<H> {
    /// Whether 2026-07-28 retries are claimed in a replay ledger shared with other replicas
    /// before they run. Default off: the engine's own ledger alone decides, and nothing is
    /// queued. The server layer turns it on when the server is in a cluster.
    ///
    /// On, a retry the engine's own ledger has not seen is admitted as before (timeouts,
    /// cancellation and closes apply to it, and a copy sent here meanwhile is refused
    /// `in_progress`), but its [`Invocation`] is held back and a [`Claim`] is queued
    /// ([`Output::Claim`](crate::engine::Output::Claim)). The shim asks its backend to mark the state running
    /// unless some replica already did, and answers with [`claim_result`](Self::claim_result):
    /// [`ClaimResult::Won`] runs the handler here; [`ClaimResult::Taken`] answers the call from
    /// what the backend holds ([`SharedOutcome`]: the other replica's answer byte for byte
    /// under this request's id, or the `in_progress`, `interrupted` or `outcome_too_large`
    /// refusal) and the handler never runs here; [`ClaimResult::Unavailable`] runs it here, so
    /// the replica keeps serving while its backend is away, at a price: a retry may then run
    /// once per replica, as it would without sharing. When a call that ran here ends, a
    /// [`Record`] of what the engine's own ledger keeps is queued
    /// ([`Output::Record`](crate::engine::Output::Record)); a call answered from another replica's record
    /// queues none.
    ///
    /// A state is named by the SHA-256 digest the engine's own ledger keys it by, and is
    /// looked up only after its token verified and matched the caller it was issued to: a
    /// shared record is only ever replayed to that caller, and a backend's keys open nothing.
    ///
    /// Turning it off drops what is queued and runs here the calls still waiting for a claim.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn set_shared_ledger(&mut self, on: bool) {
        self.shared.on = on;
        if !on {
            self.out.clear(Bounded::Claim);
            self.out.clear(Bounded::Record);
            self.shared.ended.clear();
            let held: Vec<CallId> = self.shared.held.keys().copied().collect();
            for call in held {
                self.claimed(self.clock, call, ClaimResult::Unavailable);
            }
        }
    }

    /// The backend's answer to the claim of `call` (see [`ClaimResult`]). A call that ended
    /// meanwhile is not run; if its claim was won, a record `Interrupted` is queued so that
    /// the state's fate reaches the other replicas.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn claim_result(&mut self, now: Instant, call: CallId, result: ClaimResult) {
        self.input(now);
        self.claimed(now, call, result);
    }

    /// Queues `record` for the shared ledger ([`Output::Record`]).
    fn queue_record(&mut self, record: Record) {
        self.out.push_bounded(Output::Record(record), MAX_PENDING_RECORDS);
    }

    fn claimed(&mut self, now: Instant, call: CallId, result: ClaimResult) {
        let Some(held) = self.shared.held.remove(&call) else {
            if let Some(record) = self.shared.ended.remove(&call) {
                if result == ClaimResult::Won {
                    self.queue_record(record);
                }
            }
            return;
        };
        let outcome = match result {
            ClaimResult::Won | ClaimResult::Unavailable => {
                if let Some(c) = self.calls.get_mut(call) {
                    c.claiming = false;
                }
                if held.task {
                    if let Err(e) = self.begin_task(now, call) {
                        // Never, for a call admitted as a task; answered rather than stranded.
                        held.inv.ticket.settle();
                        if let Some(c) = self.finish_call(call) {
                            let answer = e.encode(Some(&c.id));
                            self.deliver(c, answer);
                        }
                        return;
                    }
                }
                self.out.push_back(Output::Invoke(held.inv));
                return;
            }
            ClaimResult::Taken(outcome) => {
                // The handler never runs here: nobody will pass the ticket back.
                held.inv.ticket.settle();
                outcome
            }
        };
        let Some(mut c) = self.finish_call(call) else { return };
        let answer = match replay_ledger::refusal(&outcome) {
            None => match outcome {
                SharedOutcome::Kept { tail, fault } => {
                    let answer = Encoded::with_id(&c.id, &tail, fault);
                    // Another replica's record passes the same capability check as a local
                    // one (replay.rs): a copy that fails it is refused, and the record is
                    // still kept here for a copy that passes.
                    let caps = c.input.as_ref().and_then(|i| i.mrtr.as_ref()).map(|(_, caps)| caps);
                    match crate::engine::extensions::replay::replay_admits(
                        &answer,
                        c.version,
                        caps.unwrap_or(&Value::Null),
                    ) {
                        Ok(()) => answer,
                        Err(refused) => {
                            if let Some(used) = c.used.take() {
                                let now_ms = self.unix_ms(now);
                                self.settle_state(now_ms, used, &c.id, Some(&answer), c.claiming);
                            }
                            refused.encode(Some(&c.id))
                        }
                    }
                }
                _ => RpcError::misuse().encode(Some(&c.id)),
            },
            Some(err) => {
                if outcome == SharedOutcome::Running {
                    // Still running elsewhere: nothing to remember here, the next copy asks
                    // again and gets the outcome once there is one.
                    if let Some(used) = c.used.take() {
                        self.ledger.release(used);
                    }
                }
                err.encode(Some(&c.id))
            }
        };
        // Also recorded in the local ledger (unless running elsewhere), so a later copy here
        // is answered without asking.
        self.deliver(c, answer);
    }

    /// Holds `inv` back and queues its claim, if the shared ledger is on and the call is a
    /// retry carrying a state; otherwise hands it back.
    pub(in crate::engine) fn hold(&mut self, inv: Invocation<H>) -> Result<Invocation<H>, CallId> {
        let call = inv.ticket.call();
        if !self.shared.on {
            return Ok(inv);
        }
        let Some((Some(used), deadline)) = self.calls.get(call).map(|c| (c.used, c.deadline)) else {
            return Ok(inv);
        };
        let expires = used.expires_at_ms();
        let lease_until_ms = match deadline {
            Some(at) => expires.min(self.unix_ms(at).saturating_add(CLAIM_MARGIN_MS)),
            None => expires,
        };
        if !self
            .out
            .push_bounded(Output::Claim(Claim { call, key: used.key(), lease_until_ms }), MAX_PENDING_CLAIMS)
        {
            return Ok(inv);
        }
        if let Some(c) = self.calls.get_mut(call) {
            c.claiming = true;
        }
        self.shared.held.insert(call, Held { inv, task: false });
        Err(call)
    }

    /// The held `call` becomes a task once it may run.
    pub(in crate::engine) fn hold_as_task(&mut self, call: CallId) {
        if let Some(h) = self.shared.held.get_mut(&call) {
            h.task = true;
        }
    }

    /// `call` is ending: if its claim is still out, it will not run (see `claimed`).
    pub(in crate::engine) fn unhold(&mut self, call: CallId, used: Option<replay_ledger::StateUse>) {
        let Some(held) = self.shared.held.remove(&call) else { return };
        // The handler never runs: nobody will pass the ticket back.
        held.inv.ticket.settle();
        let Some(used) = used else { return };
        if self.shared.ended.len() >= MAX_PENDING_CLAIMS {
            self.shared.ended.pop_first();
        }
        // Interrupted until `settle_state` learns what the local ledger keeps.
        let record = Record {
            key: used.key(),
            expires_at_ms: used.expires_at_ms(),
            outcome: Some(SharedOutcome::Interrupted),
        };
        self.shared.ended.insert(call, record);
    }

    /// The call that used `used`, request `id`, ended with `answer` (or without one): the
    /// local ledger records it, and, when the call ran here and the ledger is shared, so does
    /// the shared one.
    pub(in crate::engine) fn settle_state(
        &mut self,
        now_ms: u64,
        used: replay_ledger::StateUse,
        id: &crate::jsonrpc::RequestId,
        answer: Option<&Encoded>,
        claiming: bool,
    ) {
        if self.shared.on {
            let outcome = Some(replay_ledger::shared_outcome(id, answer, &self.config.limits));
            let key = used.key();
            if !claiming {
                self.queue_record(Record { key, expires_at_ms: used.expires_at_ms(), outcome });
            } else if let Some(ended) = self.shared.ended.values_mut().rev().find(|r| r.key == key) {
                // It ended while its claim was out (a timeout answers it): the claim, if won,
                // gives the other replicas the same fate.
                ended.outcome = outcome;
            }
        }
        self.ledger.finish(now_ms, used, id, answer, &self.config.limits);
    }

    /// The call that was to use `used` gave its handler nothing (see `Engine::ask`): the state
    /// is free again, here and, when the call ran here, in the shared ledger.
    pub(in crate::engine) fn release_state(&mut self, used: replay_ledger::StateUse, claiming: bool) {
        if self.shared.on && !claiming {
            self.queue_record(Record { key: used.key(), expires_at_ms: used.expires_at_ms(), outcome: None });
        }
        self.ledger.release(used);
    }
}

#[cfg(test)]
mod tests;
