//! Finding the authorization server's keys: its metadata (RFC 8414 / OpenID Connect
//! Discovery), its key set (RFC 7517), and when to fetch them again. Fetching is the layer
//! above's; what to fetch, what to make of the answer and when to fetch again is here.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::token::{KeyKind, TokenError};
use crate::json::strict_object;

/// The largest metadata document or key set read, in bytes: 256 KiB. A larger answer is
/// refused ([`KeysError::TooLarge`]) before it is parsed.
pub const MAX_DOCUMENT: usize = 256 * 1024;

/// The most keys taken from one key set: 64. A set with more usable signing keys is refused
/// ([`KeysError::TooManyKeys`]) so that a token's lookup and the memory kept stay bounded.
pub const MAX_KEYS: usize = 64;

/// Why an authorization server's metadata or keys cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeysError {
    /// Over [`MAX_DOCUMENT`].
    TooLarge,
    /// Not a JSON object (strictly parsed: no repeated keys), or a member of the wrong type.
    Malformed(&'static str),
    /// The metadata's `issuer` is not the one configured (RFC 8414 §3.3: it must be identical).
    IssuerMismatch,
    /// More than [`MAX_KEYS`] usable keys.
    TooManyKeys,
    /// No usable signing key at all.
    NoKeys,
}

impl std::fmt::Display for KeysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge => write!(f, "the document is larger than {MAX_DOCUMENT} bytes"),
            Self::Malformed(why) => f.write_str(why),
            Self::IssuerMismatch => f.write_str("the metadata names another issuer"),
            Self::TooManyKeys => write!(f, "the key set has more than {MAX_KEYS} usable keys"),
            Self::NoKeys => f.write_str("the key set has no usable signing key"),
        }
    }
}

impl std::error::Error for KeysError {}

fn document(bytes: &[u8]) -> Result<Map<String, Value>, KeysError> {
    if bytes.len() > MAX_DOCUMENT {
        return Err(KeysError::TooLarge);
    }
    strict_object(bytes, 16).ok_or(KeysError::Malformed("not a strict JSON object"))
}

/// Where an issuer's metadata may be, in the order the MCP specification (2025-11-25) has
/// clients try them: for `https://as.example.com/tenant`, the OAuth and OpenID well-known
/// names inserted before the path, then OpenID's appended to it; for an issuer without a path,
/// the two well-known names at the root.
pub fn metadata_urls(issuer: &str) -> Vec<String> {
    let issuer = issuer.trim_end_matches('/');
    let host_at = issuer.find("://").map_or(0, |at| at + 3);
    let path_at =
        issuer.get(host_at..).and_then(|rest| rest.find('/')).map_or(issuer.len(), |at| host_at + at);
    let (origin, path) = issuer.split_at(path_at);
    if path.is_empty() {
        return vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ];
    }
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ]
}

/// What the resource server needs of an authorization server's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerMetadata {
    /// `issuer`, identical to the configured one.
    pub issuer: String,
    /// `jwks_uri`, where its signing keys are.
    pub jwks_uri: Option<String>,
    /// `introspection_endpoint` (RFC 7662), for opaque tokens.
    pub introspection_endpoint: Option<String>,
}

impl ServerMetadata {
    /// Reads a metadata document fetched for `issuer`.
    pub fn parse(bytes: &[u8], issuer: &str) -> Result<Self, KeysError> {
        let doc = document(bytes)?;
        if doc.get("issuer").and_then(Value::as_str) != Some(issuer) {
            return Err(KeysError::IssuerMismatch);
        }
        let url = |name: &str| match doc.get(name) {
            None => Ok(None),
            Some(Value::String(s)) if s.starts_with("https://") || s.starts_with("http://") => {
                Ok(Some(s.clone()))
            }
            Some(_) => Err(KeysError::Malformed("an endpoint of the metadata is not a URL")),
        };
        Ok(Self {
            issuer: issuer.to_owned(),
            jwks_uri: url("jwks_uri")?,
            introspection_endpoint: url("introspection_endpoint")?,
        })
    }
}

/// One signing key of the set.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// `kid`, if it has one.
    pub kid: Option<String>,
    /// Its kind, which decides the algorithms it verifies.
    pub kind: KeyKind,
    /// Its own `alg`, if it names one.
    pub alg: Option<String>,
    /// The JWK, for the verifier.
    pub jwk: Map<String, Value>,
}

/// An authorization server's signing keys: those of its key set usable to verify a token
/// (an asymmetric key, `use` absent or `sig`, no private members); the others are skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeySet {
    keys: Vec<Key>,
}

