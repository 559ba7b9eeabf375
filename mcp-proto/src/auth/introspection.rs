//! Opaque tokens: the authorization server's introspection answer (RFC 7662) and a bounded
//! cache of answers, keyed by a digest of the token so that the token itself is never kept.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::token::{AccessToken, ClaimRules, Source, TokenError};
use crate::json::strict_object;

/// The largest introspection answer read, in bytes: 64 KiB. A larger one is refused as
/// malformed before it is parsed.
pub const MAX_ANSWER: usize = 64 * 1024;

/// The body of an introspection request for `token` (`application/x-www-form-urlencoded`).
pub fn request_body(token: &str) -> String {
    let mut body = String::from("token=");
    form_encode(&mut body, token);
    body.push_str("&token_type_hint=access_token");
    body
}

/// The `Authorization` value by which a resource server authenticates to the introspection
/// endpoint with a client id and secret (`client_secret_basic`, RFC 6749 §2.3.1: each
/// form-encoded, then joined with `:` and base64-encoded).
///
/// ```
/// use mcp_proto::auth::introspection::client_basic;
/// assert_eq!(client_basic("rs", "s:p"), "Basic cnM6cyUzQXA=");
/// ```
pub fn client_basic(id: &str, secret: &str) -> String {
    use base64::Engine as _;
    let mut pair = String::new();
    form_encode(&mut pair, id);
    pair.push(':');
    form_encode(&mut pair, secret);
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))
}

