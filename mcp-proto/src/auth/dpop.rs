//! DPoP proofs (RFC 9449): a token bound to a key is presented with a proof, signed by that key,
//! for one request, once.
//!
//! [`check_proof`] holds a proof to the request (method, URL, time, the token's hash, the
//! server's nonce when one is required) and computes its key's thumbprint, to be compared with
//! the token's `cnf.jkt`; the layer above verifies the proof's signature with the key the
//! proof carries. [`Replays`] refuses a proof seen before; [`Nonces`] issues and checks the
//! server nonces of §8 without keeping any state.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::challenge::Denial;
use super::resource::ResourceUrl;
use super::token::{split, KeyKind};
use crate::cursor::KeyRing;

/// The longest `jti` accepted, in bytes: 256.
const MAX_JTI: usize = 256;

/// A proof checked against its request; its signature is still to be verified.
#[derive(Debug, Clone)]
pub struct Proof {
    /// The key the proof carries (`jwk`), public members only.
    pub jwk: Map<String, Value>,
    /// What kind of key it is.
    pub kind: KeyKind,
    /// The algorithm to verify with (one [`KeyKind::signs_with`] accepts for it).
    pub alg: String,
    /// What the signature covers.
    pub signing_input: String,
    /// The signature.
    pub signature: Vec<u8>,
    /// The key's JWK thumbprint (RFC 7638, SHA-256, base64url): equal to the token's `cnf.jkt`
    /// when the token is bound to this key.
    pub jkt: String,
    /// The proof's unique id.
    pub jti: String,
    /// When the proof says it was made (Unix seconds), within the window of `now`.
    pub iat: u64,
}

/// How proofs are checked.
#[derive(Debug, Clone)]
pub struct ProofRules {
    window: Duration,
}

impl Default for ProofRules {
    fn default() -> Self {
        Self { window: Duration::from_secs(60) }
    }
}

impl ProofRules {
    /// How far a proof's `iat` may be from now, either way. Default 60 s; a proof older than
    /// that is refused, so [`Replays`] need remember a `jti` only that long.
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// The current window.
    pub fn window_len(&self) -> Duration {
        self.window
    }
}

/// What a proof must match: the request it comes with.
#[derive(Debug, Clone, Copy)]
pub struct ProofTarget<'a> {
    /// The request's method (`htm`).
    pub method: &'a str,
    /// The URL of the request without query and fragment (`htu`): the resource URL for an MCP
    /// request.
    pub url: &'a ResourceUrl,
    /// The access token the proof must be bound to (`ath`).
    pub token: &'a str,
    /// Whether a server nonce is required, and the nonces that are accepted.
    pub nonces: Option<(&'a Nonces, u64)>,
}

