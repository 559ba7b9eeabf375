//! Encoding results and errors: tool results (checked against the output schema, bounded by
//! the response limit) and the errors that frames and handler failures become.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::content::{Content, HandlerError, ToolFailure, ToolOutput};
use crate::cursor;
use crate::engine::{Call, CallKind, Ctx, Engine, META_SERVER_INFO};
use crate::json::DecodeError;
use crate::jsonrpc::{encode_result, Encoded, RequestId, RpcError};
use crate::version::ProtocolVersion;
use serde_json::{Map, Value};

/// How tool outcomes go on the wire: the server's choice ([`Config::envelopes`]), applied to
/// every tool alike. Compact publication's `call_tool` encodes with [`Self::Envelopes`] whatever
/// the server's setting.
///
/// [`Config::envelopes`]: crate::engine::Config::envelopes
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolEncoding {
    /// The MCP norm: structured output as given, a failure as `isError` and its message.
    Plain,
    /// Structured success as `{"value": ...}`, a failure as `{"failure": {...}}`, each followed
    /// in `content` by its JSON text.
    Envelopes,
}

/// What a tool call came to, before encoding.
#[derive(Debug)]
pub(crate) enum ToolOutcome {
    /// The handler's result (which may itself set `isError`: passed on as it is).
    Output(ToolOutput),
    /// A typed failure: the handler's, or one the engine found (invalid arguments, a result
    /// over the response limit).
    Failure(ToolFailure),
}

/// The failure code of arguments that break the tool's input schema (2025-11-25 and later,
/// where they are a tool result).
pub(crate) const INVALID_ARGUMENTS: &str = "invalid_arguments";
/// The failure code of a result over [`Limits::max_response_bytes`](crate::limits::Limits::max_response_bytes).
pub(crate) const RESULT_TOO_LARGE: &str = "result_too_large";

impl<H: Clone> Engine<H> {
    /// The encoding of this server's direct tools.
    pub(in crate::engine) fn tool_encoding(&self) -> ToolEncoding {
        if self.config.envelopes {
            ToolEncoding::Envelopes
        } else {
            ToolEncoding::Plain
        }
    }

    pub(in crate::engine) fn tool_result(&self, call: &Call, outcome: ToolOutcome) -> Encoded {
        let (name, encoding) = match &call.kind {
            CallKind::Tool(name, encoding) => (Some(name.as_str()), *encoding),
            _ => (None, self.tool_encoding()),
        };
        self.encode_tool_outcome(&call.id, call.version, name, outcome, encoding)
    }

    /// Answers request `id` with the outcome of tool `name`: checked against the tool's
    /// contracts (its output schema for a success, its diagnostics schema for a failure),
    /// encoded as `encoding` says, and bounded by the response limit (a larger result becomes a
    /// `result_too_large` failure, in the same encoding).
    pub(crate) fn encode_tool_outcome(
        &self,
        id: &RequestId,
        v: ProtocolVersion,
        name: Option<&str>,
        outcome: ToolOutcome,
        encoding: ToolEncoding,
    ) -> Encoded {
        let entry = name.and_then(|n| self.registry.tools.get(n));
        let kept = match &outcome {
            ToolOutcome::Output(out) if !out.is_error => entry
                .and_then(|e| e.output.as_ref())
                .is_none_or(|validator| out.structured.as_ref().is_some_and(|s| validator.is_valid(s))),
            ToolOutcome::Output(_) => true,
            ToolOutcome::Failure(f) => match (entry.and_then(|e| e.diagnostics.as_ref()), &f.diagnostics) {
                (Some(validator), Some(d)) => validator.is_valid(d),
                _ => true,
            },
        };
        if !kept {
            // The application broke its own contract; the peer learns only that the server
            // failed.
            return RpcError::misuse().encode(Some(id));
        }
        let outcome = self.app_outcome(name, outcome);
        let bytes = self.encode_tool_result(id, v, &encoded_output(outcome, encoding));
        let max = self.config.limits.max_response_bytes;
        if bytes.len() <= max {
            return bytes.into();
        }
        let msg = format!(
            "{RESULT_TOO_LARGE}: the tool's result of {} bytes exceeds the {max}-byte response limit",
            bytes.len()
        );
        let failure = ToolOutcome::Failure(ToolFailure::new(RESULT_TOO_LARGE, msg));
        self.encode_tool_result(id, v, &encoded_output(failure, encoding)).into()
    }

    pub(in crate::engine) fn encode_tool_result(
        &self,
        id: &RequestId,
        v: ProtocolVersion,
        out: &ToolOutput,
    ) -> Vec<u8> {
        let modern = v.is_modern().then_some(&self.server_info_modern);
        encode_result(id, &ToolResultWire { out, v, server_info: modern })
    }

