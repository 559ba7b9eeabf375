//! Handler types: async closures and typed tools, for tools, resources, prompts and completion.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::server::Server;
use mcp_proto::interaction::{InputRequest, InteractionError};
use mcp_proto::{AskError, TaskError};
use mcp_proto::{
    CallId, Caller, Completion, CompletionRef, Content, HandlerError, HttpRequestHead, LogLevel,
    ProgressOutcome, PromptOutput, ProtocolVersion, RegistryError, ResourceContents, TemplateVar, Tool,
    ToolFailure, ToolOutput,
};

/// A boxed, sendable future: what every handler returns once erased.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What a tool handler returns.
pub type ToolResult = Result<ToolOutput, HandlerError>;

/// What every handler is told about the request it serves, and can do about it.
#[derive(Clone)]
pub struct RequestContext {
    /// Who is calling.
    pub caller: Arc<Caller>,
    /// The protocol version of the request.
    pub version: ProtocolVersion,
    /// The call's id (for logging, progress and cancellation); `None` for an in-process call
    /// made with [`Server::call_tool_as`], which has no client to tell anything.
    pub call: Option<CallId>,
    pub(crate) server: Server,
    /// What the client declared under `capabilities.extensions`.
    pub(crate) client_extensions: Arc<Map<String, Value>>,
    /// Whether this invocation logged its progress diagnostic: shared by the context's clones,
    /// so that it is one per invocation however the handler hands its context around.
    pub(crate) progress_told: Arc<AtomicBool>,
    /// How many [`elicit`](RequestContext::elicit)s this run of the handler made, shared by
    /// the context's clones: the n-th one asks under the n-th key, so a 2026-07-28 retry,
    /// which runs the handler again from the start, finds each answer under the key it was
    /// asked with.
    pub(crate) elicits: Arc<std::sync::atomic::AtomicU32>,
}

impl std::fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestContext")
            .field("caller", &self.caller)
            .field("version", &self.version)
            .field("call", &self.call)
            .field("client_extensions", &self.client_extensions)
            .finish_non_exhaustive()
    }
}

impl RequestContext {
    /// The HTTP request this call arrived on (headers, cookies, `Host`, the connection's
    /// peer), read-only; `None` over stdio and for an in-process call. On a legacy session it
    /// is the POST that carried this call, not the session's `initialize`. A server that
    /// verifies bearer tokens itself leaves `Authorization` and `DPoP` out (see
    /// [`HttpRequestHead`]): forward the caller's cookies, not this server's token.
    pub fn http_request(&self) -> Option<&HttpRequestHead> {
        self.caller.http.as_deref()
    }

    /// The settings the client declared for extension `id` (`io.modelcontextprotocol/ui`,
    /// say) under `capabilities.extensions`, exactly as it sent them; `None` when it declared
    /// no such extension. A legacy session's come from its `initialize`; a 2026-07-28
    /// request's from its own `_meta` client capabilities, so they can differ from one request
    /// to the next. An in-process call ([`Server::call_tool_as`]) has no client and declares
    /// none.
    pub fn client_extension(&self, id: &str) -> Option<&Value> {
        self.client_extensions.get(id)
    }

    /// Every extension the client declared, by id (see
    /// [`client_extension`](Self::client_extension)).
    pub fn client_extensions(&self) -> &Map<String, Value> {
        &self.client_extensions
    }

