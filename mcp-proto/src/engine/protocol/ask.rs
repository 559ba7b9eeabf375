//! Asking the client for input on behalf of a call, in both eras (see [`crate::interaction`]).
//!
//! Legacy sessions get real server→client requests on the call's stream, matched by id when
//! the client's responses come back. On 2026-07-28 the call instead *ends* with
//! `resultType: "input_required"` and a sealed `requestState` carrying every answer validated so
//! far; the client's retry re-runs the handler, whose asks are then answered from the state and
//! the retry's `inputResponses` without leaving the engine. Nothing about a modern call is kept
//! between rounds, so any replica sharing the key ring serves the retry.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::blame::{Blame, Bound};
use crate::content::HandlerError;
use crate::engine::state::call_state::{Asking, Mrtr};
use crate::engine::state::calls::Call;
use crate::engine::state::replay_ledger::StateUse;
use crate::engine::state::streams;
use crate::engine::state::timers::Timer;
use crate::engine::AskError;
use crate::engine::{CallId, CancelReason, ConnId, Engine, Output, Stale, META_SERVER_INFO};
use crate::interaction::{
    arguments_digest, open_state_with_expiry, seal_state, InputRequest, InvalidAnswer, RequestState,
    StateBinding,
};
use crate::json::RawEnvelope;
use crate::jsonrpc::{encode_result, Encoded, ErrorCode, RpcError};
use crate::version::ProtocolVersion;

impl std::error::Error for AskError {}

/// What [`Engine::ask`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// Every answer was already in hand (a 2026-07-28 retry): here they are, by key.
    Answered(Map<String, Value>),
    /// The requests went to the client; the answers come as [`Output::Answer`].
    Pending,
}

/// What a modern ask decided, applied once the call is out of the borrow.
enum Verdict {
    Answered(Map<String, Value>),
    Fail(RpcError),
    Ask(Vec<(String, InputRequest)>, RequestState),
}

impl<H: Clone> Engine<H> {
    pub(in crate::engine) fn unix_ms(&self, now: Instant) -> u64 {
        let since =
            u64::try_from(now.saturating_duration_since(self.started).as_millis()).unwrap_or(u64::MAX);
        self.config.unix_ms_at_start.saturating_add(since)
    }

    /// Reads a modern request's `requestState` and `inputResponses`. A state that is tampered
    /// with, expired, or made for another caller, method or arguments fails the request before
    /// anything runs.
    pub(in crate::engine) fn mrtr_input(
        &self,
        now: Instant,
        conn: ConnId,
        method: &str,
        params: Option<&Map<String, Value>>,
    ) -> Result<Mrtr, RpcError> {
        let responses = match params.and_then(|p| p.get("inputResponses")) {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(RpcError::invalid_params("\"inputResponses\" must be an object")),
        };
        // The digest covers what the request asks for, not the protocol's bookkeeping.
        let mut rest: Map<String, Value> = params.cloned().unwrap_or_default();
        for k in ["_meta", "inputResponses", "requestState"] {
            rest.remove(k);
        }
        let digest = arguments_digest(Some(&Value::Object(rest)));
        let (state, used) = match params.and_then(|p| p.get("requestState")) {
            None | Some(Value::Null) => (RequestState::default(), None),
            Some(Value::String(token)) => {
                let caller = self.caller(conn);
                let binding = StateBinding {
                    caller: caller.binding(),
                    method,
                    arguments_digest: digest,
                    epoch: self.config.state_epoch,
                };
                let (state, expires) =
                    open_state_with_expiry(&self.config.keys, token, &binding, self.unix_ms(now))
                        .map_err(|e| e.rpc_error())?;
                (state, Some(StateUse::new(token, caller.binding(), expires)))
            }
            Some(_) => return Err(RpcError::invalid_params("\"requestState\" must be a string")),
        };
        let mut answers = responses;
        // What an earlier round validated stands; a retry cannot swap it.
        for (k, v) in state.answers {
            answers.insert(k, v);
        }
        Ok(Mrtr { round: state.round, answers, digest, method: method.to_owned(), data: state.data, used })
    }

