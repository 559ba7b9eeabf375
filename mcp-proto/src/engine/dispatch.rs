//! Dispatch: the envelope rules, the two eras' method tables, `initialize` and
//! `server/discover`, and tool calls up to admission. What each method does with the registry
//! is in `features.rs`; what a call's admission records is the [`super::calls`] part's.

use std::time::Instant;

use serde_json::{Map, Value};

use super::protocol::encode::{ToolEncoding, ToolOutcome};
use super::state::calls::{Call, CallKind};
use super::{
    protocol::notify, state::streams, Answer, CallId, Ctx, Engine, FrameOutcome, Invocation, LogLevel, Output,
};
use super::{ConnId, META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROTOCOL_VERSION};
use super::{Peek, Request, Session, Ticket};
use crate::blame::Bound;
use crate::caller::{admits, Caller};
use crate::content::ToolFailure;
use crate::json::{RawEnvelope, RawFrame, RawFrameItem};
use crate::jsonrpc::{encode_result, Encoded, ErrorCode, RequestId, RpcError};
use crate::registry::describe_errors;
use crate::slab::Key;
use crate::version::ProtocolVersion;

impl<H: Clone> Engine<H> {
    /// Answers a parsed frame from `conn`.
    pub(super) fn dispatch(&mut self, now: Instant, conn: ConnId, frame: RawFrame) -> FrameOutcome {
        match frame {
            RawFrame::Single(env) => {
                // Read only for a record: off, this is the one branch recording costs.
                let peek = self.records.on.then(|| self.peek(&env));
                match self.message(now, conn, env, None) {
                    Some(Answer::Now(answer)) => {
                        self.count_refusal(&answer);
                        self.record_answer(conn, peek, Some(&answer));
                        self.emit(conn, answer);
                        FrameOutcome::Reply
                    }
                    Some(Answer::Later(inv)) => {
                        self.out.push_back(Output::Invoke(inv));
                        FrameOutcome::Reply
                    }
                    Some(Answer::Held(_)) => FrameOutcome::Reply,
                    Some(Answer::Open) => {
                        self.record_answer(conn, peek, None);
                        FrameOutcome::Reply
                    }
                    None => FrameOutcome::NoReply,
                }
            }
            RawFrame::NotAnObject => {
                let answer = RpcError::malformed("a JSON-RPC message must be an object").encode(None);
                self.record_now(conn, Peek::unknown, &answer);
                self.emit(conn, answer);
                FrameOutcome::Reply
            }
            RawFrame::Batch(items) => self.batch(now, conn, items),
        }
    }

