//! The requests the engine answered itself, recorded while a shim wants them traced
//! ([`Engine::set_recording`]): what each record says, read from the envelope before dispatch
//! takes it, and the records it queues ([`Output::Answered`](crate::engine::Output::Answered)).

use std::sync::Arc;

use serde_json::Value;

use crate::caller::Caller;
use crate::engine::state::outputs::Bounded;
use crate::engine::{AnsweredRequest, ConnId, Engine, Output};
use crate::jsonrpc::{Encoded, RequestId};

/// The [`AnsweredRequest`] records a shim asked for. Off, it holds nothing and each request
/// costs one branch on `on`.
#[derive(Default)]
pub(in crate::engine) struct Records {
    pub(in crate::engine) on: bool,
    /// Records made since the engine started: lets the HTTP path tell whether a request it
    /// answered went through `dispatch` (which recorded it) or was refused before.
    pub(in crate::engine) made: u64,
}

/// What a record says of a request, read from its envelope before dispatch consumes it.
pub(in crate::engine) struct Peek {
    method: &'static str,
    name: Option<String>,
    id: Option<RequestId>,
}

impl Peek {
    /// A message whose method and id could not be read.
    pub(in crate::engine) fn unknown() -> Self {
        Peek { method: "unknown", name: None, id: None }
    }
}

/// The method names a record may carry: every method the engine answers or hands to a handler.
const KNOWN_METHODS: [&str; 21] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
    "resources/directory/read",
];

impl<H: Clone> Engine<H> {
    /// Whether to keep an [`AnsweredRequest`] for each request the engine answers itself
    /// (default off). A shim turns it on while someone wants those requests traced (the server
    /// layer does while a `tracing` subscriber wants the `mcp::request` target) and drains the
    /// records with [`Output::Answered`](crate::engine::Output::Answered). Off, nothing is kept and a request
    /// costs one branch; on, at most [`AnsweredRequest::QUEUE_CAP`] records wait, the oldest
    /// dropped past that. Turning it off discards the records not drained. Not an input: it
    /// changes no output, and may be called at any time.
    pub fn set_recording(&mut self, on: bool) {
        if !on && self.records.on {
            self.out.clear(Bounded::Answered);
        }
        self.records.on = on;
    }

    /// Whether [`set_recording`](Self::set_recording) is on.
    pub fn is_recording(&self) -> bool {
        self.records.on
    }

    /// What a record of the request in `env` would say, read before dispatch takes it: a known
    /// method's name (else `"unknown"`), the name it names within
    /// [`AnsweredRequest::NAME_BYTES`], and its id within the id bound. Only called while
    /// recording.
    pub(in crate::engine) fn peek(&self, env: &crate::json::RawEnvelope) -> Peek {
        let method = env
            .method
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|m| KNOWN_METHODS.iter().find(|k| **k == m).copied())
            .unwrap_or("unknown");
        let field = match method {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
            "skills/get" | "resources/directory/read" => Some("uri"),
            _ => None,
        };
        let name = field
            .and_then(|f| env.params.as_ref()?.get(f)?.as_str())
            .filter(|n| n.len() <= AnsweredRequest::NAME_BYTES)
            .map(str::to_owned);
        let id = env
            .id
            .as_deref()
            .filter(|raw| raw.get().len() <= self.config.limits.max_id_bytes)
            .and_then(|raw| RequestId::from_json(raw.get()));
        Peek { method, name, id }
    }

    /// Records `answer`, given at once to a request on `conn`, while recording; `peek` says
    /// what the request was (called only then).
    pub(in crate::engine) fn record_now(
        &mut self,
        conn: ConnId,
        peek: impl FnOnce() -> Peek,
        answer: &Encoded,
    ) {
        if self.records.on {
            let code = answer.fault.map(|(_, code)| code.code());
            self.record(Some(conn), None, peek(), code);
        }
    }

    /// Keeps a record of a request answered at once on `conn` (`None`: refused before it had
    /// a connection, by `caller`).
    pub(in crate::engine) fn record(
        &mut self,
        conn: Option<ConnId>,
        caller: Option<&Caller>,
        peek: Peek,
        error_code: Option<i64>,
    ) {
        let open = conn.and_then(|c| self.conns.get(c.0));
        let caller = match (open, caller) {
            (Some(c), _) => c.caller.clone(),
            (None, Some(caller)) => Arc::new(caller.clone()),
            (None, None) => Arc::default(),
        };
        let session = conn.and_then(|c| self.session_of(c));
        self.records.made += 1;
        let record = Output::Answered(AnsweredRequest {
            conn,
            session,
            caller,
            method: peek.method,
            name: peek.name,
            id: peek.id,
            error_code,
        });
        self.out.push_evicting(record, AnsweredRequest::QUEUE_CAP, 0, usize::MAX);
    }
}