    /// Asks the client of `call` for input: each request under a key the handler chose (on
    /// 2026-07-28 the key is the `inputRequests` key the client answers under).
    ///
    /// - Legacy: sends the requests on the call's stream (capabilities checked first) and
    ///   returns [`Asked::Pending`]; the answers come as one [`Output::Answer`], or the ask
    ///   ends without them as below.
    /// - 2026-07-28: returns [`Asked::Answered`] when the retry already holds every answer;
    ///   otherwise answers the call with `input_required` (or with `-32021` when the request's
    ///   capabilities rule a request out, or `-32602` for an invalid answer, or
    ///   `interaction_limit` after
    ///   [`Limits::max_input_rounds`](crate::limits::Limits::max_input_rounds)), cancels the handler
    ///   ([`Output::Cancel`]) and returns [`AskError::Suspended`].
    ///
    /// In both eras what the client would be sent is encoded first and held to
    /// [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes) (default 16 MiB):
    /// a legacy request frame or an `input_required` result over it is not sent (nor any other
    /// request of the round), and `ask` returns [`AskError::TooLarge`] with the call still in
    /// flight. The handler then answers the call as it sees fit; returning the error (`?`)
    /// answers `-32603` naming both sizes.
    ///
    /// # When a legacy ask ends without answers
    ///
    /// The client answers on a request of its own (a new `POST` on HTTP), so the stream that
    /// carried the question may end before the answer comes; what matters is whether the
    /// *call* can still be answered. The rule:
    ///
    /// - **Nothing can carry the question** (the call's stream is gone, or takes only JSON, or
    ///   the client dropped it and did not resume it within
    ///   [`Limits::resume_window`](crate::limits::Limits::resume_window)): `ask` fails at once with
    ///   [`AskError::Unreachable`]; nothing is sent.
    /// - **The session or stdio connection ends** with the ask pending: the call is cancelled
    ///   with every other call of it ([`Output::Cancel`]).
    /// - **The call's HTTP response stream closes** (the client dropped the `POST`'s SSE
    ///   response, or the shim could not write to it) with the ask pending: the stream waits
    ///   [`Limits::resume_window`](crate::limits::Limits::resume_window) (default 30 s) for the client
    ///   to resume it with a `GET` carrying `Last-Event-ID`, which replays what it missed (the
    ///   question included) and carries the rest of the call. The client may also answer
    ///   meanwhile (its answer is a `POST` of its own), and the handler goes on. If the window
    ///   passes with the ask still pending and no resume, the ask resolves as
    ///   [`AskError::Unreachable`] ([`Output::Answer`]), then the call is cancelled
    ///   ([`Output::Cancel`]) and its in-flight slot freed: the call's own response has only
    ///   that stream to travel on (the `GET` stream must not carry responses), and a client
    ///   that walked away would hold the slot until the ask timeout otherwise. A late answer is
    ///   then accepted (202) and ignored. A call that is *not* waiting on the client when the
    ///   window passes is left to finish, as the spec asks (a disconnect is not a
    ///   cancellation); its response is kept for a resume for another window. With a zero
    ///   window nothing waits: the ask fails and the call is cancelled as the stream closes.
    /// - **The stream stays open but the client does not answer** within
    ///   [`Limits::ask_timeout`](crate::limits::Limits::ask_timeout) (default 60 s): the engine sends
    ///   `notifications/cancelled` for each unanswered request on the call's stream, and the
    ///   ask resolves as [`AskError::TimedOut`]. The call goes on; the handler decides what to
    ///   answer.
    ///
    /// So a call waits on its client for at most the ask timeout per round, and a client that
    /// walks away frees its slots within the resume window.
    ///
    /// # Replays (2026-07-28)
    ///
    /// A retry carrying a `requestState` runs its handler once. The engine records what the
    /// call answered (its result, its error, or its next `input_required`) until the state
    /// expires, and a copy of the retry (the same state, under any request id; the client may
    /// re-send when a response stream breaks) gets that answer again without the handler
    /// running. A copy that cannot be answered so is refused with `-32602` "requestState already
    /// used" and `data.reason`: `"in_progress"` while the first is still running (send it again
    /// shortly to get the outcome), `"interrupted"` when the first was cancelled or lost its
    /// connection before it answered, `"outcome_too_large"` or `"evicted"` when the record was
    /// not kept (see [`Limits::max_ledger_entries`](crate::limits::Limits::max_ledger_entries)). The
    /// client then starts the call again without a state. The records are shared fairly among
    /// callers: one that floods the ledger evicts its own records, and only its own states are
    /// then refused as `"evicted"`. A first round carries no state and
    /// cannot be told from its copy: only retries are protected. A retry refused for what it
    /// brought itself (an answer that does not fit the form, a capability its `_meta` did not
    /// declare, the round limit) gave its handler nothing, so it did not use its state: the
    /// client may correct it and send it again. The ledger is this engine's own unless
    /// [`set_shared_ledger`](Self::set_shared_ledger) is on: then replicas share the records
    /// through their cluster's backend, and a copy sent to another replica is answered from
    /// the record too (a replica whose backend is unreachable runs it once more).
    ///
    /// A copy is answered from the record only after every check a fresh round runs: the
    /// server gate, the item's gate, the arguments against the item's schema, and the copy's own
    /// client capabilities (a recorded `input_required` goes only to a copy that could be sent
    /// each of its requests, a recorded task only to a copy declaring the Tasks extension). A
    /// copy that fails one gets that check's refusal, exactly as a fresh round would, and the
    /// record stays for a copy that passes (`replay.rs`).
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn ask(
        &mut self,
        now: Instant,
        call: CallId,
        requests: Vec<(String, InputRequest)>,
    ) -> Result<Asked, AskError> {
        self.input(now);
        let c = self.calls.get(call).ok_or(AskError::Stale)?;
        if c.task.is_some() {
            self.ask_task(now, call, requests)
        } else if c.version.is_modern() {
            self.ask_modern(now, call, requests)
        } else {
            self.ask_legacy(now, call, requests)
        }
    }