/// Holds the proof in the `DPoP` header (`proof`, one header, already bounded by the head
/// limits) to `target` at `now` (Unix seconds): `typ: dpop+jwt`, an asymmetric `alg` its `jwk`
/// signs with, no private key material, `htm`, `htu`, `iat` within the window, `ath`, a `jti`,
/// and the server's nonce when required. Every refusal is `401 invalid_dpop_proof`, or
/// `use_dpop_nonce` when only the nonce is missing or stale.
pub fn check_proof(
    proof: &str,
    target: ProofTarget<'_>,
    rules: &ProofRules,
    now: u64,
) -> Result<Proof, Denial> {
    let bad = Denial::InvalidProof;
    let jwt = split(proof).map_err(|_| bad("the DPoP proof is not a signed JWT"))?;
    if jwt.header.get("typ").and_then(Value::as_str) != Some("dpop+jwt") {
        return Err(bad("the DPoP proof's typ is not dpop+jwt"));
    }
    let Some(Value::Object(jwk)) = jwt.header.get("jwk") else {
        return Err(bad("the DPoP proof carries no jwk"));
    };
    if jwk.contains_key("d") || jwk.contains_key("k") || jwk.contains_key("p") {
        return Err(bad("the DPoP proof's jwk holds private key material"));
    }
    let kind = KeyKind::of_jwk(jwk).ok_or(bad("the DPoP proof's key is not an asymmetric signing key"))?;
    let alg = jwt.header.get("alg").and_then(Value::as_str).unwrap_or_default();
    if !kind.signs_with(alg) {
        return Err(bad("the DPoP proof's alg is not its key's"));
    }
    let claims = &jwt.claims;
    let text = |name: &str| claims.get(name).and_then(Value::as_str);
    if text("htm") != Some(target.method) {
        return Err(bad("the DPoP proof is for another method"));
    }
    let htu = text("htu").unwrap_or_default();
    let htu = htu.split(['?', '#']).next().unwrap_or_default();
    if ResourceUrl::parse(htu).ok().as_ref() != Some(target.url) {
        return Err(bad("the DPoP proof is for another URL"));
    }
    let iat = claims.get("iat").and_then(Value::as_u64).ok_or(bad("the DPoP proof has no iat"))?;
    let window = rules.window.as_secs();
    if iat > now.saturating_add(window) || now > iat.saturating_add(window) {
        return Err(bad("the DPoP proof is outside its time window"));
    }
    if text("ath") != Some(ath(target.token).as_str()) {
        return Err(bad("the DPoP proof is not bound to this access token"));
    }
    let jti = text("jti")
        .filter(|j| !j.is_empty() && j.len() <= MAX_JTI)
        .ok_or(bad("the DPoP proof has no usable jti"))?;
    if let Some((nonces, at)) = target.nonces {
        if !text("nonce").is_some_and(|n| nonces.accepts(n, at)) {
            return Err(Denial::UseDpopNonce);
        }
    }
    let jkt = thumbprint(jwk).ok_or(bad("the DPoP proof's jwk lacks a required member"))?;
    Ok(Proof {
        jwk: jwk.clone(),
        kind,
        alg: alg.to_owned(),
        signing_input: jwt.signing_input.to_owned(),
        signature: jwt.signature.clone(),
        jkt,
        jti: jti.to_owned(),
        iat,
    })
}

/// `ath`: base64url(SHA-256(token)).
pub fn ath(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(token.as_bytes()))
}

/// The JWK thumbprint of `jwk` (RFC 7638): SHA-256 of its required members, as JSON in
/// lexicographic order without white space, base64url. `None` when one is missing or not a
/// string.
pub fn thumbprint(jwk: &Map<String, Value>) -> Option<String> {
    let members: &[&str] = match jwk.get("kty").and_then(Value::as_str)? {
        "RSA" => &["e", "kty", "n"],
        "EC" => &["crv", "kty", "x", "y"],
        "OKP" => &["crv", "kty", "x"],
        _ => return None,
    };
    let mut json = String::from("{");
    for (i, name) in members.iter().enumerate() {
        let value = jwk.get(*name).and_then(Value::as_str)?;
        if i > 0 {
            json.push(',');
        }
        json.push_str(&serde_json::to_string(name).ok()?);
        json.push(':');
        json.push_str(&serde_json::to_string(value).ok()?);
    }
    json.push('}');
    Some(URL_SAFE_NO_PAD.encode(Sha256::digest(json.as_bytes())))
}

