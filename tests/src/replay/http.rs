//! The HTTP side of the runner: `>>` requests through `check_head` and `handle_http`, and the
//! responses, streams and closes that come back, as `<<N` lines.

use super::*;

/// An HTTP request being read from `>>` lines; sent at the first line that is not one.
pub(super) struct HttpDraft {
    pub(super) line: usize,
    pub(super) method: String,
    pub(super) path: String,
    pub(super) caller: Caller,
    pub(super) headers: Vec<(String, Vec<u8>)>,
    pub(super) body: Option<Vec<u8>>,
    /// A bare `>>` ended the head: the next line is the body, whatever it looks like.
    head_done: bool,
}

/// Where an exchange is: waiting for its response, streaming, or over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum ExState {
    Waiting,
    Streaming,
    Done,
}

impl Runner {
    /// One `>>` line (`rest` follows the `>>`): a request line, a header, the body, or a bare
    /// `>>` ending the head.
    pub(super) fn http_line(&mut self, line: usize, rest: &str) -> Result<(), String> {
        if rest.is_empty() {
            let d = self.draft.as_mut().ok_or("a bare `>>` outside a request")?;
            if d.head_done || d.body.is_some() {
                return Err("a second bare `>>` in one request".into());
            }
            d.head_done = true;
            return Ok(());
        }
        let rest = rest.strip_prefix(' ').ok_or("an HTTP request line is `>> <text>`")?;
        let forced = self.draft.as_ref().is_some_and(|d| d.head_done && d.body.is_none());
        if !forced {
            if let Some((method, path, caller)) = request_line(rest)? {
                self.send_draft()?;
                self.settle()?;
                let caller = caller.unwrap_or_else(|| self.settings.caller.clone());
                self.draft = Some(HttpDraft {
                    line,
                    method,
                    path,
                    caller,
                    headers: Vec::new(),
                    body: None,
                    head_done: false,
                });
                return Ok(());
            }
        }
        let expanded = self.expand(rest)?;
        let d = self.draft.as_mut().ok_or("a `>>` line before any request line (`>> POST /mcp`)")?;
        if d.body.is_some() {
            return Err("a request has one body line; end it with a blank line".into());
        }
        match header_line(rest).filter(|_| !forced) {
            Some(_) => {
                let (n, v) = header_line(&expanded).ok_or("a header line that expands to no header")?;
                d.headers.push((n.to_owned(), v.as_bytes().to_vec()));
            }
            None => d.body = Some(expanded.into_bytes()),
        }
        Ok(())
    }

