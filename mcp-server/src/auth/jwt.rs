//! [`JwtVerifier`]: JWT access tokens checked against the keys the authorization server
//! publishes, found through its metadata, cached, and refetched within bounds.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcp_proto::auth::introspection::AnswerCache;
use mcp_proto::auth::keys::{self, KeyPolicy, KeySet, KeyStep, ServerMetadata};
use mcp_proto::auth::token::{AccessToken, ClaimRules, TokenError};
use mcp_proto::auth::Denial;

use super::fetch::{fetch, FetchError, Outgoing, Roots};
use super::{TokenCheck, TokenVerifier};
use crate::handler::BoxFuture;
use crate::runtime::Runtime;

/// How long one request to the authorization server (metadata or key set) may take at most:
/// 5 s by default ([`JwtVerifier::fetch_timeout`]). Past it the fetch counts as failed: tokens
/// the keys held verify keep working, and without keys requests are refused `503`.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Verified tokens remembered, by the SHA-256 of the token: 4096 by default
/// ([`JwtVerifier::cache`]). A token seen again within its TTL is not verified again, so the
/// signature check is paid once per token and per TTL; past the capacity the oldest answer is
/// forgotten.
pub const TOKEN_CACHE: usize = 4096;

/// JWT access tokens (RFC 9068) of one issuer, for one resource.
///
/// The issuer's metadata (RFC 8414, or OpenID discovery: tried in the order the MCP
/// specification gives) names its key set, which is fetched on first use, refreshed after
/// [`KeyPolicy::max_age`] (1 h by default), and fetched again when a token names an unknown
/// `kid` (the issuer rotated its keys), at most once per [`KeyPolicy::floor`] (30 s), however
/// many such tokens come: a flood of made-up key ids costs the issuer one request per floor,
/// and every other caller nothing. One fetch runs at a time, on a task of its own; requests
/// that need its result wait for it, within [`FETCH_TIMEOUT`].
///
/// Each token is held to [`ClaimRules`]: the algorithm of the key (never the token's own
/// choice: `none` and HMAC are refused), `iss`, `aud` (this resource, unless the rules say
/// otherwise), `exp`, `nbf` and `iat` with their skew.
///
/// Fetching goes over `https://` (certificates checked against the Mozilla roots and any
/// [`trust_roots`](Self::trust_roots) adds) or `http://`.
#[derive(Clone)]
pub struct JwtVerifier {
    inner: Arc<Inner>,
}

struct Inner {
    rules: ClaimRules,
    issuer: String,
    /// A key set URL given directly, which skips discovery.
    jwks_uri: Option<String>,
    keys: Mutex<Keys>,
    cache: Mutex<AnswerCache>,
}

struct Keys {
    policy: KeyPolicy,
    fetch_timeout: Duration,
    held: Option<Arc<KeySet>>,
    /// The key set URL discovery found, kept until a fetch from it fails.
    found: Option<String>,
    /// Closed when the fetch under way ends: what waiting requests wait on.
    fetching: Option<async_channel::Receiver<()>>,
    roots: Roots,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier").field("issuer", &self.inner.issuer).finish_non_exhaustive()
    }
}

/// Verifying a token that is not in the cache: at most this many turns of fetching or waiting
/// for keys before it is refused `503`.
const TURNS: usize = 4;

impl JwtVerifier {
    /// Tokens held to `rules`, whose issuer's metadata says where its keys are.
    pub fn new(rules: ClaimRules) -> Self {
        Self::build(rules, None)
    }

    /// Tokens held to `rules`, verified with the key set at `jwks_uri`, without discovery.
    pub fn with_jwks_uri(rules: ClaimRules, jwks_uri: impl Into<String>) -> Self {
        Self::build(rules, Some(jwks_uri.into()))
    }

    fn build(rules: ClaimRules, jwks_uri: Option<String>) -> Self {
        let issuer = rules.issuer().to_owned();
        let keys = Keys {
            policy: KeyPolicy::default(),
            fetch_timeout: FETCH_TIMEOUT,
            held: None,
            found: None,
            fetching: None,
            roots: Roots::default(),
        };
        let cache = AnswerCache::new(TOKEN_CACHE, Duration::from_secs(300), Duration::from_secs(5));
        let inner = Inner { rules, issuer, jwks_uri, keys: Mutex::new(keys), cache: Mutex::new(cache) };
        Self { inner: Arc::new(inner) }
    }

    /// How long each request to the authorization server may take. Default [`FETCH_TIMEOUT`].
    pub fn fetch_timeout(self, timeout: Duration) -> Self {
        self.inner.keys().fetch_timeout = timeout;
        self
    }

    /// Also trusts the certificate authorities in `pem` for `https://` fetches (a private CA),
    /// besides the Mozilla roots. Refused when `pem` holds no certificate.
    pub fn trust_roots(self, pem: &[u8]) -> Result<Self, crate::tls::TlsError> {
        self.inner.keys().roots = Roots::with_pem(pem).ok_or(crate::tls::TlsError::NoCertificate)?;
        Ok(self)
    }

    /// When the keys are refetched: see [`KeyPolicy`]. Default 30 s floor, 1 h age.
    pub fn key_policy(self, policy: KeyPolicy) -> Self {
        self.inner.keys().policy = policy;
        self
    }

    /// Remembers up to `capacity` verified tokens (default [`TOKEN_CACHE`]), each for at most
    /// `ttl` (default 5 min; never past the token's own expiry), and refusals for 5 s.
    pub fn cache(self, capacity: usize, ttl: Duration) -> Self {
        *self.inner.cache() = AnswerCache::new(capacity, ttl, Duration::from_secs(5));
        self
    }
}

