//! The request head a call arrived with, kept for the application's code to read.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use super::RequestHead;

/// The HTTP request a call (or a held stream) arrived on, as the application's handlers and
/// gates see it: method, target, every header line and the connection's peer.
///
/// A shim puts one in [`Caller::http`](crate::Caller::http) for each HTTP request, so a tool
/// can forward the caller's cookies to a backend, or read the `Host` the caller reached, the
/// way an HTTP handler would. It is read-only, and bounded: the head passed
/// [`check_head`](super::check_head) first, so its header lines total at most
/// [`Limits::max_head_bytes`](crate::Limits::max_head_bytes) (8 KiB by default; a larger head
/// is refused 431 before any handler runs). Over stdio there is none.
///
/// A server that verifies bearer tokens itself (the `auth` feature of `mcp-server`) removes
/// `Authorization` and `DPoP` before handlers see the head: that token was issued for this
/// server, and the MCP authorization spec forbids passing it through to another service
/// (Security Best Practices, "Token Passthrough"). `Debug` prints header names, never values.
#[derive(Clone, Default)]
pub struct HttpRequestHead {
    /// The method, the target, then each header line's lowercased name and value, back to
    /// back: one allocation for the whole head rather than two per line, since a head is made
    /// for every request. Bytes of removed lines stay (bounded by the head's size).
    text: Vec<u8>,
    /// Where the method ends in `text`, then where the target ends.
    method_end: usize,
    target_end: usize,
    /// The header lines, in order: spans of `text`.
    lines: Vec<Line>,
    peer: Option<SocketAddr>,
    /// [`peer_certificates`](Self::peer_certificates), shared by the connection's requests.
    certificates: Option<Arc<[Vec<u8>]>>,
}

/// One header line of an [`HttpRequestHead`]: its name is `text[start..value]`, its value
/// `text[value..end]`.
#[derive(Clone, Copy)]
struct Line {
    start: usize,
    value: usize,
    end: usize,
}

impl HttpRequestHead {
    /// A head with no header lines: `target` is the request target as received (a path with
    /// its query, or the absolute form), `peer` the address the connection came from.
    pub fn new(method: impl Into<String>, target: impl Into<String>, peer: Option<SocketAddr>) -> Self {
        let (method, target) = (method.into(), target.into());
        Self::with_room(&method, &target, peer, 0, 0)
    }

    /// A head of `method` and `target` with no header lines yet, and room for `lines` of them
    /// totalling `bytes` bytes (names and values), so that adding them with
    /// [`with_header`](Self::with_header) allocates nothing more: a shim copies its HTTP
    /// library's header map this way, leaving out what handlers must not see.
    pub fn with_room(
        method: &str,
        target: &str,
        peer: Option<SocketAddr>,
        lines: usize,
        bytes: usize,
    ) -> Self {
        let mut text = Vec::with_capacity(method.len().saturating_add(target.len()).saturating_add(bytes));
        text.extend_from_slice(method.as_bytes());
        let method_end = text.len();
        text.extend_from_slice(target.as_bytes());
        let target_end = text.len();
        Self { text, method_end, target_end, lines: Vec::with_capacity(lines), peer, certificates: None }
    }

    /// A copy of the engine's borrowed view of a head; header names are lowercased (HTTP
    /// compares them case-insensitively, and HTTP/2 sends them lowercased).
    pub fn from_head(head: &RequestHead<'_>, peer: Option<SocketAddr>) -> Self {
        let bytes = head.headers.iter().map(|(n, v)| n.len() + v.len()).sum();
        let mut owned = Self::with_room(head.method, head.path, peer, head.headers.len(), bytes);
        for (name, value) in head.headers {
            owned.push_header(name, value);
        }
        owned
    }

    fn push_header(&mut self, name: &str, value: &[u8]) {
        let start = self.text.len();
        self.text.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
        let at = self.text.len();
        self.text.extend_from_slice(value);
        self.lines.push(Line { start, value: at, end: self.text.len() });
    }

