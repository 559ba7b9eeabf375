//! `tracing` spans for requests handed to handlers (target `mcp::request`) and for line
//! sessions (target `mcp::session`); see the crate docs for their fields.
//!
//! The engine decides how a call ends and says so through its outputs ([`Output::Cancel`]'s
//! reason, what [`Engine::complete`] answered); this module only turns that into spans. When no
//! subscriber wants a span, the only work left per request is the callsite's interest check:
//! nothing is formatted, allocated or stored.
//!
//! [`Output::Cancel`]: mcp_proto::Output::Cancel
//! [`Engine::complete`]: mcp_proto::Engine::complete

use std::collections::HashMap;
use std::time::Instant;

use mcp_proto::{
    Answered, AnsweredRequest, CallId, Caller, CancelReason, CloseReason, ConnId, Invocation, Stale,
};
use tracing::field::{debug, display, Empty};
use tracing::Span;

/// The spans open on a server: only spans some subscriber is interested in are kept.
#[derive(Default)]
pub(crate) struct Traces {
    requests: HashMap<CallId, Open>,
    sessions: HashMap<ConnId, Open>,
}

struct Open {
    span: Span,
    started: Instant,
}

impl Open {
    fn duration_us(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.started).as_micros()).unwrap_or(u64::MAX)
    }
}

/// Ends the span `open` keeps under `key`, if any: records why (`field` = `value`), then its
/// duration. The clock is read only when there is such a span.
fn end<K: std::hash::Hash + Eq>(
    open: &mut HashMap<K, Open>,
    key: &K,
    field: &str,
    value: impl tracing::Value,
    now: impl FnOnce() -> Instant,
) {
    if open.is_empty() {
        return;
    }
    if let Some(open) = open.remove(key) {
        open.span.record(field, value);
        open.span.record("duration_us", open.duration_us(now()));
    }
}

/// Records who is calling as OpenTelemetry names it: the identity as `user.id`, else the peer
/// as `client.address`; an anonymous local caller leaves both empty.
fn record_caller(span: &Span, caller: &Caller) {
    match (&caller.identity, &caller.peer) {
        (Some(identity), _) => span.record("user.id", identity.as_str()),
        (None, Some(peer)) => span.record("client.address", peer.as_str()),
        (None, None) => span,
    };
}

/// The OpenTelemetry attribute that names what `method` is about, if one does: the tool
/// (`gen_ai.tool.name`), the prompt (`gen_ai.prompt.name`) or the resource (`mcp.resource.uri`).
/// The MCP conventions define none for a completed argument or a task id, so those are left out.
fn target_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" => Some("gen_ai.tool.name"),
        "prompts/get" => Some("gen_ai.prompt.name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("mcp.resource.uri"),
        _ => None,
    }
}

/// Records how a request ended: `outcome` (this library's own field: `ok`, `error`, or a
/// [`CancelReason`] name), and for a failure the conventions' `error.type` (the JSON-RPC code, or
/// why it ended unanswered), `rpc.response.status_code` (the code) and `otel.status_code`.
fn record_end(span: &Span, outcome: &'static str, code: Option<i64>) {
    span.record("outcome", outcome);
    match code {
        Some(code) => {
            let code = code.to_string();
            span.record("error.type", code.as_str());
            span.record("rpc.response.status_code", code.as_str());
            span.record("otel.status_code", "ERROR");
        }
        // A suspended call answered `input_required`, which is not a failure.
        None if outcome != "ok" && outcome != "suspended" => {
            span.record("error.type", outcome);
            span.record("otel.status_code", "ERROR");
        }
        None => {}
    }
}

/// Whether some subscriber wants `mcp::request` spans now: what the engine's recording of the
/// requests it answers itself follows ([`Engine::set_recording`]). One callsite interest
/// check, re-made at every wake of the engine, so a subscriber set (or a filter changed) later
/// is honoured from its next input on.
///
/// [`Engine::set_recording`]: mcp_proto::Engine::set_recording
pub(crate) fn wants_requests() -> bool {
    tracing::enabled!(target: "mcp::request", tracing::Level::INFO)
}

impl Traces {
    /// A line connection is about to open for `caller`: its `mcp::session` span, if anyone
    /// wants it. Made before the engine takes the caller, so nothing is cloned for it.
    pub(crate) fn session_starting(caller: &Caller) -> Option<Span> {
        let span = tracing::info_span!(
            target: "mcp::session",
            parent: None,
            "session",
            mcp.session.id = Empty,
            user.id = Empty,
            client.address = Empty,
            network.transport = "pipe",
            close_reason = Empty,
            duration_us = Empty,
        );
        if span.is_disabled() {
            return None;
        }
        record_caller(&span, caller);
        Some(span)
    }

    /// The engine opened the line connection `span` is for (or refused it).
    pub(crate) fn session_opened(
        &mut self,
        span: Span,
        opened: Result<ConnId, mcp_proto::OpenError>,
        now: impl FnOnce() -> Instant,
    ) {
        match opened {
            Ok(conn) => {
                span.record("mcp.session.id", display(conn));
                self.sessions.insert(conn, Open { span, started: now() });
            }
            Err(e) => {
                span.record("close_reason", debug(e));
            }
        }
    }

