//! JWT access tokens (RFC 9068): taken apart within bounds, the header held to the key that must
//! have signed it, the claims held to the issuer, the audience and the time the caller gives.
//!
//! The signature itself is verified by the layer above, over [`Jwt::signing_input`] with the
//! key the header names, once [`check_header`] has accepted the algorithm *for that key*: the
//! algorithm is taken from the key, never from the token, so `none` and an HMAC "signed" with a
//! public key are refused whatever the token says.

use std::fmt;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

use super::challenge::Denial;
use super::resource::ResourceUrl;
use super::scopes::Scopes;
use crate::json::strict_object;

/// The longest token taken apart, in bytes: the `Authorization` bound
/// ([`MAX_AUTHORIZATION`](super::credentials::MAX_AUTHORIZATION)).
pub const MAX_TOKEN: usize = super::credentials::MAX_AUTHORIZATION;

/// How deep a token's header or claims may nest: 16. Deeper is refused as malformed.
const MAX_DEPTH: usize = 16;

/// Why a token is refused. Every variant becomes `401 invalid_token` ([`Denial::InvalidToken`])
/// with its fixed description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Not three base64url segments of JSON objects within the bounds; or JSON with repeated
    /// keys, or a claim of the wrong type.
    Malformed(&'static str),
    /// An encrypted token (five segments): this resource takes signed tokens only.
    Encrypted,
    /// `alg` is missing, `none`, an HMAC, or not one the verifying key signs with.
    Algorithm,
    /// The header names a `typ` other than `at+jwt` or `JWT`.
    Type,
    /// No key of the authorization server has the header's `kid`.
    UnknownKey,
    /// The signature does not verify.
    Signature,
    /// `iss` is not the authorization server's issuer.
    Issuer,
    /// `aud` does not name this resource.
    Audience,
    /// No `exp`.
    NoExpiry,
    /// `exp` has passed (beyond the skew).
    Expired,
    /// `nbf` is still to come (beyond the skew).
    NotYetValid,
    /// `iat` is in the future (beyond the skew).
    IssuedInFuture,
    /// A DPoP-bound token (`cnf.jkt`) presented as a bearer token, or a bearer token presented
    /// with the DPoP scheme.
    Binding,
    /// The authorization server says the token is not active (revoked, expired, unknown).
    Inactive,
}

impl TokenError {
    /// The fixed text of the challenge's `error_description`.
    pub fn description(&self) -> &'static str {
        match self {
            Self::Malformed(why) => why,
            Self::Encrypted => "encrypted tokens are not accepted",
            Self::Algorithm => "the token's algorithm is not the signing key's",
            Self::Type => "the token is not an access token",
            Self::UnknownKey => "the token is signed with an unknown key",
            Self::Signature => "the token's signature does not verify",
            Self::Issuer => "the token is from another issuer",
            Self::Audience => "the token is for another resource",
            Self::NoExpiry => "the token has no expiry",
            Self::Expired => "the token has expired",
            Self::NotYetValid => "the token is not valid yet",
            Self::IssuedInFuture => "the token is issued in the future",
            Self::Binding => "the token's binding does not match how it is presented",
            Self::Inactive => "the token is not active",
        }
    }
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

impl std::error::Error for TokenError {}

impl From<TokenError> for Denial {
    fn from(e: TokenError) -> Self {
        Denial::InvalidToken(e.description())
    }
}

/// A signed JWT, taken apart: not yet verified.
#[derive(Debug, Clone)]
pub struct Jwt<'a> {
    /// The JOSE header.
    pub header: Map<String, Value>,
    /// The claims.
    pub claims: Map<String, Value>,
    /// What the signature covers: `header.payload`, as sent.
    pub signing_input: &'a str,
    /// The signature bytes.
    pub signature: Vec<u8>,
}

impl Jwt<'_> {
    /// The header's `kid`, if it names one.
    pub fn kid(&self) -> Option<&str> {
        self.header.get("kid").and_then(Value::as_str)
    }
}