    /// The server serving this request: handlers may register or unregister items, or raise
    /// `notifications/resources/updated`, through it.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Sends a log message to the client, if it asked for this level (see
    /// [`Engine::log`](mcp_proto::Engine::log)); a no-op once the call has ended, and on a
    /// server built without [`ServerBuilder::logging`](crate::ServerBuilder::logging).
    pub fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) {
        if let Some(call) = self.call {
            self.server.log(call, level, logger, data);
        }
    }

    /// Reports progress to the client, if it asked for progress (see
    /// [`Engine::progress`](mcp_proto::Engine::progress) for the rules: increasing values, at most
    /// one update per interval, nothing after the response). Returns what became of it: a
    /// value that is not finite, and a report after the call ended, are
    /// [`NoToken`](ProgressOutcome::NoToken), as nothing can carry them.
    ///
    /// The first report of an invocation that is not sent is also logged, once: a `tracing`
    /// debug event `"progress not delivered"` (target `mcp_server::handler`, inside the
    /// request's `mcp::request` span) whose `code` says why: `no_token`, `too_soon`,
    /// `not_increasing`, `too_large`, `dropped`, `not_finite`, `call_ended` (or `not_sent`,
    /// for a reason this version does not know). It never holds the token, the values or the
    /// message; later undelivered reports of the invocation log nothing more, and a report
    /// that is sent logs nothing. Each round of a 2026-07-28 multi-round call is an
    /// invocation of its own, with its own diagnostic; a call that became a task stays one.
    /// An in-process call ([`Server::call_tool_as`]) has no client to report to and logs
    /// nothing.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) -> ProgressOutcome {
        let number = |v: f64| serde_json::Number::from_f64(v);
        let Some(call) = self.call else { return ProgressOutcome::NoToken };
        let (outcome, code) = match number(progress) {
            Some(p) => match self.server.progress(call, p, total.and_then(number), message) {
                Ok(outcome) => (outcome, undelivered(outcome)),
                // The call already ended; nothing more goes out for it.
                Err(mcp_proto::Stale) => (ProgressOutcome::NoToken, Some("call_ended")),
            },
            None => (ProgressOutcome::NoToken, Some("not_finite")),
        };
        if let Some(code) = code {
            if !self.progress_told.swap(true, Ordering::Relaxed) {
                tracing::debug!(code, "progress not delivered");
            }
        }
        outcome
    }

    /// Asks the client for input, each request under a key, and returns the answers by key,
    /// exactly as the client wrote them. One call for both protocol eras:
    ///
    /// - legacy sessions get real server→client requests (`elicitation/create`,
    ///   `sampling/createMessage`, `roots/list`) on this call's stream, if the client declared
    ///   the capability ([`AskError::Unsupported`] otherwise, before anything is sent);
    /// - on 2026-07-28 the call answers `input_required` and this returns
    ///   [`AskError::Suspended`]: the handler is cancelled and runs again when the client retries
    ///   with the answers, and then this same ask returns them at once. A handler must therefore
    ///   do nothing irreversible before its last ask.
    ///
    /// At most [`Limits::max_input_rounds`](mcp_proto::Limits::max_input_rounds) asks per call
    /// ([`AskError::TooManyRounds`] after that). What the client would be sent (each request, or
    /// the `input_required` result) must fit
    /// [`Limits::max_response_bytes`](mcp_proto::Limits::max_response_bytes) (default 16 MiB):
    /// over it nothing is sent and this returns [`AskError::TooLarge`], the call still running.
    pub async fn ask(&self, requests: Vec<(String, InputRequest)>) -> Result<Map<String, Value>, AskError> {
        match self.call {
            Some(call) => self.server.ask(call, requests).await,
            None => Err(AskError::Unreachable),
        }
    }

    /// Whether [`ask`](Self::ask) could send `request` now (see
    /// [`Engine::can_ask`](mcp_proto::Engine::can_ask)): `false` when the client did not declare the
    /// capability, so the handler can take another path.
    pub fn can_ask(&self, request: &InputRequest) -> bool {
        self.call.is_some_and(|call| self.server.can_ask(call, request))
    }

    /// What this handler carried from the previous round of a 2026-07-28 multi-round call (see
    /// [`carry_state`](Self::carry_state)); `None` on the first round and on legacy sessions.
    pub fn carried_state(&self) -> Option<String> {
        self.call.and_then(|call| self.server.with_engine(|e, _| e.carried_state(call).map(str::to_owned)))
    }

    /// Carries `data` into the sealed `requestState` of this call's next `input_required`
    /// answer, for the retry to read back with [`carried_state`](Self::carried_state): a
    /// stateless server's memory between rounds, valid on any replica sharing the key ring.
    /// Signed, not encrypted (the client can read it), and bounded (see
    /// [`Engine::carry_state`](mcp_proto::Engine::carry_state)).
    pub fn carry_state(&self, data: impl Into<String>) {
        if let Some(call) = self.call {
            let data = data.into();
            let _ = self.server.with_engine(|e, _| e.carry_state(call, Some(data)));
        }
    }

    /// [`ask`](Self::ask) for one request: the answer under `key`.
    pub async fn ask_one(&self, key: &str, request: InputRequest) -> Result<Value, AskError> {
        let mut answers = self.ask(vec![(key.to_owned(), request)]).await?;
        answers.remove(key).ok_or(AskError::Unreachable)
    }

    /// Asks the user to fill in a form derived from `T` and returns the answer as a `T`, or
    /// that the user declined or cancelled: [`ask_one`](Self::ask_one) with the request
    /// [`typed_form`] builds, so it behaves the same on both protocol eras (a real
    /// `elicitation/create` on a legacy session; on 2026-07-28 [`AskError::Suspended`], then,
    /// on the retry, the answer at once).
    ///
    /// Each call of `elicit` in one run of the handler is its own request: the handler may ask
    /// several forms in turn, as long as it asks them in the same order each time it runs.
    ///
    /// Errors beyond those of [`ask`](Self::ask): [`AskError::InvalidRequest`] when `T` is no
    /// flat form (the text names the property), before anything is sent; and
    /// [`AskError::Undecodable`] when the accepted answer fits the form but not `T`. Both are
    /// `AskError`s rather than handler errors so one `?` (or one `match`) covers every way an
    /// ask can end; `?` makes the first a private failure and the second `-32602`, as for any
    /// answer that does not fit.
    ///
    /// ```
    /// # use mcp_server::{Elicited, Server, ToolCall};
    /// # use mcp_proto::{HandlerError, Tool};
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Contact {
    ///     /// Shown as the field's description.
    ///     name: String,
    ///     newsletter: Option<bool>,
    /// }
    ///
    /// let signup = Tool::new("signup", "Signs the user up", serde_json::json!({"type": "object"}));
    /// let server = Server::builder("demo", "1.0.0")
    ///     .tool(signup, |call: ToolCall| async move {
    ///         Ok::<_, HandlerError>(match call.ctx.elicit::<Contact>("Who are you?").await? {
    ///             Elicited::Accepted(c) => format!("welcome, {}", c.name),
    ///             Elicited::Declined | Elicited::Cancelled => "maybe later".to_owned(),
    ///         })
    ///     })
    ///     .build();
    /// assert!(server.is_ok());
    /// ```
    pub async fn elicit<T>(&self, message: impl Into<String>) -> Result<Elicited<T>, AskError>
    where
        T: DeserializeOwned + schemars::JsonSchema,
    {
        let request = typed_form::<T>(message).map_err(AskError::InvalidRequest)?;
        let n = self.elicits.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let answer = self.ask_one(&format!("elicit-{n}"), request).await?;
        elicited(answer)
    }

    /// Makes this call a task of the `io.modelcontextprotocol/tasks` extension now (see
    /// [`Engine::start_task`](mcp_proto::Engine::start_task)): the client is answered
    /// `resultType: "task"` with the returned task id at once, and what this handler returns
    /// later becomes the task's outcome, read with `tasks/get`. For a tool registered with
    /// [`Tool::task_started_by_handler`](mcp_proto::Tool::task_started_by_handler), typically
    /// after its last 2026-07-28 input round. An in-process call cannot become a task.
    pub fn start_task(&self) -> Result<String, TaskError> {
        match self.call {
            Some(call) => self.server.with_engine(|e, now| e.start_task(now, call)),
            None => Err(TaskError::NotEligible),
        }
    }

    /// Sleeps on the server's runtime (whichever shim serves it), so handler code shared by
    /// both shims can wait without naming a runtime. Completes at once if no connection has
    /// been served yet (an in-process call on a server with no runtime).
    pub fn sleep(&self, duration: std::time::Duration) -> BoxFuture<()> {
        self.server.sleep(duration)
    }
}

