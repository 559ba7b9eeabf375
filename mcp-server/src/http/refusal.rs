//! The responses the HTTP layer builds itself: an engine or transport refusal, this layer's own
//! refusals by blame, the cluster's 429 and 503 with `Retry-After`, and the closing mark.

use http::{HeaderName, HeaderValue, Response, StatusCode};

use super::McpBody;
use crate::status::HttpRefused;
use mcp_proto::http::{HttpRefusal, RefusalKind};
use mcp_proto::{Bound, Era, RpcError};

/// A response with the engine's (or a refusal's) status and headers. A header that cannot be
/// sent (never produced by this crate) is dropped and logged rather than failing the response.
pub(crate) fn response(status: u16, headers: &[(&'static str, String)], body: McpBody) -> Response<McpBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in headers {
        match (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            (Ok(name), Ok(value)) => {
                resp.headers_mut().append(name, value);
            }
            _ => tracing::error!(header = name, "dropped a response header that HTTP cannot carry"),
        }
    }
    resp
}

/// The answer to a request refused by the transport rules: its status, its headers, and (but
/// for a 404) a JSON-RPC error body.
pub(crate) fn refused(refusal: &HttpRefusal) -> Response<McpBody> {
    let mut headers = refusal.headers.clone();
    let body = match refusal.body() {
        Some(body) => {
            headers.push(("content-type", "application/json".to_owned()));
            McpBody::full(body)
        }
        None => McpBody::empty(),
    };
    response(refusal.status, &headers, body)
}

/// Which [`HttpRefusals`](crate::HttpRefusals) counter a refusal of the transport rules
/// (`check_peer`, `check_head`, `check_body_len`) goes to: a body over its bound, a head over
/// its bound, or any other head the rules refuse. mcp-proto's `HttpRefusal` says what it is by
/// its status alone, so this is the one place that reads the status back.
pub(crate) fn counted_as(refusal: &HttpRefusal) -> HttpRefused {
    match refusal.kind {
        RefusalKind::BodyTooLarge => HttpRefused::BodyTooLarge,
        RefusalKind::HeadTooLarge => HttpRefused::HeadTooLarge,
        _ => HttpRefused::HeadRejected,
    }
}

/// The refusals this layer makes of its own accord, each with its blame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The body ended early or could not be read: malformed, 400.
    BrokenBody,
    /// The body did not arrive within `body_read_timeout`: a time bound, 408 (`-32600`).
    SlowBody,
    /// This layer broke its own invariant: misuse, 500 (`-32603` "internal error").
    Internal,
    /// The engine's task is gone, which happens only when the server stops: shutting down,
    /// 503 (`-32603` with `data.reason: "shutting_down"`).
    EngineGone,
}

impl Refusal {
    pub(crate) fn error(self) -> RpcError {
        match self {
            Refusal::BrokenBody => RpcError::malformed("malformed or interrupted request body"),
            Refusal::SlowBody => RpcError::limit(Bound::Time, "request body timed out"),
            Refusal::Internal => RpcError::misuse(),
            Refusal::EngineGone => RpcError::shutting_down(),
        }
    }
}

/// A refusal of this layer's own (a body too slow or broken, the engine gone), with a JSON-RPC
/// error body whose status comes from its blame, like every engine refusal's.
pub(crate) fn error_response(err: &RpcError) -> Response<McpBody> {
    let body = err.to_response(None);
    response(
        err.http_status(Era::Transport),
        &[("content-type", "application/json".to_owned())],
        McpBody::full(body),
    )
}

/// The answer to a forwarded request whose client address (as the forwarding replica vouches
/// for it) holds its connection share here: 429 with `Retry-After`, as the client's own
/// connection would have been turned away.
pub(crate) fn share_taken() -> Response<McpBody> {
    let err = RpcError::limit(
        Bound::Share,
        "too many connections from this client address (forwarded by another replica)",
    );
    retry_after(error_response(&err))
}

/// The answer to a request for a session or task that may be live elsewhere in the cluster but
/// cannot be reached now (the directory, or its holder): 503 with `Retry-After`, a JSON-RPC
/// error saying which, so that the client retries rather than drop a live session.
pub(crate) fn unavailable(kind: mcp_proto::HeldKind, what: &str) -> Response<McpBody> {
    let err = RpcError::limit(Bound::Capacity, format!("the {} {what}; retry shortly", kind.as_str()))
        .with_data(serde_json::json!({ "reason": "unavailable" }));
    retry_after(error_response(&err))
}

/// `resp` telling the client when to try again ([`RETRY_AFTER_SECS`](crate::cluster::forward::RETRY_AFTER_SECS)).
pub(crate) fn retry_after(mut resp: Response<McpBody>) -> Response<McpBody> {
    resp.headers_mut()
        .insert(http::header::RETRY_AFTER, HeaderValue::from(crate::cluster::forward::RETRY_AFTER_SECS));
    resp
}

/// Marks a response as the connection's last: sent when part of the request body was left
/// unread, so the connection cannot carry another request.
pub(crate) fn closing(mut resp: Response<McpBody>) -> Response<McpBody> {
    resp.headers_mut().insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::Kind;

    /// Each refusal of this layer: its status, from its blame, and its body's code.
    #[test]
    fn own_refusals_by_blame() {
        let cases = [
            (Refusal::BrokenBody, 400, -32600, None),
            (Refusal::SlowBody, 408, -32600, None),
            (Refusal::Internal, 500, -32603, None),
            (Refusal::EngineGone, 503, -32603, Some("shutting_down")),
        ];
        for (refusal, status, code, reason) in cases {
            let resp = error_response(&refusal.error());
            assert_eq!(resp.status().as_u16(), status, "{refusal:?}");
            assert_eq!(resp.headers()["content-type"], "application/json", "{refusal:?}");
            let Kind::Full(Some(bytes)) = &resp.body().kind else { panic!("{refusal:?}: no body") };
            let body: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            assert_eq!(body["id"], serde_json::Value::Null, "{refusal:?}");
            assert_eq!(body["error"]["code"], code, "{refusal:?}");
            assert_eq!(body["error"]["data"]["reason"].as_str(), reason, "{refusal:?}");
        }
    }
}
