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
//! the caller; the only secret is the [`KeyRing`] the engine already holds for cursors.

use std::cmp::Ordering;
use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Map, Number, Value};
use sha2::{Digest, Sha256};

use crate::cursor::{self, caller_digest, KeyRing};
use crate::jsonrpc::{ErrorCode, RpcError};
use crate::ProtocolVersion;

/// How many times one modern request may come back `input_required` before the engine gives up.
///
/// Default 10. SEP-2322 allows any number of rounds but gives no bound, and every round costs the
/// client a full request; ten is far more than any sensible dialogue and keeps a handler that
/// asks in a loop from pinning a client forever. The engine enforces it: the eleventh ask fails
/// the call with the error `interaction_limit` instead of another `input_required` result.
pub const DEFAULT_MAX_ROUNDS: u32 = 10;

/// How long a sealed request state stays valid after it is issued: 10 minutes, in milliseconds.
///
/// Long enough for a person to read a form and answer it, short enough that a state copied out
/// of a log is soon useless. An older state is refused as [`StateError::Expired`], and the
/// client has to start the call again without one.
pub const DEFAULT_STATE_TTL_MS: u64 = 10 * 60 * 1000;

/// The largest sealed request state, in bytes of the encoded token: 64 KiB.
///
/// The state rides in every retry, so it is bounded like any other input. Sealing a bigger
/// state fails with [`InteractionError::StateTooLarge`] (the handler is carrying too much; keep
/// it server-side and put a handle in [`RequestState::data`]); a longer token from a client is
/// refused as [`StateError::TooLarge`] before any decoding or MAC work.
pub const MAX_STATE_BYTES: usize = 64 * 1024;

/// The purpose tag inside a sealed request state. Cursors are sealed with the same keys, so the
/// tag (and the disjoint field names) is what keeps one from being accepted as the other.
const STATE_PURPOSE: &str = "rs1";

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
// Elicitation schemas and answers
// ---------------------------------------------------------------------------------------------

const NESTED: &str = "is a nested object; elicitation schemas are flat: every property must be a string, \
                      number, integer, boolean or multi-select array";
const NESTED_ITEMS: &str = "is an array of objects; elicitation schemas are flat: arrays are multi-selects \
                            of string options";

/// One form field, as read from a validated property schema.
enum Field<'a> {
    Text {
        format: Option<&'a str>,
        min_len: Option<u64>,
        max_len: Option<u64>,
        options: Option<Vec<&'a str>>,
    },
    Number {
        integer: bool,
        minimum: Option<&'a Number>,
        maximum: Option<&'a Number>,
    },
    Boolean,
    Multi {
        options: Vec<&'a str>,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
}

fn validate_schema(schema: Value) -> Result<Map<String, Value>, String> {
    let Value::Object(top) = schema else {
        return Err("the requested schema must be a JSON object".into());
    };
    for key in top.keys() {
        if !matches!(key.as_str(), "type" | "properties" | "required" | "$schema" | "title" | "description") {
            return Err(format!(
                "keyword `{}` is not allowed at the top of an elicitation schema",
                clip(key)
            ));
        }
    }
    if top.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the requested schema needs `\"type\": \"object\"`".into());
    }
    for key in ["$schema", "title", "description"] {
        if top.get(key).is_some_and(|v| !v.is_string()) {
            return Err(format!("`{key}` must be a string"));
        }
    }
    let Some(props) = top.get("properties").and_then(Value::as_object) else {
        return Err("the requested schema needs a `properties` object".into());
    };
    for (name, prop) in props {
        let field = field(prop).map_err(|m| format!("property `{}` {m}", clip(name)))?;
        if let Some(default) = prop.get("default") {
            check_value(&field, default).map_err(|m| format!("property `{}`: `default` {m}", clip(name)))?;
        }
    }
    if let Some(required) = top.get("required") {
        let Some(required) = required.as_array() else {
            return Err("`required` must be an array of property names".into());
        };
        for r in required {
            match r.as_str() {
                Some(name) if props.contains_key(name) => {}
                Some(name) => {
                    return Err(format!("`required` names `{}`, which is not a property", clip(name)))
                }
                None => return Err("`required` must be an array of property names".into()),
            }
        }
    }
    Ok(top)
}

/// Reads one property schema, refusing anything a form cannot show.
fn field(prop: &Value) -> Result<Field<'_>, String> {
    let Some(p) = prop.as_object() else {
        return Err("must be a schema object".into());
    };
    let ty = match p.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err("needs one `type` string (type unions are not allowed)".into()),
        None if p.contains_key("properties") => return Err(NESTED.into()),
        None => return Err("needs a `type`".into()),
    };
    const COMMON: [&str; 4] = ["type", "title", "description", "default"];
    let extra: &[&str] = match ty {
        "string" => &["format", "minLength", "maxLength", "enum", "enumNames", "oneOf"],
        "number" | "integer" => &["minimum", "maximum"],
        "boolean" => &[],
        "array" => &["items", "minItems", "maxItems"],
        "object" => return Err(NESTED.into()),
        other => {
            return Err(format!(
                "has type `{}`; allowed: string, number, integer, boolean, array (multi-select)",
                clip(other)
            ))
        }
    };
    if let Some(k) = p.keys().find(|k| !COMMON.contains(&k.as_str()) && !extra.contains(&k.as_str())) {
        return Err(format!("uses keyword `{}`, which elicitation schemas do not allow on a {ty}", clip(k)));
    }
    for k in ["title", "description"] {
        if p.get(k).is_some_and(|v| !v.is_string()) {
            return Err(format!("has a non-string `{k}`"));
        }
    }
    match ty {
        "string" => {
            let options = match (p.get("enum"), p.get("oneOf")) {
                (Some(_), Some(_)) => return Err("uses both `enum` and `oneOf`; use one".into()),
                (Some(e), None) => {
                    let options = string_options(e, "enum")?;
                    if let Some(names) = p.get("enumNames") {
                        if string_options(names, "enumNames")?.len() != options.len() {
                            return Err("has `enumNames` of a different length than `enum`".into());
                        }
                    }
                    Some(options)
                }
                (None, Some(o)) => {
                    if p.contains_key("enumNames") {
                        return Err("uses `enumNames` with `oneOf`; titles go in `oneOf`".into());
                    }
                    Some(titled_options(o, "oneOf")?)
                }
                (None, None) if p.contains_key("enumNames") => {
                    return Err("uses `enumNames` without `enum`".into())
                }
                (None, None) => None,
            };
            if options.is_some() && ["format", "minLength", "maxLength"].iter().any(|k| p.contains_key(*k)) {
                return Err(
                    "mixes a choice with `format`/`minLength`/`maxLength`, which apply to free text only"
                        .into(),
                );
            }
            let format = match p.get("format") {
                None => None,
                Some(Value::String(f)) if matches!(f.as_str(), "email" | "uri" | "date" | "date-time") => {
                    Some(f.as_str())
                }
                Some(_) => return Err("has a `format` other than email, uri, date or date-time".into()),
            };
            let (min_len, max_len) = bounds(p, "minLength", "maxLength")?;
            Ok(Field::Text { format, min_len, max_len, options })
        }
        "number" | "integer" => {
            let number = |k: &str| match p.get(k) {
                None => Ok(None),
                Some(Value::Number(n)) => Ok(Some(n)),
                Some(_) => Err(format!("has a non-numeric `{k}`")),
            };
            let (minimum, maximum) = (number("minimum")?, number("maximum")?);
            if let (Some(lo), Some(hi)) = (minimum, maximum) {
                if decimal_cmp(lo.as_str(), hi.as_str()).is_none_or(|o| o == Ordering::Greater) {
                    return Err("has `minimum` above `maximum`".into());
                }
            }
            Ok(Field::Number { integer: ty == "integer", minimum, maximum })
        }
        "boolean" => Ok(Field::Boolean),
        _ => {
            let Some(items) = p.get("items").and_then(Value::as_object) else {
                return Err("is an array without an `items` object".into());
            };
            let items_type = items.get("type");
            if items_type.and_then(Value::as_str) == Some("object") || items.contains_key("properties") {
                return Err(NESTED_ITEMS.into());
            }
            let options = if let Some(e) = items.get("enum") {
                if items.keys().any(|k| k != "type" && k != "enum") || items_type != Some(&json!("string")) {
                    return Err(
                        "has `items` that must be exactly `{\"type\": \"string\", \"enum\": [...]}`".into()
                    );
                }
                string_options(e, "items.enum")?
            } else if let Some(a) = items.get("anyOf") {
                if items.keys().any(|k| k != "type" && k != "anyOf")
                    || items_type.is_some_and(|t| t != &json!("string"))
                {
                    return Err(
                        "has `items` that must be exactly `{\"anyOf\": [{\"const\", \"title\"}, ...]}`"
                            .into(),
                    );
                }
                titled_options(a, "items.anyOf")?
            } else {
                return Err(
                    "is an array whose `items` is neither `{\"type\": \"string\", \"enum\": [...]}` nor \
                            `{\"anyOf\": [{\"const\", \"title\"}, ...]}`"
                        .into(),
                );
            };
            let (min_items, max_items) = bounds(p, "minItems", "maxItems")?;
            Ok(Field::Multi { options, min_items, max_items })
        }
    }
}

