//! The 2026-07-28 header rules (SEP-2243): `=?base64?…?=` values, `x-mcp-header` annotations,
//! and the comparison of mirrored headers with the body.

use std::fmt;

use base64::Engine as _;
use serde_json::Value;

use super::{
    is_tchar, trim_ows, RequestHead, METHOD_HEADER, NAME_HEADER, PARAM_HEADER_PREFIX, PROTOCOL_VERSION_HEADER,
};
use crate::jsonrpc::{ErrorCode, RpcError};

// ---------------------------------------------------------------------------------------------
// 2026-07-28 header rules (SEP-2243)

/// Why a header value could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeaderError {
    /// `=?base64?…?=` whose inside is not canonical, padded standard base64.
    Base64,
    /// `=?base64?…?=` whose bytes are not UTF-8.
    Utf8,
    /// A plain value with a control character or a byte outside ASCII.
    InvalidChar,
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HeaderError::Base64 => "invalid base64",
            HeaderError::Utf8 => "base64 of invalid UTF-8",
            HeaderError::InvalidChar => "invalid character",
        })
    }
}

impl std::error::Error for HeaderError {}

const B64_PREFIX: &[u8] = b"=?base64?";
const B64_SUFFIX: &[u8] = b"?=";

/// Decodes one SEP-2243 header value.
///
/// Surrounding spaces and tabs are trimmed first. A value of the form `=?base64?<b64>?=` is
/// standard base64 (RFC 4648 alphabet, canonical `=` padding required) of UTF-8 text, returned
/// exactly (no trimming: preserving edge whitespace is why clients encode). Bad padding or a
/// character outside the alphabet is [`HeaderError::Base64`]; bytes that are not UTF-8 are
/// [`HeaderError::Utf8`]. A value lacking either the prefix or the suffix is a literal. A literal
/// must be printable ASCII (0x20 to 0x7E); anything else is [`HeaderError::InvalidChar`].
pub fn decode_header_value(raw: &[u8]) -> Result<String, HeaderError> {
    let value = trim_ows(raw);
    if value.len() >= B64_PREFIX.len() + B64_SUFFIX.len() {
        if let Some(inner) = value.strip_prefix(B64_PREFIX).and_then(|v| v.strip_suffix(B64_SUFFIX)) {
            let bytes =
                base64::engine::general_purpose::STANDARD.decode(inner).map_err(|_| HeaderError::Base64)?;
            return String::from_utf8(bytes).map_err(|_| HeaderError::Utf8);
        }
    }
    if !value.iter().all(|b| (0x20..=0x7e).contains(b)) {
        return Err(HeaderError::InvalidChar);
    }
    String::from_utf8(value.to_vec()).map_err(|_| HeaderError::InvalidChar)
}

/// The JSON type of an `x-mcp-header` property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `"type": "string"`: the header carries the string.
    String,
    /// `"type": "integer"`: the header carries decimal digits, compared numerically.
    Integer,
    /// `"type": "boolean"`: the header carries `true` or `false`.
    Boolean,
}

/// One `x-mcp-header` annotation of a tool's input schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    /// The annotation's value: the header is `Mcp-Param-<name>`.
    pub name: String,
    /// The annotated property's type.
    pub kind: Kind,
    /// Property names from the arguments object down to the annotated value (SEP-2243 allows
    /// annotations at any depth reachable through `properties`).
    pub path: Vec<String>,
}

impl HeaderParam {
    /// `Mcp-Param-<name>`.
    pub fn header_name(&self) -> String {
        format!("{PARAM_HEADER_PREFIX}{}", self.name)
    }

    /// What the header must say for a call with these `arguments`.
    pub fn expect(&self, arguments: Option<&Value>) -> HeaderExpect {
        let value = self.path.iter().fold(arguments, |v, key| v.and_then(|v| v.get(key.as_str())));
        HeaderExpect::from_value(value)
    }
}

/// Collects the `x-mcp-header` annotations of a tool's `inputSchema`.
///
/// Only properties reachable from the root through `properties` alone count (annotations under
/// `items`, `$defs`, `anyOf` and the like are ignored, as the client would ignore them). Each
/// annotation must be a non-empty RFC 9110 token, on a property whose `type` is `string`,
/// `integer` or `boolean` (or one of those plus `"null"`), and unique case-insensitively;
/// anything else is an `Err` naming the property, and the tool should not be registered, since
/// a conforming client drops such a tool from its list.
pub fn x_mcp_headers(input_schema: &Value) -> Result<Vec<HeaderParam>, String> {
    let mut out: Vec<HeaderParam> = Vec::new();
    let mut pending: std::collections::VecDeque<(Vec<String>, &Value)> = [(Vec::new(), input_schema)].into();
    while let Some((path, schema)) = pending.pop_front() {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else { continue };
        for (key, property) in properties {
            let mut here = path.clone();
            here.push(key.clone());
            if let Some(annotation) = property.get("x-mcp-header") {
                let at = here.join(".");
                let name = annotation
                    .as_str()
                    .filter(|n| !n.is_empty() && n.bytes().all(is_tchar))
                    .ok_or_else(|| format!("x-mcp-header on `{at}` must be a non-empty header-name token"))?;
                let kind = kind_of(property).ok_or_else(|| {
                    format!("x-mcp-header on `{at}` needs a property of type string, integer or boolean")
                })?;
                if out.iter().any(|p| p.name.eq_ignore_ascii_case(name)) {
                    return Err(format!(
                        "x-mcp-header `{name}` on `{at}` is not unique (case-insensitively)"
                    ));
                }
                out.push(HeaderParam { name: name.to_owned(), kind, path: here.clone() });
            }
            if property.get("properties").is_some() {
                pending.push_back((here, property));
            }
        }
    }
    Ok(out)
}

