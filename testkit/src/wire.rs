//! Wire-schema validation: every frame the engine emits is checked against the official JSON
//! Schema of the protocol version in force (copied into `tests/fixtures/schemas/`).
//!
//! Each schema file is compiled once ([`jsonschema::validator_map_for`], behind a `OnceLock`);
//! a `$defs` (or draft-07 `definitions`) entry is then looked up by JSON pointer.
//!
//! What is checked, per frame:
//!
//! - the envelope: `JSONRPCResponse` / `JSONRPCError` (2025-03-26, 2025-06-18) or
//!   `JSONRPCResultResponse` / `JSONRPCErrorResponse` (2025-11-25 and later), or
//!   `JSONRPCNotification`; a batch reply against `JSONRPCBatchResponse` (2025-03-26 only: an
//!   array on any other version is itself a failure);
//! - a result against the def its method maps to (`InitializeResult`, `EmptyResult` (for
//!   `ping`, `logging/setLevel`, `resources/subscribe` and `resources/unsubscribe`),
//!   `ListToolsResult`, `CallToolResult`, `DiscoverResult`, `ListResourcesResult`,
//!   `ListResourceTemplatesResult`, `ReadResourceResult`, `ListPromptsResult`,
//!   `GetPromptResult`, `CompleteResult`);
//! - a server→client request (legacy sessions only) against `JSONRPCRequest` and the def its
//!   method maps to (`ElicitRequest`, `CreateMessageRequest`, `ListRootsRequest`,
//!   `PingRequest`); a method the version does not define (elicitation before 2025-06-18) is a
//!   failure;
//! - a notification against `JSONRPCNotification` and the def its method maps to
//!   (`ResourceUpdatedNotification`, `ToolListChangedNotification`,
//!   `ResourceListChangedNotification`, `PromptListChangedNotification`,
//!   `LoggingMessageNotification`, `ProgressNotification`, `CancelledNotification`, and on
//!   2026-07-28 `SubscriptionsAcknowledgedNotification`); a method the version does not define
//!   is a failure;
//! - on 2026-07-28, an error against its named def (`ParseError`, `InvalidRequestError`,
//!   `MethodNotFoundError`, `InvalidParamsError`, `InternalError`,
//!   `UnsupportedProtocolVersionError`, `MissingRequiredClientCapabilityError`,
//!   `HeaderMismatchError`).
//!
//! One documented exception: an error reply whose `id` is `null`. JSON-RPC 2.0 requires exactly
//! that when the request's id could not be read (parse errors, unreadable ids), but no MCP schema
//! admits `null` as a `RequestId`; 2025-11-25 made `id` optional in `JSONRPCErrorResponse`
//! instead. Such a frame is validated with its `id` member removed against the
//! `JSONRPCErrorResponse` of its version, or of 2025-11-25 for the two older versions, whose
//! schema has no form for it at all.

use std::sync::OnceLock;

use jsonschema::ValidatorMap;
use mcp_proto::ProtocolVersion;
use serde_json::Value;

const SCHEMA_2025_03_26: &str = include_str!("../fixtures/schemas/2025-03-26.json");
const SCHEMA_2025_06_18: &str = include_str!("../fixtures/schemas/2025-06-18.json");
const SCHEMA_2025_11_25: &str = include_str!("../fixtures/schemas/2025-11-25.json");
const SCHEMA_2026_07_28: &str = include_str!("../fixtures/schemas/2026-07-28.json");

struct Compiled {
    map: ValidatorMap,
    /// `#/definitions/` or `#/$defs/`.
    prefix: &'static str,
}