/// A non-empty array of strings.
fn string_options<'a>(v: &'a Value, what: &str) -> Result<Vec<&'a str>, String> {
    let options: Option<Vec<&str>> = v.as_array().and_then(|a| a.iter().map(Value::as_str).collect());
    match options {
        Some(o) if !o.is_empty() => Ok(o),
        _ => Err(format!("needs `{what}` to be a non-empty array of strings")),
    }
}

/// A non-empty array of `{"const": string, "title": string}`; returns the consts.
fn titled_options<'a>(v: &'a Value, what: &str) -> Result<Vec<&'a str>, String> {
    let err =
        || format!("needs `{what}` to be a non-empty array of `{{\"const\": string, \"title\": string}}`");
    let items = v.as_array().filter(|a| !a.is_empty()).ok_or_else(err)?;
    items
        .iter()
        .map(|o| {
            let o = o.as_object().filter(|o| o.len() == 2 && o.get("title").is_some_and(Value::is_string));
            o.and_then(|o| o.get("const")?.as_str()).ok_or_else(err)
        })
        .collect()
}

/// Optional non-negative integer bounds, lower not above upper.
fn bounds(p: &Map<String, Value>, lo: &str, hi: &str) -> Result<(Option<u64>, Option<u64>), String> {
    let read = |k: &str| match p.get(k) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| format!("needs `{k}` to be a non-negative integer")),
    };
    let (min, max) = (read(lo)?, read(hi)?);
    if let (Some(a), Some(b)) = (min, max) {
        if a > b {
            return Err(format!("has `{lo}` above `{hi}`"));
        }
    }
    Ok((min, max))
}

/// Whether `value` is an acceptable value of `field`; the error completes "<field> ...".
fn check_value(field: &Field<'_>, value: &Value) -> Result<(), String> {
    match field {
        Field::Text { format, min_len, max_len, options } => {
            let Some(s) = value.as_str() else {
                return Err("must be a string".into());
            };
            if let Some(options) = options {
                if !options.contains(&s) {
                    return Err("is not one of the offered options".into());
                }
            }
            let chars = u64::try_from(s.chars().count()).unwrap_or(u64::MAX);
            if min_len.is_some_and(|m| chars < m) || max_len.is_some_and(|m| chars > m) {
                return Err("has a length outside `minLength`..`maxLength`".into());
            }
            let format_ok = match *format {
                Some("email") => is_email(s),
                Some("uri") => is_uri(s),
                Some("date") => is_date(s),
                Some("date-time") => is_date_time(s),
                _ => true,
            };
            if !format_ok {
                return Err(format!("is not a valid {}", format.unwrap_or_default()));
            }
            Ok(())
        }
        Field::Number { integer, minimum, maximum } => {
            let Value::Number(n) = value else {
                return Err(if *integer { "must be an integer" } else { "must be a number" }.into());
            };
            if *integer && !is_integer_text(n) {
                return Err("must be an integer (no fraction or exponent)".into());
            }
            // A bound that cannot be compared (not number syntax) counts as crossed.
            let cmp = |m: &Number| decimal_cmp(n.as_str(), m.as_str());
            let below = minimum.is_some_and(|m| cmp(m).is_none_or(|o| o == Ordering::Less));
            let above = maximum.is_some_and(|m| cmp(m).is_none_or(|o| o == Ordering::Greater));
            if below || above {
                return Err("is outside `minimum`..`maximum`".into());
            }
            Ok(())
        }
        Field::Boolean => value.is_boolean().then_some(()).ok_or_else(|| "must be a boolean".into()),
        Field::Multi { options, min_items, max_items } => {
            let Some(items) = value.as_array() else {
                return Err("must be an array of the offered options".into());
            };
            if items.iter().any(|i| i.as_str().is_none_or(|s| !options.contains(&s))) {
                return Err("must be an array of the offered options".into());
            }
            let n = u64::try_from(items.len()).unwrap_or(u64::MAX);
            if min_items.is_some_and(|m| n < m) || max_items.is_some_and(|m| n > m) {
                return Err("has a number of choices outside `minItems`..`maxItems`".into());
            }
            Ok(())
        }
    }
}

/// The `action` of an elicitation answer.
fn elicit_action(obj: &Map<String, Value>) -> Result<&str, InvalidAnswer> {
    match obj.get("action").and_then(Value::as_str) {
        Some(a @ ("accept" | "decline" | "cancel")) => Ok(a),
        _ => Err(InvalidAnswer::new(
            "an elicitation answer needs `action`: \"accept\", \"decline\" or \"cancel\"",
        )),
    }
}

fn validate_elicit_answer(
    schema: &Map<String, Value>,
    obj: &Map<String, Value>,
) -> Result<(), InvalidAnswer> {
    if elicit_action(obj)? != "accept" {
        if obj.contains_key("content") {
            return Err(InvalidAnswer::new("only an accepted elicitation carries `content`"));
        }
        return Ok(());
    }
    let empty = Map::new();
    let content = match obj.get("content") {
        None => &empty,
        Some(Value::Object(c)) => c,
        Some(_) => return Err(InvalidAnswer::new("elicitation `content` must be a JSON object")),
    };
    let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    for (key, value) in content {
        let Some(prop) = props.get(key) else {
            return Err(InvalidAnswer::new(format!("field `{}` was not asked for", clip(key))));
        };
        let field =
            field(prop).map_err(|_| InvalidAnswer::new("the requested schema is not a valid form"))?;
        check_value(&field, value).map_err(|m| InvalidAnswer::new(format!("field `{}` {m}", clip(key))))?;
    }
    let required = schema.get("required").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if let Some(missing) = required.iter().filter_map(Value::as_str).find(|r| !content.contains_key(*r)) {
        return Err(InvalidAnswer::new(format!("required field `{}` is missing", clip(missing))));
    }
    Ok(())
}

fn validate_sample_answer(obj: &Map<String, Value>) -> Result<(), InvalidAnswer> {
    if !matches!(obj.get("role").and_then(Value::as_str), Some("user" | "assistant")) {
        return Err(InvalidAnswer::new("a sampling answer needs `role`: \"user\" or \"assistant\""));
    }
    let is_block = |b: &Value| b.get("type").is_some_and(Value::is_string);
    let content_ok = match obj.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().all(is_block),
        Some(block @ Value::Object(_)) => is_block(block),
        _ => false,
    };
    if !content_ok {
        return Err(InvalidAnswer::new(
            "a sampling answer needs `content`: a block or an array of blocks, each with a string `type`",
        ));
    }
    if !obj.get("model").is_some_and(Value::is_string) {
        return Err(InvalidAnswer::new("a sampling answer needs a string `model`"));
    }
    if obj.get("stopReason").is_some_and(|r| !r.is_string()) {
        return Err(InvalidAnswer::new("a sampling answer's `stopReason` must be a string"));
    }
    Ok(())
}

