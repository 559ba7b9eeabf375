//! The invariants checked on every run (see the module docs of [`super`]): the reply
//! accounting of every frame in and out, listen streams, server→client requests,
//! `input_required` results, and schema validation.

use super::*;

/// The list-changed notification a filter flag asks for.
const LIST_FLAGS: [(&str, &str); 3] = [
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("resourcesListChanged", "notifications/resources/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
];

impl Runner {
    /// A request the server sent the client (`elicitation/create`, ...): see the module docs.
    fn server_request(&mut self, conn: usize, frame: &Value) {
        let method = frame.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        let id = frame.get("id").cloned().unwrap_or(Value::Null);
        let Some(c) = self.conns.get(&conn) else { return };
        let (session, initialized, caps) = (c.session, c.initialized, c.client_caps.clone());
        let k = key(&id);
        let reused = c.outbound.contains_key(&k);
        let version = session.unwrap_or(ProtocolVersion::NEWEST_LEGACY);
        match session {
            Some(v) if initialized && !v.is_modern() => {}
            _ => self.invariant(format!(
                "a server→client request on connection {conn}, which has no initialized legacy session (2026-07-28 has no server→client requests): {frame}"
            )),
        }
        if !is_request_id(&k) {
            self.invariant(format!("a server→client request whose id is no string or integer: {frame}"));
        }
        if reused {
            self.invariant(format!(
                "a server→client request reusing id {id}, which the client has not answered yet: {frame}"
            ));
        }
        if let Err(e) = permits(version, caps.as_ref(), &method, frame.get("params")) {
            self.invariant(format!("a server→client request the client may not be sent ({e}): {frame}"));
        }
        if method != "ping" {
            match self.ask_sends.pop_front() {
                Some((c, m)) if c == conn && m == method => {}
                Some((c, m)) => self.invariant(format!(
                    "the ask should send {m} on connection {c} next, but the engine sent: {frame}"
                )),
                None => self.invariant(format!("a server→client request no `! ask` asked for: {frame}")),
            }
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.outbound.insert(k, method);
        }
        if let Err(e) = wire::validate_request(version, frame) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
    }

    /// A `resultType: "task"` result: it answers a 2026-07-28 `tools/call` whose call runs on
    /// as a task (its later asks wait for `tasks/update`); it carries no `requestState`.
    fn task_created(&mut self, conn: usize, version: ProtocolVersion, method: Option<&str>, frame: &Value) {
        if !version.is_modern() || method != Some("tools/call") {
            return self.invariant(format!("a task result answers a {version} {method:?} request: {frame}"));
        }
        if frame.pointer("/result/requestState").is_some() {
            self.invariant(format!("a task result carries a requestState: {frame}"));
        }
        let id = frame.get("id").cloned().unwrap_or_default();
        let live =
            self.held.iter_mut().find(|h| h.conn == conn && h.id == id && h.ticket.is_some() && !h.cancelled);
        match live {
            Some(h) => h.task = true,
            None => self.task_replies.push((conn, id)),
        }
    }

    /// An `input_required` result, the reply to its request: see the module docs.
    pub(super) fn input_required(
        &mut self,
        version: ProtocolVersion,
        method: Option<&str>,
        caps: Option<&Value>,
        frame: &Value,
    ) {
        let result = frame.get("result").cloned().unwrap_or(Value::Null);
        if !version.is_modern() {
            return self.invariant(format!("an input_required result answers a {version} request: {frame}"));
        }
        if !matches!(method, Some("tools/call" | "prompts/get" | "resources/read")) {
            self.invariant(format!(
                "an input_required result answers {} (only tools/call, prompts/get and resources/read may): {frame}",
                method.unwrap_or("an unknown request")
            ));
        }
        if let Err(e) = wire::validate_response(version, None, frame) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
        if let Err(e) = wire::validate_def(version, "InputRequiredResult", &result) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
        let requests = result.get("inputRequests");
        let state = result.get("requestState");
        if requests.is_none() && state.is_none() {
            self.invariant(format!(
                "an input_required result with neither inputRequests nor requestState: {frame}"
            ));
        }
        for k in ["ttlMs", "cacheScope"] {
            if result.get(k).is_some() {
                self.invariant(format!("an input_required result carrying {k}: {frame}"));
            }
        }
        for (k, r) in requests.and_then(Value::as_object).into_iter().flatten() {
            let m = r.get("method").and_then(Value::as_str).unwrap_or_default();
            if let Err(e) = permits(version, caps, m, r.get("params")) {
                self.invariant(format!(
                    "input request {k:?} is one the client may not be sent ({e}): {frame}"
                ));
            }
        }
        if let Some(Value::String(s)) = state {
            self.states.push(s.clone());
        }
    }

    /// Accounting, size bound and schema validation of one emitted frame.
    pub(super) fn check_frame(&mut self, conn: usize, bytes: &[u8]) {
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => return self.invariant(format!("the engine emitted a frame that is not JSON: {e}")),
        };
        if bytes.contains(&b'\n') {
            self.invariant("an emitted frame contains a raw newline".into());
        }
        let max = self.settings.limits.response_bytes();
        // The workspace's independent output checker: JSON-RPC shape and no repeated keys (batch
        // members are checked one by one below, against the same ceiling).
        if let Err(e) = mcp_testkit::check::try_message(bytes, usize::MAX, true) {
            self.invariant(format!("output checker: {e}"));
        }
        match &value {
            Value::Array(items) => {
                let v = self.session(conn).unwrap_or(ProtocolVersion::NEWEST_LEGACY);
                if let Err(e) = wire::validate_batch(v, &value) {
                    self.invariant(format!("schema: {e}"));
                }
                if items.is_empty() {
                    self.invariant("an empty batch reply".into());
                }
                for item in items {
                    if item.to_string().len() > max {
                        self.invariant(format!("a batch member over max_response_bytes ({max})"));
                    }
                    if item.get("method").is_some() {
                        self.invariant(format!("a notification inside a batch reply: {item}"));
                        continue;
                    }
                    self.reply(conn, item);
                }
            }
            _ => {
                if bytes.len() > max {
                    self.invariant(format!(
                        "a reply of {} bytes, over max_response_bytes ({max})",
                        bytes.len()
                    ));
                }
                self.reply(conn, &value);
            }
        }
    }

    pub(super) fn session(&self, conn: usize) -> Option<ProtocolVersion> {
        self.conns.get(&conn).and_then(|c| c.session)
    }

    pub(super) fn reply(&mut self, conn: usize, frame: &Value) {
        let Some(obj) = frame.as_object() else {
            return self.invariant(format!("an emitted message that is not an object: {frame}"));
        };
        if obj.contains_key("method") {
            if obj.contains_key("id") {
                return self.server_request(conn, frame);
            }
            return self.notification(conn, frame);
        }
        let session = self.session(conn);
        let (version, method, caps) = match obj.get("id") {
            None => return self.invariant(format!("a reply without an id: {frame}")),
            Some(Value::Null) => {
                let owed = self.awaiting_null.entry(conn).or_default();
                if *owed == 0 {
                    self.invariant(format!("a null-id reply, but no unreadable message awaits one: {frame}"));
                } else {
                    *owed -= 1;
                }
                (session.unwrap_or(ProtocolVersion::NEWEST_LEGACY), None, None)
            }
            Some(id) => {
                let k = key(id);
                let open_listen = self.conns.get(&conn).is_some_and(|c| c.listens.contains_key(&k));
                if open_listen && self.shutting_down {
                    // Engine::shutdown ends each listen stream with its final result, once.
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.listens.remove(&k);
                    }
                    if let Err(e) = wire::validate_response(ProtocolVersion::V2026_07_28, None, frame) {
                        self.invariant(format!("schema: {e}\n  frame: {frame}"));
                    }
                    return;
                }
                let Some(a) = self.awaiting.get_mut(&(conn, k)).and_then(VecDeque::pop_front) else {
                    if open_listen {
                        return self.invariant(format!(
                            "a response for id {id}, a subscriptions/listen stream that is open (it gets no response): {frame}"
                        ));
                    }
                    return self.invariant(format!("a reply for id {id}, which awaits no reply (a second reply, or an id never sent): {frame}"));
                };
                let mut version = a.version.or(session).unwrap_or(ProtocolVersion::NEWEST_LEGACY);
                if a.method == "initialize" && a.version.is_none() {
                    let negotiated = obj
                        .get("result")
                        .and_then(|r| r.get("protocolVersion"))
                        .and_then(Value::as_str)
                        .and_then(ProtocolVersion::parse);
                    if let Some(n) = negotiated {
                        version = n;
                        if let Some(c) = self.conns.get_mut(&conn) {
                            c.session = Some(n);
                            c.client_caps = a.caps.clone();
                        }
                    }
                }
                (version, Some(a.method), a.caps)
            }
        };
        let result = obj.get("result");
        if result.and_then(|r| r.get("resultType")).and_then(Value::as_str) == Some("task") {
            self.task_created(conn, version, method.as_deref(), frame);
        }
        if result.and_then(|r| r.get("resultType")).and_then(Value::as_str) == Some("input_required") {
            return self.input_required(version, method.as_deref(), caps.as_ref(), frame);
        }
        if let Err(e) = wire::validate_response(version, method.as_deref(), frame) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
    }

    /// The rules of server notifications; see the module docs.
    pub(super) fn notification(&mut self, conn: usize, frame: &Value) {
        let method = frame.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        let session = self.session(conn);
        let version = match frame.pointer(SUBSCRIPTION_ID_POINTER) {
            Some(tag) => {
                self.tagged(conn, &method, tag, frame);
                ProtocolVersion::V2026_07_28
            }
            None => match method.as_str() {
                "notifications/message" => match self.log_call {
                    Some((c, v)) if c == conn => v,
                    _ => {
                        self.invariant(format!("a log message no `! log` asked for: {frame}"));
                        session.unwrap_or(ProtocolVersion::NEWEST_LEGACY)
                    }
                },
                ACKNOWLEDGED => {
                    self.invariant(format!("an acknowledgement without a subscription id: {frame}"));
                    ProtocolVersion::V2026_07_28
                }
                _ => {
                    let legacy = self.conns.get(&conn).is_some_and(|c| c.initialized && c.session.is_some());
                    if !legacy {
                        self.invariant(format!(
                            "an untagged {method} on a connection without an initialized legacy session: {frame}"
                        ));
                    }
                    session.unwrap_or(ProtocolVersion::NEWEST_LEGACY)
                }
            },
        };
        if let Err(e) = wire::validate_notification(version, frame) {
            self.invariant(format!("schema: {e}\n  frame: {frame}"));
        }
    }

    /// A notification carrying a subscription id: an acknowledgement opens the stream it
    /// answers; anything else must belong to an open stream and be of a kind it asked for.
    pub(super) fn tagged(&mut self, conn: usize, method: &str, tag: &Value, frame: &Value) {
        let k = key(tag);
        let params = frame.get("params");
        if method == ACKNOWLEDGED {
            let queue = self.awaiting.get_mut(&(conn, k.clone()));
            let pending = queue
                .as_ref()
                .and_then(|q| q.iter().position(|a| a.method == "subscriptions/listen"))
                .and_then(|i| queue.and_then(|q| q.remove(i)));
            let Some(pending) = pending else {
                return self.invariant(format!(
                    "an acknowledgement for subscription {tag}, which is no pending subscriptions/listen request: {frame}"
                ));
            };
            let honoured = params.and_then(|p| p.get("notifications")).cloned().unwrap_or(Value::Null);
            let requested = pending.filter.unwrap_or(Value::Null);
            let mut stream = Stream::default();
            for (flag, list) in LIST_FLAGS {
                if honoured.get(flag).and_then(Value::as_bool) == Some(true) {
                    if requested.get(flag).and_then(Value::as_bool) != Some(true) {
                        self.invariant(format!(
                            "the acknowledgement honours {flag}, which was not asked for"
                        ));
                    }
                    stream.lists.push(list);
                }
            }
            let asked: Vec<&str> = requested
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for uri in honoured.get("resourceSubscriptions").and_then(Value::as_array).into_iter().flatten() {
                let uri = uri.as_str().unwrap_or_default();
                if !asked.contains(&uri) {
                    self.invariant(format!(
                        "the acknowledgement subscribes to {uri:?}, which was not asked for"
                    ));
                }
                stream.uris.push(uri.to_owned());
            }
            let asked: Vec<&str> = requested
                .get("taskIds")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for id in honoured.get("taskIds").and_then(Value::as_array).into_iter().flatten() {
                let id = id.as_str().unwrap_or_default();
                if !asked.contains(&id) {
                    self.invariant(format!(
                        "the acknowledgement follows task {id:?}, which was not asked for"
                    ));
                }
                stream.tasks.push(id.to_owned());
            }
            if let Some(c) = self.conns.get_mut(&conn) {
                c.listens.insert(k, stream);
            }
            return;
        }
        let Some(stream) = self.conns.get(&conn).and_then(|c| c.listens.get(&k)) else {
            return self.invariant(format!(
                "a notification tagged with subscription {tag}, which is not open on connection {conn} (never acknowledged, or cancelled): {frame}"
            ));
        };
        let wanted = if method == "notifications/resources/updated" {
            let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str).unwrap_or_default();
            stream.uris.iter().any(|u| u == uri)
        } else if method == "notifications/tasks" {
            let id = params.and_then(|p| p.get("taskId")).and_then(Value::as_str).unwrap_or_default();
            stream.tasks.iter().any(|t| t == id)
        } else {
            stream.lists.contains(&method)
        };
        if !wanted {
            self.invariant(format!("subscription {tag} did not ask for this notification: {frame}"));
        }
    }

    pub(super) fn finish(&mut self) {
        if self.record {
            return;
        }
        if let Err(e) = self.settle() {
            self.failures.push(format!("end: {e}"));
            return;
        }
        self.cause = usize::MAX;
        let mut owed: Vec<String> = Vec::new();
        for ((conn, id), list) in &self.awaiting {
            let excused = self.excused.get(&(*conn, id.clone())).copied().unwrap_or(0);
            if list.len() > excused {
                owed.push(if *conn == 1 { id.clone() } else { format!("{id} (connection {conn})") });
            }
        }
        owed.sort();
        for id in owed {
            self.failures.push(format!("end: invariant: request {id} never got a reply"));
        }
        let nulls: usize = self.awaiting_null.values().sum();
        if nulls > 0 {
            self.failures.push(format!("end: invariant: {nulls} null-id replies never came"));
        }
        let held: Vec<String> = self
            .held
            .iter()
            .filter(|h| h.ticket.is_some() && !h.cancelled)
            .map(|h| h.id.to_string())
            .collect();
        if !held.is_empty() {
            self.failures.push(format!(
                "end: the transcript ends with call(s) {} in flight: complete them or close",
                held.join(", ")
            ));
        }
    }

    /// What a frame on `conn` must produce, decided from the bytes alone.
    pub(super) fn classify(&self, conn: usize, bytes: &[u8]) -> Plan {
        let mut plan = Plan::default();
        let limits = &self.settings.limits;
        if bytes.len() > limits.frame_bytes() {
            plan.nulls = 1;
            return plan;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            plan.nulls = 1;
            return plan;
        };
        // serde_json's recursion limit (128) makes a frame unreadable for the engine when its
        // own max_depth lets it descend that far (below it, the rest is skipped unparsed).
        // Otherwise a frame is readable when serde_json can decode all of it (escapes included).
        let readable = if nesting(text) > 128 {
            self.settings.max_depth < 128
        } else {
            serde_json::from_str::<Value>(text).is_ok()
        };
        let raw = match serde_json::from_str::<&RawValue>(text) {
            Ok(raw) if readable => raw,
            _ => {
                plan.nulls = 1;
                return plan;
            }
        };
        let t = raw.get().trim_start();
        if t.starts_with('[') {
            let items: Vec<&RawValue> = serde_json::from_str(raw.get()).unwrap_or_default();
            let allowed = self.session(conn).is_some_and(ProtocolVersion::allows_batches);
            if !allowed || items.is_empty() || items.len() > self.settings.max_batch_len {
                plan.nulls = 1;
                return plan;
            }
            for item in items {
                self.classify_message(conn, item, &mut plan);
            }
        } else {
            self.classify_message(conn, raw, &mut plan);
        }
        plan
    }

    fn classify_message(&self, conn: usize, raw: &RawValue, plan: &mut Plan) {
        let Some(members) = members(raw.get()) else {
            plan.nulls += 1;
            return;
        };
        let ids: Vec<&(String, Box<RawValue>)> = members.iter().filter(|(k, _)| k == "id").collect();
        let folded_ids = members.iter().filter(|(k, _)| k.eq_ignore_ascii_case("id")).count();
        let has = |name: &str| members.iter().any(|(k, _)| k == name);
        let is_response = !has("method") && (has("result") || has("error"));
        if is_response {
            // A response (to a server-to-client request) is never answered. A readable id
            // settles the server's request of that id, if one is outstanding.
            if let [(_, id)] = ids.as_slice() {
                if let Ok(id) = serde_json::from_str::<Value>(id.get()) {
                    plan.responses.push(key(&id));
                }
            }
            return;
        }
        let Some((_, id_raw)) = ids.first() else {
            if !has("method") || folded_ids > 0 {
                // Neither a request, a notification nor a response; or a member that case-folds
                // onto "id" ("Id"), which may be a request whose sender waits for an answer.
                plan.nulls += 1;
                return;
            }
            // A notification: never answered, even when malformed. Note what it means for the
            // client's own view of the connection.
            let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
            match value.get("method").and_then(Value::as_str) {
                Some("notifications/cancelled") => {
                    if let Some(id) = value.pointer("/params/requestId") {
                        plan.cancelled.push(key(id));
                    }
                }
                Some("notifications/initialized") => plan.initialized = true,
                _ => {}
            }
            return;
        };
        let id_text = id_raw.get();
        let well_formed = is_request_id(id_text);
        if ids.len() > 1 || folded_ids > 1 || !well_formed || id_text.len() > self.settings.max_id_bytes {
            plan.nulls += 1;
            return;
        }
        let Ok(id) = serde_json::from_str::<Value>(id_text) else {
            plan.nulls += 1;
            return;
        };
        let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
        let method = value.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        let params = value.get("params");
        let modern = params
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(META_PROTOCOL_VERSION));
        let version = modern.then_some(ProtocolVersion::V2026_07_28);
        let param = |k: &str| params.and_then(|p| p.get(k));
        let object_or_empty = |v: Option<&Value>| match v {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(a) => a.clone(),
        };
        let call = match method.as_str() {
            "tools/call" => param("name")
                .and_then(Value::as_str)
                .map(|n| (n.to_owned(), object_or_empty(param("arguments")))),
            "resources/read" => param("uri").and_then(Value::as_str).map(|u| (u.to_owned(), Value::Null)),
            "prompts/get" => param("name")
                .and_then(Value::as_str)
                .map(|n| (n.to_owned(), object_or_empty(param("arguments")))),
            "completion/complete" => {
                let r = param("ref");
                let name = r.and_then(|r| r.get("name").or_else(|| r.get("uri"))).and_then(Value::as_str);
                name.map(|n| (n.to_owned(), param("argument").cloned().unwrap_or(Value::Null)))
            }
            _ => None,
        };
        // A compact `call_tool` invokes the tool it names, with the arguments it carries.
        let inner = match (method.as_str(), &call) {
            ("tools/call", Some((outer, args))) if outer == "call_tool" => args
                .get("name")
                .and_then(Value::as_str)
                .map(|n| (n.to_owned(), object_or_empty(args.get("arguments")))),
            _ => None,
        };
        for (name, arguments) in call.into_iter().chain(inner) {
            plan.calls.push(Candidate { conn, id: id.clone(), method: method.clone(), name, arguments });
        }
        let filter = (method == "subscriptions/listen")
            .then(|| param("notifications").cloned().unwrap_or(Value::Null));
        let caps = if modern {
            params.and_then(|p| p.pointer(META_CLIENT_CAPABILITIES_POINTER)).cloned()
        } else if method == "initialize" {
            param("capabilities").cloned()
        } else {
            None
        };
        plan.requests.push((id, Awaiting { method, version, filter, caps }));
    }
}

