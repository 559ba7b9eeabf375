//! Server Cards (SEP-2127, extension `io.modelcontextprotocol/server-card`): a static JSON
//! document describing a remote MCP server for discovery before any connection, and the HTTP
//! rules for serving it. Pure: no I/O, no clock.
//!
//! The card's shape is the extension repository's `schema.ts` (modelcontextprotocol/
//! experimental-ext-server-card at 8924e08, `$schema`
//! [`SCHEMA_URL`]); its serving rules are that repository's `docs/discovery.md`: the reserved
//! location `<streamable-http-url>/server-card` ([`card_path`]), the media type
//! [`MEDIA_TYPE`], open CORS, `Cache-Control: public, max-age=3600` and an `ETag` honoured by
//! `If-None-Match` ([`Card::answer`]).
//!
//! What a card holds, by the SEP's choice: identity (`name`, `version`, `description`,
//! `title`, `websiteUrl`) and the remote endpoint (`remotes`: its URL, the protocol versions it
//! speaks and the headers it needs). It deliberately holds **no** tools, resources, prompts,
//! capabilities or extensions ("Why Exclude Primitives?"): those can differ per caller and stay
//! with `server/discover` and the list methods. Nothing in a card therefore depends on who asks,
//! so one [`Card`] is built once and served alike to every caller.
//!
//! ```
//! use mcp_proto::card::{card_path, ServerCard};
//! use mcp_proto::Implementation;
//!
//! let mut info = Implementation::new("weather", "1.2.0");
//! info.description = Some("Forecasts by city".into());
//! let card = ServerCard::new("com.example/weather")?
//!     .url("https://example.com/mcp")?
//!     .build(&info)?;
//! assert_eq!(card_path("/mcp"), "/mcp/server-card");
//! assert_eq!(card.answer("GET", &[]).status, 200);
//! assert_eq!(card.answer("GET", &[card.etag().as_bytes()]).status, 304);
//! # Ok::<(), mcp_proto::card::CardError>(())
//! ```

use std::fmt;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::auth::ProtectedResource;
use crate::engine::Implementation;
use crate::version::ProtocolVersion;

/// The card's media type (discovery.md, "MCP Server Cards"): its `Content-Type`.
pub const MEDIA_TYPE: &str = "application/mcp-server-card+json";

/// The one `$schema` a v1 card may name (`schema.ts`, `ServerCard.$schema`).
pub const SCHEMA_URL: &str = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json";

/// What is appended to the Streamable HTTP endpoint's path to reach its card, the location the
/// SEP reserves (discovery.md, "Hosted Server Card Location").
pub const PATH_SUFFIX: &str = "/server-card";

/// The caching the SEP recommends for a card (discovery.md, "Caching"): any cache may keep it
/// for an hour, since nothing in it is per caller.
pub const CACHE_CONTROL: &str = "public, max-age=3600";

/// How long a browser may reuse the answer to a CORS preflight, in seconds: a day, the cap
/// Firefox applies (Chromium caps at two hours and uses the smaller value).
const PREFLIGHT_MAX_AGE: &str = "86400";

/// The methods a card answers; anything else is `405` with this as `Allow`.
const ALLOW: &str = "GET, HEAD, OPTIONS";

/// Bounds from `schema.ts`, in characters (JSON Schema counts code points).
const NAME_MIN: usize = 3;
const NAME_MAX: usize = 200;
const DESCRIPTION_MAX: usize = 100;
const TITLE_MAX: usize = 100;
const VERSION_MAX: usize = 255;
/// The longest endpoint or website URL accepted, in bytes: 2048, as for a protected resource's
/// URL ([`ResourceUrl`](crate::auth::ResourceUrl)). Configuration, not input, but every card
/// carries it.
const URL_MAX: usize = 2048;

/// Why a card cannot be built: a field the schema would refuse. Each is configuration, found
/// when the server is built, never at request time.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CardError {
    /// The card's `name` is not `namespace/name` in reverse-DNS form
    /// (`^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`, 3 to 200 characters).
    Name(String),
    /// The server has no description (`Implementation::description`): a card requires one.
    NoDescription,
    /// The description is longer than 100 characters or empty.
    Description,
    /// The title is longer than 100 characters or empty.
    Title,
    /// The version is longer than 255 characters.
    Version,
    /// The endpoint URL is not `http://` or `https://`, has whitespace, or is over 2048 bytes.
    Url(String),
    /// The website URL is not an absolute URI without whitespace, or is over 2048 bytes.
    WebsiteUrl(String),
}

