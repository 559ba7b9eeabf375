//! What the HTTP service asks of an [`Authorization`]: the metadata document for its
//! well-known paths, and the caller a request's token makes (or the refusal to answer).

use std::sync::Arc;

use http::{Method, Response};
use mcp_proto::auth::credentials::{credential, Scheme};
use mcp_proto::auth::token::TokenError;
use mcp_proto::auth::Denial;
use mcp_proto::Caller;

use super::{Authorization, TokenCheck};
use crate::http::refusal::response;
use crate::http::McpBody;
use crate::runtime::Runtime;

/// Whether a request was forwarded by another replica of the cluster, which vouched for it with
/// a single-use token ([`cluster::forward`](crate::cluster::forward)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Forwarded {
    /// From the client itself.
    Not,
    /// Through a replica that admitted its token and proof first.
    Vouched,
}

impl Authorization {
    /// The answer to a request for `path` when it is one of this resource's metadata paths
    /// (RFC 9728 §3: the path-inserted well-known URL, or the bare prefix): the document for
    /// `GET` and `HEAD`, `405` otherwise. `None` for any other path.
    pub(crate) fn metadata(&self, method: &Method, path: &str) -> Option<Response<McpBody>> {
        if !self.resource.resource().is_metadata_path(path) {
            return None;
        }
        if method != Method::GET && method != Method::HEAD {
            return Some(response(405, &[("allow", "GET, HEAD".to_owned())], McpBody::empty()));
        }
        let headers = [
            ("content-type", "application/json".to_owned()),
            // Public metadata: a browser-based client reads it from any origin.
            ("access-control-allow-origin", "*".to_owned()),
            ("cache-control", "max-age=3600".to_owned()),
        ];
        let body =
            if method == Method::HEAD { McpBody::empty() } else { McpBody::full(self.document.clone()) };
        Some(response(200, &headers, body))
    }

    /// The caller the request's access token makes, or the response refusing it: `401` without
    /// a token (or with a bad one), `400` for a malformed `Authorization` or a token in the
    /// query, `503` when the token cannot be checked now.
    ///
    /// A request `from` another replica is checked in full again but for its DPoP proof's
    /// replay claim, which that replica made: the same proof claimed twice would refuse every
    /// forwarded request.
    pub(crate) async fn caller(
        &self,
        parts: &http::request::Parts,
        runtime: &Arc<dyn Runtime>,
        peer: Option<std::net::IpAddr>,
        from: Forwarded,
    ) -> Result<Caller, Response<McpBody>> {
        let values: Vec<&[u8]> =
            parts.headers.get_all(http::header::AUTHORIZATION).iter().map(|v| v.as_bytes()).collect();
        let presented = credential(&values, parts.uri.query()).map_err(|d| self.deny(&d))?;
        let now = crate::runtime::unix_ms() / 1000;
        let dpop = !self.resource.dpop_algs().is_empty();
        let presented = match presented {
            Some(c) if c.scheme == Scheme::Bearer || dpop => c,
            // Without DPoP configured a DPoP-bound token is not taken: such a client is told
            // what is (RFC 9449 §7.1 leaves a resource without DPoP to challenge for Bearer).
            _ => return Err(self.deny(&Denial::Missing)),
        };
        // The proof's own checks cost only parsing: done before the token is looked at.
        let proof = match presented.scheme {
            Scheme::Dpop => Some(
                self.proofs
                    .check(&self.resource, &parts.headers, parts.method.as_str(), presented.token, now)
                    .map_err(|d| self.deny(&d))?,
            ),
            Scheme::Bearer => None,
        };
        let check = TokenCheck { token: presented.token.into(), now, runtime: runtime.clone(), peer };
        let token = self.verifier.verify(check).await.map_err(|d| self.deny(&d))?;
        match (&proof, token.jkt.as_deref()) {
            (None, None) => {}
            (Some(proof), Some(jkt)) => {
                self.proofs.admit(proof, jkt, now, runtime, from).await.map_err(|d| self.deny(&d))?
            }
            // A token bound to a key (RFC 9449 §6) is worthless without the proof of that key,
            // and a bearer token is not made a bound one by the scheme it is sent with.
            _ => return Err(self.deny(&TokenError::Binding.into())),
        }
        let keep: Vec<&str> = self.keep.iter().map(String::as_str).collect();
        Ok(token.caller(None, &keep))
    }

    /// The response refusing a request for `denial`: its status, its challenge, and a small
    /// OAuth error body. Nothing the request sent is echoed.
    pub(crate) fn deny(&self, denial: &Denial) -> Response<McpBody> {
        tracing::debug!(
            status = denial.status(),
            error = denial.error_code(),
            "refused a request's access token"
        );
        let mut headers = vec![("content-type", "application/json".to_owned())];
        if let Some(challenge) = denial.www_authenticate(&self.resource) {
            headers.push(("www-authenticate", challenge));
        }
        if matches!(denial, Denial::Unavailable) {
            headers.push(("retry-after", "5".to_owned()));
        }
        if matches!(denial, Denial::UseDpopNonce) {
            if let Some(nonce) = self.proofs.nonce(crate::runtime::unix_ms() / 1000) {
                headers.push(("dpop-nonce", nonce));
            }
        }
        // RFC 6750 §3.1: a request without credentials is not told of an error.
        let code = match denial {
            Denial::Missing => return response(401, &headers[1..], McpBody::empty()),
            Denial::Unavailable => "temporarily_unavailable",
            _ => denial.error_code().unwrap_or("invalid_request"),
        };
        let body = serde_json::json!({ "error": code }).to_string();
        response(denial.status(), &headers, McpBody::full(body))
    }
}