#[derive(Default)]
pub(super) struct Plan {
    /// Replies with a `null` id this frame must produce.
    pub(super) nulls: usize,
    /// Requests with a readable id.
    pub(super) requests: Vec<(Value, Awaiting)>,
    /// Requests that may become invocations.
    pub(super) calls: Vec<Candidate>,
    /// Request ids the client's `notifications/cancelled` name.
    pub(super) cancelled: Vec<String>,
    /// The frame holds `notifications/initialized`.
    pub(super) initialized: bool,
    /// Canonical ids of the responses (to server→client requests) it holds.
    pub(super) responses: Vec<String>,
}

/// The deepest nesting of arrays and objects in JSON text.
fn nesting(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A JSON string or integer literal (no fraction, no exponent).
fn is_request_id(raw: &str) -> bool {
    let b = raw.as_bytes();
    match b.first() {
        Some(b'"') => true,
        Some(b'-') => b.len() > 1 && b.iter().skip(1).all(u8::is_ascii_digit),
        Some(c) if c.is_ascii_digit() => b.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// The members of a JSON object in order, repeated keys included; `None` for a non-object.
fn members(raw: &str) -> Option<Vec<(String, Box<RawValue>)>> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<(String, Box<RawValue>)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(k) = map.next_key::<String>()? {
                out.push((k, map.next_value::<Box<RawValue>>()?));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(raw);
    let r: Result<_, serde_json::Error> = (&mut de).deserialize_map(V);
    r.ok()
}

/// Whether a client that declared `caps` (a `ClientCapabilities` object) on `version` may be
/// sent a request of `method` with `params` (VERSIONS.md §2, §8). `Err` says what is missing.
fn permits(
    version: ProtocolVersion,
    caps: Option<&Value>,
    method: &str,
    params: Option<&Value>,
) -> Result<(), String> {
    let declared = |path: &str| caps.and_then(|c| c.pointer(path)).is_some_and(Value::is_object);
    let param = |k: &str| params.and_then(|p| p.get(k));
    let november = version >= ProtocolVersion::V2025_11_25;
    match method {
        "ping" => Ok(()),
        "elicitation/create" => {
            if version < ProtocolVersion::V2025_06_18 {
                return Err(format!("elicitation does not exist in {version}"));
            }
            if !declared("/elicitation") {
                return Err("the client did not declare elicitation".into());
            }
            if param("mode").and_then(Value::as_str) == Some("url") {
                if !november {
                    return Err(format!("URL-mode elicitation does not exist in {version}"));
                }
                if !declared("/elicitation/url") {
                    return Err("the client did not declare elicitation.url".into());
                }
                return Ok(());
            }
            if november && declared("/elicitation/url") && !declared("/elicitation/form") {
                return Err("the client declared only URL-mode elicitation".into());
            }
            let props = param("requestedSchema").and_then(|s| s.get("properties")).and_then(Value::as_object);
            let multi = props
                .into_iter()
                .flatten()
                .any(|(_, p)| p.get("type").and_then(Value::as_str) == Some("array"));
            if multi && !november {
                return Err(format!("multi-select fields do not exist in {version}"));
            }
            Ok(())
        }
        "sampling/createMessage" => {
            if !declared("/sampling") {
                return Err("the client did not declare sampling".into());
            }
            let tools = param("tools").is_some() || param("toolChoice").is_some();
            if tools && !(november && declared("/sampling/tools")) {
                return Err("tool use in sampling needs 2025-11-25 and sampling.tools".into());
            }
            let context =
                matches!(param("includeContext").and_then(Value::as_str), Some("thisServer" | "allServers"));
            if november && context && !declared("/sampling/context") {
                return Err("includeContext needs sampling.context".into());
            }
            Ok(())
        }
        "roots/list" => {
            if declared("/roots") {
                Ok(())
            } else {
                Err("the client did not declare roots".into())
            }
        }
        _ => Err(format!("{method:?} is no server→client request")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    /// A runner with its engine built and connection 1 open, and a `subscriptions/listen`
    /// request with id 1 and this filter awaiting its acknowledgement.
    fn listening(filter: Value) -> Runner {
        let mut r = Runner::new(false);
        r.start().unwrap();
        let a = Awaiting {
            method: "subscriptions/listen".into(),
            version: Some(ProtocolVersion::V2026_07_28),
            filter: Some(filter),
            caps: None,
        };
        r.awaiting.entry((1, key(&json!(1)))).or_default().push_back(a);
        r
    }

    fn ack(id: Value, notifications: Value) -> Value {
        json!({"jsonrpc":"2.0","method":ACKNOWLEDGED,"params":{
            "_meta":{"io.modelcontextprotocol/subscriptionId":id},"notifications":notifications}})
    }

    fn tagged(method: &str, id: Value) -> Value {
        json!({"jsonrpc":"2.0","method":method,"params":{"_meta":{"io.modelcontextprotocol/subscriptionId":id}}})
    }

    #[test]
    fn an_acknowledged_stream_takes_what_it_asked_for() {
        let mut r = listening(json!({"toolsListChanged": true}));
        r.reply(1, &ack(json!(1), json!({"toolsListChanged": true})));
        r.reply(1, &tagged("notifications/tools/list_changed", json!(1)));
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        assert!(r.awaiting.values().all(VecDeque::is_empty));
    }

    #[test]
    fn stream_violations_are_caught() {
        // Tagged before any acknowledgement.
        let mut r = listening(json!({"toolsListChanged": true}));
        r.reply(1, &tagged("notifications/tools/list_changed", json!(1)));
        assert!(r.failures.iter().any(|f| f.contains("not open")), "{:?}", r.failures);
        // A kind the stream did not ask for.
        let mut r = listening(json!({"toolsListChanged": true}));
        r.reply(1, &ack(json!(1), json!({"toolsListChanged": true})));
        r.reply(1, &tagged("notifications/prompts/list_changed", json!(1)));
        assert!(r.failures.iter().any(|f| f.contains("did not ask")), "{:?}", r.failures);
        // An acknowledgement honouring more than was asked.
        let mut r = listening(json!({"resourceSubscriptions": ["a://1"]}));
        r.reply(1, &ack(json!(1), json!({"promptsListChanged": true, "resourceSubscriptions": ["a://2"]})));
        assert_eq!(r.failures.len(), 2, "{:?}", r.failures);
        // A response to an open stream.
        let mut r = listening(json!({}));
        r.reply(1, &ack(json!(1), json!({})));
        r.reply(1, &json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}));
        assert!(r.failures.iter().any(|f| f.contains("stream that is open")), "{:?}", r.failures);
        // An acknowledgement nobody asked for.
        let mut r = listening(json!({}));
        r.reply(1, &ack(json!(2), json!({})));
        assert!(r.failures.iter().any(|f| f.contains("no pending")), "{:?}", r.failures);
    }

    #[test]
    fn free_floating_notifications_need_a_legacy_session() {
        let mut r = listening(json!({}));
        r.reply(1, &json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
        assert!(
            r.failures.iter().any(|f| f.contains("without an initialized legacy session")),
            "{:?}",
            r.failures
        );
        let mut r = listening(json!({}));
        r.reply(
            1,
            &json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":1}}),
        );
        assert!(r.failures.iter().any(|f| f.contains("no `! log` asked for")), "{:?}", r.failures);
    }

    /// A runner whose connection 1 has an initialized 2025-11-25 session with these client
    /// capabilities.
    fn legacy(caps: Value) -> Runner {
        let mut r = Runner::new(false);
        r.start().unwrap();
        if let Some(c) = r.conns.get_mut(&1) {
            c.session = Some(ProtocolVersion::V2025_11_25);
            c.initialized = true;
            c.client_caps = Some(caps);
        }
        r
    }

    fn failed(r: &Runner, what: &str) -> bool {
        r.failures.iter().any(|f| f.contains(what))
    }

    #[test]
    fn server_requests_are_checked() {
        let roots = json!({"jsonrpc":"2.0","id":1,"method":"roots/list","params":{}});
        // Asked for and allowed: no reply is counted, nothing fails.
        let mut r = legacy(json!({"roots": {}}));
        r.ask_sends.extend([(1, "roots/list"), (1, "roots/list")]);
        r.reply(1, &roots);
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        // The same id again while the client has not answered it.
        r.reply(1, &roots);
        assert!(failed(&r, "reusing id"), "{:?}", r.failures);
        // Nobody asked.
        let mut r = legacy(json!({"roots": {}}));
        r.reply(1, &roots);
        assert!(failed(&r, "no `! ask` asked for"), "{:?}", r.failures);
        // A capability the client did not declare; URL mode with only form mode.
        let mut r = legacy(json!({"elicitation": {}}));
        r.ask_sends.extend([(1, "roots/list"), (1, "elicitation/create")]);
        r.reply(1, &roots);
        let url = json!({"jsonrpc":"2.0","id":2,"method":"elicitation/create","params":{
            "mode":"url","message":"m","url":"https://example.com","elicitationId":"2"}});
        r.reply(1, &url);
        assert_eq!(
            r.failures.iter().filter(|f| f.contains("may not be sent")).count(),
            2,
            "{:?}",
            r.failures
        );
        // No initialized legacy session.
        let mut r = Runner::new(false);
        r.start().unwrap();
        r.ask_sends.push_back((1, "roots/list"));
        r.reply(1, &roots);
        assert!(failed(&r, "no initialized legacy session"), "{:?}", r.failures);
        // Schema: elicitation without requestedSchema.
        let mut r = legacy(json!({"elicitation": {}}));
        r.ask_sends.push_back((1, "elicitation/create"));
        r.reply(1, &json!({"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"m"}}));
        assert!(failed(&r, "schema"), "{:?}", r.failures);
    }

    fn awaiting_call(r: &mut Runner, version: Option<ProtocolVersion>, caps: Value) {
        let a = Awaiting { method: "tools/call".into(), version, filter: None, caps: Some(caps) };
        r.awaiting.entry((1, key(&json!(1)))).or_default().push_back(a);
    }

    #[test]
    fn input_required_is_checked() {
        let modern = Some(ProtocolVersion::V2026_07_28);
        let result = |extra: Value| {
            let mut r = json!({"resultType": "input_required", "requestState": "s1"});
            if let (Some(r), Some(extra)) = (r.as_object_mut(), extra.as_object()) {
                r.extend(extra.clone());
            }
            json!({"jsonrpc": "2.0", "id": 1, "result": r})
        };
        // A good one is the reply, and its state is remembered.
        let mut r = Runner::new(false);
        r.start().unwrap();
        awaiting_call(&mut r, modern, json!({"roots": {}}));
        r.reply(1, &result(json!({"inputRequests": {"r": {"method": "roots/list"}}})));
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        assert_eq!(r.states, ["s1"]);
        assert!(r.awaiting.values().all(VecDeque::is_empty));
        // Caching hints; a request the capabilities rule out.
        let mut r = Runner::new(false);
        r.start().unwrap();
        awaiting_call(&mut r, modern, json!({}));
        r.reply(1, &result(json!({"ttlMs": 5, "inputRequests": {"r": {"method": "roots/list"}}})));
        assert!(failed(&r, "carrying ttlMs"), "{:?}", r.failures);
        assert!(failed(&r, "may not be sent"), "{:?}", r.failures);
        // On a legacy request.
        let mut r = legacy(json!({}));
        awaiting_call(&mut r, None, json!({}));
        r.reply(1, &result(json!({})));
        assert!(failed(&r, "answers a 2025-11-25 request"), "{:?}", r.failures);
    }
}