fn compiled(v: ProtocolVersion) -> Result<&'static Compiled, String> {
    static CELLS: [OnceLock<Result<Compiled, String>>; 4] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let (i, text, prefix) = match v {
        ProtocolVersion::V2025_03_26 => (0, SCHEMA_2025_03_26, "#/definitions/"),
        ProtocolVersion::V2025_06_18 => (1, SCHEMA_2025_06_18, "#/definitions/"),
        ProtocolVersion::V2025_11_25 => (2, SCHEMA_2025_11_25, "#/$defs/"),
        _ => (3, SCHEMA_2026_07_28, "#/$defs/"),
    };
    let cell = CELLS.get(i).ok_or("no schema slot")?;
    cell.get_or_init(|| {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("schema {v}: {e}"))?;
        let map = jsonschema::validator_map_for(&doc).map_err(|e| format!("schema {v}: {e}"))?;
        Ok(Compiled { map, prefix })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Whether `def` exists in the schema of `v`.
pub fn has_def(v: ProtocolVersion, def: &str) -> bool {
    compiled(v).is_ok_and(|c| c.map.contains_key(&format!("{}{def}", c.prefix)))
}

/// Validates `instance` against the definition `def` of version `v`'s schema.
pub fn validate_def(v: ProtocolVersion, def: &str, instance: &Value) -> Result<(), String> {
    let c = compiled(v)?;
    let pointer = format!("{}{def}", c.prefix);
    let validator = c.map.get(&pointer).ok_or_else(|| format!("schema {v} has no {def}"))?;
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("at {at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("not a valid {v} {def}: {}", errors.join("; ")))
    }
}

/// The result def a method's successful response must match, where the schema has one.
pub fn result_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "initialize" => "InitializeResult",
        "ping" => "EmptyResult",
        "tools/list" => "ListToolsResult",
        "tools/call" => "CallToolResult",
        "server/discover" => "DiscoverResult",
        "prompts/list" => "ListPromptsResult",
        "prompts/get" => "GetPromptResult",
        "resources/list" => "ListResourcesResult",
        "resources/templates/list" => "ListResourceTemplatesResult",
        "resources/read" => "ReadResourceResult",
        "completion/complete" => "CompleteResult",
        "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => "EmptyResult",
        _ => return None,
    })
}

/// The def a server notification's method maps to.
pub fn notification_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "notifications/resources/updated" => "ResourceUpdatedNotification",
        "notifications/tools/list_changed" => "ToolListChangedNotification",
        "notifications/resources/list_changed" => "ResourceListChangedNotification",
        "notifications/prompts/list_changed" => "PromptListChangedNotification",
        "notifications/message" => "LoggingMessageNotification",
        "notifications/progress" => "ProgressNotification",
        "notifications/cancelled" => "CancelledNotification",
        "notifications/subscriptions/acknowledged" => "SubscriptionsAcknowledgedNotification",
        _ => return None,
    })
}

/// Validates a notification the server sent under version `v`: the envelope, then the def of
/// its method, which the version must define.
pub fn validate_notification(v: ProtocolVersion, frame: &Value) -> Result<(), String> {
    validate_def(v, "JSONRPCNotification", frame)?;
    let method = frame.get("method").and_then(Value::as_str).unwrap_or_default();
    if method == "notifications/tasks" && v.is_modern() {
        return validate_task_notification(frame);
    }
    match notification_def(method) {
        Some(def) if has_def(v, def) => validate_def(v, def, frame),
        _ => Err(format!("{method:?} is not a server notification of {v}")),
    }
}

/// A `notifications/tasks` of the Tasks extension (SEP-2663), which the core schema does not
/// define: `params` with a string `taskId`, a `status` of the five the extension names, and the
/// string times of a task.
pub fn validate_task_notification(frame: &Value) -> Result<(), String> {
    let Some(p) = frame.get("params").and_then(Value::as_object) else {
        return Err("notifications/tasks needs params".into());
    };
    if !p.get("taskId").is_some_and(Value::is_string) {
        return Err("notifications/tasks needs a string taskId".into());
    }
    let statuses = ["working", "input_required", "completed", "failed", "cancelled"];
    if !p.get("status").and_then(Value::as_str).is_some_and(|s| statuses.contains(&s)) {
        return Err(format!("notifications/tasks has no valid status: {frame}"));
    }
    for field in ["createdAt", "lastUpdatedAt"] {
        if p.get(field).is_some_and(|t| !t.is_string()) {
            return Err(format!("notifications/tasks {field} must be a string"));
        }
    }
    Ok(())
}

/// The def a server→client request's method maps to.
pub fn request_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "elicitation/create" => "ElicitRequest",
        "sampling/createMessage" => "CreateMessageRequest",
        "roots/list" => "ListRootsRequest",
        "ping" => "PingRequest",
        _ => return None,
    })
}

/// Validates a request the server sent the client under version `v`: the envelope, then the
/// def of its method, which the version must define.
pub fn validate_request(v: ProtocolVersion, frame: &Value) -> Result<(), String> {
    validate_def(v, "JSONRPCRequest", frame)?;
    let method = frame.get("method").and_then(Value::as_str).unwrap_or_default();
    match request_def(method) {
        Some(def) if has_def(v, def) => validate_def(v, def, frame),
        _ => Err(format!("{method:?} is not a server request of {v}")),
    }
}