/// Why a progress report was not sent, for its diagnostic; `None` when it was.
fn undelivered(outcome: ProgressOutcome) -> Option<&'static str> {
    Some(match outcome {
        ProgressOutcome::Sent => return None,
        ProgressOutcome::NoToken => "no_token",
        ProgressOutcome::TooSoon => "too_soon",
        ProgressOutcome::NotIncreasing => "not_increasing",
        ProgressOutcome::TooLarge => "too_large",
        ProgressOutcome::Dropped => "dropped",
        // A reason the engine gained later; the diagnostic still says one was not sent.
        _ => "not_sent",
    })
}

/// What became of a typed elicitation ([`RequestContext::elicit`]): the user's action, with
/// the form's content as a `T` when they accepted it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Elicited<T> {
    /// The user submitted the form (`action: "accept"`).
    Accepted(T),
    /// The user refused to answer (`action: "decline"`).
    Declined,
    /// The user dismissed the form without choosing (`action: "cancel"`).
    Cancelled,
}

/// Reads an elicitation answer the engine already checked against its form.
fn elicited<T: DeserializeOwned>(answer: Value) -> Result<Elicited<T>, AskError> {
    let Value::Object(mut answer) = answer else {
        return Err(AskError::Undecodable("an elicitation answer must be a JSON object".into()));
    };
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => {
            // An accepted form with no content is one whose fields are all optional.
            let content = answer.remove("content").unwrap_or_else(|| Value::Object(Map::new()));
            serde_json::from_value(content)
                .map(Elicited::Accepted)
                .map_err(|e| AskError::Undecodable(clipped(&e)))
        }
        Some("decline") => Ok(Elicited::Declined),
        Some("cancel") => Ok(Elicited::Cancelled),
        _ => Err(AskError::Undecodable(
            "an elicitation answer needs `action`: \"accept\", \"decline\" or \"cancel\"".into(),
        )),
    }
}

/// `e`'s text, at most [`CLIP`] characters: serde quotes the value it refused, which the
/// peer chose.
fn clipped(e: &serde_json::Error) -> String {
    const CLIP: usize = 200;
    let text = e.to_string();
    match text.char_indices().nth(CLIP) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// The form-mode elicitation of a `T`: `T`'s JSON Schema (schemars) in the shape elicitation
/// allows, checked by [`InputRequest::elicit`].
///
/// Derived as a tool's input schema is, with three changes a form needs and that lose
/// nothing: subschemas are inlined (a unit enum becomes a string `enum`), an `Option`al
/// field is its inner field (not listed in `required`, so left blank means `None`), and the
/// integer widths schemars writes as `format` (`uint8`, `int64`, `double`) are left to
/// `minimum`/`maximum`. Whatever a form still cannot show (a nested struct, a `Vec`, a map, a
/// tuple, an enum with data) is refused with [`InteractionError::InvalidSchema`] naming the
/// property.
pub fn typed_form<T: schemars::JsonSchema>(
    message: impl Into<String>,
) -> Result<InputRequest, InteractionError> {
    InputRequest::elicit(message, form_schema::<T>())
}

/// `T`'s schema as [`typed_form`] sends it.
fn form_schema<T: schemars::JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = serde_json::to_value(generator.into_root_schema_for::<T>())
        .unwrap_or_else(|_| Value::Object(Map::new()));
    if let Value::Object(top) = &mut schema {
        // The type's Rust name means nothing to the user; the message says what is asked.
        top.remove("title");
        if let Some(Value::Object(props)) = top.get_mut("properties") {
            props.values_mut().for_each(as_form_field);
        }
    }
    schema
}

/// One property of a derived schema in the shape elicitation allows, when only schemars'
/// spelling stands in the way; anything else is left for [`InputRequest::elicit`] to refuse.
fn as_form_field(prop: &mut Value) {
    let Value::Object(p) = prop else { return };
    // `Option<T>` inlined: `anyOf: [T, {"type": "null"}]`, its own keys beside it.
    if let Some(Value::Array(any)) = p.get("anyOf") {
        let null = |v: &Value| v.get("type").and_then(Value::as_str) == Some("null");
        let inner = match any.as_slice() {
            [a, b] if null(b) && !null(a) => a.as_object().cloned(),
            [a, b] if null(a) && !null(b) => b.as_object().cloned(),
            _ => None,
        };
        if let Some(inner) = inner {
            p.remove("anyOf");
            for (k, v) in inner {
                p.entry(k).or_insert(v);
            }
        }
    }
    // `Option<T>` of a primitive: `"type": [T, "null"]`, and `null` among an enum's values.
    if let Some(Value::Array(types)) = p.get("type") {
        let kept: Vec<&Value> = types.iter().filter(|t| t.as_str() != Some("null")).collect();
        if let [only] = kept.as_slice() {
            let only = (*only).clone();
            p.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = p.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if p.get("default").is_some_and(Value::is_null) {
        p.remove("default");
    }
    if matches!(p.get("type").and_then(Value::as_str), Some("integer" | "number")) {
        p.remove("format");
    }
}

/// A `tools/call` as its handler sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Validated arguments (`{}` when the request had none).
    pub arguments: Map<String, Value>,
    /// The request's context.
    pub ctx: RequestContext,
}

/// A `resources/read` as its handler sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct ReadResource {
    /// The URI asked for.
    pub uri: String,
    /// The template it matched, when it was read through one.
    pub template: Option<String>,
    /// The template's variables, in template order: each percent-decoded, with its raw form
    /// beside it. A URI whose variable is not well-formed percent-encoded UTF-8 never reaches a
    /// handler: the client is told which variable it got wrong.
    pub variables: Vec<TemplateVar>,
    /// The request's context.
    pub ctx: RequestContext,
}