/// Takes `token` apart: three base64url segments (no padding), the first two JSON objects
/// (strictly: no repeated keys, at most 16 levels deep), the whole within [`MAX_TOKEN`].
pub fn split(token: &str) -> Result<Jwt<'_>, TokenError> {
    if token.len() > MAX_TOKEN {
        return Err(TokenError::Malformed("the token is too long"));
    }
    let parts: Vec<&str> = token.splitn(6, '.').collect();
    let (head, body, sig) = match parts.as_slice() {
        [h, b, s] => (*h, *b, *s),
        [_, _, _, _, _] => return Err(TokenError::Encrypted),
        _ => return Err(TokenError::Malformed("the token is not a signed JWT")),
    };
    let header = object(head, "the token's header is not a base64url JSON object")?;
    let claims = object(body, "the token's claims are not a base64url JSON object")?;
    let signature = URL_SAFE_NO_PAD
        .decode(sig)
        .map_err(|_| TokenError::Malformed("the token's signature is not base64url"))?;
    let signing_input = token.get(..head.len() + 1 + body.len()).unwrap_or_default();
    Ok(Jwt { header, claims, signing_input, signature })
}

fn object(segment: &str, why: &'static str) -> Result<Map<String, Value>, TokenError> {
    let bytes = URL_SAFE_NO_PAD.decode(segment).map_err(|_| TokenError::Malformed(why))?;
    strict_object(&bytes, MAX_DEPTH).ok_or(TokenError::Malformed(why))
}

/// What kind of key verifies a token, from its JWK (`kty`, `crv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `kty: RSA`: `RS256`, `RS384`, `RS512`, `PS256`, `PS384`, `PS512`.
    Rsa,
    /// `kty: EC, crv: P-256`: `ES256`.
    EcP256,
    /// `kty: EC, crv: P-384`: `ES384`.
    EcP384,
    /// `kty: OKP, crv: Ed25519`: `EdDSA` (or `Ed25519`).
    Ed25519,
}

impl KeyKind {
    /// The kind of a JWK, or `None` for a key no token of this resource may be verified with
    /// (a symmetric `oct` key among them: a public key set never holds a secret).
    pub fn of_jwk(jwk: &Map<String, Value>) -> Option<Self> {
        let crv = jwk.get("crv").and_then(Value::as_str);
        match (jwk.get("kty").and_then(Value::as_str)?, crv) {
            ("RSA", _) => Some(Self::Rsa),
            ("EC", Some("P-256")) => Some(Self::EcP256),
            ("EC", Some("P-384")) => Some(Self::EcP384),
            ("OKP", Some("Ed25519")) => Some(Self::Ed25519),
            _ => None,
        }
    }

    /// Whether a key of this kind signs with `alg`.
    pub fn signs_with(self, alg: &str) -> bool {
        match self {
            Self::Rsa => matches!(alg, "RS256" | "RS384" | "RS512" | "PS256" | "PS384" | "PS512"),
            Self::EcP256 => alg == "ES256",
            Self::EcP384 => alg == "ES384",
            Self::Ed25519 => matches!(alg, "EdDSA" | "Ed25519"),
        }
    }
}

/// Accepts the header of `jwt` for a key of `kind` whose JWK says `key_alg` (its `alg`, if it
/// has one): the token's `alg` must be one that kind of key signs with, and the key's own
/// `alg` when it names one; `typ`, when present, must be `at+jwt` (RFC 9068 §2.1) or `JWT`.
/// Returns the algorithm to verify with.
pub fn check_header<'j>(
    jwt: &'j Jwt<'_>,
    kind: KeyKind,
    key_alg: Option<&str>,
) -> Result<&'j str, TokenError> {
    let alg = jwt.header.get("alg").and_then(Value::as_str).ok_or(TokenError::Algorithm)?;
    if !kind.signs_with(alg) || key_alg.is_some_and(|k| k != alg) {
        return Err(TokenError::Algorithm);
    }
    match jwt.header.get("typ") {
        None => {}
        Some(Value::String(t))
            if t.eq_ignore_ascii_case("at+jwt")
                || t.eq_ignore_ascii_case("application/at+jwt")
                || t.eq_ignore_ascii_case("jwt") => {}
        Some(_) => return Err(TokenError::Type),
    }
    if jwt.header.contains_key("crit") {
        // No extension this resource understands is critical to it.
        return Err(TokenError::Malformed("the token names critical header extensions"));
    }
    Ok(alg)
}

