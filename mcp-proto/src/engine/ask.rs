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

use super::calls::Call;
use super::ledger::StateUse;
use super::streams;
use super::timers::Timer;
use super::{CallId, ConnId, Ctx, Engine, Output, Stale, META_SERVER_INFO};
use crate::blame::{Blame, Bound};
use crate::content::HandlerError;
use crate::interaction::{
    arguments_digest, open_state_with_expiry, seal_state, InputRequest, InvalidAnswer, RequestState,
    StateBinding, Unsupported,
};
use crate::json::RawEnvelope;
use crate::jsonrpc::{encode_result, Encoded, ErrorCode, RpcError};
use crate::version::ProtocolVersion;
use std::fmt;

/// Why an ask got no answers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AskError {
    /// The client did not declare what the request needs (or its version cannot express it);
    /// nothing was sent.
    Unsupported(Unsupported),
    /// The client answered with a JSON-RPC error.
    Rejected(RpcError),
    /// The client's answer does not fit the request (wrong shape, a value outside the form).
    Invalid(InvalidAnswer),
    /// The call already asked [`Limits::max_input_rounds`](crate::Limits::max_input_rounds)
    /// times (`interaction_limit`).
    TooManyRounds,
    /// Nothing can reach the client: its stream is gone, or it accepts only JSON answers.
    Unreachable,
    /// The call is already waiting for answers; ask again once they arrive.
    Busy,
    /// The call is not in flight (answered, cancelled or timed out).
    Stale,
    /// 2026-07-28: the call was answered with `input_required`; the client will retry it and the
    /// handler runs again. The handler is being cancelled and should just return.
    Suspended,
    /// The client did not answer within [`Limits::ask_timeout`](crate::Limits::ask_timeout);
    /// the engine told it the requests are cancelled. The call is still in flight: the handler
    /// decides what it answers.
    TimedOut,
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskError::Unsupported(u) => write!(f, "the client cannot be asked this: {u}"),
            AskError::Rejected(e) => write!(f, "the client refused: {}", e.message),
            AskError::Invalid(e) => write!(f, "the client's answer is invalid: {e}"),
            AskError::TooManyRounds => f.write_str("interaction_limit: too many rounds of input"),
            AskError::Unreachable => f.write_str("the client cannot be reached for input"),
            AskError::Busy => f.write_str("the call is already waiting for input"),
            AskError::Stale => f.write_str("the call is no longer in flight"),
            AskError::Suspended => f.write_str("the call returned input_required and will be retried"),
            AskError::TimedOut => f.write_str("the client did not answer in time"),
        }
    }
}

impl std::error::Error for AskError {}

/// What [`Engine::ask`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// Every answer was already in hand (a 2026-07-28 retry): here they are, by key.
    Answered(Map<String, Value>),
    /// The requests went to the client; the answers come as [`Output::Answer`].
    Pending,
}

/// A modern request's answers so far.
#[derive(Debug, Clone, Default)]
pub(super) struct Mrtr {
    round: u32,
    /// From the state (already validated) and the retry's `inputResponses` (not yet).
    answers: Map<String, Value>,
    digest: [u8; 32],
    method: String,
    data: Option<String>,
    /// The state this retry carried, for the replay ledger; `None` on a first round.
    pub(super) used: Option<StateUse>,
}

/// A call's side of asking.
#[derive(Debug)]
pub(super) struct CallInput {
    /// Rounds asked so far (legacy), or the round the state says (modern).
    rounds: u32,
    /// Modern: what the retry brought, and the capabilities of this request.
    mrtr: Option<(Mrtr, Value)>,
    /// Modern: answers this invocation asked for and validated, carried into the next state.
    used: Map<String, Value>,
    /// Legacy: the ask in flight.
    asking: Option<Asking>,
    /// What the handler carries into the next round's sealed state (2026-07-28); starts as
    /// what the previous round's state carried.
    carry: Option<String>,
}

#[derive(Debug)]
struct Asking {
    slots: Vec<(u64, String, InputRequest)>,
    answers: Map<String, Value>,
    remaining: usize,
    /// When the ask gives up ([`crate::Limits::ask_timeout`]); `None` when that is too far for
    /// the clock to express (never).
    deadline: Option<Instant>,
}

