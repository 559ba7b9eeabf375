//! JSON-RPC 2.0 ids, error objects and the encoding of outgoing frames.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::blame::{Blame, Bound, Era};
// `ErrorCode` lives beside `Blame`, below this file, so the status table needs nothing from
// here; this path stays the one the rest of the crate and the public API name.
pub use crate::blame::ErrorCode;

/// A request id exactly as the peer wrote it (a JSON string or integer), echoed byte for byte.
///
/// Keeping the raw text is what lets an id of `9007199254740993`, a 40-digit integer or a string
/// with escapes come back unchanged: nothing is re-encoded. Two ids are equal when they denote
/// the same value (`"a\u0062"` equals `"ab"`), which is how `notifications/cancelled` finds the
/// request it names whatever escapes either side used.
#[derive(Clone)]
pub struct RequestId {
    raw: Arc<str>,
    /// The decoded value, prefixed by its kind; shares `raw` when decoding changes nothing.
    canon: Arc<str>,
}

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.canon == other.canon
    }
}

impl Eq for RequestId {}

impl std::hash::Hash for RequestId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.canon.hash(state);
    }
}

impl RequestId {
    /// Parses raw JSON text as an id: a string or an integer (no fraction, no exponent).
    ///
    /// Returns `None` for anything else (`null`, `1.5`, `true`, objects), and for a string that
    /// does not decode (a lone surrogate escape), since no client could read it back.
    pub fn from_json(raw: &str) -> Option<Self> {
        let bytes = raw.as_bytes();
        match bytes.first() {
            Some(b'"') => {
                if !raw.contains('\\') {
                    let raw: Arc<str> = raw.into();
                    return Some(Self { canon: raw.clone(), raw });
                }
                let decoded: String = serde_json::from_str(raw).ok()?;
                let canon = serde_json::to_string(&decoded).ok()?;
                Some(Self { raw: raw.into(), canon: canon.into() })
            }
            Some(b'-') if bytes.len() > 1 && bytes.iter().skip(1).all(u8::is_ascii_digit) => {
                let raw: Arc<str> = raw.into();
                Some(Self { canon: raw.clone(), raw })
            }
            Some(c) if c.is_ascii_digit() && bytes.iter().all(u8::is_ascii_digit) => {
                let raw: Arc<str> = raw.into();
                Some(Self { canon: raw.clone(), raw })
            }
            _ => None,
        }
    }

    /// The id as encoded JSON text.
    pub fn as_json(&self) -> &str {
        &self.raw
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// A JSON-RPC error object, and who is to blame for it.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code.
    pub code: ErrorCode,
    /// A short, public description.
    pub message: String,
    /// Optional structured detail, public too.
    pub data: Option<Value>,
    /// Whose doing the error is. Not sent: it sets the HTTP status ([`RpcError::http_status`]).
    pub blame: Blame,
}

impl RpcError {
    /// The whole JSON-RPC error response: `{"jsonrpc":"2.0","id":<id or null>,"error":{...}}`.
    pub fn to_response(&self, id: Option<&RequestId>) -> Vec<u8> {
        encode_error(id, self)
    }

    /// An application's error: [`Blame::Application`], so it travels in the body (HTTP 200)
    /// whatever its code. A handler that means "the client's arguments are wrong" says so with
    /// [`RpcError::invalid_params`] instead.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::blamed(Blame::Application, code, message)
    }

    /// An error with an explicit blame and code.
    pub fn blamed(blame: Blame, code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None, blame }
    }

    /// Adds `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32600` for a message that is not a valid JSON-RPC request ([`Blame::Malformed`]).
    pub fn malformed(message: impl Into<String>) -> Self {
        Self::blamed(Blame::Malformed, ErrorCode::InvalidRequest, message)
    }

    /// `-32700` for bytes that are not JSON ([`Blame::Malformed`]).
    pub fn unparsable(message: impl Into<String>) -> Self {
        Self::blamed(Blame::Malformed, ErrorCode::ParseError, message)
    }

    /// `-32600` for a valid request the protocol does not allow here ([`Blame::Misbehaving`]).
    pub fn misbehaving(message: impl Into<String>) -> Self {
        Self::blamed(Blame::Misbehaving, ErrorCode::InvalidRequest, message)
    }

    /// `-32602` for parameters that are wrong, or name something that is not there
    /// ([`Blame::Misbehaving`]).
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::blamed(Blame::Misbehaving, ErrorCode::InvalidParams, message)
    }

    /// `code` for a version or capability this server cannot work with
    /// ([`Blame::Incompatible`]).
    pub fn incompatible(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::blamed(Blame::Incompatible, code, message)
    }

    /// `-32601` for a method this server, or the request's protocol version, does not have
    /// ([`Blame::Incompatible`]).
    pub fn method_not_found(method: &str) -> Self {
        Self::incompatible(ErrorCode::MethodNotFound, format!("method not found: {method}"))
    }

    /// A bound of kind `bound` was reached ([`Blame::Limit`]): `-32603` for the server's
    /// [`Bound::Capacity`], `-32600` for the others.
    pub fn limit(bound: Bound, message: impl Into<String>) -> Self {
        let blame = Blame::Limit(bound);
        Self::blamed(blame, blame.default_code(), message)
    }

    /// The generic internal error: what a handler's private failure or panic becomes on the
    /// wire ([`Blame::Application`]).
    pub fn internal() -> Self {
        Self::new(ErrorCode::InternalError, "internal error")
    }

    /// The generic internal error for a misuse of the engine's API by the shim or application
    /// ([`Blame::Misuse`]); the peer sees the same bytes as [`RpcError::internal`].
    pub fn misuse() -> Self {
        Self::blamed(Blame::Misuse, ErrorCode::InternalError, "internal error")
    }

    /// `-32603` "server is shutting down" with `data: {"reason": "shutting_down"}`
    /// ([`Blame::ShuttingDown`]).
    pub fn shutting_down() -> Self {
        Self::blamed(Blame::ShuttingDown, ErrorCode::InternalError, "server is shutting down")
            .with_data(serde_json::json!({ "reason": "shutting_down" }))
    }

    /// The HTTP status of a response carrying this error under `era`'s rules
    /// ([`Blame::http_status`]).
    pub fn http_status(&self, era: Era) -> u16 {
        self.blame.http_status(self.code, era)
    }

    /// The error response for `id`, with what its status follows from.
    pub(crate) fn encode(&self, id: Option<&RequestId>) -> Encoded {
        Encoded { bytes: encode_error(id, self), fault: Some((self.blame, self.code)) }
    }
}