    /// A connection closed: ends its session span with the reason.
    pub(crate) fn session_closed(
        &mut self,
        conn: ConnId,
        reason: CloseReason,
        now: impl FnOnce() -> Instant,
    ) {
        end(&mut self.sessions, &conn, "close_reason", debug(reason), now);
    }

    /// A handler is about to run for `call`: starts its `mcp::request` span (a child of its
    /// session's span, when there is one) and returns it to instrument the handler with, or
    /// `None` when no subscriber wants it.
    pub(crate) fn request_started<H>(
        &mut self,
        call: CallId,
        id: Option<&mcp_proto::RequestId>,
        session: Option<ConnId>,
        inv: &Invocation<H>,
        now: impl FnOnce() -> Instant,
    ) -> Option<Span> {
        let (method, name) = inv.request.method();
        let span = self.request_span(method, Some(name), id, &inv.caller, session)?;
        span.record("mcp.protocol.version", inv.version.as_str());
        self.requests.insert(call, Open { span: span.clone(), started: now() });
        Some(span)
    }

    /// A new `mcp::request` span (a child of `session`'s span, when there is one) with the
    /// fields every request's span has, those known at its start recorded; `None` when no
    /// subscriber wants it. One place for the fields, so the requests a handler serves and
    /// those the engine answers itself are traced alike.
    fn request_span(
        &self,
        method: &'static str,
        name: Option<&str>,
        id: Option<&mcp_proto::RequestId>,
        caller: &Caller,
        session: Option<ConnId>,
    ) -> Option<Span> {
        let line = session.and_then(|s| self.sessions.get(&s));
        let span = tracing::info_span!(
            target: "mcp::request",
            parent: line.and_then(|o| o.span.id()),
            "request",
            otel.name = Empty,
            otel.kind = "server",
            otel.status_code = Empty,
            mcp.method.name = method,
            gen_ai.operation.name = Empty,
            gen_ai.tool.name = Empty,
            gen_ai.prompt.name = Empty,
            mcp.resource.uri = Empty,
            jsonrpc.request.id = Empty,
            mcp.protocol.version = Empty,
            mcp.session.id = Empty,
            user.id = Empty,
            client.address = Empty,
            // Requests of a line session come through a pipe; every other through HTTP.
            network.transport = if line.is_some() { "pipe" } else { "tcp" },
            outcome = Empty,
            error.type = Empty,
            rpc.response.status_code = Empty,
            duration_us = Empty,
        );
        if span.is_disabled() {
            return None;
        }
        // `{method} {target}` where the target is a tool or prompt name (low cardinality); a
        // resource URI is not, so a read is named by its method alone.
        match (target_field(method), name) {
            (Some(field), Some(name)) => {
                span.record(field, name);
                if field == "mcp.resource.uri" {
                    span.record("otel.name", method);
                } else {
                    span.record("otel.name", format!("{method} {name}").as_str());
                }
            }
            _ => {
                span.record("otel.name", method);
            }
        }
        if method == "tools/call" {
            span.record("gen_ai.operation.name", "execute_tool");
        }
        if let Some(id) = id {
            span.record("jsonrpc.request.id", display(id));
        }
        record_caller(&span, caller);
        if let Some(session) = session {
            span.record("mcp.session.id", display(session));
        }
        Some(span)
    }

    /// The handler of `call` answered and the engine sent (or, when stale, dropped) it.
    pub(crate) fn request_answered(&mut self, call: CallId, answered: Result<Answered, Stale>, now: Instant) {
        if self.requests.is_empty() {
            return;
        }
        let Some(open) = self.requests.remove(&call) else { return };
        match answered {
            Ok(Answered { error: None, .. }) => record_end(&open.span, "ok", None),
            Ok(Answered { error: Some(code), .. }) => record_end(&open.span, "error", Some(code.code())),
            // Ended before the handler answered; its span was closed then.
            Err(Stale) => return,
        }
        open.span.record("duration_us", open.duration_us(now));
    }

    /// The engine ended `call` before its handler answered.
    pub(crate) fn request_cancelled(
        &mut self,
        call: CallId,
        reason: CancelReason,
        now: impl FnOnce() -> Instant,
    ) {
        if let Some(open) = self.requests.get(&call) {
            record_end(&open.span, reason.as_str(), None);
        }
        end(&mut self.requests, &call, "outcome", reason.as_str(), now);
    }

    /// A request the engine answered itself, in the input that began at `started`: its
    /// `mcp::request` span, opened and closed at once with the same fields as a handler's
    /// (`duration_us` is the engine's work on the input that carried it).
    pub(crate) fn request_answered_here(&self, rec: AnsweredRequest, started: Instant, now: Instant) {
        let Some(span) =
            self.request_span(rec.method, rec.name.as_deref(), rec.id.as_ref(), &rec.caller, rec.session)
        else {
            return;
        };
        match rec.error_code {
            None => record_end(&span, "ok", None),
            Some(code) => record_end(&span, "error", Some(code)),
        }
        let open = Open { span, started };
        open.span.record("duration_us", open.duration_us(now));
    }
}