    /// Appends a header line (after any of the same name, as a repeated header arrives).
    pub fn with_header(mut self, name: &str, value: &[u8]) -> Self {
        self.push_header(name, value);
        self
    }

    /// Sets the certificate chain the client proved it holds the key of (DER, its own
    /// certificate first), as the TLS handshake of the connection verified it.
    pub fn with_peer_certificates(mut self, chain: impl Into<Arc<[Vec<u8>]>>) -> Self {
        self.certificates = Some(chain.into());
        self
    }

    /// Removes every line of header `name` (case-insensitive).
    pub fn remove_header(&mut self, name: &str) {
        let text = &self.text;
        self.lines
            .retain(|l| !text.get(l.start..l.value).is_some_and(|n| n.eq_ignore_ascii_case(name.as_bytes())));
    }

    /// The text of `text[from..to]`: always UTF-8 where this type puts a string there.
    fn str_at(&self, from: usize, to: usize) -> &str {
        self.text.get(from..to).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or_default()
    }

    /// Every header line in order as (lowercased name bytes, value).
    fn lines(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.lines.iter().map(|l| {
            (
                self.text.get(l.start..l.value).unwrap_or_default(),
                self.text.get(l.value..l.end).unwrap_or_default(),
            )
        })
    }

    /// The request method (`POST`, `GET`).
    pub fn method(&self) -> &str {
        self.str_at(0, self.method_end)
    }

    /// The request target as received: the path with its query, or the absolute form.
    pub fn target(&self) -> &str {
        self.str_at(self.method_end, self.target_end)
    }

    /// The first value of header `name` (case-insensitive) as text; `None` when it is absent
    /// or its bytes are not UTF-8 (see [`header_bytes`](Self::header_bytes)).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_bytes(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The first value of header `name` (case-insensitive) as sent: HTTP allows bytes that
    /// are not UTF-8.
    pub fn header_bytes(&self, name: &str) -> Option<&[u8]> {
        self.lines().find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v)
    }

    /// Every value of header `name` (case-insensitive), in the order they arrived.
    pub fn header_values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s [u8]> + 's {
        self.lines().filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v)
    }

    /// Every header line in order, names lowercased, repeated names included.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.lines().map(|(n, v)| (std::str::from_utf8(n).unwrap_or_default(), v))
    }

    /// The host the caller reached: the `Host` header (for HTTP/2 the shim passes
    /// `:authority` as `host`), port included when it was sent.
    pub fn host(&self) -> Option<&str> {
        self.header("host")
    }

    /// The cookies the request carried, as `(name, value)` pairs in order, from every
    /// `Cookie` line (HTTP/2 may split them). Values are as sent (RFC 6265 §5.4: no decoding;
    /// surrounding quotes kept); a pair without `=`, and any line that is not UTF-8, is
    /// skipped.
    pub fn cookies(&self) -> impl Iterator<Item = (&str, &str)> {
        self.header_values("cookie")
            .filter_map(|v| std::str::from_utf8(v).ok())
            .flat_map(|line| line.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .map(|(name, value)| (name.trim(), value.trim()))
    }

    /// The value of the first cookie named `name` (names are case-sensitive).
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The address the connection came from: the TCP peer as the socket saw it (behind a
    /// proxy, the proxy). [`Caller::peer`](crate::Caller::peer) is the client address the
    /// server settled on (a forwarding replica's vouched address, say). `None` for a service
    /// mounted without connection info.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// The client's certificate chain (DER, its own certificate first) when the connection is
    /// TLS and the server asked for client certificates (`TlsConfig::client_certificates` in
    /// `mcp-server`): verified against the configured roots during the handshake, so the client
    /// holds the key of the first one. Empty otherwise (plain HTTP, no certificate asked for or
    /// presented, a mounted service). To identify the client, compare the first certificate
    /// with those you issued, or parse it with an X.509 crate.
    pub fn peer_certificates(&self) -> &[Vec<u8>] {
        self.certificates.as_deref().unwrap_or_default()
    }
}

impl fmt::Debug for HttpRequestHead {
    // Header values carry credentials (cookies, tokens): a logged caller must not leak them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequestHead")
            .field("method", &self.method())
            .field("target", &self.target())
            .field("headers", &self.headers().map(|(n, _)| n).collect::<Vec<_>>())
            .field("peer", &self.peer)
            .field("peer_certificates", &self.peer_certificates().len())
            .finish()
    }
}

