//! The rules of Streamable HTTP as pure functions over request heads and byte slices.
//!
//! Nothing here reads a socket, parses HTTP/1.1 framing or names a `hyper`/`http` type. A shim
//! lends its parsed request head as a [`RequestHead`] view, calls [`check_head`], and then either
//! answers the [`HttpRefusal`] or reads the body (at most [`Limits::frame_bytes`]) and hands it
//! to the engine together with the [`Route`]'s session id and protocol version.
//!
//! # What [`check_head`] checks, in order
//!
//! | step | rule | refusal |
//! |---|---|---|
//! | 1 | the head fits [`Limits::max_head_bytes`] | 431 |
//! | 1a | `Transfer-Encoding`, when present, is only `chunked` (RFC 9112 §6.1) | 501 |
//! | 2 | the path (query ignored) is the endpoint | 404 |
//! | 3 | exactly one `Host`, well formed; an absolute-form target (`http://host/mcp`) names the host instead, and the `Host` header is then ignored (RFC 9112 §3.2.2) | 400 |
//! | 4 | the host is allowed (DNS-rebinding protection) | 403 |
//! | 5 | an `Origin`, when present, is same-origin with the `Host` or allow-listed | 403 |
//! | 6 | the method is `POST`, `GET` or `DELETE` | 405 with `Allow` |
//! | 7 | `POST`: `Content-Type` is JSON | 415 |
//! | 8 | `POST`: `Accept` admits JSON or SSE; `GET`: `Accept` admits SSE | 406 |
//! | 9 | `POST`: a `Content-Length` fits [`Limits::max_frame_bytes`] | 413 (400 if malformed) |
//! | 10 | `Mcp-Session-Id`, `MCP-Protocol-Version`, `Last-Event-ID` are well formed and single | 400 |
//!
//! Whether a session id is known, whether a version is supported, and whether the session id may
//! be omitted are protocol decisions: the engine judges the values the [`Route`] carries.
//!
//! # 2026-07-28 header rules (SEP-2243)
//!
//! Modern requests mirror body fields into headers (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`).
//! After the body is parsed, [`check_modern_headers`] compares them; a disagreement is a
//! [`HeaderMismatch`] (JSON-RPC `-32020`, HTTP 400). Values may arrive as `=?base64?…?=`, which
//! [`decode_header_value`] undoes. [`x_mcp_headers`] reads a tool's `x-mcp-header` annotations,
//! and [`header_expectations`] turns a call's arguments into what the headers must say.
//!
//! # Defaults and why
//!
//! - Only loopback `Host` names are allowed and no foreign `Origin`, as the MCP transport spec
//!   asks of local servers (the conformance scenario `dns-rebinding-protection` checks both).
//! - Heads are capped at 8 KiB, the limit common HTTP servers use (Apache's 8190 bytes, nginx's
//!   8 KiB `large_client_header_buffers`); bodies at the engine's frame size (2 MiB). Both bounds
//!   are [`Limits`] fields ([`Limits::max_head_bytes`], [`Limits::max_frame_bytes`]), the same
//!   value the engine enforces, so a body the transport admits is never one the engine refuses
//!   as too large. [`HttpConfig`] holds only policy: which requests are for this endpoint.

use std::fmt;
use std::net::IpAddr;

use crate::jsonrpc::{encode_error, ErrorCode, RpcError};
use crate::limits::Limits;

mod head;
mod headers;
mod owned;
mod route;
#[cfg(test)]
mod tests;

pub use head::check_head;
pub use headers::{
    check_modern_headers, decode_header_value, header_expectations, name_param, x_mcp_headers, HeaderError,
    HeaderExpect, HeaderMismatch, HeaderParam, Kind,
};
pub use owned::HttpRequestHead;
pub use route::{named, Named};

/// `Mcp-Session-Id`: the legacy session a request belongs to.
pub const SESSION_ID_HEADER: &str = "Mcp-Session-Id";
/// `MCP-Protocol-Version`: the protocol version a request speaks (2025-06-18 and later).
pub const PROTOCOL_VERSION_HEADER: &str = "MCP-Protocol-Version";
/// `Mcp-Method`: mirrors the body's `method` (2026-07-28).
pub const METHOD_HEADER: &str = "Mcp-Method";
/// `Mcp-Name`: mirrors `params.name`, `params.uri` or `params.taskId` (2026-07-28).
pub const NAME_HEADER: &str = "Mcp-Name";
/// The prefix of the headers that mirror `x-mcp-header` tool arguments (2026-07-28).
pub const PARAM_HEADER_PREFIX: &str = "Mcp-Param-";
/// `Last-Event-ID`: the SSE event a reconnecting legacy client saw last.
pub const LAST_EVENT_ID_HEADER: &str = "Last-Event-ID";
/// The value of the `Allow` header on a 405: the methods the MCP endpoint serves.
pub const ALLOWED_METHODS: &str = "GET, POST, DELETE";
/// Longest accepted `Mcp-Session-Id`, in bytes. A longer one is refused with 400.
///
/// The spec bounds only the alphabet; 128 bytes holds any sensible random token (a UUID is 36)
/// while keeping an attacker from making us store or echo long strings.
pub const MAX_SESSION_ID_BYTES: usize = 128;

