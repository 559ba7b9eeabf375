//! The rules of Streamable HTTP as pure functions over request heads and byte slices.
//!
//! Nothing here reads a socket, parses HTTP/1.1 framing or names a `hyper`/`http` type. A shim
//! lends its parsed request head as a [`RequestHead`] view, calls [`check_head`], and then either
//! answers the [`HttpRefusal`] or reads the body (at most [`HttpConfig::body_bytes`]) and hands it
//! to the engine together with the [`Route`]'s session id and protocol version.
//!
//! # What [`check_head`] checks, in order
//!
//! | step | rule | refusal |
//! |---|---|---|
//! | 1 | the head fits [`HttpConfig::max_head_bytes`] | 431 |
//! | 2 | the path (query ignored) is the endpoint | 404 |
//! | 3 | exactly one `Host`, well formed | 400 |
//! | 4 | the `Host` is allowed (DNS-rebinding protection) | 403 |
//! | 5 | an `Origin`, when present, is same-origin with the `Host` or allow-listed | 403 |
//! | 6 | the method is `POST`, `GET` or `DELETE` | 405 with `Allow` |
//! | 7 | `POST`: `Content-Type` is JSON | 415 |
//! | 8 | `POST`: `Accept` admits JSON or SSE; `GET`: `Accept` admits SSE | 406 |
//! | 9 | `POST`: a `Content-Length` fits [`HttpConfig::max_body_bytes`] | 413 (400 if malformed) |
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
//!   8 KiB `large_client_header_buffers`); bodies at the engine's frame size (2 MiB, see
//!   [`Limits::max_frame_bytes`]).

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use base64::Engine as _;
use serde_json::Value;

use crate::jsonrpc::{encode_error, ErrorCode, RpcError};
use crate::limits::Limits;

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

/// The default [`HttpConfig::max_head_bytes`]: 8 KiB.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 8 * 1024;

/// The default allowed `Host` names: the loopback names, with any port.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The transport-level settings of one HTTP endpoint.
///
/// Build with [`HttpConfig::default`] (or [`HttpConfig::from_limits`]) and adjust with the
/// `&mut Self` setters, which chain:
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
    max_head_bytes: usize,
    max_body_bytes: usize,
}

impl Default for HttpConfig {
    /// `/mcp`, loopback `Host` names with any port, no extra origins, loopback peers only, 8 KiB
    /// heads, 2 MiB bodies (the default [`Limits`] frame size).
    fn default() -> Self {
        Self::from_limits(&Limits::default())
    }
}

impl HttpConfig {
    /// The defaults, with the body bound taken from `limits`' frame size, so that a body the
    /// transport accepts is never one the engine refuses as too large.
    pub fn from_limits(limits: &Limits) -> Self {
        Self {
            endpoint: "/mcp".to_owned(),
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect(),
            allowed_origins: Vec::new(),
            loopback_only: true,
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            max_body_bytes: limits.frame_bytes(),
        }
    }

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

    /// Largest request head, in bytes, as HTTP/1.1 would serialise it (request line, every
    /// `name: value` line, the blank line). Default 8 KiB.
    ///
    /// A larger head is refused with 431 before anything else is looked at. The shim should set
    /// its HTTP parser's own buffer limit to about the same value.
    pub fn max_head_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_head_bytes = bytes;
        self
    }

    /// Largest request body, in bytes. Default: the [`Limits`] frame size, 2 MiB.
    ///
    /// A `Content-Length` over it is refused with 413 by [`check_head`]; a body without a length
    /// (chunked) must be cut off by the shim once [`check_body_len`] fails, also with 413.
    pub fn max_body_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_body_bytes = bytes;
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

    /// The current [`max_head_bytes`](Self::max_head_bytes).
    pub fn head_bytes(&self) -> usize {
        self.max_head_bytes
    }

    /// The current [`max_body_bytes`](Self::max_body_bytes).
    pub fn body_bytes(&self) -> usize {
        self.max_body_bytes
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
    /// The request target's path, optionally followed by `?query` (ignored).
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

/// A request the transport refuses before the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRefusal {
    /// The HTTP status code.
    pub status: u16,
    /// A short public reason; it never echoes request bytes.
    pub reason: &'static str,
    /// Extra response headers (for example `Allow` on a 405).
    pub headers: Vec<(&'static str, String)>,
}

impl HttpRefusal {
    fn new(status: u16, reason: &'static str) -> Self {
        Self { status, reason, headers: Vec::new() }
    }

    /// The response body: a JSON-RPC error `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,
    /// "message":<reason>}}` to send as `application/json`, or `None` for a 404 (the path is not
    /// the MCP endpoint, so a JSON-RPC body would claim it was).
    pub fn body(&self) -> Option<Vec<u8>> {
        if self.status == 404 {
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
        return Err(HttpRefusal::new(403, "only loopback clients are served"));
    }
    Ok(())
}

/// Refuses a body once `len` bytes of it exceed [`HttpConfig::max_body_bytes`]: 413. For bodies
/// read without a `Content-Length`; call it as bytes arrive and stop reading on `Err`.
pub fn check_body_len(cfg: &HttpConfig, len: usize) -> Result<(), HttpRefusal> {
    if len > cfg.max_body_bytes {
        return Err(HttpRefusal::new(413, "request body too large"));
    }
    Ok(())
}

/// Applies the transport rules to a request head; see the [module docs](self) for the order.
///
/// Leniencies, each deliberate:
/// - a `POST` without `Accept` is admitted with both response kinds allowed (RFC 9110: no
///   `Accept` means anything is acceptable; older clients omit it). An `Accept` that names
///   neither JSON nor SSE (with `q` > 0) is refused with 406;
/// - `Content-Type` may carry parameters (a `charset` must be UTF-8) and may be any
///   `application/*+json` type;
/// - the path may carry a query string.
///
/// A missing `Host` is refused with 400 whatever the HTTP version: without one the DNS-rebinding
/// check cannot pass. A malformed `Mcp-Session-Id` is refused with 400 even on a 2026-07-28
/// request (which ignores a well-formed one): it is malformed HTTP before it is anything else.
pub fn check_head<'a>(cfg: &HttpConfig, head: &RequestHead<'a>) -> Result<Route<'a>, HttpRefusal> {
    if head.encoded_len() > cfg.max_head_bytes {
        return Err(HttpRefusal::new(431, "request head too large"));
    }
    let path = head.path.split_once('?').map_or(head.path, |(p, _)| p);
    if path != cfg.endpoint {
        return Err(HttpRefusal::new(404, "not found"));
    }
    let host = check_host(cfg, head)?;
    check_origin(cfg, head, host)?;
    match head.method {
        "POST" => {
            check_content_type(head)?;
            let accepts = match accept_of(head) {
                None => Accepts { json: true, sse: true, prefers_sse: false },
                Some(a) if a.json || a.sse => a,
                Some(_) => {
                    return Err(HttpRefusal::new(
                        406,
                        "Accept must include application/json or text/event-stream",
                    ))
                }
            };
            check_content_length(cfg, head)?;
            Ok(Route::Post { headers: route_headers(head)?, accepts })
        }
        "GET" => {
            if !accept_of(head).is_some_and(|a| a.sse) {
                return Err(HttpRefusal::new(406, "Accept must include text/event-stream"));
            }
            let headers = route_headers(head)?;
            let last_event_id = match single(head, LAST_EVENT_ID_HEADER, "repeated Last-Event-ID header")? {
                None => None,
                Some(raw) => {
                    let text = std::str::from_utf8(trim_ows(raw))
                        .ok()
                        .filter(|t| t.chars().all(|c| !c.is_control()))
                        .ok_or(HttpRefusal::new(400, "malformed Last-Event-ID header"))?;
                    Some(text).filter(|t| !t.is_empty())
                }
            };
            Ok(Route::Get { headers, last_event_id })
        }
        "DELETE" => Ok(Route::Delete { headers: route_headers(head)? }),
        _ => {
            let mut refusal = HttpRefusal::new(405, "method not allowed");
            refusal.headers.push(("Allow", ALLOWED_METHODS.to_owned()));
            Err(refusal)
        }
    }
}