impl PartialEq for HttpRequestHead {
    // Equal when they read the same: the bytes of removed lines do not count.
    fn eq(&self, other: &Self) -> bool {
        self.method() == other.method()
            && self.target() == other.target()
            && self.lines().eq(other.lines())
            && self.peer == other.peer
            && self.certificates == other.certificates
    }
}

impl Eq for HttpRequestHead {}

#[cfg(test)]
mod tests {
    use super::*;

    fn head() -> HttpRequestHead {
        let lines: [(&str, &[u8]); 5] = [
            ("Host", b"example.test:8080"),
            ("Cookie", b"sid=abc; theme=\"dark\""),
            ("cookie", b"flag; lang=en"),
            ("X-Raw", b"\xff\xfe"),
            ("Authorization", b"Bearer secret"),
        ];
        let view = RequestHead { method: "POST", path: "/mcp?x=1", headers: &lines };
        HttpRequestHead::from_head(&view, "127.0.0.1:5000".parse().ok())
    }

    #[test]
    fn reads_headers_cookies_and_host() {
        let h = head();
        assert_eq!(h.method(), "POST");
        assert_eq!(h.target(), "/mcp?x=1");
        assert_eq!(h.host(), Some("example.test:8080"));
        assert_eq!(h.header("HOST"), Some("example.test:8080"));
        let cookies: Vec<_> = h.cookies().collect();
        assert_eq!(cookies, [("sid", "abc"), ("theme", "\"dark\""), ("lang", "en")]);
        assert_eq!(h.cookie("lang"), Some("en"));
        assert_eq!(h.cookie("Lang"), None);
        assert_eq!(h.header("x-raw"), None, "not UTF-8: no text");
        assert_eq!(h.header_bytes("x-raw"), Some(&b"\xff\xfe"[..]));
        assert_eq!(h.header_values("cookie").count(), 2);
        assert_eq!(h.peer().map(|p| p.port()), Some(5000));
    }

    #[test]
    fn removes_headers_and_never_prints_values() {
        let mut h = head();
        let printed = format!("{h:?}");
        assert!(printed.contains("authorization") && !printed.contains("secret") && !printed.contains("abc"));
        h.remove_header("AUTHORIZATION");
        assert_eq!(h.header("authorization"), None);
        assert_eq!(h.headers().count(), 4);
    }

    #[test]
    fn heads_are_equal_when_they_read_the_same() {
        let mut removed = head();
        removed.remove_header("x-raw");
        let lines = head().headers().map(|(n, v)| (n.to_owned(), v.to_vec())).collect::<Vec<_>>();
        let mut rebuilt =
            HttpRequestHead::with_room("POST", "/mcp?x=1", "127.0.0.1:5000".parse().ok(), 4, 64);
        for (name, value) in lines.iter().filter(|(n, _)| n != "x-raw") {
            rebuilt = rebuilt.with_header(name, value);
        }
        assert_eq!(removed, rebuilt, "the removed line's bytes do not count");
        assert_ne!(head(), rebuilt);
        let names: Vec<_> = rebuilt.headers().map(|(n, _)| n).collect();
        assert_eq!(names, ["host", "cookie", "cookie", "authorization"], "lowercased, in order");
        let built = HttpRequestHead::new("GET", "/", None).with_header("A", b"1").with_header("a", b"2");
        assert_eq!(built.header_values("A").collect::<Vec<_>>(), [&b"1"[..], b"2"]);
        assert_eq!((built.method(), built.target()), ("GET", "/"));
    }
}