impl KeySet {
    /// Reads a key set document (`{"keys": [...]}`).
    pub fn parse(bytes: &[u8]) -> Result<Self, KeysError> {
        let doc = document(bytes)?;
        let Some(Value::Array(items)) = doc.get("keys") else {
            return Err(KeysError::Malformed("the key set has no \"keys\" array"));
        };
        let mut keys = Vec::new();
        for item in items {
            let Value::Object(jwk) = item else { continue };
            let usable =
                jwk.get("use").is_none_or(|u| u == "sig") && !jwk.contains_key("d") && !jwk.contains_key("k");
            let Some(kind) = KeyKind::of_jwk(jwk).filter(|_| usable) else { continue };
            if keys.len() == MAX_KEYS {
                return Err(KeysError::TooManyKeys);
            }
            let text = |name: &str| jwk.get(name).and_then(Value::as_str).map(str::to_owned);
            keys.push(Key { kid: text("kid"), kind, alg: text("alg"), jwk: jwk.clone() });
        }
        if keys.is_empty() {
            return Err(KeysError::NoKeys);
        }
        Ok(Self { keys })
    }

    /// The key a token whose header names `kid` and `alg` must be verified with: the key of
    /// that `kid`; for a token naming none, the one key whose kind signs with `alg` (two such
    /// keys make it ambiguous, and the token is refused rather than tried against each).
    pub fn find(&self, kid: Option<&str>, alg: &str) -> Result<&Key, TokenError> {
        match kid {
            Some(kid) => {
                self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)).ok_or(TokenError::UnknownKey)
            }
            None => {
                let mut fits = self.keys.iter().filter(|k| k.kind.signs_with(alg));
                match (fits.next(), fits.next()) {
                    (Some(key), None) => Ok(key),
                    _ => Err(TokenError::UnknownKey),
                }
            }
        }
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// When to fetch the key set (again): the policy of the cache the layer above keeps.
///
/// Keys are refreshed once [`max_age`](Self::max_age) has passed; a token naming a `kid` the set
/// lacks (the authorization server rotated its keys) triggers a refetch, but at most once per
/// [`floor`](Self::floor), however many such tokens arrive, so a flood of made-up `kid`s costs
/// the authorization server one request per floor and other callers nothing. A failed fetch
/// keeps the keys held (tokens they verify keep working) and is retried after the floor.
#[derive(Debug, Clone)]
pub struct KeyPolicy {
    floor: Duration,
    max_age: Duration,
    fetched: Option<Instant>,
    attempted: Option<Instant>,
    in_flight: bool,
}

/// What to do about the keys at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStep {
    /// Use the keys held.
    Use,
    /// Fetch now (this caller is the one to; report with [`KeyPolicy::fetched`]).
    Fetch,
    /// A fetch is under way or was tried too recently: use what is held, or, holding nothing,
    /// refuse with [`Denial::Unavailable`](super::Denial::Unavailable).
    Wait,
}

impl Default for KeyPolicy {
    fn default() -> Self {
        Self::new(Duration::from_secs(30), Duration::from_secs(3600))
    }
}

impl KeyPolicy {
    /// Refetch at most once per `floor` (default 30 s), and refresh after `max_age`
    /// (default 1 h).
    pub fn new(floor: Duration, max_age: Duration) -> Self {
        Self { floor, max_age, fetched: None, attempted: None, in_flight: false }
    }

    /// The refetch floor.
    pub fn floor(&self) -> Duration {
        self.floor
    }

    /// The age after which keys are refreshed.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// What to do at `now`, `unknown_kid` when the token names a key the set lacks.
    pub fn step(&mut self, now: Instant, unknown_kid: bool) -> KeyStep {
        let stale = match self.fetched {
            None => true,
            Some(at) => unknown_kid || now.saturating_duration_since(at) >= self.max_age,
        };
        if !stale {
            return KeyStep::Use;
        }
        let too_soon = self.attempted.is_some_and(|at| now.saturating_duration_since(at) < self.floor);
        if self.in_flight || too_soon {
            return if self.fetched.is_some() && !unknown_kid { KeyStep::Use } else { KeyStep::Wait };
        }
        self.in_flight = true;
        self.attempted = Some(now);
        KeyStep::Fetch
    }