    /// The continuation epoch sealed into the `requestState`s issued now
    /// ([`Config::state_epoch`](crate::engine::Config::state_epoch)).
    pub fn epoch(&self) -> u64 {
        self.config.state_epoch
    }

    /// Makes `epoch` the continuation epoch: every `requestState` sealed in another epoch is
    /// refused from now on (`-32602` "requestState expired", `data.reason: "epoch"`), and the
    /// client starts its call again. For an operator moving every replica sharing the key ring
    /// to the same new epoch (on a deploy, on shutdown); the replay records of the old epoch
    /// are dropped, since their states can no longer be opened.
    pub fn set_epoch(&mut self, now: Instant, epoch: u64) {
        self.input(now);
        if epoch != self.config.state_epoch {
            self.config.state_epoch = epoch;
            self.ledger.clear();
        }
    }

    /// Moves the continuation epoch on by one (wrapping at `u64::MAX`, which no deployment
    /// reaches): [`set_epoch`](Self::set_epoch) with the next epoch. Returns the new epoch, for
    /// the operator to hand to the other replicas.
    pub fn bump_epoch(&mut self, now: Instant) -> u64 {
        let next = self.config.state_epoch.wrapping_add(1);
        self.set_epoch(now, next);
        next
    }

    /// What the handler of `call` carried from the previous round of this 2026-07-28 request
    /// (see [`carry_state`](Self::carry_state)); `None` on the first round and on legacy
    /// sessions, where the handler simply keeps running between asks.
    pub fn carried_state(&self, call: CallId) -> Option<&str> {
        self.calls.get(call)?.input.as_ref()?.carry.as_deref()
    }

    /// Sets what rides, sealed, in the `requestState` of the next `input_required` answer of
    /// `call`, for the handler to read back with [`carried_state`](Self::carried_state) when
    /// the client retries: small progress a stateless server has nowhere else to keep. The whole
    /// state is bounded by [`MAX_STATE_BYTES`](crate::interaction::MAX_STATE_BYTES); past it the
    /// ask fails the call with an internal error. The client can read it (it is signed, not
    /// encrypted): carry no secrets.
    pub fn carry_state(&mut self, call: CallId, data: Option<String>) -> Result<(), Stale> {
        let input = self.calls.get_mut(call).ok_or(Stale)?.input.as_mut().ok_or(Stale)?;
        input.carry = data;
        Ok(())
    }