/// Which audiences a token may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// This resource's canonical URL (the default): `aud` (a string or an array) must contain
    /// it, in any spelling that canonicalizes to it.
    Resource(ResourceUrl),
    /// Any of these exact strings (an authorization server that names resources otherwise).
    OneOf(Vec<String>),
    /// No audience check: any token of the issuer is accepted here, including one issued for
    /// another service (the confused-deputy hole RFC 8707 closes). Only for an authorization
    /// server that cannot put a resource in its tokens.
    Unchecked,
}

/// The rules a token's claims are held to.
#[derive(Debug, Clone)]
pub struct ClaimRules {
    issuer: String,
    audience: Audience,
    skew: Duration,
}

/// What a verified token says about its bearer.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessToken {
    /// `sub`.
    pub subject: Option<String>,
    /// `client_id` (RFC 9068), or else `azp`.
    pub client_id: Option<String>,
    /// `scope` or `scp`.
    pub scopes: Scopes,
    /// `exp`, in seconds since the Unix epoch.
    pub expires_at: u64,
    /// `cnf.jkt`: the thumbprint of the key the token is bound to (RFC 9449 §6.1), if it is.
    pub jkt: Option<String>,
    /// Every claim, for the application to pick from.
    pub claims: Map<String, Value>,
}

impl ClaimRules {
    /// Tokens of `issuer` (compared exactly, RFC 9068 §4), for `resource`, with 60 s of skew.
    pub fn new(issuer: impl Into<String>, resource: ResourceUrl) -> Self {
        Self { issuer: issuer.into(), audience: Audience::Resource(resource), skew: Duration::from_secs(60) }
    }

    /// Which audiences are accepted. Default [`Audience::Resource`]; [`Audience::Unchecked`]
    /// is an explicit choice, never a default.
    pub fn audience(mut self, audience: Audience) -> Self {
        self.audience = audience;
        self
    }

    /// The issuer tokens must name.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// How far the clocks of this server and the authorization server may disagree: `exp`
    /// counts as passed `skew` after it, `nbf` and `iat` as reached `skew` before them.
    /// Default 60 s.
    pub fn skew(mut self, skew: Duration) -> Self {
        self.skew = skew;
        self
    }

    /// Holds `claims` to the rules at `now` (seconds since the Unix epoch, from the caller's
    /// clock): `iss`, `aud`, `exp` (required), `nbf` and `iat` (when present), and the types of
    /// `sub`, `client_id`, `scope`, `cnf`.
    pub fn check(&self, claims: Map<String, Value>, now: u64) -> Result<AccessToken, TokenError> {
        self.check_as(claims, now, Source::Jwt)
    }