impl fmt::Display for CardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(n) => write!(f, "server card name {n:?} is not reverse-DNS `namespace/name`"),
            Self::NoDescription => f.write_str("a server card needs the server's description"),
            Self::Description => {
                write!(f, "a server card's description must be 1 to {DESCRIPTION_MAX} characters")
            }
            Self::Title => write!(f, "a server card's title must be 1 to {TITLE_MAX} characters"),
            Self::Version => write!(f, "a server card's version must be at most {VERSION_MAX} characters"),
            Self::Url(u) => write!(f, "server card endpoint URL {u:?} is not an http(s) URL"),
            Self::WebsiteUrl(u) => write!(f, "server card website URL {u:?} is not an absolute URI"),
        }
    }
}

impl std::error::Error for CardError {}

/// What a server says about itself in its card beyond its [`Implementation`]: the card's
/// reverse-DNS name, where its Streamable HTTP endpoint is, and whether it needs a token.
///
/// Defaults: no endpoint URL (the card then has no `remotes`, so it names no protocol versions
/// either: the schema keeps those per remote) and no authorization header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCard {
    name: String,
    url: Option<String>,
    /// The protected resource metadata URL and whether DPoP-bound tokens are taken too.
    auth: Option<(String, bool)>,
}

impl ServerCard {
    /// A card named `name`, which must be reverse-DNS `namespace/name` (`com.example/weather`).
    /// The MCP `Implementation.name` has no such rule, so the card's name is given here.
    pub fn new(name: impl Into<String>) -> Result<Self, CardError> {
        let name = name.into();
        if !valid_name(&name) {
            return Err(CardError::Name(name));
        }
        Ok(Self { name, url: None, auth: None })
    }

    /// The public URL of the Streamable HTTP endpoint (`https://example.com/mcp`), listed as the
    /// card's one `streamable-http` remote. Default none, or the protected resource's URL
    /// when [`protected`](Self::protected) is given one.
    pub fn url(mut self, url: impl Into<String>) -> Result<Self, CardError> {
        let url = url.into();
        let scheme = url.starts_with("https://") || url.starts_with("http://");
        if !scheme || url.len() > URL_MAX || url.contains(char::is_whitespace) {
            return Err(CardError::Url(url));
        }
        self.url = Some(url);
        Ok(self)
    }

    /// Says that the endpoint is `resource`, an OAuth protected resource: the remote's URL
    /// (unless [`url`](Self::url) set one) is the resource's canonical URL, and the remote
    /// lists a required, secret `Authorization` header whose description points to the
    /// resource's metadata (RFC 9728), where its authorization servers and scopes are. Those are
    /// not copied into the card: its schema has no field for them, and the metadata document is
    /// where clients look.
    pub fn protected(mut self, resource: &ProtectedResource) -> Self {
        if self.url.is_none() {
            self.url = Some(resource.resource().as_str().to_owned());
        }
        self.auth = Some((resource.resource().metadata_url(), !resource.dpop_algs().is_empty()));
        self
    }

    /// The card's reverse-DNS name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The card of the server `info` describes: `version`, `description` (required by the
    /// schema), `title` and `websiteUrl` come from it, the protocol versions are every version
    /// this engine speaks, as `server/discover` lists them.
    pub fn build(&self, info: &Implementation) -> Result<Card, CardError> {
        let description = info.description.as_deref().ok_or(CardError::NoDescription)?;
        if !(1..=DESCRIPTION_MAX).contains(&description.chars().count()) {
            return Err(CardError::Description);
        }
        if info.version.chars().count() > VERSION_MAX {
            return Err(CardError::Version);
        }
        let mut doc = Map::new();
        doc.insert("$schema".into(), SCHEMA_URL.into());
        doc.insert("name".into(), self.name.clone().into());
        doc.insert("version".into(), info.version.clone().into());
        doc.insert("description".into(), description.into());
        if let Some(title) = &info.title {
            if !(1..=TITLE_MAX).contains(&title.chars().count()) {
                return Err(CardError::Title);
            }
            doc.insert("title".into(), title.clone().into());
        }
        if let Some(site) = &info.website_url {
            if !absolute_uri(site) {
                return Err(CardError::WebsiteUrl(site.clone()));
            }
            doc.insert("websiteUrl".into(), site.clone().into());
        }
        if let Some(url) = &self.url {
            let mut remote = Map::new();
            remote.insert("type".into(), "streamable-http".into());
            remote.insert("url".into(), url.clone().into());
            if let Some((metadata, dpop)) = &self.auth {
                let schemes = if *dpop { "Bearer or DPoP" } else { "Bearer" };
                let header = json!({
                    "name": "Authorization",
                    "description": format!(
                        "An OAuth 2.1 access token ({schemes}); the authorization servers and scopes \
                         are in the protected resource metadata at {metadata}"
                    ),
                    "isRequired": true,
                    "isSecret": true,
                });
                remote.insert("headers".into(), Value::Array(vec![header]));
            }
            remote.insert("supportedProtocolVersions".into(), ProtocolVersion::supported().into());
            doc.insert("remotes".into(), Value::Array(vec![Value::Object(remote)]));
        }
        Ok(Card::from_body(serde_json::to_vec(&Value::Object(doc)).unwrap_or_default()))
    }
}

