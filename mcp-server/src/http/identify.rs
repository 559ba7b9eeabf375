//! The application's identify hook ([`ServerBuilder::identify`](crate::ServerBuilder::identify)):
//! who an HTTP request is from, decided from its head before its body is read.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use mcp_proto::{Bound, Caller, ErrorCode, HttpRequestHead, RpcError};

use super::refusal::{error_response, response, retry_after};
use super::{HttpService, McpBody};
use crate::handler::BoxFuture;
use crate::status::HttpRefused;

/// What the identify hook decided: the caller the request is from, `None` for no one it knows
/// (the request goes on as it would without a hook), or a refusal.
pub type Identified = Result<Option<Caller>, IdentityRefusal>;

/// The hook as the server keeps it.
type HookFn = dyn Fn(Arc<HttpRequestHead>) -> BoxFuture<Identified> + Send + Sync;

/// The identify hook of a server, shared by its HTTP endpoints.
#[derive(Clone)]
pub(crate) struct Identify(Arc<HookFn>);

impl Identify {
    pub(crate) fn new<F, Fut>(f: F) -> Self
    where
        F: Fn(Arc<HttpRequestHead>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Identified> + Send + 'static,
    {
        Identify(Arc::new(move |head| Box::pin(f(head))))
    }
}

impl fmt::Debug for Identify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Identify")
    }
}

/// Why the identify hook turned a request away: `401 Unauthorized` (no usable credentials) or
/// `403 Forbidden` (credentials understood, access denied), with a message for the client and,
/// optionally, the `WWW-Authenticate` challenge to send with it.
///
/// The response carries a JSON-RPC error body (`id` null, code `-32600`, the message as given)
/// as every other refusal of the HTTP endpoint does; the message is sent as written, so it must
/// not hold anything the client should not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityRefusal {
    status: u16,
    message: String,
    challenge: Option<String>,
}

impl IdentityRefusal {
    /// `401 Unauthorized`: the request has no credentials the hook accepts. Add the scheme the
    /// client should use with [`with_challenge`](Self::with_challenge) (RFC 9110 §11.6.1 asks
    /// a 401 to carry one).
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self { status: 401, message: message.into(), challenge: None }
    }

    /// `403 Forbidden`: the hook knows who is asking and refuses them.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self { status: 403, message: message.into(), challenge: None }
    }

    /// Sends `challenge` as the response's `WWW-Authenticate` header (for example
    /// `ApiKey realm="mcp"`). A value HTTP cannot carry (a control character such as a line
    /// break) makes the hook's answer unusable: the request is refused 500 instead, and the
    /// error logged.
    pub fn with_challenge(mut self, challenge: impl Into<String>) -> Self {
        self.challenge = Some(challenge.into());
        self
    }

    /// The status sent: 401 or 403.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The message sent in the body.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `WWW-Authenticate` challenge sent, if any.
    pub fn challenge(&self) -> Option<&str> {
        self.challenge.as_deref()
    }

    /// The response that sends it.
    fn response(&self) -> http::Response<McpBody> {
        if let Some(challenge) = &self.challenge {
            if http::HeaderValue::from_str(challenge).is_err() {
                tracing::error!(
                    "the identify hook refused a request with a WWW-Authenticate challenge HTTP cannot \
                     carry (a control character?); answered 500"
                );
                return error_response(&RpcError::misuse());
            }
        }
        let body = RpcError::new(ErrorCode::InvalidRequest, self.message.clone()).to_response(None);
        let mut headers = vec![("content-type", "application/json".to_owned())];
        if let Some(challenge) = &self.challenge {
            headers.push(("www-authenticate", challenge.clone()));
        }
        response(self.status, &headers, McpBody::full(body))
    }
}

impl fmt::Display for IdentityRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused {}: {}", self.status, self.message)
    }
}

impl std::error::Error for IdentityRefusal {}

impl crate::Server {
    /// Whether something identifies this server's HTTP callers: its token verifier (feature
    /// `auth`) or its identify hook.
    pub(crate) fn identifies(&self) -> bool {
        #[cfg(feature = "auth")]
        if self.shared.authorization.get().is_some() {
            return true;
        }
        self.shared.identify.get().is_some()
    }
}

impl HttpService {
    /// Runs the server's identify hook on `head`, on this request's task: the caller it names
    /// (`Ok(None)` without a hook, or when it names none), or the response refusing the
    /// request. Bounded: a hook that panics refuses its own request with 500, one that takes
    /// longer than [`Limits::header_read_timeout`](mcp_proto::Limits::header_read_timeout)
    /// with 503 and `Retry-After`; both are logged and counted
    /// ([`HttpRefusals::identify_failed`](crate::HttpRefusals::identify_failed)).
    pub(super) async fn identify(
        &self,
        hook: &Identify,
        head: &Arc<HttpRequestHead>,
    ) -> Result<Option<Caller>, http::Response<McpBody>> {
        let server = &self.inner.server;
        let rt = &self.inner.rt;
        let deadline = rt.now().checked_add(server.limits().header_timeout());
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| (hook.0)(head.clone())));
        let run = async {
            match started {
                Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
                Err(panic) => Err(panic),
            }
        };
        match crate::runtime::within(rt.as_ref(), deadline, run).await {
            Some(Ok(Ok(caller))) => Ok(caller),
            Some(Ok(Err(refusal))) => {
                server.http_refused(HttpRefused::Unidentified);
                tracing::debug!(status = refusal.status, "the identify hook refused a request");
                Err(refusal.response())
            }
            Some(Err(_)) => {
                server.http_refused(HttpRefused::IdentifyFailed);
                tracing::error!("the identify hook panicked; refused its request with 500");
                Err(error_response(&RpcError::misuse()))
            }
            None => {
                server.http_refused(HttpRefused::IdentifyFailed);
                tracing::warn!(
                    "the identify hook did not answer within header_read_timeout; refused its request with 503"
                );
                let err = RpcError::limit(
                    Bound::Capacity,
                    "the caller could not be identified in time; retry shortly",
                );
                Err(retry_after(error_response(&err)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::Kind;

    #[test]
    fn refusals_carry_status_challenge_and_message() {
        let resp = IdentityRefusal::unauthorized("an API key is required")
            .with_challenge("ApiKey realm=\"mcp\"")
            .response();
        assert_eq!(resp.status(), 401);
        assert_eq!(resp.headers()["www-authenticate"], "ApiKey realm=\"mcp\"");
        let Kind::Full(Some(bytes)) = &resp.body().kind else { panic!("no body") };
        let body: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        assert_eq!(body["error"]["message"], "an API key is required");
        assert_eq!(body["error"]["code"], -32600);
        assert_eq!(IdentityRefusal::forbidden("no").response().status(), 403);
    }

    #[test]
    fn a_challenge_http_cannot_carry_is_a_server_error() {
        let resp = IdentityRefusal::unauthorized("x").with_challenge("a\r\nSet-Cookie: y").response();
        assert_eq!(resp.status(), 500);
        assert!(resp.headers().get("set-cookie").is_none());
    }
}
