//! The request-head checks of [`check_head`]: path, `Host`, `Origin`, method, media types,
//! `Content-Length` and the MCP route headers.

use std::borrow::Cow;
use std::net::Ipv6Addr;

use crate::limits::Limits;

use super::{
    is_tchar, is_valid_session_id, is_visible, trim_ows, Accepts, HttpConfig, HttpRefusal, RefusalKind,
    RequestHead, Route, RouteHeaders, ALLOWED_METHODS, LAST_EVENT_ID_HEADER, PROTOCOL_VERSION_HEADER,
    SESSION_ID_HEADER,
};

/// Applies the transport rules to a request head; see the [module docs](super) for the order.
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
///
/// `limits` gives the size bounds: [`Limits::max_head_bytes`] for the head and
/// [`Limits::max_frame_bytes`] for a declared body (a body is one frame).
pub fn check_head<'a>(
    cfg: &HttpConfig,
    limits: &Limits,
    head: &RequestHead<'a>,
) -> Result<Route<'a>, HttpRefusal> {
    if head.encoded_len() > limits.head_bytes() {
        return Err(HttpRefusal::new(RefusalKind::HeadTooLarge, "request head too large"));
    }
    check_transfer_coding(head)?;
    let (authority, target) = split_target(head.path);
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    if path != cfg.endpoint {
        return Err(HttpRefusal::new(RefusalKind::NotFound, "not found"));
    }
    let host = check_host(cfg, head, authority)?;
    check_origin(cfg, head, host)?;
    match head.method {
        "POST" => {
            check_content_type(head)?;
            let accepts = match accept_of(head) {
                None => Accepts { json: true, sse: true, prefers_sse: false },
                Some(a) if a.json || a.sse => a,
                Some(_) => {
                    return Err(HttpRefusal::new(
                        RefusalKind::NotAcceptable,
                        "Accept must include application/json or text/event-stream",
                    ))
                }
            };
            check_content_length(limits, head)?;
            Ok(Route::Post { headers: route_headers(head)?, accepts })
        }
        "GET" => {
            if !accept_of(head).is_some_and(|a| a.sse) {
                return Err(HttpRefusal::new(
                    RefusalKind::NotAcceptable,
                    "Accept must include text/event-stream",
                ));
            }
            let headers = route_headers(head)?;
            let last_event_id = match single(head, LAST_EVENT_ID_HEADER, "repeated Last-Event-ID header")? {
                None => None,
                Some(raw) => {
                    let text = std::str::from_utf8(trim_ows(raw))
                        .ok()
                        .filter(|t| t.chars().all(|c| !c.is_control()))
                        .ok_or(HttpRefusal::new(RefusalKind::Malformed, "malformed Last-Event-ID header"))?;
                    Some(text).filter(|t| !t.is_empty())
                }
            };
            Ok(Route::Get { headers, last_event_id })
        }
        "DELETE" => Ok(Route::Delete { headers: route_headers(head)? }),
        _ => {
            let mut refusal = HttpRefusal::new(RefusalKind::MethodNotAllowed, "method not allowed");
            refusal.headers.push(("Allow", ALLOWED_METHODS.to_owned()));
            Err(refusal)
        }
    }
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
        return Err(HttpRefusal::new(RefusalKind::Malformed, repeated));
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
                .ok_or(HttpRefusal::new(RefusalKind::Malformed, "malformed Mcp-Session-Id header"))?,
        ),
    };
    let protocol_version =
        match single(head, PROTOCOL_VERSION_HEADER, "repeated MCP-Protocol-Version header")? {
            None => None,
            Some(raw) => Some(
                std::str::from_utf8(trim_ows(raw))
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(is_visible))
                    .ok_or(HttpRefusal::new(
                        RefusalKind::Malformed,
                        "malformed MCP-Protocol-Version header",
                    ))?,
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

/// The authority of an absolute-form request target (`http://host:port/path`), and the rest
/// (the path and query, `/` when empty); an origin-form target (`/path`) has no authority.
pub(super) fn split_target(target: &str) -> (Option<&str>, &str) {
    let rest = match target.get(..8) {
        Some(p) if p.eq_ignore_ascii_case("https://") => target.get(8..),
        _ => match target.get(..7) {
            Some(p) if p.eq_ignore_ascii_case("http://") => target.get(7..),
            _ => None,
        },
    };
    match rest {
        None => (None, target),
        Some(rest) => match rest.find(['/', '?']) {
            Some(i) => {
                (rest.get(..i), rest.get(i..).map_or("/", |p| if p.starts_with('?') { "/" } else { p }))
            }
            None => (Some(rest), "/"),
        },
    }
}

/// RFC 9112 §6.1: a request whose transfer codings are anything but `chunked` (alone, and
/// last) cannot be read: 501, rather than handing the engine a body still encoded.
fn check_transfer_coding(head: &RequestHead<'_>) -> Result<(), HttpRefusal> {
    for raw in head.header_values("transfer-encoding") {
        let only_chunked = ascii_text(raw).is_some_and(|t| {
            t.split(',').map(str::trim).filter(|c| !c.is_empty()).all(|c| c.eq_ignore_ascii_case("chunked"))
        });
        if !only_chunked {
            return Err(HttpRefusal::new(RefusalKind::NotImplemented, "transfer coding not implemented"));
        }
    }
    Ok(())
}

/// The host the request is for: the authority of an absolute-form target when there is one
/// (RFC 9112 §3.2.2: the Host header is then ignored), else the Host header.
fn check_host<'a>(
    cfg: &HttpConfig,
    head: &RequestHead<'a>,
    authority: Option<&'a str>,
) -> Result<(HostName<'a>, Port), HttpRefusal> {
    let host_header = single(head, "host", "repeated Host header")?;
    let raw = match authority {
        Some(authority) => authority.as_bytes(),
        None => host_header.ok_or(HttpRefusal::new(RefusalKind::Malformed, "missing Host header"))?,
    };
    let (host, port) = ascii_text(raw)
        .and_then(|t| parse_authority(t, false))
        .ok_or(HttpRefusal::new(RefusalKind::Malformed, "malformed Host header"))?;
    // An entry without a port (or with `:*`) admits any port; one with a port, only that port.
    let allowed = cfg
        .allowed_hosts
        .iter()
        .filter_map(|entry| parse_authority(entry, true))
        .any(|(h, p)| h.matches(host) && (matches!(p, Port::Absent | Port::Any) || p == port));
    if !allowed {
        return Err(HttpRefusal::new(RefusalKind::Forbidden, "Host not allowed"));
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
    let foreign = || HttpRefusal::new(RefusalKind::Forbidden, "Origin not allowed");
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
    /// Parameter names as written, values unquoted (borrowed unless they held an escape).
    params: Vec<(&'a str, Cow<'a, str>)>,
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
fn take_quoted(s: &str) -> Option<(Cow<'_, str>, &str)> {
    let body = s.strip_prefix('"')?;
    // Most values hold no escape: they are borrowed as they are.
    let mut out: Option<String> = None;
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                let value = match out {
                    Some(owned) => Cow::Owned(owned),
                    None => Cow::Borrowed(body.get(..i)?),
                };
                return Some((value, body.get(i + 1..)?));
            }
            '\\' => {
                let escaped = chars.next()?.1;
                out.get_or_insert_with(|| body.get(..i).unwrap_or_default().to_owned()).push(escaped);
            }
            c if c == '\t' || (' '..='~').contains(&c) => {
                if let Some(owned) = &mut out {
                    owned.push(c);
                }
            }
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
            (Cow::Borrowed(v), after)
        };
        params.push((name, value));
        rest = after;
    }
}