fn kind_of(property: &Value) -> Option<Kind> {
    let one = |t: &str| match t {
        "string" => Some(Kind::String),
        "integer" => Some(Kind::Integer),
        "boolean" => Some(Kind::Boolean),
        _ => None,
    };
    match property.get("type")? {
        Value::String(t) => one(t),
        Value::Array(types) => {
            let mut kinds = types.iter().filter(|t| t.as_str() != Some("null"));
            let kind = one(kinds.next()?.as_str()?)?;
            kinds.next().is_none().then_some(kind)
        }
        _ => None,
    }
}

/// What an `Mcp-Param-*` header must say, from the argument in the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderExpect {
    /// The argument is absent or `null`: the header must be absent too.
    Absent,
    /// A string (or a value of no primitive type, as its JSON text): compared exactly.
    Text(String),
    /// An integer, as decimal text: compared numerically (`007` equals `7`).
    Integer(String),
    /// A boolean: the header must be `true` or `false`.
    Bool(bool),
}

impl HeaderExpect {
    /// The expectation for one argument value (`None` when the argument is missing). Numbers
    /// with an integral value (`7`, `7.0`, `7e0`) are integers; other numbers, arrays and
    /// objects compare as their JSON text.
    pub fn from_value(value: Option<&Value>) -> Self {
        match value {
            None | Some(Value::Null) => HeaderExpect::Absent,
            Some(Value::String(s)) => HeaderExpect::Text(s.clone()),
            Some(Value::Bool(b)) => HeaderExpect::Bool(*b),
            Some(Value::Number(n)) => {
                let text = n.to_string();
                match integral_text(&text) {
                    Some(canonical) => HeaderExpect::Integer(canonical),
                    None => HeaderExpect::Text(text),
                }
            }
            Some(other) => HeaderExpect::Text(other.to_string()),
        }
    }
}

/// Each annotated parameter's header name and expectation, ready for [`check_modern_headers`].
pub fn header_expectations(params: &[HeaderParam], arguments: Option<&Value>) -> Vec<(String, HeaderExpect)> {
    params.iter().map(|p| (p.header_name(), p.expect(arguments))).collect()
}

/// Longest integer, in digits, compared numerically; longer numbers compare as text. Bounds the
/// zeros an exponent may add (`1e1000000000` must not allocate a gigabyte).
const MAX_INTEGER_DIGITS: usize = 1024;

/// Canonical decimal text (no sign on zero, no leading zeros) of a JSON number whose value is an
/// integer; `None` if it is not one, or longer than [`MAX_INTEGER_DIGITS`].
fn integral_text(text: &str) -> Option<String> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.strip_prefix('+').unwrap_or(e).parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut digits: String = int.chars().chain(frac.chars()).collect();
    let shift = exponent.checked_sub(i64::try_from(frac.len()).ok()?)?;
    if shift >= 0 {
        let zeros =
            usize::try_from(shift).ok().filter(|z| digits.len().saturating_add(*z) <= MAX_INTEGER_DIGITS)?;
        digits.extend(std::iter::repeat_n('0', zeros));
    } else {
        let cut = usize::try_from(shift.unsigned_abs()).ok()?;
        let keep = digits.len().checked_sub(cut);
        let (kept, dropped) = match keep {
            Some(k) => digits.split_at_checked(k)?,
            // The value is 0.000…ddd: integral only if every digit is zero.
            None => ("", digits.as_str()),
        };
        if !dropped.bytes().all(|b| b == b'0') {
            return None;
        }
        digits = kept.to_owned();
    }
    let trimmed = digits.trim_start_matches('0');
    if trimmed.len() > MAX_INTEGER_DIGITS {
        return None;
    }
    Some(match (trimmed.is_empty(), negative) {
        (true, _) => "0".to_owned(),
        (false, true) => format!("-{trimmed}"),
        (false, false) => trimmed.to_owned(),
    })
}

/// Canonical text of a header's integer: `-?[0-9]+` only (no `+`, no exponent, no fraction).
pub(super) fn header_integer(text: &str) -> Option<String> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    integral_text(text)
}

/// A modern request whose headers disagree with its body: JSON-RPC `-32020`, HTTP 400.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMismatch {
    /// The header at fault, as the spec spells it (for example `Mcp-Name`).
    pub header: String,
    /// A public message for the error; it names the header, never echoes its value.
    pub message: String,
}