/// The proofs seen within the window, so that none is accepted twice (RFC 9449 §11.1).
///
/// Holds at most `capacity` proofs (a 16-byte digest of key and `jti` each); each is forgotten
/// once the window has passed since it was admitted, since [`check_proof`] refuses it by then
/// anyway. When every slot holds a proof still in its window, the oldest admitted is forgotten
/// early, and from then on no proof made at or before its `iat` is admitted: a forgotten proof
/// can never come back, and a client making a fresh proof per request (as RFC 9449 asks) is not
/// troubled unless the cache turns over within a second. Such a proof is refused with
/// [`Denial::Unavailable`] (`503`, retry with a new proof), since it cannot be told from a
/// replay. One holder of a valid token flooding proofs thus shortens everyone's window to the
/// present, and can refuse no fresh proof of another client for longer than it keeps the whole
/// cache turning over each second.
#[derive(Debug)]
pub struct Replays {
    capacity: usize,
    window: u64,
    order: VecDeque<Remembered>,
    seen: HashSet<[u8; 16]>,
    /// The latest `iat` of a proof forgotten early: none at or before it is admitted.
    floor: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Remembered {
    until: u64,
    iat: u64,
    key: [u8; 16],
}

impl Replays {
    /// Room for `capacity` proofs (at least one) per `window` (the [`ProofRules::window`]).
    pub fn new(capacity: usize, window: Duration) -> Self {
        Self {
            capacity: capacity.max(1),
            window: window.as_secs(),
            order: VecDeque::new(),
            seen: HashSet::new(),
            floor: None,
        }
    }

    /// Admits `proof` at `now` (Unix seconds): `Ok` the first time; a replay is
    /// `invalid_dpop_proof`, a proof no newer than one forgotten early is
    /// [`Denial::Unavailable`].
    pub fn admit(&mut self, proof: &Proof, now: u64) -> Result<(), Denial> {
        while let Some(first) = self.order.front() {
            if first.until > now {
                break;
            }
            let key = first.key;
            self.order.pop_front();
            self.seen.remove(&key);
        }
        let key = Self::key(&proof.jkt, &proof.jti);
        if self.seen.contains(&key) {
            return Err(Denial::InvalidProof("the DPoP proof was used before"));
        }
        let too_old = |floor: Option<u64>| floor.is_some_and(|f| proof.iat <= f);
        if too_old(self.floor) {
            return Err(Denial::Unavailable);
        }
        if self.seen.len() >= self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.seen.remove(&oldest.key);
                self.floor = Some(self.floor.map_or(oldest.iat, |f| f.max(oldest.iat)));
            }
            if too_old(self.floor) {
                return Err(Denial::Unavailable);
            }
        }
        self.seen.insert(key);
        // The window on both sides of `iat`, so a proof is remembered as long as it is valid.
        let until = now.saturating_add(self.window.saturating_mul(2));
        self.order.push_back(Remembered { until, iat: proof.iat, key });
        Ok(())
    }

    /// How many proofs are remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The digest a proof is remembered by: its key's thumbprint and its `jti` (ids are unique
    /// per key, RFC 9449 §4.2), so that one client cannot spend another's.
    pub fn key(jkt: &str, jti: &str) -> [u8; 16] {
        let mut h = Sha256::new();
        h.update(jkt.as_bytes());
        h.update([0]);
        h.update(jti.as_bytes());
        let mut out = [0; 16];
        out.copy_from_slice(h.finalize().get(..16).unwrap_or(&[0; 16]));
        out
    }
}

/// Server nonces (RFC 9449 §8) without state: a nonce names the period it was issued in,
/// sealed with the server's key ring, and is accepted in that period and the next. Replicas
/// sharing the ring accept each other's.
#[derive(Debug, Clone)]
pub struct Nonces {
    keys: KeyRing,
    period: u64,
}

const NONCE_DOMAIN: &str = "dpop-nonce";

impl Nonces {
    /// Nonces sealed with `keys`, each good for one to two `period`s (at least 1 s).
    pub fn new(keys: KeyRing, period: Duration) -> Self {
        Self { keys, period: period.as_secs().max(1) }
    }

    /// The nonce to hand out at `now` (Unix seconds), in a `DPoP-Nonce` header.
    pub fn issue(&self, now: u64) -> String {
        self.keys.sign_token(NONCE_DOMAIN, &(now / self.period).to_be_bytes())
    }