fn validate_roots_answer(obj: &Map<String, Value>) -> Result<(), InvalidAnswer> {
    let Some(roots) = obj.get("roots").and_then(Value::as_array) else {
        return Err(InvalidAnswer::new("a roots answer needs a `roots` array"));
    };
    for (i, root) in roots.iter().enumerate() {
        let uri_ok = root.get("uri").and_then(Value::as_str).is_some_and(|u| u.starts_with("file://"));
        let name_ok = root.get("name").is_none_or(Value::is_string);
        if !uri_ok || !name_ok {
            return Err(InvalidAnswer::new(format!(
                "roots[{i}] needs a `uri` starting with file:// and, if present, a string `name`"
            )));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Lexical checks: numbers by their text, formats
// ---------------------------------------------------------------------------------------------

/// An integer literal: the exact text has no fraction and no exponent.
fn is_integer_text(n: &Number) -> bool {
    !n.as_str().contains(['.', 'e', 'E'])
}

/// A JSON number's text as sign, significant digits (no leading or trailing zeros) and the power
/// of ten of the last digit. `None` when it is not JSON number syntax.
fn parse_decimal(text: &str) -> Option<(bool, Vec<u8>, i64)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (rest.get(..i)?, parse_exponent(rest.get(i + 1..)?)?),
        None => (rest, 0),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((_, "")) => return None,
        Some((i, f)) => (i, f),
        None => (mantissa, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !all_digits(int) || !all_digits(frac) {
        return None;
    }
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).skip_while(|&b| b == b'0').collect();
    let mut exponent = exponent.saturating_sub(i64::try_from(frac.len()).unwrap_or(i64::MAX));
    while digits.last() == Some(&b'0') {
        digits.pop();
        exponent = exponent.saturating_add(1);
    }
    Some((negative && !digits.is_empty(), digits, exponent))
}

fn parse_exponent(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, s.get(1..)?),
        Some(b'+') => (false, s.get(1..)?),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    // Saturate far beyond any meaningful exponent; only absurd texts reach the clamp.
    let magnitude = digits.bytes().try_fold(0i64, |acc, b| {
        b.is_ascii_digit().then(|| acc.saturating_mul(10).saturating_add(i64::from(b - b'0')).min(1 << 40))
    })?;
    Some(if negative { -magnitude } else { magnitude })
}

/// Compares two JSON number texts exactly (so `1e30` vs a 30-digit integer is decided right).
fn decimal_cmp(a: &str, b: &str) -> Option<Ordering> {
    let (an, ad, ae) = parse_decimal(a)?;
    let (bn, bd, be) = parse_decimal(b)?;
    let magnitude = |d: &[u8], e: i64| i64::try_from(d.len()).unwrap_or(i64::MAX).saturating_add(e);
    let abs = match (ad.is_empty(), bd.is_empty()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // Same position of the leading digit: digit strings without trailing zeros compare
        // lexicographically, a strict prefix being the smaller.
        (false, false) => magnitude(&ad, ae).cmp(&magnitude(&bd, be)).then_with(|| ad.cmp(&bd)),
    };
    Some(match (an, bn) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (true, true) => abs.reverse(),
        (false, false) => abs,
    })
}

fn has_space_or_control(s: &str) -> bool {
    s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `scheme:rest`, RFC 3986 scheme syntax, no spaces.
fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else { return false };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !has_space_or_control(s)
}

/// `local@domain`, one `@`, both sides non-empty, no spaces.
fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else { return false };
    !local.is_empty()
        && !domain.is_empty()
        && !domain.contains('@')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !has_space_or_control(s)
}

fn two_digits(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(2)?)?
        .iter()
        .try_fold(0u32, |acc, c| c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0')))
}

/// RFC 3339 `full-date` at the start of `b`.
fn date_prefix(b: &[u8]) -> Option<()> {
    let year = two_digits(b, 0)? * 100 + two_digits(b, 2)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let (month, day) = (two_digits(b, 5)?, two_digits(b, 8)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days).contains(&day).then_some(())
}

fn is_date(s: &str) -> bool {
    s.len() == 10 && date_prefix(s.as_bytes()).is_some()
}

/// RFC 3339 `date-time`: date, `T`, `HH:MM:SS`, optional fraction, then `Z` or `±HH:MM`.
fn is_date_time(s: &str) -> bool {
    fn check(b: &[u8]) -> Option<()> {
        date_prefix(b)?;
        let sep = |at: usize, c: u8| (b.get(at) == Some(&c)).then_some(());
        matches!(b.get(10), Some(b'T' | b't')).then_some(())?;
        (two_digits(b, 11)? <= 23).then_some(())?;
        sep(13, b':')?;
        (two_digits(b, 14)? <= 59).then_some(())?;
        sep(16, b':')?;
        (two_digits(b, 17)? <= 60).then_some(())?;
        let mut i = 19;
        if b.get(i) == Some(&b'.') {
            let digits = b.iter().skip(i + 1).take_while(|c| c.is_ascii_digit()).count();
            (digits > 0).then_some(())?;
            i += 1 + digits;
        }
        match b.get(i)? {
            b'Z' | b'z' => (i + 1 == b.len()).then_some(()),
            b'+' | b'-' => {
                (two_digits(b, i + 1)? <= 23).then_some(())?;
                sep(i + 3, b':')?;
                (two_digits(b, i + 4)? <= 59).then_some(())?;
                (i + 6 == b.len()).then_some(())
            }
            _ => None,
        }
    }
    check(s.as_bytes()).is_some()
}

/// Keeps error messages bounded whatever key or value the peer chose.
fn clip(s: &str) -> &str {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
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
/// In 2026 this is the `-32021` error of the call ([`Unsupported::rpc_error`]); a legacy
/// session may instead let the handler carry on without the answer.
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
        RpcError::new(ErrorCode::MissingClientCapability, self.message.clone())
            .with_data(json!({"requiredCapabilities": self.required}))
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Unsupported {}

/// The client's answer does not match what was asked: a protocol error (`-32602`) by the rules
/// of SEP-2322, never silently handed to the handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidAnswer {
    message: String,
}

impl InvalidAnswer {
    fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }

    /// What is wrong, in words safe to send back (peer-chosen keys are clipped).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `-32602` carrying the message.
    pub fn rpc_error(&self) -> RpcError {
        RpcError::new(ErrorCode::InvalidParams, format!("invalid input response: {}", self.message))
    }
}

impl fmt::Display for InvalidAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for InvalidAnswer {}

// ---------------------------------------------------------------------------------------------
// Sealed request state
// ---------------------------------------------------------------------------------------------

/// What a modern (2026) request has learnt so far, carried by the client between rounds.
///
/// Sealed, it is integrity-protected but **not encrypted**: the client can read it (base64 of
/// JSON). Never put secrets in it; keep them server-side and put a handle in `data`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestState {
    /// How many `input_required` rounds have been answered; the engine bounds it by
    /// [`DEFAULT_MAX_ROUNDS`].
    pub round: u32,
    /// Validated answers of earlier rounds, by input-request key, exactly as the client sent
    /// them (numbers keep their text).
    pub answers: Map<String, Value>,
    /// The handler's own continuation data, opaque to the engine.
    pub data: Option<String>,
}

/// What a sealed state is bound to: it is only accepted back for the same caller, method and
/// arguments, so it cannot be replayed by another principal or onto another call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBinding<'a> {
    /// The caller's binding key ([`Caller::binding`](crate::Caller::binding)).
    pub caller: &'a str,
    /// The method being retried (`tools/call`, `prompts/get`, `resources/read`).
    pub method: &'a str,
    /// [`arguments_digest`] of the request's arguments.
    pub arguments_digest: [u8; 32],
}

/// SHA-256 of a canonical encoding of `args`, so the state can be bound to them without carrying
/// them.
///
/// Object keys are sorted (by UTF-8 bytes) at every level, strings are re-escaped one way and
/// numbers keep their exact text, so key order, whitespace and escape choices do not matter but
/// any change of value does (`1` and `1.0` differ). `None` (no arguments) differs from every
/// value, including `{}`. Nothing is excluded: the caller strips `inputResponses` and
/// `requestState` first. Recursion follows the nesting of `args`, which the engine's parser
/// already bounds ([`Limits::max_depth`](crate::Limits::max_depth)).
pub fn arguments_digest(args: Option<&Value>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"mcp-arguments-digest-v1\n");
    match args {
        None => h.update(b"absent"),
        Some(v) => {
            h.update(b"=");
            canonical(&mut h, v);
        }
    }
    h.finalize().into()
}