    /// Adds `ttlMs` and `cacheScope` on a modern cacheable result.
    pub(in crate::engine) fn cacheable(
        &self,
        r: &mut Map<String, Value>,
        v: ProtocolVersion,
        hint: crate::items::CacheHint,
    ) {
        if v.is_modern() {
            // Saturating: any `Duration` is a valid setting, and u64 milliseconds outlast it anyway.
            let ttl_ms = u64::try_from(hint.ttl().as_millis()).unwrap_or(u64::MAX);
            r.insert("ttlMs".into(), ttl_ms.into());
            r.insert("cacheScope".into(), if hint.is_shared() { "public" } else { "private" }.into());
        }
    }

    /// Adds `resultType` and the serverInfo `_meta` every modern result carries.
    pub(in crate::engine) fn finish(&self, r: &mut Map<String, Value>, v: ProtocolVersion) {
        if v.is_modern() {
            r.insert("resultType".into(), "complete".into());
            let meta = r.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = meta {
                m.insert(META_SERVER_INFO.into(), self.server_info_modern.clone());
            }
        }
    }

    /// Where a list page starts: `None` for the first page, else the key its cursor names
    /// (at most `max_key` bytes), after which the page begins.
    pub(in crate::engine) fn page_bounds(
        &self,
        ctx: Ctx<'_>,
        method: &str,
        params: Option<&Map<String, Value>>,
        max_key: usize,
    ) -> Result<Option<String>, RpcError> {
        match params.and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(c)) => {
                cursor::read(&self.config.keys, c, method, self.caller(ctx.conn).binding(), max_key)
                    .map(Some)
                    .ok_or_else(|| RpcError::invalid_params("invalid cursor"))
            }
            Some(_) => Err(RpcError::invalid_params("invalid cursor")),
        }
    }
}

/// The `CallToolResult` an outcome becomes in `encoding`. Envelopes are built as values and
/// printed once for their text copy: numbers keep their digits (exactly as sent with
/// `exact-json`, else as the `f64` the decoder made sure carries them), and the copy is byte for
/// byte the `structuredContent` sent.
pub(crate) fn encoded_output(outcome: ToolOutcome, encoding: ToolEncoding) -> ToolOutput {
    match (outcome, encoding) {
        (ToolOutcome::Output(mut out), ToolEncoding::Plain) => {
            if let Some(s) = &out.structured {
                if out.content.is_empty() {
                    out.content.push(Content::text(s.to_string()));
                }
            }
            out
        }
        (ToolOutcome::Output(mut out), ToolEncoding::Envelopes) => {
            // A handler's own `isError` result and a result without structured output are
            // passed on as they are: absent stays absent.
            if out.is_error {
                return out;
            }
            if let Some(value) = out.structured.take() {
                let mut envelope = Map::new();
                envelope.insert("value".into(), value);
                let envelope = Value::Object(envelope);
                out.content.push(Content::text(envelope.to_string()));
                out.structured = Some(envelope);
            }
            out
        }
        (ToolOutcome::Failure(f), ToolEncoding::Plain) => {
            let mut content = f.content;
            content.push(Content::text(f.message));
            ToolOutput { content, structured: None, is_error: true, meta: None }
        }
        (ToolOutcome::Failure(f), ToolEncoding::Envelopes) => {
            let mut failure = Map::new();
            failure.insert("code".into(), Value::String(f.code));
            failure.insert("message".into(), Value::String(f.message));
            failure.insert("retryable".into(), Value::Bool(f.retryable));
            if let Some(d) = f.diagnostics {
                failure.insert("diagnostics".into(), d);
            }
            let mut envelope = Map::new();
            envelope.insert("failure".into(), Value::Object(failure));
            let envelope = Value::Object(envelope);
            let mut content = f.content;
            content.push(Content::text(envelope.to_string()));
            ToolOutput { content, structured: Some(envelope), is_error: true, meta: None }
        }
    }
}

/// The error answering a frame that did not parse.
pub(in crate::engine) fn decode_error(e: DecodeError) -> RpcError {
    match e {
        DecodeError::Syntax(msg) => RpcError::unparsable(format!("parse error: {msg}")),
        // A depth the parser will not descend to leaves the document as unreadable to us as a
        // syntax error does: malformed, not a bound the client could have been told of.
        DecodeError::TooDeep => RpcError::malformed("JSON nested deeper than 128 levels"),
    }
}

/// What a handler failure becomes on the wire: public errors as they are, anything else as the
/// generic internal error.
pub(in crate::engine) fn public_error(e: HandlerError) -> RpcError {
    match e {
        HandlerError::Public(e) => e,
        HandlerError::Private(_) | HandlerError::Panicked | HandlerError::Cancelled => RpcError::internal(),
        // A resource, prompt or completion has no result that could carry it: a JSON-RPC error
        // with the failure's public parts.
        HandlerError::Failure(f) => RpcError::new(crate::jsonrpc::ErrorCode::InternalError, f.message)
            .with_data(serde_json::json!({ "code": f.code, "retryable": f.retryable })),
    }
}

struct ToolResultWire<'a> {
    out: &'a ToolOutput,
    v: ProtocolVersion,
    server_info: Option<&'a Value>,
}