    /// Whether [`ask`](Self::ask) could send `request` for `call` now: the client declared what
    /// it needs (in `initialize`, or in this 2026-07-28 request's `_meta`), and something can
    /// carry it. Lets a handler take another path instead of failing, as the spec allows.
    pub fn can_ask(&self, call: CallId, request: &InputRequest) -> Result<(), AskError> {
        let c = self.calls.get(call).ok_or(AskError::Stale)?;
        if c.version.is_modern() {
            let caps = c.input.as_ref().and_then(|i| i.mrtr.as_ref()).map(|(_, caps)| caps);
            return request
                .check_client(c.version, caps.unwrap_or(&Value::Null))
                .map_err(AskError::Unsupported);
        }
        let caps = self.legacy_client_caps(c.conn)?;
        request.check_client(c.version, caps).map_err(AskError::Unsupported)?;
        if self.can_carry_requests(c.reply_to) {
            Ok(())
        } else {
            Err(AskError::Unreachable)
        }
    }

    fn ask_modern(
        &mut self,
        now: Instant,
        call: CallId,
        requests: Vec<(String, InputRequest)>,
    ) -> Result<Asked, AskError> {
        let max_rounds = self.config.limits.max_input_rounds;
        let c = self.calls.get_mut(call).ok_or(AskError::Stale)?;
        let version = c.version;
        let input = c.input.as_mut().ok_or(AskError::Unreachable)?;
        let Some((mrtr, caps)) = input.mrtr.as_ref() else { return Err(AskError::Unreachable) };
        let mut got = Map::new();
        let mut missing = Vec::new();
        let mut verdict = None;
        for (key, req) in requests {
            match mrtr.answers.get(&key) {
                Some(answer) => match req.validate_answer(answer) {
                    Ok(()) => {
                        got.insert(key, answer.clone());
                    }
                    Err(e) => {
                        verdict = Some(Verdict::Fail(e.rpc_error()));
                        break;
                    }
                },
                None => missing.push((key, req)),
            }
        }
        let verdict = verdict.unwrap_or_else(|| {
            if missing.is_empty() {
                return Verdict::Answered(got.clone());
            }
            if let Some(u) = missing.iter().find_map(|(_, r)| r.check_client(version, caps).err()) {
                return Verdict::Fail(u.rpc_error());
            }
            if mrtr.round >= max_rounds {
                return Verdict::Fail(interaction_limit(Some(max_rounds)));
            }
            let mut answers = input.used.clone();
            answers.extend(got.clone());
            Verdict::Ask(missing, RequestState { round: mrtr.round + 1, answers, data: input.carry.clone() })
        });
        for (k, v) in &got {
            input.used.insert(k.clone(), v.clone());
        }
        let fail = match verdict {
            Verdict::Answered(answers) => return Ok(Asked::Answered(answers)),
            Verdict::Fail(err) => {
                // Refused for what the retry itself brought (an answer that does not fit, a
                // capability it did not declare) or for the round limit: the handler got no
                // answer, so the state was not used, and a corrected retry may still use it.
                let taken = self.calls.get_mut(call).and_then(|c| Some((c.used.take()?, c.claiming)));
                if let Some((used, claiming)) = taken {
                    self.release_state(used, claiming);
                }
                err
            }
            Verdict::Ask(missing, state) => match self.input_required(now, call, version, missing, &state) {
                // As a legacy frame over the ceiling is never sent, this result is not either:
                // the call stays in flight and its handler answers it, as it would a legacy
                // call whose ask failed.
                Ok(bytes) if bytes.len() > self.config.limits.max_response_bytes => {
                    return Err(AskError::TooLarge {
                        size: bytes.len(),
                        limit: self.config.limits.max_response_bytes,
                    });
                }
                Ok(bytes) => {
                    self.end_call(call, bytes.into(), CancelReason::Suspended);
                    return Err(AskError::Suspended);
                }
                Err(err) => err,
            },
        };
        let id = self.calls.get(call).map(|c| c.id.clone()).ok_or(AskError::Stale)?;
        self.end_call(call, fail.encode(Some(&id)), CancelReason::Refused);
        Err(AskError::Suspended)
    }