impl HeaderMismatch {
    fn new(header: &str, message: impl Into<String>) -> Self {
        Self { header: header.to_owned(), message: message.into() }
    }

    /// The JSON-RPC error to send (with the request's id): `-32020`, this message, and
    /// `data: {"header": <name>}`; [`Blame::Misbehaving`](crate::blame::Blame::Misbehaving), so HTTP 400.
    pub fn rpc_error(&self) -> RpcError {
        RpcError::blamed(crate::blame::Blame::Misbehaving, ErrorCode::HeaderMismatch, self.message.clone())
            .with_data(serde_json::json!({ "header": self.header }))
    }
}

impl fmt::Display for HeaderMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HeaderMismatch {}

/// The `params` field that `Mcp-Name` mirrors for `method`, if the method has one: `name` for
/// `tools/call` and `prompts/get`, `uri` for `resources/read`, and `taskId` for the Tasks
/// extension's `tasks/get`, `tasks/update` and `tasks/cancel`.
pub fn name_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// The decoded value of a header that must appear at most once.
fn modern_header(head: &RequestHead<'_>, name: &str) -> Result<Option<String>, HeaderMismatch> {
    let mut values = head.header_values(name);
    let Some(raw) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(HeaderMismatch::new(name, format!("{name} header is repeated")));
    }
    decode_header_value(raw)
        .map(Some)
        .map_err(|e| HeaderMismatch::new(name, format!("{name} header value is invalid ({e})")))
}

/// Checks a 2026-07-28 request's headers against its body (SEP-2243, VERSIONS.md §5c).
///
/// Call it after the body parsed and before judging the version (a header of 2026-07-28 with
/// `_meta` `v999.0.0` is a mismatch, not an unsupported version), in this order:
/// 1. `MCP-Protocol-Version` must be present and equal `meta_version` (the `_meta`
///    `io.modelcontextprotocol/protocolVersion`);
/// 2. `Mcp-Method` must be present and equal `body_method`;
/// 3. for a method [`name_param`] names, `Mcp-Name` must be present and equal `body_name` (the
///    body's `params.name`, `params.uri` or `params.taskId`; `None` if absent, which mismatches);
/// 4. each `(header name, expectation)` in `custom` (see [`header_expectations`]) must hold;
///    an argument in the body whose header is missing, or a header whose argument is absent,
///    mismatches. `Mcp-Param-*` headers not in `custom` are ignored.
///
/// Header names match case-insensitively, values exactly, after [`decode_header_value`] (so a
/// space-padded plain value passes, a mis-cased one does not). Every header checked must appear
/// at most once and decode; otherwise it mismatches too.
pub fn check_modern_headers(
    head: &RequestHead<'_>,
    body_method: &str,
    body_name: Option<&str>,
    meta_version: &str,
    custom: &[(String, HeaderExpect)],
) -> Result<(), HeaderMismatch> {
    match modern_header(head, PROTOCOL_VERSION_HEADER)? {
        None => {
            return Err(HeaderMismatch::new(
                PROTOCOL_VERSION_HEADER,
                "MCP-Protocol-Version header is missing",
            ))
        }
        Some(v) if v == meta_version => {}
        Some(_) => {
            return Err(HeaderMismatch::new(
                PROTOCOL_VERSION_HEADER,
                "MCP-Protocol-Version header does not match _meta protocolVersion",
            ))
        }
    }
    match modern_header(head, METHOD_HEADER)? {
        None => return Err(HeaderMismatch::new(METHOD_HEADER, "Mcp-Method header is missing")),
        Some(m) if m == body_method => {}
        Some(_) => {
            return Err(HeaderMismatch::new(METHOD_HEADER, "Mcp-Method header does not match the method"))
        }
    }
    if let Some(field) = name_param(body_method) {
        match (modern_header(head, NAME_HEADER)?, body_name) {
            (None, _) => return Err(HeaderMismatch::new(NAME_HEADER, "Mcp-Name header is missing")),
            (Some(n), Some(b)) if n == b => {}
            (Some(_), _) => {
                return Err(HeaderMismatch::new(
                    NAME_HEADER,
                    format!("Mcp-Name header does not match params.{field}"),
                ))
            }
        }
    }
    for (name, expect) in custom {
        let got = modern_header(head, name)?;
        let ok = match (expect, &got) {
            (HeaderExpect::Absent, None) => true,
            (HeaderExpect::Absent, Some(_)) => {
                return Err(HeaderMismatch::new(
                    name,
                    format!("{name} header is present but its argument is not"),
                ))
            }
            (_, None) => return Err(HeaderMismatch::new(name, format!("{name} header is missing"))),
            (HeaderExpect::Text(want), Some(g)) => g == want,
            (HeaderExpect::Integer(want), Some(g)) => {
                header_integer(g).is_some_and(|g| integral_text(want).is_some_and(|w| w == g))
            }
            (HeaderExpect::Bool(want), Some(g)) => g == if *want { "true" } else { "false" },
        };
        if !ok {
            return Err(HeaderMismatch::new(name, format!("{name} header does not match its argument")));
        }
    }
    Ok(())
}
