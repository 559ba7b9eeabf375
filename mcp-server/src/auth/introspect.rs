//! [`IntrospectionVerifier`]: opaque access tokens checked by asking the authorization server
//! (RFC 7662), the answers cached, and the asking bounded so that a flood of made-up tokens
//! costs the authorization server and the other clients a bounded amount.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcp_proto::auth::introspection::{self, AnswerCache, MAX_ANSWER};
use mcp_proto::auth::token::{AccessToken, ClaimRules, TokenError};
use mcp_proto::auth::Denial;

use super::fetch::{fetch, FetchError, Outgoing, Roots};
use super::{TokenCheck, TokenVerifier, FETCH_TIMEOUT, TOKEN_CACHE};
use crate::handler::BoxFuture;

/// Introspection requests in flight at once, for all clients: 32 by default
/// ([`IntrospectionVerifier::in_flight`]). A request whose token is not cached, arriving when
/// all are taken, is refused `503` with `Retry-After` (it fails closed) rather than queued.
pub const INTROSPECTION_IN_FLIGHT: usize = 32;

/// Introspection requests in flight at once for the tokens of one peer address: 4 by default
/// ([`IntrospectionVerifier::in_flight`]). One client sending made-up tokens as fast as it can
/// holds these at most, and the rest stay for the others. Behind a proxy every client is the
/// proxy's address: raise it there.
pub const INTROSPECTION_PER_PEER: usize = 4;

/// Opaque (or any) access tokens of one authorization server, for one resource, checked at
/// its introspection endpoint.
///
/// Each token not cached is `POST`ed to the endpoint (with the resource server's client
/// credentials when [`client_credentials`](Self::client_credentials) gives them); the answer
/// must be `200` with `active: true`, within [`MAX_ANSWER`] bytes and [`FETCH_TIMEOUT`], and
/// its claims are held to [`ClaimRules`] (the audience included) as a JWT's are. Answers are
/// cached by SHA-256 of the token ([`TOKEN_CACHE`] entries, 5 min, never past `exp`; refusals
/// 5 s). An endpoint that answers `400` for a token (say `unsupported_token_type` for a JWT)
/// refuses that token (`401 invalid_token`); one that cannot be reached, or refuses the resource
/// server's own credentials, makes uncached tokens `503`.
///
/// Fetching goes over `https://` (certificates checked against the Mozilla roots and any
/// [`trust_roots`](Self::trust_roots) adds) or `http://`.
#[derive(Clone)]
pub struct IntrospectionVerifier {
    settings: Settings,
    state: Arc<State>,
}

#[derive(Clone)]
struct Settings {
    rules: ClaimRules,
    endpoint: String,
    authorization: Option<String>,
    timeout: Duration,
    total: usize,
    per_peer: usize,
    roots: Roots,
}

struct State {
    cache: Mutex<AnswerCache>,
    flights: Mutex<Flights>,
}

#[derive(Default)]
struct Flights {
    total: usize,
    by_peer: HashMap<Option<IpAddr>, usize>,
}

impl std::fmt::Debug for IntrospectionVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client secret never reaches a log.
        f.debug_struct("IntrospectionVerifier")
            .field("endpoint", &self.settings.endpoint)
            .finish_non_exhaustive()
    }
}

impl IntrospectionVerifier {
    /// Tokens held to `rules`, asked about at `endpoint` (the authorization server's
    /// `introspection_endpoint`).
    pub fn new(rules: ClaimRules, endpoint: impl Into<String>) -> Self {
        let settings = Settings {
            rules,
            endpoint: endpoint.into(),
            authorization: None,
            timeout: FETCH_TIMEOUT,
            total: INTROSPECTION_IN_FLIGHT,
            per_peer: INTROSPECTION_PER_PEER,
            roots: Roots::default(),
        };
        Self { settings, state: Arc::new(State::new(TOKEN_CACHE, Duration::from_secs(300))) }
    }

    /// Authenticates to the endpoint as the client `id` with `secret` (`client_secret_basic`).
    /// Default none: most authorization servers require it.
    pub fn client_credentials(mut self, id: &str, secret: &str) -> Self {
        self.settings.authorization = Some(introspection::client_basic(id, secret));
        self
    }

