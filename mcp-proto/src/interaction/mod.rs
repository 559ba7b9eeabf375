//! Asking the client for input (elicitation, sampling, roots) with one handler API in both
//! protocol eras.
//!
//! A handler says what it needs as an [`InputRequest`]. How that reaches the client depends on
//! the era of the request being served:
//!
//! - **Legacy** (2025-03-26 .. 2025-11-25): the engine sends a real JSON-RPC request whose
//!   `method` is [`InputRequest::method`] and whose `params` are [`InputRequest::params_for`],
//!   then checks the client's response with [`InputRequest::validate_answer`].
//! - **Modern** (2026-07-28, SEP-2322 "multi round-trip requests"): the server never sends a
//!   request. The call returns `{resultType: "input_required", inputRequests: {key:
//!   `[`InputRequest::to_input_request`]`}, requestState}`; the client retries the same method
//!   with `inputResponses` and the echoed `requestState`. What the server has learnt so far
//!   travels in that state, sealed by [`seal_state`] and checked by [`open_state`], because a
//!   stateless server has nowhere else to keep it.
//!
//! In both eras, [`InputRequest::check_client`] runs first: a request the client did not declare
//! a capability for (or that its protocol version cannot express) is never sent.
//!
//! This module is pure: no I/O, no clock, no randomness. Times are unix milliseconds passed in by
//! the caller; the only secret is the [`KeyRing`](crate::cursor::KeyRing) the engine already holds for cursors.

use std::fmt;

use serde_json::{json, Map, Value};

use crate::json::clip;
use crate::jsonrpc::{ErrorCode, RpcError};
use crate::version::ProtocolVersion;

mod answers;
mod forms;
mod sealed;
#[cfg(test)]
mod tests;

// Defined with the checks that raise it, so answers.rs needs nothing from this file.
pub use answers::InvalidAnswer;
use answers::{elicit_action, validate_elicit_answer, validate_roots_answer, validate_sample_answer};
use forms::{is_integer_text, is_uri, validate_schema};
pub use sealed::{
    arguments_digest, open_state, open_state_with_expiry, seal_state, RequestState, StateBinding, StateError,
};

/// The largest sealed request state, in bytes of the encoded token: 64 KiB.
///
/// The state rides in every retry, so it is bounded like any other input. Sealing a bigger
/// state fails with [`InteractionError::StateTooLarge`] (the handler is carrying too much; keep
/// it server-side and put a handle in [`RequestState::data`]); a longer token from a client is
/// refused as [`StateError::TooLarge`] before any decoding or MAC work.
///
/// A constant rather than a [`Limits`](crate::limits::Limits) field: a state sealed by one replica is
/// opened by another sharing the key ring, so every replica must agree on what it may seal and
/// accept, and a per-server setting could make one refuse what another issued.
pub const MAX_STATE_BYTES: usize = 64 * 1024;

/// The protocol revision that introduced elicitation.
const ELICITATION_SINCE: ProtocolVersion = ProtocolVersion::V2025_06_18;
/// The protocol revision that introduced URL mode, multi-select enums and sampling tools.
const NOVEMBER: ProtocolVersion = ProtocolVersion::V2025_11_25;

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// One thing a handler needs from the client: a form filled in, a URL visited, an LLM sample or
/// the client's roots.
///
/// Built through the constructors ([`InputRequest::elicit`], [`InputRequest::elicit_url`],
/// [`InputRequest::sample`], [`InputRequest::list_roots`]), which check what every protocol
/// version requires, so the engine can send it without re-checking the handler's work.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputRequest {
    /// Form-mode elicitation (`elicitation/create`, 2025-06-18 and later).
    #[non_exhaustive]
    Elicit {
        /// What the user is asked, shown above the form.
        message: String,
        /// The form: `{"type": "object", "properties": {...}, "required": [...]}` with only
        /// primitive properties, exactly as the handler wrote it.
        requested_schema: Map<String, Value>,
    },
    /// URL-mode elicitation: send the user to a web page (2025-11-25 and later). Use it for
    /// anything secret, which form mode must never carry.
    #[non_exhaustive]
    ElicitUrl {
        /// Why the user should open the page.
        message: String,
        /// The absolute URL to open.
        url: String,
    },
    /// LLM sampling (`sampling/createMessage`).
    #[non_exhaustive]
    Sample {
        /// The request params as the handler wrote them (`messages`, `maxTokens`, and any of
        /// `systemPrompt`, `temperature`, `tools`, ...), sent unchanged.
        params: Map<String, Value>,
    },
    /// The client's filesystem roots (`roots/list`).
    ListRoots,
}

