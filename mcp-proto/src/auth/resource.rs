//! The canonical URL of a protected MCP endpoint and its metadata document.

use std::fmt;

use serde_json::{json, Map, Value};

use super::scopes::{check_scope, ScopeError};

/// Where Protected Resource Metadata lives (RFC 9728 §3): this prefix, then the resource's path.
pub const METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// The longest resource URL accepted, in bytes: 2048. A longer one is refused with
/// [`ResourceError::TooLong`]; it is configuration, not input, but it is echoed in every
/// challenge, so it stays small.
const MAX_URL: usize = 2048;

/// Why a resource URL (or a metadata field) cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceError {
    /// Longer than 2048 bytes.
    TooLong,
    /// Not `https://`, nor `http://` to a loopback host.
    InsecureScheme,
    /// Not of the form `scheme://host[:port][/path]`.
    Malformed(&'static str),
    /// It has a query or a fragment: RFC 8707 §2 forbids a fragment, and a query would make
    /// two spellings of one audience.
    QueryOrFragment,
    /// An authorization server's URL is not an `https` URL (or `http` on loopback).
    AuthorizationServer(String),
    /// A scope is not a scope token (RFC 6749 §3.3).
    Scope(ScopeError),
}

impl fmt::Display for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong => write!(f, "the resource URL is longer than {MAX_URL} bytes"),
            Self::InsecureScheme => {
                f.write_str("the resource URL must be https (http only for a loopback host)")
            }
            Self::Malformed(why) => write!(f, "the resource URL is malformed: {why}"),
            Self::QueryOrFragment => f.write_str("the resource URL must have no query and no fragment"),
            Self::AuthorizationServer(url) => write!(f, "the authorization server URL {url:?} is not https"),
            Self::Scope(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ResourceError {}

/// The canonical URL of an MCP endpoint (RFC 8707 §2, as the MCP specification spells it):
/// lowercase scheme and host, no default port, no userinfo, query or fragment, and no
/// trailing slash. Tokens must name it as their audience; two spellings of one endpoint
/// (`HTTPS://Example.com:443/mcp/`) give the same canonical URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceUrl {
    url: String,
    /// Where the path begins in `url` (its length when the path is empty).
    path_at: usize,
}

impl ResourceUrl {
    /// Parses and canonicalizes `url`.
    ///
    /// ```
    /// use mcp_proto::auth::ResourceUrl;
    /// let r = ResourceUrl::parse("HTTPS://MCP.Example.com:443/api/mcp/").unwrap();
    /// assert_eq!(r.as_str(), "https://mcp.example.com/api/mcp");
    /// assert_eq!(r.metadata_url(), "https://mcp.example.com/.well-known/oauth-protected-resource/api/mcp");
    /// assert!(ResourceUrl::parse("http://example.com/mcp").is_err(), "plain http off loopback");
    /// assert!(ResourceUrl::parse("http://127.0.0.1:3000/mcp").is_ok());
    /// ```
    pub fn parse(url: &str) -> Result<Self, ResourceError> {
        if url.len() > MAX_URL {
            return Err(ResourceError::TooLong);
        }
        let (scheme, rest) = url.split_once("://").ok_or(ResourceError::Malformed("no \"://\""))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "https" && scheme != "http" {
            return Err(ResourceError::InsecureScheme);
        }
        if rest.contains(['?', '#']) {
            return Err(ResourceError::QueryOrFragment);
        }
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(ResourceError::Malformed("userinfo is not allowed"));
        }
        let (host, port) = split_port(authority)?;
        let host = host.to_ascii_lowercase();
        check_host(&host)?;
        if scheme == "http" && !is_loopback(&host) {
            return Err(ResourceError::InsecureScheme);
        }
        if !path.bytes().all(is_path_byte) {
            return Err(ResourceError::Malformed("the path has a character a URL path cannot carry"));
        }
        let default = if scheme == "https" { "443" } else { "80" };
        let mut canonical = format!("{scheme}://{host}");
        if let Some(port) = port.filter(|p| p.trim_start_matches('0') != default) {
            canonical.push(':');
            canonical.push_str(port.trim_start_matches('0'));
        }
        let path_at = canonical.len();
        canonical.push_str(path.trim_end_matches('/'));
        Ok(Self { url: canonical, path_at })
    }

    /// The canonical URL.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The path of the endpoint (`/mcp`), empty for the root.
    pub fn path(&self) -> &str {
        self.url.get(self.path_at..).unwrap_or_default()
    }

    /// `scheme://host[:port]`.
    pub fn origin(&self) -> &str {
        self.url.get(..self.path_at).unwrap_or_default()
    }

    /// The path at which the metadata of this resource is served (RFC 9728 §3.1: the
    /// well-known prefix inserted before the resource's path).
    pub fn metadata_path(&self) -> String {
        format!("{METADATA_PREFIX}{}", self.path())
    }

    /// The full URL of the metadata, as challenges name it (`resource_metadata`).
    pub fn metadata_url(&self) -> String {
        format!("{}{}", self.origin(), self.metadata_path())
    }

    /// Whether a request for `path` asks for this resource's metadata: the path-inserted form,
    /// or the bare prefix, which clients of the 2025-06-18 text try first.
    pub fn is_metadata_path(&self, path: &str) -> bool {
        path == self.metadata_path() || path == METADATA_PREFIX
    }
}