/// `^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`, 3 to 200 characters (`schema.ts`, `ServerCard.name`).
fn valid_name(name: &str) -> bool {
    let Some((space, local)) = name.split_once('/') else { return false };
    let space_ok =
        !space.is_empty() && space.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    let local_ok = !local.is_empty()
        && local.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    space_ok && local_ok && (NAME_MIN..=NAME_MAX).contains(&name.len())
}

/// An RFC 3986 absolute URI in outline: a scheme (a letter, then letters, digits, `+`, `-`,
/// `.`), a colon, something after it, no whitespace, at most 2048 bytes.
fn absolute_uri(uri: &str) -> bool {
    let Some((scheme, rest)) = uri.split_once(':') else { return false };
    let mut bytes = scheme.bytes();
    let first = bytes.next().is_some_and(|b| b.is_ascii_alphabetic());
    first
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        && !rest.is_empty()
        && uri.len() <= URL_MAX
        && !uri.contains(char::is_whitespace)
}

/// A built card: its bytes and their strong entity tag, fixed for the card's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    body: Vec<u8>,
    etag: String,
}

/// What to answer a request for the card: status, headers, and whether the card's bytes are the
/// body (`false`: no body, as for `HEAD`, `304`, a preflight or `405`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardAnswer {
    /// `200`, `304`, `204` (a CORS preflight) or `405`.
    pub status: u16,
    /// Every header of the answer, lowercase names.
    pub headers: Vec<(&'static str, String)>,
    /// Whether [`Card::body`] is sent.
    pub body: bool,
}

impl Card {
    fn from_body(body: Vec<u8>) -> Self {
        // A digest of the bytes: replicas serving the same card give the same tag, and a
        // changed card (a new version, say) a new one. 128 bits are plenty for a validator.
        let digest = Sha256::digest(&body);
        let mut etag = String::with_capacity(34);
        etag.push('"');
        for b in digest.iter().take(16) {
            etag.push_str(&format!("{b:02x}"));
        }
        etag.push('"');
        Self { body, etag }
    }

    /// The card document (JSON, [`MEDIA_TYPE`]).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The card's strong entity tag, quotes included (`"3f2a…"`): 32 hex digits of the SHA-256
    /// of [`body`](Self::body).
    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The answer to a `method` request for the card carrying the `If-None-Match` header lines
    /// `if_none_match` (none when absent):
    ///
    /// - `GET` and `HEAD`: `304` with no body when a listed tag matches the card's (weak
    ///   comparison, RFC 9110 §13.1.2; `*` matches), otherwise `200` with the card
    ///   (`HEAD`: its headers only, `Content-Length` included);
    /// - `OPTIONS`: `204`, the CORS preflight answer (a browser sends one before a `GET` with
    ///   `If-None-Match`, a header no request may carry across origins unasked);
    /// - anything else: `405` with `Allow: GET, HEAD, OPTIONS`.
    ///
    /// Every answer but `405` carries the SEP's CORS headers (any origin: the card is public)
    /// and every `200` and `304` its `ETag` and `Cache-Control` ([`CACHE_CONTROL`]), as RFC 9110
    /// §15.4.5 asks of a `304`. Malformed tags in `If-None-Match` match nothing; the work is
    /// linear in the header's bytes, which the HTTP head bound caps.
    pub fn answer(&self, method: &str, if_none_match: &[&[u8]]) -> CardAnswer {
        let cors = |headers: &mut Vec<(&'static str, String)>| {
            headers.push(("access-control-allow-origin", "*".to_owned()));
            headers.push(("access-control-allow-methods", "GET, HEAD".to_owned()));
            headers.push(("access-control-allow-headers", "Content-Type, If-None-Match".to_owned()));
            headers.push(("access-control-expose-headers", "ETag".to_owned()));
        };
        let mut headers = Vec::new();
        match method {
            "GET" | "HEAD" => {
                let fresh = if_none_match.iter().any(|v| matches_any(v, self.etag.as_bytes()));
                headers.push(("etag", self.etag.clone()));
                headers.push(("cache-control", CACHE_CONTROL.to_owned()));
                cors(&mut headers);
                if fresh {
                    return CardAnswer { status: 304, headers, body: false };
                }
                headers.push(("content-type", MEDIA_TYPE.to_owned()));
                headers.push(("content-length", self.body.len().to_string()));
                CardAnswer { status: 200, headers, body: method == "GET" }
            }
            "OPTIONS" => {
                cors(&mut headers);
                headers.push(("access-control-max-age", PREFLIGHT_MAX_AGE.to_owned()));
                headers.push(("allow", ALLOW.to_owned()));
                CardAnswer { status: 204, headers, body: false }
            }
            _ => {
                headers.push(("allow", ALLOW.to_owned()));
                CardAnswer { status: 405, headers, body: false }
            }
        }
    }
}