    pub(super) fn batch(&mut self, now: Instant, conn: ConnId, items: Vec<RawFrameItem>) -> FrameOutcome {
        let allowed = self
            .conns
            .get(conn.0)
            .and_then(|c| c.session.as_ref())
            .is_some_and(|s| s.version.allows_batches());
        let refuse = if !allowed {
            Some(RpcError::incompatible(
                ErrorCode::InvalidRequest,
                "JSON-RPC batches are only accepted on a 2025-03-26 session",
            ))
        } else if items.is_empty() {
            Some(RpcError::malformed("empty batch"))
        } else if items.len() > self.config.limits.max_batch_len {
            Some(RpcError::limit(
                Bound::Size,
                format!(
                    "batch of {} messages exceeds the limit of {}",
                    items.len(),
                    self.config.limits.max_batch_len
                ),
            ))
        } else {
            None
        };
        if let Some(err) = refuse {
            let answer = err.encode(None);
            self.record_now(conn, Peek::unknown, &answer);
            self.emit(conn, answer);
            return FrameOutcome::Reply;
        }
        let reply_to = self.reply_to.unwrap_or(conn);
        let batch = self.calls.open_batch(reply_to);
        let mut invocations = Vec::new();
        for item in items {
            let (answer, peek) = match item {
                RawFrameItem::Message(env) => {
                    let peek = self.records.on.then(|| self.peek(&env));
                    (self.message(now, conn, env, Some(batch)), peek)
                }
                RawFrameItem::NotAnObject => {
                    let answer = RpcError::malformed("a JSON-RPC message must be an object").encode(None);
                    (Some(Answer::Now(answer)), None)
                }
            };
            match answer {
                // Inside the batch's array every answer travels alike, errors too.
                Some(Answer::Now(answer)) => {
                    self.count_refusal(&answer);
                    self.record_answer(conn, peek, Some(&answer));
                    self.calls.answered(batch, answer.bytes);
                }
                Some(Answer::Later(inv)) => {
                    // `admit` gave the call this slot: the next one.
                    self.calls.awaits(batch);
                    invocations.push(inv);
                }
                Some(Answer::Open) => self.record_answer(conn, peek, None),
                // Only 2026-07-28 retries are held, and they never come in a batch.
                Some(Answer::Held(_)) => self.calls.awaits(batch),
                None => {}
            }
        }
        let Some(replies) = self.calls.close_batch(batch) else { return FrameOutcome::NoReply };
        let outcome = if replies { FrameOutcome::Reply } else { FrameOutcome::NoReply };
        // A member cancelled by a later member is already answered (not at all): it never runs,
        // so the shim hears of neither an invocation nor its cancellation.
        let (live, dropped): (Vec<_>, Vec<_>) =
            invocations.into_iter().partition(|inv| self.calls.get(inv.ticket.call()).is_some());
        if !dropped.is_empty() {
            let dropped: Vec<CallId> = dropped.iter().map(|inv| inv.ticket.call()).collect();
            self.out.retain(|o| !matches!(o, Output::Cancel { call, .. } if dropped.contains(call)));
        }
        self.out.extend(live.into_iter().map(Output::Invoke));
        self.flush_batch(batch);
        outcome
    }

    /// Sends the reply to a request read from `conn` (or from the HTTP exchange being
    /// dispatched).
    /// Counts an answer given at once that turned the request away for a bound or a shutdown.
    fn count_refusal(&mut self, answer: &Encoded) {
        if let Some((blame, _)) = answer.fault {
            self.refusals.blamed(blame);
        }
    }

    /// Records a request answered at once (`answer`), or a listen stream opened (`None`),
    /// while recording. `peek` is `None` when recording was off as the request came in, or
    /// when the message was no object at all (recorded as `unknown`).
    fn record_answer(&mut self, conn: ConnId, peek: Option<Peek>, answer: Option<&Encoded>) {
        if self.records.on {
            let code = answer.and_then(|a| a.fault).map(|(_, code)| code.code());
            self.record(Some(conn), None, peek.unwrap_or_else(Peek::unknown), code);
        }
    }

    pub(super) fn emit(&mut self, conn: ConnId, answer: Encoded) {
        let to = self.reply_to.unwrap_or(conn);
        self.send(to, answer, true);
    }

