//! The sealed request state a modern (2026) request carries between rounds.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{InteractionError, MAX_STATE_BYTES};
use crate::cursor::{self, caller_digest, KeyRing};
use crate::json::number_text;
use crate::jsonrpc::RpcError;

/// The purpose tag inside a sealed request state. Cursors are sealed with the same keys, so the
/// tag (and the disjoint field names) is what keeps one from being accepted as the other.
const STATE_PURPOSE: &str = "rs1";

// ---------------------------------------------------------------------------------------------
// Sealed request state
// ---------------------------------------------------------------------------------------------

/// What a modern (2026) request has learnt so far, carried by the client between rounds.
///
/// Sealed, it is integrity-protected but **not encrypted**: the client can read it (base64 of
/// JSON). Never put secrets in it; keep them server-side and put a handle in `data`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestState {
    /// How many `input_required` rounds have been answered; the engine bounds it by
    /// [`Limits::max_input_rounds`](crate::limits::Limits::max_input_rounds).
    pub round: u32,
    /// Validated answers of earlier rounds, by input-request key, exactly as the client sent
    /// them (numbers keep their text).
    pub answers: Map<String, Value>,
    /// The handler's own continuation data, opaque to the engine.
    pub data: Option<String>,
}

/// What a sealed state is bound to: it is only accepted back for the same caller, method and
/// arguments, so it cannot be replayed by another principal or onto another call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBinding<'a> {
    /// The caller's binding key ([`Caller::binding`](crate::caller::Caller::binding)).
    pub caller: &'a str,
    /// The method being retried (`tools/call`, `prompts/get`, `resources/read`).
    pub method: &'a str,
    /// [`arguments_digest`] of the request's arguments.
    pub arguments_digest: [u8; 32],
    /// The continuation epoch the state is sealed in and must still be current when it comes
    /// back ([`Config::state_epoch`](crate::engine::Config::state_epoch)): moving the epoch on
    /// invalidates every state sealed before, on every replica that moves with it.
    pub epoch: u64,
}

/// SHA-256 of a canonical encoding of `args`, so the state can be bound to them without carrying
/// them.
///
/// Object keys are sorted (by UTF-8 bytes) at every level, strings are re-escaped one way and
/// numbers keep their text (`json::number_text`), so key order, whitespace and escape choices do not matter but
/// any change of value does (`1` and `1.0` differ). `None` (no arguments) differs from every
/// value, including `{}`. Nothing is excluded: the caller strips `inputResponses` and
/// `requestState` first. Recursion follows the nesting of `args`, which the engine's parser
/// already bounds ([`Limits::max_depth`](crate::limits::Limits::max_depth)).
pub fn arguments_digest(args: Option<&Value>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"mcp-arguments-digest-v1\n");
    match args {
        None => h.update(b"absent"),
        Some(v) => {
            h.update(b"=");
            canonical(&mut h, v);
        }
    }
    h.finalize().into()
}

fn canonical(h: &mut Sha256, v: &Value) {
    match v {
        Value::Null => h.update(b"null"),
        Value::Bool(true) => h.update(b"true"),
        Value::Bool(false) => h.update(b"false"),
        Value::Number(n) => h.update(number_text(n).as_bytes()),
        Value::String(s) => canonical_string(h, s),
        Value::Array(items) => {
            h.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                canonical(h, item);
            }
            h.update(b"]");
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            h.update(b"{");
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                canonical_string(h, k);
                h.update(b":");
                canonical(h, v);
            }
            h.update(b"}");
        }
    }
}