impl fmt::Display for ResourceUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

fn split_port(authority: &str) -> Result<(&str, Option<&str>), ResourceError> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6.find(']').ok_or(ResourceError::Malformed("an IPv6 host without \"]\""))?;
        let after = v6.get(end + 1..).unwrap_or_default();
        let host = authority.get(..end + 2).unwrap_or_default();
        match after {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':').ok_or(ResourceError::Malformed("junk after the host"))?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if let Some(p) = port {
        if p.is_empty()
            || p.len() > 5
            || !p.bytes().all(|b| b.is_ascii_digit())
            || p.parse::<u32>().map_or(true, |n| n > 65535)
        {
            return Err(ResourceError::Malformed("the port is not a number from 0 to 65535"));
        }
    }
    Ok((host, port))
}

fn check_host(host: &str) -> Result<(), ResourceError> {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(ResourceError::Malformed("the IPv6 host is not an address"));
        }
        return Ok(());
    }
    let ok = !host.is_empty()
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && !host.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(ResourceError::Malformed("the host is not a DNS name or an address"))
    }
}

fn is_loopback(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok_and(|a| a.is_loopback());
    }
    host.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

/// RFC 3986 `pchar` and `/`: unreserved, percent, sub-delims, `:` and `@`.
fn is_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:@/".contains(&b)
}

/// What a protected MCP endpoint publishes about itself (RFC 9728 §2): which resource it is,
/// which authorization servers issue its tokens and which scopes it knows.
#[derive(Debug, Clone)]
pub struct ProtectedResource {
    resource: ResourceUrl,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
    challenge_scopes: Vec<String>,
    resource_name: Option<String>,
    dpop_algs: Vec<String>,
}

