//! Policy on replays: what a copy of an already-used 2026-07-28 `requestState` must pass before
//! the replay ledger (`state/replay_ledger.rs`, and the shared one in `replica/shared_ledger.rs`) answers it.
//!
//! A recorded answer is the outcome of a round that passed every check when it ran, but a copy
//! can come later, from a caller whose role was revoked since, or with capabilities the first
//! copy had and this one does not. So a copy goes through everything a fresh round goes through
//! (the seed's "each resume rechecks policy, arguments, scope and serving epoch" and "capability
//! withdrawal is respected on replay"):
//!
//! - the state itself: its seal, its caller binding, method, arguments digest, epoch and expiry
//!   ([`Engine::mrtr_input`](crate::engine::Engine), before any of this);
//! - the server gate, the method being offered to the caller, the item's gate (a refused item is
//!   answered exactly as one never registered), and the arguments against the item's input
//!   schema: the ledger is consulted only where a fresh round would admit the call, after all of
//!   them ([`Engine::replayed`]);
//! - the client's capabilities: a recorded `input_required` is replayed only if the copy could
//!   be sent every request in it, and a recorded task only if the copy declared the Tasks
//!   extension ([`replay_admits`]); otherwise the copy gets the `-32021` a fresh round would.
//!
//! A copy refused by any of these is answered with that refusal and changes nothing: the record
//! stays, and a copy that passes still gets it. Through the shared ledger the same holds: a copy
//! this engine has not seen is admitted only after the gates, and the record another replica
//! kept is checked against the copy's capabilities before it is sent.

use std::time::Instant;

use serde_json::Value;

use crate::engine::{state::replay_ledger, Ctx, Engine};
use crate::interaction::InputRequest;
use crate::jsonrpc::{Encoded, RpcError};
use crate::version::ProtocolVersion;

impl<H: Clone> Engine<H> {
    /// The recorded answer to the retry of `ctx`, if its state was already used and the copy
    /// may have it; `None` to run the call as a fresh round (its state was never used here);
    /// or the refusal: the ledger's (`in_progress`, `interrupted`, `evicted`,
    /// `outcome_too_large`) or the capability check's. Called at the point where a fresh round
    /// would admit its call, so every gate has run (see the module docs).
    pub(in crate::engine) fn replayed(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
    ) -> Result<Option<Encoded>, RpcError> {
        let Some(used) = ctx.mrtr.and_then(|m| m.used) else { return Ok(None) };
        let now_ms = self.unix_ms(now);
        match self.ledger.check(now_ms, used, ctx.id)? {
            replay_ledger::Seen::Fresh => Ok(None),
            replay_ledger::Seen::Replay(answer) => {
                replay_admits(&answer, ctx.version, ctx.client_caps.unwrap_or(&Value::Null))?;
                Ok(Some(answer))
            }
        }
    }
}

/// Whether the recorded `answer` may go to a copy of its request that speaks `version` with
/// the client capabilities `caps`: an `input_required` only if every request in it passes
/// [`InputRequest::check_client`], a task (`resultType: "task"`) only if `caps` declare the
/// Tasks extension; anything else always. The refusal is the `-32021` a fresh round would give.
pub(in crate::engine) fn replay_admits(
    answer: &Encoded,
    version: ProtocolVersion,
    caps: &Value,
) -> Result<(), RpcError> {
    // Only these two kinds of result depend on the client's capabilities. The engine writes
    // compact JSON, so a result of either kind contains one of these byte strings; most answers
    // contain neither and are not parsed at all.
    let suspect = |needle: &[u8]| answer.bytes.windows(needle.len()).any(|w| w == needle);
    if !suspect(br#""resultType":"input_required""#) && !suspect(br#""resultType":"task""#) {
        return Ok(());
    }
    let Ok(parsed) = serde_json::from_slice::<Value>(&answer.bytes) else { return Ok(()) };
    let Some(result) = parsed.get("result") else { return Ok(()) };
    match result.get("resultType").and_then(Value::as_str) {
        Some("input_required") => {
            let requests = result.get("inputRequests").and_then(Value::as_object);
            for entry in requests.into_iter().flat_map(|m| m.values()) {
                // What the engine itself wrote always reads back; an entry that did not would
                // be sent as recorded, as before this check existed.
                if let Some(request) = InputRequest::from_input_request(entry) {
                    request.check_client(version, caps).map_err(|u| u.rpc_error())?;
                }
            }
            Ok(())
        }
        Some("task") => {
            let declared = version.is_modern()
                && caps
                    .get("extensions")
                    .and_then(Value::as_object)
                    .is_some_and(|e| e.contains_key(crate::engine::extensions::tasks::TASKS_EXTENSION));
            if declared {
                Ok(())
            } else {
                Err(crate::engine::extensions::tasks::missing_extension("the task this request made"))
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