/// The status of a modern (2026-07-28) response carrying a JSON-RPC error `code`: 404 for
/// `-32601`; 400 for `-32700`, `-32600`, `-32602`, `-32020`, `-32021` and `-32022`; 200 (the
/// error travels in the body) for everything else, such as `-32603` or an application's code.
pub fn status_for_error(code: i64) -> u16 {
    match code {
        -32601 => 404,
        -32700 | -32600 | -32602 | -32020 | -32021 | -32022 => 400,
        _ => 200,
    }
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

/// The trimmed value as text, if it is printable ASCII (0x20 to 0x7E).
fn ascii_text(raw: &[u8]) -> Option<&str> {
    let t = trim_ows(raw);
    if t.iter().all(|b| (0x20..=0x7e).contains(b)) {
        std::str::from_utf8(t).ok()
    } else {
        None
    }
}

/// The only value of a header that must not repeat; a repeat is a 400 with `repeated`.
fn single<'a>(
    head: &RequestHead<'a>,
    name: &str,
    repeated: &'static str,
) -> Result<Option<&'a [u8]>, HttpRefusal> {
    let mut values = head.header_values(name);
    let first = values.next();
    if values.next().is_some() {
        return Err(HttpRefusal::new(400, repeated));
    }
    Ok(first)
}

fn route_headers<'a>(head: &RequestHead<'a>) -> Result<RouteHeaders<'a>, HttpRefusal> {
    let session_id = match single(head, SESSION_ID_HEADER, "repeated Mcp-Session-Id header")? {
        None => None,
        Some(raw) => Some(
            std::str::from_utf8(trim_ows(raw))
                .ok()
                .filter(|id| is_valid_session_id(id))
                .ok_or(HttpRefusal::new(400, "malformed Mcp-Session-Id header"))?,
        ),
    };
    let protocol_version =
        match single(head, PROTOCOL_VERSION_HEADER, "repeated MCP-Protocol-Version header")? {
            None => None,
            Some(raw) => Some(
                std::str::from_utf8(trim_ows(raw))
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(is_visible))
                    .ok_or(HttpRefusal::new(400, "malformed MCP-Protocol-Version header"))?,
            ),
        };
    Ok(RouteHeaders { session_id, protocol_version })
}

// ---------------------------------------------------------------------------------------------
// Host and Origin

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostName<'a> {
    Name(&'a str),
    V6(Ipv6Addr),
}

impl HostName<'_> {
    fn matches(self, other: HostName<'_>) -> bool {
        match (self, other) {
            (HostName::Name(a), HostName::Name(b)) => a.eq_ignore_ascii_case(b),
            (HostName::V6(a), HostName::V6(b)) => a == b,
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    Absent,
    Any,
    Num(u16),
}

/// `host[:port]` where host is a registered name, IPv4 address or `[IPv6]`; `:*` only when
/// `wildcard` (configuration entries).
fn parse_authority(s: &str, wildcard: bool) -> Option<(HostName<'_>, Port)> {
    let (host, port) = if let Some(after) = s.strip_prefix('[') {
        let (inner, rest) = after.split_once(']')?;
        let host = HostName::V6(inner.parse().ok()?);
        let port = if rest.is_empty() { None } else { Some(rest.strip_prefix(':')?) };
        (host, port)
    } else {
        let (name, port) = match s.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (s, None),
        };
        let name_ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        if name.is_empty() || !name.bytes().all(name_ok) {
            return None;
        }
        (HostName::Name(name), port)
    };
    let port = match port {
        None => Port::Absent,
        Some("*") if wildcard => Port::Any,
        Some(p) if (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) => {
            Port::Num(p.parse().ok()?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

fn check_host<'a>(cfg: &HttpConfig, head: &RequestHead<'a>) -> Result<(HostName<'a>, Port), HttpRefusal> {
    let raw =
        single(head, "host", "repeated Host header")?.ok_or(HttpRefusal::new(400, "missing Host header"))?;
    let (host, port) = ascii_text(raw)
        .and_then(|t| parse_authority(t, false))
        .ok_or(HttpRefusal::new(400, "malformed Host header"))?;
    // An entry without a port (or with `:*`) admits any port; one with a port, only that port.
    let allowed = cfg
        .allowed_hosts
        .iter()
        .filter_map(|entry| parse_authority(entry, true))
        .any(|(h, p)| h.matches(host) && (matches!(p, Port::Absent | Port::Any) || p == port));
    if !allowed {
        return Err(HttpRefusal::new(403, "Host not allowed"));
    }
    Ok((host, port))
}

struct Origin<'a> {
    scheme: &'a str,
    host: HostName<'a>,
    port: Port,
}

impl Origin<'_> {
    fn parse(s: &str, wildcard: bool) -> Option<Origin<'_>> {
        let (scheme, authority) = s.split_once("://")?;
        let mut bytes = scheme.bytes();
        if !bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
            || !bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        {
            return None;
        }
        let (host, port) = parse_authority(authority, wildcard)?;
        Some(Origin { scheme, host, port })
    }

    fn default_port(&self) -> Option<u16> {
        if self.scheme.eq_ignore_ascii_case("http") {
            Some(80)
        } else if self.scheme.eq_ignore_ascii_case("https") {
            Some(443)
        } else {
            None
        }
    }

    fn effective_port(&self) -> Option<u16> {
        match self.port {
            Port::Num(p) => Some(p),
            _ => self.default_port(),
        }
    }
}