    /// Whether `nonce` was issued by [`issue`](Self::issue) in this period or the last.
    pub fn accepts(&self, nonce: &str, now: u64) -> bool {
        let Some(slot) = self.keys.verify_token(NONCE_DOMAIN, nonce) else { return false };
        let Ok(slot) = <[u8; 8]>::try_from(slot.as_slice()) else { return false };
        let (slot, current) = (u64::from_be_bytes(slot), now / self.period);
        slot == current || slot.saturating_add(1) == current
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_800_000_000;

    fn b64(v: &Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    }

    fn jwk() -> Value {
        json!({"kty": "EC", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
               "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})
    }

    fn proof(header: Value, claims: Value) -> String {
        format!("{}.{}.{}", b64(&header), b64(&claims), URL_SAFE_NO_PAD.encode(b"sig"))
    }

    fn good_claims(url: &str) -> Value {
        json!({"htm": "POST", "htu": url, "iat": NOW, "jti": "j1", "ath": ath("tok")})
    }

    fn target(url: &ResourceUrl) -> ProofTarget<'_> {
        ProofTarget { method: "POST", url, token: "tok", nonces: None }
    }

    fn with(claims: Value, change: Value) -> Value {
        let mut c = claims;
        for (k, v) in change.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    #[test]
    fn a_proof_for_this_request_is_accepted_with_its_keys_thumbprint() {
        let url = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk()});
        let claims = with(good_claims("https://MCP.example.com/mcp?x=1"), json!({}));
        let p = check_proof(&proof(header, claims), target(&url), &ProofRules::default(), NOW + 30).unwrap();
        assert_eq!((p.kind, p.alg.as_str(), p.jti.as_str()), (KeyKind::EcP256, "ES256", "j1"));
        assert_eq!(p.jkt, thumbprint(jwk().as_object().unwrap()).unwrap());
    }

    /// RFC 7638 §3.1's example key and thumbprint.
    #[test]
    fn thumbprints_are_those_of_rfc_7638() {
        let key = json!({"kty": "RSA", "e": "AQAB", "alg": "RS256", "kid": "2011-04-29",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"});
        assert_eq!(
            thumbprint(key.as_object().unwrap()).unwrap(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
        assert_eq!(thumbprint(json!({"kty": "EC", "crv": "P-256"}).as_object().unwrap()), None);
    }

    #[test]
    fn proofs_for_another_request_or_key_or_time_are_refused() {
        let url = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        let rules = ProofRules::default();
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk()});
        let claims = good_claims("https://mcp.example.com/mcp");
        let cases = [
            (json!({"typ": "jwt", "alg": "ES256", "jwk": jwk()}), claims.clone()),
            (json!({"typ": "dpop+jwt", "alg": "HS256", "jwk": jwk()}), claims.clone()),
            (json!({"typ": "dpop+jwt", "alg": "none", "jwk": jwk()}), claims.clone()),
            (json!({"typ": "dpop+jwt", "alg": "ES256"}), claims.clone()),
            (
                json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": with(jwk(), json!({"d": "secret"}))}),
                claims.clone(),
            ),
            (
                json!({"typ": "dpop+jwt", "alg": "HS256", "jwk": {"kty": "oct", "k": "c2VjcmV0"}}),
                claims.clone(),
            ),
            (header.clone(), with(claims.clone(), json!({"htm": "GET"}))),
            (header.clone(), with(claims.clone(), json!({"htu": "https://mcp.example.com/other"}))),
            (header.clone(), with(claims.clone(), json!({"iat": NOW - 61}))),
            (header.clone(), with(claims.clone(), json!({"iat": NOW + 61}))),
            (header.clone(), with(claims.clone(), json!({"ath": ath("another token")}))),
            (header.clone(), with(claims.clone(), json!({"jti": ""}))),
            (header.clone(), with(claims.clone(), json!({"jti": "j".repeat(MAX_JTI + 1)}))),
        ];
        for (h, c) in cases {
            let r = check_proof(&proof(h.clone(), c.clone()), target(&url), &rules, NOW);
            assert!(matches!(r, Err(Denial::InvalidProof(_))), "{h} {c}: {r:?}");
        }
        assert!(matches!(check_proof("x.y", target(&url), &rules, NOW), Err(Denial::InvalidProof(_))));
    }

    #[test]
    fn a_proof_is_accepted_once_and_forgotten_after_its_window() {
        let url = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk()});
        let p =
            check_proof(&proof(header, good_claims(url.as_str())), target(&url), &ProofRules::default(), NOW)
                .unwrap();
        assert_eq!(p.iat, NOW);
        let mut seen = Replays::new(2, Duration::from_secs(60));
        assert_eq!(seen.admit(&p, NOW), Ok(()));
        assert!(matches!(seen.admit(&p, NOW + 1), Err(Denial::InvalidProof(_))));
        let mut other = p.clone();
        other.jkt = "another key".into();
        assert_eq!(seen.admit(&other, NOW + 1), Ok(()), "one key's jti is not another's");
        assert_eq!(seen.admit(&p, NOW + 119), Err(Denial::InvalidProof("the DPoP proof was used before")));
        let mut later = p.clone();
        later.jti = "j3".into();
        later.iat = NOW + 121;
        assert_eq!(seen.admit(&later, NOW + 121), Ok(()), "the first two have left their window");
        assert_eq!(seen.len(), 1);
    }

    #[test]
    fn a_full_cache_forgets_its_oldest_and_never_admits_it_again() {
        let base = Proof {
            jwk: Map::new(),
            kind: KeyKind::EcP256,
            alg: "ES256".into(),
            signing_input: String::new(),
            signature: Vec::new(),
            jkt: "k".into(),
            jti: String::new(),
            iat: NOW,
        };
        let proof = |jti: &str, iat: u64| Proof { jti: jti.into(), iat, ..base.clone() };
        let mut seen = Replays::new(2, Duration::from_secs(60));
        assert_eq!(seen.admit(&proof("a", NOW - 5), NOW), Ok(()));
        assert_eq!(seen.admit(&proof("b", NOW - 3), NOW), Ok(()));
        // Full: `a` is forgotten, so nothing made at or before its time is admitted.
        assert_eq!(seen.admit(&proof("c", NOW), NOW), Ok(()));
        assert_eq!(seen.len(), 2);
        assert_eq!(seen.admit(&proof("a", NOW - 5), NOW), Err(Denial::Unavailable), "the forgotten proof");
        assert_eq!(seen.admit(&proof("d", NOW - 6), NOW), Err(Denial::Unavailable));
        assert!(matches!(seen.admit(&proof("c", NOW), NOW), Err(Denial::InvalidProof(_))));
        // A proof as old as the one a full cache must forget is refused with it.
        assert_eq!(seen.admit(&proof("e", NOW - 3), NOW), Err(Denial::Unavailable));
        assert_eq!(seen.admit(&proof("f", NOW + 1), NOW + 1), Ok(()), "a fresh proof still is");
    }

    #[test]
    fn nonces_hold_for_their_period_and_the_next() {
        let url = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        let nonces = Nonces::new(KeyRing::new([3; 32]), Duration::from_secs(60));
        let n = nonces.issue(NOW);
        assert!(nonces.accepts(&n, NOW) && nonces.accepts(&n, NOW + 60));
        assert!(!nonces.accepts(&n, NOW + 180), "stale");
        assert!(!Nonces::new(KeyRing::new([4; 32]), Duration::from_secs(60)).accepts(&n, NOW), "another key");
        let cursor = KeyRing::new([3; 32]).sign_token("cursor", &(NOW / 60).to_be_bytes());
        assert!(!nonces.accepts(&cursor, NOW), "a token of another use");
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk()});
        let needs = ProofTarget { nonces: Some((&nonces, NOW)), ..target(&url) };
        let without = proof(header.clone(), good_claims(url.as_str()));
        assert_eq!(
            check_proof(&without, needs, &ProofRules::default(), NOW).unwrap_err(),
            Denial::UseDpopNonce
        );
        let with_nonce = proof(header, with(good_claims(url.as_str()), json!({"nonce": n})));
        assert!(check_proof(&with_nonce, needs, &ProofRules::default(), NOW).is_ok());
    }
}