impl ReadResource {
    /// The value of a template variable, percent-decoded (`a%20b` is `a b`).
    pub fn var(&self, name: &str) -> Option<&str> {
        self.variables.iter().find(|v| v.name == name).map(|v| v.value.as_str())
    }

    /// The value of a template variable exactly as the URI spells it, still percent-encoded:
    /// for a `{+path}` whose encoded `%2F` must stay apart from its literal `/`.
    pub fn raw_var(&self, name: &str) -> Option<&str> {
        self.variables.iter().find(|v| v.name == name).map(|v| v.raw.as_str())
    }
}

/// A `prompts/get` as its handler sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct GetPrompt {
    /// The prompt's name.
    pub name: String,
    /// The arguments (required ones are present).
    pub arguments: BTreeMap<String, String>,
    /// The request's context.
    pub ctx: RequestContext,
}

/// A `completion/complete` as its handler sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Complete {
    /// The prompt or template being completed.
    pub reference: CompletionRef,
    /// The argument or variable's name.
    pub argument: String,
    /// What the user typed so far.
    pub value: String,
    /// Arguments already resolved.
    pub context: BTreeMap<String, String>,
    /// The request's context.
    pub ctx: RequestContext,
}

/// Converts a handler's return value into a tool result, so handlers can return a `String`,
/// a [`Content`] block or a `Vec` of them, a [`ToolOutput`], a [`Json`] or [`AsJson`] value, a
/// [`ToolFailure`] or a `Result` of any of them.
///
/// There is no blanket impl over `Serialize`: it would overlap every impl here (`String` and
/// `ToolOutput`-like types are `Serialize` too, or may become so), and coherence forbids that.
/// A serializable value says how it wants to be sent by its wrapper instead: [`Json`] when its
/// type has a schema to declare, [`AsJson`] when it has none.
///
/// A typed failure is a `Result` whose error is a [`ToolFailure`] (or a [`HandlerError`],
/// into which `?` converts a `ToolFailure`): the call is answered with a tool result that says
/// it failed, encoded as the server chooses
/// ([`ServerBuilder::envelopes`](crate::ServerBuilder::envelopes)), never with a protocol
/// error. Its [cause](ToolFailure::with_cause) is logged, not sent.
///
/// ```
/// # use mcp_server::{Json, Server, ToolCall};
/// # use mcp_proto::ToolFailure;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Lookup { id: u64 }
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct Record { id: u64, name: String }
///
/// let server = Server::builder("demo", "1.0.0")
///     .envelopes(true)
///     .typed_tool("lookup", "Finds a record", |q: Lookup, _: ToolCall| async move {
///         if q.id == 0 {
///             return Err(ToolFailure::new("not_found", format!("no record {}", q.id)));
///         }
///         Ok(Json(Record { id: q.id, name: "first".into() }))
///     })
///     .build();
/// assert!(server.is_ok());
/// ```
pub trait IntoToolResult {
    /// The conversion.
    fn into_tool_result(self) -> ToolResult;

    /// The `outputSchema` a tool whose handler returns this type declares, if the type knows
    /// it (only [`Json`] does, and a `Result` of it). Registration puts it on the tool unless
    /// the tool declares one itself ([`Tool::output_schema`]). Default `None`.
    fn output_schema() -> Option<Value>
    where
        Self: Sized,
    {
        None
    }
}

/// A typed tool result: the value becomes the result's `structuredContent`, with its JSON text
/// as the one content block (the copy the spec asks for, for clients that do not read
/// structured content), and `T`'s JSON Schema (schemars) becomes the tool's `outputSchema`,
/// against which the engine checks every result, like any declared output schema.
///
/// `T` must serialize to a JSON object, since the spec requires an object `outputSchema` (a
/// `type: "object"` schema) before 2026-07-28: registering a tool whose handler returns a
/// `Json<T>` whose schema is not one fails with [`RegistryError::InvalidSchema`]
/// (`ServerBuilder::build` returns it as a [`BuildError`](crate::BuildError)). Such a value is
/// not wrapped in an invented field: a client would have to know the field's name, and the
/// schema would no longer describe `T`. Wrap it in a struct of your own instead.
///
/// ```
/// # use mcp_server::{Json, Server, ToolCall};
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Point { x: f64, y: f64 }
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct Polar { r: f64, theta: f64 }
///
/// let server = Server::builder("demo", "1.0.0")
///     .typed_tool("polar", "Converts to polar coordinates", |p: Point, _: ToolCall| async move {
///         Json(Polar { r: p.x.hypot(p.y), theta: p.y.atan2(p.x) })
///     })
///     .build();
/// assert!(server.is_ok());
/// ```
///
/// A value that does not match the schema (a custom `Serialize`, or a schemars attribute the
/// value breaks) is the application breaking its own contract: the client gets the generic
/// internal error, as for any structured output that fails its tool's `outputSchema`. A value
/// that does not serialize at all (a map with non-string keys) is a private handler failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Json<T>(pub T);