impl Inner {
    fn keys(&self) -> std::sync::MutexGuard<'_, Keys> {
        // Every statement that changes the state leaves it whole.
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, AnswerCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn verify(self: Arc<Self>, check: TokenCheck) -> Result<Arc<AccessToken>, Denial> {
        let TokenCheck { token, now, runtime, .. } = check;
        let known = self.cache().get(&token, now).cloned();
        if let Some(known) = known {
            return known.map_err(Denial::from);
        }
        // A token that is no JWT is refused without keys: an unreachable issuer does not
        // turn garbage into a 503, and garbage never waits on a fetch.
        if let Err(e) = mcp_proto::auth::token::split(&token) {
            return Err(e.into());
        }
        let mut unknown = false;
        for _ in 0..TURNS {
            let (step, held, fetching, start) = {
                let mut keys = self.keys();
                let step = keys.policy.step(runtime.now(), unknown);
                let start = (step == KeyStep::Fetch).then(|| {
                    let (done, waiting) = async_channel::bounded::<()>(1);
                    keys.fetching = Some(waiting);
                    done
                });
                (step, keys.held.clone(), keys.fetching.clone(), start)
            };
            if let Some(done) = start {
                // On a task of its own: a request that gives up waiting does not end it.
                let (me, rt) = (self.clone(), runtime.clone());
                runtime.spawn(Box::pin(async move { me.refresh(&rt, done).await }));
            }
            match (step, held, fetching) {
                (KeyStep::Use, Some(keys), _) => match super::verify_jwt(&token, &keys, &self.rules, now) {
                    Err(TokenError::UnknownKey) if !unknown => unknown = true,
                    answer => return self.remember(&token, answer, now),
                },
                // Old keys being refreshed still verify the tokens they signed meanwhile.
                (KeyStep::Fetch, Some(keys), _) if !unknown => {
                    let answer = super::verify_jwt(&token, &keys, &self.rules, now);
                    if answer != Err(TokenError::UnknownKey) {
                        return self.remember(&token, answer, now);
                    }
                    unknown = true;
                }
                (KeyStep::Fetch | KeyStep::Wait, _, Some(done)) => {
                    // Closed, never sent on, when the fetch ends.
                    let _ = done.recv().await;
                    unknown = false;
                }
                // Refetched too recently: what is held decides.
                (KeyStep::Wait, Some(keys), None) => {
                    let answer = super::verify_jwt(&token, &keys, &self.rules, now);
                    return self.remember(&token, answer, now);
                }
                _ => return Err(Denial::Unavailable),
            }
        }
        Err(Denial::Unavailable)
    }

    fn remember(
        &self,
        token: &str,
        answer: Result<AccessToken, TokenError>,
        now: u64,
    ) -> Result<Arc<AccessToken>, Denial> {
        let answer = answer.map(Arc::new);
        // An unknown key is not remembered: the next fetch may bring it.
        if answer != Err(TokenError::UnknownKey) {
            self.cache().put(token, answer.clone(), now);
        }
        answer.map_err(Denial::from)
    }

    /// Fetches the key set, records the outcome, then ends `done`, which wakes the waiters.
    async fn refresh(&self, rt: &Arc<dyn Runtime>, done: async_channel::Sender<()>) {
        let fetched = self.fetch_keys(rt).await;
        let mut keys = self.keys();
        match fetched {
            Ok((set, found)) => {
                tracing::debug!(issuer = %self.issuer, keys = set.len(), "fetched the authorization server's keys");
                keys.held = Some(Arc::new(set));
                keys.found = Some(found);
                keys.policy.fetched(rt.now(), true);
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, error = %e, "cannot fetch the authorization server's keys");
                keys.found = None;
                keys.policy.fetched(rt.now(), false);
            }
        }
        keys.fetching = None;
        drop(keys);
        drop(done);
    }

    async fn fetch_keys(&self, rt: &Arc<dyn Runtime>) -> Result<(KeySet, String), String> {
        let found = self.keys().found.clone();
        let url = match self.jwks_uri.clone().or(found) {
            Some(url) => url,
            None => self.discover(rt).await?,
        };
        let bytes = self.get(rt, &url, keys::MAX_DOCUMENT).await.map_err(|e| format!("{url}: {e}"))?;
        let set = KeySet::parse(&bytes).map_err(|e| format!("{url}: {e}"))?;
        Ok((set, url))
    }

    /// The key set URL from the issuer's metadata: the first of the well-known places that
    /// answers with metadata for this issuer.
    async fn discover(&self, rt: &Arc<dyn Runtime>) -> Result<String, String> {
        let mut failures = Vec::new();
        for url in keys::metadata_urls(&self.issuer) {
            let found = match self.get(rt, &url, keys::MAX_DOCUMENT).await {
                Ok(bytes) => ServerMetadata::parse(&bytes, &self.issuer).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match found {
                Ok(ServerMetadata { jwks_uri: Some(jwks), .. }) => return Ok(jwks),
                Ok(_) => failures.push(format!("{url}: no jwks_uri")),
                Err(e) => failures.push(format!("{url}: {e}")),
            }
        }
        Err(failures.join("; "))
    }

    async fn get(&self, rt: &Arc<dyn Runtime>, url: &str, max: usize) -> Result<Vec<u8>, FetchError> {
        let (timeout, roots) = {
            let keys = self.keys();
            (keys.fetch_timeout, keys.roots.clone())
        };
        fetch(rt, Outgoing { url, form: None, authorization: None, roots: &roots }, max, timeout).await
    }
}

impl TokenVerifier for JwtVerifier {
    fn verify(&self, check: TokenCheck) -> BoxFuture<Result<Arc<AccessToken>, Denial>> {
        Box::pin(self.inner.clone().verify(check))
    }
}