/// 2026-07-28 names its errors: (code, def, whether the def is a whole response or only the
/// error object).
fn named_error(code: i64) -> Option<(&'static str, bool)> {
    Some(match code {
        -32700 => ("ParseError", false),
        -32600 => ("InvalidRequestError", false),
        -32601 => ("MethodNotFoundError", false),
        -32602 => ("InvalidParamsError", false),
        -32603 => ("InternalError", false),
        -32020 => ("HeaderMismatchError", true),
        -32021 => ("MissingRequiredClientCapabilityError", true),
        -32022 => ("UnsupportedProtocolVersionError", true),
        _ => return None,
    })
}

/// Validates one response object (not a batch) sent for a request of `method` (when known)
/// under version `v`.
pub fn validate_response(v: ProtocolVersion, method: Option<&str>, frame: &Value) -> Result<(), String> {
    let Some(obj) = frame.as_object() else { return Err("a response must be a JSON object".into()) };
    let legacy_names = v < ProtocolVersion::V2025_11_25;
    if let Some(error) = obj.get("error") {
        if obj.get("id").is_some_and(Value::is_null) {
            // See the module docs: validated without the null id.
            let mut without = obj.clone();
            without.remove("id");
            let against = if legacy_names { ProtocolVersion::V2025_11_25 } else { v };
            validate_def(against, "JSONRPCErrorResponse", &Value::Object(without.clone()))?;
            return validate_named_error(v, error, &Value::Object(without));
        }
        validate_def(v, if legacy_names { "JSONRPCError" } else { "JSONRPCErrorResponse" }, frame)?;
        return validate_named_error(v, error, frame);
    }
    if obj.contains_key("result") {
        validate_def(v, if legacy_names { "JSONRPCResponse" } else { "JSONRPCResultResponse" }, frame)?;
        let result = obj.get("result");
        if v.is_modern() && result.and_then(|r| r.get("resultType")).and_then(Value::as_str) == Some("task") {
            // The Tasks extension's CreateTaskResult: the core schema has no def for it.
            return validate_create_task(method, result.unwrap_or(&Value::Null));
        }
        if let (Some(def), Some(result)) = (method.and_then(result_def), result) {
            if has_def(v, def) {
                validate_def(v, def, result)?;
            }
        }
        return Ok(());
    }
    if obj.contains_key("method") {
        let def = if obj.contains_key("id") { "JSONRPCRequest" } else { "JSONRPCNotification" };
        return validate_def(v, def, frame);
    }
    Err("neither a result, an error nor a message".into())
}

/// A `CreateTaskResult` (SEP-2663, `io.modelcontextprotocol/tasks`), which only `tools/call`
/// returns: `taskId`, `status`, `createdAt` and `lastUpdatedAt` strings, `ttlMs` a positive
/// integer or null, `pollIntervalMs` a positive integer when present, and none of the v1 names
/// (`ttl`, `pollInterval`, a nested `task`) nor the fields of other shapes (`requestState`,
/// `inputRequests`, `result`, `error`, `content`).
pub fn validate_create_task(method: Option<&str>, result: &Value) -> Result<(), String> {
    if method.is_some_and(|m| m != "tools/call") {
        return Err(format!("a task result answers {method:?}; only tools/call may create a task"));
    }
    let Some(r) = result.as_object() else { return Err("a task result must be an object".into()) };
    for field in ["taskId", "status", "createdAt", "lastUpdatedAt"] {
        if !r.get(field).is_some_and(Value::is_string) {
            return Err(format!("a task result needs a string {field}"));
        }
    }
    let positive = |v: &Value| v.as_u64().is_some_and(|n| n > 0);
    match r.get("ttlMs") {
        Some(Value::Null) => {}
        Some(v) if positive(v) => {}
        _ => return Err("a task result needs ttlMs: a positive integer or null".into()),
    }
    if r.get("pollIntervalMs").is_some_and(|v| !positive(v)) {
        return Err("a task result's pollIntervalMs must be a positive integer".into());
    }
    for field in
        ["ttl", "pollInterval", "task", "requestState", "inputRequests", "result", "error", "content"]
    {
        if r.contains_key(field) {
            return Err(format!("a task result carries {field}"));
        }
    }
    Ok(())
}

fn validate_named_error(v: ProtocolVersion, error: &Value, frame: &Value) -> Result<(), String> {
    if !v.is_modern() {
        return Ok(());
    }
    let Some(code) = error.get("code").and_then(Value::as_i64) else { return Ok(()) };
    match named_error(code) {
        Some((def, true)) => validate_def(v, def, frame),
        Some((def, false)) => validate_def(v, def, error),
        None => Ok(()),
    }
}