impl InputRequest {
    /// A form-mode elicitation.
    ///
    /// `schema` must be a flat object schema whose properties are all primitive: a string
    /// (optionally with `format` email, uri, date or date-time, `minLength`/`maxLength`, or a
    /// choice as `enum` (with legacy `enumNames`) or `oneOf` of `{const, title}`), a number or
    /// integer (`minimum`/`maximum`), a boolean, or a multi-select `array` whose `items` is
    /// `{"type": "string", "enum": [...]}` or `{"anyOf": [{const, title}, ...]}`. Clients render
    /// these as form fields, so anything else (nested objects, arrays of objects, unknown
    /// keywords, `$ref`) is refused here, with the offending property named, rather than
    /// discovered by a client that cannot draw it. Each `default` must satisfy its own property.
    /// Nothing is added: no defaults, no `mode`.
    pub fn elicit(message: impl Into<String>, schema: Value) -> Result<Self, InteractionError> {
        let requested_schema = validate_schema(schema).map_err(InteractionError::InvalidSchema)?;
        Ok(InputRequest::Elicit { message: message.into(), requested_schema })
    }

    /// A URL-mode elicitation: ask the user to open `url` (an absolute URI, such as an
    /// `https://` page). Needs a 2025-11-25 or later client that declared `elicitation.url`.
    pub fn elicit_url(message: impl Into<String>, url: impl Into<String>) -> Result<Self, InteractionError> {
        let url = url.into();
        if !is_uri(&url) {
            return Err(InteractionError::InvalidUrl(format!(
                "`{}` is not an absolute URI (scheme, then `:`, no spaces)",
                clip(&url)
            )));
        }
        Ok(InputRequest::ElicitUrl { message: message.into(), url })
    }

    /// A sampling request; `params` are the `sampling/createMessage` params.
    ///
    /// Every version requires `messages` (an array of `{role, content}`) and an integer
    /// `maxTokens`; those are checked here. `task` is refused: a task-augmented request is
    /// answered with a task rather than a message, which no handler waiting for a sample could
    /// use. Everything else passes through unchanged.
    pub fn sample(params: Value) -> Result<Self, InteractionError> {
        let bad = |m: &str| Err(InteractionError::InvalidSampling(m.to_owned()));
        let Value::Object(params) = params else {
            return bad("sampling params must be a JSON object");
        };
        let Some(Value::Array(messages)) = params.get("messages") else {
            return bad("sampling params need a `messages` array");
        };
        for (i, m) in messages.iter().enumerate() {
            let role_ok = matches!(m.get("role").and_then(Value::as_str), Some("user" | "assistant"));
            let content_ok = m.get("content").is_some_and(|c| c.is_object() || c.is_array());
            if !role_ok || !content_ok {
                return Err(InteractionError::InvalidSampling(format!(
                    "messages[{i}] needs `role` (\"user\" or \"assistant\") and `content` (an object or array)"
                )));
            }
        }
        match params.get("maxTokens") {
            Some(Value::Number(n)) if is_integer_text(n) => {}
            _ => return bad("sampling params need an integer `maxTokens`"),
        }
        if params.contains_key("task") {
            return bad("`task` is not supported: the answer would be a task, not a message");
        }
        Ok(InputRequest::Sample { params })
    }

    /// A request for the client's roots.
    pub fn list_roots() -> Self {
        InputRequest::ListRoots
    }