/// A JSON string with exactly one escaping: `"` and `\` escaped, controls as `\u00XX`, all else
/// literal UTF-8.
fn canonical_string(h: &mut Sha256, s: &str) {
    h.update(b"\"");
    let mut buf = [0u8; 4];
    for c in s.chars() {
        match c {
            '"' => h.update(b"\\\""),
            '\\' => h.update(b"\\\\"),
            c if u32::from(c) < 0x20 => h.update(format!("\\u{:04x}", u32::from(c)).as_bytes()),
            c => h.update(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
    h.update(b"\"");
}

/// Seals `state` into a `requestState` string, bound to `binding` and valid until
/// `expires_at_ms` (unix milliseconds; typically now + [`Limits::state_ttl`](crate::limits::Limits::state_ttl)).
///
/// The token is HMAC-SHA256 under the ring's signing key, in the same format as cursors but
/// with a purpose tag, so neither is ever accepted as the other. Fails with
/// [`InteractionError::StateTooLarge`] past [`MAX_STATE_BYTES`].
pub fn seal_state(
    keys: &KeyRing,
    binding: &StateBinding<'_>,
    state: &RequestState,
    expires_at_ms: u64,
) -> Result<String, InteractionError> {
    let payload = json!({
        "p": STATE_PURPOSE,
        "who": caller_digest(keys, binding.caller),
        "mth": binding.method,
        "arg": URL_SAFE_NO_PAD.encode(binding.arguments_digest),
        "exp": expires_at_ms,
        "ep": binding.epoch,
        "r": state.round,
        "a": Value::Object(state.answers.clone()),
        "d": state.data,
    })
    .to_string();
    // Base64 grows the payload by 4/3; refuse early rather than encode a payload that cannot fit.
    let too_large = InteractionError::StateTooLarge { max: MAX_STATE_BYTES };
    if payload.len() / 3 * 4 > MAX_STATE_BYTES {
        return Err(too_large);
    }
    let token = keys.seal(payload.as_bytes());
    if token.len() > MAX_STATE_BYTES {
        return Err(too_large);
    }
    Ok(token)
}

/// Opens a `requestState` from a retry, checking, in order: size, MAC, purpose and shape, then
/// caller, method and arguments against `binding`, then the epoch, then expiry against
/// `now_ms`.
///
/// Epoch and expiry are checked last so only the rightful caller learns why a genuine state
/// is no longer accepted.
pub fn open_state(
    keys: &KeyRing,
    token: &str,
    binding: &StateBinding<'_>,
    now_ms: u64,
) -> Result<RequestState, StateError> {
    open_state_with_expiry(keys, token, binding, now_ms).map(|(state, _)| state)
}

/// [`open_state`], also returning when the state expires (unix milliseconds, as sealed): how
/// long a record of its use must be kept.
pub fn open_state_with_expiry(
    keys: &KeyRing,
    token: &str,
    binding: &StateBinding<'_>,
    now_ms: u64,
) -> Result<(RequestState, u64), StateError> {
    if token.len() > MAX_STATE_BYTES {
        return Err(StateError::TooLarge);
    }
    let Some(payload) = keys.open(token) else {
        return Err(if cursor::is_well_formed(token) { StateError::Tampered } else { StateError::Malformed });
    };
    let v: Value = serde_json::from_slice(&payload).map_err(|_| StateError::Malformed)?;
    let field = |k: &str| v.get(k).ok_or(StateError::Malformed);
    let text = |k: &str| field(k)?.as_str().ok_or(StateError::Malformed);
    if text("p")? != STATE_PURPOSE {
        return Err(StateError::Malformed);
    }
    let (who, method, args) = (text("who")?, text("mth")?, text("arg")?);
    let expires = field("exp")?.as_u64().ok_or(StateError::Malformed)?;
    // States sealed before epochs existed carry none: they belong to epoch 0, the default.
    let epoch = match v.get("ep") {
        None => 0,
        Some(e) => e.as_u64().ok_or(StateError::Malformed)?,
    };
    let round = field("r")?.as_u64().and_then(|r| u32::try_from(r).ok()).ok_or(StateError::Malformed)?;
    let answers = field("a")?.as_object().ok_or(StateError::Malformed)?.clone();
    let data = match v.get("d") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return Err(StateError::Malformed),
    };
    if !cursor::caller_matches(keys, who, binding.caller) {
        return Err(StateError::WrongCaller);
    }
    if method != binding.method {
        return Err(StateError::WrongMethod);
    }
    if args != URL_SAFE_NO_PAD.encode(binding.arguments_digest) {
        return Err(StateError::WrongArguments);
    }
    if epoch != binding.epoch {
        return Err(StateError::Epoch);
    }
    if now_ms >= expires {
        return Err(StateError::Expired);
    }
    Ok((RequestState { round, answers, data }, expires))
}

/// Why a `requestState` was refused. The variants exist for logs and tests; on the wire all but
/// [`StateError::Expired`] and [`StateError::Epoch`] look the same ([`StateError::rpc_error`]),
/// so a prober learns nothing about which check it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateError {
    /// Not a sealed token of ours, or not a request state (a pagination cursor, say).
    Malformed,
    /// Shaped like one of our tokens, but the MAC does not verify: altered, or sealed by a key
    /// this ring does not hold.
    Tampered,
    /// Genuine, but past its expiry; the client should start the call again without a state.
    Expired,
    /// Genuine and unexpired, but sealed in another continuation epoch
    /// ([`Config::state_epoch`](crate::engine::Config::state_epoch)): the operator invalidated it (a
    /// deploy, a shutdown). The client should start the call again without a state.
    Epoch,
    /// Sealed for another caller.
    WrongCaller,
    /// Sealed for another method.
    WrongMethod,
    /// Sealed for other arguments.
    WrongArguments,
    /// Longer than [`MAX_STATE_BYTES`]; refused before decoding.
    TooLarge,
}

impl StateError {
    /// `-32602`, with "requestState expired" for [`StateError::Expired`] (and for
    /// [`StateError::Epoch`], with `data: {"reason": "epoch"}`: the client's remedy is the
    /// same) and one generic "invalid requestState" for every other case.
    pub fn rpc_error(self) -> RpcError {
        match self {
            StateError::Expired => RpcError::invalid_params(EXPIRED),
            StateError::Epoch => {
                RpcError::invalid_params(EXPIRED).with_data(serde_json::json!({ "reason": "epoch" }))
            }
            _ => RpcError::invalid_params("invalid requestState"),
        }
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StateError::Malformed => "request state is malformed",
            StateError::Tampered => "request state failed its integrity check",
            StateError::Expired => "request state expired",
            StateError::Epoch => "request state belongs to another continuation epoch",
            StateError::WrongCaller => "request state belongs to another caller",
            StateError::WrongMethod => "request state belongs to another method",
            StateError::WrongArguments => "request state belongs to other arguments",
            StateError::TooLarge => "request state is too large",
        })
    }
}

impl std::error::Error for StateError {}

const EXPIRED: &str = "requestState expired; retry the request without requestState";