    /// The `input_required` result asking for `missing`, with the next sealed state.
    fn input_required(
        &self,
        now: Instant,
        call: CallId,
        version: ProtocolVersion,
        missing: Vec<(String, InputRequest)>,
        state: &RequestState,
    ) -> Result<Vec<u8>, RpcError> {
        let c = self.calls.get(call).ok_or_else(RpcError::misuse)?;
        let (mrtr, _) = c.input.as_ref().and_then(|i| i.mrtr.as_ref()).ok_or_else(RpcError::misuse)?;
        let caller = self.caller(c.conn);
        let binding = StateBinding {
            caller: caller.binding(),
            method: &mrtr.method,
            arguments_digest: mrtr.digest,
            epoch: self.config.state_epoch,
        };
        let ttl = u64::try_from(self.config.limits.state_ttl.as_millis()).unwrap_or(u64::MAX);
        let expires = self.unix_ms(now).saturating_add(ttl);
        let token = seal_state(&self.config.keys, &binding, state, expires).map_err(|e| {
            RpcError::blamed(Blame::Misuse, ErrorCode::InternalError, format!("cannot continue: {e}"))
        })?;
        let mut requests = Map::new();
        for (key, req) in missing {
            requests.insert(key, req.to_input_request(version));
        }
        let mut r = Map::new();
        r.insert("resultType".into(), "input_required".into());
        r.insert("inputRequests".into(), Value::Object(requests));
        r.insert("requestState".into(), token.into());
        let mut meta = Map::new();
        meta.insert(META_SERVER_INFO.into(), self.server_info_modern.clone());
        r.insert("_meta".into(), Value::Object(meta));
        Ok(encode_result(&c.id, &r))
    }

    /// Answers `call` with `bytes` and stops its handler.
    fn end_call(&mut self, call: CallId, answer: Encoded, reason: CancelReason) {
        if let Some(c) = self.finish_call(call) {
            if let Some((blame, _)) = answer.fault {
                self.refusals.blamed(blame);
            }
            self.out.push_back(Output::Cancel { call, reason });
            self.deliver(c, answer);
        }
    }

    fn ask_legacy(
        &mut self,
        now: Instant,
        call: CallId,
        requests: Vec<(String, InputRequest)>,
    ) -> Result<Asked, AskError> {
        let max_rounds = self.config.limits.max_input_rounds;
        let c = self.calls.get(call).ok_or(AskError::Stale)?;
        let (owner, reply_to, version) = (c.conn, c.reply_to, c.version);
        let caps = self.legacy_client_caps(owner)?.clone();
        let input = c.input.as_ref().ok_or(AskError::Unreachable)?;
        if input.asking.is_some() {
            return Err(AskError::Busy);
        }
        if input.rounds >= max_rounds {
            return Err(AskError::TooManyRounds);
        }
        for (_, req) in &requests {
            req.check_client(version, &caps).map_err(AskError::Unsupported)?;
        }
        if !self.can_carry_requests(reply_to) {
            return Err(AskError::Unreachable);
        }
        let mut slots = Vec::with_capacity(requests.len());
        let mut frames = Vec::with_capacity(requests.len());
        for (i, (key, req)) in requests.into_iter().enumerate() {
            let id = self.outbound.issue(owner, call, i);
            let elicitation_id = id.to_string();
            let params = req.params_for(version, Some(&elicitation_id));
            let mut frame = Map::new();
            frame.insert("jsonrpc".into(), "2.0".into());
            frame.insert("id".into(), id.into());
            frame.insert("method".into(), req.method().into());
            frame.insert("params".into(), Value::Object(params));
            frames.push(serde_json::to_vec(&frame).unwrap_or_default());
            slots.push((id, key, req));
        }
        // Every frame is checked before any is sent: the client gets the whole round or none
        // of it, and an id it never saw is not left awaiting an answer.
        let limit = self.config.limits.max_response_bytes;
        if let Some(size) = frames.iter().map(Vec::len).filter(|&n| n > limit).max() {
            self.outbound.forget(owner, slots.iter().map(|(id, _, _)| *id));
            return Err(AskError::TooLarge { size, limit });
        }
        for bytes in frames {
            self.send(reply_to, bytes, false);
        }
        let remaining = slots.len();
        // Same rounding as every engine timer: a zero timeout still waits 1 ms.
        let deadline = now.checked_add(self.config.limits.ask_timeout.max(Duration::from_millis(1)));
        if let Some(input) = self.calls.get_mut(call).and_then(|c| c.input.as_mut()) {
            input.rounds += 1;
            input.asking = Some(Asking { slots, answers: Map::new(), remaining, deadline });
            if let Some(at) = deadline {
                self.timers.arm(at, Timer::Ask(call));
            }
        }
        if let Some(streams::Transport::Exchange(x)) =
            self.conns.get_mut(reply_to.0).map(|c| &mut c.transport)
        {
            x.carried_ask(call);
        }
        if remaining == 0 {
            self.settle(call, Ok(()));
        }
        Ok(Asked::Pending)
    }