/// The default allowed `Host` names: the loopback names, with any port.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The policy of one HTTP endpoint: its path, whom it serves, and whether connections persist.
///
/// It holds no bounds: sizes and timeouts are [`Limits`] fields, given to [`check_head`] and
/// [`check_body_len`] alongside it, so there is no second copy that could disagree with the
/// engine's.
///
/// Build with [`HttpConfig::default`] and adjust with the `&mut Self` setters, which chain:
///
/// ```
/// let mut http = mcp_proto::http::HttpConfig::default();
/// http.endpoint("/v1/mcp").allow_host("mcp.example.com").allow_origin("https://app.example.com");
/// assert_eq!(http.endpoint_path(), "/v1/mcp");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    endpoint: String,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    loopback_only: bool,
    keep_alive: bool,
}

impl Default for HttpConfig {
    /// `/mcp`, loopback `Host` names with any port, no extra origins, loopback peers only,
    /// keep-alive on.
    fn default() -> Self {
        Self {
            endpoint: "/mcp".to_owned(),
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect(),
            allowed_origins: Vec::new(),
            loopback_only: true,
            keep_alive: true,
        }
    }
}

impl HttpConfig {
    /// The path of the MCP endpoint. Default `/mcp`.
    ///
    /// A request for any other path is refused with 404 (the shim may route it elsewhere first).
    /// The comparison is exact and case-sensitive; a query string on the request is ignored.
    pub fn endpoint(&mut self, path: impl Into<String>) -> &mut Self {
        self.endpoint = path.into();
        self
    }

    /// Allows one more `Host`. Default: `localhost`, `127.0.0.1` and `[::1]`, with any port.
    ///
    /// An entry is a host name, an IPv4 address or a bracketed IPv6 address, optionally with
    /// `:port` (then only that explicit port matches) or `:*` (any port, the same as no port).
    /// Names compare case-insensitively; IPv6 addresses compare as addresses. A request whose
    /// `Host` matches no entry is refused with 403, which is what stops DNS rebinding: a page
    /// on `evil.example` that resolves its name to 127.0.0.1 still sends `Host: evil.example`.
    /// Serving under a public name (or behind a proxy) means adding that name here.
    pub fn allow_host(&mut self, host: impl Into<String>) -> &mut Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Removes every allowed `Host`, including the loopback defaults, so that only hosts added
    /// afterwards pass. With none, every request is refused with 403.
    pub fn clear_allowed_hosts(&mut self) -> &mut Self {
        self.allowed_hosts.clear();
        self
    }

    /// Allows one more browser `Origin` besides the same origin. Default: none.
    ///
    /// An entry is a serialised origin, `scheme://host[:port]`, where a `:*` port matches any
    /// port and an absent port means the scheme's default (80 for http, 443 for https). Scheme
    /// and host compare case-insensitively. `null` may be listed to admit opaque origins. A
    /// request whose `Origin` is neither same-origin with its `Host` nor listed is refused with
    /// 403; a request without `Origin` (any non-browser client) is not affected.
    pub fn allow_origin(&mut self, origin: impl Into<String>) -> &mut Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Whether only loopback peers may connect. Default `true`.
    ///
    /// The shim should then bind to a loopback address and pass every peer address to
    /// [`check_peer`], which refuses any other with 403. It does not change the `Host` rules:
    /// a server reachable from the network still needs [`allow_host`](Self::allow_host).
    pub fn loopback_only(&mut self, only: bool) -> &mut Self {
        self.loopback_only = only;
        self
    }

    /// Whether a connection may carry more than one request (HTTP/1.1 keep-alive). Default on.
    ///
    /// Off, every response carries `Connection: close`. Applied by the server layer's own
    /// listener; a mounted endpoint follows its host server.
    pub fn keep_alive(&mut self, on: bool) -> &mut Self {
        self.keep_alive = on;
        self
    }

    /// The current [`endpoint`](Self::endpoint).
    pub fn endpoint_path(&self) -> &str {
        &self.endpoint
    }

    /// The current allowed `Host` entries (see [`allow_host`](Self::allow_host)).
    pub fn allowed_hosts(&self) -> &[String] {
        &self.allowed_hosts
    }

