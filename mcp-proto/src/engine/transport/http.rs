//! Streamable HTTP: legacy sessions, exchanges (one per `POST`), held SSE streams, and the
//! stateless 2026-07-28 wire, all on one endpoint.
//!
//! The shim checks the head ([`crate::http::check_head`]), reads the body, and calls
//! [`Engine::handle_http`]. What comes back is either a complete response or a connection id
//! whose response arrives through [`Engine::poll_output`]: one [`Output::Respond`] (a JSON
//! body), or one [`Output::Stream`] followed by [`Output::Frame`]s of ready-to-write SSE bytes
//! and an [`Output::Close`].
//!
//! A request's answer is JSON unless something must reach the client before it (progress, a
//! log message, a server→client request) or the request is a stream by nature
//! (`subscriptions/listen`): the response turns into SSE at the first such message, so a plain
//! call pays for no event framing.

use crate::engine::state::messages::HeldKind;
use crate::engine::state::post_store::Attachment;
use crate::engine::state::sessions::Room;
use crate::engine::state::streams::{Exchange, Expiry, SessionState, Transport};
use crate::engine::transport::fair_shares::NoSession;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::blame::{Blame, Bound, Era};
use crate::caller::{admits, Caller};
use crate::engine::state::timers::Timer;
use crate::engine::{
    decode_error, CloseReason, Conn, ConnId, Engine, FrameOutcome, Output, Peek, META_PROTOCOL_VERSION,
};
use crate::engine::{HttpHead, HttpReply};
use crate::frame::Decoded;
use crate::http::{Accepts, RequestHead, Route, RouteHeaders};
use crate::json::RawFrame;
use crate::jsonrpc::{encode_error, Encoded, ErrorCode, RequestId, RpcError};
use crate::slab::Slab;
use crate::sse::{self, EventId};
use crate::version::ProtocolVersion;

/// An HTTP request the shim admitted: its head already passed [`crate::http::check_head`] and
/// its body was read in full (at most [`Limits::frame_bytes`](crate::limits::Limits::frame_bytes)).
#[derive(Debug)]
pub struct HttpRequest<'a> {
    /// The head, for the 2026-07-28 header rules (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`).
    pub head: &'a RequestHead<'a>,
    /// What [`crate::http::check_head`] made of the head.
    pub route: Route<'a>,
    /// The body (empty for `GET` and `DELETE`).
    pub body: &'a [u8],
    /// Who is asking, as the application's middleware resolved it (with `peer` set to the
    /// client's address, which seats and bindings fall back to).
    pub caller: Caller,
}

/// A complete response: head and body.
pub(in crate::engine) type Ready = (HttpHead, Vec<u8>);

fn json_head(status: u16) -> HttpHead {
    HttpHead::new(status, vec![("Content-Type", "application/json".to_owned())])
}

/// The head of an SSE response.
pub(in crate::engine) fn sse_head() -> HttpHead {
    HttpHead::new(200, sse::RESPONSE_HEADERS.iter().map(|(k, v)| (*k, (*v).to_owned())).collect())
}

fn full(status: u16, body: Vec<u8>) -> HttpReply {
    if body.is_empty() {
        return HttpReply::Full { head: HttpHead::new(status, Vec::new()), body };
    }
    HttpReply::Full { head: json_head(status), body }
}

/// An error answered at once, with the status its blame has under `era`'s rules.
fn error_reply(era: Era, id: Option<&RequestId>, err: &RpcError) -> HttpReply {
    full(err.http_status(era), encode_error(id, err))
}

/// A request refused before it became a JSON-RPC exchange ([`Era::Transport`]).
fn refuse(id: Option<&RequestId>, err: &RpcError) -> HttpReply {
    error_reply(Era::Transport, id, err)
}

fn session_not_found() -> HttpReply {
    // -32001 is what the reference SDKs answer an unknown session with; clients key on the 404.
    refuse(None, &RpcError::blamed(Blame::Misbehaving, ErrorCode::SessionNotFound, "session not found"))
}

/// The error code of a JSON-RPC error this module encoded (`None` for a result): read back only
/// for a record of a request refused before dispatch, where the code was not kept.
fn error_code_of(body: &[u8]) -> Option<i64> {
    serde_json::from_slice::<Value>(body).ok()?.get("error")?.get("code")?.as_i64()
}