    /// The fetch [`step`](Self::step) asked for ended at `now`, `ok` when it gave a usable set.
    pub fn fetched(&mut self, now: Instant, ok: bool) {
        self.in_flight = false;
        if ok {
            self.fetched = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ec(kid: &str) -> Value {
        json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": "x", "y": "y"})
    }

    #[test]
    fn metadata_is_looked_for_where_the_specification_says() {
        assert_eq!(
            metadata_urls("https://as.example.com/"),
            [
                "https://as.example.com/.well-known/oauth-authorization-server",
                "https://as.example.com/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://as.example.com/tenant/1"),
            [
                "https://as.example.com/.well-known/oauth-authorization-server/tenant/1",
                "https://as.example.com/.well-known/openid-configuration/tenant/1",
                "https://as.example.com/tenant/1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn metadata_must_name_the_configured_issuer() {
        let doc = json!({"issuer": "https://as.example.com", "jwks_uri": "https://as.example.com/jwks"})
            .to_string();
        let m = ServerMetadata::parse(doc.as_bytes(), "https://as.example.com").unwrap();
        assert_eq!(m.jwks_uri.as_deref(), Some("https://as.example.com/jwks"));
        assert_eq!(m.introspection_endpoint, None);
        assert_eq!(
            ServerMetadata::parse(doc.as_bytes(), "https://as.example.com/"),
            Err(KeysError::IssuerMismatch)
        );
        let bad = json!({"issuer": "https://as.example.com", "jwks_uri": 5}).to_string();
        assert!(matches!(
            ServerMetadata::parse(bad.as_bytes(), "https://as.example.com"),
            Err(KeysError::Malformed(_))
        ));
        assert_eq!(ServerMetadata::parse(&vec![b' '; MAX_DOCUMENT + 1], "x"), Err(KeysError::TooLarge));
        let twice = br#"{"issuer":"https://a","issuer":"https://b"}"#;
        assert!(matches!(ServerMetadata::parse(twice, "https://b"), Err(KeysError::Malformed(_))));
    }

    #[test]
    fn only_public_signing_keys_are_kept_and_found() {
        let set = json!({"keys": [ec("a"), {"kty": "oct", "k": "c2VjcmV0", "kid": "h"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": "n", "e": "AQAB"},
            {"kty": "EC", "crv": "P-256", "kid": "priv", "x": "x", "y": "y", "d": "d"},
            {"kty": "RSA", "kid": "r", "alg": "RS256", "n": "n", "e": "AQAB"}, 7]})
        .to_string();
        let keys = KeySet::parse(set.as_bytes()).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys.find(Some("r"), "RS256").unwrap().alg.as_deref(), Some("RS256"));
        assert_eq!(
            keys.find(Some("h"), "HS256").unwrap_err(),
            TokenError::UnknownKey,
            "the secret was skipped"
        );
        assert_eq!(keys.find(None, "ES256").unwrap().kid.as_deref(), Some("a"));
        let two = json!({"keys": [ec("a"), ec("b")]}).to_string();
        assert_eq!(
            KeySet::parse(two.as_bytes()).unwrap().find(None, "ES256").unwrap_err(),
            TokenError::UnknownKey
        );
        assert_eq!(KeySet::parse(br#"{"keys":[]}"#), Err(KeysError::NoKeys));
        assert!(matches!(KeySet::parse(br#"{"keys":{}}"#), Err(KeysError::Malformed(_))));
    }

    #[test]
    fn a_set_of_thousands_of_keys_is_refused() {
        let set = |n: usize| {
            json!({ "keys": (0..n).map(|i| ec(&format!("k{i}"))).collect::<Vec<_>>() }).to_string()
        };
        assert_eq!(KeySet::parse(set(MAX_KEYS).as_bytes()).map(|k| k.len()), Ok(MAX_KEYS));
        assert_eq!(KeySet::parse(set(MAX_KEYS + 1).as_bytes()), Err(KeysError::TooManyKeys));
        assert_eq!(KeySet::parse(set(1000).as_bytes()), Err(KeysError::TooManyKeys));
        assert_eq!(KeySet::parse(set(10_000).as_bytes()), Err(KeysError::TooLarge), "refused unparsed");
    }

    #[test]
    fn unknown_kids_refetch_at_most_once_per_floor() {
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let t0 = Instant::now();
        let mut p = KeyPolicy::new(Duration::from_secs(30), Duration::from_secs(3600));
        assert_eq!(p.step(t0, false), KeyStep::Fetch);
        assert_eq!(p.step(t0, false), KeyStep::Wait, "one fetch at a time, nothing held yet");
        p.fetched(t0, true);
        assert_eq!(p.step(t0, false), KeyStep::Use);
        // A flood of unknown kids: one refetch, then waits until the floor has passed.
        let t1 = t0 + Duration::from_secs(31);
        assert_eq!(p.step(t1, true), KeyStep::Fetch);
        p.fetched(t1, true);
        for s in 0..30 {
            assert_eq!(p.step(t1 + Duration::from_secs(s), true), KeyStep::Wait);
            assert_eq!(p.step(t1 + Duration::from_secs(s), false), KeyStep::Use, "known keys keep working");
        }
        assert_eq!(p.step(t1 + Duration::from_secs(30), true), KeyStep::Fetch);
        // A failed fetch keeps what is held and is retried after the floor.
        p.fetched(t1 + Duration::from_secs(30), false);
        assert_eq!(p.step(t1 + Duration::from_secs(40), false), KeyStep::Use);
        let aged = t1 + Duration::from_secs(3600);
        assert_eq!(p.step(aged, false), KeyStep::Fetch, "refreshed after max_age");
        p.fetched(aged, false);
        assert_eq!(
            p.step(aged + Duration::from_secs(1), false),
            KeyStep::Use,
            "stale keys beat none while the server is down"
        );
    }
}