fn check_origin(
    cfg: &HttpConfig,
    head: &RequestHead<'_>,
    host: (HostName<'_>, Port),
) -> Result<(), HttpRefusal> {
    let foreign = || HttpRefusal::new(403, "Origin not allowed");
    let mut values = head.header_values("origin");
    let Some(raw) = values.next() else { return Ok(()) };
    if values.next().is_some() {
        return Err(foreign());
    }
    let text = ascii_text(raw).ok_or_else(foreign)?;
    for entry in &cfg.allowed_origins {
        if entry.eq_ignore_ascii_case(text) {
            return Ok(());
        }
        if let (Some(allowed), Some(origin)) = (Origin::parse(entry, true), Origin::parse(text, false)) {
            let port_ok = allowed.port == Port::Any || allowed.effective_port() == origin.effective_port();
            if allowed.scheme.eq_ignore_ascii_case(origin.scheme)
                && allowed.host.matches(origin.host)
                && port_ok
            {
                return Ok(());
            }
        }
    }
    let origin = Origin::parse(text, false).ok_or_else(foreign)?;
    let (host_name, host_port) = host;
    // The request's own scheme is unknown here (TLS may end at a proxy), so a Host without a
    // port matches an Origin on its scheme's default port.
    let same_port = match host_port {
        Port::Num(p) => origin.effective_port() == Some(p),
        _ => origin.port == Port::Absent || origin.effective_port() == origin.default_port(),
    };
    if origin.host.matches(host_name) && same_port {
        Ok(())
    } else {
        Err(foreign())
    }
}

// ---------------------------------------------------------------------------------------------
// Media types

struct MediaType<'a> {
    ty: &'a str,
    subtype: &'a str,
    /// Parameter names as written, values unquoted.
    params: Vec<(&'a str, String)>,
}

/// Takes the longest prefix of `tchar`s.
fn take_token(s: &str) -> (&str, &str) {
    let n = s.bytes().take_while(|&b| is_tchar(b)).count();
    s.split_at_checked(n).unwrap_or((s, ""))
}

fn skip_ows(s: &str) -> &str {
    s.trim_start_matches([' ', '\t'])
}

/// `quoted-string` at the start of `s` (which begins with `"`): the unescaped value and the rest.
fn take_quoted(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.strip_prefix('"')?.char_indices();
    let body = s.strip_prefix('"')?;
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, body.get(i + 1..)?)),
            '\\' => out.push(chars.next()?.1),
            c if c == '\t' || (' '..='~').contains(&c) => out.push(c),
            _ => return None,
        }
    }
    None
}

/// RFC 9110 `media-type` (or `media-range`): `type "/" subtype *( OWS ";" OWS [ parameter ] )`.
fn parse_media_type(s: &str) -> Option<MediaType<'_>> {
    let s = skip_ows(s);
    let (ty, rest) = take_token(s);
    let rest = rest.strip_prefix('/')?;
    let (subtype, mut rest) = take_token(rest);
    if ty.is_empty() || subtype.is_empty() {
        return None;
    }
    let mut params = Vec::new();
    loop {
        rest = skip_ows(rest);
        if rest.is_empty() {
            return Some(MediaType { ty, subtype, params });
        }
        rest = skip_ows(rest.strip_prefix(';')?);
        if rest.is_empty() || rest.starts_with(';') {
            continue;
        }
        let (name, after) = take_token(rest);
        let after = after.strip_prefix('=')?;
        if name.is_empty() {
            return None;
        }
        let (value, after) = if after.starts_with('"') {
            take_quoted(after)?
        } else {
            let (v, after) = take_token(after);
            if v.is_empty() {
                return None;
            }
            (v.to_owned(), after)
        };
        params.push((name, value));
        rest = after;
    }
}

/// Splits a list header on the commas outside quoted strings.
fn split_list(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quoted, mut escaped, mut start) = (false, false, 0);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.extend(s.get(start..i));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.extend(s.get(start..));
    out
}