    /// What the client of the legacy session on `conn` declared in `initialize`, once it has
    /// sent `notifications/initialized`: before that a server sends the client nothing but
    /// pings, so nothing can be asked.
    fn legacy_client_caps(&self, conn: ConnId) -> Result<&Value, AskError> {
        match self.conns.get(conn.0).and_then(|o| o.session.as_ref()) {
            Some(s) if s.initialized => Ok(&s.client_caps),
            _ => Err(AskError::Unreachable),
        }
    }

    /// Whether a server→client request can reach the client through `conn`.
    fn can_carry_requests(&self, conn: ConnId) -> bool {
        match self.conns.get(conn.0).map(|c| &c.transport) {
            Some(streams::Transport::Line | streams::Transport::Standalone { .. }) => true,
            // A dropped stream still takes questions while it may be resumed (they wait in its
            // kept events), not once that wait has lapsed.
            Some(streams::Transport::Exchange(x)) => {
                x.can_stream() && x.attachment() != crate::engine::state::post_store::Attachment::Lapsed
            }
            _ => false,
        }
    }

    /// A response from the client on `conn`: the answer to one of our requests, or nothing we
    /// asked (dropped, as JSON-RPC allows).
    pub(in crate::engine) fn response(&mut self, conn: ConnId, env: RawEnvelope) {
        let Some(id) = env.id.as_deref().and_then(|raw| raw.get().parse::<u64>().ok()) else { return };
        let Some((call, slot)) = self.outbound.answered(conn, id) else { return };
        let Some(asking) =
            self.calls.get_mut(call).and_then(|c| c.input.as_mut()).and_then(|i| i.asking.as_mut())
        else {
            return;
        };
        let Some((_, key, req)) = asking.slots.get(slot) else { return };
        let inexact = env.fault.as_ref().filter(|(f, _)| f.is_inexact_number()).map(|(f, _)| f.to_string());
        let outcome = match (env.result, env.error) {
            // Decoded as `null` (see `json`): refused naming the number, not as a missing answer.
            (Some(_), None) if inexact.is_some() => {
                Err(AskError::Invalid(InvalidAnswer::new(format!("result: {}", inexact.unwrap_or_default()))))
            }
            (Some(result), None) => match req.validate_answer(&result) {
                Ok(()) => {
                    asking.answers.insert(key.clone(), result);
                    Ok(())
                }
                Err(e) => Err(AskError::Invalid(e)),
            },
            (_, Some(error)) => {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
                let message = error.get("message").and_then(Value::as_str).unwrap_or("error").to_owned();
                Err(AskError::Rejected(RpcError::new(ErrorCode::Other(code), message)))
            }
            (None, None) => return,
        };
        asking.remaining = asking.remaining.saturating_sub(1);
        self.settle(call, outcome);
    }

    /// Resumes the handler once every answer is in, or at the first failure.
    fn settle(&mut self, call: CallId, outcome: Result<(), AskError>) {
        let Some(input) = self.calls.get_mut(call).and_then(|c| c.input.as_mut()) else { return };
        let Some(asking) = input.asking.as_ref() else { return };
        if outcome.is_ok() && asking.remaining > 0 {
            return;
        }
        let Some(asking) = input.asking.take() else { return };
        let Some(owner) = self.calls.get(call).map(|c| c.conn) else { return };
        self.outbound.forget(owner, asking.slots.iter().map(|(id, _, _)| *id));
        if let Some(at) = asking.deadline {
            self.timers.disarm(at, Timer::Ask(call));
        }
        let answers = outcome.map(|()| asking.answers);
        self.out.push_back(Output::Answer { call, answers });
    }

    /// Drops a finished call's outstanding requests: late answers are then ignored.
    pub(in crate::engine) fn forget_asks(&mut self, c: &Call, call: CallId) {
        if let Some(asking) = c.input.as_ref().and_then(|i| i.asking.as_ref()) {
            self.outbound.forget(c.conn, asking.slots.iter().map(|(id, _, _)| *id));
            if let Some(at) = asking.deadline {
                self.timers.disarm(at, Timer::Ask(call));
            }
        }
    }