/// An encoded message and, when it is an error, the blame and code its HTTP status follows
/// from: the status travels beside the bytes, so nothing reads them again to find it.
#[derive(Debug)]
pub(crate) struct Encoded {
    pub(crate) bytes: Vec<u8>,
    pub(crate) fault: Option<(Blame, ErrorCode)>,
}

impl Encoded {
    /// The HTTP status of a response carrying this message under `era`'s rules: 200 for
    /// anything but an error.
    pub(crate) fn status(&self, era: Era) -> u16 {
        self.fault.map_or(200, |(blame, code)| blame.http_status(code, era))
    }

    /// What follows the id in this response to request `id` (`,"result":...}` or
    /// `,"error":...}`): every response this crate writes starts with the same prefix, so the
    /// rest is the answer alone, ready to go out again under another id. `None` for anything
    /// else (a batch array, a response to another id).
    pub(crate) fn after_id(&self, id: &RequestId) -> Option<&[u8]> {
        self.bytes.strip_prefix(RESPONSE_PREFIX)?.strip_prefix(id.as_json().as_bytes())
    }

    /// The response to request `id` whose answer is `tail` (from [`Encoded::after_id`]).
    pub(crate) fn with_id(id: &RequestId, tail: &[u8], fault: Option<(Blame, ErrorCode)>) -> Self {
        let mut bytes = Vec::with_capacity(RESPONSE_PREFIX.len() + id.as_json().len() + tail.len());
        bytes.extend_from_slice(RESPONSE_PREFIX);
        bytes.extend_from_slice(id.as_json().as_bytes());
        bytes.extend_from_slice(tail);
        Self { bytes, fault }
    }
}

/// How every response this crate writes begins, up to the id.
const RESPONSE_PREFIX: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";

/// A result, notification or batch array: no error of its own.
impl From<Vec<u8>> for Encoded {
    fn from(bytes: Vec<u8>) -> Self {
        Self { bytes, fault: None }
    }
}

impl Serialize for RpcError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("code", &self.code.code())?;
        m.serialize_entry("message", &self.message)?;
        if let Some(d) = &self.data {
            m.serialize_entry("data", d)?;
        }
        m.end()
    }
}

/// Writes `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
pub(crate) fn encode_result<T: Serialize + ?Sized>(id: &RequestId, result: &T) -> Vec<u8> {
    // Room for a typical small result, so most answers are written without growing.
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_json().as_bytes());
    out.extend_from_slice(b",\"result\":");
    if serde_json::to_writer(&mut out, result).is_err() {
        // Only a Serialize impl that reports its own failure gets here; none of ours does.
        return encode_error(Some(id), &RpcError::internal());
    }
    out.push(b'}');
    out
}

/// Writes a result whose JSON text the caller assembled from pieces it already serialised
/// (cached listings), so it is copied, not parsed again.
pub(crate) fn encode_result_text(id: &RequestId, result: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.len() + 48);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_json().as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result.as_bytes());
    out.push(b'}');
    out
}

/// Writes `{"jsonrpc":"2.0","id":<id or null>,"error":{...}}`.
pub(crate) fn encode_error(id: Option<&RequestId>, error: &RpcError) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.map_or("null", RequestId::as_json).as_bytes());
    out.extend_from_slice(b",\"error\":");
    if serde_json::to_writer(&mut out, error).is_err() {
        out.extend_from_slice(b"{\"code\":-32603,\"message\":\"internal error\"}");
    }
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for ok in ["1", "-7", "0", "\"x\"", "\"\"", "123456789012345678901234567890"] {
            assert!(RequestId::from_json(ok).is_some(), "{ok}");
        }
        for bad in ["null", "1.5", "1e3", "true", "{}", "[]", "-", "", r#""\ud800""#] {
            assert!(RequestId::from_json(bad).is_none(), "{bad}");
        }
        let escaped = RequestId::from_json(r#""a\u0062""#).unwrap();
        assert_eq!(escaped, RequestId::from_json(r#""ab""#).unwrap());
        assert_eq!(escaped.as_json(), r#""a\u0062""#);
    }

    #[test]
    fn encoding() {
        let id = RequestId::from_json("9007199254740993").unwrap();
        assert_eq!(
            String::from_utf8(encode_result(&id, &serde_json::json!({}))).unwrap(),
            r#"{"jsonrpc":"2.0","id":9007199254740993,"result":{}}"#
        );
        assert_eq!(
            String::from_utf8(encode_error(None, &RpcError::internal())).unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#
        );
    }
}
