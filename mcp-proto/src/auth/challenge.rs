//! Why a request to a protected resource is refused, and what the refusal says (RFC 6750 §3).

use std::fmt::Write as _;

use super::resource::ProtectedResource;

/// Why a request to a protected resource is refused. Each reason is a fixed text: a refusal
/// never echoes the token or anything else the request sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// The request presents no token this resource takes: `401` with a challenge naming the
    /// metadata and the scopes to obtain, and no `error` (RFC 6750 §3.1: a request without
    /// credentials is not told of an error).
    Missing,
    /// The request is malformed (two headers, a token in the query, an over-long or
    /// ill-formed header): `400 invalid_request`.
    InvalidRequest(&'static str),
    /// The token is expired, revoked, malformed, for another audience or issuer, or its
    /// signature does not verify: `401 invalid_token`.
    InvalidToken(&'static str),
    /// The token is valid but lacks scopes the operation needs: `403 insufficient_scope`,
    /// with every scope to ask for (see [`Scopes::step_up`](super::Scopes::step_up)).
    InsufficientScope(Vec<String>),
    /// The token cannot be checked now (the authorization server's keys or introspection
    /// endpoint cannot be reached): `503`, with no challenge, so that a client retries rather
    /// than start a new authorization. It fails closed: nothing is served.
    Unavailable,
    /// A DPoP proof is missing, malformed, for another request, outside its window or
    /// replayed: `401 invalid_dpop_proof` (RFC 9449 §7.1), in a `DPoP` challenge.
    InvalidProof(&'static str),
    /// The proof lacks the server's current nonce: `401 use_dpop_nonce` (RFC 9449 §9), in a
    /// `DPoP` challenge; the response carries a fresh `DPoP-Nonce`.
    UseDpopNonce,
}

impl Denial {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> u16 {
        match self {
            Self::Missing | Self::InvalidToken(_) | Self::InvalidProof(_) | Self::UseDpopNonce => 401,
            Self::InvalidRequest(_) => 400,
            Self::InsufficientScope(_) => 403,
            Self::Unavailable => 503,
        }
    }

    /// The `error` code of the challenge, where it has one.
    pub fn error_code(&self) -> Option<&'static str> {
        match self {
            Self::Missing | Self::Unavailable => None,
            Self::InvalidRequest(_) => Some("invalid_request"),
            Self::InvalidToken(_) => Some("invalid_token"),
            Self::InsufficientScope(_) => Some("insufficient_scope"),
            Self::InvalidProof(_) => Some("invalid_dpop_proof"),
            Self::UseDpopNonce => Some("use_dpop_nonce"),
        }
    }

    /// The `WWW-Authenticate` value for `resource` (none for [`Denial::Unavailable`]): the
    /// `Bearer` challenge, or the `DPoP` one as well when the resource takes DPoP-bound
    /// tokens, each with `resource_metadata`, the scopes to obtain and the error.
    ///
    /// ```
    /// use mcp_proto::auth::{Denial, ProtectedResource, ResourceUrl};
    /// let url = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
    /// let res = ProtectedResource::new(url, ["https://auth.example.com"]).unwrap()
    ///     .challenge_scopes(["mcp"]).unwrap();
    /// assert_eq!(
    ///     Denial::Missing.www_authenticate(&res).unwrap(),
    ///     "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\""
    /// );
    /// ```
    pub fn www_authenticate(&self, resource: &ProtectedResource) -> Option<String> {
        if matches!(self, Self::Unavailable) {
            return None;
        }
        let scopes: &[String] = match self {
            Self::InsufficientScope(needed) => needed,
            _ => resource.default_challenge_scopes(),
        };
        let mut params = String::new();
        if let Some(code) = self.error_code() {
            let _ = write!(params, "error=\"{code}\", ");
        }
        if let Some(text) = self.description() {
            let _ = write!(params, "error_description=\"{}\", ", quoted(text));
        }
        let _ = write!(params, "resource_metadata=\"{}\"", quoted(&resource.resource().metadata_url()));
        // Scope tokens carry no quote or backslash (they were checked), and offline_access is
        // not a permission of this resource.
        let scopes: Vec<&str> =
            scopes.iter().map(String::as_str).filter(|s| *s != "offline_access").collect();
        if !scopes.is_empty() {
            let _ = write!(params, ", scope=\"{}\"", scopes.join(" "));
        }
        let dpop = format!("DPoP algs=\"{}\", {params}", resource.dpop_algs().join(" "));
        Some(match self {
            // A proof's failure concerns the DPoP scheme alone.
            Self::InvalidProof(_) | Self::UseDpopNonce => dpop,
            _ if resource.dpop_algs().is_empty() => format!("Bearer {params}"),
            _ => format!("Bearer {params}, {dpop}"),
        })
    }

    fn description(&self) -> Option<&'static str> {
        match self {
            Self::InvalidRequest(why) | Self::InvalidToken(why) | Self::InvalidProof(why) => Some(why),
            Self::UseDpopNonce => Some("the DPoP proof must carry the server's nonce"),
            Self::InsufficientScope(_) => Some("the token lacks a scope this request needs"),
            Self::Missing | Self::Unavailable => None,
        }
    }
}