impl<T: Serialize + schemars::JsonSchema> IntoToolResult for Json<T> {
    fn into_tool_result(self) -> ToolResult {
        let value = serde_json::to_value(&self.0).map_err(HandlerError::private)?;
        // No content: the engine adds the text copy, of the value or (with envelopes) of the
        // envelope, so it is never sent twice.
        Ok(ToolOutput::structured(value))
    }

    fn output_schema() -> Option<Value> {
        Some(schema_of::<T>())
    }
}

/// Any `Serialize` value as a tool result, without a declared `outputSchema`: for values whose
/// type has no [`schemars::JsonSchema`] (a `serde_json::Value`, a foreign type, a map), where
/// [`Json`] would not compile.
///
/// A value that serializes to a JSON object goes out as `structuredContent` (the engine adds
/// the JSON text copy older clients read, as for [`Json`]). Any other value (an array, a
/// string, a number, `null`) goes out as one text block holding its JSON, since
/// `structuredContent` must be an object. A value that does not serialize at all is a private
/// handler failure.
///
/// ```
/// # use mcp_server::{AsJson, Server, ToolCall};
/// # use mcp_proto::Tool;
/// let clock = Tool::new("now", "Says what time it is", serde_json::json!({"type": "object"}));
/// let server = Server::builder("demo", "1.0.0")
///     .tool(clock, |_: ToolCall| async move { AsJson(serde_json::json!({"unixMs": 0})) })
///     .build();
/// assert!(server.is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AsJson<T>(pub T);

impl<T: Serialize> IntoToolResult for AsJson<T> {
    fn into_tool_result(self) -> ToolResult {
        match serde_json::to_value(&self.0).map_err(HandlerError::private)? {
            value @ Value::Object(_) => Ok(ToolOutput::structured(value)),
            other => Ok(ToolOutput::text(other.to_string())),
        }
    }
}

/// `tool` with the `outputSchema` its handler's return type `R` declares (see
/// [`IntoToolResult::output_schema`]), unless `tool` declares one itself; refused when that
/// schema is not an object schema.
pub(crate) fn with_output<R: IntoToolResult>(tool: Tool) -> Result<Tool, RegistryError> {
    if tool.declared_output_schema().is_some() {
        return Ok(tool);
    }
    match R::output_schema() {
        None => Ok(tool),
        Some(schema) if schema.get("type").and_then(Value::as_str) == Some("object") => {
            Ok(tool.output_schema(schema))
        }
        Some(schema) => Err(RegistryError::InvalidSchema(format!(
            "the handler of {:?} returns Json<T> whose schema is not an object schema (\"type\": \"object\"), \
             which outputSchema must be; wrap the value in a struct. T's schema: {schema}",
            tool.name()
        ))),
    }
}

impl IntoToolResult for ToolOutput {
    fn into_tool_result(self) -> ToolResult {
        Ok(self)
    }
}

impl IntoToolResult for Content {
    fn into_tool_result(self) -> ToolResult {
        Ok(ToolOutput::content(vec![self]))
    }
}

impl IntoToolResult for Vec<Content> {
    fn into_tool_result(self) -> ToolResult {
        Ok(ToolOutput::content(self))
    }
}

impl IntoToolResult for ToolFailure {
    fn into_tool_result(self) -> ToolResult {
        Err(self.into())
    }
}

impl IntoToolResult for String {
    fn into_tool_result(self) -> ToolResult {
        Ok(ToolOutput::text(self))
    }
}

impl IntoToolResult for &'static str {
    fn into_tool_result(self) -> ToolResult {
        Ok(ToolOutput::text(self))
    }
}

impl<T: IntoToolResult, E: Into<HandlerError>> IntoToolResult for Result<T, E> {
    fn into_tool_result(self) -> ToolResult {
        self.map_err(Into::into).and_then(IntoToolResult::into_tool_result)
    }

    fn output_schema() -> Option<Value> {
        T::output_schema()
    }
}

/// An erased async function from a request to a result.
pub(crate) type AsyncFn<Q, T> = Arc<dyn Fn(Q) -> BoxFuture<Result<T, HandlerError>> + Send + Sync>;

/// Erases a closure returning anything convertible.
pub(crate) fn erase<Q, T, F, Fut, R>(f: F, convert: fn(R) -> Result<T, HandlerError>) -> AsyncFn<Q, T>
where
    F: Fn(Q) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: 'static,
    Q: 'static,
    T: 'static,
{
    Arc::new(move |q| {
        let fut = f(q);
        Box::pin(async move { convert(fut.await) })
    })
}

pub(crate) fn tool_fn<F, Fut, R>(f: F) -> Handler
where
    F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoToolResult + 'static,
{
    Handler(HandlerKind::Tool(erase(f, R::into_tool_result)))
}

pub(crate) fn typed_tool_fn<A, F, Fut, R>(f: F) -> Handler
where
    A: DeserializeOwned + Send + 'static,
    F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoToolResult + 'static,
{
    let f = Arc::new(f);
    tool_fn(move |mut call: ToolCall| {
        let f = f.clone();
        let args = std::mem::take(&mut call.arguments);
        async move {
            match serde_json::from_value::<A>(Value::Object(args)) {
                Ok(a) => f(a, call).await.into_tool_result(),
                // The schema derived from `A` already passed; this is a type the schema cannot
                // fully express (a custom Deserialize, a number out of range). The model can fix
                // it, so it is a tool-level failure.
                Err(e) => Err(invalid_arguments(e)),
            }
        }
    })
}

/// The failure of arguments that passed the schema but not `A`'s `Deserialize`; without
/// envelopes, `isError` and the text `invalid arguments: ...`.
fn invalid_arguments(e: serde_json::Error) -> HandlerError {
    ToolFailure::new("invalid_arguments", format!("invalid arguments: {e}")).into()
}