fn canonical(h: &mut Sha256, v: &Value) {
    match v {
        Value::Null => h.update(b"null"),
        Value::Bool(true) => h.update(b"true"),
        Value::Bool(false) => h.update(b"false"),
        Value::Number(n) => h.update(n.as_str().as_bytes()),
        Value::String(s) => canonical_string(h, s),
        Value::Array(items) => {
            h.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                canonical(h, item);
            }
            h.update(b"]");
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            h.update(b"{");
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                canonical_string(h, k);
                h.update(b":");
                canonical(h, v);
            }
            h.update(b"}");
        }
    }
}

/// A JSON string with exactly one escaping: `"` and `\` escaped, controls as `\u00XX`, all else
/// literal UTF-8.
fn canonical_string(h: &mut Sha256, s: &str) {
    h.update(b"\"");
    let mut buf = [0u8; 4];
    for c in s.chars() {
        match c {
            '"' => h.update(b"\\\""),
            '\\' => h.update(b"\\\\"),
            c if u32::from(c) < 0x20 => h.update(format!("\\u{:04x}", u32::from(c)).as_bytes()),
            c => h.update(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
    h.update(b"\"");
}

/// Seals `state` into a `requestState` string, bound to `binding` and valid until
/// `expires_at_ms` (unix milliseconds; typically now + [`DEFAULT_STATE_TTL_MS`]).
///
/// The token is HMAC-SHA256 under the ring's signing key, in the same format as cursors but
/// with a purpose tag, so neither is ever accepted as the other. Fails with
/// [`InteractionError::StateTooLarge`] past [`MAX_STATE_BYTES`].
pub fn seal_state(
    keys: &KeyRing,
    binding: &StateBinding<'_>,
    state: &RequestState,
    expires_at_ms: u64,
) -> Result<String, InteractionError> {
    let payload = json!({
        "p": STATE_PURPOSE,
        "who": caller_digest(keys, binding.caller),
        "mth": binding.method,
        "arg": URL_SAFE_NO_PAD.encode(binding.arguments_digest),
        "exp": expires_at_ms,
        "r": state.round,
        "a": Value::Object(state.answers.clone()),
        "d": state.data,
    })
    .to_string();
    // Base64 grows the payload by 4/3; refuse early rather than encode a payload that cannot fit.
    let too_large = InteractionError::StateTooLarge { max: MAX_STATE_BYTES };
    if payload.len() / 3 * 4 > MAX_STATE_BYTES {
        return Err(too_large);
    }
    let token = keys.seal(payload.as_bytes());
    if token.len() > MAX_STATE_BYTES {
        return Err(too_large);
    }
    Ok(token)
}

/// Opens a `requestState` from a retry, checking, in order: size, MAC, purpose and shape, then
/// caller, method and arguments against `binding`, then expiry against `now_ms`.
///
/// Expiry is checked last so only the rightful caller learns that a state expired.
pub fn open_state(
    keys: &KeyRing,
    token: &str,
    binding: &StateBinding<'_>,
    now_ms: u64,
) -> Result<RequestState, StateError> {
    if token.len() > MAX_STATE_BYTES {
        return Err(StateError::TooLarge);
    }
    let Some(payload) = keys.open(token) else {
        return Err(if cursor::is_well_formed(token) { StateError::Tampered } else { StateError::Malformed });
    };
    let v: Value = serde_json::from_slice(&payload).map_err(|_| StateError::Malformed)?;
    let field = |k: &str| v.get(k).ok_or(StateError::Malformed);
    let text = |k: &str| field(k)?.as_str().ok_or(StateError::Malformed);
    if text("p")? != STATE_PURPOSE {
        return Err(StateError::Malformed);
    }
    let (who, method, args) = (text("who")?, text("mth")?, text("arg")?);
    let expires = field("exp")?.as_u64().ok_or(StateError::Malformed)?;
    let round = field("r")?.as_u64().and_then(|r| u32::try_from(r).ok()).ok_or(StateError::Malformed)?;
    let answers = field("a")?.as_object().ok_or(StateError::Malformed)?.clone();
    let data = match v.get("d") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return Err(StateError::Malformed),
    };
    if !cursor::caller_matches(keys, who, binding.caller) {
        return Err(StateError::WrongCaller);
    }
    if method != binding.method {
        return Err(StateError::WrongMethod);
    }
    if args != URL_SAFE_NO_PAD.encode(binding.arguments_digest) {
        return Err(StateError::WrongArguments);
    }
    if now_ms >= expires {
        return Err(StateError::Expired);
    }
    Ok(RequestState { round, answers, data })
}

/// Why a `requestState` was refused. The variants exist for logs and tests; on the wire all but
/// [`StateError::Expired`] look the same ([`StateError::rpc_error`]), so a prober learns nothing
/// about which check it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateError {
    /// Not a sealed token of ours, or not a request state (a pagination cursor, say).
    Malformed,
    /// Shaped like one of our tokens, but the MAC does not verify: altered, or sealed by a key
    /// this ring does not hold.
    Tampered,
    /// Genuine, but past its expiry; the client should start the call again without a state.
    Expired,
    /// Sealed for another caller.
    WrongCaller,
    /// Sealed for another method.
    WrongMethod,
    /// Sealed for other arguments.
    WrongArguments,
    /// Longer than [`MAX_STATE_BYTES`]; refused before decoding.
    TooLarge,
}

impl StateError {
    /// `-32602`, with "requestState expired" for [`StateError::Expired`] and one generic
    /// "invalid requestState" for every other case.
    pub fn rpc_error(self) -> RpcError {
        match self {
            StateError::Expired => RpcError::new(
                ErrorCode::InvalidParams,
                "requestState expired; retry the request without requestState",
            ),
            _ => RpcError::new(ErrorCode::InvalidParams, "invalid requestState"),
        }
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StateError::Malformed => "request state is malformed",
            StateError::Tampered => "request state failed its integrity check",
            StateError::Expired => "request state expired",
            StateError::WrongCaller => "request state belongs to another caller",
            StateError::WrongMethod => "request state belongs to another method",
            StateError::WrongArguments => "request state belongs to other arguments",
            StateError::TooLarge => "request state is too large",
        })
    }
}

impl std::error::Error for StateError {}

#[cfg(test)]
mod tests {
    use super::*;
    use ProtocolVersion::{V2025_03_26, V2025_06_18, V2025_11_25, V2026_07_28};

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    fn form(props: Value) -> InputRequest {
        InputRequest::elicit("Please fill in", json!({"type": "object", "properties": props})).unwrap()
    }

    fn schema_err(schema: Value) -> String {
        match InputRequest::elicit("m", schema) {
            Err(InteractionError::InvalidSchema(m)) => m,
            other => panic!("expected InvalidSchema, got {other:?}"),
        }
    }