/// Whether the `If-None-Match` value `value` (`*`, or a comma-separated list of entity tags,
/// each maybe `W/`-prefixed) names `ours` (quotes included) by weak comparison: the opaque
/// tags are equal, weakness aside. Parsing stops at the first malformed element, which matches
/// nothing.
fn matches_any(value: &[u8], ours: &[u8]) -> bool {
    let ours = ours.strip_prefix(b"\"").and_then(|o| o.strip_suffix(b"\"")).unwrap_or(ours);
    let mut rest = value;
    loop {
        rest = trim_start(rest, |b| b == b' ' || b == b'\t' || b == b',');
        if rest.is_empty() {
            return false;
        }
        if let Some(after) = rest.strip_prefix(b"*") {
            // `*` stands alone (RFC 9110 §13.1.2); as one element of a list it is malformed.
            return trim_start(after, |b| b == b' ' || b == b'\t').is_empty() && value.trim_ascii() == b"*";
        }
        let tag = rest.strip_prefix(b"W/").unwrap_or(rest);
        let Some(open) = tag.strip_prefix(b"\"") else { return false };
        let Some(close) = open.iter().position(|&b| b == b'"') else { return false };
        let (opaque, after) = open.split_at(close);
        if opaque == ours {
            return true;
        }
        rest = after.get(1..).unwrap_or_default();
        // Between tags only whitespace and a comma may stand.
        let next = trim_start(rest, |b| b == b' ' || b == b'\t');
        if !next.is_empty() && !next.starts_with(b",") {
            return false;
        }
        rest = next;
    }
}

fn trim_start(bytes: &[u8], skip: impl Fn(u8) -> bool) -> &[u8] {
    let at = bytes.iter().position(|&b| !skip(b)).unwrap_or(bytes.len());
    bytes.get(at..).unwrap_or_default()
}