    /// Sends the request the `>>` lines described, if any, as a shim would: `check_head`, the
    /// body bound, then `handle_http`; and drains.
    pub(super) fn send_draft(&mut self) -> Result<(), String> {
        let Some(d) = self.draft.take() else { return Ok(()) };
        self.start()?;
        self.exchanges += 1;
        let ex = self.exchanges;
        self.cause = d.line;
        let http = self.http.clone().unwrap_or_default();
        let headers: Vec<(&str, &[u8])> = d.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())).collect();
        let head = RequestHead { method: &d.method, path: &d.path, headers: &headers };
        let body = d.body.unwrap_or_default();
        let limits = self.settings.limits.clone();
        let route = match check_head(&http, &limits, &head) {
            Ok(route) => route,
            Err(refusal) => {
                self.http_refused(ex, &refusal);
                return Ok(());
            }
        };
        if let mcp_proto::http::Route::Post { .. } = route {
            if let Err(refusal) = check_body_len(&limits, body.len()) {
                self.http_refused(ex, &refusal);
                return Ok(());
            }
        }
        // A request's tool calls may become invocations (connection 0: not a stdio one).
        self.candidates = self.classify(0, &body).calls;
        let now = self.now;
        let req = HttpRequest { head: &head, route, body: &body, caller: d.caller };
        let reply = self.engine_mut()?.handle_http(now, req);
        match reply {
            HttpReply::Full { head, body } => self.http_response(ex, &head, &body),
            HttpReply::Pending(conn) => {
                if self.http_conns.insert(conn, (ex, ExState::Waiting)).is_some() {
                    self.invariant(format!("exchange {ex} was handed a connection still in use"));
                }
            }
        }
        self.drain()
    }

    /// A `check_head` (or body bound) refusal, written as the server layer writes it: the
    /// refusal's headers, then a JSON body under `content-type: application/json` (none on 404).
    fn http_refused(&mut self, ex: usize, refusal: &HttpRefusal) {
        let mut head = HttpHead::new(refusal.status, refusal.headers.clone());
        let body = refusal.body().unwrap_or_default();
        if !body.is_empty() {
            head.headers.push(("content-type", "application/json".to_owned()));
        }
        self.http_response(ex, &head, &body);
    }

    /// A status line and headers; remembers a session id a response carries.
    fn http_head(&mut self, ex: usize, head: &HttpHead) {
        self.observed.push_back(Event::Http(ex, HttpLine::Status(head.status)));
        for (name, value) in &head.headers {
            if name.eq_ignore_ascii_case(SESSION_ID_HEADER) {
                if !mcp_proto::http::is_valid_session_id(value) {
                    self.invariant(format!("an invalid session id {value:?}"));
                }
                if self.sessions.contains(value) {
                    self.invariant(format!("session id {value} was handed out twice"));
                }
                self.sessions.push(value.clone());
            }
            self.observed.push_back(Event::Http(ex, HttpLine::Header((*name).to_owned(), value.clone())));
        }
    }

    /// A complete response: head, then the body when there is one.
    fn http_response(&mut self, ex: usize, head: &HttpHead, body: &[u8]) {
        self.http_head(ex, head);
        if body.is_empty() {
            return;
        }
        let typed = head
            .headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("content-type") && v.starts_with("application/json"));
        if !typed {
            self.invariant(format!("a body without a JSON content type on exchange {ex}"));
        }
        if serde_json::from_slice::<Value>(body).is_err() {
            self.invariant(format!("a body that is not JSON on exchange {ex}"));
        }
        self.observed.push_back(Event::Http(ex, HttpLine::Body(body.to_vec())));
    }

    /// Moves the exchange of `conn` from `from` to `to`; `None` when it is no known exchange
    /// (after an invariant failure).
    fn http_step(&mut self, conn: ConnId, what: &str, from: ExState, to: ExState) -> Option<usize> {
        let Some((ex, state)) = self.http_conns.get(&conn).copied() else {
            self.invariant(format!("{what} for a connection no HTTP request was handed"));
            return None;
        };
        if state != from {
            self.invariant(format!("{what} for exchange {ex}, which is {state:?}"));
        }
        self.http_conns.insert(conn, (ex, to));
        Some(ex)
    }

    pub(super) fn http_respond(&mut self, conn: ConnId, head: &HttpHead, body: &[u8]) {
        if let Some(ex) = self.http_step(conn, "a Respond", ExState::Waiting, ExState::Done) {
            self.http_response(ex, head, body);
        }
    }

    pub(super) fn http_stream(&mut self, conn: ConnId, head: &HttpHead) {
        let Some(ex) = self.http_step(conn, "a Stream", ExState::Waiting, ExState::Streaming) else { return };
        let sse = head
            .headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("content-type") && v == mcp_proto::sse::CONTENT_TYPE);
        if !sse {
            self.invariant(format!("a stream on exchange {ex} without content-type text/event-stream"));
        }
        self.http_head(ex, head);
    }

    /// One SSE frame: each line as `| line`, the blank line that ends an event as `|`.
    pub(super) fn http_frame(&mut self, conn: ConnId, bytes: &[u8]) {
        let Some(ex) = self.http_step(conn, "an SSE frame", ExState::Streaming, ExState::Streaming) else {
            return;
        };
        let well_formed = bytes.ends_with(b"\n\n")
            && !bytes.contains(&b'\r')
            && !bytes.get(..bytes.len() - 2).unwrap_or_default().windows(2).any(|w| w == b"\n\n");
        if !well_formed {
            self.invariant(format!(
                "exchange {ex}: an SSE frame that is not one event or comment ending in one blank line: {:?}",
                String::from_utf8_lossy(bytes)
            ));
        }
        let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        for l in body.split(|b| *b == b'\n') {
            self.observed.push_back(Event::Http(ex, HttpLine::Sse(l.to_vec())));
        }
    }

    pub(super) fn http_close(&mut self, conn: ConnId, reason: CloseReason) {
        if let Some(ex) = self.http_step(conn, "a Close", ExState::Streaming, ExState::Done) {
            self.observed.push_back(Event::Http(ex, HttpLine::Close(close_reason(reason))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_lines_are_compared_exactly() {
        let head = ">> POST /mcp\n>> Host: localhost\n>> Content-Type: application/json\n>> Accept: application/json\n>> Mcp-Session-Id: nope\n>> {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
        let body = r#"<< {"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"session not found"}}"#;
        let good = format!("{head}<< 404\n<< Content-Type: application/json\n{body}\n");
        assert!(run(&good).passed(), "{}", run(&good));
        // A header name in another case, a missing body line, a wrong exchange.
        let case = format!("{head}<< 404\n<< content-type: application/json\n{body}\n");
        assert!(!run(&case).passed());
        let short = format!("{head}<< 404\n<< Content-Type: application/json\n");
        assert!(run(&short).failures.iter().any(|f| f.contains("no line expects")), "{}", run(&short));
        assert!(!run(&format!("{head}<<2 404\n")).passed());
        assert_eq!(HttpLine::parse("|").unwrap(), HttpLine::Sse(Vec::new()));
        assert_eq!(HttpLine::parse("| data:").unwrap(), HttpLine::Sse(b"data:".to_vec()));
        assert_eq!(HttpLine::parse("Allow: GET").unwrap(), HttpLine::Header("Allow".into(), "GET".into()));
        assert_eq!(HttpLine::parse("close deleted").unwrap(), HttpLine::Close("deleted"));
        assert!(matches!(HttpLine::parse("{}").unwrap(), HttpLine::Body(_)));
    }
}
