//! The server card (SEP-2127) at `<endpoint>/server-card`: routing only; what to answer is
//! [`Card::answer`](mcp_proto::card::Card::answer)'s.

use http::{HeaderMap, Method, Response};
use mcp_proto::card::card_path;

use super::refusal::response;
use super::{HttpService, McpBody};

impl HttpService {
    /// The answer to a request for `path` when it is this endpoint's card path and the server
    /// has a card; `None` otherwise, so that the path is the endpoint's like any other.
    ///
    /// Answered before the `Host` and `Origin` checks and before any token, as the protected
    /// resource metadata is: the card is public, read-only and the same for every caller, and a
    /// browser-based client reads it cross-origin before it holds a token.
    pub(in crate::http) fn card(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Option<Response<McpBody>> {
        let card = self.inner.server.shared.card.get()?;
        if path != card_path(self.inner.http.endpoint_path()) {
            return None;
        }
        let tags: Vec<&[u8]> =
            headers.get_all(http::header::IF_NONE_MATCH).iter().map(|v| v.as_bytes()).collect();
        let answer = card.answer(method.as_str(), &tags);
        let body = if answer.body { McpBody::full(card.body().to_vec()) } else { McpBody::empty() };
        Some(response(answer.status, &answer.headers, body))
    }
}