/// Validates a batch reply (2025-03-26 only) as a whole; its members are checked one by one with
/// [`validate_response`].
pub fn validate_batch(v: ProtocolVersion, frame: &Value) -> Result<(), String> {
    if !v.allows_batches() {
        return Err(format!("a batch reply on a {v} session (batches exist only in 2025-03-26)"));
    }
    // Members with a null id are checked one by one (see the module docs); the rest must make
    // a valid `JSONRPCBatchResponse`.
    let Some(items) = frame.as_array() else { return Err("a batch reply must be an array".into()) };
    let readable: Vec<Value> =
        items.iter().filter(|m| !m.get("id").is_some_and(Value::is_null)).cloned().collect();
    if readable.is_empty() {
        return Ok(());
    }
    validate_def(v, "JSONRPCBatchResponse", &Value::Array(readable))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_schema_compiles_and_has_the_defs_we_use() {
        for v in ProtocolVersion::ALL {
            for def in ["JSONRPCNotification", "InitializeResult", "ListToolsResult", "CallToolResult"] {
                if v.is_modern() && def == "InitializeResult" {
                    continue;
                }
                assert!(has_def(v, def), "{v} {def}");
            }
        }
        assert!(has_def(ProtocolVersion::V2026_07_28, "DiscoverResult"));
        assert!(has_def(ProtocolVersion::V2025_03_26, "JSONRPCBatchResponse"));
    }

    #[test]
    fn catches_bad_frames() {
        let v = ProtocolVersion::V2025_06_18;
        assert!(validate_response(v, Some("ping"), &json!({"jsonrpc":"2.0","id":1,"result":{}})).is_ok());
        assert!(validate_response(v, Some("ping"), &json!({"jsonrpc":"2.0","id":1.5,"result":{}})).is_err());
        assert!(
            validate_response(v, Some("tools/call"), &json!({"jsonrpc":"2.0","id":1,"result":{}})).is_err()
        );
        let m = ProtocolVersion::V2026_07_28;
        // 2026 results must carry resultType.
        assert!(validate_response(m, None, &json!({"jsonrpc":"2.0","id":1,"result":{}})).is_err());
        let bad_version = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}});
        assert!(validate_response(m, None, &bad_version).is_err());
        let null_id = json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}});
        assert!(validate_response(v, None, &null_id).is_ok());
        assert!(validate_batch(ProtocolVersion::V2025_11_25, &json!([])).is_err());
    }

    #[test]
    fn server_requests_by_method() {
        let elicit = json!({"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{
            "message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}});
        assert!(validate_request(ProtocolVersion::V2025_06_18, &elicit).is_ok());
        // Elicitation does not exist before 2025-06-18.
        assert!(validate_request(ProtocolVersion::V2025_03_26, &elicit).is_err());
        let no_schema =
            json!({"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"x"}});
        assert!(validate_request(ProtocolVersion::V2025_11_25, &no_schema).is_err());
        let roots = json!({"jsonrpc":"2.0","id":2,"method":"roots/list","params":{}});
        assert!(validate_request(ProtocolVersion::V2025_03_26, &roots).is_ok());
        let sample =
            json!({"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"messages":[]}});
        assert!(validate_request(ProtocolVersion::V2025_11_25, &sample).is_err(), "maxTokens is required");
    }

    #[test]
    fn notifications_by_method() {
        let legacy = ProtocolVersion::V2025_06_18;
        let m = ProtocolVersion::V2026_07_28;
        let updated =
            json!({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x://a"}});
        assert!(validate_notification(legacy, &updated).is_ok());
        let no_uri = json!({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{}});
        assert!(validate_notification(legacy, &no_uri).is_err());
        let ack = json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1},"notifications":{"toolsListChanged":true}}});
        assert!(validate_notification(m, &ack).is_ok());
        // Listen streams exist only in 2026-07-28.
        assert!(validate_notification(ProtocolVersion::V2025_11_25, &ack).is_err());
        let bad_ack = json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":1}}});
        assert!(validate_notification(m, &bad_ack).is_err());
        let log =
            json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"loud","data":1}});
        assert!(validate_notification(legacy, &log).is_err());
        let unknown = json!({"jsonrpc":"2.0","method":"notifications/whatever"});
        assert!(validate_notification(legacy, &unknown).is_err());
        for def in [
            "ListResourcesResult",
            "ListResourceTemplatesResult",
            "ReadResourceResult",
            "ListPromptsResult",
            "GetPromptResult",
            "CompleteResult",
            "EmptyResult",
        ] {
            for v in ProtocolVersion::ALL {
                assert!(has_def(v, def), "{v} {def}");
            }
        }
    }
}