/// Wraps a blocking tool closure: each call runs on the server runtime's blocking pool
/// ([`Runtime::spawn_blocking`](crate::Runtime::spawn_blocking)), never on a task thread.
pub(crate) fn blocking_tool_fn<F, R>(f: F) -> Handler
where
    F: Fn(ToolCall) -> R + Send + Sync + 'static,
    R: IntoToolResult + 'static,
{
    let f = Arc::new(f);
    tool_fn(move |call: ToolCall| {
        let f = f.clone();
        let server = call.ctx.server.clone();
        async move { run_blocking(&server, move || f(call).into_tool_result()).await }
    })
}

/// [`blocking_tool_fn`] for a typed tool: the arguments are deserialized on the blocking pool
/// too, as [`typed_tool_fn`] does on the handler's task.
pub(crate) fn blocking_typed_tool_fn<A, F, R>(f: F) -> Handler
where
    A: DeserializeOwned + 'static,
    F: Fn(A, ToolCall) -> R + Send + Sync + 'static,
    R: IntoToolResult + 'static,
{
    blocking_tool_fn(move |mut call: ToolCall| {
        let args = std::mem::take(&mut call.arguments);
        match serde_json::from_value::<A>(Value::Object(args)) {
            Ok(a) => f(a, call).into_tool_result(),
            // As for an async typed tool: a tool-level failure the model can fix.
            Err(e) => Err(invalid_arguments(e)),
        }
    })
}

/// Runs `f` on the blocking pool of `server`'s runtime (on a thread of its own when no runtime
/// is attached yet: an in-process call) and waits for what it returns. Dropping the future
/// (the call was cancelled) drops the answer; `f` itself runs to its end, since a blocking
/// closure cannot be interrupted. A panic in `f` is raised again here, on the handler's task,
/// where it is caught and logged like an async handler's.
async fn run_blocking<T: Send + 'static>(
    server: &Server,
    f: impl FnOnce() -> Result<T, HandlerError> + Send + 'static,
) -> Result<T, HandlerError> {
    let (tx, rx) = async_channel::bounded(1);
    // Counted from now until the closure returned, or was dropped unrun: a cancelled call
    // leaves it running, and shutdown waits for it.
    let running = Running::start(server.shared.blocking.clone());
    let job: Box<dyn FnOnce() + Send> = Box::new(move || {
        let _running = running;
        // The stack is taken on this thread and goes with the panic to the handler's task.
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| crate::panics::watched(f)));
        let _ = tx.try_send(ran.map_err(|panic| (panic, crate::panics::take_backtrace())));
    });
    let done = match server.shared.rt.get() {
        Some(rt) => rt.spawn_blocking(job),
        None => on_thread(job),
    };
    done.await;
    match rx.recv().await {
        Ok(Ok(result)) => result,
        Ok(Err((panic, backtrace))) => {
            crate::panics::stash_backtrace(backtrace);
            std::panic::resume_unwind(panic)
        }
        // The job was dropped unrun: its runtime is shutting down, or no thread could be made.
        Err(_) => Err(HandlerError::Panicked),
    }
}

/// One blocking closure counted in [`Status::blocking_handlers`](crate::Status::blocking_handlers)
/// while it lives.
struct Running(Arc<std::sync::atomic::AtomicUsize>);

impl Running {
    fn start(count: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Runs `f` on a new thread and completes when it returned: the blocking pool of a runtime
/// that has none (the default of [`Runtime::spawn_blocking`](crate::Runtime::spawn_blocking)).
/// If no thread can be made, `f` is dropped unrun and this completes at once.
pub(crate) fn on_thread(f: Box<dyn FnOnce() + Send>) -> BoxFuture<()> {
    let (tx, rx) = async_channel::bounded::<()>(1);
    let spawned = std::thread::Builder::new().name("mcp-blocking".into()).spawn(move || {
        f();
        let _ = tx.try_send(());
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start a thread for a blocking handler");
    }
    Box::pin(async move {
        // Closed without a message when the thread could not start or `f` panicked.
        let _ = rx.recv().await;
    })
}

/// The JSON Schema of `A`, for a typed tool's `inputSchema`.
pub(crate) fn schema_of<A: schemars::JsonSchema>() -> Value {
    let schema = schemars::schema_for!(A);
    let mut v = serde_json::to_value(&schema).unwrap_or_else(|_| Value::Object(Map::new()));
    if let Value::Object(m) = &mut v {
        // The tool's name already says what `title` would.
        m.remove("title");
    }
    v
}

/// Declares a typed tool: its input schema is derived from `A`.
pub fn typed_tool<A: schemars::JsonSchema>(name: impl Into<String>, description: impl Into<String>) -> Tool {
    Tool::new(name, description, schema_of::<A>())
}

/// `tool` with `A`'s schema as its input schema, unless it declares one of its own: a schema
/// other than a placeholder (`{"type": "object"}`, `{}`, or either with an empty `properties`,
/// none of which names anything `A`'s could contradict) is kept, as a declared
/// `outputSchema` is kept over `Json<T>`'s, for the constraints schemars cannot write or a
/// schema whose exact bytes matter. Arguments it admits that `A` refuses are then the tool
/// failure `invalid arguments`.
pub(crate) fn with_input<A: schemars::JsonSchema>(tool: Tool) -> Tool {
    let placeholder = tool.input_schema().as_object().is_some_and(|m| {
        m.iter().all(|(k, v)| match k.as_str() {
            "type" => v == "object",
            "properties" => v.as_object().is_some_and(Map::is_empty),
            _ => false,
        })
    });
    if placeholder {
        tool.with_input_schema(schema_of::<A>())
    } else {
        tool
    }
}

/// What the engine stores per registered item.
#[derive(Clone)]
pub struct Handler(pub(crate) HandlerKind);

#[derive(Clone)]
pub(crate) enum HandlerKind {
    Tool(AsyncFn<ToolCall, ToolOutput>),
    Resource(AsyncFn<ReadResource, Vec<ResourceContents>>),
    Prompt(AsyncFn<GetPrompt, PromptOutput>),
    Completion(AsyncFn<Complete, Completion>),
    /// Looks up tasks the engine does not hold ([`crate::TaskStore::get`]).
    TaskStore(Arc<dyn crate::TaskStore>),
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            HandlerKind::Tool(_) => "Handler::Tool",
            HandlerKind::Resource(_) => "Handler::Resource",
            HandlerKind::Prompt(_) => "Handler::Prompt",
            HandlerKind::Completion(_) => "Handler::Completion",
            HandlerKind::TaskStore(_) => "Handler::TaskStore",
        })
    }
}

