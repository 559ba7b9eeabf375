//! Checks of the client's answers to an input request, before a handler sees them.

use std::fmt;

use serde_json::{Map, Value};

use super::forms::{check_value, field};
use crate::json::clip;
use crate::jsonrpc::RpcError;

/// The client's answer does not match what was asked: a protocol error (`-32602`) by the rules
/// of SEP-2322, never silently handed to the handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidAnswer {
    message: String,
}

impl InvalidAnswer {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }

    /// What is wrong, in words safe to send back (peer-chosen keys are clipped).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `-32602` carrying the message.
    pub fn rpc_error(&self) -> RpcError {
        RpcError::invalid_params(format!("invalid input response: {}", self.message))
    }
}

impl fmt::Display for InvalidAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for InvalidAnswer {}

/// The `action` of an elicitation answer.
pub(super) fn elicit_action(obj: &Map<String, Value>) -> Result<&str, InvalidAnswer> {
    match obj.get("action").and_then(Value::as_str) {
        Some(a @ ("accept" | "decline" | "cancel")) => Ok(a),
        _ => Err(InvalidAnswer::new(
            "an elicitation answer needs `action`: \"accept\", \"decline\" or \"cancel\"",
        )),
    }
}

pub(super) fn validate_elicit_answer(
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

pub(super) fn validate_sample_answer(obj: &Map<String, Value>) -> Result<(), InvalidAnswer> {
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

pub(super) fn validate_roots_answer(obj: &Map<String, Value>) -> Result<(), InvalidAnswer> {
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