    /// Holds claims that came from `source` to the rules. An introspection answer (RFC 7662
    /// §2.2) comes from the authorization server itself, so `iss` and `exp` may be absent
    /// (an answer without `exp` is good until its cache entry ends); `aud` never may, unless
    /// the audience check is off.
    pub(super) fn check_as(
        &self,
        claims: Map<String, Value>,
        now: u64,
        source: Source,
    ) -> Result<AccessToken, TokenError> {
        let iss = claims.get("iss").and_then(Value::as_str);
        let iss_ok = iss == Some(self.issuer.as_str())
            || (source == Source::Introspection && !claims.contains_key("iss"));
        if !iss_ok {
            return Err(TokenError::Issuer);
        }
        if !self.audience_ok(claims.get("aud")) {
            return Err(TokenError::Audience);
        }
        let skew = self.skew.as_secs();
        let exp = match claims.get("exp") {
            None if source == Source::Introspection => u64::MAX,
            None => return Err(TokenError::NoExpiry),
            Some(v) => seconds(v).ok_or(TokenError::Malformed("exp is not a NumericDate"))?,
        };
        if now >= exp.saturating_add(skew) {
            return Err(TokenError::Expired);
        }
        if let Some(v) = claims.get("nbf") {
            let nbf = seconds(v).ok_or(TokenError::Malformed("nbf is not a NumericDate"))?;
            if now.saturating_add(skew) < nbf {
                return Err(TokenError::NotYetValid);
            }
        }
        if let Some(v) = claims.get("iat") {
            let iat = seconds(v).ok_or(TokenError::Malformed("iat is not a NumericDate"))?;
            if iat > now.saturating_add(skew) {
                return Err(TokenError::IssuedInFuture);
            }
        }
        let text = |name: &str, why: &'static str| match claims.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(TokenError::Malformed(why)),
        };
        let subject = text("sub", "sub is not a string")?;
        let client_id = match text("client_id", "client_id is not a string")? {
            Some(id) => Some(id),
            None => text("azp", "azp is not a string")?,
        };
        let scopes = Scopes::from_claim(claims.get("scope"), claims.get("scp"))
            .map_err(|_| TokenError::Malformed("the token's scopes are malformed"))?;
        let jkt = match claims.get("cnf") {
            None => None,
            Some(Value::Object(cnf)) => match cnf.get("jkt") {
                None => None,
                Some(Value::String(j)) => Some(j.clone()),
                Some(_) => return Err(TokenError::Malformed("cnf.jkt is not a string")),
            },
            Some(_) => return Err(TokenError::Malformed("cnf is not an object")),
        };
        Ok(AccessToken { subject, client_id, scopes, expires_at: exp, jkt, claims })
    }

    fn audience_ok(&self, aud: Option<&Value>) -> bool {
        let names: Vec<&str> = match aud {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        match &self.audience {
            Audience::Unchecked => true,
            Audience::OneOf(accepted) => names.iter().any(|n| accepted.iter().any(|a| a == n)),
            Audience::Resource(resource) => names
                .iter()
                .any(|n| *n == resource.as_str() || ResourceUrl::parse(n).is_ok_and(|u| u == *resource)),
        }
    }
}

/// Where claims came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// A signed JWT.
    Jwt,
    /// The authorization server's introspection endpoint.
    Introspection,
}

impl AccessToken {
    /// The [`Caller`](crate::Caller) this token makes: its subject as the identity (for a token
    /// issued to a client alone, `client:` and its client id, so that a client can never share
    /// a user's cursors or sessions by picking that user's name as its id), its scopes as roles, `client_id` and each
    /// claim of `keep` that is a string or a number as attributes, and `peer`.
    pub fn caller(&self, peer: Option<String>, keep: &[&str]) -> crate::Caller {
        let mut caller = crate::Caller::anonymous();
        caller.identity =
            self.subject.clone().or_else(|| self.client_id.as_ref().map(|id| format!("client:{id}")));
        caller.roles = self.scopes.iter().map(str::to_owned).collect();
        caller.peer = peer;
        if let Some(id) = &self.client_id {
            caller.attributes.insert("client_id".into(), id.clone());
        }
        for name in keep {
            let value = match self.claims.get(*name) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => continue,
            };
            caller.attributes.insert((*name).to_owned(), value);
        }
        caller
    }
}