    /// The `test_elicitation_sep1034_defaults` form of the conformance suite.
    fn sep1034() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true}
        }})
    }

    /// The `test_elicitation_sep1330_enums` form of the conformance suite.
    fn sep1330() -> Value {
        json!({"type": "object", "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"}]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2"], "enumNames": ["Option One", "Option Two"]},
            "untitledMulti": {"type": "array", "minItems": 1, "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"}]}}
        }})
    }

    fn caps(v: Value) -> Value {
        v
    }

    // --- schemas --------------------------------------------------------------------------

    #[test]
    fn accepts_every_primitive_kind() {
        InputRequest::elicit("m", sep1034()).unwrap();
        InputRequest::elicit("m", sep1330()).unwrap();
        InputRequest::elicit(
            "m",
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                "title": "t", "description": "d",
                "properties": {
                    "username": {"type": "string", "title": "User", "description": "d", "minLength": 1, "maxLength": 20},
                    "email": {"type": "string", "format": "email"},
                    "site": {"type": "string", "format": "uri"},
                    "born": {"type": "string", "format": "date", "default": "2000-02-29"},
                    "at": {"type": "string", "format": "date-time"},
                    "n": {"type": "number", "minimum": -1.5, "maximum": 1e3}
                },
                "required": ["username", "email"]}),
        )
        .unwrap();
        InputRequest::elicit("m", json!({"type": "object", "properties": {}})).unwrap();
    }

    #[test]
    fn refuses_what_a_form_cannot_show() {
        let nested = schema_err(json!({"type": "object", "properties": {
            "address": {"type": "object", "properties": {"street": {"type": "string"}}}}}));
        assert!(nested.contains("`address`") && nested.contains("nested object"), "{nested}");
        let untyped = schema_err(json!({"type": "object", "properties": {"a": {"properties": {}}}}));
        assert!(untyped.contains("nested object"), "{untyped}");
        let items = schema_err(json!({"type": "object", "properties": {
            "list": {"type": "array", "items": {"type": "object"}}}}));
        assert!(items.contains("`list`") && items.contains("array of objects"), "{items}");
        let cases = [
            (json!([]), "JSON object"),
            (json!({"properties": {}}), "\"type\": \"object\""),
            (json!({"type": "object"}), "`properties`"),
            (
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
                "additionalProperties",
            ),
            (json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}), "`pattern`"),
            (json!({"type": "object", "properties": {"a": {"$ref": "#/x"}}}), "needs a `type`"),
            (json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}), "type unions"),
            (json!({"type": "object", "properties": {"a": {"type": "null"}}}), "type `null`"),
            (json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}), "`b`"),
            (json!({"type": "object", "properties": {"a": {"type": "string", "enum": []}}}), "non-empty"),
            (json!({"type": "object", "properties": {"a": {"type": "string", "enum": [1]}}}), "strings"),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"], "enumNames": ["X"]}}}),
                "different length",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "oneOf": [{"const": "x", "title": "X"}]}}}),
                "both",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "oneOf": [{"const": "x"}]}}}),
                "title",
            ),
            (json!({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}), "format"),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "format": "email"}}}),
                "free text",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 2}}}),
                "minLength",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}),
                "non-negative",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "number", "minimum": 2, "maximum": 1}}}),
                "minimum",
            ),
            (json!({"type": "object", "properties": {"a": {"type": "integer", "default": 30.5}}}), "integer"),
            (
                json!({"type": "object", "properties": {"a": {"type": "boolean", "default": "yes"}}}),
                "boolean",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "default": "y"}}}),
                "options",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "format": "date", "default": "2001-02-29"}}}),
                "date",
            ),
            (json!({"type": "object", "properties": {"a": {"type": "array"}}}), "items"),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "enum": ["x"]}, "default": ["z"]}}}),
                "options",
            ),
        ];
        for (schema, needle) in cases {
            let msg = schema_err(schema.clone());
            assert!(msg.contains(needle), "{schema}: {msg:?} lacks {needle:?}");
        }
    }

    #[test]
    fn other_constructors_check_their_input() {
        assert!(InputRequest::elicit_url("go", "https://example.com/auth?x=1").is_ok());
        for bad in ["", "example.com", "https://exa mple.com", "1http://x", "https:"] {
            assert!(
                matches!(InputRequest::elicit_url("go", bad), Err(InteractionError::InvalidUrl(_))),
                "{bad}"
            );
        }
        let msg = json!([{"role": "user", "content": {"type": "text", "text": "hi"}}]);
        assert!(InputRequest::sample(json!({"messages": msg, "maxTokens": 100})).is_ok());
        let big = parse(r#"{"messages": [], "maxTokens": 123456789012345678901234567890}"#);
        assert!(InputRequest::sample(big).is_ok());
        for bad in [
            json!({"maxTokens": 100}),
            json!({"messages": {}, "maxTokens": 100}),
            json!({"messages": msg}),
            json!({"messages": msg, "maxTokens": 1.5}),
            json!({"messages": msg, "maxTokens": 1e2}),
            json!({"messages": msg, "maxTokens": "100"}),
            json!({"messages": [{"role": "bot", "content": {}}], "maxTokens": 1}),
            json!({"messages": msg, "maxTokens": 100, "task": {"ttl": 1000}}),
            json!([]),
        ] {
            assert!(
                matches!(InputRequest::sample(bad.clone()), Err(InteractionError::InvalidSampling(_))),
                "{bad}"
            );
        }
        assert_eq!(InputRequest::list_roots().method(), "roots/list");
        assert_eq!(form(json!({})).method(), "elicitation/create");
    }

    // --- capabilities ---------------------------------------------------------------------

    #[test]
    fn capability_rules_per_version() {
        let plain = form(json!({"name": {"type": "string"}}));
        let multi = form(json!({"m": {"type": "array", "items": {"type": "string", "enum": ["a"]}}}));
        let url = InputRequest::elicit_url("go", "https://example.com").unwrap();
        let el = caps(json!({"elicitation": {}}));
        let el_both = caps(json!({"elicitation": {"form": {}, "url": {}}}));
        let el_url = caps(json!({"elicitation": {"url": {}}}));
        let none = json!({});

        // Elicitation needs 2025-06-18.
        let e = plain.check_client(V2025_03_26, &el).unwrap_err();
        assert!(e.message().contains("2025-06-18"));
        assert!(plain.check_client(V2025_06_18, &el).is_ok());
        assert!(plain.check_client(V2025_06_18, &none).is_err());
        // June client + multiselect.
        let e = multi.check_client(V2025_06_18, &el).unwrap_err();
        assert!(e.message().contains("2025-11-25"), "{e}");
        assert!(multi.check_client(V2025_11_25, &el).is_ok());
        assert!(multi.check_client(V2026_07_28, &el).is_ok());
        // `{}` means form-only from 2025-11-25.
        for v in [V2025_11_25, V2026_07_28] {
            let e = url.check_client(v, &el).unwrap_err();
            assert_eq!(e.required_capabilities(), &json!({"elicitation": {"url": {}}}));
            assert!(url.check_client(v, &el_both).is_ok());
            assert!(url.check_client(v, &el_url).is_ok());
            assert!(plain.check_client(v, &el_both).is_ok());
            let e = plain.check_client(v, &el_url).unwrap_err();
            assert_eq!(e.required_capabilities(), &json!({"elicitation": {"form": {}}}));
            assert!(plain.check_client(v, &none).is_err());
        }
        assert!(url.check_client(V2025_06_18, &el_both).is_err());
        // A non-object declaration is no declaration.
        assert!(plain.check_client(V2025_11_25, &json!({"elicitation": true})).is_err());
        assert!(plain.check_client(V2025_11_25, &json!(null)).is_err());

        // Sampling and roots, every version.
        let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 10})).unwrap();
        for v in ProtocolVersion::ALL {
            let e = sample.check_client(v, &el).unwrap_err();
            assert_eq!(e.rpc_error().code.code(), -32021);
            assert_eq!(e.rpc_error().data, Some(json!({"requiredCapabilities": {"sampling": {}}})));
            assert!(sample.check_client(v, &json!({"sampling": {}})).is_ok());
            let e = InputRequest::list_roots().check_client(v, &json!({"sampling": {}})).unwrap_err();
            assert_eq!(e.required_capabilities(), &json!({"roots": {}}));
            assert!(InputRequest::list_roots()
                .check_client(v, &json!({"roots": {"listChanged": true}}))
                .is_ok());
        }

        // Tool use and context in sampling.
        let tools = InputRequest::sample(json!({"messages": [], "maxTokens": 10, "tools": []})).unwrap();
        assert!(tools.check_client(V2025_06_18, &json!({"sampling": {"tools": {}}})).is_err());
        let e = tools.check_client(V2025_11_25, &json!({"sampling": {}})).unwrap_err();
        assert_eq!(e.required_capabilities(), &json!({"sampling": {"tools": {}}}));
        assert!(tools.check_client(V2026_07_28, &json!({"sampling": {"tools": {}}})).is_ok());
        let ctx =
            InputRequest::sample(json!({"messages": [], "maxTokens": 10, "includeContext": "thisServer"}))
                .unwrap();
        assert!(ctx.check_client(V2025_06_18, &json!({"sampling": {}})).is_ok());
        let e = ctx.check_client(V2025_11_25, &json!({"sampling": {}})).unwrap_err();
        assert_eq!(e.required_capabilities(), &json!({"sampling": {"context": {}}}));
        assert!(ctx.check_client(V2025_11_25, &json!({"sampling": {"context": {}}})).is_ok());
    }

    #[test]
    fn required_capability_and_rpc_error_shape() {
        assert_eq!(form(json!({})).required_capability(), ("elicitation", json!({})));
        let url = InputRequest::elicit_url("go", "https://example.com").unwrap();
        assert_eq!(url.required_capability(), ("elicitation", json!({"url": {}})));
        assert_eq!(InputRequest::list_roots().required_capability(), ("roots", json!({})));
        let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 1})).unwrap();
        assert_eq!(sample.required_capability(), ("sampling", json!({})));
        let err = sample.check_client(V2026_07_28, &json!({})).unwrap_err().rpc_error();
        assert_eq!(
            serde_json::to_value(&err).unwrap(),
            json!({"code": -32021, "message": "the client did not declare the sampling capability",
                "data": {"requiredCapabilities": {"sampling": {}}}})
        );
    }

    // --- wire params ----------------------------------------------------------------------

    #[test]
    fn june_lowers_titled_single_selects() {
        let req = InputRequest::elicit("m", sep1330()).unwrap();
        let june = req.params_for(V2025_06_18, None);
        let props = &june["requestedSchema"]["properties"];
        assert_eq!(
            props["titledSingle"],
            json!({"type": "string", "enum": ["value1", "value2"], "enumNames": ["First Option", "Second Option"]})
        );
        assert_eq!(props["legacyEnum"], sep1330()["properties"]["legacyEnum"]);
        assert_eq!(props["untitledSingle"], sep1330()["properties"]["untitledSingle"]);
        // Key order of the lowered property follows the original.
        let keys: Vec<&String> = props["titledSingle"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["type", "enum", "enumNames"]);
        // 2025-11-25 and 2026 send the schema exactly as written, with nothing added.
        for v in [V2025_11_25, V2026_07_28] {
            let p = req.params_for(v, None);
            assert_eq!(Value::Object(p), json!({"message": "m", "requestedSchema": sep1330()}));
        }
        // Defaults are only what the handler wrote.
        let p = InputRequest::elicit("m", sep1034()).unwrap().params_for(V2025_11_25, None);
        assert_eq!(p["requestedSchema"], sep1034());
        let p = form(json!({"a": {"type": "string"}})).params_for(V2025_06_18, None);
        assert_eq!(
            Value::Object(p),
            json!({"message": "Please fill in", "requestedSchema":
            {"type": "object", "properties": {"a": {"type": "string"}}}})
        );
    }

    #[test]
    fn url_params_by_version() {
        let url = InputRequest::elicit_url("Sign in", "https://example.com/login").unwrap();
        assert_eq!(
            Value::Object(url.params_for(V2025_11_25, Some("el-1"))),
            json!({"mode": "url", "message": "Sign in", "url": "https://example.com/login", "elicitationId": "el-1"})
        );
        assert_eq!(
            url.to_input_request(V2026_07_28),
            json!({"method": "elicitation/create",
                "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/login"}})
        );
        assert!(!url.params_for(V2026_07_28, Some("el-1")).contains_key("elicitationId"));
        assert_eq!(
            InputRequest::list_roots().to_input_request(V2026_07_28),
            json!({"method": "roots/list", "params": {}})
        );
        let p = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 100});
        let sample = InputRequest::sample(p.clone()).unwrap();
        assert_eq!(
            sample.to_input_request(V2026_07_28),
            json!({"method": "sampling/createMessage", "params": p})
        );
    }

    fn schema_validator(version: &str, pointer: &str) -> jsonschema::Validator {
        let path = format!("{}/../tests/fixtures/schemas/{version}.json", env!("CARGO_MANIFEST_DIR"));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let map = jsonschema::validator_map_for(&doc).unwrap();
        map.get(pointer).unwrap_or_else(|| panic!("{version} has no {pointer}")).clone()
    }

    fn assert_valid(v: &jsonschema::Validator, instance: &Value, what: &str) {
        let errors: Vec<String> =
            v.iter_errors(instance).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{what}: {instance}\n{errors:?}");
    }

    #[test]
    fn wire_params_match_the_official_schemas() {
        let sample = InputRequest::sample(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt for sampling"}}],
            "maxTokens": 100}))
        .unwrap();
        let june_form = InputRequest::elicit("m", {
            let mut s = sep1330();
            let props = s["properties"].as_object_mut().unwrap();
            props.remove("untitledMulti");
            props.remove("titledMulti");
            s
        })
        .unwrap();
        let full_form = InputRequest::elicit("m", sep1330()).unwrap();
        let defaults = InputRequest::elicit("m", sep1034()).unwrap();
        let url = InputRequest::elicit_url("go", "https://example.com/x").unwrap();
        let roots = InputRequest::list_roots();
        let as_request = |r: &InputRequest, v, id: Option<&str>| json!({"jsonrpc": "2.0", "id": 1, "method": r.method(), "params": Value::Object(r.params_for(v, id))});

        // 2025-03-26 and 2025-06-18 (draft-07, `definitions`): whole requests.
        for (version, v) in [("2025-03-26", V2025_03_26), ("2025-06-18", V2025_06_18)] {
            let check = |def: &str, r: &InputRequest| {
                assert_valid(
                    &schema_validator(version, &format!("#/definitions/{def}")),
                    &as_request(r, v, None),
                    def,
                )
            };
            check("CreateMessageRequest", &sample);
            check("ListRootsRequest", &roots);
            if v == V2025_06_18 {
                check("ElicitRequest", &june_form);
                check("ElicitRequest", &defaults);
            }
        }
        // The lowering is what makes the titled single-select a June `EnumSchema`.
        let lowered = june_form.params_for(V2025_06_18, None);
        assert_valid(
            &schema_validator("2025-06-18", "#/definitions/EnumSchema"),
            &lowered["requestedSchema"]["properties"]["titledSingle"],
            "lowered oneOf",
        );

        // 2025-11-25: params defs and whole requests.
        let defs = |d: &str| schema_validator("2025-11-25", &format!("#/$defs/{d}"));
        for r in [&full_form, &defaults, &june_form] {
            assert_valid(
                &defs("ElicitRequestFormParams"),
                &Value::Object(r.params_for(V2025_11_25, None)),
                "form",
            );
            assert_valid(&defs("ElicitRequest"), &as_request(r, V2025_11_25, None), "form request");
        }
        assert_valid(
            &defs("ElicitRequestURLParams"),
            &Value::Object(url.params_for(V2025_11_25, Some("e1"))),
            "url",
        );
        let no_id = Value::Object(url.params_for(V2025_11_25, None));
        assert!(
            !defs("ElicitRequestURLParams").is_valid(&no_id),
            "2025-11-25 URL mode requires elicitationId"
        );
        assert_valid(&defs("CreateMessageRequest"), &as_request(&sample, V2025_11_25, None), "sampling");
        assert_valid(&defs("ListRootsRequest"), &as_request(&roots, V2025_11_25, None), "roots");

        // 2026-07-28: `inputRequests` entries.
        let defs = |d: &str| schema_validator("2026-07-28", &format!("#/$defs/{d}"));
        for (r, def) in [
            (&full_form, "ElicitRequest"),
            (&defaults, "ElicitRequest"),
            (&url, "ElicitRequest"),
            (&sample, "CreateMessageRequest"),
            (&roots, "ListRootsRequest"),
        ] {
            let entry = r.to_input_request(V2026_07_28);
            assert_valid(&defs(def), &entry, def);
            assert_valid(&defs("InputRequest"), &entry, "InputRequest");
        }
        let result = json!({"resultType": "input_required",
            "inputRequests": {"user_name": full_form.to_input_request(V2026_07_28),
                "roots_request": roots.to_input_request(V2026_07_28)},
            "requestState": "v1.x.y"});
        assert_valid(&defs("InputRequiredResult"), &result, "InputRequiredResult");
        let err = sample.check_client(V2026_07_28, &json!({})).unwrap_err().rpc_error();
        let frame = json!({"jsonrpc": "2.0", "id": 3, "error": serde_json::to_value(&err).unwrap()});
        assert_valid(&defs("MissingRequiredClientCapabilityError"), &frame, "-32021");
    }

    // --- answers --------------------------------------------------------------------------

    fn answer_err(req: &InputRequest, answer: Value) -> String {
        match req.validate_answer(&answer) {
            Err(e) => {
                assert_eq!(e.rpc_error().code, ErrorCode::InvalidParams);
                e.message().to_owned()
            }
            Ok(()) => panic!("accepted {answer}"),
        }
    }

    #[test]
    fn elicitation_answers() {
        let req = InputRequest::elicit(
            "m",
            json!({"type": "object", "properties": {
                "username": {"type": "string", "minLength": 2},
                "email": {"type": "string", "format": "email"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "score": {"type": "number"},
                "ok": {"type": "boolean"},
                "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}},
                "day": {"type": "string", "format": "date-time"}
            }, "required": ["username", "email"]}),
        )
        .unwrap();
        let ok = json!({"action": "accept", "content": {"username": "testuser", "email": "test@example.com",
            "age": 30, "score": 95.5, "ok": true, "color": "g", "tags": ["a", "c"], "day": "2025-11-25T10:00:00.5+01:00"},
            "_meta": {"x": 1}});
        req.validate_answer(&ok).unwrap();
        req.validate_answer(&json!({"action": "accept", "content": {"username": "ab", "email": "a@b"}}))
            .unwrap();
        req.validate_answer(&json!({"action": "decline"})).unwrap();
        req.validate_answer(&json!({"action": "cancel"})).unwrap();

        let accept = |content: Value| json!({"action": "accept", "content": content});
        let base = |k: &str, v: Value| {
            let mut c = json!({"username": "testuser", "email": "test@example.com"});
            c[k] = v;
            accept(c)
        };
        for (answer, needle) in [
            (json!(12345), "JSON object"),
            (json!({"content": {}}), "action"),
            (json!({"action": "ACCEPT"}), "action"),
            (json!({"action": "decline", "content": {}}), "only an accepted"),
            (json!({"action": "cancel", "content": null}), "only an accepted"),
            (json!({"action": "accept"}), "`username` is missing"),
            (json!({"action": "accept", "content": []}), "JSON object"),
            (accept(json!({"username": "testuser"})), "`email` is missing"),
            (base("nickname", json!("x")), "`nickname` was not asked for"),
            (base("username", json!(7)), "must be a string"),
            (base("username", json!("a")), "length"),
            (base("email", json!("not an email")), "email"),
            (base("age", json!(30.0)), "integer"),
            (base("age", json!("30")), "integer"),
            (base("age", parse("1e1")), "integer"),
            (base("age", json!(151)), "minimum"),
            (base("age", json!(-1)), "minimum"),
            (base("score", json!("95.5")), "number"),
            (base("ok", json!("true")), "boolean"),
            (base("color", json!("Green")), "options"),
            (base("tags", json!(["a", "z"])), "options"),
            (base("tags", json!(["a", "b", "c"])), "maxItems"),
            (base("tags", json!("a")), "array"),
            (base("day", json!("2025-11-25 10:00:00Z")), "date-time"),
            (base("day", json!("2025-11-25T24:00:00Z")), "date-time"),
        ] {
            let msg = answer_err(&req, answer.clone());
            assert!(msg.contains(needle), "{answer}: {msg:?} lacks {needle:?}");
        }
        // Nothing required: an accept without content is an empty submission.
        form(json!({"a": {"type": "string"}})).validate_answer(&json!({"action": "accept"})).unwrap();
        // Peer-chosen keys are clipped in messages.
        let long = "k".repeat(10_000);
        assert!(answer_err(&req, base(&long, json!(1))).len() < 200);
    }

    #[test]
    fn big_integers_are_checked_by_their_text_and_survive() {
        let req = form(json!({"n": {"type": "integer", "maximum": 1e30}}));
        let text = r#"{"action":"accept","content":{"n":123456789012345678901234567890}}"#;
        let answer = parse(text);
        req.validate_answer(&answer).unwrap();
        assert_eq!(serde_json::to_string(&answer).unwrap(), text);
        // Just above the bound, which f64 could not tell apart from it.
        let over = parse(r#"{"action":"accept","content":{"n":1000000000000000000000000000001}}"#);
        assert!(answer_err(&req, over).contains("maximum"));
        let exact = parse(r#"{"action":"accept","content":{"n":1000000000000000000000000000000}}"#);
        req.validate_answer(&exact).unwrap();
        let big_frac = form(json!({"x": {"type": "number", "minimum": 0.1}}));
        big_frac
            .validate_answer(&parse(r#"{"action":"accept","content":{"x":0.10000000000000000001}}"#))
            .unwrap();
        assert!(big_frac
            .validate_answer(&parse(r#"{"action":"accept","content":{"x":0.09999999999999999999}}"#))
            .is_err());
    }

    #[test]
    fn decimal_comparison() {
        use Ordering::*;
        for (a, b, o) in [
            ("0", "-0", Equal),
            ("1", "1.0", Equal),
            ("1e2", "100", Equal),
            ("100E-2", "1", Equal),
            ("0.5", "5e-1", Equal),
            ("-1", "1", Less),
            ("-2", "-1", Less),
            ("12", "123", Less),
            ("99", "100", Less),
            ("1e30", "123456789012345678901234567890", Greater),
            ("0.001", "0.01", Less),
            ("1e99999999999999999999", "1e400", Greater),
        ] {
            assert_eq!(decimal_cmp(a, b), Some(o), "{a} vs {b}");
            assert_eq!(decimal_cmp(b, a), Some(o.reverse()), "{b} vs {a}");
        }
        for bad in ["", "-", "1.", ".5", "1e", "0x1", "1e+", "--1"] {
            assert_eq!(decimal_cmp(bad, "1"), None, "{bad}");
        }
    }

    #[test]
    fn formats() {
        for ok in ["2024-02-29", "2000-02-29", "1999-12-31"] {
            assert!(is_date(ok), "{ok}");
        }
        for bad in ["1900-02-29", "2023-02-29", "2024-13-01", "2024-04-31", "2024-4-01", "2024-04-01x"] {
            assert!(!is_date(bad), "{bad}");
        }
        for ok in ["2024-02-29T23:59:60Z", "2024-02-29t00:00:00.123-05:30", "2024-01-01T00:00:00+00:00"] {
            assert!(is_date_time(ok), "{ok}");
        }
        for bad in [
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:60:00Z",
            "2024-01-01T00:00:00+0100",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
        assert!(is_email("a.b+c@example.com") && !is_email("@x") && !is_email("a@") && !is_email("a@b@c"));
        assert!(is_uri("urn:isbn:1") && is_uri("mailto:a@b") && !is_uri("no-scheme") && !is_uri("a b:c"));
    }

    #[test]
    fn url_sampling_and_roots_answers() {
        let url = InputRequest::elicit_url("go", "https://example.com").unwrap();
        for a in ["accept", "decline", "cancel"] {
            url.validate_answer(&json!({"action": a})).unwrap();
        }
        assert!(answer_err(&url, json!({"action": "accept", "content": {}})).contains("no `content`"));
        assert!(answer_err(&url, json!({"action": "maybe"})).contains("action"));

        let sample = InputRequest::sample(json!({"messages": [], "maxTokens": 100})).unwrap();
        let ok = json!({"role": "assistant", "content": {"type": "text", "text": "This is a test response from the client"},
            "model": "test-model", "stopReason": "endTurn"});
        sample.validate_answer(&ok).unwrap();
        sample
            .validate_answer(
                &json!({"role": "assistant", "content": [{"type": "text", "text": "a"}], "model": "m"}),
            )
            .unwrap();
        for (bad, needle) in [
            (json!({"content": {"type": "text"}, "model": "m"}), "role"),
            (json!({"role": "system", "content": {"type": "text"}, "model": "m"}), "role"),
            (json!({"role": "assistant", "content": "hi", "model": "m"}), "content"),
            (json!({"role": "assistant", "content": [{"text": "a"}], "model": "m"}), "content"),
            (json!({"role": "assistant", "content": {"type": "text"}}), "model"),
            (json!({"role": "assistant", "content": {"type": "text"}, "model": 1}), "model"),
            (
                json!({"role": "assistant", "content": {"type": "text"}, "model": "m", "stopReason": 1}),
                "stopReason",
            ),
        ] {
            assert!(answer_err(&sample, bad.clone()).contains(needle), "{bad}");
        }

        let roots = InputRequest::list_roots();
        roots
            .validate_answer(&json!({"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}))
            .unwrap();
        roots.validate_answer(&json!({"roots": []})).unwrap();
        for bad in [
            json!({}),
            json!({"roots": {}}),
            json!({"roots": [{"uri": "https://x"}]}),
            json!({"roots": [{"name": "x"}]}),
            json!({"roots": [{"uri": "file:///x", "name": 3}]}),
            json!({"roots": ["file:///x"]}),
        ] {
            assert!(answer_err(&roots, bad.clone()).contains("roots"), "{bad}");
        }
    }

    // --- request state --------------------------------------------------------------------

    const NOW: u64 = 1_760_000_000_000;

    fn ring() -> KeyRing {
        KeyRing::new([7; 32])
    }

    fn binding(args: &Value) -> StateBinding<'static> {
        StateBinding { caller: "alice", method: "tools/call", arguments_digest: arguments_digest(Some(args)) }
    }

    fn state() -> RequestState {
        let answers = parse(
            r#"{"user_name": {"action": "accept", "content": {"n": 123456789012345678901234567890, "x": 1.50}}}"#,
        );
        RequestState { round: 2, answers: answers.as_object().unwrap().clone(), data: Some("step-2".into()) }
    }

    #[test]
    fn state_round_trip() {
        let args = json!({"name": "t", "arguments": {}});
        let b = binding(&args);
        let token = seal_state(&ring(), &b, &state(), NOW + DEFAULT_STATE_TTL_MS).unwrap();
        assert!(token.len() <= MAX_STATE_BYTES);
        let back = open_state(&ring(), &token, &b, NOW).unwrap();
        assert_eq!(back, state());
        // Exact number text survives the trip.
        assert_eq!(
            serde_json::to_string(&back.answers).unwrap(),
            r#"{"user_name":{"action":"accept","content":{"n":123456789012345678901234567890,"x":1.50}}}"#
        );
        let empty = RequestState::default();
        let t = seal_state(&ring(), &b, &empty, NOW + 1).unwrap();
        assert_eq!(open_state(&ring(), &t, &b, NOW).unwrap(), empty);
        // Rotation: a ring that only verifies the old key still opens it.
        let rotated = KeyRing::new([9; 32]).with_verify_key([7; 32]);
        assert_eq!(open_state(&rotated, &token, &b, NOW).unwrap(), state());
    }

    #[test]
    fn state_refusals() {
        let args = json!({"q": 1});
        let b = binding(&args);
        let token = seal_state(&ring(), &b, &state(), NOW + 1000).unwrap();
        // Tampering: one character flipped anywhere after the version prefix.
        for i in 3..token.len() {
            let mut t: Vec<char> = token.chars().collect();
            if t[i] == '.' {
                continue;
            }
            t[i] = if t[i] == 'A' { 'B' } else { 'A' };
            let t: String = t.into_iter().collect();
            let e = open_state(&ring(), &t, &b, NOW).unwrap_err();
            assert!(matches!(e, StateError::Tampered | StateError::Malformed), "at {i}: {e:?}");
        }
        let suffixed = format!("{token}-TAMPERED");
        assert!(open_state(&ring(), &suffixed, &b, NOW).is_err());
        assert_eq!(open_state(&KeyRing::new([8; 32]), &token, &b, NOW), Err(StateError::Tampered));
        for junk in ["", "state-ok", "v1.", "v1.!!.??", "v2.a.b"] {
            assert_eq!(open_state(&ring(), junk, &b, NOW), Err(StateError::Malformed), "{junk}");
        }
        // Expiry: valid strictly before `expires_at_ms`.
        assert!(open_state(&ring(), &token, &b, NOW + 999).is_ok());
        assert_eq!(open_state(&ring(), &token, &b, NOW + 1000), Err(StateError::Expired));
        // Binding.
        let other = |caller, method, a: &Value| StateBinding {
            caller,
            method,
            arguments_digest: arguments_digest(Some(a)),
        };
        assert_eq!(
            open_state(&ring(), &token, &other("bob", "tools/call", &args), NOW),
            Err(StateError::WrongCaller)
        );
        assert_eq!(
            open_state(&ring(), &token, &other("alice", "prompts/get", &args), NOW),
            Err(StateError::WrongMethod)
        );
        assert_eq!(
            open_state(&ring(), &token, &other("alice", "tools/call", &json!({"q": 2})), NOW),
            Err(StateError::WrongArguments)
        );
        // A binding failure wins over expiry, so only the rightful caller learns of it.
        assert_eq!(
            open_state(&ring(), &token, &other("bob", "tools/call", &args), NOW + 5000),
            Err(StateError::WrongCaller)
        );
    }

    #[test]
    fn state_errors_are_generic_on_the_wire() {
        let all = [
            StateError::Malformed,
            StateError::Tampered,
            StateError::WrongCaller,
            StateError::WrongMethod,
            StateError::WrongArguments,
            StateError::TooLarge,
        ];
        for e in all {
            assert_eq!(e.rpc_error(), RpcError::new(ErrorCode::InvalidParams, "invalid requestState"), "{e}");
        }
        let expired = StateError::Expired.rpc_error();
        assert_eq!(expired.code.code(), -32602);
        assert!(expired.message.contains("expired"));
        assert!(expired.data.is_none());
    }

    #[test]
    fn digest_ignores_key_order_whitespace_and_escapes() {
        let a = parse(
            r#"{"b": [1, {"y": true, "x": null}], "a": "h\u00e9\"", "c": 123456789012345678901234567890}"#,
        );
        let b =
            parse(r#"{ "c":123456789012345678901234567890 ,"a":"hé\u0022","b":[1,{"x":null,"y":true}] }"#);
        assert_eq!(arguments_digest(Some(&a)), arguments_digest(Some(&b)));
        let d = |t: &str| arguments_digest(Some(&parse(t)));
        assert_ne!(d(r#"{"a": 1}"#), d(r#"{"a": "1"}"#));
        assert_ne!(d(r#"{"a": 1}"#), d(r#"{"a": 1.0}"#));
        assert_ne!(d(r#"[1, 2]"#), d(r#"[2, 1]"#));
        assert_ne!(d(r#"{"a": {"b": 1}}"#), d(r#"{"a": {"b": 2}}"#));
        assert_ne!(d(r#"{"ab": 1}"#), d(r#"{"a": "b1"}"#));
        assert_ne!(d("{}"), arguments_digest(None));
        assert_ne!(d("null"), arguments_digest(None));
        assert_eq!(arguments_digest(None), arguments_digest(None));
    }

    #[test]
    fn cursors_and_states_refuse_each_other() {
        let r = ring();
        let b =
            StateBinding { caller: "alice", method: "tools/list", arguments_digest: arguments_digest(None) };
        let cursor_token = cursor::make(&r, "tools/list", "alice", "t");
        assert_eq!(open_state(&r, &cursor_token, &b, NOW), Err(StateError::Malformed));
        let state_token = seal_state(&r, &b, &RequestState::default(), NOW + 1000).unwrap();
        for method in ["tools/list", "tools/call"] {
            assert_eq!(cursor::read(&r, &state_token, method, "alice", 128), None);
        }
        assert_eq!(cursor::read(&r, &cursor_token, "tools/list", "alice", 128).as_deref(), Some("t"));
        assert!(open_state(&r, &state_token, &b, NOW).is_ok());
    }

    #[test]
    fn state_size_is_bounded() {
        let b = binding(&json!({}));
        let big = RequestState { data: Some("x".repeat(MAX_STATE_BYTES)), ..RequestState::default() };
        assert_eq!(
            seal_state(&ring(), &b, &big, NOW + 1),
            Err(InteractionError::StateTooLarge { max: MAX_STATE_BYTES })
        );
        // Just under the pre-check but over after encoding.
        let edge =
            RequestState { data: Some("x".repeat(MAX_STATE_BYTES / 4 * 3 - 100)), ..RequestState::default() };
        assert!(matches!(
            seal_state(&ring(), &b, &edge, NOW + 1),
            Err(InteractionError::StateTooLarge { .. })
        ));
        let fits = RequestState { data: Some("x".repeat(40 * 1024)), ..RequestState::default() };
        let token = seal_state(&ring(), &b, &fits, NOW + 1).unwrap();
        assert_eq!(open_state(&ring(), &token, &b, NOW).unwrap(), fits);
        let long = "v".repeat(MAX_STATE_BYTES + 1);
        assert_eq!(open_state(&ring(), &long, &b, NOW), Err(StateError::TooLarge));
    }
}