impl<H: Clone> Engine<H> {
    /// The capacity refusal: the connection or session table is full. Counted.
    pub(in crate::engine) fn busy(&mut self, id: Option<&RequestId>, message: &str) -> HttpReply {
        let err = RpcError::limit(Bound::Capacity, message);
        self.refused(err.blame);
        refuse(id, &err)
    }

    /// Counts a refusal by its blame ([`Refusals`](crate::engine::Refusals)).
    pub(in crate::engine) fn refused(&mut self, blame: Blame) {
        self.refusals.blamed(blame);
    }

    /// Answers one Streamable HTTP request: legacy sessions (2025-03-26 to 2025-11-25, keyed by
    /// `Mcp-Session-Id`, minted on `initialize`) and the stateless 2026-07-28 wire, on the same
    /// endpoint.
    ///
    /// Session ids are derived from [`Config::seed`](crate::engine::Config::seed) (see
    /// [`Seed`](crate::engine::Seed)); without a seed a legacy `initialize` is answered with 500.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn handle_http(&mut self, now: Instant, req: HttpRequest<'_>) -> HttpReply {
        let decoded = match req.route {
            Route::Post { .. } => Some(Decoded::new(&self.config.limits, req.body)),
            _ => None,
        };
        self.handle_http_decoded(now, req, decoded)
    }

    /// [`handle_http`](Self::handle_http) with the `POST` body decoded beforehand
    /// ([`Decoded::new`] on the request's own task, so that parsing a large body holds up nobody
    /// else); `req.body` is then not read. `decoded` is ignored for `GET` and `DELETE`, and a
    /// `POST` without one is answered as if its body were empty.
    ///
    /// Follow with [`poll_output`](Self::poll_output).
    pub fn handle_http_decoded(
        &mut self,
        now: Instant,
        req: HttpRequest<'_>,
        decoded: Option<Decoded>,
    ) -> HttpReply {
        self.input(now);
        match req.route {
            Route::Post { headers, accepts } => {
                let decoded = decoded.unwrap_or_else(|| Decoded::new(&self.config.limits, b""));
                self.http_post(now, &req, decoded, headers, accepts)
            }
            Route::Get { headers, last_event_id } => self.http_get(now, &req, headers, last_event_id),
            Route::Delete { headers } => self.http_delete(&req, headers),
        }
    }

    /// A `POST`: one exchange's worth of JSON-RPC. While recording, a request refused before
    /// dispatch (which records what it answers) is recorded here, without a connection.
    fn http_post(
        &mut self,
        now: Instant,
        req: &HttpRequest<'_>,
        decoded: Decoded,
        headers: RouteHeaders<'_>,
        accepts: Accepts,
    ) -> HttpReply {
        if !self.records.on {
            return self.post_reply(now, req, decoded, headers, accepts);
        }
        let made = self.records.made;
        let peek = match &decoded.frame {
            Some(Ok(RawFrame::Single(env))) => self.peek(env),
            _ => Peek::unknown(),
        };
        let reply = self.post_reply(now, req, decoded, headers, accepts);
        if let HttpReply::Full { body, .. } = &reply {
            // An empty body answers notifications and responses only (202): no request.
            if self.records.made == made && !body.is_empty() {
                self.record(None, Some(&req.caller), peek, error_code_of(body));
            }
        }
        reply
    }

    fn post_reply(
        &mut self,
        now: Instant,
        req: &HttpRequest<'_>,
        decoded: Decoded,
        headers: RouteHeaders<'_>,
        accepts: Accepts,
    ) -> HttpReply {
        let frame = match decoded.frame {
            Some(Ok(f)) => f,
            Some(Err(e)) => return refuse(None, &decode_error(e)),
            None => {
                // The shim's body cap is the frame limit; a body past it was decoded elsewhere
                // under other limits.
                let err = self.frame_over_limit(decoded.len);
                self.refused(err.blame);
                return refuse(None, &err);
            }
        };
        let (method, has_meta_version) = match &frame {
            RawFrame::Single(env) => (
                env.method.as_ref().and_then(Value::as_str),
                env.params
                    .as_ref()
                    .and_then(|p| p.get("_meta"))
                    .and_then(|m| m.get(META_PROTOCOL_VERSION))
                    .is_some(),
            ),
            _ => (None, false),
        };
        // Legacy traffic names a legacy version, or carries a session, or is an initialize;
        // everything else speaks (or tries to speak) the per-request 2026-07-28 wire.
        let modern = match headers.protocol_version {
            Some(v) => ProtocolVersion::parse(v).is_none_or(|v| v.is_modern()),
            // A 2026-07-28 request ignores a session id it carries, as the spec asks.
            None => method != Some("initialize") && has_meta_version,
        };
        if modern {
            self.http_modern(now, req, accepts, frame)
        } else {
            self.http_legacy(now, req, headers, accepts, frame)
        }
    }

    fn http_modern(
        &mut self,
        now: Instant,
        req: &HttpRequest<'_>,
        accepts: Accepts,
        frame: RawFrame,
    ) -> HttpReply {
        let env = match frame {
            RawFrame::Single(env) => env,
            RawFrame::Batch(_) => {
                let err = RpcError::incompatible(
                    ErrorCode::InvalidRequest,
                    "JSON-RPC batches are not accepted on 2026-07-28",
                );
                return error_reply(Era::Modern, None, &err);
            }
            RawFrame::NotAnObject => {
                let err = RpcError::malformed("a JSON-RPC message must be an object");
                return error_reply(Era::Modern, None, &err);
            }
        };
        let id = env.id.as_deref().and_then(|raw| RequestId::from_json(raw.get()));
        let method = env.method.as_ref().and_then(Value::as_str);
        if let Some(method) = method {
            if let Err(mismatch) = self.check_headers(req, method, env.params.as_ref()) {
                return error_reply(Era::Modern, id.as_ref(), &mismatch.rpc_error());
            }
        }
        if !self.room_for_conns(&req.caller, 1) {
            return self.busy(id.as_ref(), "server is busy");
        }
        let listen = method == Some("subscriptions/listen");
        if listen && !accepts.sse {
            let err = RpcError::incompatible(
                ErrorCode::InvalidRequest,
                "subscriptions/listen answers with a stream: Accept text/event-stream",
            );
            return refuse(id.as_ref(), &err);
        }
        if listen && !self.shutting_down {
            if let Err(reply) = self.take_seat(&req.caller, id.as_ref()) {
                return reply;
            }
        }
        let x = Exchange::modern(accepts);
        let ex = self.insert_conn(Transport::Exchange(x), Arc::new(req.caller.clone()));
        self.run_exchange(now, ex, ex, RawFrame::Single(env))
    }

    /// The SEP-2243 header rules for a 2026-07-28 request.
    fn check_headers(
        &self,
        req: &HttpRequest<'_>,
        method: &str,
        params: Option<&Value>,
    ) -> Result<(), crate::http::HeaderMismatch> {
        let params = params.and_then(Value::as_object);
        let meta_version = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str);
        // Without a `_meta` version there is nothing to mirror: that request fails later, as a
        // missing field (-32602), not as a header mismatch.
        let header_version = req
            .head
            .header(crate::http::PROTOCOL_VERSION_HEADER)
            .and_then(|raw| crate::http::decode_header_value(raw).ok());
        let meta_version = meta_version.map(str::to_owned).or(header_version).unwrap_or_default();
        let name = crate::http::name_param(method)
            .and_then(|f| params.and_then(|p| p.get(f)))
            .and_then(Value::as_str);
        // Only a tool the caller may see has its annotations checked: a mismatch must not tell a
        // caller about a tool its gates hide.
        // A compact server publishes only its three tools, which carry no header annotations.
        let custom = match (method, name) {
            ("tools/call", Some(name)) if !self.compact() => self
                .registry
                .tools
                .get(name)
                .filter(|t| !t.header_params.is_empty() && admits(t.tool.info.gate.as_ref(), &req.caller))
                .map(|t| {
                    crate::http::header_expectations(
                        &t.header_params,
                        params.and_then(|p| p.get("arguments")),
                    )
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        crate::http::check_modern_headers(req.head, method, name, &meta_version, &custom)
    }

    fn http_legacy(
        &mut self,
        now: Instant,
        req: &HttpRequest<'_>,
        headers: RouteHeaders<'_>,
        accepts: Accepts,
        frame: RawFrame,
    ) -> HttpReply {
        let initialize = matches!(&frame, RawFrame::Single(env)
            if env.method.as_ref().and_then(Value::as_str) == Some("initialize"));
        // The exchange (and, for initialize, the session) count against the connection bound.
        if !self.room_for_conns(&req.caller, 1 + usize::from(initialize)) {
            return self.busy(None, "server is busy");
        }
        let (session, minted) = match headers.session_id {
            Some(sid) => match self.session_for(sid, &req.caller) {
                Some(s) => (s, None),
                None => return session_not_found(),
            },
            None if initialize => match self.new_session(now, &req.caller) {
                Ok(made) => made,
                Err(reply) => return reply,
            },
            None => {
                let err = RpcError::malformed("Mcp-Session-Id header is required (send initialize first)");
                return refuse(None, &err);
            }
        };
        let version = self.conns.get(session.0).and_then(|c| c.session.as_ref()).map(|s| s.version);
        if let (Some(header), Some(version)) = (headers.protocol_version, version) {
            // 2025-03-26 is what a client sends when it cannot tell, so every session takes it.
            let fits = ProtocolVersion::parse(header)
                .is_some_and(|h| h == version || h == ProtocolVersion::V2025_03_26);
            if !fits {
                // The session settled its version; a request that names another contradicts it.
                let err = RpcError::misbehaving(format!(
                    "MCP-Protocol-Version {header} does not match the session's {}",
                    version.as_str()
                ));
                return refuse(None, &err);
            }
        }
        let Some(c) = self.conns.get_mut(session.0) else { return session_not_found() };
        // Roles may change between requests of one identity; gates see the newest.
        c.caller = Arc::new(req.caller.clone());
        let caller = c.caller.clone();
        let Transport::Session(s) = &mut c.transport else { return session_not_found() };
        let (stream_no, established_now) = s.request(now, minted.is_some());
        let prime = version.is_some_and(|v| v >= ProtocolVersion::V2025_11_25);
        let x = Exchange::legacy(session, accepts, minted.clone(), prime, stream_no);
        if established_now {
            // The handshake check was armed for the handshake timeout; an idle timeout shorter
            // than that must not wait for it.
            self.timers.arm_after(now, self.config.limits.session_idle, Timer::Session(session));
        }
        let ex = self.insert_conn(Transport::Exchange(x), caller);
        let reply = self.run_exchange(now, session, ex, frame);
        let Some(id) = minted else { return reply };
        let initialized = self.conns.get(session.0).is_some_and(|c| c.session.is_some());
        match reply {
            HttpReply::Full { mut head, body } if initialized => {
                head.headers.push((crate::http::SESSION_ID_HEADER, id.clone()));
                head.holds.push((HeldKind::Session, id));
                HttpReply::Full { head, body }
            }
            // A client that takes only SSE: the stream's head carries the id.
            pending @ HttpReply::Pending(_) if initialized => pending,
            other => {
                // A failed initialize leaves no session behind.
                self.drop_conn(session);
                other
            }
        }
    }

    /// Dispatches `frame` for `owner` with replies going to the exchange `ex`.
    fn run_exchange(&mut self, now: Instant, owner: ConnId, ex: ConnId, frame: RawFrame) -> HttpReply {
        self.reply_to = Some(ex);
        self.immediate = Some((ex, None));
        let outcome = self.dispatch(now, owner, frame);
        self.reply_to = None;
        if let Some((_, Some((head, body)))) = self.immediate.take() {
            return HttpReply::Full { head, body };
        }
        if outcome == FrameOutcome::NoReply {
            self.drop_conn(ex);
            return full(202, Vec::new());
        }
        let listening = self.conns.get(ex.0).is_some_and(|c| !c.listens.is_empty());
        if listening {
            self.seat(ex);
        }
        let eager = matches!(self.conns.get(ex.0).map(|c| &c.transport), Some(Transport::Exchange(x)) if x.prefers_sse());
        if eager {
            self.start_stream(ex);
        }
        HttpReply::Pending(ex)
    }

    fn session_for(&self, sid: &str, caller: &Caller) -> Option<ConnId> {
        let conn = self.sessions.get(sid)?;
        // A session is its creator's: another caller holding the id learns nothing from it.
        self.conns.get(conn.0).filter(|c| c.caller.binding() == caller.binding()).map(|_| conn)
    }

    fn new_session(&mut self, now: Instant, caller: &Caller) -> Result<(ConnId, Option<String>), HttpReply> {
        let limits = self.config.limits.clone();
        if self.shutting_down {
            self.refused(Blame::ShuttingDown);
            return Err(refuse(None, &RpcError::shutting_down()));
        }
        match self.room_for_session(caller) {
            Ok(()) => {}
            Err(NoSession::PerCaller(per)) => {
                let msg =
                    format!("too many sessions for this caller (limit {per}); end one or try again later");
                self.refused(Blame::Limit(Bound::Share));
                return Err(refuse(None, &RpcError::limit(Bound::Share, msg)));
            }
            Err(NoSession::Full) => return Err(self.busy(None, "too many sessions; try again later")),
        }
        if self.conns.len() >= limits.max_connections {
            return Err(self.busy(None, "too many sessions; try again later"));
        }
        // Without a seed there is no id that cannot be guessed: the shim's configuration lacks
        // what legacy sessions need.
        let id = self.sessions.mint(self.config.seed.as_ref());
        let Some(id) = id else { return Err(refuse(None, &RpcError::misuse())) };
        let state = SessionState::new(id.clone(), now);
        let conn = self.insert_conn(Transport::Session(Box::new(state)), Arc::new(caller.clone()));
        self.sessions.insert(id.clone(), conn, caller.binding());
        self.report_holding(crate::engine::HeldKind::Session, &id, true);
        self.timers.arm_after(now, limits.session_handshake, Timer::Session(conn));
        Ok((conn, Some(id)))
    }

    fn http_get(
        &mut self,
        now: Instant,
        req: &HttpRequest<'_>,
        headers: RouteHeaders<'_>,
        last_event_id: Option<&str>,
    ) -> HttpReply {
        let session = match self.legacy_session(req, headers) {
            Ok(s) => s,
            Err(reply) => return reply,
        };
        if !admits(self.registry.gate.as_ref(), &req.caller) {
            // The application's gate refuses the whole request.
            let err = RpcError::blamed(Blame::Application, ErrorCode::InvalidRequest, "forbidden");
            return refuse(None, &err);
        }
        if self.shutting_down {
            self.refused(Blame::ShuttingDown);
            return refuse(None, &RpcError::shutting_down());
        }
        // A `POST` response stream's id asks for that stream back, not for the `GET` stream.
        if let Some(id) = last_event_id.and_then(EventId::parse).filter(|id| id.stream != 0) {
            if let Some(reply) = self.resume_post(now, session, &req.caller, id) {
                return reply;
            }
        }
        let previous = match self.conns.get(session.0).map(|c| &c.transport) {
            Some(Transport::Session(s)) => s.get(),
            _ => None,
        };
        if let Some(old) = previous {
            self.turn_away(old, CloseReason::Replaced);
        }
        if let Err(reply) = self.take_seat(&req.caller, None) {
            return reply;
        }
        if !self.room_for_conns(&req.caller, 1) {
            return self.busy(None, "server is busy");
        }
        let caller = Arc::new(req.caller.clone());
        let conn = self.insert_conn(Transport::Standalone { session }, caller);
        self.seat(conn);
        let limits = &self.config.limits;
        let (keepalive, retry) = (limits.keepalive, limits.sse_retry);
        let replay_cap = (limits.replay_events, limits.replay_bytes);
        let Some(c) = self.conns.get_mut(session.0) else { return session_not_found() };
        let prime = c.session.as_ref().is_some_and(|s| s.version >= ProtocolVersion::V2025_11_25);
        let offered = c.session.as_ref().map(|s| s.lists).unwrap_or_default();
        let Transport::Session(s) = &mut c.transport else { return session_not_found() };
        let retry_ms = prime.then(|| u64::try_from(retry.as_millis()).unwrap_or(u64::MAX));
        let (events, resumed) = s.open_get(conn, now, replay_cap, last_event_id, retry_ms);
        self.out.push_back(Output::Stream { conn, head: sse_head() });
        // A gap that cannot be filled: every list may have changed, so say so and let the
        // client re-list.
        let lost = if resumed { [false; 3] } else { offered };
        self.notes.stream_opened(&mut c.pending, lost);
        for bytes in events {
            self.push_frame(conn, bytes);
        }
        self.timers.arm_after(now, keepalive, Timer::KeepAlive(conn));
        HttpReply::Pending(conn)
    }

    fn http_delete(&mut self, req: &HttpRequest<'_>, headers: RouteHeaders<'_>) -> HttpReply {
        match self.legacy_session(req, headers) {
            Ok(session) => {
                self.forget(session, CloseReason::Deleted);
                full(200, Vec::new())
            }
            Err(reply) => reply,
        }
    }

    /// The session a `GET` or `DELETE` names. Both exist only on the legacy wire: a 2026-07-28
    /// client gets 405 (its streams are `subscriptions/listen`, and it has no session to end).
    fn legacy_session(&self, req: &HttpRequest<'_>, headers: RouteHeaders<'_>) -> Result<ConnId, HttpReply> {
        if let Some(v) = headers.protocol_version {
            if ProtocolVersion::parse(v).is_none_or(|v| v.is_modern()) {
                return Err(HttpReply::Full {
                    head: HttpHead::new(405, vec![("Allow", "POST".to_owned())]),
                    body: Vec::new(),
                });
            }
        }
        let Some(sid) = headers.session_id else {
            return Err(refuse(None, &RpcError::malformed("Mcp-Session-Id header is required")));
        };
        self.session_for(sid, &req.caller).ok_or_else(session_not_found)
    }

    /// Makes room for one more held stream of `caller`, or says why not (429).
    fn take_seat(&mut self, caller: &Caller, id: Option<&RequestId>) -> Result<(), HttpReply> {
        loop {
            match self.sessions.room(caller.binding(), &self.config.limits) {
                Room::Free => return Ok(()),
                Room::Evict(oldest) => self.turn_away(oldest, CloseReason::Evicted),
                Room::Displace(other) => self.turn_away(other, CloseReason::Displaced),
                Room::Refused(msg) => {
                    self.refused(Blame::Limit(Bound::Share));
                    return Err(refuse(id, &RpcError::limit(Bound::Share, msg)));
                }
            }
        }
    }

    fn seat(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(conn.0) else { return };
        if c.seated {
            return;
        }
        c.seated = true;
        self.sessions.seat(c.caller.binding(), conn);
    }

    /// Sends `bytes` to `to` as its transport requires. `reply` marks the answer to a request,
    /// which an HTTP exchange counts to know when it is done.
    pub(in crate::engine) fn send(&mut self, to: ConnId, msg: impl Into<Encoded>, reply: bool) {
        let msg = msg.into();
        let Some(c) = self.conns.get_mut(to.0) else { return };
        match &mut c.transport {
            Transport::Line => self.push_frame(to, msg.bytes),
            Transport::Session(s) => {
                if let Some(get) = s.get() {
                    self.send(get, msg.bytes, false);
                }
            }
            Transport::Standalone { session } => {
                let session = *session;
                let Some(Transport::Session(s)) = self.conns.get_mut(session.0).map(|c| &mut c.transport)
                else {
                    return;
                };
                let event = s.get_event(&msg.bytes);
                self.push_frame(to, event);
            }
            Transport::Exchange(x) => {
                if reply {
                    x.settle_one();
                }
                let done = x.owed() == 0 && c.listens.is_empty();
                if !x.started() {
                    if done && x.answers_in_json() {
                        let era = if x.is_modern() { Era::Modern } else { Era::Legacy };
                        let mut head = json_head(msg.status(era));
                        head.holds = x.holds().to_vec();
                        let protected = self.config.protected.as_ref();
                        if let Some(challenge) = super::super::protocol::scopes::challenge(protected, &msg) {
                            head.headers.push(("WWW-Authenticate", challenge));
                        }
                        self.drop_conn(to);
                        self.respond(to, head, msg.bytes);
                        return;
                    }
                    if !x.can_stream() {
                        // A client that takes only JSON gets only the answer.
                        return;
                    }
                    self.start_stream(to);
                }
                let Some(Transport::Exchange(x)) = self.conns.get_mut(to.0).map(|c| &mut c.transport) else {
                    return;
                };
                let id = x.next_event_id();
                let (session, live) = (x.session(), x.attachment() == Attachment::Live);
                let event = sse::event(id.map(|id| id.to_string()).as_deref(), &msg.bytes);
                if let (Some(session), Some(id)) = (session, id) {
                    self.record_post_event(session, id, &event);
                }
                // A stream the client dropped gets its events kept for a resume, not written.
                if live {
                    self.push_frame(to, event);
                }
                if done {
                    self.forget(to, CloseReason::EndOfInput);
                }
            }
        }
    }

    /// Turns the exchange `ex` into an SSE response: the head, the priming event of a resumable
    /// stream, and its keep-alive.
    fn start_stream(&mut self, ex: ConnId) {
        let retry = u64::try_from(self.config.limits.sse_retry.as_millis()).unwrap_or(u64::MAX);
        let initialized = |conns: &Slab<Conn>, session: Option<ConnId>| {
            session.and_then(|s| conns.get(s.0)).is_some_and(|c| c.session.is_some())
        };
        let Some(Transport::Exchange(x)) = self.conns.get(ex.0).map(|c| &c.transport) else { return };
        let minted = x.minted().cloned().filter(|_| initialized(&self.conns, x.session()));
        let Some(Transport::Exchange(x)) = self.conns.get_mut(ex.0).map(|c| &mut c.transport) else { return };
        let Some(prime) = x.start() else { return };
        let (session, stream_no) = (x.session(), x.stream_no());
        let mut head = sse_head();
        head.holds = x.holds().to_vec();
        if let Some(id) = minted {
            head.headers.push((crate::http::SESSION_ID_HEADER, id.clone()));
            head.holds.push((HeldKind::Session, id));
        }
        self.out.push_back(Output::Stream { conn: ex, head });
        // A legacy session's stream can be resumed: its events are kept from the first.
        if let Some(session) = session {
            self.post_stream_opened(session, stream_no, ex);
        }
        if let Some(id) = prime {
            let bytes = sse::priming(&id.to_string(), Some(retry));
            if let Some(session) = session {
                self.record_post_event(session, id, &bytes);
            }
            self.push_frame(ex, bytes);
        }
        self.timers.arm_after(self.clock, self.config.limits.keepalive, Timer::KeepAlive(ex));
    }

    /// A reply `ex` waited for will never come (its call was cancelled or its session ended).
    pub(in crate::engine) fn unowe(&mut self, ex: ConnId) {
        let Some(c) = self.conns.get_mut(ex.0) else { return };
        let Transport::Exchange(x) = &mut c.transport else { return };
        if x.settle_one() > 0 || !c.listens.is_empty() {
            return;
        }
        if x.started() {
            self.forget(ex, CloseReason::Closed);
        } else {
            // The request has no answer (JSON-RPC sends none for a cancelled request), but the
            // HTTP request still needs a response.
            self.drop_conn(ex);
            self.respond(ex, HttpHead::new(204, Vec::new()), Vec::new());
        }
    }

    fn respond(&mut self, conn: ConnId, head: HttpHead, body: Vec<u8>) {
        match &mut self.immediate {
            Some((ex, slot)) if *ex == conn => *slot = Some((head, body)),
            _ => self.out.push_back(Output::Respond { conn, head, body }),
        }
    }

    pub(in crate::engine) fn session_timer(&mut self, now: Instant, conn: ConnId) {
        let idle = self.config.limits.session_idle;
        let Some(c) = self.conns.get(conn.0) else { return };
        let Transport::Session(s) = &c.transport else { return };
        // At most `max_in_flight` calls to look at, once per idle period. A call whose stream
        // the client dropped waits on nobody, even while the stream could still be resumed.
        let awaited = c.calls.ids().any(|call| {
            self.calls
                .get(call)
                .is_some_and(|k| self.conns.get(k.reply_to.0).is_some() && !self.detached(k.reply_to))
        });
        match s.expiry(now, idle, awaited) {
            Expiry::Expire => self.turn_away(conn, CloseReason::Expired),
            Expiry::RearmFrom(from) => self.timers.arm_after(from, idle, Timer::Session(conn)),
        }
    }

    pub(in crate::engine) fn keepalive(&mut self, now: Instant, conn: ConnId) {
        let Some(c) = self.conns.get(conn.0) else { return };
        let held = match &c.transport {
            Transport::Exchange(x) => x.started() && x.attachment() == Attachment::Live,
            Transport::Standalone { .. } => true,
            _ => false,
        };
        if !held {
            return;
        }
        // A quiet stream re-checks its caller too, so a revoked one closes within an interval.
        if self.rechecks() && self.rechecked(conn).is_none() {
            return;
        }
        let Some(c) = self.conns.get(conn.0) else { return };
        if !admits(self.registry.gate.as_ref(), &c.caller) {
            self.turn_away(conn, CloseReason::Revoked);
            return;
        }
        // A full queue has bytes waiting to be written already; a comment would add nothing.
        if !self.lands_full(conn) {
            self.push_frame(conn, sse::comment("keep-alive"));
        }
        self.timers.arm_after(now, self.config.limits.keepalive, Timer::KeepAlive(conn));
    }
}

#[cfg(test)]
mod tests;