    /// The JSON-RPC method of this request.
    pub fn method(&self) -> &'static str {
        match self {
            InputRequest::Elicit { .. } | InputRequest::ElicitUrl { .. } => "elicitation/create",
            InputRequest::Sample { .. } => "sampling/createMessage",
            InputRequest::ListRoots => "roots/list",
        }
    }

    /// The client capability this kind of request needs, as a name and the value to declare:
    /// `("elicitation", {})` for a form (an empty object means form-only), `("elicitation",
    /// {"url": {}})` for a URL, `("sampling", {})`, `("roots", {})`.
    ///
    /// This is the base capability, for advertising what a tool may ask. A particular request
    /// can need more (sampling with `tools` needs `sampling.tools`); [`Self::check_client`] names
    /// the exact requirement when it fails.
    pub fn required_capability(&self) -> (&'static str, Value) {
        match self {
            InputRequest::Elicit { .. } => ("elicitation", json!({})),
            InputRequest::ElicitUrl { .. } => ("elicitation", json!({"url": {}})),
            InputRequest::Sample { .. } => ("sampling", json!({})),
            InputRequest::ListRoots => ("roots", json!({})),
        }
    }

    /// Whether a client speaking `version` with capabilities `client_caps` (a
    /// `ClientCapabilities` object: from `initialize` in legacy sessions, from the request's
    /// `_meta` in 2026) can be sent this request.
    ///
    /// Servers must only send what the client declared, so this runs before every send. The
    /// rules:
    /// - the capability must be declared (an object) at all;
    /// - elicitation needs 2025-06-18 or later; multi-select (`array`) properties and URL mode
    ///   need 2025-11-25 or later;
    /// - from 2025-11-25, `elicitation: {}` means form only: URL mode needs `elicitation.url`,
    ///   and a client that declared only `url` cannot be sent a form;
    /// - sampling with `tools` or `toolChoice` needs 2025-11-25 and `sampling.tools`; from
    ///   2025-11-25, `includeContext` other than `"none"` needs `sampling.context`.
    pub fn check_client(&self, version: ProtocolVersion, client_caps: &Value) -> Result<(), Unsupported> {
        match self {
            InputRequest::Elicit { requested_schema, .. } => {
                if version < ELICITATION_SINCE {
                    return Err(Unsupported::new(
                        json!({"elicitation": {}}),
                        format!("elicitation needs protocol version {ELICITATION_SINCE} or later"),
                    ));
                }
                let Some(el) = capability(client_caps, "elicitation") else {
                    return Err(Unsupported::new(
                        json!({"elicitation": {}}),
                        "the client did not declare the elicitation capability",
                    ));
                };
                if version >= NOVEMBER && !elicitation_allows_form(el) {
                    return Err(Unsupported::new(
                        json!({"elicitation": {"form": {}}}),
                        "the client's elicitation capability does not include form mode",
                    ));
                }
                if version < NOVEMBER && has_multi_select(requested_schema) {
                    return Err(Unsupported::new(
                        json!({"elicitation": {}}),
                        format!("multi-select elicitation fields need protocol version {NOVEMBER} or later"),
                    ));
                }
                Ok(())
            }
            InputRequest::ElicitUrl { .. } => {
                let required = json!({"elicitation": {"url": {}}});
                if version < NOVEMBER {
                    return Err(Unsupported::new(
                        required,
                        format!("URL-mode elicitation needs protocol version {NOVEMBER} or later"),
                    ));
                }
                match capability(client_caps, "elicitation") {
                    Some(el) if el.get("url").is_some_and(Value::is_object) => Ok(()),
                    _ => Err(Unsupported::new(required, "the client did not declare URL-mode elicitation")),
                }
            }
            InputRequest::Sample { params } => {
                let Some(sampling) = capability(client_caps, "sampling") else {
                    return Err(Unsupported::new(
                        json!({"sampling": {}}),
                        "the client did not declare the sampling capability",
                    ));
                };
                if params.contains_key("tools") || params.contains_key("toolChoice") {
                    let required = json!({"sampling": {"tools": {}}});
                    if version < NOVEMBER {
                        return Err(Unsupported::new(
                            required,
                            format!("tool use in sampling needs protocol version {NOVEMBER} or later"),
                        ));
                    }
                    if !sampling.get("tools").is_some_and(Value::is_object) {
                        return Err(Unsupported::new(required, "the client did not declare sampling.tools"));
                    }
                }
                let wants_context = matches!(
                    params.get("includeContext").and_then(Value::as_str),
                    Some("thisServer" | "allServers")
                );
                if version >= NOVEMBER
                    && wants_context
                    && !sampling.get("context").is_some_and(Value::is_object)
                {
                    return Err(Unsupported::new(
                        json!({"sampling": {"context": {}}}),
                        "the client did not declare sampling.context, which includeContext needs",
                    ));
                }
                Ok(())
            }
            InputRequest::ListRoots => match capability(client_caps, "roots") {
                Some(_) => Ok(()),
                None => Err(Unsupported::new(
                    json!({"roots": {}}),
                    "the client did not declare the roots capability",
                )),
            },
        }
    }

    /// The wire `params` of this request for a client speaking `version`.
    ///
    /// Differences by version:
    /// - before 2025-11-25, a titled single-select (`oneOf` of `{const, title}`, a 2025-11-25
    ///   form) is lowered to the 2025-06-18 shape: `enum` of the consts plus `enumNames` of the
    ///   titles, so older clients still show the titles. Legacy `enumNames` are kept as written.
    /// - URL mode carries `elicitationId` in 2025-11-25, which that version requires (it names
    ///   the elicitation in `notifications/elicitation/complete` and `-32042`): pass it as
    ///   `elicitation_id`. 2026 has no such field, so the argument is ignored there.
    /// - form mode never carries `mode`: it is optional and means `"form"` when absent.
    ///
    /// Nothing else is added or defaulted. Call [`Self::check_client`] first: this does not
    /// repeat its checks, so a request the version cannot express comes out as written.
    pub fn params_for(&self, version: ProtocolVersion, elicitation_id: Option<&str>) -> Map<String, Value> {
        let mut params = Map::new();
        match self {
            InputRequest::Elicit { message, requested_schema } => {
                params.insert("message".into(), Value::String(message.clone()));
                let schema = if version < NOVEMBER {
                    lower_titled_enums(requested_schema)
                } else {
                    requested_schema.clone()
                };
                params.insert("requestedSchema".into(), Value::Object(schema));
            }
            InputRequest::ElicitUrl { message, url } => {
                params.insert("mode".into(), Value::String("url".into()));
                params.insert("message".into(), Value::String(message.clone()));
                params.insert("url".into(), Value::String(url.clone()));
                if let (false, Some(id)) = (version.is_modern(), elicitation_id) {
                    params.insert("elicitationId".into(), Value::String(id.to_owned()));
                }
            }
            InputRequest::Sample { params: p } => params.clone_from(p),
            InputRequest::ListRoots => {}
        }
        params
    }

    /// The request as one entry of a 2026 `inputRequests` map: `{"method", "params"}`, without
    /// `jsonrpc` or `id` (it is not a message of its own).
    pub fn to_input_request(&self, version: ProtocolVersion) -> Value {
        json!({"method": self.method(), "params": Value::Object(self.params_for(version, None))})
    }

    /// The request an `inputRequests` entry ([`to_input_request`](Self::to_input_request))
    /// spells, read back: for checking a recorded `input_required` against the capabilities of
    /// a later copy of the request (a replay must not send what the copy cannot receive).
    /// `None` for anything `to_input_request` cannot have written.
    pub(crate) fn from_input_request(entry: &Value) -> Option<Self> {
        let params = entry.get("params").and_then(Value::as_object);
        match entry.get("method")?.as_str()? {
            "elicitation/create" => {
                let params = params?;
                let message = params.get("message")?.as_str()?;
                if params.get("mode").and_then(Value::as_str) == Some("url") {
                    return Self::elicit_url(message, params.get("url")?.as_str()?).ok();
                }
                // The schema as sent, possibly lowered for an older version: its kind and its
                // multi-select fields are what the capability check reads.
                let requested_schema = params.get("requestedSchema")?.as_object()?.clone();
                Some(InputRequest::Elicit { message: message.to_owned(), requested_schema })
            }
            "sampling/createMessage" => Some(InputRequest::Sample { params: params?.clone() }),
            "roots/list" => Some(InputRequest::ListRoots),
            _ => None,
        }
    }

    /// Checks the client's answer to this request (the JSON-RPC `result` in legacy sessions, the
    /// `inputResponses` entry in 2026) before a handler sees it.
    ///
    /// Answers are hostile input, and a handler that asked for an integer should be able to rely
    /// on getting one, so:
    /// - elicitation: `{action: "accept"|"decline"|"cancel", content?}`. Only a form `accept`
    ///   carries `content`: an object whose keys are properties of the requested schema, each
    ///   value of the declared type and within its declared bounds and options, with every
    ///   required property present (an absent `content` counts as `{}`). Integers must be
    ///   integer literals; numbers are compared by their exact text, never through `f64`.
    ///   `content` on `decline`, `cancel` or any URL-mode answer is refused: in URL mode,
    ///   "accept" only means the user agreed to open the page.
    /// - sampling: `role` ("user" or "assistant"), `content` (a block or an array of blocks,
    ///   each an object with a string `type`), a string `model` and, if present, a string
    ///   `stopReason`.
    /// - roots: `{roots: [{uri, name?}]}` with every `uri` a `file://` URI.
    ///
    /// Other fields (`_meta`, for one) are ignored, as every schema version allows them.
    pub fn validate_answer(&self, answer: &Value) -> Result<(), InvalidAnswer> {
        let Some(obj) = answer.as_object() else {
            return Err(InvalidAnswer::new(format!("the answer to {} must be a JSON object", self.method())));
        };
        match self {
            InputRequest::Elicit { requested_schema, .. } => validate_elicit_answer(requested_schema, obj),
            InputRequest::ElicitUrl { .. } => {
                elicit_action(obj)?;
                if obj.contains_key("content") {
                    return Err(InvalidAnswer::new("a URL-mode elicitation answer carries no `content`"));
                }
                Ok(())
            }
            InputRequest::Sample { .. } => validate_sample_answer(obj),
            InputRequest::ListRoots => validate_roots_answer(obj),
        }
    }
}