    /// The legacy ask of `call` reached its deadline ([`crate::limits::Limits::ask_timeout`]) at `now`:
    /// the client is told that each request it left unanswered is cancelled (legacy versions
    /// let either side cancel the requests it issued), on the call's stream if it is still
    /// open, and the handler's ask resolves as [`AskError::TimedOut`]. A late answer is then
    /// ignored, like any answer to a request the engine no longer awaits.
    pub(in crate::engine) fn ask_expired(&mut self, now: Instant, call: CallId) {
        if self.task_ask_expired(now, call) {
            return;
        }
        let Some(c) = self.calls.get_mut(call) else { return };
        let (owner, reply_to) = (c.conn, c.reply_to);
        let Some(input) = c.input.as_mut() else { return };
        // A timer left from an earlier round finds a newer ask (or none) and leaves it alone.
        if input.asking.as_ref().is_none_or(|a| a.deadline.is_none_or(|d| d > now)) {
            return;
        }
        let Some(asking) = input.asking.take() else { return };
        for (id, _, _) in &asking.slots {
            if self.outbound.answered(owner, *id).is_none() {
                continue;
            }
            let note = serde_json::json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "no answer within the server's ask timeout"},
            });
            self.send(reply_to, serde_json::to_vec(&note).unwrap_or_default(), false);
        }
        self.out.push_back(Output::Answer { call, answers: Err(AskError::TimedOut) });
    }

    /// The stream `gone` closed; `calls` had sent their questions on it. Each that still waits
    /// for answers on it is cancelled: see [`Engine::ask`] for why.
    pub(in crate::engine) fn strand_asks(&mut self, now: Instant, gone: ConnId, calls: Vec<CallId>) {
        for call in calls {
            let waiting = self
                .calls
                .get(call)
                .is_some_and(|c| c.reply_to == gone && c.input.as_ref().is_some_and(|i| i.asking.is_some()));
            if !waiting {
                continue;
            }
            self.out.push_back(Output::Answer { call, answers: Err(AskError::Unreachable) });
            self.cancel(now, call, CancelReason::Closed);
        }
    }
}

/// What a handler that lets an ask failure end its call answers: the client learns why when it
/// can act on it (a missing capability, an invalid or refused answer, the round limit), and a
/// suspended or stale call answers nothing at all.
impl From<AskError> for HandlerError {
    fn from(e: AskError) -> Self {
        match e {
            AskError::Suspended | AskError::Stale => HandlerError::Cancelled,
            AskError::Unsupported(u) => HandlerError::Public(u.rpc_error()),
            AskError::Rejected(e) => HandlerError::Public(e),
            AskError::Invalid(e) => HandlerError::Public(e.rpc_error()),
            AskError::TooManyRounds => HandlerError::Public(interaction_limit(None)),
            // The client's transport cannot carry a request (not initialized, or a JSON-only
            // exchange); a second ask while one is open is the handler's own mistake.
            AskError::Unreachable => HandlerError::Public(RpcError::blamed(
                Blame::Incompatible,
                ErrorCode::InternalError,
                "the client cannot be asked for input",
            )),
            AskError::Busy => HandlerError::Public(RpcError::blamed(
                Blame::Misuse,
                ErrorCode::InternalError,
                "the client cannot be asked for input",
            )),
            AskError::TimedOut => HandlerError::Public(RpcError::new(
                ErrorCode::InternalError,
                "the client did not answer the request for input in time",
            )),
            // The handler built a request the response ceiling cannot carry: its own mistake,
            // named with the sizes so that its operator can find it.
            e @ AskError::TooLarge { .. } => {
                HandlerError::Public(RpcError::blamed(Blame::Misuse, ErrorCode::InternalError, e.to_string()))
            }
            // The handler's own mistake: logged, never shown to the client.
            AskError::InvalidRequest(e) => HandlerError::private(e.to_string()),
            // Like an answer outside the form: the client's to correct, told as `-32602`.
            AskError::Undecodable(m) => {
                HandlerError::Public(RpcError::invalid_params(format!("invalid input response: {m}")))
            }
        }
    }
}

/// The `interaction_limit` failure, naming the bound when it is known.
fn interaction_limit(max: Option<u32>) -> RpcError {
    let times = max.map_or_else(|| "too many times".to_owned(), |m| format!("more than {m} times"));
    RpcError::limit(Bound::Share, format!("interaction_limit: the call asked for input {times}"))
        .with_data(serde_json::json!({ "reason": "interaction_limit" }))
}

#[cfg(test)]
mod tests;