    /// Applies the envelope rules to one message and dispatches it. `None`: no reply.
    pub(super) fn message(
        &mut self,
        now: Instant,
        conn: ConnId,
        env: RawEnvelope,
        batch: Option<Key>,
    ) -> Option<Answer<H>> {
        let limits = &self.config.limits;
        // A response (a result or an error, no method) is never answered, whatever is wrong
        // with it: two peers answering each other's bad responses would never stop. One that
        // answers a request of ours resumes the handler that asked; any other is dropped, as
        // JSON-RPC allows.
        if env.method.is_none() && (env.result.is_some() || env.error.is_some()) {
            self.response(conn, env);
            return None;
        }
        // A notification (a method, and nothing that could be an id) is never answered either,
        // even when malformed: nobody waits for it.
        let notification = env.id.is_none() && !env.id_like && env.method.is_some();
        let id = match env.id.as_deref() {
            _ if notification || env.id_ambiguous => None,
            None => None,
            Some(raw) if raw.get().len() > limits.max_id_bytes => {
                let msg =
                    format!("id of {} bytes exceeds the {}-byte limit", raw.get().len(), limits.max_id_bytes);
                return Some(Answer::Now(RpcError::limit(Bound::Size, msg).encode(None)));
            }
            Some(raw) => match RequestId::from_json(raw.get()) {
                Some(id) => Some(id),
                None if raw.get().starts_with('"') => {
                    let err = RpcError::unparsable("parse error: the id is not a valid string");
                    return Some(Answer::Now(err.encode(None)));
                }
                None => {
                    let msg = "id must be a string or an integer";
                    return Some(Answer::Now(RpcError::malformed(msg).encode(None)));
                }
            },
        };
        let fail = |err: RpcError| -> Option<Answer<H>> {
            (!notification).then(|| Answer::Now(err.encode(id.as_ref())))
        };
        if let Some(problem) = env.problem {
            return fail(RpcError::malformed(problem));
        }
        if env.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
            return fail(RpcError::malformed("\"jsonrpc\" must be \"2.0\""));
        }
        if let Some((fault, in_params)) = env.fault {
            // Repeated or case-folded keys: the JSON is ambiguous, in params or outside them.
            let code = if in_params { ErrorCode::InvalidParams } else { ErrorCode::InvalidRequest };
            let msg = if in_params { format!("params: {fault}") } else { fault.to_string() };
            return fail(RpcError::blamed(crate::blame::Blame::Malformed, code, msg));
        }
        let Some(method) = env.method else {
            return fail(RpcError::malformed("missing \"method\""));
        };
        let Value::String(method) = method else {
            return fail(RpcError::malformed("\"method\" must be a string"));
        };
        if method.len() > limits.max_method_bytes {
            let msg = format!(
                "method of {} bytes exceeds the {}-byte limit",
                method.len(),
                limits.max_method_bytes
            );
            return fail(RpcError::limit(Bound::Size, msg));
        }
        if env.result.is_some() || env.error.is_some() {
            return fail(RpcError::malformed("a request cannot carry \"result\" or \"error\""));
        }
        let params = match env.params {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => {
                let err = RpcError::blamed(
                    crate::blame::Blame::Malformed,
                    ErrorCode::InvalidParams,
                    "params must be an object",
                );
                return fail(err);
            }
        };
        if notification {
            self.notification(now, conn, &method, params);
            return None;
        }
        match id {
            Some(id) => Some(self.request(now, conn, id, &method, params, batch)),
            // Unreachable in practice: an ambiguous or look-alike id is already a `problem`.
            None => fail(RpcError::malformed("the request's \"id\" is missing or ambiguous")),
        }
    }

    pub(super) fn notification(
        &mut self,
        now: Instant,
        conn: ConnId,
        method: &str,
        params: Option<Map<String, Value>>,
    ) {
        match method {
            "notifications/initialized" => {
                if let Some(s) = self.conns.get_mut(conn.0).and_then(|c| c.session.as_mut()) {
                    s.initialized = true;
                }
            }
            "notifications/cancelled" => {
                let Some(raw) = params.as_ref().and_then(|p| p.get("requestId")) else { return };
                let Some(id) = serde_json::to_string(raw).ok().and_then(|s| RequestId::from_json(&s)) else {
                    return;
                };
                let call = self.conns.get(conn.0).and_then(|c| c.calls.get(&id));
                match call {
                    Some(call) => self.cancel(now, call, super::CancelReason::Peer),
                    None => {
                        self.end_listen(conn, &id);
                    }
                }
            }
            // Unknown notifications are ignored, as JSON-RPC requires.
            _ => {}
        }
    }

    pub(super) fn request(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: RequestId,
        method: &str,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Answer<H> {
        if self.shutting_down {
            return Answer::Now(RpcError::shutting_down().encode(Some(&id)));
        }
        let meta_version = params
            .as_ref()
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.as_object())
            .and_then(|m| m.get(META_PROTOCOL_VERSION));
        // A 2026-07-28 HTTP exchange speaks nothing else, even when `_meta` forgot to say so; a
        // legacy HTTP session speaks nothing else either (stdio may mix the two eras on one
        // stream, but an HTTP session's streams, seats and expiry are legacy machinery).
        let transport = self.conns.get(conn.0).map(|c| &c.transport);
        let stateless = matches!(transport, Some(streams::Transport::Exchange(x)) if x.is_modern());
        if meta_version.is_some() && matches!(transport, Some(streams::Transport::Session(_))) {
            let err = RpcError::incompatible(
                ErrorCode::InvalidRequest,
                "a 2026-07-28 request (with _meta protocolVersion) cannot be sent inside a legacy session",
            );
            return Answer::Now(err.encode(Some(&id)));
        }
        let result = if meta_version.is_some() || stateless {
            self.modern(now, conn, &id, method, params, batch)
        } else {
            self.legacy(now, conn, &id, method, params, batch)
        };
        match result {
            // Tool results are bounded on completion, with a tool-level failure; any other
            // result over the ceiling becomes the generic internal error.
            Ok(Answer::Now(answer)) if answer.bytes.len() > self.config.limits.max_response_bytes => {
                Answer::Now(RpcError::internal().encode(Some(&id)))
            }
            Ok(answer) => answer,
            Err(err) => Answer::Now(err.encode(Some(&id))),
        }
    }

    pub(super) fn legacy(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: &RequestId,
        method: &str,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let session = self.conns.get(conn.0).and_then(|c| c.session.as_ref()).map(|s| s.version);
        match (method, session) {
            ("initialize", None) => {
                if batch.is_some() {
                    return Err(RpcError::misbehaving("initialize must not be part of a batch"));
                }
                self.initialize(conn, id, params).map(|b| Answer::Now(b.into()))
            }
            ("initialize", Some(_)) => Err(RpcError::misbehaving("the session is already initialized")),
            ("ping", _) => Ok(Answer::Now(encode_result(id, &Map::new()).into())),
            (_, None) => Err(RpcError::misbehaving(format!(
                "{method}: the session is not initialized; send initialize first"
            ))),
            (_, Some(version)) => {
                let progress = notify::progress_token(params.as_ref(), self.config.limits.max_id_bytes);
                let ctx = Ctx {
                    conn,
                    id,
                    version,
                    log_level: None,
                    private: false,
                    progress: progress.as_ref(),
                    client_caps: None,
                    mrtr: None,
                };
                match method {
                    // A method of a capability not declared does not exist for this client.
                    "logging/setLevel" if !self.config.logging => Err(RpcError::method_not_found(method)),
                    "logging/setLevel" => self.set_level(ctx, params.as_ref()).map(|b| Answer::Now(b.into())),
                    "resources/subscribe" | "resources/unsubscribe"
                        if !self.offers(&self.caller(conn)).subscriptions =>
                    {
                        Err(RpcError::method_not_found(method))
                    }
                    "resources/subscribe" => {
                        self.subscribe(ctx, params.as_ref()).map(|b| Answer::Now(b.into()))
                    }
                    "resources/unsubscribe" => {
                        self.unsubscribe(ctx, params.as_ref()).map(|b| Answer::Now(b.into()))
                    }
                    "subscriptions/listen" => Err(RpcError::method_not_found(method)),
                    _ => self.method(now, ctx, method, params, batch),
                }
            }
        }
    }

    pub(super) fn modern(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: &RequestId,
        method: &str,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let meta = params.as_ref().and_then(|p| p.get("_meta")).and_then(Value::as_object);
        let requested = meta.and_then(|m| m.get(META_PROTOCOL_VERSION));
        let Some(Value::String(requested)) = requested else {
            return Err(RpcError::invalid_params(format!(
                "_meta[\"{META_PROTOCOL_VERSION}\"] must be a string"
            )));
        };
        if !meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).is_some_and(Value::is_object) {
            return Err(RpcError::invalid_params(format!(
                "_meta[\"{META_CLIENT_CAPABILITIES}\"] is required and must be an object"
            )));
        }
        let version = match ProtocolVersion::parse(requested) {
            Some(v) if v.is_modern() => v,
            _ => {
                let supported: Vec<&str> = ProtocolVersion::ALL.iter().map(|v| v.as_str()).collect();
                let msg = if ProtocolVersion::parse(requested).is_some() {
                    format!("protocol version {requested} is negotiated through initialize, not per-request _meta")
                } else {
                    format!("unsupported protocol version {requested:?}")
                };
                return Err(RpcError::incompatible(ErrorCode::UnsupportedProtocolVersion, msg)
                    .with_data(serde_json::json!({ "supported": supported, "requested": requested })));
            }
        };
        let log_level = match meta.and_then(|m| m.get(META_LOG_LEVEL)) {
            None => None,
            Some(level) => Some(LogLevel::from_json(level).ok_or_else(|| {
                RpcError::invalid_params(format!("_meta[\"{META_LOG_LEVEL}\"] is not a logging level"))
            })?),
        };
        let progress = notify::progress_token(params.as_ref(), self.config.limits.max_id_bytes);
        let client_caps = meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).cloned();
        let mrtr = match method {
            "tools/call" | "prompts/get" | "resources/read" => {
                Some(self.mrtr_input(now, conn, method, params.as_ref())?)
            }
            _ => None,
        };
        // A retry whose state was already used is answered from the ledger, never run again,
        // but only once it passed every check a fresh round passes: where the call would be
        // admitted (`Engine::replayed`, replay.rs).
        let ctx = Ctx {
            conn,
            id,
            version,
            log_level,
            private: false,
            progress: progress.as_ref(),
            client_caps: client_caps.as_ref(),
            mrtr: mrtr.as_ref(),
        };
        match method {
            "server/discover" => Ok(Answer::Now(self.discover(ctx).into())),
            // Removed in 2026-07-28.
            "initialize" | "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
                Err(RpcError::method_not_found(method))
            }
            "subscriptions/listen" => self.listen(ctx, params.as_ref(), batch),
            "tasks/get" | "tasks/update" | "tasks/cancel" => {
                self.task_method(now, ctx, method, params.as_ref())
            }
            _ => self.method(now, ctx, method, params, batch),
        }
    }

    /// Methods both eras share.
    pub(super) fn method(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        method: &str,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let known = matches!(
            method,
            "tools/list"
                | "tools/call"
                | "resources/list"
                | "resources/templates/list"
                | "resources/read"
                | "prompts/list"
                | "prompts/get"
                | "completion/complete"
        ) || (super::extensions::skills::METHODS.contains(&method)
            && ctx.version.has_extensions());
        if !known || !self.offers(&self.caller(ctx.conn)).method(method) {
            return Err(RpcError::method_not_found(method));
        }
        self.check_server_gate(ctx)?;
        let mut ctx = ctx;
        ctx.private = self.registry.gate.is_some();
        match method {
            "tools/list" if self.compact() => {
                self.list_compact(ctx, params.as_ref()).map(|b| Answer::Now(b.into()))
            }
            "tools/list" => {
                self.list_page(ctx, params.as_ref(), &self.registry.tools).map(|b| Answer::Now(b.into()))
            }
            "tools/call" if self.compact() => self.call_compact(now, ctx, params, batch),
            "tools/call" => self.call_tool(now, ctx, params, batch),
            "resources/list" => {
                self.list_page(ctx, params.as_ref(), &self.registry.resources).map(|b| Answer::Now(b.into()))
            }
            "resources/templates/list" => {
                self.list_page(ctx, params.as_ref(), &self.registry.templates).map(|b| Answer::Now(b.into()))
            }
            "resources/read" => self.read_resource(now, ctx, params.as_ref(), batch),
            "prompts/list" => {
                self.list_page(ctx, params.as_ref(), &self.registry.prompts).map(|b| Answer::Now(b.into()))
            }
            "prompts/get" => self.get_prompt(now, ctx, params.as_ref(), batch),
            m if super::extensions::skills::METHODS.contains(&m) => {
                self.skills_method(ctx, m, params.as_ref()).map(|b| Answer::Now(b.into()))
            }
            _ => self.complete_request(now, ctx, params.as_ref(), batch),
        }
    }

    /// The capabilities `caller` is offered: derived from the items its gates let it see, so a
    /// gated item that is the only one of its kind does not betray the kind, and from what the
    /// configuration says the application does (`logging`, `resources.subscribe`). Each kind
    /// offered has `listChanged`: the registry can change at run time, and the engine then
    /// always tells (a legacy session's channel, a 2026-07-28 listen stream). Declared
    /// extensions the caller's gates admit go under `extensions`, by id, on the versions that
    /// know the field ([`ProtocolVersion::has_extensions`]); with none admitted the field is
    /// left out.
    pub(super) fn capabilities(&self, caller: &Caller, version: ProtocolVersion) -> Value {
        let offers = self.offers(caller);
        let listed = || serde_json::json!({ "listChanged": true });
        let mut caps = Map::new();
        if offers.tools {
            caps.insert("tools".into(), listed());
        }
        if offers.resources {
            let resources = if offers.subscriptions {
                serde_json::json!({ "subscribe": true, "listChanged": true })
            } else {
                listed()
            };
            caps.insert("resources".into(), resources);
        }
        if offers.prompts {
            caps.insert("prompts".into(), listed());
        }
        if offers.completions {
            caps.insert("completions".into(), Value::Object(Map::new()));
        }
        if offers.logging {
            caps.insert("logging".into(), Value::Object(Map::new()));
        }
        if version.has_extensions() {
            let mut extensions: Map<String, Value> = self
                .registry
                .extensions
                .values()
                .filter(|e| admits(e.gate.as_ref(), caller))
                .map(|e| (e.id().to_owned(), e.settings().clone()))
                .collect();
            // Task-capable tools make the server serve the extension, declared or not; only
            // 2026-07-28 requests can use it (a legacy session's tasks are another protocol).
            if version.is_modern()
                && self.registry.task_tools > 0
                && !extensions.contains_key(super::TASKS_EXTENSION)
            {
                extensions.insert(super::TASKS_EXTENSION.into(), Value::Object(Map::new()));
            }
            if offers.skills {
                let settings = serde_json::json!({ "directoryRead": true });
                extensions.insert(crate::skills::EXTENSION_ID.into(), settings);
            }
            if !extensions.is_empty() {
                caps.insert("extensions".into(), Value::Object(extensions));
            }
        }
        Value::Object(caps)
    }

    pub(super) fn initialize(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        params: Option<Map<String, Value>>,
    ) -> Result<Vec<u8>, RpcError> {
        let params = params.unwrap_or_default();
        let Some(Value::String(requested)) = params.get("protocolVersion") else {
            return Err(RpcError::invalid_params("initialize: \"protocolVersion\" must be a string"));
        };
        for field in ["capabilities", "clientInfo"] {
            if !params.get(field).is_some_and(Value::is_object) {
                return Err(RpcError::invalid_params(format!("initialize: \"{field}\" must be an object")));
            }
        }
        // Echo a supported legacy version, otherwise offer the newest legacy one: the spec's
        // negotiation rule, which leaves it to the client to disconnect.
        let version = ProtocolVersion::parse(requested)
            .filter(|v| !v.is_modern())
            .unwrap_or(ProtocolVersion::NEWEST_LEGACY);
        let offers = self.offers(&self.caller(conn));
        if let Some(c) = self.conns.get_mut(conn.0) {
            c.session = Some(Session {
                version,
                initialized: false,
                log_level: None,
                lists: offers.lists(),
                client_caps: params.get("capabilities").cloned().unwrap_or_default(),
            });
        }
        let mut r = Map::new();
        r.insert("protocolVersion".into(), version.as_str().into());
        let caller = self.caller(conn);
        r.insert("capabilities".into(), self.capabilities(&caller, version));
        r.insert("serverInfo".into(), self.config.server_info.to_json(version));
        if let Some(i) = &self.config.instructions {
            r.insert("instructions".into(), i.clone().into());
        }
        Ok(encode_result(id, &r))
    }

    pub(super) fn discover(&self, ctx: Ctx<'_>) -> Vec<u8> {
        let mut r = Map::new();
        r.insert("supportedVersions".into(), ProtocolVersion::supported().into());
        r.insert("capabilities".into(), self.capabilities(&self.caller(ctx.conn), ctx.version));
        if let Some(i) = &self.config.instructions {
            r.insert("instructions".into(), i.clone().into());
        }
        // The capabilities follow the caller's gates: any gate makes them the caller's own.
        let reg = &self.registry;
        let gated = reg.gate.is_some()
            || reg.tools.any_gated()
            || reg.resources.any_gated()
            || reg.templates.any_gated()
            || reg.prompts.any_gated()
            || reg.skills.any_gated()
            || reg.extensions.values().any(|e| e.gate.is_some());
        self.cacheable(&mut r, ctx.version, self.config.discover_cache.narrowed(gated));
        self.finish(&mut r, ctx.version);
        encode_result(ctx.id, &r)
    }

    pub(super) fn call_tool(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        params: Option<Map<String, Value>>,
        batch: Option<Key>,
    ) -> Result<Answer<H>, RpcError> {
        let (name, arguments) = crate::engine::protocol::features::tool_call_params(params)?;
        self.run_tool(now, ctx, name, arguments, batch, false)
    }

    /// Runs tool `name` for a direct `tools/call` or, with `compact`, for a compact `call_tool`:
    /// the same lookup, gates, validation and admission either way, so everything a call can do
    /// (progress, cancellation, asks, timeouts, shares) works alike. They differ where the
    /// envelope says they do: compact answers an unknown or hidden name with the tool failure
    /// `unavailable` rather than `-32602`, answers arguments that break the input schema with
    /// the failure `invalid_arguments` on every version, and always envelopes the outcome.
    pub(super) fn run_tool(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        name: String,
        arguments: Option<Value>,
        batch: Option<Key>,
        compact: bool,
    ) -> Result<Answer<H>, RpcError> {
        let encoding = if compact { ToolEncoding::Envelopes } else { self.tool_encoding() };
        let caller = self.caller(ctx.conn);
        // A tool the caller's gate refuses is answered exactly as one never registered.
        let Some(entry) = self
            .registry
            .tools
            .get(&name)
            .filter(|t| t.visible_to(ctx.version) && admits(t.tool.info.gate.as_ref(), &caller))
        else {
            if compact {
                return Ok(Answer::Now(self.compact_unavailable(ctx, &name)));
            }
            return Err(RpcError::invalid_params(format!("unknown tool: {}", crate::json::clip(&name))));
        };
        super::protocol::scopes::check(&entry.tool.info.scopes, &caller)?;
        // With envelopes on a direct tool, its published contract is its wrapped output schema:
        // prepared on this first authorized use if no listing did it, and a tool whose contract
        // cannot be published is never run. (Compact's call_tool publishes no output schema.)
        if !compact && self.config.envelopes && entry.enveloped_listing(ctx.version).is_err() {
            return Err(super::protocol::features::unpublishable("tools", &name));
        }
        let arguments = match arguments {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(RpcError::invalid_params("\"arguments\" must be an object")),
        };
        if let Some(validator) = &entry.input {
            if let Some(errors) = describe_errors(validator, &arguments) {
                let text = format!("invalid arguments for tool {name}: {}", errors.join("; "));
                if compact || ctx.version.argument_errors_as_results() {
                    let failure = ToolFailure::new(super::protocol::encode::INVALID_ARGUMENTS, text);
                    let out =
                        super::protocol::encode::encoded_output(ToolOutcome::Failure(failure), encoding);
                    return Ok(Answer::Now(self.encode_tool_result(ctx.id, ctx.version, &out).into()));
                }
                return Err(RpcError::invalid_params(text).with_data(serde_json::json!({ "errors": errors })));
            }
        }
        let Value::Object(arguments) = arguments else { return Err(RpcError::misuse()) };
        let handler = entry.handler.clone();
        let as_task =
            self.task_decision(ctx, entry.tool.task, entry.tool.task_by_handler, batch.is_some())?;
        if let Some(answer) = self.replayed(now, ctx)? {
            return Ok(Answer::Now(answer));
        }
        if as_task {
            self.task_room(now, caller.binding())?;
        }
        let answer = self.invoke(
            now,
            ctx,
            CallKind::Tool(name.clone(), encoding),
            batch,
            Request::CallTool { name, arguments },
            handler,
        )?;
        match (as_task, &answer) {
            (true, Answer::Later(inv)) => self.begin_task(now, inv.ticket.call())?,
            // It becomes a task once the shared ledger lets it run here.
            (true, Answer::Held(call)) => self.hold_as_task(*call),
            _ => {}
        }
        Ok(answer)
    }

    /// Admits a call and asks the shim to run its handler.
    pub(super) fn invoke(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        kind: CallKind,
        batch: Option<Key>,
        request: Request,
        handler: H,
    ) -> Result<Answer<H>, RpcError> {
        if let Some(answer) = self.replayed(now, ctx)? {
            return Ok(Answer::Now(answer));
        }
        let call = self.admit(now, ctx, kind, batch)?;
        let ticket = Ticket {
            call,
            #[cfg(debug_assertions)]
            live: self.calls.get(call).map(|c| c.live.0.clone()).unwrap_or_default(),
        };
        let client_extensions = self.client_extensions(ctx);
        let inv = Invocation {
            ticket,
            conn: ctx.conn,
            caller: self.caller(ctx.conn),
            version: ctx.version,
            request,
            handler,
            client_extensions,
        };
        Ok(match self.hold(inv) {
            Ok(inv) => Answer::Later(inv),
            Err(call) => Answer::Held(call),
        })
    }

    /// The extensions the client of this request declared: on 2026-07-28 in the request's own
    /// `_meta` capabilities, before in the session's `initialize` capabilities (read on every
    /// version: a client that declares one to an older server is taken at its word).
    fn client_extensions(&self, ctx: Ctx<'_>) -> Map<String, Value> {
        let caps = if ctx.version.is_modern() {
            ctx.client_caps
        } else {
            self.conns.get(ctx.conn.0).and_then(|c| c.session.as_ref()).map(|s| &s.client_caps)
        };
        match caps.and_then(|c| c.get("extensions")) {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        }
    }

    /// Records a call that a handler will answer, enforcing the in-flight bound and id
    /// uniqueness.
    pub(super) fn admit(
        &mut self,
        now: Instant,
        ctx: Ctx<'_>,
        kind: CallKind,
        batch: Option<Key>,
    ) -> Result<CallId, RpcError> {
        let max = self.config.limits.max_in_flight;
        let caller = self.caller(ctx.conn);
        self.engine_share(caller.binding())?;
        let conn = self.conns.get_mut(ctx.conn.0).ok_or_else(RpcError::misuse)?;
        let listening = conn.listens.iter().any(|l| &l.id == ctx.id);
        // A timeout too long for the clock to express is no timeout.
        let deadline = self.config.limits.call_timeout.and_then(|t| now.checked_add(t));
        let call = Call::new(ctx, self.reply_to.unwrap_or(ctx.conn), kind, deadline);
        let used = call.used;
        let id = self.calls.admit(&mut conn.calls, call, batch, max, listening, &mut self.timers)?;
        self.calls.hold(id, caller.binding());
        if let Some(used) = used {
            self.ledger.start(used);
        }
        Ok(id)
    }

    /// Whether one more call of the caller `binding` fits under
    /// [`Limits::max_calls`](crate::limits::Limits::max_calls): below it everyone gets in; at or above
    /// it only a caller below its fair share, and never past twice the bound. A call in flight
    /// is never displaced, so the share is enforced by refusing, not by making room.
    fn engine_share(&self, binding: &str) -> Result<(), RpcError> {
        let max = self.config.limits.max_calls;
        let total = self.calls.len();
        if total < max {
            return Ok(());
        }
        // Below share, a caller may still get in; each such admission is bounded by its share,
        // and the ceiling bounds them all together whatever callers come and go.
        if total >= max.saturating_mul(2) {
            let msg = format!("server is busy ({total} requests in flight, limit {max})");
            return Err(RpcError::limit(Bound::Capacity, msg));
        }
        let share = crate::limits::Limits::fair_share(max, self.calls.holders_with(binding));
        if self.calls.held(binding) >= share {
            let msg =
                format!("too many requests in flight (server-wide limit {max}, this caller's share {share})");
            return Err(RpcError::limit(Bound::Share, msg));
        }
        Ok(())
    }
}