/// The client's declaration of capability `name`, when it is an object (declared).
fn capability<'a>(caps: &'a Value, name: &str) -> Option<&'a Map<String, Value>> {
    caps.get(name)?.as_object()
}

/// From 2025-11-25: `{}` (or neither mode named) means form-only; otherwise `form` must be named.
fn elicitation_allows_form(el: &Map<String, Value>) -> bool {
    let form = el.get("form").is_some_and(Value::is_object);
    let url = el.get("url").is_some_and(Value::is_object);
    form || !url
}

fn has_multi_select(schema: &Map<String, Value>) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|props| props.values().any(|p| p.get("type").and_then(Value::as_str) == Some("array")))
}

/// The 2025-06-18 form of a schema: `oneOf` of `{const, title}` becomes `enum` + `enumNames`,
/// in place, every other key and its order unchanged.
fn lower_titled_enums(schema: &Map<String, Value>) -> Map<String, Value> {
    let mut out = schema.clone();
    let Some(Value::Object(props)) = out.get_mut("properties") else {
        return out;
    };
    for prop in props.values_mut() {
        let Value::Object(p) = prop else { continue };
        let Some(Value::Array(options)) = p.get("oneOf") else { continue };
        let consts: Vec<Value> = options.iter().filter_map(|o| o.get("const").cloned()).collect();
        let titles: Vec<Value> = options.iter().filter_map(|o| o.get("title").cloned()).collect();
        let mut lowered = Map::new();
        for (k, v) in std::mem::take(p) {
            if k == "oneOf" {
                lowered.insert("enum".into(), Value::Array(consts.clone()));
                lowered.insert("enumNames".into(), Value::Array(titles.clone()));
            } else {
                lowered.insert(k, v);
            }
        }
        *p = lowered;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// A handler built a request or state the protocol cannot carry: the handler's bug, reported to
/// it rather than to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InteractionError {
    /// The elicitation schema is not a flat object of primitive fields; the text names the
    /// property and the problem.
    InvalidSchema(String),
    /// The sampling params lack what every version requires.
    InvalidSampling(String),
    /// The URL of a URL-mode elicitation is not an absolute URI.
    InvalidUrl(String),
    /// The sealed state would be longer than `max` bytes ([`MAX_STATE_BYTES`]).
    StateTooLarge {
        /// The bound that was crossed.
        max: usize,
    },
}

impl fmt::Display for InteractionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InteractionError::InvalidSchema(m) => write!(f, "invalid elicitation schema: {m}"),
            InteractionError::InvalidSampling(m) => write!(f, "invalid sampling request: {m}"),
            InteractionError::InvalidUrl(m) => write!(f, "invalid elicitation URL: {m}"),
            InteractionError::StateTooLarge { max } => write!(f, "request state longer than {max} bytes"),
        }
    }
}