/// The card's path for a Streamable HTTP endpoint at `endpoint` (a path): `/mcp` gives
/// `/mcp/server-card`, `/` gives `/server-card`.
pub fn card_path(endpoint: &str) -> String {
    format!("{}{PATH_SUFFIX}", endpoint.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ResourceUrl;

    fn info() -> Implementation {
        let mut info = Implementation::new("weather", "1.2.0");
        info.description = Some("Forecasts by city".into());
        info
    }

    fn card() -> Card {
        ServerCard::new("com.example/weather")
            .and_then(|c| c.url("https://example.com/mcp"))
            .and_then(|c| c.build(&info()))
            .unwrap()
    }

    fn doc(card: &Card) -> Value {
        serde_json::from_slice(card.body()).unwrap()
    }

    #[test]
    fn document_has_the_schema_fields() {
        let mut info = info();
        info.title = Some("Weather".into());
        info.website_url = Some("https://example.com".into());
        let card = ServerCard::new("com.example/weather").unwrap().build(&info).unwrap();
        assert_eq!(
            doc(&card),
            json!({
                "$schema": SCHEMA_URL,
                "name": "com.example/weather",
                "version": "1.2.0",
                "description": "Forecasts by city",
                "title": "Weather",
                "websiteUrl": "https://example.com",
            })
        );
    }

    #[test]
    fn remote_lists_the_versions_discover_lists() {
        let remote = &doc(&card())["remotes"][0];
        assert_eq!(remote["type"], "streamable-http");
        assert_eq!(remote["url"], "https://example.com/mcp");
        assert_eq!(
            remote["supportedProtocolVersions"],
            json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
        );
        assert!(remote.get("headers").is_none());
    }

    #[test]
    fn protected_resource_gives_url_and_authorization_header() {
        let resource = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        let protected = ProtectedResource::new(resource, ["https://as.example.com"]).unwrap();
        let card =
            ServerCard::new("com.example/weather").unwrap().protected(&protected).build(&info()).unwrap();
        let remote = &doc(&card)["remotes"][0];
        assert_eq!(remote["url"], "https://mcp.example.com/mcp");
        let header = &remote["headers"][0];
        assert_eq!(header["name"], "Authorization");
        assert_eq!(header["isRequired"], true);
        assert_eq!(header["isSecret"], true);
        let text = header["description"].as_str().unwrap();
        assert!(text.contains("https://mcp.example.com/.well-known/oauth-protected-resource/mcp"), "{text}");
        assert!(text.contains("(Bearer)"), "{text}");
        let dpop = protected.dpop(["ES256"]);
        let card = ServerCard::new("com.example/weather").unwrap().protected(&dpop).build(&info()).unwrap();
        let text = doc(&card)["remotes"][0]["headers"][0]["description"].as_str().unwrap().to_owned();
        assert!(text.contains("(Bearer or DPoP)"), "{text}");
    }

    #[test]
    fn explicit_url_wins_over_the_resource() {
        let resource = ResourceUrl::parse("https://internal.example.com/mcp").unwrap();
        let protected = ProtectedResource::new(resource, ["https://as.example.com"]).unwrap();
        let card = ServerCard::new("com.example/weather")
            .and_then(|c| c.url("https://public.example.com/mcp"))
            .unwrap()
            .protected(&protected)
            .build(&info())
            .unwrap();
        assert_eq!(doc(&card)["remotes"][0]["url"], "https://public.example.com/mcp");
    }

    #[test]
    fn names_follow_the_schema_pattern() {
        for good in ["com.example/weather", "a/b", "io.github-x/my_server.v2"] {
            assert!(ServerCard::new(good).is_ok(), "{good}");
        }
        let long = format!("a/{}", "b".repeat(199));
        for bad in ["weather", "/x", "x/", "a/b/c", "a b/c", "a/b c", "ex_ample/x", "a/é", long.as_str()] {
            assert!(matches!(ServerCard::new(bad), Err(CardError::Name(_))), "{bad}");
        }
    }

    #[test]
    fn fields_outside_the_schema_are_refused() {
        let named = ServerCard::new("com.example/weather").unwrap();
        assert_eq!(named.build(&Implementation::new("w", "1")), Err(CardError::NoDescription));
        let mut info = info();
        info.description = Some("é".repeat(101));
        assert_eq!(named.build(&info), Err(CardError::Description));
        info.description = Some("é".repeat(100));
        assert!(named.build(&info).is_ok(), "100 characters, 200 bytes");
        info.title = Some(String::new());
        assert_eq!(named.build(&info), Err(CardError::Title));
        info.title = None;
        info.website_url = Some("example.com".into());
        assert!(matches!(named.build(&info), Err(CardError::WebsiteUrl(_))));
        info.website_url = None;
        info.version = "1".repeat(256);
        assert_eq!(named.build(&info), Err(CardError::Version));
        for bad in ["ftp://x", "https://a b", "example.com/mcp"] {
            assert!(matches!(named.clone().url(bad), Err(CardError::Url(_))), "{bad}");
        }
    }

    #[test]
    fn cards_match_the_extension_schema() {
        let mut info = info();
        info.title = Some("Weather".into());
        info.website_url = Some("https://example.com".into());
        let resource = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        let protected = ProtectedResource::new(resource, ["https://as.example.com"]).unwrap().dpop(["ES256"]);
        let named = ServerCard::new("com.example/weather").unwrap();
        for card in [named.build(&info).unwrap(), card(), named.protected(&protected).build(&info).unwrap()] {
            mcp_testkit::card::validate(&doc(&card)).unwrap();
        }
        // The schema does refuse what the builder refuses.
        let bad = json!({"$schema": SCHEMA_URL, "name": "weather", "version": "1", "description": "d"});
        assert!(mcp_testkit::card::validate(&bad).is_err());
    }

    #[test]
    fn etag_is_strong_and_follows_the_bytes() {
        let card = card();
        let tag = card.etag();
        assert_eq!(tag.len(), 34);
        assert!(tag.starts_with('"') && tag.ends_with('"') && !tag.starts_with("W/"));
        assert_eq!(card.etag(), self::card().etag(), "same card, same tag");
        let mut other = info();
        other.version = "1.2.1".into();
        let changed = ServerCard::new("com.example/weather").unwrap().build(&other).unwrap();
        assert_ne!(changed.etag(), tag);
    }

    fn header<'a>(answer: &'a CardAnswer, name: &str) -> Option<&'a str> {
        answer.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn get_and_head_answer_the_card() {
        let card = card();
        let get = card.answer("GET", &[]);
        assert_eq!((get.status, get.body), (200, true));
        assert_eq!(header(&get, "content-type"), Some(MEDIA_TYPE));
        assert_eq!(header(&get, "etag"), Some(card.etag()));
        assert_eq!(header(&get, "cache-control"), Some("public, max-age=3600"));
        assert_eq!(header(&get, "access-control-allow-origin"), Some("*"));
        assert_eq!(header(&get, "access-control-expose-headers"), Some("ETag"));
        let length = card.body().len().to_string();
        assert_eq!(header(&get, "content-length"), Some(length.as_str()));
        let head = card.answer("HEAD", &[]);
        assert_eq!((head.status, head.body), (200, false));
        assert_eq!(head.headers, get.headers);
    }

    #[test]
    fn if_none_match_forms() {
        let card = card();
        let tag = card.etag().to_owned();
        let opaque = tag.trim_matches('"');
        let matching = [
            tag.clone(),
            format!("W/{tag}"),
            "*".to_owned(),
            " * ".to_owned(),
            format!("\"other\", {tag}"),
            format!("\"a\",W/\"b\" ,\t{tag}"),
            format!(",, {tag} ,"),
        ];
        for value in &matching {
            let answer = card.answer("GET", &[value.as_bytes()]);
            assert_eq!((answer.status, answer.body), (304, false), "{value}");
            assert_eq!(header(&answer, "etag"), Some(tag.as_str()));
            assert_eq!(header(&answer, "cache-control"), Some(CACHE_CONTROL));
            assert_eq!(header(&answer, "content-type"), None);
            assert_eq!(card.answer("HEAD", &[value.as_bytes()]).status, 304, "{value}");
        }
        let missing = [
            String::new(),
            "\"other\"".to_owned(),
            opaque.to_owned(),
            format!("\"{opaque}"),
            format!("\"x\" junk {tag}"),
            "\"x\", *".to_owned(),
            format!("{tag}x").replace('"', ""),
            "W/".to_owned(),
        ];
        for value in &missing {
            assert_eq!(card.answer("GET", &[value.as_bytes()]).status, 200, "{value}");
        }
        // Several header lines are one list.
        assert_eq!(card.answer("GET", &[b"\"a\"", tag.as_bytes()]).status, 304);
    }

    #[test]
    fn preflight_and_other_methods() {
        let card = card();
        let pre = card.answer("OPTIONS", &[]);
        assert_eq!((pre.status, pre.body), (204, false));
        assert_eq!(header(&pre, "access-control-allow-origin"), Some("*"));
        assert_eq!(header(&pre, "access-control-allow-headers"), Some("Content-Type, If-None-Match"));
        assert_eq!(header(&pre, "access-control-allow-methods"), Some("GET, HEAD"));
        assert!(header(&pre, "access-control-max-age").is_some());
        for method in ["POST", "PUT", "DELETE", "PATCH", "get"] {
            let answer = card.answer(method, &[]);
            assert_eq!((answer.status, answer.body), (405, false), "{method}");
            assert_eq!(header(&answer, "allow"), Some("GET, HEAD, OPTIONS"));
        }
    }

    #[test]
    fn paths() {
        assert_eq!(card_path("/mcp"), "/mcp/server-card");
        assert_eq!(card_path("/mcp/"), "/mcp/server-card");
        assert_eq!(card_path("/"), "/server-card");
        assert_eq!(card_path("/a/b"), "/a/b/server-card");
    }
}