    /// The current extra allowed origins (see [`allow_origin`](Self::allow_origin)).
    pub fn allowed_origins(&self) -> &[String] {
        &self.allowed_origins
    }

    /// The current [`loopback_only`](Self::loopback_only).
    pub fn is_loopback_only(&self) -> bool {
        self.loopback_only
    }

    /// The current [`keep_alive`](Self::keep_alive).
    pub fn is_keep_alive(&self) -> bool {
        self.keep_alive
    }
}

/// A borrowed view of a request head, built by the shim from whatever its HTTP library parsed.
///
/// Header names compare case-insensitively; values are the raw bytes (HTTP allows bytes that are
/// not UTF-8). An HTTP/2 shim passes the `:authority` pseudo-header as `host`.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The request method, case-sensitive (`POST`, not `post`).
    pub method: &'a str,
    /// The request target as received: a path, optionally followed by `?query` (ignored), or
    /// the absolute form `http://host[:port]/path[?query]`, whose authority is judged instead
    /// of the `Host` header.
    pub path: &'a str,
    /// Every header line in order, repeated names included.
    pub headers: &'a [(&'a str, &'a [u8])],
}

impl<'a> RequestHead<'a> {
    /// The first value of header `name` (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.header_values(name).next()
    }

    /// Every value of header `name` (case-insensitive), in order.
    pub fn header_values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'a [u8]> + 's {
        self.headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v)
    }

    /// Whether header `name` appears more than once.
    pub fn is_repeated(&self, name: &str) -> bool {
        self.header_values(name).nth(1).is_some()
    }

    /// The head's size as HTTP/1.1 would serialise it: `METHOD path HTTP/1.1\r\n`, one
    /// `name: value\r\n` per header, and the final `\r\n`. Saturates instead of overflowing.
    pub fn encoded_len(&self) -> usize {
        let line =
            self.method.len().saturating_add(self.path.len()).saturating_add(" HTTP/1.1\r\n".len() + 1);
        self.headers.iter().fold(line.saturating_add(2), |acc, (n, v)| {
            acc.saturating_add(n.len()).saturating_add(v.len()).saturating_add(4)
        })
    }
}

/// What a request may receive back, from its `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepts {
    /// `application/json` is acceptable (`application/json`, `application/*` or `*/*`).
    pub json: bool,
    /// `text/event-stream` is acceptable (`text/event-stream`, `text/*` or `*/*`).
    pub sse: bool,
    /// The header names `text/event-stream` before `application/json`: the client would rather
    /// read a stream, so it gets one (with a priming event) even for an answer known at once.
    /// Otherwise an answer is JSON unless something must precede it.
    pub prefers_sse: bool,
}

/// The MCP headers every route carries, syntax-checked but not judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteHeaders<'a> {
    /// `Mcp-Session-Id`: visible ASCII, 1 to [`MAX_SESSION_ID_BYTES`] bytes.
    pub session_id: Option<&'a str>,
    /// `MCP-Protocol-Version`, trimmed: visible ASCII, not yet compared to any version.
    pub protocol_version: Option<&'a str>,
}

/// An admitted request: what it is and what the engine needs to judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// A JSON-RPC message (or 2025-03-26 batch) in the body.
    Post {
        /// Session and version headers.
        headers: RouteHeaders<'a>,
        /// What the response may be. A missing `Accept` header admits both.
        accepts: Accepts,
    },
    /// Open (or, with `last_event_id`, resume) an SSE stream. Legacy only.
    Get {
        /// Session and version headers.
        headers: RouteHeaders<'a>,
        /// `Last-Event-ID`, trimmed; an empty value counts as absent.
        last_event_id: Option<&'a str>,
    },
    /// End a legacy session.
    Delete {
        /// Session and version headers.
        headers: RouteHeaders<'a>,
    },
}

impl<'a> Route<'a> {
    /// The session and version headers, whatever the method.
    pub fn headers(&self) -> RouteHeaders<'a> {
        match *self {
            Route::Post { headers, .. } | Route::Get { headers, .. } | Route::Delete { headers } => headers,
        }
    }
}