impl ProtectedResource {
    /// The metadata of `resource`, whose tokens `authorization_servers` issue (each an issuer
    /// URL: `https`, or `http` on loopback).
    pub fn new(
        resource: ResourceUrl,
        authorization_servers: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, ResourceError> {
        let authorization_servers: Vec<String> = authorization_servers.into_iter().map(Into::into).collect();
        for server in &authorization_servers {
            let secure = server.starts_with("https://")
                || ResourceUrl::parse(server).is_ok_and(|u| u.as_str().starts_with("http://"));
            if !secure {
                return Err(ResourceError::AuthorizationServer(server.clone()));
            }
        }
        Ok(Self {
            resource,
            authorization_servers,
            scopes_supported: Vec::new(),
            challenge_scopes: Vec::new(),
            resource_name: None,
            dpop_algs: Vec::new(),
        })
    }

    /// The scopes the resource knows, published as `scopes_supported`. Default none (the
    /// field is left out).
    pub fn scopes_supported(
        mut self,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, ResourceError> {
        self.scopes_supported = checked(scopes)?;
        Ok(self)
    }

    /// The scopes a request without a token is told to obtain (the `scope` of its 401
    /// challenge, MCP 2025-11-25 "Scope selection"). Default: none, so the challenge has no
    /// `scope` and a client asks for `scopes_supported`. `offline_access` is never named in a
    /// challenge (it is not a permission of this resource) and is dropped here.
    pub fn challenge_scopes(
        mut self,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, ResourceError> {
        self.challenge_scopes = checked(scopes)?.into_iter().filter(|s| s != "offline_access").collect();
        Ok(self)
    }

    /// A human-readable name (`resource_name`). Default none.
    pub fn resource_name(mut self, name: impl Into<String>) -> Self {
        self.resource_name = Some(name.into());
        self
    }

    /// Accepts DPoP-bound tokens (RFC 9449 §5.2), proofs signed with one of `algs`
    /// (`dpop_signing_alg_values_supported`). Default off.
    pub fn dpop(mut self, algs: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.dpop_algs = algs.into_iter().map(Into::into).collect();
        self
    }

    /// The resource.
    pub fn resource(&self) -> &ResourceUrl {
        &self.resource
    }

    /// The scopes named in the challenge to a request without a token.
    pub fn default_challenge_scopes(&self) -> &[String] {
        &self.challenge_scopes
    }

    /// The signing algorithms accepted for DPoP proofs; empty when DPoP is off.
    pub fn dpop_algs(&self) -> &[String] {
        &self.dpop_algs
    }

    /// The metadata document (`application/json`), served at both
    /// [`ResourceUrl::is_metadata_path`] paths. `bearer_methods_supported` is `["header"]`:
    /// a token anywhere else is refused.
    pub fn document(&self) -> Vec<u8> {
        let mut doc = Map::new();
        doc.insert("resource".into(), Value::from(self.resource.as_str()));
        doc.insert("authorization_servers".into(), json!(self.authorization_servers));
        if !self.scopes_supported.is_empty() {
            doc.insert("scopes_supported".into(), json!(self.scopes_supported));
        }
        doc.insert("bearer_methods_supported".into(), json!(["header"]));
        if let Some(name) = &self.resource_name {
            doc.insert("resource_name".into(), Value::from(name.as_str()));
        }
        if !self.dpop_algs.is_empty() {
            doc.insert("dpop_signing_alg_values_supported".into(), json!(self.dpop_algs));
        }
        serde_json::to_vec(&Value::Object(doc)).unwrap_or_default()
    }
}

fn checked(scopes: impl IntoIterator<Item = impl Into<String>>) -> Result<Vec<String>, ResourceError> {
    let mut out: Vec<String> = Vec::new();
    for s in scopes {
        let s = s.into();
        check_scope(&s).map_err(ResourceError::Scope)?;
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_endpoint_has_one_canonical_url() {
        for spelling in
            ["https://mcp.example.com/mcp", "HTTPS://MCP.EXAMPLE.COM/mcp/", "https://mcp.example.com:443/mcp"]
        {
            assert_eq!(
                ResourceUrl::parse(spelling).unwrap().as_str(),
                "https://mcp.example.com/mcp",
                "{spelling}"
            );
        }
        let r = ResourceUrl::parse("https://mcp.example.com:8443").unwrap();
        assert_eq!(
            (r.as_str(), r.path(), r.origin()),
            ("https://mcp.example.com:8443", "", "https://mcp.example.com:8443")
        );
        assert_eq!(r.metadata_url(), "https://mcp.example.com:8443/.well-known/oauth-protected-resource");
        let r = ResourceUrl::parse("http://[::1]:3000/a/mcp").unwrap();
        assert_eq!(r.metadata_path(), "/.well-known/oauth-protected-resource/a/mcp");
        assert!(r.is_metadata_path("/.well-known/oauth-protected-resource/a/mcp"));
        assert!(r.is_metadata_path(METADATA_PREFIX));
        assert!(!r.is_metadata_path("/.well-known/oauth-protected-resource/b"));
        // The path keeps its case: only scheme and host are case-insensitive.
        assert_eq!(ResourceUrl::parse("https://h/MCP").unwrap().path(), "/MCP");
    }

    #[test]
    fn urls_that_cannot_be_an_audience_are_refused() {
        use ResourceError::*;
        let refused = [
            ("http://example.com/mcp", InsecureScheme),
            ("ftp://example.com/mcp", InsecureScheme),
            ("https://example.com/mcp?x=1", QueryOrFragment),
            ("https://example.com/mcp#top", QueryOrFragment),
            ("example.com/mcp", Malformed("no \"://\"")),
            ("https://user@example.com/mcp", Malformed("userinfo is not allowed")),
            ("https://example.com:99999/mcp", Malformed("the port is not a number from 0 to 65535")),
            ("https://exa mple.com/mcp", Malformed("the host is not a DNS name or an address")),
            ("https:///mcp", Malformed("the host is not a DNS name or an address")),
            ("https://[::g]/mcp", Malformed("the IPv6 host is not an address")),
            ("https://example.com/m cp", Malformed("the path has a character a URL path cannot carry")),
            ("http://127.evil.com/mcp", InsecureScheme),
        ];
        for (url, why) in refused {
            assert_eq!(ResourceUrl::parse(url), Err(why), "{url}");
        }
        assert_eq!(ResourceUrl::parse(&format!("https://h/{}", "a".repeat(MAX_URL))), Err(TooLong));
        assert!(ResourceUrl::parse("http://localhost:8080/mcp").is_ok());
        assert!(ResourceUrl::parse("http://127.0.0.2/mcp").is_ok());
    }

    #[test]
    fn the_metadata_document_names_the_resource_its_servers_and_the_header_method() {
        let r = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        let doc = ProtectedResource::new(r, ["https://auth.example.com"])
            .unwrap()
            .scopes_supported(["tools.read", "tools.write", "tools.read"])
            .unwrap()
            .resource_name("Example")
            .dpop(["ES256"])
            .document();
        let doc: Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(
            doc,
            json!({"resource": "https://mcp.example.com/mcp",
                   "authorization_servers": ["https://auth.example.com"],
                   "scopes_supported": ["tools.read", "tools.write"],
                   "bearer_methods_supported": ["header"],
                   "resource_name": "Example",
                   "dpop_signing_alg_values_supported": ["ES256"]})
        );
        let r = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        let bad = ProtectedResource::new(r.clone(), ["http://auth.example.com"]).unwrap_err();
        assert_eq!(bad, ResourceError::AuthorizationServer("http://auth.example.com".into()));
        let p = ProtectedResource::new(r, ["http://localhost:9000"]).unwrap();
        assert!(p.clone().scopes_supported(["bad scope"]).is_err());
        let p = p.challenge_scopes(["mcp", "offline_access"]).unwrap();
        assert_eq!(p.default_challenge_scopes(), ["mcp"]);
    }
}