/// `text` as the inside of an RFC 7230 `quoted-string`.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        if c.is_ascii() && !c.is_ascii_control() {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ResourceUrl;

    fn resource() -> ProtectedResource {
        let url = ResourceUrl::parse("https://mcp.example.com/mcp").unwrap();
        ProtectedResource::new(url, ["https://auth.example.com"]).unwrap()
    }

    #[test]
    fn each_refusal_has_its_status_and_code() {
        let all = [
            (Denial::Missing, 401, None),
            (Denial::InvalidRequest("x"), 400, Some("invalid_request")),
            (Denial::InvalidToken("x"), 401, Some("invalid_token")),
            (Denial::InsufficientScope(vec!["a".into()]), 403, Some("insufficient_scope")),
            (Denial::Unavailable, 503, None),
            (Denial::InvalidProof("x"), 401, Some("invalid_dpop_proof")),
            (Denial::UseDpopNonce, 401, Some("use_dpop_nonce")),
        ];
        for (denial, status, code) in all {
            assert_eq!((denial.status(), denial.error_code()), (status, code), "{denial:?}");
        }
        assert_eq!(Denial::Unavailable.www_authenticate(&resource()), None);
    }

    #[test]
    fn challenges_name_the_metadata_the_error_and_every_scope_needed() {
        let meta = "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\"";
        assert_eq!(Denial::Missing.www_authenticate(&resource()).unwrap(), format!("Bearer {meta}"));
        assert_eq!(
            Denial::InvalidToken("the token has expired").www_authenticate(&resource()).unwrap(),
            format!("Bearer error=\"invalid_token\", error_description=\"the token has expired\", {meta}")
        );
        let step_up = Denial::InsufficientScope(vec!["write".into(), "offline_access".into(), "read".into()]);
        assert_eq!(
            step_up.www_authenticate(&resource()).unwrap(),
            format!(
                "Bearer error=\"insufficient_scope\", error_description=\"the token lacks a scope this request needs\", {meta}, scope=\"write read\""
            )
        );
        let dpop = resource().dpop(["ES256", "RS256"]);
        assert_eq!(
            Denial::Missing.www_authenticate(&dpop).unwrap(),
            format!("Bearer {meta}, DPoP algs=\"ES256 RS256\", {meta}")
        );
        assert_eq!(
            Denial::UseDpopNonce.www_authenticate(&dpop).unwrap(),
            format!(
                "DPoP algs=\"ES256 RS256\", error=\"use_dpop_nonce\", error_description=\"the DPoP proof must carry the server's nonce\", {meta}"
            )
        );
    }

    #[test]
    fn quoted_text_cannot_break_out_of_its_quotes() {
        assert_eq!(quoted("a\"b\\c\r\nd"), "a\\\"b\\\\cd");
    }
}