impl std::error::Error for InteractionError {}

/// The client cannot be sent a request: it did not declare the capability, or its protocol
/// version cannot express the request.
///
/// On 2026-07-28 the call is answered with the `-32021` error ([`Unsupported::rpc_error`]):
/// SEP-2575 says the server MUST, and the official conformance suite counts a tool result
/// instead as a violation (seed 000 asks for a tool failure there; the spec wins). Before
/// 2026-07-28 no such error exists: a legacy tool call whose handler passes the refusal on
/// (`?`) fails with the actionable `confirmation_required` tool failure
/// ([`Unsupported::tool_failure`]), which the model and the user read. Either way nothing was
/// asked, so nothing is held waiting.
#[derive(Debug, Clone, PartialEq)]
pub struct Unsupported {
    required: Value,
    message: String,
}

impl Unsupported {
    fn new(required: Value, message: impl Into<String>) -> Self {
        Self { required, message: message.into() }
    }

    /// The `ClientCapabilities` object the request needs, such as `{"sampling": {}}` (an object,
    /// not a list, as `MissingRequiredClientCapabilityError` requires).
    pub fn required_capabilities(&self) -> &Value {
        &self.required
    }

    /// What is missing, in words.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `-32021` with `data: {"requiredCapabilities": {...}}`.
    pub fn rpc_error(&self) -> RpcError {
        RpcError::incompatible(ErrorCode::MissingClientCapability, self.message.clone())
            .with_data(json!({"requiredCapabilities": self.required}))
    }