/// Whether a `q` parameter value is zero; `None` if it is not a valid `qvalue`.
fn q_is_zero(q: &str) -> Option<bool> {
    let (int, frac) = q.split_once('.').unwrap_or((q, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match int {
        "0" => Some(frac.bytes().all(|b| b == b'0')),
        "1" if frac.bytes().all(|b| b == b'0') => Some(false),
        _ => None,
    }
}

/// The kinds every `Accept` value admits together, or `None` when there is no `Accept` header.
/// Malformed elements and elements with `q=0` admit nothing.
fn accept_of(head: &RequestHead<'_>) -> Option<Accepts> {
    let mut seen = false;
    let mut acc = Accepts { json: false, sse: false, prefers_sse: false };
    let mut named_first = None;
    for raw in head.header_values("accept") {
        seen = true;
        let Some(text) = ascii_text(raw) else { continue };
        for element in split_list(text) {
            if element.trim_matches([' ', '\t']).is_empty() {
                continue;
            }
            let Some(m) = parse_media_type(element) else { continue };
            let q_zero =
                m.params.iter().find(|(n, _)| n.eq_ignore_ascii_case("q")).map(|(_, v)| q_is_zero(v));
            if matches!(q_zero, Some(None | Some(true))) {
                continue;
            }
            let any = m.ty == "*" && m.subtype == "*";
            let ty = |t: &str| m.ty.eq_ignore_ascii_case(t);
            let sub = |s: &str| m.subtype.eq_ignore_ascii_case(s);
            acc.json |= any || (ty("application") && (m.subtype == "*" || sub("json")));
            acc.sse |= any || (ty("text") && (m.subtype == "*" || sub("event-stream")));
            if named_first.is_none() && ty("application") && sub("json") {
                named_first = Some(false);
            } else if named_first.is_none() && ty("text") && sub("event-stream") {
                named_first = Some(true);
            }
        }
    }
    acc.prefers_sse = named_first == Some(true);
    seen.then_some(acc)
}

fn check_content_type(head: &RequestHead<'_>) -> Result<(), HttpRefusal> {
    let unsupported = || HttpRefusal::new(415, "Content-Type must be application/json");
    let raw = single(head, "content-type", "repeated Content-Type header")?.ok_or_else(unsupported)?;
    let m = ascii_text(raw).and_then(parse_media_type).ok_or_else(unsupported)?;
    let sub = m.subtype.as_bytes();
    let plus_json =
        sub.len() > 5 && sub.get(sub.len() - 5..).is_some_and(|t| t.eq_ignore_ascii_case(b"+json"));
    let json =
        m.ty.eq_ignore_ascii_case("application") && (m.subtype.eq_ignore_ascii_case("json") || plus_json);
    // JSON is UTF-8 (RFC 8259 §8.1); a body declared in another charset is not one we can read.
    let utf8 = m
        .params
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("charset"))
        .all(|(_, v)| v.eq_ignore_ascii_case("utf-8") || v.eq_ignore_ascii_case("utf8"));
    if json && utf8 {
        Ok(())
    } else {
        Err(unsupported())
    }
}

fn check_content_length(cfg: &HttpConfig, head: &RequestHead<'_>) -> Result<(), HttpRefusal> {
    let mut length: Option<u64> = None;
    for raw in head.header_values("content-length") {
        // A list ("5, 5") or repeated identical values are one length (RFC 9110 §8.6).
        let text = ascii_text(raw).ok_or(HttpRefusal::new(400, "malformed Content-Length header"))?;
        for part in split_list(text) {
            let part = part.trim_matches([' ', '\t']);
            let n = Some(part)
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse::<u64>().ok())
                .ok_or(HttpRefusal::new(400, "malformed Content-Length header"))?;
            if length.is_some_and(|l| l != n) {
                return Err(HttpRefusal::new(400, "malformed Content-Length header"));
            }
            length = Some(n);
        }
    }
    match length {
        Some(n) if n > u64::try_from(cfg.max_body_bytes).unwrap_or(u64::MAX) => {
            Err(HttpRefusal::new(413, "request body too large"))
        }
        _ => Ok(()),
    }
}

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
fn header_integer(text: &str) -> Option<String> {
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
    /// The HTTP status of the rejection.
    pub const STATUS: u16 = 400;

    fn new(header: &str, message: impl Into<String>) -> Self {
        Self { header: header.to_owned(), message: message.into() }
    }

    /// The JSON-RPC error to send (with the request's id): `-32020`, this message, and
    /// `data: {"header": <name>}`.
    pub fn rpc_error(&self) -> RpcError {
        RpcError::new(ErrorCode::HeaderMismatch, self.message.clone())
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    type Headers = Vec<(&'static str, &'static [u8])>;

    fn post_headers() -> Headers {
        vec![
            ("Host", b"localhost:3000"),
            ("Content-Type", b"application/json"),
            ("Accept", b"application/json, text/event-stream"),
        ]
    }

    fn run(method: &str, path: &str, headers: &[(&str, &[u8])]) -> Result<(), u16> {
        let head = RequestHead { method, path, headers };
        check_head(&HttpConfig::default(), &head).map(|_| ()).map_err(|r| r.status)
    }

    fn with(mut base: Headers, name: &'static str, value: &'static [u8]) -> Headers {
        base.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        base.push((name, value));
        base
    }

    fn without(mut base: Headers, name: &str) -> Headers {
        base.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        base
    }

    #[test]
    fn defaults() {
        let cfg = HttpConfig::default();
        assert_eq!(cfg.endpoint_path(), "/mcp");
        assert_eq!(cfg.allowed_hosts(), ["localhost", "127.0.0.1", "[::1]"]);
        assert!(cfg.allowed_origins().is_empty());
        assert!(cfg.is_loopback_only());
        assert_eq!(cfg.head_bytes(), 8192);
        assert_eq!(cfg.body_bytes(), 2 * 1024 * 1024);
        let mut limits = Limits::default();
        limits.max_frame_bytes(1000);
        assert_eq!(HttpConfig::from_limits(&limits).body_bytes(), 1000);
    }

    #[test]
    fn a_good_post_routes_with_its_headers() {
        let mut h = post_headers();
        h.push(("mcp-session-id", b" abc-123 "));
        h.push(("MCP-PROTOCOL-VERSION", b"2025-11-25"));
        let head = RequestHead { method: "POST", path: "/mcp", headers: &h };
        let route = check_head(&HttpConfig::default(), &head).unwrap();
        assert_eq!(
            route,
            Route::Post {
                headers: RouteHeaders { session_id: Some("abc-123"), protocol_version: Some("2025-11-25") },
                accepts: Accepts { json: true, sse: true, prefers_sse: false },
            }
        );
        assert_eq!(route.headers().session_id, Some("abc-123"));
    }

    #[test]
    fn head_size_431_comes_first() {
        let big: &'static [u8] = Box::leak(vec![b'a'; 9000].into_boxed_slice());
        let h = with(post_headers(), "X-Big", big);
        assert_eq!(run("POST", "/elsewhere", &h), Err(431));
        let mut cfg = HttpConfig::default();
        cfg.max_head_bytes(20_000);
        let head = RequestHead { method: "POST", path: "/mcp", headers: &h };
        assert!(check_head(&cfg, &head).is_ok());
        let exact = RequestHead { method: "GET", path: "/", headers: &[("a", b"b")] };
        assert_eq!(exact.encoded_len(), "GET / HTTP/1.1\r\na: b\r\n\r\n".len());
    }

    #[test]
    fn other_paths_404_without_a_body() {
        for path in ["/", "/mcp/", "/MCP", "/mcpx", "/api/mcp"] {
            assert_eq!(run("POST", path, &post_headers()), Err(404), "{path}");
        }
        assert_eq!(run("POST", "/mcp?session=1", &post_headers()), Ok(()));
        let refusal = check_head(
            &HttpConfig::default(),
            &RequestHead { method: "POST", path: "/x", headers: &post_headers() },
        )
        .unwrap_err();
        assert_eq!(refusal.body(), None);
        let mut cfg = HttpConfig::default();
        cfg.endpoint("/v1/rpc");
        let head = RequestHead { method: "POST", path: "/v1/rpc", headers: &post_headers() };
        assert!(check_head(&cfg, &head).is_ok());
    }

    #[test]
    fn host_rules() {
        let ok: [&'static [u8]; 9] = [
            b"localhost",
            b"localhost:3000",
            b"LOCALHOST:1",
            b"127.0.0.1",
            b"127.0.0.1:65535",
            b"[::1]",
            b"[::1]:8080",
            b"[0:0:0:0:0:0:0:1]:8080",
            b" localhost:80 ",
        ];
        for host in ok {
            assert_eq!(run("POST", "/mcp", &with(post_headers(), "Host", host)), Ok(()), "{host:?}");
        }
        let foreign: [&'static [u8]; 6] = [
            b"evil.example.com",
            b"evil.example.com:3000",
            b"localhost.",
            b"127.0.0.2",
            b"[::2]",
            b"0.0.0.0:80",
        ];
        for host in foreign {
            assert_eq!(run("POST", "/mcp", &with(post_headers(), "Host", host)), Err(403), "{host:?}");
        }
        let malformed: [&'static [u8]; 9] = [
            b"",
            b"localhost:",
            b"localhost:99999",
            b"localhost:80:80",
            b"::1",
            b"[::1",
            b"[::1]x",
            b"user@localhost",
            b"local\xffhost",
        ];
        for host in malformed {
            assert_eq!(run("POST", "/mcp", &with(post_headers(), "Host", host)), Err(400), "{host:?}");
        }
        assert_eq!(run("POST", "/mcp", &without(post_headers(), "host")), Err(400));
        let mut twice = post_headers();
        twice.push(("host", b"localhost"));
        assert_eq!(run("POST", "/mcp", &twice), Err(400));
    }

    #[test]
    fn configured_hosts() {
        let mut cfg = HttpConfig::default();
        cfg.clear_allowed_hosts().allow_host("mcp.example.com:443").allow_host("Api.Example.com:*");
        let check = |host: &'static [u8]| {
            let h = with(post_headers(), "Host", host);
            check_head(&cfg, &RequestHead { method: "POST", path: "/mcp", headers: &h })
                .map(|_| ())
                .map_err(|r| r.status)
        };
        assert_eq!(check(b"mcp.example.com:443"), Ok(()));
        assert_eq!(check(b"mcp.example.com"), Err(403));
        assert_eq!(check(b"mcp.example.com:8443"), Err(403));
        assert_eq!(check(b"api.example.com:1"), Ok(()));
        assert_eq!(check(b"localhost"), Err(403));
    }

    #[test]
    fn origin_rules() {
        let base = with(post_headers(), "Host", b"localhost:3000");
        // Absent: any non-browser client.
        assert_eq!(run("POST", "/mcp", &base), Ok(()));
        for same in [&b"http://localhost:3000"[..], b"https://LOCALHOST:3000", b" http://localhost:3000 "] {
            assert_eq!(run("POST", "/mcp", &with(base.clone(), "Origin", same)), Ok(()), "{same:?}");
        }
        let foreign: [&'static [u8]; 9] = [
            b"http://evil.example.com",
            b"http://localhost:3001",
            b"http://localhost",
            b"http://127.0.0.1:3000",
            b"null",
            b"http://localhost:3000/",
            b"localhost:3000",
            b"",
            b"http://localhost:3000\xff",
        ];
        for origin in foreign {
            assert_eq!(run("POST", "/mcp", &with(base.clone(), "Origin", origin)), Err(403), "{origin:?}");
        }
        let mut twice = with(base.clone(), "Origin", b"http://localhost:3000");
        twice.push(("origin", b"http://localhost:3000"));
        assert_eq!(run("POST", "/mcp", &twice), Err(403));

        // Default ports line up with a Host that has none.
        let bare = with(post_headers(), "Host", b"localhost");
        for same in [&b"http://localhost"[..], b"http://localhost:80", b"https://localhost:443"] {
            assert_eq!(run("POST", "/mcp", &with(bare.clone(), "Origin", same)), Ok(()), "{same:?}");
        }
        assert_eq!(run("POST", "/mcp", &with(bare.clone(), "Origin", b"http://localhost:8080")), Err(403));
        let v6 = with(post_headers(), "Host", b"[::1]:9");
        assert_eq!(run("POST", "/mcp", &with(v6.clone(), "Origin", b"http://[::1]:9")), Ok(()));
        assert_eq!(run("POST", "/mcp", &with(v6, "Origin", b"http://[::2]:9")), Err(403));

        // The conformance probe: foreign Host and Origin, then the same request done right.
        let evil =
            with(with(post_headers(), "Host", b"evil.example.com"), "Origin", b"http://evil.example.com");
        assert_eq!(run("POST", "/mcp", &evil), Err(403));
        let good = with(with(post_headers(), "Host", b"127.0.0.1:5555"), "Origin", b"http://127.0.0.1:5555");
        assert_eq!(run("POST", "/mcp", &good), Ok(()));
    }

    #[test]
    fn allow_listed_origins() {
        let mut cfg = HttpConfig::default();
        cfg.allow_origin("https://app.example.com").allow_origin("http://localhost:*").allow_origin("null");
        let check = |origin: &'static [u8]| {
            let h = with(post_headers(), "Origin", origin);
            check_head(&cfg, &RequestHead { method: "POST", path: "/mcp", headers: &h })
                .map(|_| ())
                .map_err(|r| r.status)
        };
        assert_eq!(check(b"https://app.example.com"), Ok(()));
        assert_eq!(check(b"https://APP.example.com:443"), Ok(()));
        assert_eq!(check(b"http://app.example.com"), Err(403));
        assert_eq!(check(b"https://app.example.com:8443"), Err(403));
        assert_eq!(check(b"http://localhost:6274"), Ok(()));
        assert_eq!(check(b"https://localhost:6274"), Err(403));
        assert_eq!(check(b"null"), Ok(()));
    }

    #[test]
    fn methods_405_with_allow() {
        for method in ["PUT", "PATCH", "HEAD", "OPTIONS", "post", "CONNECT"] {
            let head = RequestHead { method, path: "/mcp", headers: &post_headers() };
            let refusal = check_head(&HttpConfig::default(), &head).unwrap_err();
            assert_eq!(refusal.status, 405, "{method}");
            assert_eq!(refusal.headers, vec![("Allow", "GET, POST, DELETE".to_owned())]);
            assert_eq!(
                String::from_utf8(refusal.body().unwrap()).unwrap(),
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"method not allowed"}}"#
            );
        }
        let delete = [("Host", &b"localhost"[..]), ("Mcp-Session-Id", b"s1")];
        let head = RequestHead { method: "DELETE", path: "/mcp", headers: &delete };
        assert_eq!(
            check_head(&HttpConfig::default(), &head).unwrap(),
            Route::Delete { headers: RouteHeaders { session_id: Some("s1"), protocol_version: None } }
        );
    }

    #[test]
    fn content_type_415() {
        let ok: [&'static [u8]; 7] = [
            b"application/json",
            b"Application/JSON",
            b"application/json; charset=utf-8",
            b"application/json;charset=\"UTF-8\"",
            b"application/json ; foo=bar;",
            b"application/vnd.example+json",
            b"application/json-rpc+json; charset=utf8",
        ];
        for ct in ok {
            assert_eq!(run("POST", "/mcp", &with(post_headers(), "Content-Type", ct)), Ok(()), "{ct:?}");
        }
        let bad: [&'static [u8]; 10] = [
            b"text/plain",
            b"application/x-www-form-urlencoded",
            b"application/jsonx",
            b"application/+json",
            b"text/json",
            b"application/json; charset=latin1",
            b"application/json; charset",
            b"application",
            b"",
            b"application/json; q=\"unterminated",
        ];
        for ct in bad {
            assert_eq!(run("POST", "/mcp", &with(post_headers(), "Content-Type", ct)), Err(415), "{ct:?}");
        }
        assert_eq!(run("POST", "/mcp", &without(post_headers(), "content-type")), Err(415));
        let mut twice = post_headers();
        twice.push(("content-type", b"application/json"));
        assert_eq!(run("POST", "/mcp", &twice), Err(400));
    }

    #[test]
    fn accept_406_and_what_is_accepted() {
        let accepts = |accept: Option<&'static [u8]>| {
            let h = match accept {
                Some(a) => with(post_headers(), "Accept", a),
                None => without(post_headers(), "Accept"),
            };
            match check_head(
                &HttpConfig::default(),
                &RequestHead { method: "POST", path: "/mcp", headers: &h },
            ) {
                Ok(Route::Post { accepts, .. }) => Ok((accepts.json, accepts.sse)),
                Ok(other) => panic!("{other:?}"),
                Err(r) => Err(r.status),
            }
        };
        assert_eq!(accepts(None), Ok((true, true)));
        assert_eq!(accepts(Some(b"application/json, text/event-stream")), Ok((true, true)));
        assert_eq!(accepts(Some(b"application/json")), Ok((true, false)));
        assert_eq!(accepts(Some(b"text/event-stream")), Ok((false, true)));
        assert_eq!(accepts(Some(b"*/*")), Ok((true, true)));
        assert_eq!(accepts(Some(b"application/*;q=0.5")), Ok((true, false)));
        assert_eq!(accepts(Some(b"TEXT/*")), Ok((false, true)));
        assert_eq!(accepts(Some(b"text/html, application/json;q=1.0")), Ok((true, false)));
        assert_eq!(accepts(Some(b"text/html")), Err(406));
        assert_eq!(accepts(Some(b"application/xml, text/plain")), Err(406));
        assert_eq!(accepts(Some(b"application/json;q=0, text/event-stream;q=0.000")), Err(406));
        assert_eq!(accepts(Some(b"application/json;q=2")), Err(406));
        assert_eq!(accepts(Some(b"")), Err(406));
        assert_eq!(accepts(Some(b"application/json;x=\"a,b\", text/html")), Ok((true, false)));
        // Repeated Accept headers combine.
        let mut two = without(post_headers(), "Accept");
        two.push(("accept", b"application/json"));
        two.push(("Accept", b"text/event-stream"));
        let head = RequestHead { method: "POST", path: "/mcp", headers: &two };
        assert!(matches!(
            check_head(&HttpConfig::default(), &head),
            Ok(Route::Post { accepts: Accepts { json: true, sse: true, prefers_sse: false }, .. })
        ));
    }

    #[test]
    fn content_length_413_and_body_bound() {
        let mut cfg = HttpConfig::default();
        cfg.max_body_bytes(100);
        let check = |len: &'static [u8]| {
            let h = with(post_headers(), "Content-Length", len);
            check_head(&cfg, &RequestHead { method: "POST", path: "/mcp", headers: &h })
                .map(|_| ())
                .map_err(|r| r.status)
        };
        assert_eq!(check(b"100"), Ok(()));
        assert_eq!(check(b"101"), Err(413));
        assert_eq!(check(b"99999999999999999999999"), Err(400));
        assert_eq!(check(b"12, 12"), Ok(()));
        assert_eq!(check(b"12, 13"), Err(400));
        assert_eq!(check(b"-1"), Err(400));
        assert_eq!(check(b""), Err(400));
        assert!(check_body_len(&cfg, 100).is_ok());
        assert_eq!(check_body_len(&cfg, 101).unwrap_err().status, 413);
    }

    #[test]
    fn session_and_version_headers_400() {
        let long: &'static [u8] = Box::leak(vec![b'a'; 129].into_boxed_slice());
        let longest: &'static [u8] = Box::leak(vec![b'~'; 128].into_boxed_slice());
        assert_eq!(run("POST", "/mcp", &with(post_headers(), "Mcp-Session-Id", longest)), Ok(()));
        for bad in [long, b"", b"has space", b"tab\there", b"caf\xc3\xa9", b"nul\0"] {
            assert_eq!(
                run("POST", "/mcp", &with(post_headers(), "Mcp-Session-Id", bad)),
                Err(400),
                "{bad:?}"
            );
            assert_eq!(
                run("DELETE", "/mcp", &with(post_headers(), "Mcp-Session-Id", bad)),
                Err(400),
                "{bad:?}"
            );
        }
        let mut twice = with(post_headers(), "Mcp-Session-Id", b"a");
        twice.push(("mcp-session-id", b"b"));
        assert_eq!(run("POST", "/mcp", &twice), Err(400));
        assert_eq!(run("POST", "/mcp", &with(post_headers(), "MCP-Protocol-Version", b"v999.0.0")), Ok(()));
        assert_eq!(
            run("POST", "/mcp", &with(post_headers(), "MCP-Protocol-Version", b"2025 06 18")),
            Err(400)
        );
        assert_eq!(run("POST", "/mcp", &with(post_headers(), "MCP-Protocol-Version", b"  ")), Err(400));
        assert!(is_valid_session_id("0123-abcd"));
        assert!(!is_valid_session_id(""));
    }

    #[test]
    fn get_needs_sse_and_carries_last_event_id() {
        let base: Headers = vec![("Host", b"localhost"), ("Accept", b"text/event-stream")];
        let head = RequestHead { method: "GET", path: "/mcp", headers: &base };
        assert_eq!(
            check_head(&HttpConfig::default(), &head).unwrap(),
            Route::Get {
                headers: RouteHeaders { session_id: None, protocol_version: None },
                last_event_id: None
            }
        );
        let resumed = with(base.clone(), "Last-Event-ID", b" 3-17 ");
        let head = RequestHead { method: "GET", path: "/mcp", headers: &resumed };
        assert!(matches!(
            check_head(&HttpConfig::default(), &head),
            Ok(Route::Get { last_event_id: Some("3-17"), .. })
        ));
        let empty = with(base.clone(), "Last-Event-ID", b"");
        let head = RequestHead { method: "GET", path: "/mcp", headers: &empty };
        assert!(matches!(
            check_head(&HttpConfig::default(), &head),
            Ok(Route::Get { last_event_id: None, .. })
        ));
        assert_eq!(run("GET", "/mcp", &with(base.clone(), "Last-Event-ID", b"a\x01b")), Err(400));
        assert_eq!(run("GET", "/mcp", &with(base.clone(), "Accept", b"*/*")), Ok(()));
        assert_eq!(run("GET", "/mcp", &with(base.clone(), "Accept", b"application/json")), Err(406));
        assert_eq!(run("GET", "/mcp", &without(base.clone(), "Accept")), Err(406));
        // GET needs no Content-Type.
        assert_eq!(run("GET", "/mcp", &base), Ok(()));
    }

    #[test]
    fn refusal_bodies() {
        let head =
            RequestHead { method: "POST", path: "/mcp", headers: &without(post_headers(), "content-type") };
        let refusal = check_head(&HttpConfig::default(), &head).unwrap_err();
        assert_eq!(refusal.to_string(), "415 Content-Type must be application/json");
        let body: Value = serde_json::from_slice(&refusal.body().unwrap()).unwrap();
        assert_eq!(body["id"], Value::Null);
        assert_eq!(body["error"]["code"], -32600);
    }

    #[test]
    fn peers() {
        let cfg = HttpConfig::default();
        assert!(check_peer(&cfg, "127.0.0.1".parse().unwrap()).is_ok());
        assert!(check_peer(&cfg, "127.8.9.10".parse().unwrap()).is_ok());
        assert!(check_peer(&cfg, "::1".parse().unwrap()).is_ok());
        assert!(check_peer(&cfg, "::ffff:127.0.0.1".parse().unwrap()).is_ok());
        assert_eq!(check_peer(&cfg, "192.168.1.2".parse().unwrap()).unwrap_err().status, 403);
        assert_eq!(check_peer(&cfg, "::ffff:10.0.0.1".parse().unwrap()).unwrap_err().status, 403);
        let mut open = HttpConfig::default();
        open.loopback_only(false);
        assert!(check_peer(&open, "192.168.1.2".parse().unwrap()).is_ok());
    }

    #[test]
    fn status_codes_for_errors() {
        assert_eq!(status_for_error(-32601), 404);
        for code in [-32602, -32020, -32021, -32022, -32600, -32700] {
            assert_eq!(status_for_error(code), 400, "{code}");
        }
        for code in [-32603, -32002, -32042, 1, 0] {
            assert_eq!(status_for_error(code), 200, "{code}");
        }
    }

    #[test]
    fn header_values_decode() {
        // CONTRACT.md §9.8 and the SEP-2243 examples.
        assert_eq!(decode_header_value(b"=?base64?SGVsbG8=?=").unwrap(), "Hello");
        assert_eq!(decode_header_value(b"=?base64?SGVsbG8?=").unwrap_err(), HeaderError::Base64);
        assert_eq!(decode_header_value(b"=?base64?SGVs!!!bG8=?=").unwrap_err(), HeaderError::Base64);
        assert_eq!(decode_header_value(b"=?base64?SGVsbG8==?=").unwrap_err(), HeaderError::Base64);
        assert_eq!(decode_header_value(b"=?base64?SGVs bG8=?=").unwrap_err(), HeaderError::Base64);
        assert_eq!(decode_header_value(b"=?base64?SGVsbG8sIOS4lueVjA==?=").unwrap(), "Hello, 世界");
        assert_eq!(decode_header_value(b"=?base64?IHBhZGRlZCA=?=").unwrap(), " padded ");
        assert_eq!(decode_header_value(b"=?base64?bGluZTEKbGluZTI=?=").unwrap(), "line1\nline2");
        assert_eq!(
            decode_header_value(b"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=").unwrap(),
            "=?base64?literal?="
        );
        assert_eq!(decode_header_value(b"=?base64??=").unwrap(), "");
        assert_eq!(decode_header_value(b"=?base64?/w==?=").unwrap_err(), HeaderError::Utf8);
        // Missing the prefix or the suffix: a literal.
        assert_eq!(decode_header_value(b"=?base64?SGVsbG8=").unwrap(), "=?base64?SGVsbG8=");
        assert_eq!(decode_header_value(b"SGVsbG8=?=").unwrap(), "SGVsbG8=?=");
        assert_eq!(decode_header_value(b"=?BASE64?SGVsbG8=?=").unwrap(), "=?BASE64?SGVsbG8=?=");
        assert_eq!(decode_header_value(b"=?base64?=").unwrap(), "=?base64?=");
        // Plain values: trimmed, printable ASCII only.
        assert_eq!(decode_header_value(b"  us-west1\t").unwrap(), "us-west1");
        assert_eq!(decode_header_value(b"a b").unwrap(), "a b");
        assert_eq!(decode_header_value(b"").unwrap(), "");
        assert_eq!(decode_header_value(b"a\tb").unwrap_err(), HeaderError::InvalidChar);
        assert_eq!(decode_header_value(b"a\x7fb").unwrap_err(), HeaderError::InvalidChar);
        assert_eq!(decode_header_value("café".as_bytes()).unwrap_err(), HeaderError::InvalidChar);
        // Padding around an encoded value is trimmed, the encoded value itself is exact.
        assert_eq!(decode_header_value(b" =?base64?IHBhZGRlZCA=?= ").unwrap(), " padded ");
    }

    fn modern(extra: &[(&'static str, &'static [u8])]) -> Headers {
        let mut h: Headers = vec![("MCP-Protocol-Version", b"2026-07-28")];
        h.extend_from_slice(extra);
        h
    }

    fn check(
        h: &Headers,
        method: &str,
        name: Option<&str>,
        custom: &[(String, HeaderExpect)],
    ) -> Result<(), String> {
        let head = RequestHead { method: "POST", path: "/mcp", headers: h };
        check_modern_headers(&head, method, name, "2026-07-28", custom).map_err(|m| m.header)
    }

    #[test]
    fn standard_modern_headers() {
        let list = modern(&[("Mcp-Method", b"tools/list")]);
        assert_eq!(check(&list, "tools/list", None, &[]), Ok(()));
        // Names in any case.
        let lower = vec![("mcp-protocol-version", &b"2026-07-28"[..]), ("MCP-METHOD", b"tools/list")];
        assert_eq!(check(&lower, "tools/list", None, &[]), Ok(()));
        // Values are case-sensitive; a different or missing method mismatches.
        assert_eq!(
            check(&modern(&[("Mcp-Method", b"TOOLS/LIST")]), "tools/list", None, &[]),
            Err("Mcp-Method".into())
        );
        assert_eq!(
            check(&modern(&[("Mcp-Method", b"prompts/list")]), "tools/list", None, &[]),
            Err("Mcp-Method".into())
        );
        assert_eq!(check(&modern(&[]), "tools/list", None, &[]), Err("Mcp-Method".into()));
        // Version: missing, different, or from the body's _meta.
        assert_eq!(
            check(&vec![("Mcp-Method", &b"tools/list"[..])], "tools/list", None, &[]),
            Err("MCP-Protocol-Version".into())
        );
        let head = RequestHead { method: "POST", path: "/mcp", headers: &list };
        let mismatch = check_modern_headers(&head, "tools/list", None, "v999.0.0", &[]).unwrap_err();
        assert_eq!(mismatch.header, "MCP-Protocol-Version");
        let err = mismatch.rpc_error();
        assert_eq!(err.code.code(), -32020);
        assert_eq!(err.data, Some(json!({"header": "MCP-Protocol-Version"})));
        assert_eq!(HeaderMismatch::STATUS, 400);
        // Repeated headers mismatch.
        let twice = modern(&[("Mcp-Method", b"tools/list"), ("mcp-method", b"tools/list")]);
        assert_eq!(check(&twice, "tools/list", None, &[]), Err("Mcp-Method".into()));
    }

    #[test]
    fn mcp_name() {
        let call = |name: &'static [u8]| modern(&[("Mcp-Method", b"tools/call"), ("Mcp-Name", name)]);
        assert_eq!(check(&call(b"echo"), "tools/call", Some("echo"), &[]), Ok(()));
        assert_eq!(check(&call(b"  echo  "), "tools/call", Some("echo"), &[]), Ok(()));
        assert_eq!(check(&call(b"=?base64?ZWNobw==?="), "tools/call", Some("echo"), &[]), Ok(()));
        assert_eq!(check(&call(b"Echo"), "tools/call", Some("echo"), &[]), Err("Mcp-Name".into()));
        assert_eq!(check(&call(b"echo"), "tools/call", None, &[]), Err("Mcp-Name".into()));
        assert_eq!(
            check(&call(b"=?base64?ZWNobw?="), "tools/call", Some("echo"), &[]),
            Err("Mcp-Name".into())
        );
        let missing = modern(&[("Mcp-Method", b"tools/call")]);
        assert_eq!(check(&missing, "tools/call", Some("echo"), &[]), Err("Mcp-Name".into()));
        let read = modern(&[("Mcp-Method", b"resources/read"), ("Mcp-Name", b"test://static-text")]);
        assert_eq!(check(&read, "resources/read", Some("test://static-text"), &[]), Ok(()));
        let prompt = modern(&[("Mcp-Method", b"prompts/get")]);
        assert_eq!(check(&prompt, "prompts/get", Some("p"), &[]), Err("Mcp-Name".into()));
        // Methods without a name ignore a stray Mcp-Name.
        let stray = modern(&[("Mcp-Method", b"tools/list"), ("Mcp-Name", b"x")]);
        assert_eq!(check(&stray, "tools/list", None, &[]), Ok(()));
        assert_eq!(name_param("tools/call"), Some("name"));
        assert_eq!(name_param("resources/read"), Some("uri"));
        assert_eq!(name_param("tasks/get"), Some("taskId"));
        assert_eq!(name_param("tools/list"), None);
    }

    fn call_with(params: &[(&'static str, &'static [u8])]) -> Headers {
        let mut h = modern(&[("Mcp-Method", b"tools/call"), ("Mcp-Name", b"t")]);
        h.extend_from_slice(params);
        h
    }

    #[test]
    fn custom_param_headers() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry"},
            "query": {"type": "string"}
        }});
        let params = x_mcp_headers(&schema).unwrap();
        let args = json!({"region": "us-west1", "limit": 7, "dry": false, "query": "x"});
        let custom = header_expectations(&params, Some(&args));
        assert_eq!(custom[0], ("Mcp-Param-Region".to_owned(), HeaderExpect::Text("us-west1".into())));
        let good = call_with(&[
            ("mcp-param-region", b"us-west1"),
            ("Mcp-Param-Limit", b"007"),
            ("Mcp-Param-Dry", b"false"),
        ]);
        assert_eq!(check(&good, "tools/call", Some("t"), &custom), Ok(()));
        let cases: [(&'static str, &'static [u8]); 6] = [
            ("Mcp-Param-Region", b"us-east1"),
            ("Mcp-Param-Region", b"US-WEST1"),
            ("Mcp-Param-Limit", b"8"),
            ("Mcp-Param-Limit", b"7.0"),
            ("Mcp-Param-Dry", b"False"),
            ("Mcp-Param-Region", b"=?base64?SGVsbG8?="),
        ];
        for (name, value) in cases {
            let mut h = good.clone();
            h.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            h.push((name, value));
            assert_eq!(
                check(&h, "tools/call", Some("t"), &custom),
                Err(name.to_owned()),
                "{name}: {value:?}"
            );
        }
        // A value in the body whose header is missing.
        let missing = call_with(&[("Mcp-Param-Limit", b"7"), ("Mcp-Param-Dry", b"false")]);
        assert_eq!(check(&missing, "tools/call", Some("t"), &custom), Err("Mcp-Param-Region".into()));
        // Base64 values decode before comparing.
        let args = json!({"region": "Hello, 世界", "limit": -0, "dry": true});
        let custom = header_expectations(&params, Some(&args));
        let encoded = call_with(&[
            ("Mcp-Param-Region", b"=?base64?SGVsbG8sIOS4lueVjA==?="),
            ("Mcp-Param-Limit", b"0"),
            ("Mcp-Param-Dry", b"true"),
        ]);
        assert_eq!(check(&encoded, "tools/call", Some("t"), &custom), Ok(()));
        // Absent and null arguments expect no header; a header for one mismatches.
        let args = json!({"region": null});
        let custom = header_expectations(&params, Some(&args));
        assert!(custom.iter().all(|(_, e)| *e == HeaderExpect::Absent));
        assert_eq!(check(&call_with(&[]), "tools/call", Some("t"), &custom), Ok(()));
        let extra = call_with(&[("Mcp-Param-Dry", b"true")]);
        assert_eq!(check(&extra, "tools/call", Some("t"), &custom), Err("Mcp-Param-Dry".into()));
        // Headers nobody declared are ignored.
        let unknown = call_with(&[("Mcp-Param-Other", b"\xff")]);
        assert_eq!(check(&unknown, "tools/call", Some("t"), &custom), Ok(()));
    }

    #[test]
    fn integers_compare_numerically() {
        let want = |v: Value| HeaderExpect::from_value(Some(&v));
        assert_eq!(want(json!(7)), HeaderExpect::Integer("7".into()));
        let n = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        assert_eq!(want(n("-0")), HeaderExpect::Integer("0".into()));
        assert_eq!(want(n("7.0")), HeaderExpect::Integer("7".into()));
        assert_eq!(want(n("1.50e1")), HeaderExpect::Integer("15".into()));
        assert_eq!(want(n("1e2")), HeaderExpect::Integer("100".into()));
        assert_eq!(want(n("1500e-2")), HeaderExpect::Integer("15".into()));
        assert_eq!(want(n("0.0e-5")), HeaderExpect::Integer("0".into()));
        assert_eq!(
            want(n("123456789012345678901234567890")),
            HeaderExpect::Integer("123456789012345678901234567890".into())
        );
        assert_eq!(want(n("1.5")), HeaderExpect::Text("1.5".into()));
        assert_eq!(want(n("15e-1")), HeaderExpect::Text("15e-1".into()));
        // Too many digits to compare numerically: compared as the number's text.
        assert!(matches!(want(n("1e1000000000")), HeaderExpect::Text(_)));
        assert!(matches!(want(n("1e-1000000000")), HeaderExpect::Text(_)));
        assert_eq!(want(json!([1])), HeaderExpect::Text("[1]".into()));
        assert_eq!(header_integer("-007"), Some("-7".into()));
        assert_eq!(header_integer("+7"), None);
        assert_eq!(header_integer("1e2"), None);
        assert_eq!(header_integer("-"), None);
        let h = call_with(&[("Mcp-Param-N", b"123456789012345678901234567890")]);
        let custom = [("Mcp-Param-N".to_owned(), want(n("123456789012345678901234567890")))];
        assert_eq!(check(&h, "tools/call", Some("t"), &custom), Ok(()));
    }

    #[test]
    fn x_mcp_header_annotations() {
        let nested = json!({"type": "object", "properties": {
            "options": {"type": "object", "properties": {
                "limit": {"type": ["integer", "null"], "x-mcp-header": "Limit"}
            }},
            "tenant": {"type": "string", "x-mcp-header": "Tenant-Id"},
            "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Ignored"}},
            "choice": {"anyOf": [{"type": "string", "x-mcp-header": "AlsoIgnored"}]}
        }, "$defs": {"x": {"type": "string", "x-mcp-header": "Ignored3"}}});
        let params = x_mcp_headers(&nested).unwrap();
        assert_eq!(
            params,
            vec![
                HeaderParam { name: "Tenant-Id".into(), kind: Kind::String, path: vec!["tenant".into()] },
                HeaderParam {
                    name: "Limit".into(),
                    kind: Kind::Integer,
                    path: vec!["options".into(), "limit".into()]
                },
            ]
        );
        assert_eq!(params[1].header_name(), "Mcp-Param-Limit");
        assert_eq!(
            params[1].expect(Some(&json!({"options": {"limit": 3}}))),
            HeaderExpect::Integer("3".into())
        );
        assert_eq!(params[1].expect(Some(&json!({"options": null}))), HeaderExpect::Absent);
        assert_eq!(params[1].expect(None), HeaderExpect::Absent);
        assert_eq!(x_mcp_headers(&json!({"type": "object"})).unwrap(), vec![]);

        let refused = [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": ["string", "integer"], "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "Has Space"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "Bad\r\nX: y"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": 5}}}),
            json!({"properties": {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "b": {"type": "object", "properties": {"c": {"type": "boolean", "x-mcp-header": "REGION"}}}
            }}),
        ];
        for schema in refused {
            assert!(x_mcp_headers(&schema).is_err(), "{schema}");
        }
    }
}