/// A NumericDate (RFC 7519 §2) as whole seconds, rounded down; `None` for a negative, non-finite
/// or non-numeric value.
fn seconds(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    let f = v.as_f64()?;
    (f.is_finite() && f >= 0.0 && f < u64::MAX as f64).then_some(f as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(v: &Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    }

    fn jwt(header: &Value, claims: &Value) -> String {
        format!("{}.{}.{}", b64(header), b64(claims), URL_SAFE_NO_PAD.encode(b"sig"))
    }

    fn resource() -> ResourceUrl {
        ResourceUrl::parse("https://mcp.example.com/mcp").unwrap()
    }

    const NOW: u64 = 1_800_000_000;

    fn claims(extra: Value) -> Map<String, Value> {
        let mut c = json!({"iss": "https://as.example.com", "aud": "https://mcp.example.com/mcp",
                           "exp": NOW + 300, "iat": NOW, "sub": "alice", "client_id": "app",
                           "scope": "tools.read tools.call"});
        if let (Some(c), Value::Object(extra)) = (c.as_object_mut(), extra) {
            for (k, v) in extra {
                if v.is_null() {
                    c.remove(&k);
                } else {
                    c.insert(k, v);
                }
            }
        }
        c.as_object().cloned().unwrap()
    }

    fn rules() -> ClaimRules {
        ClaimRules::new("https://as.example.com", resource())
    }

    #[test]
    fn a_token_is_taken_apart_within_bounds() {
        let t = jwt(&json!({"alg": "ES256", "kid": "k1", "typ": "at+jwt"}), &json!({"sub": "a"}));
        let j = split(&t).unwrap();
        assert_eq!(j.kid(), Some("k1"));
        assert_eq!(j.signature, b"sig");
        assert_eq!(j.signing_input, t.rsplit_once('.').unwrap().0);
        assert_eq!(split("a.b.c.d.e").unwrap_err(), TokenError::Encrypted);
        for bad in ["a.b", "a.b.c.d", "!!.e30.c", "e30.e30.!!", "W10.e30.c"] {
            assert!(matches!(split(bad), Err(TokenError::Malformed(_))), "{bad}");
        }
        // Repeated claims are refused, not resolved one way or the other.
        let dup = format!("e30.{}.c2ln", URL_SAFE_NO_PAD.encode(br#"{"sub":"a","sub":"b"}"#));
        assert!(matches!(split(&dup), Err(TokenError::Malformed(_))));
        let deep = format!(
            "e30.{}.c2ln",
            URL_SAFE_NO_PAD.encode(format!("{{\"a\":{}1{}}}", "[".repeat(64), "]".repeat(64)))
        );
        assert!(matches!(split(&deep), Err(TokenError::Malformed(_))));
        assert!(matches!(
            split(&"a".repeat(MAX_TOKEN + 1)),
            Err(TokenError::Malformed("the token is too long"))
        ));
    }

    #[test]
    fn the_algorithm_comes_from_the_key_never_from_the_token() {
        let check = |h: Value, kind: KeyKind, key_alg: Option<&str>| {
            let token = jwt(&h, &json!({}));
            check_header(&split(&token).unwrap(), kind, key_alg).map(str::to_owned)
        };
        assert_eq!(check(json!({"alg": "ES256"}), KeyKind::EcP256, None).as_deref(), Ok("ES256"));
        assert_eq!(check(json!({"alg": "PS256"}), KeyKind::Rsa, None).as_deref(), Ok("PS256"));
        for alg in ["none", "HS256", "RS256", "ES384", "NONE"] {
            assert_eq!(
                check(json!({"alg": alg}), KeyKind::EcP256, None),
                Err(TokenError::Algorithm),
                "{alg}"
            );
        }
        assert_eq!(check(json!({"alg": "HS256"}), KeyKind::Rsa, None), Err(TokenError::Algorithm));
        assert_eq!(check(json!({}), KeyKind::Rsa, None), Err(TokenError::Algorithm));
        assert_eq!(check(json!({"alg": "RS512"}), KeyKind::Rsa, Some("RS256")), Err(TokenError::Algorithm));
        assert_eq!(
            check(json!({"alg": "RS256", "typ": "dpop+jwt"}), KeyKind::Rsa, None),
            Err(TokenError::Type)
        );
        assert!(check(json!({"alg": "RS256", "crit": ["x"]}), KeyKind::Rsa, None).is_err());
        assert_eq!(KeyKind::of_jwk(json!({"kty": "oct", "k": "c2VjcmV0"}).as_object().unwrap()), None);
        assert_eq!(
            KeyKind::of_jwk(json!({"kty": "EC", "crv": "P-256"}).as_object().unwrap()),
            Some(KeyKind::EcP256)
        );
    }

    #[test]
    fn good_claims_become_an_access_token() {
        let t = rules().check(claims(json!({"cnf": {"jkt": "thumb"}})), NOW).unwrap();
        assert_eq!(t.subject.as_deref(), Some("alice"));
        assert_eq!(t.client_id.as_deref(), Some("app"));
        assert!(t.scopes.covers(["tools.read", "tools.call"]));
        assert_eq!((t.expires_at, t.jkt.as_deref()), (NOW + 300, Some("thumb")));
        let azp = rules().check(claims(json!({"client_id": null, "azp": "other"})), NOW).unwrap();
        assert_eq!(azp.client_id.as_deref(), Some("other"));
    }

    #[test]
    fn the_audience_is_this_resource_unless_that_is_turned_off_by_name() {
        for aud in [json!("https://mcp.example.com/mcp"), json!(["x", "https://MCP.example.com:443/mcp/"])] {
            assert!(rules().check(claims(json!({"aud": aud})), NOW).is_ok(), "{aud}");
        }
        for aud in [
            json!("https://other.example.com/mcp"),
            json!(["https://mcp.example.com/mcp2"]),
            json!(null),
            json!(5),
        ] {
            assert_eq!(
                rules().check(claims(json!({"aud": aud})), NOW).unwrap_err(),
                TokenError::Audience,
                "{aud}"
            );
        }
        let other = claims(json!({"aud": "https://other.example.com"}));
        assert!(rules().audience(Audience::Unchecked).check(other.clone(), NOW).is_ok());
        assert!(rules()
            .audience(Audience::OneOf(vec!["https://other.example.com".into()]))
            .check(other, NOW)
            .is_ok());
    }

    #[test]
    fn issuer_and_times_are_held_to_the_rules_with_the_stated_skew() {
        let check = |extra: Value, now: u64| rules().check(claims(extra), now);
        assert_eq!(check(json!({"iss": "https://as.example.com/"}), NOW).unwrap_err(), TokenError::Issuer);
        assert_eq!(check(json!({"iss": null}), NOW).unwrap_err(), TokenError::Issuer);
        assert_eq!(check(json!({"exp": null}), NOW).unwrap_err(), TokenError::NoExpiry);
        assert!(check(json!({"exp": NOW}), NOW + 59).is_ok(), "within the skew");
        assert_eq!(check(json!({"exp": NOW}), NOW + 60).unwrap_err(), TokenError::Expired);
        assert_eq!(
            check(json!({"exp": -1}), NOW).unwrap_err(),
            TokenError::Malformed("exp is not a NumericDate")
        );
        assert!(check(json!({"exp": (NOW + 10) as f64 + 0.5}), NOW).is_ok());
        assert!(check(json!({"nbf": NOW + 60}), NOW).is_ok());
        assert_eq!(check(json!({"nbf": NOW + 61}), NOW).unwrap_err(), TokenError::NotYetValid);
        assert_eq!(check(json!({"iat": NOW + 61}), NOW).unwrap_err(), TokenError::IssuedInFuture);
        assert!(rules().skew(Duration::ZERO).check(claims(json!({"exp": NOW})), NOW).is_err());
        assert!(matches!(check(json!({"sub": 7}), NOW), Err(TokenError::Malformed(_))));
        assert!(matches!(check(json!({"scope": "a \"b"}), NOW), Err(TokenError::Malformed(_))));
        assert!(matches!(check(json!({"cnf": "x"}), NOW), Err(TokenError::Malformed(_))));
        let t = rules().check(claims(json!({"tenant": "t1", "level": 3, "groups": ["a"]})), NOW).unwrap();
        let c = t.caller(Some("10.0.0.1".into()), &["tenant", "level", "groups", "absent"]);
        assert_eq!((c.identity.as_deref(), c.peer.as_deref()), (Some("alice"), Some("10.0.0.1")));
        assert_eq!(c.roles, ["tools.call", "tools.read"]);
        let attrs: Vec<_> = c.attributes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(attrs, ["client_id=app", "level=3", "tenant=t1"]);
        let machine = rules().check(claims(json!({"sub": null})), NOW).unwrap().caller(None, &[]);
        assert_eq!(
            machine.identity.as_deref(),
            Some("client:app"),
            "a client-credentials token is its client"
        );
        let d: Denial = TokenError::Expired.into();
        assert_eq!(d, Denial::InvalidToken("the token has expired"));
    }
}
