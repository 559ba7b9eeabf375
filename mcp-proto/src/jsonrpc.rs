//! JSON-RPC 2.0 ids, error objects and the encoding of outgoing frames.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

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

/// The JSON-RPC and MCP error codes this engine emits, mapped to their numbers in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `-32700`: the frame is not JSON.
    ParseError,
    /// `-32600`: JSON, but not a valid JSON-RPC request, or over a bound.
    InvalidRequest,
    /// `-32601`: unknown method, or one the request's protocol version does not have.
    MethodNotFound,
    /// `-32602`: bad parameters.
    InvalidParams,
    /// `-32603`: the server failed; the message never carries private detail.
    InternalError,
    /// `-32002`: resource not found (legacy versions).
    ResourceNotFound,
    /// `-32020`: an HTTP header disagrees with the body (2026-07-28).
    HeaderMismatch,
    /// `-32021`: the request lacks a client capability the call needs (2026-07-28).
    MissingClientCapability,
    /// `-32022`: unsupported protocol version (2026-07-28).
    UnsupportedProtocolVersion,
    /// Any other code, such as an application's own public error.
    Other(i64),
}

impl ErrorCode {
    /// The wire number.
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::ResourceNotFound => -32002,
            ErrorCode::HeaderMismatch => -32020,
            ErrorCode::MissingClientCapability => -32021,
            ErrorCode::UnsupportedProtocolVersion => -32022,
            ErrorCode::Other(c) => c,
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code.
    pub code: ErrorCode,
    /// A short, public description.
    pub message: String,
    /// Optional structured detail, public too.
    pub data: Option<Value>,
}

impl RpcError {
    /// The whole JSON-RPC error response: `{"jsonrpc":"2.0","id":<id or null>,"error":{...}}`.
    pub fn to_response(&self, id: Option<&RequestId>) -> Vec<u8> {
        encode_error(id, self)
    }

    /// An error without `data`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    /// Adds `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidParams, message)
    }

    pub(crate) fn method_not_found(method: &str) -> Self {
        Self::new(ErrorCode::MethodNotFound, format!("method not found: {method}"))
    }

    /// The generic internal error: what a handler's private failure becomes on the wire.
    pub fn internal() -> Self {
        Self::new(ErrorCode::InternalError, "internal error")
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
    let mut out = Vec::with_capacity(128);
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