/// Wraps a resource read closure.
pub(crate) fn resource_fn<F, Fut>(f: F) -> Handler
where
    F: Fn(ReadResource) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<ResourceContents>, HandlerError>> + Send + 'static,
{
    Handler(HandlerKind::Resource(erase(f, |r| r)))
}

/// Wraps a prompt closure.
pub(crate) fn prompt_fn<F, Fut>(f: F) -> Handler
where
    F: Fn(GetPrompt) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<PromptOutput, HandlerError>> + Send + 'static,
{
    Handler(HandlerKind::Prompt(erase(f, |r| r)))
}

/// Wraps a completion closure.
pub(crate) fn completion_fn<F, Fut>(f: F) -> Handler
where
    F: Fn(Complete) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Completion, HandlerError>> + Send + 'static,
{
    Handler(HandlerKind::Completion(erase(f, |r| r)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize, schemars::JsonSchema)]
    struct Sum {
        sum: i64,
    }

    fn plain() -> Tool {
        Tool::new("t", "d", json!({"type": "object"}))
    }

    #[test]
    fn json_is_structured_content_whose_text_copy_the_engine_adds() {
        let out = Json(Sum { sum: 5 }).into_tool_result().unwrap();
        assert_eq!(out.structured, Some(json!({"sum": 5})));
        assert_eq!(out.content, vec![]);
        assert!(!out.is_error);
    }

    #[test]
    fn content_is_sent_as_given() {
        let image = Content::image("aGk=", "image/png");
        let out = image.clone().into_tool_result().unwrap();
        assert_eq!((out.content, out.structured, out.is_error), (vec![image.clone()], None, false));
        let blocks = vec![Content::text("a"), image];
        let out = blocks.clone().into_tool_result().unwrap();
        assert_eq!((out.content, out.structured), (blocks, None));
        assert_eq!(<Vec<Content> as IntoToolResult>::output_schema(), None);
    }

    #[test]
    fn as_json_is_structured_when_an_object_and_text_otherwise() {
        // No schemars type: a map and a plain Value.
        let mut m = BTreeMap::new();
        m.insert("b", 2);
        let out = AsJson(m).into_tool_result().unwrap();
        assert_eq!((out.structured, out.content), (Some(json!({"b": 2})), vec![]));
        let out = AsJson(json!([1, "x"])).into_tool_result().unwrap();
        assert_eq!((out.structured, out.content), (None, vec![Content::text(r#"[1,"x"]"#)]));
        let out = AsJson("hi").into_tool_result().unwrap();
        assert_eq!(out.content, vec![Content::text(r#""hi""#)]);
        assert_eq!(<AsJson<Value> as IntoToolResult>::output_schema(), None);
    }

    #[test]
    fn as_json_of_what_does_not_serialize_is_a_private_failure() {
        let mut m = BTreeMap::new();
        m.insert(vec![1u8], 1);
        assert!(matches!(AsJson(m).into_tool_result(), Err(HandlerError::Private(_))));
    }

    #[test]
    fn a_tool_failure_is_a_typed_failure_however_it_is_returned() {
        let failed = |r: ToolResult| match r {
            Err(HandlerError::Failure(f)) => (f.code.clone(), f.message.clone(), f.retryable),
            other => panic!("expected a failure, got {other:?}"),
        };
        let f = || ToolFailure::new("busy", "try later").retryable(true);
        let expected = ("busy".to_owned(), "try later".to_owned(), true);
        assert_eq!(failed(f().into_tool_result()), expected);
        assert_eq!(failed(Err::<Json<Sum>, _>(f()).into_tool_result()), expected);
        let through_question_mark = || -> Result<String, HandlerError> { Err(f())? };
        assert_eq!(failed(through_question_mark().into_tool_result()), expected);
        assert_eq!(Result::<Json<Sum>, ToolFailure>::output_schema(), Json::<Sum>::output_schema());
    }

    #[test]
    fn only_json_declares_an_output_schema() {
        assert_eq!(String::output_schema(), None);
        assert_eq!(ToolOutput::output_schema(), None);
        let schema = Json::<Sum>::output_schema().unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["sum"]["type"], "integer");
        assert_eq!(schema["required"], json!(["sum"]));
        assert!(schema.get("title").is_none(), "the tool's name says it");
        assert_eq!(Result::<Json<Sum>, HandlerError>::output_schema(), Some(schema));
    }

    #[test]
    fn registration_takes_the_schema_unless_the_tool_declares_one() {
        let tool = with_output::<Json<Sum>>(plain()).unwrap();
        assert_eq!(tool.declared_output_schema(), Json::<Sum>::output_schema().as_ref());
        let own = json!({"type": "object", "properties": {"sum": {"type": "number"}}});
        let tool = with_output::<Json<Sum>>(plain().output_schema(own.clone())).unwrap();
        assert_eq!(tool.declared_output_schema(), Some(&own));
        assert_eq!(with_output::<String>(plain()).unwrap().declared_output_schema(), None);
    }

    #[test]
    fn a_value_that_is_no_object_is_refused_at_registration() {
        for refused in [with_output::<Json<u32>>(plain()), with_output::<Json<Vec<Sum>>>(plain())] {
            match refused {
                Err(RegistryError::InvalidSchema(msg)) => {
                    assert!(msg.contains("\"t\"") && msg.contains("wrap the value in a struct"), "{msg}")
                }
                other => panic!("expected InvalidSchema, got {other:?}"),
            }
        }
        let built = Server::builder("s", "1").tool(plain(), |_: ToolCall| async { Json(7u32) }).build();
        assert!(matches!(built, Err(crate::BuildError::Registry(RegistryError::InvalidSchema(_)))));
    }

    #[derive(serde::Deserialize, schemars::JsonSchema, Debug, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Size {
        Small,
        Large,
    }

    /// Every kind of field a form can show, as the derive writes it.
    #[derive(serde::Deserialize, schemars::JsonSchema, Debug, PartialEq)]
    struct Order {
        /// Who orders.
        name: String,
        #[schemars(email)]
        email: Option<String>,
        count: u8,
        weight: f64,
        gift: Option<bool>,
        size: Size,
        spare: Option<Size>,
    }

    fn form_of(request: InputRequest) -> Map<String, Value> {
        match request {
            InputRequest::Elicit { requested_schema, .. } => requested_schema,
            other => panic!("not a form: {other:?}"),
        }
    }

    #[test]
    fn a_flat_struct_is_a_form_with_its_options_optional() {
        let form = form_of(typed_form::<Order>("Your order?").unwrap());
        assert_eq!(form["type"], "object");
        assert!(form.get("title").is_none(), "{form:?}");
        let props = &form["properties"];
        assert_eq!(props["name"], json!({"type": "string", "description": "Who orders."}));
        assert_eq!(props["email"], json!({"type": "string", "format": "email"}));
        assert_eq!(props["count"], json!({"type": "integer", "minimum": 0, "maximum": 255}));
        assert_eq!(props["weight"], json!({"type": "number"}));
        assert_eq!(props["gift"], json!({"type": "boolean"}));
        assert_eq!(props["size"], json!({"type": "string", "enum": ["small", "large"]}));
        assert_eq!(props["spare"], json!({"type": "string", "enum": ["small", "large"]}));
        let mut required: Vec<&str> =
            form["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        required.sort_unstable();
        assert_eq!(required, ["count", "name", "size", "weight"]);
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Address {
        street: String,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Nested {
        name: String,
        home: Address,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Listed {
        name: String,
        tags: Vec<String>,
    }

    #[test]
    fn a_type_that_is_no_flat_form_is_refused_naming_the_property() {
        for (refused, property) in
            [(typed_form::<Nested>("m"), "`home`"), (typed_form::<Listed>("m"), "`tags`")]
        {
            match refused {
                Err(InteractionError::InvalidSchema(msg)) => assert!(msg.contains(property), "{msg}"),
                other => panic!("expected InvalidSchema naming {property}, got {other:?}"),
            }
        }
        assert!(matches!(typed_form::<u32>("m"), Err(InteractionError::InvalidSchema(_))));
    }

    #[test]
    fn an_answer_is_read_by_its_action() {
        let content = json!({"name": "Ada", "count": 2, "weight": 1.5, "size": "small", "spare": "large"});
        let accepted = elicited::<Order>(json!({"action": "accept", "content": content})).unwrap();
        let expected = Order {
            name: "Ada".into(),
            email: None,
            count: 2,
            weight: 1.5,
            gift: None,
            size: Size::Small,
            spare: Some(Size::Large),
        };
        assert_eq!(accepted, Elicited::Accepted(expected));
        assert_eq!(elicited::<Order>(json!({"action": "decline"})).unwrap(), Elicited::Declined);
        assert_eq!(elicited::<Order>(json!({"action": "cancel"})).unwrap(), Elicited::Cancelled);
        let long = "x".repeat(1000);
        match elicited::<Order>(json!({"action": "accept", "content": {"name": 1, "size": long}})) {
            Err(AskError::Undecodable(m)) => assert!(m.len() < 300, "{m}"),
            other => panic!("expected Undecodable, got {other:?}"),
        }
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        text: String,
    }

    #[test]
    fn a_typed_declaration_takes_the_schema_unless_it_declares_one() {
        let derived = schema_of::<Args>();
        for placeholder in [json!({"type": "object"}), json!({}), json!({"type": "object", "properties": {}})]
        {
            let tool = Tool::new("t", "d", placeholder).task_support(mcp_proto::TaskSupport::Optional);
            let tool = with_input::<Args>(tool);
            assert_eq!(tool.input_schema(), &derived);
            assert_eq!(tool.declared_task_support(), mcp_proto::TaskSupport::Optional);
        }
        let own = json!({"type": "object", "properties": {"text": {"type": "string", "pattern": "^a"}}});
        assert_eq!(with_input::<Args>(Tool::new("t", "d", own.clone())).input_schema(), &own);
        let closed = json!({"type": "object", "additionalProperties": false});
        assert_eq!(with_input::<Args>(Tool::new("t", "d", closed.clone())).input_schema(), &closed);
    }

    #[test]
    fn a_value_that_does_not_serialize_is_a_private_failure() {
        let mut map = std::collections::BTreeMap::new();
        map.insert(vec![1u8], 1u8);
        // A map with non-string keys has a schema (an object) but no JSON form.
        assert!(matches!(Json(map).into_tool_result(), Err(HandlerError::Private(_))));
    }
}