impl CallInput {
    pub(super) fn new(ctx: Ctx<'_>) -> Option<Box<Self>> {
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
    pub(super) fn retried(&self) -> bool {
        self.mrtr.as_ref().is_some_and(|(m, _)| m.round > 0 || !m.answers.is_empty())
    }

    /// The deadline of the legacy ask in flight, if any: its timer is disarmed with the call.
    pub(super) fn ask_deadline(&self) -> Option<Instant> {
        self.asking.as_ref().and_then(|a| a.deadline)
    }
}

/// What a modern ask decided, applied once the call is out of the borrow.
enum Verdict {
    Answered(Map<String, Value>),
    Fail(RpcError),
    Ask(Vec<(String, InputRequest)>, RequestState),
}

impl<H: Clone> Engine<H> {
    pub(super) fn unix_ms(&self, now: Instant) -> u64 {
        let since =
            u64::try_from(now.saturating_duration_since(self.started).as_millis()).unwrap_or(u64::MAX);
        self.config.unix_ms_at_start.saturating_add(since)
    }

    /// Reads a modern request's `requestState` and `inputResponses`. A state that is tampered
    /// with, expired, or made for another caller, method or arguments fails the request before
    /// anything runs.
    pub(super) fn mrtr_input(
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
    ///   [`Limits::max_input_rounds`](crate::Limits::max_input_rounds)), cancels the handler
    ///   ([`Output::Cancel`]) and returns [`AskError::Suspended`].
    ///
    /// # When a legacy ask ends without answers
    ///
    /// The client answers on a request of its own (a new `POST` on HTTP), so the stream that
    /// carried the question may end before the answer comes; what matters is whether the
    /// *call* can still be answered. The rule:
    ///
    /// - **Nothing can carry the question** (the call's stream is gone, or takes only JSON, or
    ///   the client dropped it and did not resume it within
    ///   [`Limits::resume_window`](crate::Limits::resume_window)): `ask` fails at once with
    ///   [`AskError::Unreachable`]; nothing is sent.
    /// - **The session or stdio connection ends** with the ask pending: the call is cancelled
    ///   with every other call of it ([`Output::Cancel`]).
    /// - **The call's HTTP response stream closes** (the client dropped the `POST`'s SSE
    ///   response, or the shim could not write to it) with the ask pending: the stream waits
    ///   [`Limits::resume_window`](crate::Limits::resume_window) (default 30 s) for the client
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
    ///   [`Limits::ask_timeout`](crate::Limits::ask_timeout) (default 60 s): the engine sends
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
    /// not kept (see [`Limits::max_ledger_entries`](crate::Limits::max_ledger_entries)). The
    /// client then starts the call again without a state. The records are shared fairly among
    /// callers: one that floods the ledger evicts its own records, and only its own states are
    /// then refused as `"evicted"`. A first round carries no state and
    /// cannot be told from its copy: only retries are protected. A retry refused for what it
    /// brought itself (an answer that does not fit the form, a capability its `_meta` did not
    /// declare, the round limit) gave its handler nothing, so it did not use its state: the
    /// client may correct it and send it again. The ledger is this engine's own; a replica that
    /// does not share it runs a copy sent to it.
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
        if c.version.is_modern() {
            self.ask_modern(now, call, requests)
        } else {
            self.ask_legacy(now, call, requests)
        }
    }