/// Splits a list header on the commas outside quoted strings. The predicate sees each char
/// once, in order, as a forward `split` visits them, so it can follow the quoting.
fn split_list(s: &str) -> impl Iterator<Item = &str> {
    let (mut quoted, mut escaped) = (false, false);
    s.split(move |c: char| {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' => return !quoted,
            _ => {}
        }
        false
    })
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

/// The `Accept` values clients send most, each with what [`accepts_of`] makes of it: a head
/// is checked for every request, and these need no parsing.
const COMMON_ACCEPTS: [(&[u8], Accepts); 4] = [
    (b"application/json, text/event-stream", Accepts { json: true, sse: true, prefers_sse: false }),
    (b"text/event-stream, application/json", Accepts { json: true, sse: true, prefers_sse: true }),
    (b"application/json", Accepts { json: true, sse: false, prefers_sse: false }),
    (b"text/event-stream", Accepts { json: false, sse: true, prefers_sse: true }),
];

/// The kinds every `Accept` value admits together, or `None` when there is no `Accept` header.
/// Malformed elements and elements with `q=0` admit nothing.
fn accept_of(head: &RequestHead<'_>) -> Option<Accepts> {
    let mut values = head.header_values("accept");
    if let (Some(only), None) = (values.next(), values.next()) {
        if let Some((_, common)) = COMMON_ACCEPTS.iter().find(|(text, _)| *text == only) {
            return Some(*common);
        }
    }
    accepts_of(head.header_values("accept"))
}

/// [`accept_of`] the long way: every element of every value parsed.
fn accepts_of<'a>(values: impl Iterator<Item = &'a [u8]>) -> Option<Accepts> {
    let mut seen = false;
    let mut acc = Accepts { json: false, sse: false, prefers_sse: false };
    let mut named_first = None;
    for raw in values {
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
    let unsupported =
        || HttpRefusal::new(RefusalKind::UnsupportedMediaType, "Content-Type must be application/json");
    let raw = single(head, "content-type", "repeated Content-Type header")?.ok_or_else(unsupported)?;
    // What nearly every client sends, accepted without parsing.
    if raw == b"application/json" {
        return Ok(());
    }
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

fn check_content_length(limits: &Limits, head: &RequestHead<'_>) -> Result<(), HttpRefusal> {
    let mut length: Option<u64> = None;
    for raw in head.header_values("content-length") {
        // A list ("5, 5") or repeated identical values are one length (RFC 9110 §8.6).
        let text = ascii_text(raw)
            .ok_or(HttpRefusal::new(RefusalKind::Malformed, "malformed Content-Length header"))?;
        for part in split_list(text) {
            let part = part.trim_matches([' ', '\t']);
            let n = Some(part)
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse::<u64>().ok())
                .ok_or(HttpRefusal::new(RefusalKind::Malformed, "malformed Content-Length header"))?;
            if length.is_some_and(|l| l != n) {
                return Err(HttpRefusal::new(RefusalKind::Malformed, "malformed Content-Length header"));
            }
            length = Some(n);
        }
    }
    match length {
        Some(n) if n > u64::try_from(limits.frame_bytes()).unwrap_or(u64::MAX) => {
            Err(HttpRefusal::new(RefusalKind::BodyTooLarge, "request body too large"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_accept_values_read_as_parsing_them_does() {
        for (text, common) in COMMON_ACCEPTS {
            assert_eq!(accepts_of([text].into_iter()), Some(common), "{:?}", String::from_utf8_lossy(text));
        }
    }
}