    /// Also trusts the certificate authorities in `pem` for an `https://` endpoint (a private
    /// CA), besides the Mozilla roots. Refused when `pem` holds no certificate.
    pub fn trust_roots(mut self, pem: &[u8]) -> Result<Self, crate::tls::TlsError> {
        self.settings.roots = Roots::with_pem(pem).ok_or(crate::tls::TlsError::NoCertificate)?;
        Ok(self)
    }

    /// How long each introspection request may take. Default [`FETCH_TIMEOUT`] (5 s).
    pub fn fetch_timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeout = timeout;
        self
    }

    /// At most `total` introspection requests at once, `per_peer` of them for one peer
    /// address (each at least 1). Defaults [`INTROSPECTION_IN_FLIGHT`] and
    /// [`INTROSPECTION_PER_PEER`].
    pub fn in_flight(mut self, total: usize, per_peer: usize) -> Self {
        self.settings.total = total.max(1);
        self.settings.per_peer = per_peer.max(1);
        self
    }

    /// Remembers up to `capacity` answers (default [`TOKEN_CACHE`]), each for at most `ttl`
    /// (default 5 min; never past the token's `exp`), and refusals for 5 s.
    pub fn cache(mut self, capacity: usize, ttl: Duration) -> Self {
        self.state = Arc::new(State::new(capacity, ttl));
        self
    }
}

impl State {
    fn new(capacity: usize, ttl: Duration) -> Self {
        let cache = AnswerCache::new(capacity, ttl, Duration::from_secs(5));
        Self { cache: Mutex::new(cache), flights: Mutex::default() }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, AnswerCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn flights(&self) -> std::sync::MutexGuard<'_, Flights> {
        self.flights.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A place among the requests in flight, given back when dropped (a client that goes away
/// mid-request gives it back too).
struct Flight {
    state: Arc<State>,
    peer: Option<IpAddr>,
}

impl Flight {
    fn take(state: &Arc<State>, peer: Option<IpAddr>, settings: &Settings) -> Option<Self> {
        let mut flights = state.flights();
        let mine = flights.by_peer.get(&peer).copied().unwrap_or(0);
        if flights.total >= settings.total || mine >= settings.per_peer {
            return None;
        }
        flights.total += 1;
        *flights.by_peer.entry(peer).or_insert(0) += 1;
        Some(Self { state: state.clone(), peer })
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut flights = self.state.flights();
        flights.total = flights.total.saturating_sub(1);
        if let Some(n) = flights.by_peer.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                flights.by_peer.remove(&self.peer);
            }
        }
    }
}

async fn verify(
    settings: Settings,
    state: Arc<State>,
    check: TokenCheck,
) -> Result<Arc<AccessToken>, Denial> {
    let TokenCheck { token, now, runtime, peer } = check;
    let known = state.cache().get(&token, now).cloned();
    if let Some(known) = known {
        return known.map_err(Denial::from);
    }
    let Some(_flight) = Flight::take(&state, peer, &settings) else {
        tracing::debug!(?peer, "introspection requests all taken: refusing 503");
        return Err(Denial::Unavailable);
    };
    let out = Outgoing {
        url: &settings.endpoint,
        form: Some(introspection::request_body(&token)),
        authorization: settings.authorization.clone(),
        roots: &settings.roots,
    };
    let answer = match fetch(&runtime, out, MAX_ANSWER, settings.timeout).await {
        Ok(answer) => answer,
        // The endpoint refused the request for what the token is (RFC 7662 §2.3 points to RFC
        // 6749's errors: `unsupported_token_type`, `invalid_request`): the token is no good
        // here, and saying so lets the client get another. A refusal of our own credentials
        // (401, 403) is the server's fault, not the token's: below, it fails closed.
        Err(FetchError::Status(400)) => {
            let refused = Err(TokenError::Malformed("the introspection endpoint refused the token"));
            state.cache().put(&token, refused.clone(), now);
            return refused.map_err(Denial::from);
        }
        Err(e) => {
            tracing::warn!(endpoint = %settings.endpoint, error = %e, "cannot ask the introspection endpoint");
            return Err(Denial::Unavailable);
        }
    };
    let answer = introspection::check_answer(&settings.rules, &answer, now).map(Arc::new);
    state.cache().put(&token, answer.clone(), now);
    answer.map_err(Denial::from)
}

impl TokenVerifier for IntrospectionVerifier {
    fn verify(&self, check: TokenCheck) -> BoxFuture<Result<Arc<AccessToken>, Denial>> {
        Box::pin(verify(self.settings.clone(), self.state.clone(), check))
    }
}