/// Why the transport refused a request, each kind answered with one status
/// ([`RefusalKind::status`]), as [`Blame`](crate::blame::Blame) maps a JSON-RPC error to one.
///
/// | kind | status |
/// |---|---|
/// | [`Malformed`](Self::Malformed) | 400 |
/// | [`Forbidden`](Self::Forbidden) | 403 |
/// | [`NotFound`](Self::NotFound) | 404 |
/// | [`MethodNotAllowed`](Self::MethodNotAllowed) | 405 |
/// | [`NotAcceptable`](Self::NotAcceptable) | 406 |
/// | [`BodyTooLarge`](Self::BodyTooLarge) | 413 |
/// | [`UnsupportedMediaType`](Self::UnsupportedMediaType) | 415 |
/// | [`HeadTooLarge`](Self::HeadTooLarge) | 431 |
/// | [`NotImplemented`](Self::NotImplemented) | 501 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalKind {
    /// A header is malformed, repeated where it may not be, or missing (`Host`).
    Malformed,
    /// The client, its `Host` or its `Origin` is not allowed.
    Forbidden,
    /// The path is not the MCP endpoint.
    NotFound,
    /// The method is not one the endpoint serves (the refusal carries `Allow`).
    MethodNotAllowed,
    /// The `Accept` header leaves out what the answer needs.
    NotAcceptable,
    /// The body is over [`Limits::max_frame_bytes`](crate::limits::Limits::max_frame_bytes) (a
    /// body is one frame).
    BodyTooLarge,
    /// The body is not declared `application/json`.
    UnsupportedMediaType,
    /// The head is over its bound.
    HeadTooLarge,
    /// A transfer coding this server does not implement.
    NotImplemented,
}

impl RefusalKind {
    /// The HTTP status this kind is answered with.
    ///
    /// ```
    /// use mcp_proto::http::RefusalKind;
    /// assert_eq!(RefusalKind::BodyTooLarge.status(), 413);
    /// assert_eq!(RefusalKind::Malformed.status(), 400);
    /// ```
    pub fn status(self) -> u16 {
        match self {
            RefusalKind::Malformed => 400,
            RefusalKind::Forbidden => 403,
            RefusalKind::NotFound => 404,
            RefusalKind::MethodNotAllowed => 405,
            RefusalKind::NotAcceptable => 406,
            RefusalKind::BodyTooLarge => 413,
            RefusalKind::UnsupportedMediaType => 415,
            RefusalKind::HeadTooLarge => 431,
            RefusalKind::NotImplemented => 501,
        }
    }
}

/// A request the transport refuses before the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRefusal {
    /// Why.
    pub kind: RefusalKind,
    /// The HTTP status code: [`kind`](Self::kind)'s ([`RefusalKind::status`]).
    pub status: u16,
    /// A short public reason; it never echoes request bytes.
    pub reason: &'static str,
    /// Extra response headers (for example `Allow` on a 405).
    pub headers: Vec<(&'static str, String)>,
}

impl HttpRefusal {
    fn new(kind: RefusalKind, reason: &'static str) -> Self {
        Self { kind, status: kind.status(), reason, headers: Vec::new() }
    }

    /// The response body: a JSON-RPC error `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,
    /// "message":<reason>}}` to send as `application/json`, or `None` for a 404 (the path is not
    /// the MCP endpoint, so a JSON-RPC body would claim it was).
    pub fn body(&self) -> Option<Vec<u8>> {
        if self.kind == RefusalKind::NotFound {
            return None;
        }
        Some(encode_error(None, &RpcError::new(ErrorCode::InvalidRequest, self.reason)))
    }
}

impl fmt::Display for HttpRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.reason)
    }
}

impl std::error::Error for HttpRefusal {}

/// Refuses a peer address when [`HttpConfig::loopback_only`] is set and `peer` is not a loopback
/// address (IPv4-mapped IPv6 loopback counts as loopback): 403.
pub fn check_peer(cfg: &HttpConfig, peer: IpAddr) -> Result<(), HttpRefusal> {
    let loopback = match peer {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    };
    if cfg.loopback_only && !loopback {
        return Err(HttpRefusal::new(RefusalKind::Forbidden, "only loopback clients are served"));
    }
    Ok(())
}

/// Refuses a body once `len` bytes of it exceed [`Limits::max_frame_bytes`] (a body is one
/// frame): 413. For bodies read without a `Content-Length`; call it as bytes arrive and stop
/// reading on `Err`.
pub fn check_body_len(limits: &Limits, len: usize) -> Result<(), HttpRefusal> {
    if len > limits.frame_bytes() {
        return Err(HttpRefusal::new(RefusalKind::BodyTooLarge, "request body too large"));
    }
    Ok(())
}

/// Whether `id` may be used as an `Mcp-Session-Id`: 1 to [`MAX_SESSION_ID_BYTES`] bytes of
/// visible ASCII (0x21 to 0x7E). A shim minting ids should mint only such ids.
pub fn is_valid_session_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_SESSION_ID_BYTES && id.bytes().all(is_visible)
}

fn is_visible(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Strips HTTP optional whitespace (SP and HTAB) from both ends.
fn trim_ows(raw: &[u8]) -> &[u8] {
    let start = raw.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(raw.len());
    let end = raw.iter().rposition(|&b| b != b' ' && b != b'\t').map_or(start, |e| e + 1);
    raw.get(start..end).unwrap_or_default()
}