impl Serialize for ToolResultWire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("content", &ContentList(&self.out.content, self.v))?;
        if let Some(st) = &self.out.structured {
            if self.v.structured_content_any_type() || (self.v.has_structured_output() && st.is_object()) {
                m.serialize_entry("structuredContent", st)?;
            }
        }
        if self.out.is_error {
            m.serialize_entry("isError", &true)?;
        }
        match (self.server_info, &self.out.meta) {
            (Some(info), meta) => {
                m.serialize_entry("_meta", &MetaWithInfo(meta.as_ref(), info))?;
                m.serialize_entry("resultType", "complete")?;
            }
            (None, Some(meta)) => m.serialize_entry("_meta", meta)?,
            (None, None) => {}
        }
        m.end()
    }
}

struct ContentList<'a>(&'a [Content], ProtocolVersion);

impl Serialize for ContentList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|c| c.for_version(self.1)))
    }
}

struct MetaWithInfo<'a>(Option<&'a Map<String, Value>>, &'a Value);

impl Serialize for MetaWithInfo<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.0.into_iter().flatten() {
            if k != META_SERVER_INFO {
                m.serialize_entry(k, v)?;
            }
        }
        m.serialize_entry(META_SERVER_INFO, self.1)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(out: &ToolOutput) -> Vec<&str> {
        out.content
            .iter()
            .map(|c| match c {
                Content::Text { text, .. } => text.as_str(),
                _ => "(not text)",
            })
            .collect()
    }

    #[test]
    fn plain_encoding_is_todays() {
        let out =
            encoded_output(ToolOutcome::Output(ToolOutput::structured(json!({"a": 1}))), ToolEncoding::Plain);
        assert_eq!(out.structured, Some(json!({"a": 1})));
        assert_eq!(text(&out), [r#"{"a":1}"#], "the engine's text copy, as before envelopes");
        let failure = ToolFailure::new("busy", "later").retryable(true).with_diagnostics(json!({"x": 1}));
        let out = encoded_output(ToolOutcome::Failure(failure), ToolEncoding::Plain);
        assert_eq!(
            out,
            ToolOutput::error("later"),
            "code, retryable and diagnostics travel only in envelopes"
        );
    }

    // Pins key order or exact numbers: `exact-json` (the workspace tests turn it on).
    #[cfg(feature = "exact-json")]
    #[test]
    fn envelopes_wrap_values_and_keep_what_is_absent_absent() {
        let exact = serde_json::from_str::<Value>(r#"{"n":1.000000000000000000001}"#).unwrap();
        let mut given = ToolOutput::structured(exact);
        given.content.push(Content::text("before"));
        let out = encoded_output(ToolOutcome::Output(given), ToolEncoding::Envelopes);
        assert_eq!(text(&out), ["before", r#"{"value":{"n":1.000000000000000000001}}"#]);
        assert_eq!(
            out.structured.map(|s| s.to_string()).as_deref(),
            Some(r#"{"value":{"n":1.000000000000000000001}}"#)
        );

        let out =
            encoded_output(ToolOutcome::Output(ToolOutput::structured(Value::Null)), ToolEncoding::Envelopes);
        assert_eq!(out.structured, Some(json!({"value": null})), "an explicit null stays");

        let out = encoded_output(ToolOutcome::Output(ToolOutput::text("t")), ToolEncoding::Envelopes);
        assert_eq!(out.structured, None, "absent stays absent");
        assert_eq!(text(&out), ["t"]);

        let out = encoded_output(ToolOutcome::Output(ToolOutput::error("own")), ToolEncoding::Envelopes);
        assert_eq!(out, ToolOutput::error("own"), "a handler's own isError result passes");
    }

    #[test]
    fn envelopes_carry_failures_without_their_cause() {
        let failure = ToolFailure::new("not_found", "gone")
            .with_content(vec![Content::text("partial")])
            .with_cause("secret detail");
        let out = encoded_output(ToolOutcome::Failure(failure), ToolEncoding::Envelopes);
        let envelope = json!({"failure": {"code": "not_found", "message": "gone", "retryable": false}});
        assert!(out.is_error);
        assert_eq!(out.structured, Some(envelope.clone()));
        assert_eq!(text(&out), ["partial", envelope.to_string().as_str()]);
        assert!(!format!("{out:?}").contains("secret"));

        let failure = ToolFailure::new("quota", "over").with_diagnostics(json!({"limit": 5}));
        let out = encoded_output(ToolOutcome::Failure(failure), ToolEncoding::Envelopes);
        assert_eq!(out.structured.unwrap()["failure"]["diagnostics"], json!({"limit": 5}));
    }

    #[test]
    fn a_failure_of_another_handler_is_a_json_rpc_error_with_its_public_parts() {
        let e = public_error(ToolFailure::new("gone", "no such page").with_cause("secret").into());
        let text = String::from_utf8(e.encode(RequestId::from_json("1").as_ref()).bytes).unwrap();
        assert_eq!(
            text,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"no such page","data":{"code":"gone","retryable":false}}}"#
        );
    }
}