fn form_encode(out: &mut String, text: &str) {
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// Reads an introspection answer: `active` must be `true`; then the claims are held to
/// `rules` (audience included) as a JWT's are, except that `iss` and `exp` may be absent.
pub fn check_answer(rules: &ClaimRules, answer: &[u8], now: u64) -> Result<AccessToken, TokenError> {
    if answer.len() > MAX_ANSWER {
        return Err(TokenError::Malformed("the introspection answer is too large"));
    }
    let mut claims = strict_object(answer, 16)
        .ok_or(TokenError::Malformed("the introspection answer is not a strict JSON object"))?;
    if claims.remove("active") != Some(Value::Bool(true)) {
        return Err(TokenError::Inactive);
    }
    rules.check_as(claims, now, Source::Introspection)
}

/// What an [`AnswerCache`] keeps for a token: the verified token, shared, or why it was
/// refused.
pub type Answer = Result<Arc<AccessToken>, TokenError>;

/// Introspection answers kept for a while, so that a client's every request does not cost a
/// round trip to the authorization server.
///
/// At most `capacity` answers (the oldest is dropped for a new one), each for `ttl` and never
/// past the token's `exp`; a refusal is kept for a shorter `negative_ttl`, so a flood of made-up
/// tokens is answered from here too. Keyed by SHA-256 of the token (only the token last looked
/// up is kept, beside its digest), and an answer is shared, not copied, with each request that
/// finds it.
#[derive(Debug)]
pub struct AnswerCache {
    capacity: usize,
    ttl: Duration,
    negative_ttl: Duration,
    entries: HashMap<[u8; 32], (u64, Answer)>,
    order: VecDeque<[u8; 32]>,
    /// The token last looked up and its digest: a client sends the same token on every
    /// request, and hashing it again (~1 KB) was most of what a cached answer cost.
    recent: Option<(Box<str>, [u8; 32])>,
}

impl AnswerCache {
    /// Room for `capacity` answers, kept `ttl` (refusals `negative_ttl`).
    pub fn new(capacity: usize, ttl: Duration, negative_ttl: Duration) -> Self {
        Self { capacity, ttl, negative_ttl, entries: HashMap::new(), order: VecDeque::new(), recent: None }
    }

    /// The answer kept for `token` at `now` (Unix seconds), if one is.
    pub fn get(&mut self, token: &str, now: u64) -> Option<&Answer> {
        let key = self.key(token);
        self.entries.get(&key).filter(|(until, _)| now < *until).map(|(_, answer)| answer)
    }

    /// The digest of `token`, from [`recent`](Self::recent) when it is the same token.
    fn key(&mut self, token: &str) -> [u8; 32] {
        match &self.recent {
            Some((last, key)) if **last == *token => *key,
            _ => {
                let key = digest(token);
                self.recent = Some((token.into(), key));
                key
            }
        }
    }

    /// Keeps `answer` for `token`, given at `now`.
    pub fn put(&mut self, token: &str, answer: Answer, now: u64) {
        if self.capacity == 0 {
            return;
        }
        let until = match &answer {
            Ok(t) => now.saturating_add(self.ttl.as_secs()).min(t.expires_at),
            Err(_) => now.saturating_add(self.negative_ttl.as_secs()),
        };
        let key = self.key(token);
        if self.entries.insert(key, (until, answer)).is_none() {
            self.order.push_back(key);
        }
        while self.entries.len() > self.capacity {
            let Some(old) = self.order.pop_front() else { break };
            self.entries.remove(&old);
        }
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::token::Audience;
    use crate::auth::ResourceUrl;
    use serde_json::json;

    const NOW: u64 = 1_800_000_000;

    fn rules() -> ClaimRules {
        ClaimRules::new("https://as.example.com", ResourceUrl::parse("https://mcp.example.com/mcp").unwrap())
    }

    #[test]
    fn an_active_answer_for_this_resource_is_a_token() {
        let answer =
            json!({"active": true, "aud": "https://mcp.example.com/mcp", "sub": "bob", "scope": "a b"});
        let t = check_answer(&rules(), answer.to_string().as_bytes(), NOW).unwrap();
        assert_eq!((t.subject.as_deref(), t.expires_at), (Some("bob"), u64::MAX));
        assert!(t.scopes.covers(["a", "b"]));
        assert!(!t.claims.contains_key("active"));
    }

    #[test]
    fn inactive_foreign_or_malformed_answers_are_refusals() {
        let check = |v: Value| check_answer(&rules(), v.to_string().as_bytes(), NOW);
        let aud = "https://mcp.example.com/mcp";
        assert_eq!(check(json!({"active": false})).unwrap_err(), TokenError::Inactive);
        assert_eq!(check(json!({"active": "true", "aud": aud})).unwrap_err(), TokenError::Inactive);
        assert_eq!(
            check(json!({"active": true})).unwrap_err(),
            TokenError::Audience,
            "no audience is not this one"
        );
        assert_eq!(
            check(json!({"active": true, "aud": aud, "iss": "https://evil"})).unwrap_err(),
            TokenError::Issuer
        );
        assert_eq!(
            check(json!({"active": true, "aud": aud, "exp": NOW - 100})).unwrap_err(),
            TokenError::Expired
        );
        assert!(rules()
            .audience(Audience::Unchecked)
            .check_as(Default::default(), NOW, Source::Introspection)
            .is_ok());
        assert!(matches!(check_answer(&rules(), b"[1]", NOW), Err(TokenError::Malformed(_))));
        assert!(matches!(
            check_answer(&rules(), br#"{"active":true,"active":true}"#, NOW),
            Err(TokenError::Malformed(_))
        ));
        assert!(matches!(
            check_answer(&rules(), &vec![b' '; MAX_ANSWER + 1], NOW),
            Err(TokenError::Malformed(_))
        ));
    }

    #[test]
    fn the_request_body_encodes_the_token() {
        assert_eq!(request_body("a+b/c="), "token=a%2Bb%2Fc%3D&token_type_hint=access_token");
    }

    #[test]
    fn answers_are_kept_within_their_bounds() {
        let aud = "https://mcp.example.com/mcp";
        let good = |exp: u64| {
            let answer = json!({"active": true, "aud": aud, "sub": "bob", "exp": exp});
            check_answer(&rules(), answer.to_string().as_bytes(), NOW).map(Arc::new)
        };
        let mut cache = AnswerCache::new(2, Duration::from_secs(60), Duration::from_secs(5));
        cache.put("t1", good(NOW + 600), NOW);
        cache.put("t2", good(NOW + 10), NOW);
        cache.put("bad", Err(TokenError::Inactive), NOW);
        assert_eq!(cache.len(), 2, "the oldest went");
        assert!(cache.get("t1", NOW).is_none());
        assert!(cache.get("t2", NOW + 9).is_some_and(Result::is_ok));
        assert!(cache.get("t2", NOW + 10).is_none(), "never past the token's exp");
        assert!(cache.get("bad", NOW + 4).is_some_and(Result::is_err));
        assert!(cache.get("bad", NOW + 5).is_none(), "a refusal is kept briefly");
        let mut none = AnswerCache::new(0, Duration::from_secs(60), Duration::from_secs(5));
        none.put("t", good(NOW + 600), NOW);
        assert!(none.is_empty());
    }
}