    /// The continuation epoch sealed into the `requestState`s issued now
    /// ([`Config::state_epoch`](crate::Config::state_epoch)).
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
        match self.conns.get(c.conn.0).and_then(|o| o.session.as_ref()) {
            Some(s) if s.initialized => {
                request.check_client(c.version, &s.client_caps).map_err(AskError::Unsupported)?
            }
            _ => return Err(AskError::Unreachable),
        }
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
                if let Some(used) = self.calls.get_mut(call).and_then(|c| c.used.take()) {
                    self.ledger.release(used);
                }
                err
            }
            Verdict::Ask(missing, state) => match self.input_required(now, call, version, missing, &state) {
                Ok(bytes) => {
                    self.end_call(call, bytes.into());
                    return Err(AskError::Suspended);
                }
                Err(err) => err,
            },
        };
        let id = self.calls.get(call).map(|c| c.id.clone()).ok_or(AskError::Stale)?;
        self.end_call(call, fail.encode(Some(&id)));
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
    fn end_call(&mut self, call: CallId, answer: Encoded) {
        if let Some(c) = self.finish_call(call) {
            self.out.push_back(Output::Cancel { call });
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
        // Before `notifications/initialized` a server sends the client nothing but pings.
        let caps = match self.conns.get(owner.0).and_then(|o| o.session.as_ref()) {
            Some(s) if s.initialized => s.client_caps.clone(),
            _ => return Err(AskError::Unreachable),
        };
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
        for (i, (key, req)) in requests.into_iter().enumerate() {
            let id = self.outbound.issue(owner, call, i);
            let elicitation_id = id.to_string();
            let params = req.params_for(version, Some(&elicitation_id));
            let mut frame = Map::new();
            frame.insert("jsonrpc".into(), "2.0".into());
            frame.insert("id".into(), id.into());
            frame.insert("method".into(), req.method().into());
            frame.insert("params".into(), Value::Object(params));
            let bytes = serde_json::to_vec(&frame).unwrap_or_default();
            self.send(reply_to, bytes, false);
            slots.push((id, key, req));
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

    /// Whether a server→client request can reach the client through `conn`.
    fn can_carry_requests(&self, conn: ConnId) -> bool {
        match self.conns.get(conn.0).map(|c| &c.transport) {
            Some(streams::Transport::Line | streams::Transport::Standalone { .. }) => true,
            // A dropped stream still takes questions while it may be resumed (they wait in its
            // kept events), not once that wait has lapsed.
            Some(streams::Transport::Exchange(x)) => {
                x.can_stream() && x.attachment() != super::resume::Attachment::Lapsed
            }
            _ => false,
        }
    }

    /// A response from the client on `conn`: the answer to one of our requests, or nothing we
    /// asked (dropped, as JSON-RPC allows).
    pub(super) fn response(&mut self, conn: ConnId, env: RawEnvelope) {
        let Some(id) = env.id.as_deref().and_then(|raw| raw.get().parse::<u64>().ok()) else { return };
        let Some((call, slot)) = self.outbound.answered(conn, id) else { return };
        let Some(asking) =
            self.calls.get_mut(call).and_then(|c| c.input.as_mut()).and_then(|i| i.asking.as_mut())
        else {
            return;
        };
        let Some((_, key, req)) = asking.slots.get(slot) else { return };
        let outcome = match (env.result, env.error) {
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
    pub(super) fn forget_asks(&mut self, c: &Call, call: CallId) {
        if let Some(asking) = c.input.as_ref().and_then(|i| i.asking.as_ref()) {
            self.outbound.forget(c.conn, asking.slots.iter().map(|(id, _, _)| *id));
            if let Some(at) = asking.deadline {
                self.timers.disarm(at, Timer::Ask(call));
            }
        }
    }

    /// The legacy ask of `call` reached its deadline ([`crate::Limits::ask_timeout`]) at `now`:
    /// the client is told that each request it left unanswered is cancelled (legacy versions
    /// let either side cancel the requests it issued), on the call's stream if it is still
    /// open, and the handler's ask resolves as [`AskError::TimedOut`]. A late answer is then
    /// ignored, like any answer to a request the engine no longer awaits.
    pub(super) fn ask_expired(&mut self, now: Instant, call: CallId) {
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
    pub(super) fn strand_asks(&mut self, now: Instant, gone: ConnId, calls: Vec<CallId>) {
        for call in calls {
            let waiting = self
                .calls
                .get(call)
                .is_some_and(|c| c.reply_to == gone && c.input.as_ref().is_some_and(|i| i.asking.is_some()));
            if !waiting {
                continue;
            }
            self.out.push_back(Output::Answer { call, answers: Err(AskError::Unreachable) });
            self.cancel(now, call);
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
mod tests {
    use super::*;
    use crate::caller::Caller;
    use crate::content::ToolOutput;
    use crate::cursor::KeyRing;
    use crate::engine::{Config, ConnKind, Implementation, Invocation, Reply};
    use crate::registry::Tool;
    use serde_json::json;
    use std::time::Duration;

    struct Rig {
        engine: Engine<u32>,
        conn: ConnId,
        now: Instant,
    }

    impl Rig {
        fn new(caller: Caller) -> Self {
            let config = Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32]));
            #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
            let now = Instant::now();
            let mut engine = Engine::new(config, now);
            engine
                .registry_mut(now)
                .add_tool(Tool::new("ask", "Asks", json!({"type": "object"})), 1)
                .unwrap();
            let conn = engine.open(now, ConnKind::Stdio, caller).unwrap();
            Self { engine, conn, now }
        }

        fn send(&mut self, frame: Value) -> Vec<Output<u32>> {
            self.engine.handle_frame(self.now, self.conn, frame.to_string().as_bytes());
            std::iter::from_fn(|| self.engine.poll_output()).collect()
        }

        fn legacy(caps: Value) -> Self {
            let mut rig = Self::new(Caller::anonymous());
            rig.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "c", "version": "1"}}}));
            rig.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
            rig
        }

        fn invoke(&mut self, params: Value) -> (Vec<Output<u32>>, Option<Invocation<u32>>) {
            let outs =
                self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}));
            let mut rest = Vec::new();
            let mut inv = None;
            for o in outs {
                match o {
                    Output::Invoke(i) => inv = Some(i),
                    o => rest.push(o),
                }
            }
            (rest, inv)
        }

        fn drain(&mut self) -> Vec<Output<u32>> {
            std::iter::from_fn(|| self.engine.poll_output()).collect()
        }
    }

    fn frame(outs: &[Output<u32>]) -> Value {
        outs.iter()
            .find_map(|o| match o {
                Output::Frame { bytes, .. } => Some(serde_json::from_slice(bytes).unwrap()),
                _ => None,
            })
            .expect("a frame")
    }

    fn name_form() -> InputRequest {
        InputRequest::elicit("Name?", json!({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}, "required": ["name"]})).unwrap()
    }

    #[test]
    fn legacy_ask_round_trip_keeps_exact_numbers() {
        let mut rig = Rig::legacy(json!({"elicitation": {}}));
        let (_, inv) = rig.invoke(json!({"name": "ask"}));
        let call = inv.unwrap().ticket.call();
        assert_eq!(rig.engine.ask(rig.now, call, vec![("who".into(), name_form())]), Ok(Asked::Pending));
        let req = frame(&rig.drain());
        assert_eq!(req["method"], "elicitation/create");
        assert_eq!(req["params"]["requestedSchema"]["required"], json!(["name"]));
        // A second ask while the first waits is refused.
        assert_eq!(rig.engine.ask(rig.now, call, vec![("x".into(), name_form())]), Err(AskError::Busy));
        let answer = r#"{"jsonrpc":"2.0","id":ID,"result":{"action":"accept","content":{"name":"Ada","n":123456789012345678901234567890}}}"#
            .replace("ID", &req["id"].to_string());
        rig.engine.handle_frame(rig.now, rig.conn, answer.as_bytes());
        let outs = rig.drain();
        let Some(Output::Answer { call: c, answers: Ok(answers) }) = outs.into_iter().next() else {
            panic!("no answer")
        };
        assert_eq!(c, call);
        assert_eq!(answers["who"]["content"]["n"].to_string(), "123456789012345678901234567890");
        // A late duplicate is ignored.
        rig.engine.handle_frame(rig.now, rig.conn, answer.as_bytes());
        assert!(rig.drain().is_empty());
    }

    #[test]
    fn closing_a_connection_forgets_the_requests_it_was_sent() {
        let mut rig = Rig::legacy(json!({"elicitation": {}}));
        let (_, inv) = rig.invoke(json!({"name": "ask"}));
        let call = inv.unwrap().ticket.call();
        rig.engine.ask(rig.now, call, vec![("who".into(), name_form())]).unwrap();
        rig.drain();
        assert_eq!(rig.engine.outbound.len(), 1);
        rig.engine.close(rig.now, rig.conn);
        rig.drain();
        assert_eq!(rig.engine.outbound.len(), 0, "an unanswerable request is still awaited");
    }

    #[test]
    fn a_legacy_ask_gives_up_at_its_deadline_and_a_modern_one_waits_for_nothing() {
        let mut rig = Rig::legacy(json!({"elicitation": {}}));
        let (_, inv) = rig.invoke(json!({"name": "ask"}));
        let call = inv.unwrap().ticket.call();
        rig.engine.ask(rig.now, call, vec![("a".into(), name_form()), ("b".into(), name_form())]).unwrap();
        let ids: Vec<Value> = rig
            .drain()
            .iter()
            .filter_map(|o| match o {
                Output::Frame { bytes, .. } => serde_json::from_slice::<Value>(bytes).ok(),
                _ => None,
            })
            .map(|f| f["id"].clone())
            .collect();
        assert_eq!(ids.len(), 2);
        // One answer comes; the other never does.
        let answer = json!({"jsonrpc": "2.0", "id": ids[0], "result": {"action": "decline"}});
        rig.engine.handle_frame(rig.now, rig.conn, answer.to_string().as_bytes());
        assert!(rig.drain().is_empty());
        assert_eq!(rig.engine.poll_timeout(), Some(rig.now + Duration::from_secs(60)));
        rig.now += Duration::from_secs(60);
        rig.engine.handle_timeout(rig.now);
        let outs = rig.drain();
        let [Output::Frame { bytes, .. }, Output::Answer { call: c, answers: Err(AskError::TimedOut) }] =
            outs.as_slice()
        else {
            panic!("{outs:?}")
        };
        assert_eq!(*c, call);
        let note: Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(note["method"], "notifications/cancelled");
        assert_eq!(note["params"]["requestId"], ids[1], "only the unanswered request is cancelled");
        assert_eq!(rig.engine.outbound.len(), 0);
        assert_eq!(rig.engine.poll_timeout(), None);
        // The late answer is dropped; the handler may ask again.
        let late = json!({"jsonrpc": "2.0", "id": ids[1], "result": {"action": "decline"}});
        rig.engine.handle_frame(rig.now, rig.conn, late.to_string().as_bytes());
        assert!(rig.drain().is_empty());
        assert_eq!(rig.engine.ask(rig.now, call, vec![("c".into(), name_form())]), Ok(Asked::Pending));
        // 2026-07-28: the ask ends the call with input_required; nothing waits, no deadline.
        let mut rig = Rig::new(Caller::identified("ada"));
        let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
        let call = inv.unwrap().ticket.call();
        assert_eq!(rig.engine.ask(rig.now, call, vec![("k".into(), name_form())]), Err(AskError::Suspended));
        rig.drain();
        assert_eq!(rig.engine.poll_timeout(), None);
        assert_eq!(rig.engine.status().in_flight, 0);
    }

    #[test]
    fn legacy_ask_failures() {
        // No capability: nothing is sent.
        let mut rig = Rig::legacy(json!({}));
        let (_, inv) = rig.invoke(json!({"name": "ask"}));
        let call = inv.unwrap().ticket.call();
        let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 5})).unwrap();
        let Err(AskError::Unsupported(u)) = rig.engine.ask(rig.now, call, vec![("s".into(), sample)]) else {
            panic!()
        };
        assert_eq!(u.required_capabilities(), &json!({"sampling": {}}));
        assert!(rig.drain().is_empty());
        // An invalid answer and an error answer both reach the handler as failures.
        let mut rig = Rig::legacy(json!({"elicitation": {}}));
        let (_, inv) = rig.invoke(json!({"name": "ask"}));
        let call = inv.unwrap().ticket.call();
        rig.engine.ask(rig.now, call, vec![("who".into(), name_form())]).unwrap();
        let id = frame(&rig.drain())["id"].clone();
        let bad = json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": {"name": 5}}});
        rig.engine.handle_frame(rig.now, rig.conn, bad.to_string().as_bytes());
        assert!(matches!(
            rig.drain().as_slice(),
            [Output::Answer { answers: Err(AskError::Invalid(_)), .. }]
        ));
        rig.engine.ask(rig.now, call, vec![("who".into(), name_form())]).unwrap();
        let id = frame(&rig.drain())["id"].clone();
        let err = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -1, "message": "user closed"}});
        rig.engine.handle_frame(rig.now, rig.conn, err.to_string().as_bytes());
        assert!(matches!(
            rig.drain().as_slice(),
            [Output::Answer { answers: Err(AskError::Rejected(_)), .. }]
        ));
    }

    fn modern(params: Value) -> Value {
        let mut p = params;
        p["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
        p
    }

    #[test]
    fn modern_ask_suspends_and_resumes_from_sealed_state() {
        let mut rig = Rig::new(Caller::identified("ada"));
        let (_, inv) = rig.invoke(modern(json!({"name": "ask", "arguments": {"x": 1}})));
        let call = inv.unwrap().ticket.call();
        assert_eq!(
            rig.engine.ask(rig.now, call, vec![("user_name".into(), name_form())]),
            Err(AskError::Suspended)
        );
        let outs = rig.drain();
        assert!(outs.iter().any(|o| matches!(o, Output::Cancel { call: c } if *c == call)));
        let r = frame(&outs);
        assert_eq!(r["result"]["resultType"], "input_required");
        assert_eq!(r["result"]["inputRequests"]["user_name"]["method"], "elicitation/create");
        let state = r["result"]["requestState"].as_str().unwrap().to_owned();
        // The retry brings the answer (plus one nobody asked for): the handler's ask is answered
        // at once.
        let answer = json!({"action": "accept", "content": {"name": "Ada"}});
        let retry = modern(json!({"name": "ask", "arguments": {"x": 1}, "requestState": state,
            "inputResponses": {"user_name": answer, "extra": 1}}));
        let (_, inv) = rig.invoke(retry.clone());
        let call = inv.unwrap().ticket.call();
        let Ok(Asked::Answered(got)) = rig.engine.ask(rig.now, call, vec![("user_name".into(), name_form())])
        else {
            panic!()
        };
        assert_eq!(got["user_name"], answer);
        // A second question takes another round; its state carries the first answer.
        let age = InputRequest::elicit(
            "Age?",
            json!({"type": "object", "properties": {"age": {"type": "integer"}}}),
        )
        .unwrap();
        assert_eq!(
            rig.engine.ask(rig.now, call, vec![("age".into(), age.clone())]),
            Err(AskError::Suspended)
        );
        let r = frame(&rig.drain());
        let state2 = r["result"]["requestState"].as_str().unwrap().to_owned();
        assert_ne!(state2, state);
        let retry2 = modern(json!({"name": "ask", "arguments": {"x": 1}, "requestState": state2,
            "inputResponses": {"age": {"action": "accept", "content": {"age": 36}}}}));
        let (_, inv) = rig.invoke(retry2);
        let call = inv.unwrap().ticket.call();
        let Ok(Asked::Answered(first)) =
            rig.engine.ask(rig.now, call, vec![("user_name".into(), name_form())])
        else {
            panic!()
        };
        assert_eq!(first["user_name"], answer);
        assert!(matches!(rig.engine.ask(rig.now, call, vec![("age".into(), age)]), Ok(Asked::Answered(_))));
    }

    #[test]
    fn handler_state_rides_in_the_sealed_state() {
        let mut rig = Rig::new(Caller::identified("ada"));
        let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
        let call = inv.unwrap().ticket.call();
        assert_eq!(rig.engine.carried_state(call), None);
        rig.engine.carry_state(call, Some("step-1".into())).unwrap();
        rig.engine.ask(rig.now, call, vec![("k".into(), name_form())]).unwrap_err();
        let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
        let retry = modern(json!({"name": "ask", "requestState": state}));
        let (_, inv) = rig.invoke(retry);
        assert_eq!(rig.engine.carried_state(inv.unwrap().ticket.call()), Some("step-1"));
    }

    #[test]
    fn modern_state_is_bound_and_sealed() {
        let mut rig = Rig::new(Caller::identified("ada"));
        let (_, inv) = rig.invoke(modern(json!({"name": "ask", "arguments": {"x": 1}})));
        rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
        let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
        let fails = |rig: &mut Rig, params: Value| {
            let (outs, inv) = rig.invoke(modern(params));
            assert!(inv.is_none(), "nothing runs");
            frame(&outs)["error"]["code"].as_i64()
        };
        let tampered = format!("{state}-TAMPERED");
        assert_eq!(
            fails(&mut rig, json!({"name": "ask", "arguments": {"x": 1}, "requestState": tampered})),
            Some(-32602)
        );
        assert_eq!(
            fails(&mut rig, json!({"name": "ask", "arguments": {"x": 2}, "requestState": state})),
            Some(-32602)
        );
        let mut other = Rig::new(Caller::identified("eve"));
        assert_eq!(
            fails(&mut other, json!({"name": "ask", "arguments": {"x": 1}, "requestState": state})),
            Some(-32602)
        );
        rig.now += rig.engine.config.limits.state_ttl + Duration::from_secs(1);
        assert_eq!(
            fails(&mut rig, json!({"name": "ask", "arguments": {"x": 1}, "requestState": state})),
            Some(-32602)
        );
    }

    /// A first round that asks, and the retry that answers it: the retry's call, and the
    /// params a copy of it re-sends.
    fn answered_retry(rig: &mut Rig) -> (Invocation<u32>, Value) {
        let (_, inv) = rig.invoke(modern(json!({"name": "ask", "arguments": {"x": 1}})));
        rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
        let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
        let retry = modern(json!({"name": "ask", "arguments": {"x": 1}, "requestState": state,
            "inputResponses": {"k": {"action": "accept", "content": {"name": "Ada"}}}}));
        let (_, inv) = rig.invoke(retry.clone());
        (inv.expect("the first use runs"), retry)
    }

    fn send_as(rig: &mut Rig, id: u32, params: &Value) -> Vec<Output<u32>> {
        rig.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
    }

    #[test]
    fn a_replayed_retry_gets_the_recorded_outcome_and_never_runs_again() {
        let mut rig = Rig::new(Caller::identified("ada"));
        let (inv, retry) = answered_retry(&mut rig);
        // A copy while the first still runs: in progress, nothing runs.
        let outs = send_as(&mut rig, 2, &retry);
        assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
        let r = frame(&outs);
        assert_eq!((r["id"].clone(), r["error"]["code"].clone()), (json!(2), json!(-32602)));
        assert_eq!(r["error"]["data"]["reason"], "in_progress");
        let done = Reply::Tool(Ok(ToolOutput::text("charged once")));
        rig.engine.complete(rig.now, inv.ticket, done).unwrap();
        let first = frame(&rig.drain());
        assert_eq!(first["result"]["content"][0]["text"], "charged once");
        // Copies after it answered: the same answer under their own ids, no handler.
        for id in [3, 4] {
            let outs = send_as(&mut rig, id, &retry);
            assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
            let mut again = frame(&outs);
            assert_eq!(again["id"], id);
            again["id"] = first["id"].clone();
            assert_eq!(again, first);
        }
        // Once the state expired, it is refused as expired, like any other.
        rig.now += rig.engine.config.limits.state_ttl;
        let r = frame(&send_as(&mut rig, 5, &retry));
        assert_eq!(r["error"]["message"], "requestState expired; retry the request without requestState");
    }

    #[test]
    fn a_replay_of_a_retry_that_asked_again_gets_the_same_next_prompt() {
        let mut rig = Rig::new(Caller::identified("ada"));
        let (inv, retry) = answered_retry(&mut rig);
        let age = InputRequest::elicit(
            "Age?",
            json!({"type": "object", "properties": {"age": {"type": "integer"}}}),
        )
        .unwrap();
        rig.engine.ask(rig.now, inv.ticket.call(), vec![("age".into(), age)]).unwrap_err();
        let first = frame(&rig.drain());
        assert_eq!(first["result"]["resultType"], "input_required");
        let mut again = frame(&send_as(&mut rig, 1, &retry));
        again["id"] = first["id"].clone();
        assert_eq!(again, first, "the same question and the same next state");
        inv.ticket.abandon();
    }

    #[test]
    fn a_replay_of_an_interrupted_retry_is_refused() {
        let mut rig = Rig::new(Caller::identified("ada"));
        let (inv, retry) = answered_retry(&mut rig);
        rig.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}));
        assert_eq!(
            rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("late")))),
            Err(Stale)
        );
        let outs = send_as(&mut rig, 2, &retry);
        assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
        assert_eq!(frame(&outs)["error"]["data"]["reason"], "interrupted");
        // The same when the connection carrying it closes.
        let mut rig = Rig::new(Caller::identified("ada"));
        let (inv, retry) = answered_retry(&mut rig);
        inv.ticket.abandon();
        rig.engine.close(rig.now, rig.conn);
        rig.drain();
        rig.conn = rig.engine.open(rig.now, ConnKind::Stdio, Caller::identified("ada")).unwrap();
        let outs = send_as(&mut rig, 2, &retry);
        assert_eq!(frame(&outs)["error"]["data"]["reason"], "interrupted", "{outs:?}");
    }

    #[test]
    fn one_caller_flooding_the_ledger_costs_only_itself() {
        let mut rig = Rig::new(Caller::identified("flood"));
        rig.engine.config.limits.max_ledger_entries(4);
        let a = rig.conn;
        let b = rig.engine.open(rig.now, ConnKind::Stdio, Caller::identified("bea")).unwrap();
        // B's first round comes first, so its state expires before any of A's.
        rig.conn = b;
        let (_, inv) = rig.invoke(modern(json!({"name": "ask", "arguments": {"x": 1}})));
        rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
        let b_state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
        let b_retry = modern(json!({"name": "ask", "arguments": {"x": 1}, "requestState": b_state,
            "inputResponses": {"k": {"action": "accept", "content": {"name": "Bea"}}}}));
        // A fills the ledger twice over with recorded retries, each state expiring later.
        rig.conn = a;
        let mut a_retries = Vec::new();
        let flood = |rig: &mut Rig, n: usize, into: &mut Vec<Value>| {
            for _ in 0..n {
                rig.now += Duration::from_millis(5);
                let (inv, retry) = answered_retry(rig);
                rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("a")))).unwrap();
                rig.drain();
                into.push(retry);
            }
        };
        flood(&mut rig, 8, &mut a_retries);
        // B's first retry runs, although A's evicted records expire later than B's state.
        rig.conn = b;
        let outs = send_as(&mut rig, 10, &b_retry);
        let inv = outs.into_iter().find_map(|o| match o {
            Output::Invoke(i) => Some(i),
            _ => None,
        });
        let done = Reply::Tool(Ok(ToolOutput::text("b once")));
        rig.engine.complete(rig.now, inv.expect("B's first use runs").ticket, done).unwrap();
        let first = frame(&rig.drain());
        assert_eq!(first["result"]["content"][0]["text"], "b once");
        // A floods on; B's record stays (B is below its share), A's own oldest go.
        rig.conn = a;
        flood(&mut rig, 8, &mut a_retries);
        rig.conn = b;
        let outs = send_as(&mut rig, 11, &b_retry);
        assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
        let mut again = frame(&outs);
        again["id"] = first["id"].clone();
        assert_eq!(again, first, "B's replay is answered from the ledger");
        rig.conn = a;
        let reasons: Vec<Value> = a_retries
            .iter()
            .map(|retry| {
                let outs = send_as(&mut rig, 12, retry);
                assert!(!outs.iter().any(|o| matches!(o, Output::Invoke(_))), "{outs:?}");
                let r = frame(&outs);
                r["error"]["data"]["reason"].clone()
            })
            .collect();
        // A holds what is left beside B's one record: its three latest; the rest it evicted.
        let evicted = json!("evicted");
        assert!(reasons[..13].iter().all(|r| *r == evicted), "{reasons:?}");
        assert!(reasons[13..].iter().all(|r| r.is_null()), "{reasons:?}");
    }

    #[test]
    fn moving_the_epoch_on_refuses_every_outstanding_state() {
        let mut rig = Rig::new(Caller::identified("ada"));
        let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
        rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
        let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
        assert_eq!(rig.engine.epoch(), 0);
        assert_eq!(rig.engine.bump_epoch(rig.now), 1);
        let (outs, inv) = rig.invoke(modern(json!({"name": "ask", "requestState": state})));
        assert!(inv.is_none(), "nothing runs");
        let r = frame(&outs);
        assert_eq!(r["error"]["code"], -32602);
        assert_eq!(r["error"]["message"], "requestState expired; retry the request without requestState");
        assert_eq!(r["error"]["data"], json!({"reason": "epoch"}));
        // Setting it back (a replica that moved on by mistake) accepts the state again.
        rig.engine.set_epoch(rig.now, 0);
        let (_, inv) = rig.invoke(modern(json!({"name": "ask", "requestState": state})));
        inv.expect("epoch 0 again").ticket.abandon();
        // A state sealed in the new epoch is accepted in it, and only there.
        let mut rig = Rig::new(Caller::identified("ada"));
        rig.engine.set_epoch(rig.now, 7);
        let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
        rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
        let state = frame(&rig.drain())["result"]["requestState"].as_str().unwrap().to_owned();
        let (_, inv) = rig.invoke(modern(json!({"name": "ask", "requestState": state})));
        inv.expect("same epoch").ticket.abandon();
    }

    #[test]
    fn modern_capabilities_answers_and_round_limit() {
        let mut rig = Rig::new(Caller::anonymous());
        // Sampling without the capability: -32021 naming it.
        let (_, inv) = rig.invoke(modern(json!({"name": "ask"})));
        let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 5})).unwrap();
        rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("s".into(), sample)]).unwrap_err();
        let r = frame(&rig.drain());
        assert_eq!(r["error"]["code"], -32021);
        assert_eq!(r["error"]["data"]["requiredCapabilities"], json!({"sampling": {}}));
        // An answer that does not fit the form is refused.
        let (_, inv) = rig.invoke(modern(
            json!({"name": "ask", "inputResponses": {"k": {"action": "accept", "content": {"name": 12345}}}}),
        ));
        rig.engine.ask(rig.now, inv.unwrap().ticket.call(), vec![("k".into(), name_form())]).unwrap_err();
        assert_eq!(frame(&rig.drain())["error"]["code"], -32602);
        // Ten rounds, then interaction_limit.
        let mut state: Option<String> = None;
        for round in 0..=10 {
            let mut p = json!({"name": "ask"});
            if let Some(s) = &state {
                p["requestState"] = s.clone().into();
            }
            let (_, inv) = rig.invoke(modern(p));
            let q = vec![(format!("q{round}"), name_form())];
            rig.engine.ask(rig.now, inv.unwrap().ticket.call(), q).unwrap_err();
            let r = frame(&rig.drain());
            if round < 10 {
                state = Some(r["result"]["requestState"].as_str().unwrap().to_owned());
            } else {
                assert_eq!(r["error"]["data"]["reason"], "interaction_limit", "{r}");
            }
        }
    }
}