    /// The tool failure [`CONFIRMATION_REQUIRED`]: not retryable (the same client will lack
    /// the same capability), its message saying what is missing and what the client would
    /// have to declare.
    pub fn tool_failure(&self) -> crate::content::ToolFailure {
        let declare = serde_json::to_string(&self.required).unwrap_or_default();
        let message = format!(
            "{CONFIRMATION_REQUIRED}: this tool needs the user's input, and {}; a client declaring {declare} can go on",
            self.message
        );
        crate::content::ToolFailure::new(CONFIRMATION_REQUIRED, message)
    }

    /// The `Unsupported` a `-32021` error stands for when it refused an ask: its
    /// `data.requiredCapabilities` names only what an [`InputRequest`] needs (`elicitation`,
    /// `sampling`, `roots`). `None` for any other error, such as the `-32021` of a task the
    /// client's missing Tasks extension rules out.
    pub fn of_error(e: &RpcError) -> Option<Self> {
        if e.code != ErrorCode::MissingClientCapability {
            return None;
        }
        let required = e.data.as_ref()?.get("requiredCapabilities")?.as_object()?;
        let input = |k: &String| matches!(k.as_str(), "elicitation" | "sampling" | "roots");
        (!required.is_empty() && required.keys().all(input))
            .then(|| Self::new(Value::Object(required.clone()), e.message.clone()))
    }
}

/// The failure code of a tool call that needed input its client cannot give
/// ([`Unsupported::tool_failure`]).
pub const CONFIRMATION_REQUIRED: &str = "confirmation_required";

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Unsupported {}
